//! The fault suite's rig: a Redis server of the test's own, worker processes (`examples/fault_worker`)
//! that a test kills, pauses, crashes and restarts, the ledger of enqueued jobs, the drain, and the
//! checker (in `check.rs`).
//!
//! A test enqueues through [`Rig::enqueue`] (only what returned `Ok` enters the ledger), injects its
//! faults through the rig (each is recorded with the Redis time it happened at), waits with
//! [`Rig::drain`], then calls [`Rig::check`], which classifies every enqueued id from the workers'
//! event log and Redis, asserts the delivery promise, and prints the test's figures.

#![allow(dead_code, unused_imports, unreachable_pub)]

pub mod check;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::TopicCounts;
use postpone::{Client, EnqueueItem, EnqueueStatus, Job};
use serde::{Deserialize, Serialize};

use crate::support::redis_server::{Builder, RedisServer};

pub use check::{Expect, Report};

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

/// One fault test at a time per test binary: they load both cores with processes, and leases are short.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// How to run one worker process.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Environment variables on top of the rig's (`FAULT_LEASE_MS`, `FAULT_CRASH`, ...).
    pub env: Vec<(String, String)>,
}

impl Spec {
    /// A worker with this lease and concurrency.
    pub fn new(lease_ms: u64, concurrency: usize) -> Self {
        Spec { env: Vec::new() }
            .env("FAULT_LEASE_MS", lease_ms)
            .env("FAULT_CONCURRENCY", concurrency)
    }

    /// Sets a variable (a later value wins).
    pub fn env(mut self, name: &str, value: impl ToString) -> Self {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.to_owned(), value.to_string()));
        self
    }
}

/// A fault the test injected.
#[derive(Debug, Clone)]
pub struct Fault {
    /// What it was ("kill", "stop", "crash", "redis-kill", ...).
    pub kind: String,
    /// The worker process it hit, or `None` for Redis.
    pub pid: Option<u32>,
    /// The Redis time just before it (ms); for a crash the worker chose itself, when it was seen.
    pub at_ms: i64,
}

/// A worker process.
#[derive(Debug)]
pub struct Proc {
    /// Its spec, to restart it.
    pub spec: Spec,
    child: Child,
    /// Its pid.
    pub pid: u32,
    exited: bool,
}

impl Proc {
    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        !self.exited && self.child.try_wait().expect("try_wait").is_none()
    }
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
    dir: tempfile::TempDir,
    log: PathBuf,
    spawned: usize,
    extra_env: Vec<(String, String)>,
}

