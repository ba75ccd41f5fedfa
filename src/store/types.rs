//! The data that crosses the store seam: jobs to enqueue, claims, finishes, and what each operation did.

use crate::flow::RateLimit;

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
    /// Its priority: 0 (none) to [`MAX_PRIORITY`]. Among due jobs, a higher priority is claimed first
    /// (then the earlier due time); a job keeps it through retries and expired leases, and a replace
    /// sets the new job's. See [`NewJob::priority`].
    pub priority: u8,
    /// Its key for fairness ([`Job::key`](crate::Job::key)): within the topic, due jobs of different
    /// keys are claimed round-robin between keys, a key's own in due order. `None`: the job is claimed
    /// in due order among the topic's unkeyed jobs. Validated by [`validate_key`](crate::validate_key).
    /// Set it with [`NewJob::with_key`], which puts it in the record too.
    pub key: Option<String>,
}

/// The highest priority a job may have.
pub const MAX_PRIORITY: u8 = 31;

impl NewJob {
    /// A job to enqueue.
    pub fn new(id: String, record: Vec<u8>, due: Due, replace: bool) -> Self {
        NewJob {
            id,
            record,
            due,
            replace,
            priority: 0,
            key: None,
        }
    }

    /// The same job with key `key` for fairness (see [`NewJob::key`]), which its record carries too
    /// (the Redis store reads it there when it has only the job's id).
    pub fn with_key(mut self, key: Option<String>) -> Self {
        crate::record::put_key(&mut self.record, key.as_deref());
        NewJob { key, ..self }
    }

