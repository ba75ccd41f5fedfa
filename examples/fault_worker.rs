//! The worker process of the fault suite (`tests/fault_*.rs`): a real process that the tests kill, pause,
//! crash, skew and restart. Not a usage example.
//!
//! Configured by environment variables:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `FAULT_REDIS_URL` | Redis to work on | required |
//! | `FAULT_NS` | namespace | required |
//! | `FAULT_LOG` | event log directory, shared by every process of a test | required |
//! | `FAULT_LEASE_MS` | lease | 500 |
//! | `FAULT_CONCURRENCY` | handlers at once | 8 |
//! | `FAULT_POLL_MS` | idle poll interval | 250 |
//! | `FAULT_STALL_LIMIT` | expired leases before a job is dead-lettered as stalled | 3 |
//! | `FAULT_TIMEOUT_MS` | Redis response timeout | 1000 |
//! | `FAULT_CRASH` | `after-claim:N` or `before-ack:N`: abort at the Nth claim / acknowledgement batch | none |
//! | `FAULT_FAIL` | `1`: every handler fails (a retry) after its work | off |
//! | `FAULT_RATE` | `<jobs>/<ms>`: the topic's rate limit across workers | none |
//! | `FAULT_KEY_MAX` | most jobs of one tenant running at once across workers (0: none) | 0 |
//! | `FAULT_KEY_RATE` | `<jobs>/<ms>`: the rate limit of each tenant across workers | none |
//! | `FAULT_KEYS` | `1`: run [`Tenant`] jobs even with neither limit per key | off |
//!
//! Jobs are [`Work`] on topic `fault.work`: sleep `sleep_ms` (heartbeats keep the lease), abort the
//! process when `abort` is set (a poison job), return a provider's rate limit of `hold_ms` the first
//! time any process runs a job with `hold_ms` set (a file `held` in the log directory says it did), then
//! succeed. With `FAULT_KEY_MAX`, `FAULT_KEY_RATE` or `FAULT_KEYS` set, the worker also runs [`Tenant`]
//! jobs on topic `fault.tenant` under those limits per key, if any (a tenant's jobs have its key for fairness): sleep
//! `sleep_ms`, then succeed, logging `start` and `finish` as `Work` does. Every event is one line,
//! written with a
//! single `write` to `<FAULT_LOG>/<pid>.log`. One file per process: a process killed in the middle of a
//! write can leave a torn line (Linux stops a write at a page boundary when a fatal signal is pending),
//! and that line is then the last of its own file instead of being glued to another process's line.
//! Ids are percent-encoded so that they hold no spaces:
//!
//! ```text
//! ready <pid> <redis ms> <local ms>
//! claim <id> <token> <pid> <claim redis ms> <due ms>
//! start <id> <attempt> <pid> <redis ms at handler start> <due ms>
//! finish <id> <attempt> <pid> <redis ms>          (the handler is about to return Ok)
//! fail <id> <attempt> <pid>                        (the handler is about to return an error)
//! ack <id> <token> <pid> <done|retry|dead> <applied|cancelled|stale>
//! dead <id> <pid> <reason>                         (the dead-letter hook ran)
//! crash <point> <pid> <local ms>
//! ```

use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use postpone::__private::failpoint::{self, Point};
use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::{Finish, FinishOutcome};
use postpone::{sink_fn, Client, Job, JobContext, JobError, KeyLimits, RateLimit, Worker};
use serde::{Deserialize, Serialize};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The fault suite's job.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "fault.work", retry = ["0", "0", "50ms", "50ms", "50ms"])]
struct Work {
    /// How long the handler works.
    #[serde(default)]
    sleep_ms: u64,
    /// A poison job: the handler aborts the process.
    #[serde(default)]
    abort: bool,
    /// Filler (hostile-input tests send big strings).
    #[serde(default)]
    text: String,
    /// The first run (of any such job, in any process) returns a provider's rate limit of this long.
    #[serde(default)]
    hold_ms: u64,
}

/// A tenant's job (see the limits per key above): its key for fairness is its tenant.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "fault.tenant", key = "tenant")]
struct Tenant {
    tenant: String,
    /// How long the handler works.
    #[serde(default)]
    sleep_ms: u64,
}

static LOG: OnceLock<File> = OnceLock::new();
static HELD: OnceLock<String> = OnceLock::new();
static CRASH: OnceLock<(String, u64)> = OnceLock::new();
static CLAIMS: AtomicU64 = AtomicU64::new(0);
static ACKS: AtomicU64 = AtomicU64::new(0);

