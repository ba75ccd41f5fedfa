//! The fault suite's rig: a Redis server of the test's own, worker processes (`examples/fault_worker`)
//! that a test kills, pauses, crashes and restarts, the ledger of enqueued jobs, the drain, and the
//! checker (in `check.rs`).
//!
//! A test enqueues through [`Rig::enqueue`] (only what returned `Ok` enters the ledger), injects its
//! faults through the rig (each is recorded with the Redis time it happened at), waits with
//! [`Rig::drain`], then calls [`Rig::check`], which classifies every enqueued id from the workers'
//! event log and Redis, asserts the delivery promise, and prints the test's figures.

#![allow(dead_code, unreachable_pub)]

pub mod check;
pub mod log;
mod procs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::TopicCounts;
use postpone::{Client, EnqueueItem, EnqueueStatus, Job};
use serde::{Deserialize, Serialize};

use crate::support::redis_server::{Builder, RedisServer};
use crate::support::tempdir::TempDir;
use crate::support::wait::wait_until_within;

#[allow(unused_imports)]
pub use check::{Expect, Report};
#[allow(unused_imports)]
pub use procs::{Fault, Proc, Spec};

/// The worker process's job: the same shape and topic as `Work` in `examples/fault_worker.rs`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Job)]
#[job(topic = "fault.work", retry = ["0", "0", "50ms", "50ms", "50ms"])]
pub struct Work {
    /// How long the handler works.
    pub sleep_ms: u64,
    /// A poison job: the handler aborts its process.
    pub abort: bool,
    /// Filler.
    pub text: String,
    /// The first run of such a job (in any process) returns a provider's rate limit of this long.
    pub hold_ms: u64,
}

impl Work {
    /// A job whose handler works `ms`.
    pub fn sleeping(ms: u64) -> Self {
        Work {
            sleep_ms: ms,
            ..Work::default()
        }
    }
}

/// The topic of [`Work`].
pub const TOPIC: &str = "fault.work";

/// The worker process's keyed job (run with `FAULT_KEY_MAX` or `FAULT_KEY_RATE`): the same shape and
/// topic as `Tenant` in `examples/fault_worker.rs`; its key for fairness is its tenant.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Job)]
#[job(topic = "fault.tenant", key = "tenant")]
pub struct Tenant {
    /// Its tenant.
    pub tenant: String,
    /// How long the handler works.
    pub sleep_ms: u64,
}

/// One fault test at a time per test binary: they load both cores with processes, and leases are short.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A test's Redis, workers, ledger and faults.
pub struct Rig {
    /// The name printed with the figures.
    pub name: String,
    /// The Redis server.
    pub server: RedisServer,
    /// The namespace (one per rig).
    pub ns: String,
    /// The test's own client (enqueues, lookups).
    pub client: Client,
    /// Enqueued ids (enqueue returned `Ok` and created the job) and their due times (Redis ms).
    pub ledger: BTreeMap<String, i64>,
    /// Ids whose enqueue returned an error: they may or may not exist (the reply may have been lost).
    pub uncertain: std::collections::BTreeSet<String>,
    /// Every fault injected.
    pub faults: Vec<Fault>,
    /// Worker processes, by slot.
    pub procs: Vec<Proc>,
    dir: TempDir,
    log: PathBuf,
    spawned: usize,
    extra_env: Vec<(String, String)>,
}

impl Rig {
    /// A rig on a fresh server started from `server`.
    pub async fn start(name: &str, server: Builder) -> Rig {
        let server = server.start();
        let ns = "fault".to_owned();
        let options = RedisOptions::new(ns.as_str()).response_timeout(Duration::from_secs(2));
        let store = RedisStore::connect_with(&server.url(), options)
            .await
            .expect("connecting the test's client");
        let client = Client::builder().store(store);
        let dir = TempDir::new("postpone-fault-");
        let log = dir.path().join("events");
        std::fs::create_dir(&log).expect("creating the event log directory");
        Rig {
            name: name.to_owned(),
            server,
            ns,
            client,
            ledger: BTreeMap::new(),
            uncertain: Default::default(),
            faults: Vec::new(),
            procs: Vec::new(),
            dir,
            log,
            spawned: 0,
            extra_env: Vec::new(),
        }
    }

