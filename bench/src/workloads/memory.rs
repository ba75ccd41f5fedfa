//! `memory`: Redis `used_memory` per job for jobs due in an hour.

use super::{client, counts_ok, enqueue_bulk, warm_up};
use crate::args::Args;
use crate::jobs::Order;
use crate::probe::Probe;
use crate::report::{round, Report};
use crate::BoxResult;

pub(super) async fn run(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    // The topic's keys and the scripts exist before the first measurement.
    warm_up(&client).await?;
    let before = probe.used_memory().await?;
    let ok = enqueue_bulk(&client, 0, args.jobs, |_| 3_600_000).await?;
    let after = probe.used_memory().await?;
    let counts = client.topic::<Order>().counts().await?;
    let ok = ok && counts_ok(&counts, 0, args.jobs);
    let per_job = (after - before) as f64 / args.jobs as f64;
    outln!(
        "  {} jobs due in an hour: used_memory {before} -> {after} bytes, {per_job:.0} bytes per job",
        args.jobs
    );
    Ok(Report {
        bytes_per_job: Some(round(per_job, 1)),
        ok,
        ..Report::default()
    })
}
