//! Cancel, reschedule, counts, dead letters.

use std::time::Duration;

use postpone::{CancelStatus, Error, Job, JobContext, JobError, JobState, StopReason, Worker};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "payments.timeout")]
pub(crate) struct Timeout {
    pub n: u64,
}

pub(crate) async fn cancel_scheduled_job_never_runs(b: Backend) {
    let (tx, mut rx) = events();
    let handler = move |job: Timeout, _: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(job.n);
            Ok::<(), JobError>(())
        }
    };
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    b.client
        .enqueue(Timeout { n: 1 })
        .id("order:1")
        .after(Duration::from_millis(150))
        .await
        .unwrap();
    b.client
        .enqueue(Timeout { n: 2 })
        .id("order:2")
        .after(Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(
        b.client.cancel::<Timeout>("order:1").await.unwrap(),
        CancelStatus::Removed
    );
    let err = b.client.cancel::<Timeout>("order:1").await.unwrap_err();
    assert!(
        matches!(err, Error::JobNotFound { .. }),
        "a second cancel finds nothing: {err}"
    );
    assert_eq!(
        next(&mut rx).await,
        2,
        "the cancelled job never ran; the other did"
    );
    none_within(&mut rx, Duration::from_millis(200)).await;
    assert_eq!(
        b.client
            .topic::<Timeout>()
            .counts()
            .await
            .unwrap()
            .cancelled,
        1
    );
    worker.stop().await;
}

pub(crate) async fn cancel_running_job_stops_it_and_prevents_retry(b: Backend) {
    let (tx, mut rx) = events();
    let handler = move |_: Timeout, ctx: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(("started", ctx.attempt()));
            let reason = ctx.stopped().await;
            assert_eq!(reason, StopReason::Cancelled);
            let _ = tx.send(("stopped", ctx.attempt()));
            Err(JobError::msg("stopped early"))
        }
    };
    // A short lease so that the heartbeat (a third of it) brings the cancel flag quickly.
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .lease(Duration::from_millis(300))
            .build()
            .unwrap(),
    );
    b.client.enqueue(Timeout { n: 1 }).id("long").await.unwrap();
    assert_eq!(next(&mut rx).await, ("started", 1));
    assert_eq!(
        b.client.cancel::<Timeout>("long").await.unwrap(),
        CancelStatus::WillNotRetry
    );
    assert_eq!(next(&mut rx).await, ("stopped", 1));
    let topic = b.client.topic::<Timeout>();
    eventually("the cancelled job to be gone", || async {
        topic.job("long").await.unwrap().is_none().then_some(())
    })
    .await;
    none_within(&mut rx, Duration::from_millis(300)).await;
    let counts = topic.counts().await.unwrap();
    assert_eq!((counts.cancelled, counts.retried, counts.dead), (1, 0, 0));
    worker.stop().await;
}

pub(crate) async fn reschedule_moves_a_job(b: Backend) {
    let (tx, mut rx) = events();
    let client = b.client.clone();
    let handler = move |job: Timeout, _: JobContext| {
        let tx = tx.clone();
        let client = client.clone();
        async move {
            let _ = tx.send((job.n, store_now(&client).await));
            Ok::<(), JobError>(())
        }
    };
    b.client
        .enqueue(Timeout { n: 1 })
        .id("later")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    b.client
        .enqueue(Timeout { n: 2 })
        .id("sooner")
        .after(Duration::from_millis(50))
        .await
        .unwrap();
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    let new_due = b
        .client
        .reschedule::<Timeout>("later", Duration::from_millis(100))
        .await
        .unwrap();
    let pushed = b
        .client
        .reschedule::<Timeout>("sooner", Duration::from_millis(300))
        .await
        .unwrap();
    let (first, _) = next(&mut rx).await;
    assert_eq!(first, 1, "the hour-long timer now fires first");
    let (second, at) = next(&mut rx).await;
    assert_eq!(second, 2);
    assert!(
        at >= pushed.timestamp_millis(),
        "a job pushed later does not run at its old time"
    );
    assert!(new_due < pushed);
    let err = b
        .client
        .reschedule::<Timeout>("gone", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::JobNotFound { .. }), "{err}");
    worker.stop().await;
}

pub(crate) async fn counts_by_state(b: Backend) {
    let topic = b.client.topic::<Timeout>();
    b.client
        .enqueue(Timeout { n: 1 })
        .after(Duration::from_secs(60))
        .await
        .unwrap();
    b.client
        .enqueue(Timeout { n: 2 })
        .after(Duration::from_secs(60))
        .await
        .unwrap();
    b.client.enqueue(Timeout { n: 3 }).await.unwrap();
    let c = topic.counts().await.unwrap();
    assert_eq!((c.scheduled, c.ready, c.active, c.dead), (2, 1, 0, 0));
    let other = b
        .client
        .topic_named("some.other.topic")
        .unwrap()
        .counts()
        .await
        .unwrap();
    assert_eq!(
        other,
        postpone::TopicCounts::default(),
        "topics do not see each other's jobs"
    );
}

pub(crate) async fn dead_letters_list_requeue_purge(b: Backend) {
    let (tx, mut rx) = events();
    let handler = move |job: Timeout, ctx: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send((job.n, ctx.attempt()));
            if ctx.previous_errors().is_empty() {
                Err(JobError::fail(format!("job {} refused", job.n)))
            } else {
                Ok(())
            }
        }
    };
    let (dead_tx, mut dead_rx) = events();
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    for n in 1..=3 {
        b.client
            .enqueue(Timeout { n })
            .id(format!("d{n}"))
            .await
            .unwrap();
    }
    for _ in 0..3 {
        let dead = next(&mut dead_rx).await;
        assert!(dead.reason.starts_with("failed: job"), "{}", dead.reason);
        assert_eq!(dead.attempts, 1);
        assert_eq!(dead.errors.len(), 1);
    }
    let topic = b.client.topic::<Timeout>();
    let listed = topic.dead_letters(0, 10).await.unwrap();
    assert_eq!(listed.len(), 3);
    assert!(
        listed.windows(2).all(|w| w[0].died_at >= w[1].died_at),
        "newest first"
    );
    assert!(matches!(
        topic.job("d1").await.unwrap().unwrap().state,
        JobState::Dead { .. }
    ));
    for _ in 0..3 {
        next(&mut rx).await;
    }
    topic.requeue_dead("d1").await.unwrap();
    let (n, attempt) = next(&mut rx).await;
    assert_eq!((n, attempt), (1, 1), "requeued with its attempts reset");
    eventually("the requeued job to finish", || async {
        topic.job("d1").await.unwrap().is_none().then_some(())
    })
    .await;
    let err = topic.requeue_dead("d1").await.unwrap_err();
    assert!(matches!(err, Error::JobNotFound { .. }), "{err}");
    topic.purge_dead("d2").await.unwrap();
    assert!(matches!(
        topic.purge_dead("d2").await.unwrap_err(),
        Error::JobNotFound { .. }
    ));
    assert_eq!(topic.purge_all_dead().await.unwrap(), 1);
    assert_eq!(topic.counts().await.unwrap().dead, 0);
    worker.stop().await;
}
