//! Making batches through the client: jobs of any topics enqueued as one set (all or none), with
//! callbacks that are ordinary jobs. The handle to an existing batch is in `batch_handle.rs`.
//!
//! Members and callbacks are validated and encoded when they are added, exactly as an enqueue does
//! (id, payload size, metadata, retry schedule, partition), and each carries the batch's id in its
//! metadata (`postpone.batch`, read with [`JobContext::batch_id`](crate::JobContext::batch_id)). What
//! happens then (members dispatched into their topics, each end counted once, each callback enqueued
//! once) is the store's part: see [`crate::store::workflow`].

use std::collections::BTreeMap;

use super::{Batch, Client, EnqueueItem};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::meta::{Meta, BATCH_KEY};
use crate::observe::trace;
use crate::partition::{partition_of, store_topic};
use crate::record::Record;
use crate::store::workflow::MAX_BATCH_ADD;
use crate::store::{BatchCreated, BatchJob, CallbackKind, NewBatch};
use crate::validate::validate_batch_id;

/// A batch on its way to the store: its id, description, callbacks and first members. Made by
/// [`Client::batch`]; [`enqueue`](Self::enqueue) creates it closed, [`open`](Self::open) open (more
/// members may be added until it is closed).
///
/// Each member or callback is validated and encoded when it is added. The first one that is not
/// valid (a bad id, a payload over the limit, a unique or debounced job, which cannot be in a batch)
/// is kept, the rest of the chain does nothing, and [`enqueue`](Self::enqueue) or
/// [`open`](Self::open) returns that error with nothing stored: a chain reads like the enqueue it
/// is, and the batch is all or none.
///
/// ```
/// use postpone::{Client, Job};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "billing.invoice_email")]
/// struct InvoiceEmail { customer_id: u64 }
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "billing.run_done")]
/// struct BillingRunDone { run: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> postpone::Result<()> {
/// let client = Client::memory();
/// let batch = client
///     .batch()
///     .id("billing:2026-11")
///     .description("November billing run")
///     .on_complete(BillingRunDone { run: "2026-11".into() })
///     .add_all((1..=3).map(|customer_id| InvoiceEmail { customer_id }))
///     .enqueue()
///     .await?;
/// let status = batch.status().await?;
/// assert_eq!((status.total, status.pending()), (3, 3));
/// assert!(status.closed);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a batch does nothing until `.enqueue()` or `.open()` is awaited"]
pub struct BatchBuilder {
    client: Client,
    id: String,
    description: String,
    callbacks: BTreeMap<CallbackKind, BatchJob>,
    members: Vec<BatchJob>,
    stamp: Stamp,
    error: Option<Error>,
}

/// What every member and callback of one batch is encoded with.
#[derive(Debug)]
pub(super) struct Stamp {
    /// Enqueue time of the records (the client's clock, as an enqueue's).
    now_ms: i64,
    /// The trace context of the batch's creation (with the `opentelemetry` feature).
    carried: Meta,
    /// The topics the jobs go to, with their partitions: recorded in the registry of topics.
    topics: BTreeMap<&'static str, u16>,
}

impl Stamp {
    pub(super) fn new() -> Self {
        let span = tracing::debug_span!("batch");
        Stamp {
            now_ms: chrono::Utc::now().timestamp_millis(),
            carried: trace::context_meta(&span),
            topics: BTreeMap::new(),
        }
    }

