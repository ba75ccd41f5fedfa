//! Hands dead jobs to the dead-letter sink, at least once each, and trims the delivered ones.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::shared::{ServedTopic, Shared};
use crate::dead_letter::DeadLetter;
use crate::store::TrimPolicy;
use crate::time::millis;

/// How long one sink call may take before it counts as failed.
const SINK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long dead jobs taken by this worker stay hidden from other workers' pumps.
const SINK_LEASE: Duration = Duration::from_secs(120);
/// Dead jobs taken per store call.
const BATCH: usize = 16;
/// Most delivered dead jobs trimmed per round.
const TRIM_LIMIT: usize = 1000;

fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1 << failures.min(8)).min(Duration::from_secs(300))
}

/// Runs whenever the claim loop reports dead jobs waiting for the sink (and once at start).
pub(crate) async fn pump<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut failures: HashMap<String, u32> = HashMap::new();
    topic.dead_wake.notify_one();
    loop {
        tokio::select! {
            _ = topic.dead_wake.notified() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        loop {
            let entries = match shared
                .store
                .dead_claim(&topic.stored_as, BATCH, millis(SINK_LEASE))
                .await
            {
                Ok(entries) if !entries.is_empty() => entries,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), "could not read dead jobs for the sink");
                    break;
                }
            };
            let mut delivered = Vec::with_capacity(entries.len());
            for entry in entries {
                let dead = DeadLetter::from_entry(topic.name, entry);
                let result = tokio::time::timeout(SINK_TIMEOUT, shared.sink.deliver(&dead)).await;
                match result {
                    Ok(Ok(())) => {
                        failures.remove(&dead.id);
                        delivered.push(dead.id);
                    }
                    Ok(Err(e)) => {
                        retry(&shared, &topic, &mut failures, &dead.id, &e.to_string()).await
                    }
                    Err(_) => retry(&shared, &topic, &mut failures, &dead.id, "timed out").await,
                }
            }
            if delivered.is_empty() {
                continue;
            }
            if let Err(e) = shared.store.dead_ack(&topic.stored_as, &delivered).await {
                tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), "could not mark dead jobs delivered; the sink will see them again");
                continue;
            }
            // Ages are judged by the store's clock, like every other time: a worker whose own clock is
            // off must not trim dead jobs early.
            let policy = TrimPolicy::new(
                Some(shared.config.dead_max_age),
                Some(shared.config.dead_keep),
            );
            match shared
                .store
                .dead_trim(&topic.stored_as, policy, TRIM_LIMIT)
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    topic = topic.name,
                    partition = topic.partition,
                    trimmed = n,
                    "trimmed delivered dead jobs"
                ),
                Err(e) => {
                    tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), "could not trim dead jobs")
                }
            }
        }
    }
}

async fn retry<S: Send + Sync + 'static>(
    shared: &Shared<S>,
    topic: &ServedTopic<S>,
    failures: &mut HashMap<String, u32>,
    id: &str,
    error: &str,
) {
    let n = failures.entry(id.to_owned()).or_insert(0);
    *n += 1;
    let delay = backoff(*n);
    tracing::warn!(topic = topic.name, partition = topic.partition, job_id = %id, error, retry_in = ?delay, "dead-letter sink failed; will retry");
    if let Err(e) = shared
        .store
        .dead_retry(&topic.stored_as, id, millis(delay))
        .await
    {
        tracing::warn!(topic = topic.name, partition = topic.partition, job_id = %id, error = %e.report(), "could not reschedule the sink call; it comes back after its lease");
    }
}
