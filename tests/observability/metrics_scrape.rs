//! A Prometheus scrape after a known workload on a real Redis: exact counter values, a start-lag
//! histogram with one observation per handler start, and sampled queue depths.
//!
//! A crate of its own (`tests/observability`): the exporter is not a dependency of the `postpone`
//! package, whose examples build all its dev-dependencies.

#[path = "../support/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;
#[path = "../support/tempdir.rs"]
#[allow(dead_code, unreachable_pub)]
mod tempdir;
#[path = "../support/wait.rs"]
mod wait;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use postpone::{sink_fn, Client, DeadLetter, EnqueueStatus, Job, JobContext, JobError, Worker};
use redis_server::RedisServer;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use wait::eventually;

const TOPIC: &str = "obs.orders";

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "obs.orders", retry = ["0", "0", "1ms"])]
enum Order {
    /// Succeeds.
    Ok,
    /// Fails every attempt: retried once, then dead after its schedule's 2 attempts.
    Flaky,
    /// Fails for good on its first attempt.
    Refused,
    /// Waits until it is cancelled, then fails (the store ends it as cancelled).
    Long,
}

async fn handle(
    order: Order,
    ctx: JobContext,
    started: mpsc::UnboundedSender<String>,
) -> Result<(), JobError> {
    let _ = started.send(ctx.id().to_owned());
    match order {
        Order::Ok => Ok(()),
        Order::Flaky => Err(JobError::msg("try again")),
        Order::Refused => Err(JobError::fail("refused")),
        Order::Long => {
            ctx.stopped().await;
            Err(JobError::msg("stopped"))
        }
    }
}

