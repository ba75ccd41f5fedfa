//! The outbox under faults, on a real PostgreSQL and a real redis-server: a relay process SIGKILLed
//! between the Redis write and its commit, and at random points many times; Redis down for seconds
//! while transactions commit; two relays at once. Each time, every committed job is queued once and
//! runs once, and no row is left behind.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postpone::{Client, Job, JobContext, JobError, ShutdownHandle, Worker};
use postpone_postgres::{Outbox, Relay};
use serde::{Deserialize, Serialize};
use support::db::TestDb;
use support::redis_server::RedisServer;
use support::wait::{eventually, eventually_within};
use tokio::sync::mpsc;

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

/// How often each job ran, by id.
type Runs = Arc<Mutex<HashMap<String, u32>>>;

async fn close_order(_job: CloseOrder, ctx: JobContext, runs: Runs) -> Result<(), JobError> {
    *runs.lock().unwrap().entry(ctx.id().to_owned()).or_default() += 1;
    Ok(())
}

async fn client(server: &RedisServer) -> Client {
    Client::builder()
        .namespace("shop")
        .redis(&server.url())
        .await
        .expect("connecting to the test redis-server")
}

/// A worker that counts runs; stopped with the returned handle.
fn worker(client: &Client, runs: &Runs) -> (ShutdownHandle, tokio::task::JoinHandle<()>) {
    let worker = Worker::with_state(client, runs.clone())
        .handle(close_order)
        .concurrency(20)
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(async move { worker.run().await.unwrap() });
    (stop, running)
}

