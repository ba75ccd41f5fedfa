//! Fault suite: leases. Many workers on the same due jobs at the same millisecond; a worker paused for
//! three leases; long handlers kept alive by heartbeats while Redis is slow.

mod fault;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::DateTime;
use fault::log::Event;
use fault::{Expect, Rig, Spec, Work};
use postpone::EnqueueItem;
use support::redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_racing_for_jobs_due_at_the_same_millisecond_claim_each_once() {
    let _serial = fault::serial().await;
    let mut rig = Rig::start("same-ms", RedisServer::builder()).await;
    let spec = Spec::new(10_000, 64);
    rig.spawn_ready(4, &spec).await;
    // Every job due at one instant, a little ahead, so that all four workers wake for it together.
    let at = DateTime::from_timestamp_millis(rig.redis_ms() + 1500).unwrap();
    let items = (0..2000)
        .map(|i| {
            EnqueueItem::new(Work::sleeping(1))
                .id(format!("s{i}"))
                .at(at)
        })
        .collect();
    rig.enqueue(items).await.unwrap();
    rig.drain(Duration::from_secs(60)).await;
    let report = rig
        .check(Expect {
            once: true,
            attempt_one: true,
            ..Expect::default()
        })
        .await;
    // The race was real: several workers claimed within the first milliseconds.
    let events = rig.events();
    let first: Vec<(i64, u32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Claim { ms, pid, .. } => Some((*ms, *pid)),
            _ => None,
        })
        .collect();
    let t0 = first.iter().map(|(ms, _)| *ms).min().unwrap();
    let mut racers: Vec<u32> = first
        .iter()
        .filter(|(ms, _)| *ms <= t0 + 50)
        .map(|(_, pid)| *pid)
        .collect();
    racers.sort();
    racers.dedup();
    eprintln!(
        "same-ms: {} workers claimed within 50 ms of the due time; {} claims in all",
        racers.len(),
        report.claims
    );
    assert!(racers.len() >= 2, "no race happened: {racers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_for_three_leases_loses_its_jobs_and_its_late_results_are_rejected() {
    let _serial = fault::serial().await;
    let lease = 300;
    let mut rig = Rig::start("sigstop", RedisServer::builder()).await;
    // Worker A finishes its jobs late (a late ack); worker F fails them late (a late retry).
    let mut paused = Vec::new();
    for (name, fail) in [("a", "0"), ("f", "1")] {
        let slot = rig
            .spawn_ready(1, &Spec::new(lease, 4).env("FAULT_FAIL", fail))
            .await[0];
        let pid = rig.procs[slot].pid;
        let items = (0..4)
            .map(|i| EnqueueItem::new(Work::sleeping(2 * lease)).id(format!("{name}{i}")))
            .collect();
        rig.enqueue(items).await.unwrap();
        rig.wait_for(&format!("worker {name} to start its 4 jobs"), |events| {
            events
                .iter()
                .filter(|e| matches!(e, Event::Start { pid: p, .. } if *p == pid))
                .count()
                == 4
        })
        .await;
        rig.stop(slot);
        paused.push(slot);
    }
    // Worker B takes the jobs over once their leases expire, and finishes them.
    rig.spawn_ready(1, &Spec::new(lease, 8)).await;
    rig.drain(Duration::from_secs(30)).await;
    let stopped_for = rig.redis_ms() - rig.faults[0].at_ms;
    let wait = (3 * lease as i64 - stopped_for).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    for &slot in &paused {
        rig.resume(slot);
    }
    let pids: Vec<u32> = paused.iter().map(|s| rig.procs[*s].pid).collect();
    rig.wait_for("the paused workers' late results", |events| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Ack { pid, .. } if pids.contains(pid)))
            .count()
            == 8
    })
    .await;
    let report = rig
        .check(Expect {
            attempt_one: true,
            rerun_within_ms: Some(2 * lease as i64 + 1000),
            ..Expect::default()
        })
        .await;
    // Every late result was refused by its stale lease token; each job ended once, done by B.
    assert_eq!(report.stale_acks, 8, "{report}");
    assert_eq!(report.done_once + report.done_more_than_once, 8, "{report}");
    assert_eq!(report.reruns_after_worker_fault, 8, "{report}");
    // Worker A's handlers finished too (late): the jobs ran twice, as at-least-once allows.
    assert_eq!(report.done_more_than_once, 4, "{report}");
    let retried = rig
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::Ack { kind, outcome, .. } if kind == "retry" && outcome == "applied"))
        .count();
    assert_eq!(retried, 0, "a late retry was applied");
}

/// Keeps Redis busy in bursts (a script spinning for 50 ms, then 50 ms of rest), until `stop`.
fn slow_redis(url: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_connection().unwrap();
        let spin = redis::Script::new(
            "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] \
             while true do local n = redis.call('TIME') \
             if n[1] * 1000000 + n[2] - s > 50000 then break end end return 1",
        );
        let mut bursts = 0;
        while !stop.load(Ordering::Relaxed) {
            let _: i64 = spin.invoke(&mut conn).unwrap();
            bursts += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        bursts
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_running_ten_leases_on_a_slow_redis_never_run_twice() {
    let _serial = fault::serial().await;
    let lease = 500;
    let mut rig = Rig::start("long-handlers", RedisServer::builder()).await;
    rig.spawn_ready(2, &Spec::new(lease, 16)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let slow = slow_redis(rig.server.url(), stop.clone());
    let mut items: Vec<_> = (0..20)
        .map(|i| EnqueueItem::new(Work::sleeping(10 * lease)).id(format!("long{i}")))
        .collect();
    items.extend((0..500).map(|i| EnqueueItem::new(Work::sleeping(2)).id(format!("short{i}"))));
    rig.enqueue(items).await.unwrap();
    rig.drain(Duration::from_secs(60)).await;
    stop.store(true, Ordering::Relaxed);
    let bursts = slow.join().unwrap();
    let report = rig
        .check(Expect {
            once: true,
            attempt_one: true,
            ..Expect::default()
        })
        .await;
    let counts = rig.counts().await;
    eprintln!("long-handlers: {bursts} bursts of 50 ms Redis latency injected");
    assert_eq!(counts.stalled, 0, "a lease expired: {counts:?}");
    assert!(bursts >= 20, "only {bursts} latency bursts");
    assert_eq!(report.claims, 520);
}
