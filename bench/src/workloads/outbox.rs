//! `outbox`: `--concurrency` tasks (default 64) each commit their share of `--jobs` (default 32,000: 500
//! each) PostgreSQL transactions, one after the other, each enqueueing one job through
//! postpone-postgres's [`Outbox`] (`BEGIN`, the outbox row, `COMMIT`, as a request handler does), while
//! one [`Relay`] with its defaults (woken by LISTEN/NOTIFY at commit, a poll every 1 s, 500 rows a round)
//! moves the rows to Redis. Figures: transactional enqueues/s (committed jobs over the time from the
//! first `BEGIN` to the last commit returned) and commit-to-queued p50/p99/max ms per job
//! (`commit_to_queued_p99_ms`).
//!
//! # What commit-to-queued measures, and how
//!
//! From the moment `tx.commit()` returned to the committing task (client side) to the moment the job
//! is in its topic's due set in Redis, claimable by any worker. Redis stamps that moment itself: an
//! immediate job's due time is the Redis clock (`TIME`, whole milliseconds, truncated) as read by the
//! relay's delivering script, in the same atomic step that adds the job to the due set. The harness
//! reads these stamps after the run from the operations API's listing (pages of 1,000), so nothing
//! watches the queue while it is measured: no worker claims (which would add its claim latency and its
//! own load, on a machine of 2 cores), nothing polls. Only once the last commit has returned does the
//! harness poll the topic's counts (every 5 ms) to learn when the relay is done.
//!
//! The commit instant is read from this process's system clock and put on the Redis clock by an offset
//! estimated before the run (a `TIME` reply against the midpoint of its round trip, the fastest of 50;
//! on loopback both are the same kernel clock and the offset is a few µs). Each value is
//! `stamp + 1 ms - commit`, the end of the stamped millisecond: an upper bound, at most 1 ms (plus the
//! offset's error) above the true commit-to-queued. PostgreSQL notifies the relay at commit, in
//! parallel with its reply to the committing task, and that task sees the reply only when the runtime
//! next polls it: a job can be queued before its task has seen its commit return, so `min_ms` can be
//! below 0 (those values are kept as they are).
//!
//! # Its table
//!
//! `postpone_bench_outbox`, in the PostgreSQL of `--database` (else `DATABASE_URL`, else
//! `postgres://postgres@127.0.0.1:5432/test`): dropped and created with `postpone_postgres::migrate`
//! at the start, dropped at the end of a run that passed (a failed run leaves it, as it leaves its
//! Redis, to look at). The pool allows `--concurrency` + 4 connections (the relay keeps one to listen
//! and takes one per round), sqlx's defaults otherwise; the tasks' connections are opened before the
//! clock starts, and a warm-up job goes through the relay first (loading its statements and the
//! delivering script). The run fails (exit 1) when a transaction failed, when a committed job is not in
//! Redis or a job is there that no returned commit wrote, or when rows are left in the outbox.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postpone::ops::{JobQuery, PageState, MAX_PAGE};
use postpone_postgres::{migrate, Outbox, Relay};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use super::{client, counts_ok, rate};
use crate::args::Args;
use crate::jobs::Order;
use crate::probe::Probe;
use crate::report::{percentile, round, Report};
use crate::BoxResult;

/// The workload's own table.
const TABLE: &str = "postpone_bench_outbox";
const DROP_TABLE: &str = "DROP TABLE IF EXISTS postpone_bench_outbox";
/// Connections beyond the tasks': the relay's listener and its rounds, and the harness's own.
const SPARE_CONNECTIONS: usize = 4;
/// BENCHMARKS.md's target for commit-to-queued p99, ms (counted against in the human lines).
const TARGET_MS: f64 = 20.0;

/// The id of order `i`'s job.
fn job_id(i: u64) -> String {
    format!("order:{i}")
}

/// This process's system clock, µs since the epoch.
fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A database URL without its password, for printing.
fn redact(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user, host)) if user.contains(':') => {
                let name = user.split(':').next().unwrap_or_default();
                format!("{scheme}://{name}:***@{host}")
            }
            _ => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// The Redis clock minus this process's system clock, µs, and the round trip it was read in (µs): the
/// fastest of `samples` `TIME` calls, against the midpoint of its round trip.
async fn clock_offset(probe: &mut Probe, samples: u32) -> BoxResult<(i64, i64)> {
    let mut best: Option<(i64, i64)> = None;
    for _ in 0..samples {
        let before = wall_us();
        let began = Instant::now();
        let redis = probe.time_us().await?;
        let rtt = i64::try_from(began.elapsed().as_micros()).unwrap_or(i64::MAX);
        if best.is_none_or(|(_, r)| rtt < r) {
            best = Some((redis - (before + rtt / 2), rtt));
        }
    }
    best.ok_or_else(|| "no TIME sample".into())
}

