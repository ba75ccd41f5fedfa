//! The worker: claims due jobs, runs their handlers, records the outcomes.

/// Calls the fault tests' hook at a point of the worker's life (see `failpoint.rs`); compiled only with
/// the `test-hooks` feature.
macro_rules! failpoint {
    ($point:ident $fields:tt) => {
        #[cfg(feature = "test-hooks")]
        $crate::worker::failpoint::hit($crate::worker::failpoint::Point::$point $fields);
    };
}

mod acker;
mod backoff;
mod batch_recovery;
mod claim_loop;
mod config;
mod dead_letter_pump;
mod depth_sampler;
mod end_pump;
mod execute;
#[cfg(feature = "test-hooks")]
pub mod failpoint;
mod heartbeat;
mod in_flight;
mod middleware;
mod observe_options;
mod outcomes;
mod periodic;
mod presence;
mod registry;
mod run;
mod shared;
mod shutdown;
mod slots;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::dead_letter::{DeadLetterSink, LogSink};
use crate::error::{Error, Result};
use crate::flow::{Flow, KeyLimits, RateLimit};
use crate::handler::{Handler, JobHandler, ViaTrait};
use crate::job::Job;
use crate::periodic::{PeriodicJob, Scheduled};
use crate::Client;
use config::Config;
use middleware::Layers;
pub(crate) use outcomes::ProgressQueue;
use registry::{ErasedHandler, Registered};
pub use slots::SlotSharing;

/// Builds a [`Worker`]: register handlers, set limits, then [`build`](Self::build).
///
/// ```
/// use postpone::{Client, Job, JobContext, JobError, Worker};
/// use serde::{Deserialize, Serialize};
/// use std::time::Duration;
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "orders.close")]
/// struct CloseOrder { order_id: u64 }
///
/// async fn close_order(job: CloseOrder, ctx: JobContext) -> Result<(), JobError> {
///     println!("closing order {} (attempt {})", job.order_id, ctx.attempt());
///     Ok(())
/// }
///
/// # fn main() -> postpone::Result<()> {
/// let client = Client::memory();
/// let worker = Worker::builder(&client)
///     .handle(close_order)
///     .concurrency(20)
///     .shutdown_grace(Duration::from_secs(10))
///     .build()?;
/// # drop(worker);
/// # Ok(()) }
/// ```
#[must_use]
pub struct WorkerBuilder<S = ()> {
    client: Client,
    state: S,
    handlers: Vec<Arc<dyn ErasedHandler<S>>>,
    periodic: Vec<Arc<dyn Scheduled>>,
    topic_limits: HashMap<String, usize>,
    /// Flow limits set here, by topic (over the job type's).
    rates: HashMap<String, RateLimit>,
    key_limits: HashMap<String, KeyLimits>,
    max_running: HashMap<String, u32>,
    /// How topics share the slots, and their weights.
    sharing: SlotSharing,
    weights: HashMap<String, u32>,
    sink: Arc<dyn DeadLetterSink>,
    /// Middleware around the handlers.
    layers: Layers,
    config: Config,
    errors: Vec<Error>,
}

impl<S: 'static> fmt::Debug for WorkerBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let topics: Vec<_> = self.handlers.iter().map(|h| h.topic()).collect();
        f.debug_struct("WorkerBuilder")
            .field("topics", &topics)
            .field("middleware", &self.layers.len())
            .field("config", &self.config)
            .finish()
    }
}

/// A running set of handlers over one store. See [`WorkerBuilder`].
pub struct Worker<S = ()> {
    builder: WorkerBuilder<S>,
    shutdown: Arc<watch::Sender<bool>>,
}

impl<S: 'static> fmt::Debug for Worker<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("builder", &self.builder)
            .finish()
    }
}

/// Asks a running worker to shut down gracefully. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    /// Stops claiming, lets running handlers finish within the grace period, hands the rest back, and
    /// makes [`Worker::run`] return.
    pub fn shutdown(&self) {
        self.0.send_replace(true);
    }
}

impl Worker<()> {
    /// A worker with no shared state: handlers take `(job, ctx)`.
    pub fn builder(client: &Client) -> WorkerBuilder<()> {
        Worker::with_state(client, ())
    }
}

