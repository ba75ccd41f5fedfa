//! [`PeriodicStore`] in memory: the same steps as `redis/scripts/periodic_*.lua`, under the store's lock.
//! Schedules sit in a map of their own, locked after the topics' map (never the other way round), so a
//! tick is atomic with the enqueue of its jobs.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use super::topic::Topic;
use super::MemoryStore;
use crate::error::Result;
use crate::store::{
    Due, EnqueueOutcome, NewJob, PeriodicStore, StoredSchedule, StoredState, TickJob, TickOutcome,
    TickPlan, TickRequest, TickStatus, UpsertStatus,
};

/// Every topic's schedules, by name.
pub(super) type Schedules = Mutex<HashMap<String, BTreeMap<String, StoredSchedule>>>;

/// Whether a live (due or active) job has this id.
fn live(state: &Topic, id: &str, now: i64) -> bool {
    state
        .job(id, now)
        .is_some_and(|j| !matches!(j.state, StoredState::Dead { .. }))
}

/// Enqueues a tick's job like `JobStore::enqueue`; returns the due time to hint about, and whether it
/// created the job.
fn put(state: &mut Topic, job: &TickJob, now: i64) -> (Option<i64>, bool) {
    let new = NewJob::new(
        job.id.clone(),
        job.record.clone(),
        Due::At(job.tick_ms),
        false,
    )
    .with_key(job.key.clone());
    match state.enqueue(new, now) {
        (EnqueueOutcome::Created { .. }, hint) => (hint, true),
        _ => (None, false),
    }
}

/// Checks a plan against the schedule and the clock, and applies it: see `periodic_tick.lua`.
fn apply(
    state: &mut Topic,
    s: &mut StoredSchedule,
    plan: &TickPlan,
    now: i64,
    hint: &mut Option<i64>,
    created: &mut u32,
) -> TickStatus {
    let newest = plan.runs.last().map_or(plan.expect_next_ms, |r| r.tick_ms);
    if s.next_ms != plan.expect_next_ms || s.last_ms != plan.expect_last.as_ref().map(|l| l.0) {
        return TickStatus::Moved;
    }
    if newest > now {
        return TickStatus::Early;
    }
    if plan.new_next_ms <= now {
        return TickStatus::Behind;
    }
    let mut prev = match (&s.last_ms, &plan.expect_last) {
        (Some(_), Some((_, id))) if !id.is_empty() => Some(id.clone()),
        _ => None,
    };
    for run in &plan.runs {
        let late = plan.grace_ms.is_some_and(|g| {
            now.saturating_sub(run.tick_ms) > i64::try_from(g).unwrap_or(i64::MAX)
        });
        let busy = plan.overlap_skip && prev.as_deref().is_some_and(|p| live(state, p, now));
        if late || busy {
            continue;
        }
        let (h, new) = put(state, run, now);
        *hint = h.or(*hint);
        *created += u32::from(new);
        s.last_ms = Some(run.tick_ms);
        prev = Some(run.id.clone());
    }
    s.next_ms = plan.new_next_ms;
    TickStatus::Advanced
}

impl MemoryStore {
    fn schedules_of<R>(
        &self,
        topic: &str,
        f: impl FnOnce(&mut BTreeMap<String, StoredSchedule>) -> R,
    ) -> R {
        let mut all = self
            .schedules
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f(all.entry(topic.to_owned()).or_default())
    }
}

#[async_trait]
impl PeriodicStore for MemoryStore {
    async fn schedule_upsert(
        &self,
        topic: &str,
        name: &str,
        definition: &str,
        first_next_ms: i64,
    ) -> Result<(UpsertStatus, i64, StoredSchedule)> {
        let now = self.clock.now_ms();
        Ok(self.schedules_of(topic, |schedules| {
            let mut status = UpsertStatus::Created;
            let mut new = StoredSchedule {
                name: name.to_owned(),
                definition: definition.to_owned(),
                next_ms: first_next_ms,
                last_ms: None,
                trigger_ms: None,
            };
            if let Some(old) = schedules.get(name) {
                if old.definition == definition {
                    return (UpsertStatus::Unchanged, now, old.clone());
                }
                status = UpsertStatus::Replaced;
                new.last_ms = old.last_ms;
                new.trigger_ms = old.trigger_ms;
            }
            schedules.insert(name.to_owned(), new.clone());
            (status, now, new)
        }))
    }

    async fn schedule_tick(&self, topic: &str, request: TickRequest) -> Result<TickOutcome> {
        let (outcome, hint) = self.with_topic(topic, |state, now| {
            self.schedules_of(topic, |schedules| {
                let outcome = |status, schedule, enqueued| TickOutcome {
                    status,
                    now_ms: now,
                    schedule,
                    enqueued,
                };
                let Some(s) = schedules.get_mut(&request.name) else {
                    return (outcome(TickStatus::Gone, None, 0), None);
                };
                if s.definition != request.definition {
                    return (outcome(TickStatus::Superseded, Some(s.clone()), 0), None);
                }
                let (mut hint, mut created) = (None, 0);
                if let Some(t) = &request.trigger {
                    if s.trigger_ms == Some(t.tick_ms) {
                        // An empty id: the caller could not build the job; the trigger is dropped.
                        if !t.id.is_empty() {
                            let (h, new) = put(state, t, now);
                            hint = h;
                            created += u32::from(new);
                        }
                        s.trigger_ms = None;
                    }
                }
                let status = match &request.plan {
                    Some(plan) => apply(state, s, plan, now, &mut hint, &mut created),
                    None => TickStatus::NoPlan,
                };
                (outcome(status, Some(s.clone()), created), hint)
            })
        });
        self.hint(topic, hint);
        Ok(outcome)
    }

    async fn schedules(&self, topic: &str) -> Result<(i64, Vec<StoredSchedule>)> {
        let now = self.clock.now_ms();
        let all = self
            .schedules
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let list = all
            .get(topic)
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default();
        Ok((now, list))
    }

    async fn schedule_trigger(&self, topic: &str, name: &str) -> Result<Option<i64>> {
        let now = self.clock.now_ms();
        let at = self.schedules_of(topic, |schedules| {
            let s = schedules.get_mut(name)?;
            Some(*s.trigger_ms.get_or_insert(now))
        });
        if at.is_some() {
            self.hint(topic, Some(now));
        }
        Ok(at)
    }

    async fn schedule_remove(&self, topic: &str, name: &str) -> Result<bool> {
        Ok(self.schedules_of(topic, |schedules| schedules.remove(name).is_some()))
    }
}
