//! The store seam: what a backend must do, with the semantics every backend shares.
//!
//! A backend holds, per topic of its namespace (where a topic is a topic name, or `<topic>#<p>` for
//! partition `p` of a partitioned topic: the backend treats each partition as a topic of its own):
//! - `due`: ids by due time (ms since the epoch, by the backend's clock);
//! - `active`: ids by lease deadline, each with the lease token of its current claim;
//! - `jobs`: id -> record (opaque bytes, see `record.rs`), for due and active jobs;
//! - `stalls`: id -> how often its lease expired (over the job's whole life: a retry does not reset it;
//!   it goes when the job leaves `due`/`active`); `cancels`: ids cancelled while active;
//! - `dead`: id -> (record, reason, died_at), with `dead_pending`: ids whose dead-letter hook has not
//!   yet succeeded, by the time they may next be handed to a hook;
//! - counters (see [`TopicCounts`]) and the lease-token sequence.
//!
//! A live job is in exactly one of `due` or `active`; a dead job only in `dead`. Done and cancelled jobs
//! leave nothing behind but a counter. A dead job does not hold its id: a live job of the same id may
//! be enqueued beside it. A lease has expired when its deadline <= now, a job is due when its due time
//! <= now, and ties in every sorted set are broken by id, bytewise (as in a Redis sorted set). Every
//! method is one atomic step (one Lua script on Redis, one lock on the memory backend). Time comes
//! from the backend (`TIME` on Redis), never from the caller, except an absolute due time the user
//! asked for.
//!
//! Backends are not meant to be called directly by applications: use [`Client`](crate::Client) and
//! [`Worker`](crate::Worker), which validate input and encode jobs. The trait is public so that the
//! conformance suite, and any third backend, can use it.

pub mod memory;
pub mod redis;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::error::Result;

/// The latest due time a backend stores: 9999-12-31T23:59:59.999Z, in ms since the Unix epoch. Later due
/// times (from `Due` or a retry delay) are capped to it, so that every due time is exact in a Redis score
/// (a double) and fits a `chrono::DateTime`.
pub const MAX_DUE_MS: i64 = 253_402_300_799_999;

/// When a job becomes due (capped at [`MAX_DUE_MS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// This many ms after the backend's now (0 = now).
    In(u64),
    /// At this absolute time, ms since the Unix epoch (a past time means now: the job is stored, and
    /// reported, as due now).
    At(i64),
}

/// One job to enqueue.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewJob {
    /// Validated id.
    pub id: String,
    /// Encoded record (attempt 1).
    pub record: Vec<u8>,
    /// When it becomes due.
    pub due: Due,
    /// Replace an existing due job of the same id (payload and due time). An active job is never
    /// replaced: the outcome is [`EnqueueOutcome::Running`].
    pub replace: bool,
}

impl NewJob {
    /// A job to enqueue.
    pub fn new(id: String, record: Vec<u8>, due: Due, replace: bool) -> Self {
        NewJob {
            id,
            record,
            due,
            replace,
        }
    }
}

/// What an enqueue did, per job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnqueueOutcome {
    /// Stored, due at this time (ms).
    Created {
        /// Due time, ms since the epoch.
        due_at_ms: i64,
    },
    /// A due job with this id existed and was replaced; now due at this time (ms).
    Replaced {
        /// Due time, ms since the epoch.
        due_at_ms: i64,
    },
    /// A due job with this id exists; nothing changed (idempotent enqueue).
    Exists {
        /// Its due time, ms since the epoch.
        due_at_ms: i64,
    },
    /// An active (running) job with this id exists; nothing changed.
    Running,
}

/// What the worker asks of one claim.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ClaimRequest {
    /// Most jobs to claim (may be 0: then the call only sweeps and reports times).
    pub max: usize,
    /// Lease length in ms.
    pub lease_ms: u64,
    /// Before claiming, sweep at most this many expired leases.
    pub sweep_limit: usize,
    /// A job whose lease has expired more than this many times is dead-lettered instead of made due.
    pub stall_limit: u32,
}

