//! `idle`: a worker with registered topics and no jobs; how many commands it sends Redis.

use std::time::Duration;

use crate::args::{Args, Workload};
use crate::child::WorkerProcess;
use crate::probe::Probe;
use crate::report::{round, Report};
use crate::BoxResult;

/// Left out before measuring: the worker's start (its first claim and dead-letter look per topic).
const WARM_UP: Duration = Duration::from_secs(1);

pub(super) async fn run(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let worker = WorkerProcess::start(Workload::Idle, args).await?;
    tokio::time::sleep(WARM_UP).await;
    let before = probe.command_stats().await?;
    tokio::time::sleep(Duration::from_secs(args.secs)).await;
    let after = probe.command_stats().await?;
    let r = worker.finish().await?;
    let (sent, inner, by_command) = after.since(&before);
    let secs = args.secs as f64;
    let per_sec = sent as f64 / secs;
    let per_topic = per_sec / args.topics as f64;
    outln!(
        "  {} topics, {} s: {sent} commands sent ({per_sec:.2}/s, {per_topic:.2}/s per topic); \
         {inner} calls inside scripts ({:.2}/s)",
        args.topics,
        args.secs,
        inner as f64 / secs
    );
    outln!("  by command: {by_command:?}");
    Ok(Report {
        secs: Some(secs),
        commands_per_sec: Some(round(per_sec, 3)),
        commands_per_sec_per_topic: Some(round(per_topic, 3)),
        script_calls_per_sec: Some(round(inner as f64 / secs, 3)),
        ok: r.handled == 0,
        ..Report::default()
    })
}
