//! Dead letters persisted to PostgreSQL, and re-enqueued from there.
//!
//! `pg_sink.rs` is a `DeadLetterSink` that writes each dead job (topic, id, payload as JSON, attempts,
//! error history, times) to a table it creates, idempotently. This demo syncs an invoice to an
//! accounting API that is down: the job fails its three attempts and the worker hands it to the sink.
//! It prints the row, "brings the API back", re-enqueues the job from the row, and waits for it to
//! succeed.
//!
//! ```text
//! cargo run -p postpone-examples --example dead_letters_postgres  # jobs in memory, dead letters in PostgreSQL
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p postpone-examples --example dead_letters_postgres
//! ```
//!
//! Needs PostgreSQL: `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`). The table,
//! `postpone_dead_letters` unless `--table` names another, stays afterwards for you to look at:
//! `psql postgres://postgres@127.0.0.1:5432/test -c 'TABLE postpone_dead_letters'`.
//!
//! The worker keeps no dead jobs of its own once the sink has taken them
//! (`dead_letter_retention(0, 0)`): the table is where they live.
//! `examples/apps/tests/dead_letters_postgres.rs` checks the sink on a redis-server and a schema of its
//! own.

#[path = "../support/flags.rs"]
mod flags;
#[path = "../support/postgres.rs"]
mod postgres;

mod pg_sink;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pg_sink::{PgDeadLetterSink, StoredDeadJob};
use postpone::{BoxError, Client, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// Send an invoice to the accounting system. Three attempts, 100 ms and 300 ms apart (short for the
/// demo), then the dead letters.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "invoices.sync", retry = ["0", "0", "100ms", "300ms"])]
struct SyncInvoice {
    invoice_id: u64,
    amount_cents: i64,
}

/// The accounting API, as far as the demo needs one: up or down.
#[derive(Clone)]
struct Accounting {
    up: Arc<AtomicBool>,
    synced: mpsc::UnboundedSender<(u64, u32)>,
}

async fn sync_invoice(job: SyncInvoice, ctx: JobContext, api: Accounting) -> Result<(), JobError> {
    if !api.up.load(Ordering::SeqCst) {
        println!(
            "  invoice {}: attempt {} of {} failed: accounting API answered 503",
            job.invoice_id,
            ctx.attempt(),
            ctx.attempts_allowed()
        );
        return Err(JobError::msg(
            "accounting API answered 503 Service Unavailable",
        ));
    }
    let _ = api.synced.send((job.invoice_id, ctx.attempt()));
    Ok(())
}

const USAGE: &str = "\
usage: dead_letters_postgres [--table NAME]

  --table NAME   the dead letters' table, NAME or SCHEMA.NAME (default postpone_dead_letters)

environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), REDIS_URL (default: jobs in
memory), POSTPONE_NAMESPACE";

#[tokio::main]
async fn main() -> ExitCode {
    let flags = flags::Flags::from_env(USAGE, &["table"]);
    let table = flags.get("table", "postpone_dead_letters".to_owned());
    match run(&table).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dead_letters_postgres: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(table: &str) -> Result<(), BoxError> {
    let db = Arc::new(postgres::connect(&postgres::database_url()).await?);
    let sink = PgDeadLetterSink::create(db, table).await?;
    let jobs = Client::from_env().await?;
    println!(
        "dead letters to PostgreSQL table {table}; jobs on {}",
        jobs.backend_name()
    );

    let (synced_tx, mut synced) = mpsc::unbounded_channel();
    let api = Accounting {
        up: Arc::new(AtomicBool::new(false)),
        synced: synced_tx,
    };
    let worker = Worker::with_state(&jobs, api.clone())
        .handle(sync_invoice)
        .dead_letter_sink(sink.clone())
        // Once the table has a dead job, postpone drops its own copy: the table is the record.
        .dead_letter_retention(Duration::ZERO, 0)
        .build()?;
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());

    let since_ms = chrono::Utc::now().timestamp_millis();
    let invoice_id = 1000 + since_ms as u64 % 9000;
    let id = format!("invoice:{invoice_id}");
    println!("\nthe accounting API is down; enqueue {id}");
    jobs.enqueue(SyncInvoice {
        invoice_id,
        amount_cents: 129_900,
    })
    .id(&id)
    .await?;

    // Wait for the worker to hand the dead job to the sink.
    let deadline = Instant::now() + Duration::from_secs(30);
    let dead = loop {
        let waiting = sink.waiting(SyncInvoice::TOPIC).await?;
        // This run's job: a row of an earlier run may have the same id.
        let ours =
            |d: &StoredDeadJob| d.job_id == id && d.enqueued_at.timestamp_millis() >= since_ms;
        if let Some(dead) = waiting.into_iter().find(ours) {
            break dead;
        }
        if Instant::now() > deadline {
            return Err("the dead job did not reach the table within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!("\nrow {} of {table}:", dead.row);
    println!("  topic        {}", dead.topic);
    println!("  job_id       {}", dead.job_id);
    println!("  payload      {}", dead.payload);
    println!("  attempts     {}", dead.attempts);
    println!("  reason       {}", dead.reason);
    println!("  enqueued_at  {}", dead.enqueued_at);
    println!("  died_at      {}", dead.died_at);
    println!("  errors");
    for e in dead.errors.as_array().into_iter().flatten() {
        println!("    {e}");
    }

    println!(
        "\nthe accounting API is back; re-enqueue row {} from the table",
        dead.row
    );
    api.up.store(true, Ordering::SeqCst);
    let enqueued = sink.requeue::<SyncInvoice>(&jobs, dead.row).await?;
    println!("  {} is {:?}, due now", enqueued.id, enqueued.status);
    let (synced_id, attempt) = tokio::time::timeout(Duration::from_secs(30), synced.recv())
        .await
        .map_err(|_| "the re-enqueued job did not run within 30 s")?
        .ok_or("the worker stopped")?;
    println!("  invoice {synced_id} synced on attempt {attempt}");
    let row = sink.get(dead.row).await?.ok_or("the row is gone")?;
    println!(
        "  row {} is marked re-enqueued at {}",
        row.row,
        row.requeued_at.map(|t| t.to_string()).unwrap_or_default()
    );
    match sink.requeue::<SyncInvoice>(&jobs, dead.row).await {
        Ok(_) => return Err("a row was re-enqueued twice".into()),
        Err(e) => println!("  re-enqueueing it again is refused: {e}"),
    }

    shutdown.shutdown();
    running.await??;
    let counts = jobs.topic::<SyncInvoice>().counts().await?;
    println!(
        "\npostpone keeps {} dead job(s) of {} (the table has them); done",
        counts.dead,
        SyncInvoice::TOPIC
    );
    Ok(())
}
