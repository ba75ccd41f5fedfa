//! The worker judges ages by the store's clock, never its own (memory backend with a manual clock).

#[path = "support/wait.rs"]
mod wait;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postpone::store::memory::{ManualClock, MemoryStore};
use postpone::{sink_fn, Client, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use wait::wait_until;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "clock.fails")]
struct Fails;

async fn fail(_: Fails, _: JobContext) -> Result<(), JobError> {
    Err(JobError::fail("no"))
}

#[tokio::test]
async fn dead_jobs_are_trimmed_by_age_on_the_stores_clock() {
    // The store lives in 2000; the worker's own clock says otherwise.
    let clock = Arc::new(ManualClock::new(946_684_800_000));
    let client = Client::builder().store(MemoryStore::with_clock(clock.clone()));
    let delivered = Arc::new(AtomicUsize::new(0));
    let seen = delivered.clone();
    let sink = sink_fn(move |_| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let worker = Worker::builder(&client)
        .handle(fail)
        .dead_letter_sink(sink)
        .dead_letter_retention(Duration::from_secs(3600), u64::MAX)
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let topic = client.topic::<Fails>();

    // The sink is called one job after another, each round followed by a trim: once the sink sees job
    // n + 1, the trim after job n has run.
    let deliver = |n: usize, id: &'static str| {
        let client = client.clone();
        let delivered = delivered.clone();
        async move {
            client.enqueue(Fails).id(id).await.unwrap();
            wait_until(id, || delivered.load(Ordering::SeqCst) == n).await;
        }
    };
    deliver(1, "first").await;
    deliver(2, "second").await;
    // "first" died a moment ago by the store's clock: an hour's retention keeps it.
    let counts = topic.counts().await.unwrap();
    assert_eq!((counts.dead, counts.trimmed), (2, 0), "{counts:?}");

    // Two hours later by the store's clock, both go.
    clock.advance(Duration::from_secs(2 * 3600));
    deliver(3, "third").await;
    deliver(4, "fourth").await;
    let counts = topic.counts().await.unwrap();
    assert_eq!((counts.dead, counts.trimmed), (2, 2), "{counts:?}");
    stop.shutdown();
    running.await.unwrap().unwrap();
}
