//! The outbox on a real PostgreSQL and a real redis-server: a job is queued exactly when its
//! transaction commits, bad input fails inside the transaction, cancel and reschedule commit with the
//! application's write, rows of one id keep their order, and a row that cannot be delivered is
//! reported and kept. Then what operators see: the relay's reports (kept, and flagged stale once no
//! relay reports), the commit notification that wakes a relay, and the outbox's gauges.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postpone::{Client, Job};
use postpone_postgres::{Error, Outbox, Relay};
use serde::{Deserialize, Serialize};
use sqlx::AssertSqlSafe;
use support::db::TestDb;
use support::redis_server::RedisServer;
use support::wait::{eventually, eventually_within};

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
    note: String,
}

fn close(order_id: u64) -> CloseOrder {
    CloseOrder {
        order_id,
        note: String::new(),
    }
}

/// A 2 KB job: over the 512-byte limit of the relays' clients in the tests below.
fn big() -> CloseOrder {
    CloseOrder {
        order_id: 1,
        note: "x".repeat(2000),
    }
}

async fn redis_client(server: &RedisServer, max_payload: Option<usize>) -> Client {
    let mut builder = Client::builder().namespace("shop");
    if let Some(limit) = max_payload {
        builder = builder.max_payload(limit);
    }
    builder
        .redis(&server.url())
        .await
        .expect("connecting to the test redis-server")
}

/// A client with the default payload limit, one whose limit is 512 bytes (lowered since the rows were
/// written: a relay's client), and the first's outbox, holding a `big()` job in an open transaction.
async fn two_limits(
    db: &TestDb,
    server: &RedisServer,
) -> (
    Client,
    Client,
    Outbox,
    sqlx::Transaction<'static, sqlx::Postgres>,
) {
    let writer = redis_client(server, None).await;
    let strict = redis_client(server, Some(512)).await;
    let outbox = Outbox::new(&writer).table(&db.table).unwrap();
    let mut tx = db.pool.begin().await.unwrap();
    outbox
        .enqueue(big())
        .id("big")
        .write(&mut tx)
        .await
        .unwrap();
    (writer, strict, outbox, tx)
}

/// When job `id` is due.
async fn due_at(client: &Client, id: &str) -> chrono::DateTime<chrono::Utc> {
    let job = client.topic::<CloseOrder>().job(id).await.unwrap();
    match job.map(|j| j.state) {
        Some(postpone::JobState::Scheduled { due_at }) => due_at,
        other => panic!("{id} is not scheduled: {other:?}"),
    }
}

