//! [`ClientBuilder`]: a client's options, then its backend.
//!
//! The namespace is an option of the backends the builder connects ([`redis`](ClientBuilder::redis),
//! [`redis_cluster`](ClientBuilder::redis_cluster)). A store built elsewhere and handed over with
//! [`store`](ClientBuilder::store) already has its own namespace, and the builder cannot change it: so
//! `.namespace(..)` followed by `.store(..)` does not compile, instead of silently ignoring the namespace.
//! The builder's type parameter records whether a namespace was set.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use super::{Client, Inner, DEFAULT_MAX_PAYLOAD, DEFAULT_NAMESPACE};
use crate::error::Result;
use crate::store::redis::RedisStore;
use crate::store::Store;
use crate::validate::validate_namespace;

/// Options for a [`Client`]; finish with [`redis`](Self::redis), [`redis_cluster`](Self::redis_cluster)
/// or [`store`](Self::store).
///
/// `N` is [`NoNamespace`] until [`namespace`](Self::namespace) is called, then [`Namespaced`]. A store
/// you build yourself carries its own namespace (`RedisOptions::new("shop")`), so `.store(..)` is only
/// offered while no namespace was set:
///
/// ```compile_fail,E0277
/// # async fn demo() -> postpone::Result<()> {
/// use postpone::store::redis::RedisStore;
/// let store = RedisStore::connect("redis://127.0.0.1:6379", "default").await?;
/// // Does not compile: "`.store(..)` after `.namespace(..)`: a store you build has its own namespace".
/// let client = postpone::Client::builder().namespace("shop").store(store);
/// # Ok(()) }
/// ```
///
/// Write the namespace where the store is made instead:
///
/// ```no_run
/// # async fn demo() -> postpone::Result<()> {
/// use postpone::store::redis::{RedisOptions, RedisStore};
/// let options = RedisOptions::new("shop").pool_size(16);
/// let store = RedisStore::connect_with("redis://127.0.0.1:6379", options).await?;
/// let client = postpone::Client::builder().store(store);
/// // Or let the builder connect, with the namespace: `Client::builder().namespace("shop").redis(url)`.
/// # Ok(()) }
/// ```
#[must_use]
pub struct ClientBuilder<N = NoNamespace> {
    namespace: String,
    max_payload: usize,
    state: PhantomData<fn() -> N>,
}

/// [`ClientBuilder`] state: no namespace set (the backends it connects use `"default"`).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct NoNamespace;

/// [`ClientBuilder`] state: a namespace was set, for the backend the builder connects.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Namespaced;

/// What [`ClientBuilder::store`] asks of the builder: that no namespace was set on it, since a store you
/// built keeps the namespace it was built with. Implemented for [`NoNamespace`] only.
#[diagnostic::on_unimplemented(
    message = "`.store(..)` after `.namespace(..)`: a store you build has its own namespace, and the one set \
               on this builder would be ignored",
    label = "this builder has a namespace, which cannot reach a store built elsewhere",
    note = "give the namespace to the store, e.g. `RedisStore::connect_with(url, RedisOptions::new(\"shop\"))`, \
            and drop `.namespace(..)`; or let the builder connect: `Client::builder().namespace(\"shop\").redis(url)`"
)]
pub trait StoreKeepsItsOwnNamespace: sealed::Sealed {}

impl StoreKeepsItsOwnNamespace for NoNamespace {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::NoNamespace {}
}

impl ClientBuilder {
    pub(super) fn new() -> Self {
        ClientBuilder {
            namespace: DEFAULT_NAMESPACE.to_owned(),
            max_payload: DEFAULT_MAX_PAYLOAD,
            state: PhantomData,
        }
    }
}

impl<N> ClientBuilder<N> {
    /// The namespace (`[A-Za-z0-9_.-]{1,64}`, default `"default"`) of the Redis backend this builder
    /// connects: applications with different namespaces share a Redis without seeing each other's jobs.
    /// A store you build yourself has its own (see [`store`](Self::store)).
    pub fn namespace(self, namespace: impl Into<String>) -> ClientBuilder<Namespaced> {
        ClientBuilder {
            namespace: namespace.into(),
            max_payload: self.max_payload,
            state: PhantomData,
        }
    }

    /// The largest encoded job accepted, in bytes (default 512 KiB).
    pub fn max_payload(mut self, bytes: usize) -> Self {
        self.max_payload = bytes;
        self
    }

    /// Connects to Redis, in the namespace set on this builder, with default connections and timeouts:
    /// one multiplexed connection for every call (no pool to wait on), 3 s connect and response
    /// timeouts. See [`Client::connect`] for what that means under load and when Redis is away, and for
    /// how to change them.
    pub async fn redis(self, url: &str) -> Result<Client> {
        validate_namespace(&self.namespace)?;
        let store = RedisStore::connect(url, &self.namespace).await?;
        Ok(self.client(Arc::new(store)))
    }

    /// Connects to a Redis Cluster from seed node URLs (a few of its nodes; the others are found from
    /// them), in the namespace set on this builder. The client and worker work as on one Redis; declare
    /// hot topics with `partitions = N` to spread them over the cluster's nodes. One multiplexed
    /// connection per node carries every call (no pool); 3 s connect and response timeouts, as in
    /// [`Client::connect`].
    ///
    /// ```no_run
    /// # async fn demo() -> postpone::Result<()> {
    /// let client = postpone::Client::builder()
    ///     .namespace("shop")
    ///     .redis_cluster(&["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn redis_cluster<S: AsRef<str>>(self, nodes: &[S]) -> Result<Client> {
        validate_namespace(&self.namespace)?;
        let store = RedisStore::connect_cluster(nodes, &self.namespace).await?;
        Ok(self.client(Arc::new(store)))
    }

    /// Uses a store you built (a [`RedisStore`] with options of your own, a
    /// [`MemoryStore`](crate::store::memory::MemoryStore) with a manual clock), in the namespace it was
    /// built with. Not available after [`namespace`](Self::namespace), which could not reach it.
    pub fn store(self, store: impl Store) -> Client
    where
        N: StoreKeepsItsOwnNamespace,
    {
        self.client(Arc::new(store))
    }

    /// Uses a shared store, as [`store`](Self::store) does.
    pub fn store_arc(self, store: Arc<dyn Store>) -> Client
    where
        N: StoreKeepsItsOwnNamespace,
    {
        self.client(store)
    }

    fn client(self, store: Arc<dyn Store>) -> Client {
        Client {
            inner: Arc::new(Inner {
                waiters: Default::default(),
                store,
                max_payload: self.max_payload.max(64),
                registered: Default::default(),
            }),
        }
    }
}

impl<N> fmt::Debug for ClientBuilder<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("namespace", &self.namespace)
            .field("max_payload", &self.max_payload)
            .finish()
    }
}

impl<N> Clone for ClientBuilder<N> {
    fn clone(&self) -> Self {
        ClientBuilder {
            namespace: self.namespace.clone(),
            max_payload: self.max_payload,
            state: PhantomData,
        }
    }
}
