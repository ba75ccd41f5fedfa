//! The dashboard mounted at `/jobs` in an axum app, with demo jobs and a worker.
//!
//! ```text
//! cargo run -p postpone-dashboard --example serve                      # in memory
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p postpone-dashboard --example serve
//! ADDR=127.0.0.1:8080 READ_ONLY=1 cargo run -p postpone-dashboard --example serve
//! ```
//!
//! Then open http://127.0.0.1:3000/jobs (it answers only to 127.0.0.1, localhost and [::1]). Demo topics: `orders.close` (timers over the next hours),
//! `webhooks.deliver` (a partner that fails now and then, so jobs retry and some die), `mail.send`
//! (quick jobs, enqueued continuously so the charts move). One job's payload and id hold
//! `<script>alert(1)</script>`: it shows as text.

use std::time::Duration;

use axum::response::Redirect;
use axum::routing::get;
use axum::Router;
use postpone::{Client, Job, JobContext, JobError, Worker};
use postpone_dashboard::Dashboard;
use serde::{Deserialize, Serialize};

/// Close an order left unpaid.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

/// Deliver a webhook to a flaky partner; a short demo schedule so that some die within a minute.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "webhooks.deliver", retry = ["0", "0", "2s", "5s", "10s"])]
struct Deliver {
    url: String,
    event: String,
}

/// Send a mail: always works.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "mail.send")]
struct SendMail {
    to: String,
}

async fn close_order(_job: CloseOrder, _ctx: JobContext) -> Result<(), JobError> {
    Ok(())
}

async fn deliver(job: Deliver, ctx: JobContext) -> Result<(), JobError> {
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Deterministic flakiness: by id and attempt.
    let h = ctx.id().bytes().fold(ctx.attempt(), |a, b| {
        a.wrapping_mul(31).wrapping_add(u32::from(b))
    });
    match h % 5 {
        0 => Err(JobError::msg(format!("timeout after {}s", 28 + h % 5))),
        1 => Err(JobError::msg(format!("HTTP 503 from '{}'", job.url))),
        2 if job.event.contains("refund") => Err(JobError::msg(format!(
            "partner rejected event {:08x}: \"invalid signature\"",
            h
        ))),
        _ => Ok(()),
    }
}

async fn send_mail(_job: SendMail, _ctx: JobContext) -> Result<(), JobError> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(())
}

async fn demo_jobs(client: &Client) -> postpone::Result<()> {
    for i in 0..300u64 {
        client
            .enqueue(CloseOrder { order_id: i })
            .id(format!("order:{i}"))
            .after(Duration::from_secs(60 + i * 37))
            .await?;
    }
    for i in 0..40u64 {
        let event = if i % 3 == 0 {
            "refund.created"
        } else {
            "order.paid"
        };
        client
            .enqueue(Deliver {
                url: format!("https://partner-{}.example/hooks", i % 4),
                event: event.into(),
            })
            .id(format!("hook/{i}?partner={}#{event}", i % 4))
            .await?;
    }
    // Everything is escaped: this shows as text, in the payload and in the id.
    client
        .enqueue(Deliver {
            url: "<script>alert(1)</script>".into(),
            event: "<img src=x onerror=alert(2)>".into(),
        })
        .id("xss/<script>alert(1)</script> ü")
        .after(Duration::from_secs(3600))
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_target(false).init();
    let client = Client::from_env().await?;
    demo_jobs(&client).await?;
    let worker = Worker::builder(&client)
        .handle(close_order)
        .handle(deliver)
        .handle(send_mail)
        .build()?;
    tokio::spawn(worker.run());
    // Traffic, so that the charts move: a mail every few hundred ms, a webhook every second or so.
    let traffic = client.clone();
    tokio::spawn(async move {
        for n in 0u64.. {
            let _ = traffic
                .enqueue(SendMail {
                    to: format!("user{n}@example.com"),
                })
                .await;
            if n % 4 == 0 {
                let event = if n % 3 == 0 {
                    "refund.created"
                } else {
                    "order.paid"
                };
                let _ = traffic
                    .enqueue(Deliver {
                        url: format!("https://partner-{}.example/hooks", n % 4),
                        event: event.into(),
                    })
                    .id(format!("hook/live-{n}"))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(200 + n % 7 * 100)).await;
        }
    });

    let read_only = std::env::var("READ_ONLY").is_ok_and(|v| v == "1");
    // No auth and no token here: by default it answers only to loopback names (127.0.0.1, localhost,
    // [::1]), which a DNS-rebinding page cannot send. Served under another name (ADDR=0.0.0.0:3000
    // behind your own auth), list the names: `.allowed_hosts(["jobs.example.com"])`.
    let dashboard = Dashboard::new(client).read_only(read_only);
    // An application would add its own auth layer here.
    let app = Router::new()
        .route("/", get(|| async { Redirect::to("/jobs") }))
        // axum serves a router nested at /jobs at /jobs, not /jobs/: send the latter to the former.
        .route("/jobs/", get(|| async { Redirect::permanent("/jobs") }))
        .nest("/jobs", dashboard.router());
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("dashboard: http://{}/jobs", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
