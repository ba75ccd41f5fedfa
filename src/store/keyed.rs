//! Jobs enqueued under a key: uniqueness windows and debounce (see [`JobStore::enqueue_keyed`]).
//!
//! [`JobStore::enqueue_keyed`]: super::JobStore::enqueue_keyed

use super::{EnqueueOutcome, NewJob};

/// The states of a unique job's first job in which a new enqueue of its key is refused (within the
/// window): any combination of [`SCHEDULED`](Self::SCHEDULED), [`RUNNING`](Self::RUNNING) and
/// [`FINISHED`](Self::FINISHED) (done, cancelled or dead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueStates(u8);

impl UniqueStates {
    /// Scheduled or due, not yet claimed.
    pub const SCHEDULED: UniqueStates = UniqueStates(1);
    /// Running on a worker.
    pub const RUNNING: UniqueStates = UniqueStates(2);
    /// Gone from the queue: done, cancelled or dead.
    pub const FINISHED: UniqueStates = UniqueStates(4);
    /// All three: at most one job of the key per window, whatever became of it.
    pub const ALL: UniqueStates = UniqueStates(7);

    /// The states of `self` and `other`.
    #[must_use]
    pub const fn and(self, other: UniqueStates) -> UniqueStates {
        UniqueStates(self.0 | other.0)
    }

    /// Whether `self` has every state of `other`.
    pub const fn contains(self, other: UniqueStates) -> bool {
        self.0 & other.0 == other.0
    }

    /// The bits, as the stores keep them.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// From the bits (unknown bits dropped).
    pub const fn from_bits(bits: u8) -> UniqueStates {
        UniqueStates(bits & 7)
    }
}

impl Default for UniqueStates {
    fn default() -> Self {
        UniqueStates::ALL
    }
}

/// What a key asks of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Keyed {
    /// Unique: while the key's last job created within `window_ms` is in one of `states`, an enqueue of
    /// the key creates nothing.
    Unique {
        /// The key.
        key: String,
        /// How long after its enqueue a job holds its key (ms, at least 1).
        window_ms: u64,
        /// The states in which it holds it.
        states: UniqueStates,
    },
    /// Debounce: while the key's pending job is scheduled, an enqueue of the key moves that job to
    /// `quiet_ms` from now (never past `max_wait_ms` after the job was created, when not 0) and, with
    /// `replace`, gives it the new record; otherwise a new job is created, due in `quiet_ms`.
    Debounce {
        /// The key.
        key: String,
        /// The quiet period (ms).
        quiet_ms: u64,
        /// The longest a pending job is pushed back, from its creation (ms; 0: no limit).
        max_wait_ms: u64,
        /// Whether a pushed job takes the new record.
        replace: bool,
    },
}

impl Keyed {
    /// The key.
    pub fn key(&self) -> &str {
        match self {
            Keyed::Unique { key, .. } | Keyed::Debounce { key, .. } => key,
        }
    }
}

/// One job of [`JobStore::enqueue_keyed`](super::JobStore::enqueue_keyed): a job, and its key.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KeyedJob {
    /// The job.
    pub job: NewJob,
    /// Its key (`None`: an ordinary enqueue).
    pub keyed: Option<Keyed>,
}

impl KeyedJob {
    /// A job under a key.
    pub fn new(job: NewJob, keyed: Option<Keyed>) -> Self {
        KeyedJob { job, keyed }
    }
}

/// What a keyed enqueue did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedOutcome {
    /// An enqueue as [`JobStore::enqueue`](super::JobStore::enqueue) reports it (the key was free, or
    /// none was given).
    Enqueued(EnqueueOutcome),
    /// The key is held by job `id`, scheduled (due at `due_at_ms`) or running (`None`): nothing created.
    Duplicate {
        /// The job that holds the key.
        id: String,
        /// Its due time while scheduled.
        due_at_ms: Option<i64>,
    },
    /// The key's last job finished, and its window lasts until `until_ms`: nothing created.
    Throttled {
        /// The job that held the key.
        id: String,
        /// When the window ends.
        until_ms: i64,
    },
    /// The key's pending job `id` was pushed back to `due_at_ms` (and took the new record if asked).
    Debounced {
        /// The pending job.
        id: String,
        /// Its new due time.
        due_at_ms: i64,
    },
}
