//! What operators need from a store beyond jobs by id: the registries of topics and workers, jobs
//! listed by state, pause and resume, and per-minute history. The operations API
//! ([`crate::ops`]) is built on these; applications use that, not this.

use async_trait::async_trait;

use super::Ended;
use crate::error::Result;

/// Which of a topic's jobs a listing walks (as JSON: `"scheduled"`, `"waiting"`, `"running"`, `"dead"`,
/// `"done"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PageState {
    /// Due jobs (ready or later), by due time.
    Scheduled,
    /// Jobs that wait for other jobs (see
    /// [`WorkflowStore::enqueue_after`](super::WorkflowStore::enqueue_after)), by id: each entry's
    /// score is [`WAITING_DUE_MS`](super::WAITING_DUE_MS). The parents a job still waits for are read
    /// by id ([`JobStore::job`](super::JobStore::job)).
    Waiting,
    /// Active jobs, by lease deadline.
    Running,
    /// Listed dead letters, by time of death.
    Dead,
    /// Kept finished jobs (succeeded or cancelled, while the topic's retention keeps them: see
    /// [`Job::keep`](crate::Job::keep)), by when they finished. Each entry says how it ended
    /// ([`PageEntry::ended`]). Not searchable by id prefix.
    Done,
}

/// A place in a listing: the sort key of an entry (score, then member), so that the next page starts
/// right after it even when that entry has gone meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PagePosition {
    /// The entry's score: due time ([`WAITING_DUE_MS`](super::WAITING_DUE_MS) for a waiting job), lease
    /// deadline, time of death or time it finished (ms).
    pub score: i64,
    /// The entry's member: the job's id, or for a dead letter its death as
    /// `<id>\n<sequence, 15 digits>` (see [`PageEntry::position`]).
    pub member: String,
}

/// One page of a listing.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PageQuery {
    /// Which jobs.
    pub state: PageState,
    /// Newest first (highest score first) rather than oldest first.
    pub newest_first: bool,
    /// Start right after this position (in the listing's order); from the start when `None`.
    pub after: Option<PagePosition>,
    /// Most entries.
    pub limit: usize,
}

impl PageQuery {
    /// The first page of `state`, oldest first.
    pub fn new(state: PageState, limit: usize) -> Self {
        PageQuery {
            state,
            newest_first: false,
            after: None,
            limit,
        }
    }
}

/// A job in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PageEntry {
    /// Its id.
    pub id: String,
    /// Due time, lease deadline, time of death or time it finished (ms), by its listing.
    pub score: i64,
    /// Its record (empty when it was missing).
    pub record: Vec<u8>,
    /// How often its lease expired (live jobs; 0 for dead letters).
    pub stalls: u32,
    /// A running job's lease holder: the worker number its claim named (see
    /// [`ClaimRequest::holder`](super::ClaimRequest::holder)); `None` when unknown.
    pub holder: Option<u64>,
    /// A dead letter's death number and reason.
    pub death: Option<(u64, String)>,
    /// A kept finished job's end (listings of [`PageState::Done`]): [`Ended::Succeeded`] with its
    /// result (encoded; empty when its type returns none), or [`Ended::Cancelled`]. `None` in other
    /// listings.
    pub ended: Option<Ended>,
    /// Its key for fairness (a live job's, or a dead letter's); `None` for a job without one and for a
    /// kept finished job.
    pub key: Option<String>,
}

impl PageEntry {
    /// Where this entry sits in its listing (a page that starts after it starts right after it).
    pub fn position(&self) -> PagePosition {
        let member = match &self.death {
            Some((seq, _)) => super::Death::new(self.id.clone(), *seq).member(),
            None => self.id.clone(),
        };
        PagePosition {
            score: self.score,
            member,
        }
    }
}

/// Jobs whose id starts with a prefix, one bounded step of a search.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PrefixPage {
    /// What this step found (at most the limit asked).
    pub entries: Vec<PageEntry>,
    /// Where the next step starts (an opaque backend cursor); `None` when the search is complete.
    pub next: Option<String>,
}

/// A worker's entry in the registry of live workers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerBeat {
    /// The worker's id.
    pub id: String,
    /// What the worker wrote about itself (JSON, see [`crate::ops::WorkerInfo`]).
    pub info: String,
    /// Its last heartbeat, by the store's clock (ms).
    pub beat_at_ms: i64,
    /// When it counts as gone unless it beats again (ms).
    pub expires_at_ms: i64,
}

