//! Enqueueing: ids, times, bulk, bad input.

use std::collections::HashSet;
use std::time::Duration;

use chrono::Utc;
use postpone::{EnqueueItem, EnqueueStatus, Error, Job, JobContext, JobError, JobState, Worker};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job, PartialEq)]
#[job(topic = "orders.close")]
pub(crate) struct CloseOrder {
    pub order_id: u64,
}

/// Runs CloseOrder jobs, reporting (id, order_id, store-now-at-start) per run.
fn reporting_worker(backend: &Backend, tx: mpsc::UnboundedSender<(String, u64, i64)>) -> Running {
    let client = backend.client.clone();
    let handler = move |job: CloseOrder, ctx: JobContext| {
        let tx = tx.clone();
        let client = client.clone();
        async move {
            let now = store_now(&client).await;
            let _ = tx.send((ctx.id().to_owned(), job.order_id, now));
            Ok::<(), JobError>(())
        }
    };
    spawn(
        Worker::builder(&backend.client)
            .handle(handler)
            .concurrency(4)
            .build()
            .unwrap(),
    )
}

pub(crate) async fn enqueue_then_run_deletes_the_job(b: Backend) {
    let (tx, mut rx) = events();
    let worker = reporting_worker(&b, tx);
    let e = b
        .client
        .enqueue(CloseOrder { order_id: 1 })
        .id("order:1")
        .await
        .unwrap();
    assert_eq!(e.status, EnqueueStatus::Created);
    let (id, order, _) = next(&mut rx).await;
    assert_eq!((id.as_str(), order), ("order:1", 1));
    let topic = b.client.topic::<CloseOrder>();
    let counts = eventually("processed count", || async {
        let c = topic.counts().await.unwrap();
        (c.processed == 1).then_some(c)
    })
    .await;
    assert_eq!(
        (counts.ready, counts.scheduled, counts.active, counts.dead),
        (0, 0, 0, 0)
    );
    assert!(
        topic.job("order:1").await.unwrap().is_none(),
        "a done job leaves nothing behind"
    );
    none_within(&mut rx, Duration::from_millis(100)).await;
    worker.stop().await;
}

pub(crate) async fn delayed_job_never_runs_before_its_due_time(b: Backend) {
    let (tx, mut rx) = events();
    let worker = reporting_worker(&b, tx);
    let mut due = Vec::new();
    for (i, delay_ms) in [300u64, 50, 150].into_iter().enumerate() {
        let e = b
            .client
            .enqueue(CloseOrder { order_id: i as u64 })
            .after(Duration::from_millis(delay_ms))
            .await
            .unwrap();
        due.push((e.id, e.due_at.unwrap().timestamp_millis()));
    }
    let mut started = Vec::new();
    for _ in 0..3 {
        started.push(next(&mut rx).await);
    }
    // In due order, and none before its due time by the store's clock.
    let order: Vec<u64> = started.iter().map(|s| s.1).collect();
    assert_eq!(order, vec![1, 2, 0]);
    for (id, _, started_at) in &started {
        let due_at = due.iter().find(|d| &d.0 == id).unwrap().1;
        assert!(
            *started_at >= due_at,
            "job {id} started at {started_at}, before its due time {due_at}"
        );
    }
    worker.stop().await;
}

pub(crate) async fn enqueue_at_absolute_time(b: Backend) {
    let (tx, mut rx) = events();
    let worker = reporting_worker(&b, tx);
    let at = Utc::now() + chrono::Duration::milliseconds(200);
    let e = b
        .client
        .enqueue(CloseOrder { order_id: 9 })
        .at(at)
        .await
        .unwrap();
    assert_eq!(e.due_at.unwrap().timestamp_millis(), at.timestamp_millis());
    let past = b
        .client
        .enqueue(CloseOrder { order_id: 8 })
        .at(Utc::now() - chrono::Duration::hours(1))
        .await
        .unwrap();
    assert_eq!(past.status, EnqueueStatus::Created);
    let first = next(&mut rx).await;
    assert_eq!(first.1, 8, "a time in the past means now");
    let second = next(&mut rx).await;
    assert_eq!(second.1, 9);
    assert!(second.2 >= at.timestamp_millis());
    worker.stop().await;
}

