//! The client: enqueue jobs, cancel and reschedule them by id, inspect topics.

mod after;
mod batch;
mod batch_handle;
mod batch_status;
mod builder;
mod dead_letters;
mod enqueue;
mod keyed;
pub mod outbox;
mod periodic;
mod topic;
mod wait;
mod when;

use std::sync::Arc;

use chrono::{DateTime, Utc};

pub use batch::BatchBuilder;
pub use batch_handle::Batch;
pub use batch_status::{BatchMember, BatchStatus};
pub use builder::{ClientBuilder, Namespaced, NoNamespace, StoreKeepsItsOwnNamespace};
pub use enqueue::{Enqueue, EnqueueItem, EnqueueStatus, Enqueued};
pub use keyed::{Debounce, Unique};
pub use periodic::ScheduleInfo;
pub use topic::{CancelStatus, JobInfo, JobState, PartialCounts, Topic, UnreadablePartition};
pub use wait::{JobOutcome, Waiter};
pub use when::When;

use crate::error::Result;
use crate::job::Job;
use crate::partition::validate_partitions;
use crate::store::memory::MemoryStore;
use crate::store::Store;
use crate::validate::validate_topic;

/// Default limit on an encoded job: 512 KiB.
pub const DEFAULT_MAX_PAYLOAD: usize = 512 * 1024;
/// Default namespace, so that several applications can share one Redis with their own namespaces.
pub const DEFAULT_NAMESPACE: &str = "default";

/// A handle to a job store: enqueue, cancel, reschedule, inspect. Cheap to clone; share one per process.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> postpone::Result<()> {
/// // In memory (tests, demos):
/// let client = postpone::Client::memory();
/// assert_eq!(client.backend_name(), "memory");
/// // On Redis, with a namespace of its own:
/// // let client = postpone::Client::builder().namespace("shop").redis("redis://127.0.0.1:6379").await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) max_payload: usize,
    /// Topics this client has recorded in the store's registry of topics (see [`crate::ops`]), with
    /// their partitions: each is written once per client, not per enqueue. Looked up at every enqueue,
    /// so hashed with FxHash (its topics are those the application enqueues to).
    pub(crate) registered: std::sync::Mutex<rustc_hash::FxHashMap<String, u16>>,
    /// Callers waiting for jobs (see `wait.rs`): one subscription to the store's announcements.
    pub(crate) waiters: wait::Waiters,
}

impl Inner {
    /// Records `topic` in the store's registry of topics, once per client (and again if its
    /// partitions grow). A failure is not the enqueue's: it is retried at the next enqueue.
    pub(crate) async fn register(&self, topic: &str, partitions: u16) {
        let known = |r: &rustc_hash::FxHashMap<String, u16>| r.get(topic) == Some(&partitions);
        if known(&self.registered.lock().unwrap_or_else(|p| p.into_inner())) {
            return;
        }
        match self.store.register_topic(topic, partitions).await {
            Ok(()) => {
                let mut r = self.registered.lock().unwrap_or_else(|p| p.into_inner());
                r.insert(topic.to_owned(), partitions);
            }
            Err(e) => {
                tracing::debug!(topic, error = %e.report(), "could not record the topic in the registry of topics; retrying at the next enqueue")
            }
        }
    }
}

impl Client {
    /// A client on a fresh in-memory store (jobs live as long as this process).
    pub fn memory() -> Self {
        Self::builder().store(MemoryStore::new())
    }

