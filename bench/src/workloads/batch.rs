//! `batch`: one batch of `--jobs` no-op members with a success callback, created through one client,
//! drained by a worker in the same process (as BullMQ's side runs its flow) at `--concurrency`. The
//! figures: members per second, from the batch's creation to the callback's start, and the time from
//! the last member's end (recorded just before its handler returns) to the callback's start, on the
//! monotonic clock.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postpone::{EnqueueItem, JobContext, JobError};
use tokio::sync::oneshot;

use super::{client, counts_ok, rate};
use crate::args::Args;
use crate::jobs::{BatchDone, Order};
use crate::probe::Probe;
use crate::report::{round, Report};
use crate::BoxResult;

/// How long the whole batch may take.
const TIMEOUT: Duration = Duration::from_secs(300);

/// What the handlers record: members run, the last member's end, and the callback's start.
#[derive(Default)]
struct Seen {
    members: u64,
    last_member_end: Option<Instant>,
    callbacks: u64,
    started: Option<oneshot::Sender<Instant>>,
}

type Shared = Arc<Mutex<Seen>>;

async fn member(_job: Order, _ctx: JobContext, seen: Shared) -> Result<(), JobError> {
    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
    s.members += 1;
    s.last_member_end = Some(Instant::now());
    Ok(())
}

async fn callback(_job: BatchDone, _ctx: JobContext, seen: Shared) -> Result<(), JobError> {
    let at = Instant::now();
    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
    s.callbacks += 1;
    if let Some(tx) = s.started.take() {
        let _ = tx.send(at);
    }
    Ok(())
}

/// `batch`.
pub(super) async fn run(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let n = args.jobs;
    let (tx, rx) = oneshot::channel();
    let seen: Shared = Arc::new(Mutex::new(Seen {
        started: Some(tx),
        ..Seen::default()
    }));
    // The worker: its own client (its own connections, as BullMQ's worker has), in this process,
    // running before the batch exists.
    let running =
        super::spawn_worker(args, seen.clone(), |w| w.handle(member).handle(callback)).await?;

    let client = client(args).await?;
    let redis_before = probe.cpu_s().await?;
    let created = Instant::now();
    let batch = client
        .batch()
        .description("postpone-bench batch")
        .on_success(BatchDone { members: n })
        .add_all((0..n).map(|k| EnqueueItem::new(Order::new(k))))
        .enqueue()
        .await?;
    let creating = created.elapsed();
    let callback_at = tokio::time::timeout(TIMEOUT, rx)
        .await
        .map_err(|_| "the batch's callback did not start in time")??;
    let secs = callback_at.saturating_duration_since(created).as_secs_f64();
    let redis_cpu = probe.cpu_s().await? - redis_before;
    running.stop().await?;

    let (members, callbacks, last_member_end) = {
        let s = seen.lock().unwrap_or_else(|p| p.into_inner());
        (s.members, s.callbacks, s.last_member_end)
    };
    let after_last =
        last_member_end.map(|end| callback_at.saturating_duration_since(end).as_secs_f64() * 1e3);
    let status = client.batch_status(batch.id()).await?;
    let mut ok = members == n && callbacks == 1;
    if !ok {
        outln!(
            "  FAILED: {members} member runs for {n} members, {callbacks} callback runs (1 expected)"
        );
    }
    if status.succeeded != n || status.pending() != 0 {
        outln!("  FAILED: the batch says {status:?}");
        ok = false;
    }
    ok &= counts_ok(&client.topic::<Order>().counts().await?, n, 0);
    // A second callback would be in its topic, run or waiting.
    ok &= counts_ok(&client.topic::<BatchDone>().counts().await?, 1, 0);
    outln!(
        "  batch of {n} created in {:.1} ms; members done and callback started after {secs:.3} s ({:.0} members/s, concurrency {})",
        creating.as_secs_f64() * 1e3,
        rate(n, secs),
        args.concurrency
    );
    outln!(
        "  last member's end to the callback's start: {} (target <= 50 ms); Redis CPU {redis_cpu:.2} s ({:.1} µs per member)",
        after_last.map_or("none".to_owned(), |ms| format!("{ms:.3} ms")),
        redis_cpu * 1e6 / n as f64
    );
    Ok(Report {
        secs: Some(round(secs, 3)),
        jobs_per_sec: Some(round(rate(n, secs), 0)),
        redis_cpu_s: Some(round(redis_cpu, 3)),
        callback_after_last_ms: after_last.map(|ms| round(ms, 3)),
        ok,
        ..Report::default()
    })
}
