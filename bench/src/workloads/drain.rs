//! `drain` (jobs already due, one worker process, a no-op handler), `drain-io` (the same with a handler
//! that sleeps 1 ms) and `backlog` (`drain` beside a million jobs due in an hour). `drain --keep` drains
//! jobs of a type that keeps every finished job with its result ([`Kept`]), and measures the Redis
//! memory they hold afterwards.

use std::time::Instant;

use postpone::{Client, EnqueueItem};

use super::{all_created, client, counts_ok, enqueue_bulk, enqueue_bulk_with, rate};
use crate::args::{Args, Workload};
use crate::child::WorkerProcess;
use crate::handlers::IO_HANDLER;
use crate::jobs::{Kept, Order};
use crate::probe::Probe;
use crate::report::{round, Report};
use crate::BoxResult;

/// An hour, in ms.
const HOUR_MS: u64 = 3_600_000;

/// `drain`.
pub(super) async fn plain(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    drain(Workload::Drain, args, probe, 0).await
}

/// `drain-io`: handlers that sleep 1 ms, so `args.concurrency` slots allow at most
/// `concurrency x 1,000` jobs/s (50,000/s at the default 50): the share of that ceiling reached.
pub(super) async fn io(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let report = drain(Workload::DrainIo, args, probe, 0).await?;
    let ceiling = args.concurrency as f64 / IO_HANDLER.as_secs_f64();
    let share = report.jobs_per_sec.unwrap_or(0.0) / ceiling;
    outln!(
        "  ceiling {ceiling:.0} jobs/s ({} slots, {} ms handler): {:.1} % of it",
        args.concurrency,
        IO_HANDLER.as_millis(),
        share * 100.0
    );
    let mut measured = None;
    if let Some(mean) = report.handler_mean_ms.filter(|m| *m > 0.0) {
        let timer = args.concurrency as f64 * 1e3 / mean;
        let share = report.jobs_per_sec.unwrap_or(0.0) / timer;
        outln!(
            "  the 1 ms sleep took {mean:.3} ms on average (the timer's rounding): {timer:.0} jobs/s with \
             no overhead at all (the measured ceiling); {:.1} % of that",
            share * 100.0
        );
        measured = Some((timer.round(), round(share, 3)));
    }
    Ok(Report {
        ceiling_share: Some(round(share, 3)),
        measured_ceiling_jobs_per_sec: measured.map(|m| m.0),
        measured_ceiling_share: measured.map(|m| m.1),
        ..report
    })
}

/// `backlog`: a plain drain, then the same with `args.backlog` jobs due in an hour in the topic.
pub(super) async fn backlog(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    outln!("  plain drain first, for the ratio:");
    let plain = drain(Workload::Drain, args, probe, 0).await?;
    probe.flushall().await?;
    outln!("  with {} jobs due in an hour:", args.backlog);
    let with = drain(Workload::Drain, args, probe, args.backlog).await?;
    let (a, b) = (
        plain.jobs_per_sec.unwrap_or(0.0),
        with.jobs_per_sec.unwrap_or(0.0),
    );
    let ratio = b / a;
    outln!("  backlog / drain = {b:.0} / {a:.0} = {ratio:.3}");
    Ok(Report {
        backlog: Some(args.backlog),
        drain_jobs_per_sec: Some(a),
        ratio_to_drain: Some(round(ratio, 3)),
        ok: plain.ok && with.ok,
        ..with
    })
}

