//! One topic's claim loop: take due jobs while there are free slots, else sleep until the next due time,
//! a wake-up hint, or the poll interval.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::execute::run_job;
use super::failpoint::{self, Point};
use super::runtime::{Shared, TopicRt};
use crate::client::millis;
use crate::store::ClaimRequest;

/// Claims and starts jobs until the worker is told to shut down.
pub(crate) async fn claim_loop<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<TopicRt<S>>,
) {
    let config = &shared.config;
    let mut shutdown = shared.shutdown.clone();
    let mut backoff = Duration::from_millis(50);
    while !*shutdown.borrow() {
        topic.saturated.store(true, Ordering::Relaxed);
        let first = tokio::select! {
            slot = topic.slot(&shared.global) => slot,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        topic.saturated.store(false, Ordering::Relaxed);
        let mut slots = vec![first];
        while slots.len() < config.claim_batch {
            match topic.try_slot(&shared.global) {
                Some(slot) => slots.push(slot),
                None => break,
            }
        }
        let wanted = slots.len();
        let request = ClaimRequest::new(
            wanted,
            topic.lease_ms,
            config.sweep_limit,
            config.stall_limit,
        );
        let batch = match shared.store.claim(&topic.stored_as, request).await {
            Ok(batch) => batch,
            Err(e) => {
                drop(slots);
                tracing::warn!(topic = topic.name, partition = topic.partition, error = %e, retry_in = ?backoff, "claim failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.wait_for(|s| *s) => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        if batch.dead_pending {
            topic.dead_wake.notify_one();
        }
        if batch.swept > 0 || batch.swept_dead > 0 {
            tracing::info!(
                topic = topic.name,
                partition = topic.partition,
                returned = batch.swept,
                ended = batch.swept_dead,
                "swept expired leases"
            );
        }
        let claimed = batch.jobs.len();
        if claimed > 0 {
            failpoint::hit(Point::Claimed {
                topic: topic.name,
                now_ms: batch.now_ms,
                jobs: &batch.jobs,
            });
        }
        for (job, slot) in batch.jobs.into_iter().zip(slots.drain(..claimed)) {
            let guard = shared.jobs.enter();
            tokio::spawn(run_job(shared.clone(), topic.clone(), job, slot, guard));
        }
        drop(slots);
        if claimed == wanted {
            continue;
        }
        // Nothing more is due now: sleep until something may be.
        let mut wake_at = batch.now_ms + millis(config.poll_interval) as i64;
        if let Some(due) = batch.next_due_ms {
            wake_at = wake_at.min(due);
        }
        if let Some(deadline) = batch.next_lease_deadline_ms {
            wake_at = wake_at.min(deadline + 1);
        }
        let sleep = Duration::from_millis((wake_at - batch.now_ms).max(0) as u64);
        if sleep.is_zero() {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = topic.wake.notified() => {}
            _ = shutdown.wait_for(|s| *s) => break,
        }
    }
    topic.saturated.store(false, Ordering::Relaxed);
}
