//! `floor`: what Redis itself costs for a job's data, whatever the library around it. The commands that
//! a drained job and an enqueued job need on the structures postpone keeps (a sorted set of due jobs, a
//! hash of records, a sorted set of leases by deadline and a hash of leases, both kept in their hashed
//! encodings as the library keeps them) are sent bare: pipelined, in batches of the sizes the library's
//! calls carry, with no script, no check and no counter. Redis CPU per job over such a run is the
//! floor under `drain`'s and `enqueue-concurrent`'s `redis_us_per_job` on the same machine; what the
//! library spends above it is its scripts (atomicity, checks, counters, hints). Also a PING and an
//! awaited call of an empty script (`return 1`), one at a time: the floor under one awaited enqueue.

use redis::aio::MultiplexedConnection;

use crate::args::Args;
use crate::probe::Probe;
use crate::report::{round, Report};
use crate::BoxResult;

/// The keys (one hash tag, as a topic's).
const DUE: &str = "floor:{f}:due";
const JOBS: &str = "floor:{f}:jobs";
const ACTIVE: &str = "floor:{f}:active";
const LEASES: &str = "floor:{f}:leases";

/// Jobs per enqueue call: what 64 concurrent callers' coalesced enqueues carry (about 21; README,
/// "What bounds each workload").
const ENQUEUE_BATCH: usize = 21;

/// A lease as the library writes one: `<token>:<due ms>:<holder>`.
const LEASE: &str = "4132604414212040:1795691766881:3619571255361372";

/// Longer than Redis's largest listpack entry, as prelude_core.lua's marker: keeps `active` and
/// `leases` hashed while jobs come and go.
const MARKER: &str =
    "\u{1}floor: not a job id; keeps this key in its hashed encoding (as the library)";

/// Round trips of each kind, one at a time, for the awaited figures.
const ROUND_TRIPS: u32 = 5_000;

pub(super) async fn run(args: &Args, probe: &mut Probe) -> BoxResult<Report> {
    let mut conn = crate::probe::connection(&args.redis).await?;
    let record = record();
    let batch = args.concurrency.max(1);

    // Enqueue: HSET of the records and ZADD of the due times, one pipeline per batch.
    let cpu = probe.cpu_s().await?;
    for start in (0..args.jobs).step_by(ENQUEUE_BATCH) {
        let ids = ids(start, (start + ENQUEUE_BATCH as u64).min(args.jobs));
        let mut pipe = redis::pipe();
        pipe.cmd("HSET").arg(JOBS);
        for id in &ids {
            pipe.arg(id).arg(&record[..]);
        }
        pipe.ignore().cmd("ZADD").arg(DUE);
        for (k, id) in ids.iter().enumerate() {
            pipe.arg(1_795_691_797_159 + start + k as u64).arg(id);
        }
        pipe.ignore().query_async::<()>(&mut conn).await?;
    }
    let enqueue_us = (probe.cpu_s().await? - cpu) * 1e6 / args.jobs as f64;

    // Drain: per batch, the claim's commands (the due jobs, their removal, their leases and records)
    // and the acknowledgement's (the leases read and removed, the records removed).
    redis::pipe()
        .cmd("ZADD")
        .arg(ACTIVE)
        .arg("+inf")
        .arg(MARKER)
        .ignore()
        .cmd("HSET")
        .arg(LEASES)
        .arg(MARKER)
        .arg("")
        .ignore()
        .query_async::<()>(&mut conn)
        .await?;
    let cpu = probe.cpu_s().await?;
    let mut drained = 0u64;
    loop {
        let (due,): (Vec<(String, String)>,) = redis::pipe()
            .cmd("ZRANGE")
            .arg(DUE)
            .arg(0)
            .arg(batch - 1)
            .arg("WITHSCORES")
            .cmd("ZREMRANGEBYRANK")
            .arg(DUE)
            .arg(0)
            .arg(batch - 1)
            .ignore()
            .query_async(&mut conn)
            .await?;
        if due.is_empty() {
            break;
        }
        drained += claim_and_ack(&mut conn, &due).await?;
    }
    let drain_us = (probe.cpu_s().await? - cpu) * 1e6 / drained.max(1) as f64;

    let ping_us = probe.ping_us(ROUND_TRIPS).await?;
    let script_us = empty_script_us(&mut conn).await?;
    let ok = drained == args.jobs;
    outln!(
        "  Redis CPU per job, bare commands: enqueue {enqueue_us:.2} us (HSET + ZADD, {ENQUEUE_BATCH} \
         jobs a call), drain {drain_us:.2} us (claim and acknowledgement, {batch} jobs a call)"
    );
    outln!(
        "  (the floor under enqueue-concurrent's and drain's redis_us_per_job on this machine: what the \
         library spends above it is its scripts)"
    );
    outln!(
        "  one at a time, awaited: PING {ping_us:.1} us, an empty function (FCALL of return 1) \
         {script_us:.1} us"
    );
    if !ok {
        outln!("  FAILED: {drained} of {} jobs drained", args.jobs);
    }
    Ok(Report {
        ping_us: Some(round(ping_us, 1)),
        script_call_us: Some(round(script_us, 1)),
        enqueue_floor_us_per_job: Some(round(enqueue_us, 2)),
        drain_floor_us_per_job: Some(round(drain_us, 2)),
        ok,
        ..Report::default()
    })
}

