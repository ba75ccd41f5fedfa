//! The Redis backend against real `redis-server`s started by the tests themselves.

mod support;

use std::time::{Duration, Instant};

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::{
    CancelOutcome, ClaimRequest, Due, EnqueueOutcome, Finish, FinishItem, FinishOutcome, Hint,
    LeaseStatus, NewJob, RescheduleOutcome, Store, StoredState,
};
use postpone::Error;
use support::redis_server::RedisServer;

const T: &str = "orders.close";

async fn store(server: &RedisServer, ns: &str) -> RedisStore {
    RedisStore::connect(&server.url(), ns)
        .await
        .expect("connect")
}

fn job(id: &str, due: Due) -> NewJob {
    NewJob::new(
        id.into(),
        format!("record of {id}").into_bytes(),
        due,
        false,
    )
}

fn claim(max: usize) -> ClaimRequest {
    ClaimRequest::new(max, 30_000, 100, 3)
}

/// Retries `f` until it succeeds (the store recovers by itself), for at most 20 s.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = postpone::Result<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                assert!(e.is_transient(), "{what}: not a transient error: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{what}: still failing after 20 s: {e}"),
        }
    }
}

#[tokio::test]
async fn keys_stay_in_the_topic_slot_and_finished_jobs_leave_nothing() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let jobs: Vec<_> = (0..50)
        .map(|i| job(&format!("order:{i}"), Due::In(0)))
        .collect();
    s.enqueue(T, jobs).await.unwrap();
    s.enqueue(T, vec![job("later", Due::In(3_600_000))])
        .await
        .unwrap();
    let batch = s.claim(T, claim(20)).await.unwrap();
    assert_eq!(batch.jobs.len(), 20);
    // Marked while running; its Done still counts as processed.
    assert_eq!(
        s.cancel(T, &batch.jobs[0].id).await.unwrap(),
        CancelOutcome::Marked
    );
    let prefix = "postpone:{shop:orders.close}:";
    for key in server.keys() {
        assert!(
            key.starts_with(prefix),
            "{key} is outside the topic's hash tag"
        );
    }
    // Finish everything: done, retried then done, dead then purged, cancelled.
    let mut items: Vec<_> = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    items[1] = FinishItem::new(
        batch.jobs[1].id.clone(),
        batch.jobs[1].token,
        Finish::Retry {
            record: b"again".to_vec(),
            delay_ms: 0,
            counted: true,
        },
    );
    items[2] = FinishItem::new(
        batch.jobs[2].id.clone(),
        batch.jobs[2].token,
        Finish::Dead {
            record: b"dead".to_vec(),
            reason: "boom".into(),
        },
    );
    s.finish(T, items).await.unwrap();
    loop {
        let batch = s.claim(T, claim(100)).await.unwrap();
        if batch.jobs.is_empty() {
            break;
        }
        let items = batch
            .jobs
            .iter()
            .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
            .collect();
        s.finish(T, items).await.unwrap();
    }
    assert_eq!(s.cancel(T, "later").await.unwrap(), CancelOutcome::Removed);
    s.dead_purge(T, None).await.unwrap();
    assert_eq!(server.keys(), vec![format!("{prefix}stats")]);
    let c = s.counts(T).await.unwrap();
    assert_eq!(
        (c.processed, c.retried, c.dead_total, c.failed, c.cancelled),
        (49, 1, 1, 1, 1)
    );
}

#[tokio::test]
async fn invalid_urls_are_reported_without_the_password() {
    for url in [
        "not a url",
        "http://user:hunter2@localhost:6379",
        "redis://user:hunter2@localhost:6379/notadb",
    ] {
        let err = RedisStore::connect(url, "shop").await.unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{url}: {err:?}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
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
    assert!(!err.to_string().contains("hunter2"), "{err}");
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
    assert!(!err.to_string().contains("wrong-pass"), "{err}");
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

async fn next(rx: &mut tokio::sync::broadcast::Receiver<Hint>) -> Hint {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("a hint within 20 s")
        .unwrap()
}

#[tokio::test]
async fn hints_arrive_for_earlier_jobs_and_all_after_a_restart() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let mut hints = s.hints();
    assert_eq!(
        next(&mut hints).await,
        Hint::All,
        "Hint::All after subscribing"
    );
    let out = s
        .enqueue(T, vec![job("late", Due::In(60_000))])
        .await
        .unwrap();
    let EnqueueOutcome::Created { due_at_ms: late } = out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        next(&mut hints).await,
        Hint::Topic {
            topic: T.into(),
            due_at_ms: late
        }
    );
    // Not earlier: no hint. Earlier: a hint.
    s.enqueue(T, vec![job("later", Due::In(120_000))])
        .await
        .unwrap();
    let out = s
        .enqueue(T, vec![job("soon", Due::In(1_000))])
        .await
        .unwrap();
    let EnqueueOutcome::Created { due_at_ms: soon } = out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        next(&mut hints).await,
        Hint::Topic {
            topic: T.into(),
            due_at_ms: soon
        }
    );
    // Reschedule earlier than the earliest: a hint.
    let r = s.reschedule(T, "later", Due::In(0)).await.unwrap();
    let RescheduleOutcome::Rescheduled { due_at_ms } = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        next(&mut hints).await,
        Hint::Topic {
            topic: T.into(),
            due_at_ms
        }
    );
    // Another namespace's hints never arrive here.
    store(&server, "other")
        .await
        .enqueue(T, vec![job("x", Due::In(0))])
        .await
        .unwrap();
    server.kill9();
    server.restart();
    assert_eq!(
        next(&mut hints).await,
        Hint::All,
        "Hint::All after a reconnect"
    );
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