impl ClaimRequest {
    /// A claim request.
    pub fn new(max: usize, lease_ms: u64, sweep_limit: usize, stall_limit: u32) -> Self {
        ClaimRequest {
            max,
            lease_ms,
            sweep_limit,
            stall_limit,
        }
    }
}

/// A claimed job.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClaimedJob {
    /// Its id.
    pub id: String,
    /// The lease token of this claim; every later finish or extend must carry it.
    pub token: u64,
    /// The due time it was claimed at (ms).
    pub due_at_ms: i64,
    /// Its record.
    pub record: Vec<u8>,
}

/// The result of a claim.
///
/// Sweeping happens first, in the same atomic step: every expired lease (up to `sweep_limit`, earliest
/// first) is removed from `active`; its `stalls` count goes up by one; if the job was cancelled while
/// active it ends as cancelled (count `cancelled`); else if its stall count now exceeds `stall_limit` it
/// is dead-lettered with its record unchanged and reason `"stalled: lease expired N times"` (count
/// `dead_total`, not `failed`; pending its hook from now); else it is made due at once, due now, record
/// unchanged (no attempt used; count `stalled`). Then up to `max` due jobs (due time <= now, earliest
/// first) move to `active` with deadline now + lease, all under one fresh token from the topic's
/// sequence.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ClaimBatch {
    /// The backend's time when the claim ran (ms).
    pub now_ms: i64,
    /// The same time in microseconds, for a worker that wakes exactly when the next job is due
    /// (`now_ms * 1000` from a backend whose clock has only milliseconds; a value that does not round
    /// down to `now_ms` is ignored).
    pub now_us: i64,
    /// The claimed jobs, earliest due first.
    pub jobs: Vec<ClaimedJob>,
    /// The earliest due time still in `due` after the claim, if any (may be <= now when more are due).
    pub next_due_ms: Option<i64>,
    /// The earliest lease deadline in `active` after the claim, if any.
    pub next_lease_deadline_ms: Option<i64>,
    /// Whether some dead job is waiting for its hook with a time <= now.
    pub dead_pending: bool,
    /// How many expired leases were returned to due by the sweep.
    pub swept: u32,
    /// How many jobs the sweep dead-lettered (stalled) or ended (cancelled while active).
    pub swept_dead: u32,
}

/// How a worker finishes one claimed job.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Finish {
    /// The handler succeeded: delete the job, count `processed`.
    Done,
    /// Run again after `delay_ms` with this record (the worker has set its attempt and errors). Used for a
    /// retry (count `retried`), a snooze or a hand-back at shutdown (counted as neither: `counted=false`).
    /// If the job was cancelled while active it ends as cancelled instead.
    Retry {
        /// The updated record.
        record: Vec<u8>,
        /// Delay from the backend's now.
        delay_ms: u64,
        /// Whether to count it in `retried`.
        counted: bool,
    },
    /// Move to the dead letters with this record and reason (count `failed` and `dead_total`; a dead
    /// job of the same id is replaced). Adds the id to `dead_pending` with time now. A job cancelled
    /// while active is dead-lettered all the same: it failed.
    Dead {
        /// The final record (with the last error).
        record: Vec<u8>,
        /// Why it died.
        reason: String,
    },
}

/// One finish, tied to its claim by the lease token.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FinishItem {
    /// The job's id.
    pub id: String,
    /// The token its claim returned.
    pub token: u64,
    /// What to do.
    pub finish: Finish,
}

impl FinishItem {
    /// A finish for a claimed job.
    pub fn new(id: String, token: u64, finish: Finish) -> Self {
        FinishItem { id, token, finish }
    }
}

/// What a finish did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinishOutcome {
    /// Applied as asked.
    Applied,
    /// A `Retry` found the job cancelled while it ran: it ended as cancelled (count `cancelled`).
    Cancelled,
    /// The token does not match the job's current lease (the lease expired and the job was swept or
    /// claimed again, or the job is gone): nothing changed.
    Stale,
}

/// What a heartbeat found for one lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseStatus {
    /// Still held; the deadline moved to now + lease.
    Held,
    /// Still held and extended, but the job was cancelled: the handler should stop.
    Cancelled,
    /// Lost (token mismatch or job gone): the handler's result will be ignored.
    Lost,
}

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// The job was due and is gone (count `cancelled`).
    Removed,
    /// The job is running: it is marked, will not be retried, and its handler sees the flag at the next
    /// heartbeat.
    Marked,
    /// No live job has this id.
    NotFound,
}

