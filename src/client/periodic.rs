//! A topic's periodic schedules, for operators: list them, run one now, remove one.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Client, EnqueueItem, Topic};
use crate::error::Result;
use crate::job::Job;
use crate::periodic::{Definition, Missed, Overlap};
use crate::store::StoredSchedule;
use crate::time::ms_to_time;

/// A periodic schedule as stored, from [`Topic::schedules`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ScheduleInfo {
    /// Its name.
    pub name: String,
    /// Its cron expression, or `every <n>s` for an interval (the stored definition, raw, if it could
    /// not be read).
    pub expression: String,
    /// The time zone of a cron expression.
    pub zone: Option<String>,
    /// Its missed-tick policy.
    pub missed: Option<Missed>,
    /// Its overlap policy.
    pub overlap: Option<Overlap>,
    /// Its next tick.
    pub next: DateTime<Utc>,
    /// Its last enqueued tick.
    pub last: Option<DateTime<Utc>>,
    /// When a run now was asked for that no worker has enqueued yet.
    pub triggered: Option<DateTime<Utc>>,
}

impl From<StoredSchedule> for ScheduleInfo {
    fn from(s: StoredSchedule) -> Self {
        let definition = Definition::parse(&s.definition);
        let (expression, zone) = match &definition {
            Some(d) => (d.expression.clone(), d.zone.clone()),
            None => (s.definition.clone(), None),
        };
        ScheduleInfo {
            name: s.name,
            expression,
            zone,
            missed: definition.as_ref().and_then(Definition::missed),
            overlap: definition.as_ref().and_then(Definition::overlap),
            next: ms_to_time(s.next_ms),
            last: s.last_ms.map(ms_to_time),
            triggered: s.trigger_ms.map(ms_to_time),
        }
    }
}

impl Topic {
    /// The topic's periodic schedules, by name. A schedule is stored by the first worker that declares
    /// it (see [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic)).
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let store = self.client().inner.store.as_ref();
        let (_, list) = store.schedules(self.name()).await?;
        Ok(list.into_iter().map(ScheduleInfo::from).collect())
    }

    /// Runs a schedule now: asks its workers to enqueue a job for the current time (by the store's
    /// clock), whatever its overlap policy, without moving its next tick. A worker that runs the
    /// schedule does so at once (woken by a hint), or within its poll interval. Returns the time of
    /// the run (the pending one, if a run was already asked for), or `None` when the topic has no
    /// such schedule.
    pub async fn trigger_schedule(&self, name: &str) -> Result<Option<DateTime<Utc>>> {
        let store = self.client().inner.store.as_ref();
        let at = store.schedule_trigger(self.name(), name).await?;
        Ok(at.map(ms_to_time))
    }

    /// Removes a schedule; returns whether it existed. Its jobs already enqueued stay. The workers that
    /// run it stop doing so, until one starts again with it declared.
    pub async fn remove_schedule(&self, name: &str) -> Result<bool> {
        let store = self.client().inner.store.as_ref();
        store.schedule_remove(self.name(), name).await
    }
}

impl Client {
    /// A periodic tick's job, encoded as [`Client::enqueue`] encodes it, under `id`, with its key for
    /// fairness (the type's [`Job::key`]).
    pub(crate) fn encode_job<J: Job>(&self, job: J, id: String) -> Result<crate::store::NewJob> {
        let now_ms = Utc::now().timestamp_millis();
        // A tick is no request's work: it carries no trace context.
        let none = crate::meta::Meta::new();
        let prepared = self.prepare_item(EnqueueItem::new(job).id(id), now_ms, None, &none)?;
        Ok(prepared.job)
    }
}
