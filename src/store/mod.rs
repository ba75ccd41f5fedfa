//! The store seam: what a backend must do, in queue terms, split by who uses it.
//!
//! - [`JobStore`]: jobs by id, for the client (enqueue, cancel, reschedule, look up, count);
//! - [`WorkerStore`]: what a worker needs to run jobs (claim, finish, extend leases, the store's clock,
//!   wake-up hints, start-up checks);
//! - [`DeadLetterStore`]: the dead letters (list, requeue, purge, trim) and the delivery of each one to
//!   the dead-letter hook (claim, ack, retry);
//! - [`OpsStore`]: what operators need (registries of topics and workers, jobs listed by state, pause,
//!   history), for the operations API ([`crate::ops`]);
//! - [`PeriodicStore`]: the schedules of periodic jobs (upsert, tick, list, trigger, remove);
//! - [`WorkflowStore`]: batches with callbacks, and the delivery of the ends of jobs that batches
//!   follow (see [`workflow`]);
//! - [`Store`]: all six, for `dyn Store`. Every type that implements the six is a `Store`.
//!
//! Backends: [`redis`] (the product: one Redis or a Redis Cluster) and [`memory`] (the embedded default,
//! same semantics). One conformance suite (`tests/store_conformance`) holds both to this contract.
//!
//! # The contract
//!
//! A store keeps jobs per *topic* of its namespace (a topic name, or `<topic>#<p>` for partition `p` of a
//! partitioned topic: a store treats each partition as a topic of its own). A job is identified by its
//! id within its topic and is, at any moment, in exactly one state:
//! - **due**: waiting for its due time; it may be claimed once the store's clock reaches it. Due jobs are
//!   claimed in due-time order (ties in id order, bytewise), except that due jobs enqueued with a
//!   priority ([`NewJob::priority`]) go first, highest first, then by due time;
//! - **active**: claimed, and leased to one worker until a deadline under a *lease token*. Every later
//!   finish or lease renewal must carry that token: one that does not match the current lease changes
//!   nothing (a stale worker's late result is ignored). A lease has expired when its deadline is at or
//!   before now; an expired lease still holds until a claim *sweeps* it;
//! - **dead**: in the topic's dead letters, as a *death* with its final record, a reason and its time
//!   of death, *pending* until the dead-letter hook has succeeded for it (see [`DeadLetterStore`]);
//! - **gone**: done or cancelled; nothing is left but a counter, unless the topic keeps finished jobs
//!   ([`WorkerStore::retain`]): then it is **kept** (its record, its result, when and how it finished)
//!   until the retention trims it. A kept job does not hold its id.
//!
//! A dead job does not hold its id: a live job of the same id may be enqueued beside it. Each job keeps
//! a *stall count*: how often its lease expired, over its whole life (a retry does not reset it).
//!
//! Every method is one atomic step (one Lua script on Redis, one lock on the memory backend) and does
//! bounded work. Time comes from the store's clock (`TIME` on Redis), never from the caller's, except an
//! absolute due time the user asked for. Due times are capped at [`MAX_DUE_MS`].
//!
//! Backends are not meant to be called directly by applications: use [`Client`](crate::Client) and
//! [`Worker`](crate::Worker), which validate input and encode jobs. The traits are public so that the
//! conformance suite, and any third backend, can use them.

mod counts;
mod death;
mod keyed;
pub mod memory;
mod ops;
mod outcome;
mod periodic;
pub mod redis;
mod types;
pub mod workflow;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::error::Result;

pub use counts::{FlowCounts, TopicCounts};
pub use death::{DeadEntry, DeadSelection, Death, RequeueOutcome, TrimPolicy};
pub use keyed::{Keyed, KeyedJob, KeyedOutcome, UniqueStates};
pub use ops::{
    KeyLoad, KeysPage, MinuteCounts, OpsStore, PageEntry, PagePosition, PageQuery, PageState,
    PrefixPage, ScriptLibraries, WorkerBeat, HISTORY_MINUTES,
};
pub(crate) use outcome::{parse_announcement, parse_told, DoneState, Kept};
pub use outcome::{Announcement, Ended, Lookup, Progress, Retention, Watch};
pub use periodic::{
    PeriodicStore, StoredSchedule, TickJob, TickOutcome, TickPlan, TickRequest, TickStatus,
    UpsertStatus,
};
pub use types::{
    CancelOutcome, ClaimBatch, ClaimRequest, ClaimedJob, Due, EnqueueOutcome, Finish, FinishItem,
    FinishOutcome, HeldBack, Hint, Lease, LeaseStatus, NewJob, RescheduleOutcome, StoredJob,
    StoredState, MAX_DUE_MS, MAX_PRIORITY,
};
pub use workflow::{
    AfterOutcome, BatchAdded, BatchCreated, BatchJob, BatchMember, BatchStatus, CallbackKind,
    MemberState, NewBatch, OnParentFailure, ParentRef, WorkflowStore, WAITING_DUE_MS,
};

