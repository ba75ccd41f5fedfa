//! The quickstart: a delayed job, a job retried by its schedule, and a job dead-lettered through a hook.
//!
//! ```text
//! cargo run --example quickstart                                      # in memory, no Redis needed
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example quickstart    # on Redis
//! REDIS_CLUSTER_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001 cargo run --features cluster --example quickstart
//! ```
//!
//! `REDIS_CLUSTER_NODES` (seed URLs of a Redis Cluster, separated by commas) wins over `REDIS_URL`.
//!
//! It uses a short demo schedule so it finishes in about two seconds, and exits 0 when every job ended
//! as expected. On Redis it works in the namespace `quickstart`.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use postpone::{Client, DeadLetter, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// Close an order that was not paid in time.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "quickstart.close_order")]
struct CloseOrder {
    order_id: u64,
}

/// Notify a partner; their endpoint fails twice before it answers. Demo schedule: attempt 2 after
/// 200 ms, attempt 3 after 400 ms more (the default is 0, 0, 2m, 10m, ... 15h).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "quickstart.notify", retry = ["0", "0", "200ms", "400ms"])]
struct Notify {
    partner: String,
}

/// A job that can never succeed: two attempts, then the dead letters.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "quickstart.charge", retry = ["0", "0", "100ms"])]
struct Charge {
    card: String,
}

/// What the handlers and the hook report to `main`.
#[derive(Debug)]
enum Event {
    Closed { order_id: u64, late_ms: i64 },
    Notified { attempt: u32 },
    Dead(DeadLetter),
}

#[derive(Clone)]
struct App {
    events: mpsc::UnboundedSender<Event>,
    notify_calls: Arc<AtomicU32>,
}

async fn close_order(job: CloseOrder, ctx: JobContext, app: App) -> Result<(), JobError> {
    let late_ms = (chrono::Utc::now() - ctx.due_at()).num_milliseconds();
    println!(
        "  closed unpaid order {} (due at {}, started {late_ms} ms after)",
        job.order_id,
        ctx.due_at().format("%H:%M:%S%.3f")
    );
    let _ = app.events.send(Event::Closed {
        order_id: job.order_id,
        late_ms,
    });
    Ok(())
}

async fn notify(job: Notify, ctx: JobContext, app: App) -> Result<(), JobError> {
    app.notify_calls.fetch_add(1, Ordering::SeqCst);
    if ctx.attempt() < 3 {
        println!(
            "  notify {}: attempt {} failed (503), retrying by schedule",
            job.partner,
            ctx.attempt()
        );
        return Err(JobError::msg("partner answered 503"));
    }
    println!(
        "  notify {}: attempt {} succeeded",
        job.partner,
        ctx.attempt()
    );
    let _ = app.events.send(Event::Notified {
        attempt: ctx.attempt(),
    });
    Ok(())
}

