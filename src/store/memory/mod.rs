//! The in-memory backend: the same semantics as Redis, in this process.
//!
//! It is the embedded default: examples run without Redis, and applications test their handlers with
//! it, optionally on a [`ManualClock`] so that a job due in 30 minutes runs as soon as the test moves the
//! clock. Nothing survives the process.
//!
//! All state sits behind one [`std::sync::Mutex`], held for one step of the [`Store`](crate::store::Store) contract and never
//! across an `.await`, so every method is atomic like a Lua script. Each topic keeps the layout of the
//! seam (see [`crate::store`]): sorted sets of ids for `due`, `active`, `dead` and `dead_pending`, with
//! indexes by id, so cancel and reschedule are O(log n). Each call does bounded work, like the Redis
//! scripts: at most `sweep_limit` + `max` jobs per claim, `max` per dead claim, `limit` per trim.

mod batch;
mod clock;
mod ops;
mod periodic;
#[cfg(test)]
mod tests;
mod topic;
mod workflow;
mod zset;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use tokio::sync::broadcast;

pub use self::clock::{Clock, ManualClock, SystemClock};
use self::topic::{Announced, Topic};
use super::{
    Announcement, CancelOutcome, ClaimBatch, ClaimRequest, DeadEntry, DeadLetterStore,
    DeadSelection, Death, Due, EnqueueOutcome, FinishItem, FinishOutcome, Hint, JobStore, KeyedJob,
    KeyedOutcome, Lease, LeaseStatus, Lookup, NewJob, Progress, RequeueOutcome, RescheduleOutcome,
    Retention, StoredJob, TopicCounts, TrimPolicy, Watch, WorkerStore,
};
use crate::error::Result;

/// How many hints a slow receiver may fall behind before it sees `Lagged` (and should look again).
const HINT_CAPACITY: usize = 1024;
/// As on Redis: a burst of a thousand waited jobs ending at once must not make every waiter look again.
const ANNOUNCEMENT_CAPACITY: usize = 16 * 1024;

/// Jobs kept in this process's memory.
///
/// ```
/// use postpone::store::{memory::MemoryStore, JobStore};
///
/// let store = MemoryStore::new();
/// assert_eq!(store.backend_name(), "memory");
/// ```
pub struct MemoryStore {
    topics: Mutex<HashMap<String, Topic>>,
    registries: Mutex<ops::Registries>,
    clock: Arc<dyn Clock>,
    hints: broadcast::Sender<Hint>,
    announcements: broadcast::Sender<Announcement>,
    schedules: periodic::Schedules,
    /// The namespace's batches, locked after `topics` (see `workflow.rs`).
    batches: Mutex<batch::Batches>,
}

