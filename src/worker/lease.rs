//! Jobs this worker holds, and the heartbeat that renews their leases.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::AbortHandle;
use tokio::sync::watch;

use super::runtime::{Shared, TopicRt};
use crate::handler::{StopReason, StopSender};
use crate::store::{ClaimRequest, LeaseStatus};

struct Entry {
    token: u64,
    stop: StopSender,
    abort: AbortHandle,
}

/// The jobs of one topic that this worker is running, by id.
#[derive(Default)]
pub(crate) struct InFlight {
    map: Mutex<HashMap<String, Entry>>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn insert(&self, id: String, token: u64, stop: StopSender, abort: AbortHandle) {
        self.lock().insert(id, Entry { token, stop, abort });
    }

    /// Forgets a job once its outcome is recorded (only the claim with this token).
    pub(crate) fn remove(&self, id: &str, token: u64) {
        let mut map = self.lock();
        if map.get(id).is_some_and(|e| e.token == token) {
            map.remove(id);
        }
    }

    pub(crate) fn leases(&self) -> Vec<(String, u64)> {
        self.lock()
            .iter()
            .map(|(id, e)| (id.clone(), e.token))
            .collect()
    }

    fn stop(&self, id: &str, token: u64, reason: StopReason) {
        if let Some(e) = self.lock().get(id).filter(|e| e.token == token) {
            e.stop.stop(reason);
        }
    }

    /// Stops every running handler (end of the shutdown grace period); returns how many.
    pub(crate) fn abort_all(&self) -> usize {
        let map = self.lock();
        for e in map.values() {
            e.abort.abort();
        }
        map.len()
    }
}

/// Renews this worker's leases every third of the lease, tells handlers when their job was cancelled or
/// their lease lost, and sweeps expired leases while every slot is busy (when the claim loop does not).
pub(crate) async fn heartbeat<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<TopicRt<S>>,
    mut stop: watch::Receiver<bool>,
) {
    let every = Duration::from_millis((topic.lease_ms / 3).max(3));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let leases = topic.inflight.leases();
        if !leases.is_empty() {
            match shared
                .store
                .extend(&topic.stored_as, &leases, topic.lease_ms)
                .await
            {
                Ok(statuses) => {
                    for ((id, token), status) in leases.iter().zip(statuses) {
                        match status {
                            LeaseStatus::Held => {}
                            LeaseStatus::Cancelled => {
                                topic.inflight.stop(id, *token, StopReason::Cancelled)
                            }
                            LeaseStatus::Lost => {
                                tracing::warn!(topic = topic.name, partition = topic.partition, job_id = %id, "lease lost: the job may run elsewhere; this run's result will be ignored");
                                topic.inflight.stop(id, *token, StopReason::LeaseLost);
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(topic = topic.name, partition = topic.partition, error = %e, "could not renew leases; retrying at the next heartbeat")
                }
            }
        }
        if topic.saturated.load(Ordering::Relaxed) {
            let request = ClaimRequest::new(
                0,
                topic.lease_ms,
                shared.config.sweep_limit,
                shared.config.stall_limit,
            );
            if let Ok(batch) = shared.store.claim(&topic.stored_as, request).await {
                if batch.dead_pending {
                    topic.dead_wake.notify_one();
                }
            }
        }
    }
}
