//! [`PeriodicStore`]: the schedules of periodic jobs, kept beside a topic's jobs, and the atomic step that
//! enqueues a tick's job and advances its schedule.
//!
//! A schedule is stored per topic under its name: its *definition* (an opaque string the worker writes:
//! what and how it ticks), its *next* tick (ms since the epoch), its *last* enqueued tick, and a pending
//! *trigger* (a "run now" request). A tick's job is an ordinary job of the topic (same invariants as
//! [`JobStore::enqueue`](super::JobStore::enqueue): record, due, a hint when it becomes the earliest,
//! nothing changed for an id that is live), whose id the worker derives from the schedule and the tick
//! time, so that a tick enqueued twice is one job.
//!
//! Which ticks are due is computed by the caller (cron arithmetic is not a store's business); the store
//! checks the caller's plan against its own clock and the stored next tick (compare-and-set), so that
//! each tick is decided once, whatever the number of callers and their clocks.

use async_trait::async_trait;

use crate::error::Result;

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredSchedule {
    /// Its name (unique in its topic).
    pub name: String,
    /// Its definition, as the worker wrote it.
    pub definition: String,
    /// Its next tick, ms since the epoch.
    pub next_ms: i64,
    /// Its last enqueued tick, if any.
    pub last_ms: Option<i64>,
    /// When a "run now" was asked for and not yet enqueued, by the store's clock.
    pub trigger_ms: Option<i64>,
}

/// What an upsert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpsertStatus {
    /// The schedule was new.
    Created,
    /// It existed with the same definition: nothing changed.
    Unchanged,
    /// It existed with another definition: replaced, its next tick now the caller's first.
    Replaced,
}

/// One job a tick call may enqueue.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TickJob {
    /// The tick, ms since the epoch.
    pub tick_ms: i64,
    /// The job's id (derived from the schedule's name and the tick).
    pub id: String,
    /// Its encoded record.
    pub record: Vec<u8>,
    /// Its key for fairness ([`Job::key`](crate::Job::key)), if any: set it with
    /// [`TickJob::with_key`], which puts it in the record too.
    pub key: Option<String>,
}

impl TickJob {
    /// A tick's job, without a key for fairness.
    pub fn new(tick_ms: i64, id: String, record: Vec<u8>) -> Self {
        TickJob {
            tick_ms,
            id,
            record,
            key: None,
        }
    }

    /// The same job with key `key` for fairness (`None`: none), which its record carries too.
    pub fn with_key(mut self, key: Option<String>) -> Self {
        crate::record::put_key(&mut self.record, key.as_deref());
        TickJob { key, ..self }
    }
}

/// A tick decision, planned by the caller from its estimate of the store's clock.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TickPlan {
    /// The stored next tick the plan starts from (compare-and-set).
    pub expect_next_ms: i64,
    /// The stored last tick the caller knows, and the id of its job (for [`overlap_skip`](Self::overlap_skip)).
    pub expect_last: Option<(i64, String)>,
    /// The due ticks to enqueue, oldest first: the latest few in `[expect_next_ms, now]`.
    pub runs: Vec<TickJob>,
    /// The first tick after now: the schedule's next tick once decided.
    pub new_next_ms: i64,
    /// Skip a tick while the job of the previous enqueued tick is still due or active.
    pub overlap_skip: bool,
    /// Skip a tick older than this (ms) by the store's clock.
    pub grace_ms: Option<u64>,
}

impl TickPlan {
    /// A plan from the stored next tick to `new_next_ms`, with no runs, no last tick, no overlap check
    /// and no grace.
    pub fn new(expect_next_ms: i64, new_next_ms: i64) -> Self {
        TickPlan {
            expect_next_ms,
            expect_last: None,
            runs: Vec::new(),
            new_next_ms,
            overlap_skip: false,
            grace_ms: None,
        }
    }
}

