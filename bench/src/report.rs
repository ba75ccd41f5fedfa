//! The result of a workload: printed as human lines, then as one line of JSON.

use serde::Serialize;

/// The JSON line (BENCHMARKS.md's fields, those that apply, then a few of the harness's own).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Report {
    pub(crate) workload: &'static str,
    pub(crate) jobs: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) secs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) jobs_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) worker_cpu_s: Option<f64>,
    /// `enqueue`, `enqueue-bulk`: CPU of the enqueueing process (the harness itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) client_cpu_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) redis_cpu_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) min_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bytes_per_job: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) commands_per_sec: Option<f64>,
    /// `steady`: jobs enqueued per second asked for, over all producers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rate: Option<u64>,
    /// `steady`: start lag (handler start minus due time, by the Redis clock) p50, p99 and max, ms (as
    /// `p50_ms`, `p99_ms`, `max_ms`, under their own names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_lag_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_lag_p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_lag_max_ms: Option<f64>,
    /// `steady`: the 99th percentile of one enqueue, awaited, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) enqueue_p99_ms: Option<f64>,
    /// `outbox`: the 99th percentile of commit-to-queued, ms (as `p99_ms`, under its own name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) commit_to_queued_p99_ms: Option<f64>,
    /// `idle`: commands per second per registered topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) commands_per_sec_per_topic: Option<f64>,
    /// `idle`: calls made inside scripts per second (counted in commandstats, not sent by the worker).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) script_calls_per_sec: Option<f64>,
    /// `enqueue`: a PING round trip from the harness, microseconds (the floor of one-at-a-time work).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ping_us: Option<f64>,
    /// `enqueue`: after the run, PINGs and enqueues taken in turn (`PAIRS` of each): a PING's mean
    /// time, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) paired_ping_us: Option<f64>,
    /// `enqueue`: ... and an enqueue's, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) paired_enqueue_us: Option<f64>,
    /// `enqueue`: `paired_enqueue_us` over `paired_ping_us`: the enqueue beside a round trip taken in
    /// the same moments (the target is 1.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) enqueue_per_ping: Option<f64>,
    /// `floor`: an awaited call of an empty function (FCALL of `return 1`), one at a time, microseconds
    /// (beside `ping_us`: what running any script adds to a round trip).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) script_call_us: Option<f64>,
    /// `floor`: Redis CPU per job of an enqueue's commands sent bare (HSET and ZADD, pipelined in
    /// calls of 21 jobs, no script), microseconds: the floor under `enqueue-concurrent`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) enqueue_floor_us_per_job: Option<f64>,
    /// `floor`: Redis CPU per job of a claim's and an acknowledgement's commands sent bare (pipelined
    /// in calls of `--concurrency` jobs, no script), microseconds: the floor under `drain`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) drain_floor_us_per_job: Option<f64>,
    /// `floor`: as `enqueue_floor_us_per_job`, each call's commands inside one function that does
    /// nothing else (and reads the due time from Redis's clock): the floor under a scripted enqueue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) scripted_enqueue_floor_us_per_job: Option<f64>,
    /// `floor`: as `drain_floor_us_per_job`, each call's commands inside one function that does
    /// nothing else: the floor under a scripted claim and acknowledgement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) scripted_drain_floor_us_per_job: Option<f64>,
    /// `floor`: an awaited call of the least scripted enqueue (`TIME`, `HSETNX`, `ZADD`), one at a
    /// time, microseconds: the floor under `enqueue`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) scripted_enqueue_call_us: Option<f64>,
    /// Redis CPU per job, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) redis_us_per_job: Option<f64>,
    /// `drain`, `drain-io`, `backlog`: worker process CPU per job, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) worker_us_per_job: Option<f64>,
    /// `enqueue-concurrent`: enqueues that returned an error (BENCHMARKS.md: must be 0); `outbox`:
    /// transactions that did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) errors: Option<u64>,
    /// `enqueue-concurrent`, `outbox`: the enqueueing tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tasks: Option<usize>,
    /// Redis commands per job (INFO commandstats delta: every call, those inside scripts included, over
    /// the jobs; the harness's own INFO left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) commands_per_job: Option<f64>,
    /// The commands per job the client sent itself (a script call counts once): what batching lowers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sent_commands_per_job: Option<f64>,
    /// `drain-io`: jobs/s over the ceiling of concurrency x 1,000/s (a 1 ms handler, nothing else).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ceiling_share: Option<f64>,
    /// `drain-io`: the mean time a handler's 1 ms sleep took, ms (Tokio's timer rounds up to the next
    /// millisecond tick, so the practical ceiling is concurrency / this).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) handler_mean_ms: Option<f64>,
    /// `drain-io`: the worker process's CPU per job over as many bare sleeps of the handler, run on its
    /// runtime after the drain with the same concurrency and no library (Tokio's timer and the
    /// runtime's parking between ticks): the handler's own share of [`Report::worker_us_per_job`].
    /// `steady`: the same for the handler's own work (its TIME round trip for the start lag, then the
    /// 2 ms sleep) replayed at the run's rate after the worker stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) handler_floor_us_per_job: Option<f64>,
    /// `drain-io`, `steady`: [`Report::worker_us_per_job`] less [`Report::handler_floor_us_per_job`]:
    /// what the worker spent per job beyond its handler's own cost, to set beside `drain`'s worker CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) worker_us_beyond_handler: Option<f64>,
    /// `steady`: Redis's CPU per job over that replay (the handler's TIME calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) handler_floor_redis_us_per_job: Option<f64>,
    /// `steady`: [`Report::redis_us_per_job`] less [`Report::handler_floor_redis_us_per_job`]: what
    /// Redis spent per job on the library's calls (the enqueue, claim and acknowledgement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) redis_us_beyond_handler: Option<f64>,
    /// `drain-io`: the measured ceiling, concurrency / [`Report::handler_mean_ms`] (jobs/s), the figure
    /// BENCHMARKS.md judges `drain-io` against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) measured_ceiling_jobs_per_sec: Option<f64>,
    /// `drain-io`: jobs/s over [`Report::measured_ceiling_jobs_per_sec`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) measured_ceiling_share: Option<f64>,
    /// `backlog`: the jobs due in an hour beside the drained ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) backlog: Option<u64>,
    /// `backlog`: the same run's plain drain, and the ratio to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) drain_jobs_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ratio_to_drain: Option<f64>,
    /// `floor --pace`: ms from one drain call to the next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pace_ms: Option<u64>,
    /// `wait`: the 99th percentile of handler finish to waiter return, ms (as `p99_ms`, under its own
    /// name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) wake_p99_ms: Option<f64>,
    /// `fairness`: the quiet keys' start lag p99, ms (as `p99_ms`, under its own name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) quiet_p99_ms: Option<f64>,
    /// `fairness`: the flood's jobs and the quiet keys' that started meanwhile, per second of the
    /// flood (the throughput it shares with them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) all_jobs_per_sec: Option<f64>,
    /// `fairness`: the keys the flood's jobs were spread over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) flood_keys: Option<u64>,
    /// `fairness`: the quiet jobs that started while the flood drained (before its last job).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) quiet_in_flood: Option<u64>,
    /// `batch`: ms from the last member's end to the success callback's start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) callback_after_last_ms: Option<f64>,
    /// `drain --keep`: Redis `used_memory` with every drained job kept, minus before the enqueue, per job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kept_bytes_per_job: Option<f64>,
    /// Whether every job ended as it should (none lost, failed, or left behind).
    pub(crate) ok: bool,
    /// The 1-minute load average when the run ended (the machine is shared).
    pub(crate) load1: f64,
    /// The harness's global allocator: `system`, or `mimalloc` (`--features mimalloc`).
    pub(crate) allocator: &'static str,
}

