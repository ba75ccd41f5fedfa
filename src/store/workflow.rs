//! The store's side of workflows: batches of jobs with callbacks, and what follows the end of a job
//! that something waits for (its *followers*).
//!
//! # The model
//!
//! A **batch** has an id, a description, callbacks (ordinary jobs: on success, on completion, on a
//! death) and members: jobs of any topics, each named by a *member ref* (its store topic and id). It is
//! *open* until closed; an open batch takes more members. A member ends once, by its first end: it
//! succeeded, died or was cancelled (a retry is not an end; a dead member requeued by an operator is a
//! new life of the job that the batch no longer follows: the batch was told of its death).
//!
//! Callbacks fire exactly once each:
//! - **death**: at the first member death;
//! - **complete**: once the batch is closed and every member ended;
//! - **success**: at that point too, when every member succeeded (so an empty closed batch fires
//!   complete and success).
//!
//! Each callback's job is enqueued into its topic exactly once, whatever the crashes, retries and
//! concurrent ends of members; so is each member (an enqueue of a member whose id is live in its topic
//! makes that job the member). A batch's members and callbacks stay readable for
//! [`BATCH_KEEP_MS`] after it completes (and its fired callbacks went out), then the batch is gone.
//!
//! # Steps (what a backend must do)
//!
//! 1. [`batch_create`](WorkflowStore::batch_create) / [`batch_add`](WorkflowStore::batch_add) commit
//!    the members in one atomic step (all or none), then *dispatch* them into their topics: each is
//!    enqueued with its batch as a follower, at most once (a second dispatch of the same member is a
//!    no-op). The call returns once every member is in its topic.
//! 2. A job with followers that ends (a finish, a cancel, a sweep, a death) records that end in its
//!    topic, in the same atomic step as the end itself, and wakes the topic's workers
//!    ([`ClaimBatch::ends_pending`](super::ClaimBatch::ends_pending)).
//! 3. [`deliver_ends`](WorkflowStore::deliver_ends) hands recorded ends to their batches (each end
//!    counted once per batch, whatever the retries of this step), fires the callbacks due, dispatches
//!    them, then forgets the ends.
//! 4. [`recover_batches`](WorkflowStore::recover_batches) finishes dispatches that a crashed caller
//!    left half done (members committed but not enqueued, callbacks fired but not enqueued).
//!
//! A step that crashes half way leaves what the next run of it (or of step 4) completes; nothing is
//! applied twice. On Redis the steps cross slots (a batch's slot and its members' topics): see
//! `store/redis/workflow.rs` for which script owns which fact.
//!
//! # Jobs that wait for jobs
//!
//! [`enqueue_after`](WorkflowStore::enqueue_after) enqueues a job that *waits* for *parents* (jobs by
//! store topic and id, in any topics): it is in no other state (not due, not claimable), holds its id
//! like a due job (an enqueue of that id reports it with [`WAITING_DUE_MS`]; a replace changes
//! nothing), can be cancelled, not rescheduled ([`RescheduleOutcome::Waiting`](super::RescheduleOutcome::Waiting)),
//! and is found by [`job`](super::JobStore::job) as [`StoredState::Waiting`](super::StoredState::Waiting)
//! with the parents it still waits for, and counted in [`TopicCounts::waiting`](super::TopicCounts::waiting).
//! Each parent's end reaches it once (the parent's topic records it, [`deliver_ends`](WorkflowStore::deliver_ends)
//! delivers it):
//! - a parent succeeded: one parent less; with none left the job becomes due, at the time its enqueue
//!   asked for, counted from then ([`Due::In`](super::Due::In)) or absolute ([`Due::At`](super::Due::At));
//! - a parent died or was cancelled: its [`OnParentFailure`] decides: the job dies (dead-lettered, its
//!   hook called, with reason `parent <topic>/<id> died: <why>` or `parent <topic>/<id> was
//!   cancelled`), is cancelled, or counts that parent as done.
//!
//! A job that ends that way ends like any other: what follows it (its own waiters, its batches) hears
//! of it, so chains propagate. A parent that already ended when the job is enqueued counts at once by
//! how it ended, as far as its topic still knows it (a finished job kept by its type's `keep`, a
//! listed dead letter, an end told to waiters); a parent its topic does not know is
//! [`AfterOutcome::MissingParent`] and nothing is enqueued. A cycle cannot be made: a parent must
//! exist before the job that waits for it.
//!
//! # Cost
//!
//! A job with no followers pays nothing: its end reads one more field of a hash the ending step reads
//! anyway (`follow` in the topic's stats on Redis).

