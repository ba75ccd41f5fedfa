//! The topics registry on Redis can hold a name another program (or a hand) wrote: the operations API
//! skips an entry that is not a valid topic name, lists the others, and logs a warning naming it. A
//! test binary of its own, on a current-thread runtime: it captures `tracing` events on this thread
//! (see tests/redis_eviction_warning.rs for why alone).

mod support;

use postpone::{Client, Job};
use serde::{Deserialize, Serialize};
use support::events::Events;
use support::redis_server::RedisServer;
use tracing::Level;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "registry.pings")]
struct Ping {
    n: u32,
}

#[tokio::test]
async fn ops_topics_skip_an_invalid_registry_entry_with_a_warning() {
    let server = RedisServer::start();
    let client = Client::builder()
        .namespace("registry")
        .redis(&server.url())
        .await
        .unwrap();
    client.enqueue(Ping { n: 1 }).await.unwrap();
    // Written by something other than postpone: not a valid topic name.
    server
        .cli(&["HSET", "postpone:{registry}:topics", "bad name!", "1"])
        .unwrap();

    let (log, _guard) = Events::capture(Level::WARN);
    let topics = client.ops().topics().await.unwrap();
    let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["registry.pings"], "the valid topic is still listed");
    assert_eq!(topics[0].counts.scheduled + topics[0].counts.ready, 1);

    let warnings = log.containing("skipping an entry of the topics registry");
    assert_eq!(warnings.len(), 1, "one warning: {:?}", log.all());
    assert_eq!(warnings[0].level, Level::WARN);
    assert_eq!(warnings[0].field("topic"), Some("bad name!"));
    let error = warnings[0].field("error").unwrap_or_default();
    assert!(error.contains("invalid topic name"), "{error}");
}
