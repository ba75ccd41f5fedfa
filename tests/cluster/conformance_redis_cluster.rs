//! The conformance suite on a Redis Cluster: one 3-master cluster for the whole binary, a namespace of
//! its own per test.

#[macro_use]
#[path = "../conformance/mod.rs"]
mod conformance;
#[path = "../support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};

use conformance::Backend;
use support::redis_cluster::RedisCluster;

async fn cluster() -> Backend {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let cluster = tokio::task::spawn_blocking(RedisCluster::shared)
        .await
        .expect("starting the test cluster");
    let namespace = format!("product{}", SEQ.fetch_add(1, Ordering::Relaxed));
    let client = postpone::Client::builder()
        .namespace(namespace)
        .redis_cluster(&cluster.urls())
        .await
        .expect("connecting to the test cluster");
    assert_eq!(client.backend_name(), "redis-cluster");
    Backend {
        client,
        _keep: Box::new(()),
    }
}

conformance_tests!(cluster);
