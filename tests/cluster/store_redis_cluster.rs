//! The store conformance suite on a Redis Cluster: one 3-master cluster for the whole binary, a
//! namespace of its own per test.

#[macro_use]
#[path = "../store_conformance/mod.rs"]
mod store_conformance;
#[path = "../support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use postpone::store::redis::RedisStore;
use postpone::store::Store;
use support::redis_cluster::RedisCluster;

async fn cluster() -> Arc<dyn Store> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let cluster = tokio::task::spawn_blocking(RedisCluster::shared)
        .await
        .expect("starting the test cluster");
    let namespace = format!("store{}", SEQ.fetch_add(1, Ordering::Relaxed));
    let store = RedisStore::connect_cluster(&cluster.urls(), &namespace)
        .await
        .expect("connecting to the test cluster");
    assert!(store.is_cluster());
    Arc::new(store) as Arc<dyn Store>
}

store_conformance!(cluster());
