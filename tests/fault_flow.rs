//! Flow control across worker processes: three workers share one rate limit (by the Redis clock), and
//! a provider's rate limit reported by one handler holds all three.

mod fault;
mod support;

use std::time::Duration;

use fault::log::Event;
use fault::{Expect, Rig, Spec, Work};
use postpone::EnqueueItem;
use support::redis_server::RedisServer;

/// 100 jobs per second, across the three workers.
const RATE: &str = "100/1000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_keep_one_rate_limit_and_a_provider_limit_holds_them_all() {
    let _serial = fault::serial().await;
    let mut rig = Rig::start("flow", RedisServer::builder()).await;
    let spec = Spec::new(2_000, 8).env("FAULT_RATE", RATE);
    rig.spawn_ready(3, &spec).await;
    rig.enqueue_now("r", 2_000, 0).await;
    rig.drain(Duration::from_secs(90)).await;

    // Starts by the Redis clock: every 5 s window (one starting each second) holds 500 +- 5 %.
    let mut starts: Vec<(i64, u32)> = rig
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Start { ms, pid, .. } => Some((*ms, *pid)),
            _ => None,
        })
        .collect();
    starts.sort_unstable();
    assert_eq!(starts.len(), 2_000, "every job ran once");
    let (first, last) = (starts[0].0, starts[starts.len() - 1].0);
    assert!(
        last - first >= 19_000,
        "2,000 jobs at 100/s took {} ms",
        last - first
    );
    let mut windows = 0;
    let (mut fewest, mut most) = (usize::MAX, 0);
    let mut from = first;
    while from + 5_000 <= last {
        let n = starts
            .iter()
            .filter(|(ms, _)| (from..from + 5_000).contains(ms))
            .count();
        assert!(
            (475..=525).contains(&n),
            "{n} jobs started in the 5 s from {} ms: the rate is off by more than 5 %",
            from - first
        );
        windows += 1;
        (fewest, most) = (fewest.min(n), most.max(n));
        from += 1_000;
    }
    eprintln!(
        "FLOW-FIGURES {windows} windows of 5 s: {fewest} to {most} jobs (500 at 100/s); 2,000 jobs in {} ms",
        last - first
    );
    assert!(windows >= 14, "{windows} windows measured");
    let pids: std::collections::BTreeSet<u32> = starts.iter().map(|(_, pid)| *pid).collect();
    assert_eq!(pids.len(), 3, "all three workers ran jobs");

    // A provider's limit of 2 s, reported by the first job, holds every worker.
    let hold = Work {
        hold_ms: 2_000,
        ..Work::default()
    };
    rig.enqueue(vec![EnqueueItem::new(hold).id("0hold")])
        .await
        .unwrap();
    rig.enqueue_now("h", 300, 0).await;
    rig.drain(Duration::from_secs(60)).await;
    let events = rig.events();
    // Its first run (it runs again after the hold, attempt 1 again: no attempt used).
    let held_at = events
        .iter()
        .filter_map(|e| match e {
            Event::Start {
                id, attempt: 1, ms, ..
            } if id == "0hold" => Some(*ms),
            _ => None,
        })
        .min()
        .expect("the hold job ran");
    let mut after: Vec<(i64, u32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Start { id, ms, pid, .. } if id.starts_with('h') && *ms > held_at => {
                Some((*ms, *pid))
            }
            _ => None,
        })
        .collect();
    after.sort_unstable();
    // Jobs claimed before the hold was recorded (a claim or two, 10 ms apart) may still start; then
    // none until it ends.
    let during: Vec<_> = after
        .iter()
        .filter(|(ms, _)| (held_at + 100..held_at + 2_000).contains(ms))
        .collect();
    assert!(
        during.is_empty(),
        "jobs started during the hold: {during:?}"
    );
    let resumed: std::collections::BTreeSet<u32> = after
        .iter()
        .filter(|(ms, _)| *ms >= held_at + 2_000)
        .map(|(_, pid)| *pid)
        .collect();
    assert_eq!(resumed.len(), 3, "all three workers resumed after the hold");

    let report = rig
        .check(Expect {
            attempt_one: true,
            ..Expect::default()
        })
        .await;
    assert_eq!(report.lost, 0);
    assert_eq!(report.done_more_than_once, 0);
    eprintln!("{report}");
}
