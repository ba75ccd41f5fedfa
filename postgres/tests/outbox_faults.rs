//! The outbox under faults, on a real PostgreSQL and a real redis-server: a relay process SIGKILLed
//! between the Redis write and its commit, and at random points many times (while writers commit,
//! roll back, and write several rows per id); Redis down for seconds while transactions commit; two
//! relays at once. Each time, every committed job is queued once and runs once, no rolled-back row
//! has any effect, each id ends as its last committed row says, and no row is left behind.

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
        Self::start_batched(db, server, failpoint, None)
    }

    /// [`start`](Self::start), taking at most `batch` rows a round (default 500).
    fn start_batched(
        db: &TestDb,
        server: &RedisServer,
        failpoint: Option<&str>,
        batch: Option<usize>,
    ) -> Self {
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
        match batch {
            Some(rows) => cmd.env("OUTBOX_BATCH", rows.to_string()),
            None => cmd.env_remove("OUTBOX_BATCH"),
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

/// What happens to job `s:<n>` in `outbox_relay_killed_at_random_points_keeps_rollbacks_out_...`:
/// one committed transaction per step, in order.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Enqueue order `n` (due in an hour).
    Enqueue,
    /// Enqueue order `n + AGAIN` at the later time (after a cancel: the id is free again).
    EnqueueAgain,
    /// Reschedule to the first time.
    First,
    /// Reschedule to the later time.
    Later,
    /// Cancel.
    Cancel,
}

/// The writers' phases (see [`write_steps`]), and the relays killed before each next one starts.
const PHASES: usize = 4;
const KILLS_PER_PHASE: u32 = 7;

/// The payload of a second enqueue of an id.
const AGAIN: u64 = 1_000_000;

/// The committed steps of `s:<n>`, by `n % 4`.
fn steps(n: u64) -> &'static [Step] {
    use Step::*;
    match n % 4 {
        0 => &[Enqueue, First],
        1 => &[Enqueue, First, Cancel],
        2 => &[Enqueue, Cancel, EnqueueAgain],
        _ => &[Enqueue, First, Later],
    }
}

/// What Redis must hold of `s:<n>` at the end: its order id and due time, or nothing (cancelled).
fn expected(n: u64, times: &Times) -> Option<(u64, chrono::DateTime<chrono::Utc>)> {
    match n % 4 {
        0 => Some((n, times.first(n))),
        1 => None,
        2 => Some((n + AGAIN, times.later(n))),
        _ => Some((n, times.later(n))),
    }
}

/// Absolute due times, whole ms, one apart per id: what a reschedule or a second enqueue sets.
#[derive(Debug, Clone, Copy)]
struct Times {
    base: chrono::DateTime<chrono::Utc>,
}

impl Times {
    fn first(&self, n: u64) -> chrono::DateTime<chrono::Utc> {
        self.base + chrono::Duration::seconds(n as i64)
    }

    fn later(&self, n: u64) -> chrono::DateTime<chrono::Utc> {
        self.first(n) + chrono::Duration::hours(1)
    }

    /// Where rolled-back reschedules would move a job: never seen if they stay rolled back.
    fn never(&self) -> chrono::DateTime<chrono::Utc> {
        self.base + chrono::Duration::hours(5)
    }
}

