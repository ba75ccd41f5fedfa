//! The worker-start check warns loudly about a Redis that may evict jobs. A test binary of its own: it
//! captures `tracing` output with a scoped subscriber, and a callsite that another test thread reaches
//! while that subscriber is being set up can keep a stale "not interested" (a race inside `tracing`),
//! which once made this test see no output under load. Alone in its process, nothing else races it.

mod support;

use postpone::store::WorkerStore;
use support::redis_server::RedisServer;
use support::store::*;

#[tokio::test]
async fn worker_start_warns_loudly_about_an_evicting_redis() {
    let log = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // Another test thread may have cached this callsite's interest before this subscriber existed.
    tracing::callsite::rebuild_interest_cache();
    let lru = RedisServer::builder()
        .arg("--maxmemory-policy")
        .arg("allkeys-lru")
        .start();
    store(&lru, "shop")
        .await
        .check_worker_start()
        .await
        .unwrap();
    let text = log.text();
    assert!(
        text.contains("WARN") && text.contains("allkeys-lru") && text.contains("noeviction"),
        "{text}"
    );
    let fine = RedisServer::start();
    let before = log.text().len();
    store(&fine, "shop")
        .await
        .check_worker_start()
        .await
        .unwrap();
    assert!(!log.text()[before..].contains("WARN"), "{}", log.text());
    // CONFIG disabled: the policy still comes from INFO memory.
    let hidden = RedisServer::builder()
        .arg("--rename-command")
        .arg("CONFIG")
        .arg("")
        .arg("--maxmemory-policy")
        .arg("volatile-lru")
        .start();
    store(&hidden, "shop")
        .await
        .check_worker_start()
        .await
        .unwrap();
    assert!(log.text().contains("volatile-lru"), "{}", log.text());
}
