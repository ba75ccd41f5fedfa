//! Failed attempts: the schedule, explicit outcomes, decode errors, panics, timeouts, the sink.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postpone::{Job, JobContext, JobError, RetrySchedule, Worker};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "webhooks", retry = ["0", "0", "40ms", "80ms", "120ms"])]
pub(crate) struct Webhook {
    pub url: String,
}

/// Reports (attempt, store-now) for every run, then fails as `outcome` says.
fn failing<F>(
    tx: mpsc::UnboundedSender<(u32, i64)>,
    client: postpone::Client,
    outcome: F,
) -> impl postpone::Handler<postpone::__private::WithoutState<Webhook>, ()>
where
    F: Fn(&JobContext) -> Result<(), JobError> + Clone + Send + Sync + 'static,
{
    move |_: Webhook, ctx: JobContext| {
        let tx = tx.clone();
        let client = client.clone();
        let outcome = outcome.clone();
        async move {
            let _ = tx.send((ctx.attempt(), store_now(&client).await));
            outcome(&ctx)
        }
    }
}

pub(crate) async fn retry_table_with_millisecond_schedule(b: Backend) {
    let (tx, mut rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let handler = failing(tx, b.client.clone(), |ctx| {
        Err(JobError::msg(format!("503 on attempt {}", ctx.attempt())))
    });
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    b.client
        .enqueue(Webhook {
            url: "http://x".into(),
        })
        .id("hook")
        .await
        .unwrap();
    let schedule = Webhook::retry_schedule();
    let mut runs = Vec::new();
    for _ in 0..schedule.attempts() {
        runs.push(next(&mut rx).await);
    }
    for (i, pair) in runs.windows(2).enumerate() {
        let (failed_attempt, failed_at) = pair[0];
        let (attempt, at) = pair[1];
        assert_eq!((failed_attempt, attempt), (i as u32 + 1, i as u32 + 2));
        let slot = schedule.delay_before(attempt).unwrap().as_millis() as i64;
        assert!(at - failed_at >= slot, "attempt {attempt} ran {} ms after attempt {failed_attempt}, before slot {attempt} = {slot} ms", at - failed_at);
    }
    let dead = next(&mut dead_rx).await;
    assert_eq!(dead.id, "hook");
    assert_eq!(dead.attempts, 4);
    assert!(
        dead.reason.contains("exhausted 4 attempts"),
        "{}",
        dead.reason
    );
    let messages: Vec<_> = dead.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "503 on attempt 1",
            "503 on attempt 2",
            "503 on attempt 3",
            "503 on attempt 4"
        ]
    );
    none_within(&mut rx, Duration::from_millis(200)).await;
    let c = b.client.topic::<Webhook>().counts().await.unwrap();
    assert_eq!(
        (c.retried, c.failed, c.dead_total, c.dead, c.processed),
        (3, 1, 1, 1, 0)
    );
    worker.stop().await;
}

pub(crate) async fn retry_after_uses_given_delay(b: Backend) {
    let (tx, mut rx) = events();
    let handler = failing(tx, b.client.clone(), |ctx| match ctx.attempt() {
        1 => Err(JobError::retry_after(
            Duration::from_millis(250),
            "rate limited",
        )),
        _ => Ok(()),
    });
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    b.client.enqueue(Webhook { url: "u".into() }).await.unwrap();
    let (a1, t1) = next(&mut rx).await;
    let (a2, t2) = next(&mut rx).await;
    assert_eq!((a1, a2), (1, 2), "retry_after uses an attempt");
    assert!(
        t2 - t1 >= 250,
        "ran {} ms later, before the 250 ms asked for",
        t2 - t1
    );
    worker.stop().await;
}

pub(crate) async fn fail_now_goes_straight_to_dead_letter(b: Backend) {
    let (tx, mut rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let handler = failing(tx, b.client.clone(), |_| {
        Err(JobError::fail("order no longer exists"))
    });
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    b.client
        .enqueue(Webhook { url: "u".into() })
        .id("gone")
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await.0, 1);
    let dead = next(&mut dead_rx).await;
    assert_eq!(dead.reason, "failed: order no longer exists");
    none_within(&mut rx, Duration::from_millis(200)).await;
    worker.stop().await;
}

pub(crate) async fn snooze_does_not_use_an_attempt(b: Backend) {
    let (tx, mut rx) = events();
    let runs = Arc::new(AtomicU32::new(0));
    let handler = failing(tx, b.client.clone(), move |_| {
        match runs.fetch_add(1, Ordering::SeqCst) {
            0 | 1 => Err(JobError::snooze(Duration::from_millis(60))),
            _ => Ok(()),
        }
    });
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    b.client.enqueue(Webhook { url: "u".into() }).await.unwrap();
    let (a1, t1) = next(&mut rx).await;
    let (a2, t2) = next(&mut rx).await;
    let (a3, _) = next(&mut rx).await;
    assert_eq!((a1, a2, a3), (1, 1, 1), "snoozing keeps the attempt");
    assert!(t2 - t1 >= 60);
    let c = b.client.topic::<Webhook>().counts().await.unwrap();
    assert_eq!(c.retried, 0);
    worker.stop().await;
}

