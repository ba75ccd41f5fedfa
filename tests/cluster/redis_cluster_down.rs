//! Redis Cluster: a call for a master known to be down fails at once, not after the response timeout,
//! and works again once the master answers. The other masters are unaffected throughout.
//!
//! The stores use a 4 s response timeout: a call that fails in less than half of it did not wait it
//! out. The times measured are printed, not asserted.

#[path = "../support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::{Due, JobStore, OpsStore};
use support::redis_cluster::RedisCluster;
use support::store::*;
use support::wait::eventually;

const TIMEOUT: Duration = Duration::from_secs(4);
const AT_ONCE: Duration = Duration::from_secs(2);
const NS: &str = "down";

/// A topic of namespace [`NS`] whose keys live on node `i`.
fn topic_on(cluster: &RedisCluster, i: usize) -> String {
    (0..1000)
        .map(|k| format!("t{k}"))
        .find(|t| cluster.node_of(&format!("postpone:{{{NS}:{t}}}:jobs")) == i)
        .expect("a topic on the node")
}

async fn connect(cluster: &RedisCluster) -> RedisStore {
    let options = RedisOptions::new(NS).response_timeout(TIMEOUT);
    RedisStore::connect_cluster_with(&cluster.urls(), options)
        .await
        .expect("connect")
}