/// A tick call: a plan, a pending trigger to enqueue, or both (or neither: then it only reads).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TickRequest {
    /// The schedule's name.
    pub name: String,
    /// The caller's definition: a stored schedule with another one is left alone.
    pub definition: String,
    /// The pending trigger (its [`trigger_ms`](StoredSchedule::trigger_ms) as `tick_ms`) to enqueue; an
    /// empty id drops the trigger with no job (the caller could not build it).
    pub trigger: Option<TickJob>,
    /// The tick decision.
    pub plan: Option<TickPlan>,
}

impl TickRequest {
    /// A request that changes nothing.
    pub fn new(name: String, definition: String) -> Self {
        TickRequest {
            name,
            definition,
            trigger: None,
            plan: None,
        }
    }
}

/// What a tick call found or did with the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TickStatus {
    /// No plan was given (a trigger may have been enqueued).
    NoPlan,
    /// The plan was applied: its runs enqueued (unless skipped by grace or overlap, or already live), the
    /// next tick advanced.
    Advanced,
    /// The stored next (or last) tick is not the plan's: another caller decided meanwhile.
    Moved,
    /// The plan's first tick is not due yet by the store's clock.
    Early,
    /// The plan's next tick is already due by the store's clock: plan again with its `now`.
    Behind,
    /// The stored schedule has another definition: nothing done.
    Superseded,
    /// No such schedule (removed).
    Gone,
}

/// The outcome of a tick call: what it did, and the schedule and clock after it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TickOutcome {
    /// What happened to the plan.
    pub status: TickStatus,
    /// The store's time, ms since the epoch.
    pub now_ms: i64,
    /// The schedule after the call (`None` when [`Gone`](TickStatus::Gone)).
    pub schedule: Option<StoredSchedule>,
    /// How many jobs it created.
    pub enqueued: u32,
}

/// Periodic schedules, per topic: what the worker's tick loop and the operations API need.
#[async_trait]
pub trait PeriodicStore: Send + Sync + std::fmt::Debug + 'static {
    /// Stores a schedule unless it exists with the same definition. A new one starts at
    /// `first_next_ms`; a changed one keeps its last tick and pending trigger and starts again at
    /// `first_next_ms`. Returns what it did, the store's time and the stored schedule.
    async fn schedule_upsert(
        &self,
        topic: &str,
        name: &str,
        definition: &str,
        first_next_ms: i64,
    ) -> Result<(UpsertStatus, i64, StoredSchedule)>;

    /// One tick decision, atomically: enqueues a pending trigger that matches, then applies the plan
    /// if the stored next (and last) tick are the plan's, its first tick is due and its next tick is
    /// not, by the store's clock.
    async fn schedule_tick(&self, topic: &str, request: TickRequest) -> Result<TickOutcome>;

    /// The topic's schedules, by name, with the store's time.
    async fn schedules(&self, topic: &str) -> Result<(i64, Vec<StoredSchedule>)>;

    /// Asks for a run now: records the store's time as the schedule's pending trigger (kept if one is
    /// already pending) and wakes the topic's workers. `None` when there is no such schedule.
    async fn schedule_trigger(&self, topic: &str, name: &str) -> Result<Option<i64>>;

    /// Removes a schedule (its jobs stay); returns whether it existed.
    async fn schedule_remove(&self, topic: &str, name: &str) -> Result<bool>;
}

impl StoredSchedule {
    /// Reads a schedule as the Redis backend stores it: `"<next> <last|-> <trigger|-> <definition>"`.
    pub(crate) fn parse(name: String, stored: &str) -> Option<StoredSchedule> {
        let mut parts = stored.splitn(4, ' ');
        let next_ms = parts.next()?.parse().ok()?;
        let last_ms = parts.next()?.parse().ok();
        let trigger_ms = parts.next()?.parse().ok();
        let definition = parts.next()?.to_owned();
        Some(StoredSchedule {
            name,
            definition,
            next_ms,
            last_ms,
            trigger_ms,
        })
    }
}
