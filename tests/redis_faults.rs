//! Faults: a store outlives Redis restarts, killed connections, pauses and a flushed script cache.

mod support;

use std::time::Duration;

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::{Due, Finish, FinishItem, FinishOutcome, Store};
use postpone::Error;
use support::redis_server::RedisServer;
use support::store::*;

#[tokio::test]
async fn a_store_survives_a_redis_restart_and_aof_keeps_the_jobs() {
    let server = RedisServer::builder()
        .aof(true)
        .appendfsync("always")
        .start();
    let s = store(&server, "shop").await;
    let jobs = (0..10).map(|i| job(&format!("j{i}"), Due::In(0))).collect();
    s.enqueue(T, jobs).await.unwrap();
    let claimed = s.claim(T, claim(3)).await.unwrap();
    server.kill9();
    assert!(s.counts(T).await.unwrap_err().is_transient());
    server.restart();
    let counts = eventually("counts after restart", || s.counts(T)).await;
    assert_eq!((counts.ready, counts.active), (7, 3));
    // The leases survived too: the claim's tokens still finish the jobs.
    let items = claimed
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    let done = eventually("finish after restart", || s.finish(T, Vec::clone(&items))).await;
    assert_eq!(done, vec![FinishOutcome::Applied; 3]);
    assert!(s.job(T, "j9").await.unwrap().is_some());
}

#[tokio::test]
async fn killed_connections_are_replaced() {
    let server = RedisServer::start();
    let s = RedisStore::connect_with(&server.url(), RedisOptions::new("shop").pool_size(4))
        .await
        .unwrap();
    // Open several pooled connections.
    let many = (0..8).map(|i| s.enqueue(T, vec![job(&format!("j{i}"), Due::In(0))]));
    for r in futures_util::future::join_all(many).await {
        r.unwrap();
    }
    server.cli(&["CLIENT", "KILL", "TYPE", "normal"]).unwrap();
    let mut failures = 0;
    for _ in 0..20 {
        if s.counts(T).await.is_err() {
            failures += 1;
        }
    }
    assert!(
        failures <= 1,
        "{failures} operations failed after one CLIENT KILL"
    );
    assert_eq!(s.counts(T).await.unwrap().ready, 8);
}

#[tokio::test]
async fn a_paused_redis_gives_backend_errors_then_recovers() {
    let server = RedisServer::start();
    let options = RedisOptions::new("shop").response_timeout(Duration::from_millis(300));
    let s = RedisStore::connect_with(&server.url(), options)
        .await
        .unwrap();
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    server.pause();
    let err = s.counts(T).await.unwrap_err();
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    server.resume();
    let c = eventually("counts after resume", || s.counts(T)).await;
    assert_eq!(c.ready, 1);
}

#[tokio::test]
async fn script_flush_is_survived() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    s.enqueue(T, vec![job("b", Due::In(0))]).await.unwrap();
    assert_eq!(s.claim(T, claim(10)).await.unwrap().jobs.len(), 2);
}
