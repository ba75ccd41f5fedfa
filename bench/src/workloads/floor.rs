//! `floor`: what Redis itself costs for a job's data, whatever the library around it. The commands that
//! a drained job and an enqueued job need on the structures postpone keeps (a sorted set of due jobs, a
//! hash of records, a sorted set of leases by deadline and a hash of leases, both kept in their hashed
//! encodings as the library keeps them) are sent bare: pipelined, in batches of the sizes the library's
//! calls carry, with no script, no check and no counter. Redis CPU per job over such a run is the
//! floor under `drain`'s and `enqueue-concurrent`'s `redis_us_per_job` on the same machine; what the
//! library spends above it is its scripts (atomicity, checks, counters, hints). Then the same
//! commands again, each call's inside one function (FCALL) that does nothing else (the enqueue's due
//! time read from Redis's clock, as every enqueue must): what any implementation that is atomic by
//! Lua scripts pays before it checks anything, the floor under the library's scripts. Also a PING, an
//! awaited call of an empty script (`return 1`) and of the least scripted enqueue (`TIME`, `HSETNX`,
//! `ZADD`), one at a time: the floors under one awaited enqueue. With `--pace MS`, the drains make one
//! call of C jobs every MS ms, as `drain-io`'s do at each millisecond tick: what Redis pays per job
//! when it sleeps between calls.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::args::Args;
use crate::pacer::Pacer;
use crate::probe::Probe;
use crate::report::{own_cpu_s, round, Report};
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
    load_functions(&mut conn).await?;
    if args.backlog > 0 {
        backlog(&mut conn, args.backlog, &record).await?;
    }

    let pace = Duration::from_millis(args.pace_ms);
    let bare = bare(&mut conn, probe, args.jobs, batch, pace, &record).await?;
    let scripted = scripted(&mut conn, probe, args.jobs, batch, pace, &record).await?;
    let ping_us = probe.ping_us(ROUND_TRIPS).await?;
    let script_us = empty_script_us(&mut conn).await?;
    let enqueue_one_us = scripted_enqueue_one_us(&mut conn, &record).await?;
    let ok = bare.drained == args.jobs && scripted.drained == args.jobs;
    let paced = match args.pace_ms {
        0 => String::new(),
        ms => format!(", one call every {ms} ms"),
    };
    for (how, f) in [("bare commands", &bare), ("in functions", &scripted)] {
        outln!(
            "  Redis CPU per job, {how}: enqueue {:.2} us (HSET + ZADD, {ENQUEUE_BATCH} jobs a call), \
             drain {:.2} us (claim and acknowledgement, {batch} jobs a call{paced}); this process's \
             CPU per drained job {:.2} us",
            f.enqueue_us,
            f.drain_us,
            f.client_drain_us
        );
    }
    outln!(
        "  (the floors under enqueue-concurrent's and drain's redis_us_per_job on this machine: bare, \
         what Redis's commands cost; in functions, what any implementation atomic by scripts costs; \
         what the library spends above that is its checks, counters and hints)"
    );
    outln!(
        "  one at a time, awaited: PING {ping_us:.1} us, an empty function (FCALL of return 1) \
         {script_us:.1} us, the least scripted enqueue (TIME, HSETNX, ZADD) {enqueue_one_us:.1} us \
         ({:.2}x the PING)",
        enqueue_one_us / ping_us
    );
    if !ok {
        outln!(
            "  FAILED: {} and {} of {} jobs drained",
            bare.drained,
            scripted.drained,
            args.jobs
        );
    }
    Ok(Report {
        ping_us: Some(round(ping_us, 1)),
        script_call_us: Some(round(script_us, 1)),
        scripted_enqueue_call_us: Some(round(enqueue_one_us, 1)),
        enqueue_floor_us_per_job: Some(round(bare.enqueue_us, 2)),
        drain_floor_us_per_job: Some(round(bare.drain_us, 2)),
        scripted_enqueue_floor_us_per_job: Some(round(scripted.enqueue_us, 2)),
        scripted_drain_floor_us_per_job: Some(round(scripted.drain_us, 2)),
        backlog: (args.backlog > 0).then_some(args.backlog),
        pace_ms: (args.pace_ms > 0).then_some(args.pace_ms),
        ok,
        ..Report::default()
    })
}

