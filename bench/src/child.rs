//! The worker process: the harness runs itself again as `postpone-bench __worker <workload> ...`, so that
//! the worker has a process (and CPU figures) of its own, as in production.
//!
//! The child prints `ready` once its worker runs, and, when it is done, one line of JSON (a
//! [`ChildReport`]). `drain`, `drain-io`, `delayed` and `steady` end by themselves once every job was
//! handled and acknowledged (`steady`'s jobs are those the parent says on stdin it created: an enqueue
//! may fail); `idle` ends when its stdin closes.

use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use postpone::{Client, Worker};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::args::{Args, Workload};
use crate::handlers::*;
use crate::jobs::{Kept, Order};
use crate::probe::Probe;
use crate::report::own_cpu_s;
use crate::BoxResult;

/// The hidden subcommand.
pub(crate) const SUBCOMMAND: &str = "__worker";

/// What the worker process reports.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct ChildReport {
    /// Handler runs.
    pub(crate) handled: u64,
    /// From just before the worker connected to the last job acknowledged.
    pub(crate) secs: f64,
    /// This process's CPU over that time (user + system).
    pub(crate) cpu_s: f64,
    /// Redis CPU over that time.
    pub(crate) redis_cpu_s: f64,
    /// `delayed`, `steady`: handler start minus due time by the Redis clock, ms, per job (its first
    /// attempt).
    pub(crate) lateness_ms: Vec<f64>,
    /// `delayed`, `steady`: each job's due time (ms since the epoch), in the order of `lateness_ms`.
    pub(crate) due_ms: Vec<i64>,
    /// `delayed`, `steady`: each job's `order_id`, in the order of `lateness_ms`.
    #[serde(default)]
    pub(crate) order_ids: Vec<u64>,
    /// `steady`: the same as `lateness_ms` for second attempts (the retry's due time is when the
    /// first attempt failed).
    #[serde(default)]
    pub(crate) retry_lateness_ms: Vec<f64>,
    /// `steady`: the round trip of the handler's TIME, ms, in the order of `lateness_ms` (the lag
    /// includes about half of it: Redis reads its clock between the two halves).
    #[serde(default)]
    pub(crate) clock_rtt_ms: Vec<f64>,
    /// `steady`: the handlers running when each job started (itself included), in the order of
    /// `lateness_ms`: at the concurrency, the job may have waited for a slot.
    #[serde(default)]
    pub(crate) busy: Vec<u32>,
    /// `drain-io`, `steady`: the mean time the handler's sleep took, ms (the timer rounds up).
    #[serde(default)]
    pub(crate) handler_mean_ms: f64,
    /// `fairness`: each quiet job's start lag, ms (its `secs`, `cpu_s` and `redis_cpu_s` are the
    /// flood's: up to the start of its last job).
    #[serde(default)]
    pub(crate) quiet_lag_ms: Vec<f64>,
    /// `fairness`: the quiet jobs that had started when the flood's last job did.
    #[serde(default)]
    pub(crate) quiet_in_flood: u64,
    /// `drain-io`: this process's CPU, after the drain (the worker stopped), over as many bare sleeps
    /// of the handler as it ran ([`bare_io_sleeps`]): the handler's own share of `cpu_s`. `steady`:
    /// over the handler's own work replayed at the run's rate ([`bare_steady_handlers`], up to
    /// [`STEADY_FLOOR_SECS`] of it), scaled to as many runs as the worker made.
    #[serde(default)]
    pub(crate) handler_floor_cpu_s: f64,
    /// `steady`: Redis's CPU over that replay (its TIME calls), scaled the same way.
    #[serde(default)]
    pub(crate) handler_floor_redis_cpu_s: f64,
}

