//! One topic's claim loop: take due jobs while there are free slots (and a few ahead, to wait for the
//! next free slot), else sleep until the next due time, a wake-up hint, or the poll interval.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use super::backoff::Backoff;
use super::execute::run_job;
use super::shared::{ServedTopic, Shared, Slot};
use crate::observe::Tally;
use crate::store::{ClaimRequest, ClaimedJob, Finish, FinishItem};
use crate::time::{add_ms, millis};

/// Claims and starts jobs until the worker is told to shut down.
///
/// Jobs may be claimed ahead (see [`ServedTopic::ahead`]): they wait in the topic, their leases renewed
/// by the heartbeat, and start in claim order, on slots that free up or on the slot of a run that
/// ends ([`ServedTopic::next_claimed`]). The claim loop claims again once no more than half of them
/// are left (the low-water mark), so that each claim carries many jobs and a run that ends finds the
/// next one at hand. At shutdown the jobs still waiting are handed back (due at once, no attempt
/// used).
pub(crate) async fn claim_loop<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
) {
    // Run tasks waiting for this loop to start jobs end with it, however it ends (aborted too).
    let _idle_runs = EndIdleRuns(&topic);
    claim_and_start(&shared, &topic).await;
    topic.saturated.store(false, Ordering::Relaxed);
    for job in topic.take_waiting() {
        topic.in_flight.finishing(&job.id, job.token);
        hand_back(&topic, job);
    }
}

/// Ends the run tasks waiting for the claim loop's next job when dropped.
struct EndIdleRuns<'a, S>(&'a ServedTopic<S>);

impl<S> Drop for EndIdleRuns<'_, S> {
    fn drop(&mut self) {
        self.0.end_idle_runs();
    }
}

/// Hands a claimed job back: due at once, no attempt used.
fn hand_back<S>(topic: &ServedTopic<S>, job: ClaimedJob) {
    let finish = Finish::Retry {
        record: job.record,
        delay_ms: 0,
        counted: false,
    };
    topic.send_finish(
        FinishItem::new(job.id, job.token, finish),
        Tally::Uncounted,
        false,
    );
}

/// Starts a claimed job on `slot` (one claimed ahead comes from [`ServedTopic::pop_waiting`], which
/// passes over those whose leases were lost while they waited), on a run task that waits for one
/// ([`ServedTopic::idle_run`]) or a new one.
fn start<S: Send + Sync + 'static>(
    shared: &Arc<Shared<S>>,
    topic: &Arc<ServedTopic<S>>,
    job: ClaimedJob,
    slot: Slot,
) {
    let start = (job, slot, shared.jobs.enter());
    // On a run task whose run ended, if one waits; else on a task of its own.
    if let Err(start) = topic.hand_to_idle_run(start) {
        tokio::spawn(run_job(shared.clone(), topic.clone(), start));
    }
}

/// Waits until a free slot starts the next job claimed ahead, or until the runs that ended took enough
/// of them to leave no more than the low-water mark; false at shutdown.
async fn start_next<S: Send + Sync + 'static>(
    shared: &Arc<Shared<S>>,
    topic: &Arc<ServedTopic<S>>,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    let slot = tokio::select! {
        slot = wait_slot(shared, topic, shutdown) => slot,
        _ = topic.waiting_low.notified() => {
            topic.saturated.store(false, Ordering::Relaxed);
            return true;
        }
    };
    let Some(slot) = slot else {
        return false;
    };
    // The runs that ended may have taken every job meanwhile: then the slot goes back.
    if let Some((job, _)) = topic.pop_waiting() {
        start(shared, topic, job, slot);
    }
    true
}