pub(crate) async fn duplicate_id_is_idempotent(b: Backend) {
    let first = b
        .client
        .enqueue(CloseOrder { order_id: 1 })
        .id("order:1")
        .after(Duration::from_secs(60))
        .await
        .unwrap();
    let again = b
        .client
        .enqueue(CloseOrder { order_id: 2 })
        .id("order:1")
        .await
        .unwrap();
    assert_eq!(again.status, EnqueueStatus::AlreadyScheduled);
    assert_eq!(
        again.due_at, first.due_at,
        "the existing job's time is reported and kept"
    );
    let info = b
        .client
        .topic::<CloseOrder>()
        .job("order:1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        info.job::<CloseOrder>().unwrap(),
        CloseOrder { order_id: 1 },
        "payload unchanged"
    );
    assert_eq!(
        b.client
            .topic::<CloseOrder>()
            .counts()
            .await
            .unwrap()
            .scheduled,
        1
    );
}

pub(crate) async fn replace_updates_payload_and_time(b: Backend) {
    b.client
        .enqueue(CloseOrder { order_id: 1 })
        .id("order:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    let (tx, mut rx) = events();
    let worker = reporting_worker(&b, tx);
    let replaced = b
        .client
        .enqueue(CloseOrder { order_id: 2 })
        .id("order:1")
        .replace()
        .await
        .unwrap();
    assert_eq!(replaced.status, EnqueueStatus::Replaced);
    let (id, order, _) = next(&mut rx).await;
    assert_eq!(
        (id.as_str(), order),
        ("order:1", 2),
        "runs now, with the new payload"
    );
    worker.stop().await;
}

pub(crate) async fn replace_of_running_job_is_an_error(b: Backend) {
    let (started_tx, mut started) = events();
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let handler = move |_: CloseOrder, _: JobContext| {
        let started_tx = started_tx.clone();
        let mut release = release_rx.clone();
        async move {
            let _ = started_tx.send(());
            let _ = release.wait_for(|r| *r).await;
            Ok::<(), JobError>(())
        }
    };
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    b.client
        .enqueue(CloseOrder { order_id: 1 })
        .id("busy")
        .await
        .unwrap();
    next(&mut started).await;
    let err = b
        .client
        .enqueue(CloseOrder { order_id: 2 })
        .id("busy")
        .replace()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::JobRunning { .. }), "{err}");
    let plain = b
        .client
        .enqueue(CloseOrder { order_id: 3 })
        .id("busy")
        .await
        .unwrap();
    assert_eq!(plain.status, EnqueueStatus::AlreadyRunning);
    release_tx.send_replace(true);
    worker.stop().await;
}

