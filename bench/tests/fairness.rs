//! `postpone-bench fairness` end to end, on a `redis-server` of its own: the flood drains in the worker
//! process while the harness's quiet producers enqueue, and every quiet job is reported.

mod common;

use common::{bench, RedisServer};

/// Runs `postpone-bench fairness` with `extra` and returns its JSON line.
fn fairness(redis: &RedisServer, extra: &[&str]) -> serde_json::Value {
    let args = [
        "fairness",
        "--jobs",
        "10000",
        "--quiet-keys",
        "5",
        "--flush",
    ];
    bench(redis, &[&args[..], extra].concat())
}

#[test]
fn the_fairness_workload_drains_the_flood_in_a_worker_process_and_reports_every_quiet_job() {
    let redis = RedisServer::start();
    let mut quiet_p99 = Vec::new();
    for extra in [&[][..], &["--no-keys"][..]] {
        let report = fairness(&redis, extra);
        assert_eq!(report["workload"], "fairness", "{report}");
        assert_eq!(report["ok"], true, "every quiet job ran: {report}");
        assert_eq!(report["jobs"], 10000, "{report}");
        assert!(report["jobs_per_sec"].as_f64().unwrap() > 0.0, "{report}");
        assert!(report["quiet_in_flood"].is_u64(), "{report}");
        // The worker process's CPU (not the harness's) and Redis's over the flood.
        assert!(report["worker_cpu_s"].as_f64().unwrap() > 0.0, "{report}");
        assert!(report["redis_cpu_s"].as_f64().unwrap() > 0.0, "{report}");
        // Lags by the wall clock both processes read: never negative, and not absurd.
        let p99 = report["quiet_p99_ms"].as_f64().expect("quiet jobs ran");
        assert!((0.0..30_000.0).contains(&p99), "{report}");
        quiet_p99.push(p99);
    }
    // With keys a quiet job waits for a slot; without, behind the whole flood (its lag up to the
    // flood's time): the two processes' clocks agree well enough to tell them apart.
    let (keyed, plain) = (quiet_p99[0], quiet_p99[1]);
    assert!(
        keyed < plain / 2.0,
        "quiet p99 {keyed} ms with keys, {plain} ms without"
    );
}