/// Commits `count` transactions from `tasks` tasks, each enqueueing job `<prefix>:<n>` (due now),
/// each task pausing `pause` between its commits.
async fn commit_jobs(
    pool: &sqlx::PgPool,
    outbox: &Outbox,
    (prefix, tasks, count): (&str, usize, usize),
    pause: Duration,
) {
    let calls = (0..tasks).map(|t| {
        let (pool, outbox) = (pool.clone(), outbox.clone());
        let prefix = prefix.to_owned();
        tokio::spawn(async move {
            for n in (t..count).step_by(tasks) {
                let mut tx = pool.begin().await.unwrap();
                let job = CloseOrder { order_id: n as u64 };
                outbox
                    .enqueue(job)
                    .id(format!("{prefix}:{n}"))
                    .write(&mut tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
        })
    });
    for call in calls.collect::<Vec<_>>() {
        call.await.unwrap();
    }
}

/// Waits until every job ran, then checks each ran exactly once.
async fn each_ran_once(runs: &Runs, expected: usize) {
    eventually_within(
        Duration::from_secs(60),
        "every committed job to run",
        || async { (runs.lock().unwrap().len() >= expected).then_some(()) },
    )
    .await;
    let runs = runs.lock().unwrap();
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "jobs that ran more than once: {twice:?}");
    assert_eq!(runs.len(), expected);
}

/// The relay example as a process of its own, its stderr lines on a channel.
struct RelayProcess {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl RelayProcess {
    fn start(db: &TestDb, server: &RedisServer, failpoint: Option<&str>) -> Self {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let exe = support::example::example_binary(
            "outbox_relay",
            &[root.join("examples/outbox_relay.rs"), root.join("src")],
            "build it with `cargo test -p postpone-postgres` (it builds the examples)",
        );
        let mut cmd = Command::new(exe);
        cmd.env("DATABASE_URL", &db.url)
            .env("REDIS_URL", server.url())
            .env("POSTPONE_NAMESPACE", "shop")
            .env("OUTBOX_TABLE", &db.table)
            .env_remove("REDIS_CLUSTER_NODES")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match failpoint {
            Some(point) => cmd.env("POSTPONE_RELAY_FAILPOINT", point),
            None => cmd.env_remove("POSTPONE_RELAY_FAILPOINT"),
        };
        let mut child = cmd.spawn().expect("starting the relay process");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        RelayProcess { child, lines }
    }

    /// Waits for a stderr line containing `text`.
    async fn wait_for(&mut self, text: &str) {
        let found = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = self.lines.recv().await {
                if line.contains(text) {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(found, Ok(true), "the relay process never said {text:?}");
    }

    fn kill9(mut self) {
        self.child.kill().expect("SIGKILL to the relay");
        self.child.wait().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_relay_killed_between_the_redis_write_and_its_commit_queues_the_job_once() {
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = client(&server).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    commit_jobs(&db.pool, &outbox, ("order", 1, 1), Duration::ZERO).await;

    // The relay writes the job to Redis and stops before its commit, holding the row.
    let mut relay = RelayProcess::start(&db, &server, Some("relay-before-commit"));
    relay.wait_for("failpoint relay-before-commit").await;
    // Meanwhile the job runs and is done: it is gone from Redis.
    let runs = Runs::default();
    let (stop, running) = worker(&client, &runs);
    eventually("the job to run", || async {
        let c = client.topic::<CloseOrder>().counts().await.unwrap();
        (c.processed == 1).then_some(())
    })
    .await;
    relay.kill9();
    db.wait_for_row_locks_freed().await;

    // The row is still there (its deletion never committed): a new relay delivers it again, and Redis
    // knows its token, so the job is not queued a second time.
    assert_eq!(db.rows().await, 1);
    let round = Relay::new(&outbox, db.pool.clone())
        .deliver()
        .await
        .unwrap();
    assert_eq!((round.taken, round.delivered), (1, 1));
    assert_eq!(db.rows().await, 0);
    let counts = client.topic::<CloseOrder>().counts().await.unwrap();
    assert_eq!(
        (counts.scheduled, counts.ready, counts.active),
        (0, 0, 0),
        "not queued again"
    );
    stop.shutdown();
    running.await.unwrap();
    assert_eq!(runs.lock().unwrap().get("order:0"), Some(&1));
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_relay_killed_at_random_points_loses_and_repeats_nothing() {
    const JOBS: usize = 600;
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = client(&server).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let runs = Runs::default();
    let (stop, running) = worker(&client, &runs);

    let committing = {
        let (pool, outbox) = (db.pool.clone(), outbox.clone());
        tokio::spawn(async move {
            let pause = Duration::from_millis(1);
            commit_jobs(&pool, &outbox, ("r", 8, JOBS), pause).await
        })
    };
    // Relay processes, each SIGKILLed after a random few ms of work, one after the other.
    let mut kills = 0;
    while !committing.is_finished() || kills < 10 {
        let mut relay = RelayProcess::start(&db, &server, None);
        relay.wait_for("relay ready").await;
        let ms = 5 + (rand_u64() % 60);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        relay.kill9();
        kills += 1;
    }
    committing.await.unwrap();
    // The last relay runs to the end.
    let last = Relay::new(&outbox, db.pool.clone());
    let stop_relay = last.shutdown_handle();
    let relaying = tokio::spawn(last.run());
    each_ran_once(&runs, JOBS).await;
    eventually("the outbox to be empty", || async {
        (db.rows().await == 0).then_some(())
    })
    .await;
    stop_relay.shutdown();
    relaying.await.unwrap().unwrap();
    stop.shutdown();
    running.await.unwrap();
    assert!(kills >= 10);
    let counts = client.topic::<CloseOrder>().counts().await.unwrap();
    assert_eq!(counts.processed, JOBS as u64);
    db.drop_schema().await;
}

/// A few random bits without a dependency.
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_redis_down_for_seconds_while_transactions_commit_loses_nothing() {
    const BEFORE: usize = 100;
    const DURING: usize = 200;
    let db = TestDb::new().await;
    let server = RedisServer::builder()
        .aof(true)
        .appendfsync("always")
        .start();
    let client = client(&server).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let relay = Relay::new(&outbox, db.pool.clone()).poll_interval(Duration::from_millis(200));
    let stop_relay = relay.shutdown_handle();
    let relaying = tokio::spawn(relay.run());

    commit_jobs(&db.pool, &outbox, ("before", 4, BEFORE), Duration::ZERO).await;
    eventually("the first jobs to reach Redis", || async {
        (db.rows().await == 0).then_some(())
    })
    .await;
    server.kill9();
    // Commits go on: PostgreSQL is up, and the outbox needs nothing else.
    commit_jobs(&db.pool, &outbox, ("during", 4, DURING), Duration::ZERO).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(db.rows().await, DURING as i64, "kept while Redis is away");
    server.restart();
    eventually("the outbox to drain after Redis is back", || async {
        (db.rows().await == 0).then_some(())
    })
    .await;
    stop_relay.shutdown();
    relaying.await.unwrap().unwrap();

    let runs = Runs::default();
    let (stop, running) = worker(&client, &runs);
    each_ran_once(&runs, BEFORE + DURING).await;
    stop.shutdown();
    running.await.unwrap();
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_two_relays_at_once_queue_each_job_once() {
    const JOBS: usize = 1000;
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = client(&server).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    let runs = Runs::default();
    let (stop, running) = worker(&client, &runs);
    let relays: Vec<_> = (0..2)
        .map(|_| {
            let relay = Relay::new(&outbox, db.pool.clone()).batch(50);
            (relay.shutdown_handle(), tokio::spawn(relay.run()))
        })
        .collect();
    commit_jobs(&db.pool, &outbox, ("two", 16, JOBS), Duration::ZERO).await;
    each_ran_once(&runs, JOBS).await;
    eventually("the outbox to be empty", || async {
        (db.rows().await == 0).then_some(())
    })
    .await;
    for (stop, relaying) in relays {
        stop.shutdown();
        relaying.await.unwrap().unwrap();
    }
    stop.shutdown();
    running.await.unwrap();
    let counts = client.topic::<CloseOrder>().counts().await.unwrap();
    assert_eq!(counts.processed, JOBS as u64);
    db.drop_schema().await;
}
