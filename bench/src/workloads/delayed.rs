//! `delayed`: jobs due at random times over 10 s (after a 1 s lead); the worker records how late each
//! handler started, by the Redis clock.

use std::time::{SystemTime, UNIX_EPOCH};

use super::{client, counts_ok, enqueue_bulk};
use crate::args::{Args, Workload};
use crate::child::WorkerProcess;
use crate::jobs::{splitmix, Order};
use crate::probe::Probe;
use crate::report::{percentile, round, Report};
use crate::BoxResult;

const LEAD_MS: u64 = 1_000;
const SPREAD_MS: u64 = 10_000;

pub(super) async fn run(args: &Args, _probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    let worker = WorkerProcess::start(Workload::Delayed, args).await?;
    let seed = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
    let ok = enqueue_bulk(&client, 0, args.jobs, |i| {
        LEAD_MS + splitmix(seed ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d)) % SPREAD_MS
    })
    .await?;
    outln!(
        "  {} jobs due over {} s after {} s; waiting for them",
        args.jobs,
        SPREAD_MS / 1000,
        LEAD_MS / 1000
    );
    let r = worker.finish().await?;
    let counts = client.topic::<Order>().counts().await?;
    let mut ok = ok && counts_ok(&counts, args.jobs, 0);
    if r.handled != args.jobs || r.lateness_ms.len() as u64 != args.jobs {
        outln!(
            "  FAILED: {} handler runs for {} jobs",
            r.handled,
            args.jobs
        );
        ok = false;
    }
    if let Some(first_due) = r.due_ms.iter().min() {
        outln!("  latest starts: {}", latest_starts(&r, *first_due));
    }
    let mut late = r.lateness_ms;
    late.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&late, 50.0), percentile(&late, 99.0));
    let (min, max) = (late[0], late[late.len() - 1]);
    outln!(
        "  lateness by the Redis clock (handler start - due): p50 {p50:.2} ms, p99 {p99:.2} ms, \
         max {max:.2} ms, min {min:.2} ms"
    );
    if min < 0.0 {
        outln!("  FAILED: a job started {:.3} ms early", -min);
        ok = false;
    }
    Ok(Report {
        p50_ms: Some(round(p50, 3)),
        p99_ms: Some(round(p99, 3)),
        max_ms: Some(round(max, 3)),
        min_ms: Some(round(min, 3)),
        ok,
        ..Report::default()
    })
}

/// The eight latest starts of a run (lateness, and due time from `first_due`), latest first.
pub(super) fn latest_starts(r: &crate::child::ChildReport, first_due: i64) -> String {
    let mut worst: Vec<(f64, i64)> = r
        .lateness_ms
        .iter()
        .copied()
        .zip(r.due_ms.iter().copied())
        .collect();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    let list: Vec<String> = worst
        .iter()
        .take(8)
        .map(|(l, d)| format!("{l:.1} ms at +{:.3} s", (d - first_due) as f64 / 1000.0))
        .collect();
    list.join(", ")
}
