//! Partitioned topics: routing by id, sums and merges over partitions, and a worker that serves every
//! partition fairly, with wake-ups and lease sweeping per partition.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postpone::store::{ClaimRequest, StoredState};
use postpone::{
    partition_of, EnqueueItem, EnqueueStatus, Job, JobContext, JobError, JobState, Worker,
};
use serde::{Deserialize, Serialize};

use super::*;

/// Three partitions.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "parts", partitions = 3, retry = ["0", "0"])]
pub(crate) struct Part {
    pub n: u64,
}

const P: u16 = 3;

/// The store's name of partition `p` (partition 0 keeps the topic's own name).
fn stored_as(p: u16) -> String {
    match p {
        0 => Part::TOPIC.to_owned(),
        p => format!("{}#{p}", Part::TOPIC),
    }
}

/// `count` ids of the form `<prefix>-<i>` that fall in partition `p`.
fn ids_in(prefix: &str, p: u16, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|id| partition_of(id, P) == p)
        .take(count)
        .collect()
}

/// A handler that reports `(partition of its id, n)`.
fn reporting(
    tx: mpsc::UnboundedSender<(u16, u64)>,
) -> impl Fn(Part, JobContext) -> std::future::Ready<Result<(), JobError>> + Clone + Send + Sync + 'static
{
    move |job: Part, ctx: JobContext| {
        let _ = tx.send((partition_of(ctx.id(), P), job.n));
        std::future::ready(Ok(()))
    }
}

pub(crate) async fn partitioned_topic_routes_by_id_and_sums_counts(b: Backend) {
    let topic = b.client.topic::<Part>();
    assert_eq!(topic.partitions(), 3);
    let items: Vec<_> = (0..60)
        .map(|n| {
            EnqueueItem::new(Part { n })
                .id(format!("job-{n}"))
                .after(Duration::from_secs(600))
        })
        .collect();
    let done = b.client.enqueue_many(items).await.unwrap();
    assert_eq!(done.len(), 60);
    for (n, e) in done.iter().enumerate() {
        assert_eq!(e.id, format!("job-{n}"), "outcomes keep the input order");
        assert_eq!(e.status, EnqueueStatus::Created);
    }
    // Each job is stored in its id's partition, and only there.
    let store = b.client.store();
    let mut per_partition = [0u64; 3];
    for n in 0..60 {
        let id = format!("job-{n}");
        let p = partition_of(&id, P);
        per_partition[p as usize] += 1;
        for q in 0..P {
            let found = store.job(&stored_as(q), &id).await.unwrap();
            assert_eq!(found.is_some(), q == p, "{id} in partition {q}");
        }
    }
    assert!(per_partition.iter().all(|c| *c > 0), "{per_partition:?}");
    for p in 0..P {
        assert_eq!(
            store.counts(&stored_as(p)).await.unwrap().scheduled,
            per_partition[p as usize]
        );
    }
    // The topic sums its partitions; by-id calls find the right one.
    assert_eq!(topic.counts().await.unwrap().scheduled, 60);
    let again = b.client.enqueue(Part { n: 7 }).id("job-7").await.unwrap();
    assert_eq!(again.status, EnqueueStatus::AlreadyScheduled);
    b.client.cancel::<Part>("job-1").await.unwrap();
    let at = b
        .client
        .reschedule::<Part>("job-2", Duration::from_secs(1200))
        .await
        .unwrap();
    match topic.job("job-2").await.unwrap().unwrap().state {
        JobState::Scheduled { due_at } => assert_eq!(due_at, at),
        other => panic!("{other:?}"),
    }
    assert!(topic.job("job-1").await.unwrap().is_none());
    assert!(matches!(
        b.client.cancel::<Part>("nope").await,
        Err(postpone::Error::JobNotFound { topic, .. }) if topic == "parts"
    ));
    let c = topic.counts().await.unwrap();
    assert_eq!((c.scheduled, c.cancelled), (59, 1));

    // Generated ids spread too.
    let generated = b
        .client
        .enqueue_many((0..30).map(|n| Part { n }))
        .await
        .unwrap();
    let partitions: HashSet<u16> = generated.iter().map(|e| partition_of(&e.id, P)).collect();
    assert_eq!(partitions.len(), 3);
    assert_eq!(topic.counts().await.unwrap().ready, 30);
}

pub(crate) async fn worker_runs_every_partition_once_per_job(b: Backend) {
    let n = 90u64;
    b.client
        .enqueue_many((0..n).map(|i| EnqueueItem::new(Part { n: i }).id(format!("w{i}"))))
        .await
        .unwrap();
    let (tx, mut rx) = events();
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(reporting(tx))
            .concurrency(8)
            .build()
            .unwrap(),
    );
    let mut seen = BTreeMap::new();
    for _ in 0..n {
        let (p, job) = next(&mut rx).await;
        assert!(seen.insert(job, p).is_none(), "job {job} ran twice");
    }
    none_within(&mut rx, Duration::from_millis(100)).await;
    let topic = b.client.topic::<Part>();
    let c = eventually("every job processed", || async {
        let c = topic.counts().await.unwrap();
        (c.processed == n).then_some(c)
    })
    .await;
    assert_eq!((c.ready, c.active), (0, 0));
    worker.stop().await;
}