/// The order id of job `id`, when it is in the queue.
async fn queued(client: &Client, id: &str) -> Option<u64> {
    let job = client.topic::<CloseOrder>().job(id).await.unwrap()?;
    Some(job.job::<CloseOrder>().unwrap().order_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_job_is_queued_when_its_transaction_commits_and_never_on_rollback() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = redis_client(&server, None).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let relay = Relay::new(&outbox, db.pool.clone());

    let mut tx = db.pool.begin().await.unwrap();
    let written = outbox
        .enqueue(close(1))
        .id("order:1")
        .after(Duration::from_secs(30 * 60))
        .write(&mut tx)
        .await
        .unwrap();
    assert_eq!(written.id, "order:1");
    assert_eq!(relay.deliver().await.unwrap().taken, 0, "not committed yet");
    assert_eq!(queued(&client, "order:1").await, None);
    tx.commit().await.unwrap();

    let before = chrono::Utc::now();
    assert_eq!(relay.deliver().await.unwrap().delivered, 1);
    let due = due_at(&client, "order:1").await;
    let left = due - before;
    assert!(
        left <= chrono::Duration::seconds(30 * 60 + 1) && left > chrono::Duration::minutes(29),
        "due 30 minutes after the enqueue, not {left}"
    );
    assert_eq!(db.rows().await, 0, "a delivered row is deleted");

    let mut tx = db.pool.begin().await.unwrap();
    outbox
        .enqueue(close(2))
        .id("order:2")
        .write(&mut tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(relay.deliver().await.unwrap().taken, 0);
    assert_eq!(
        queued(&client, "order:2").await,
        None,
        "rolled back: never queued"
    );
    assert_eq!(db.rows().await, 0);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_jobs_keep_their_keys_for_fairness_even_in_a_table_made_before_keys() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    // A table made before the key column: the migration adds it.
    let mut conn = db.pool.acquire().await.unwrap();
    let old = format!("ALTER TABLE {} DROP COLUMN fair_key", db.table);
    sqlx::query(AssertSqlSafe(old))
        .execute(&mut *conn)
        .await
        .unwrap();
    postpone_postgres::migrate(&mut conn, &db.table)
        .await
        .unwrap();
    drop(conn);

    let client = redis_client(&server, None).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let mut tx = db.pool.begin().await.unwrap();
    for (i, key) in ["acme", "acme", "acme", "globex"].into_iter().enumerate() {
        outbox
            .enqueue(close(i as u64))
            .key(key)
            .write(&mut tx)
            .await
            .unwrap();
    }
    outbox
        .enqueue(close(9))
        .id("no-key")
        .write(&mut tx)
        .await
        .unwrap();
    let bad = outbox.enqueue(close(10)).key("").write(&mut tx).await;
    assert!(
        matches!(bad, Err(Error::Job(postpone::Error::InvalidKey { .. }))),
        "{bad:?}"
    );
    tx.commit().await.unwrap();
    let relay = Relay::new(&outbox, db.pool.clone());
    assert_eq!(relay.deliver().await.unwrap().delivered, 5);

    let page = client.topic::<CloseOrder>().busiest_keys(10).await.unwrap();
    let queued: Vec<_> = page
        .keys
        .iter()
        .map(|k| (k.key.as_str(), k.queued))
        .collect();
    assert_eq!(queued, [("acme", 3), ("", 1), ("globex", 1)], "{page:?}");
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_refuses_bad_input_inside_the_transaction() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = redis_client(&server, Some(256)).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let mut tx = db.pool.begin().await.unwrap();

    let bad_id = outbox.enqueue(close(1)).id("bad\nid").write(&mut tx).await;
    assert!(
        matches!(bad_id, Err(Error::Job(postpone::Error::InvalidId { .. }))),
        "{bad_id:?}"
    );
    let big = CloseOrder {
        order_id: 2,
        note: "x".repeat(1000),
    };
    let too_large = outbox.enqueue(big).id("order:2").write(&mut tx).await;
    assert!(
        matches!(
            too_large,
            Err(Error::Job(postpone::Error::PayloadTooLarge { .. }))
        ),
        "{too_large:?}"
    );
    let bad_cancel = outbox.cancel::<CloseOrder>(&mut tx, "").await;
    assert!(matches!(
        bad_cancel,
        Err(Error::Job(postpone::Error::InvalidId { .. }))
    ));
    assert!(Outbox::new(&client)
        .table("Robert'); DROP TABLE x;--")
        .is_err());
    tx.commit().await.unwrap();
    assert_eq!(db.rows().await, 0, "nothing was written");
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_cancel_and_reschedule_commit_with_the_applications_write() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = redis_client(&server, None).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let relay = Relay::new(&outbox, db.pool.clone());
    let hour = Duration::from_secs(3600);
    let mut tx = db.pool.begin().await.unwrap();
    for id in [1, 2] {
        outbox
            .enqueue(close(id))
            .id(format!("order:{id}"))
            .after(hour / 2)
            .write(&mut tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    assert_eq!(relay.deliver().await.unwrap().delivered, 2);

    // "The order was paid": the cancel commits with the payment, or not at all.
    let mut tx = db.pool.begin().await.unwrap();
    outbox
        .cancel::<CloseOrder>(&mut tx, "order:1")
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    relay.deliver().await.unwrap();
    assert_eq!(
        queued(&client, "order:1").await,
        Some(1),
        "rolled back: still armed"
    );

    let mut tx = db.pool.begin().await.unwrap();
    outbox
        .cancel::<CloseOrder>(&mut tx, "order:1")
        .await
        .unwrap();
    outbox
        .reschedule::<CloseOrder>(&mut tx, "order:2", hour * 2)
        .await
        .unwrap();
    outbox
        .cancel::<CloseOrder>(&mut tx, "order:never")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let before = chrono::Utc::now();
    assert_eq!(
        relay.deliver().await.unwrap().delivered,
        3,
        "an unknown id has nothing to do"
    );
    assert_eq!(queued(&client, "order:1").await, None);
    assert_eq!(
        client
            .topic::<CloseOrder>()
            .counts()
            .await
            .unwrap()
            .cancelled,
        1
    );
    let due = due_at(&client, "order:2").await;
    let left = due - before;
    assert!(
        left <= chrono::Duration::seconds(7201) && left > chrono::Duration::minutes(119),
        "moved to 2 h from the reschedule, not {left}"
    );
    assert_eq!(db.rows().await, 0);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_delivers_the_rows_of_one_id_in_order() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = redis_client(&server, None).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let hour = Duration::from_secs(3600);
    // One transaction: arm, disarm and re-arm x (with another payload), among other ids' rows.
    let mut tx = db.pool.begin().await.unwrap();
    outbox
        .enqueue(close(1))
        .id("x")
        .after(hour)
        .write(&mut tx)
        .await
        .unwrap();
    for other in 100..150 {
        outbox
            .enqueue(close(other))
            .id(format!("o:{other}"))
            .after(hour)
            .write(&mut tx)
            .await
            .unwrap();
    }
    outbox.cancel::<CloseOrder>(&mut tx, "x").await.unwrap();
    outbox
        .enqueue(close(2))
        .id("x")
        .after(hour)
        .write(&mut tx)
        .await
        .unwrap();
    outbox
        .reschedule::<CloseOrder>(&mut tx, "o:100", hour * 3)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // Two relays at once, each taking what the other does not hold.
    let relays = [
        Relay::new(&outbox, db.pool.clone()).batch(10),
        Relay::new(&outbox, db.pool.clone()).batch(10),
    ];
    loop {
        let (a, b) = tokio::join!(relays[0].deliver(), relays[1].deliver());
        if a.unwrap().taken + b.unwrap().taken == 0 {
            break;
        }
    }
    assert_eq!(db.rows().await, 0);
    assert_eq!(
        queued(&client, "x").await,
        Some(2),
        "the last row of x wins"
    );
    let counts = client.topic::<CloseOrder>().counts().await.unwrap();
    assert_eq!((counts.scheduled, counts.cancelled), (51, 1));
    let due = due_at(&client, "o:100").await;
    assert!(due - chrono::Utc::now() > chrono::Duration::minutes(179));
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_row_that_cannot_be_delivered_is_reported_and_kept() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    // The relay's client was configured with a smaller limit since the row was written.
    let (writer, strict, outbox, mut tx) = two_limits(&db, &server).await;
    outbox.cancel::<CloseOrder>(&mut tx, "big").await.unwrap();
    outbox
        .enqueue(close(2))
        .id("small")
        .write(&mut tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let strict_outbox = Outbox::new(&strict).table(&db.table).unwrap();
    let relay = Relay::new(&strict_outbox, db.pool.clone());
    let round = relay.deliver().await.unwrap();
    assert_eq!(
        (round.taken, round.delivered, round.undeliverable),
        (2, 1, 1)
    );
    assert_eq!(queued(&strict, "big").await, None);
    assert_eq!(queued(&strict, "small").await, Some(2));
    let (failures, error): (i32, String) = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT failures, last_error FROM {} WHERE job_id = 'big' AND op = 1",
        db.table
    )))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(failures, 1);
    assert!(error.contains("512"), "the error names the limit: {error}");
    // Kept, backing off; the cancel of the same id waits behind it.
    assert_eq!(relay.deliver().await.unwrap().taken, 0);
    let stats = relay.stats().await.unwrap();
    assert_eq!((stats.rows, stats.failing), (2, 1));

    // The limit is raised again (a relay with the writer's client): both rows go, in order.
    db.update_rows("retry_at = NULL").await;
    let relay = Relay::new(&outbox, db.pool.clone());
    assert_eq!(relay.deliver().await.unwrap().delivered, 1);
    assert_eq!(queued(&writer, "big").await, Some(1));
    assert_eq!(relay.deliver().await.unwrap().delivered, 1);
    assert_eq!(queued(&writer, "big").await, None, "then cancelled");
    assert_eq!(db.rows().await, 0);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_relay_reports_its_rows_to_operators_and_doctor() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let (writer, strict, _outbox, tx) = two_limits(&db, &server).await;
    tx.commit().await.unwrap();

    let relay = Relay::new(
        &Outbox::new(&strict).table(&db.table).unwrap(),
        db.pool.clone(),
    )
    .poll_interval(Duration::from_millis(50));
    let stop = relay.shutdown_handle();
    let relaying = tokio::spawn(relay.run());
    let ops = writer.ops();
    let seen = support::wait::eventually("the relay to report a failing row", || async {
        let outboxes = ops.outboxes().await.unwrap();
        outboxes
            .into_iter()
            .find(|o| o.name == db.table && o.report.failing == 1)
    })
    .await;
    assert_eq!(seen.report.rows, 1);
    let checks = ops.doctor().await.unwrap();
    let check = checks
        .iter()
        .find(|c| c.name == format!("outbox {}", db.table))
        .expect("doctor checks the outbox");
    assert_eq!(check.level, postpone::ops::Level::Bad, "{check:?}");
    assert!(check.found.contains("1 failing"), "{}", check.found);
    stop.shutdown();
    relaying.await.unwrap().unwrap();
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_whose_relays_all_stopped_stays_listed_as_stale_and_doctor_warns() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = redis_client(&server, None).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let mut tx = db.pool.begin().await.unwrap();
    outbox
        .enqueue(close(1))
        .id("order:1")
        .write(&mut tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // Another transaction holds the row (as a relay's round would), so it waits while the relay runs.
    let mut holder = db.pool.begin().await.unwrap();
    sqlx::query(AssertSqlSafe(format!(
        "SELECT seq FROM {} FOR UPDATE",
        db.table
    )))
    .execute(&mut *holder)
    .await
    .unwrap();

    let stale_after = Duration::from_secs(3);
    let relay = Relay::new(&outbox, db.pool.clone())
        .poll_interval(Duration::from_millis(50))
        .stale_after(stale_after);
    let stop = relay.shutdown_handle();
    let relaying = tokio::spawn(relay.run());
    let ops = client.ops();
    let fresh = eventually("the relay to report the waiting row", || async {
        let outboxes = ops.outboxes().await.unwrap();
        outboxes
            .into_iter()
            .find(|o| o.name == db.table && o.report.rows == 1)
    })
    .await;
    // Reported every 50 ms: fresh, and the doctor has nothing to say.
    assert!(!fresh.stale, "{fresh:?}");
    assert_eq!((fresh.stale_after, fresh.report.failing), (stale_after, 0));
    let check = outbox_check(&ops, &db.table).await;
    assert_eq!(check.level, postpone::ops::Level::Ok, "{check:?}");

    // Every relay stops: the last report stays, kept a week by the store's clock...
    stop.shutdown();
    relaying.await.unwrap().unwrap();
    let entry = match server.cli(&["HGET", "postpone:{shop}:outboxes", &db.table]) {
        Ok(redis::Value::BulkString(b)) => String::from_utf8(b).unwrap(),
        other => panic!("the outbox's report in Redis: {other:?}"),
    };
    let fields: Vec<i64> = entry
        .split(' ')
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(
        fields[0] - fields[1],
        7 * 24 * 3600 * 1000,
        "kept a week after it was made: {entry}"
    );
    // ... and once it is older than the relay said, it is stale, and the doctor warns.
    let stale = eventually("the report to go stale", || async {
        let outboxes = ops.outboxes().await.unwrap();
        outboxes.into_iter().find(|o| o.name == db.table && o.stale)
    })
    .await;
    assert!(stale.age > stale_after, "{stale:?}");
    assert_eq!((stale.report.rows, stale.report.failing), (1, 0));
    let age = (chrono::Utc::now() - stale.reported_at).to_std().unwrap();
    assert!(age >= stale_after, "reported_at is {age:?} ago");
    let check = outbox_check(&ops, &db.table).await;
    assert_eq!(check.level, postpone::ops::Level::Warn, "{check:?}");
    assert!(
        check.found.starts_with("no relay has reported for ")
            && check
                .found
                .contains("(last report: 1 rows waiting, oldest "),
        "{}",
        check.found
    );
    assert!(
        check.advice.as_deref().unwrap_or("").contains("Relay::run"),
        "{check:?}"
    );

    // A relay runs again: fresh.
    holder.rollback().await.unwrap();
    let relay = Relay::new(&outbox, db.pool.clone()).poll_interval(Duration::from_millis(50));
    let stop = relay.shutdown_handle();
    let relaying = tokio::spawn(relay.run());
    eventually("a fresh report of an empty outbox", || async {
        let outboxes = ops.outboxes().await.unwrap();
        outboxes
            .into_iter()
            .find(|o| o.name == db.table && !o.stale && o.report.rows == 0)
    })
    .await;
    stop.shutdown();
    relaying.await.unwrap().unwrap();
    assert_eq!(queued(&client, "order:1").await, Some(1));
    db.drop_schema().await;
}

/// The doctor's check of outbox `table`.
async fn outbox_check(ops: &postpone::ops::Ops, table: &str) -> postpone::ops::Check {
    let checks = ops.doctor().await.unwrap();
    checks
        .into_iter()
        .find(|c| c.name == format!("outbox {table}"))
        .expect("doctor checks the outbox")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_commit_notification_wakes_the_relay_long_before_its_poll() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = redis_client(&server, None).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let poll = Duration::from_secs(60);
    let relay = Relay::new(&outbox, db.pool.clone()).poll_interval(poll);
    let stop = relay.shutdown_handle();
    let started = Instant::now();
    let relaying = tokio::spawn(relay.run());
    // The relay's listening connection has sent its LISTEN (the table's name, `.` as `_`).
    let listen = format!("LISTEN \"{}\"", db.table.replace('.', "_"));
    eventually("the relay to LISTEN", || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE query = $1")
            .bind(&listen)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        (n == 1).then_some(())
    })
    .await;
    // From here on only the notifications wake it: its first rounds (at start, and once listening)
    // are behind it by the second row, and its poll comes after 60 s. Each row, committed after the one
    // before reached Redis, arrives within a few seconds.
    for n in 0..3 {
        let id = format!("order:{n}");
        let mut tx = db.pool.begin().await.unwrap();
        outbox
            .enqueue(close(n))
            .id(&id)
            .write(&mut tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let committed = Instant::now();
        eventually_within(Duration::from_secs(5), "the committed row in Redis", || {
            let client = client.clone();
            let id = id.clone();
            async move { queued(&client, &id).await }
        })
        .await;
        eprintln!("{id}: in Redis {:?} after its commit", committed.elapsed());
    }
    assert!(
        started.elapsed() < poll,
        "the relay's poll never came due: the notifications did it"
    );
    // The row is deleted by the round's commit, just after Redis took the job.
    eventually("the outbox to be empty", || async {
        (db.rows().await == 0).then_some(())
    })
    .await;
    stop.shutdown();
    relaying.await.unwrap().unwrap();
    db.drop_schema().await;
}

/// A metrics recorder that keeps the outbox's gauges by (name, table label).
#[derive(Debug, Default, Clone)]
struct Gauges(Arc<Mutex<HashMap<(String, String), f64>>>);

#[derive(Debug)]
struct Cell {
    key: (String, String),
    gauges: Gauges,
}

impl metrics::GaugeFn for Cell {
    fn increment(&self, value: f64) {
        *self
            .gauges
            .0
            .lock()
            .unwrap()
            .entry(self.key.clone())
            .or_default() += value;
    }

    fn decrement(&self, value: f64) {
        self.increment(-value);
    }

    fn set(&self, value: f64) {
        self.gauges
            .0
            .lock()
            .unwrap()
            .insert(self.key.clone(), value);
    }
}

impl metrics::Recorder for Gauges {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::noop()
    }

    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        let table = key
            .labels()
            .find(|l| l.key() == "table")
            .map(|l| l.value().to_owned())
            .unwrap_or_default();
        metrics::Gauge::from_arc(Arc::new(Cell {
            key: (key.name().to_owned(), table),
            gauges: self.clone(),
        }))
    }

    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

impl Gauges {
    /// The (rows, oldest seconds, failing rows) gauges of `table`.
    fn of(&self, table: &str) -> (f64, f64, f64) {
        let gauges = self.0.lock().unwrap();
        let get = |name: &str| {
            *gauges
                .get(&(name.to_owned(), table.to_owned()))
                .unwrap_or_else(|| panic!("gauge {name} of {table} not set"))
        };
        (
            get("postpone_outbox_rows"),
            get("postpone_outbox_oldest_seconds"),
            get("postpone_outbox_failing_rows"),
        )
    }
}

/// `postpone_outbox_rows`, `postpone_outbox_oldest_seconds` and `postpone_outbox_failing_rows` (the
/// `metrics` feature): set from the table each time the stats are read, which a running relay does
/// every poll interval. A recorder of the test's own, on this thread only.
#[test]
fn outbox_gauges_report_a_waiting_row_and_a_failing_one() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let gauges = Gauges::default();
    let read = |relay: &Relay| {
        metrics::with_local_recorder(&gauges, || rt.block_on(relay.stats())).unwrap()
    };
    let server = RedisServer::start();
    let db = rt.block_on(TestDb::new());
    let (_writer, strict, outbox, tx) = rt.block_on(two_limits(&db, &server));
    rt.block_on(async {
        tx.commit().await.unwrap();
        let mut tx = db.pool.begin().await.unwrap();
        outbox
            .enqueue(close(2))
            .id("small")
            .write(&mut tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        // The rows were committed 90 s ago, as far as their age goes.
        db.update_rows("created_at = created_at - interval '90 seconds'")
            .await;
    });
    let relay = Relay::new(&outbox, db.pool.clone());
    let stats = read(&relay);
    assert_eq!((stats.rows, stats.failing), (2, 0));
    let (rows, oldest, failing) = gauges.of(&db.table);
    assert_eq!((rows, failing), (2.0, 0.0));
    assert!((90.0..120.0).contains(&oldest), "oldest {oldest} s");

    // A relay whose client refuses the big row: the small one goes, the big one waits, failing.
    let strict_relay = Relay::new(
        &Outbox::new(&strict).table(&db.table).unwrap(),
        db.pool.clone(),
    );
    let round = rt.block_on(strict_relay.deliver()).unwrap();
    assert_eq!((round.delivered, round.undeliverable), (1, 1));
    read(&strict_relay);
    let (rows, oldest, failing) = gauges.of(&db.table);
    assert_eq!((rows, failing), (1.0, 1.0));
    assert!((90.0..120.0).contains(&oldest), "oldest {oldest} s");

    // Delivered at last: all back to zero.
    rt.block_on(async {
        db.update_rows("retry_at = NULL").await;
        assert_eq!(relay.deliver().await.unwrap().delivered, 1);
    });
    read(&relay);
    assert_eq!(gauges.of(&db.table), (0.0, 0.0, 0.0));
    rt.block_on(db.drop_schema());
}