/// Waits for a free slot, marking the topic saturated meanwhile; `None` at shutdown.
async fn wait_slot<S>(
    shared: &Shared<S>,
    topic: &ServedTopic<S>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Slot> {
    topic.saturated.store(true, Ordering::Relaxed);
    let slot = tokio::select! {
        slot = topic.slot(&shared.global) => Some(slot),
        _ = shutdown.wait_for(|s| *s) => None,
    };
    topic.saturated.store(false, Ordering::Relaxed);
    slot
}

/// The claim loop proper; returns at shutdown, the jobs claimed ahead still waiting in the topic.
async fn claim_and_start<S: Send + Sync + 'static>(
    shared: &Arc<Shared<S>>,
    topic: &Arc<ServedTopic<S>>,
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
        // Jobs claimed ahead start first, on whatever slots are free.
        while topic.waiting_len() > 0 {
            let Some(slot) = topic.try_slot(&shared.global) else {
                break;
            };
            if let Some((job, _)) = topic.pop_waiting() {
                start(shared, topic, job, slot);
            }
        }
        let ahead = topic.ahead();
        let waiting = topic.waiting_len();
        if waiting > 0 && waiting > ahead / 2 {
            // Above the low-water mark: no claim yet. The next free slot takes the next job, and the
            // runs that end take them on their own slots, until they leave the low-water mark.
            if !start_next(shared, topic, &mut shutdown).await {
                return;
            }
            continue;
        }
        // With nothing at hand, a claim waits for a slot; with jobs at hand (every slot busy), it
        // claims ahead at once.
        let mut slots = Vec::new();
        if waiting == 0 {
            match wait_slot(shared, topic, &mut shutdown).await {
                Some(slot) => slots.push(slot),
                None => return,
            }
        }
        while slots.len() < config.claim_batch {
            match topic.try_slot(&shared.global) {
                Some(slot) => slots.push(slot),
                None => break,
            }
        }
        // How many may wait here once the claimed jobs have taken the slots in hand.
        let room = ahead.saturating_sub(waiting);
        let wanted = (slots.len() + room).min(config.claim_batch.max(slots.len()));
        let request = match failed.take() {
            Some(request) => request.again(),
            None => {
                let request = ClaimRequest::new(
                    wanted,
                    topic.lease_ms,
                    config.sweep_limit,
                    config.stall_limit,
                )
                .holder(shared.holder)
                .max_running(topic.flow.max_running)
                .key_limits(topic.flow.key);
                let request = match topic.flow.rate {
                    Some(rate) => request.rate_limit(rate),
                    None => request,
                };
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
        let span = tracing::debug_span!(
            "claim",
            topic = topic.name,
            partition = topic.partition,
            max = wanted,
            claimed = tracing::field::Empty
        );
        let claim = shared.store.claim(&topic.stored_as, request);
        let mut batch = match claim.instrument(span.clone()).await {
            Ok(batch) => batch,
            Err(e) => {
                drop(slots);
                let pause = backoff.next();
                tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), retry_in = ?pause, "claim failed; retrying");
                failed = Some(request);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shutdown.wait_for(|s| *s) => return,
                }
                continue;
            }
        };
        backoff.reset();
        // The backend's clock read `batch.now_*` at the latest now.
        let replied = Instant::now();
        span.record("claimed", batch.jobs.len());
        topic.metrics.store_time(batch.now_us);
        topic.metrics.claimed(batch.jobs.len());
        topic.metrics.swept(batch.swept, batch.swept_dead);
        if batch.dead_pending {
            topic.dead_wake.notify_one();
        }
        if batch.ends_pending {
            topic.ends_wake.notify_one();
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
        // A claim sent again may hand back more jobs than there are slots and room now: the rest go
        // back to due at once, no attempt used.
        for job in batch.jobs.drain(wanted.min(claimed)..) {
            hand_back(topic, job);
        }
        let claimed = batch.jobs.len();
        let mut jobs = batch.jobs.into_iter();
        // Slots first: `zip` takes no job once the slots are used up.
        for (slot, job) in slots.drain(..).zip(jobs.by_ref()) {
            start(shared, topic, job, slot);
        }
        drop(slots);
        let ahead_jobs: Vec<ClaimedJob> = jobs.collect();
        for job in &ahead_jobs {
            topic.in_flight.waiting(job.id.clone(), job.token);
        }
        topic.push_waiting(ahead_jobs);
        if claimed == wanted {
            continue;
        }
        // Nothing more is due now: the jobs at hand start, then sleep until something may be due.
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
        while topic.waiting_len() > 0 {
            if !start_next(shared, topic, &mut shutdown).await {
                return;
            }
        }
        if sleep.is_zero() {
            continue;
        }
        let deadline = replied + sleep;
        tokio::select! {
            _ = sleep_until(deadline, due_first) => {}
            _ = topic.wake.notified() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
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
