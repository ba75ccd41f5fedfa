//! One topic's jobs by id, counts and dead letters.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use futures_util::future::join_all;

use super::{Client, When};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::partition::{partition_error, partition_history, store_topic, validate_partitions};
use crate::record::{AttemptError, Record};
use crate::store::{CancelOutcome, Progress, RescheduleOutcome, StoredState, TopicCounts};
use crate::time::ms_to_time;
use crate::validate::validate_id;

/// What a cancel did (as JSON: `"removed"`, `"will_not_retry"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CancelStatus {
    /// The job was scheduled and is gone.
    Removed,
    /// The job is running: it will not be retried, and its handler is told to stop.
    WillNotRetry,
}

/// Where a job is. As JSON: `{"state": "scheduled", "due_at": ...}`, `"waiting"` with `waiting_for`,
/// `"running"` with `lease_until`, `"dead"` with `died_at` and `reason`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum JobState {
    /// Waiting for its due time (which may have passed, if no worker has claimed it yet).
    Scheduled {
        /// When it is due.
        due_at: DateTime<Utc>,
    },
    /// Waiting for other jobs (its parents) to be done before it becomes due.
    Waiting {
        /// The parents not yet done: `(topic, id)` (a partition's topic as `<topic>#<p>`).
        waiting_for: Vec<(String, String)>,
    },
    /// Running on a worker that holds its lease until this time (renewed while it runs).
    Running {
        /// Lease deadline.
        lease_until: DateTime<Utc>,
    },
    /// In the dead letters.
    Dead {
        /// When it died.
        died_at: DateTime<Utc>,
        /// Why.
        reason: String,
    },
    /// Succeeded, and kept by its topic's retention (see [`Job::keep`](crate::Job::keep)).
    Succeeded {
        /// When it finished.
        finished_at: DateTime<Utc>,
    },
    /// Cancelled, and kept by its topic's retention (see [`Job::keep`](crate::Job::keep)).
    Cancelled {
        /// When it was cancelled.
        cancelled_at: DateTime<Utc>,
    },
}

impl JobState {
    /// The state of a stored job.
    pub(crate) fn of(state: StoredState) -> JobState {
        match state {
            StoredState::Due { due_at_ms } => JobState::Scheduled {
                due_at: ms_to_time(due_at_ms),
            },
            StoredState::Active { lease_deadline_ms } => JobState::Running {
                lease_until: ms_to_time(lease_deadline_ms),
            },
            StoredState::Waiting { parents } => JobState::Waiting {
                waiting_for: parents.into_iter().map(|p| (p.topic, p.id)).collect(),
            },
            StoredState::Dead {
                died_at_ms, reason, ..
            } => JobState::Dead {
                died_at: ms_to_time(died_at_ms),
                reason,
            },
            StoredState::Done {
                cancelled: false,
                done_at_ms,
            } => JobState::Succeeded {
                finished_at: ms_to_time(done_at_ms),
            },
            StoredState::Done { done_at_ms, .. } => JobState::Cancelled {
                cancelled_at: ms_to_time(done_at_ms),
            },
        }
    }
}

/// A job found by id.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobInfo {
    /// Its id.
    pub id: String,
    /// Where it is.
    pub state: JobState,
    /// A kept succeeded job's result, as JSON text (when its type returns one: see
    /// [`Job::Output`](crate::Job::Output)); read it typed with [`Client::wait`](crate::Client::wait).
    pub result: Option<String>,
    /// A running job's progress, as its handler last reported it.
    pub progress: Option<Progress>,
    /// The attempt it is on (or, when dead, the attempts it ran).
    pub attempt: u32,
    /// When it was first enqueued.
    pub enqueued_at: DateTime<Utc>,
    /// The errors of its failed attempts, oldest first.
    pub errors: Vec<AttemptError>,
    /// The payload as JSON.
    pub payload: String,
    /// Its metadata (see [`Enqueue::meta`](crate::Enqueue::meta)).
    pub meta: std::collections::BTreeMap<String, String>,
}

impl JobInfo {
    /// Decodes the payload into its job type.
    pub fn job<J: Job>(&self) -> Result<J> {
        serde_json::from_str(&self.payload).map_err(|e| Error::Decode {
            topic: J::TOPIC.to_owned(),
            id: self.id.clone(),
            source: e.into(),
        })
    }
}

