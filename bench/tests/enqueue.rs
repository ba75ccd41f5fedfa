//! `postpone-bench enqueue` end to end, on a `redis-server` of its own, briefly: the awaited enqueues
//! are timed beside PINGs taken in turn with them (each paired enqueue must be created, or the run
//! fails).

mod common;

use common::{bench, RedisServer};

#[test]
fn the_single_enqueue_is_reported_beside_pings_taken_in_turn_with_it() {
    let redis = RedisServer::start();
    let report = bench(&redis, &["enqueue", "--jobs", "300", "--flush"]);
    assert_eq!(report["workload"], "enqueue", "{report}");
    assert_eq!(report["ok"], true, "{report}");
    let figure = |name: &str| {
        report[name]
            .as_f64()
            .unwrap_or_else(|| panic!("{name} in {report}"))
    };
    let (ping, enqueue) = (figure("paired_ping_us"), figure("paired_enqueue_us"));
    assert!(ping > 0.0 && enqueue > 0.0, "{report}");
    // The ratio is of the two means (each rounded to 0.1, the ratio to 0.01).
    let ratio = figure("enqueue_per_ping");
    assert!(
        (ratio - enqueue / ping).abs() < 0.01 + 0.1 / ping,
        "{report}"
    );
}
