//! Fairness by key in the operations API: a topic's busiest keys by jobs queued, over its partitions,
//! with their running jobs (when a max running per key counts them) and holds, on memory and Redis.

mod support;

use std::time::Duration;

use postpone::{Client, EnqueueStatus, Job, JobContext, JobError, KeyLimits, Periodic, Worker};
use serde::{Deserialize, Serialize};
use support::redis_server::RedisServer;
use support::wait::eventually;

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

/// A topic's busiest keys as (key, jobs queued), busiest first.
async fn queued_by_key(client: &Client, topic: &str) -> Vec<(String, u64)> {
    let page = client.ops().busiest_keys(topic, 10).await.unwrap();
    page.keys
        .iter()
        .map(|k| (k.key.clone(), k.queued))
        .collect()
}

/// `(key, queued)` pairs as `queued_by_key` gives them.
fn owned(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// A batch's keyed members keep their keys, and their generated ids land in their keys' partitions,
/// as an enqueue's do.
async fn keyed_members_of_a_batch_are_filed_by_key_in_their_keys_partition(client: Client) {
    let shops = ["acme", "acme", "acme", "acme", "globex", "globex"];
    let batch = client
        .batch()
        .add_all(shops.iter().map(|shop| Sync {
            shop: shop.to_string(),
        }))
        .enqueue()
        .await
        .unwrap();
    assert_eq!(
        queued_by_key(&client, "ops.sync").await,
        owned(&[("acme", 4), ("globex", 2)])
    );
    let members = batch.members(0, 10).await.unwrap();
    assert_eq!(members.len(), 6);
    for shop in ["acme", "globex"] {
        let mut partitions = Vec::new();
        for m in &members {
            let job = client
                .topic::<Sync>()
                .job(&m.id)
                .await
                .unwrap()
                .expect("live");
            if job.job::<Sync>().unwrap().shop == shop {
                partitions.push(postpone::partition_of(&m.id, 2));
            }
        }
        partitions.dedup();
        assert_eq!(
            partitions.len(),
            1,
            "{shop}'s jobs in one partition: {partitions:?}"
        );
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "ops.refresh", key = "tenant", unique = ["shop"], unique_for = "10m")]
struct Refresh {
    tenant: String,
    shop: u64,
}

/// Unique jobs with a key for fairness: a duplicate is refused as before, the others are filed by key.
async fn unique_jobs_with_a_key_are_filed_by_key(client: Client) {
    let mut statuses = Vec::new();
    for (tenant, shop) in [("acme", 1), ("acme", 2), ("acme", 1), ("globex", 3)] {
        let job = Refresh {
            tenant: tenant.into(),
            shop,
        };
        statuses.push(client.enqueue(job).await.unwrap().status);
    }
    assert_eq!(
        statuses,
        [
            EnqueueStatus::Created,
            EnqueueStatus::Created,
            EnqueueStatus::Duplicate,
            EnqueueStatus::Created
        ]
    );
    assert_eq!(
        queued_by_key(&client, "ops.refresh").await,
        owned(&[("acme", 2), ("globex", 1)])
    );
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "ops.digest", key = "tenant")]
struct Digest {
    tenant: String,
}

/// A periodic job whose type has a key: each tick's job is filed under it (before, every tick was
/// skipped with a logged error).
async fn a_periodic_jobs_ticks_are_filed_by_key(client: Client) {
    let hourly = Periodic::every("acme-digest", Duration::from_secs(3600))
        .unwrap()
        .job(|_| Digest {
            tenant: "acme".into(),
        });
    let worker = Worker::builder(&client)
        .handle(|_: Digest, _: JobContext| async { Ok::<(), JobError>(()) })
        .periodic(hourly)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let topic = client.topic::<Digest>();
    eventually("the schedule to be stored", || async {
        (!topic.schedules().await.unwrap().is_empty()).then_some(())
    })
    .await;
    // Paused: the triggered tick's job waits in the queue, where its key can be seen.
    client.ops().pause("ops.digest").await.unwrap();
    topic
        .trigger_schedule("acme-digest")
        .await
        .unwrap()
        .expect("stored");
    let seen = eventually("the triggered tick's job", || async {
        let keys = queued_by_key(&client, "ops.digest").await;
        (!keys.is_empty()).then_some(keys)
    })
    .await;
    assert_eq!(seen, owned(&[("acme", 1)]));
    stop.shutdown();
    running.await.unwrap().unwrap();
}

