//! Enqueueing: one job with a builder, or many at once.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use tracing::{Instrument, Span};

use super::keyed::{to_keyed, Debounce, KeyedOption, Unique};
use super::{Client, When};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::meta::{self, Meta};
use crate::observe::{metrics, trace};
use crate::partition::{partition_error, partition_of, store_topic};
use crate::record::Record;
use crate::schedule::RetrySchedule;
pub use crate::status::EnqueueStatus;
use crate::store::{Due, EnqueueOutcome, KeyedJob, KeyedOutcome, NewJob};
use crate::time::ms_to_time;
use crate::validate::validate_id;

/// The result of an enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Enqueued {
    /// The job's id (the one given, or a generated one).
    pub id: String,
    /// What happened.
    pub status: EnqueueStatus,
    /// When the job is due (for `AlreadyScheduled` and `Duplicate`, the existing job's time; `None`
    /// when running or throttled).
    pub due_at: Option<DateTime<Utc>>,
    /// For `Throttled`: when the unique key's window ends (an enqueue after that creates a job).
    pub held_until: Option<DateTime<Utc>>,
}

/// One job of a bulk enqueue, with its own id and time.
///
/// ```
/// # use postpone::{EnqueueItem, Job};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize, Job)]
/// # #[job(topic = "t")]
/// # struct Ping;
/// use std::time::Duration;
/// let item = EnqueueItem::new(Ping).id("ping:1").after(Duration::from_secs(5));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct EnqueueItem<J> {
    job: J,
    id: Option<String>,
    when: When,
    replace: bool,
    schedule: Option<RetrySchedule>,
    priority: u8,
    meta: Meta,
    keyed: Option<KeyedOption>,
    key: Option<String>,
}

impl<J: Job> EnqueueItem<J> {
    /// A job due now, with a generated id.
    pub fn new(job: J) -> Self {
        EnqueueItem {
            job,
            id: None,
            when: When::Now,
            replace: false,
            schedule: None,
            priority: 0,
            meta: Meta::new(),
            keyed: None,
            key: None,
        }
    }

    /// Uses this id (a business key such as `order:42`). Enqueueing an id that is scheduled or running
    /// changes nothing and reports it, unless [`replace`](Self::replace) is set.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    pub(super) fn has_id(&self) -> bool {
        self.id.is_some()
    }

    /// Whether it holds a unique or debounce key (its own or its type's).
    pub(super) fn is_keyed(&self) -> bool {
        self.keyed.is_some() || self.job.unique().is_some()
    }

    /// Whether it asks to replace a scheduled job of its id.
    pub(super) fn replaces(&self) -> bool {
        self.replace
    }

    /// Keeps the job unique by key for a window: see [`Unique`](crate::Unique). Replaces a
    /// [`debounce`](Self::debounce).
    pub fn unique(mut self, unique: Unique) -> Self {
        self.keyed = Some(KeyedOption::Unique(unique));
        self
    }

    /// Debounces the job by key: see [`Debounce`](crate::Debounce). The job is due the quiet period
    /// after this enqueue (setting a time as well fails the enqueue). Replaces a
    /// [`unique`](Self::unique).
    pub fn debounce(mut self, debounce: Debounce) -> Self {
        self.keyed = Some(KeyedOption::Debounce(debounce));
        self
    }

    /// Files the job under `key` for fairness (instead of its type's [`Job::key`]): within the topic,
    /// due jobs of different keys are claimed round-robin between keys. 1 to 128 bytes without control
    /// characters ([`Error::InvalidKey`] otherwise). See [`Job::key`].
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Runs after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.when = When::After(delay);
        self
    }

    /// Runs at `time`.
    pub fn at(mut self, time: DateTime<Utc>) -> Self {
        self.when = When::At(time);
        self
    }

    /// Runs at `when`.
    pub fn when(mut self, when: impl Into<When>) -> Self {
        self.when = when.into();
        self
    }

    /// Replaces the payload and due time of a scheduled job with the same id.
    pub fn replace(mut self) -> Self {
        self.replace = true;
        self
    }

    /// Uses this retry schedule instead of the job type's.
    pub fn retry(mut self, schedule: RetrySchedule) -> Self {
        self.schedule = Some(schedule);
        self
    }

    /// Claims this job before the topic's other due jobs of a lower priority (0, the default, to
    /// [`MAX_PRIORITY`](crate::store::MAX_PRIORITY); higher first, then the earlier due time). Until
    /// it is due it waits like any job. It keeps its priority through retries and expired leases (not
    /// through a dead letter's requeue).
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Stores a metadata entry with the job (a request id, a tenant...), for its handler to read with
    /// [`JobContext::meta`](crate::JobContext::meta). The same key again replaces the value. Keys are 1 to
    /// 64 of `A-Z a-z 0-9 _ . - :`, values at most 1024 bytes, at most 16 entries: the enqueue fails
    /// with [`Error::InvalidMeta`] otherwise. With the `opentelemetry` feature the trace context is
    /// stored beside (`traceparent`, `tracestate`); an entry set here under one of those keys wins.
    /// Keys that start with `postpone.` are postpone's own: a batch's jobs carry `postpone.batch`, a
    /// unique or debounced job `postpone.unique` or `postpone.debounce`, and those replace an entry
    /// set here under the same key.
    ///
    /// ```
    /// # use postpone::{EnqueueItem, Job};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize, Job)]
    /// # #[job(topic = "t")]
    /// # struct Ping;
    /// let item = EnqueueItem::new(Ping).meta("request_id", "req-7f3a");
    /// ```
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.meta.insert(key.into(), value.into());
        self
    }
}

