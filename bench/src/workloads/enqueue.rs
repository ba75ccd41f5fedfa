//! `enqueue` (one at a time, each awaited), `enqueue-bulk` (1,000 per call) and `enqueue-concurrent`
//! (many tasks one at a time, each awaited, through one client).

use std::collections::BTreeMap;
use std::time::Instant;

use super::{all_created, client, counts_ok, rate, warm_up};
use crate::args::Args;
use crate::jobs::Order;
use crate::probe::Probe;
use crate::report::{own_cpu_s, percentile, round, Report};
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
    outln!(
        "  round-trip floor: a PING from this process takes {ping:.1} us (at most {:.0} round trips/s, \
         one at a time); an enqueue took {:.1} us",
        1e6 / ping,
        secs * 1e6 / args.jobs as f64
    );
    let (paired_ping, paired_enqueue) = paired(&client, probe, args.jobs).await?;
    outln!(
        "  in turn, {PAIRS} times: a PING {paired_ping:.1} us, then an enqueue {paired_enqueue:.1} us \
         ({:.2}x the PING)",
        paired_enqueue / paired_ping
    );
    report.ping_us = Some(round(ping, 1));
    report.paired_ping_us = Some(round(paired_ping, 1));
    report.paired_enqueue_us = Some(round(paired_enqueue, 1));
    report.enqueue_per_ping = Some(round(paired_enqueue / paired_ping, 2));
    Ok(report)
}

/// PING and enqueue pairs timed after the run.
const PAIRS: u64 = 2_000;

