//! Wake-up hints over pub/sub.

mod support;

use postpone::store::{Due, EnqueueOutcome, Hint, JobStore, RescheduleOutcome, WorkerStore};
use support::redis_server::RedisServer;
use support::store::*;
use support::wait::wait_until;

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
    wait_until("the hint listener to end with its store", || {
        pubsub_clients() == 0
    })
    .await;
    // Its receivers see the channel close.
    assert!(matches!(
        hints.recv().await,
        Err(tokio::sync::broadcast::error::RecvError::Closed)
    ));
}
