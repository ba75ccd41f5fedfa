//! The registry of live workers: what each worker writes about itself at every heartbeat, and what
//! operators read back.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::WorkerBeat;
use crate::time::ms_to_time;

/// A live worker process, as its heartbeat last described it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// The worker's id (14 hex digits), also named by the leases it holds.
    pub id: String,
    /// Its host name.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The postpone version it runs.
    pub version: String,
    /// The topics it serves.
    pub topics: Vec<WorkerTopic>,
    /// Most handlers it runs at once, over all its topics.
    pub concurrency: usize,
    /// Handlers running at its last heartbeat.
    pub running: usize,
    /// A job whose lease expires more than this many times is dead-lettered.
    pub stall_limit: u32,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat (by the store's clock).
    pub last_beat: DateTime<Utc>,
    /// When it counts as gone unless it beats again (a few heartbeats after the last).
    pub expires_at: DateTime<Utc>,
}

/// A topic a worker serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkerTopic {
    /// The topic's name.
    pub name: String,
    /// Its partitions.
    pub partitions: u16,
    /// Its retry schedule, delays in ms indexed by attempt (slot 0 unused).
    pub retry_ms: Vec<u64>,
    /// Its lease, in ms.
    pub lease_ms: u64,
}

impl WorkerTopic {
    pub(crate) fn new(name: String, partitions: u16, retry_ms: Vec<u64>, lease_ms: u64) -> Self {
        WorkerTopic {
            name,
            partitions,
            retry_ms,
            lease_ms,
        }
    }
}

/// What a worker writes at each heartbeat (JSON): [`WorkerInfo`] without what the store adds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Presence {
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) version: String,
    pub(crate) topics: Vec<WorkerTopic>,
    pub(crate) concurrency: usize,
    pub(crate) running: usize,
    pub(crate) stall_limit: u32,
    pub(crate) started_at_ms: i64,
}

impl Presence {
    /// This process's host name: `$HOSTNAME`, else the kernel's, else `"unknown"`.
    pub(crate) fn host_name() -> String {
        std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_owned())
    }
}

/// A worker's id from the holder number its claims carry (see
/// [`ClaimRequest::holder`](crate::store::ClaimRequest::holder)).
pub(crate) fn worker_id(holder: u64) -> String {
    format!("{holder:014x}")
}

impl WorkerInfo {
    /// A registry entry, read back; `None` when it is not JSON this crate wrote.
    pub(crate) fn from_beat(beat: WorkerBeat) -> Option<WorkerInfo> {
        let p: Presence = serde_json::from_str(&beat.info).ok()?;
        Some(WorkerInfo {
            id: beat.id,
            host: p.host,
            pid: p.pid,
            version: p.version,
            topics: p.topics,
            concurrency: p.concurrency,
            running: p.running,
            stall_limit: p.stall_limit,
            started_at: ms_to_time(p.started_at_ms),
            last_beat: ms_to_time(beat.beat_at_ms),
            expires_at: ms_to_time(beat.expires_at_ms),
        })
    }

    /// Whether it serves `topic`.
    pub fn serves(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| t.name == topic)
    }
}
