//! The worker process of the periodic acceptance test (`tests/periodic_processes.rs`): a real process
//! that the test runs three times over, and kills. Not a usage example (see the guide's `docs/guide/periodic.md`).
//!
//! Configured by environment variables: `PERIODIC_REDIS_URL` (required), `PERIODIC_NS` (namespace,
//! required), `PERIODIC_LOG` (a directory shared by the test's processes, required).
//!
//! It runs schedule `each-second` (every second, up to 10 missed ticks run) on topic `periodic.tick`,
//! and handles that topic. Each
//! handler start is one line, written with a single `write` to `<PERIODIC_LOG>/<pid>.log` (one file per
//! process, so that a line torn by a kill is the last of its own file):
//!
//! ```text
//! ready <pid>
//! start <job id> <tick ms> <due ms> <pid>
//! ```

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postpone::store::redis::RedisStore;
use postpone::{Client, Job, JobContext, JobError, Missed, Periodic, Worker};
use serde::{Deserialize, Serialize};

/// One tick's job.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "periodic.tick")]
struct Tick {
    at_ms: i64,
}

type Log = Arc<Mutex<std::fs::File>>;

fn line(log: &Log, text: String) {
    let mut file = log.lock().unwrap_or_else(|p| p.into_inner());
    let _ = file.write_all(text.as_bytes());
}

async fn tick(job: Tick, ctx: JobContext, log: Log) -> Result<(), JobError> {
    let due = ctx.due_at().timestamp_millis();
    let pid = std::process::id();
    line(
        &log,
        format!("start {} {} {due} {pid}\n", ctx.id(), job.at_ms),
    );
    Ok(())
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is required"))
}

#[tokio::main]
async fn main() -> postpone::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .init();
    let store = RedisStore::connect(&env("PERIODIC_REDIS_URL"), &env("PERIODIC_NS")).await?;
    let client = Client::builder().store(store);
    let path =
        std::path::Path::new(&env("PERIODIC_LOG")).join(format!("{}.log", std::process::id()));
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("the log file");
    let log: Log = Arc::new(Mutex::new(file));
    // Up to 10 missed ticks run: a machine too loaded to wake any of the three processes within a
    // second must not look like a lost tick here (the default, skipping them, is tested on a manual
    // clock in tests/periodic_catch_up.rs).
    let each_second = Periodic::every("each-second", Duration::from_secs(1))?
        .missed(Missed::UpTo(10))
        .job(|tick| Tick {
            at_ms: tick.timestamp_millis(),
        });
    let worker = Worker::with_state(&client, log.clone())
        .handle(tick)
        .periodic(each_second)
        .lease(Duration::from_millis(1000))
        .poll_interval(Duration::from_millis(250))
        .build()?;
    line(&log, format!("ready {}\n", std::process::id()));
    worker.run_until(tokio::signal::ctrl_c()).await
}
