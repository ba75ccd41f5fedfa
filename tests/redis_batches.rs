//! Batches on Redis under faults, at the store seam: a dispatch that fails half way (a member's topic
//! refuses its write) is finished by recovery with every member enqueued once; many callers delivering
//! the same ends at once (workers finishing a batch's last members together) fire each callback once;
//! a batch that completed goes with its keys after the retention, and a job in no batch leaves nothing.

mod support;

use std::sync::Arc;

use futures_util::future::join_all;
use postpone::store::{
    BatchCreated, BatchJob, CallbackKind, Due, Finish, FinishItem, JobStore, NewBatch, OpsStore,
    WorkerStore, WorkflowStore,
};
use support::redis_server::RedisServer;
use support::store::{claim, job, store};

fn member(topic: &str, id: &str) -> BatchJob {
    BatchJob::new(topic, job(id, Due::In(0)))
}

fn batch_of(jobs: Vec<BatchJob>) -> NewBatch {
    let mut b = NewBatch::default();
    b.description = "billing run".into();
    b.callbacks = vec![
        (
            CallbackKind::Success,
            member("billing.done", "run-1:success"),
        ),
        (
            CallbackKind::Complete,
            member("billing.done", "run-1:complete"),
        ),
    ];
    b.jobs = jobs;
    b.close = true;
    b
}

/// Claims everything due in `topic` and finishes it as succeeded; returns the ids.
async fn run_all(s: &impl WorkerStore, topic: &str) -> Vec<String> {
    let c = s.claim(topic, claim(10_000)).await.unwrap();
    let items = c
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Succeeded { result: vec![] }))
        .collect();
    s.finish(topic, items).await.unwrap();
    c.jobs.into_iter().map(|j| j.id).collect()
}