/// Enqueues `args.jobs` due now (and `backlog` due in an hour), then runs a worker process for
/// `workload` (`Drain` or `DrainIo`) until every job was acknowledged.
async fn drain(
    workload: Workload,
    args: &Args,
    probe: &mut Probe,
    backlog: u64,
) -> BoxResult<Report> {
    let client = client(args).await?;
    let mut ok = true;
    if backlog > 0 {
        let start = Instant::now();
        ok &= enqueue_bulk(&client, 1_000_000_000, backlog, |_| HOUR_MS).await?;
        outln!(
            "  enqueued the backlog in {:.1} s; Redis used_memory {} MB",
            start.elapsed().as_secs_f64(),
            probe.used_memory().await? >> 20
        );
    }
    // With `--priorities`, every other job has a priority (1 or 2): both claim paths run.
    let on = args.priorities;
    let priority = move |k: u64| match (on, k % 4) {
        (true, 2) => 1,
        (true, 3) => 2,
        _ => 0,
    };
    // `--keep`: Redis memory before the enqueue, against after the drain, when every job is kept.
    let memory_before = if args.keep {
        Some(probe.used_memory().await?)
    } else {
        None
    };
    if args.keep {
        ok &= enqueue_kept(&client, args.jobs).await?;
    } else {
        ok &= enqueue_bulk_with(&client, 0, args.jobs, |_| 0, priority).await?;
    }
    let stats = probe.command_stats().await?;
    let worker = WorkerProcess::start(workload, args).await?;
    let r = worker.finish().await?;
    let after = probe.command_stats().await?;
    let (sent, inner, _) = after.since(&stats);
    let topic = if args.keep {
        client.topic::<Kept>()
    } else {
        client.topic::<Order>()
    };
    let counts = topic.counts().await?;
    ok &= counts_ok(&counts, args.jobs, backlog);
    if r.handled != args.jobs {
        outln!(
            "  FAILED: {} handler runs for {} jobs",
            r.handled,
            args.jobs
        );
        ok = false;
    }
    let jobs_per_sec = rate(args.jobs, r.secs);
    let redis_us = r.redis_cpu_s * 1e6 / args.jobs as f64;
    let worker_us = r.cpu_s * 1e6 / args.jobs as f64;
    let per_job = |n: u64| n as f64 / args.jobs as f64;
    let io = workload == Workload::DrainIo;
    let floor_us = r.handler_floor_cpu_s * 1e6 / args.jobs as f64;
    outln!(
        "  {} jobs in {:.3} s: {jobs_per_sec:.0} jobs/s, concurrency {}; worker CPU {:.2} s ({:.1} us/job); \
         Redis CPU {:.3} s ({redis_us:.1} us/job)",
        args.jobs,
        r.secs,
        args.concurrency,
        r.cpu_s,
        worker_us,
        r.redis_cpu_s,
    );
    outln!(
        "  Redis commands: {sent} sent by the worker ({:.3} per job), {:.3} per job with calls inside \
         scripts: {}",
        per_job(sent),
        per_job(sent + inner),
        after.time_since(&stats)
    );
    if io {
        outln!(
            "  the handler alone (as many 1 ms sleeps on {} tasks of the worker's runtime, after the \
             drain): {floor_us:.1} us of CPU per sleep; the worker beyond it {:.1} us/job",
            args.concurrency,
            worker_us - floor_us
        );
    }
    let mut kept_bytes = None;
    if let Some(before) = memory_before {
        ok &= counts.done == args.jobs;
        kept_bytes = Some(round(
            kept_memory(probe, before, counts.done, args.jobs).await?,
            1,
        ));
    }
    Ok(Report {
        secs: Some(round(r.secs, 3)),
        kept_bytes_per_job: kept_bytes,
        jobs_per_sec: Some(round(jobs_per_sec, 0)),
        worker_cpu_s: Some(round(r.cpu_s, 2)),
        redis_cpu_s: Some(round(r.redis_cpu_s, 3)),
        redis_us_per_job: Some(round(redis_us, 2)),
        worker_us_per_job: Some(round(worker_us, 2)),
        commands_per_job: Some(round(per_job(sent + inner), 3)),
        sent_commands_per_job: Some(round(per_job(sent), 3)),
        handler_mean_ms: io.then(|| round(r.handler_mean_ms, 3)),
        handler_floor_us_per_job: io.then(|| round(floor_us, 2)),
        worker_us_beyond_handler: io.then(|| round(worker_us - floor_us, 2)),
        ok,
        ..Report::default()
    })
}

/// `--keep`: enqueues `n` [`Kept`] jobs due now with the bulk API, 1,000 per call; returns whether all
/// were created.
async fn enqueue_kept(client: &Client, n: u64) -> BoxResult<bool> {
    let mut ok = true;
    for first in (0..n).step_by(1000) {
        let items = (first..(first + 1000).min(n)).map(|k| EnqueueItem::new(Kept::new(k)));
        ok &= all_created(&client.enqueue_many(items).await?);
    }
    Ok(ok)
}

/// `--keep`, after the drain, `kept` of `jobs` kept: Redis `used_memory` now minus `before` (taken
/// before the enqueue) per job.
async fn kept_memory(probe: &mut Probe, before: i64, kept: u64, jobs: u64) -> BoxResult<f64> {
    let after = probe.used_memory().await?;
    let bytes = (after - before) as f64 / jobs as f64;
    outln!(
        "  kept {kept} finished jobs of {jobs}; Redis used_memory {:.1} MB more than before the enqueue: \
         {bytes:.0} bytes per kept job",
        (after - before) as f64 / f64::from(1 << 20)
    );
    if kept != jobs {
        outln!("  FAILED: {kept} finished jobs kept, not {jobs}");
    }
    Ok(bytes)
}
