//! The operations API: see and steer the queue by topic name, without the job types (what the
//! `postpone` command and the dashboard are built on).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> postpone::Result<()> {
//! use postpone::ops::{JobQuery, PageState};
//!
//! let client = postpone::Client::memory();
//! # #[derive(serde::Serialize, serde::Deserialize, postpone::Job)]
//! # #[job(topic = "orders.close")]
//! # struct CloseOrder { order_id: u64 }
//! client.enqueue(CloseOrder { order_id: 42 }).id("order:42").after(std::time::Duration::from_secs(60)).await?;
//!
//! let ops = client.ops();
//! for topic in ops.topics().await? {
//!     println!("{}: {} scheduled", topic.name, topic.counts.scheduled);
//! }
//! let page = ops.jobs("orders.close", &JobQuery::new(PageState::Scheduled)).await?;
//! assert_eq!(page.jobs[0].id, "order:42");
//! let job = ops.job("orders.close", "order:42").await?.expect("it is scheduled");
//! println!("{}", job.why); // "due in 59s (…, by the Redis clock)"
//! ops.pause("orders.close").await?; // persisted: no worker claims it until resumed
//! ops.resume("orders.close").await?;
//! # Ok(()) }
//! ```
//!
//! - Registries: [`Ops::topics`] (every topic ever enqueued to or served, registered once per client
//!   and worker) and [`Ops::workers`] (live workers, from their heartbeats; gone a few heartbeats after a
//!   worker dies).
//! - Jobs: [`Ops::jobs`] pages scheduled, waiting ([`PageState::Waiting`]: jobs that wait for other
//!   jobs), running, dead or kept finished jobs ([`PageState::Done`], each saying whether it succeeded
//!   or was cancelled, with its result) by cursor in O(log n + page) whatever the backlog, merged over
//!   partitions; [`Ops::job`] shows one, with a "why isn't this running" line (a waiting job's names
//!   the jobs it waits for: [`JobDetail::parents`]), a kept job's result and a running job's progress.
//! - Control: [`Ops::pause`] / [`Ops::resume`], [`Ops::run_now`], [`Ops::cancel`],
//!   [`Ops::reschedule`], dead letters by id or in bulk by reason ([`Ops::requeue_dead`],
//!   [`Ops::purge_dead`]), each step one atomic script.
//! - History: [`Ops::history`], per-minute counts kept 25 hours in the store.
//! - Transactional outboxes (`postpone-postgres`): [`Ops::outboxes`], what their relays last reported,
//!   and whether that report is stale (no relay reports any more).
//! - Periodic schedules: [`Ops::schedules`], [`Ops::all_schedules`], [`Ops::trigger_schedule`],
//!   [`Ops::remove_schedule`].
//! - Batches: [`Ops::batches`] (newest first), [`Ops::batch`] (counts, closed, completed, callbacks
//!   fired) and [`Ops::batch_members`] (each member's state), paged by offset.

mod batches;
mod control;
mod doctor;
mod inspect;
mod listing;
mod outbox;
mod periodic;
mod waiting;
mod workers;

use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use serde::Serialize;

pub use self::batches::{member_state_name, BatchPage, MemberPage};
pub use self::control::{BulkOutcome, DeadFilter};
pub use self::doctor::{Check, Level};
pub use self::inspect::JobDetail;
pub use self::listing::{Cursor, Finished, JobPage, JobQuery, JobSummary, MAX_PAGE};
pub use self::outbox::{OutboxInfo, OutboxReport, OUTBOX_REPORT_KEPT, OUTBOX_STALE_AFTER};
pub use self::waiting::JobParent;
pub use self::workers::{WorkerInfo, WorkerTopic};
pub use crate::client::{BatchMember, BatchStatus};
pub use crate::store::{
    CallbackKind, KeyLoad, KeysPage, MemberState, MinuteCounts, PageState, ScriptLibraries,
};
pub use crate::time::human_duration;

pub(crate) use self::workers::{worker_id, Presence};

use crate::client::{CancelStatus, Client, Topic, When};
use crate::error::{Error, Result};
use crate::flow::KeyLimits;
use crate::store::TopicCounts;

