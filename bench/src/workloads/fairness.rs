//! `fairness`: one tenant's flood beside quiet tenants, on one topic, as BullMQ's side runs it: `--jobs`
//! (default 100,000) jobs of the key `flood` already due, then a worker in the same process at
//! `--concurrency` and `--quiet-keys` (default 50) quiet producers, each enqueueing one job of its own
//! key every 10 ms, until the flood is drained (with `--quiet-keys 0`, the flood alone; with
//! `--flood-keys K`, the flood's jobs spread over K keys round-robin). The figures:
//! each quiet job's start lag (its handler's start minus its enqueue, on the monotonic clock) p50 / p99
//! / max, and the flood's jobs/s.
//!
//! Every job has its tenant's key for fairness (`#[job(key = "key")]` on [`Tenant`]): the topic's
//! workers take due jobs round-robin between keys, so a quiet tenant's job waits for a free slot, not
//! for the flood. BullMQ's side is a plain queue (groups are a BullMQ Pro feature). With `--no-keys`
//! the same jobs go without keys to a topic of their own ([`PlainTenant`]): postpone's plain queue
//! under the same load, which says what fairness costs apart from the load itself.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postpone::{EnqueueItem, JobContext, JobError};
use tokio::sync::oneshot;

use super::{all_created, client, rate};
use crate::args::Args;
use crate::jobs::{PlainTenant, Tenant, TenantJob};
use crate::probe::Probe;
use crate::report::{own_cpu_s, percentile, round, Report};
use crate::BoxResult;

/// How often each quiet producer enqueues.
const QUIET_EVERY: Duration = Duration::from_millis(10);
/// How long the flood may take.
const TIMEOUT: Duration = Duration::from_secs(300);

/// What the handler records.
struct Seen {
    /// The monotonic clock's origin: a quiet job carries its enqueue as µs since it.
    origin: Instant,
    flood_done: u64,
    flood_total: u64,
    drained: Option<oneshot::Sender<Instant>>,
    /// Quiet jobs' start lag, ms.
    quiet: Vec<f64>,
    /// Quiet jobs that had started when the flood's last job did.
    quiet_in_flood: usize,
}

type Shared = Arc<Mutex<Seen>>;

async fn handle<J: TenantJob>(job: J, _ctx: JobContext, seen: Shared) -> Result<(), JobError> {
    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
    if job.tenant().starts_with("flood") {
        s.flood_done += 1;
        if s.flood_done == s.flood_total {
            s.quiet_in_flood = s.quiet.len();
            if let Some(tx) = s.drained.take() {
                let _ = tx.send(Instant::now());
            }
        }
    } else {
        let lag = s.origin.elapsed().as_secs_f64() * 1e3 - job.enqueued_us() as f64 / 1e3;
        s.quiet.push(lag);
    }
    Ok(())
}

/// `fairness`.
pub(super) async fn run(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    if args.no_keys {
        run_with::<PlainTenant>(args, probe).await
    } else {
        run_with::<Tenant>(args, probe).await
    }
}