/// This process's clock (ms), to place a crash on the Redis clock via the `ready` line.
fn local_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn pid() -> u32 {
    std::process::id()
}

/// Appends one line with one `write`.
fn log(line: String) {
    let mut line = line;
    line.push('\n');
    let mut file = LOG.get().expect("log opened");
    file.write_all(line.as_bytes())
        .expect("writing the fault log");
}

/// Percent-encodes everything but `[A-Za-z0-9_.:-]`.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn env_u64(name: &str, default: u64) -> u64 {
    env(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
    })
}

fn crash_at(point: &str) {
    let Some((at, n)) = CRASH.get() else { return };
    if at != point {
        return;
    }
    let seen = match point {
        "after-claim" => CLAIMS.fetch_add(1, Ordering::SeqCst) + 1,
        _ => ACKS.fetch_add(1, Ordering::SeqCst) + 1,
    };
    if seen == *n {
        log(format!("crash {point} {} {}", pid(), local_ms()));
        std::process::abort();
    }
}

fn hook(point: &Point<'_>) {
    match point {
        Point::Claiming { token, .. } => {
            log(format!("claiming {token} {} {}", pid(), local_ms()));
        }
        Point::Claimed {
            jobs: [], token, ..
        } => {
            log(format!("replied {token} {}", pid()));
        }
        Point::Claimed { now_ms, jobs, .. } => {
            for j in jobs.iter() {
                log(format!(
                    "claim {} {} {} {now_ms} {}",
                    esc(&j.id),
                    j.token,
                    pid(),
                    j.due_at_ms
                ));
            }
            crash_at("after-claim");
        }
        Point::Finishing { .. } => crash_at("before-ack"),
        Point::Finished {
            items, outcomes, ..
        } => {
            for (item, outcome) in items.iter().zip(outcomes.iter()) {
                let kind = match item.finish {
                    Finish::Done => "done",
                    Finish::Retry { .. } => "retry",
                    Finish::Dead { .. } => "dead",
                    _ => "other",
                };
                let outcome = match outcome {
                    FinishOutcome::Applied => "applied",
                    FinishOutcome::Cancelled => "cancelled",
                    FinishOutcome::Stale => "stale",
                    _ => "other",
                };
                log(format!(
                    "ack {} {} {} {kind} {outcome}",
                    esc(&item.id),
                    item.token,
                    pid()
                ));
            }
        }
        _ => {}
    }
}

/// The Redis clock, or -1 when Redis does not answer.
async fn redis_now(client: &Client) -> i64 {
    for _ in 0..3 {
        if let Ok(ms) = client.store().now_ms().await {
            return ms;
        }
    }
    -1
}

/// Logs a handler's start; returns its id (escaped) and attempt.
async fn log_start(ctx: &JobContext, state: &State) -> (String, u32) {
    let now = redis_now(&state.client).await;
    let (id, attempt) = (esc(ctx.id()), ctx.attempt());
    log(format!(
        "start {id} {attempt} {} {now} {}",
        pid(),
        ctx.due_at().timestamp_millis()
    ));
    (id, attempt)
}

async fn work(job: Work, ctx: JobContext, state: Arc<State>) -> Result<(), JobError> {
    let (id, attempt) = log_start(&ctx, &state).await;
    if job.sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(job.sleep_ms)).await;
    }
    if job.abort {
        log(format!("crash poison {} {}", pid(), local_ms()));
        std::process::abort();
    }
    if job.hold_ms > 0 {
        let first = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(HELD.get().expect("set in main"))
            .is_ok();
        if first {
            log(format!("fail {id} {attempt} {}", pid()));
            return Err(JobError::rate_limited(Duration::from_millis(job.hold_ms)));
        }
    }
    if state.fail {
        log(format!("fail {id} {attempt} {}", pid()));
        return Err(JobError::msg("FAULT_FAIL is set"));
    }
    let now = redis_now(&state.client).await;
    log(format!("finish {id} {attempt} {} {now}", pid()));
    Ok(())
}

async fn tenant_work(job: Tenant, ctx: JobContext, state: Arc<State>) -> Result<(), JobError> {
    let (id, attempt) = log_start(&ctx, &state).await;
    if job.sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(job.sleep_ms)).await;
    }
    let now = redis_now(&state.client).await;
    log(format!("finish {id} {attempt} {} {now}", pid()));
    Ok(())
}

