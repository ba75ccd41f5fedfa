//! The tick loop of one periodic schedule: stores the schedule at start, then sleeps until its next tick
//! (by the store's clock), plans the tick and hands the plan to the store, which applies it only if no
//! other worker decided that tick meanwhile (see [`PeriodicStore`](crate::store::PeriodicStore)). Every
//! worker that declares a schedule runs its loop; none leads.
//!
//! It wakes at the next tick, on a hint for its topic (a "run now" request, or a job enqueued), or after
//! the poll interval, whichever comes first; after a hint or the poll interval it reads the schedule
//! again (another worker may have moved it, or it was triggered or removed).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::backoff::Backoff;
use crate::periodic::{tick_id, Scheduled};
use crate::store::{
    Hint, Store, StoredSchedule, TickJob, TickPlan, TickRequest, TickStatus, MAX_DUE_MS,
};
use crate::Client;

/// How long the loop waits after a hint before it reads the schedule (see [`TickLoop::wait`]).
const HINT_COALESCE: Duration = Duration::from_millis(20);

/// The store's clock as last read, moved on by this process's monotonic clock.
#[derive(Debug, Clone, Copy)]
struct StoreClock {
    read_ms: i64,
    at: Instant,
}

impl StoreClock {
    fn read(now_ms: i64) -> Self {
        StoreClock {
            read_ms: now_ms,
            at: Instant::now(),
        }
    }

    fn now_ms(&self) -> i64 {
        let elapsed = i64::try_from(self.at.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.read_ms.saturating_add(elapsed)
    }
}

/// What the loop works with.
pub(crate) struct TickLoop {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) client: Client,
    pub(crate) scheduled: Arc<dyn Scheduled>,
    pub(crate) poll: Duration,
    pub(crate) hints: broadcast::Receiver<Hint>,
    pub(crate) stop: watch::Receiver<bool>,
}

/// Waits until `stop` is raised (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Sleeps for `d` unless stopped first; returns whether to stop.
async fn pause(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
    }
}