async fn run_with<J: TenantJob>(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let n = args.jobs;
    let client = client(args).await?;
    let origin = Instant::now();
    let mut ok = true;
    let keys = args.flood_keys;
    let flood_key = |k: u64| {
        if keys == 1 {
            "flood".to_owned()
        } else {
            format!("flood{}", k % keys)
        }
    };
    for first in (0..n).step_by(1000) {
        let items =
            (first..(first + 1000).min(n)).map(|k| EnqueueItem::new(J::new(k, &flood_key(k), 0)));
        ok &= all_created(&client.enqueue_many(items).await?);
    }
    let (tx, rx) = oneshot::channel();
    let seen: Shared = Arc::new(Mutex::new(Seen {
        origin,
        flood_done: 0,
        flood_total: n,
        drained: Some(tx),
        quiet: Vec::new(),
        quiet_in_flood: 0,
    }));
    let (redis_cpu, own_cpu) = (probe.cpu_s().await?, own_cpu_s());
    let stats = probe.command_stats().await?;
    let running = super::spawn_worker(args, seen.clone(), |w| w.handle(handle::<J>)).await?;
    let started = Instant::now();

    let producing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut producers = tokio::task::JoinSet::new();
    for k in 0..args.quiet_keys {
        let (client, producing) = (client.clone(), producing.clone());
        producers.spawn(async move {
            let mut sent = 0u64;
            let mut tick = tokio::time::interval(QUIET_EVERY);
            while producing.load(std::sync::atomic::Ordering::Relaxed) {
                tick.tick().await;
                let at = origin.elapsed().as_micros() as u64;
                client
                    .enqueue(J::new(sent, &format!("quiet{k}"), at))
                    .await?;
                sent += 1;
            }
            Ok::<u64, postpone::Error>(sent)
        });
    }
    let drained_at = tokio::time::timeout(TIMEOUT, rx)
        .await
        .map_err(|_| "the flood was not drained in time")??;
    let (redis_cpu, own_cpu) = (probe.cpu_s().await? - redis_cpu, own_cpu_s() - own_cpu);
    let commands = probe.command_stats().await?.time_since(&stats);
    producing.store(false, std::sync::atomic::Ordering::Relaxed);
    let mut quiet_sent = 0;
    while let Some(done) = producers.join_next().await {
        quiet_sent += done??;
    }
    // The quiet jobs enqueued last run now: each is counted once it started.
    let deadline = Instant::now() + Duration::from_secs(30);
    while (seen.lock().unwrap_or_else(|p| p.into_inner()).quiet.len() as u64) < quiet_sent {
        if Instant::now() > deadline {
            outln!("  FAILED: not every quiet job ran within 30 s of the flood's end");
            ok = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    running.stop().await?;

    let secs = drained_at.saturating_duration_since(started).as_secs_f64();
    let (mut quiet, quiet_in_flood) = {
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        (std::mem::take(&mut s.quiet), s.quiet_in_flood as u64)
    };
    // Every job that ran while the flood drained: the flood's and the quiet keys'.
    let all = n + quiet_in_flood;
    quiet.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&quiet, 50.0), percentile(&quiet, 99.0));
    let max = quiet.last().copied().unwrap_or(f64::NAN);
    outln!(
        "  flood of {n} jobs ({}) drained in {secs:.3} s ({:.0} jobs/s, concurrency {}) beside {} quiet keys",
        if keys == 1 { "one key".to_owned() } else { format!("over {keys} keys") },
        rate(n, secs),
        args.concurrency,
        args.quiet_keys
    );
    outln!(
        "  with the {quiet_in_flood} quiet jobs that started meanwhile: {:.0} jobs/s; Redis CPU {redis_cpu:.3} s ({:.1} us/job), this process's (worker and producers) {own_cpu:.3} s ({:.1} us/job)",
        rate(all, secs),
        redis_cpu * 1e6 / all as f64,
        own_cpu * 1e6 / all as f64
    );
    outln!(
        "  quiet jobs: {} ran; start lag p50 {p50:.1} / p99 {p99:.1} / max {max:.1} ms ({})",
        quiet.len(),
        if args.no_keys {
            "no keys: a plain queue"
        } else {
            "round-robin between keys"
        }
    );
    outln!("  Redis commands while the flood drained: {commands}");
    Ok(Report {
        secs: Some(round(secs, 3)),
        jobs_per_sec: Some(round(rate(n, secs), 0)),
        p50_ms: Some(round(p50, 3)),
        p99_ms: Some(round(p99, 3)),
        max_ms: Some(round(max, 3)),
        quiet_p99_ms: Some(round(p99, 3)),
        all_jobs_per_sec: Some(round(rate(all, secs), 0)),
        flood_keys: Some(keys),
        redis_cpu_s: Some(round(redis_cpu, 3)),
        redis_us_per_job: Some(round(redis_cpu * 1e6 / all as f64, 2)),
        worker_cpu_s: Some(round(own_cpu, 3)),
        worker_us_per_job: Some(round(own_cpu * 1e6 / all as f64, 2)),
        ok,
        ..Report::default()
    })
}