    /// The same job with priority `priority` (capped at [`MAX_PRIORITY`]; the client checks it).
    pub fn priority(self, priority: u8) -> Self {
        NewJob {
            priority: priority.min(MAX_PRIORITY),
            ..self
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
    /// The lease token of the jobs this claim takes: random, fresh for every claim (see
    /// [`ClaimRequest::new`]), so that it never matches a lease of another claim, even after a store
    /// lost writes (a failover, an fsync window).
    pub token: u64,
    /// This claim was sent before and its reply was lost (see [`ClaimRequest::again`]).
    pub again: bool,
    /// The token of the caller's previous claim, whose reply arrived: the store may forget what that
    /// claim took (see [`ClaimRequest::received`]).
    pub received: Option<u64>,
    /// Who claims: a number naming the worker, kept with each lease so that operators see which
    /// worker holds a job (0: not said). See [`ClaimRequest::holder`].
    pub holder: u64,
    /// Most jobs of the topic active at once, across every claimer (0: no limit). See
    /// [`ClaimRequest::max_running`].
    pub max_running: u32,
    /// The topic's rate limit, across every claimer. See [`ClaimRequest::rate_limit`].
    pub rate: Option<RateLimit>,
    /// The limits of each key of the topic's keyed jobs. See [`ClaimRequest::key_limits`].
    pub key_limits: crate::KeyLimits,
}

impl ClaimRequest {
    /// A claim request, with a fresh random lease token.
    pub fn new(max: usize, lease_ms: u64, sweep_limit: usize, stall_limit: u32) -> Self {
        ClaimRequest {
            max,
            lease_ms,
            sweep_limit,
            stall_limit,
            token: crate::token::fresh(),
            again: false,
            received: None,
            holder: 0,
            max_running: 0,
            rate: None,
            key_limits: crate::KeyLimits::new(),
        }
    }

    /// Claims only while fewer than `n` jobs of the topic are active (leased, by any claimer; an
    /// expired lease counts until a claim sweeps it, and the sweep comes first). 0: no limit.
    pub fn max_running(self, n: u32) -> Self {
        ClaimRequest {
            max_running: n,
            ..self
        }
    }

    /// Claims only within the topic's rate limit (a budget the store keeps for the topic, by its
    /// clock, whoever claims). Every claimer of a topic should give the same limit.
    pub fn rate_limit(self, rate: RateLimit) -> Self {
        ClaimRequest {
            rate: Some(rate),
            ..self
        }
    }

    /// Claims a keyed job only within its key's limits (counted by the store for each key, by its
    /// clock, whoever claims). Every claimer of a topic should give the same limits.
    pub fn key_limits(self, key_limits: crate::KeyLimits) -> Self {
        ClaimRequest { key_limits, ..self }
    }

    /// Names the worker that claims (its number, kept with each lease it takes, for operators).
    pub fn holder(self, holder: u64) -> Self {
        ClaimRequest { holder, ..self }
    }

    /// Tells the store that the reply of the claim with `token` (this caller's previous one) arrived,
    /// so that the record it keeps for [`again`](Self::again) can go.
    pub fn received(self, token: u64) -> Self {
        ClaimRequest {
            received: Some(token),
            ..self
        }
    }

    /// The same claim, sent again because its reply was lost (a timeout, a dropped connection). If the
    /// first one ran, the store hands back the jobs it took that are still leased under its token,
    /// instead of claiming more: a lost reply costs no stall and leaves no job leased to nobody. If it
    /// did not run, this one claims as usual.
    pub fn again(self) -> Self {
        ClaimRequest {
            again: true,
            ..self
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

/// The result of a claim: see [`WorkerStore::claim`](super::WorkerStore::claim).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ClaimBatch {
    /// The store's time when the claim ran, in microseconds since the epoch (a store whose clock has
    /// only milliseconds reports whole milliseconds), so that a worker can sleep exactly until the next
    /// job is due.
    pub now_us: i64,
    /// The claimed jobs: those with a priority first (highest first, then earliest due), then the
    /// others, earliest due first.
    pub jobs: Vec<ClaimedJob>,
    /// The earliest due time still in `due` after the claim, if any (may be <= now when more are due).
    pub next_due_ms: Option<i64>,
    /// The earliest lease deadline in `active` after the claim, if any.
    pub next_lease_deadline_ms: Option<i64>,
    /// Whether some dead job is waiting for its hook with a time <= now.
    pub dead_pending: bool,
    /// Whether ends of jobs that batches follow wait to be delivered
    /// ([`WorkflowStore::deliver_ends`](super::WorkflowStore::deliver_ends)).
    pub ends_pending: bool,
    /// How many expired leases were returned to due by the sweep.
    pub swept: u32,
    /// How many jobs the sweep dead-lettered (stalled) or ended (cancelled while active).
    pub swept_dead: u32,
    /// The topic is paused and jobs were due: nothing new was claimed, and `next_due_ms` is `None` (a
    /// resume sends a hint).
    pub paused: bool,
    /// Jobs were due but a flow limit held them back (see [`HeldBack`]).
    pub held_back: Option<HeldBack>,
}

/// Why a claim took no due job, or fewer than it could have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeldBack {
    /// [`ClaimRequest::max_running`] jobs are active: `next_due_ms` is `None`, and the finish that
    /// frees a slot sends a hint.
    MaxRunning,
    /// The rate limit's budget is spent: `next_due_ms` is when the next job may go.
    Rate,
    /// A handler reported a provider's limit ([`Finish::RateLimited`]): nothing is claimed until
    /// `next_due_ms`.
    Provider,
}

impl ClaimBatch {
    /// The store's time when the claim ran, ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        self.now_us.div_euclid(1000)
    }
}

/// How a worker finishes one claimed job.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Finish {
    /// The handler succeeded: delete the job (or keep it, when its topic keeps finished jobs), count
    /// `processed`.
    Done,
    /// Run again after `delay_ms` with this record (the worker has set its attempt and errors). Used for a
    /// retry (count `retried`), a snooze or a hand-back at shutdown (counted as neither: `counted=false`).
    /// If the job was cancelled while active it ends as cancelled instead.
    Retry {
        /// The updated record. A keyed job's keeps its key (the record as claimed carries it: see
        /// [`NewJob::with_key`]); in a topic with keyed jobs the Redis store puts it back into one that
        /// came without it.
        record: Vec<u8>,
        /// Delay from the backend's now.
        delay_ms: u64,
        /// Whether to count it in `retried`.
        counted: bool,
    },
    /// A provider's rate limit was hit: run again after `delay_ms` with this record, counted as neither
    /// retry nor failure, and claim no job of the topic until then, whoever claims (see
    /// [`HeldBack::Provider`]). If the job was cancelled while active it ends as cancelled instead
    /// (the topic is held all the same).
    RateLimited {
        /// The record (unchanged: no attempt used).
        record: Vec<u8>,
        /// Delay from the backend's now.
        delay_ms: u64,
    },
    /// The handler succeeded and returned this result (encoded): like [`Finish::Done`], and the job is
    /// kept with its result when its topic keeps finished jobs ([`WorkerStore::retain`]), and its
    /// result announced to its waiters ([`JobStore::outcome`]). A job type that returns nothing
    /// finishes with [`Finish::Done`].
    ///
    /// [`WorkerStore::retain`]: super::WorkerStore::retain
    /// [`JobStore::outcome`]: super::JobStore::outcome
    Succeeded {
        /// The encoded result.
        result: Vec<u8>,
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

/// A lease this worker holds: the job's id and the token of the claim that leased it.
pub type Lease = (String, u64);

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
    /// The job waits for its parents (see [`WorkflowStore::enqueue_after`](super::WorkflowStore::enqueue_after)):
    /// it has no due time yet; nothing changed.
    Waiting,
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
    /// Dead since this time (ms), for this reason (its newest death, when it died more than once).
    Dead {
        /// Which death.
        seq: u64,
        /// When it died, ms since the epoch.
        died_at_ms: i64,
        /// Why.
        reason: String,
        /// Whether the dead-letter hook has succeeded for it.
        delivered: bool,
    },
    /// Waiting for parents (see [`WorkflowStore::enqueue_after`](super::WorkflowStore::enqueue_after)),
    /// not yet due.
    Waiting {
        /// The parents not yet done, in the order they were given.
        parents: Vec<super::ParentRef>,
    },
    /// Finished (succeeded or cancelled) at this time (ms), and kept: its topic keeps finished jobs
    /// (see [`WorkerStore::retain`](super::WorkerStore::retain)). The job's result, if any, is in
    /// [`StoredJob::result`].
    Done {
        /// Whether it was cancelled (else it succeeded).
        cancelled: bool,
        /// When it finished, ms since the epoch.
        done_at_ms: i64,
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
    /// How often its lease expired so far (a live job; 0 for a dead one).
    pub stalls: u32,
    /// An active job's lease holder (see [`ClaimRequest::holder`]), when the claim named one.
    pub holder: Option<u64>,
    /// A kept succeeded job's result (encoded), when its type returns one.
    pub result: Option<Vec<u8>>,
    /// A running job's progress, when its handler reported some.
    pub progress: Option<super::Progress>,
    /// Its key for fairness ([`NewJob::key`]), when it has one: a live job's (waiting, due or running),
    /// or a dead letter's (a requeue files it under it). `None` for a job without a key, and for a kept
    /// finished job (its key is forgotten when it ends).
    pub key: Option<String>,
    /// A due or running job's key as claims see it now: its jobs queued and running, and until when
    /// it is held back. `None` for a job without a key and in other states.
    pub key_load: Option<super::KeyLoad>,
    /// The limits per key the topic's workers last claimed its keyed jobs under (see
    /// [`KeysPage::limits`](super::KeysPage::limits)), beside [`StoredJob::key_load`].
    pub key_limits: Option<crate::flow::KeyLimits>,
}

impl StoredJob {
    /// A job found in `state` with `record` (no stalls, no holder).
    pub fn new(state: StoredState, record: Vec<u8>) -> Self {
        StoredJob {
            state,
            record,
            stalls: 0,
            holder: None,
            result: None,
            progress: None,
            key: None,
            key_load: None,
            key_limits: None,
        }
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