/// The counts of a topic as far as its partitions could be read: see [`Topic::counts_partial`].
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct PartialCounts {
    /// Counts and counters summed over the partitions that could be read.
    pub counts: TopicCounts,
    /// The partitions that could not be read, in partition order.
    pub unreadable: Vec<UnreadablePartition>,
}

impl PartialCounts {
    /// True when every partition was read: then [`counts`](Self::counts) is what
    /// [`Topic::counts`] gives.
    pub fn is_complete(&self) -> bool {
        self.unreadable.is_empty()
    }

    /// The partitions that could not be read.
    pub fn unreadable_partitions(&self) -> Vec<u16> {
        self.unreadable.iter().map(|u| u.partition).collect()
    }
}

/// A partition whose counts could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub struct UnreadablePartition {
    /// The partition (`0..partitions`).
    pub partition: u16,
    /// Why: on a partitioned topic an [`Error::Partition`] naming it, with the cause.
    pub error: Error,
}

/// One topic: its jobs by id, its counts, its dead letters. Get one from [`Client::topic`] or
/// [`Client::topic_named`].
///
/// On a partitioned topic, calls by id go to the id's partition, counts are summed and dead letters
/// merged over all partitions, and a failure of one partition is an [`Error::Partition`] naming it.
#[derive(Debug, Clone)]
pub struct Topic {
    client: Client,
    name: Cow<'static, str>,
    partitions: u16,
}

impl Topic {
    pub(crate) fn new(client: Client, name: Cow<'static, str>, partitions: u16) -> Self {
        Topic {
            client,
            name,
            partitions,
        }
    }

    /// The client this topic belongs to.
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many partitions the topic is stored in (1 unless declared with `partitions = N`).
    pub fn partitions(&self) -> u16 {
        self.partitions
    }

    pub(crate) fn store(&self) -> &dyn crate::store::Store {
        self.client.inner.store.as_ref()
    }

    /// The partition count, checked (a hand-written [`Job`] impl may return anything).
    pub(crate) fn count(&self) -> Result<u16> {
        validate_partitions(&self.name, self.partitions)?;
        Ok(self.partitions)
    }