/// What a reschedule did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RescheduleOutcome {
    /// Now due at this time (ms).
    Rescheduled {
        /// New due time, ms since the epoch.
        due_at_ms: i64,
    },
    /// The job is running; nothing changed.
    Running,
    /// No live job has this id.
    NotFound,
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoredState {
    /// Waiting in `due` until this time (ms; may be in the past when it is ready but not yet claimed).
    Due {
        /// Due time, ms since the epoch.
        due_at_ms: i64,
    },
    /// Claimed, leased until this time (ms).
    Active {
        /// Lease deadline, ms since the epoch.
        lease_deadline_ms: i64,
    },
    /// Dead since this time (ms), for this reason.
    Dead {
        /// When it died, ms since the epoch.
        died_at_ms: i64,
        /// Why.
        reason: String,
        /// Whether the dead-letter hook has succeeded for it.
        delivered: bool,
    },
}

/// A job as found by id.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoredJob {
    /// Where it is.
    pub state: StoredState,
    /// Its record.
    pub record: Vec<u8>,
}

/// A dead job.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeadEntry {
    /// Its id.
    pub id: String,
    /// Its final record.
    pub record: Vec<u8>,
    /// Why it died.
    pub reason: String,
    /// When it died (ms).
    pub died_at_ms: i64,
}

/// Counts for one topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicCounts {
    /// Due later than now.
    pub scheduled: u64,
    /// Due now or earlier, not yet claimed.
    pub ready: u64,
    /// Claimed and leased.
    pub active: u64,
    /// In the dead letters.
    pub dead: u64,
    /// Dead jobs whose hook has not yet succeeded.
    pub dead_pending: u64,
    /// Counter: attempts that succeeded.
    pub processed: u64,
    /// Counter: failed attempts scheduled for a retry.
    pub retried: u64,
    /// Counter: attempts that failed and went to the dead letters (exhausted or failed now).
    pub failed: u64,
    /// Counter: jobs dead-lettered for any reason (including stalls).
    pub dead_total: u64,
    /// Counter: jobs cancelled.
    pub cancelled: u64,
    /// Counter: expired leases returned to due.
    pub stalled: u64,
    /// Counter: dead jobs removed by trimming (never before their hook succeeded).
    pub trimmed: u64,
}

impl std::ops::AddAssign for TopicCounts {
    /// Adds every count and counter (the counts of a partitioned topic are the sums over its partitions).
    fn add_assign(&mut self, o: TopicCounts) {
        self.scheduled += o.scheduled;
        self.ready += o.ready;
        self.active += o.active;
        self.dead += o.dead;
        self.dead_pending += o.dead_pending;
        self.processed += o.processed;
        self.retried += o.retried;
        self.failed += o.failed;
        self.dead_total += o.dead_total;
        self.cancelled += o.cancelled;
        self.stalled += o.stalled;
        self.trimmed += o.trimmed;
    }
}

/// A wake-up hint: a job became due earlier than a sleeping worker may know.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hint {
    /// Something in this topic is due at this time (ms).
    Topic {
        /// The topic.
        topic: String,
        /// The due time, ms since the epoch.
        due_at_ms: i64,
    },
    /// Hints may have been lost (reconnect, clock change): every worker should look again.
    All,
}

