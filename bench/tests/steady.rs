//! `postpone-bench steady` end to end, on a `redis-server` of its own, briefly: every job runs, and the
//! handler's own cost (its TIME round trip and its sleep, replayed after the worker stops) is reported
//! beside what the run spent beyond it.

mod common;

use common::{bench, RedisServer};

#[test]
fn the_steady_workload_reports_its_handlers_own_cost_beside_what_the_run_spent_beyond_it() {
    let redis = RedisServer::start();
    let report = bench(
        &redis,
        &["steady", "--rate", "400", "--secs", "1", "--flush"],
    );
    assert_eq!(report["workload"], "steady", "{report}");
    assert_eq!(report["ok"], true, "every job ran: {report}");
    assert_eq!(report["jobs"], 400, "{report}");
    let figure = |name: &str| {
        report[name]
            .as_f64()
            .unwrap_or_else(|| panic!("{name} in {report}"))
    };
    // The replay made requests and slept on both sides: it cost each process something.
    assert!(figure("handler_floor_us_per_job") > 0.0, "{report}");
    assert!(figure("handler_floor_redis_us_per_job") > 0.0, "{report}");
    // What is left to the library is the run's CPU less the replay's (rounded to 0.01 each).
    for (all, floor, beyond) in [
        (
            "worker_us_per_job",
            "handler_floor_us_per_job",
            "worker_us_beyond_handler",
        ),
        (
            "redis_us_per_job",
            "handler_floor_redis_us_per_job",
            "redis_us_beyond_handler",
        ),
    ] {
        let left = figure(all) - figure(floor);
        assert!((figure(beyond) - left).abs() < 0.02, "{beyond}: {report}");
    }
}