#[tokio::test]
async fn hostile_ids_are_stored_and_found() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let ids = [
        "{}",
        "{shop:other}",
        ":",
        "a:b:c",
        "*",
        "?[a]",
        "with spaces",
        "zoé 🦀 注文",
        "\\",
        "'\"",
        &"x".repeat(512),
    ];
    let jobs = ids.iter().map(|id| job(id, Due::In(0))).collect();
    let out = s.enqueue(T, jobs).await.unwrap();
    assert!(
        out.iter()
            .all(|o| matches!(o, EnqueueOutcome::Created { .. })),
        "{out:?}"
    );
    for id in ids {
        let found = s
            .job(T, id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{id} not found"));
        assert_eq!(found.record, format!("record of {id}").into_bytes());
    }
    let batch = s.claim(T, claim(100)).await.unwrap();
    let mut got: Vec<_> = batch.jobs.iter().map(|j| j.id.as_str()).collect();
    let mut want = ids.to_vec();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    for key in server.keys() {
        assert!(key.starts_with("postpone:{shop:orders.close}:"), "{key}");
    }
    let items = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    assert!(s
        .finish(T, items)
        .await
        .unwrap()
        .iter()
        .all(|o| *o == FinishOutcome::Applied));
}

#[tokio::test]
async fn namespaces_do_not_see_each_other() {
    let server = RedisServer::start();
    let a = store(&server, "a").await;
    let b = store(&server, "b").await;
    a.enqueue(T, vec![job("same", Due::In(0))]).await.unwrap();
    assert!(b.job(T, "same").await.unwrap().is_none());
    assert!(b.claim(T, claim(10)).await.unwrap().jobs.is_empty());
    let out = b.enqueue(T, vec![job("same", Due::In(0))]).await.unwrap();
    assert!(matches!(out[0], EnqueueOutcome::Created { .. }));
    assert_eq!(a.counts(T).await.unwrap().ready, 1);
    assert_eq!(a.claim(T, claim(10)).await.unwrap().jobs.len(), 1);
    assert_eq!(b.counts(T).await.unwrap().ready, 1);
}

#[tokio::test]
async fn leases_extend_and_expire() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    let j = s
        .claim(T, ClaimRequest::new(1, 50, 100, 1))
        .await
        .unwrap()
        .jobs
        .remove(0);
    let lease = [(j.id.clone(), j.token)];
    assert_eq!(
        s.extend(T, &lease, 50).await.unwrap(),
        vec![LeaseStatus::Held]
    );
    assert_eq!(
        s.extend(T, &[(j.id.clone(), j.token + 1)], 50)
            .await
            .unwrap(),
        vec![LeaseStatus::Lost]
    );
    tokio::time::sleep(Duration::from_millis(120)).await;
    // Swept back to due (stall 1 <= limit 1), then claimed again under a new token.
    let b = s.claim(T, ClaimRequest::new(1, 50, 100, 1)).await.unwrap();
    assert_eq!((b.swept, b.jobs.len()), (1, 1));
    let again = &b.jobs[0];
    assert_ne!(again.token, j.token);
    assert_eq!(
        s.extend(T, &lease, 50).await.unwrap(),
        vec![LeaseStatus::Lost]
    );
    let late = s
        .finish(
            T,
            vec![FinishItem::new(j.id.clone(), j.token, Finish::Done)],
        )
        .await
        .unwrap();
    assert_eq!(late, vec![FinishOutcome::Stale]);
    tokio::time::sleep(Duration::from_millis(120)).await;
    // Second stall exceeds the limit: dead-lettered.
    let b = s.claim(T, ClaimRequest::new(1, 50, 100, 1)).await.unwrap();
    assert_eq!((b.swept, b.swept_dead, b.jobs.len()), (0, 1, 0));
    assert!(b.dead_pending);
    let found = s.job(T, "a").await.unwrap().unwrap();
    match found.state {
        StoredState::Dead {
            reason, delivered, ..
        } => {
            assert_eq!(reason, "stalled: lease expired 2 times");
            assert!(!delivered);
        }
        other => panic!("{other:?}"),
    }
    let c = s.counts(T).await.unwrap();
    assert_eq!(
        (c.stalled, c.dead_total, c.failed, c.dead, c.dead_pending),
        (1, 1, 0, 1, 1)
    );
}