/// Writes ids `s:<n>` for `n` in `ids` (the task's share), each step of an id one committed
/// transaction, each followed by one that writes rows (an enqueue of `rb:<n>:<step>`, a cancel and a
/// reschedule of `s:<n>`) and rolls back. Phase `p` starts once `kills` has counted
/// `p * KILLS_PER_PHASE` relays killed; in it, half the ids (`n % 8 < 4`, a quarter of them per
/// phase) get all their steps back to back, so that several rows of one id wait at once, and the
/// other half get their step `p`, so that relays die between the rows of each id. Counts the
/// rolled-back transactions.
async fn write_steps(
    (pool, outbox): (sqlx::PgPool, Outbox),
    ids: Vec<u64>,
    times: Times,
    mut kills: tokio::sync::watch::Receiver<u32>,
) -> usize {
    let (together, apart): (Vec<u64>, Vec<u64>) = ids.into_iter().partition(|n| n % 8 < 4);
    let chunk = together.len().div_ceil(PHASES);
    let mut rolled_back = 0;
    for phase in 0..PHASES {
        let after = phase as u32 * KILLS_PER_PHASE;
        kills.wait_for(|k| *k >= after).await.unwrap();
        let all_steps = together.iter().skip(phase * chunk).take(chunk);
        let mut work: Vec<(u64, usize)> = all_steps
            .flat_map(|&n| (0..steps(n).len()).map(move |step| (n, step)))
            .collect();
        work.extend(apart.iter().map(|&n| (n, phase)));
        for (n, step) in work {
            let Some(&what) = steps(n).get(step) else {
                continue;
            };
            write_step(&pool, &outbox, (n, step, what), times).await;
            rolled_back += 1;
            tokio::time::sleep(Duration::from_millis(4)).await;
        }
    }
    rolled_back
}

/// Commits step `step` of `s:<n>`, then writes rows in a transaction that rolls back.
async fn write_step(
    pool: &sqlx::PgPool,
    outbox: &Outbox,
    (n, step, what): (u64, usize, Step),
    times: Times,
) {
    let hour = Duration::from_secs(3600);
    let id = format!("s:{n}");
    let mut tx = pool.begin().await.unwrap();
    match what {
        Step::Enqueue => drop(
            outbox
                .enqueue(CloseOrder { order_id: n })
                .id(&id)
                .after(hour)
                .write(&mut tx)
                .await
                .unwrap(),
        ),
        Step::EnqueueAgain => drop(
            outbox
                .enqueue(CloseOrder {
                    order_id: n + AGAIN,
                })
                .id(&id)
                .at(times.later(n))
                .write(&mut tx)
                .await
                .unwrap(),
        ),
        Step::First => outbox
            .reschedule::<CloseOrder>(&mut tx, &id, times.first(n))
            .await
            .unwrap(),
        Step::Later => outbox
            .reschedule::<CloseOrder>(&mut tx, &id, times.later(n))
            .await
            .unwrap(),
        Step::Cancel => outbox.cancel::<CloseOrder>(&mut tx, &id).await.unwrap(),
    }
    tx.commit().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    outbox
        .enqueue(CloseOrder { order_id: n })
        .id(format!("rb:{n}:{step}"))
        .after(hour)
        .write(&mut tx)
        .await
        .unwrap();
    outbox.cancel::<CloseOrder>(&mut tx, &id).await.unwrap();
    outbox
        .reschedule::<CloseOrder>(&mut tx, &id, times.never())
        .await
        .unwrap();
    tx.rollback().await.unwrap();
}