impl MemoryStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        MemoryStore::with_clock(Arc::new(SystemClock))
    }

    /// An empty store on `clock`. The clock is given the store's hint channel (see
    /// [`Clock::register_hints`]), so a [`ManualClock`] wakes the store's workers when it moves.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        let (hints, _) = broadcast::channel(HINT_CAPACITY);
        clock.register_hints(hints.clone());
        let (announcements, _) = broadcast::channel(ANNOUNCEMENT_CAPACITY);
        MemoryStore {
            topics: Mutex::new(HashMap::new()),
            registries: Mutex::default(),
            clock,
            hints,
            announcements,
            schedules: Default::default(),
            batches: Mutex::default(),
        }
    }

    /// Runs one atomic step on a topic (created on first use), with the clock read under the lock.
    fn with_topic<R>(&self, topic: &str, step: impl FnOnce(&mut Topic, i64) -> R) -> R {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now_ms();
        let state = match topics.get_mut(topic) {
            Some(state) => state,
            None => topics.entry(topic.to_owned()).or_default(),
        };
        let out = step(state, now);
        // An end recorded for a batch wakes the topic's workers, who deliver it.
        let woke = state.outcomes.follows.take_woke();
        // Taking an empty list allocates nothing.
        let announced = std::mem::take(&mut state.outcomes.announced);
        drop(topics);
        if !announced.is_empty() {
            self.announce(topic, announced);
        }
        if woke {
            self.hint(topic, Some(now));
        }
        out
    }

    /// Sends a step's announcements to waiters.
    fn announce(&self, topic: &str, announced: Vec<Announced>) {
        for a in announced {
            let a = match a {
                Announced::Ended(id, ended) => Announcement::Ended {
                    topic: topic.to_owned(),
                    id,
                    ended,
                },
                Announced::Progress(id, progress) => Announcement::Progress {
                    topic: topic.to_owned(),
                    id,
                    progress,
                },
            };
            // No receiver is fine: the waiter gave up.
            let _ = self.announcements.send(a);
        }
    }

    /// Enqueues `jobs` one after the other with `step` (each gives its outcome and, when the job is
    /// the topic's earliest or made a key ready, the time to hint about), under one lock; then sends
    /// the earliest hint.
    fn enqueue_each<T, O>(
        &self,
        topic: &str,
        jobs: Vec<T>,
        mut step: impl FnMut(&mut Topic, T, i64) -> (O, Option<i64>),
    ) -> Vec<O> {
        let (outcomes, hint) = self.with_topic(topic, |state, now| {
            let mut hint: Option<i64> = None;
            let outcomes = jobs
                .into_iter()
                .map(|job| {
                    let (outcome, earlier) = step(state, job, now);
                    hint = earliest(hint, earlier);
                    outcome
                })
                .collect();
            (outcomes, hint)
        });
        self.hint(topic, hint);
        outcomes
    }

    /// Reads a topic without creating it.
    fn read_topic<R>(&self, topic: &str, read: impl FnOnce(&Topic, i64) -> R) -> R {
        let topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now_ms();
        match topics.get(topic) {
            Some(state) => read(state, now),
            None => read(&Topic::default(), now),
        }
    }

    fn hint(&self, topic: &str, due_at_ms: Option<i64>) {
        if let Some(due_at_ms) = due_at_ms {
            // No receiver is fine: no worker is sleeping.
            let _ = self.hints.send(Hint::Topic {
                topic: topic.to_owned(),
                due_at_ms,
            });
        }
    }

    #[cfg(test)]
    fn holds_nothing(&self, topic: &str) -> bool {
        self.read_topic(topic, |state, _| state.holds_nothing())
    }
}

/// The earlier of two hints' times.
fn earliest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let topics = self
            .topics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("MemoryStore")
            .field("clock", &self.clock)
            .field("topics", &topics)
            .finish()
    }
}

#[async_trait]
impl JobStore for MemoryStore {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn enqueue(&self, topic: &str, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        // As on Redis, which files a batch's keyed jobs first: in a batch with keyed jobs, those
        // without a key take their turn as the key "" (see `topic/fair.rs`).
        let keyed = jobs.iter().any(|job| job.key.is_some());
        Ok(self.enqueue_each(topic, jobs, |state, job, now| {
            state.enqueue_in(job, keyed, now)
        }))
    }

    async fn enqueue_keyed(&self, topic: &str, jobs: Vec<KeyedJob>) -> Result<Vec<KeyedOutcome>> {
        Ok(self.enqueue_each(topic, jobs, |state, job, now| state.enqueue_keyed(job, now)))
    }

    async fn enqueue_once(
        &self,
        topic: &str,
        jobs: Vec<(String, NewJob)>,
        keep_ms: u64,
    ) -> Result<Vec<Option<EnqueueOutcome>>> {
        Ok(self.enqueue_each(topic, jobs, |state, (token, job), now| {
            state.enqueue_once(token, job, keep_ms, now)
        }))
    }

    async fn forget_tokens(&self, topic: &str, tokens: &[String]) -> Result<()> {
        self.with_topic(topic, |state, _| state.forget_tokens(tokens));
        Ok(())
    }

    async fn cancel(&self, topic: &str, id: &str) -> Result<CancelOutcome> {
        Ok(self.with_topic(topic, |state, now| state.cancel(id, now)))
    }

    async fn reschedule(&self, topic: &str, id: &str, due: Due) -> Result<RescheduleOutcome> {
        let (outcome, hint) = self.with_topic(topic, |state, now| state.reschedule(id, due, now));
        self.hint(topic, hint);
        Ok(outcome)
    }

    async fn job(&self, topic: &str, id: &str) -> Result<Option<StoredJob>> {
        Ok(self.read_topic(topic, |state, now| state.job(id, now)))
    }

    async fn counts(&self, topic: &str) -> Result<TopicCounts> {
        Ok(self.read_topic(topic, |state, now| state.counts(now)))
    }

