//! `keys TOPIC`: a topic's busiest keys (fairness by key) as a table and as JSON, against a
//! redis-server of the test's own, with keyed jobs enqueued through the library (a key given per
//! enqueue, and one from the type's `#[job(key = "shop")]` under a max running per key and a hold).

mod support;

use std::sync::Arc;
use std::time::Duration;

use postpone::{EnqueueItem, Job, JobContext, JobError, KeyLimits, Worker};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use support::{client, postpone, seed, RedisServer};

/// A notification, keyed per enqueue (`.key(..)`) by its tenant.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "cli.notify")]
struct Notify {
    user: u64,
}

/// A shop's sync, keyed by its shop.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "cli.sync", key = "shop")]
struct Sync {
    shop: String,
}

const XSS: &str = "<script>alert(1)</script>";

/// The words of the table's line that starts with `first` (a key shown whole).
fn row<'a>(text: &'a str, first: &str) -> Vec<&'a str> {
    text.lines()
        .find(|l| l.starts_with(first))
        .unwrap_or_else(|| panic!("no row {first:?} in:\n{text}"))
        .split_whitespace()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_lists_the_busiest_keys_of_a_topic_as_a_table_and_as_json() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "keys";
    let client = client(&server, ns).await;
    // A key as long as a key may be (128 bytes, 64 characters).
    let long = "ü".repeat(64);
    for (key, n) in [("acme", 5), (long.as_str(), 3), ("globex", 2), (XSS, 1)] {
        for user in 0..n {
            client.enqueue(Notify { user }).key(key).await.unwrap();
        }
    }
    // A job without a key, in a topic with keyed jobs: the jobs without one take their turn as one.
    client.enqueue(Notify { user: 99 }).await.unwrap();
    seed(&client, 1, &[]).await;

    let run = postpone(&url, ns, &["keys", "cli.notify"]);
    let text = &run.expect(0).stdout;
    println!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["KEY", "QUEUED", "RUNNING", "LIMIT", "HELD", "UNTIL"],
        "{run:#?}"
    );
    // Busiest first, then by key; no max running per key: running not counted ("-"); no worker has
    // claimed: no limit known ("-"); nothing held.
    assert!(lines[1].starts_with("acme "), "{run:#?}");
    assert_eq!(row(text, "acme"), ["acme", "5", "-", "-", "-"]);
    assert!(lines[2].starts_with('ü'), "{run:#?}");
    assert_eq!(row(text, "globex"), ["globex", "2", "-", "-", "-"]);
    assert!(lines[3].starts_with("globex "), "{run:#?}");
    // "" sorts before "<script>": the jobs without a key, shown as such.
    assert!(lines[4].starts_with("(no key) "), "{run:#?}");
    assert_eq!(row(text, "(no key)"), ["(no", "key)", "1", "-", "-", "-"]);
    // Hostile text printed as it is, as text.
    assert_eq!(row(text, "<script>"), [XSS, "1", "-", "-", "-"]);
    // A long key cut to 48 characters, with an ellipsis.
    let cut = format!("{}…", "ü".repeat(48));
    assert_eq!(row(text, "ü"), [cut.as_str(), "3", "-", "-", "-"]);
    assert!(!text.contains(&long), "{run:#?}");
    assert_eq!(
        lines[6], "5 keys with a job queued; RUNNING is counted only under a max running per key",
        "{run:#?}"
    );
    assert_eq!(lines.len(), 7, "{run:#?}");

    // --limit: the busiest only; the total still counts every key.
    let run = postpone(&url, ns, &["keys", "cli.notify", "--limit", "2"]);
    let text = &run.expect(0).stdout;
    assert_eq!(text.lines().count(), 4, "{run:#?}");
    assert!(text.lines().nth(2).unwrap().starts_with('ü'), "{run:#?}");
    assert!(text.contains("5 keys with a job queued"), "{run:#?}");

    let doc = postpone(&url, ns, &["keys", "cli.notify", "--json"])
        .expect(0)
        .json();
    let key = |key: &str, queued: u64| json!({"key": key, "queued": queued, "running": null, "held_until": null, "own_limit": null});
    assert_eq!(
        doc,
        json!({
            "topic": "cli.notify",
            "keys": [key("acme", 5), key(&long, 3), key("globex", 2), key("", 1), key(XSS, 1)],
            "total": 5,
            "sampled": false,
            "running_counted": false,
            "limit": null,
        })
    );
    let doc = postpone(&url, ns, &["keys", "cli.notify", "--limit", "1", "--json"])
        .expect(0)
        .json();
    assert_eq!(doc["keys"], json!([key("acme", 5)]));
    assert_eq!(doc["total"], 5);

    // A topic without keyed jobs: nothing to show, not a failure.
    let run = postpone(&url, ns, &["keys", "cli.orders"]);
    assert!(
        run.expect(0)
            .stdout
            .starts_with("no keyed jobs queued in topic cli.orders"),
        "{run:#?}"
    );
    let doc = postpone(&url, ns, &["keys", "cli.orders", "--json"])
        .expect(0)
        .json();
    assert_eq!(doc["keys"], json!([]));
    assert_eq!(doc["total"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_a_topic_of_many_keys_are_the_busiest_of_a_sample() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "keys-many";
    let client = client(&server, ns).await;
    // More keys than the store looks at (1,000 of each kind): which 1,000 it looks at is its choice,
    // so the rows are some of the keys, and the footer says so.
    let items =
        (0..1001).map(|n| EnqueueItem::new(Notify { user: n }).key(format!("tenant:{n:04}")));
    client.enqueue_many(items).await.unwrap();

    let run = postpone(&url, ns, &["keys", "cli.notify", "--limit", "3"]);
    let text = &run.expect(0).stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{run:#?}");
    for line in &lines[1..4] {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert!(
            words[0].starts_with("tenant:") && words[1..] == ["1", "-", "-", "-"],
            "{run:#?}"
        );
    }
    assert_eq!(
        lines[4],
        "1001 keys with a job queued; busiest of a sample of the topic's keys; RUNNING is counted \
         only under a max running per key",
        "{run:#?}"
    );
    let doc = postpone(&url, ns, &["keys", "cli.notify", "--json"])
        .expect(0)
        .json();
    assert_eq!(doc["sampled"], true, "{doc:#}");
    assert_eq!(doc["total"], 1001, "{doc:#}");
    assert_eq!(
        doc["keys"].as_array().unwrap().len(),
        20,
        "--limit 20 by default"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_an_unknown_topic_is_not_found() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "keys";
    let run = postpone(&url, ns, &["keys", "no.such.topic"]);
    assert!(
        run.expect(3).stderr.contains("no topic \"no.such.topic\""),
        "{run:#?}"
    );
    assert!(run.stdout.is_empty(), "{run:#?}");
    let err = postpone(&url, ns, &["keys", "no.such.topic", "--json"])
        .expect(3)
        .json();
    assert_eq!(err["error"]["kind"], "not_found");
    assert_eq!(err["error"]["exit_code"], 3);
    // Usage: a limit out of range, no topic.
    postpone(&url, ns, &["keys", "cli.notify", "--limit", "0"]).expect(2);
    postpone(&url, ns, &["keys"]).expect(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_show_running_jobs_under_a_key_limit_and_a_held_key() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "keys-limits";
    let client = client(&server, ns).await;
    for shop in ["acme", "acme", "acme", "globex", "globex"] {
        client.enqueue(Sync { shop: shop.into() }).await.unwrap();
    }
    // acme's jobs wait until the test lets them go; globex's provider says "not for an hour", which
    // holds globex alone.
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let gate = release.clone();
    let worker = Worker::builder(&client)
        .concurrency(4)
        .handle(move |job: Sync, _ctx: JobContext| {
            let gate = gate.clone();
            async move {
                if job.shop == "globex" {
                    return Err(JobError::rate_limited(Duration::from_secs(3600)));
                }
                let _ = gate.acquire().await;
                Ok::<(), JobError>(())
            }
        })
        .key_limits::<Sync>(KeyLimits::new().max_running(1))
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let ops = client.ops();
    support::wait::eventually("acme running and globex held", || async {
        let page = ops.busiest_keys("cli.sync", 10).await.unwrap();
        let held = page.keys.iter().any(|k| k.held_until_ms.is_some());
        let running = page.keys.iter().any(|k| k.running == 1);
        (held && running).then_some(())
    })
    .await;

    let run = postpone(&url, ns, &["keys", "cli.sync"]);
    let text = &run.expect(0).stdout;
    println!("{text}");
    // acme: one running (its max), two queued, not held; globex: two queued, held for an hour; both
    // under the worker's limit per key.
    assert_eq!(
        row(text, "acme"),
        ["acme", "2", "1", "max", "1", "running", "-"],
        "{run:#?}"
    );
    let globex = row(text, "globex");
    assert_eq!(
        globex[..7],
        ["globex", "2", "0", "max", "1", "running", "in"],
        "{run:#?}"
    );
    assert!(
        globex[7..].join(" ").starts_with("59m") || globex[7..].join(" ") == "1h",
        "{run:#?}"
    );
    assert!(
        text.ends_with("2 keys with a job queued\n"),
        "acme, at its max, is counted with globex: {run:#?}"
    );
    let absolute = postpone(&url, ns, &["keys", "cli.sync", "--absolute"]);
    let globex = row(&absolute.expect(0).stdout, "globex");
    assert!(
        globex.len() == 9 && globex[6].starts_with("20") && globex[8] == "UTC",
        "2026-11-25 21:43:36 UTC: {absolute:#?}"
    );

    let doc = postpone(&url, ns, &["keys", "cli.sync", "--json"])
        .expect(0)
        .json();
    assert_eq!(doc["running_counted"], true, "{doc:#}");
    assert_eq!(
        doc["limit"],
        json!({"max_running": 1, "rate": null}),
        "{doc:#}"
    );
    let by_key = |k: &str| -> &Value {
        doc["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["key"] == k)
            .unwrap_or_else(|| panic!("no key {k}: {doc:#}"))
    };
    let acme = by_key("acme");
    assert_eq!((&acme["queued"], &acme["running"]), (&json!(2), &json!(1)));
    assert!(acme["held_until"].is_null(), "{doc:#}");
    let globex = by_key("globex");
    assert_eq!(
        (&globex["queued"], &globex["running"]),
        (&json!(2), &json!(0))
    );
    let held: chrono::DateTime<chrono::Utc> = globex["held_until"]
        .as_str()
        .unwrap_or_else(|| panic!("a time: {doc:#}"))
        .parse()
        .unwrap();
    let now = chrono::DateTime::from_timestamp_millis(ops.now_ms().await.unwrap()).unwrap();
    let left = held - now;
    assert!(
        left > chrono::TimeDelta::minutes(58) && left <= chrono::TimeDelta::hours(1),
        "held for about an hour: {left} {doc:#}"
    );

    // acme gets limits of its own: 3 at once. It was waiting at its max (1): its two queued jobs
    // start at once, beside the first, while globex stays under the worker's limit.
    let run = postpone(
        &url,
        ns,
        &[
            "key-limits",
            "set",
            "cli.sync",
            "acme",
            "--max-running",
            "3",
        ],
    );
    assert!(
        run.expect(0)
            .stdout
            .starts_with("key \"acme\" of topic cli.sync now runs under max 3 running of its own"),
        "{run:#?}"
    );
    assert_eq!(
        row(&run.stdout, "acme"),
        ["acme", "max", "3", "running"],
        "{run:#?}"
    );
    let topic = client.topic::<Sync>();
    support::wait::eventually("acme's three jobs running", || async {
        (topic.counts().await.unwrap().active == 3).then_some(())
    })
    .await;
    let doc = postpone(&url, ns, &["key-limits", "ls", "cli.sync", "--json"])
        .expect(0)
        .json();
    assert_eq!(
        doc,
        json!({"topic": "cli.sync", "keys": [{"key": "acme", "limit": {"max_running": 3, "rate": null}}]})
    );
    // globex gets a rate of its own: `keys` says it is its own.
    let run = postpone(
        &url,
        ns,
        &[
            "key-limits",
            "set",
            "cli.sync",
            "globex",
            "--rate",
            "600/1m",
        ],
    );
    assert_eq!(
        row(&run.expect(0).stdout, "globex"),
        ["globex", "600/60s"],
        "{run:#?}"
    );
    let run = postpone(&url, ns, &["keys", "cli.sync"]);
    let text = &run.expect(0).stdout;
    assert_eq!(
        row(text, "globex")[..5],
        ["globex", "2", "0", "600/60s", "(own)"],
        "{run:#?}"
    );
    let doc = postpone(&url, ns, &["keys", "cli.sync", "--json"])
        .expect(0)
        .json();
    let globex = doc["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["key"] == "globex")
        .unwrap();
    assert_eq!(
        globex["own_limit"],
        json!({"max_running": null, "rate": {"jobs": 600, "per_ms": 60000}}),
        "{doc:#}"
    );
    // Back to the topic's limits.
    postpone(&url, ns, &["key-limits", "clear", "cli.sync", "acme"]).expect(0);
    let run = postpone(&url, ns, &["key-limits", "clear", "cli.sync", "globex"]);
    assert!(
        run.expect(0)
            .stdout
            .ends_with("no key of topic cli.sync has limits of its own\n"),
        "{run:#?}"
    );
    assert!(ops.key_limits("cli.sync").await.unwrap().is_empty());
    // Bad input: a rate that is none, a key no job could have, a max of 0, an unknown topic.
    for args in [
        &["key-limits", "set", "cli.sync", "acme", "--rate", "10"][..],
        &["key-limits", "set", "cli.sync", "acme", "--rate", "0/1s"],
        &[
            "key-limits",
            "set",
            "cli.sync",
            "acme",
            "--max-running",
            "0",
        ],
    ] {
        let run = postpone(&url, ns, args);
        assert!(run.expect(2).stderr.contains("--"), "{run:#?}");
    }
    let run = postpone(&url, ns, &["key-limits", "set", "cli.sync", ""]);
    assert!(run.expect(2).stderr.contains("key"), "{run:#?}");
    postpone(&url, ns, &["key-limits", "ls", "no.such.topic"]).expect(3);

    release.add_permits(10);
    stop.shutdown();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_shows_its_key_for_fairness_in_text_and_json() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "jobkey";
    let client = client(&server, ns).await;
    let keyed = client
        .enqueue(Notify { user: 1 })
        .key("acme corp")
        .await
        .unwrap();
    let plain = client.enqueue(Notify { user: 2 }).await.unwrap();

    let run = postpone(&url, ns, &["job", "cli.notify", &keyed.id]);
    run.expect(0);
    println!("{}", run.stdout);
    assert!(run.stdout.contains("\n  key       acme corp\n"), "{run:#?}");
    let json = postpone(&url, ns, &["job", "cli.notify", &keyed.id, "--json"])
        .expect(0)
        .json();
    assert_eq!(json["key"], "acme corp", "{json}");

    let run = postpone(&url, ns, &["job", "cli.notify", &plain.id]);
    run.expect(0);
    assert!(!run.stdout.contains("\n  key "), "{run:#?}");
    let json = postpone(&url, ns, &["job", "cli.notify", &plain.id, "--json"])
        .expect(0)
        .json();
    assert_eq!(json["key"], Value::Null, "{json}");

    // The listing: a KEY column once a job of the page has a key, `-` for one without.
    let run = postpone(&url, ns, &["jobs", "cli.notify"]);
    let text = &run.expect(0).stdout;
    println!("{text}");
    assert!(text.starts_with("ID          KEY"), "{text}");
    assert_eq!(row(text, &keyed.id)[1..3], ["acme", "corp"], "{text}");
    assert_eq!(row(text, &plain.id)[1], "-", "{text}");
    let json = postpone(&url, ns, &["jobs", "cli.notify", "--json"])
        .expect(0)
        .json();
    let keys: Vec<&Value> = json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["key"])
        .collect();
    assert!(keys.contains(&&json!("acme corp")), "{json}");
    assert!(keys.contains(&&Value::Null), "{json}");
}
