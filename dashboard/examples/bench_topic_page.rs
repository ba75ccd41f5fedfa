//! How long the dashboard takes to render a topic of 1,000,000 scheduled jobs (release build, a real
//! Redis): the pages never load all of a topic, so this should not depend on its size.
//!
//! ```text
//! redis-server --port 6400 --save '' --appendonly no &
//! REDIS_URL=redis://127.0.0.1:6400 cargo run --release -p postpone-dashboard --example bench_topic_page
//! ```
//!
//! It fills the topic `bench.timers` of the namespace NAMESPACE (default `dashboard-bench`) up to JOBS
//! (default 1,000,000; what is already there counts), and the topic `bench.failing` up to DEAD dead
//! letters (default 20,000: a worker here fails them, with reasons of a few fingerprints; it keeps the
//! newest 10,000), then times
//! each page over real HTTP on 127.0.0.1: the overview, the topic's first page, a page deep in it by its
//! cursor, a search by id prefix, one job, and the dead letters grouped by error (which reads the newest
//! 10,000). It prints the median and the 95th percentile of ROUNDS (default 50) requests each.

use std::time::{Duration, Instant};

use postpone::{Client, EnqueueItem, Job, JobContext, JobError, Worker};
use postpone_dashboard::Dashboard;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.timers")]
struct CloseOrder {
    order_id: u64,
}

/// A job that always fails, with one of a few kinds of reason.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.failing", retry = ["0", "0"])]
struct Failing {
    n: u64,
}

async fn fail(job: Failing, _ctx: JobContext) -> Result<(), JobError> {
    Err(JobError::msg(match job.n % 3 {
        0 => format!("timeout after {}s", 30 + job.n % 5),
        1 => format!("HTTP 503 from 'https://partner-{}.example/'", job.n % 7),
        _ => format!("order {:012x} not found", job.n * 7919),
    }))
}

const BATCH: u64 = 5_000;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// GET over HTTP/1.1: the status and the body's length.
async fn get(addr: &str, path: &str) -> (u16, usize) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response.len())
}

/// The "next page" link of a topic page, entities decoded.
fn next_link(html: &str) -> Option<String> {
    let start = html.find("id=\"next\" href=\"")? + 16;
    let end = start + html[start..].find('"')?;
    Some(html[start..end].replace("&#38;", "&").replace("&amp;", "&"))
}

async fn body(addr: &str, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

async fn time(addr: &str, name: &str, path: &str, rounds: u64) {
    let mut took = Vec::new();
    let mut size = 0;
    for _ in 0..rounds {
        let started = Instant::now();
        let (status, len) = get(addr, path).await;
        took.push(started.elapsed());
        assert_eq!(status, 200, "{name}: {path}");
        size = len;
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<28} median {:>7.2} ms   p95 {:>7.2} ms   ({size} bytes)",
        ms(took[took.len() / 2]),
        ms(took[(took.len() * 95 / 100).min(took.len() - 1)])
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").map_err(|_| "set REDIS_URL to a Redis of your own")?;
    let jobs = env_number("JOBS", 1_000_000);
    let rounds = env_number("ROUNDS", 50);
    let namespace = std::env::var("NAMESPACE").unwrap_or_else(|_| "dashboard-bench".into());
    let client = Client::builder().namespace(namespace).redis(&url).await?;

    let have = client.topic::<CloseOrder>().counts().await?.scheduled;
    if have < jobs {
        println!("enqueueing {} jobs (have {have})", jobs - have);
        let started = Instant::now();
        let mut next = have;
        while next < jobs {
            let end = (next + BATCH).min(jobs);
            let items = (next..end).map(|i| {
                EnqueueItem::new(CloseOrder { order_id: i })
                    .id(format!("order:{i}"))
                    .after(Duration::from_secs(3600 + i % 86_400))
            });
            client.enqueue_many(items).await?;
            next = end;
        }
        println!("  took {:.1} s", started.elapsed().as_secs_f64());
    }
    let counts = client.topic::<CloseOrder>().counts().await?;
    println!("topic bench.timers: {} scheduled", counts.scheduled);

    let dead = env_number("DEAD", 20_000);
    let failing = client.topic::<Failing>();
    let have = failing.counts().await?;
    let have = have.dead_total + have.scheduled + have.ready + have.active;
    if have < dead {
        println!("making {} dead letters (have {have})", dead - have);
        let started = Instant::now();
        let items = (have..dead).map(|n| EnqueueItem::new(Failing { n }).id(format!("f:{n}")));
        client.enqueue_many(items).await?;
        let worker = Worker::builder(&client)
            .handle(fail)
            .concurrency(64)
            .build()?;
        let shutdown = worker.shutdown_handle();
        let running = tokio::spawn(worker.run());
        // Until every one has died (the worker keeps the newest dead letters only: 10,000 by default).
        while {
            let c = failing.counts().await?;
            c.scheduled + c.ready + c.active > 0
        } {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        shutdown.shutdown();
        running.await??;
        println!("  took {:.1} s", started.elapsed().as_secs_f64());
    }
    println!("topic bench.failing: {} dead", failing.counts().await?.dead);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let app = axum::Router::new().nest("/jobs", Dashboard::new(client.clone()).router());
    tokio::spawn(async move { axum::serve(listener, app).await });

    // A cursor deep in the topic: follow "next" a few times.
    let mut deep = "/jobs/topic?name=bench.timers".to_owned();
    for _ in 0..20 {
        let html = body(&addr, &deep).await;
        deep = format!("/jobs/{}", next_link(&html).ok_or("no next link")?);
    }
    let one = format!("/jobs/job?topic=bench.timers&id=order%3A{}", jobs / 2);

    time(&addr, "overview", "/jobs", rounds).await;
    time(
        &addr,
        "topic, first page",
        "/jobs/topic?name=bench.timers",
        rounds,
    )
    .await;
    time(&addr, "topic, page 21 by cursor", &deep, rounds).await;
    time(
        &addr,
        "topic, dead tab",
        "/jobs/topic?name=bench.timers&state=dead",
        rounds,
    )
    .await;
    time(
        &addr,
        "topic, search id prefix",
        "/jobs/topic?name=bench.timers&q=order%3A99999",
        rounds,
    )
    .await;
    time(&addr, "job", &one, rounds).await;
    time(
        &addr,
        "dead letters by error",
        "/jobs/dead?topic=bench.failing",
        rounds,
    )
    .await;
    time(
        &addr,
        "failing, dead tab",
        "/jobs/topic?name=bench.failing&state=dead",
        rounds,
    )
    .await;
    Ok(())
}