impl<S: Send + Sync + 'static> Worker<S> {
    /// A worker whose handlers may also take `state: S` (cloned per job: wrap big state in an `Arc`).
    pub fn with_state(client: &Client, state: S) -> WorkerBuilder<S> {
        WorkerBuilder {
            client: client.clone(),
            state,
            handlers: Vec::new(),
            periodic: Vec::new(),
            topic_limits: HashMap::new(),
            rates: HashMap::new(),
            key_limits: HashMap::new(),
            max_running: HashMap::new(),
            sharing: SlotSharing::FirstCome,
            weights: HashMap::new(),
            sink: Arc::new(LogSink),
            layers: Layers::default(),
            config: Config::default(),
            errors: Vec::new(),
        }
    }

    /// A handle that shuts this worker down from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.shutdown.clone())
    }

    /// Runs until [`ShutdownHandle::shutdown`] is called, then shuts down gracefully. Returns an error
    /// only when the worker cannot start.
    pub async fn run(self) -> Result<()> {
        run::run(self.builder, self.shutdown).await
    }

    /// Runs until `signal` completes (e.g. `tokio::signal::ctrl_c()`), then shuts down gracefully.
    pub async fn run_until(self, signal: impl Future + Send) -> Result<()> {
        let handle = self.shutdown_handle();
        let run = self.run();
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => return result,
            _ = signal => handle.shutdown(),
        }
        run.await
    }
}

