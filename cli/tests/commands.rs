//! Every command of the `postpone` binary against a redis-server of the test's own, as a user runs it
//! (tables) and as a script does (`--json`), with its exit code.

mod support;

use serde_json::Value;
use support::{client, postpone, seed, RedisServer};

/// The entry of `array` whose `key` is `value`.
fn find<'a>(array: &'a Value, key: &str, value: &str) -> &'a Value {
    array
        .as_array()
        .expect("an array")
        .iter()
        .find(|v| v[key] == value)
        .unwrap_or_else(|| panic!("no {key} = {value:?} in {array:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_stats_and_workers() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "overview";
    let client = client(&server, ns).await;
    seed(
        &client,
        3,
        &[("mail:1", "smtp timeout"), ("mail:2", "bad address")],
    )
    .await;

    let run = postpone(&url, ns, &["topics"]);
    run.expect(0);
    assert!(run.stdout.contains("TOPIC"), "{run:#?}");
    let orders = run
        .stdout
        .lines()
        .find(|l| l.starts_with("cli.orders"))
        .expect("a row");
    assert_eq!(
        orders.split_whitespace().collect::<Vec<_>>(),
        ["cli.orders", "1", "3", "0", "0", "0", "0", "0", "no"]
    );
    let json = postpone(&url, ns, &["topics", "--json"]).expect(0).json();
    let orders = find(&json["topics"], "name", "cli.orders");
    assert_eq!(orders["partitions"], 1);
    assert_eq!(orders["counts"]["scheduled"], 3);
    assert_eq!(orders["counts"]["paused"], false);
    assert_eq!(
        find(&json["topics"], "name", "cli.mail")["counts"]["dead"],
        2
    );

    let run = postpone(&url, ns, &["stats"]);
    run.expect(0);
    assert!(run.stdout.contains("namespace overview"), "{run:#?}");
    assert!(run.stdout.contains("ENQUEUED/MIN"), "{run:#?}");
    let mail = run
        .stdout
        .lines()
        .find(|l| l.starts_with("cli.mail"))
        .expect("a row");
    assert_eq!(
        &mail.split_whitespace().collect::<Vec<_>>()[..6],
        ["cli.mail", "active", "0", "0", "0", "2"]
    );
    let json = postpone(&url, ns, &["stats", "--json", "--minutes", "2"])
        .expect(0)
        .json();
    assert_eq!(json["minutes"], 2);
    assert!(json["now"].as_str().unwrap().ends_with('Z'), "{json:#}");
    let mail = find(&json["topics"], "name", "cli.mail");
    assert_eq!(
        mail["rates"]["enqueued"], 1.0,
        "2 enqueued over 2 minutes: {json:#}"
    );
    assert_eq!(mail["rates"]["dead"], 1.0, "{json:#}");
    assert_eq!(mail["counts"]["dead"], 2);
    assert_eq!(mail["paused"], false);

    let run = postpone(&url, ns, &["workers"]);
    run.expect(0);
    assert!(run.stdout.contains("no live workers"), "{run:#?}");
    assert_eq!(
        postpone(&url, ns, &["workers", "--json"]).expect(0).json()["workers"],
        serde_json::json!([])
    );

    // A live worker appears with what it serves.
    let worker = postpone::Worker::builder(&client)
        .handle(|_: support::CloseOrder, _: postpone::JobContext| async {
            Ok::<(), postpone::JobError>(())
        })
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let task = tokio::spawn(worker.run());
    let json = support::wait::eventually("the worker to register", || async {
        let json = postpone(&url, ns, &["workers", "--json"]).expect(0).json();
        (!json["workers"].as_array().unwrap().is_empty()).then_some(json)
    })
    .await;
    let w = &json["workers"][0];
    assert_eq!(w["pid"], std::process::id());
    assert_eq!(w["topics"][0]["name"], "cli.orders");
    assert!(
        w["last_beat"].is_string() && w["started_at"].is_string(),
        "{json:#}"
    );
    let run = postpone(&url, ns, &["workers"]);
    run.expect(0);
    assert!(
        run.stdout.contains("cli.orders") && run.stdout.contains("0 of 10"),
        "{run:#?}"
    );
    stop.shutdown();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_pages_and_one_job() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "listing";
    let client = client(&server, ns).await;
    seed(&client, 3, &[("mail:1", "smtp timeout")]).await;

    let run = postpone(&url, ns, &["jobs", "cli.orders"]);
    run.expect(0);
    for id in ["order:1", "order:2", "order:3"] {
        assert!(run.stdout.contains(id), "{run:#?}");
    }
    assert!(
        run.stdout.contains("in 59m"),
        "relative due times: {run:#?}"
    );
    let run = postpone(&url, ns, &["jobs", "cli.orders", "--absolute"]);
    assert!(run.expect(0).stdout.contains(" UTC"), "{run:#?}");

    let json = postpone(&url, ns, &["jobs", "cli.orders", "--json"])
        .expect(0)
        .json();
    let jobs = json["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    assert_eq!(jobs[0]["id"], "order:1");
    assert_eq!(jobs[0]["state"], "scheduled");
    assert_eq!(jobs[0]["payload"]["order_id"], 1);
    assert!(jobs[0]["at"].is_string());
    assert_eq!(json["next"], Value::Null);

    // Pages: two, then the rest from the cursor.
    let first = postpone(&url, ns, &["jobs", "cli.orders", "--limit", "2", "--json"])
        .expect(0)
        .json();
    assert_eq!(first["jobs"].as_array().unwrap().len(), 2);
    let cursor = first["next"].as_str().expect("a next cursor").to_owned();
    let run = postpone(&url, ns, &["jobs", "cli.orders", "--limit", "2"]);
    assert!(
        run.expect(0).stdout.contains(&format!("--cursor {cursor}")),
        "{run:#?}"
    );
    let rest = postpone(
        &url,
        ns,
        &[
            "jobs",
            "cli.orders",
            "--limit",
            "2",
            "--cursor",
            &cursor,
            "--json",
        ],
    )
    .expect(0)
    .json();
    assert_eq!(rest["jobs"][0]["id"], "order:3");
    assert_eq!(rest["next"], Value::Null);

    let newest = postpone(
        &url,
        ns,
        &["jobs", "cli.orders", "--newest-first", "--json"],
    )
    .expect(0)
    .json();
    assert_eq!(newest["jobs"][0]["id"], "order:3");
    let found = postpone(
        &url,
        ns,
        &["jobs", "cli.orders", "--id-prefix", "order:2", "--json"],
    )
    .expect(0)
    .json();
    let ids: Vec<&str> = found["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["order:2"]);

    let dead = postpone(&url, ns, &["jobs", "cli.mail", "--state", "dead", "--json"])
        .expect(0)
        .json();
    assert_eq!(dead["jobs"][0]["id"], "mail:1");
    assert!(
        dead["jobs"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("smtp timeout"),
        "{dead:#}"
    );
    let run = postpone(&url, ns, &["jobs", "cli.orders", "--state", "running"]);
    assert!(
        run.expect(0)
            .stdout
            .contains("no running jobs in topic cli.orders"),
        "{run:#?}"
    );

    // One job.
    let run = postpone(&url, ns, &["job", "cli.orders", "order:1"]);
    run.expect(0);
    for text in [
        "job order:1 of topic cli.orders",
        "scheduled, due in 59m",
        "why",
        "attempt",
        "\"order_id\": 1",
    ] {
        assert!(run.stdout.contains(text), "{text:?} in {run:#?}");
    }
    let job = postpone(&url, ns, &["job", "cli.orders", "order:1", "--json"])
        .expect(0)
        .json();
    assert_eq!(job["id"], "order:1");
    assert_eq!(job["topic"], "cli.orders");
    assert_eq!(job["state"], "scheduled");
    assert!(job["due_at"].is_string());
    assert!(
        job["why"].as_str().unwrap().starts_with("due in"),
        "{job:#}"
    );
    assert_eq!(job["payload"]["order_id"], 1);
    assert_eq!(job["errors"], serde_json::json!([]));
    let dead = postpone(&url, ns, &["job", "cli.mail", "mail:1", "--json"])
        .expect(0)
        .json();
    assert_eq!(dead["state"], "dead");
    assert!(
        dead["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("smtp timeout"),
        "{dead:#}"
    );

    // Not found: exit 3, and with --json an error document.
    let run = postpone(&url, ns, &["job", "cli.orders", "order:99"]);
    assert!(
        run.expect(3).stderr.contains("no job \"order:99\""),
        "{run:#?}"
    );
    let err = postpone(&url, ns, &["job", "cli.orders", "order:99", "--json"])
        .expect(3)
        .json();
    assert_eq!(err["error"]["kind"], "not_found");
    assert_eq!(err["error"]["exit_code"], 3);
    let run = postpone(&url, ns, &["jobs", "no.such.topic"]);
    assert!(
        run.expect(3).stderr.contains("no topic \"no.such.topic\""),
        "{run:#?}"
    );
    // A cursor that is not one: usage.
    postpone(&url, ns, &["jobs", "cli.orders", "--cursor", "garbage"]).expect(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reschedule_run_now_pause_resume() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "control";
    let client = client(&server, ns).await;
    seed(&client, 3, &[]).await;

    let run = postpone(
        &url,
        ns,
        &["reschedule", "cli.orders", "order:1", "--in", "10m"],
    );
    assert!(
        run.expect(0)
            .stdout
            .contains("job order:1 of topic cli.orders is due in"),
        "{run:#?}"
    );
    let job = postpone(&url, ns, &["job", "cli.orders", "order:1", "--json"])
        .expect(0)
        .json();
    assert!(
        job["why"].as_str().unwrap().starts_with("due in 9m"),
        "{job:#}"
    );
    let moved = postpone(
        &url,
        ns,
        &[
            "reschedule",
            "cli.orders",
            "order:1",
            "--at",
            "2030-01-01T00:00:00Z",
            "--json",
        ],
    )
    .expect(0)
    .json();
    assert_eq!(moved["due_at"], "2030-01-01T00:00:00Z");
    assert_eq!(moved["id"], "order:1");
    postpone(&url, ns, &["reschedule", "cli.orders", "order:1"]).expect(2);
    postpone(
        &url,
        ns,
        &[
            "reschedule",
            "cli.orders",
            "order:1",
            "--in",
            "10m",
            "--at",
            "2030-01-01T00:00:00Z",
        ],
    )
    .expect(2);
    postpone(
        &url,
        ns,
        &["reschedule", "cli.orders", "order:1", "--in", "10 minutes"],
    )
    .expect(2);
    postpone(
        &url,
        ns,
        &["reschedule", "cli.orders", "order:1", "--at", "tomorrow"],
    )
    .expect(2);
    postpone(
        &url,
        ns,
        &["reschedule", "cli.orders", "order:404", "--in", "1m"],
    )
    .expect(3);

    let now = postpone(&url, ns, &["run-now", "cli.orders", "order:2", "--json"])
        .expect(0)
        .json();
    assert!(now["due_at"].is_string());
    let run = postpone(&url, ns, &["run-now", "cli.orders", "order:3"]);
    assert!(run.expect(0).stdout.contains("is due now"), "{run:#?}");
    let page = postpone(&url, ns, &["jobs", "cli.orders", "--json"])
        .expect(0)
        .json();
    assert_eq!(
        page["jobs"][0]["id"], "order:2",
        "due now, first in line: {page:#}"
    );

    let cancelled = postpone(&url, ns, &["cancel", "cli.orders", "order:3", "--json"])
        .expect(0)
        .json();
    assert_eq!(cancelled["status"], "removed");
    let run = postpone(&url, ns, &["cancel", "cli.orders", "order:2"]);
    assert!(
        run.expect(0).stdout.contains("cancelled job order:2"),
        "{run:#?}"
    );
    postpone(&url, ns, &["cancel", "cli.orders", "order:3"]).expect(3);

    let paused = postpone(&url, ns, &["pause", "cli.orders", "--json"])
        .expect(0)
        .json();
    assert_eq!(
        paused,
        serde_json::json!({"topic": "cli.orders", "paused": true})
    );
    let topics = postpone(&url, ns, &["topics", "--json"]).expect(0).json();
    assert_eq!(
        find(&topics["topics"], "name", "cli.orders")["counts"]["paused"],
        true
    );
    let job = postpone(&url, ns, &["job", "cli.orders", "order:1", "--json"])
        .expect(0)
        .json();
    assert!(
        job["why"].as_str().unwrap().contains("is paused"),
        "{job:#}"
    );
    assert_eq!(job["paused"], true);
    let run = postpone(&url, ns, &["stats"]);
    assert!(run.expect(0).stdout.contains("paused"), "{run:#?}");
    let run = postpone(&url, ns, &["resume", "cli.orders"]);
    assert!(
        run.expect(0).stdout.contains("resumed topic cli.orders"),
        "{run:#?}"
    );
    let topics = postpone(&url, ns, &["topics", "--json"]).expect(0).json();
    assert_eq!(
        find(&topics["topics"], "name", "cli.orders")["counts"]["paused"],
        false
    );
    postpone(&url, ns, &["pause", "no.such.topic"]).expect(3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_list_show_requeue_purge() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "dead";
    let client = client(&server, ns).await;
    seed(
        &client,
        0,
        &[
            ("mail:1", "smtp timeout"),
            ("mail:2", "bad address"),
            ("mail:3", "smtp timeout"),
        ],
    )
    .await;

    let run = postpone(&url, ns, &["dead", "ls", "cli.mail"]);
    run.expect(0);
    assert!(
        run.stdout.contains("REASON") && run.stdout.contains("smtp timeout"),
        "{run:#?}"
    );
    let listed = postpone(&url, ns, &["dead", "ls", "cli.mail", "--json"])
        .expect(0)
        .json();
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 3);
    assert_eq!(listed["jobs"][0]["state"], "dead");
    assert!(listed["jobs"][0]["death"].is_u64(), "{listed:#}");

    let run = postpone(&url, ns, &["dead", "show", "cli.mail", "mail:2"]);
    run.expect(0);
    assert!(
        run.stdout.contains("dead since") && run.stdout.contains("bad address"),
        "{run:#?}"
    );
    let shown = postpone(&url, ns, &["dead", "show", "cli.mail", "mail:2", "--json"])
        .expect(0)
        .json();
    assert_eq!(shown["id"], "mail:2");
    assert_eq!(shown["deaths"].as_array().unwrap().len(), 1);
    assert_eq!(shown["job"]["state"], "dead");
    assert!(
        shown["job"]["reason"]
            .as_str()
            .unwrap()
            .contains("bad address"),
        "{shown:#}"
    );
    postpone(&url, ns, &["dead", "show", "cli.mail", "mail:9"]).expect(3);

    // One by id.
    let done = postpone(
        &url,
        ns,
        &["dead", "requeue", "cli.mail", "mail:2", "--json"],
    )
    .expect(0)
    .json();
    assert_eq!(
        (done["action"].as_str(), done["done"].as_u64()),
        (Some("requeue"), Some(1))
    );
    let job = postpone(&url, ns, &["job", "cli.mail", "mail:2", "--json"])
        .expect(0)
        .json();
    assert_eq!(job["state"], "scheduled", "requeued: {job:#}");
    postpone(&url, ns, &["dead", "requeue", "cli.mail", "mail:2"]).expect(3);

    // In bulk: refused without --yes when nobody can be asked, then by reason.
    let run = postpone(
        &url,
        ns,
        &["dead", "requeue", "cli.mail", "--all", "--reason", "smtp"],
    );
    assert!(run.expect(2).stderr.contains("--yes"), "{run:#?}");
    assert_eq!(run.stdout, "", "nothing done, nothing printed");
    assert_eq!(
        postpone(&url, ns, &["dead", "ls", "cli.mail", "--json"]).json()["jobs"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let done = postpone(
        &url,
        ns,
        &[
            "dead", "requeue", "cli.mail", "--all", "--reason", "smtp", "--yes", "--json",
        ],
    )
    .expect(0)
    .json();
    assert_eq!(done["matched"], 2);
    assert_eq!(done["done"], 2);
    assert_eq!(done["reason"], "smtp");
    let run = postpone(&url, ns, &["dead", "ls", "cli.mail"]);
    assert!(
        run.expect(0)
            .stdout
            .contains("no dead jobs in topic cli.mail"),
        "{run:#?}"
    );

    // Usage: an id and --all, or --reason without --all.
    postpone(&url, ns, &["dead", "purge", "cli.mail", "mail:1", "--all"]).expect(2);
    postpone(
        &url,
        ns,
        &["dead", "purge", "cli.mail", "mail:1", "--reason", "x"],
    )
    .expect(2);
    postpone(&url, ns, &["dead", "purge", "cli.mail"]).expect(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_purged_one_and_all() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "purge";
    let client = client(&server, ns).await;
    seed(&client, 0, &[("a", "boom"), ("b", "boom"), ("c", "boom")]).await;

    let run = postpone(&url, ns, &["dead", "purge", "cli.mail", "a"]);
    assert!(
        run.expect(0)
            .stdout
            .contains("purged dead letter a of topic cli.mail"),
        "{run:#?}"
    );
    postpone(&url, ns, &["dead", "purge", "cli.mail", "a"]).expect(3);
    let run = postpone(&url, ns, &["dead", "purge", "cli.mail", "--all"]);
    assert!(run.expect(2).stderr.contains("pass --yes"), "{run:#?}");
    let run = postpone(&url, ns, &["dead", "purge", "cli.mail", "--all", "--yes"]);
    assert!(
        run.expect(0)
            .stdout
            .contains("purged 2 dead letters of topic cli.mail"),
        "{run:#?}"
    );
    let topics = postpone(&url, ns, &["topics", "--json"]).expect(0).json();
    assert_eq!(
        find(&topics["topics"], "name", "cli.mail")["counts"]["dead"],
        0
    );
    let done = postpone(
        &url,
        ns,
        &["dead", "purge", "cli.mail", "--all", "--yes", "--json"],
    )
    .expect(0)
    .json();
    assert_eq!(
        (done["matched"].as_u64(), done["done"].as_u64()),
        (Some(0), Some(0))
    );
    postpone(
        &url,
        ns,
        &["dead", "purge", "no.such.topic", "--all", "--yes"],
    )
    .expect(3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_watch_redraws_until_stopped() {
    use std::io::{BufRead, BufReader};
    let server = RedisServer::start();
    let client = client(&server, "watch").await;
    seed(&client, 1, &[]).await;
    let mut cmd = support::command();
    cmd.args(["--redis", &server.url(), "--namespace", "watch"])
        .args(["stats", "--watch", "--json", "--interval", "50ms"])
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..3 {
        let line = lines.next().expect("a line per refresh").unwrap();
        let doc: Value = serde_json::from_str(&line).expect("one JSON document per line");
        assert_eq!(doc["topics"][0]["name"], "cli.orders");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
