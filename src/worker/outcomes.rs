//! A served topic's progress reports and retention of finished jobs.
//!
//! Progress: [`JobContext::progress`](crate::JobContext::progress) puts the report in the topic's
//! [`ProgressQueue`] (the latest per job) and returns; the queue's pump waits [`COALESCE`] after the
//! first report, then sends every pending one in one store call. A topic whose handlers report nothing
//! costs a parked task.
//!
//! Retention: before it claims anything the worker records the job type's retention
//! ([`Job::keep`](crate::Job::keep), or none, which also clears an older one) and trims beyond it, then
//! again every [`TRIM_EVERY`] (sooner for a short retention), in bounded steps; the same call drops
//! waiters whose time ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::shared::{ServedTopic, Shared};
use crate::store::{Progress, Retention};

/// How long the pump gathers reports before it sends them.
const COALESCE: Duration = Duration::from_millis(100);
/// Most kept jobs one retention call trims.
const TRIM_LIMIT: usize = 1000;
/// How often a topic that keeps finished jobs is trimmed (sooner for a shorter retention).
const TRIM_EVERY: Duration = Duration::from_secs(60);

/// The progress reports of one served topic's running jobs, latest per job, not yet sent.
#[derive(Debug, Default)]
pub(crate) struct ProgressQueue {
    pending: Mutex<HashMap<String, (u64, Progress)>>,
    wake: Notify,
}

impl ProgressQueue {
    /// Records `progress` for job `id` under lease `token`, replacing any report not yet sent.
    pub(crate) fn report(&self, id: &str, token: u64, progress: Progress) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let first = pending.is_empty();
        pending.insert(id.to_owned(), (token, progress));
        drop(pending);
        if first {
            self.wake.notify_one();
        }
    }

    fn take(&self) -> HashMap<String, (u64, Progress)> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Sends a topic's progress reports until the worker stops.
pub(crate) async fn progress_pump<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = topic.progress.wake.notified() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(COALESCE) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let updates: Vec<_> = topic
            .progress
            .take()
            .into_iter()
            .map(|(id, (token, progress))| ((id, token), progress))
            .collect();
        if let Err(e) = shared.store.progress(&topic.stored_as, updates).await {
            tracing::debug!(topic = topic.name, partition = topic.partition, error = %e.report(), "could not record progress; the next report goes");
        }
    }
}

/// The retention of a topic's job type, as the store takes it.
fn keep_of<S: Send + Sync + 'static>(topic: &ServedTopic<S>) -> Option<Retention> {
    topic.handler.keep().map(|k| k.retention())
}

/// Records each served topic's retention (and trims beyond it), before the worker claims anything: a
/// job that finishes is kept from the first one on.
pub(crate) async fn record_retentions<S: Send + Sync + 'static>(
    shared: &Shared<S>,
    topics: impl Iterator<Item = &Arc<ServedTopic<S>>>,
) {
    let rounds = topics.map(|topic| trim(shared, topic, keep_of(topic)));
    futures_util::future::join_all(rounds).await;
}

/// Trims kept jobs and ended waiters until the worker stops (after [`record_retentions`]).
pub(crate) async fn retention<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    mut stop: watch::Receiver<bool>,
) {
    let keep = keep_of(&topic);
    let every = keep.map_or(TRIM_EVERY, |k| {
        Duration::from_millis(k.max_age_ms / 4).clamp(Duration::from_secs(1), TRIM_EVERY)
    });
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        trim(&shared, &topic, keep).await;
    }
}

/// One round: records the retention and trims in steps of [`TRIM_LIMIT`] while a step is full.
async fn trim<S>(shared: &Shared<S>, topic: &ServedTopic<S>, keep: Option<Retention>) {
    loop {
        match shared
            .store
            .retain(&topic.stored_as, keep, TRIM_LIMIT)
            .await
        {
            Ok(n) if n as usize >= TRIM_LIMIT => continue,
            Ok(0) => return,
            Ok(n) => {
                tracing::debug!(
                    topic = topic.name,
                    partition = topic.partition,
                    trimmed = n,
                    "trimmed kept finished jobs"
                );
                return;
            }
            Err(e) => {
                tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), "could not record or trim the retention of finished jobs; retrying later");
                return;
            }
        }
    }
}
