//! Fairness by key in the operations API: a topic's busiest keys by jobs queued, over its partitions,
//! with their running jobs (when a max running per key counts them) and holds, on memory and Redis.

mod support;

use postpone::{Client, Job, JobContext, JobError, KeyLimits, Worker};
use serde::{Deserialize, Serialize};
use support::redis_server::RedisServer;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "ops.sync", key = "shop", partitions = 2)]
struct Sync {
    shop: String,
}

async fn busiest_keys_counts_each_key_over_partitions(client: Client) {
    let ops = client.ops();
    for (shop, n) in [("acme", 5), ("globex", 2), ("<b>initech</b>", 1)] {
        for _ in 0..n {
            client.enqueue(Sync { shop: shop.into() }).await.unwrap();
        }
    }
    let page = ops.busiest_keys("ops.sync", 2).await.unwrap();
    let keys: Vec<(&str, u64)> = page
        .keys
        .iter()
        .map(|k| (k.key.as_str(), k.queued))
        .collect();
    assert_eq!(keys, [("acme", 5), ("globex", 2)], "{page:?}");
    assert_eq!(page.total, 3, "keys with a job queued: {page:?}");
    assert!(!page.sampled);
    // No key asked for: only the counts (what a dashboard reads to know whether to show its keys).
    let counted = ops.busiest_keys("ops.sync", 0).await.unwrap();
    assert!(counted.keys.is_empty(), "{counted:?}");
    assert_eq!((counted.total, counted.sampled), (3, false), "{counted:?}");
    let all = ops.busiest_keys("ops.sync", 10).await.unwrap();
    assert_eq!(
        all.keys.last().map(|k| k.key.as_str()),
        Some("<b>initech</b>")
    );
}

/// The limits per key of the topic's workers' claims: none known before a worker claimed keyed jobs,
/// then the worker's, shown beside the keys.
async fn busiest_keys_show_the_limits_per_key_workers_claim_under(client: Client) {
    let ops = client.ops();
    client
        .enqueue(Sync {
            shop: "acme".into(),
        })
        .await
        .unwrap();
    let before = ops.busiest_keys("ops.sync", 10).await.unwrap();
    assert_eq!(before.limits, None, "no worker claimed yet: {before:?}");
    let limits = KeyLimits::new()
        .max_running(2)
        .rate(postpone::RateLimit::per_second(10));
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let release = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let gate = release.clone();
    let worker = Worker::builder(&client)
        .handle(move |_job: Sync, _ctx: JobContext| {
            let (tx, gate) = (started_tx.clone(), gate.clone());
            async move {
                let _ = tx.send(());
                let _ = gate.acquire().await;
                Ok::<(), JobError>(())
            }
        })
        .key_limits::<Sync>(limits)
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    started.recv().await.unwrap();
    // A second job queued while the first runs: the key is listed, under the worker's limits.
    client
        .enqueue(Sync {
            shop: "acme".into(),
        })
        .await
        .unwrap();
    let page = ops.busiest_keys("ops.sync", 10).await.unwrap();
    assert_eq!(page.limits, Some(limits), "{page:?}");
    assert_eq!(
        page.limits.map(|l| l.to_string()).as_deref(),
        Some("max 2 running, 10/1s")
    );
    release.add_permits(2);
    started.recv().await.unwrap();
    stop.shutdown();
    running.await.unwrap().unwrap();
}

/// A client of a namespace of its own on `server`.
async fn on_redis(server: &RedisServer) -> Client {
    Client::builder()
        .namespace("ops")
        .redis(&server.url())
        .await
        .unwrap()
}

#[tokio::test]
async fn ops_busiest_keys_fair_on_memory() {
    busiest_keys_counts_each_key_over_partitions(Client::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_busiest_keys_fair_on_redis() {
    let server = RedisServer::start();
    let client = on_redis(&server).await;
    busiest_keys_counts_each_key_over_partitions(client).await;
}

#[tokio::test]
async fn ops_busiest_keys_show_the_key_limits_on_memory() {
    busiest_keys_show_the_limits_per_key_workers_claim_under(Client::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_busiest_keys_show_the_key_limits_on_redis() {
    let server = RedisServer::start();
    let client = on_redis(&server).await;
    busiest_keys_show_the_limits_per_key_workers_claim_under(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_busiest_keys_show_running_jobs_under_a_key_limit_on_redis() {
    let server = RedisServer::start();
    let client = on_redis(&server).await;
    for _ in 0..4 {
        client
            .enqueue(Sync {
                shop: "acme".into(),
            })
            .await
            .unwrap();
    }
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    // Jobs wait here until the test lets them all go.
    let release = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let gate = release.clone();
    let worker = Worker::builder(&client)
        .concurrency(4)
        .handle(move |_job: Sync, _ctx: JobContext| {
            let (tx, gate) = (started_tx.clone(), gate.clone());
            async move {
                let _ = tx.send(());
                let _ = gate.acquire().await;
                Ok::<(), JobError>(())
            }
        })
        .key_limits::<Sync>(KeyLimits::new().max_running(2))
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    started.recv().await.unwrap();
    started.recv().await.unwrap();
    let page = client.ops().busiest_keys("ops.sync", 10).await.unwrap();
    assert!(page.running_counted, "{page:?}");
    let acme = &page.keys[0];
    assert_eq!(
        (acme.key.as_str(), acme.queued, acme.running),
        ("acme", 2, 2),
        "{page:?}"
    );
    assert_eq!(
        page.total, 1,
        "a key at its max running is counted: {page:?}"
    );
    // At its max: no third job of the key started.
    assert!(started.try_recv().is_err());
    release.add_permits(4);
    for _ in 0..2 {
        started.recv().await.unwrap();
    }
    stop.shutdown();
    running.await.unwrap().unwrap();
}