/// Jobs by id: what the [`Client`](crate::Client) does.
#[async_trait]
pub trait JobStore: Send + Sync + std::fmt::Debug + 'static {
    /// A short name for logs and the quickstart ("redis", "redis-cluster", "memory").
    fn backend_name(&self) -> &'static str;

    /// Enqueues jobs (all in one topic), atomically each, in order, one outcome per job. A new job
    /// becomes due. An existing due id gives `Exists` unless `replace` (then record and due time are
    /// replaced: `Replaced`); an active id gives `Running`; a dead job of the same id is no obstacle.
    /// A job due earlier than every other due job of its topic sends a [`Hint::Topic`] (one per call,
    /// for the earliest, is enough).
    async fn enqueue(&self, topic: &str, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>>;

    /// Enqueues jobs (all in one topic), each atomically, in order, each under an optional key:
    /// - no key: as [`enqueue`](Self::enqueue);
    /// - [`Keyed::Unique`]: when the key's last job (created by such an enqueue within its window) is
    ///   in one of the stated states (scheduled, running, or finished: gone or dead), nothing is created
    ///   ([`KeyedOutcome::Duplicate`] naming it, or [`KeyedOutcome::Throttled`] with the window's end);
    ///   otherwise the job is enqueued as by [`enqueue`](Self::enqueue) and, when created or replaced,
    ///   holds the key until the store's now + `window_ms`;
    /// - [`Keyed::Debounce`]: when the key's pending job is still scheduled, it is moved to now +
    ///   `quiet_ms` (never past its creation + `max_wait_ms`, when not 0), with the new record if
    ///   `replace` ([`KeyedOutcome::Debounced`]); otherwise the job is enqueued as by
    ///   [`enqueue`](Self::enqueue) (the caller gives it due in `quiet_ms`) and becomes the key's pending
    ///   job.
    ///
    /// Keys are checked and set in the same atomic step as the enqueue, never read then written. A key
    /// whose window ended, or whose pending job is gone, is dropped in bounded steps: a topic keeps
    /// per-key state only while a key holds. A job enqueued without a key never touches them.
    async fn enqueue_keyed(&self, topic: &str, jobs: Vec<KeyedJob>) -> Result<Vec<KeyedOutcome>>;

    /// Enqueues jobs like [`enqueue`](Self::enqueue), each at most once per *delivery token*: for a
    /// relay (a transactional outbox) that may deliver one record twice, having crashed after the
    /// store took it and before the record was marked done. A job whose token the topic recorded
    /// within the last `keep_ms` changes nothing and gets `None`; any other is enqueued as by
    /// [`enqueue`](Self::enqueue) and its token recorded in the same atomic step. Tokens older than
    /// `keep_ms` are dropped in bounded steps; [`forget_tokens`](Self::forget_tokens) drops them once
    /// no second delivery can come.
    async fn enqueue_once(
        &self,
        topic: &str,
        jobs: Vec<(String, NewJob)>,
        keep_ms: u64,
    ) -> Result<Vec<Option<EnqueueOutcome>>>;

    /// Drops recorded delivery tokens (see [`enqueue_once`](Self::enqueue_once)); unknown ones are
    /// ignored.
    async fn forget_tokens(&self, topic: &str, tokens: &[String]) -> Result<()>;

    /// Cancels a live job: a due job is gone (counted `cancelled`); an active one is marked, so that it
    /// is not retried and its worker learns of it at the next lease renewal.
    async fn cancel(&self, topic: &str, id: &str) -> Result<CancelOutcome>;

    /// Moves a due job to a new due time (with a hint when it becomes the topic's earliest). An active
    /// job is left alone.
    async fn reschedule(&self, topic: &str, id: &str, due: Due) -> Result<RescheduleOutcome>;

    /// Finds a job, live or dead, by id: the live one when a live and a dead job share the id.
    async fn job(&self, topic: &str, id: &str) -> Result<Option<StoredJob>>;

    /// Counts by state, and the topic's counters.
    async fn counts(&self, topic: &str) -> Result<TopicCounts>;

    /// How a job ended, or whether it is live: a live job (due or active) first; else the newest of
    /// its ends told to its waiters, its kept finish and its newest listed death; else
    /// [`Lookup::Unknown`].
    ///
    /// With [`Watch::Live`], a live job gets a waiter in the same atomic step, until the store's now +
    /// the time given; with [`Watch::Expect`], the job gets one whether or not it exists yet, and only
    /// ends since the time given count (an absent job is then [`Lookup::Expected`]). Whatever ends a
    /// waited job (a finish, a cancel, a sweep) announces it on [`announcements`](Self::announcements)
    /// (and its progress too), and the end is *told*: kept for lookups until its waiters' time ends,
    /// so that a waiter whose announcement was lost (a reconnect) finds it.
    async fn outcome(&self, topic: &str, id: &str, watch: Watch) -> Result<Lookup>;

    /// The announcements of the namespace's waited jobs (see [`outcome`](Self::outcome)). A store whose
    /// channel may have dropped some sends [`Announcement::Resync`] (and so does a receiver that lags:
    /// treat `RecvError::Lagged` the same); a waiter then looks its job up again. The first call starts
    /// the store's listener (inside a Tokio runtime); it sends `Resync` once it listens.
    fn announcements(&self) -> broadcast::Receiver<Announcement>;
}

