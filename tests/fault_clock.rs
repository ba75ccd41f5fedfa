//! Fault suite: worker clocks that are minutes off (libfaketime). Due times and leases are judged by the
//! Redis clock, so nothing runs early and nothing late.

mod fault;
mod support;

use std::path::PathBuf;
use std::time::Duration;

use chrono::DateTime;
use fault::log::Event;
use fault::{Expect, Rig, Rng, Spec, Work};
use postpone::EnqueueItem;
use support::redis_server::RedisServer;

/// libfaketime's preload library (Debian package `faketime`, installed by `.ci/run`).
fn libfaketime() -> PathBuf {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "libfaketime is missing, and the clock-skew fault test needs it to run workers with a \
                 wrong clock. Install it with `sudo apt-get install faketime` (Debian/Ubuntu; `.ci/run` \
                 does this), then run the tests again. Looked in: {candidates:?}"
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_with_clocks_minutes_off_run_nothing_early_and_nothing_late() {
    let _serial = fault::serial().await;
    let lib = libfaketime();
    let lease = 400;
    let mut rng = Rng::new("clock-skew");
    let mut rig = Rig::start("clock-skew", RedisServer::builder()).await;
    // One worker five minutes ahead, one five minutes behind; their timers still tick at real speed.
    let skewed = |offset: &str| {
        Spec::new(lease, 16)
            .env("LD_PRELOAD", lib.display())
            .env("FAKETIME", offset)
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
    };
    let mut pids = Vec::new();
    for offset in ["+5m", "-5m"] {
        let slot = rig.spawn_ready(1, &skewed(offset)).await[0];
        pids.push(rig.procs[slot].pid);
    }
    for e in rig.events() {
        if let Event::Ready {
            pid,
            redis_ms,
            local_ms,
        } = e
        {
            let skew = local_ms - redis_ms;
            eprintln!("clock-skew: worker {pid} runs {skew} ms off the Redis clock");
            assert!(
                skew.abs() > 4 * 60_000,
                "worker {pid} is not skewed ({skew} ms): is libfaketime working?"
            );
        }
    }
    // Due after a delay (by the Redis clock), and at absolute times read from the Redis clock.
    let mut items: Vec<_> = (0..600)
        .map(|i| {
            EnqueueItem::new(Work::sleeping(rng.range(1, 5)))
                .id(format!("d{i}"))
                .after(Duration::from_millis(rng.range(100, 4000)))
        })
        .collect();
    let now = rig.redis_ms();
    items.extend((0..300).map(|i| {
        let at = DateTime::from_timestamp_millis(now + rng.range(100, 4000) as i64).unwrap();
        EnqueueItem::new(Work::sleeping(1))
            .id(format!("a{i}"))
            .at(at)
    }));
    // And some long jobs, whose leases the skewed workers must keep by the Redis clock.
    items.extend((0..10).map(|i| {
        EnqueueItem::new(Work::sleeping(4 * lease))
            .id(format!("long{i}"))
            .after(Duration::from_millis(500))
    }));
    rig.enqueue(items).await.unwrap();
    rig.drain(Duration::from_secs(60)).await;
    let report = rig
        .check(Expect {
            once: true,
            attempt_one: true,
            late_within_ms: Some(1000),
            ..Expect::default()
        })
        .await;
    let claimers: std::collections::BTreeSet<u32> = rig
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Claim { pid, .. } => Some(*pid),
            _ => None,
        })
        .collect();
    assert_eq!(
        claimers.len(),
        2,
        "both skewed workers should have run jobs: {claimers:?}; {report}"
    );
}