impl TickLoop {
    fn topic(&self) -> &'static str {
        self.scheduled.topic()
    }

    fn name(&self) -> &str {
        self.scheduled.schedule().name()
    }

    /// The job of the tick at `tick_ms`, or `None` (logged) when it cannot be encoded.
    fn job(&self, tick_ms: i64) -> Option<TickJob> {
        match self.scheduled.job_at(&self.client, tick_ms) {
            Ok(job) => Some(TickJob::new(tick_ms, job.id, job.record).with_key(job.key)),
            Err(e) => {
                tracing::error!(topic = self.topic(), schedule = self.name(), tick_ms, error = %e, "periodic job could not be built: this tick is skipped");
                None
            }
        }
    }

    /// Stores the schedule (retrying while the store fails); `None` when stopped first.
    async fn upsert(&mut self, definition: &str) -> Option<(StoredSchedule, StoreClock)> {
        let mut backoff = Backoff::new(Duration::from_millis(50));
        loop {
            let cadence = self.scheduled.schedule().cadence();
            let stored = async {
                let now = self.store.now_ms().await?;
                let first = cadence.next_after(now).unwrap_or(MAX_DUE_MS);
                self.store
                    .schedule_upsert(self.topic(), self.name(), definition, first)
                    .await
            }
            .await;
            match stored {
                Ok((status, now, schedule)) => {
                    // So that operators see the topic (and its schedules) even when no worker
                    // handles it yet.
                    if let Err(e) = self.store.register_topic(self.topic(), 1).await {
                        tracing::debug!(topic = self.topic(), error = %e, "could not register the topic of a periodic schedule");
                    }
                    tracing::info!(
                        topic = self.topic(),
                        schedule = self.name(),
                        ?status,
                        next_ms = schedule.next_ms,
                        "periodic schedule stored"
                    );
                    return Some((schedule, StoreClock::read(now)));
                }
                Err(e) => {
                    tracing::warn!(topic = self.topic(), schedule = self.name(), error = %e, "could not store the periodic schedule; trying again");
                    if pause(backoff.next(), &mut self.stop).await {
                        return None;
                    }
                }
            }
        }
    }

    /// The plan for the due ticks, from the store's time `now`.
    fn plan(&self, schedule: &StoredSchedule, now: i64) -> TickPlan {
        let periodic = self.scheduled.schedule();
        let (ticks, grace_ms) = periodic.due_ticks(schedule.next_ms, now);
        let runs = ticks.into_iter().filter_map(|t| self.job(t)).collect();
        TickPlan {
            expect_next_ms: schedule.next_ms,
            expect_last: schedule.last_ms.map(|l| (l, tick_id(self.name(), l))),
            runs,
            new_next_ms: periodic.cadence().next_after(now).unwrap_or(MAX_DUE_MS),
            overlap_skip: periodic.overlap_skip(),
            grace_ms,
        }
    }

    /// Waits for the next tick, a hint, the poll interval or the stop; returns (stop, read again).
    ///
    /// Hints for the topic come with every job that becomes its earliest, so a busy topic may send many:
    /// after the first, the loop waits [`HINT_COALESCE`] more (ignoring the others) before it reads the
    /// schedule, so that it reads it at most that often.
    async fn wait(&mut self, until_tick: Option<Duration>) -> (bool, bool) {
        let wait = until_tick.unwrap_or(self.poll).min(self.poll);
        let topic = self.topic();
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        let (mut woken, mut listening) = (false, true);
        loop {
            tokio::select! {
                _ = &mut deadline => {
                    let polled = until_tick.is_none_or(|t| t > self.poll);
                    return (false, woken || polled);
                }
                _ = stopped(&mut self.stop) => return (true, false),
                hint = self.hints.recv(), if listening && !woken => match hint {
                    Ok(Hint::Topic { topic: t, .. }) if t != topic => {}
                    // No more hints: the poll interval alone.
                    Err(broadcast::error::RecvError::Closed) => listening = false,
                    _ => {
                        woken = true;
                        let soon = Instant::now() + HINT_COALESCE;
                        if soon < deadline.deadline() {
                            deadline.as_mut().reset(soon);
                        }
                    }
                },
            }
        }
    }

    /// Runs until stopped, or until the schedule is removed.
    pub(crate) async fn run(mut self) {
        let definition = self.scheduled.schedule().definition();
        let Some((mut schedule, mut clock)) = self.upsert(&definition).await else {
            return;
        };
        let mut backoff = Backoff::new(Duration::from_millis(50));
        let mut superseded = false;
        // After an `Early` reply (this process's estimate of the store's clock ran ahead), the least wait
        // before planning again: 1 ms, doubling while it repeats (up to the poll interval).
        let (mut early_streak, mut hold) = (Duration::ZERO, Duration::ZERO);
        loop {
            if *self.stop.borrow() {
                return;
            }
            let now = clock.now_ms();
            let trigger = schedule.trigger_ms.filter(|_| !superseded);
            let due = !superseded && schedule.next_ms <= now && hold.is_zero();
            if trigger.is_some() || due {
                let mut request = TickRequest::new(self.name().to_owned(), definition.clone());
                request.trigger = trigger.and_then(|t| self.job(t));
                if trigger.is_some() && request.trigger.is_none() {
                    // It cannot be built (logged): the empty id asks the store to drop it.
                    request.trigger = trigger.map(|t| TickJob::new(t, String::new(), Vec::new()));
                }
                request.plan = due.then(|| self.plan(&schedule, now));
                match self.store.schedule_tick(self.topic(), request).await {
                    Ok(out) => {
                        backoff.reset();
                        clock = StoreClock::read(out.now_ms);
                        if out.enqueued > 0 {
                            tracing::debug!(
                                topic = self.topic(),
                                schedule = self.name(),
                                enqueued = out.enqueued,
                                "periodic jobs enqueued"
                            );
                        }
                        match out.status {
                            TickStatus::Gone => {
                                tracing::info!(
                                    topic = self.topic(),
                                    schedule = self.name(),
                                    "periodic schedule removed: this worker stops running it"
                                );
                                return;
                            }
                            TickStatus::Superseded => {
                                if !superseded {
                                    tracing::warn!(topic = self.topic(), schedule = self.name(), "another worker stored a different definition of this periodic schedule: this worker leaves it to them");
                                }
                                superseded = true;
                            }
                            TickStatus::Early => {
                                early_streak =
                                    (early_streak * 2).clamp(Duration::from_millis(1), self.poll);
                                hold = early_streak;
                            }
                            _ => early_streak = Duration::ZERO,
                        }
                        if let Some(s) = out.schedule {
                            schedule = s;
                        }
                        if out.status != TickStatus::Early {
                            continue;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(topic = self.topic(), schedule = self.name(), error = %e, "periodic tick failed; trying again");
                        if pause(backoff.next(), &mut self.stop).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            let until_tick = (!superseded).then(|| {
                let ms = schedule.next_ms.saturating_sub(clock.now_ms()).max(0);
                Duration::from_millis(ms as u64).max(hold)
            });
            let (stop, read_again) = self.wait(until_tick).await;
            hold = Duration::ZERO;
            if stop {
                return;
            }
            if read_again {
                match self.store.schedules(self.topic()).await {
                    Ok((now, list)) => {
                        clock = StoreClock::read(now);
                        match list.into_iter().find(|s| s.name == self.name()) {
                            Some(s) => {
                                superseded = s.definition != definition;
                                schedule = s;
                            }
                            None => {
                                tracing::info!(
                                    topic = self.topic(),
                                    schedule = self.name(),
                                    "periodic schedule removed: this worker stops running it"
                                );
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(topic = self.topic(), schedule = self.name(), error = %e, "could not read the periodic schedule; trying again");
                    }
                }
            }
        }
    }
}