/// One minute of a topic's history (counted as things happen, by the store's clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct MinuteCounts {
    /// The minute's start, ms since the epoch (a multiple of 60,000).
    pub minute_ms: i64,
    /// Jobs enqueued (new ones: an idempotent enqueue of an existing id is not counted).
    pub enqueued: u64,
    /// Attempts that succeeded.
    pub processed: u64,
    /// Failed attempts scheduled for a retry.
    pub retried: u64,
    /// Failed attempts that went to the dead letters.
    pub failed: u64,
    /// Jobs dead-lettered for any reason (failed, or stalled too often).
    pub dead: u64,
}

/// One key of a topic's keyed jobs, as operators see it (see [`OpsStore::busiest_keys`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyLoad {
    /// The key (`""`: the jobs without a key, in a topic with keyed jobs).
    pub key: String,
    /// Its jobs queued, due now or later (a count that may include a few jobs that moved or ended
    /// since, until a claim meets them).
    pub queued: u64,
    /// Its jobs running, when the topic counts them (a max running per key is set); else 0.
    pub running: u64,
    /// Until when it is held back (its rate per key, or a handler's `rate_limited`), if it is.
    pub held_until_ms: Option<i64>,
    /// Its own limits ([`Topic::set_key_limits`](crate::Topic::set_key_limits)), which replace for it
    /// the limits per key the topic's workers claim under; `None` when it has none of its own.
    pub own_limits: Option<crate::flow::KeyLimits>,
}

/// The busiest keys of a topic (see [`OpsStore::busiest_keys`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct KeysPage {
    /// The busiest keys of those looked at, by jobs queued (then by key).
    pub keys: Vec<KeyLoad>,
    /// Keys with a job queued (ready, waiting for their time, rate or hold, or at their max running;
    /// the last counted among the sampled ones when [`KeysPage::sampled`]).
    pub total: u64,
    /// Whether a sample was looked at (the topic has more keys than the sample): the busiest keys of
    /// the sample, not necessarily of the topic.
    pub sampled: bool,
    /// Whether running jobs are counted per key (a max running per key is set).
    pub running_counted: bool,
    /// The limits per key the topic's workers last claimed its keyed jobs under (a max running and a
    /// rate per key; [`KeyLimits::is_none`](crate::KeyLimits::is_none) when they set none); `None`
    /// until a worker has claimed keyed jobs of the topic.
    pub limits: Option<crate::flow::KeyLimits>,
}

/// postpone's scripts as Redis function libraries on the servers of a store (see
/// [`Ops::script_libraries`](crate::ops::Ops::script_libraries)): each script is a library named
/// `postpone_<SHA-1 of its code>`, so each build whose scripts changed loads its own, and the libraries
/// of builds no longer deployed stay until deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScriptLibraries {
    /// Servers looked at: the one Redis, or each master of a cluster (0 in memory).
    pub servers: usize,
    /// Libraries of this build's scripts loaded, summed over the servers (a server loads a script's
    /// library at its first call there).
    pub current: usize,
    /// Libraries named `postpone_` that are not this build's (other versions'), summed over the
    /// servers.
    pub others: usize,
    /// Of [`others`](Self::others), how many this call deleted (a prune; 0 for a listing).
    pub deleted: usize,
    /// Servers on which functions are unavailable (Redis before 7.0, or `FUNCTION` renamed or denied
    /// by an ACL): scripts run there by `EVALSHA`, and hold no library.
    pub without_functions: usize,
    /// Memory held by every function library of the servers (postpone's and any other), bytes: `INFO
    /// memory`'s `used_memory_vm_functions` plus `used_memory_functions`, summed.
    pub memory_bytes: u64,
}

/// How many minutes of history a store keeps (25 hours: at least the last 24 hours are complete).
pub const HISTORY_MINUTES: i64 = 1500;