/// Leases the claimed jobs and reads their records, then acknowledges them; returns how many.
async fn claim_and_ack(
    conn: &mut MultiplexedConnection,
    due: &[(String, String)],
) -> BoxResult<u64> {
    let deadline = 1_795_691_827_159u64;
    let ids: Vec<&str> = due.iter().map(|(id, _)| id.as_str()).collect();
    let mut pipe = redis::pipe();
    pipe.cmd("ZADD").arg(ACTIVE);
    for id in &ids {
        pipe.arg(deadline).arg(id);
    }
    pipe.ignore().cmd("HSET").arg(LEASES);
    for id in &ids {
        pipe.arg(id).arg(LEASE);
    }
    pipe.ignore().cmd("HMGET").arg(JOBS).arg(&ids);
    let (records,): (Vec<Option<Vec<u8>>>,) = pipe.query_async(conn).await?;
    if records.iter().any(Option::is_none) {
        return Err("floor: a claimed job had no record".into());
    }
    let mut pipe = redis::pipe();
    pipe.cmd("HMGET").arg(LEASES).arg(&ids);
    for (cmd, key) in [("ZREM", ACTIVE), ("HDEL", LEASES), ("HDEL", JOBS)] {
        pipe.cmd(cmd).arg(key).arg(&ids).ignore();
    }
    let (leases,): (Vec<Option<String>>,) = pipe.query_async(conn).await?;
    if leases.iter().any(Option::is_none) {
        return Err("floor: a claimed job had no lease".into());
    }
    Ok(ids.len() as u64)
}

/// Microseconds per awaited FCALL of a function that returns 1, one at a time (loaded first): the
/// library's scripts run as functions (FCALL) on Redis 7.
async fn empty_script_us(conn: &mut MultiplexedConnection) -> BoxResult<f64> {
    const NAME: &str = "postpone_bench_floor";
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(format!(
            "#!lua name={NAME}\nredis.register_function('{NAME}', function() return 1 end)"
        ))
        .query_async::<String>(conn)
        .await?;
    let start = std::time::Instant::now();
    for _ in 0..ROUND_TRIPS {
        redis::cmd("FCALL")
            .arg(NAME)
            .arg(0)
            .query_async::<i64>(conn)
            .await?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUND_TRIPS))
}

/// A record as long as the library's for the benchmark's payload (a short header, then the JSON).
fn record() -> Vec<u8> {
    let mut out = b"\x01\xc9\xbc\x9f4".to_vec();
    out.extend_from_slice(
        &serde_json::to_vec(&crate::jobs::Order::new(12_345)).expect("an order serializes"),
    );
    out
}

/// Ids `start..end`, each 11 characters as the library's.
fn ids(start: u64, end: u64) -> Vec<String> {
    (start..end).map(|i| format!("F{i:010}")).collect()
}
