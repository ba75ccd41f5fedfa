//! The heartbeat: renews the leases of the jobs whose handlers run on this worker, and tells those
//! handlers when their job was cancelled or their lease lost. A job whose handler has returned is not
//! renewed: its acknowledgement may end the lease at any moment, and a lease it ended is no loss.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::backoff::Backoff;
use super::shared::{ServedTopic, Shared};
use crate::handler::StopReason;
use crate::store::{ClaimRequest, LeaseStatus};

/// Renews this worker's leases every third of the lease (sooner after a failed renewal), tells handlers when their job was cancelled or
/// their lease lost, and sweeps expired leases while every slot is busy (when the claim loop does not).
pub(crate) async fn heartbeat<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    mut stop: watch::Receiver<bool>,
) {
    let every = Duration::from_millis((topic.lease_ms / 3).max(3));
    // After a failed renewal the next try comes sooner (within `backoff::MAX`), so that a lease
    // survives an outage shorter than what is left of it.
    let mut backoff = Backoff::new(Duration::from_millis(50));
    let mut wait = every;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        wait = every;
        let leases = topic.in_flight.leases();
        if !leases.is_empty() {
            match shared
                .store
                .extend(&topic.stored_as, &leases, topic.lease_ms)
                .await
            {
                Ok(statuses) => {
                    backoff.reset();
                    let renewed = statuses.iter().filter(|s| **s != LeaseStatus::Lost).count();
                    topic.metrics.leases_renewed(renewed);
                    for ((id, token), status) in leases.iter().zip(statuses) {
                        match status {
                            LeaseStatus::Held => {}
                            LeaseStatus::Cancelled => {
                                topic.in_flight.stop(id, *token, StopReason::Cancelled)
                            }
                            LeaseStatus::Lost if topic.in_flight.lease_lost(id, *token) => {
                                topic.metrics.lease_lost();
                                tracing::warn!(topic = topic.name, partition = topic.partition, job_id = %id, "lease lost: the job may run elsewhere; this run's result will be ignored");
                            }
                            // The handler returned meanwhile, and its acknowledgement ended the lease.
                            LeaseStatus::Lost => {
                                tracing::debug!(topic = topic.name, partition = topic.partition, job_id = %id, "lease ended by the job's acknowledgement");
                            }
                        }
                    }
                }
                Err(e) => {
                    wait = backoff.next().min(every);
                    tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), retry_in = ?wait, "could not renew leases; retrying")
                }
            }
        }
        if topic.saturated.load(Ordering::Relaxed) {
            let request = ClaimRequest::new(
                0,
                topic.lease_ms,
                shared.config.sweep_limit,
                shared.config.stall_limit,
            )
            .holder(shared.holder);
            if let Ok(batch) = shared.store.claim(&topic.stored_as, request).await {
                topic.metrics.store_time(batch.now_us);
                topic.metrics.swept(batch.swept, batch.swept_dead);
                if batch.dead_pending {
                    topic.dead_wake.notify_one();
                }
                if batch.ends_pending {
                    topic.ends_wake.notify_one();
                }
            }
        }
    }
}
