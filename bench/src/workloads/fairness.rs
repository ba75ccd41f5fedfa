//! `fairness`: one tenant's flood beside quiet tenants, on one topic, as BullMQ's side runs it: `--jobs`
//! (default 100,000) jobs of the key `flood` already due, then a worker process at `--concurrency` (as
//! `drain`'s: the harness's process hosts the producers, as a web backend's would) and `--quiet-keys`
//! (default 50) quiet producers, each enqueueing one job of its own key every 10 ms (`--quiet-every`),
//! until the flood is drained (with `--quiet-keys 0`, the flood alone; with `--flood-keys K`, the
//! flood's jobs spread over K keys round-robin). The figures: each quiet job's start lag (its handler's start minus its enqueue,
//! on the system's wall clock, which both processes read) p50 / p99 / max, and the flood's jobs/s (from
//! just before the worker connected to the start of the flood's last job).
//!
//! Every job has its tenant's key for fairness (`#[job(key = "key")]` on [`Tenant`]): the topic's
//! workers take due jobs round-robin between keys, so a quiet tenant's job waits for a free slot, not
//! for the flood. BullMQ's side is a plain queue (groups are a BullMQ Pro feature). With `--no-keys`
//! the same jobs go without keys to a topic of their own ([`PlainTenant`]): postpone's plain queue
//! under the same load, which says what fairness costs apart from the load itself.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postpone::{Client, EnqueueItem, JobContext, JobError, Worker};
use tokio::io::AsyncBufReadExt;
use tokio::sync::oneshot;

use super::{all_created, client, rate};
use crate::args::{Args, Workload};
use crate::child::{ChildReport, WorkerProcess};
use crate::jobs::{PlainTenant, Tenant, TenantJob};
use crate::probe::Probe;
use crate::report::{own_cpu_s, percentile, round, Report};
use crate::BoxResult;

/// How long the flood may take.
const TIMEOUT: Duration = Duration::from_secs(300);
/// How long the quiet jobs enqueued last may take to run once the flood is drained.
const QUIET_TIMEOUT: Duration = Duration::from_secs(30);
/// The line the worker process prints when the flood's last job started.
const DRAINED: &str = "drained";

/// The wall clock in µs since the epoch: a quiet job carries its enqueue by it, and the worker
/// process reads it when the job starts (both processes read the one system clock).
fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// What the handler records.
struct Seen {
    flood_done: u64,
    flood_total: u64,
    drained: Option<oneshot::Sender<()>>,
    /// Quiet jobs' start lag, ms.
    quiet: Vec<f64>,
    /// Quiet jobs that had started when the flood's last job did.
    quiet_in_flood: usize,
    /// Wakes the wait for the quiet jobs enqueued last.
    ran: Arc<tokio::sync::Notify>,
}

type Shared = Arc<Mutex<Seen>>;