pub(crate) async fn partitions_take_turns_under_one_limit(b: Backend) {
    // A backlog in every partition and one slot: no partition waits for another's backlog to drain.
    let mut items = Vec::new();
    for p in 0..P {
        for (i, id) in ids_in("turn", p, 20).into_iter().enumerate() {
            items.push(EnqueueItem::new(Part { n: i as u64 }).id(id));
        }
    }
    b.client.enqueue_many(items).await.unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = events();
    let handler = {
        let (running, most) = (running.clone(), most.clone());
        move |_job: Part, ctx: JobContext| {
            let (running, most, tx) = (running.clone(), most.clone(), tx.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(partition_of(ctx.id(), P));
                Ok::<(), JobError>(())
            }
        }
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .concurrency(4)
            .topic_concurrency::<Part>(1)
            .build()
            .unwrap(),
    );
    let mut order = Vec::new();
    for _ in 0..30 {
        order.push(next(&mut rx).await);
    }
    worker.stop().await;
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "the topic's limit holds over all its partitions"
    );
    for p in 0..P {
        let first = order.iter().take(12).filter(|q| **q == p).count();
        assert!(
            first >= 2,
            "partition {p} ran {first} of the first 12 jobs: {order:?}"
        );
    }
}

pub(crate) async fn hints_wake_each_partition(b: Backend) {
    // Idle polling is an hour: only wake-up hints can start these jobs in time.
    let (tx, mut rx) = events();
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(reporting(tx))
            .poll_interval(Duration::from_secs(3600))
            .build()
            .unwrap(),
    );
    for round in 0..2u64 {
        for p in 0..P {
            let id = &ids_in(&format!("wake{round}"), p, 1)[0];
            b.client
                .enqueue(Part {
                    n: round * 10 + u64::from(p),
                })
                .id(id.as_str())
                .await
                .unwrap();
        }
        let mut got: Vec<(u16, u64)> = Vec::new();
        for _ in 0..P {
            got.push(next(&mut rx).await);
        }
        got.sort();
        let want: Vec<(u16, u64)> = (0..P).map(|p| (p, round * 10 + u64::from(p))).collect();
        assert_eq!(got, want, "round {round}");
    }
    worker.stop().await;
}

pub(crate) async fn expired_leases_are_swept_in_every_partition(b: Backend) {
    // A worker claimed one job in each partition and died.
    let store = b.client.store();
    for p in 0..P {
        let id = &ids_in("swept", p, 1)[0];
        b.client
            .enqueue(Part { n: u64::from(p) })
            .id(id.as_str())
            .await
            .unwrap();
        let batch = store
            .claim(&stored_as(p), ClaimRequest::new(1, 100, 100, 3))
            .await
            .unwrap();
        assert_eq!(batch.jobs.len(), 1);
    }
    let (tx, mut rx) = events();
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(reporting(tx))
            .build()
            .unwrap(),
    );
    let mut got: Vec<(u16, u64)> = Vec::new();
    for _ in 0..P {
        got.push(next(&mut rx).await);
    }
    got.sort();
    assert_eq!(got, [(0, 0), (1, 1), (2, 2)]);
    let topic = b.client.topic::<Part>();
    let c = eventually("processed", || async {
        let c = topic.counts().await.unwrap();
        (c.processed == 3).then_some(c)
    })
    .await;
    assert_eq!((c.stalled, c.retried), (3, 0), "no attempt used");
    worker.stop().await;
}

pub(crate) async fn dead_letters_merge_over_partitions(b: Backend) {
    let (tx, mut dead_rx) = events();
    let fail = |_job: Part, _ctx: JobContext| async { Err::<(), _>(JobError::fail("no")) };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(fail)
            .dead_letter_sink(channel_sink(tx))
            .build()
            .unwrap(),
    );
    let ids: Vec<String> = (0..P).flat_map(|p| ids_in("dead", p, 2)).collect();
    for (n, id) in ids.iter().enumerate() {
        b.client
            .enqueue(Part { n: n as u64 })
            .id(id.as_str())
            .await
            .unwrap();
    }
    let mut sunk = HashSet::new();
    for _ in 0..ids.len() {
        let d = next(&mut dead_rx).await;
        assert_eq!(
            d.topic, "parts",
            "the sink sees the topic, not the partition"
        );
        sunk.insert(d.id);
    }
    assert_eq!(sunk.len(), 6);
    worker.stop().await;

    let topic = b.client.topic::<Part>();
    let all = topic.dead_letters(0, 100).await.unwrap();
    assert_eq!(all.len(), 6);
    for pair in all.windows(2) {
        assert!(pair[0].died_at >= pair[1].died_at, "newest first");
    }
    let page: Vec<_> = topic.dead_letters(2, 3).await.unwrap();
    let want: Vec<_> = all[2..5].iter().map(|d| d.id.clone()).collect();
    assert_eq!(page.iter().map(|d| d.id.clone()).collect::<Vec<_>>(), want);

    topic.requeue_dead(&ids[0]).await.unwrap();
    let stored = b
        .client
        .store()
        .job(&stored_as(0), &ids[0])
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(stored.state, StoredState::Due { .. }));
    topic.purge_dead(&ids[5]).await.unwrap();
    assert_eq!(topic.purge_all_dead().await.unwrap(), 4);
    assert!(topic.dead_letters(0, 100).await.unwrap().is_empty());
    assert_eq!(topic.counts().await.unwrap().ready, 1);
}
