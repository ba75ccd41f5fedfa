//! The Redis backend: jobs in Redis 6.2+, on one server or a Redis Cluster, every state change one Lua
//! script.
//!
//! ```no_run
//! # async fn demo() -> postpone::Result<()> {
//! use postpone::store::redis::{RedisOptions, RedisStore};
//! use std::time::Duration;
//!
//! // Defaults: one shared connection for every command, 3 s connect and response timeouts.
//! let store = RedisStore::connect("redis://127.0.0.1:6379", "shop").await?;
//!
//! // Or tuned:
//! let options = RedisOptions::new("shop")
//!     .pool_size(16)
//!     .response_timeout(Duration::from_secs(5));
//! let store = RedisStore::connect_with("redis://:secret@redis.internal:6379/2", options).await?;
//!
//! // A Redis Cluster, from a few of its nodes:
//! let seeds = ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"];
//! let store = RedisStore::connect_cluster(&seeds, "shop").await?;
//! # Ok(()) }
//! ```
//!
//! Layout: see `keys.rs` (one hash tag per topic, or per partition of a partitioned topic, so every
//! script touches one slot and the layout works on Redis Cluster). Due times and leases are judged by the
//! server's clock (`TIME` inside scripts; on a cluster, the clock of the master holding the topic).
//!
//! Connections (one Redis): every command goes over one multiplexed connection, pipelined, so no
//! caller ever waits for a free connection, however many call at once. Concurrent enqueues, cancels and
//! reschedules to one topic (or partition) are coalesced into one script call while one is in flight
//! (group commit: no added latency when idle; each caller gets exactly its own outcome). On top of that
//! connection: one idle watchdog connection that notices at once when Redis goes away, one pub/sub
//! connection for wake-up hints (started by the first worker), and a pool of up to
//! [`pool_size`](RedisOptions::pool_size) dedicated connections, opened on demand, for what must not
//! share a pipe (today only the worker's start-up checks).
//!
//! A dropped connection or a Redis restart needs no new store: operations fail with [`Error::Backend`]
//! while Redis is away, each as soon as its connect fails (one connect at a time; every call waiting for
//! it gets its outcome at once), and succeed again as soon as Redis answers: the first call after that
//! opens a new connection. A call that failed may still have been applied (its reply was lost with the
//! connection): enqueueing by id is idempotent, so retrying it is safe. Hints use one dedicated pub/sub
//! connection that reconnects by itself.
//! Run Redis with `maxmemory-policy noeviction` (a worker warns at start otherwise) and, for durability,
//! with AOF.

#[cfg(feature = "cluster")]
mod cluster;
#[cfg(not(feature = "cluster"))]
#[path = "no_cluster.rs"]
mod cluster;
#[cfg(feature = "cluster")]
mod cluster_health;
#[cfg(not(feature = "cluster"))]
use self::cluster as cluster_health;
mod conn;
mod dead;
mod delivered;
mod doctor;
mod exec;
mod group_commit;
mod hints;
mod jobs;
mod keyed;
mod keys;
mod libraries;
mod mux;
mod ops;
mod periodic;
mod reply;
mod scripts;
mod worker;
mod workflow;

use rustc_hash::FxHashMap;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::store::{Announcement, Due, Hint};
use crate::validate::validate_namespace;

use conn::{Pool, PoolSettings};
use exec::Conns;
use group_commit::GroupCommit;
use hints::Channel;
use jobs::{Cancels, Enqueues, Reschedules};
use keys::TopicKeys;

/// How to connect a [`RedisStore`].
///
/// ```
/// use postpone::store::redis::RedisOptions;
/// use std::time::Duration;
///
/// let options = RedisOptions::new("shop")
///     .pool_size(16)
///     .connect_timeout(Duration::from_secs(1))
///     .response_timeout(Duration::from_secs(5));
/// assert_eq!(options.namespace(), "shop");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
#[must_use]
pub struct RedisOptions {
    namespace: String,
    pool_size: u32,
    connect_timeout: Duration,
    response_timeout: Duration,
}

impl RedisOptions {
    /// Options for `namespace` (`[A-Za-z0-9_.-]{1,64}`, checked at connect): two stores in different
    /// namespaces never see each other's jobs on the same Redis.
    pub fn new(namespace: impl Into<String>) -> Self {
        RedisOptions {
            namespace: namespace.into(),
            pool_size: 8,
            connect_timeout: Duration::from_secs(3),
            response_timeout: Duration::from_secs(3),
        }
    }