    /// Validates and encodes one job of batch `batch_id`, as an enqueue does, and routes it to its
    /// partition.
    pub(super) fn prepare<J: Job>(
        &mut self,
        client: &Client,
        batch_id: &str,
        item: EnqueueItem<J>,
    ) -> Result<BatchJob> {
        client.check_topic::<J>()?;
        if item.is_keyed() {
            return Err(Error::invalid_batch(
                batch_id,
                format!(
                    "a job of topic {:?} has a unique or debounce key, and cannot be in a batch (its \
                     key could name another job): enqueue it on its own",
                    J::TOPIC
                ),
            ));
        }
        if item.replaces() {
            return Err(Error::invalid_batch(
                batch_id,
                format!(
                    "a job of topic {:?} in a batch cannot replace a scheduled job: a live job of its \
                     id becomes the member as it is (leave `replace` unset)",
                    J::TOPIC
                ),
            ));
        }
        // Random in full: a generated id that met a live job would make that job the member.
        let item = item.meta(BATCH_KEY, batch_id);
        let first_delay = J::retry_schedule().delay_before(1);
        let prepared = client.prepare_random_id(item, self.now_ms, first_delay, &self.carried)?;
        self.topics.insert(J::TOPIC, J::partitions());
        let p = partition_of(&prepared.job.id, J::partitions());
        Ok(BatchJob::new(store_topic(J::TOPIC, p), prepared.job))
    }

    /// Records the topics in the registry of topics (once per client).
    pub(super) async fn register(&self, client: &Client) {
        for (topic, partitions) in &self.topics {
            client.inner.register(topic, *partitions).await;
        }
    }
}

/// Sets `batch_id` in an encoded job's metadata (the batch's id changed after the job was added).
fn restamp(job: &mut BatchJob, batch_id: &str, max_payload: usize) -> Result<()> {
    let mut record = Record::decode(&job.job.record).map_err(|source| Error::Decode {
        topic: job.topic.clone(),
        id: job.job.id.clone(),
        source,
    })?;
    record
        .meta
        .insert(BATCH_KEY.to_owned(), batch_id.to_owned());
    let bytes = record.encode();
    if bytes.len() > max_payload {
        return Err(Error::PayloadTooLarge {
            topic: user_topic(&job.topic).to_owned(),
            size: bytes.len(),
            limit: max_payload,
        });
    }
    job.job.record = bytes;
    Ok(())
}

/// The topic a store topic (`<topic>` or `<topic>#<p>`) is a partition of.
pub(super) fn user_topic(stored: &str) -> &str {
    stored.split('#').next().unwrap_or(stored)
}

/// The error when more than [`MAX_BATCH_ADD`] jobs go in one call.
pub(super) fn too_many(batch_id: &str, n: usize) -> Error {
    Error::invalid_batch(
        batch_id,
        format!(
            "{n} members in one call, over the limit of {MAX_BATCH_ADD}: open the batch and add \
             them in several calls, then close it"
        ),
    )
}

impl BatchBuilder {
    pub(super) fn new(client: &Client) -> Self {
        BatchBuilder {
            client: client.clone(),
            id: crate::id::generate_random(),
            description: String::new(),
            callbacks: BTreeMap::new(),
            members: Vec::new(),
            stamp: Stamp::new(),
            error: None,
        }
    }

    fn fail(&mut self, e: Error) {
        self.error.get_or_insert(e);
    }

