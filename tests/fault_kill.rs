//! Fault suite: worker processes die. SIGKILL under load, and crashes at the two points that matter
//! (right after a claim returned; after a handler succeeded but before its acknowledgement).

mod fault;
mod support;

use std::time::{Duration, Instant};

use fault::{Expect, Rig, Rng, Spec, Work};
use postpone::EnqueueItem;
use support::redis_server::RedisServer;

const LEASE_MS: u64 = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_workers_repeatedly_under_load_loses_nothing() {
    let _serial = fault::serial().await;
    let mut rng = Rng::new("sigkill");
    let mut rig = Rig::start("sigkill", RedisServer::builder()).await;
    let spec = Spec::new(LEASE_MS, 8).env("FAULT_STALL_LIMIT", 1000);
    rig.spawn_ready(4, &spec).await;
    // 2500 jobs due now and 1500 due over the next 5 s, each working 10 to 30 ms.
    let items = (0..4000u64)
        .map(|i| {
            let item = EnqueueItem::new(Work::sleeping(rng.range(10, 30))).id(format!("k{i}"));
            if i < 2500 {
                item
            } else {
                item.after(Duration::from_millis(rng.range(0, 5000)))
            }
        })
        .collect();
    rig.enqueue(items).await.unwrap();

    // Kill a worker every 300 ms, round robin, and start a new one in its place at once.
    let mut last = Instant::now();
    let mut next = 0;
    rig.drain_with(Duration::from_secs(90), |rig| {
        if last.elapsed() >= Duration::from_millis(300) {
            let slot = next % rig.procs.len();
            rig.kill9(slot);
            rig.respawn(slot, spec.clone());
            next += 1;
            last = Instant::now();
        }
    })
    .await;
    let report = rig
        .check(Expect {
            attempt_one: true,
            rerun_within_ms: Some(2 * LEASE_MS as i64 + 1000),
            ..Expect::default()
        })
        .await;
    assert!(
        report.faults["kill"] >= 10,
        "only {} kills happened: the test did not test much",
        report.faults["kill"]
    );
    assert!(
        report.reruns_after_worker_fault > 0,
        "no job was hit by a kill"
    );
}

/// Drains 1500 jobs through 3 workers that each abort at a random `point` occurrence (2 to 6), and are
/// restarted (with a new one) whenever they do.
async fn crash_at(name: &str, point: &str) -> fault::Report {
    let _serial = fault::serial().await;
    let mut rng = Rng::new(name);
    let mut rig = Rig::start(name, RedisServer::builder()).await;
    let lease = 300;
    let spec = Spec::new(lease, 8).env("FAULT_STALL_LIMIT", 1000);
    let crash = |rng: &mut Rng| format!("{point}:{}", rng.range(2, 6));
    for _ in 0..3 {
        let s = spec.clone().env("FAULT_CRASH", crash(&mut rng));
        rig.spawn(s);
    }
    rig.enqueue_now("c", 1500, 5).await;
    rig.drain_with(Duration::from_secs(90), |rig| {
        rig.restart_exited(|s| s.clone().env("FAULT_CRASH", crash(&mut rng)));
    })
    .await;
    let report = rig
        .check(Expect {
            attempt_one: true,
            rerun_within_ms: Some(2 * lease as i64 + 1000),
            ..Expect::default()
        })
        .await;
    let crashes = rig
        .events()
        .iter()
        .filter(|e| matches!(e, fault::log::Event::Crash { point: p, .. } if p == point))
        .count();
    assert!(
        crashes >= 5,
        "only {crashes} crashes at {point}: the test did not test much"
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_right_after_a_claim_costs_a_lease_and_no_attempt() {
    let report = crash_at("crash-after-claim", "after-claim").await;
    assert!(report.reruns_after_worker_fault > 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_success_and_ack_runs_the_job_again_and_acks_it_once() {
    let report = crash_at("crash-before-ack", "before-ack").await;
    // At least once: the work was done but not acknowledged, so it ran again.
    assert!(report.done_more_than_once > 0, "{report}");
}

/// The registry of live workers (the operations API): a worker process killed with SIGKILL cannot say
/// goodbye; its entry expires a few heartbeats later (three beats of a third of the lease), and the
/// live one stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_leaves_the_registry_within_a_few_heartbeats() {
    let _serial = fault::serial().await;
    let mut rig = Rig::start("registry", RedisServer::builder()).await;
    let spec = Spec::new(LEASE_MS, 2);
    rig.spawn_ready(2, &spec).await;
    let ops = rig.client.ops();
    let pids = |workers: &[postpone::ops::WorkerInfo]| {
        let mut p: Vec<u32> = workers.iter().map(|w| w.pid).collect();
        p.sort();
        p
    };
    let mut both = vec![rig.procs[0].pid, rig.procs[1].pid];
    both.sort();
    support::wait::eventually("both workers in the registry", || {
        let ops = ops.clone();
        let both = both.clone();
        async move { (pids(&ops.workers().await.unwrap()) == both).then_some(()) }
    })
    .await;
    let killed = rig.procs[0].pid;
    rig.kill9(0);
    let start = Instant::now();
    support::wait::eventually("the killed worker to expire", || {
        let ops = ops.clone();
        async move {
            let live = ops.workers().await.unwrap();
            (!pids(&live).contains(&killed)).then_some(())
        }
    })
    .await;
    let gone_after = start.elapsed();
    // Three beats of a third of the lease: about one lease (400 ms); beats are at least 100 ms apart.
    assert!(
        gone_after < Duration::from_millis(3 * LEASE_MS),
        "expired after {gone_after:?}"
    );
    let live = ops.workers().await.unwrap();
    assert_eq!(pids(&live), vec![rig.procs[1].pid], "the live worker stays");
    println!("a killed worker left the registry {gone_after:?} after SIGKILL");
}