/// A topic as the operations API lists it.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TopicInfo {
    /// Its name.
    pub name: String,
    /// Its partitions.
    pub partitions: u16,
    /// Counts by state and counters, summed over the partitions that could be read (`paused` when any
    /// partition is).
    pub counts: TopicCounts,
    /// Partitions that could not be read (a Redis Cluster master down), with the error.
    pub unreadable: Vec<(u16, String)>,
}

/// The operations API of one namespace: [`Client::ops`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Ops {
    client: Client,
}

impl Client {
    /// The operations API on this client's store and namespace: see [`ops`](crate::ops).
    pub fn ops(&self) -> Ops {
        Ops {
            client: self.clone(),
        }
    }
}

impl Ops {
    /// The topic named `name`, with its partitions as registered. Fails with
    /// [`Error::TopicNotFound`] when nothing was ever enqueued to it or served from it.
    pub async fn topic(&self, name: &str) -> Result<Topic> {
        crate::validate::validate_topic(name)?;
        let topics = self.client.backend().topics().await?;
        match topics.into_iter().find(|(t, _)| t == name) {
            Some((_, partitions)) => self.client.topic_partitioned(name, partitions),
            None => Err(Error::TopicNotFound {
                topic: name.to_owned(),
            }),
        }
    }

    /// Every topic of the namespace, by name, with its counts (read concurrently). An entry of the
    /// registry that is not a valid topic name is skipped, with a warning.
    pub async fn topics(&self) -> Result<Vec<TopicInfo>> {
        let topics = self.registered().await?;
        let infos = topics.into_iter().map(|(name, partitions)| async move {
            let topic = self.client.topic_partitioned(&name, partitions)?;
            let partial = topic.counts_partial().await?;
            Ok(TopicInfo {
                name,
                partitions,
                counts: partial.counts,
                unreadable: partial
                    .unreadable
                    .into_iter()
                    .map(|u| (u.partition, u.error.report().to_string()))
                    .collect(),
            })
        });
        join_all(infos).await.into_iter().collect()
    }

    /// The registry of topics, without its entries that are not a valid topic (written by another
    /// program or by hand): each is skipped with a warning, so that one bad entry hides no other topic.
    pub(crate) async fn registered(&self) -> Result<Vec<(String, u16)>> {
        let topics = self.client.backend().topics().await?;
        Ok(topics
            .into_iter()
            .filter(|(name, partitions)| {
                let valid = crate::validate::validate_topic(name)
                    .and_then(|()| crate::partition::validate_partitions(name, *partitions));
                if let Err(e) = &valid {
                    tracing::warn!(topic = %name, error = %e, "postpone: skipping an entry of the topics registry that is not a valid topic");
                }
                valid.is_ok()
            })
            .collect())
    }