/// Enqueues one job and times it.
async fn timed(s: &RedisStore, topic: &str, id: &str) -> (postpone::Result<()>, Duration) {
    let start = Instant::now();
    let r = s.enqueue(topic, vec![job(id, Due::In(0))]).await.map(drop);
    (r, start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_for_a_paused_master_fail_at_once_once_it_is_known_down_then_work_again() {
    let cluster = RedisCluster::builder().require_full_coverage(false).start();
    let (down, up) = (topic_on(&cluster, 1), topic_on(&cluster, 2));
    let s = connect(&cluster).await;
    s.enqueue(&down, vec![job("a", Due::In(0))]).await.unwrap();
    s.enqueue(&up, vec![job("a", Due::In(0))]).await.unwrap();

    cluster.pause(1);
    // Nothing says yet that the master is down: this call waits out the response timeout.
    let (first, took) = timed(&s, &down, "b").await;
    assert!(first.is_err());
    eprintln!("first call to the paused master failed after {took:?}");
    // Its master is probed; then every call for it fails at once.
    eventually("calls to the paused master to fail at once", || async {
        let (r, took) = timed(&s, &down, "c").await;
        (r.is_err() && took < AT_ONCE).then_some(())
    })
    .await;
    for i in 0..10 {
        let (r, took) = timed(&s, &down, &format!("d{i}")).await;
        let e = r.unwrap_err();
        assert!(e.is_transient(), "{e}");
        assert!(e.report().to_string().contains("is down"), "{}", e.report());
        assert!(
            took < AT_ONCE,
            "a call to a master known down took {took:?}"
        );
    }
    eprintln!(
        "a call to the master known down fails in {:?}",
        timed(&s, &down, "e").await.1
    );
    // The other masters never noticed.
    let (r, took) = timed(&s, &up, "b").await;
    r.unwrap();
    assert!(took < AT_ONCE, "{took:?}");

    cluster.resume(1);
    let resumed = Instant::now();
    until_ok("an enqueue after the master resumed", || {
        s.enqueue(&down, vec![job("f", Due::In(0))])
    })
    .await;
    eprintln!(
        "calls to the master work again {:?} after it resumed",
        resumed.elapsed()
    );
    let c = s.counts(&down).await.unwrap();
    assert!(c.ready >= 2, "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_does_not_answer_at_connect_is_known_down_from_the_first_call() {
    let cluster = RedisCluster::builder().require_full_coverage(false).start();
    let (down, up) = (topic_on(&cluster, 1), topic_on(&cluster, 2));
    cluster.kill9(1);
    let s = connect(&cluster).await;
    let (r, took) = timed(&s, &down, "a").await;
    let e = r.unwrap_err();
    assert!(e.report().to_string().contains("is down"), "{}", e.report());
    assert!(took < AT_ONCE, "{took:?}");
    // A partitioned topic's counts fail at once too (here: one topic, one partition on the dead node).
    let start = Instant::now();
    assert!(s.counts(&down).await.is_err());
    assert!(start.elapsed() < AT_ONCE, "{:?}", start.elapsed());
    s.enqueue(&up, vec![job("a", Due::In(0))]).await.unwrap();
}

/// A topic in three partitions.
#[derive(Debug, serde::Serialize, serde::Deserialize, postpone::Job)]
#[job(topic = "hot", partitions = 3)]
struct Hot {
    n: u64,
}

/// A key of partition `p` of `Hot` in namespace `ns`.
fn hot_key(ns: &str, p: u16) -> String {
    match p {
        0 => format!("postpone:{{{ns}:hot}}:jobs"),
        p => format!("postpone:{{{ns}:hot#{p}}}:jobs"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_counts_of_a_partitioned_topic_name_the_partitions_on_a_dead_master() {
    let cluster = RedisCluster::builder().require_full_coverage(false).start();
    // A namespace with partitions on node 1 and elsewhere.
    let (ns, dead): (String, Vec<u16>) = (0..200)
        .map(|k| format!("partial{k}"))
        .find_map(|ns| {
            let on_1: Vec<u16> = (0..3)
                .filter(|p| cluster.node_of(&hot_key(&ns, *p)) == 1)
                .collect();
            (!on_1.is_empty() && on_1.len() < 3).then_some((ns, on_1))
        })
        .expect("a namespace with partitions on node 1 and elsewhere");
    let options = RedisOptions::new(ns.as_str()).response_timeout(TIMEOUT);
    let client = postpone::Client::builder().store(
        RedisStore::connect_cluster_with(&cluster.urls(), options)
            .await
            .expect("connect"),
    );
    // One job in each partition.
    for p in 0..3u16 {
        let id = (0..)
            .map(|k| format!("j{k}"))
            .find(|id| postpone::partition_of(id, 3) == p)
            .unwrap();
        client.enqueue(Hot { n: p.into() }).id(id).await.unwrap();
    }
    let topic = client.topic::<Hot>();
    let all = topic.counts_partial().await.unwrap();
    assert!(all.is_complete(), "{all:?}");
    assert_eq!(all.counts.ready, 3);

    cluster.kill9(1);
    let start = Instant::now();
    let partial = topic.counts_partial().await.unwrap();
    eprintln!(
        "partial counts with a master down took {:?}",
        start.elapsed()
    );
    assert!(!partial.is_complete());
    assert_eq!(partial.unreadable_partitions(), dead, "{partial:?}");
    assert_eq!(partial.counts.ready, 3 - dead.len() as u64, "{partial:?}");
    for u in &partial.unreadable {
        assert!(
            matches!(&u.error, postpone::Error::Partition { partition, .. } if *partition == u.partition),
            "{}",
            u.error
        );
        assert!(u.error.is_transient(), "{}", u.error);
    }
    // Once the master is known down, partial counts answer at once.
    let again = eventually("partial counts to answer at once", || async {
        let start = Instant::now();
        let partial = topic.counts_partial().await.ok()?;
        (start.elapsed() < AT_ONCE).then_some((partial, start.elapsed()))
    })
    .await;
    eprintln!("then {:?}", again.1);
    assert_eq!(again.0.unreadable_partitions(), dead);
    // `counts` stays all or nothing.
    let e = topic.counts().await.unwrap_err();
    assert!(
        matches!(&e, postpone::Error::Partition { partition, .. } if dead.contains(partition)),
        "{e}"
    );
}

// A script's function library is loaded on the master of its topic's slot alone (redis-rs would send a
// FUNCTION LOAD to every master): with another master paused, a fresh store's first call on a topic
// elsewhere loads it there and works at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_library_loads_on_its_topics_master_alone() {
    let cluster = RedisCluster::start();
    let topic = topic_on(&cluster, 0);
    let s = connect(&cluster).await;
    cluster.pause(2);
    let (r, took) = timed(&s, &topic, "a").await;
    cluster.resume(2);
    r.unwrap();
    eprintln!("first enqueue, another master paused: {took:?}");
    assert!(took < AT_ONCE, "{took:?}");
    let libraries = |i: usize| match cluster.cli(i, &["FUNCTION", "LIST"]).unwrap() {
        redis::Value::Array(libs) => libs.len(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (libraries(0), libraries(1), libraries(2)),
        (1, 0, 0),
        "one library (the single enqueue's), on the topic's master only"
    );
}

// Operators' view of the function libraries covers every master, and a prune deletes other builds'
// libraries on each: the topic's own library stays on its master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_libraries_are_counted_and_pruned_on_every_master() {
    const OTHER_BUILD: &str = "#!lua name=postpone_0123456789012345678901234567890123456789
redis.register_function('postpone_0123456789012345678901234567890123456789', function() return 1 end)";
    let cluster = RedisCluster::start();
    let topic = topic_on(&cluster, 0);
    let s = connect(&cluster).await;
    timed(&s, &topic, "a").await.0.unwrap();
    for i in 0..3 {
        cluster.cli(i, &["FUNCTION", "LOAD", OTHER_BUILD]).unwrap();
    }
    let found = s.script_libraries(false).await.unwrap();
    assert_eq!((found.servers, found.current, found.others), (3, 1, 3));
    let pruned = s.script_libraries(true).await.unwrap();
    assert_eq!(
        (
            pruned.servers,
            pruned.current,
            pruned.others,
            pruned.deleted
        ),
        (3, 1, 0, 3)
    );
    let libraries = |i: usize| match cluster.cli(i, &["FUNCTION", "LIST"]).unwrap() {
        redis::Value::Array(libs) => libs.len(),
        other => panic!("{other:?}"),
    };
    assert_eq!((libraries(0), libraries(1), libraries(2)), (1, 0, 0));
}