/// Enqueues `n` jobs of the shop acme; returns the last one's id.
async fn enqueue_acme(client: &Client, n: usize) -> String {
    let mut last = String::new();
    for _ in 0..n {
        let job = Sync {
            shop: "acme".into(),
        };
        last = client.enqueue(job).await.unwrap().id;
    }
    last
}

/// A worker of [`Sync`] jobs under `limits` whose handlers say when they start (`started`), then wait
/// for a permit of `release`.
struct Gated {
    started: tokio::sync::mpsc::UnboundedReceiver<()>,
    release: std::sync::Arc<tokio::sync::Semaphore>,
    stop: postpone::ShutdownHandle,
    running: tokio::task::JoinHandle<postpone::Result<()>>,
}

impl Gated {
    fn start(client: &Client, concurrency: usize, limits: KeyLimits) -> Self {
        let (started_tx, started) = tokio::sync::mpsc::unbounded_channel();
        let release = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        let gate = release.clone();
        let worker = Worker::builder(client)
            .concurrency(concurrency)
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
        Gated {
            started,
            release,
            stop,
            running: tokio::spawn(worker.run()),
        }
    }

    /// Stops the worker and waits for it.
    async fn stop(self) {
        self.stop.shutdown();
        self.running.await.unwrap().unwrap();
    }
}

/// The limits per key of the topic's workers' claims: none known before a worker claimed keyed jobs,
/// then the worker's, shown beside the keys.
async fn busiest_keys_show_the_limits_per_key_workers_claim_under(client: Client) {
    let ops = client.ops();
    enqueue_acme(&client, 1).await;
    let before = ops.busiest_keys("ops.sync", 10).await.unwrap();
    assert_eq!(before.limits, None, "no worker claimed yet: {before:?}");
    let limits = KeyLimits::new()
        .max_running(2)
        .rate(postpone::RateLimit::per_second(10));
    let mut worker = Gated::start(&client, 10, limits);
    worker.started.recv().await.unwrap();
    // A second job queued while the first runs: the key is listed, under the worker's limits.
    enqueue_acme(&client, 1).await;
    let page = ops.busiest_keys("ops.sync", 10).await.unwrap();
    assert_eq!(page.limits, Some(limits), "{page:?}");
    assert_eq!(
        page.limits.map(|l| l.to_string()).as_deref(),
        Some("max 2 running, 10/1s")
    );
    worker.release.add_permits(2);
    worker.started.recv().await.unwrap();
    worker.stop().await;
}

/// A client of a namespace of its own on `server`.
async fn on_redis(server: &RedisServer) -> Client {
    Client::builder()
        .namespace("ops")
        .redis(&server.url())
        .await
        .unwrap()
}