/// The value of one sample line of `scrape`: `name{labels} value`, labels as rendered.
fn sample(scrape: &str, name_and_labels: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let rest = line.strip_prefix(name_and_labels)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

fn finished(scrape: &str, outcome: &str) -> f64 {
    let key = format!("postpone_jobs_finished_total{{topic=\"{TOPIC}\",outcome=\"{outcome}\"}}");
    sample(scrape, &key).unwrap_or(0.0)
}

fn recorder() -> PrometheusHandle {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".into()),
            &[0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10.0],
        )
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder of this test binary");
    handle
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_after_a_known_workload_shows_exact_counts() {
    // Installed before the worker starts: a worker registers its handles when it starts.
    let scrape = recorder();
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();

    // The sink fails its first call, then takes every dead letter.
    let sink_failed_once = Arc::new(AtomicBool::new(false));
    let failed_once = sink_failed_once.clone();
    let sink = sink_fn(move |_dead: DeadLetter| {
        let first = !failed_once.swap(true, Ordering::SeqCst);
        async move {
            if first {
                Err("the archive is down".into())
            } else {
                Ok(())
            }
        }
    });
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let worker = Worker::with_state(&client, started_tx)
        .handle(handle)
        .concurrency(8)
        .lease(Duration::from_secs(1))
        .dead_letter_sink(sink)
        .queue_depth_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());

    // 10 that succeed, 2 retried then dead, 1 failed at once, 1 cancelled while it runs, 1 scheduled in
    // an hour (still there at the end), and 1 enqueued again under a scheduled id.
    let mut jobs: Vec<Order> = (0..10).map(|_| Order::Ok).collect();
    jobs.extend([Order::Flaky, Order::Flaky, Order::Refused]);
    client.enqueue_many(jobs).await.unwrap();
    let later = client
        .enqueue(Order::Ok)
        .id("later")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(later.status, EnqueueStatus::Created);
    let again = client.enqueue(Order::Ok).id("later").await.unwrap();
    assert_eq!(again.status, EnqueueStatus::AlreadyScheduled);
    client.enqueue(Order::Long).id("long").await.unwrap();
    while started.recv().await.unwrap() != "long" {}
    client.cancel::<Order>("long").await.unwrap();

    let topic = client.topic::<Order>();
    eventually(
        "every job to finish and every dead letter to be delivered",
        || async {
            let c = topic.counts().await.unwrap();
            (c.processed == 10 && c.dead_total == 3 && c.cancelled == 1 && c.dead_pending == 0)
                .then_some(())
        },
    )
    .await;
    eventually("the depth sampler to see the end state", || async {
        let text = scrape.render();
        let depth = |state: &str| {
            sample(
                &text,
                &format!("postpone_queue_depth{{topic=\"{TOPIC}\",state=\"{state}\"}}"),
            )
        };
        (depth("scheduled") == Some(1.0)
            && depth("ready") == Some(0.0)
            && depth("active") == Some(0.0)
            && depth("dead") == Some(3.0)
            && depth("dead_pending") == Some(0.0))
        .then_some(())
    })
    .await;
    shutdown.shutdown();
    running.await.unwrap().unwrap();

    let text = scrape.render();
    let enqueued = |status: &str| {
        let key = format!("postpone_jobs_enqueued_total{{topic=\"{TOPIC}\",status=\"{status}\"}}");
        sample(&text, &key)
    };
    assert_eq!(enqueued("created"), Some(15.0), "{text}");
    assert_eq!(enqueued("already_scheduled"), Some(1.0), "{text}");
    assert_eq!(finished(&text, "done"), 10.0, "{text}");
    assert_eq!(finished(&text, "retried"), 2.0, "{text}");
    assert_eq!(finished(&text, "dead"), 2.0, "{text}");
    assert_eq!(finished(&text, "failed"), 1.0, "{text}");
    assert_eq!(finished(&text, "cancelled"), 1.0, "{text}");

    // One start lag per handler start: 10 + 2 x 2 + 1 + 1.
    let lag = |suffix: &str| {
        sample(
            &text,
            &format!("postpone_job_start_lag_seconds_{suffix}{{topic=\"{TOPIC}\"}}"),
        )
    };
    assert_eq!(lag("count"), Some(16.0), "{text}");
    let inf = format!("postpone_job_start_lag_seconds_bucket{{topic=\"{TOPIC}\",le=\"+Inf\"}}");
    assert_eq!(sample(&text, &inf), Some(16.0), "{text}");
    assert!(lag("sum").is_some_and(|s| s >= 0.0), "{text}");
    let runs = format!("postpone_job_duration_seconds_count{{topic=\"{TOPIC}\"}}");
    assert_eq!(sample(&text, &runs), Some(16.0), "{text}");

    let deliveries = |result: &str| {
        let key = format!(
            "postpone_dead_letter_deliveries_total{{topic=\"{TOPIC}\",result=\"{result}\"}}"
        );
        sample(&text, &key)
    };
    assert_eq!(deliveries("delivered"), Some(3.0), "{text}");
    assert_eq!(deliveries("failed"), Some(1.0), "{text}");
    assert!(sink_failed_once.load(Ordering::SeqCst));

    // The long job ran across heartbeats (every 333 ms) until its cancel was seen.
    let renewals = format!("postpone_lease_renewals_total{{topic=\"{TOPIC}\"}}");
    assert!(sample(&text, &renewals).is_some_and(|n| n >= 1.0), "{text}");
    let lost = format!("postpone_leases_lost_total{{topic=\"{TOPIC}\"}}");
    assert_eq!(sample(&text, &lost), Some(0.0), "{text}");
    let swept = format!("postpone_stalls_swept_total{{topic=\"{TOPIC}\",result=\"returned\"}}");
    assert_eq!(sample(&text, &swept), Some(0.0), "{text}");
    // Every run's outcome was acknowledged: 16 outcomes in some number of batches.
    let acked = format!("postpone_ack_batch_size_sum{{topic=\"{TOPIC}\"}}");
    assert_eq!(sample(&text, &acked), Some(16.0), "{text}");
    let claimed = format!("postpone_claim_batch_size_sum{{topic=\"{TOPIC}\"}}");
    assert_eq!(sample(&text, &claimed), Some(16.0), "{text}");
    // Each metric is described (the `# HELP` lines).
    assert!(
        text.contains("# HELP postpone_job_start_lag_seconds Handler start minus due time"),
        "{text}"
    );
    // Labels are topics and outcomes, never job ids.
    assert!(
        !text.contains("\"long\"") && !text.contains("\"later\""),
        "{text}"
    );
}
