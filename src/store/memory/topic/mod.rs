//! One topic's state and every state change on it, as plain functions of the state and the time (its
//! dead letters in `dead.rs`).
//!
//! Each method is one atomic step of the [`Store`](crate::store::Store) contract: the caller holds the
//! store's lock across it. Methods that may make a job due earlier than the topic's earliest return the
//! due time to hint about.

use std::collections::{HashMap, HashSet};

mod dead;

use super::zset::ZSet;
use crate::store::{
    CancelOutcome, ClaimBatch, ClaimRequest, ClaimedJob, DeadEntry, Due, EnqueueOutcome, Finish,
    FinishItem, FinishOutcome, LeaseStatus, NewJob, RescheduleOutcome, StoredJob, StoredState,
    TopicCounts, MAX_DUE_MS,
};
use crate::time::add_ms;

/// A dead job's record and reason (its time is its score in `dead`).
#[derive(Debug)]
struct Grave {
    record: Vec<u8>,
    reason: String,
}

/// One topic: the sets of the store seam's layout, and its counters.
#[derive(Debug, Default)]
pub(super) struct Topic {
    /// Due ids by due time.
    due: ZSet,
    /// Active ids by lease deadline.
    active: ZSet,
    /// Records of due and active jobs.
    jobs: HashMap<String, Vec<u8>>,
    /// Lease tokens of active jobs.
    leases: HashMap<String, u64>,
    /// How often each live job's lease expired.
    stalls: HashMap<String, u32>,
    /// Active jobs cancelled while they run.
    cancels: HashSet<String>,
    /// Dead ids by time of death.
    dead: ZSet,
    graves: HashMap<String, Grave>,
    /// Dead ids whose hook has not yet succeeded, by when they may next be handed to a hook.
    dead_pending: ZSet,
    /// The counters (the state counts are filled in by [`Topic::counts`]).
    counters: TopicCounts,
    /// The last lease token handed out.
    token_seq: u64,
}

/// The due time asked for: a delay from now, or an absolute time (a past time means now), capped at
/// [`MAX_DUE_MS`].
pub(super) fn resolve(due: Due, now: i64) -> i64 {
    let at = match due {
        Due::In(ms) => add_ms(now, ms),
        Due::At(at) => at.max(now),
    };
    at.min(MAX_DUE_MS)
}

impl Topic {
    /// Whether a job due at `due_at` is earlier than everything in `due` (or `due` is empty).
    fn is_earliest(&self, due_at: i64) -> bool {
        self.due.first_score().is_none_or(|first| due_at < first)
    }

    /// Removes every trace of a live job.
    fn forget(&mut self, id: &str) -> Option<Vec<u8>> {
        self.due.remove(id);
        self.active.remove(id);
        self.leases.remove(id);
        self.stalls.remove(id);
        self.cancels.remove(id);
        self.jobs.remove(id)
    }

    /// Moves a live job to the dead letters (replacing a dead job of the same id), pending its hook.
    fn bury(&mut self, id: &str, record: Vec<u8>, reason: String, now: i64) {
        self.forget(id);
        self.graves.insert(id.to_owned(), Grave { record, reason });
        self.dead.insert(id, now);
        self.dead_pending.insert(id, now);
        self.counters.dead_total += 1;
    }

    fn unbury(&mut self, id: &str) -> Option<Grave> {
        self.dead.remove(id);
        self.dead_pending.remove(id);
        self.graves.remove(id)
    }

    fn dead_entry(&self, id: &str) -> Option<DeadEntry> {
        let grave = self.graves.get(id)?;
        Some(DeadEntry {
            id: id.to_owned(),
            record: grave.record.clone(),
            reason: grave.reason.clone(),
            died_at_ms: self.dead.score(id)?,
        })
    }

    /// Enqueues one job; returns the outcome and the due time to hint about, if any.
    pub(super) fn enqueue(&mut self, job: NewJob, now: i64) -> (EnqueueOutcome, Option<i64>) {
        if self.active.contains(&job.id) {
            return (EnqueueOutcome::Running, None);
        }
        let existing = self.due.score(&job.id);
        if let (Some(due_at_ms), false) = (existing, job.replace) {
            return (EnqueueOutcome::Exists { due_at_ms }, None);
        }
        let due_at_ms = resolve(job.due, now);
        let hint = self.is_earliest(due_at_ms).then_some(due_at_ms);
        self.due.insert(&job.id, due_at_ms);
        self.jobs.insert(job.id, job.record);
        let outcome = match existing {
            Some(_) => EnqueueOutcome::Replaced { due_at_ms },
            None => EnqueueOutcome::Created { due_at_ms },
        };
        (outcome, hint)
    }

