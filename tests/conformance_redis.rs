//! The conformance suite on the Redis backend, one `redis-server` of its own per test.

#[macro_use]
mod conformance;
mod support;

use conformance::Backend;
use postpone::store::redis::RedisStore;
use support::redis_server::RedisServer;

async fn redis() -> Backend {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "conformance")
        .await
        .expect("connecting to the test redis-server");
    Backend {
        client: postpone::Client::builder().store(store),
        _keep: Box::new(server),
    }
}

conformance_tests!(redis);