use async_trait::async_trait;

use super::{Ended, EnqueueOutcome, NewJob, MAX_DUE_MS};
use crate::error::Result;

/// How long a completed batch stays readable (its status and members), ms: 7 days.
pub const BATCH_KEEP_MS: u64 = 7 * 24 * 3600 * 1000;

/// Most members one [`WorkflowStore::batch_create`] or [`WorkflowStore::batch_add`] takes.
pub const MAX_BATCH_ADD: usize = 100_000;

/// A job of a batch, or a callback: the store topic it goes to (a topic, or `<topic>#<p>` for a
/// partition) and the job.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BatchJob {
    /// The store topic (validated).
    pub topic: String,
    /// The job.
    pub job: NewJob,
}

impl BatchJob {
    /// `job`, to go to store topic `topic`.
    pub fn new(topic: impl Into<String>, job: NewJob) -> Self {
        BatchJob {
            topic: topic.into(),
            job,
        }
    }
}

/// Which callback of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallbackKind {
    /// Every member succeeded (fires with `Complete`).
    Success,
    /// Every member ended, the batch being closed.
    Complete,
    /// A member died (fires at the first death).
    Death,
}

impl CallbackKind {
    /// Every kind, in the order they are stored.
    pub const ALL: [CallbackKind; 3] = [
        CallbackKind::Success,
        CallbackKind::Complete,
        CallbackKind::Death,
    ];

    /// Its name: `success`, `complete` or `death`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallbackKind::Success => "success",
            CallbackKind::Complete => "complete",
            CallbackKind::Death => "death",
        }
    }
}

/// A new batch.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct NewBatch {
    /// A short description for operators (at most [`NewBatch::MAX_DESCRIPTION`] bytes).
    pub description: String,
    /// Its callbacks, at most one of each kind.
    pub callbacks: Vec<(CallbackKind, BatchJob)>,
    /// Its first members.
    pub jobs: Vec<BatchJob>,
    /// Close it at once (no member may be added later).
    pub close: bool,
}

impl NewBatch {
    /// The longest description, in bytes.
    pub const MAX_DESCRIPTION: usize = 200;
}

/// What [`WorkflowStore::batch_create`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchCreated {
    /// The batch exists now, with its members in their topics.
    Created,
    /// A batch of this id exists already: nothing changed.
    Exists,
}

/// What [`WorkflowStore::batch_add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchAdded {
    /// The members are in the batch and in their topics (`new`: how many were not members already;
    /// adding a member twice changes nothing).
    Added {
        /// Members that were new to the batch.
        new: u64,
    },
    /// The batch is closed: nothing was added.
    Closed,
    /// No batch has this id.
    NotFound,
}

/// Where a member of a batch is, as far as its batch knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemberState {
    /// Not ended yet (due, running, or being retried).
    Pending,
    /// It succeeded.
    Succeeded,
    /// It died.
    Dead,
    /// It was cancelled.
    Cancelled,
}

/// One member of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchMember {
    /// Its store topic.
    pub topic: String,
    /// Its id.
    pub id: String,
    /// How it ended, if it did.
    pub state: MemberState,
}

/// A batch as stored: its counts and what fired.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchStatus {
    /// Its id.
    pub id: String,
    /// Its description.
    pub description: String,
    /// When it was created (ms, the store's clock).
    pub created_at_ms: i64,
    /// Its members.
    pub total: u64,
    /// Members that succeeded.
    pub succeeded: u64,
    /// Members that died.
    pub dead: u64,
    /// Members that were cancelled.
    pub cancelled: u64,
    /// Whether it is closed (takes no more members).
    pub closed: bool,
    /// When its last member ended, the batch being closed (ms).
    pub completed_at_ms: Option<i64>,
    /// The callbacks it has, each with whether it fired.
    pub callbacks: Vec<(CallbackKind, bool)>,
}

impl BatchStatus {
    /// Members not ended yet.
    pub fn pending(&self) -> u64 {
        self.total
            .saturating_sub(self.succeeded + self.dead + self.cancelled)
    }
}

/// The due time an enqueue reports for a job of that id that waits for its parents
/// ([`EnqueueOutcome::Exists`]): later than any due time a job can have.
pub const WAITING_DUE_MS: i64 = MAX_DUE_MS + 1;

/// Most parents one job may wait for.
pub const MAX_PARENTS: usize = 100;