/// `<jobs>/<ms>` from variable `name`.
fn rate_of(name: &str) -> Option<RateLimit> {
    let rate = env(name)?;
    let (jobs, per) = rate
        .split_once('/')
        .and_then(|(j, p)| Some((j.parse().ok()?, p.parse().ok()?)))
        .unwrap_or_else(|| panic!("{name} must be <jobs>/<ms>, not {rate:?}"));
    Some(RateLimit::new(jobs, Duration::from_millis(per)))
}

struct State {
    client: Client,
    fail: bool,
}

#[tokio::main]
async fn main() {
    // RUST_LOG as a list of `target=level` (tracing-subscriber's `Targets`, which needs no regex crate);
    // colours only on a terminal: the fault tests send stderr to a file.
    let filter: Targets = env("RUST_LOG")
        .and_then(|spec| spec.parse().ok())
        .unwrap_or_else(|| Targets::new().with_target("postpone", tracing::Level::WARN));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal()),
        )
        .with(filter)
        .init();
    let need = |name: &str| env(name).unwrap_or_else(|| panic!("{name} is required"));
    let url = need("FAULT_REDIS_URL");
    let ns = need("FAULT_NS");
    let log_path = format!("{}/{}.log", need("FAULT_LOG"), pid());
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .unwrap_or_else(|e| panic!("opening {log_path}: {e}"));
    LOG.set(file).expect("log set once");
    HELD.set(format!("{}/held", need("FAULT_LOG")))
        .expect("set once");
    if let Some(spec) = env("FAULT_CRASH") {
        let (point, n) = spec
            .split_once(':')
            .and_then(|(p, n)| Some((p.to_owned(), n.parse::<u64>().ok()?)))
            .filter(|(p, _)| p == "after-claim" || p == "before-ack")
            .unwrap_or_else(|| panic!("FAULT_CRASH must be after-claim:N or before-ack:N"));
        CRASH.set((point, n)).expect("crash set once");
    }
    failpoint::set_hook(hook);

    let options = RedisOptions::new(ns.as_str())
        .response_timeout(Duration::from_millis(env_u64("FAULT_TIMEOUT_MS", 1000)))
        .connect_timeout(Duration::from_millis(env_u64("FAULT_TIMEOUT_MS", 1000)));
    // Redis may be restarting when a worker starts: keep trying, like a supervised service would.
    let store = loop {
        match RedisStore::connect_with(&url, options.clone()).await {
            Ok(store) => break store,
            Err(e) => {
                eprintln!("fault_worker: connect failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let client = Client::builder().store(store);
    let state = Arc::new(State {
        client: client.clone(),
        fail: env("FAULT_FAIL").as_deref() == Some("1"),
    });
    let sink = sink_fn(|dead| async move {
        log(format!(
            "dead {} {} {}",
            esc(&dead.id),
            pid(),
            esc(&dead.reason)
        ));
        Ok(())
    });
    let worker = Worker::with_state(&client, state).handle(work);
    let worker = match rate_of("FAULT_RATE") {
        Some(rate) => worker.rate_limit::<Work>(rate.jobs(), rate.per()),
        None => worker,
    };
    let mut key_limits = KeyLimits::new().max_running(env_u64("FAULT_KEY_MAX", 0) as u32);
    if let Some(rate) = rate_of("FAULT_KEY_RATE") {
        key_limits = key_limits.rate(rate);
    }
    let worker = if !key_limits.is_none() {
        worker.handle(tenant_work).key_limits::<Tenant>(key_limits)
    } else if env("FAULT_KEYS").as_deref() == Some("1") {
        worker.handle(tenant_work)
    } else {
        worker
    };
    let worker = worker
        .concurrency(env_u64("FAULT_CONCURRENCY", 8) as usize)
        .lease(Duration::from_millis(env_u64("FAULT_LEASE_MS", 500)))
        .poll_interval(Duration::from_millis(env_u64("FAULT_POLL_MS", 250)))
        .stall_limit(env_u64("FAULT_STALL_LIMIT", 3) as u32)
        .shutdown_grace(Duration::from_secs(5))
        .dead_letter_sink(sink)
        .build()
        .expect("worker config");
    let now = redis_now(&client).await;
    log(format!("ready {} {now} {}", pid(), local_ms()));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    worker
        .run_until(async move { term.recv().await })
        .await
        .expect("worker run");
}
