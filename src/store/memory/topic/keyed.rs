//! Keyed enqueues, as `enqueue_keyed.lua` does them: uniqueness windows and debounce (see
//! [`JobStore::enqueue_keyed`](crate::store::JobStore::enqueue_keyed)).

use std::collections::HashMap;

use super::{resolve, Topic};
use crate::store::memory::zset::ZSet;
use crate::store::{Due, EnqueueOutcome, Keyed, KeyedJob, KeyedOutcome, UniqueStates};

/// Entries looked at per call by the trims below.
const TRIM: usize = 100;

/// The keys of one topic: unique keys (key -> (job id, window end)) and debounce keys (key -> (job id,
/// created at)), each with a sorted set by the time its entry may go.
#[derive(Debug, Default)]
pub(in crate::store::memory) struct Keys {
    unique: HashMap<String, (String, i64)>,
    unique_until: ZSet,
    debounce: HashMap<String, (String, i64)>,
    debounce_at: ZSet,
}

impl Keys {
    #[cfg(test)]
    pub(in crate::store::memory) fn is_empty(&self) -> bool {
        self.unique.is_empty() && self.debounce.is_empty()
    }
}

impl Topic {
    /// One keyed enqueue (see the trait). Returns its outcome and the hint of [`Topic::enqueue`].
    pub(in crate::store::memory) fn enqueue_keyed(
        &mut self,
        job: KeyedJob,
        now: i64,
    ) -> (KeyedOutcome, Option<i64>) {
        self.trim_keys(now);
        let KeyedJob { job, keyed } = job;
        match keyed {
            None => {
                let (outcome, hint) = self.enqueue(job, now);
                (KeyedOutcome::Enqueued(outcome), hint)
            }
            Some(Keyed::Unique {
                key,
                window_ms,
                states,
            }) => {
                if let Some(held) = self.unique_holder(&key, states, now) {
                    return (held, None);
                }
                let id = job.id.clone();
                let (outcome, hint) = self.enqueue(job, now);
                if created(&outcome) {
                    let until = resolve(Due::In(window_ms.max(1)), now);
                    self.keys.unique.insert(key.clone(), (id, until));
                    self.keys.unique_until.insert(&key, until);
                }
                (KeyedOutcome::Enqueued(outcome), hint)
            }
            Some(Keyed::Debounce {
                key,
                quiet_ms,
                max_wait_ms,
                replace,
            }) => {
                if let Some((id, created_at)) = self.keys.debounce.get(&key).cloned() {
                    if self.due.contains(&id) {
                        let mut at = resolve(Due::In(quiet_ms), now);
                        if max_wait_ms > 0 {
                            at = at.min(resolve(Due::In(max_wait_ms), created_at));
                        }
                        self.reschedule(&id, Due::At(at), now);
                        if replace {
                            self.jobs.insert(id.clone(), job.record);
                        }
                        self.keys.debounce_at.insert(&key, now);
                        let due_at_ms = self.due.score(&id).unwrap_or(at);
                        return (KeyedOutcome::Debounced { id, due_at_ms }, None);
                    }
                }
                let id = job.id.clone();
                let (outcome, hint) = self.enqueue(job, now);
                if created(&outcome) {
                    self.keys.debounce.insert(key.clone(), (id, now));
                    self.keys.debounce_at.insert(&key, now);
                }
                (KeyedOutcome::Enqueued(outcome), hint)
            }
        }
    }

    /// The outcome when unique `key` is held in one of `states` (`None`: it is free).
    fn unique_holder(&self, key: &str, states: UniqueStates, now: i64) -> Option<KeyedOutcome> {
        let (id, until) = self.keys.unique.get(key)?;
        if *until <= now {
            return None;
        }
        let id = id.clone();
        if let Some(due_at_ms) = self.due.score(&id) {
            states
                .contains(UniqueStates::SCHEDULED)
                .then_some(KeyedOutcome::Duplicate {
                    id,
                    due_at_ms: Some(due_at_ms),
                })
        } else if self.active.contains(&id) {
            states
                .contains(UniqueStates::RUNNING)
                .then_some(KeyedOutcome::Duplicate {
                    id,
                    due_at_ms: None,
                })
        } else {
            states
                .contains(UniqueStates::FINISHED)
                .then_some(KeyedOutcome::Throttled {
                    id,
                    until_ms: *until,
                })
        }
    }

    /// Drops unique entries whose window ended, and debounce entries whose job is no longer scheduled
    /// (looked at oldest first; one still pending goes to the back), a bounded number per call.
    fn trim_keys(&mut self, now: i64) {
        for (_, key) in self.keys.unique_until.take_up_to(now, TRIM) {
            self.keys.unique_until.remove(&key);
            self.keys.unique.remove(&key);
        }
        for (_, key) in self.keys.debounce_at.take_up_to(now - 1, TRIM) {
            let pending = self
                .keys
                .debounce
                .get(&key)
                .is_some_and(|(id, _)| self.due.contains(id) || self.active.contains(id));
            if pending {
                self.keys.debounce_at.insert(&key, now);
            } else {
                self.keys.debounce_at.remove(&key);
                self.keys.debounce.remove(&key);
            }
        }
    }
}

fn created(outcome: &EnqueueOutcome) -> bool {
    matches!(
        outcome,
        EnqueueOutcome::Created { .. } | EnqueueOutcome::Replaced { .. }
    )
}
