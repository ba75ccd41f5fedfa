//! The store conformance suite on the Redis backend, one `redis-server` of its own per test.

#[macro_use]
mod store_conformance;
mod support;

use std::sync::Arc;

use postpone::store::redis::RedisStore;
use postpone::store::Store;
use support::redis_server::RedisServer;

async fn redis() -> (Arc<dyn Store>, RedisServer) {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "conformance")
        .await
        .expect("connecting to the test redis-server");
    (Arc::new(store) as Arc<dyn Store>, server)
}

store_conformance!(redis());