#[tokio::test]
async fn a_batch_dispatch_that_failed_half_way_is_finished_by_recovery_once() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    // The second topic's `delivered` key has the wrong type: its members' enqueue fails (WRONGTYPE),
    // after the first topic's went through.
    server
        .cli(&["SET", "postpone:{shop:sms}:delivered", "in the way"])
        .unwrap();
    let jobs = vec![member("mail", "a"), member("mail", "b"), member("sms", "c")];
    let e = s.batch_create("run-1", batch_of(jobs)).await.unwrap_err();
    let why = e.report().to_string();
    assert!(why.contains("WRONGTYPE"), "{why}");
    // Committed all the same: the batch counts its three members, and the first topic has its two.
    let status = s.batch("run-1").await.unwrap().expect("the batch exists");
    assert_eq!((status.total, status.closed), (3, true));
    assert_eq!(s.counts("mail").await.unwrap().ready, 2);
    assert_eq!(s.counts("sms").await.unwrap().ready, 0);

    // The fault goes; recovery looks at the batch once its check is due (a minute after creation,
    // brought forward here) and enqueues what was left, the first topic's members not twice.
    server
        .cli(&["DEL", "postpone:{shop:sms}:delivered"])
        .unwrap();
    server
        .cli(&["ZADD", "postpone:{shop}:batch_check", "0", "run-1"])
        .unwrap();
    assert_eq!(s.recover_batches(10).await.unwrap(), 1);
    assert_eq!(s.counts("mail").await.unwrap().ready, 2);
    assert_eq!(s.counts("sms").await.unwrap().ready, 1);

    let mut ran = run_all(&s, "mail").await;
    ran.extend(run_all(&s, "sms").await);
    ran.sort();
    assert_eq!(ran, ["a", "b", "c"]);
    // A second recovery (say, another worker's) changes nothing.
    server
        .cli(&["ZADD", "postpone:{shop}:batch_check", "0", "run-1"])
        .unwrap();
    s.recover_batches(10).await.unwrap();
    assert_eq!(s.counts("mail").await.unwrap().ready, 0);
    assert_eq!(s.deliver_ends("mail", 10).await.unwrap(), 2);
    assert_eq!(s.deliver_ends("sms", 10).await.unwrap(), 1);
    let mut callbacks = run_all(&s, "billing.done").await;
    callbacks.sort();
    assert_eq!(callbacks, ["run-1:complete", "run-1:success"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_last_members_end_together_fires_each_callback_once() {
    let server = RedisServer::start();
    for round in 0..5 {
        let ns = format!("race{round}");
        let s = Arc::new(store(&server, &ns).await);
        // Members in four topics, each with its own deliverers, all finishing at once.
        let topics = ["t0", "t1", "t2", "t3"];
        let jobs = (0..200)
            .map(|i| member(topics[i % 4], &format!("m{i}")))
            .collect();
        assert_eq!(
            s.batch_create("run-1", batch_of(jobs)).await.unwrap(),
            BatchCreated::Created
        );
        join_all(topics.iter().map(|t| run_all(&*s, t))).await;
        // Recovery is due for the batch too (as a minute after its creation), so it dispatches
        // staged callbacks beside the deliverers.
        server
            .cli(&[
                "ZADD",
                &format!("postpone:{{{ns}}}:batch_check"),
                "0",
                "run-1",
            ])
            .unwrap();
        // Eight deliverers per topic and eight recoveries, concurrently.
        let mut racers = tokio::task::JoinSet::new();
        for _ in 0..8 {
            for t in topics {
                let s = s.clone();
                racers.spawn(async move { s.deliver_ends(t, 16).await.map(drop) });
            }
            let s = s.clone();
            racers.spawn(async move { s.recover_batches(10).await.map(drop) });
        }
        while let Some(done) = racers.join_next().await {
            done.unwrap().unwrap();
        }
        // What the racers left (ends hidden under another's lease are theirs; all of them ran to
        // the end here, so nothing is left).
        for t in topics {
            assert_eq!(s.deliver_ends(t, 1000).await.unwrap(), 0, "{t}");
        }
        let status = s.batch("run-1").await.unwrap().unwrap();
        assert_eq!((status.succeeded, status.pending()), (200, 0), "{status:?}");
        assert!(status.completed_at_ms.is_some());
        let counts = s.counts("billing.done").await.unwrap();
        assert_eq!(
            counts.ready, 2,
            "round {round}: each callback enqueued once"
        );
        let mut callbacks = run_all(&*s, "billing.done").await;
        callbacks.sort();
        assert_eq!(callbacks, ["run-1:complete", "run-1:success"]);
    }
}

#[tokio::test]
async fn a_completed_batch_expires_and_jobs_in_no_batch_leave_no_batch_keys() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    // A job in no batch: enqueued, run, finished: no follower, end or batch key anywhere.
    s.enqueue("mail", vec![job("plain", Due::In(0))])
        .await
        .unwrap();
    run_all(&s, "mail").await;
    assert_eq!(s.deliver_ends("mail", 10).await.unwrap(), 0);
    let keys = server.keys();
    assert!(
        keys.iter()
            .all(|k| !k.contains("batch") && !k.ends_with(":follows") && !k.ends_with(":ends")),
        "{keys:?}"
    );

    s.batch_create("run-1", batch_of(vec![member("mail", "a")]))
        .await
        .unwrap();
    run_all(&s, "mail").await;
    s.deliver_ends("mail", 10).await.unwrap();
    // Completed, callbacks enqueued: the batch is off the recovery queue and its keys expire (in 7
    // days); the member's follower and end are gone.
    let ttl: i64 = redis::FromRedisValue::from_redis_value(
        server
            .cli(&["PTTL", "postpone:{shop:batch:run-1}:batch"])
            .unwrap(),
    )
    .unwrap();
    assert!(ttl > 6 * 24 * 3_600_000, "{ttl}");
    let keys = server.keys();
    assert!(
        !keys.iter().any(|k| k.ends_with(":batch_check")),
        "{keys:?}"
    );
    assert!(
        !keys
            .iter()
            .any(|k| k.ends_with(":follows") || k.ends_with(":ends") || k.ends_with(":end_info")),
        "{keys:?}"
    );
    // Once gone (expired here at once), it leaves the listing.
    server
        .cli(&[
            "DEL",
            "postpone:{shop:batch:run-1}:batch",
            "postpone:{shop:batch:run-1}:members",
        ])
        .unwrap();
    assert!(s.batch("run-1").await.unwrap().is_none());
    assert!(s.batches(0, 10).await.unwrap().is_empty());
    assert!(!server.keys().iter().any(|k| k.ends_with(":batches")));
}

#[tokio::test]
async fn a_keyed_members_key_survives_a_dispatch_finished_by_recovery() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    // As above: the dispatch to the second topic fails, recovery enqueues its member later, from the
    // batch's staged entry; that entry carries the member's key for fairness.
    server
        .cli(&["SET", "postpone:{shop:sms}:delivered", "in the way"])
        .unwrap();
    let keyed = |topic: &str, id: &str, key: &str| {
        BatchJob::new(topic, job(id, Due::In(0)).with_key(Some(key.to_owned())))
    };
    let jobs = vec![keyed("mail", "a", "acme"), keyed("sms", "c", "globex")];
    s.batch_create("run-2", batch_of(jobs)).await.unwrap_err();
    server
        .cli(&["DEL", "postpone:{shop:sms}:delivered"])
        .unwrap();
    server
        .cli(&["ZADD", "postpone:{shop}:batch_check", "0", "run-2"])
        .unwrap();
    assert_eq!(s.recover_batches(10).await.unwrap(), 1);
    for (topic, key) in [("mail", "acme"), ("sms", "globex")] {
        let page = s.busiest_keys(topic, 10, 1000).await.unwrap();
        let keys: Vec<_> = page
            .keys
            .iter()
            .map(|k| (k.key.as_str(), k.queued))
            .collect();
        assert_eq!(keys, [(key, 1)], "{topic}: {page:?}");
    }
}
