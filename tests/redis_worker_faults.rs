//! A worker on the Redis backend through Redis faults: every job runs, none is lost.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::{Client, EnqueueItem, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use support::redis_server::RedisServer;
use support::wait::{eventually_within, wait_until_within};

/// How long the jobs may take to drain through a fault.
const DRAIN: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "faults.work")]
struct Work {
    n: u64,
}

const N: u64 = 400;

async fn drain_through(fault: impl FnOnce(&RedisServer)) {
    let server = RedisServer::builder()
        .aof(true)
        .appendfsync("always")
        .start();
    let options = RedisOptions::new("faults").response_timeout(Duration::from_secs(1));
    let store = RedisStore::connect_with(&server.url(), options)
        .await
        .unwrap();
    let client = Client::builder().store(store);
    let items = (0..N).map(|n| EnqueueItem::new(Work { n }).id(format!("w{n}")));
    client.enqueue_many(items).await.unwrap();

    let runs: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
    let seen = runs.clone();
    let handler = move |job: Work, _ctx: JobContext| {
        let seen = seen.clone();
        async move {
            *seen.lock().unwrap().entry(job.n).or_default() += 1;
            tokio::time::sleep(Duration::from_millis(2)).await;
            Ok::<(), JobError>(())
        }
    };
    let worker = Worker::builder(&client)
        .handle(handler)
        .concurrency(16)
        .lease(Duration::from_millis(1500))
        .poll_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let task = tokio::spawn(worker.run());

    wait_until_within(DRAIN, "a quarter of the jobs to run", || {
        runs.lock().unwrap().len() as u64 >= N / 4
    })
    .await;
    fault(&server);
    wait_until_within(DRAIN, "every job to run", || {
        runs.lock().unwrap().len() as u64 == N
    })
    .await;
    let topic = client.topic::<Work>();
    let counts = eventually_within(DRAIN, "every job to be acknowledged", || async {
        let c = topic.counts().await.ok()?;
        (c.processed == N && c.active == 0).then_some(c)
    })
    .await;
    assert_eq!((counts.ready, counts.scheduled, counts.dead), (0, 0, 0));
    stop.shutdown();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let runs = runs.lock().unwrap();
    let again = runs.values().filter(|n| **n > 1).count();
    eprintln!("{again} of {N} jobs ran more than once (at-least-once delivery)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_job_is_lost_when_redis_is_killed_and_restarted_mid_drain() {
    drain_through(|server| {
        server.kill9();
        std::thread::sleep(Duration::from_millis(300));
        server.restart();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_job_is_lost_when_the_workers_connections_are_killed_mid_drain() {
    drain_through(|server| {
        server.cli(&["CLIENT", "KILL", "TYPE", "normal"]).unwrap();
        server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_job_is_lost_when_redis_pauses_mid_drain() {
    drain_through(|server| {
        server.pause();
        std::thread::sleep(Duration::from_millis(2500));
        server.resume();
    })
    .await;
}