    /// Most dedicated connections (default 8, at least 1), opened on demand for what must not share the
    /// multiplexed connection that carries every command (today only the worker's start-up checks: a
    /// client holds none, a worker one). Commands never wait for them. One Redis only: on a cluster, one
    /// multiplexed connection per node serves every command.
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// How long to wait for a TCP (and TLS) connection and its handshake (default 3 s). Calls that arrive
    /// while a connect is under way wait for it, and fail at once with it when it fails.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long to wait for a reply to one command before the operation fails with
    /// [`Error::Backend`] (default 3 s). A timed-out script may still have run: the worker's leases make
    /// that safe.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }
}

/// Jobs kept in Redis (6.2 or later). Cheap to clone: clones share one connection.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

/// Most topics (or partitions) whose keys a store keeps built.
const KEY_CACHE_LIMIT: usize = 4096;

struct Inner {
    namespace: String,
    /// Built keys by topic: looked up at every call, so hashed with FxHash (at most
    /// [`KEY_CACHE_LIMIT`] entries).
    keys: RwLock<FxHashMap<Box<str>, Arc<TopicKeys>>>,
    /// `host:port`, or the seeds' `host:port,...` on a cluster.
    addr: String,
    channel: String,
    /// The namespace's registries (topics, workers): see keys.rs.
    registries: [String; 3],
    conns: Conns,
    /// On a cluster: the masters known to be down.
    health: Option<cluster_health::Health>,
    hints: Channel<Hint>,
    /// Waiters' announcements (see outcomes.lua), listened to from the first `announcements()`.
    announcements: Channel<Announcement>,
    /// Group commit of enqueues, cancels and reschedules, per topic.
    enqueues: GroupCommit<Enqueues>,
    cancels: GroupCommit<Cancels>,
    reschedules: GroupCommit<Reschedules>,
    keyed: GroupCommit<keyed::KeyedEnqueues>,
    /// Whether scripts run as functions (FCALL; see exec.rs): until Redis says it has none.
    functions: AtomicBool,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("addr", &self.inner.addr)
            .field("namespace", &self.inner.namespace)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://[user:password@]host[:port][/db]`, or `rediss://` with the `tls`
    /// feature) with default [`RedisOptions`] for `namespace`.
    ///
    /// Fails with [`Error::InvalidUrl`] or [`Error::InvalidNamespace`] on bad input, [`Error::Connect`]
    /// when Redis cannot be reached (the message names `host:port`, never the password), and
    /// [`Error::UnsupportedRedis`] before Redis 6.2.
    pub async fn connect(url: &str, namespace: &str) -> Result<Self> {
        Self::connect_with(url, RedisOptions::new(namespace)).await
    }

    /// Connects to `url` with `options`: see [`RedisStore::connect`].
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self> {
        validate_namespace(&options.namespace)?;
        let info = conn::parse_url(url)?;
        let addr = conn::addr_of(&info);
        let client = redis::Client::open(info).map_err(|e| Error::InvalidUrl {
            reason: conn::redact(&e.to_string(), url),
        })?;
        let settings = PoolSettings {
            size: options.pool_size,
            connect_timeout: options.connect_timeout,
            response_timeout: options.response_timeout,
        };
        let mut first = settings
            .connect_one(&client)
            .await
            .map_err(|e| conn::connect_error(addr.clone(), e, url))?;
        let version = conn::server_version(&mut first)
            .await
            .map_err(|e| conn::connect_error(addr.clone(), e, url))?;
        conn::require_6_2(&version)?;
        tracing::debug!(%addr, %version, namespace = %options.namespace, "postpone: connected to Redis");
        let channel = keys::wake_channel(&options.namespace);
        let registries = keys::registries(&options.namespace);
        let timeout = options.connect_timeout.max(options.response_timeout);
        let hints = Channel::new(vec![client.clone()], channel.clone(), timeout);
        let announcements = Channel::new(
            vec![client.clone()],
            keys::ended_channel(&options.namespace),
            timeout,
        );
        let pool = Pool::new(client, settings, addr.clone(), first);
        Ok(RedisStore {
            inner: Arc::new(Inner {
                namespace: options.namespace,
                keys: RwLock::new(FxHashMap::default()),
                addr,
                registries,
                channel,
                conns: Conns::Single(pool),
                health: None,
                hints,
                announcements,
                enqueues: GroupCommit::default(),
                functions: AtomicBool::new(true),
                cancels: GroupCommit::default(),
                reschedules: GroupCommit::default(),
                keyed: GroupCommit::default(),
            }),
        })
    }