/// A backend: the seam between the client/worker and where jobs live.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// A short name for logs and the quickstart ("redis", "redis-cluster", "memory").
    fn backend_name(&self) -> &'static str;

    /// The backend's current time, ms since the epoch.
    async fn now_ms(&self) -> Result<i64>;

    /// Enqueues jobs (all in one topic), atomically each, in order. A new job goes to `due`. An existing
    /// due id gives `Exists` unless `replace` (then record and due time are replaced: `Replaced`); an
    /// active id gives `Running`; a dead job of the same id is no obstacle. A job whose due time is
    /// earlier than the topic's earliest (or the topic has none due) sends a [`Hint::Topic`]; one hint
    /// per call, for the earliest such job, is enough.
    async fn enqueue(&self, topic: &str, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>>;

    /// Sweeps expired leases, then claims due jobs: see [`ClaimBatch`].
    async fn claim(&self, topic: &str, request: ClaimRequest) -> Result<ClaimBatch>;

    /// Finishes claimed jobs, each only if its token matches its current lease. A `Retry` that makes a
    /// job due earlier than the topic's earliest sends a [`Hint::Topic`], like [`Store::enqueue`].
    async fn finish(&self, topic: &str, items: Vec<FinishItem>) -> Result<Vec<FinishOutcome>>;

    /// Renews leases to now + `lease_ms`, each only if its token matches. A lease past its deadline that no
    /// sweep has taken yet still matches (and so does a finish with its token).
    async fn extend(
        &self,
        topic: &str,
        leases: &[(String, u64)],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>>;

    /// Cancels a live job by id.
    async fn cancel(&self, topic: &str, id: &str) -> Result<CancelOutcome>;

    /// Moves a due job to a new due time (sends a hint when earlier than the topic's earliest).
    async fn reschedule(&self, topic: &str, id: &str, due: Due) -> Result<RescheduleOutcome>;

    /// Finds a job (live or dead) by id: the live one when a live and a dead job share the id.
    async fn job(&self, topic: &str, id: &str) -> Result<Option<StoredJob>>;

    /// Counts by state, and the topic's counters.
    async fn counts(&self, topic: &str) -> Result<TopicCounts>;

    /// Lists dead jobs, newest first, skipping `offset`.
    async fn dead_list(&self, topic: &str, offset: usize, limit: usize) -> Result<Vec<DeadEntry>>;

    /// Moves a dead job back to `due`, due now, with this record (the caller resets its attempt).
    /// Returns false when no dead job has this id; fails with [`crate::Error::JobExists`] when a live job
    /// has it (and a dead one too). Sends a hint like [`Store::enqueue`].
    async fn dead_requeue(&self, topic: &str, id: &str, record: Vec<u8>) -> Result<bool>;

    /// Deletes one dead job (`Some(id)`) or all of them (`None`), pending hooks included. Returns how
    /// many were deleted.
    async fn dead_purge(&self, topic: &str, id: Option<&str>) -> Result<u64>;

    /// Deletes dead jobs that died before `older_than_ms`, and beyond the newest `keep` (oldest first), but
    /// only those whose hook has succeeded, at most `limit` per call. Counts them in `trimmed`.
    ///
    /// A dead job is trimmed when either holds: it died before `older_than_ms`, or it is not among the
    /// newest `keep` of all dead jobs (pending ones count towards `keep`, and are never trimmed). So
    /// `keep = u64::MAX` trims by age only and `older_than_ms = i64::MIN` by count only.
    async fn dead_trim(
        &self,
        topic: &str,
        older_than_ms: i64,
        keep: u64,
        limit: usize,
    ) -> Result<u64>;

    /// Takes up to `max` dead jobs whose hook is due (pending time <= now), earliest first, and pushes
    /// their pending time to now + `lease_ms`, so that a crashed hook caller's jobs come back.
    async fn dead_claim(&self, topic: &str, max: usize, lease_ms: u64) -> Result<Vec<DeadEntry>>;

    /// Marks hooks done (removes from `dead_pending`). Ids that are not pending are ignored.
    async fn dead_ack(&self, topic: &str, ids: &[String]) -> Result<()>;

    /// Puts a failed hook's job back in `dead_pending` for now + `delay_ms`. Does nothing when no dead job
    /// has this id.
    async fn dead_retry(&self, topic: &str, id: &str, delay_ms: u64) -> Result<()>;

    /// Wake-up hints for every topic of the namespace. A backend whose hint channel may have dropped
    /// messages sends [`Hint::All`]; a receiver that lags (`RecvError::Lagged`) should act as on
    /// [`Hint::All`].
    fn hints(&self) -> broadcast::Receiver<Hint>;

    /// Called once when a worker starts: the backend checks what it needs (Redis version, eviction
    /// policy) and warns loudly about what is risky.
    async fn check_worker_start(&self) -> Result<()> {
        Ok(())
    }
}