/// One floor's figures: Redis CPU per job of the enqueue and of the drain, this process's CPU per
/// drained job, and how many jobs were drained.
struct Floor {
    enqueue_us: f64,
    drain_us: f64,
    client_drain_us: f64,
    drained: u64,
}

impl Floor {
    /// A floor's figures, its drain measured from Redis's CPU `cpu` and this process's `own`.
    async fn measured(
        probe: &mut Probe,
        enqueue_us: f64,
        (cpu, own): (f64, f64),
        drained: u64,
    ) -> BoxResult<Floor> {
        Ok(Floor {
            enqueue_us,
            drain_us: (probe.cpu_s().await? - cpu) * 1e6 / drained.max(1) as f64,
            client_drain_us: (own_cpu_s() - own) * 1e6 / drained.max(1) as f64,
            drained,
        })
    }
}

/// The bare commands, pipelined.
async fn bare(
    conn: &mut MultiplexedConnection,
    probe: &mut Probe,
    jobs: u64,
    batch: usize,
    pace: Duration,
    record: &[u8],
) -> BoxResult<Floor> {
    // Enqueue: HSET of the records and ZADD of the due times, one pipeline per batch.
    let cpu = probe.cpu_s().await?;
    for start in (0..jobs).step_by(ENQUEUE_BATCH) {
        let ids = ids(start, (start + ENQUEUE_BATCH as u64).min(jobs));
        put(conn, &ids, record, |k| 1_795_691_797_159 + start + k as u64).await?;
    }
    let enqueue_us = (probe.cpu_s().await? - cpu) * 1e6 / jobs as f64;

    // Drain: per batch, the claim's commands (the due jobs, their removal, their leases and records)
    // and the acknowledgement's (the leases read and removed, the records removed).
    hashed(conn).await?;
    let (cpu, own) = (probe.cpu_s().await?, own_cpu_s());
    let mut drained = 0u64;
    let mut pacer = Pacer::new(pace);
    while drained < jobs {
        pacer.wait().await;
        // The last call takes only what is left of the floor's jobs (a backlog's come after them).
        let last = (batch as u64).min(jobs - drained) - 1;
        let (due,): (Vec<(String, String)>,) = redis::pipe()
            .cmd("ZRANGE")
            .arg(DUE)
            .arg(0)
            .arg(last)
            .arg("WITHSCORES")
            .cmd("ZREMRANGEBYRANK")
            .arg(DUE)
            .arg(0)
            .arg(last)
            .ignore()
            .query_async(conn)
            .await?;
        if due.is_empty() {
            break;
        }
        drained += claim_and_ack(conn, &due).await?;
    }
    Floor::measured(probe, enqueue_us, (cpu, own), drained).await
}

/// The lease set and hash in their hashed encodings, as the library keeps them.
async fn hashed(conn: &mut MultiplexedConnection) -> BoxResult<()> {
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
        .query_async::<()>(conn)
        .await?;
    Ok(())
}