pub(crate) async fn generated_ids_are_unique(b: Backend) {
    let mut ids = HashSet::new();
    for i in 0..200 {
        let e = b
            .client
            .enqueue(CloseOrder { order_id: i })
            .after(Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(e.status, EnqueueStatus::Created);
        assert!(ids.insert(e.id));
    }
    assert_eq!(
        b.client
            .topic::<CloseOrder>()
            .counts()
            .await
            .unwrap()
            .scheduled,
        200
    );
}

pub(crate) async fn bulk_enqueue_runs_every_job_once(b: Backend) {
    let (tx, mut rx) = events();
    let worker = reporting_worker(&b, tx);
    let n = 2500u64;
    let mut items: Vec<EnqueueItem<CloseOrder>> = (0..n)
        .map(|i| EnqueueItem::new(CloseOrder { order_id: i }))
        .collect();
    items.push(
        EnqueueItem::new(CloseOrder { order_id: 0 })
            .id("fixed")
            .after(Duration::from_millis(10)),
    );
    items.push(EnqueueItem::new(CloseOrder { order_id: 0 }).id("fixed"));
    let done = b.client.enqueue_many(items).await.unwrap();
    assert_eq!(done.len(), n as usize + 2);
    assert_eq!(done[n as usize].status, EnqueueStatus::Created);
    assert_eq!(done[n as usize + 1].status, EnqueueStatus::AlreadyScheduled);
    let mut seen = HashSet::new();
    for _ in 0..=n {
        let (id, _, _) = next(&mut rx).await;
        assert!(seen.insert(id.clone()), "job {id} ran twice");
    }
    none_within(&mut rx, Duration::from_millis(200)).await;
    worker.stop().await;
}

pub(crate) async fn bad_input_gets_clear_errors(b: Backend) {
    let err = b
        .client
        .enqueue(CloseOrder { order_id: 1 })
        .id("")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidId { .. }), "{err}");
    let err = b
        .client
        .enqueue(CloseOrder { order_id: 1 })
        .id("x".repeat(10_000))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("longer than 512"), "{err}");
    let err = b
        .client
        .enqueue(CloseOrder { order_id: 1 })
        .id("a\nb")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("control character"), "{err}");
    let err = b.client.topic_named("bad topic").unwrap_err();
    assert!(matches!(err, Error::InvalidTopic { .. }), "{err}");
    let err = b
        .client
        .cancel::<CloseOrder>("never-existed")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::JobNotFound { .. }), "{err}");
    assert!(err.to_string().contains("never-existed"), "{err}");

    #[derive(Serialize, Deserialize, Job)]
    #[job(topic = "big")]
    struct Big {
        data: String,
    }
    let small = postpone::Client::builder()
        .max_payload(1024)
        .store_arc(b.client.store().clone());
    let err = small
        .enqueue(Big {
            data: "x".repeat(2000),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::PayloadTooLarge { limit: 1024, .. }),
        "{err}"
    );
    let ok = b
        .client
        .enqueue(Big {
            data: "x".repeat(400 * 1024),
        })
        .await
        .unwrap();
    assert_eq!(
        ok.status,
        EnqueueStatus::Created,
        "the default limit is 512 KiB"
    );
    let err = b
        .client
        .enqueue(Big {
            data: "x".repeat(600 * 1024),
        })
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("over the limit of 524288 bytes"),
        "{err}"
    );
    assert_eq!(
        b.client.topic::<Big>().counts().await.unwrap().ready,
        1,
        "nothing of the failed enqueues was stored"
    );
}

pub(crate) async fn hostile_ids_are_distinct_jobs(b: Backend) {
    let long = "é".repeat(256);
    let ids = [
        "{orders.close}",
        "a:b",
        "*",
        "with space",
        "ünï©ødé",
        "{}:*",
        long.as_str(),
    ];
    for (i, id) in ids.iter().enumerate() {
        let e = b
            .client
            .enqueue(CloseOrder { order_id: i as u64 })
            .id(*id)
            .after(Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(e.status, EnqueueStatus::Created, "{id}");
    }
    let topic = b.client.topic::<CloseOrder>();
    for (i, id) in ids.iter().enumerate() {
        let info = topic.job(id).await.unwrap().expect(id);
        assert_eq!(info.job::<CloseOrder>().unwrap().order_id, i as u64);
    }
    b.client.cancel::<CloseOrder>("*").await.unwrap();
    assert!(topic.job("*").await.unwrap().is_none());
    assert!(
        topic.job("{}:*").await.unwrap().is_some(),
        "cancelling one id touched no other"
    );
    assert_eq!(
        topic.counts().await.unwrap().scheduled,
        ids.len() as u64 - 1
    );
}

pub(crate) async fn job_lookup_reports_state(b: Backend) {
    let e = b
        .client
        .enqueue(CloseOrder { order_id: 5 })
        .id("look")
        .after(Duration::from_secs(60))
        .await
        .unwrap();
    let info = b
        .client
        .topic::<CloseOrder>()
        .job("look")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        info.state,
        JobState::Scheduled {
            due_at: e.due_at.unwrap()
        }
    );
    assert_eq!(info.attempt, 1);
    assert!(info.errors.is_empty());
    assert!(b
        .client
        .topic::<CloseOrder>()
        .job("nope")
        .await
        .unwrap()
        .is_none());
}