/// What a [`Worker`](crate::Worker) needs to run jobs.
#[async_trait]
pub trait WorkerStore: Send + Sync + std::fmt::Debug + 'static {
    /// The store's current time, ms since the epoch.
    async fn now_ms(&self) -> Result<i64>;

    /// Sweeps expired leases, then claims due jobs.
    ///
    /// The sweep comes first: each expired lease (at most `sweep_limit`, earliest deadline first) ends,
    /// and its job's stall count goes up by one. A job cancelled while active is then gone (counted
    /// `cancelled`); a job whose stall count now exceeds `stall_limit` dies with its record unchanged and
    /// reason `"stalled: lease expired N times"` (counted in `dead_total`, not `failed`); any other is
    /// due again at the due time it was claimed at, so it keeps its place in line, record unchanged, no
    /// attempt used (counted `stalled`). Then up to `max` due jobs (due time at or before now, earliest
    /// first) become active with deadline now + `lease_ms`, all under the request's token.
    ///
    /// Flow control, asked for in the request, holds due jobs back (they stay due; the batch says why
    /// in [`held_back`](ClaimBatch::held_back)): nothing is claimed while the topic is held by a
    /// provider's limit ([`Finish::RateLimited`]; `next_due_ms` is then no earlier than the hold's end);
    /// at most [`max_running`](ClaimRequest::max_running) jobs of the topic are active after the claim
    /// (when it is full, `next_due_ms` is `None`, and the next finish of the topic sends a
    /// [`Hint::Topic`]); and at most what the topic's [`rate`](ClaimRequest::rate) budget allows by the
    /// store's clock (see [`crate::flow`]; `next_due_ms` is then no earlier than when the next job may
    /// go).
    ///
    /// A claim that took jobs is remembered (until its lease would end, or until the caller's next claim
    /// says it was [`received`](ClaimRequest::received)): the same request sent
    /// [`again`](ClaimRequest::again) after a lost reply gets back the jobs still leased under its token
    /// and claims nothing more. So a stall counts only a lease that a worker received and then lost.
    async fn claim(&self, topic: &str, request: ClaimRequest) -> Result<ClaimBatch>;

    /// Finishes claimed jobs, each only if its token matches its current lease (else `Stale`, nothing
    /// changed). A retry that becomes the topic's earliest due job sends a [`Hint::Topic`].
    async fn finish(&self, topic: &str, items: Vec<FinishItem>) -> Result<Vec<FinishOutcome>>;

    /// Renews leases to now + `lease_ms`, each only if its token matches. An expired lease that no sweep
    /// has taken yet still matches (and so does a finish with its token).
    async fn extend(
        &self,
        topic: &str,
        leases: &[Lease],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>>;

    /// Records the topic's retention of finished jobs (`None`: none kept; the kept ones go), used by
    /// every later finish and cancel of the topic, and deletes up to `limit` kept jobs beyond it
    /// (oldest first); returns how many. Finishes and cancels trim as they keep; this trims a topic
    /// whose jobs stopped finishing.
    async fn retain(&self, topic: &str, retention: Option<Retention>, limit: usize) -> Result<u64>;

    /// Records running jobs' progress, each only if its token matches its lease (else ignored), and
    /// announces it to their waiters. A job's progress goes when it ends.
    async fn progress(&self, topic: &str, updates: Vec<(Lease, Progress)>) -> Result<()>;

    /// Claims of the topic take nothing for `delay_ms` from the store's now, whoever claims (a
    /// provider's limit reported by a job of another partition of the topic: see
    /// [`Finish::RateLimited`]). A hold in force is never shortened.
    async fn hold(&self, topic: &str, delay_ms: u64) -> Result<()>;

    /// Wake-up hints for every topic of the namespace. A store whose hint channel may have dropped
    /// messages sends [`Hint::All`]; a receiver that lags (`RecvError::Lagged`) should act as on
    /// [`Hint::All`].
    fn hints(&self) -> broadcast::Receiver<Hint>;

    /// Called once when a worker starts: the store checks what it needs and warns loudly about what is
    /// risky (on Redis: the version, and an eviction policy that could drop jobs).
    async fn check_worker_start(&self) -> Result<()> {
        Ok(())
    }
}