/// The parent's handle on a worker process.
pub(crate) struct WorkerProcess {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl WorkerProcess {
    /// Starts `postpone-bench __worker <workload> ...` with `args`, and waits until its worker runs.
    pub(crate) async fn start(workload: Workload, args: &Args) -> BoxResult<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg(SUBCOMMAND)
            .arg(workload.name())
            .args(["--jobs", &args.jobs.to_string()])
            .args(["--concurrency", &args.concurrency.to_string()])
            .args(["--redis", &args.redis])
            .args(["--topics", &args.topics.to_string()])
            .args(["--secs", &args.secs.to_string()])
            .args(["--rate", &args.rate.to_string()])
            .args(args.flow.then_some("--flow"))
            .args(args.no_keys.then_some("--no-keys"))
            .args(args.keep.then_some("--keep"))
            .args(args.observe.then_some("--observe"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        match lines.next_line().await? {
            Some(line) if line == "ready" => Ok(WorkerProcess { child, lines }),
            other => Err(format!("worker process did not start: {other:?}").into()),
        }
    }

    /// Waits for the worker process to print `line` (`fairness`: the flood is drained).
    pub(crate) async fn wait_for(&mut self, line: &str) -> BoxResult<()> {
        match self.lines.next_line().await? {
            Some(got) if got == line => Ok(()),
            other => Err(format!("the worker process said {other:?}, not {line:?}").into()),
        }
    }

    /// Tells a `steady` worker how many jobs were created (it waits for that many, not `--jobs`), a
    /// `fairness` worker how many quiet jobs were.
    pub(crate) async fn expect(&mut self, jobs: u64) -> BoxResult<()> {
        let stdin = self.child.stdin.as_mut().ok_or("no stdin")?;
        stdin.write_all(format!("{jobs}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Closes its stdin (which stops an idle worker) and reads its report.
    pub(crate) async fn finish(mut self) -> BoxResult<ChildReport> {
        drop(self.child.stdin.take());
        let line = self.lines.next_line().await?;
        let status = self.child.wait().await?;
        let line =
            line.ok_or_else(|| format!("worker process ended without a report ({status})"))?;
        if !status.success() {
            return Err(format!("worker process failed ({status})").into());
        }
        Ok(serde_json::from_str(&line)?)
    }
}

/// `postpone-bench __worker <workload> ...`: runs a worker for `workload` and reports.
pub(crate) async fn main(args: Args) -> BoxResult<()> {
    if args.workload == Workload::Fairness {
        return crate::workloads::fairness_worker(args).await;
    }
    let start = *START.get_or_init(Instant::now);
    let observed = crate::observe::install(args.observe)?;
    let mut probe = Probe::connect(&args.redis).await?;
    let redis_cpu = probe.cpu_s().await?;
    let client = Client::connect(&args.redis).await?;
    let redis = match args.workload {
        Workload::Delayed | Workload::Steady => Some(crate::probe::connection(&args.redis).await?),
        _ => None,
    };
    let state = State::new(args.jobs, redis);
    let mut builder = Worker::with_state(&client, state.clone()).concurrency(args.concurrency);
    builder = match args.workload {
        Workload::Drain if args.keep => builder.handle(kept_order),
        Workload::Drain | Workload::Backlog => builder.handle(drain_order),
        Workload::DrainIo => builder.handle(io_order),
        Workload::Delayed => builder.handle(delayed_order),
        Workload::Steady => builder.handle(steady_order),
        Workload::Idle => idle_handlers(builder, args.topics),
        other => return Err(format!("no worker process for {other}").into()),
    };
    if args.flow {
        builder = builder
            .rate_limit::<Order>(100_000_000, Duration::from_secs(1))
            .max_running::<Order>(1_000_000);
    }
    let worker = builder.build()?;
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    outln!("ready");

    if args.workload == Workload::Idle {
        let mut sink = Vec::new();
        tokio::io::stdin().read_to_end(&mut sink).await?;
    } else {
        if args.workload == Workload::Steady {
            tokio::spawn(read_target(state.counter.clone(), client.clone()));
        }
        // Every job handled, then acknowledged (the counter of processed jobs says so).
        let limit = Duration::from_secs(120 + args.jobs / 500);
        let counter = state.counter.clone();
        let target = || counter.target.load(Ordering::Relaxed);
        let handled = async {
            while counter.handled.load(Ordering::Relaxed) < target() {
                counter.done.notified().await;
            }
        };
        if tokio::time::timeout(limit, handled).await.is_err() {
            return Err(format!(
                "only {} of {} jobs ran within {limit:?}",
                counter.handled.load(Ordering::Relaxed),
                target()
            )
            .into());
        }
        let topic = if args.keep {
            client.topic::<Kept>()
        } else {
            client.topic::<Order>()
        };
        while topic.counts().await?.processed < target() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let lateness = std::mem::take(&mut *state.lateness.lock().unwrap());
    let retry_lateness_ms = std::mem::take(&mut *state.retry_lateness.lock().unwrap());
    let handled = state.counter.handled.load(Ordering::Relaxed);
    // Attempts that slept: `steady`'s retries sleep too.
    let attempts = handled + retry_lateness_ms.len() as u64;
    let mut report = ChildReport {
        handled,
        secs: start.elapsed().as_secs_f64(),
        cpu_s: own_cpu_s(),
        redis_cpu_s: probe.cpu_s().await? - redis_cpu,
        lateness_ms: lateness.iter().map(|s| s.late.late_ms).collect(),
        due_ms: lateness.iter().map(|s| s.due_ms).collect(),
        order_ids: lateness.iter().map(|s| s.order_id).collect(),
        retry_lateness_ms,
        clock_rtt_ms: match args.workload {
            Workload::Steady => lateness.iter().map(|s| s.late.clock_rtt_ms).collect(),
            _ => Vec::new(),
        },
        busy: match args.workload {
            Workload::Steady => lateness.iter().map(|s| s.busy).collect(),
            _ => Vec::new(),
        },
        handler_mean_ms: state.slept_ns.load(Ordering::Relaxed) as f64
            / 1e6
            / attempts.max(1) as f64,
        ..ChildReport::default()
    };
    shutdown.shutdown();
    running.await??;
    if args.workload == Workload::DrainIo {
        report.handler_floor_cpu_s = bare_io_sleeps(args.concurrency, attempts).await;
    }
    if args.workload == Workload::Steady && attempts > 0 {
        let runs = attempts.min(args.rate * STEADY_FLOOR_SECS);
        let redis_cpu = probe.cpu_s().await?;
        let cpu = bare_steady_handlers(&state, args.rate, runs).await?;
        let scale = attempts as f64 / runs as f64;
        report.handler_floor_cpu_s = cpu * scale;
        report.handler_floor_redis_cpu_s = (probe.cpu_s().await? - redis_cpu) * scale;
    }
    crate::observe::check(observed.as_ref(), handled)?;
    outln!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// `steady`: reads from stdin how many jobs were created (all enqueues are done then), and waits for
/// those only; should the topic then hold no job, running or waiting, while fewer ran (jobs were
/// lost), it stops waiting after a second without progress, for the parent to report the loss.
async fn read_target(counter: Arc<Counter>, client: Client) {
    let mut line = String::new();
    let mut stdin = BufReader::new(tokio::io::stdin());
    if stdin.read_line(&mut line).await.is_err() {
        return;
    }
    let Ok(jobs) = line.trim().parse() else {
        return;
    };
    counter.target.store(jobs, Ordering::Relaxed);
    counter.done.notify_one();
    let topic = client.topic::<Order>();
    let mut last = u64::MAX;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let handled = counter.handled.load(Ordering::Relaxed);
        if handled >= jobs {
            return;
        }
        let Ok(c) = topic.counts().await else {
            continue;
        };
        if c.scheduled + c.ready + c.active == 0 && handled == last {
            eprintln!("  worker: {handled} of {jobs} jobs ran and the topic holds none: lost");
            counter.target.store(handled, Ordering::Relaxed);
            counter.done.notify_one();
            return;
        }
        last = handled;
    }
}