/// Rounds for printing: 3 significant decimals are plenty.
pub(crate) fn round(x: f64, decimals: i32) -> f64 {
    let m = 10f64.powi(decimals);
    (x * m).round() / m
}

/// The load averages, from /proc/loadavg (0 where unavailable).
pub(crate) fn load() -> (f64, f64, f64) {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text.split_whitespace().map(|s| s.parse().unwrap_or(0.0));
    (
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
    )
}

/// CPU this process used so far (user + system), seconds: the sum of its threads' run times from
/// /proc/self/task/*/schedstat (nanoseconds), or /proc/self/stat (10 ms ticks, exited threads included)
/// when that is larger or unavailable.
pub(crate) fn own_cpu_s() -> f64 {
    let ticks = {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ")".
        let t = |i: usize| {
            fields
                .get(i)
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (t(11) + t(12)) / 100.0
    };
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            ns += text
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
        }
    }
    let precise = ns as f64 / 1e9;
    // Threads that exited are only in the ticks: trust those when they say clearly more.
    if precise > 0.0 && precise + 0.02 >= ticks {
        precise
    } else {
        ticks
    }
}

/// Percentile `p` (0..=100) of sorted values, nearest rank.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[3.0], 99.0), 3.0);
    }

    #[test]
    fn own_cpu_reads() {
        assert!(own_cpu_s() >= 0.0);
    }

    #[test]
    fn json_leaves_out_what_does_not_apply() {
        let r = Report {
            workload: "enqueue",
            jobs: 5,
            secs: Some(1.0),
            ..Report::default()
        };
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            json.starts_with(r#"{"workload":"enqueue","jobs":5,"secs":1.0,"ok":false"#),
            "{json}"
        );
    }
}
