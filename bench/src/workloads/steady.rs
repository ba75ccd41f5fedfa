//! `steady`: load as in production. 64 producers (a web backend's request handlers) enqueue one job at a
//! time, each awaited, through one client, on a fixed schedule of `--rate` jobs/s for `--secs` s; 10 % of
//! the jobs are delayed by 0-5 s and 1 % fail their first attempt (retried at once). A worker process with
//! concurrency 50 runs a handler that sleeps 2 ms, and records how late each job started by the Redis
//! clock, as `delayed` does: the start lag.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{client, counts_ok_retried, rate, warm_up};
use crate::args::{Args, Workload};
use crate::child::{ChildReport, WorkerProcess};
use crate::handlers::STEADY_HANDLER;
use crate::jobs::{steady, Order};
use crate::probe::Probe;
use crate::report::{own_cpu_s, percentile, round, Report};
use crate::BoxResult;

/// The producing tasks.
const PRODUCERS: u64 = 64;

/// The span of time over which start lag is summed up on its own line.
const WINDOW_MS: i64 = 10_000;

/// The target of BENCHMARKS.md: start lag p99 at most this, ms; starts later than it are looked at.
const TARGET_MS: f64 = 5.0;

/// What the producers saw.
#[derive(Default)]
struct Produced {
    /// Per enqueue: ms, awaited.
    latencies: Vec<f64>,
    /// Enqueues that returned Ok with a status other than `Created` (none expected).
    not_created: u64,
    /// Errors, by message.
    errors: BTreeMap<String, u64>,
    /// The jobs whose enqueue did not create them.
    missing: Vec<u64>,
    /// The most an enqueue began behind its place in the schedule, ms.
    behind_ms: f64,
}