async fn charge(job: Charge, ctx: JobContext, _app: App) -> Result<(), JobError> {
    println!(
        "  charge {}: attempt {} of {} failed",
        job.card,
        ctx.attempt(),
        ctx.attempts_allowed()
    );
    Err(JobError::msg("card declined"))
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The error and its causes on one line (`Error::report`), rather than `main`'s Debug output.
            match e.downcast_ref::<postpone::Error>() {
                Some(e) => eprintln!("error: {}", e.report()),
                None => eprintln!("error: {e}"),
            }
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // postpone reports through `tracing`: warnings (an evicting Redis, a lost connection) and, with the
    // default dead-letter sink, every dead job. Without a subscriber they go nowhere. Colours only on a
    // terminal, so that output sent to a file stays plain.
    tracing_subscriber::fmt()
        .with_ansi(std::io::stdout().is_terminal())
        .init();
    let started = Instant::now();
    let env = |name| {
        std::env::var(name)
            .ok()
            .filter(|v: &String| !v.trim().is_empty())
    };
    let client = if let Some(nodes) = env("REDIS_CLUSTER_NODES") {
        let nodes: Vec<&str> = nodes.split(',').map(str::trim).collect();
        let builder = Client::builder().namespace("quickstart");
        builder.redis_cluster(&nodes).await?
    } else if let Some(url) = env("REDIS_URL") {
        Client::builder()
            .namespace("quickstart")
            .redis(&url)
            .await?
    } else {
        Client::memory()
    };
    println!("postpone quickstart, backend: {}", client.backend_name());

    let (tx, mut events) = mpsc::unbounded_channel();
    let app = App {
        events: tx.clone(),
        notify_calls: Arc::new(AtomicU32::new(0)),
    };
    let hook_tx = tx.clone();
    let sink = postpone::sink_fn(move |dead: DeadLetter| {
        let tx = hook_tx.clone();
        async move {
            // A real application writes this to a table or an alert channel.
            println!(
                "  dead-letter hook: {} {} after {} attempts: {}",
                dead.topic, dead.id, dead.attempts, dead.reason
            );
            let _ = tx.send(Event::Dead(dead));
            Ok(())
        }
    });
    let worker = Worker::with_state(&client, app.clone())
        .handle(close_order)
        .handle(notify)
        .handle(charge)
        .dead_letter_sink(sink)
        .build()?;
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());

    // Counters live as long as the store: compare against what earlier runs left.
    let before = client.topic::<CloseOrder>().counts().await?;
    println!("enqueue: close order 42 in 1 s (id order:42), a notification, a charge");
    client
        .enqueue(CloseOrder { order_id: 42 })
        .id("order:42")
        .after(Duration::from_secs(1))
        .await?;
    let again = client
        .enqueue(CloseOrder { order_id: 42 })
        .id("order:42")
        .after(Duration::from_secs(1))
        .await?;
    println!(
        "  enqueueing order:42 again: {:?}, nothing changed",
        again.status
    );
    client
        .enqueue(CloseOrder { order_id: 43 })
        .id("order:43")
        .after(Duration::from_secs(60))
        .await?;
    // The customer asked for more time: the timer moves to 2 s from now (not from when it was set).
    let due_at = client
        .reschedule::<CloseOrder>("order:43", Duration::from_secs(2))
        .await?;
    println!(
        "  order 43 gets more time: due at {}",
        due_at.format("%H:%M:%S%.3f")
    );
    // Then it is paid: cancel its timer. A timer that already fired, or never existed, is no error
    // here: the order is paid either way.
    for order in ["order:43", "order:44"] {
        match client.cancel::<CloseOrder>(order).await {
            Ok(status) => println!("  {order} was paid: its timer is cancelled ({status:?})"),
            Err(postpone::Error::JobNotFound { .. }) => {
                println!("  {order} was paid: it had no timer left (fired, or never set)")
            }
            Err(e) => return Err(e.into()),
        }
    }
    client
        .enqueue(Notify {
            partner: "acme".into(),
        })
        .await?;
    client
        .enqueue(Charge {
            card: "4242".into(),
        })
        .id("charge:7")
        .await?;

    let (mut closed, mut notified, mut dead) = (None, None, None);
    while closed.is_none() || notified.is_none() || dead.is_none() {
        match tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
            Ok(Some(Event::Closed { order_id, late_ms })) => closed = Some((order_id, late_ms)),
            Ok(Some(Event::Notified { attempt })) => notified = Some(attempt),
            Ok(Some(Event::Dead(d))) => dead = Some(d),
            Ok(None) | Err(_) => {
                return Err("the quickstart's jobs did not all finish within 10 s".into())
            }
        }
    }
    shutdown.shutdown();
    running.await??;

    let (order_id, late_ms) = closed.expect("checked above");
    let orders = client.topic::<CloseOrder>().counts().await?;
    let dead = dead.expect("checked above");
    let checks = [
        (
            order_id == 42 && late_ms >= 0,
            "the delayed job ran, not before its due time",
        ),
        (
            orders.processed - before.processed == 1 && orders.cancelled - before.cancelled == 1,
            "order 42 closed once; cancelled order 43 never ran",
        ),
        (
            notified == Some(3) && app.notify_calls.load(Ordering::SeqCst) == 3,
            "the notification succeeded on attempt 3",
        ),
        (
            dead.id == "charge:7" && dead.attempts == 2,
            "the charge was dead-lettered after 2 attempts",
        ),
    ];
    let mut ok = true;
    for (passed, what) in checks {
        println!("{} {what}", if passed { "ok:" } else { "FAILED:" });
        ok &= passed;
    }
    // Dead letters stay until trimmed; the demo removes its own so that it leaves nothing behind.
    client.topic::<Charge>().purge_all_dead().await?;

    println!(
        "done in {:.1} s on {}",
        started.elapsed().as_secs_f64(),
        client.backend_name()
    );
    if ok {
        Ok(())
    } else {
        Err("some checks failed".into())
    }
}