impl<J: Job> From<J> for EnqueueItem<J> {
    fn from(job: J) -> Self {
        EnqueueItem::new(job)
    }
}

/// A job on its way to the store: set options, then `.await` it.
///
/// ```
/// # use postpone::{Client, Job};
/// # use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "orders.close")]
/// struct CloseOrder { order_id: u64 }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> postpone::Result<()> {
/// use std::time::Duration;
/// let client = Client::memory();
/// let enqueued = client
///     .enqueue(CloseOrder { order_id: 42 })
///     .id("order:42")
///     .after(Duration::from_secs(30 * 60))
///     .await?;
/// assert_eq!(enqueued.id, "order:42");
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "an enqueue does nothing until it is awaited"]
pub struct Enqueue<'a, J> {
    client: &'a Client,
    item: EnqueueItem<J>,
    /// The jobs it waits for, and what their failure does (see after.rs).
    pub(super) after: super::after::Parents,
}

impl<'a, J: Job> Enqueue<'a, J> {
    pub(crate) fn new(client: &'a Client, job: J) -> Self {
        Enqueue {
            client,
            item: EnqueueItem::new(job),
            after: super::after::Parents::default(),
        }
    }

    /// Uses this id (a business key such as `order:42`). Enqueueing an id that is scheduled or running
    /// changes nothing and reports it, unless [`replace`](Self::replace) is set.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.item = self.item.id(id);
        self
    }

    /// Runs after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.item = self.item.after(delay);
        self
    }

    /// Runs at `time`.
    pub fn at(mut self, time: DateTime<Utc>) -> Self {
        self.item = self.item.at(time);
        self
    }

    /// Replaces the payload and due time of a scheduled job with the same id; fails with
    /// [`Error::JobRunning`] when that job is running.
    pub fn replace(mut self) -> Self {
        self.item = self.item.replace();
        self
    }

    /// Uses this retry schedule instead of the job type's.
    pub fn retry(mut self, schedule: RetrySchedule) -> Self {
        self.item = self.item.retry(schedule);
        self
    }

    /// Keeps the job unique by key for a window: see [`Unique`](crate::Unique).
    pub fn unique(mut self, unique: Unique) -> Self {
        self.item = self.item.unique(unique);
        self
    }

    /// Debounces the job by key: see [`Debounce`](crate::Debounce).
    pub fn debounce(mut self, debounce: Debounce) -> Self {
        self.item = self.item.debounce(debounce);
        self
    }

    /// Files the job under `key` for fairness, instead of its type's [`Job::key`]: within the topic,
    /// due jobs of different keys are claimed round-robin between keys, so one customer's flood waits
    /// its turn while another's job starts at the next free slot.
    ///
    /// ```
    /// # use postpone::{Client, Job};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize, Job)]
    /// # #[job(topic = "shop.sync")]
    /// # struct SyncShop { shop_id: u64 }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// let client = Client::memory();
    /// client.enqueue(SyncShop { shop_id: 7 }).key("tenant:acme").await?;
    /// # Ok(()) }
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.item = self.item.key(key);
        self
    }

    /// Claims this job before due jobs of a lower priority: see [`EnqueueItem::priority`].
    ///
    /// ```
    /// # use postpone::{Client, Job};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize, Job)]
    /// # #[job(topic = "emails")]
    /// # struct Email { to: String }
    /// # async fn demo(client: Client) -> postpone::Result<()> {
    /// client.enqueue(Email { to: "ceo@example.com".into() }).priority(10).await?;
    /// # Ok(()) }
    /// ```
    pub fn priority(mut self, priority: u8) -> Self {
        self.item = self.item.priority(priority);
        self
    }

    /// Stores a metadata entry with the job, for its handler to read with
    /// [`JobContext::meta`](crate::JobContext::meta): see [`EnqueueItem::meta`] for the limits.
    ///
    /// ```
    /// # use postpone::{Client, Job, JobContext, JobError};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize, Job)]
    /// # #[job(topic = "orders.close")]
    /// # struct CloseOrder { order_id: u64 }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// let client = Client::memory();
    /// client.enqueue(CloseOrder { order_id: 42 }).meta("tenant", "acme").await?;
    /// // In the handler:
    /// async fn close_order(job: CloseOrder, ctx: JobContext) -> Result<(), JobError> {
    ///     assert_eq!(ctx.meta("tenant"), Some("acme"));
    ///     Ok(())
    /// }
    /// # Ok(()) }
    /// ```
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.item = self.item.meta(key, value);
        self
    }
}