pub(super) async fn run(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    warm_up(&client).await?;
    let mut worker = WorkerProcess::start(Workload::Steady, args).await?;
    let retries = (0..args.jobs).filter(|&k| steady::fails_once(k)).count() as u64;
    let delayed = (0..args.jobs).filter_map(steady::delay_ms).count();
    outln!(
        "  rate {} jobs/s from {PRODUCERS} producers for {} s: {} jobs, {delayed} delayed by 0-{} s, \
         {retries} failing once; worker concurrency {}, handler sleeps {} ms",
        args.rate,
        args.secs,
        args.jobs,
        steady::MAX_DELAY_MS / 1000,
        args.concurrency,
        STEADY_HANDLER.as_millis(),
    );
    let stats = probe.command_stats().await?;
    let client_cpu = own_cpu_s();
    let start = Instant::now();
    let produced = produce(&client, args, start).await?;
    let enqueue_secs = start.elapsed().as_secs_f64();
    let client_cpu = own_cpu_s() - client_cpu;
    outln!(
        "  enqueued in {enqueue_secs:.3} s: {:.0} jobs/s; the latest enqueue began {:.1} ms behind its \
         schedule; waiting for the jobs",
        rate(args.jobs, enqueue_secs),
        produced.behind_ms,
    );
    let errors: u64 = produced.errors.values().sum();
    for (m, n) in &produced.errors {
        outln!("  FAILED: {n} enqueues returned: {m}");
    }
    let mut ok = errors == 0 && produced.not_created == 0;
    // The worker waits for the jobs that exist.
    let created = args.jobs - produced.missing.len() as u64;
    let retries = retries
        - produced
            .missing
            .iter()
            .filter(|&&k| steady::fails_once(k))
            .count() as u64;
    worker.expect(created).await?;
    let r = worker.finish().await?;
    let after = probe.command_stats().await?;

    let counts = client.topic::<Order>().counts().await?;
    ok &= counts_ok_retried(&counts, created, 0, retries);
    if r.handled != created || r.lateness_ms.len() as u64 != created {
        outln!(
            "  FAILED: {} jobs ran of {created} created (their enqueue returned Created): {} lost",
            r.handled,
            created.saturating_sub(r.handled)
        );
        ok = false;
    }

    let lag = sorted(r.lateness_ms.clone());
    let (p50, p99, max, min) = summary(&lag);
    outln!(
        "  start lag by the Redis clock (handler start - due), first attempts: p50 {p50:.2} ms, p99 \
         {p99:.2} ms, max {max:.2} ms, min {min:.2} ms"
    );
    print_breakdown(&r, args.concurrency);
    let mut enq = produced.latencies;
    enq.sort_by(f64::total_cmp);
    let (enq_p50, enq_p99, enq_max, _) = summary(&enq);
    outln!(
        "  per enqueue: p50 {enq_p50:.2} ms, p99 {enq_p99:.2} ms, max {enq_max:.1} ms, {errors} errors"
    );
    // The handler's share of the worker's slots (Little's law): jobs/s x attempts per job x the
    // sleep's real mean time, over the slots.
    let attempts = (args.jobs + retries) as f64 / args.jobs as f64;
    let ceiling = args.concurrency as f64 * 1e3 / r.handler_mean_ms.max(1e-9);
    let busy = args.rate as f64 * attempts / ceiling;
    outln!(
        "  the {} ms sleep took {:.3} ms on average: {} slots run at most {ceiling:.0} attempts/s; the \
         offered load keeps {:.0} % of them busy",
        STEADY_HANDLER.as_millis(),
        r.handler_mean_ms,
        args.concurrency,
        busy * 100.0,
    );
    if busy > 1.0 {
        outln!(
            "  OVERLOADED: the jobs come faster than the slots can run them; the lag grows through the \
             run instead of holding steady (try --rate {:.0}, half the slots' ceiling)",
            ceiling / attempts / 2.0
        );
    }
    let per_job = |x: f64| x * 1e6 / args.jobs as f64;
    outln!(
        "  worker CPU {:.2} s ({:.1} us/job) over {:.1} s; Redis CPU {:.2} s ({:.1} us/job, enqueues \
         and the handlers' TIME included); producers' CPU {client_cpu:.2} s ({:.1} us/job)",
        r.cpu_s,
        per_job(r.cpu_s),
        r.secs,
        r.redis_cpu_s,
        per_job(r.redis_cpu_s),
        per_job(client_cpu),
    );
    let (floor_us, floor_redis_us) = (
        per_job(r.handler_floor_cpu_s),
        per_job(r.handler_floor_redis_cpu_s),
    );
    let (beyond_us, beyond_redis_us) = (
        per_job(r.cpu_s) - floor_us,
        per_job(r.redis_cpu_s) - floor_redis_us,
    );
    outln!(
        "  the handler alone (its TIME round trip and 2 ms sleep, replayed at {} runs/s after the \
         worker stopped): worker {floor_us:.1}, Redis {floor_redis_us:.1} us of CPU per job; beyond \
         it, the worker {beyond_us:.1} and Redis {beyond_redis_us:.1} us/job",
        args.rate,
    );
    outln!("  Redis commands: {}", after.time_since(&stats));
    Ok(Report {
        secs: Some(round(enqueue_secs, 3)),
        jobs_per_sec: Some(round(rate(args.jobs, enqueue_secs), 0)),
        worker_cpu_s: Some(round(r.cpu_s, 2)),
        client_cpu_s: Some(round(client_cpu, 2)),
        redis_cpu_s: Some(round(r.redis_cpu_s, 3)),
        p50_ms: Some(round(p50, 3)),
        p99_ms: Some(round(p99, 3)),
        max_ms: Some(round(max, 3)),
        min_ms: Some(round(min, 3)),
        rate: Some(args.rate),
        start_lag_p50_ms: Some(round(p50, 3)),
        start_lag_p99_ms: Some(round(p99, 3)),
        start_lag_max_ms: Some(round(max, 3)),
        enqueue_p99_ms: Some(round(enq_p99, 3)),
        errors: Some(errors),
        tasks: Some(PRODUCERS as usize),
        redis_us_per_job: Some(round(per_job(r.redis_cpu_s), 2)),
        worker_us_per_job: Some(round(per_job(r.cpu_s), 2)),
        handler_mean_ms: Some(round(r.handler_mean_ms, 3)),
        handler_floor_us_per_job: Some(round(floor_us, 2)),
        worker_us_beyond_handler: Some(round(beyond_us, 2)),
        handler_floor_redis_us_per_job: Some(round(floor_redis_us, 2)),
        redis_us_beyond_handler: Some(round(beyond_redis_us, 2)),
        ok,
        ..Report::default()
    })
}