    /// Runs a by-id store call in `id`'s partition and, while `found` says it found nothing there, in
    /// the partitions the id had before the topic grew ([`partition_history`], newest first), so that a
    /// job stored before the growth is still found. Returns the partition that answered (the id's own
    /// when none found it), its store name and the answer.
    pub(crate) async fn by_id<T, F, Fut>(
        &self,
        id: &str,
        call: F,
        found: impl Fn(&T) -> bool,
    ) -> Result<(u16, String, T)>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        validate_id(id)?;
        let mut first = None;
        for p in partition_history(id, self.count()?) {
            let stored_as = store_topic(&self.name, p).into_owned();
            let answer = call(stored_as.clone())
                .await
                .map_err(self.in_partition(p))?;
            if found(&answer) {
                return Ok((p, stored_as, answer));
            }
            first.get_or_insert((p, stored_as, answer));
        }
        Ok(first.expect("an id has at least its own partition"))
    }

    pub(crate) fn in_partition(&self, p: u16) -> impl FnOnce(Error) -> Error + '_ {
        move |e| partition_error(&self.name, p, self.partitions, e)
    }

    /// Runs `f` on every partition at once (the store's name of each), in partition order.
    pub(crate) async fn each<'a, T, F, Fut>(&'a self, f: F) -> Result<Vec<T>>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<T>> + 'a,
    {
        let n = self.count()?;
        let calls = (0..n).map(|p| f(store_topic(&self.name, p).into_owned()));
        join_all(calls)
            .await
            .into_iter()
            .zip(0..)
            .map(|(r, p)| r.map_err(self.in_partition(p)))
            .collect()
    }

    pub(crate) fn not_found(&self, id: &str) -> Error {
        Error::JobNotFound {
            topic: self.name.to_string(),
            id: id.to_owned(),
        }
    }

    /// Cancels a job by id (see [`Client::cancel`]).
    pub async fn cancel(&self, id: &str) -> Result<CancelStatus> {
        let store = self.store();
        let (_, _, outcome) = self
            .by_id(
                id,
                |t| async move { store.cancel(&t, id).await },
                |o| *o != CancelOutcome::NotFound,
            )
            .await?;
        match outcome {
            CancelOutcome::Removed => Ok(CancelStatus::Removed),
            CancelOutcome::Marked => Ok(CancelStatus::WillNotRetry),
            CancelOutcome::NotFound => Err(self.not_found(id)),
        }
    }

    /// Moves a scheduled job to a new time (see [`Client::reschedule`]).
    pub async fn reschedule(&self, id: &str, when: impl Into<When>) -> Result<DateTime<Utc>> {
        let due = when.into().to_due(std::time::Duration::ZERO);
        let store = self.store();
        let (_, _, outcome) = self
            .by_id(
                id,
                |t| async move { store.reschedule(&t, id, due).await },
                |o| *o != RescheduleOutcome::NotFound,
            )
            .await?;
        match outcome {
            RescheduleOutcome::Rescheduled { due_at_ms } => Ok(ms_to_time(due_at_ms)),
            RescheduleOutcome::Running => Err(Error::JobRunning {
                topic: self.name.to_string(),
                id: id.to_owned(),
            }),
            RescheduleOutcome::NotFound => Err(self.not_found(id)),
            RescheduleOutcome::Waiting => Err(Error::JobWaiting {
                topic: self.name.to_string(),
                id: id.to_owned(),
            }),
        }
    }

    /// Finds a scheduled, running or dead job by id, or a finished one its topic keeps (see
    /// [`Job::keep`](crate::Job::keep)). `None` when it finished and was not kept, or never existed.
    pub async fn job(&self, id: &str) -> Result<Option<JobInfo>> {
        let store = self.store();
        let (_, _, stored) = self
            .by_id(
                id,
                |t| async move { store.job(&t, id).await },
                Option::is_some,
            )
            .await?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        let record = self.decode(id, &stored.record)?;
        Ok(Some(JobInfo {
            id: id.to_owned(),
            state: JobState::of(stored.state),
            result: stored
                .result
                .map(|r| String::from_utf8_lossy(&r).into_owned()),
            progress: stored.progress,
            attempt: record.attempt,
            enqueued_at: ms_to_time(record.enqueued_at_ms),
            errors: record.errors,
            payload: String::from_utf8_lossy(&record.payload).into_owned(),
            meta: record.meta,
        }))
    }

    /// Counts by state (scheduled, ready, active, dead) and the topic's counters, summed over its
    /// partitions.
    ///
    /// All or nothing: when any partition cannot be read (its Redis Cluster master is down, say), this
    /// fails with that partition's [`Error::Partition`]. [`counts_partial`](Self::counts_partial) sums
    /// what could be read instead and says which partitions could not be.
    pub async fn counts(&self) -> Result<TopicCounts> {
        let store = self.store();
        let per_partition = self.each(|t| async move { store.counts(&t).await }).await?;
        let mut total = TopicCounts::default();
        for c in per_partition {
            total += c;
        }
        Ok(total)
    }

    /// Counts as [`counts`](Self::counts) does, summed over the partitions that could be read, with the
    /// partitions that could not be ([`PartialCounts::unreadable`], each with its
    /// [`Error::Partition`]). A dashboard shows what it can while a master of a Redis Cluster is down.
    ///
    /// Fails only when no partition could be read (with the first partition's error), or on a bad
    /// partition count. On a topic with one partition it is [`counts`](Self::counts).
    pub async fn counts_partial(&self) -> Result<PartialCounts> {
        let store = self.store();
        let n = self.count()?;
        let calls = (0..n).map(|p| {
            let stored_as = store_topic(&self.name, p).into_owned();
            async move { store.counts(&stored_as).await }
        });
        let mut partial = PartialCounts::default();
        let mut read = 0;
        for (r, p) in join_all(calls).await.into_iter().zip(0..) {
            match r {
                Ok(c) => {
                    partial.counts += c;
                    read += 1;
                }
                Err(e) => partial.unreadable.push(UnreadablePartition {
                    partition: p,
                    error: self.in_partition(p)(e),
                }),
            }
        }
        if read == 0 {
            return Err(partial.unreadable.remove(0).error);
        }
        Ok(partial)
    }

    pub(crate) fn decode(&self, id: &str, bytes: &[u8]) -> Result<Record> {
        Record::decode(bytes).map_err(|source| Error::Decode {
            topic: self.name.to_string(),
            id: id.to_owned(),
            source,
        })
    }
}