    /// Connects to a Redis Cluster from seed node URLs (any few of its nodes; the rest are discovered),
    /// with default [`RedisOptions`] for `namespace`.
    ///
    /// The store behaves exactly as on one Redis. Each topic (each partition of a partitioned topic)
    /// lives in one hash slot, so on one master; commands follow MOVED and ASK redirections and slot
    /// migrations. Hints come from one node at a time (PUBLISH reaches every node of a cluster), moving
    /// to the next seed when that node fails. Each command, redirections and retries included, fails
    /// after the response timeout; a command for a master known to be down (one that did not answer a
    /// PING after a call to it failed, or at connect) fails at once instead, until it answers again or
    /// its slots move to another master (checked every 100 ms while a master is down). Masters that do not answer at connect are logged and skipped; the
    /// store fails with [`Error::Connect`] only when none answers.
    ///
    /// ```no_run
    /// # async fn demo() -> postpone::Result<()> {
    /// use postpone::store::redis::RedisStore;
    ///
    /// let seeds = ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"];
    /// let store = RedisStore::connect_cluster(&seeds, "shop").await?;
    /// assert!(store.is_cluster());
    /// # Ok(()) }
    /// ```
    pub async fn connect_cluster<S: AsRef<str>>(urls: &[S], namespace: &str) -> Result<Self> {
        Self::connect_cluster_with(urls, RedisOptions::new(namespace)).await
    }

    /// Connects to a Redis Cluster with `options` (the pool size does not apply: one multiplexed
    /// connection per node serves every command). See [`RedisStore::connect_cluster`].
    pub async fn connect_cluster_with<S: AsRef<str>>(
        urls: &[S],
        options: RedisOptions,
    ) -> Result<Self> {
        validate_namespace(&options.namespace)?;
        let connected =
            cluster::connect(urls, options.connect_timeout, options.response_timeout).await?;
        tracing::debug!(seeds = %connected.addrs, namespace = %options.namespace, "postpone: connected to Redis Cluster");
        let channel = keys::wake_channel(&options.namespace);
        let registries = keys::registries(&options.namespace);
        let timeout = options.connect_timeout.max(options.response_timeout);
        let hints = Channel::new(connected.seed_clients.clone(), channel.clone(), timeout);
        let announcements = Channel::new(
            connected.seed_clients,
            keys::ended_channel(&options.namespace),
            timeout,
        );
        Ok(RedisStore {
            inner: Arc::new(Inner {
                namespace: options.namespace,
                keys: RwLock::new(FxHashMap::default()),
                addr: connected.addrs,
                registries,
                channel,
                conns: Conns::Cluster(connected.conn),
                health: Some(connected.health),
                hints,
                announcements,
                enqueues: GroupCommit::default(),
                functions: AtomicBool::new(true),
                cancels: GroupCommit::default(),
                reschedules: GroupCommit::default(),
                keyed: GroupCommit::default(),
            }),
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner.conns, Conns::Cluster(_))
    }

    /// The keys of `topic`, built once per topic (or partition) and kept; fails on an invalid name.
    fn keys(&self, topic: &str) -> Result<Arc<TopicKeys>> {
        let cache = &self.inner.keys;
        if let Some(keys) = cache.read().unwrap_or_else(|p| p.into_inner()).get(topic) {
            return Ok(keys.clone());
        }
        let keys = Arc::new(TopicKeys::new(&self.inner.namespace, topic)?);
        let mut cache = cache.write().unwrap_or_else(|p| p.into_inner());
        // Topics are the application's job types (and their partitions); a tool looping over made-up
        // names stops caching.
        if cache.len() < KEY_CACHE_LIMIT {
            cache.insert(topic.into(), keys.clone());
        }
        Ok(keys)
    }
}

/// `Due` as two script arguments: `'in'|'at'` and a value in ms (saturated into i64).
fn due_args(due: Due) -> (&'static str, i64) {
    match due {
        Due::In(ms) => ("in", i64::try_from(ms).unwrap_or(i64::MAX)),
        Due::At(ms) => ("at", ms),
    }
}