impl<'a, J: Job> Enqueue<'a, J> {
    /// Enqueues the job and waits up to `timeout` for it to end: the enqueue's report, and how the job
    /// ended ([`JobOutcome`](super::JobOutcome), as [`Client::wait`] returns it). The wait is registered in the store
    /// before the job exists, so even a job that ends at once is heard, whatever its type keeps: the
    /// way for a request handler to give a job a moment and otherwise answer `202`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use postpone::{Client, Job, JobContext, JobError, JobOutcome, Worker};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "quotes", output = u64)]
    /// struct Quote { items: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// let client = Client::memory();
    /// let worker = Worker::builder(&client)
    ///     .handle(|q: Quote, _: JobContext| async move { Ok::<_, JobError>(q.items * 250) })
    ///     .build()?;
    /// # let stop = worker.shutdown_handle();
    /// let running = tokio::spawn(worker.run());
    ///
    /// let (job, outcome) = client.enqueue(Quote { items: 4 }).and_wait(Duration::from_secs(2)).await?;
    /// assert_eq!(outcome, JobOutcome::Succeeded(1000), "job {}", job.id);
    /// # stop.shutdown();
    /// # running.await.unwrap()?;
    /// # Ok(()) }
    /// ```
    ///
    /// With a unique or debounce key the job may be another one (the key's holder, named in the
    /// report); then the wait is for that one, registered after the enqueue.
    pub async fn and_wait(
        mut self,
        timeout: Duration,
    ) -> Result<(Enqueued, super::JobOutcome<J::Output>)> {
        let deadline = tokio::time::Instant::now() + timeout;
        let client = self.client;
        if self.item.keyed.is_some() || self.item.job.unique().is_some() {
            let enqueued = self.await?;
            let waiter = client.waiter::<J>(&enqueued.id)?;
            let outcome = waiter.outcome_by(deadline).await?;
            return Ok((enqueued, outcome));
        }
        let id = self.item.id.get_or_insert_with(crate::id::generate).clone();
        let mut waiter = client.waiter_expecting::<J>(&id)?;
        waiter.register(deadline).await?;
        let enqueued = self.await?;
        let outcome = waiter.outcome_by(deadline).await?;
        Ok((enqueued, outcome))
    }
}