pub(crate) async fn per_enqueue_schedule_override(b: Backend) {
    let (tx, mut rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let handler = failing(tx, b.client.clone(), |_| Err(JobError::msg("no")));
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    let two_attempts = RetrySchedule::from_millis(&[0, 0, 10]).unwrap();
    b.client
        .enqueue(Webhook { url: "u".into() })
        .retry(two_attempts)
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await.0, 1);
    assert_eq!(next(&mut rx).await.0, 2);
    assert_eq!(next(&mut dead_rx).await.attempts, 2);
    none_within(&mut rx, Duration::from_millis(150)).await;
    worker.stop().await;
}

pub(crate) async fn undecodable_payload_is_dead_lettered_and_worker_continues(b: Backend) {
    /// Same topic, incompatible payload: what an old deploy might have left behind.
    #[derive(Serialize, Deserialize, Job)]
    #[job(topic = "webhooks")]
    struct OldWebhook {
        url: u64,
    }
    let (tx, mut rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let handler = failing(tx, b.client.clone(), |_| Ok(()));
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    b.client
        .enqueue(OldWebhook { url: 7 })
        .id("old")
        .await
        .unwrap();
    let dead = next(&mut dead_rx).await;
    assert_eq!(dead.id, "old");
    assert!(
        dead.reason.contains("payload does not decode into") && dead.reason.contains("Webhook"),
        "{}",
        dead.reason
    );
    assert_eq!(
        dead.payload, r#"{"url":7}"#,
        "the payload is kept as enqueued"
    );
    b.client
        .enqueue(Webhook { url: "ok".into() })
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await.0, 1, "the worker keeps going");
    assert_eq!(
        b.client.topic::<Webhook>().counts().await.unwrap().retried,
        0,
        "never retried"
    );
    worker.stop().await;
}

pub(crate) async fn panicking_handler_is_a_failed_attempt(b: Backend) {
    let (tx, mut rx) = events();
    let handler = failing(tx, b.client.clone(), |ctx| {
        if ctx.attempt() == 1 {
            panic!("bug in handler");
        }
        Ok(())
    });
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    b.client
        .enqueue(Webhook { url: "u".into() })
        .id("p")
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await.0, 1);
    assert_eq!(next(&mut rx).await.0, 2, "retried after the panic");
    let topic = b.client.topic::<Webhook>();
    let c = eventually("processed", || async {
        let c = topic.counts().await.unwrap();
        (c.processed == 1).then_some(c)
    })
    .await;
    assert_eq!(c.retried, 1);
    worker.stop().await;
}

pub(crate) async fn handler_timeout_is_a_failed_attempt(b: Backend) {
    #[derive(Serialize, Deserialize, Job)]
    #[job(topic = "slow", retry = ["0", "0"], timeout = "100ms")]
    struct Slow;
    let (dead_tx, mut dead_rx) = events();
    let handler = |_: Slow, _: JobContext| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<(), JobError>(())
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    b.client.enqueue(Slow).await.unwrap();
    let dead = next(&mut dead_rx).await;
    assert!(
        dead.errors[0].message.contains("timed out after 100ms"),
        "{:?}",
        dead.errors
    );
    worker.stop().await;
}

pub(crate) async fn failing_sink_is_retried_until_it_succeeds(b: Backend) {
    let calls = Arc::new(AtomicU32::new(0));
    let (tx, mut rx) = events();
    let sink = {
        let calls = calls.clone();
        let tx = Arc::new(tx);
        postpone::sink_fn(move |dead| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            async move {
                let _ = tx.send((n, dead.id));
                if n == 0 {
                    Err("database is down".into())
                } else {
                    Ok(())
                }
            }
        })
    };
    let (run_tx, _run_rx) = events();
    let handler = failing(run_tx, b.client.clone(), |_| Err(JobError::fail("x")));
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .dead_letter_sink(sink)
            .poll_interval(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    b.client
        .enqueue(Webhook { url: "u".into() })
        .id("s")
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, (0, "s".to_string()));
    assert_eq!(
        next(&mut rx).await,
        (1, "s".to_string()),
        "the failed sink call was retried"
    );
    let topic = b.client.topic::<Webhook>();
    eventually("the hook to be marked done", || async {
        (topic.counts().await.unwrap().dead_pending == 0).then_some(())
    })
    .await;
    none_within(&mut rx, Duration::from_millis(300)).await;
    assert_eq!(
        topic.counts().await.unwrap().dead,
        1,
        "kept after delivery (trimmed only by age/count)"
    );
    worker.stop().await;
}
