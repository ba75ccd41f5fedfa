//! The commands that show the queue (`topics`, `stats`, `workers`, `jobs`, `job`), as a user runs them
//! (tables) and as a script does (`--json`), against a redis-server of the test's own.

mod support;

use serde_json::Value;
use support::{client, find, postpone, seed, RedisServer};

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
        [
            "cli.orders",
            "1",
            "3",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "no",
            "-"
        ],
        "no flow control on this topic"
    );
    let json = postpone(&url, ns, &["topics", "--json"]).expect(0).json();
    let orders = find(&json["topics"], "name", "cli.orders");
    assert_eq!(orders["partitions"], 1);
    assert_eq!(orders["counts"]["scheduled"], 3);
    assert_eq!(orders["counts"]["paused"], false);
    assert_eq!(
        orders["counts"]["flow"]["max_running"],
        serde_json::Value::Null
    );
    assert_eq!(orders["unreadable"], serde_json::json!([]));
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
        &mail.split_whitespace().collect::<Vec<_>>()[..7],
        ["cli.mail", "active", "0", "0", "0", "0", "2"]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_skip_an_invalid_name_in_the_registry() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "registry";
    seed(&client(&server, ns).await, 1, &[]).await;
    // Written by something other than postpone: not a valid topic name.
    server
        .cli(&["HSET", "postpone:{registry}:topics", "bad name!", "1"])
        .unwrap();
    let run = postpone(&url, ns, &["topics"]);
    run.expect(0);
    assert!(run.stdout.contains("cli.orders"), "{run:#?}");
    assert!(!run.stdout.contains("bad name!"), "{run:#?}");
    let json = postpone(&url, ns, &["topics", "--json"]).expect(0).json();
    assert_eq!(json["topics"].as_array().unwrap().len(), 1, "{json}");
    postpone(&url, ns, &["periodic", "ls"]).expect(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_shows_a_unique_jobs_key_and_window_and_a_debounce_key() {
    use std::time::Duration;

    use postpone::{Debounce, Unique, UniqueStates};

    let server = RedisServer::start();
    let url = server.url();
    let ns = "keyed";
    let client = client(&server, ns).await;
    let unique = client
        .enqueue(support::CloseOrder { order_id: 42 })
        .unique(Unique::new("order:42", Duration::from_secs(600)).states(UniqueStates::SCHEDULED))
        // The caller's own entry of that name: kept beside the key postpone shows.
        .meta("unique", "the caller's own")
        .await
        .unwrap();
    let debounced = client
        .enqueue(support::Report {
            month: "2026-11".into(),
        })
        .debounce(
            Debounce::new("report:2026-11", Duration::from_secs(3600))
                .max_wait(Duration::from_secs(7200)),
        )
        .await
        .unwrap();

    let run = postpone(&url, ns, &["job", "cli.orders", &unique.id]);
    run.expect(0);
    for text in [
        "\n  unique    order:42 for 10m (scheduled)\n",
        "\n  meta unique the caller's own\n",
        "\n  meta postpone.unique order:42 for 10m (scheduled)\n",
    ] {
        assert!(run.stdout.contains(text), "{text:?} in {run:#?}");
    }
    assert!(!run.stdout.contains("\n  debounce "), "{run:#?}");
    let json = postpone(&url, ns, &["job", "cli.orders", &unique.id, "--json"])
        .expect(0)
        .json();
    assert_eq!(
        json["meta"]["postpone.unique"],
        "order:42 for 10m (scheduled)"
    );
    assert_eq!(json["meta"]["unique"], "the caller's own");

    let run = postpone(&url, ns, &["job", "cli.report", &debounced.id]);
    run.expect(0);
    assert!(
        run.stdout
            .contains("\n  debounce  report:2026-11 quiet 1h max 2h\n"),
        "{run:#?}"
    );
    assert!(!run.stdout.contains("\n  unique "), "{run:#?}");
    let json = postpone(&url, ns, &["job", "cli.report", &debounced.id, "--json"])
        .expect(0)
        .json();
    assert_eq!(
        json["meta"]["postpone.debounce"],
        "report:2026-11 quiet 1h max 2h"
    );
}

/// A rendered invoice: the result of [`Render`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Pdf {
    url: String,
}