/// [`PAIRS`] times a PING then an enqueue (of orders numbered from `first`), each timed: their mean
/// times, microseconds. A round trip on a virtual machine can take twice as long one minute as the
/// next, as its vCPUs idle and wake; taken in turn, the two see the machine in the same state, so
/// their ratio is what an enqueue costs beside a round trip, whatever the minute.
async fn paired(client: &postpone::Client, probe: &mut Probe, first: u64) -> BoxResult<(f64, f64)> {
    let (mut ping, mut enqueue) = (0.0, 0.0);
    for i in first..first + PAIRS {
        ping += probe.ping_us(1).await?;
        let start = Instant::now();
        let done = client.enqueue(Order::new(i)).await?;
        enqueue += start.elapsed().as_secs_f64() * 1e6;
        if done.status != postpone::EnqueueStatus::Created {
            return Err(format!("a paired enqueue was not created: {:?}", done.status).into());
        }
    }
    Ok((ping / PAIRS as f64, enqueue / PAIRS as f64))
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
    outln!(
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

/// What one `enqueue-concurrent` task saw.
#[derive(Default)]
struct TaskResult {
    /// Per enqueue, Ok or not: (latency ms, when it started in s since the run's start).
    latencies: Vec<(f64, f64)>,
    /// Enqueues that returned Ok with `Created`.
    created: u64,
    /// Enqueues that returned Ok with another status (none expected: ids are generated).
    not_created: u64,
    /// Errors, by message.
    errors: BTreeMap<String, u64>,
}

/// `enqueue-concurrent`: `args.concurrency` tasks (a web backend's request handlers) each enqueue
/// their share of `args.jobs`, one at a time, each awaited, all through one `Client::connect` with
/// defaults. Errors are counted, not fatal; afterwards the topic must hold exactly the jobs whose
/// enqueue returned Ok.
pub(super) async fn concurrent(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    warm_up(&client).await?;
    let tasks = args.concurrency as u64;
    let stats = probe.command_stats().await?;
    let cpu = (probe.cpu_s().await?, own_cpu_s());
    let start = Instant::now();
    let mut handles = Vec::with_capacity(args.concurrency);
    for t in 0..tasks {
        // Task t enqueues order ids [t * jobs / tasks, (t + 1) * jobs / tasks): `jobs` in all.
        let (first, end) = (t * args.jobs / tasks, (t + 1) * args.jobs / tasks);
        let client = client.clone();
        handles.push(tokio::spawn(async move {
            let mut r = TaskResult {
                latencies: Vec::with_capacity((end - first) as usize),
                ..TaskResult::default()
            };
            for i in first..end {
                let began = Instant::now();
                let done = client.enqueue(Order::new(i)).await;
                r.latencies.push((
                    began.elapsed().as_secs_f64() * 1e3,
                    began.duration_since(start).as_secs_f64(),
                ));
                match done {
                    Ok(e) if e.status == postpone::EnqueueStatus::Created => r.created += 1,
                    Ok(_) => r.not_created += 1,
                    Err(e) => *r.errors.entry(e.to_string()).or_default() += 1,
                }
            }
            r
        }));
    }
    let mut all = TaskResult::default();
    for h in handles {
        let r = h.await?;
        all.latencies.extend(r.latencies);
        all.created += r.created;
        all.not_created += r.not_created;
        for (m, n) in r.errors {
            *all.errors.entry(m).or_default() += n;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let client_cpu = own_cpu_s() - cpu.1;
    let redis_cpu = probe.cpu_s().await? - cpu.0;
    let after = probe.command_stats().await?;
    let (sent, inner, _) = after.since(&stats);

    let errors: u64 = all.errors.values().sum();
    let returned_ok = all.created + all.not_created;
    let counts = client.topic::<Order>().counts().await?;
    let held = counts.scheduled + counts.ready;
    let mut ok = errors == 0 && all.not_created == 0;
    ok &= counts_ok(&counts, 0, returned_ok);

    let mut lat: Vec<f64> = all.latencies.iter().map(|l| l.0).collect();
    lat.sort_by(f64::total_cmp);
    let (p50, p99, max) = (
        percentile(&lat, 50.0),
        percentile(&lat, 99.0),
        lat.last().copied().unwrap_or(f64::NAN),
    );
    let jobs_per_sec = rate(args.jobs, secs);
    let per_job = |x: f64| x / args.jobs as f64;
    outln!(
        "  {} jobs from {tasks} tasks in {secs:.3} s: {jobs_per_sec:.0} jobs/s; client CPU {client_cpu:.2} s \
         ({:.1} us/job); Redis CPU {redis_cpu:.3} s ({:.1} us/job)",
        args.jobs,
        per_job(client_cpu * 1e6),
        per_job(redis_cpu * 1e6),
    );
    outln!(
        "  per enqueue: p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.1} ms; over 10 ms: {}, over 50 ms: {}, \
         over 1 s: {}",
        lat.iter().filter(|l| **l > 10.0).count(),
        lat.iter().filter(|l| **l > 50.0).count(),
        lat.iter().filter(|l| **l > 1000.0).count(),
    );
    let mut worst = all.latencies.clone();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    let list: Vec<String> = worst
        .iter()
        .take(5)
        .map(|(l, at)| format!("{l:.1} ms at +{at:.3} s"))
        .collect();
    outln!("  slowest: {}", list.join(", "));
    outln!(
        "  Redis commands: {:.3} per job ({sent} sent, {:.3} per job; {inner} calls inside scripts): {}",
        per_job((sent + inner) as f64),
        per_job(sent as f64),
        after.time_since(&stats)
    );
    outln!(
        "  {returned_ok} enqueues returned Ok ({} not Created), {errors} errors; the topic holds {held} jobs",
        all.not_created
    );
    for (m, n) in &all.errors {
        outln!("  FAILED: {n} enqueues returned: {m}");
    }
    Ok(Report {
        secs: Some(round(secs, 3)),
        jobs_per_sec: Some(round(jobs_per_sec, 0)),
        client_cpu_s: Some(round(client_cpu, 2)),
        redis_cpu_s: Some(round(redis_cpu, 3)),
        p50_ms: Some(round(p50, 3)),
        p99_ms: Some(round(p99, 3)),
        max_ms: Some(round(max, 3)),
        errors: Some(errors),
        tasks: Some(args.concurrency),
        redis_us_per_job: Some(round(per_job(redis_cpu * 1e6), 2)),
        commands_per_job: Some(round(per_job((sent + inner) as f64), 3)),
        sent_commands_per_job: Some(round(per_job(sent as f64), 3)),
        ok,
        ..Report::default()
    })
}