/// Runs the producers: job `k` is enqueued `k / rate` s after `start`, by producer `k % PRODUCERS`,
/// awaited; a producer that falls behind its schedule catches up without sleeping.
async fn produce(client: &postpone::Client, args: &Args, start: Instant) -> BoxResult<Produced> {
    let mut handles = Vec::with_capacity(PRODUCERS as usize);
    for p in 0..PRODUCERS {
        let client = client.clone();
        let (jobs, rate) = (args.jobs, args.rate);
        handles.push(tokio::spawn(async move {
            let mut out = Produced {
                latencies: Vec::with_capacity((jobs / PRODUCERS + 1) as usize),
                ..Produced::default()
            };
            for k in (p..jobs).step_by(PRODUCERS as usize) {
                let at = start + Duration::from_nanos(k * 1_000_000_000 / rate);
                tokio::time::sleep_until(at.into()).await;
                let began = Instant::now();
                out.behind_ms = out
                    .behind_ms
                    .max(began.saturating_duration_since(at).as_secs_f64() * 1e3);
                let mut enqueue = client.enqueue(Order::new(k));
                if let Some(ms) = steady::delay_ms(k) {
                    enqueue = enqueue.after(Duration::from_millis(ms));
                }
                let done = enqueue.await;
                out.latencies.push(began.elapsed().as_secs_f64() * 1e3);
                match done {
                    Ok(e) if e.status == postpone::EnqueueStatus::Created => continue,
                    Ok(_) => out.not_created += 1,
                    Err(e) => *out.errors.entry(e.to_string()).or_default() += 1,
                }
                out.missing.push(k);
            }
            out
        }));
    }
    let mut all = Produced::default();
    for h in handles {
        let r = h.await?;
        all.latencies.extend(r.latencies);
        all.not_created += r.not_created;
        all.missing.extend(r.missing);
        all.behind_ms = all.behind_ms.max(r.behind_ms);
        for (m, n) in r.errors {
            *all.errors.entry(m).or_default() += n;
        }
    }
    Ok(all)
}

/// Where the lag is: immediate against delayed jobs, retries, the measurement's own round trip, starts
/// that waited for a slot, each 10 s of the run, the latest starts.
fn print_breakdown(r: &ChildReport, concurrency: usize) {
    let (mut immediate, mut delayed) = (Vec::new(), Vec::new());
    for (late, id) in r.lateness_ms.iter().zip(&r.order_ids) {
        match steady::delay_ms(*id) {
            Some(_) => delayed.push(*late),
            None => immediate.push(*late),
        }
    }
    for (name, v) in [
        ("immediate jobs", immediate),
        ("delayed jobs", delayed),
        ("retries (from the failure)", r.retry_lateness_ms.clone()),
    ] {
        let v = sorted(v);
        let (p50, p99, max, _) = summary(&v);
        outln!(
            "    {name}: {} starts, p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
            v.len()
        );
    }
    let rtt = sorted(r.clock_rtt_ms.clone());
    let (p50, p99, max, _) = summary(&rtt);
    outln!(
        "    the handler's TIME round trip (about half of it is in the lag): p50 {p50:.2} ms, p99 \
         {p99:.2} ms, max {max:.2} ms"
    );
    // A job that started with (nearly) every slot busy may have waited for one: the handlers' time.
    let full = concurrency.saturating_sub(concurrency / 10).max(1) as u32;
    let late: Vec<u32> = r
        .lateness_ms
        .iter()
        .zip(&r.busy)
        .filter(|(l, _)| **l > TARGET_MS)
        .map(|(_, b)| *b)
        .collect();
    let at_full = late.iter().filter(|b| **b >= full).count();
    outln!(
        "    starts later than {TARGET_MS} ms: {} ({:.2} %); {at_full} of them with {full} or more of the \
         {concurrency} slots busy (waited for a slot, likely), {} with slots free",
        late.len(),
        late.len() as f64 * 100.0 / r.lateness_ms.len().max(1) as f64,
        late.len() - at_full,
    );
    let Some(first_due) = r.due_ms.iter().min().copied() else {
        return;
    };
    let mut windows: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for (late, due) in r.lateness_ms.iter().zip(&r.due_ms) {
        windows
            .entry((due - first_due) / WINDOW_MS)
            .or_default()
            .push(*late);
    }
    let line: Vec<String> = windows
        .into_iter()
        .map(|(w, v)| {
            let v = sorted(v);
            let (_, p99, max, _) = summary(&v);
            format!("{}-{} s {p99:.1}/{max:.1}", w * 10, w * 10 + 10)
        })
        .collect();
    outln!("    p99/max ms by due time: {}", line.join(", "));
    outln!(
        "    latest starts: {}",
        super::delayed::latest_starts(r, first_due)
    );
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// p50, p99, max and min of sorted values (NaN when empty).
fn summary(sorted: &[f64]) -> (f64, f64, f64, f64) {
    (
        percentile(sorted, 50.0),
        percentile(sorted, 99.0),
        sorted.last().copied().unwrap_or(f64::NAN),
        sorted.first().copied().unwrap_or(f64::NAN),
    )
}