/// The dead letters, and their delivery to the dead-letter hook.
///
/// Each death of a job is a dead letter of its own, named by a [`Death`] (id and sequence number): the
/// same id may die twice (a requeued job, or a new job under a freed id), and both deaths stay listed
/// until handled. Every operation names the death it means, so nothing done for one death touches
/// another. A death is *listed* (in the dead letters) until it is requeued, purged or trimmed, and
/// *pending* until its hook has succeeded; requeueing or purging a death takes it off the listing but
/// never from the hook: every death reaches the hook at least once.
#[async_trait]
pub trait DeadLetterStore: Send + Sync + std::fmt::Debug + 'static {
    /// Listed deaths, newest first, skipping `offset`.
    async fn dead_list(&self, topic: &str, offset: usize, limit: usize) -> Result<Vec<DeadEntry>>;

    /// The listed deaths of one id, newest first, at most `limit`.
    async fn dead_of(&self, topic: &str, id: &str, limit: usize) -> Result<Vec<DeadEntry>>;

    /// Makes a listed death's job due again, due now, with `record` (the caller resets its attempt), and
    /// sends a hint like [`JobStore::enqueue`]. The death leaves the listing. A live job of the same id
    /// is left alone, and so is the death.
    async fn dead_requeue(
        &self,
        topic: &str,
        death: &Death,
        record: Vec<u8>,
    ) -> Result<RequeueOutcome>;

    /// Takes deaths off the listing; returns how many.
    async fn dead_purge(&self, topic: &str, which: DeadSelection<'_>) -> Result<u64>;

    /// Deletes listed deaths whose hook has succeeded and that the policy selects, oldest first, at most
    /// `limit`; counts them in `trimmed` and returns how many. A pending death is never trimmed.
    async fn dead_trim(&self, topic: &str, policy: TrimPolicy, limit: usize) -> Result<u64>;

    /// Takes up to `max` pending deaths (listed or not) whose hook is due, earliest first, and hides them
    /// from other callers for `lease_ms`, so that the deaths of a hook caller that crashed come back.
    async fn dead_claim(&self, topic: &str, max: usize, lease_ms: u64) -> Result<Vec<DeadEntry>>;

    /// Marks these deaths' hooks done: they are no longer pending (and a death no longer listed is gone
    /// for good). Deaths that are not pending are ignored.
    async fn dead_ack(&self, topic: &str, deaths: &[Death]) -> Result<()>;

    /// Hands a pending death to the hook again after `delay_ms` (its hook failed). Does nothing when the
    /// death is not pending (its hook succeeded meanwhile elsewhere).
    async fn dead_retry(&self, topic: &str, death: &Death, delay_ms: u64) -> Result<()>;
}

/// A whole backend: [`JobStore`] + [`WorkerStore`] + [`DeadLetterStore`] + [`OpsStore`] +
/// [`PeriodicStore`] + [`WorkflowStore`], usable as `dyn Store`.
pub trait Store:
    JobStore + WorkerStore + DeadLetterStore + OpsStore + PeriodicStore + WorkflowStore
{
}

impl<T: JobStore + WorkerStore + DeadLetterStore + OpsStore + PeriodicStore + WorkflowStore> Store
    for T
{
}