#[tokio::test]
async fn big_batches_are_fine() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let jobs: Vec<_> = (0..5000)
        .map(|i| job(&format!("j{i}"), Due::In(0)))
        .collect();
    let out = s.enqueue(T, jobs).await.unwrap();
    assert_eq!(out.len(), 5000);
    let batch = s
        .claim(T, ClaimRequest::new(5000, 60_000, 5000, 3))
        .await
        .unwrap();
    assert_eq!(batch.jobs.len(), 5000);
    assert!(batch.jobs.iter().all(|j| j.token == batch.jobs[0].token));
    let leases: Vec<_> = batch.jobs.iter().map(|j| (j.id.clone(), j.token)).collect();
    assert!(s
        .extend(T, &leases, 60_000)
        .await
        .unwrap()
        .iter()
        .all(|l| *l == LeaseStatus::Held));
    let items = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    let done = s.finish(T, items).await.unwrap();
    assert!(done.iter().all(|o| *o == FinishOutcome::Applied));
    assert_eq!(s.counts(T).await.unwrap().processed, 5000);
}

/// A tracing writer that keeps what was logged.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test]
async fn worker_start_warns_loudly_about_an_evicting_redis() {
    let log = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
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

#[tokio::test]
async fn the_hint_listener_stops_when_the_store_is_dropped() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let mut hints = s.hints();
    assert_eq!(next(&mut hints).await, Hint::All);
    let pubsub_clients = || {
        let list: String = redis::FromRedisValue::from_redis_value(
            server.cli(&["CLIENT", "LIST", "TYPE", "pubsub"]).unwrap(),
        )
        .unwrap();
        list.lines().count()
    };
    assert_eq!(pubsub_clients(), 1);
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pubsub_clients() > 0 {
        assert!(
            Instant::now() < deadline,
            "the hint listener outlived its store"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its receivers see the channel close.
    assert!(matches!(
        hints.recv().await,
        Err(tokio::sync::broadcast::error::RecvError::Closed)
    ));
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
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let err = RedisStore::connect(&format!("rediss://127.0.0.1:{port}/#nope"), "shop")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err:?}");
}

#[tokio::test]
async fn huge_offsets_and_limits_are_fine() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    let j = s.claim(T, claim(1)).await.unwrap().jobs.remove(0);
    let dead = Finish::Dead {
        record: b"r".to_vec(),
        reason: "x".into(),
    };
    s.finish(T, vec![FinishItem::new(j.id, j.token, dead)])
        .await
        .unwrap();
    assert!(s
        .dead_list(T, usize::MAX, usize::MAX)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.dead_list(T, 0, usize::MAX).await.unwrap().len(), 1);
    assert_eq!(
        s.dead_claim(T, usize::MAX, u64::MAX).await.unwrap().len(),
        1
    );
    s.enqueue(
        T,
        vec![job("b", Due::In(u64::MAX)), job("c", Due::At(i64::MAX))],
    )
    .await
    .unwrap();
    let c = s
        .claim(
            T,
            ClaimRequest::new(usize::MAX, u64::MAX, usize::MAX, u32::MAX),
        )
        .await
        .unwrap();
    assert!(c.jobs.is_empty());
    assert_eq!(s.dead_trim(T, i64::MAX, 0, usize::MAX).await.unwrap(), 0);
}

/// Every call in INFO commandstats (scripts' inner calls included), but the test's own.
fn commands(server: &RedisServer) -> u64 {
    let info: String =
        redis::FromRedisValue::from_redis_value(server.cli(&["INFO", "commandstats"]).unwrap())
            .unwrap();
    info.lines()
        .filter(|l| !l.starts_with("cmdstat_info:") && !l.starts_with("cmdstat_config"))
        .filter_map(|l| {
            l.split_once("calls=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[tokio::test]
async fn an_idle_claim_costs_five_commands() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("later", Due::In(3_600_000))])
        .await
        .unwrap();
    s.claim(T, claim(50)).await.unwrap(); // loads the script
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    for _ in 0..10 {
        let b = s.claim(T, claim(50)).await.unwrap();
        assert!(b.jobs.is_empty() && b.next_due_ms.is_some());
    }
    // EVALSHA + TIME + 3 ZRANGE (earliest lease, earliest due, dead pending).
    assert_eq!(commands(&server), 10 * 5);
}