    async fn outcome(&self, topic: &str, id: &str, watch: Watch) -> Result<Lookup> {
        Ok(self.with_topic(topic, |state, now| state.outcome(id, watch, now)))
    }

    /// Nothing is ever lost in this process: the one `Resync` sent, at each call, says the receiver
    /// listens.
    fn announcements(&self) -> broadcast::Receiver<Announcement> {
        let rx = self.announcements.subscribe();
        let _ = self.announcements.send(Announcement::Resync);
        rx
    }
}

#[async_trait]
impl WorkerStore for MemoryStore {
    async fn now_ms(&self) -> Result<i64> {
        Ok(self.clock.now_ms())
    }

    async fn claim(&self, topic: &str, request: ClaimRequest) -> Result<ClaimBatch> {
        Ok(self.with_topic(topic, |state, now| state.claim(request, now)))
    }

    async fn finish(&self, topic: &str, items: Vec<FinishItem>) -> Result<Vec<FinishOutcome>> {
        let (outcomes, hint) = self.with_topic(topic, |state, now| {
            let mut hint: Option<i64> = None;
            let outcomes = items
                .into_iter()
                .map(|item| {
                    let (outcome, earlier) = state.finish(item, now);
                    hint = earliest(hint, earlier);
                    outcome
                })
                .collect();
            (outcomes, hint)
        });
        self.hint(topic, hint);
        Ok(outcomes)
    }

    async fn extend(
        &self,
        topic: &str,
        leases: &[Lease],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>> {
        Ok(self.with_topic(topic, |state, now| {
            leases
                .iter()
                .map(|(id, token)| state.extend(id, *token, lease_ms, now))
                .collect()
        }))
    }

    async fn hold(&self, topic: &str, delay_ms: u64) -> Result<()> {
        self.with_topic(topic, |state, now| state.hold(delay_ms, now));
        Ok(())
    }

    async fn retain(&self, topic: &str, retention: Option<Retention>, limit: usize) -> Result<u64> {
        Ok(self.with_topic(topic, |state, now| state.retain(retention, limit, now)))
    }

    async fn progress(&self, topic: &str, updates: Vec<(Lease, Progress)>) -> Result<()> {
        self.with_topic(topic, |state, _| state.record_progress(updates));
        Ok(())
    }

    fn hints(&self) -> broadcast::Receiver<Hint> {
        self.hints.subscribe()
    }
}

#[async_trait]
impl DeadLetterStore for MemoryStore {
    async fn dead_list(&self, topic: &str, offset: usize, limit: usize) -> Result<Vec<DeadEntry>> {
        Ok(self.read_topic(topic, |state, _| state.dead_list(offset, limit)))
    }

    async fn dead_of(&self, topic: &str, id: &str, limit: usize) -> Result<Vec<DeadEntry>> {
        Ok(self.read_topic(topic, |state, _| state.dead_of(id, limit)))
    }

    async fn dead_requeue(
        &self,
        topic: &str,
        death: &Death,
        record: Vec<u8>,
    ) -> Result<RequeueOutcome> {
        let (outcome, hint) =
            self.with_topic(topic, |state, now| state.dead_requeue(death, record, now));
        self.hint(topic, hint);
        Ok(outcome)
    }

    async fn dead_purge(&self, topic: &str, which: DeadSelection<'_>) -> Result<u64> {
        Ok(self.with_topic(topic, |state, _| state.dead_purge(which)))
    }

    async fn dead_trim(&self, topic: &str, policy: TrimPolicy, limit: usize) -> Result<u64> {
        Ok(self.with_topic(topic, |state, now| state.dead_trim(policy, limit, now)))
    }

    async fn dead_claim(&self, topic: &str, max: usize, lease_ms: u64) -> Result<Vec<DeadEntry>> {
        Ok(self.with_topic(topic, |state, now| state.dead_claim(max, lease_ms, now)))
    }

    async fn dead_ack(&self, topic: &str, deaths: &[Death]) -> Result<()> {
        self.with_topic(topic, |state, _| state.dead_ack(deaths));
        Ok(())
    }

    async fn dead_retry(&self, topic: &str, death: &Death, delay_ms: u64) -> Result<()> {
        self.with_topic(topic, |state, now| state.dead_retry(death, delay_ms, now));
        Ok(())
    }
}