impl<'a, J: Job> IntoFuture for Enqueue<'a, J> {
    type Output = Result<Enqueued>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Enqueued>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        let Enqueue {
            client,
            item,
            after,
        } = self;
        if !after.is_empty() {
            return Box::pin(client.enqueue_after(item, after));
        }
        // Only what the plain enqueue needs goes into its future, which stays under 1 KiB: a larger
        // allocation at every enqueue makes glibc's malloc consolidate its small chunks each time. So
        // the item waits in a box of its own, and a job with a unique or debounce key takes a future
        // of its own. It is validated and encoded when the future first runs, in the caller's span
        // (`.into_future().instrument(span)`): the enqueue's span and the trace context its job
        // carries are taken there.
        let replace = item.replace;
        let refused = move |enqueued: Enqueued| match enqueued.status {
            EnqueueStatus::AlreadyRunning if replace => Err(Error::JobRunning {
                topic: J::TOPIC.to_owned(),
                id: enqueued.id,
            }),
            _ => Ok(enqueued),
        };
        let item = Box::new(item);
        Box::pin(async move {
            let (span, prepared) = client.prepare_one(*item)?;
            if prepared.keyed.is_some() {
                let keyed = client.send_keyed::<J>(vec![prepared]).instrument(span);
                let mut done = Box::pin(keyed).await?;
                return refused(done.pop().expect("one outcome per job"));
            }
            trace::enqueued_id(&span, &prepared.job.id);
            let Prepared { job, generated, .. } = prepared;
            let sent = async {
                let outcome = client
                    .enqueue_routed(J::TOPIC, J::partitions(), std::slice::from_ref(&job))
                    .await?
                    .pop()
                    .ok_or_else(|| {
                        Error::backend("enqueueing a job", "the store returned no outcome")
                    })?;
                client.enqueued::<J>(&job, generated, outcome).await
            };
            refused(sent.instrument(span).await?)
        })
    }
}

/// Jobs sent to the store in one call.
const CHUNK: usize = 1000;

