//! `wait`: `--jobs` jobs enqueued, a [`Client::waiter`] on each through one client (a web backend's
//! request handlers waiting for their jobs), then a worker in the same process (as BullMQ's side runs
//! it) drains them. The figure is each job's wake time: from its handler's finish (recorded just before
//! it returns) to its waiter's return, on the monotonic clock.
//!
//! Every waiter is registered before the worker starts, and the client listening: the client's
//! subscription is up first (Redis counts it on the channel of announcements, and a moment is left
//! for its first resync, which would make every waiter look its job up again), then each waiter is
//! primed with a [`Waiter::next_progress`](postpone::Waiter::next_progress) that returns soon after its
//! first lookup (which registers it in the store), and the store's index of waited jobs must hold
//! them all.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use postpone::{Client, EnqueueItem, JobContext, JobError, JobOutcome};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{all_created, client, counts_ok, rate};
use crate::args::Args;
use crate::jobs::Waited;
use crate::probe::Probe;
use crate::report::{percentile, round, Report};
use crate::BoxResult;

/// How long a primed waiter waits for progress before it goes on to its outcome.
const PRIME: Duration = Duration::from_millis(1);
/// How long a waiter waits for its job (under the 60 s its lookup registers it for, so it looks the job
/// up once only).
const WAIT_TIMEOUT: Duration = Duration::from_secs(50);
/// How long the waiters may take to register.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(60);

/// When each job's handler finished, by order id.
type Finished = Arc<Vec<OnceLock<Instant>>>;

/// The handler: records when it finished, and returns the order id to the waiter.
async fn finish(job: Waited, _ctx: JobContext, finished: Finished) -> Result<u64, JobError> {
    let slot = finished
        .get(job.order_id as usize)
        .ok_or_else(|| JobError::msg(format!("order id {} out of range", job.order_id)))?;
    let _ = slot.set(Instant::now());
    Ok(job.order_id)
}

/// What a waiter saw: its order id, when `outcome` returned, and the outcome.
type Woken = (u64, Instant, JobOutcome<u64>);

