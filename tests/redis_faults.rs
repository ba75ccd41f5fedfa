//! Faults: a store outlives Redis restarts, killed connections and pauses (flushed scripts and function
//! libraries: redis_scripts.rs).

mod support;

use std::time::Duration;

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::{
    ClaimRequest, DeadLetterStore, Due, Finish, FinishItem, FinishOutcome, JobStore, LeaseStatus,
    NewJob, StoredState, WorkerStore,
};
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
    let counts = until_ok("counts after restart", || s.counts(T)).await;
    assert_eq!((counts.ready, counts.active), (7, 3));
    // The leases survived too: the claim's tokens still finish the jobs.
    let items = claimed
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    let done = until_ok("finish after restart", || s.finish(T, Vec::clone(&items))).await;
    assert_eq!(done, vec![FinishOutcome::Applied; 3]);
    assert!(s.job(T, "j9").await.unwrap().is_some());
}

/// A crash can stop Redis in the middle of its write of a script's transaction (MULTI, the script's
/// writes, EXEC) to the AOF. Redis 7.0 loads past the torn end but keeps the transaction's start in the
/// file, and the next restart applies it: an enqueue whose caller got an error would appear after the
/// second crash, and a finish would count twice. Restarting as the guide says (`redis-check-aof --fix`
/// first, which `RedisServer::restart` does) cuts it whole.
#[tokio::test]
async fn a_transaction_torn_by_a_crash_is_cut_whole_and_not_applied_after_the_next_crash() {
    let server = RedisServer::builder()
        .aof(true)
        .appendfsync("always")
        .start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("kept", Due::In(0))]).await.unwrap();
    s.enqueue(T, vec![job("torn", Due::In(0))]).await.unwrap();
    server.kill9();
    // Tear the last transaction (the second enqueue's) in its EXEC, as a write cut short would.
    let manifest = server.aof_manifest().expect("an AOF");
    let incr = std::fs::read_dir(manifest.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incr file");
    let bytes = std::fs::read(&incr).unwrap();
    let multi = b"*1\r\n$5\r\nMULTI\r\n";
    let exec = b"*1\r\n$4\r\nEXEC\r\n";
    let last = bytes
        .windows(multi.len())
        .rposition(|w| w == multi)
        .expect("a transaction");
    assert!(bytes.ends_with(exec), "the AOF ends with a transaction");
    assert!(
        bytes[last..].windows(4).any(|w| w == b"torn"),
        "the last transaction is the second enqueue's"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&incr)
        .unwrap()
        .set_len(bytes.len() as u64 - 3)
        .unwrap();

    server.restart();
    let counts = until_ok("counts after the first restart", || s.counts(T)).await;
    assert_eq!(counts.ready, 1);
    assert!(s.job(T, "torn").await.unwrap().is_none());
    // A write after the restart, then another crash: the torn transaction stays cut.
    s.enqueue(T, vec![job("after", Due::In(0))]).await.unwrap();
    server.kill9();
    server.restart();
    let counts = until_ok("counts after the second restart", || s.counts(T)).await;
    assert_eq!(counts.ready, 2);
    assert!(s.job(T, "kept").await.unwrap().is_some());
    assert!(s.job(T, "after").await.unwrap().is_some());
    assert!(
        s.job(T, "torn").await.unwrap().is_none(),
        "the torn enqueue was applied"
    );
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
    let c = until_ok("counts after resume", || s.counts(T)).await;
    assert_eq!(c.ready, 1);
}

/// Fills Redis (maxmemory, noeviction) with jobs due later, until an enqueue is refused.
async fn fill(s: &RedisStore) {
    let big = vec![b'x'; 8192];
    for batch in 0..10_000 {
        let jobs = (0..10)
            .map(|i| {
                NewJob::new(
                    format!("fill{batch}-{i}"),
                    big.clone(),
                    Due::In(3_600_000),
                    false,
                )
            })
            .collect();
        if let Err(e) = s.enqueue(T, jobs).await {
            assert!(e.report().to_string().contains("OOM"), "{}", e.report());
            return;
        }
    }
    panic!("Redis never filled up");
}