/// Kept for an hour when finished, with its result; `slow` reports progress, then waits.
#[derive(Debug, serde::Serialize, serde::Deserialize, postpone::Job)]
#[job(topic = "cli.render", output = Pdf, keep = "1h")]
struct Render {
    invoice: u64,
    slow: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_done_lists_kept_results_and_job_shows_result_and_progress() {
    use std::sync::Arc;
    use std::time::Duration;

    let server = RedisServer::start();
    let url = server.url();
    let ns = "done";
    let client = client(&server, ns).await;
    let release = Arc::new(tokio::sync::Notify::new());
    let gate = release.clone();
    let worker = postpone::Worker::builder(&client)
        .handle(move |job: Render, ctx: postpone::JobContext| {
            let gate = gate.clone();
            async move {
                if job.slow {
                    ctx.progress(40.0, "page 2 of 5 \u{1b}[31m");
                    gate.notified().await;
                }
                Ok(Pdf {
                    url: format!("https://files.example/{}.pdf", job.invoice),
                })
            }
        })
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let task = tokio::spawn(worker.run());
    let topic = client.topic::<Render>();
    // The worker records the retention before it claims: its first job is kept.
    let kept = "render:1".to_owned();
    let job = Render {
        invoice: 1,
        slow: false,
    };
    client.enqueue(job).id(&kept).await.unwrap();
    client
        .wait::<Render>(&kept, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(
        topic.job(&kept).await.unwrap().is_some(),
        "the first job is kept"
    );
    // One cancelled before it ran: kept too, newest.
    let later = Render {
        invoice: 0,
        slow: false,
    };
    let in_an_hour = Duration::from_secs(3600);
    client
        .enqueue(later)
        .id("render:cancelled")
        .after(in_an_hour)
        .await
        .unwrap();
    client.cancel::<Render>("render:cancelled").await.unwrap();

    let run = postpone(&url, ns, &["jobs", "cli.render", "--state", "done"]);
    run.expect(0);
    for text in [
        "FINISHED",
        "STATE",
        "RESULT",
        &kept,
        "succeeded",
        "files.example",
    ] {
        assert!(run.stdout.contains(text), "{text:?} in {run:#?}");
    }
    let cancelled = run
        .stdout
        .lines()
        .find(|l| l.starts_with("render:cancelled"))
        .expect("a row");
    assert!(cancelled.contains("cancelled"), "{run:#?}");
    let json = postpone(
        &url,
        ns,
        &[
            "jobs",
            "cli.render",
            "--state",
            "done",
            "--newest-first",
            "--json",
        ],
    )
    .expect(0)
    .json();
    let jobs = json["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{json:#}");
    assert_eq!(jobs[0]["id"], "render:cancelled");
    assert_eq!(jobs[0]["state"], "done");
    assert_eq!(jobs[0]["finished"], "cancelled");
    assert_eq!(jobs[0]["result"], Value::Null);
    assert_eq!(jobs[1]["id"], kept.as_str());
    assert_eq!(jobs[1]["finished"], "succeeded");
    let want = "https://files.example/1.pdf".to_owned();
    assert_eq!(jobs[1]["result"]["url"], want.as_str());
    // Paged by cursor like the other states.
    let first = postpone(
        &url,
        ns,
        &[
            "jobs",
            "cli.render",
            "--state",
            "done",
            "--limit",
            "1",
            "--json",
        ],
    )
    .expect(0)
    .json();
    assert_eq!(first["jobs"][0]["id"], kept.as_str());
    let cursor = first["next"].as_str().expect("a next page");
    let args = ["jobs", "cli.render", "--state", "done", "--limit", "1"];
    let rest = postpone(
        &url,
        ns,
        &[&args[..], &["--cursor", cursor, "--json"]].concat(),
    )
    .expect(0)
    .json();
    assert_eq!(rest["jobs"][0]["id"], "render:cancelled");
    let run = postpone(
        &url,
        ns,
        &[
            "jobs",
            "cli.render",
            "--state",
            "done",
            "--id-prefix",
            "render:",
        ],
    );
    assert!(run.expect(2).stderr.contains("whole id"), "{run:#?}");

    // One kept job: its result.
    let run = postpone(&url, ns, &["job", "cli.render", &kept]);
    run.expect(0);
    for text in [
        "succeeded, finished",
        "result",
        &format!("\"url\": \"{want}\""),
    ] {
        assert!(run.stdout.contains(text), "{text:?} in {run:#?}");
    }
    let job = postpone(&url, ns, &["job", "cli.render", &kept, "--json"])
        .expect(0)
        .json();
    assert_eq!(job["state"], "succeeded");
    assert_eq!(job["result"]["url"], want.as_str());
    let run = postpone(&url, ns, &["job", "cli.render", "render:cancelled"]);
    assert!(
        run.expect(0).stdout.contains("cancelled, cancelled"),
        "{run:#?}"
    );

    // A running job's progress (its message's control characters not printed).
    let slow = Render {
        invoice: 99,
        slow: true,
    };
    client.enqueue(slow).id("render:slow").await.unwrap();
    let job = support::wait::eventually("the progress to be recorded", || async {
        let job = postpone(&url, ns, &["job", "cli.render", "render:slow", "--json"])
            .expect(0)
            .json();
        job["progress"].is_object().then_some(job)
    })
    .await;
    assert_eq!(job["state"], "running");
    assert_eq!(job["progress"]["value"], 40.0);
    let run = postpone(&url, ns, &["job", "cli.render", "render:slow"]);
    run.expect(0);
    assert!(run.stdout.contains("40 page 2 of 5"), "{run:#?}");
    assert!(!run.stdout.contains('\u{1b}'), "{run:#?}");
    release.notify_one();
    client
        .wait::<Render>("render:slow", Duration::from_secs(10))
        .await
        .unwrap();
    stop.shutdown();
    task.await.unwrap().unwrap();
}