    /// Uses this id (a business key such as `billing:2026-11`): 1 to 128 bytes of
    /// `A-Z a-z 0-9 _ . : -` ([`Error::InvalidBatchId`] otherwise). Without it, a random id is
    /// generated. A batch whose id exists already is not created again: the creation fails with
    /// [`Error::BatchExists`]. Set it first: members added before it are encoded again.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        let id = id.into();
        if let Err(e) = validate_batch_id(&id) {
            self.fail(e);
            return self;
        }
        let max = self.client.inner.max_payload;
        let jobs = self.members.iter_mut().chain(self.callbacks.values_mut());
        if let Err(e) = jobs.into_iter().try_for_each(|job| restamp(job, &id, max)) {
            self.fail(e);
        }
        self.id = id;
        self
    }

    /// A short description for operators (at most
    /// [`NewBatch::MAX_DESCRIPTION`](crate::store::NewBatch::MAX_DESCRIPTION) bytes).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        let description = description.into();
        if description.len() > NewBatch::MAX_DESCRIPTION {
            let e = Error::invalid_batch(
                &self.id,
                format!(
                    "its description is {} bytes, over the limit of {}",
                    description.len(),
                    NewBatch::MAX_DESCRIPTION
                ),
            );
            self.fail(e);
        }
        self.description = description;
        self
    }

    fn callback<J: Job>(mut self, kind: CallbackKind, item: EnqueueItem<J>) -> Self {
        if self.error.is_none() {
            match self.stamp.prepare(&self.client, &self.id, item) {
                Ok(job) => {
                    self.callbacks.insert(kind, job);
                }
                Err(e) => self.fail(e),
            }
        }
        self
    }

    /// Enqueues `job` once every member has succeeded (never if one died or was cancelled). A job or
    /// an [`EnqueueItem`] (for an id, a delay, metadata...). A second call replaces the first.
    pub fn on_success<J: Job>(self, job: impl Into<EnqueueItem<J>>) -> Self {
        self.callback(CallbackKind::Success, job.into())
    }

    /// Enqueues `job` once the batch is closed and every member has ended (succeeded, died or was
    /// cancelled), whatever the ends. Its handler reads the counts with
    /// [`Client::batch_status`] of [`JobContext::batch_id`](crate::JobContext::batch_id). A second
    /// call replaces the first.
    pub fn on_complete<J: Job>(self, job: impl Into<EnqueueItem<J>>) -> Self {
        self.callback(CallbackKind::Complete, job.into())
    }

    /// Enqueues `job` at the first death of a member (once, however many die). A second call
    /// replaces the first.
    pub fn on_death<J: Job>(self, job: impl Into<EnqueueItem<J>>) -> Self {
        self.callback(CallbackKind::Death, job.into())
    }

    /// Adds a member: a job of any type, or an [`EnqueueItem`] for its id, time, retry schedule or
    /// metadata. A member with an id whose job is live in its topic makes that job the member.
    // "Add a member" is the domain's word; this is no arithmetic.
    #[allow(clippy::should_implement_trait)]
    pub fn add<J: Job>(mut self, job: impl Into<EnqueueItem<J>>) -> Self {
        if self.error.is_none() {
            match self.stamp.prepare(&self.client, &self.id, job.into()) {
                Ok(job) => self.members.push(job),
                Err(e) => self.fail(e),
            }
        }
        self
    }

    /// Adds members of one type (call it once per type for several).
    pub fn add_all<J, I>(mut self, jobs: I) -> Self
    where
        J: Job,
        I: IntoIterator,
        I::Item: Into<EnqueueItem<J>>,
    {
        for job in jobs {
            if self.error.is_some() {
                break;
            }
            self = self.add(job);
        }
        self
    }

    /// Creates the batch closed, with its members in their topics; then callbacks fire as members
    /// end (a closed batch with no member completes at once, and succeeds).
    pub async fn enqueue(self) -> Result<Batch> {
        self.create(true).await
    }

    /// Creates the batch open: members may be added with [`Batch::add`] until [`Batch::close`].
    /// The completion (and success) callbacks wait for the close; the death callback does not.
    pub async fn open(self) -> Result<Batch> {
        self.create(false).await
    }

    async fn create(self, close: bool) -> Result<Batch> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.members.len() > MAX_BATCH_ADD {
            return Err(too_many(&self.id, self.members.len()));
        }
        self.stamp.register(&self.client).await;
        let batch = NewBatch {
            description: self.description,
            callbacks: self.callbacks.into_iter().collect(),
            jobs: self.members,
            close,
        };
        let store = self.client.backend();
        match store.batch_create(&self.id, batch).await? {
            BatchCreated::Created => Ok(Batch::new(self.client, self.id)),
            _ => Err(Error::BatchExists { id: self.id }),
        }
    }
}

impl Client {
    /// A new batch: jobs of any topics enqueued as one set, all or none, with callbacks (ordinary
    /// jobs, each enqueued exactly once) on success, on completion and on a death. See
    /// [`BatchBuilder`] and the guide's [batches](crate::guide::batches).
    pub fn batch(&self) -> BatchBuilder {
        BatchBuilder::new(self)
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
