//! Connecting: URLs, credentials in errors, the version check and the worker-start checks.

mod support;

use postpone::store::redis::RedisStore;
use postpone::store::{Due, JobStore, WorkerStore};
use postpone::Error;
use support::redis_server::RedisServer;
use support::store::*;

#[tokio::test]
async fn invalid_urls_are_reported_without_the_password() {
    for url in [
        "not a url",
        "http://user:hunter2@localhost:6379",
        "redis://user:hunter2@localhost:6379/notadb",
    ] {
        let err = RedisStore::connect(url, "shop").await.unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{url}: {err:?}");
        assert!(!err.report().to_string().contains("hunter2"), "{err}");
        assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
    }
    let err = RedisStore::connect("redis://127.0.0.1:6379", "bad ns")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidNamespace { .. }), "{err:?}");
}

#[tokio::test]
async fn unreachable_redis_is_a_connect_error_naming_host_and_port_only() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://admin:hunter2@127.0.0.1:{port}/0");
    let err = RedisStore::connect(&url, "shop").await.unwrap_err();
    match &err {
        Error::Connect { addr, .. } => assert_eq!(addr, &format!("127.0.0.1:{port}")),
        other => panic!("expected Connect, got {other:?}"),
    }
    assert!(err.is_transient());
    assert!(!err.report().to_string().contains("hunter2"), "{err}");
    assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
}

#[tokio::test]
async fn wrong_password_is_a_connect_error_without_the_password() {
    let server = RedisServer::builder()
        .arg("--requirepass")
        .arg("right-pass")
        .start();
    let url = format!("redis://:wrong-pass@127.0.0.1:{}", server.port());
    let err = RedisStore::connect(&url, "shop").await.unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(!err.report().to_string().contains("wrong-pass"), "{err}");
    // No password at all: refused at connect too, not at the first job.
    let err = RedisStore::connect(&server.url(), "shop")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    let ok = format!("redis://:right-pass@127.0.0.1:{}/3", server.port());
    let s = RedisStore::connect(&ok, "shop").await.unwrap();
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    assert!(!format!("{s:?}").contains("right-pass"));
}

#[tokio::test]
async fn version_check_passes_and_worker_start_tolerates_disabled_config() {
    let server = RedisServer::builder()
        .arg("--rename-command")
        .arg("CONFIG")
        .arg("")
        .start();
    let s = store(&server, "shop").await;
    assert_eq!(s.backend_name(), "redis");
    s.check_worker_start().await.unwrap();
    let server = RedisServer::builder()
        .arg("--maxmemory-policy")
        .arg("allkeys-lru")
        .start();
    store(&server, "shop")
        .await
        .check_worker_start()
        .await
        .unwrap();
}

#[tokio::test]
async fn tls_urls_are_understood() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = RedisStore::connect(&format!("rediss://:hunter2@127.0.0.1:{port}"), "shop")
        .await
        .unwrap_err();
    // With the `tls` feature (the workspace's build: tests/tls turns it on) the URL is understood
    // and the connect fails; without it, the URL is refused naming the feature.
    if cfg!(feature = "tls") {
        assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    } else {
        assert!(matches!(err, Error::InvalidUrl { .. }), "{err:?}");
        assert!(err.to_string().contains("`tls` feature"), "{err}");
    }
    assert!(!err.report().to_string().contains("hunter2"), "{err}");
    let err = RedisStore::connect(&format!("rediss://127.0.0.1:{port}/#nope"), "shop")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err:?}");
}

#[tokio::test]
async fn connecting_leaves_no_error_in_the_servers_errorstats() {
    // Redis 6.2 and 7.0 answer redis-rs's `CLIENT SETINFO` (sent at each connect unless told not to)
    // with an error, which operators then see in `INFO errorstats` at every connect and reconnect.
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.check_worker_start().await.unwrap();
    // The hints' subscriber opens a connection of its own: wait until it has subscribed.
    let _hints = s.hints();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.cli(&["PUBSUB", "CHANNELS", "*"]).unwrap() == redis::Value::Array(vec![]) {
        assert!(std::time::Instant::now() < deadline, "no subscriber");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let stats = match server.cli(&["INFO", "errorstats"]).unwrap() {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("unexpected INFO reply {other:?}"),
    };
    let errors: Vec<&str> = stats
        .lines()
        .filter(|l| l.starts_with("errorstat_"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