    /// Adds a variable to every worker spawned from now on (e.g. `LD_PRELOAD`).
    pub fn env_all(&mut self, name: &str, value: &str) {
        self.extra_env.push((name.to_owned(), value.to_owned()));
    }

    /// The Redis time (ms).
    pub fn redis_ms(&self) -> i64 {
        match self.server.cli(&["TIME"]).expect("TIME") {
            redis::Value::Array(v) => {
                let n = |x: &redis::Value| -> i64 {
                    redis::FromRedisValue::from_redis_value(x.clone()).expect("TIME field")
                };
                n(&v[0]) * 1000 + n(&v[1]) / 1000
            }
            other => panic!("unexpected TIME reply {other:?}"),
        }
    }

    /// The event log directory (one file per worker process).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Enqueues `items`; every job whose enqueue returned `Ok` and was created enters the ledger.
    pub async fn enqueue(&mut self, items: Vec<EnqueueItem<Work>>) -> postpone::Result<usize> {
        let done = self.client.enqueue_many(items).await?;
        let mut n = 0;
        for e in done {
            assert_eq!(e.status, EnqueueStatus::Created, "enqueue of {:?}", e.id);
            let due = e.due_at.expect("a created job has a due time");
            self.ledger.insert(e.id, due.timestamp_millis());
            n += 1;
        }
        Ok(n)
    }

    /// Enqueues `(id, job, delay)`s and returns whether the enqueue returned `Ok`. On an error the ids are
    /// uncertain: Redis may have stored them before the connection broke.
    pub async fn try_enqueue(&mut self, jobs: Vec<(String, Work, Duration)>) -> bool {
        let ids: Vec<String> = jobs.iter().map(|(id, _, _)| id.clone()).collect();
        let items = jobs
            .into_iter()
            .map(|(id, work, after)| EnqueueItem::new(work).id(id).after(after))
            .collect();
        match self.enqueue(items).await {
            Ok(_) => true,
            Err(_) => {
                self.uncertain.extend(ids);
                false
            }
        }
    }

    /// Enters jobs enqueued some other way (a batch's members, its callbacks once fired, jobs that
    /// wait for jobs) into the ledger, each due no earlier than `due_ms` (Redis ms).
    pub fn ledger_add(&mut self, ids: impl IntoIterator<Item = String>, due_ms: i64) {
        for id in ids {
            self.ledger.insert(id, due_ms);
        }
    }

