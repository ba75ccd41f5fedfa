//! Jobs that wait for jobs, as `deps.lua` keeps them (see
//! [`WorkflowStore::enqueue_after`](crate::store::WorkflowStore::enqueue_after)).
//!
//! A waiting job sits in `due` at [`WAITING_DUE_MS`] (later than any due time: never claimed, and an
//! enqueue of its id finds it), its record in `jobs`, and in [`Waits`] with what it still waits for.
//! Each parent it waits for follows it (`follow.rs`), so the parent's end reaches it once, through
//! [`deliver_ends`](crate::store::WorkflowStore::deliver_ends) of the parent's topic; the caller holds
//! the store's lock across each step, so nothing arrives half way.

use std::collections::HashMap;

use super::{resolve, Topic};
use crate::store::workflow::WAITING_DUE_MS;
use crate::store::{
    Due, Ended, EnqueueOutcome, MemberState, NewJob, OnParentFailure, ParentRef, MAX_DUE_MS,
};

/// The jobs of a topic that wait for parents.
#[derive(Debug, Default)]
pub(in crate::store::memory) struct Waits {
    /// What each waiting job waits for, by id.
    jobs: HashMap<String, Waiting>,
    /// The last nonce given to a parked job.
    nonce: u64,
}

/// One waiting job: how it goes on once its parents are done, and the parents not yet done.
#[derive(Debug)]
struct Waiting {
    /// Names this job's wait (a job of the same id parked later has another).
    nonce: u64,
    policy: OnParentFailure,
    /// The due time its enqueue asked for, resolved when it is released.
    due: Due,
    priority: u8,
    /// Its key for fairness, filed under once it is released.
    key: Option<String>,
    /// The parents not yet done, in the order given.
    parents: Vec<ParentRef>,
}

/// `parent <topic>/<id> died: <reason>` or `parent <topic>/<id> was cancelled`.
pub(in crate::store::memory) fn parent_failure(
    parent: &ParentRef,
    ended: &Ended,
) -> Option<String> {
    let ParentRef { topic, id } = parent;
    match ended {
        Ended::Succeeded { .. } => None,
        Ended::Cancelled => Some(format!("parent {topic}/{id} was cancelled")),
        Ended::Dead { reason } => Some(format!("parent {topic}/{id} died: {reason}")),
    }
}

impl Waits {
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Forgets a job that stops waiting (a cancel, an end).
    pub(super) fn forget(&mut self, id: &str) {
        if !self.jobs.is_empty() {
            self.jobs.remove(id);
        }
    }

    /// How many jobs wait.
    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Waiting job `id`'s key for fairness, when it has one.
    pub(super) fn key_of(&self, id: &str) -> Option<&str> {
        self.jobs.get(id).and_then(|w| w.key.as_deref())
    }
}

/// Whether a job in `due` at `due_at_ms` waits for parents.
pub(super) fn is_waiting(due_at_ms: i64) -> bool {
    due_at_ms > MAX_DUE_MS
}

impl Topic {
    /// The parents waiting job `id` still waits for, in the order given.
    pub(super) fn parents_left(&self, id: &str) -> Vec<ParentRef> {
        self.waits
            .jobs
            .get(id)
            .map_or_else(Vec::new, |w| w.parents.clone())
    }

    /// What an enqueue of `id` finds live here (a waiting job is due at [`WAITING_DUE_MS`]), if
    /// anything.
    pub(in crate::store::memory) fn live_outcome(&self, id: &str) -> Option<EnqueueOutcome> {
        if self.active.contains(id) {
            return Some(EnqueueOutcome::Running);
        }
        let due_at_ms = self.due.score(id)?;
        Some(EnqueueOutcome::Exists { due_at_ms })
    }

    /// Parks `job` (whose id is not live here) to wait for `parents` (live, distinct); returns the
    /// nonce its parents' followers must name. Counted as an enqueue.
    pub(in crate::store::memory) fn park(
        &mut self,
        job: NewJob,
        parents: Vec<ParentRef>,
        policy: OnParentFailure,
        now: i64,
    ) -> u64 {
        self.history.tally(now, |m| m.enqueued += 1);
        self.waits.nonce += 1;
        let nonce = self.waits.nonce;
        self.due.insert(&job.id, WAITING_DUE_MS);
        let waiting = Waiting {
            nonce,
            policy,
            due: job.due,
            priority: job.priority,
            key: job.key,
            parents,
        };
        self.waits.jobs.insert(job.id.clone(), waiting);
        self.jobs.insert(job.id, job.record);
        nonce
    }

    /// Ends `job` (whose id is not live here) at once by its policy, a parent having failed: counted
    /// as an enqueue, then as [`Topic::end_by_parent`].
    pub(in crate::store::memory) fn end_at_once(
        &mut self,
        job: NewJob,
        policy: OnParentFailure,
        reason: String,
        now: i64,
    ) -> Ended {
        self.history.tally(now, |m| m.enqueued += 1);
        self.jobs.insert(job.id.clone(), job.record);
        self.end_by_parent(&job.id, policy, reason, now)
    }

    /// Ends job `id` (waiting, or just put in `jobs`) by its policy after a parent failed with
    /// `reason`: dead-lettered (pending its hook, counted like a stall's death) or cancelled. What
    /// follows it hears of it.
    fn end_by_parent(
        &mut self,
        id: &str,
        policy: OnParentFailure,
        reason: String,
        now: i64,
    ) -> Ended {
        if policy == OnParentFailure::Cancel {
            self.end(id, Ended::Cancelled, now);
            self.counters.cancelled += 1;
            return Ended::Cancelled;
        }
        let record = self.jobs.get(id).cloned().unwrap_or_default();
        self.bury(id, record, reason.clone(), now);
        Ended::Dead { reason }
    }

    /// Delivers parent `parent`'s end (`state`, and `reason` when it died) to job `id` waiting under
    /// `nonce`: counted once (a parent not waited for any more, or a job gone, changes nothing).
    /// Returns the due time to hint about when the job became due earlier than the topic's earliest.
    pub(in crate::store::memory) fn hear(
        &mut self,
        id: &str,
        nonce: u64,
        parent: &ParentRef,
        state: MemberState,
        reason: &str,
        now: i64,
    ) -> Option<i64> {
        let waiting = self.waits.jobs.get_mut(id).filter(|w| w.nonce == nonce)?;
        let at = waiting.parents.iter().position(|p| p == parent)?;
        let failure = match state {
            MemberState::Dead => Some(Ended::Dead {
                reason: reason.to_owned(),
            }),
            MemberState::Cancelled => Some(Ended::Cancelled),
            _ => None,
        };
        let failure = failure.filter(|_| waiting.policy != OnParentFailure::Run);
        if let Some(ended) = failure {
            let policy = waiting.policy;
            let why = parent_failure(parent, &ended).unwrap_or_default();
            self.end_by_parent(id, policy, why, now);
            return None;
        }
        waiting.parents.remove(at);
        if !waiting.parents.is_empty() {
            return None;
        }
        let waiting = self.waits.jobs.remove(id)?;
        self.due.remove(id);
        // Filed under its key (a job without one under the key "" when the topic has keyed jobs).
        self.fair.set_key(id, waiting.key, false, now);
        self.schedule(id, resolve(waiting.due, now), waiting.priority, now)
    }
}
