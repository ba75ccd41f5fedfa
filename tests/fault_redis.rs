//! Fault suite: Redis itself fails. Killed with SIGKILL and restarted on its AOF; connections dropped,
//! the server paused past every timeout; memory full.

mod fault;
mod support;

use std::time::{Duration, Instant};

use fault::{Expect, Rig, Rng, Spec, Work};
use postpone::EnqueueItem;
use support::redis_server::RedisServer;

const LEASE_MS: u64 = 500;

/// A producer step: enqueues 20 jobs (half delayed up to 3 s); ids that fail are kept as uncertain.
async fn produce(rig: &mut Rig, rng: &mut Rng, next: &mut usize) {
    let jobs = (0..20)
        .map(|i| {
            let delay = if i % 2 == 0 { rng.range(0, 3000) } else { 0 };
            (
                format!("p{}", *next + i),
                Work::sleeping(rng.range(1, 10)),
                Duration::from_millis(delay),
            )
        })
        .collect();
    *next += 20;
    rig.try_enqueue(jobs).await;
}

/// 1000 jobs due now and 1000 due over 6 s, 3 workers, a producer running throughout, and `fault`
/// applied `times` times, `every` apart.
async fn run_through(
    name: &str,
    server: support::redis_server::Builder,
    times: usize,
    every: Duration,
    mut fault: impl FnMut(&mut Rig, usize),
) -> fault::Report {
    let _serial = fault::serial().await;
    let mut rng = Rng::new(name);
    let mut rig = Rig::start(name, server).await;
    let spec = Spec::new(LEASE_MS, 8).env("FAULT_STALL_LIMIT", 1000);
    rig.spawn_ready(3, &spec).await;
    let items = (0..2000u64)
        .map(|i| {
            let item = EnqueueItem::new(Work::sleeping(rng.range(1, 10))).id(format!("r{i}"));
            if i < 1000 {
                item
            } else {
                item.after(Duration::from_millis(rng.range(500, 6000)))
            }
        })
        .collect();
    rig.enqueue(items).await.unwrap();
    let mut next = 0;
    let mut done = 0;
    let mut last = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(90);
    while done < times || !rig.drained().await {
        assert!(
            Instant::now() < deadline,
            "{name}: not drained: {:?}",
            rig.counts().await
        );
        if done < times && last.elapsed() >= every {
            fault(&mut rig, done);
            done += 1;
            last = Instant::now();
        }
        if done < times {
            produce(&mut rig, &mut rng, &mut next).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.check(Expect {
        attempt_one: true,
        ..Expect::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_restarted_on_its_aof_loses_nothing_acknowledged() {
    let server = RedisServer::builder().aof(true).appendfsync("always");
    let report = run_through(
        "redis-kill9",
        server,
        3,
        Duration::from_millis(1500),
        |rig, _| {
            let at = rig.redis_ms();
            rig.redis_fault("redis-kill9", at);
            rig.server.kill9();
            std::thread::sleep(Duration::from_millis(300));
            rig.server.restart();
        },
    )
    .await;
    assert_eq!(report.faults["redis-kill9"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_and_a_paused_redis_are_recovered_from() {
    let server = RedisServer::builder();
    let report = run_through(
        "redis-connections",
        server,
        6,
        Duration::from_millis(700),
        |rig, i| {
            let at = rig.redis_ms();
            match i % 3 {
                0 => {
                    rig.redis_fault("client-kill", at);
                    rig.server
                        .cli(&["CLIENT", "KILL", "TYPE", "normal"])
                        .unwrap();
                    rig.server
                        .cli(&["CLIENT", "KILL", "TYPE", "pubsub"])
                        .unwrap();
                }
                1 => {
                    // Past the workers' 1 s response timeout, and past their leases.
                    rig.redis_fault("sigstop-redis", at);
                    rig.server.pause();
                    std::thread::sleep(Duration::from_millis(1500));
                    rig.server.resume();
                }
                _ => {
                    rig.redis_fault("client-pause", at);
                    rig.server.cli(&["CLIENT", "PAUSE", "1500", "ALL"]).unwrap();
                }
            }
        },
    )
    .await;
    assert_eq!(report.faults.values().sum::<usize>(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_redis_refuses_enqueues_keeps_what_it_has_and_drains() {
    let _serial = fault::serial().await;
    let server = RedisServer::builder()
        .arg("--maxmemory")
        .arg("3mb")
        .arg("--maxmemory-policy")
        .arg("noeviction");
    let mut rig = Rig::start("maxmemory", server).await;
    // Jobs that run for three leases each: their heartbeats must go through while Redis is full.
    let long = (0..8)
        .map(|i| EnqueueItem::new(Work::sleeping(3 * LEASE_MS)).id(format!("long{i}")))
        .collect();
    rig.enqueue(long).await.unwrap();
    // Then fill Redis with jobs due a little later.
    let filler = "x".repeat(4096);
    let mut refused = None;
    for batch in 0..1000 {
        let items = (0..20)
            .map(|i| {
                EnqueueItem::new(Work {
                    text: filler.clone(),
                    ..Work::default()
                })
                .id(format!("m{batch}-{i}"))
                .after(Duration::from_secs(4))
            })
            .collect();
        if let Err(e) = rig.enqueue(items).await {
            refused = Some(e);
            break;
        }
    }
    let refused = refused.expect("Redis never ran out of memory");
    let text = refused.report().to_string();
    assert!(
        text.contains("OOM") && text.contains("maxmemory"),
        "unclear error: {text}"
    );
    let stored = rig.ledger.len();
    eprintln!("maxmemory: {stored} jobs stored before Redis refused: {text}");
    // Nothing stored was lost, and the workers drain a full Redis (claims and heartbeats only move
    // jobs; acknowledgements free memory).
    rig.spawn_ready(2, &Spec::new(LEASE_MS, 8)).await;
    rig.wait_for("the long jobs to start", |events| {
        events
            .iter()
            .filter(|e| matches!(e, fault::log::Event::Start { .. }))
            .count()
            == 8
    })
    .await;
    let still_full = rig
        .client
        .enqueue(Work::default())
        .id("one-more")
        .await
        .expect_err("Redis should still be full while the long jobs run");
    let text = still_full.report().to_string();
    assert!(text.contains("OOM"), "{text}");
    rig.drain(Duration::from_secs(60)).await;
    rig.check(Expect {
        once: true,
        attempt_one: true,
        ..Expect::default()
    })
    .await;
    assert_eq!(
        rig.counts().await.stalled,
        0,
        "a lease expired while Redis was full"
    );
    rig.enqueue_now("after", 10, 0).await;
    rig.drain(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_warns_at_start_when_redis_may_evict_jobs() {
    let _serial = fault::serial().await;
    let server = RedisServer::builder()
        .arg("--maxmemory")
        .arg("64mb")
        .arg("--maxmemory-policy")
        .arg("allkeys-lru");
    let mut rig = Rig::start("evicting", server).await;
    rig.spawn_ready(1, &Spec::new(LEASE_MS, 2)).await;
    rig.wait_until("the eviction warning", || {
        let err = rig.worker_stderr();
        err.contains("WARN") && err.contains("allkeys-lru") && err.contains("noeviction")
    })
    .await;
}