    /// Sweeps expired leases, then claims due jobs (see [`WorkerStore::claim`](crate::store::WorkerStore::claim)).
    pub(super) fn claim(&mut self, request: ClaimRequest, now: i64) -> ClaimBatch {
        let mut batch = ClaimBatch {
            now_us: now.saturating_mul(1000),
            ..ClaimBatch::default()
        };
        for (_, id) in self.active.take_up_to(now, request.sweep_limit) {
            self.active.remove(&id);
            self.leases.remove(&id);
            let stalls = self.stalls.entry(id.clone()).or_default();
            *stalls = stalls.saturating_add(1);
            let stalls = *stalls;
            if self.cancels.contains(&id) {
                self.forget(&id);
                self.counters.cancelled += 1;
                batch.swept_dead += 1;
            } else if stalls > request.stall_limit {
                let record = self.jobs.get(&id).cloned().unwrap_or_default();
                self.bury(
                    &id,
                    record,
                    format!("stalled: lease expired {stalls} times"),
                    now,
                );
                batch.swept_dead += 1;
            } else {
                self.due.insert(&id, now);
                self.counters.stalled += 1;
                batch.swept += 1;
            }
        }

        let ready = self.due.take_up_to(now, request.max);
        if !ready.is_empty() {
            self.token_seq += 1;
        }
        let deadline = add_ms(now, request.lease_ms);
        for (due_at_ms, id) in ready {
            self.due.remove(&id);
            self.active.insert(&id, deadline);
            self.leases.insert(id.clone(), self.token_seq);
            let record = self.jobs.get(&id).cloned().unwrap_or_default();
            batch.jobs.push(ClaimedJob {
                id,
                token: self.token_seq,
                due_at_ms,
                record,
            });
        }

        batch.next_due_ms = self.due.first_score();
        batch.next_lease_deadline_ms = self.active.first_score();
        batch.dead_pending = self.dead_pending.first_score().is_some_and(|at| at <= now);
        batch
    }

    /// Finishes one claimed job if its token matches its current lease; returns the outcome and, for a
    /// retry, the due time to hint about, if any.
    pub(super) fn finish(&mut self, item: FinishItem, now: i64) -> (FinishOutcome, Option<i64>) {
        let id = item.id.as_str();
        if self.leases.get(id) != Some(&item.token) {
            return (FinishOutcome::Stale, None);
        }
        match item.finish {
            Finish::Done => {
                self.forget(id);
                self.counters.processed += 1;
                (FinishOutcome::Applied, None)
            }
            Finish::Retry { .. } if self.cancels.contains(id) => {
                self.forget(id);
                self.counters.cancelled += 1;
                (FinishOutcome::Cancelled, None)
            }
            Finish::Retry {
                record,
                delay_ms,
                counted,
            } => {
                let due_at_ms = resolve(Due::In(delay_ms), now);
                let hint = self.is_earliest(due_at_ms).then_some(due_at_ms);
                self.active.remove(id);
                self.leases.remove(id);
                self.due.insert(id, due_at_ms);
                self.jobs.insert(item.id, record);
                if counted {
                    self.counters.retried += 1;
                }
                (FinishOutcome::Applied, hint)
            }
            Finish::Dead { record, reason } => {
                self.bury(id, record, reason, now);
                self.counters.failed += 1;
                (FinishOutcome::Applied, None)
            }
        }
    }

    /// Renews one lease if its token matches.
    pub(super) fn extend(&mut self, id: &str, token: u64, lease_ms: u64, now: i64) -> LeaseStatus {
        if self.leases.get(id) != Some(&token) {
            return LeaseStatus::Lost;
        }
        self.active.insert(id, add_ms(now, lease_ms));
        if self.cancels.contains(id) {
            LeaseStatus::Cancelled
        } else {
            LeaseStatus::Held
        }
    }

    pub(super) fn cancel(&mut self, id: &str) -> CancelOutcome {
        if self.due.contains(id) {
            self.forget(id);
            self.counters.cancelled += 1;
            CancelOutcome::Removed
        } else if self.active.contains(id) {
            self.cancels.insert(id.to_owned());
            CancelOutcome::Marked
        } else {
            CancelOutcome::NotFound
        }
    }

    /// Moves a due job; returns the outcome and the due time to hint about, if any.
    pub(super) fn reschedule(
        &mut self,
        id: &str,
        due: Due,
        now: i64,
    ) -> (RescheduleOutcome, Option<i64>) {
        if self.due.contains(id) {
            let due_at_ms = resolve(due, now);
            let hint = self.is_earliest(due_at_ms).then_some(due_at_ms);
            self.due.insert(id, due_at_ms);
            (RescheduleOutcome::Rescheduled { due_at_ms }, hint)
        } else if self.active.contains(id) {
            (RescheduleOutcome::Running, None)
        } else {
            (RescheduleOutcome::NotFound, None)
        }
    }

    /// The live job with this id, else the dead one.
    pub(super) fn job(&self, id: &str) -> Option<StoredJob> {
        let state = if let Some(due_at_ms) = self.due.score(id) {
            StoredState::Due { due_at_ms }
        } else if let Some(lease_deadline_ms) = self.active.score(id) {
            StoredState::Active { lease_deadline_ms }
        } else {
            let dead = self.dead_entry(id)?;
            let state = StoredState::Dead {
                died_at_ms: dead.died_at_ms,
                reason: dead.reason,
                delivered: !self.dead_pending.contains(id),
            };
            return Some(StoredJob {
                state,
                record: dead.record,
            });
        };
        let record = self.jobs.get(id).cloned().unwrap_or_default();
        Some(StoredJob { state, record })
    }

    pub(super) fn counts(&self, now: i64) -> TopicCounts {
        let ready = self.due.count_up_to(now);
        TopicCounts {
            scheduled: (self.due.len() - ready) as u64,
            ready: ready as u64,
            active: self.active.len() as u64,
            dead: self.dead.len() as u64,
            dead_pending: self.dead_pending.len() as u64,
            ..self.counters
        }
    }

    /// Whether the topic holds any per-job state (for tests that nothing is left behind).
    #[cfg(test)]
    pub(super) fn holds_nothing(&self) -> bool {
        self.due.len() == 0
            && self.active.len() == 0
            && self.jobs.is_empty()
            && self.leases.is_empty()
            && self.stalls.is_empty()
            && self.cancels.is_empty()
            && self.graves.is_empty()
            && self.dead.len() == 0
            && self.dead_pending.len() == 0
    }
}