/// The same commands, each call's inside one function that does nothing else (FUNCTIONS below).
async fn scripted(
    conn: &mut MultiplexedConnection,
    probe: &mut Probe,
    jobs: u64,
    batch: usize,
    pace: Duration,
    record: &[u8],
) -> BoxResult<Floor> {
    let cpu = probe.cpu_s().await?;
    for start in (0..jobs).step_by(ENQUEUE_BATCH) {
        let mut call = redis::cmd("FCALL");
        call.arg("postpone_bench_floor_enqueue")
            .arg(2)
            .arg(DUE)
            .arg(JOBS);
        for id in ids(start, (start + ENQUEUE_BATCH as u64).min(jobs)) {
            call.arg(id).arg(record);
        }
        call.query_async::<u64>(conn).await?;
    }
    let enqueue_us = (probe.cpu_s().await? - cpu) * 1e6 / jobs as f64;

    hashed(conn).await?;
    let (cpu, own) = (probe.cpu_s().await?, own_cpu_s());
    let mut drained = 0u64;
    let mut pacer = Pacer::new(pace);
    while drained < jobs {
        pacer.wait().await;
        let claimed: Vec<Vec<u8>> = redis::cmd("FCALL")
            .arg("postpone_bench_floor_claim")
            .arg(4)
            .arg(DUE)
            .arg(ACTIVE)
            .arg(LEASES)
            .arg(JOBS)
            .arg((batch as u64).min(jobs - drained) - 1)
            .arg(1_795_691_827_159u64)
            .arg(LEASE)
            .query_async(conn)
            .await?;
        if claimed.is_empty() {
            break;
        }
        let mut ack = redis::cmd("FCALL");
        ack.arg("postpone_bench_floor_ack")
            .arg(3)
            .arg(ACTIVE)
            .arg(LEASES)
            .arg(JOBS)
            .arg(LEASE);
        for job in claimed.chunks(3) {
            ack.arg(&job[0][..]);
        }
        let acked: u64 = ack.query_async(conn).await?;
        if acked as usize != claimed.len() / 3 {
            return Err("floor: a claimed job had no lease".into());
        }
        drained += acked;
    }
    Floor::measured(probe, enqueue_us, (cpu, own), drained).await
}

/// `--backlog`'s due time: later than any of the floor's jobs' (fixed, or Redis's clock at the run).
const BACKLOG_DUE: u64 = 4_000_000_000_000;

/// `--backlog`: `n` jobs due after the floor's (records and due times, as the floor's enqueue writes
/// them), added before it; the drains take only the floor's jobs. Not measured.
async fn backlog(conn: &mut MultiplexedConnection, n: u64, record: &[u8]) -> BoxResult<()> {
    const CALL: u64 = 1_000;
    for start in (0..n).step_by(CALL as usize) {
        let ids: Vec<String> = (start..(start + CALL).min(n))
            .map(|i| format!("B{i:010}"))
            .collect();
        put(conn, &ids, record, |_| BACKLOG_DUE).await?;
    }
    outln!("  beside a backlog of {n} jobs due after the floor's");
    Ok(())
}

