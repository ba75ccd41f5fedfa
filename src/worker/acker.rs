//! Records outcomes in batches: one store call for all the jobs that finished meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use super::backoff::Backoff;
use super::shared::{Finished, ServedTopic, Shared};
use crate::partition::store_topic;
use crate::store::{Finish, FinishItem, FinishOutcome};

/// Most outcomes recorded in one store call.
const BATCH: usize = 512;
/// While other handlers still run, a batch smaller than [`LINGER_BELOW`] waits up to this long for
/// more outcomes, so that acknowledgements of short runs carry many jobs each (the job's slot is free
/// already: a linger delays only the record, and a lease is renewed until its record is made).
const LINGER: Duration = Duration::from_millis(1);
const LINGER_BELOW: usize = 64;

/// Takes finished jobs from `rx` and records them, retrying with backoff while the store is unreachable.
/// After `give_up` is raised (the worker is stopping and its last wait is over) a failing batch is
/// dropped with an error log: those jobs run again once their leases expire, without using an attempt.
pub(crate) async fn acker<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    mut rx: mpsc::UnboundedReceiver<Finished>,
    give_up: watch::Receiver<bool>,
) {
    let mut received = Vec::with_capacity(BATCH);
    let mut batch = Vec::with_capacity(BATCH);
    let mut tallies = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut received, BATCH).await > 0 {
        if received.len() < LINGER_BELOW && topic.in_flight.running() > 0 {
            let until = tokio::time::Instant::now() + LINGER;
            while received.len() < LINGER_BELOW {
                let room = BATCH - received.len();
                let more = rx.recv_many(&mut received, room);
                match tokio::time::timeout_at(until, more).await {
                    Ok(n) if n > 0 => {}
                    _ => break,
                }
            }
        }
        let mut in_batch = false;
        for (item, tally, batched) in received.drain(..) {
            batch.push(item);
            tallies.push(tally);
            in_batch |= batched;
        }
        let mut backoff = Backoff::new(Duration::from_millis(20));
        // After a failed try, a stale outcome may mean that the failed try was applied and only its
        // reply was lost.
        let mut tried = false;
        failpoint!(Finishing {
            topic: topic.name,
            items: &batch,
        });
        loop {
            let span = tracing::debug_span!(
                "ack",
                topic = topic.name,
                partition = topic.partition,
                jobs = batch.len()
            );
            let finish = shared.store.finish(&topic.stored_as, batch.clone());
            match finish.instrument(span).await {
                Ok(outcomes) => {
                    topic.metrics.acked(batch.len());
                    failpoint!(Finished {
                        topic: topic.name,
                        items: &batch,
                        outcomes: &outcomes,
                    });
                    wake_for_dead(&topic, &batch, &outcomes);
                    if in_batch {
                        // Its end may be recorded for its batch: delivered now, not at the next claim.
                        topic.ends_wake.notify_one();
                    }
                    hold_partitions(&shared, &topic, &batch);
                    for ((item, outcome), tally) in batch.iter().zip(outcomes).zip(&tallies) {
                        topic.in_flight.remove(&item.id, item.token);
                        topic.metrics.finished(*tally, outcome);
                        match outcome {
                            FinishOutcome::Applied => {}
                            FinishOutcome::Cancelled => {
                                tracing::info!(topic = topic.name, partition = topic.partition, job_id = %item.id, "job was cancelled; not retried")
                            }
                            FinishOutcome::Stale if tried => tracing::info!(
                                topic = topic.name, partition = topic.partition,
                                job_id = %item.id,
                                "result not recorded again: an earlier try was applied (its reply was \
                                 lost), or the lease expired meanwhile and the job was taken back"
                            ),
                            FinishOutcome::Stale => {
                                topic.metrics.lease_lost();
                                tracing::warn!(
                                topic = topic.name, partition = topic.partition,
                                job_id = %item.id,
                                "result ignored: the lease had expired and the job was taken back"
                                )
                            }
                        }
                    }
                    break;
                }
                Err(e) if *give_up.borrow() => {
                    let ids: Vec<&str> = batch.iter().map(|item| item.id.as_str()).collect();
                    tracing::error!(
                        topic = topic.name, partition = topic.partition,
                        jobs = batch.len(),
                        job_ids = ?ids,
                        error = %e.report(),
                        "could not record results before stopping; these jobs will run again after their leases"
                    );
                    break;
                }
                Err(e) => {
                    tracing::warn!(topic = topic.name, partition = topic.partition, jobs = batch.len(), error = %e.report(), "could not record results; retrying");
                    tried = true;
                    tokio::time::sleep(backoff.next()).await;
                }
            }
        }
        batch.clear();
        tallies.clear();
    }
}

/// Wakes the dead-letter pump when a job died here, so the sink runs at once. (A retry needs nothing:
/// the store hints every worker when it becomes the topic's earliest job.)
fn wake_for_dead<S: Send + Sync + 'static>(
    topic: &ServedTopic<S>,
    batch: &[FinishItem],
    outcomes: &[FinishOutcome],
) {
    let dead = batch.iter().zip(outcomes).any(|(item, outcome)| {
        matches!(
            (&item.finish, outcome),
            (Finish::Dead { .. }, FinishOutcome::Applied)
        )
    });
    if dead {
        topic.dead_wake.notify_one();
    }
}

/// A provider's limit holds the whole topic: the finish held the job's partition, and the other
/// partitions of a partitioned topic (each in its own slot) are held here, for the longest hold of the
/// batch. Best effort: a partition that cannot be held now runs on (its jobs meet the provider's limit
/// and hold it themselves).
fn hold_partitions<S: Send + Sync + 'static>(
    shared: &Arc<Shared<S>>,
    topic: &Arc<ServedTopic<S>>,
    batch: &[FinishItem],
) {
    let partitions = topic.handler.partitions();
    let longest = batch
        .iter()
        .filter_map(|item| match item.finish {
            Finish::RateLimited { delay_ms, .. } => Some(delay_ms),
            _ => None,
        })
        .max();
    let (Some(delay_ms), true) = (longest, partitions > 1) else {
        return;
    };
    let own = topic.partition.unwrap_or(0);
    for p in (0..partitions).filter(|p| *p != own) {
        let (store, name) = (shared.store.clone(), topic.name);
        tokio::spawn(async move {
            let stored = store_topic(name, p);
            if let Err(e) = store.hold(&stored, delay_ms).await {
                tracing::warn!(topic = name, partition = p, error = %e.report(), "could not hold this partition for a provider's rate limit");
            }
        });
    }
}