    /// How many jobs the topic created (its history's `enqueued`, which an enqueue of an id that is
    /// live already does not count), over the last hour; retrying while Redis is away.
    pub async fn enqueued_total(&self) -> u64 {
        let ops = self.client.ops();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match ops.history(TOPIC, 60).await {
                Ok(minutes) => return minutes.iter().map(|m| m.enqueued).sum(),
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("history: {e}"),
            }
        }
    }

    /// `n` jobs `<prefix><i>` due now, each working `sleep_ms`.
    pub async fn enqueue_now(&mut self, prefix: &str, n: usize, sleep_ms: u64) {
        let items = (0..n)
            .map(|i| EnqueueItem::new(Work::sleeping(sleep_ms)).id(format!("{prefix}{i}")))
            .collect();
        self.enqueue(items).await.expect("enqueue");
    }

    /// The topic's counts (retrying while Redis is away).
    pub async fn counts(&self) -> TopicCounts {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.client.topic::<Work>().counts().await {
                Ok(c) => return c,
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("counts: {e}"),
            }
        }
    }

    /// Whether no job is live (due, running, or waiting for other jobs) or waiting for its
    /// dead-letter hook.
    pub async fn drained(&self) -> bool {
        match self.client.topic::<Work>().counts().await {
            Ok(c) => c.scheduled + c.ready + c.active + c.waiting + c.dead_pending == 0,
            Err(_) => false,
        }
    }

    /// Waits until [`Rig::drained`], for at most `limit`, calling `tick` every 50 ms meanwhile (a test
    /// injects faults or restarts crashed workers there).
    pub async fn drain_with(&mut self, limit: Duration, tick: impl FnMut(&mut Rig)) {
        self.drain_after(limit, "every job ended", |_| true, tick)
            .await
    }

    /// Waits until `done` holds for the events logged and then [`Rig::drained`], for at most `limit`,
    /// calling `tick` every 50 ms meanwhile. For what the topic's counts do not show yet: a batch's
    /// callback is enqueued after its last member ended, so the topic may look drained in between.
    pub async fn drain_until(
        &mut self,
        limit: Duration,
        what: &str,
        mut done: impl FnMut(&[log::Event]) -> bool,
        tick: impl FnMut(&mut Rig),
    ) {
        self.drain_after(limit, what, |rig| done(&rig.events()), tick)
            .await
    }

    /// Waits until `done` holds and then [`Rig::drained`] (in that order: what `done` saw has been
    /// acknowledged once the topic is drained).
    async fn drain_after(
        &mut self,
        limit: Duration,
        what: &str,
        mut done: impl FnMut(&Rig) -> bool,
        mut tick: impl FnMut(&mut Rig),
    ) {
        let deadline = Instant::now() + limit;
        while !(done(self) && self.drained().await) {
            if Instant::now() > deadline {
                let counts = self.counts().await;
                panic!(
                    "{}: {what}: not reached after {limit:?}: {counts:?}; faults so far: {}",
                    self.name,
                    self.faults.len()
                );
            }
            tick(self);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every job ended, for at most `limit`.
    pub async fn drain(&mut self, limit: Duration) {
        self.drain_with(limit, |_| {}).await
    }

    /// The events logged so far.
    pub fn events(&self) -> Vec<log::Event> {
        log::read_log(&self.log)
    }

    /// Waits (at most 30 s) until `cond` holds for the events logged.
    pub async fn wait_for(&self, what: &str, mut cond: impl FnMut(&[log::Event]) -> bool) {
        self.wait_until(what, || cond(&self.events())).await
    }

    /// Waits (at most 30 s) until `cond` holds.
    pub async fn wait_until(&self, what: &str, cond: impl FnMut() -> bool) {
        let what = format!("{what} (rig {})", self.name);
        wait_until_within(Duration::from_secs(30), &what, cond).await
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for p in &mut self.procs {
            // SIGKILL ends a stopped process too.
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        if std::thread::panicking() {
            // Redis's files too (its AOF holds every write, in order, for the suites that enable it).
            copy_tree(self.server.dir(), &self.dir.path().join("redis"));
            let kept = self.dir.path().join("..").join(format!(
                "postpone-fault-kept-{}-{}",
                self.name,
                std::process::id()
            ));
            if std::fs::rename(self.dir.path(), &kept).is_ok() {
                eprintln!(
                    "{}: event log and worker stderr kept in {}",
                    self.name,
                    kept.display()
                );
            }
        }
    }
}

/// Copies the files under `from` into `to`, best effort (for a failed test's evidence).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    let _ = std::fs::create_dir_all(to);
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(entry.file_name()));
        } else {
            let _ = std::fs::copy(&path, to.join(entry.file_name()));
        }
    }
}

/// A small deterministic random source (xorshift), seeded per test and printed, so a failure can be
/// replayed.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded from `FAULT_SEED` or the clock.
    pub fn new(name: &str) -> Self {
        let seed = std::env::var("FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            })
            | 1;
        eprintln!("{name}: FAULT_SEED={seed}");
        Rng(seed)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + self.0 % (hi - lo + 1)
    }
}