    /// A client on Redis at `url` (`redis://`, `redis://user:pass@host:port/db`, `rediss://`), in the
    /// default namespace.
    ///
    /// # Connections and timeouts
    ///
    /// Share one client per process: every call from every task goes over **one multiplexed
    /// connection**, pipelined, so no caller ever waits for a free connection, however many call at
    /// once. Concurrent enqueues (and cancels, and reschedules) of one topic are coalesced into one
    /// Redis script call while one is in flight: an idle client sends at once; under load, callers
    /// share calls, and each gets exactly its own outcome.
    ///
    /// Besides that connection, a client holds one idle connection that notices at once when Redis
    /// goes away. A worker adds one pub/sub connection for wake-up hints and one dedicated connection for
    /// its start-up checks (from a pool of at most 8, opened on demand, for what must not share the
    /// multiplexed connection).
    ///
    /// Timeouts (defaults): 3 s to connect (TCP, TLS and handshake), 3 s for each reply. When Redis is
    /// away, calls fail with a transient [`Error::Backend`](crate::Error::Backend) as soon as the
    /// connect fails (one connect at a time; every call waiting for it fails with it, none waits out a
    /// timeout for it); after Redis is back, the next call reconnects and succeeds. A failed call may
    /// still have been applied (its reply lost with the connection): enqueueing by id is idempotent, so
    /// retrying it is safe.
    ///
    /// Other timeouts or pool size: build a [`RedisStore`](crate::store::redis::RedisStore) with
    /// [`RedisOptions`](crate::store::redis::RedisOptions) and pass it to [`ClientBuilder::store`].
    ///
    /// ```no_run
    /// # async fn demo() -> postpone::Result<()> {
    /// use postpone::store::redis::{RedisOptions, RedisStore};
    /// use std::time::Duration;
    ///
    /// let options = RedisOptions::new("shop").response_timeout(Duration::from_secs(1));
    /// let store = RedisStore::connect_with("redis://127.0.0.1:6379", options).await?;
    /// let client = postpone::Client::builder().store(store);
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder().redis(url).await
    }

    /// A client on a Redis Cluster, from seed node URLs, in the default namespace: see
    /// [`ClientBuilder::redis_cluster`]. Needs the `cluster` feature (off by default); without it this
    /// fails with [`Error::InvalidConfig`](crate::Error::InvalidConfig) naming the feature.
    pub async fn connect_cluster<S: AsRef<str>>(nodes: &[S]) -> Result<Self> {
        Self::builder().redis_cluster(nodes).await
    }

    /// From the environment: a Redis Cluster when `REDIS_CLUSTER_NODES` is set (seed URLs separated by
    /// commas, e.g. `redis://127.0.0.1:7000,redis://127.0.0.1:7001`; the `cluster` feature), else Redis when `REDIS_URL` is
    /// set, else in memory. The namespace comes from `POSTPONE_NAMESPACE` when set.
    /// In memory, the namespace plays no part: each in-memory store is a world of its own.
    pub async fn from_env() -> Result<Self> {
        let namespace =
            std::env::var("POSTPONE_NAMESPACE").unwrap_or_else(|_| DEFAULT_NAMESPACE.to_owned());
        let builder = Self::builder().namespace(namespace);
        if let Ok(nodes) = std::env::var("REDIS_CLUSTER_NODES") {
            let nodes = split_nodes(&nodes);
            if !nodes.is_empty() {
                return builder.redis_cluster(&nodes).await;
            }
        }
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => builder.redis(&url).await,
            _ => Ok(Self::memory()),
        }
    }

    /// Options for a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// "redis", "redis-cluster" or "memory".
    pub fn backend_name(&self) -> &'static str {
        self.inner.store.backend_name()
    }

    /// The store behind this client, for postpone's own tests (the `test-hooks` feature): applications
    /// go through the client and the worker, which validate input and encode jobs.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The store behind this client, for the layers built on it (operations, workers).
    pub(crate) fn backend(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Enqueues a job: set options on the returned builder, then `.await` it.
    pub fn enqueue<J: Job>(&self, job: J) -> Enqueue<'_, J> {
        Enqueue::new(self, job)
    }

    /// Enqueues many jobs of one type in few round trips. Each item is a job (due now, generated id) or
    /// an [`EnqueueItem`] with its own id and time. Returns one result per job, in order. A `replace` of
    /// a running job reports [`EnqueueStatus::AlreadyRunning`] instead of failing the batch.
    ///
    /// Jobs go to the store in batches (one per partition, sent at once, on a partitioned topic). When a
    /// batch fails the call fails ([`Error::Partition`](crate::Error::Partition) names a failed
    /// partition), and jobs of other batches may have been stored: enqueueing by id is idempotent, so
    /// retrying the whole call with the same ids is safe.
    pub async fn enqueue_many<J, I>(&self, items: I) -> Result<Vec<Enqueued>>
    where
        J: Job,
        I: IntoIterator,
        I::Item: Into<EnqueueItem<J>>,
    {
        self.enqueue_items(items.into_iter().map(Into::into).collect())
            .await
    }

    /// Cancels a job by id: a scheduled job is removed; a running job is marked so that it is not
    /// retried and its handler sees [`StopReason::Cancelled`](crate::StopReason). An id that already
    /// ran, was cancelled or never existed gives [`Error::JobNotFound`](crate::Error::JobNotFound): a
    /// caller for whom that is fine ("the order was paid: cancel its timer, if any") matches it.
    pub async fn cancel<J: Job>(&self, id: &str) -> Result<CancelStatus> {
        self.topic::<J>().cancel(id).await
    }

    /// Moves a scheduled job to a new time; returns the new due time. A duration counts from now (the
    /// store's clock), not from the job's old due time; a `DateTime<Utc>` is absolute. A running job
    /// gives [`Error::JobRunning`](crate::Error::JobRunning); an id that already ran, was cancelled or
    /// never existed [`Error::JobNotFound`](crate::Error::JobNotFound) (match it where that is fine: see
    /// the guide's [order timeout](crate::guide::cookbook_order_timeout)).
    pub async fn reschedule<J: Job>(
        &self,
        id: &str,
        when: impl Into<When>,
    ) -> Result<DateTime<Utc>> {
        self.topic::<J>().reschedule(id, when).await
    }

    /// The topic of a job type, for inspection and dead letters.
    pub fn topic<J: Job>(&self) -> Topic {
        Topic::new(self.clone(), J::TOPIC.into(), J::partitions())
    }

    /// A topic by name (for tools that do not know the job types), in one partition. Fails on an invalid
    /// name.
    pub fn topic_named(&self, name: &str) -> Result<Topic> {
        self.topic_partitioned(name, 1)
    }

    /// A topic by name stored in `partitions` partitions (as its job type declares them). Fails on an
    /// invalid name or a count outside 1 to [`MAX_PARTITIONS`](crate::MAX_PARTITIONS).
    pub fn topic_partitioned(&self, name: &str, partitions: u16) -> Result<Topic> {
        validate_topic(name)?;
        validate_partitions(name, partitions)?;
        Ok(Topic::new(self.clone(), name.to_owned().into(), partitions))
    }

    pub(crate) fn check_topic<J: Job>(&self) -> Result<()> {
        validate_topic(J::TOPIC)?;
        validate_partitions(J::TOPIC, J::partitions())
    }
}

/// The seed URLs of a `REDIS_CLUSTER_NODES` value: comma-separated, blanks ignored.
fn split_nodes(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cluster_nodes_from_the_environment_value() {
        assert_eq!(
            super::split_nodes(" redis://a:7000, redis://b:7001,,"),
            ["redis://a:7000", "redis://b:7001"]
        );
        assert!(super::split_nodes(" , ").is_empty());
    }
}