/// A job that another waits for: its store topic and id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[non_exhaustive]
pub struct ParentRef {
    /// Its store topic (a topic, or `<topic>#<p>` for a partition).
    pub topic: String,
    /// Its id.
    pub id: String,
}

impl ParentRef {
    /// The job `id` of store topic `topic`.
    pub fn new(topic: impl Into<String>, id: impl Into<String>) -> Self {
        ParentRef {
            topic: topic.into(),
            id: id.into(),
        }
    }
}

/// What a parent's death or cancellation does to a job that waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OnParentFailure {
    /// The job dies: dead-lettered (its hook called) with the parent's end as its reason.
    #[default]
    DeadLetter,
    /// The job is cancelled.
    Cancel,
    /// The parent counts as done: the job runs once its other parents are done.
    Run,
}

impl OnParentFailure {
    /// Its name: `dead_letter`, `cancel` or `run`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnParentFailure::DeadLetter => "dead_letter",
            OnParentFailure::Cancel => "cancel",
            OnParentFailure::Run => "run",
        }
    }
}

/// What [`WorkflowStore::enqueue_after`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AfterOutcome {
    /// The job waits for this many parents.
    Waiting {
        /// Parents not yet done.
        parents_left: u32,
    },
    /// Every parent was done already: the job was enqueued as by [`enqueue`](super::JobStore::enqueue)
    /// (this outcome).
    Enqueued(EnqueueOutcome),
    /// A live job (due, running or waiting) has this id: nothing changed.
    Exists(EnqueueOutcome),
    /// A parent had died or been cancelled already, and the job's [`OnParentFailure`] ended it at once
    /// (dead-lettered, or cancelled).
    Ended(Ended),
    /// This parent is not known to its topic (it never existed, or it finished and its type keeps no
    /// finished jobs): nothing was enqueued.
    MissingParent(ParentRef),
}

/// Batches, and the ends of jobs that batches follow.
#[async_trait]
pub trait WorkflowStore: Send + Sync + std::fmt::Debug + 'static {
    /// Creates batch `id` with its callbacks and first members, atomically (all or none), then
    /// dispatches the members into their topics (see the module's steps). A batch of that id that
    /// exists already changes nothing ([`BatchCreated::Exists`]), even when it is completed and still
    /// kept.
    async fn batch_create(&self, id: &str, batch: NewBatch) -> Result<BatchCreated>;

    /// Adds members to an open batch, atomically, and dispatches them; with `close`, closes it in the
    /// same step (then a batch whose members all ended completes). Adding no member with `close`
    /// closes it.
    async fn batch_add(&self, id: &str, jobs: Vec<BatchJob>, close: bool) -> Result<BatchAdded>;

    /// A batch's status, or `None` when there is none of this id (or it was completed more than
    /// [`BATCH_KEEP_MS`] ago).
    async fn batch(&self, id: &str) -> Result<Option<BatchStatus>>;

    /// A batch's members in the order they were added, skipping `offset`, at most `limit`.
    async fn batch_members(
        &self,
        id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<BatchMember>>;

    /// The namespace's batches, newest first, skipping `offset`, at most `limit`.
    async fn batches(&self, offset: usize, limit: usize) -> Result<Vec<BatchStatus>>;

    /// Hands up to `max` recorded ends of the topic's jobs to the batches that follow them: each
    /// member counted once, the callbacks due fired and dispatched; then forgets them. Ends being
    /// delivered by another caller are left to it for a while (they come back if it crashed).
    /// Returns how many ends it delivered (0: nothing was waiting).
    async fn deliver_ends(&self, topic: &str, max: usize) -> Result<usize>;

    /// Completes up to `max` dispatches left half done by callers that crashed (members committed
    /// but not yet in their topics, callbacks fired but not yet enqueued), and forgets batches
    /// completed more than [`BATCH_KEEP_MS`] ago. Returns how many batches it looked at. Workers call
    /// it every few seconds.
    async fn recover_batches(&self, max: usize) -> Result<usize>;

    /// Enqueues `job` into store topic `topic` to wait for `parents` (see the module's *Jobs that
    /// wait for jobs*); with no parent, as [`enqueue`](super::JobStore::enqueue). At most
    /// [`MAX_PARENTS`] parents (the client checks); a parent named twice counts once.
    async fn enqueue_after(
        &self,
        topic: &str,
        job: NewJob,
        parents: Vec<ParentRef>,
        on_failure: OnParentFailure,
    ) -> Result<AfterOutcome>;
}