/// The registries, listings, pause and history: what operators need (see the module docs).
#[async_trait]
pub trait OpsStore: Send + Sync + std::fmt::Debug + 'static {
    /// Records that `topic` (a topic's name, not a partition's) exists with `partitions` partitions.
    /// Idempotent; a smaller partition count than the one recorded changes nothing.
    async fn register_topic(&self, topic: &str, partitions: u16) -> Result<()>;

    /// Every registered topic and its partition count, by name.
    async fn topics(&self) -> Result<Vec<(String, u16)>>;

    /// Pauses (or resumes) claims of one store topic (a topic, or one partition): while paused, a claim
    /// still sweeps expired leases and hands back what a lost reply took, but takes no job, and when
    /// jobs are due reports no next due time (and [`ClaimBatch::paused`](super::ClaimBatch::paused)). Resuming sends a [`Hint::Topic`](super::Hint::Topic) due now. Enqueues,
    /// finishes and everything else go on as usual.
    async fn set_paused(&self, topic: &str, paused: bool) -> Result<()>;

    /// A worker's heartbeat: writes its entry (`info`), alive until the store's now + `ttl_ms`.
    /// Entries that expired are removed.
    async fn worker_beat(&self, id: &str, info: &str, ttl_ms: u64) -> Result<()>;

    /// Removes a worker's entry (it stopped).
    async fn worker_gone(&self, id: &str) -> Result<()>;

    /// The live workers (entries that have not expired), by id.
    async fn workers(&self) -> Result<Vec<WorkerBeat>>;

    /// One page of a store topic's jobs in one state, in (score, member) order (or its reverse), in
    /// O(log n + page): a page starts right after `query.after`, wherever that entry went meanwhile.
    async fn page(&self, topic: &str, query: &PageQuery) -> Result<Vec<PageEntry>>;

    /// One bounded step of a search for jobs in `state` whose id starts with `prefix`, starting at
    /// `cursor` (`None` for the first step). Dead letters are found in id order, in O(log n + limit);
    /// live jobs by a scan, in no particular order, each step examining a bounded number of jobs (a
    /// step may find none and still not be the last). A search of [`PageState::Scheduled`] finds no
    /// job that waits for jobs, one of [`PageState::Waiting`] only those. Kept finished jobs
    /// ([`PageState::Done`]) are not searched: the step finds none.
    async fn find_prefix(
        &self,
        topic: &str,
        state: PageState,
        prefix: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<PrefixPage>;

    /// Records the report of a transactional outbox's relay (see `postpone-postgres`) under `name` (its
    /// table), kept until the store's now + `ttl_ms`. Expired reports are removed.
    async fn outbox_report(&self, name: &str, report: &str, ttl_ms: u64) -> Result<()>;

    /// The outbox reports that have not expired: (name, reported at ms, report), by name.
    async fn outbox_reports(&self) -> Result<Vec<(String, i64, String)>>;

    /// Where a store topic lives, for operators (on a Redis Cluster: the master serving its slot,
    /// `host:port`); `None` when there is only one place.
    fn node_of(&self, topic: &str) -> Option<String> {
        let _ = topic;
        None
    }

    /// The busiest keys of a store topic's keyed jobs (fairness by key): at most `limit`, from a sample
    /// of at most `sample` keys of each kind (ready, waiting, running), never a scan of every key.
    /// Empty for a topic without keyed jobs.
    async fn busiest_keys(&self, topic: &str, limit: usize, sample: usize) -> Result<KeysPage>;

    /// The store topic's history for the last `minutes` minutes (the current one included, at most
    /// [`HISTORY_MINUTES`]), oldest first; minutes with nothing counted are left out.
    async fn history(&self, topic: &str, minutes: u32) -> Result<Vec<MinuteCounts>>;

    /// Sets (`Some`) or clears (`None`) the limits of key `key` of the topic's keyed jobs: its own, in
    /// place of the limits per key its claims give ([`ClaimRequest::key_limits`](crate::store::ClaimRequest::key_limits)),
    /// for that key alone, applied by every claim from the next on and kept until cleared. A key parked
    /// at its max running is filed again (and the claimers hinted), so that its new limits apply.
    async fn set_key_limits(
        &self,
        topic: &str,
        key: &str,
        limits: Option<crate::KeyLimits>,
    ) -> Result<()>;

    /// The keys of the topic with limits of their own ([`OpsStore::set_key_limits`]), by key.
    async fn key_limits(&self, topic: &str) -> Result<Vec<(String, crate::KeyLimits)>>;

    /// postpone's function libraries on the store's servers; with `prune`, those of other builds are
    /// deleted first (a process of another build that still runs loads its own again at its next
    /// call). None in memory.
    async fn script_libraries(&self, prune: bool) -> Result<ScriptLibraries> {
        let _ = prune;
        Ok(ScriptLibraries::default())
    }

    /// Checks of the backend for operators ([`Ops::doctor`](crate::ops::Ops::doctor)): what risks jobs
    /// and what to do about it. None by default.
    async fn doctor(&self) -> Result<Vec<crate::check::Check>> {
        Ok(Vec::new())
    }
}