/// Runs `scenario` on memory (test `$memory`) and on a Redis of its own (test `$redis`).
macro_rules! on_both {
    ($scenario:ident: $memory:ident, $redis:ident) => {
        #[tokio::test]
        async fn $memory() {
            $scenario(Client::memory()).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $redis() {
            let server = RedisServer::start();
            $scenario(on_redis(&server).await).await;
        }
    };
}

on_both!(busiest_keys_counts_each_key_over_partitions:
    ops_busiest_keys_fair_on_memory, ops_busiest_keys_fair_on_redis);
on_both!(keyed_members_of_a_batch_are_filed_by_key_in_their_keys_partition:
    ops_batch_members_fair_by_key_on_memory, ops_batch_members_fair_by_key_on_redis);
on_both!(unique_jobs_with_a_key_are_filed_by_key:
    ops_unique_jobs_fair_by_key_on_memory, ops_unique_jobs_fair_by_key_on_redis);
on_both!(a_periodic_jobs_ticks_are_filed_by_key:
    ops_periodic_jobs_fair_by_key_on_memory, ops_periodic_jobs_fair_by_key_on_redis);
on_both!(busiest_keys_show_the_limits_per_key_workers_claim_under:
    ops_busiest_keys_show_the_key_limits_on_memory, ops_busiest_keys_show_the_key_limits_on_redis);

/// A key at its max running per key: its running jobs counted, and the key counted among the keys.
async fn busiest_keys_show_running_jobs_under_a_key_limit(client: Client) {
    enqueue_acme(&client, 4).await;
    // Jobs wait until the test lets them all go.
    let mut worker = Gated::start(&client, 4, KeyLimits::new().max_running(2));
    worker.started.recv().await.unwrap();
    worker.started.recv().await.unwrap();
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
    assert!(worker.started.try_recv().is_err());
    worker.release.add_permits(4);
    for _ in 0..2 {
        worker.started.recv().await.unwrap();
    }
    worker.stop().await;
}

on_both!(busiest_keys_show_running_jobs_under_a_key_limit:
    ops_busiest_keys_show_running_jobs_under_a_key_limit_on_memory,
    ops_busiest_keys_show_running_jobs_under_a_key_limit_on_redis);

/// A job's detail names its key, its key's load, and says when the key holds it back: at its key's
/// max running, the "why" line says so (not "waiting for a free slot").
async fn a_jobs_detail_says_its_key_holds_it_back(client: Client) {
    let last = enqueue_acme(&client, 2).await;
    let mut worker = Gated::start(&client, 4, KeyLimits::new().max_running(1));
    worker.started.recv().await.unwrap();
    // The first runs (its claim counted it against its key): the second waits for its key.
    let ops = client.ops();
    let detail = ops.job("ops.sync", &last).await.unwrap().expect("live");
    let load = detail.key_load.as_ref().expect("its key's load");
    assert_eq!((load.queued, load.running), (1, 1), "{load:?}");
    assert_eq!(detail.key.as_deref(), Some("acme"));
    assert_eq!(detail.key_limits, Some(KeyLimits::new().max_running(1)));
    assert!(
        detail.why.contains(
            "waiting for its key: key \"acme\" runs its most at once (1, max running per key, \
             across every worker); the topic's other keys run"
        ),
        "{}",
        detail.why
    );
    let json = serde_json::to_value(&detail).unwrap();
    assert_eq!(json["key"], "acme", "{json}");
    assert_eq!(json["key_load"]["running"], 1, "{json}");
    worker.release.add_permits(2);
    worker.started.recv().await.unwrap();
    worker.stop().await;
}

on_both!(a_jobs_detail_says_its_key_holds_it_back:
    ops_job_detail_key_limit_on_memory, ops_job_detail_key_limit_on_redis);

/// A key's own limits, set through the operations API on a partitioned topic: they replace the
/// worker's limits per key for that key (2 at once where the worker says 1), show in its job's detail
/// and in the busiest keys, are listed once whatever the partitions, and are cleared.
async fn a_keys_own_limits_replace_the_workers_for_it(client: Client) {
    let ops = client.ops();
    enqueue_acme(&client, 1).await;
    let own = KeyLimits::new().max_running(2);
    ops.set_key_limits("ops.sync", "acme", own).await.unwrap();
    assert_eq!(
        ops.key_limits("ops.sync").await.unwrap(),
        [("acme".to_owned(), own)]
    );
    // A key no job could have, and an unknown topic, are refused.
    let err = ops
        .set_key_limits("ops.sync", "", own)
        .await
        .expect_err("an empty key");
    assert!(matches!(err, postpone::Error::InvalidKey { .. }), "{err:?}");
    assert!(ops.key_limits("no.such.topic").await.is_err());

    let last = enqueue_acme(&client, 2).await;
    let mut worker = Gated::start(&client, 4, KeyLimits::new().max_running(1));
    worker.started.recv().await.unwrap();
    worker.started.recv().await.unwrap();
    // Two run (acme's own max); the third waits for its key, and says which limit holds it.
    let detail = ops.job("ops.sync", &last).await.unwrap().expect("live");
    let load = detail.key_load.as_ref().expect("its key's load");
    assert_eq!((load.queued, load.running), (1, 2), "{load:?}");
    assert_eq!(load.own_limits, Some(own), "{load:?}");
    assert!(
        detail
            .why
            .contains("runs its most at once (2, max running per key"),
        "{}",
        detail.why
    );
    let page = ops.busiest_keys("ops.sync", 10).await.unwrap();
    let acme = page.keys.iter().find(|k| k.key == "acme").expect("acme");
    assert_eq!(acme.own_limits, Some(own), "{page:?}");
    assert_eq!(page.limits, Some(KeyLimits::new().max_running(1)));

    ops.clear_key_limits("ops.sync", "acme").await.unwrap();
    assert!(ops.key_limits("ops.sync").await.unwrap().is_empty());
    worker.release.add_permits(3);
    worker.started.recv().await.unwrap();
    worker.stop().await;
}

on_both!(a_keys_own_limits_replace_the_workers_for_it:
    ops_key_limits_of_its_own_on_memory, ops_key_limits_of_its_own_on_redis);
