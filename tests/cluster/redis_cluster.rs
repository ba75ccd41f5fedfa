//! Redis Cluster: the test harness, connecting from seeds, where a partitioned topic's keys land, a slot
//! migration under a running worker, and a master that dies. Each test starts its own 3-master cluster of
//! redis-server processes on loopback, or shares the binary's one when it changes nothing but its own
//! namespace.

#[path = "../support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::{partition_of, Client, EnqueueItem, Error, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use support::redis_cluster::RedisCluster;
use support::store::Captured;
use tokio::sync::mpsc;

#[test]
fn the_harness_starts_a_converged_cluster_and_kills_one_node() {
    let cluster = RedisCluster::start();
    assert_eq!(cluster.len(), 3);
    for i in 0..3 {
        let info: String =
            redis::FromRedisValue::from_redis_value(cluster.cli(i, &["CLUSTER", "INFO"]).unwrap())
                .unwrap();
        assert!(info.contains("cluster_state:ok"), "{info}");
    }
    // Keys with different hash tags land on different nodes.
    let nodes: std::collections::BTreeSet<usize> = (0..30)
        .map(|i| cluster.node_of(&format!("{{tag{i}}}")))
        .collect();
    assert_eq!(nodes.len(), 3, "{nodes:?}");

    cluster.kill9(1);
    assert!(cluster.cli(1, &["PING"]).is_err(), "node 1 still answers");
    for i in [0, 2] {
        assert!(cluster.cli(i, &["PING"]).is_ok(), "node {i} died too");
    }
    let ports = cluster.ports();
    drop(cluster);
    for port in ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} still open after drop"
        );
    }
}

/// A hot topic in three partitions.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "hot", partitions = 3)]
struct Hot {
    n: u64,
}

/// A topic that is not partitioned.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "moving")]
struct Moving {
    n: u64,
}

const PATIENCE: Duration = Duration::from_secs(20);

/// A key of partition `p` of `Hot` in namespace `ns` (partition 0 keeps the topic's own name).
fn hot_key(ns: &str, p: u16) -> String {
    match p {
        0 => format!("postpone:{{{ns}:hot}}:jobs"),
        p => format!("postpone:{{{ns}:hot#{p}}}:jobs"),
    }
}

/// `count` ids `<prefix>-<i>` that fall in partition `p`.
fn hot_ids(p: u16, count: usize, prefix: &str) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|id| partition_of(id, 3) == p)
        .take(count)
        .collect()
}

async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .expect("channel open")
}

