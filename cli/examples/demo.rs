//! A namespace to try the `postpone` command on: orders due later, mails that died for two reasons,
//! and a worker holding a slow job, until Ctrl-C. `DEMO_DEAD=5000` adds that many more dead mails (to
//! see the progress bar of `postpone dead requeue --all`).
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p postpone-cli --example demo    # namespace "demo"
//! postpone --namespace demo stats                                               # in another shell
//! ```

use std::time::Duration;

use postpone::{Client, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};

/// Close an order that was not paid in time.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "shop.close_order")]
struct CloseOrder {
    order_id: u64,
}

/// A mail that cannot be sent.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "shop.mail", retry = ["0", "0", "100ms"])]
struct Mail {
    to: String,
}

/// A report that takes its time.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "shop.report")]
struct Report {
    month: String,
}

#[tokio::main]
async fn main() -> postpone::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = Client::builder().namespace("demo").redis(&url).await?;
    for n in 1..=40u64 {
        client
            .enqueue(CloseOrder { order_id: 1000 + n })
            .id(format!("order:{}", 1000 + n))
            .after(Duration::from_secs(60 * n))
            .await?;
    }
    for (n, to) in ["ann@example.com", "bob@example.invalid", "cy@example.com"]
        .iter()
        .enumerate()
    {
        client
            .enqueue(Mail { to: (*to).into() })
            .id(format!("mail:{n}"))
            .await?;
    }
    let extra: usize = std::env::var("DEMO_DEAD")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let bulk: Vec<_> = (0..extra)
        .map(|n| {
            postpone::EnqueueItem::new(Mail {
                to: format!("user{n}@example.invalid"),
            })
            .id(format!("bulk:{n}"))
        })
        .collect();
    client.enqueue_many(bulk).await?;
    client
        .enqueue(Report {
            month: "2026-10".into(),
        })
        .id("report:2026-10")
        .await?;
    let worker = Worker::builder(&client)
        .handle(|mail: Mail, _: JobContext| async move {
            if mail.to.ends_with(".invalid") {
                Err(JobError::fail(format!("bad address {}", mail.to)))
            } else {
                Err(JobError::retry(format!(
                    "smtp timeout sending to {}",
                    mail.to
                )))
            }
        })
        .handle(|_: Report, _: JobContext| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), JobError>(())
        })
        .build()?;
    println!("namespace demo seeded on {url}; a worker runs until Ctrl-C");
    worker.run_until(tokio::signal::ctrl_c()).await
}
