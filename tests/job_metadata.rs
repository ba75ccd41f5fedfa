//! Job metadata: set at enqueue, read by the handler, kept by a retry and in the dead letter, shown by a
//! lookup; bad entries are refused before anything is stored.

#[path = "support/wait.rs"]
mod wait;

use std::time::Duration;

use postpone::{
    sink_fn, Client, DeadLetter, EnqueueItem, Error, Job, JobContext, JobError, Worker,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use wait::eventually;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "meta.notify", retry = ["0", "0", "1ms"])]
struct Notify;

type Seen = mpsc::UnboundedSender<(u32, Option<String>, usize)>;

/// Reports its attempt and its `tenant` entry, and fails: retried once, then dead.
async fn notify(_job: Notify, ctx: JobContext, seen: Seen) -> Result<(), JobError> {
    let tenant = ctx.meta("tenant").map(str::to_owned);
    let _ = seen.send((ctx.attempt(), tenant, ctx.metadata().len()));
    Err(JobError::msg("the mail service is down"))
}

#[tokio::test]
async fn metadata_reaches_the_handler_every_attempt_and_the_dead_letter() {
    let client = Client::memory();
    client
        .enqueue(Notify)
        .id("n:1")
        .meta("tenant", "acme")
        .meta("request_id", "req-1")
        .after(Duration::from_secs(60))
        .await
        .unwrap();
    let info = client.topic::<Notify>().job("n:1").await.unwrap().unwrap();
    assert_eq!(info.meta.get("tenant").map(String::as_str), Some("acme"));
    client
        .reschedule::<Notify>("n:1", Duration::ZERO)
        .await
        .unwrap();

    let (dead_tx, mut dead) = mpsc::unbounded_channel();
    let sink = sink_fn(move |letter: DeadLetter| {
        let _ = dead_tx.send(letter);
        async { Ok(()) }
    });
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let worker = Worker::with_state(&client, seen_tx)
        .handle(notify)
        .dead_letter_sink(sink)
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let tenant = Some("acme".to_owned());
    assert_eq!(seen.recv().await.unwrap(), (1, tenant.clone(), 2));
    assert_eq!(
        seen.recv().await.unwrap(),
        (2, tenant, 2),
        "a retry keeps it"
    );
    let letter = dead.recv().await.unwrap();
    assert_eq!(
        letter.meta.get("request_id").map(String::as_str),
        Some("req-1")
    );
    let counts = eventually("the death to be delivered", || async {
        let c = client.topic::<Notify>().counts().await.unwrap();
        (c.dead_pending == 0).then_some(c)
    })
    .await;
    assert_eq!(counts.dead, 1);
    shutdown.shutdown();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn bad_metadata_is_refused_and_nothing_is_stored() {
    let client = Client::memory();
    for (key, value) in [
        ("", "x"),
        ("has space", "x"),
        ("k", &*"v".repeat(1025)),
        (&*"k".repeat(65), "x"),
    ] {
        let e = client.enqueue(Notify).meta(key, value).await.unwrap_err();
        assert!(matches!(e, Error::InvalidMeta { .. }), "{e}");
    }
    let many = (0..17).fold(EnqueueItem::new(Notify).id("many"), |item, i| {
        item.meta(format!("k{i}"), "v")
    });
    let e = client
        .enqueue_many([EnqueueItem::new(Notify).id("fine"), many])
        .await;
    assert!(matches!(e, Err(Error::InvalidMeta { .. })), "{e:?}");
    assert_eq!(
        client.topic::<Notify>().counts().await.unwrap().ready,
        0,
        "all or nothing"
    );
    let ctx = JobContext::for_test("meta.notify", "t").with_meta("tenant", "acme");
    assert_eq!(ctx.meta("tenant"), Some("acme"));
    assert_eq!(ctx.meta("other"), None);
}
