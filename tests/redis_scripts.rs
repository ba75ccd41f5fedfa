//! Script behaviour specific to Redis: leases over real time, big batches, extreme arguments, idle cost.

mod support;

use std::time::Duration;

use postpone::store::{
    ClaimRequest, DeadLetterStore, Due, Finish, FinishItem, FinishOutcome, JobStore, LeaseStatus,
    StoredState, TrimPolicy, WorkerStore,
};
use support::redis_server::RedisServer;
use support::store::*;

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
    for policy in [
        TrimPolicy::new(Some(Duration::ZERO), Some(0)),
        TrimPolicy::new(Some(Duration::MAX), Some(u64::MAX)),
    ] {
        assert_eq!(s.dead_trim(T, policy, usize::MAX).await.unwrap(), 0);
    }
}

#[tokio::test]
async fn an_idle_claim_costs_six_commands() {
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
    // EVALSHA + TIME + 3 ZRANGE (earliest lease, earliest due, dead pending) + HGET (whether ends of
    // jobs that batches follow wait for delivery): whether the topic is paused is read only when
    // something is due (and then with the ends flag, in one HMGET).
    assert_eq!(commands(&server), 10 * 6);
}

#[tokio::test]
async fn scripts_come_back_after_script_flush() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    // NOSCRIPT: loaded again and run, once.
    s.enqueue(T, vec![job("b", Due::In(0))]).await.unwrap();
    assert_eq!(s.claim(T, claim(10)).await.unwrap().jobs.len(), 2);
}