/// `wait`.
pub(super) async fn run(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    let n = args.jobs;
    let (mut ok, ids) = enqueue(&client, n).await?;

    // A first wait starts the client's listener; its subscription is then awaited.
    let none = client
        .wait::<Waited>("bench-wait-none", REGISTER_TIMEOUT)
        .await?;
    if none != JobOutcome::Unknown {
        return Err(format!("a wait for no job found {none:?}").into());
    }
    listening(probe).await?;
    let registering = Instant::now();
    let primed = Arc::new(Semaphore::new(0));
    let mut waiters = JoinSet::new();
    for (k, id) in (0u64..).zip(ids) {
        let (client, primed) = (client.clone(), primed.clone());
        waiters.spawn(async move {
            let mut waiter = client.waiter::<Waited>(&id)?;
            waiter
                .next_progress(tokio::time::Instant::now() + PRIME)
                .await?;
            primed.add_permits(1);
            let outcome = waiter.outcome(WAIT_TIMEOUT).await?;
            Ok::<Woken, postpone::Error>((k, Instant::now(), outcome))
        });
    }
    let all = u32::try_from(n).map_err(|_| "--jobs too large for wait")?;
    tokio::time::timeout(REGISTER_TIMEOUT, primed.acquire_many(all))
        .await
        .map_err(|_| "the waiters did not register in time")??
        .forget();
    let waited = probe
        .zcard(&format!(
            "postpone:{{{}:{}}}:waited",
            postpone::DEFAULT_NAMESPACE,
            <Waited as postpone::Job>::TOPIC
        ))
        .await?;
    outln!(
        "  {n} waiters registered in {:.1} ms ({waited} waited jobs in the store)",
        registering.elapsed().as_secs_f64() * 1e3
    );
    if waited != n {
        outln!("  FAILED: {waited} jobs registered as waited for, not {n}");
        ok = false;
    }

    // The worker: its own client (its own connections, as BullMQ's worker has), in this process.
    let finished: Finished = Arc::new((0..n).map(|_| OnceLock::new()).collect());
    let running = super::spawn_worker(args, finished.clone(), |w| w.handle(finish)).await?;
    let started = Instant::now();
    let mut woken = Vec::with_capacity(n as usize);
    let mut errors = 0u64;
    while let Some(joined) = waiters.join_next().await {
        match joined? {
            Ok(w) => woken.push(w),
            Err(e) => {
                errors += 1;
                if errors <= 5 {
                    outln!("  FAILED: a wait returned an error: {e}");
                }
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    running.stop().await?;

    let (mut wakes, wrong) = wake_times(&woken, &finished);
    ok &= errors == 0 && wrong == 0 && wakes.len() as u64 == n;
    ok &= counts_ok(&client.topic::<Waited>().counts().await?, n, 0);
    wakes.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&wakes, 50.0), percentile(&wakes, 99.0));
    let (min, max) = (
        wakes.first().copied().unwrap_or(f64::NAN),
        wakes.last().copied().unwrap_or(f64::NAN),
    );
    outln!(
        "  {n} jobs drained and their waiters woken in {secs:.3} s ({:.0} jobs/s, concurrency {})",
        rate(n, secs),
        args.concurrency
    );
    outln!(
        "  handler finish to waiter return: p50 {p50:.3} / p99 {p99:.3} / max {max:.3} / min {min:.3} ms \
         (target p99 <= 5 ms)"
    );
    Ok(Report {
        secs: Some(round(secs, 3)),
        jobs_per_sec: Some(round(rate(n, secs), 0)),
        p50_ms: Some(round(p50, 3)),
        p99_ms: Some(round(p99, 3)),
        max_ms: Some(round(max, 3)),
        min_ms: Some(round(min, 3)),
        wake_p99_ms: Some(round(p99, 3)),
        errors: Some(errors),
        ok,
        ..Report::default()
    })
}

/// Waits until the client's subscription to the announcements is up (no other process subscribes to
/// them here: the benchmark's Redis is its own), and a moment more for the client to take it in.
async fn listening(probe: &mut Probe) -> BoxResult<()> {
    let channel = format!("postpone:{{{}}}:ended", postpone::DEFAULT_NAMESPACE);
    let deadline = Instant::now() + REGISTER_TIMEOUT;
    while probe.subscribers(&channel).await? == 0 {
        if Instant::now() > deadline {
            return Err("the client did not subscribe to the announcements in time".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

/// Enqueues `n` jobs due now, 1,000 per call; returns whether all were created, and their ids by
/// order id.
async fn enqueue(client: &Client, n: u64) -> BoxResult<(bool, Vec<String>)> {
    let (mut ok, mut ids) = (true, Vec::with_capacity(n as usize));
    for first in (0..n).step_by(1000) {
        let items = (first..(first + 1000).min(n)).map(|k| EnqueueItem::new(Waited::new(k)));
        let done = client.enqueue_many(items).await?;
        ok &= all_created(&done);
        ids.extend(done.into_iter().map(|e| e.id));
    }
    Ok((ok, ids))
}

/// Ms from each handler's finish to its waiter's return, and how many waiters did not get their job's
/// result (printing the first few).
fn wake_times(woken: &[Woken], finished: &[OnceLock<Instant>]) -> (Vec<f64>, u64) {
    let (mut wakes, mut wrong) = (Vec::with_capacity(woken.len()), 0u64);
    for (k, returned, outcome) in woken {
        let ended = finished.get(*k as usize).and_then(OnceLock::get);
        match (outcome, ended) {
            (JobOutcome::Succeeded(v), Some(ended)) if v == k => {
                wakes.push(returned.saturating_duration_since(*ended).as_secs_f64() * 1e3);
            }
            _ => {
                wrong += 1;
                if wrong <= 5 {
                    outln!(
                        "  FAILED: the waiter of order {k} got {outcome:?} (handler finished: {})",
                        ended.is_some()
                    );
                }
            }
        }
    }
    (wakes, wrong)
}