impl<S: Send + Sync + 'static> WorkerBuilder<S> {
    fn register(mut self, handler: Arc<dyn ErasedHandler<S>>) -> Self {
        let topic = handler.topic();
        if let Err(e) = crate::validate::validate_topic(topic) {
            self.errors.push(e);
        } else if let Err(e) = crate::partition::validate_partitions(topic, handler.partitions()) {
            self.errors.push(e);
        } else if self.handlers.iter().any(|h| h.topic() == topic) {
            self.errors.push(Error::InvalidConfig {
                reason: format!(
                    "two handlers for topic {topic:?}: register one handler per job type"
                ),
            });
        }
        self.handlers.push(handler);
        self
    }

    /// Registers an async fn handler: `async fn(job: J, ctx: JobContext) -> Result<(), JobError>`, or
    /// with the worker's state as a third argument.
    pub fn handle<M: 'static, H: Handler<M, S>>(self, handler: H) -> Self {
        self.register(Arc::new(Registered::new::<S>(handler)))
    }

    /// Registers a [`JobHandler`] impl.
    pub fn handler<H: JobHandler<S>>(self, handler: H) -> Self {
        self.register(Arc::new(Registered::new::<S>(ViaTrait(Arc::new(handler)))))
    }

    /// Runs a periodic schedule: this worker stores it (unless stored with the same definition; a
    /// changed one replaces it) and takes part in enqueueing its ticks, each exactly once however many
    /// workers run it. The topic's jobs are run by whichever workers handle it (this one or others).
    ///
    /// Periodic jobs need a topic of one partition: a tick's script touches the schedule and the job
    /// in one slot.
    ///
    /// ```
    /// use std::time::Duration;
    /// use postpone::{Client, Job, JobContext, JobError, Periodic, Worker};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "reports.daily")]
    /// struct DailyReport { day: String }
    ///
    /// async fn report(job: DailyReport, _ctx: JobContext) -> Result<(), JobError> { Ok(()) }
    ///
    /// # fn main() -> postpone::Result<()> {
    /// let client = Client::memory();
    /// let hourly = Periodic::every("hourly-report", Duration::from_secs(3600))?
    ///     .job(|tick| DailyReport { day: tick.date_naive().to_string() });
    /// let worker = Worker::builder(&client).handle(report).periodic(hourly).build()?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    pub fn periodic<J: Job>(mut self, job: PeriodicJob<J>) -> Self {
        let name = job.schedule().name().to_owned();
        if let Err(e) = crate::validate::validate_topic(J::TOPIC) {
            self.errors.push(e);
        } else if J::partitions() > 1 {
            self.errors.push(Error::InvalidConfig {
                reason: format!(
                    "periodic schedule {name:?}: topic {:?} has {} partitions; periodic jobs need a topic of one",
                    J::TOPIC,
                    J::partitions()
                ),
            });
        } else if self
            .periodic
            .iter()
            .any(|p| p.topic() == J::TOPIC && p.schedule().name() == name)
        {
            self.errors.push(Error::InvalidConfig {
                reason: format!(
                    "two periodic schedules named {name:?} for topic {:?}",
                    J::TOPIC
                ),
            });
        }
        self.periodic.push(Arc::new(job));
        self
    }

    /// Most jobs running at once across all topics (default 10).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n;
        self
    }

    /// Most jobs of one type running at once (default: only the global limit); on a partitioned topic,
    /// over all its partitions together.
    pub fn topic_concurrency<J: Job>(mut self, n: usize) -> Self {
        self.topic_limits.insert(J::TOPIC.to_owned(), n);
        self
    }

    /// The rate limit of `J`'s topic, across every worker: at most `jobs` per `per` (over the job
    /// type's `rate`). Every worker of the topic should set the same. See [`Job::rate_limit`].
    ///
    /// ```
    /// # use postpone::{Client, Job, JobContext, JobError, Worker};
    /// # use serde::{Deserialize, Serialize};
    /// # use std::time::Duration;
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "emails")]
    /// struct Email { to: String }
    ///
    /// async fn send(job: Email, _ctx: JobContext) -> Result<(), JobError> { Ok(()) }
    ///
    /// # fn main() -> postpone::Result<()> {
    /// let worker = Worker::builder(&Client::memory())
    ///     .handle(send)
    ///     .rate_limit::<Email>(600, Duration::from_secs(60))
    ///     .max_running::<Email>(10)
    ///     .build()?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    pub fn rate_limit<J: Job>(mut self, jobs: u32, per: Duration) -> Self {
        self.rates
            .insert(J::TOPIC.to_owned(), RateLimit::new(jobs, per));
        self
    }

    /// Most jobs of `J`'s topic running at once across every worker (over the job type's
    /// `max_running`; unlike [`topic_concurrency`](Self::topic_concurrency), which limits this
    /// worker only). See [`Job::max_running`].
    pub fn max_running<J: Job>(mut self, n: u32) -> Self {
        self.max_running.insert(J::TOPIC.to_owned(), n);
        self
    }

    /// The limits of each key of `J`'s keyed jobs, across every worker (over the job type's
    /// `key_max_running` and `key_rate`). Every worker of the topic should set the same. See
    /// [`Job::key_limits`] and [`Job::key`].
    ///
    /// ```
    /// # use postpone::{Client, Job, JobContext, JobError, KeyLimits, RateLimit, Worker};
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "shop.sync", key = "shop_id")]
    /// struct SyncShop { shop_id: u64 }
    ///
    /// async fn sync(job: SyncShop, _ctx: JobContext) -> Result<(), JobError> { Ok(()) }
    ///
    /// # fn main() -> postpone::Result<()> {
    /// let worker = Worker::builder(&Client::memory())
    ///     .handle(sync)
    ///     // Each shop: at most 2 syncs at once, and 10 a second.
    ///     .key_limits::<SyncShop>(KeyLimits::new().max_running(2).rate(RateLimit::per_second(10)))
    ///     .build()?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    pub fn key_limits<J: Job>(mut self, limits: KeyLimits) -> Self {
        self.key_limits.insert(J::TOPIC.to_owned(), limits);
        self
    }

    /// The flow limits of `handler`'s topic: the job type's, overridden by this builder's.
    pub(crate) fn flow_of(&self, handler: &dyn ErasedHandler<S>) -> Flow {
        let declared = handler.flow();
        Flow {
            rate: self.rates.get(handler.topic()).copied().or(declared.rate),
            max_running: self
                .max_running
                .get(handler.topic())
                .copied()
                .unwrap_or(declared.max_running),
            key: self
                .key_limits
                .get(handler.topic())
                .copied()
                .unwrap_or(declared.key),
        }
    }

    /// How this worker's topics share its slots ([`concurrency`](Self::concurrency)) when they are
    /// scarce: first come, first served (the default), by weight, or in strict order of weight. See
    /// [`SlotSharing`].
    ///
    /// ```
    /// # use postpone::{Client, Job, JobContext, JobError, SlotSharing, Worker};
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "payments")]
    /// struct Payment { id: u64 }
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "reports")]
    /// struct Report { id: u64 }
    ///
    /// # async fn pay(_: Payment, _: JobContext) -> Result<(), JobError> { Ok(()) }
    /// # async fn report(_: Report, _: JobContext) -> Result<(), JobError> { Ok(()) }
    /// # fn main() -> postpone::Result<()> {
    /// // Busy on both: 4 slots of 5 to payments, 1 to reports (none starves).
    /// let worker = Worker::builder(&Client::memory())
    ///     .handle(pay)
    ///     .handle(report)
    ///     .slot_sharing(SlotSharing::Weighted)
    ///     .topic_weight::<Payment>(4)
    ///     .build()?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    pub fn slot_sharing(mut self, sharing: SlotSharing) -> Self {
        self.sharing = sharing;
        self
    }

    /// The weight of `J`'s topic in this worker's [`slot_sharing`](Self::slot_sharing) (default 1;
    /// at least 1).
    pub fn topic_weight<J: Job>(mut self, weight: u32) -> Self {
        self.weights.insert(J::TOPIC.to_owned(), weight);
        self
    }

    /// Most jobs taken in one claim (default 100).
    ///
    /// A claim takes a job for each free slot, and, once the handlers' run time is known, a few more
    /// that wait in the worker for the next free slots (claimed ahead: no round trip to Redis between
    /// two runs). Those are at most two per slot of the topic, and no more than would wait 4 ms on average
    /// at the current pace, so runs of a second or more claim nothing ahead; their leases are renewed
    /// while they wait, and they are handed back at shutdown.
    pub fn claim_batch(mut self, n: usize) -> Self {
        self.config.claim_batch = n;
        self
    }

    /// How long a claimed job stays leased to this worker without a heartbeat (default 30 s; a job type
    /// can set its own). The heartbeat renews leases every third of it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// The longest an idle worker waits before looking at a topic again, should a wake-up hint be lost
    /// (default 5 s, which keeps an idle worker at about one Redis command per second per topic). Hints
    /// and known due times wake it sooner.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.config.poll_interval = interval;
        self
    }

    /// How often a job's lease may expire (its worker crashed or hung) before the job is dead-lettered as
    /// stalled instead of run again (default 3).
    pub fn stall_limit(mut self, n: u32) -> Self {
        self.config.stall_limit = n;
        self
    }

    /// How long running handlers may take to finish at shutdown before they are stopped and their jobs
    /// handed back (default 20 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.config.shutdown_grace = grace;
        self
    }

    /// Where dead jobs go (default: [`LogSink`]).
    pub fn dead_letter_sink(mut self, sink: impl DeadLetterSink) -> Self {
        self.sink = Arc::new(sink);
        self
    }

    /// How long dead jobs are kept, and how many at most per topic, once their sink has taken them
    /// (default 30 days, 10,000).
    pub fn dead_letter_retention(mut self, max_age: Duration, keep: u64) -> Self {
        self.config.dead_max_age = max_age;
        self.config.dead_keep = keep;
        self
    }

    /// Checks the configuration and returns the worker.
    pub fn build(mut self) -> Result<Worker<S>> {
        if let Some(e) = self.errors.drain(..).next() {
            return Err(e);
        }
        let c = &self.config;
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        if self.handlers.is_empty() {
            return bad(
                "a worker needs at least one handler: call .handle(..) before .build()".into(),
            );
        }
        if c.concurrency == 0 || c.claim_batch == 0 {
            return bad("concurrency and claim_batch must be at least 1".into());
        }
        for h in &self.handlers {
            let lease = h.lease().unwrap_or(c.lease);
            if lease < Duration::from_millis(10) {
                return bad(format!("the lease of topic {:?} is under 10 ms", h.topic()));
            }
        }
        if c.poll_interval < Duration::from_millis(1) {
            return bad("poll_interval must be at least 1 ms".into());
        }
        for (topic, n) in &self.topic_limits {
            if !self.handlers.iter().any(|h| h.topic() == topic) {
                return Err(Error::UnknownTopic {
                    topic: topic.clone(),
                });
            }
            if *n == 0 {
                return bad(format!(
                    "topic_concurrency for {topic:?} must be at least 1"
                ));
            }
        }
        for (topic, weight) in &self.weights {
            if *weight == 0 {
                return bad(format!("topic_weight for {topic:?} must be at least 1"));
            }
        }
        for topic in self
            .rates
            .keys()
            .chain(self.max_running.keys())
            .chain(self.key_limits.keys())
            .chain(self.weights.keys())
            .map(String::as_str)
            .chain(self.layers.typed_topics())
        {
            if !self.handlers.iter().any(|h| h.topic() == topic) {
                return Err(Error::UnknownTopic {
                    topic: topic.to_owned(),
                });
            }
        }
        for h in &self.handlers {
            let flow = self.flow_of(h.as_ref());
            if let Some(rate) = flow.rate {
                rate.validate(h.topic())?;
            }
            if let Some(rate) = flow.key.rate_per_key() {
                rate.validate(h.topic())?;
            }
            if self.max_running.get(h.topic()) == Some(&0) {
                return bad(format!(
                    "max_running for {:?} must be at least 1",
                    h.topic()
                ));
            }
        }
        Ok(Worker {
            builder: self,
            shutdown: Arc::new(watch::channel(false).0),
        })
    }
}
