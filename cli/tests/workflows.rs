//! Jobs that wait for jobs as the CLI shows them, against a redis-server of the test's own, with the
//! jobs made through the store: counted waiting in `topics` and `stats`, listed by `jobs --state
//! waiting`, and `job` naming the jobs one waits for and why it is not due.

mod support;

use postpone::store::redis::RedisStore;
use support::workflows::{parent, waiting};
use support::{find, postpone, RedisServer};

const RECEIPTS: &str = "cli.receipts";

/// `receipt:7` waits for a charge and a stock reservation (in partition 1 of its topic), `mail:7` for
/// the charge only; `receipt:6` is scheduled.
async fn seed(store: &RedisStore) {
    parent(store, "cli.charges", "charge:7").await;
    parent(store, "cli.stock#1", "stock:7").await;
    let both = [("cli.charges", "charge:7"), ("cli.stock#1", "stock:7")];
    waiting(store, RECEIPTS, "receipt:7", &both).await;
    waiting(store, RECEIPTS, "mail:7", &both[..1]).await;
    parent(store, RECEIPTS, "receipt:6").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_waiting_jobs_in_topics_stats_jobs_and_job() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "workflows";
    let store = RedisStore::connect(&url, ns).await.unwrap();
    seed(&store).await;

    let run = postpone(&url, ns, &["topics"]);
    let header = run.expect(0).stdout.lines().next().unwrap_or_default();
    assert!(header.contains("RUNNING  WAITING"), "{run:#?}");
    let row = run
        .stdout
        .lines()
        .find(|l| l.starts_with(RECEIPTS))
        .unwrap();
    assert_eq!(
        &row.split_whitespace().collect::<Vec<_>>()[..6],
        [RECEIPTS, "1", "1", "0", "0", "2"],
        "one scheduled, two waiting: {run:#?}"
    );
    let json = postpone(&url, ns, &["topics", "--json"]).expect(0).json();
    let counts = &find(&json["topics"], "name", RECEIPTS)["counts"];
    assert_eq!(
        (&counts["waiting"], &counts["scheduled"]),
        (&2.into(), &1.into())
    );
    let run = postpone(&url, ns, &["stats"]);
    let row = run
        .expect(0)
        .stdout
        .lines()
        .find(|l| l.starts_with(RECEIPTS))
        .unwrap();
    assert_eq!(
        &row.split_whitespace().collect::<Vec<_>>()[..6],
        [RECEIPTS, "active", "1", "0", "0", "2"],
        "{run:#?}"
    );

    // The waiting listing, by id, a page at a time; the scheduled one holds the other job only.
    let run = postpone(
        &url,
        ns,
        &["jobs", RECEIPTS, "--state", "waiting", "--limit", "1"],
    );
    let text = &run.expect(0).stdout;
    assert!(text.lines().next().unwrap().starts_with("ID "), "{run:#?}");
    assert!(
        text.contains("ENQUEUED") && !text.contains("DUE"),
        "{run:#?}"
    );
    assert!(
        text.contains("mail:7") && !text.contains("receipt:7"),
        "{run:#?}"
    );
    assert!(text.contains("postpone job cli.receipts ID"), "{run:#?}");
    let cursor = text
        .split("--cursor ")
        .nth(1)
        .expect("a next page")
        .trim()
        .to_owned();
    let args = [
        "jobs", RECEIPTS, "--state", "waiting", "--cursor", &cursor, "--json",
    ];
    let doc = postpone(&url, ns, &args).expect(0).json();
    let jobs = doc["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{doc:#}");
    assert_eq!(
        (&jobs[0]["id"], &jobs[0]["state"]),
        (&"receipt:7".into(), &"waiting".into())
    );
    let run = postpone(&url, ns, &["jobs", RECEIPTS]);
    let text = &run.expect(0).stdout;
    assert!(
        text.contains("receipt:6") && !text.contains("mail:7"),
        "{run:#?}"
    );
    let args = ["jobs", RECEIPTS, "--state", "waiting", "--id-prefix", "rec"];
    let run = postpone(&url, ns, &args);
    let text = &run.expect(0).stdout;
    assert!(
        text.contains("receipt:7") && !text.contains("receipt:6"),
        "{run:#?}"
    );

    // One job: its state, the jobs it waits for (by topic, with a partition), and the why line.
    let run = postpone(&url, ns, &["job", RECEIPTS, "receipt:7"]);
    let text = &run.expect(0).stdout;
    println!("{text}");
    for expected in [
        "waiting, for 2 other jobs to succeed",
        "waits for charge:7 of topic cli.charges",
        "stock:7 of topic cli.stock (partition 1)",
        "waiting for cli.charges/charge:7, cli.stock/stock:7: it becomes due once they all succeed",
    ] {
        assert!(text.contains(expected), "{expected:?} missing: {run:#?}");
    }
    let run = postpone(&url, ns, &["job", RECEIPTS, "mail:7"]);
    let text = &run.expect(0).stdout;
    assert!(
        text.contains("waiting, for 1 other job to succeed"),
        "{run:#?}"
    );
    assert!(text.contains("once that job succeeds"), "{run:#?}");
    let doc = postpone(&url, ns, &["job", RECEIPTS, "receipt:7", "--json"])
        .expect(0)
        .json();
    assert_eq!(doc["state"], "waiting", "{doc:#}");
    assert_eq!(
        doc["waiting_for"],
        serde_json::json!([["cli.charges", "charge:7"], ["cli.stock#1", "stock:7"]])
    );

    // It has no due time to move or bring forward; it can be cancelled.
    for args in [
        &["reschedule", RECEIPTS, "receipt:7", "--in", "10m", "--json"][..],
        &["run-now", RECEIPTS, "receipt:7", "--json"][..],
    ] {
        let run = postpone(&url, ns, args);
        let doc = run.expect(1).json();
        assert_eq!(doc["error"]["kind"], "job_waiting", "{run:#?}");
        assert!(run.stderr.contains("waits for other jobs"), "{run:#?}");
    }
    let doc = postpone(&url, ns, &["cancel", RECEIPTS, "mail:7", "--json"])
        .expect(0)
        .json();
    assert_eq!(doc["status"], "removed", "{doc:#}");
    let run = postpone(&url, ns, &["jobs", RECEIPTS, "--state", "waiting"]);
    assert!(!run.expect(0).stdout.contains("mail:7"), "{run:#?}");
}
