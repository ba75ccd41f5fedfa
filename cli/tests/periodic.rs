//! `periodic ls` and `periodic trigger`, against a redis-server of the test's own, with schedules
//! stored as a worker stores them.

mod support;

use postpone::store::redis::RedisStore;
use postpone::store::{OpsStore, PeriodicStore, WorkerStore};
use support::{postpone, RedisServer};

const DAILY: &str =
    r#"{"expression":"0 9 * * *","zone":"Europe/Berlin","missed":"skip","overlap":"allow"}"#;
const EVERY: &str = r#"{"expression":"every 300s","missed":"up_to:3","overlap":"skip"}"#;

/// Stores schedule `name` of `topic` (and registers the topic), as a worker does at start.
async fn store(store: &RedisStore, topic: &str, name: &str, definition: &str) {
    let now = store.now_ms().await.unwrap();
    store
        .schedule_upsert(topic, name, definition, now + 3_600_000)
        .await
        .unwrap();
    store.register_topic(topic, 1).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_ls_and_trigger() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "periodic";
    let client = RedisStore::connect(&url, ns).await.unwrap();
    let empty = postpone(&url, ns, &["periodic", "ls"]);
    assert!(
        empty.expect(0).stdout.contains("no periodic schedules"),
        "{empty:#?}"
    );
    store(&client, "cli.reports", "daily", DAILY).await;
    store(&client, "cli.carts", "expire", EVERY).await;

    let ls = postpone(&url, ns, &["periodic", "ls"]);
    let text = &ls.expect(0).stdout;
    for cell in [
        "cli.reports",
        "daily",
        "0 9 * * *",
        "Europe/Berlin",
        "in 59m",
        "cli.carts",
        "every 300s",
        "up to 3",
    ] {
        assert!(text.contains(cell), "{cell:?} missing: {ls:#?}");
    }
    let doc = postpone(&url, ns, &["periodic", "ls", "cli.reports", "--json"])
        .expect(0)
        .json();
    let listed = doc["schedules"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{doc:#}");
    assert_eq!(listed[0]["topic"], "cli.reports");
    assert_eq!(listed[0]["name"], "daily");
    assert_eq!(listed[0]["zone"], "Europe/Berlin");
    assert_eq!(listed[0]["missed"], "skip");
    assert!(listed[0]["triggered"].is_null(), "{doc:#}");

    // By name alone when one topic has it.
    let run = postpone(&url, ns, &["periodic", "trigger", "daily"]);
    assert!(run.expect(0).stdout.contains("runs now"), "{run:#?}");
    let doc = postpone(&url, ns, &["periodic", "ls", "cli.reports", "--json"])
        .expect(0)
        .json();
    assert!(doc["schedules"][0]["triggered"].is_string(), "{doc:#}");
    let triggered = postpone(
        &url,
        ns,
        &[
            "periodic",
            "trigger",
            "expire",
            "--topic",
            "cli.carts",
            "--json",
        ],
    )
    .expect(0)
    .json();
    assert_eq!(triggered["topic"], "cli.carts");
    assert!(triggered["run_at"].is_string(), "{triggered:#}");

    postpone(&url, ns, &["periodic", "trigger", "nope"]).expect(3);
    postpone(
        &url,
        ns,
        &["periodic", "trigger", "daily", "--topic", "cli.carts"],
    )
    .expect(3);
    // The same name in two topics: which one must be said.
    store(&client, "cli.carts", "daily", EVERY).await;
    postpone(&url, ns, &["periodic", "trigger", "daily"]).expect(2);
}