async fn handle<J: TenantJob>(job: J, _ctx: JobContext, seen: Shared) -> Result<(), JobError> {
    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
    if job.tenant().starts_with("flood") {
        s.flood_done += 1;
        if s.flood_done == s.flood_total {
            s.quiet_in_flood = s.quiet.len();
            if let Some(tx) = s.drained.take() {
                let _ = tx.send(());
            }
        }
    } else {
        let lag = wall_us().saturating_sub(job.enqueued_us()) as f64 / 1e3;
        s.quiet.push(lag);
        s.ran.notify_one();
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

/// The worker process of `fairness` (`postpone-bench __worker fairness`), as `drain`'s has one: it
/// prints `ready` once its worker runs and `drained` when the flood's last job started, then reads
/// from stdin how many quiet jobs were enqueued, waits until they all ran, and prints its
/// [`ChildReport`] (the flood's time, this process's and Redis's CPU over it, the quiet jobs' lags).
pub(crate) async fn worker(args: Args) -> BoxResult<()> {
    if args.no_keys {
        worker_with::<PlainTenant>(args).await
    } else {
        worker_with::<Tenant>(args).await
    }
}

async fn worker_with<J: TenantJob>(args: Args) -> BoxResult<()> {
    let start = Instant::now();
    let mut probe = Probe::connect(&args.redis).await?;
    let redis_cpu = probe.cpu_s().await?;
    let client = Client::connect(&args.redis).await?;
    let (tx, drained) = oneshot::channel();
    let ran = Arc::new(tokio::sync::Notify::new());
    let seen: Shared = Arc::new(Mutex::new(Seen {
        flood_done: 0,
        flood_total: args.jobs,
        drained: Some(tx),
        quiet: Vec::new(),
        quiet_in_flood: 0,
        ran: ran.clone(),
    }));
    let worker = Worker::with_state(&client, seen.clone())
        .concurrency(args.concurrency)
        .handle(handle::<J>)
        .build()?;
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    outln!("ready");
    tokio::time::timeout(TIMEOUT, drained)
        .await
        .map_err(|_| "the flood was not drained in time")??;
    let (secs, cpu_s) = (start.elapsed().as_secs_f64(), own_cpu_s());
    let redis_cpu_s = probe.cpu_s().await? - redis_cpu;
    outln!("{DRAINED}");

    let mut line = String::new();
    tokio::io::BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await?;
    let quiet_sent: usize = line.trim().parse()?;
    let all_ran = async {
        loop {
            let notified = ran.notified();
            if seen.lock().unwrap_or_else(|p| p.into_inner()).quiet.len() >= quiet_sent {
                return;
            }
            notified.await;
        }
    };
    if tokio::time::timeout(QUIET_TIMEOUT, all_ran).await.is_err() {
        eprintln!("  worker: not every quiet job ran within {QUIET_TIMEOUT:?} of the flood's end");
    }
    shutdown.shutdown();
    running.await??;
    let (quiet, quiet_in_flood) = {
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        (std::mem::take(&mut s.quiet), s.quiet_in_flood as u64)
    };
    let report = ChildReport {
        handled: args.jobs + quiet.len() as u64,
        secs,
        cpu_s,
        redis_cpu_s,
        quiet_lag_ms: quiet,
        quiet_in_flood,
        ..ChildReport::default()
    };
    outln!("{}", serde_json::to_string(&report)?);
    Ok(())
}

async fn run_with<J: TenantJob>(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let n = args.jobs;
    let client = client(args).await?;
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
    let mut worker = WorkerProcess::start(Workload::Fairness, args).await?;
    let stats = probe.command_stats().await?;

    let producing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut producers = tokio::task::JoinSet::new();
    let every = Duration::from_millis(args.quiet_every_ms);
    for k in 0..args.quiet_keys {
        let (client, producing) = (client.clone(), producing.clone());
        producers.spawn(async move {
            let mut sent = 0u64;
            let mut tick = tokio::time::interval(every);
            while producing.load(std::sync::atomic::Ordering::Relaxed) {
                tick.tick().await;
                client
                    .enqueue(J::new(sent, &format!("quiet{k}"), wall_us()))
                    .await?;
                sent += 1;
            }
            Ok::<u64, postpone::Error>(sent)
        });
    }
    tokio::time::timeout(TIMEOUT, worker.wait_for(DRAINED))
        .await
        .map_err(|_| "the flood was not drained in time")??;
    let commands = probe.command_stats().await?.time_since(&stats);
    producing.store(false, std::sync::atomic::Ordering::Relaxed);
    let mut quiet_sent = 0;
    while let Some(done) = producers.join_next().await {
        quiet_sent += done??;
    }
    // The quiet jobs enqueued last run now: the worker process waits until each has started.
    worker.expect(quiet_sent).await?;
    let ChildReport {
        secs,
        cpu_s: own_cpu,
        redis_cpu_s: redis_cpu,
        quiet_lag_ms: mut quiet,
        quiet_in_flood,
        ..
    } = worker.finish().await?;
    if (quiet.len() as u64) < quiet_sent {
        outln!(
            "  FAILED: {} of {quiet_sent} quiet jobs ran within {QUIET_TIMEOUT:?} of the flood's end",
            quiet.len()
        );
        ok = false;
    }

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
        "  with the {quiet_in_flood} quiet jobs that started meanwhile: {:.0} jobs/s; Redis CPU {redis_cpu:.3} s ({:.1} us/job), the worker process's {own_cpu:.3} s ({:.1} us/job)",
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
        quiet_in_flood: Some(quiet_in_flood),
        redis_cpu_s: Some(round(redis_cpu, 3)),
        redis_us_per_job: Some(round(redis_cpu * 1e6 / all as f64, 2)),
        worker_cpu_s: Some(round(own_cpu, 3)),
        worker_us_per_job: Some(round(own_cpu * 1e6 / all as f64, 2)),
        ok,
        ..Report::default()
    })
}
