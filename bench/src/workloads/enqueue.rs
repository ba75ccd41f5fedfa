//! `enqueue` (one at a time, each awaited) and `enqueue-bulk` (1,000 per call).

use std::time::Instant;

use super::{all_created, client, counts_ok, rate, warm_up};
use crate::args::Args;
use crate::jobs::Order;
use crate::probe::Probe;
use crate::report::{own_cpu_s, round, Report};
use crate::BoxResult;

/// `enqueue`: one task, one job per call, each awaited.
pub(super) async fn single(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    warm_up(&client).await?;
    // The floor of one-at-a-time work on this machine now: a PING round trip, before and after.
    let ping_before = probe.ping_us(PINGS).await?;
    let cpu = (probe.cpu_s().await?, own_cpu_s());
    let start = Instant::now();
    let mut created = true;
    for i in 0..args.jobs {
        let done = client.enqueue(Order::new(i)).await?;
        created &= done.status == postpone::EnqueueStatus::Created;
    }
    let secs = start.elapsed().as_secs_f64();
    let mut report = finish(args, probe, &client, cpu, secs, created).await?;
    let ping = (ping_before + probe.ping_us(PINGS).await?) / 2.0;
    println!(
        "  round-trip floor: a PING from this process takes {ping:.1} us (at most {:.0} round trips/s, \
         one at a time); an enqueue took {:.1} us",
        1e6 / ping,
        secs * 1e6 / args.jobs as f64
    );
    report.ping_us = Some(round(ping, 1));
    Ok(report)
}

/// PINGs timed for the round-trip floor.
const PINGS: u32 = 3000;

/// `enqueue-bulk`: `enqueue_many` with 1,000 jobs per call.
pub(super) async fn bulk(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    warm_up(&client).await?;
    let cpu = (probe.cpu_s().await?, own_cpu_s());
    let start = Instant::now();
    let mut created = true;
    let mut i = 0;
    while i < args.jobs {
        let end = (i + 1000).min(args.jobs);
        created &= all_created(&client.enqueue_many((i..end).map(Order::new)).await?);
        i = end;
    }
    let secs = start.elapsed().as_secs_f64();
    finish(args, probe, &client, cpu, secs, created).await
}

async fn finish(
    args: &Args,
    probe: &mut Probe,
    client: &postpone::Client,
    (redis_before, client_before): (f64, f64),
    secs: f64,
    created: bool,
) -> BoxResult<Report> {
    let client_cpu = own_cpu_s() - client_before;
    let redis_cpu = probe.cpu_s().await? - redis_before;
    let counts = client.topic::<Order>().counts().await?;
    let ok = created && counts_ok(&counts, 0, args.jobs);
    let jobs_per_sec = rate(args.jobs, secs);
    let us = |cpu: f64| cpu * 1e6 / args.jobs as f64;
    println!(
        "  {} jobs in {secs:.3} s: {jobs_per_sec:.0} jobs/s, {:.1} us each; client CPU {client_cpu:.2} s \
         ({:.1} us/job); Redis CPU {redis_cpu:.3} s ({:.1} us/job)",
        args.jobs,
        secs * 1e6 / args.jobs as f64,
        us(client_cpu),
        us(redis_cpu),
    );
    Ok(Report {
        secs: Some(round(secs, 3)),
        jobs_per_sec: Some(round(jobs_per_sec, 0)),
        client_cpu_s: Some(round(client_cpu, 2)),
        redis_cpu_s: Some(round(redis_cpu, 3)),
        redis_us_per_job: Some(round(redis_cpu * 1e6 / args.jobs as f64, 2)),
        ok,
        ..Report::default()
    })
}
