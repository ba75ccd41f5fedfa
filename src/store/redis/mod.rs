//! The Redis backend: jobs in Redis 6.2+, every state change one Lua script.
//!
//! ```no_run
//! # async fn demo() -> postpone::Result<()> {
//! use postpone::store::redis::{RedisOptions, RedisStore};
//! use std::time::Duration;
//!
//! // Defaults: a pool of 8 connections, 3 s connect and response timeouts.
//! let store = RedisStore::connect("redis://127.0.0.1:6379", "shop").await?;
//!
//! // Or tuned:
//! let options = RedisOptions::new("shop")
//!     .pool_size(16)
//!     .response_timeout(Duration::from_secs(5));
//! let store = RedisStore::connect_with("redis://:secret@redis.internal:6379/2", options).await?;
//! # Ok(()) }
//! ```
//!
//! Layout: see `keys.rs` (one hash tag per topic, so the layout works on Redis Cluster). Due times and
//! leases are judged by the server's clock (`TIME` inside scripts). A dropped connection or a Redis
//! restart needs no new store: operations fail with [`Error::Backend`] until Redis is back, then carry
//! on. Hints use one dedicated pub/sub connection that reconnects by itself. Run Redis with
//! `maxmemory-policy noeviction` (a worker warns at start otherwise) and, for durability, with AOF.

mod conn;
mod dead;
mod hints;
mod keys;
mod live;
mod reply;
mod scripts;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use redis::{ErrorKind, Script, ServerErrorKind, Value};
use tokio::sync::broadcast;

use crate::error::{Error, Result};
use crate::store::{
    CancelOutcome, ClaimBatch, ClaimRequest, DeadEntry, Due, EnqueueOutcome, FinishItem,
    FinishOutcome, Hint, LeaseStatus, RescheduleOutcome, Store, StoredJob, TopicCounts,
};
use crate::validate::validate_namespace;

use conn::{Pool, PoolSettings};
use hints::Hints;
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

    /// Most pooled connections (default 8, at least 1). Each is multiplexed; the pub/sub connection for
    /// hints comes on top.
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// How long to wait for a TCP (and TLS) connection and its handshake (default 3 s).
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

/// Jobs kept in Redis (6.2 or later). Cheap to clone: clones share one pool.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

/// Most topics whose keys a store keeps built.
const KEY_CACHE_LIMIT: usize = 1024;

struct Inner {
    namespace: String,
    keys: RwLock<HashMap<Box<str>, Arc<TopicKeys>>>,
    addr: String,
    channel: String,
    pool: Pool,
    hints: Hints,
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
        let hints = Hints::new(
            client.clone(),
            channel.clone(),
            options.connect_timeout.max(options.response_timeout),
        );
        let pool = Pool::new(client, settings, first);
        Ok(RedisStore {
            inner: Arc::new(Inner {
                namespace: options.namespace,
                keys: RwLock::new(HashMap::new()),
                addr,
                channel,
                pool,
                hints,
            }),
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// The keys of `topic`, built once per topic and kept (fails on an invalid topic).
    fn keys(&self, topic: &str) -> Result<Arc<TopicKeys>> {
        let cache = &self.inner.keys;
        if let Some(keys) = cache.read().unwrap_or_else(|p| p.into_inner()).get(topic) {
            return Ok(keys.clone());
        }
        let keys = Arc::new(TopicKeys::new(&self.inner.namespace, topic)?);
        let mut cache = cache.write().unwrap_or_else(|p| p.into_inner());
        // Topics are the application's job types; a tool looping over made-up names stops caching.
        if cache.len() < KEY_CACHE_LIMIT {
            cache.insert(topic.into(), keys.clone());
        }
        Ok(keys)
    }

    /// Runs `script` on `keys` with the arguments `args` writes: EVALSHA, and on NOSCRIPT (Redis
    /// restarted or its script cache was flushed) SCRIPT LOAD and EVALSHA again. The command is built
    /// once, straight into one buffer.
    async fn eval(
        &self,
        context: &'static str,
        script: &Script,
        keys: &TopicKeys,
        args: impl FnOnce(&mut redis::Cmd),
    ) -> Result<Value> {
        self.eval_with(context, script, &keys.0, args).await
    }

    /// [`eval`](Self::eval) with only the first keys of a topic, for a script that touches only those.
    async fn eval_with(
        &self,
        context: &'static str,
        script: &Script,
        keys: &[String],
        args: impl FnOnce(&mut redis::Cmd),
    ) -> Result<Value> {
        // Room for a single job's arguments (batches grow it a few times, not once per argument).
        let key_bytes: usize = keys.iter().map(String::len).sum();
        let mut cmd = redis::Cmd::with_capacity(keys.len() + 16, key_bytes + 512);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
        for key in keys {
            cmd.arg(key);
        }
        args(&mut cmd);
        let mut conn = self.inner.pool.get(context).await?;
        let mut result = cmd.query_async::<Value>(&mut conn.inner).await;
        if matches!(&result, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)) {
            result = match script.prepare_invoke().load_async(&mut conn.inner).await {
                Ok(_) => cmd.query_async::<Value>(&mut conn.inner).await,
                Err(e) => Err(e),
            };
        }
        result.map_err(|e| {
            self.inner.pool.failed(&mut conn, &e);
            Error::backend(context, e)
        })
    }

    /// Runs one plain command.
    async fn command<T: redis::FromRedisValue>(
        &self,
        context: &'static str,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        let mut conn = self.inner.pool.get(context).await?;
        match cmd.query_async::<T>(&mut conn.inner).await {
            Ok(v) => Ok(v),
            Err(e) => {
                self.inner.pool.failed(&mut conn, &e);
                Err(Error::backend(context, e))
            }
        }
    }
}

/// `Due` as two script arguments: `'in'|'at'` and a value in ms (saturated into i64).
fn due_args(due: Due) -> (&'static str, i64) {
    match due {
        Due::In(ms) => ("in", i64::try_from(ms).unwrap_or(i64::MAX)),
        Due::At(ms) => ("at", ms),
    }
}

#[async_trait]
impl Store for RedisStore {
    fn backend_name(&self) -> &'static str {
        "redis"
    }