#[tokio::test]
async fn a_full_redis_still_claims_extends_and_finishes() {
    let server = RedisServer::builder()
        .arg("--maxmemory")
        .arg("2mb")
        .arg("--maxmemory-policy")
        .arg("noeviction")
        .start();
    let s = store(&server, "shop").await;
    let jobs = (0..3).map(|i| job(&format!("j{i}"), Due::In(0))).collect();
    s.enqueue(T, jobs).await.unwrap();
    fill(&s).await;
    // Claims and heartbeats only move jobs, and acknowledgements free memory: a full Redis must take
    // them, or it could never be drained and every running job would stall.
    let claimed = s.claim(T, claim(3)).await.unwrap();
    assert_eq!(claimed.jobs.len(), 3);
    let leases: Vec<(String, u64)> = claimed
        .jobs
        .iter()
        .map(|j| (j.id.clone(), j.token))
        .collect();
    assert_eq!(
        s.extend(T, &leases, 30_000).await.unwrap(),
        vec![LeaseStatus::Held; 3]
    );
    let items = vec![
        FinishItem::new("j0".into(), claimed.jobs[0].token, Finish::Done),
        FinishItem::new(
            "j1".into(),
            claimed.jobs[1].token,
            Finish::Dead {
                record: b"r".to_vec(),
                reason: "failed".into(),
            },
        ),
    ];
    assert_eq!(
        s.finish(T, items).await.unwrap(),
        vec![FinishOutcome::Applied; 2]
    );
    // The dead-letter hook's jobs come through too.
    assert_eq!(s.dead_claim(T, 10, 1000).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_due_job_whose_record_was_deleted_is_dead_lettered_with_a_reason() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let jobs = ["a", "b"].iter().map(|id| job(id, Due::In(0))).collect();
    s.enqueue(T, jobs).await.unwrap();
    server
        .cli(&["HDEL", "postpone:{shop:orders.close}:jobs", "a"])
        .unwrap();
    let claimed = s.claim(T, claim(10)).await.unwrap();
    let ids: Vec<&str> = claimed.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["b"]);
    match s.job(T, "a").await.unwrap().map(|j| j.state) {
        Some(StoredState::Dead { reason, .. }) => assert!(reason.contains("damaged"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let counts = s.counts(T).await.unwrap();
    assert_eq!((counts.dead, counts.dead_pending, counts.active), (1, 1, 1));
    // The hook gets it, with the damage named.
    let dead = s.dead_claim(T, 10, 1000).await.unwrap();
    assert_eq!(dead[0].id, "a");
}

#[tokio::test]
async fn a_stalled_job_whose_record_was_deleted_is_dead_lettered_with_a_reason() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    let request = |max| ClaimRequest::new(max, 20, 100, 0);
    assert_eq!(s.claim(T, request(1)).await.unwrap().jobs.len(), 1);
    server
        .cli(&["HDEL", "postpone:{shop:orders.close}:jobs", "a"])
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let batch = s.claim(T, request(0)).await.unwrap();
    assert_eq!(batch.swept_dead, 1);
    match s.job(T, "a").await.unwrap().map(|j| j.state) {
        Some(StoredState::Dead { reason, .. }) => {
            assert!(
                reason.contains("stalled") && reason.contains("damaged"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_lease_entry_deleted_under_a_running_job_is_put_back_by_its_heartbeat() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    let claimed = s.claim(T, claim(1)).await.unwrap();
    server
        .cli(&["ZREM", "postpone:{shop:orders.close}:active", "a"])
        .unwrap();
    // Without its lease entry the job is in no set: were its worker to die now, nothing would sweep it.
    assert!(s.job(T, "a").await.unwrap().is_none());
    let leases = [("a".to_owned(), claimed.jobs[0].token)];
    assert_eq!(
        s.extend(T, &leases, 30_000).await.unwrap(),
        [LeaseStatus::Held]
    );
    assert!(matches!(
        s.job(T, "a").await.unwrap().map(|j| j.state),
        Some(StoredState::Active { .. })
    ));
}

/// Runs a command with binary arguments on a fresh connection.
fn raw(server: &RedisServer, args: &[&[u8]]) {
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query(&mut conn).unwrap();
}

#[tokio::test]
async fn an_id_that_is_not_utf8_strands_no_other_job() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let key = |suffix: &str| format!("postpone:{{shop:orders.close}}:{suffix}").into_bytes();
    // Written by something other than postpone: an id that is not UTF-8, due first.
    raw(&server, &[b"ZADD", &key("due"), b"0", b"\xff"]);
    raw(&server, &[b"HSET", &key("jobs"), b"\xff", b"record"]);
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    let claimed = s.claim(T, claim(10)).await.unwrap();
    let ids: Vec<&str> = claimed.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a"]);
    // The same among dead jobs: the others still reach the hook and the listing.
    raw(&server, &[b"ZADD", &key("dead"), b"0", b"\xfe"]);
    raw(&server, &[b"ZADD", &key("dead_pending"), b"0", b"\xfe"]);
    raw(&server, &[b"HSET", &key("dead_jobs"), b"\xfe", b"record"]);
    let items = vec![FinishItem::new(
        "a".into(),
        claimed.jobs[0].token,
        Finish::Dead {
            record: b"r".to_vec(),
            reason: "failed".into(),
        },
    )];
    s.finish(T, items).await.unwrap();
    let dead = s.dead_claim(T, 10, 1000).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, "a");
    assert_eq!(s.dead_list(T, 0, 10).await.unwrap().len(), 1);
}
