//! Fault suite: jobs and state that hurt workers. A poison job that aborts every worker that runs it;
//! job records and lease entries deleted or garbled under the workers' feet.

mod fault;
mod support;

use std::time::Duration;

use fault::log::Event;
use fault::{Expect, Rig, Spec, Work};
use postpone::EnqueueItem;
use support::redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_job_is_dead_lettered_after_the_stall_limit_and_the_rest_runs() {
    let _serial = fault::serial().await;
    let lease = 300;
    let mut rig = Rig::start("poison", RedisServer::builder()).await;
    let spec = Spec::new(lease, 8).env("FAULT_STALL_LIMIT", 2);
    rig.spawn_ready(3, &spec).await;
    // Work for the whole life of the poison job: half due now, half over the next 3 s.
    let mut items: Vec<_> = (0..3000u64)
        .map(|i| {
            let item = EnqueueItem::new(Work::sleeping(2 + i % 8)).id(format!("n{i}"));
            if i % 2 == 0 {
                item
            } else {
                item.after(Duration::from_millis(i))
            }
        })
        .collect();
    // It works a little first (so the jobs beside it get acknowledged), then takes its worker down.
    let poison = Work {
        sleep_ms: 100,
        abort: true,
        ..Work::default()
    };
    items.push(
        EnqueueItem::new(poison)
            .id("poison")
            .after(Duration::from_millis(200)),
    );
    rig.enqueue(items).await.unwrap();
    rig.drain_with(Duration::from_secs(60), |rig| {
        rig.restart_exited(Spec::clone);
    })
    .await;
    let report = rig
        .check(Expect {
            must_die: vec!["poison".into()],
            dead_reason: Some("stalled: lease expired 3 times"),
            attempt_one: true,
            ..Expect::default()
        })
        .await;
    let crashes = rig
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Crash { point, .. } if point == "poison"))
        .count();
    // Stall limit 2: the third expired lease dead-letters it, so it took down exactly three workers.
    assert_eq!(crashes, 3, "{report}");
    assert_eq!(report.dead, 1, "{report}");
    assert_eq!(
        report.done_once + report.done_more_than_once,
        3000,
        "{report}"
    );
}

/// The key of the topic's `suffix` in the rig's namespace.
fn key(suffix: &str) -> String {
    format!("postpone:{{fault:{}}}:{suffix}", fault::TOPIC)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_state_is_swept_or_dead_lettered_with_a_reason_never_a_crash_loop() {
    let _serial = fault::serial().await;
    let lease = 300;
    let mut rig = Rig::start("damaged", RedisServer::builder()).await;
    let mut items: Vec<_> = (0..1000)
        .map(|i| EnqueueItem::new(Work::sleeping(5)).id(format!("n{i}")))
        .collect();
    // Due later: their records are deleted (no-record) or garbled (garbled) before they are due.
    for i in 0..5 {
        for name in ["no-record", "garbled"] {
            items.push(
                EnqueueItem::new(Work::sleeping(5))
                    .id(format!("{name}{i}"))
                    .after(Duration::from_secs(2)),
            );
        }
    }
    // Running for five leases while their lease token, lease entry or record is deleted.
    for i in 0..5 {
        for name in ["no-token", "no-lease", "gone-record"] {
            items.push(EnqueueItem::new(Work::sleeping(5 * lease)).id(format!("{name}{i}")));
        }
    }
    rig.enqueue(items).await.unwrap();
    for i in 0..5 {
        rig.server
            .cli(&["HDEL", &key("jobs"), &format!("no-record{i}")])
            .unwrap();
        rig.server
            .cli(&["HSET", &key("jobs"), &format!("garbled{i}"), "garbage"])
            .unwrap();
    }
    rig.spawn_ready(2, &Spec::new(lease, 16)).await;
    rig.wait_for("the long jobs to start", |events| {
        let long = |id: &str| {
            ["no-token", "no-lease", "gone-record"]
                .iter()
                .any(|p| id.starts_with(p))
        };
        events
            .iter()
            .filter(|e| matches!(e, Event::Start { id, .. } if long(id)))
            .count()
            >= 15
    })
    .await;
    for i in 0..5 {
        rig.server
            .cli(&["HDEL", &key("leases"), &format!("no-token{i}")])
            .unwrap();
        rig.server
            .cli(&["ZREM", &key("active"), &format!("no-lease{i}")])
            .unwrap();
        rig.server
            .cli(&["HDEL", &key("jobs"), &format!("gone-record{i}")])
            .unwrap();
    }
    rig.drain(Duration::from_secs(60)).await;
    let doomed: Vec<String> = (0..5)
        .flat_map(|i| [format!("no-record{i}"), format!("garbled{i}")])
        .collect();
    let report = rig
        .check(Expect {
            must_die: doomed,
            dead_reason: Some("damaged"),
            attempt_one: true,
            ..Expect::default()
        })
        .await;
    // No crash loop: both workers are still up, and did everything else.
    for p in &mut rig.procs {
        assert!(p.running(), "worker {} exited", p.pid);
    }
    assert_eq!(report.dead, 10, "{report}");
    // A job whose lease token vanished lost its lease: its result was refused, and it ran again.
    let events = rig.events();
    for i in 0..5 {
        let id = format!("no-token{i}");
        let runs = events
            .iter()
            .filter(|e| matches!(e, Event::Finish { id: j, .. } if *j == id))
            .count();
        assert_eq!(runs, 2, "{id} ran {runs} times");
        // A job whose lease entry vanished kept its lease (the heartbeat put the entry back).
        let id = format!("no-lease{i}");
        let claims = events
            .iter()
            .filter(|e| matches!(e, Event::Claim { id: j, .. } if *j == id))
            .count();
        assert_eq!(claims, 1, "{id} was claimed {claims} times");
    }
}
