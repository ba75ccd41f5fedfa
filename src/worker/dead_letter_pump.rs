//! Hands dead jobs to the dead-letter sink, at least once per death, and trims the delivered ones.
//!
//! A sink that fails, times out or panics is retried for that death with backoff; the other deaths of
//! the batch are delivered beside it, and the pump carries on.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::FutureExt;
use tokio::sync::watch;

use super::execute::panic_message;
use super::shared::{ServedTopic, Shared};
use crate::dead_letter::DeadLetter;
use crate::store::{Death, TrimPolicy};
use crate::time::millis;

/// How long one sink call may take before it counts as failed.
const SINK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long dead jobs taken by this worker stay hidden from other workers' pumps.
const SINK_LEASE: Duration = Duration::from_secs(120);
/// Dead jobs taken per store call (and handed to the sink at once).
const BATCH: usize = 16;
/// Most delivered dead jobs trimmed per round.
const TRIM_LIMIT: usize = 1000;

fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1 << failures.min(8)).min(Duration::from_secs(300))
}

/// Calls the sink for one dead letter: Ok, or why it failed (an error, a timeout, a panic).
async fn deliver<S>(shared: &Shared<S>, dead: &DeadLetter) -> Result<(), String> {
    let call = AssertUnwindSafe(shared.sink.deliver(dead)).catch_unwind();
    match tokio::time::timeout(SINK_TIMEOUT, call).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(e.to_string()),
        Ok(Err(panic)) => Err(format!("the sink panicked: {}", panic_message(panic))),
        Err(_) => Err(format!("the sink did not return within {SINK_TIMEOUT:?}")),
    }
}

/// Runs whenever the claim loop reports dead jobs waiting for the sink (and once at start).
pub(crate) async fn pump<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut failures: HashMap<Death, u32> = HashMap::new();
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
            let letters: Vec<(Death, DeadLetter)> = entries
                .into_iter()
                .map(|e| (e.death(), DeadLetter::from_entry(topic.name, e)))
                .collect();
            let results = join_all(letters.iter().map(|(_, dead)| deliver(&shared, dead))).await;
            let mut delivered = Vec::with_capacity(letters.len());
            for ((death, _), result) in letters.into_iter().zip(results) {
                topic.metrics.dead_letter(result.is_ok());
                match result {
                    Ok(()) => {
                        failures.remove(&death);
                        delivered.push(death);
                    }
                    Err(error) => retry(&shared, &topic, &mut failures, death, &error).await,
                }
            }
            if delivered.is_empty() {
                continue;
            }
            if let Err(e) = shared.store.dead_ack(&topic.stored_as, &delivered).await {
                tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), "could not mark dead jobs delivered; the sink will see them again");
                continue;
            }
            trim(&shared, &topic).await;
        }
    }
}

/// Deletes delivered dead jobs beyond the retention. Ages are judged by the store's clock, like every
/// other time: a worker whose own clock is off must not trim dead jobs early.
async fn trim<S>(shared: &Shared<S>, topic: &ServedTopic<S>) {
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

/// Hands a death whose sink call failed back to the store, due again after a backoff that grows with
/// its failures (counted here, and in the warning).
async fn retry<S>(
    shared: &Shared<S>,
    topic: &ServedTopic<S>,
    failures: &mut HashMap<Death, u32>,
    death: Death,
    error: &str,
) {
    let n = failures.entry(death.clone()).or_insert(0);
    *n += 1;
    let delay = backoff(*n);
    tracing::warn!(topic = topic.name, partition = topic.partition, job_id = %death.id, death = death.seq, failures = *n, error, retry_in = ?delay, "dead-letter sink failed; will retry");
    if let Err(e) = shared
        .store
        .dead_retry(&topic.stored_as, &death, millis(delay))
        .await
    {
        tracing::warn!(topic = topic.name, partition = topic.partition, job_id = %death.id, death = death.seq, error = %e.report(), "could not reschedule the sink call; it comes back after its lease");
    }
}