/// What one task saw.
#[derive(Default)]
struct TaskResult {
    /// Per committed job: its order id, when its commit returned (this process's clock, µs), and how
    /// long its transaction took from `BEGIN` to the commit returned (ms).
    committed: Vec<(u64, i64, f64)>,
    /// Failed transactions, by message.
    errors: BTreeMap<String, u64>,
}

/// One transaction that enqueues order `i` through the outbox.
async fn commit_one(pool: &PgPool, outbox: &Outbox, i: u64) -> BoxResult<()> {
    let mut tx = pool.begin().await?;
    outbox
        .enqueue(Order::new(i))
        .id(job_id(i))
        .write(&mut tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Every job of the topic and its due time by the Redis clock (ms), from the listing.
async fn queued_stamps(client: &postpone::Client) -> BoxResult<HashMap<String, i64>> {
    let topic = client.topic::<Order>();
    let mut out = HashMap::new();
    let mut query = JobQuery::new(PageState::Scheduled).limit(MAX_PAGE);
    loop {
        let page = topic.jobs(&query).await?;
        for job in page.jobs {
            out.insert(job.id, job.at.timestamp_millis());
        }
        match page.next {
            Some(cursor) => query = query.cursor(cursor),
            None => return Ok(out),
        }
    }
}

pub(super) async fn run(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    let tasks = args.concurrency;
    let database = redact(&args.database);
    let pool = PgPoolOptions::new()
        .max_connections(u32::try_from(tasks + SPARE_CONNECTIONS)?)
        .acquire_timeout(Duration::from_secs(30))
        .connect(&args.database)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL at {database}: {e}"))?;
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&pool)
        .await?;
    sqlx::query(DROP_TABLE).execute(&pool).await?;
    migrate(&mut *pool.acquire().await?, TABLE).await?;
    outln!(
        "  PostgreSQL {version} at {database}, table {TABLE}; {tasks} tasks, a pool of {} connections",
        tasks + SPARE_CONNECTIONS
    );

    let outbox = Outbox::new(&client).table(TABLE)?;
    let relay = Relay::new(&outbox, pool.clone());
    let stop = relay.shutdown_handle();
    let relaying = tokio::spawn(relay.run());

    // Open the tasks' connections now, not on the clock.
    let mut held = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        held.push(pool.acquire().await?);
    }
    drop(held);
    // A job through the relay, due in an hour (so no one could claim it), then cancelled.
    let topic = client.topic::<Order>();
    let mut tx = pool.begin().await?;
    outbox
        .enqueue(Order::new(0))
        .id("warm-up")
        .after(Duration::from_secs(3600))
        .write(&mut tx)
        .await?;
    tx.commit().await?;
    let warm = Instant::now();
    while topic.job("warm-up").await?.is_none() {
        if warm.elapsed() > Duration::from_secs(10) {
            return Err("the relay did not deliver the warm-up job within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    client.cancel::<Order>("warm-up").await?;
    let (offset_us, rtt_us) = clock_offset(probe, 50).await?;

    let n = tasks as u64;
    let start = Instant::now();
    let start_wall = wall_us();
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..n {
        // Task t commits order ids [t * jobs / n, (t + 1) * jobs / n): `jobs` in all.
        let (first, end) = (t * args.jobs / n, (t + 1) * args.jobs / n);
        let (pool, outbox) = (pool.clone(), outbox.clone());
        handles.push(tokio::spawn(async move {
            let mut r = TaskResult {
                committed: Vec::with_capacity((end - first) as usize),
                ..TaskResult::default()
            };
            for i in first..end {
                let began = Instant::now();
                match commit_one(&pool, &outbox, i).await {
                    Ok(()) => {
                        let at = wall_us();
                        r.committed
                            .push((i, at, began.elapsed().as_secs_f64() * 1e3));
                    }
                    Err(e) => *r.errors.entry(e.to_string()).or_default() += 1,
                }
            }
            r
        }));
    }
    let mut all = TaskResult::default();
    for h in handles {
        let r = h.await?;
        all.committed.extend(r.committed);
        for (m, k) in r.errors {
            *all.errors.entry(m).or_default() += k;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let committed = all.committed.len() as u64;
    let errors: u64 = all.errors.values().sum();
    let mut ok = errors == 0;

    // Wait for the relay to have queued every committed job, then stop it (its round finishes).
    let limit = Duration::from_secs(30 + args.jobs / 1000);
    let waiting = Instant::now();
    loop {
        let c = topic.counts().await?;
        if c.scheduled + c.ready >= committed {
            break;
        }
        if waiting.elapsed() > limit {
            outln!(
                "  FAILED: {} of {committed} committed jobs in Redis {limit:?} after the last commit",
                c.scheduled + c.ready
            );
            ok = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.shutdown();
    relaying.await??;
    let left = outbox.stats(&mut *pool.acquire().await?).await?;
    let counts = topic.counts().await?;
    ok &= counts_ok(&counts, 0, committed);
    let mut stamps = queued_stamps(&client).await?;
    let listed = stamps.len();

    // Commit-to-queued per job, ms (the end of the stamped millisecond, less the commit on the Redis
    // clock), with the commit's time since the start (s).
    let mut lat: Vec<(f64, f64)> = Vec::with_capacity(all.committed.len());
    let mut missing = 0u64;
    let mut last_queued_ms = i64::MIN;
    let mut last_commit_us = i64::MIN;
    for (i, commit_us, _) in &all.committed {
        last_commit_us = last_commit_us.max(*commit_us);
        match stamps.remove(&job_id(*i)) {
            Some(ms) => {
                last_queued_ms = last_queued_ms.max(ms);
                let queued_us = (ms + 1) * 1000;
                lat.push((
                    (queued_us - (commit_us + offset_us)) as f64 / 1e3,
                    (commit_us - start_wall) as f64 / 1e6,
                ));
            }
            None => missing += 1,
        }
    }
    let extra = stamps.len();

    let mut tx_ms: Vec<f64> = all.committed.iter().map(|c| c.2).collect();
    tx_ms.sort_by(f64::total_cmp);
    let mut ms: Vec<f64> = lat.iter().map(|l| l.0).collect();
    ms.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&ms, 50.0), percentile(&ms, 99.0));
    let (min, max) = (
        ms.first().copied().unwrap_or(f64::NAN),
        ms.last().copied().unwrap_or(f64::NAN),
    );
    let jobs_per_sec = rate(committed, secs);
    outln!(
        "  {committed} transactions from {tasks} tasks in {secs:.3} s: {jobs_per_sec:.0} transactional \
         enqueues/s; each (BEGIN, outbox row, COMMIT) p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
        percentile(&tx_ms, 50.0),
        percentile(&tx_ms, 99.0),
        tx_ms.last().copied().unwrap_or(f64::NAN),
    );
    outln!(
        "  commit-to-queued (commit returned -> in Redis's due set, by the Redis clock, upper bound \
         within 1 ms): p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.1} ms, min {min:.2} ms; below 0 \
         (queued before its task saw the commit return): {}, over {TARGET_MS} ms: {}, over 1 s: {}",
        ms.iter().filter(|l| **l < 0.0).count(),
        ms.iter().filter(|l| **l > TARGET_MS).count(),
        ms.iter().filter(|l| **l > 1000.0).count(),
    );
    let mut worst = lat.clone();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    let list: Vec<String> = worst
        .iter()
        .take(5)
        .map(|(l, at)| format!("{l:.1} ms committed at +{at:.3} s"))
        .collect();
    outln!("  slowest: {}", list.join(", "));
    if last_queued_ms > i64::MIN {
        outln!(
            "  the last job was queued {:.1} ms after the last commit returned; clocks: Redis - this \
             process {offset_us} us (TIME round trip {rtt_us} us)",
            ((last_queued_ms + 1) * 1000 - (last_commit_us + offset_us)) as f64 / 1e3
        );
    }
    outln!(
        "  {committed} committed, {errors} failed; Redis holds {listed} jobs ({missing} committed ones \
         missing, {extra} not from a returned commit); the outbox holds {} rows ({} failing)",
        left.rows, left.failing
    );
    for (m, k) in &all.errors {
        outln!("  FAILED: {k} transactions returned: {m}");
    }
    if missing > 0 || extra > 0 || left.rows > 0 || left.failing > 0 {
        outln!("  FAILED: jobs lost, unexpected or left in the outbox");
        ok = false;
    }
    if ok {
        sqlx::query(DROP_TABLE).execute(&pool).await?;
    } else {
        outln!("  the table {TABLE} is left as it is, to look at");
    }
    pool.close().await;
    Ok(Report {
        secs: Some(round(secs, 3)),
        jobs_per_sec: Some(round(jobs_per_sec, 0)),
        p50_ms: Some(round(p50, 3)),
        p99_ms: Some(round(p99, 3)),
        max_ms: Some(round(max, 3)),
        min_ms: Some(round(min, 3)),
        commit_to_queued_p99_ms: Some(round(p99, 3)),
        errors: Some(errors),
        tasks: Some(tasks),
        ok,
        ..Report::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_urls_hide_the_password() {
        assert_eq!(
            redact("postgres://app:secret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        let plain = "postgres://postgres@127.0.0.1:5432/test";
        assert_eq!(redact(plain), plain);
        assert_eq!(redact("nonsense"), "nonsense");
    }
}
