//! The job types and handlers the browser tests enqueue and run, and small helpers.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use postpone::{Job, JobContext, JobError, ShutdownHandle, Worker};
use serde::{Deserialize, Serialize};

use crate::support::Harness;

/// A timer far in the future: counts to watch.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "live.timers", retry = ["0", "0", "1m", "10m"])]
pub(crate) struct Timer {
    pub(crate) n: u32,
}

/// A webhook whose partner times out while `fail` is set; one attempt, then the dead letters.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "flaky.hooks", retry = ["0", "0"])]
pub(crate) struct Hook {
    pub(crate) seconds: u32,
}

/// A payload made to be dangerous; its handler fails with a dangerous error.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "xss.payloads", retry = ["0", "0"])]
pub(crate) struct Evil {
    pub(crate) html: String,
}

/// A job whose runs are counted.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "pause.jobs")]
pub(crate) struct Counted {
    pub(crate) n: u32,
}

/// A mail whose handler fails with the error its payload names; one attempt, then the dead letters.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "mail.bounces", retry = ["0", "0"])]
pub(crate) struct Bounce {
    pub(crate) error: String,
}

pub(crate) const XSS: &str = "<script>alert(1)</script>";

#[derive(Clone, Default)]
pub(crate) struct Flags {
    pub(crate) fail: Arc<AtomicBool>,
    pub(crate) ran_ok: Arc<AtomicU32>,
}

pub(crate) async fn hook(job: Hook, _ctx: JobContext, flags: Flags) -> Result<(), JobError> {
    if flags.fail.load(Ordering::SeqCst) {
        return Err(JobError::msg(format!("timeout after {}s", job.seconds)));
    }
    flags.ran_ok.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

pub(crate) async fn evil(job: Evil, _ctx: JobContext, _flags: Flags) -> Result<(), JobError> {
    Err(JobError::msg(format!("partner said {}", job.html)))
}

pub(crate) async fn bounce(job: Bounce, _ctx: JobContext, _flags: Flags) -> Result<(), JobError> {
    Err(JobError::msg(job.error))
}

pub(crate) async fn timer(_job: Timer, _ctx: JobContext, flags: Flags) -> Result<(), JobError> {
    flags.ran_ok.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

pub(crate) async fn counted(_job: Counted, _ctx: JobContext, flags: Flags) -> Result<(), JobError> {
    flags.ran_ok.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

pub(crate) fn worker(h: &Harness, flags: &Flags) -> ShutdownHandle {
    let worker = Worker::with_state(&h.client, flags.clone())
        .handle(hook)
        .handle(evil)
        .handle(counted)
        .handle(timer)
        .handle(bounce)
        .build()
        .expect("a worker");
    let shutdown = worker.shutdown_handle();
    tokio::spawn(worker.run());
    shutdown
}

pub(crate) async fn counts(h: &Harness, topic: &str) -> postpone::TopicCounts {
    h.client
        .ops()
        .topics()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == topic)
        .map(|t| t.counts)
        .unwrap_or_default()
}

/// A CSS selector for a live figure of a topic.
pub(crate) fn live(field: &str, topic: &str) -> String {
    format!("[data-live=\"{field}\"][data-topic=\"{topic}\"]")
}