impl Client {
    /// Encodes and validates one item.
    pub(super) fn prepare_item<J: Job>(
        &self,
        item: EnqueueItem<J>,
        now_ms: i64,
        default_first_delay: Option<Duration>,
        carried: &Meta,
    ) -> Result<Prepared> {
        if item.priority > crate::store::MAX_PRIORITY {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "priority {} of a job of topic {:?} is above the highest, {}",
                    item.priority,
                    J::TOPIC,
                    crate::store::MAX_PRIORITY
                ),
            });
        }
        let keyed = match item
            .keyed
            .or_else(|| item.job.unique().map(KeyedOption::Unique))
        {
            Some(k) => Some(self.keyed_option::<J>(k, item.id.is_some(), &item.when)?),
            None => None,
        };
        let key = match item.key.or_else(|| item.job.key()) {
            Some(key) => {
                crate::validate::validate_key(&key)?;
                Some(key)
            }
            None => None,
        };
        let generated = item.id.is_none() && keyed.is_none();
        let id = match (item.id, &keyed) {
            (Some(id), _) => {
                validate_id(&id)?;
                id
            }
            // On a partitioned topic a keyed job's id is its key, so that every job of the key goes to
            // one partition (see keyed_option).
            (None, Some((k, _, _))) if J::partitions() > 1 => k.key().to_owned(),
            // Random: never taken, since a keyed enqueue must not fall back to a fresh id.
            (None, Some(_)) => crate::id::generate_random(),
            // On a partitioned topic, a key's jobs with generated ids share its partition.
            (None, None) => match &key {
                Some(key) => {
                    crate::partition::id_with_key(key, J::partitions(), crate::id::generate)
                }
                None => crate::id::generate(),
            },
        };
        // The record's head first, then the payload's JSON straight after it in the same buffer.
        let mut record = Record::new(now_ms, Vec::new());
        // The key travels with the record too: the Redis store reads it there on the paths that start
        // from an id (fair.lua's record_key), so a keyed job keeps no entry of its own.
        record.key.clone_from(&key);
        let mut item_meta = item.meta;
        if let Some((_, name, shown)) = &keyed {
            item_meta.insert(name.clone(), shown.clone());
        }
        if !item_meta.is_empty() || !carried.is_empty() {
            let mut all = carried.clone();
            all.extend(item_meta);
            meta::validate(&all)?;
            record.meta = all;
        }
        let first_delay = match &item.schedule {
            Some(schedule) => {
                record.schedule = Some((schedule.to_millis(), schedule.jitter_permille()));
                schedule.delay_before(1)
            }
            None => default_first_delay,
        };
        // Room for a small payload's JSON (serde_json's own first buffer is 128 bytes).
        let mut bytes = record.encode_head(128);
        serde_json::to_writer(&mut bytes, &item.job).map_err(|e| Error::Encode {
            topic: J::TOPIC.to_owned(),
            source: e.into(),
        })?;
        if bytes.len() > self.inner.max_payload {
            return Err(Error::PayloadTooLarge {
                topic: J::TOPIC.to_owned(),
                size: bytes.len(),
                limit: self.inner.max_payload,
            });
        }
        let due = match &keyed {
            // The first push caps nothing, so the first due time is capped here.
            Some((
                crate::store::Keyed::Debounce {
                    quiet_ms,
                    max_wait_ms,
                    ..
                },
                _,
                _,
            )) => Due::In(match max_wait_ms {
                0 => *quiet_ms,
                max => (*quiet_ms).min(*max),
            }),
            _ => item.when.to_due(first_delay.unwrap_or_default()),
        };
        let job = NewJob::new(id, bytes, due, item.replace)
            .priority(item.priority)
            .with_key(key);
        Ok(Prepared {
            job,
            generated,
            keyed: keyed.map(|(k, _, _)| k),
        })
    }

    /// Checks a key of a job of `J`: see [`to_keyed`].
    fn keyed_option<J: Job>(
        &self,
        keyed: KeyedOption,
        has_id: bool,
        when: &When,
    ) -> Result<(crate::store::Keyed, String, String)> {
        let bad = |why: &str| Error::InvalidConfig {
            reason: format!("a job of topic {:?}: {why}", J::TOPIC),
        };
        if J::partitions() > 1 && has_id {
            return Err(bad(
                "on a partitioned topic a unique or debounced job takes its key as its id: leave its \
                 id unset",
            ));
        }
        if let KeyedOption::Debounce(d) = &keyed {
            if *when != When::Now {
                return Err(bad(&format!(
                    "a debounced job is due its quiet period ({}) after the enqueue: set no time",
                    crate::time::human_duration(d.quiet())
                )));
            }
        }
        to_keyed(J::TOPIC, keyed)
    }

    /// Enqueues `items` in order. Every item is validated and encoded before any is sent, so a bad item
    /// anywhere fails the call with nothing stored (a stored job with a generated id the caller never
    /// learned could not be told apart from its duplicate on a retry).
    pub(crate) async fn enqueue_items<J: Job>(
        &self,
        items: Vec<EnqueueItem<J>>,
    ) -> Result<Vec<Enqueued>> {
        self.check_topic::<J>()?;
        let span = trace::enqueue_span(J::TOPIC, items.len());
        let carried = trace::context_meta(&span);
        let now_ms = Utc::now().timestamp_millis();
        let default_first_delay = J::retry_schedule().delay_before(1);
        let prepared = items
            .into_iter()
            .map(|item| self.prepare_item(item, now_ms, default_first_delay, &carried))
            .collect::<Result<Vec<_>>>()?;
        if prepared.iter().any(|p| p.keyed.is_some()) {
            return self.send_keyed::<J>(prepared).instrument(span).await;
        }
        let (jobs, generated): (Vec<NewJob>, Vec<bool>) =
            prepared.into_iter().map(|p| (p.job, p.generated)).unzip();
        if let [job] = jobs.as_slice() {
            trace::enqueued_id(&span, &job.id);
        }
        self.send_prepared::<J>(jobs, generated)
            .instrument(span)
            .await
    }

    /// One item, validated and encoded as [`enqueue_items`](Self::enqueue_items) does, with its
    /// enqueue's span (an awaited [`Enqueue`] sends it).
    fn prepare_one<J: Job>(&self, item: EnqueueItem<J>) -> Result<(Span, Prepared)> {
        self.check_topic::<J>()?;
        let span = trace::enqueue_span(J::TOPIC, 1);
        let carried = trace::context_meta(&span);
        let now_ms = Utc::now().timestamp_millis();
        let default_first_delay = J::retry_schedule().delay_before(1);
        let prepared = self.prepare_item(item, now_ms, default_first_delay, &carried)?;
        Ok((span, prepared))
    }

    /// Sends prepared jobs, in chunks, and reports each one's outcome.
    async fn send_prepared<J: Job>(
        &self,
        jobs: Vec<NewJob>,
        generated: Vec<bool>,
    ) -> Result<Vec<Enqueued>> {
        let mut out = Vec::with_capacity(jobs.len());
        let mut generated = generated.into_iter();
        for chunk in jobs.chunks(CHUNK) {
            let outcomes = self
                .enqueue_routed(J::TOPIC, J::partitions(), chunk)
                .await?;
            for ((job, id_generated), outcome) in chunk.iter().zip(generated.by_ref()).zip(outcomes)
            {
                out.push(self.enqueued::<J>(job, id_generated, outcome).await?);
            }
        }
        Ok(out)
    }

    /// What became of `job` (sent with the outcome `outcome`; `generated`: its id was generated),
    /// counted in the metrics.
    async fn enqueued<J: Job>(
        &self,
        job: &NewJob,
        generated: bool,
        outcome: EnqueueOutcome,
    ) -> Result<Enqueued> {
        let enqueued = match (outcome, generated) {
            // A generated id that collided with a live job: draw a random one, never drop the job.
            // (Boxed: a rare path, kept out of every enqueue's future.)
            (EnqueueOutcome::Exists { .. } | EnqueueOutcome::Running, true) => {
                Box::pin(self.enqueue_with_fresh_id(J::TOPIC, J::partitions(), job.clone())).await?
            }
            (outcome, _) => to_enqueued(job.id.clone(), outcome),
        };
        metrics::enqueued(J::TOPIC, enqueued.status);
        Ok(enqueued)
    }

    /// Sends jobs to the store: in one call, or on a partitioned topic one call per partition (at once),
    /// each job to its id's partition. Outcomes come back in the jobs' order.
    async fn enqueue_routed(
        &self,
        topic: &str,
        partitions: u16,
        jobs: &[NewJob],
    ) -> Result<Vec<EnqueueOutcome>> {
        let store = self.inner.store.as_ref();
        self.routed(
            topic,
            partitions,
            jobs.to_vec(),
            |job| &job.id,
            |t, batch| async move { store.enqueue(&t, batch).await },
        )
        .await
    }

    /// Sends `items` of `topic` to the store with `call` (given the stored topic and its items): in one
    /// call, or on a partitioned topic one call per partition (at once), each item to its id's
    /// partition. Outcomes come back in the items' order. Records the topic in the registry first.
    pub(super) async fn routed<'t, T, O, F, Fut>(
        &self,
        topic: &'t str,
        partitions: u16,
        items: Vec<T>,
        id_of: impl Fn(&T) -> &str,
        call: F,
    ) -> Result<Vec<O>>
    where
        F: Fn(Cow<'t, str>, Vec<T>) -> Fut,
        Fut: Future<Output = Result<Vec<O>>>,
    {
        self.inner.register(topic, partitions).await;
        if partitions <= 1 {
            return call(Cow::Borrowed(topic), items).await;
        }
        let n = items.len();
        let mut groups: BTreeMap<u16, (Vec<usize>, Vec<T>)> = BTreeMap::new();
        for (i, item) in items.into_iter().enumerate() {
            let group = groups
                .entry(partition_of(id_of(&item), partitions))
                .or_default();
            group.0.push(i);
            group.1.push(item);
        }
        let mut members = Vec::with_capacity(groups.len());
        let calls = groups.into_iter().map(|(p, (positions, batch))| {
            members.push((p, positions));
            call(store_topic(topic, p), batch)
        });
        let calls: Vec<_> = calls.collect();
        let results = join_all(calls).await;
        let mut out: Vec<Option<O>> = (0..n).map(|_| None).collect();
        for ((p, positions), result) in members.into_iter().zip(results) {
            let outcomes = result.map_err(|e| partition_error(topic, p, partitions, e))?;
            if outcomes.len() != positions.len() {
                return Err(Error::backend(
                    "enqueueing jobs",
                    "the store returned the wrong number of outcomes",
                ));
            }
            for (i, outcome) in positions.into_iter().zip(outcomes) {
                out[i] = Some(outcome);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Sends prepared jobs, some with keys, in chunks, and reports each one's outcome.
    async fn send_keyed<J: Job>(&self, prepared: Vec<Prepared>) -> Result<Vec<Enqueued>> {
        let store = self.inner.store.as_ref();
        let mut out = Vec::with_capacity(prepared.len());
        let jobs: Vec<KeyedJob> = prepared
            .into_iter()
            .map(|p| KeyedJob::new(p.job, p.keyed))
            .collect();
        for chunk in jobs.chunks(CHUNK) {
            let ids: Vec<String> = chunk.iter().map(|k| k.job.id.clone()).collect();
            let outcomes = self
                .routed(
                    J::TOPIC,
                    J::partitions(),
                    chunk.to_vec(),
                    |k| &k.job.id,
                    |t, batch| async move { store.enqueue_keyed(&t, batch).await },
                )
                .await?;
            for (id, outcome) in ids.into_iter().zip(outcomes) {
                let enqueued = keyed_to_enqueued(id, outcome);
                metrics::enqueued(J::TOPIC, enqueued.status);
                out.push(enqueued);
            }
        }
        Ok(out)
    }

    async fn enqueue_with_fresh_id(
        &self,
        topic: &str,
        partitions: u16,
        mut job: NewJob,
    ) -> Result<Enqueued> {
        for _ in 0..8 {
            job.id = match &job.key {
                Some(key) => {
                    crate::partition::id_with_key(key, partitions, crate::id::generate_random)
                }
                None => crate::id::generate_random(),
            };
            let outcome = self
                .enqueue_routed(topic, partitions, std::slice::from_ref(&job))
                .await?;
            if let Some(EnqueueOutcome::Created { due_at_ms }) = outcome.first() {
                return Ok(to_enqueued(
                    job.id,
                    EnqueueOutcome::Created {
                        due_at_ms: *due_at_ms,
                    },
                ));
            }
        }
        Err(Error::backend(
            "enqueue",
            "could not find a free generated id after 8 tries",
        ))
    }
}

pub(super) fn to_enqueued(id: String, outcome: EnqueueOutcome) -> Enqueued {
    let (status, due_at) = match outcome {
        EnqueueOutcome::Created { due_at_ms } => (EnqueueStatus::Created, Some(due_at_ms)),
        EnqueueOutcome::Replaced { due_at_ms } => (EnqueueStatus::Replaced, Some(due_at_ms)),
        EnqueueOutcome::Exists { due_at_ms } if due_at_ms == crate::store::WAITING_DUE_MS => {
            (EnqueueStatus::AlreadyWaiting, None)
        }
        EnqueueOutcome::Exists { due_at_ms } => (EnqueueStatus::AlreadyScheduled, Some(due_at_ms)),
        EnqueueOutcome::Running => (EnqueueStatus::AlreadyRunning, None),
    };
    Enqueued {
        id,
        status,
        due_at: due_at.map(ms_to_time),
        held_until: None,
    }
}

fn keyed_to_enqueued(id: String, outcome: KeyedOutcome) -> Enqueued {
    let (id, status, due_at, held_until) = match outcome {
        KeyedOutcome::Enqueued(o) => return to_enqueued(id, o),
        KeyedOutcome::Duplicate { id, due_at_ms } => {
            (id, EnqueueStatus::Duplicate, due_at_ms, None)
        }
        KeyedOutcome::Throttled { id, until_ms } => {
            (id, EnqueueStatus::Throttled, None, Some(until_ms))
        }
        KeyedOutcome::Debounced { id, due_at_ms } => {
            (id, EnqueueStatus::Debounced, Some(due_at_ms), None)
        }
    };
    Enqueued {
        id,
        status,
        due_at: due_at.map(ms_to_time),
        held_until: held_until.map(ms_to_time),
    }
}

impl Client {
    /// [`prepare_item`](Self::prepare_item) for a job that must not meet a live job by a generated
    /// id (a batch's member, an outbox's job): one without an id gets a random one, drawn on a
    /// partitioned topic to land in its key's partition when it has a key for fairness, as an
    /// enqueue's generated id does.
    pub(super) fn prepare_random_id<J: Job>(
        &self,
        item: EnqueueItem<J>,
        now_ms: i64,
        default_first_delay: Option<Duration>,
        carried: &Meta,
    ) -> Result<Prepared> {
        let generated = !item.has_id();
        let item = match generated {
            false => item,
            true => item.id(crate::id::generate_random()),
        };
        let mut prepared = self.prepare_item(item, now_ms, default_first_delay, carried)?;
        if let (true, Some(key), true) = (generated, &prepared.job.key, J::partitions() > 1) {
            prepared.job.id =
                crate::partition::id_with_key(key, J::partitions(), crate::id::generate_random);
        }
        Ok(prepared)
    }
}

/// A job validated and encoded, with what the enqueue needs to know of it.
pub(super) struct Prepared {
    pub(super) job: NewJob,
    /// Its id was generated (a collision with a live job draws a fresh one).
    pub(super) generated: bool,
    pub(super) keyed: Option<crate::store::Keyed>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Plain;

    impl Job for Plain {
        const TOPIC: &'static str = "plain";
        type Output = ();
    }

    /// glibc's malloc consolidates its free small chunks at each allocation of 1,008 bytes or more:
    /// the boxed future of every awaited enqueue stays below that (its rare paths are boxed apart).
    #[test]
    fn a_plain_enqueues_future_stays_under_a_large_allocation() {
        let client = Client::memory();
        let future = client.enqueue(Plain).into_future();
        let size = std::mem::size_of_val(&*future);
        assert!(size < 1008, "the enqueue's future takes {size} bytes");
    }

    /// The ids [`crate::id::generate`] gives next: its process prefix, then its counter from the one
    /// it just gave, in base 62.
    fn next_generated_ids(n: u64) -> Vec<String> {
        let last = crate::id::generate();
        let (prefix, seq) = last.split_at(8);
        let digit = |c: u8| crate::id::ALPHABET.iter().position(|a| *a == c).unwrap() as u64;
        let seq = seq.bytes().fold(0u64, |n, c| n * 62 + digit(c));
        (1..=n)
            .map(|k| {
                let mut id = prefix.to_owned();
                crate::id::push_base62(&mut id, seq + k, 2);
                id
            })
            .collect()
    }

    #[tokio::test]
    async fn a_generated_id_that_meets_a_live_job_is_drawn_again_at_random_and_the_job_kept() {
        // Live jobs under the next generated ids, then an enqueue whose generated id is one of them.
        // Other tests of this process may generate ids meanwhile and move the counter past them:
        // then the enqueue got a fresh generated id, and the attempt is made again.
        for _ in 0..20 {
            let client = Client::memory();
            let taken = next_generated_ids(1000);
            for id in &taken {
                client.enqueue(Plain).id(id.clone()).await.unwrap();
            }
            let enqueued = client.enqueue(Plain).await.unwrap();
            assert_eq!(enqueued.status, EnqueueStatus::Created);
            assert!(!taken.contains(&enqueued.id), "{}", enqueued.id);
            let counts = client.topic::<Plain>().counts().await.unwrap();
            assert_eq!(counts.ready + counts.scheduled, 1001);
            // A random id (22 characters), not a generated one (10 to 19): the collision's path ran.
            if enqueued.id.len() == 22 {
                return;
            }
        }
        panic!("no enqueue met a live job under its generated id in 20 attempts");
    }
}
