//! Redis SIGKILLed and restarted on its AOF (fsync always) while 64 tasks enqueue through one client and
//! a worker drains the topic: no enqueue that returned Ok is lost (each such job runs, at least once),
//! and once Redis answers PING again every enqueuer and the worker succeed again soon.
//!
//! "Soon" is asserted against a generous bound ([`BACK_WITHIN`], a loaded machine is slow); the times
//! measured from PING answering are printed: the goal is half a second (the worker's retry pauses are
//! capped at 250 ms, the hint subscription's at 500 ms).

mod support;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postpone::store::redis::RedisStore;
use postpone::{Client, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use support::enqueuers::Enqueuers;
use support::redis_server::RedisServer;
use support::wait::{eventually_within, wait_until, wait_until_within};

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

const TASKS: usize = 64;
/// How long Redis stays down: long enough that an uncapped doubling backoff grows to seconds (before
/// the cap, with a 1.5 s outage, the worker's acknowledgements came back 1.0 s after PING answered).
const OUTAGE: Duration = Duration::from_secs(3);
/// The bound asserted, from PING answering to each enqueuer's and the worker's first success.
const BACK_WITHIN: Duration = Duration::from_secs(2);
/// How long the topic may take to drain at the end.
const DRAIN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueuers_and_a_worker_resume_soon_after_redis_is_killed_and_restarted() {
    let server = Arc::new(
        RedisServer::builder()
            .aof(true)
            .appendfsync("always")
            .start(),
    );
    let store = RedisStore::connect(&server.url(), "restart").await.unwrap();
    let client = Client::builder().store(store);

    // Per job: how often its handler ran; and the first run (id, start) after Redis was back.
    let runs: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
    let back: Arc<Mutex<Option<Instant>>> = Arc::default();
    let first_run_after: Arc<Mutex<Option<(u64, Instant)>>> = Arc::default();
    let handler = {
        let (runs, back, first) = (runs.clone(), back.clone(), first_run_after.clone());
        move |job: CloseOrder, _ctx: JobContext| {
            let (runs, back, first) = (runs.clone(), back.clone(), first.clone());
            async move {
                let now = Instant::now();
                if back.lock().unwrap().is_some_and(|b| now >= b) {
                    first.lock().unwrap().get_or_insert((job.order_id, now));
                }
                *runs.lock().unwrap().entry(job.order_id).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
                Ok::<(), JobError>(())
            }
        }
    };
    let worker = Worker::builder(&client)
        .handle(handler)
        .concurrency(32)
        .lease(Duration::from_secs(2))
        .poll_interval(Duration::from_secs(5))
        .build()
        .unwrap();
    let stop_worker = worker.shutdown_handle();
    let worker_task = tokio::spawn(worker.run());

    let enqueuers = {
        let client = client.clone();
        Enqueuers::start(TASKS, Duration::from_millis(5), move |id| {
            let client = client.clone();
            async move {
                client
                    .enqueue(CloseOrder { order_id: id })
                    .id(format!("o:{id}"))
                    .await
                    .map(drop)
            }
        })
    };
    wait_until("some enqueues before the kill", || enqueuers.oks() >= 2000).await;
    wait_until("some jobs to run before the kill", || {
        runs.lock().unwrap().len() >= 500
    })
    .await;

    let s = server.clone();
    tokio::task::spawn_blocking(move || s.kill9())
        .await
        .unwrap();
    wait_until("every enqueuer to see Redis gone", || {
        enqueuers.all_failed_once()
    })
    .await;
    tokio::time::sleep(OUTAGE).await;
    let s = server.clone();
    // `restart` returns once the new process answers PING.
    tokio::task::spawn_blocking(move || s.restart())
        .await
        .unwrap();
    let answered = Instant::now();
    enqueuers.mark_back(answered);
    *back.lock().unwrap() = Some(answered);

    // The worker: a claim after the restart started a handler, and its outcome was recorded (a done job
    // is gone), which also means the outcomes held through the outage were recorded (the acker sends
    // them in order).
    let (job, started) =
        eventually_within(BACK_WITHIN * 5, "a job to run after the restart", || {
            std::future::ready(*first_run_after.lock().unwrap())
        })
        .await;
    let claimed_in = started - answered;
    let topic = client.topic::<CloseOrder>();
    eventually_within(
        BACK_WITHIN * 5,
        "a job run after the restart to be acknowledged",
        || async {
            topic
                .job(&format!("o:{job}"))
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    let acked_in = answered.elapsed();
    wait_until_within(BACK_WITHIN * 5, "every enqueuer to succeed again", || {
        enqueuers.all_back()
    })
    .await;
    let enqueuers_in = enqueuers.back_within(answered);
    let seen = enqueuers.stop().await;
    eprintln!(
        "after PING answered: every enqueuer succeeded again within {enqueuers_in:?}; the worker \
         started a newly claimed job after {claimed_in:?} and had it acknowledged after {acked_in:?}"
    );
    assert!(enqueuers_in < BACK_WITHIN, "enqueuers: {enqueuers_in:?}");
    assert!(claimed_in < BACK_WITHIN, "worker claim: {claimed_in:?}");
    assert!(
        acked_in < BACK_WITHIN,
        "worker acknowledgement: {acked_in:?}"
    );

    // No Ok enqueue is lost: each ran, and the topic drains (every job acknowledged, none dead).
    let ok: BTreeSet<u64> = seen
        .iter()
        .flat_map(|s| s.lock().unwrap().ok.clone())
        .collect();
    wait_until_within(DRAIN, "every Ok enqueue to run", || {
        let runs = runs.lock().unwrap();
        ok.iter().all(|id| runs.contains_key(id))
    })
    .await;
    let counts = eventually_within(DRAIN, "the topic to drain", || async {
        let c = topic.counts().await.ok()?;
        (c.ready + c.scheduled + c.active == 0).then_some(c)
    })
    .await;
    stop_worker.shutdown();
    tokio::time::timeout(Duration::from_secs(30), worker_task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let runs = runs.lock().unwrap();
    let errors: u64 = seen.iter().map(|s| s.lock().unwrap().errors).sum();
    let again = runs.values().filter(|n| **n > 1).count();
    eprintln!(
        "{} enqueues returned Ok, {errors} failed while Redis was down; {} jobs ran ({again} more \
         than once); {counts:?}",
        ok.len(),
        runs.len()
    );
    assert_eq!(counts.dead, 0, "{counts:?}");
    // Every run was acknowledged once (a failed enqueue whose reply was lost may have been applied
    // and run too, and a job may run twice: at-least-once).
    assert!(counts.processed >= ok.len() as u64, "{counts:?}");
    assert!(runs.len() >= ok.len());
}