    async fn now_ms(&self) -> Result<i64> {
        let (secs, micros): (i64, i64) = self
            .command("reading the Redis time", &redis::cmd("TIME"))
            .await?;
        Ok(secs * 1000 + micros / 1000)
    }

    async fn enqueue(
        &self,
        topic: &str,
        jobs: Vec<crate::store::NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        self.enqueue_jobs(topic, jobs).await
    }

    async fn claim(&self, topic: &str, request: ClaimRequest) -> Result<ClaimBatch> {
        self.claim_jobs(topic, request).await
    }

    async fn finish(&self, topic: &str, items: Vec<FinishItem>) -> Result<Vec<FinishOutcome>> {
        self.finish_jobs(topic, items).await
    }

    async fn extend(
        &self,
        topic: &str,
        leases: &[(String, u64)],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>> {
        self.extend_leases(topic, leases, lease_ms).await
    }

    async fn cancel(&self, topic: &str, id: &str) -> Result<CancelOutcome> {
        self.cancel_job(topic, id).await
    }

    async fn reschedule(&self, topic: &str, id: &str, due: Due) -> Result<RescheduleOutcome> {
        self.reschedule_job(topic, id, due).await
    }

    async fn job(&self, topic: &str, id: &str) -> Result<Option<StoredJob>> {
        self.find_job(topic, id).await
    }

    async fn counts(&self, topic: &str) -> Result<TopicCounts> {
        self.topic_counts(topic).await
    }

    async fn dead_list(&self, topic: &str, offset: usize, limit: usize) -> Result<Vec<DeadEntry>> {
        self.list_dead(topic, offset, limit).await
    }

    async fn dead_requeue(&self, topic: &str, id: &str, record: Vec<u8>) -> Result<bool> {
        self.requeue_dead(topic, id, record).await
    }

    async fn dead_purge(&self, topic: &str, id: Option<&str>) -> Result<u64> {
        self.purge_dead(topic, id).await
    }

    async fn dead_trim(
        &self,
        topic: &str,
        older_than_ms: i64,
        keep: u64,
        limit: usize,
    ) -> Result<u64> {
        self.trim_dead(topic, older_than_ms, keep, limit).await
    }

    async fn dead_claim(&self, topic: &str, max: usize, lease_ms: u64) -> Result<Vec<DeadEntry>> {
        self.claim_dead(topic, max, lease_ms).await
    }

    async fn dead_ack(&self, topic: &str, ids: &[String]) -> Result<()> {
        self.ack_dead(topic, ids).await
    }

    async fn dead_retry(&self, topic: &str, id: &str, delay_ms: u64) -> Result<()> {
        self.retry_dead(topic, id, delay_ms).await
    }

    /// Hints for every topic of the namespace, from a pub/sub listener started on the first call (inside
    /// a Tokio runtime). After every (re)connect the listener sends [`Hint::All`]; a receiver that falls
    /// behind gets `RecvError::Lagged`, which it should treat as [`Hint::All`].
    fn hints(&self) -> broadcast::Receiver<Hint> {
        self.inner.hints.subscribe()
    }

    async fn check_worker_start(&self) -> Result<()> {
        let mut conn = self
            .inner
            .pool
            .get("checking Redis at worker start")
            .await?;
        let version = conn::server_version(&mut conn.inner)
            .await
            .map_err(|e| Error::backend("reading the Redis version (INFO server)", e))?;
        conn::require_6_2(&version)?;
        match conn::eviction_policy(&mut conn.inner).await {
            Some(policy) if policy == "noeviction" => {}
            Some(policy) => tracing::warn!(
                addr = %self.inner.addr,
                %policy,
                "postpone: Redis maxmemory-policy is {policy:?}, not \"noeviction\": when Redis runs out of \
                 memory it will silently delete jobs. Set `maxmemory-policy noeviction`."
            ),
            None => tracing::warn!(
                addr = %self.inner.addr,
                "postpone: could not read Redis maxmemory-policy (CONFIG GET and INFO memory refused); make \
                 sure it is \"noeviction\", or Redis may silently delete jobs when it runs out of memory."
            ),
        }
        Ok(())
    }
}
