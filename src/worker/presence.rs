//! The worker's entry in the registry of live workers (see [`crate::ops::Ops::workers`]), and its
//! topics in the registry of topics: written at start and then every [`Beat::every`], alive for a few
//! beats, removed at shutdown. A worker that dies leaves it to expire. Neither registry is needed to
//! run jobs: a worker whose registries cannot be written (on a Redis Cluster, the namespace's slot may
//! be on a master that is down) runs all the same, and writes them once it can.

use std::sync::Arc;
use std::time::Duration;

use super::shared::Shared;
use crate::ops::Presence;
use crate::time::{millis, system_now_ms};

/// A worker entry lives this many beats: a worker that stops beating is gone after about that long.
const BEATS_TO_LIVE: u32 = 3;
/// Beats are at most this far apart (sooner with short leases, so tests see workers come and go fast).
const MAX_EVERY: Duration = Duration::from_secs(5);
/// ... and at least this far.
const MIN_EVERY: Duration = Duration::from_millis(100);

/// What a worker says about itself, and how often.
pub(crate) struct Beat {
    pub(crate) id: String,
    pub(crate) presence: Presence,
    pub(crate) every: Duration,
    /// Topics not yet recorded in the registry of topics.
    unregistered: Vec<(String, u16)>,
}

impl Beat {
    /// The beat of a worker whose shortest lease is `lease`.
    pub(crate) fn new(id: String, presence: Presence, lease: Duration) -> Self {
        let unregistered = presence
            .topics
            .iter()
            .map(|t| (t.name.clone(), t.partitions))
            .collect();
        Beat {
            id,
            presence,
            every: (lease / 3).clamp(MIN_EVERY, MAX_EVERY),
            unregistered,
        }
    }

    /// Records the topics not yet recorded, then writes the worker's entry.
    pub(crate) async fn once<S>(&mut self, shared: &Shared<S>) -> crate::Result<()> {
        while let Some((topic, partitions)) = self.unregistered.last() {
            shared.store.register_topic(topic, *partitions).await?;
            self.unregistered.pop();
        }
        self.presence.running = shared.jobs.running();
        let info = serde_json::to_string(&self.presence).unwrap_or_default();
        let ttl = millis(self.every * BEATS_TO_LIVE);
        shared.store.worker_beat(&self.id, &info, ttl).await
    }
}

/// Beats until the task is aborted at shutdown (then `run` removes the entry).
pub(crate) async fn beat<S: Send + Sync + 'static>(shared: Arc<Shared<S>>, mut beat: Beat) {
    loop {
        tokio::time::sleep(beat.every).await;
        if let Err(e) = beat.once(&shared).await {
            tracing::debug!(error = %e.report(), "could not write the worker's registry entry; retrying at the next beat");
        }
    }
}

/// This process's description, at start.
pub(crate) fn presence_now(
    topics: Vec<crate::ops::WorkerTopic>,
    concurrency: usize,
    stall_limit: u32,
) -> Presence {
    Presence {
        host: Presence::host_name(),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        topics,
        concurrency,
        running: 0,
        stall_limit,
        started_at_ms: system_now_ms(),
    }
}
