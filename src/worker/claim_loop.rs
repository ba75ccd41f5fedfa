//! One topic's claim loop: take due jobs while there are free slots, else sleep until the next due time,
//! a wake-up hint, or the poll interval.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::backoff::Backoff;
use super::execute::run_job;
use super::shared::{ServedTopic, Shared};
use crate::store::{ClaimRequest, Finish, FinishItem};
use crate::time::{add_ms, millis};

/// Claims and starts jobs until the worker is told to shut down.
pub(crate) async fn claim_loop<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
) {
    let config = &shared.config;
    let mut shutdown = shared.shutdown.clone();
    // The token of the last claim that took jobs and whose reply arrived: the next claim says so, and
    // the store forgets that claim's record.
    let mut received: Option<u64> = None;
    // A claim that failed: it may have run with its reply lost, so it is sent again, with the same
    // token, and the store hands back what it took. The slots go back meanwhile (another partition may
    // use them).
    let mut failed: Option<ClaimRequest> = None;
    let mut backoff = Backoff::new(Duration::from_millis(50));
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
        let request = match failed.take() {
            Some(request) => request.again(),
            None => {
                let request = ClaimRequest::new(
                    wanted,
                    topic.lease_ms,
                    config.sweep_limit,
                    config.stall_limit,
                );
                match received.take() {
                    Some(token) => request.received(token),
                    None => request,
                }
            }
        };
        failpoint!(Claiming {
            topic: topic.name,
            token: request.token,
        });
        let mut batch = match shared.store.claim(&topic.stored_as, request).await {
            Ok(batch) => batch,
            Err(e) => {
                drop(slots);
                let pause = backoff.next();
                tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), retry_in = ?pause, "claim failed; retrying");
                failed = Some(request);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shutdown.wait_for(|s| *s) => break,
                }
                continue;
            }
        };
        backoff.reset();
        // The backend's clock read `batch.now_*` at the latest now.
        let replied = Instant::now();
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
            received = Some(request.token);
        }
        let now_ms = batch.now_ms();
        failpoint!(Claimed {
            topic: topic.name,
            token: request.token,
            now_ms,
            jobs: &batch.jobs,
        });
        // A claim sent again may hand back more jobs than there are slots now: the rest go back to due
        // at once, no attempt used.
        for job in batch.jobs.drain(wanted.min(claimed)..) {
            let finish = Finish::Retry {
                record: job.record,
                delay_ms: 0,
                counted: false,
            };
            topic.send_finish(FinishItem::new(job.id, job.token, finish));
        }
        let claimed = batch.jobs.len();
        for (job, slot) in batch.jobs.into_iter().zip(slots.drain(..claimed)) {
            let guard = shared.jobs.enter();
            tokio::spawn(run_job(shared.clone(), topic.clone(), job, slot, guard));
        }
        drop(slots);
        if claimed == wanted {
            continue;
        }
        // Nothing more is due now: sleep until something may be.
        let now_us = batch.now_us;
        let mut wake_at_ms = add_ms(now_ms, millis(config.poll_interval));
        if let Some(deadline) = batch.next_lease_deadline_ms {
            wake_at_ms = wake_at_ms.min(deadline + 1);
        }
        let due_first = batch.next_due_ms.is_some_and(|due| due < wake_at_ms);
        if let Some(due) = batch.next_due_ms {
            wake_at_ms = wake_at_ms.min(due);
        }
        let sleep = Duration::from_micros(
            wake_at_ms
                .saturating_mul(1000)
                .saturating_sub(now_us)
                .max(0) as u64,
        );
        if sleep.is_zero() {
            continue;
        }
        let deadline = replied + sleep;
        tokio::select! {
            _ = sleep_until(deadline, due_first) => {}
            _ = topic.wake.notified() => {}
            _ = shutdown.wait_for(|s| *s) => break,
        }
    }
    topic.saturated.store(false, Ordering::Relaxed);
}

/// Below this, a wait for a due job is slept on a blocking thread.
const PRECISE: Duration = Duration::from_millis(2);

/// Sleeps until `deadline`. Tokio's timer fires on whole milliseconds, rounded up (measured here:
/// 1.1 ms late at the median, 3.3 ms at p99), which is most of a delayed job's lateness; when a job
/// is due at `deadline` (`precise`), the last stretch is slept on a blocking thread instead (0.1 ms
/// late at the median, 2.5 ms at p99). The timer is never early, so the job is never claimed before
/// its time: the backend decides that anyway.
async fn sleep_until(deadline: Instant, precise: bool) {
    if !precise {
        return tokio::time::sleep_until(deadline).await;
    }
    if let Some(coarse) = deadline.checked_sub(PRECISE) {
        tokio::time::sleep_until(coarse).await;
    }
    let rest = deadline.saturating_duration_since(Instant::now());
    if !rest.is_zero() {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest)).await;
    }
}
