//! Flow control through workers: max running and rate limits across workers, a provider's limit.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postpone::{Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "flow.capped", max_running = 3)]
pub(crate) struct Capped {
    pub n: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "flow.rated", rate = "1000/s")]
pub(crate) struct Rated {
    pub n: u64,
}

pub(crate) async fn max_running_holds_across_workers(b: Backend) {
    let running = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = events();
    let handler = move |_: Capped, _: JobContext| {
        let (running, tx) = (running.clone(), tx.clone());
        async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
            running.fetch_sub(1, Ordering::SeqCst);
            let _ = tx.send(now);
            Ok::<(), JobError>(())
        }
    };
    let workers: Vec<_> = (0..2)
        .map(|_| {
            spawn(
                Worker::builder(&b.client)
                    .handle(handler.clone())
                    .concurrency(10)
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    b.client
        .enqueue_many((0..30).map(|n| Capped { n }))
        .await
        .unwrap();
    let mut most = 0;
    for _ in 0..30 {
        most = most.max(next(&mut rx).await);
    }
    assert!(most <= 3, "max_running = 3 over two workers, saw {most}");
    for w in workers {
        w.stop().await;
    }
}

pub(crate) async fn rate_limit_spaces_jobs_across_workers(b: Backend) {
    let (tx, mut rx) = events();
    let client = b.client.clone();
    let handler = move |_: Rated, _: JobContext| {
        let (tx, client) = (tx.clone(), client.clone());
        async move {
            let _ = tx.send(store_now(&client).await);
            Ok::<(), JobError>(())
        }
    };
    // The worker's limit replaces the declared one: 20 per second, a burst of 1, one every 50 ms.
    let workers: Vec<_> = (0..2)
        .map(|_| {
            spawn(
                Worker::builder(&b.client)
                    .handle(handler.clone())
                    .rate_limit::<Rated>(20, Duration::from_secs(1))
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    b.client
        .enqueue_many((0..8).map(|n| Rated { n }))
        .await
        .unwrap();
    let mut starts = Vec::new();
    for _ in 0..8 {
        starts.push(next(&mut rx).await);
    }
    starts.sort_unstable();
    let span = starts[7] - starts[0];
    // Claimed 50 ms apart by the store's clock; a start is read a little after its claim.
    assert!(
        span >= 7 * 50 - 20,
        "8 jobs at 20/s over {span} ms: {starts:?}"
    );
    for w in workers {
        w.stop().await;
    }
}

pub(crate) async fn a_provider_limit_holds_the_topic_across_workers(b: Backend) {
    let (tx, mut rx) = events();
    let client = b.client.clone();
    let first = Arc::new(AtomicUsize::new(0));
    let handler = move |job: Rated, ctx: JobContext| {
        let (tx, client, first) = (tx.clone(), client.clone(), first.clone());
        async move {
            let _ = tx.send((job.n, ctx.attempt(), store_now(&client).await));
            if job.n == 0 && first.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(JobError::rate_limited(Duration::from_millis(300)));
            }
            Ok(())
        }
    };
    let workers: Vec<_> = (0..2)
        .map(|_| {
            spawn(
                Worker::builder(&b.client)
                    .handle(handler.clone())
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    b.client.enqueue(Rated { n: 0 }).await.unwrap();
    let (n, attempt, at) = next(&mut rx).await;
    assert_eq!((n, attempt), (0, 1));
    // Once its outcome is recorded (the job is scheduled again), the topic is held.
    let topic = b.client.topic::<Rated>();
    eventually("the hold recorded", || async {
        (topic.counts().await.unwrap().scheduled == 1).then_some(())
    })
    .await;
    b.client
        .enqueue_many((1..5).map(|n| Rated { n }))
        .await
        .unwrap();
    for _ in 0..5 {
        let (n, attempt, started) = next(&mut rx).await;
        assert_eq!(attempt, 1, "job {n}: a provider's limit uses no attempt");
        assert!(
            started >= at + 300,
            "job {n} started {} ms after the hold began",
            started - at
        );
    }
    assert_eq!(topic.counts().await.unwrap().retried, 0);
    for w in workers {
        w.stop().await;
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "flow.heavy")]
pub(crate) struct Heavy {
    pub n: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "flow.light")]
pub(crate) struct Light {
    pub n: u64,
}

/// A handler of `J` that reports `name` when it starts, then runs for `run`.
fn reporting<J: Job>(
    tx: &mpsc::UnboundedSender<&'static str>,
    name: &'static str,
    run: Duration,
) -> impl Fn(J, JobContext) -> Pin<Box<dyn Future<Output = Result<(), JobError>> + Send>>
       + Clone
       + Send
       + Sync
       + 'static
       + use<J> {
    let tx = tx.clone();
    move |_: J, _: JobContext| {
        let _ = tx.send(name);
        Box::pin(async move {
            tokio::time::sleep(run).await;
            Ok(())
        })
    }
}

/// A worker of `concurrency` slots for [`Heavy`] and [`Light`], whose handlers report their topic's
/// name when they start, then run for `run`.
fn heavy_and_light(
    b: &Backend,
    tx: &mpsc::UnboundedSender<&'static str>,
    run: Duration,
    concurrency: usize,
) -> postpone::WorkerBuilder<()> {
    Worker::builder(&b.client)
        .handle(reporting::<Heavy>(tx, "heavy", run))
        .handle(reporting::<Light>(tx, "light", run))
        .concurrency(concurrency)
}

pub(crate) async fn weighted_topics_share_scarce_slots(b: Backend) {
    let (tx, mut rx) = events();
    b.client
        .enqueue_many((0..60).map(|n| Heavy { n }))
        .await
        .unwrap();
    b.client
        .enqueue_many((0..60).map(|n| Light { n }))
        .await
        .unwrap();
    let worker = spawn(
        heavy_and_light(&b, &tx, Duration::from_millis(2), 1)
            .slot_sharing(postpone::SlotSharing::Weighted)
            .topic_weight::<Heavy>(3)
            .build()
            .unwrap(),
    );
    let mut started = Vec::new();
    for _ in 0..60 {
        started.push(next(&mut rx).await);
    }
    let light_n = started.iter().filter(|t| **t == "light").count();
    // 3 to 1 while both have jobs: 15 of 60 (a claim or a wake-up may shift a few).
    assert!(
        (10..=20).contains(&light_n),
        "{light_n} of 60 slots went to the light topic: {started:?}"
    );
    worker.stop().await;
}

/// Short runs make a worker claim ahead, and a run that ends takes the next job claimed ahead on its
/// own slot, only while no other topic waits for a slot (unit-tested in `worker::shared`). End to end:
/// a topic whose backlog holds every slot gives slots up to another topic's jobs as soon as they come,
/// not once its backlog is gone.
pub(crate) async fn topics_share_slots_while_runs_take_jobs_claimed_ahead(b: Backend) {
    let (tx, mut rx) = events();
    const HEAVY: usize = 400;
    const LIGHT: usize = 100;
    b.client
        .enqueue_many((0..HEAVY as u64).map(|n| Heavy { n }))
        .await
        .unwrap();
    let worker = spawn(
        heavy_and_light(&b, &tx, Duration::from_millis(1), 4)
            .build()
            .unwrap(),
    );
    // The heavy topic's runs hold every slot, and claim ahead (their run time is known).
    let mut started = Vec::new();
    for _ in 0..40 {
        started.push(next(&mut rx).await);
    }
    b.client
        .enqueue_many((0..LIGHT as u64).map(|n| Light { n }))
        .await
        .unwrap();
    while started.iter().filter(|t| **t == "light").count() < LIGHT {
        started.push(next(&mut rx).await);
    }
    worker.stop().await;
    // First come, first served: the light topic's jobs ran beside the heavy backlog, which still had
    // jobs to run after the light topic's last (about a third of its 400, were the slots shared
    // evenly).
    let heavy_before = started.iter().filter(|t| **t == "heavy").count();
    assert!(
        heavy_before <= HEAVY - 40,
        "{heavy_before} of the heavy topic's {HEAVY} jobs started before the light topic's last: {started:?}"
    );
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "flow.parted", partitions = 3)]
pub(crate) struct Parted {
    pub n: u64,
}

pub(crate) async fn a_provider_limit_holds_every_partition(b: Backend) {
    let (tx, mut rx) = events();
    let client = b.client.clone();
    let first = Arc::new(AtomicUsize::new(0));
    let handler = move |job: Parted, ctx: JobContext| {
        let (tx, client, first) = (tx.clone(), client.clone(), first.clone());
        async move {
            let _ = tx.send((job.n, ctx.attempt(), store_now(&client).await));
            if job.n == 0 && first.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(JobError::rate_limited(Duration::from_millis(400)));
            }
            Ok(())
        }
    };
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    b.client.enqueue(Parted { n: 0 }).await.unwrap();
    let (_, _, at) = next(&mut rx).await;
    // Every partition is held (the job's by its finish, the others by the worker after it).
    let store = b.client.store();
    eventually("every partition held", || async {
        let mut held = 0;
        for p in ["flow.parted", "flow.parted#1", "flow.parted#2"] {
            if store.counts(p).await.unwrap().flow.held_until_ms.is_some() {
                held += 1;
            }
        }
        (held == 3).then_some(())
    })
    .await;
    b.client
        .enqueue_many((1..10).map(|n| Parted { n }))
        .await
        .unwrap();
    for _ in 0..10 {
        let (n, attempt, started) = next(&mut rx).await;
        assert_eq!(attempt, 1);
        assert!(
            started >= at + 400,
            "job {n} started {} ms after the hold began",
            started - at
        );
    }
    worker.stop().await;
}

pub(crate) async fn ops_say_why_a_due_job_is_held_back(b: Backend) {
    b.client.enqueue(Rated { n: 1 }).id("held").await.unwrap();
    b.client.store().hold(Rated::TOPIC, 60_000).await.unwrap();
    let detail = b
        .client
        .ops()
        .job(Rated::TOPIC, "held")
        .await
        .unwrap()
        .expect("the job is there");
    assert!(
        detail.why.contains("provider's rate limit"),
        "{}",
        detail.why
    );
    let info = b.client.ops().topics().await.unwrap();
    let rated = info
        .iter()
        .find(|t| t.name == Rated::TOPIC)
        .expect("listed");
    assert!(rated.counts.flow.held_until_ms.is_some(), "{rated:?}");
}