/// A handler that reports `(partition of the id, n)`.
fn reporting(
    tx: mpsc::UnboundedSender<(u16, u64)>,
) -> impl Fn(Hot, JobContext) -> std::future::Ready<Result<(), JobError>> + Clone + Send + Sync + 'static
{
    move |job: Hot, ctx: JobContext| {
        let _ = tx.send((partition_of(ctx.id(), 3), job.n));
        std::future::ready(Ok(()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_topics_keys_land_on_more_than_one_node() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::shared)
        .await
        .unwrap();
    let client = Client::builder()
        .namespace("spread")
        .redis_cluster(&cluster.urls())
        .await
        .unwrap();
    client
        .enqueue_many((0..30).map(|n| EnqueueItem::new(Hot { n }).id(format!("hot-{n}"))))
        .await
        .unwrap();
    let mut nodes_of_partition: BTreeMap<u16, BTreeSet<usize>> = BTreeMap::new();
    for node in 0..cluster.len() {
        for key in cluster.node_keys(node) {
            let p: u16 = if key.starts_with("postpone:{spread:hot}") {
                0
            } else if let Some(rest) = key.strip_prefix("postpone:{spread:hot#") {
                rest.split('}').next().unwrap().parse().unwrap()
            } else {
                continue;
            };
            nodes_of_partition.entry(p).or_default().insert(node);
        }
    }
    assert_eq!(
        nodes_of_partition.keys().copied().collect::<Vec<_>>(),
        [0, 1, 2],
        "every partition holds jobs"
    );
    for (p, nodes) in &nodes_of_partition {
        assert_eq!(
            nodes.len(),
            1,
            "partition {p}'s keys share one hash tag, so one node"
        );
    }
    let nodes: BTreeSet<usize> = nodes_of_partition.values().flatten().copied().collect();
    assert!(nodes.len() > 1, "all three partitions on node {nodes:?}");
    assert_eq!(client.topic::<Hot>().counts().await.unwrap().ready, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_env_connects_to_the_cluster_in_redis_cluster_nodes() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::shared)
        .await
        .unwrap();
    // This binary's only reader of these variables.
    std::env::set_var("REDIS_CLUSTER_NODES", format!(" {} ,", cluster.nodes_env()));
    std::env::set_var("REDIS_URL", "redis://127.0.0.1:1");
    std::env::set_var("POSTPONE_NAMESPACE", "fromenv");
    let client = Client::from_env().await.unwrap();
    assert_eq!(client.backend_name(), "redis-cluster");
    client.enqueue(Hot { n: 1 }).id("env-1").await.unwrap();
    let p = partition_of("env-1", 3);
    let node = cluster.node_of(&hot_key("fromenv", p));
    assert!(cluster.node_keys(node).contains(&hot_key("fromenv", p)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeds_that_do_not_answer_are_skipped_and_none_answering_is_a_connect_error() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::shared)
        .await
        .unwrap();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("redis://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let mut seeds = vec![dead.clone()];
    seeds.extend(cluster.urls().into_iter().take(1));
    let store = RedisStore::connect_cluster(&seeds, "seeds").await.unwrap();
    assert!(store.is_cluster());

    let err = RedisStore::connect_cluster(&[dead.as_str()], "seeds")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    let port = dead.rsplit(':').next().unwrap();
    assert!(err.to_string().contains(port), "{err}");

    let none: [&str; 0] = [];
    assert!(matches!(
        RedisStore::connect_cluster(&none, "seeds").await,
        Err(Error::InvalidUrl { .. })
    ));
    let err = RedisStore::connect_cluster(&["redis://u:hunter2@127.0.0.1:x"], "seeds")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err}");
    assert!(!err.report().to_string().contains("hunter2"), "{err}");
    assert!(matches!(
        RedisStore::connect_cluster(&cluster.urls(), "bad namespace").await,
        Err(Error::InvalidNamespace { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_keeps_working_while_its_slot_moves_to_another_node() {
    let cluster = std::sync::Arc::new(
        tokio::task::spawn_blocking(RedisCluster::start)
            .await
            .unwrap(),
    );
    let client = Client::builder()
        .namespace("migrate")
        .redis_cluster(&cluster.urls())
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handler = move |job: Moving, _ctx: JobContext| {
        let tx = tx.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            let _ = tx.send(job.n);
            Ok::<(), JobError>(())
        }
    };
    let worker = Worker::builder(&client)
        .handle(handler)
        .concurrency(4)
        .claim_batch(4)
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    client
        .enqueue_many((0..300).map(|n| EnqueueItem::new(Moving { n }).id(format!("m{n}"))))
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    while seen.len() < 50 {
        assert!(seen.insert(next(&mut rx, "a job").await), "a job ran twice");
    }
    let key = "postpone:{migrate:moving}:due";
    let from = cluster.node_of(key);
    let to = (from + 1) % cluster.len();
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.migrate_slot_of(key, to))
        .await
        .unwrap();
    assert_eq!(cluster.node_of(key), to);
    // Enqueues after the move follow the MOVED redirection.
    client
        .enqueue_many((300..400).map(|n| EnqueueItem::new(Moving { n }).id(format!("m{n}"))))
        .await
        .unwrap();
    while seen.len() < 400 {
        assert!(seen.insert(next(&mut rx, "a job").await), "a job ran twice");
    }
    let topic = client.topic::<Moving>();
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let c = topic.counts().await.unwrap();
        if c.processed == 400 {
            assert_eq!((c.ready, c.active, c.scheduled), (0, 0, 0));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{c:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.shutdown();
    running.await.unwrap().unwrap();
    assert!(cluster
        .node_keys(to)
        .iter()
        .any(|k| k.starts_with("postpone:{migrate:moving}")));
    assert!(!cluster
        .node_keys(from)
        .iter()
        .any(|k| k.starts_with("postpone:{migrate:moving}")));
}

/// One master dies (no replicas). The partitions on the other masters keep running, wake-ups move to
/// another seed, and everything that touches a dead partition fails with an error naming it.
#[tokio::test]
async fn a_dead_master_stops_only_its_partitions_and_errors_name_them() {
    let log = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // Another test thread may have cached this callsite's interest before this subscriber existed.
    tracing::callsite::rebuild_interest_cache();
    let cluster = RedisCluster::builder().require_full_coverage(false).start();
    // A namespace whose partitions sit on node 0 (the first seed, where hints are subscribed) and on at
    // least one other node.
    let (ns, on_node0) = (0..200)
        .map(|k| format!("fault{k}"))
        .find_map(|ns| {
            let nodes: Vec<usize> = (0..3).map(|p| cluster.node_of(&hot_key(&ns, p))).collect();
            let on_node0: Vec<u16> = (0..3).filter(|p| nodes[*p as usize] == 0).collect();
            (!on_node0.is_empty() && on_node0.len() < 3).then_some((ns, on_node0))
        })
        .expect("a namespace with partitions on node 0 and elsewhere");
    let alive: Vec<u16> = (0..3).filter(|p| !on_node0.contains(p)).collect();
    let options = RedisOptions::new(ns.as_str()).response_timeout(Duration::from_secs(1));
    let store = RedisStore::connect_cluster_with(&cluster.urls(), options)
        .await
        .unwrap();
    let client = Client::builder().store(store);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = Worker::builder(&client)
        .handle(reporting(tx))
        // Only wake-up hints (and known due times) start jobs: a lost hint would fail the test.
        .poll_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());

    for p in 0..3 {
        let id = &hot_ids(p, 1, "before")[0];
        client
            .enqueue(Hot { n: u64::from(p) })
            .id(id.as_str())
            .await
            .unwrap();
    }
    let mut got = BTreeSet::new();
    for _ in 0..3 {
        got.insert(next(&mut rx, "a job before the kill").await);
    }
    assert_eq!(got, [(0, 0), (1, 1), (2, 2)].into_iter().collect());

    cluster.kill9(0);
    // The other partitions keep flowing.
    for round in 0..3u64 {
        for p in &alive {
            let id = &hot_ids(*p, 3, "after")[round as usize];
            let n = 100 + round * 10 + u64::from(*p);
            client.enqueue(Hot { n }).id(id.as_str()).await.unwrap();
            assert_eq!(next(&mut rx, "a job after the kill").await, (*p, n));
        }
    }
    // A new client connects, and a new worker starts and serves the partitions still alive.
    let options = RedisOptions::new(ns.as_str()).response_timeout(Duration::from_secs(1));
    let late = Client::builder().store(
        RedisStore::connect_cluster_with(&cluster.urls(), options)
            .await
            .expect("connecting while a master is down"),
    );
    let (tx2, mut rx2) = mpsc::unbounded_channel();
    let worker2 = Worker::builder(&late)
        .handle(reporting(tx2))
        .poll_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let shutdown2 = worker2.shutdown_handle();
    let running2 = tokio::spawn(worker2.run());
    shutdown.shutdown();
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the worker stops with a partition down")
        .unwrap()
        .unwrap();
    for p in &alive {
        let id = &hot_ids(*p, 1, "late")[0];
        let n = 200 + u64::from(*p);
        late.enqueue(Hot { n }).id(id.as_str()).await.unwrap();
        assert_eq!(next(&mut rx2, "a job on the late worker").await, (*p, n));
    }
    drop(rx);

    // A dead partition fails clearly, and only it.
    let dead = on_node0[0];
    let id = &hot_ids(dead, 1, "lost")[0];
    let err = client
        .enqueue(Hot { n: 999 })
        .id(id.as_str())
        .await
        .unwrap_err();
    match &err {
        Error::Partition {
            topic,
            partition,
            partitions,
            ..
        } => assert_eq!((topic.as_str(), *partition, *partitions), ("hot", dead, 3)),
        other => panic!("expected a partition error, got {other}"),
    }
    assert!(err.is_transient());
    let stored = match dead {
        0 => "\"hot\"".to_owned(),
        p => format!("hot#{p}"),
    };
    assert!(err.to_string().contains(&stored), "{err}");
    let err = client.topic::<Hot>().counts().await.unwrap_err();
    assert!(
        matches!(&err, Error::Partition { partition, .. } if on_node0.contains(partition)),
        "{err}"
    );
    let alive_id = &hot_ids(alive[0], 1, "lookup")[0];
    assert!(client.topic::<Hot>().job(alive_id).await.unwrap().is_none());

    shutdown2.shutdown();
    tokio::time::timeout(PATIENCE, running2)
        .await
        .expect("the late worker stops with a partition down")
        .unwrap()
        .unwrap();
    let text = log.text();
    assert!(
        text.lines()
            .any(|l| l.contains("claim failed") && l.contains(&format!("partition={dead}"))),
        "the worker names the failed partition in its logs:\n{text}"
    );
}
