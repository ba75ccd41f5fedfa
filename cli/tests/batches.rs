//! `batches` and `batch ID`, against a redis-server of the test's own, with batches made through the
//! store and their members ended by claims and finishes.

mod support;

use postpone::store::redis::RedisStore;
use postpone::store::CallbackKind;
use postpone::EnqueueItem;
use support::batches::{create, end, End};
use support::{client, command, postpone, run, CloseOrder, RedisServer};

const INVOICES: &str = "cli.invoices";
const BILLING: &str = "cli.billing";

/// Two batches: `billing:2026-11` (closed, three members: one succeeds, one dies, one is cancelled;
/// so it completes, its complete and death callbacks fire, its success callback does not) and
/// `import:7` (open, one member pending).
async fn seed(store: &RedisStore) {
    create(
        store,
        "billing:2026-11",
        "November billing run",
        &[
            (INVOICES, "inv:1"),
            (INVOICES, "inv:2"),
            (INVOICES, "inv:3"),
        ],
        &[
            (CallbackKind::Success, BILLING, "billing-done"),
            (CallbackKind::Complete, BILLING, "billing-report"),
            (CallbackKind::Death, BILLING, "billing-alert"),
        ],
        true,
    )
    .await;
    end(
        store,
        INVOICES,
        &[
            ("inv:1", End::Succeed),
            ("inv:2", End::Die("card declined")),
            ("inv:3", End::Cancel),
        ],
    )
    .await;
    create(
        store,
        "import:7",
        "",
        &[("cli.import", "row:1")],
        &[],
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_lists_batches_newest_first_with_counts_and_callbacks() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "batches";
    let store = RedisStore::connect(&url, ns).await.unwrap();
    let empty = postpone(&url, ns, &["batches"]);
    assert!(empty.expect(0).stdout.contains("no batches"), "{empty:#?}");
    seed(&store).await;

    let run = postpone(&url, ns, &["batches"]);
    let text = &run.expect(0).stdout;
    println!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("ID "), "{run:#?}");
    for header in [
        "DESCRIPTION",
        "CREATED",
        "TOTAL",
        "SUCCEEDED",
        "DEAD",
        "CANCELLED",
        "PENDING",
        "STATE",
        "FIRED",
    ] {
        assert!(lines[0].contains(header), "{header}: {run:#?}");
    }
    // Newest first.
    assert!(lines[1].starts_with("import:7 "), "{run:#?}");
    assert!(lines[1].contains("open"), "{run:#?}");
    let billing = lines[2];
    assert!(billing.starts_with("billing:2026-11 "), "{run:#?}");
    for cell in ["November billing run", "completed", "complete,death"] {
        assert!(billing.contains(cell), "{cell:?} missing: {run:#?}");
    }
    let numbers: Vec<&str> = billing
        .split_whitespace()
        .filter(|w| w.parse::<u64>().is_ok())
        .collect();
    assert_eq!(numbers, ["3", "1", "1", "1", "0"], "{run:#?}");

    let doc = postpone(&url, ns, &["batches", "--json"]).expect(0).json();
    let listed = doc["batches"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{doc:#}");
    assert!(doc["next"].is_null(), "{doc:#}");
    let b = &listed[1];
    assert_eq!(b["id"], "billing:2026-11");
    assert_eq!(b["description"], "November billing run");
    assert_eq!(
        (
            &b["total"],
            &b["succeeded"],
            &b["dead"],
            &b["cancelled"],
            &b["pending"]
        ),
        (&3.into(), &1.into(), &1.into(), &1.into(), &0.into()),
        "{doc:#}"
    );
    assert_eq!(b["closed"], true);
    assert!(b["completed_at"].is_string(), "{doc:#}");
    assert!(b["created_at"].is_string(), "{doc:#}");
    assert_eq!(
        b["callbacks"],
        serde_json::json!([
            {"kind": "success", "fired": false},
            {"kind": "complete", "fired": true},
            {"kind": "death", "fired": true},
        ])
    );
    assert_eq!(listed[0]["closed"], false);
    assert!(listed[0]["completed_at"].is_null(), "{doc:#}");

    // Paged by offset: the first page says where the next starts.
    let first = postpone(&url, ns, &["batches", "--limit", "1"]);
    let text = &first.expect(0).stdout;
    assert!(text.contains("import:7"), "{first:#?}");
    assert!(!text.contains("billing:2026-11"), "{first:#?}");
    assert!(text.contains("--offset 1"), "{first:#?}");
    let doc = postpone(
        &url,
        ns,
        &["batches", "--limit", "1", "--offset", "1", "--json"],
    )
    .expect(0)
    .json();
    assert_eq!(doc["batches"][0]["id"], "billing:2026-11", "{doc:#}");
    assert!(doc["next"].is_null(), "{doc:#}");
    let past = postpone(&url, ns, &["batches", "--offset", "5"]);
    assert!(
        past.expect(0).stdout.contains("no more batches"),
        "{past:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_shows_its_status_and_its_members_paged() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "batch";
    let store = RedisStore::connect(&url, ns).await.unwrap();
    seed(&store).await;

    let run = postpone(&url, ns, &["batch", "billing:2026-11"]);
    let text = &run.expect(0).stdout;
    println!("{text}");
    for line in [
        "batch billing:2026-11",
        "about      November billing run",
        "members    3 total: 1 succeeded, 1 dead, 1 cancelled, 0 pending",
        "callbacks  success (not fired), complete (fired), death (fired)",
    ] {
        assert!(text.contains(line), "{line:?} missing: {run:#?}");
    }
    assert!(text.contains("state      completed"), "{run:#?}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("TOPIC"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            [INVOICES, "inv:1", "succeeded"],
            [INVOICES, "inv:2", "dead"],
            [INVOICES, "inv:3", "cancelled"],
        ],
        "{run:#?}"
    );

    // A page of members, and the next.
    let first = postpone(&url, ns, &["batch", "billing:2026-11", "--limit", "2"]);
    let text = &first.expect(0).stdout;
    assert!(
        text.contains("inv:2") && !text.contains("inv:3"),
        "{first:#?}"
    );
    assert!(text.contains("--offset 2"), "{first:#?}");
    let doc = postpone(
        &url,
        ns,
        &[
            "batch",
            "billing:2026-11",
            "--limit",
            "2",
            "--offset",
            "2",
            "--json",
        ],
    )
    .expect(0)
    .json();
    assert_eq!(doc["batch"]["id"], "billing:2026-11");
    assert_eq!(doc["batch"]["pending"], 0);
    assert_eq!(
        doc["members"],
        serde_json::json!([
            {"topic": INVOICES, "partition": 0, "id": "inv:3", "state": "cancelled"},
        ])
    );
    assert!(doc["next"].is_null(), "{doc:#}");

    let open = postpone(&url, ns, &["batch", "import:7"]);
    let text = &open.expect(0).stdout;
    assert!(text.contains("state      open"), "{open:#?}");
    assert!(text.contains("callbacks  none"), "{open:#?}");
    assert!(
        text.contains("row:1") && text.contains("pending"),
        "{open:#?}"
    );

    // Unknown: exit 3; an id that cannot name a batch: exit 2, saying why.
    let missing = postpone(&url, ns, &["batch", "billing:2026-12"]);
    assert!(
        missing.expect(3).stderr.contains("postpone batches"),
        "{missing:#?}"
    );
    let doc = postpone(&url, ns, &["batch", "billing:2026-12", "--json"])
        .expect(3)
        .json();
    assert_eq!(doc["error"]["kind"], "not_found");
    let bad = postpone(&url, ns, &["batch", "billing run"]);
    assert!(
        bad.expect(2).stderr.contains("invalid batch id"),
        "{bad:#?}"
    );
}

#[test]
fn help_names_batches_and_batch() {
    let mut cmd = command();
    cmd.arg("--help");
    let r = run(cmd);
    let text = &r.expect(0).stdout;
    assert!(text.contains("\n  batches "), "{r:#?}");
    assert!(text.contains("\n  batch "), "{r:#?}");
    let mut cmd = command();
    cmd.args(["batch", "--help"]);
    let r = run(cmd);
    let text = &r.expect(0).stdout;
    assert!(
        text.contains("--limit") && text.contains("--offset"),
        "{r:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_of_a_batch_names_its_batch() {
    let server = RedisServer::start();
    let url = server.url();
    let ns = "batch-job";
    // Through the client, which marks each member and callback with its batch (`postpone.batch`).
    let client = client(&server, ns).await;
    client
        .batch()
        .id("orders:7")
        .add(EnqueueItem::new(CloseOrder { order_id: 1 }).id("order:1"))
        .on_complete(EnqueueItem::new(CloseOrder { order_id: 0 }).id("orders-closed"))
        .enqueue()
        .await
        .unwrap();
    client
        .enqueue(CloseOrder { order_id: 2 })
        .id("order:2")
        .await
        .unwrap();

    let run = postpone(&url, ns, &["job", "cli.orders", "order:1"]);
    assert!(
        run.expect(0).stdout.contains("\n  batch     orders:7\n"),
        "{run:#?}"
    );
    let doc = postpone(&url, ns, &["job", "cli.orders", "order:1", "--json"])
        .expect(0)
        .json();
    assert!(
        run.stdout.contains("\n  meta postpone.batch orders:7\n"),
        "{run:#?}"
    );
    assert_eq!(doc["meta"]["postpone.batch"], "orders:7", "{doc:#}");
    // A job of no batch has no such line.
    let run = postpone(&url, ns, &["job", "cli.orders", "order:2"]);
    assert!(!run.expect(0).stdout.contains("  batch "), "{run:#?}");
}
