//! The commands that steer the queue (`cancel`, `reschedule`, `run-now`, `pause`, `resume`, `dead ...`),
//! as a user runs them and as a script does (`--json`), with their exit codes, against a redis-server of
//! the test's own.

mod support;

use support::{client, find, postpone, seed, RedisServer};

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
    let run = postpone(&url, ns, &["pause", "cli.orders"]);
    assert!(
        run.expect(0)
            .stdout
            .contains("paused topic cli.orders: no worker claims"),
        "{run:#?}"
    );
    let resumed = postpone(&url, ns, &["resume", "cli.orders", "--json"])
        .expect(0)
        .json();
    assert_eq!(resumed["paused"], false);
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
async fn a_running_job_shows_its_worker_and_is_cancelled() {
    use std::sync::Arc;
    use tokio::sync::Notify;

    let server = RedisServer::start();
    let url = server.url();
    let ns = "running";
    let client = client(&server, ns).await;
    let release = Arc::new(Notify::new());
    let gate = release.clone();
    let worker = postpone::Worker::builder(&client)
        .handle(move |_: support::Report, _: postpone::JobContext| {
            let gate = gate.clone();
            async move {
                gate.notified().await;
                Ok::<(), postpone::JobError>(())
            }
        })
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let task = tokio::spawn(worker.run());
    client
        .enqueue(support::Report {
            month: "2026-10".into(),
        })
        .id("report:2026-10")
        .await
        .unwrap();
    let page = support::wait::eventually("the report to run", || async {
        let page = postpone(
            &url,
            ns,
            &["jobs", "cli.report", "--state", "running", "--json"],
        )
        .expect(0)
        .json();
        (!page["jobs"].as_array().unwrap().is_empty()).then_some(page)
    })
    .await;
    let job = &page["jobs"][0];
    assert_eq!(job["id"], "report:2026-10");
    assert_eq!(job["state"], "running");
    let worker_id = job["worker"]
        .as_str()
        .expect("the worker holding it")
        .to_owned();
    let workers = postpone(&url, ns, &["workers", "--json"]).expect(0).json();
    assert_eq!(workers["workers"][0]["id"], worker_id.as_str());

    let run = postpone(&url, ns, &["jobs", "cli.report", "--state", "running"]);
    assert!(run.expect(0).stdout.contains(&worker_id), "{run:#?}");
    let run = postpone(&url, ns, &["job", "cli.report", "report:2026-10"]);
    run.expect(0);
    assert!(run.stdout.contains("running, lease ends in"), "{run:#?}");
    assert!(
        run.stdout
            .contains(&format!("leased to worker {worker_id}")),
        "{run:#?}"
    );
    let detail = postpone(&url, ns, &["job", "cli.report", "report:2026-10", "--json"])
        .expect(0)
        .json();
    assert_eq!(detail["state"], "running");
    assert!(detail["lease_until"].is_string(), "{detail:#}");
    assert_eq!(detail["worker"], worker_id.as_str());

    // A running job cannot be moved, and cancelling it stops its retries.
    let run = postpone(&url, ns, &["run-now", "cli.report", "report:2026-10"]);
    assert!(run.expect(1).stderr.contains("is running"), "{run:#?}");
    let cancelled = postpone(
        &url,
        ns,
        &["cancel", "cli.report", "report:2026-10", "--json"],
    )
    .expect(0)
    .json();
    assert_eq!(cancelled["status"], "will_not_retry");

    release.notify_waiters();
    stop.shutdown();
    task.await.unwrap().unwrap();
}