    /// The live workers, by id.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        let beats = self.client.backend().workers().await?;
        Ok(beats
            .into_iter()
            .filter_map(WorkerInfo::from_beat)
            .collect())
    }

    /// One page of a topic's jobs: see [`JobQuery`] and [`Topic::jobs`].
    pub async fn jobs(&self, topic: &str, query: &JobQuery) -> Result<JobPage> {
        self.topic(topic).await?.jobs(query).await
    }

    /// One job, live, dead or kept finished, in full, with why it is not running (and a kept job's
    /// result, a running job's progress); `None` when it finished or was cancelled and is not kept, or
    /// never existed.
    pub async fn job(&self, topic: &str, id: &str) -> Result<Option<JobDetail>> {
        let topic = self.topic(topic).await?;
        let store = self.client.backend().as_ref();
        let (_, stored_as, stored) = topic
            .by_id(
                id,
                |t| async move { store.job(&t, id).await },
                Option::is_some,
            )
            .await?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        let (now_ms, counts, workers) =
            tokio::join!(store.now_ms(), store.counts(&stored_as), self.workers());
        let node = store.node_of(&stored_as);
        JobDetail::new(&topic, id, stored, now_ms?, counts?, &workers?, node).map(Some)
    }

    /// Pauses a topic: see [`Topic::pause`].
    pub async fn pause(&self, topic: &str) -> Result<()> {
        self.topic(topic).await?.pause().await
    }

    /// Resumes a topic: see [`Topic::resume`].
    pub async fn resume(&self, topic: &str) -> Result<()> {
        self.topic(topic).await?.resume().await
    }

    /// Makes a scheduled job due now: see [`Topic::run_now`].
    pub async fn run_now(&self, topic: &str, id: &str) -> Result<DateTime<Utc>> {
        self.topic(topic).await?.run_now(id).await
    }

    /// Cancels a job: see [`Topic::cancel`].
    pub async fn cancel(&self, topic: &str, id: &str) -> Result<CancelStatus> {
        self.topic(topic).await?.cancel(id).await
    }

    /// Moves a scheduled job: see [`Topic::reschedule`].
    pub async fn reschedule(
        &self,
        topic: &str,
        id: &str,
        when: impl Into<When>,
    ) -> Result<DateTime<Utc>> {
        self.topic(topic).await?.reschedule(id, when).await
    }

    /// Requeues dead letters: those of one id (its newest death) when `id` is given, else those
    /// `filter` selects (see [`Topic::requeue_dead_where`]); `progress` sees the counts so far.
    pub async fn requeue_dead(
        &self,
        topic: &str,
        id: Option<&str>,
        filter: &DeadFilter,
        progress: impl FnMut(BulkOutcome),
    ) -> Result<BulkOutcome> {
        let topic = self.topic(topic).await?;
        match id {
            Some(id) => topic.requeue_dead(id).await.map(|()| BulkOutcome::one()),
            None => topic.requeue_dead_where(filter, progress).await,
        }
    }

    /// Purges dead letters: every death of one id when `id` is given, else those `filter` selects (see
    /// [`Topic::purge_dead_where`]).
    pub async fn purge_dead(
        &self,
        topic: &str,
        id: Option<&str>,
        filter: &DeadFilter,
        progress: impl FnMut(BulkOutcome),
    ) -> Result<BulkOutcome> {
        let topic = self.topic(topic).await?;
        match id {
            Some(id) => topic.purge_dead(id).await.map(|()| BulkOutcome::one()),
            None => topic.purge_dead_where(filter, progress).await,
        }
    }

    /// Requeues one dead letter, named by its id and death number (see
    /// [`JobSummary::death`]): only that death, even when its id died more than once.
    pub async fn requeue_death(&self, topic: &str, id: &str, death: u64) -> Result<()> {
        let topic = self.topic(topic).await?;
        topic
            .requeue_death(&crate::store::Death::new(id, death))
            .await
    }

    /// Purges one dead letter, named by its id and death number (its hook, if still pending, still
    /// runs).
    pub async fn purge_death(&self, topic: &str, id: &str, death: u64) -> Result<()> {
        let topic = self.topic(topic).await?;
        topic
            .purge_death(&crate::store::Death::new(id, death))
            .await
    }

    /// A topic's busiest keys (fairness by key): see [`Topic::busiest_keys`].
    pub async fn busiest_keys(&self, topic: &str, limit: usize) -> Result<KeysPage> {
        self.topic(topic).await?.busiest_keys(limit).await
    }

    /// Gives one key of a topic limits of its own: see [`Topic::set_key_limits`].
    pub async fn set_key_limits(&self, topic: &str, key: &str, limits: KeyLimits) -> Result<()> {
        self.topic(topic).await?.set_key_limits(key, limits).await
    }

    /// Takes back one key's own limits: see [`Topic::clear_key_limits`].
    pub async fn clear_key_limits(&self, topic: &str, key: &str) -> Result<()> {
        self.topic(topic).await?.clear_key_limits(key).await
    }

    /// The keys of a topic with limits of their own: see [`Topic::key_limits`].
    pub async fn key_limits(&self, topic: &str) -> Result<Vec<(String, KeyLimits)>> {
        self.topic(topic).await?.key_limits().await
    }

    /// A topic's per-minute history: see [`Topic::history`].
    pub async fn history(&self, topic: &str, minutes: u32) -> Result<Vec<MinuteCounts>> {
        self.topic(topic).await?.history(minutes).await
    }

    /// The store's clock, ms since the epoch (the Redis server's `TIME`): what "due in" and "ago" are
    /// measured against.
    pub async fn now_ms(&self) -> Result<i64> {
        self.client.backend().now_ms().await
    }
}
