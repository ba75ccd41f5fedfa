//! Reconnecting: a client that outlives a Redis restart succeeds again as soon as Redis answers, and no
//! call waits out a timeout for a connect that already failed.
//!
//! The stores here get 10 s connect and response timeouts, so that "waited out a timeout" and "failed
//! or succeeded at once" are told apart by a wide margin: a call that takes less than half the timeout
//! did not wait one out. The times measured (from PING answering to the first success) are printed, not
//! asserted.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::{Client, Job};
use serde::{Deserialize, Serialize};
use support::enqueuers::Enqueuers;
use support::redis_server::RedisServer;
use support::wait::wait_until;

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

const TIMEOUT: Duration = Duration::from_secs(10);
/// Less than this and a call did not wait out a timeout.
const AT_ONCE: Duration = Duration::from_secs(5);

async fn client(server: &RedisServer) -> Client {
    let options = RedisOptions::new("shop")
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT);
    let store = RedisStore::connect_with(&server.url(), options)
        .await
        .expect("connect");
    Client::builder().store(store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_client_succeeds_at_once_after_a_redis_restart() {
    let server = RedisServer::start();
    let client = client(&server).await;
    client.enqueue(CloseOrder { order_id: 1 }).await.unwrap();

    // Killed and restarted while the client sends nothing: its first call afterwards must not fail on
    // the dead connection.
    server.kill9();
    server.restart();
    let answered = Instant::now();
    let first = client.enqueue(CloseOrder { order_id: 2 }).await;
    let took = answered.elapsed();
    eprintln!("first enqueue after PING answered: {took:?}");
    first.expect("the first enqueue after Redis is back succeeds");
    assert!(took < AT_ONCE, "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_fail_at_once_while_redis_is_down() {
    let server = RedisServer::start();
    let client = client(&server).await;
    client.enqueue(CloseOrder { order_id: 1 }).await.unwrap();
    server.kill9();
    // 64 callers at once, twice: each connect is refused at once, and every caller waiting for it
    // fails with it.
    for _ in 0..2 {
        let calls = (0..64).map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let r = client.enqueue(CloseOrder { order_id: i }).await;
                (r, start.elapsed())
            })
        });
        for r in futures_util::future::join_all(calls).await {
            let (r, took) = r.unwrap();
            let e = r.unwrap_err();
            assert!(e.is_transient(), "{e}");
            assert!(took < AT_ONCE, "a caller took {took:?}: {}", e.report());
        }
    }
    server.restart();
    client.enqueue(CloseOrder { order_id: 3 }).await.unwrap();
}

/// 64 tasks enqueue without pause through one client while Redis is SIGKILLed and restarted on its
/// AOF (fsync always): no enqueue that returned Ok is lost, every task succeeds again once Redis is
/// back, and no call waits out a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_enqueuers_carry_on_after_redis_is_killed_and_restarted_on_its_aof() {
    const TASKS: usize = 64;
    let server = RedisServer::builder()
        .aof(true)
        .appendfsync("always")
        .start();
    let client = client(&server).await;
    let enqueuers = {
        let client = client.clone();
        Enqueuers::start(TASKS, Duration::from_millis(1), move |id| {
            let client = client.clone();
            async move {
                client
                    .enqueue(CloseOrder { order_id: id })
                    .id(format!("o:{id}"))
                    .await
                    .map(drop)
            }
        })
    };
    wait_until("some enqueues before the kill", || enqueuers.oks() >= 2000).await;
    server.kill9();
    wait_until("every task to see Redis gone", || {
        enqueuers.all_failed_once()
    })
    .await;
    server.restart();
    let answered = Instant::now();
    enqueuers.mark_back(answered);
    wait_until("every task to succeed again", || enqueuers.all_back()).await;
    let seen = enqueuers.stop().await;

    let mut recovered = Duration::ZERO;
    let mut slowest = Duration::ZERO;
    let mut ok = BTreeSet::new();
    for s in &seen {
        let s = s.lock().unwrap();
        recovered = recovered.max(s.ok_after_restart.unwrap() - answered);
        slowest = slowest.max(s.slowest);
        ok.extend(s.ok.iter().copied());
    }
    eprintln!(
        "{} enqueues returned Ok; every task succeeded again within {recovered:?} of PING answering; \
         slowest call {slowest:?}",
        ok.len()
    );
    assert!(slowest < AT_ONCE, "a call took {slowest:?}");
    // No Ok enqueue was lost.
    let topic = client.topic::<CloseOrder>();
    let counts = topic.counts().await.unwrap();
    assert!(
        counts.ready + counts.scheduled >= ok.len() as u64,
        "{counts:?}, {} returned Ok",
        ok.len()
    );
    for id in &ok {
        assert!(
            topic.job(&format!("o:{id}")).await.unwrap().is_some(),
            "o:{id} returned Ok and is gone"
        );
    }
}
