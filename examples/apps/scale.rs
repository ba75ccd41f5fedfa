//! Scale figures for the guide (`docs/guide/performance.md`): the drain workload (jobs already due, no-op handler, one worker) on one
//! Redis with the topic in one and in three partitions, on a 3-master cluster with the topic in one
//! partition, and on the same cluster with the topic in three partitions on three different masters.
//!
//! It measures, it does not test. Run it in release mode, on a quiet machine (it starts its own
//! redis-server and a 3-master cluster on free ports):
//!
//! ```text
//! cargo run --release -p postpone-examples --example scale
//! ```
//!
//! It prints, per setup, the median of three runs: jobs/s, the worker's CPU per job (this process,
//! from /proc/self/stat) and the Redis CPU per job (INFO cpu, summed over nodes, and per node).

#[path = "../../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use postpone::store::redis::RedisStore;
use postpone::{Client, EnqueueItem, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use support::redis_cluster::RedisCluster;
use support::redis_server::RedisServer;
use tokio::sync::Notify;

const JOBS: u64 = 200_000;
const CONCURRENCY: usize = 64;
const RUNS: usize = 5;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "drain")]
struct Drain {
    n: u64,
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "drain3", partitions = 3)]
struct Drain3 {
    n: u64,
}

/// Seconds of CPU this process has used (user + system).
fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    // utime and stime are fields 14 and 15 of the file, 12 and 13 after the command name.
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// Seconds of CPU a Redis has used, from INFO cpu.
fn redis_cpu_s(info: redis::Value) -> f64 {
    let text: String = redis::FromRedisValue::from_redis_value(info).unwrap();
    ["used_cpu_sys:", "used_cpu_user:"]
        .iter()
        .map(|f| {
            text.lines()
                .find_map(|l| l.strip_prefix(f))
                .unwrap()
                .trim()
                .parse::<f64>()
                .unwrap()
        })
        .sum()
}

#[derive(Debug, Clone, Copy)]
struct Run {
    jobs_per_s: f64,
    worker_us: f64,
    redis_us: f64,
}

/// Drains `JOBS` jobs of `J` through `client`; `redis_cpu` reads each node's CPU seconds.
async fn drain<J: Job<Output = ()>>(
    client: &Client,
    make: fn(u64) -> J,
    redis_cpu: &(dyn Fn() -> Vec<f64> + Sync),
) -> (Run, Vec<f64>) {
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(1000) {
        client
            .enqueue_many(
                chunk
                    .iter()
                    .map(|n| EnqueueItem::new(make(*n)).id(format!("d{n}"))),
            )
            .await
            .unwrap();
    }
    let topic = client.topic::<J>();
    let processed_before = topic.counts().await.unwrap().processed;
    let handled = Arc::new(AtomicU64::new(0));
    let done = Arc::new(Notify::new());
    let handler = {
        let (handled, done) = (handled.clone(), done.clone());
        move |_job: J, _ctx: JobContext| {
            if handled.fetch_add(1, Ordering::Relaxed) + 1 == JOBS {
                done.notify_one();
            }
            std::future::ready(Ok::<(), JobError>(()))
        }
    };
    let worker = Worker::builder(client)
        .handle(handler)
        .concurrency(CONCURRENCY)
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let (redis_before, cpu_before) = (redis_cpu(), process_cpu_s());
    let start = Instant::now();
    let running = tokio::spawn(worker.run());
    tokio::time::timeout(Duration::from_secs(300), done.notified())
        .await
        .expect("drained within 5 minutes");
    let secs = start.elapsed().as_secs_f64();
    while topic.counts().await.unwrap().processed - processed_before < JOBS {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (redis_after, cpu_after) = (redis_cpu(), process_cpu_s());
    shutdown.shutdown();
    running.await.unwrap().unwrap();
    let per_node: Vec<f64> = redis_after
        .iter()
        .zip(&redis_before)
        .map(|(a, b)| (a - b) * 1e6 / JOBS as f64)
        .collect();
    let run = Run {
        jobs_per_s: JOBS as f64 / secs,
        worker_us: (cpu_after - cpu_before) * 1e6 / JOBS as f64,
        redis_us: per_node.iter().sum(),
    };
    (run, per_node)
}

fn median(runs: &[(Run, Vec<f64>)]) -> (Run, Vec<f64>) {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.0.jobs_per_s.total_cmp(&b.0.jobs_per_s));
    sorted[sorted.len() / 2].clone()
}

fn report(name: &str, runs: &[(Run, Vec<f64>)]) {
    let (m, per_node) = median(runs);
    let all: Vec<String> = runs
        .iter()
        .map(|(r, _)| format!("{:.0}", r.jobs_per_s))
        .collect();
    let nodes: Vec<String> = per_node.iter().map(|us| format!("{us:.1}")).collect();
    println!(
        "| {name} | {:.0} ({}) | {:.1} | {:.1} ({}) |",
        m.jobs_per_s,
        all.join(", "),
        m.worker_us,
        m.redis_us,
        nodes.join(" + ")
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = RedisServer::start();
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    // A namespace whose three partitions sit on three different masters.
    let spread = (0..1000)
        .map(|k| format!("scale{k}"))
        .find(|ns| {
            let mut nodes: Vec<usize> = (0..3)
                .map(|p| cluster.node_of(&format!("postpone:{{{ns}:drain3#{p}}}:due")))
                .collect();
            nodes.sort();
            nodes == [0, 1, 2]
        })
        .expect("a namespace spreading the partitions");
    let single_cpu = || vec![redis_cpu_s(server.cli(&["INFO", "cpu"]).unwrap())];
    let cluster_cpu = || {
        (0..cluster.len())
            .map(|i| redis_cpu_s(cluster.cli(i, &["INFO", "cpu"]).unwrap()))
            .collect::<Vec<_>>()
    };
    let (mut one, mut one3, mut c1, mut c3) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in 0..RUNS {
        let ns = format!("{spread}r{run}");
        let client =
            Client::builder().store(RedisStore::connect(&server.url(), &ns).await.unwrap());
        one.push(drain(&client, |n| Drain { n }, &single_cpu).await);
        one3.push(drain(&client, |n| Drain3 { n }, &single_cpu).await);
        let client = Client::builder().store(
            RedisStore::connect_cluster(&cluster.urls(), &ns)
                .await
                .unwrap(),
        );
        c1.push(drain(&client, |n| Drain { n }, &cluster_cpu).await);
        // The partitions' slots depend on the namespace: use the one found above for the 3-way run.
        let client = Client::builder().store(
            RedisStore::connect_cluster(&cluster.urls(), &spread)
                .await
                .unwrap(),
        );
        c3.push(drain(&client, |n| Drain3 { n }, &cluster_cpu).await);
    }
    println!(
        "\n{JOBS} jobs already due, no-op handler, one worker (concurrency {CONCURRENCY}), median of {RUNS} runs"
    );
    println!("| setup | jobs/s (runs) | worker CPU us/job | Redis CPU us/job (per node) |");
    println!("|---|---|---|---|");
    report("1 Redis, 1 partition", &one);
    report("1 Redis, 3 partitions", &one3);
    report("3-master cluster, 1 partition", &c1);
    report("3-master cluster, 3 partitions on 3 masters", &c3);
}
