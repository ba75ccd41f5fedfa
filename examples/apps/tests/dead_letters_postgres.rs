//! The PostgreSQL dead-letter sink of `examples/apps/dead_letters_postgres/`, on a redis-server and a schema
//! of its own: a dead job lands in the table with its payload, attempts and error history, once even
//! when the worker hands it over twice, and is re-enqueued from there.

#[path = "../dead_letters_postgres/pg_sink.rs"]
#[allow(dead_code)]
mod pg_sink;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pg_sink::PgDeadLetterSink;
use postpone::{
    BoxError, Client, DeadLetter, DeadLetterSink, EnqueueStatus, Job, JobContext, JobError, Worker,
};
use serde::{Deserialize, Serialize};
use support::postgres::TestSchema;
use support::redis_server::RedisServer;
use support::wait::eventually;
use tokio::sync::mpsc;

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "payments.capture", retry = ["0", "0", "10ms", "20ms"])]
struct Capture {
    payment_id: u64,
    amount_cents: i64,
}

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "payments.refund")]
struct Refund {
    payment_id: u64,
}

/// Hands every dead job to the table twice, as a worker may (delivery to the sink is at least once).
#[derive(Debug)]
struct Twice(PgDeadLetterSink);

#[postpone::async_trait]
impl DeadLetterSink for Twice {
    async fn deliver(&self, dead: &DeadLetter) -> Result<(), BoxError> {
        self.0.deliver(dead).await?;
        self.0.deliver(dead).await
    }
}

#[derive(Clone)]
struct Gateway {
    up: Arc<AtomicBool>,
    captured: mpsc::UnboundedSender<(u64, u32)>,
}

async fn capture(job: Capture, ctx: JobContext, gateway: Gateway) -> Result<(), JobError> {
    if !gateway.up.load(Ordering::SeqCst) {
        return Err(JobError::msg(format!(
            "gateway timeout on attempt {}",
            ctx.attempt()
        )));
    }
    let _ = gateway.captured.send((job.payment_id, ctx.attempt()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_jobs_are_stored_once_and_requeued_from_the_table() {
    let server = RedisServer::start();
    let schema = TestSchema::create("dead_letters").await;
    let sink = PgDeadLetterSink::create(Arc::new(schema.connect().await), "dead_letters")
        .await
        .unwrap();
    // Creating it again finds the table there.
    PgDeadLetterSink::create(Arc::new(schema.connect().await), "dead_letters")
        .await
        .unwrap();
    let jobs = Client::builder()
        .namespace("dead_letters")
        .redis(&server.url())
        .await
        .expect("connecting to the test redis-server");
    let (captured_tx, mut captured) = mpsc::unbounded_channel();
    let gateway = Gateway {
        up: Arc::new(AtomicBool::new(false)),
        captured: captured_tx,
    };
    let worker = Worker::with_state(&jobs, gateway.clone())
        .handle(capture)
        .dead_letter_sink(Twice(sink.clone()))
        .dead_letter_retention(Duration::ZERO, 0)
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());

    jobs.enqueue(Capture {
        payment_id: 7,
        amount_cents: 4200,
    })
    .id("capture:7")
    .await
    .unwrap();
    let dead = eventually("the dead job's row", || async {
        sink.waiting(Capture::TOPIC).await.unwrap().pop()
    })
    .await;
    assert_eq!(
        (dead.topic.as_str(), dead.job_id.as_str()),
        ("payments.capture", "capture:7")
    );
    assert_eq!(
        dead.payload,
        serde_json::json!({ "payment_id": 7, "amount_cents": 4200 })
    );
    assert_eq!(dead.attempts, 3);
    assert!(
        dead.reason.starts_with("exhausted 3 attempts"),
        "{}",
        dead.reason
    );
    let errors = dead.errors.as_array().expect("errors is a JSON array");
    assert_eq!(errors.len(), 3);
    for (n, error) in errors.iter().enumerate() {
        let attempt = n as u64 + 1;
        assert_eq!(error["attempt"], attempt);
        assert_eq!(
            error["message"],
            format!("gateway timeout on attempt {attempt}")
        );
        assert!(error["at"].is_string(), "{error}");
    }
    assert!(dead.enqueued_at <= dead.died_at);
    assert_eq!(dead.requeued_at, None);

    // Handed over twice, stored once.
    let rows: i64 = schema
        .db()
        .query_one("SELECT count(*) FROM dead_letters", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
    // Once the table has it, postpone drops its own copy.
    eventually("postpone to trim its copy", || async {
        (jobs.topic::<Capture>().counts().await.unwrap().dead == 0).then_some(())
    })
    .await;

    // Re-enqueueing checks the type, then puts the job back under its id, with fresh attempts.
    let wrong = sink.requeue::<Refund>(&jobs, dead.row).await.unwrap_err();
    assert!(wrong.to_string().contains("payments.capture"), "{wrong}");
    gateway.up.store(true, Ordering::SeqCst);
    let enqueued = sink.requeue::<Capture>(&jobs, dead.row).await.unwrap();
    assert_eq!(
        (enqueued.id.as_str(), enqueued.status),
        ("capture:7", EnqueueStatus::Created)
    );
    let (payment, attempt) = tokio::time::timeout(Duration::from_secs(30), captured.recv())
        .await
        .expect("the re-enqueued job runs")
        .unwrap();
    assert_eq!((payment, attempt), (7, 1));
    let row = sink.get(dead.row).await.unwrap().unwrap();
    assert!(row.requeued_at.is_some());
    assert!(sink.waiting(Capture::TOPIC).await.unwrap().is_empty());
    let again = sink.requeue::<Capture>(&jobs, dead.row).await.unwrap_err();
    assert!(again.to_string().contains("re-enqueued"), "{again}");
    let missing = sink.requeue::<Capture>(&jobs, i64::MAX).await.unwrap_err();
    assert!(missing.to_string().contains("no dead job"), "{missing}");

    shutdown.shutdown();
    running.await.unwrap().unwrap();
}