/// The bare enqueue of `ids`: an `HSET` of their records and a `ZADD` of their due times (the `k`th
/// due at `due(k)`), in one pipeline.
async fn put(
    conn: &mut MultiplexedConnection,
    ids: &[String],
    record: &[u8],
    due: impl Fn(usize) -> u64,
) -> BoxResult<()> {
    let mut pipe = redis::pipe();
    pipe.cmd("HSET").arg(JOBS);
    for id in ids {
        pipe.arg(id).arg(record);
    }
    pipe.ignore().cmd("ZADD").arg(DUE);
    for (k, id) in ids.iter().enumerate() {
        pipe.arg(due(k)).arg(id);
    }
    pipe.ignore().query_async::<()>(conn).await?;
    Ok(())
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

/// The floor's functions, one library: an empty one; a batch enqueue (`HSET` and `ZADD`, due now on
/// Redis's clock); a claim (`ZRANGE` and `ZREMRANGEBYRANK` of the due jobs, `ZADD` and `HSET` of their
/// leases, `HMGET` of their records, returned with their ids and due times); an acknowledgement
/// (`HMGET` of the leases, each compared with the one given, `ZREM`, two `HDEL`s); and the least
/// single enqueue (`TIME`, `HSETNX`, `ZADD`). Numbers go to `redis.call` as strings, as the library's
/// scripts send them.
const FUNCTIONS: &str = r#"#!lua name=postpone_bench_floor
local function now_ms()
  local t = redis.call('TIME')
  return string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
redis.register_function('postpone_bench_floor', function() return 1 end)
redis.register_function('postpone_bench_floor_enqueue', function(keys, args)
  local now = now_ms()
  redis.call('HSET', keys[2], unpack(args))
  local z = {}
  for i = 1, #args, 2 do
    z[i], z[i + 1] = now, args[i]
  end
  redis.call('ZADD', keys[1], unpack(z))
  return #args / 2
end)
redis.register_function('postpone_bench_floor_claim', function(keys, args)
  local got = redis.call('ZRANGE', keys[1], '0', args[1], 'WITHSCORES')
  local n = #got / 2
  if n == 0 then
    return {}
  end
  redis.call('ZREMRANGEBYRANK', keys[1], '0', string.format('%d', n - 1))
  local ids, active, leases = {}, {}, {}
  for i = 1, n do
    local id = got[2 * i - 1]
    ids[i] = id
    active[2 * i - 1], active[2 * i] = args[2], id
    leases[2 * i - 1], leases[2 * i] = id, args[3]
  end
  redis.call('ZADD', keys[2], unpack(active))
  redis.call('HSET', keys[3], unpack(leases))
  local recs = redis.call('HMGET', keys[4], unpack(ids))
  local out = {}
  for i = 1, n do
    out[3 * i - 2], out[3 * i - 1], out[3 * i] = ids[i], got[2 * i], recs[i]
  end
  return out
end)
redis.register_function('postpone_bench_floor_ack', function(keys, args)
  local ids = { unpack(args, 2) }
  local held = redis.call('HMGET', keys[2], unpack(ids))
  local n = 0
  for i = 1, #ids do
    if held[i] == args[1] then
      n = n + 1
    end
  end
  redis.call('ZREM', keys[1], unpack(ids))
  redis.call('HDEL', keys[2], unpack(ids))
  redis.call('HDEL', keys[3], unpack(ids))
  return n
end)
redis.register_function('postpone_bench_floor_enqueue_one', function(keys, args)
  local now = now_ms()
  if redis.call('HSETNX', keys[2], args[1], args[2]) == 0 then
    return 0
  end
  redis.call('ZADD', keys[1], now, args[1])
  return 1
end)
"#;

/// Loads [`FUNCTIONS`] (replacing an earlier load).
async fn load_functions(conn: &mut MultiplexedConnection) -> BoxResult<()> {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(FUNCTIONS)
        .query_async::<String>(conn)
        .await?;
    Ok(())
}

/// Microseconds per awaited FCALL of a function that returns 1, one at a time: the library's scripts
/// run as functions (FCALL) on Redis 7.
async fn empty_script_us(conn: &mut MultiplexedConnection) -> BoxResult<f64> {
    let start = std::time::Instant::now();
    for _ in 0..ROUND_TRIPS {
        redis::cmd("FCALL")
            .arg("postpone_bench_floor")
            .arg(0)
            .query_async::<i64>(conn)
            .await?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUND_TRIPS))
}

/// Microseconds per awaited FCALL of the least single enqueue (a new job each), one at a time; the
/// jobs are removed after.
async fn scripted_enqueue_one_us(
    conn: &mut MultiplexedConnection,
    record: &[u8],
) -> BoxResult<f64> {
    let ids = ids(0, u64::from(ROUND_TRIPS));
    let start = std::time::Instant::now();
    for id in &ids {
        let created: i64 = redis::cmd("FCALL")
            .arg("postpone_bench_floor_enqueue_one")
            .arg(2)
            .arg(DUE)
            .arg(JOBS)
            .arg(id)
            .arg(record)
            .query_async(conn)
            .await?;
        if created != 1 {
            return Err("floor: a new job's enqueue found it there".into());
        }
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUND_TRIPS);
    redis::cmd("DEL")
        .arg(DUE)
        .arg(JOBS)
        .query_async::<()>(conn)
        .await?;
    Ok(us)
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