/// The order id and due time of job `id`, when it is scheduled; `None` when it is not in the queue.
async fn scheduled(client: &Client, id: &str) -> Option<(u64, chrono::DateTime<chrono::Utc>)> {
    let job = client.topic::<CloseOrder>().job(id).await.unwrap()?;
    let order = job.job::<CloseOrder>().unwrap().order_id;
    match job.state {
        postpone::JobState::Scheduled { due_at } => Some((order, due_at)),
        other => panic!("{id} is in the queue but not scheduled: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_relay_killed_at_random_points_keeps_rollbacks_out_and_the_last_row_of_each_id() {
    const IDS: u64 = 400;
    const TASKS: u64 = 8;
    // Small rounds: a relay commits several before it is killed, and is killed between them too.
    const BATCH: Option<usize> = Some(20);
    let (db, server) = (TestDb::new().await, RedisServer::start());
    let client = client(&server).await;
    let outbox = Outbox::new(&client).table(&db.table).unwrap();
    // Due times in whole ms (as Redis keeps them), two hours on: no worker runs here, and none is due.
    let now_ms = chrono::Utc::now().timestamp_millis();
    let times = Times {
        base: chrono::DateTime::from_timestamp_millis(now_ms).unwrap() + chrono::Duration::hours(2),
    };

    let (killed, kills) = tokio::sync::watch::channel(0u32);
    let writers: Vec<_> = (0..TASKS)
        .map(|t| {
            let ids = (t..IDS).step_by(TASKS as usize).collect();
            let db = (db.pool.clone(), outbox.clone());
            tokio::spawn(write_steps(db, ids, times, kills.clone()))
        })
        .collect();
    let committing = tokio::spawn(async move {
        let mut rolled_back = 0;
        for w in writers {
            rolled_back += w.await.unwrap();
        }
        rolled_back
    });
    // Relay processes one after the other while the writers write, each SIGKILLed: every other one
    // at a random point up to 155 ms after it is ready, the others in the middle of a round (at the
    // failpoint after Redis took the round's rows and before their deletion commits), when rows wait.
    let (mut random, mut mid_round) = (0, 0);
    let mut while_writing = None;
    while !committing.is_finished() || random + mid_round < 30 {
        if committing.is_finished() && while_writing.is_none() {
            while_writing = Some(random + mid_round);
        }
        if (random + mid_round) % 2 == 1 && db.rows().await > 0 {
            let failpoint = Some("relay-before-commit");
            let mut relay = RelayProcess::start_batched(&db, &server, failpoint, BATCH);
            relay.wait_for("failpoint relay-before-commit").await;
            relay.kill9();
            mid_round += 1;
        } else {
            let mut relay = RelayProcess::start_batched(&db, &server, None, BATCH);
            relay.wait_for("relay ready").await;
            let ms = 5 + (rand_u64() % 150);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            relay.kill9();
            random += 1;
        }
        killed.send_replace(random + mid_round);
    }
    let rolled_back = committing.await.unwrap();
    let left = db.rows().await;
    // The last relay runs to the end.
    let last = Relay::new(&outbox, db.pool.clone());
    let stop_relay = last.shutdown_handle();
    let relaying = tokio::spawn(last.run());
    eventually("the outbox to be empty", || async {
        (db.rows().await == 0).then_some(())
    })
    .await;
    stop_relay.shutdown();
    relaying.await.unwrap().unwrap();
    eprintln!(
        "{random} relays killed at random, {mid_round} mid-round ({while_writing:?} while the writers \
         wrote); {rolled_back} transactions rolled back; {left} rows left to the last relay"
    );
    assert!(mid_round >= 3, "only {mid_round} relays killed mid-round");

    // Each id is where its last committed row put it, exactly; no rolled-back row did anything.
    for n in 0..IDS {
        let id = format!("s:{n}");
        assert_eq!(
            scheduled(&client, &id).await,
            expected(n, &times),
            "{id} after {:?}",
            steps(n)
        );
        for step in 0..3 {
            let rb = format!("rb:{n}:{step}");
            assert_eq!(scheduled(&client, &rb).await, None, "{rb} was rolled back");
        }
    }
    let topic = client.topic::<CloseOrder>();
    let counts = topic.counts().await.unwrap();
    let again = (0..IDS).filter(|n| n % 4 == 2).count() as u64;
    let cancelled = (0..IDS).filter(|n| matches!(n % 4, 1 | 2)).count() as u64;
    assert_eq!(
        (counts.scheduled, counts.ready, counts.active, counts.dead),
        (IDS - IDS / 4, 0, 0, 0),
        "one job per id that was not cancelled last, no other"
    );
    assert_eq!(counts.cancelled, cancelled, "each committed cancel once");
    // Each committed enqueue created its job once: a row delivered again changed nothing.
    let enqueued: u64 = topic
        .history(10)
        .await
        .unwrap()
        .iter()
        .map(|m| m.enqueued)
        .sum();
    assert_eq!(enqueued, IDS + again, "jobs created");
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