/// The worker binary, built by `cargo test` (or `cargo build --example fault_worker`).
pub fn worker_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("examples")
        .join("fault_worker");
    assert!(
        path.exists(),
        "the fault suite's worker process {} is missing: run `cargo build --example fault_worker` (plain \
         `cargo test` builds it)",
        path.display()
    );
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fault_worker.rs");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(bin), Some(src)) = (modified(&path), modified(&source)) {
        assert!(
            bin >= src,
            "{} is older than examples/fault_worker.rs: run `cargo build --example fault_worker`",
            path.display()
        );
    }
    path
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
        let client = Client::builder().namespace(ns.as_str()).store(store);
        let dir = tempfile::Builder::new()
            .prefix("postpone-fault-")
            .tempdir()
            .expect("temp dir");
        let log = dir.path().join("events.log");
        File::create(&log).expect("creating the event log");
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

    /// The event log's path.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    fn command(&mut self, spec: &Spec) -> (Command, PathBuf) {
        self.spawned += 1;
        let stderr = self.dir.path().join(format!("worker-{}.err", self.spawned));
        let mut cmd = Command::new(worker_binary());
        cmd.env("FAULT_REDIS_URL", self.server.url())
            .env("FAULT_NS", &self.ns)
            .env("FAULT_LOG", &self.log)
            .env("FAULT_POLL_MS", "200");
        for (k, v) in self.extra_env.iter().chain(&spec.env) {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        (cmd, stderr)
    }

    /// Starts a worker process in a new slot; returns the slot.
    pub fn spawn(&mut self, spec: Spec) -> usize {
        let proc = self.launch(spec);
        self.procs.push(proc);
        self.procs.len() - 1
    }

    fn launch(&mut self, spec: Spec) -> Proc {
        let (mut cmd, stderr) = self.command(&spec);
        cmd.stderr(File::create(&stderr).expect("worker stderr file"));
        let child = cmd.spawn().expect("spawning the fault worker");
        Proc {
            spec,
            pid: child.id(),
            child,
            exited: false,
        }
    }

    /// Starts `n` workers with `spec` and waits until each has logged `ready`.
    pub async fn spawn_ready(&mut self, n: usize, spec: &Spec) -> Vec<usize> {
        let slots: Vec<usize> = (0..n).map(|_| self.spawn(spec.clone())).collect();
        for &slot in &slots {
            let pid = self.procs[slot].pid;
            self.wait_for(&format!("worker {pid} to be ready"), |events| {
                events.iter().any(|e| e.is_ready(pid))
            })
            .await;
        }
        slots
    }

    /// Replaces the process in `slot` by a new one with `spec` (the old one must have exited or been
    /// killed).
    pub fn respawn(&mut self, slot: usize, spec: Spec) -> u32 {
        let proc = self.launch(spec);
        let pid = proc.pid;
        let mut old = std::mem::replace(&mut self.procs[slot], proc);
        let _ = old.child.kill();
        let _ = old.child.wait();
        pid
    }

    /// SIGKILLs the worker in `slot` (recorded as a fault) and waits for it to die.
    pub fn kill9(&mut self, slot: usize) {
        let at_ms = self.redis_ms();
        let p = &mut self.procs[slot];
        let _ = p.child.kill();
        let _ = p.child.wait();
        p.exited = true;
        self.faults.push(Fault {
            kind: "kill".into(),
            pid: Some(p.pid),
            at_ms,
        });
    }

    /// SIGSTOPs the worker in `slot` (recorded as a fault).
    pub fn stop(&mut self, slot: usize) {
        let at_ms = self.redis_ms();
        let pid = self.procs[slot].pid;
        signal(pid, "-STOP");
        self.faults.push(Fault {
            kind: "stop".into(),
            pid: Some(pid),
            at_ms,
        });
    }

    /// SIGCONTs the worker in `slot`.
    pub fn resume(&mut self, slot: usize) {
        signal(self.procs[slot].pid, "-CONT");
    }

    /// Records a fault on Redis itself (taken just before it happens).
    pub fn redis_fault(&mut self, kind: &str, at_ms: i64) {
        self.faults.push(Fault {
            kind: kind.into(),
            pid: None,
            at_ms,
        });
    }

    /// Restarts every worker that has exited by itself (a crash point or a poison job), with
    /// `respec(old spec)`, recording each exit as a fault. Returns how many.
    pub fn restart_exited(&mut self, mut respec: impl FnMut(&Spec) -> Spec) -> usize {
        let mut n = 0;
        for slot in 0..self.procs.len() {
            let p = &mut self.procs[slot];
            if p.exited || p.child.try_wait().expect("try_wait").is_none() {
                continue;
            }
            let pid = p.pid;
            let spec = respec(&p.spec);
            let at_ms = self.redis_ms();
            self.faults.push(Fault {
                kind: "crash".into(),
                pid: Some(pid),
                at_ms,
            });
            self.respawn(slot, spec);
            n += 1;
        }
        n
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
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("counts: {e}"),
            }
        }
    }

    /// Whether no job is live or waiting for its dead-letter hook.
    pub async fn drained(&self) -> bool {
        match self.client.topic::<Work>().counts().await {
            Ok(c) => c.scheduled + c.ready + c.active + c.dead_pending == 0,
            Err(_) => false,
        }
    }

    /// Waits until [`Rig::drained`], for at most `limit`, calling `tick` every 50 ms meanwhile (a test
    /// injects faults or restarts crashed workers there).
    pub async fn drain_with(&mut self, limit: Duration, mut tick: impl FnMut(&mut Rig)) {
        let deadline = Instant::now() + limit;
        while !self.drained().await {
            if Instant::now() > deadline {
                let counts = self.counts().await;
                panic!(
                    "{}: not drained after {limit:?}: {counts:?}; faults so far: {}",
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
    pub fn events(&self) -> Vec<check::Event> {
        check::read_log(&self.log)
    }

    /// Waits (at most 30 s) until `cond` holds for the events logged.
    pub async fn wait_for(&self, what: &str, mut cond: impl FnMut(&[check::Event]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if cond(&self.events()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: timed out waiting for {what}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (at most 30 s) until `cond` holds, checked every 20 ms.
    pub async fn wait_until(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(
                Instant::now() < deadline,
                "{}: timed out waiting for {what}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The workers' stderr, for failure messages.
    pub fn worker_stderr(&self) -> String {
        let mut out = String::new();
        for i in 1..=self.spawned {
            let path = self.dir.path().join(format!("worker-{i}.err"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            if !tail.is_empty() {
                out.push_str(&format!("--- worker-{i}.err (last lines)\n"));
                for l in tail.into_iter().rev() {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for p in &mut self.procs {
            // A stopped process must be resumed to die promptly on some systems; SIGKILL works anyway.
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        if std::thread::panicking() {
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

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .expect("running kill");
    assert!(status.success(), "kill {sig} {pid} failed");
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
