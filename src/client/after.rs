//! Jobs that wait for other jobs: [`Enqueue::after_job`] and [`Enqueue::on_parent_failure`], and the
//! enqueue they make (see [`crate::store::workflow`] for what the store does).

use chrono::Utc;

use super::enqueue::{to_enqueued, Enqueue, EnqueueItem, Enqueued};
use super::Client;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::observe::{metrics, trace};
use crate::partition::{partition_of, store_topic};
use crate::status::EnqueueStatus;
use crate::store::workflow::MAX_PARENTS;
use crate::store::{AfterOutcome, OnParentFailure, ParentRef};
use crate::validate::validate_id;

/// The jobs an enqueue waits for, and what their failure does to it.
#[derive(Debug, Default)]
pub(crate) struct Parents {
    refs: Vec<ParentRef>,
    on_failure: OnParentFailure,
    /// The first bad parent given (reported when the enqueue is awaited).
    error: Option<Error>,
}

impl Parents {
    pub(super) fn is_empty(&self) -> bool {
        self.refs.is_empty() && self.error.is_none()
    }
}

impl<J: Job> Enqueue<'_, J> {
    /// Waits for the job `id` of type `P` (its *parent*, in any topic) to succeed before this job
    /// becomes due; call it again to wait for more (up to 100). The job is stored at once, *waiting*:
    /// it is never claimed, holds its id, can be cancelled, and becomes due at its time
    /// ([`after`](Self::after) counts from then) once every parent succeeded. A parent that dies or is
    /// cancelled decides by [`on_parent_failure`](Self::on_parent_failure) (by default the job is
    /// dead-lettered, its reason naming the parent).
    ///
    /// The parent must be known to its topic: live (scheduled, running, or itself waiting), or ended
    /// and still known (a job whose type keeps finished jobs, see [`Job::keep`]; a listed dead
    /// letter); else the enqueue fails with [`Error::ParentNotFound`] and nothing is stored. The
    /// report says [`EnqueueStatus::Waiting`], or how the job went at once when every parent had
    /// already ended.
    ///
    /// ```
    /// use postpone::{Client, EnqueueStatus, Job, JobState};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "payments.charge")]
    /// struct Charge { order_id: u64 }
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "mail.receipt")]
    /// struct SendReceipt { order_id: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// let client = Client::memory();
    /// client.enqueue(Charge { order_id: 42 }).id("charge:42").await?;
    /// let receipt = client
    ///     .enqueue(SendReceipt { order_id: 42 })
    ///     .id("receipt:42")
    ///     .after_job::<Charge>("charge:42")
    ///     .await?;
    /// assert_eq!(receipt.status, EnqueueStatus::Waiting);
    /// let info = client.topic::<SendReceipt>().job("receipt:42").await?.unwrap();
    /// assert!(matches!(info.state, JobState::Waiting { .. }));
    /// # Ok(()) }
    /// ```
    pub fn after_job<P: Job>(mut self, id: impl Into<String>) -> Self {
        let id = id.into();
        if self.after.error.is_some() {
            return self;
        }
        if let Err(e) = validate_id(&id) {
            self.after.error = Some(e);
            return self;
        }
        if self.after.refs.len() >= MAX_PARENTS {
            self.after.error = Some(Error::InvalidConfig {
                reason: format!("a job waits for at most {MAX_PARENTS} jobs"),
            });
            return self;
        }
        let topic = store_topic(P::TOPIC, partition_of(&id, P::partitions())).into_owned();
        self.after.refs.push(ParentRef::new(topic, id));
        self
    }

    /// What a parent's death or cancellation does to this job (see [`after_job`](Self::after_job)):
    /// dead-letter it (the default), cancel it, or run it all the same once the other parents are
    /// done.
    pub fn on_parent_failure(mut self, policy: OnParentFailure) -> Self {
        self.after.on_failure = policy;
        self
    }
}

impl Client {
    /// Sends a job that waits for `parents` (see [`Enqueue::after_job`]).
    pub(super) async fn enqueue_after<J: Job>(
        &self,
        item: EnqueueItem<J>,
        parents: Parents,
    ) -> Result<Enqueued> {
        self.check_topic::<J>()?;
        if let Some(e) = parents.error {
            return Err(e);
        }
        if item.is_keyed() {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "a job of topic {:?} that waits for other jobs cannot be unique or debounced",
                    J::TOPIC
                ),
            });
        }
        let span = trace::enqueue_span(J::TOPIC, 1);
        let carried = trace::context_meta(&span);
        let default_first_delay = J::retry_schedule().delay_before(1);
        let now_ms = Utc::now().timestamp_millis();
        let prepared = self.prepare_item(item, now_ms, default_first_delay, &carried)?;
        let job = prepared.job;
        let id = job.id.clone();
        trace::enqueued_id(&span, &id);
        let topic = store_topic(J::TOPIC, partition_of(&id, J::partitions())).into_owned();
        if parents.refs.iter().any(|p| p.topic == topic && p.id == id) {
            return Err(Error::InvalidConfig {
                reason: format!("job {id:?} of topic {:?} cannot wait for itself", J::TOPIC),
            });
        }
        self.inner.register(J::TOPIC, J::partitions()).await;
        let refs = parents.refs;
        let outcome = self
            .inner
            .store
            .enqueue_after(&topic, job, refs, parents.on_failure)
            .await?;
        let enqueued = match outcome {
            AfterOutcome::Waiting { .. } => Enqueued {
                id,
                status: EnqueueStatus::Waiting,
                due_at: None,
                held_until: None,
            },
            AfterOutcome::Enqueued(o) | AfterOutcome::Exists(o) => to_enqueued(id, o),
            AfterOutcome::Ended(_) => Enqueued {
                id,
                status: EnqueueStatus::ParentFailed,
                due_at: None,
                held_until: None,
            },
            AfterOutcome::MissingParent(p) => {
                return Err(Error::ParentNotFound {
                    topic: parent_name(&p.topic),
                    id: p.id,
                });
            }
        };
        metrics::enqueued(J::TOPIC, enqueued.status);
        Ok(enqueued)
    }
}

/// A store topic's name without its partition (`<topic>#<p>` -> `<topic>`).
fn parent_name(store_topic: &str) -> String {
    store_topic
        .split_once('#')
        .map_or(store_topic, |(t, _)| t)
        .to_owned()
}
