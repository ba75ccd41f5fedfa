//! What a transactional outbox needs from the client: a job validated and encoded when the application
//! enqueues it inside its own database transaction, and delivered to the store later, at most once per
//! delivery token, by a relay that may deliver one row twice after a crash. The PostgreSQL outbox
//! (`postpone-postgres`) is built on this; applications use that crate, not these calls.

use std::time::Duration;

use chrono::Utc;

use super::enqueue::{to_enqueued, EnqueueItem, EnqueueStatus};
use super::Client;
use crate::error::Result;
use crate::job::Job;
use crate::observe::{metrics, trace};
use crate::store::NewJob;
use crate::time::millis;

/// A job validated and encoded as [`Client::enqueue`] would send it, not yet sent: what an outbox keeps
/// until its transaction commits. The job's id is the one given, or a random one (22 characters, never
/// reused), so the caller learns it at once.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PreparedJob {
    /// The job type's topic.
    pub topic: &'static str,
    /// The job type's partitions.
    pub partitions: u16,
    /// The job as the store takes it: id, encoded record, due time, replace, priority.
    pub job: NewJob,
}

/// One job for [`Client::deliver_once`]: a prepared job and the token of its delivery (the outbox row's
/// own, random, id).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Delivery {
    /// Unique per outbox row, never reused: a second delivery with it changes nothing.
    pub token: String,
    /// The job.
    pub job: NewJob,
}

impl Delivery {
    /// A delivery of `job` under `token`.
    pub fn new(token: impl Into<String>, job: NewJob) -> Self {
        Delivery {
            token: token.into(),
            job,
        }
    }
}

impl Client {
    /// Validates and encodes a job as [`Client::enqueue`] does (id, payload size, metadata, priority,
    /// retry schedule), without sending it: the error an enqueue would give comes here, at the call
    /// inside the application's transaction, never later at delivery. A job without an id gets a
    /// random one (with a key for fairness, on a partitioned topic: one in its key's partition).
    pub fn prepare<J: Job>(&self, item: EnqueueItem<J>) -> Result<PreparedJob> {
        self.check_topic::<J>()?;
        let carried = trace::context_meta(&tracing::Span::current());
        let default_first_delay = J::retry_schedule().delay_before(1);
        let now_ms = Utc::now().timestamp_millis();
        let prepared = self.prepare_random_id(item, now_ms, default_first_delay, &carried)?;
        if prepared.keyed.is_some() {
            return Err(crate::Error::InvalidConfig {
                reason: format!(
                    "a job of topic {:?}: unique and debounced jobs cannot go through an outbox \
                     (their keys are checked when the job reaches the queue)",
                    J::TOPIC
                ),
            });
        }
        let job = prepared.job;
        Ok(PreparedJob {
            topic: J::TOPIC,
            partitions: J::partitions(),
            job,
        })
    }

    /// Checks a job read back from an outbox as [`prepare`](Self::prepare) checked it, against this
    /// client's limits (which may have changed since): topic and partitions, id, priority, and the
    /// encoded size against [`ClientBuilder::max_payload`](crate::ClientBuilder::max_payload). A job
    /// that fails here cannot be delivered by this client: report it and keep it.
    pub fn check_delivery(&self, topic: &str, partitions: u16, job: &NewJob) -> Result<()> {
        crate::validate::validate_topic(topic)?;
        crate::partition::validate_partitions(topic, partitions)?;
        crate::validate::validate_id(&job.id)?;
        if let Some(key) = &job.key {
            crate::validate::validate_key(key)?;
        }
        if job.priority > crate::store::MAX_PRIORITY {
            return Err(crate::Error::InvalidConfig {
                reason: format!(
                    "priority {} of job {:?} of topic {topic:?} is above the highest, {}",
                    job.priority,
                    job.id,
                    crate::store::MAX_PRIORITY
                ),
            });
        }
        if job.record.len() > self.inner.max_payload {
            return Err(crate::Error::PayloadTooLarge {
                topic: topic.to_owned(),
                size: job.record.len(),
                limit: self.inner.max_payload,
            });
        }
        Ok(())
    }

    /// Enqueues prepared jobs of one topic, each at most once per delivery token: a delivery whose token
    /// the topic recorded within `keep` changes nothing and reports `None` (it was delivered before);
    /// any other is enqueued as by [`Client::enqueue_many`] and its token recorded in the same atomic
    /// step. Outcomes come back in order. See
    /// [`JobStore::enqueue_once`](crate::store::JobStore::enqueue_once).
    pub async fn deliver_once(
        &self,
        topic: &str,
        partitions: u16,
        deliveries: Vec<Delivery>,
        keep: Duration,
    ) -> Result<Vec<Option<EnqueueStatus>>> {
        crate::validate::validate_topic(topic)?;
        crate::partition::validate_partitions(topic, partitions)?;
        let store = self.inner.store.as_ref();
        let keep_ms = millis(keep);
        let ids: Vec<String> = deliveries.iter().map(|d| d.job.id.clone()).collect();
        let outcomes = self
            .routed(
                topic,
                partitions,
                deliveries,
                |d| &d.job.id,
                |t, batch| async move {
                    let batch = batch.into_iter().map(|d| (d.token, d.job)).collect();
                    store.enqueue_once(&t, batch, keep_ms).await
                },
            )
            .await?;
        Ok(ids
            .into_iter()
            .zip(outcomes)
            .map(|(id, outcome)| {
                outcome.map(|o| {
                    let status = to_enqueued(id, o).status;
                    metrics::enqueued_named(topic, status);
                    status
                })
            })
            .collect())
    }

    /// Drops the delivery tokens of jobs (id, token) whose outbox rows are gone, so that the topic does
    /// not keep them until `keep` runs out.
    pub async fn forget_deliveries(
        &self,
        topic: &str,
        partitions: u16,
        delivered: Vec<(String, String)>,
    ) -> Result<()> {
        crate::validate::validate_topic(topic)?;
        crate::partition::validate_partitions(topic, partitions)?;
        let store = self.inner.store.as_ref();
        self.routed(
            topic,
            partitions,
            delivered,
            |(id, _)| id,
            |t, batch| async move {
                let tokens: Vec<String> = batch.into_iter().map(|(_, token)| token).collect();
                store.forget_tokens(&t, &tokens).await?;
                Ok(tokens.into_iter().map(drop).collect::<Vec<()>>())
            },
        )
        .await
        .map(drop)
    }
}
