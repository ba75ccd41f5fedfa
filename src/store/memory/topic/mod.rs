//! One topic's state and every state change on it, as plain functions of the state and the time (its
//! dead letters in `dead.rs`).
//!
//! Each method is one atomic step of the [`Store`](crate::store::Store) contract: the caller holds the
//! store's lock across it. Methods that may make a job due earlier than the topic's earliest return the
//! due time to hint about.

use std::collections::{BTreeSet, HashMap, HashSet};

mod dead;
mod delivered;
mod deps;
mod fair;
mod flow;
mod follow;
mod keyed;
mod ops;
mod outcomes;

pub(super) use self::deps::parent_failure;
pub(super) use self::follow::{Follower, RecordedEnd};
pub(super) use self::ops::History;
pub(super) use self::outcomes::Announced;

use super::zset::ZSet;
use crate::store::{
    CancelOutcome, ClaimBatch, ClaimRequest, ClaimedJob, DeadEntry, Death, Due, Ended,
    EnqueueOutcome, Finish, FinishItem, FinishOutcome, FlowCounts, LeaseStatus, NewJob,
    RescheduleOutcome, StoredJob, StoredState, TopicCounts, MAX_DUE_MS,
};
use crate::time::add_ms;

/// One death's record and reason, and the job's key for fairness (it keeps it when requeued).
#[derive(Debug)]
struct Grave {
    death: Death,
    record: Vec<u8>,
    reason: String,
    died_at_ms: i64,
    key: Option<String>,
}

impl Grave {
    fn entry(&self) -> DeadEntry {
        DeadEntry {
            id: self.death.id.clone(),
            seq: self.death.seq,
            record: self.record.clone(),
            reason: self.reason.clone(),
            died_at_ms: self.died_at_ms,
        }
    }
}

/// A lease: the token of the claim that holds it, the job's due time when claimed, and the worker that
/// claimed it.
#[derive(Debug, Clone, Copy)]
struct Lease {
    token: u64,
    due_at_ms: i64,
    holder: u64,
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
    /// Leases of active jobs.
    leases: HashMap<String, Lease>,
    /// What each recent claim took, by token, until its lease would end: (expires at, ids).
    claims: HashMap<u64, (i64, Vec<String>)>,
    /// How often each live job's lease expired.
    stalls: HashMap<String, u32>,
    /// Active jobs cancelled while they run.
    cancels: HashSet<String>,
    /// Listed deaths (by [`Death::member`]) by time of death.
    dead: ZSet,
    /// Listed deaths, in id order (members sort by id, then sequence).
    dead_ids: BTreeSet<String>,
    /// Every death that is listed or pending, by member.
    graves: HashMap<String, Grave>,
    /// Deaths whose hook has not yet succeeded, by when they may next be handed to a hook.
    dead_pending: ZSet,
    /// The counters (the state counts are filled in by [`Topic::counts`]).
    counters: TopicCounts,
    /// Claims take nothing while paused.
    paused: bool,
    /// The rate limit's theoretical arrival time (ms; see [`crate::flow`]).
    rate_tat: f64,
    /// Claims take nothing before this time (a provider's limit, [`Finish::RateLimited`]).
    hold_until: i64,
    /// A claim found the topic at its max running: the finish that frees a slot hints.
    full: bool,
    /// The limits the last claim that found jobs due ran under (for operators).
    flow_seen: (Option<crate::flow::RateLimit>, u32),
    /// Priorities of live jobs enqueued with one.
    priority: HashMap<String, u8>,
    /// Due jobs with a priority, by priority (highest first) then due time: `due - priority << 48`.
    prio_ready: ZSet,
    /// Scheduled jobs with a priority, by due time.
    prio_wait: ZSet,
    /// Per-minute counts.
    history: History,
    /// Delivery tokens of jobs enqueued once (see `delivered.rs`), by when they were recorded.
    delivered: ZSet,
    /// Unique and debounce keys (see `keyed.rs`).
    keys: keyed::Keys,
    /// Keys for fairness of keyed jobs, and their turns (see `fair.rs`).
    fair: fair::Fair,
    /// Jobs that wait for jobs (see `deps.rs`).
    waits: deps::Waits,
    /// Finished jobs kept, waiters and progress (see `outcomes.rs`).
    pub(super) outcomes: outcomes::Outcomes,
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
    /// Whether job `id` is leased under `token`.
    fn held(&self, id: &str, token: u64) -> bool {
        self.leases.get(id).is_some_and(|l| l.token == token)
    }

    /// Whether a job due at `due_at` is earlier than everything in `due` (or `due` is empty).
    fn is_earliest(&self, due_at: i64) -> bool {
        self.due.first_score().is_none_or(|first| due_at < first)
    }

    /// Removes every trace of a live job.
    fn forget(&mut self, id: &str, now: i64) -> Option<Vec<u8>> {
        self.fair.forget(id, now);
        self.priority.remove(id);
        self.prio_ready.remove(id);
        self.prio_wait.remove(id);
        self.due.remove(id);
        self.active.remove(id);
        self.leases.remove(id);
        self.stalls.remove(id);
        self.cancels.remove(id);
        self.waits.forget(id);
        self.jobs.remove(id)
    }

    /// Moves a live job to the dead letters as a new death (numbered by the `dead_total` counter),
    /// listed and pending its hook.
    fn bury(&mut self, id: &str, record: Vec<u8>, reason: String, now: i64) {
        let key = self
            .fair
            .key_of(id)
            .filter(|k| !k.is_empty())
            .map(str::to_owned);
        self.forget(id, now);
        self.announce_death(id, &reason, now);
        self.counters.dead_total += 1;
        self.history.tally(now, |m| m.dead += 1);
        let death = Death::new(id, self.counters.dead_total);
        let member = death.member();
        self.dead.insert(&member, now);
        self.dead_pending.insert(&member, now);
        self.dead_ids.insert(member.clone());
        let grave = Grave {
            death,
            record,
            reason,
            died_at_ms: now,
            key,
        };
        self.graves.insert(member, grave);
    }

    /// Enqueues one job; returns the outcome and the due time to hint about, if any.
    pub(super) fn enqueue(&mut self, job: NewJob, now: i64) -> (EnqueueOutcome, Option<i64>) {
        self.enqueue_in(job, false, now)
    }

    /// Enqueues one job of a batch; `keyed_batch`: the batch has keyed jobs (then, as on Redis, which
    /// files a batch's keyed jobs first, the batch's jobs without a key take their turn as the key
    /// `""`). Returns the outcome and the due time to hint about, if any.
    pub(super) fn enqueue_in(
        &mut self,
        job: NewJob,
        keyed_batch: bool,
        now: i64,
    ) -> (EnqueueOutcome, Option<i64>) {
        if self.active.contains(&job.id) {
            return (EnqueueOutcome::Running, None);
        }
        let existing = self.due.score(&job.id);
        // A job that waits for parents is replaced by nothing.
        if let Some(due_at_ms) = existing.filter(|at| !job.replace || deps::is_waiting(*at)) {
            return (EnqueueOutcome::Exists { due_at_ms }, None);
        }
        let due_at_ms = resolve(job.due, now);
        self.fair.set_key(&job.id, job.key, keyed_batch, now);
        let hint = self.schedule(&job.id, due_at_ms, job.priority, now);
        self.jobs.insert(job.id, job.record);
        let outcome = match existing {
            Some(_) => EnqueueOutcome::Replaced { due_at_ms },
            None => {
                self.history.tally(now, |m| m.enqueued += 1);
                EnqueueOutcome::Created { due_at_ms }
            }
        };
        (outcome, hint)
    }

    /// Puts job `id` in `due` at `due_at_ms` with its priority; returns the due time to hint about,
    /// if any.
    fn schedule(&mut self, id: &str, due_at_ms: i64, priority: u8, now: i64) -> Option<i64> {
        let hint = self.is_earliest(due_at_ms).then_some(due_at_ms);
        match priority {
            0 => self.priority.remove(id),
            p => self.priority.insert(id.to_owned(), p),
        };
        self.put_due(id, due_at_ms, now);
        self.fair_hint(hint, now)
    }

    /// `hint`, or now when a key became ready (or a parked key was filed again): the claimers' next due
    /// time may have left out every key that was ready, so they want to know (as on Redis).
    fn fair_hint(&mut self, hint: Option<i64>, now: i64) -> Option<i64> {
        if self.fair.take_readied() {
            Some(now)
        } else {
            hint
        }
    }

    /// Puts live job `id` in `due` at `due_at_ms`, filed by its priority and its key.
    fn put_due(&mut self, id: &str, due_at_ms: i64, now: i64) {
        self.due.insert(id, due_at_ms);
        self.file_prio(id, due_at_ms, now);
        self.fair.file(id, due_at_ms, now);
    }

    /// Sweeps expired leases, then claims due jobs (see [`WorkerStore::claim`](crate::store::WorkerStore::claim)).
    pub(super) fn claim(&mut self, request: ClaimRequest, now: i64) -> ClaimBatch {
        let mut batch = ClaimBatch {
            now_us: now.saturating_mul(1000),
            ..ClaimBatch::default()
        };
        if let Some(token) = request.received {
            self.claims.remove(&token);
        }
        self.claims.retain(|_, (expires, _)| *expires > now);
        for (_, id) in self.active.take_up_to(now, request.sweep_limit) {
            self.active.remove(&id);
            let lease = self.leases.remove(&id);
            let stalls = self.stalls.entry(id.clone()).or_default();
            *stalls = stalls.saturating_add(1);
            let stalls = *stalls;
            if self.cancels.contains(&id) {
                self.end(&id, Ended::Cancelled, now);
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
                // Due again at the due time it was claimed at: it keeps its place in line.
                let due_at = lease.map_or(now, |l| l.due_at_ms);
                self.put_due(&id, due_at, now);
                self.counters.stalled += 1;
                batch.swept += 1;
            }
        }

        let token = request.token;
        // A token names one claim: when it is recorded, this is that claim again (sent again after a
        // lost reply), and it hands back the jobs still leased under it instead of claiming more.
        // Paused matters only when something is due now (as on Redis: an idle claim does not look).
        let due_now = request.max > 0 && self.due.first_score().is_some_and(|first| first <= now);
        let paused = self.paused && due_now;
        let (max, budget) = if due_now && !paused {
            self.flow_before_claim(&request, now, &mut batch)
        } else {
            (request.max, None)
        };
        if due_now {
            self.flow_seen = (request.rate, request.max_running);
        }
        // The next due time a claim of a topic with keyed jobs reports (see `fair.rs`).
        let mut fair_next = None;
        if let Some((_, ids)) = self.claims.get(&token) {
            for id in ids {
                if let Some(lease) = self.leases.get(id).filter(|l| l.token == token) {
                    batch.jobs.push(ClaimedJob {
                        id: id.clone(),
                        token,
                        due_at_ms: lease.due_at_ms,
                        record: self.jobs.get(id).cloned().unwrap_or_default(),
                    });
                }
            }
        } else if !paused {
            let deadline = add_ms(now, request.lease_ms);
            let claiming = due_now && max > 0;
            let fair = claiming && !self.fair.is_empty();
            let due = if claiming {
                self.due_first(now, max, request.key_limits)
            } else {
                Vec::new()
            };
            for (due_at_ms, id) in due {
                self.due.remove(&id);
                self.prio_ready.remove(&id);
                self.active.insert(&id, deadline);
                let lease = Lease {
                    token,
                    due_at_ms,
                    holder: request.holder,
                };
                self.leases.insert(id.clone(), lease);
                let record = self.jobs.get(&id).cloned().unwrap_or_default();
                batch.jobs.push(ClaimedJob {
                    id,
                    token,
                    due_at_ms,
                    record,
                });
            }
            if !batch.jobs.is_empty() {
                let ids = batch.jobs.iter().map(|j| j.id.clone()).collect();
                self.claims.insert(token, (deadline, ids));
            }
            if fair {
                // Due jobs of keys held back (their rate, hold or max running) do not make the next
                // claim sooner.
                fair_next = Some(self.fair.next_due(self.due.iter().next()));
            }
        }
        // This claim saw the keys made ready by its sweep.
        self.fair.take_readied();

        batch.paused = paused;
        let next_due = fair_next.unwrap_or_else(|| self.due.first_score());
        batch.next_due_ms = next_due.filter(|_| !paused);
        self.flow_after_claim(budget, &mut batch, now);
        batch.next_lease_deadline_ms = self.active.first_score();
        batch.dead_pending = self.dead_pending.first_score().is_some_and(|at| at <= now);
        batch.ends_pending = self.ends_pending();
        batch
    }

    /// Finishes one claimed job if its token matches its current lease; returns the outcome and, for a
    /// retry, the due time to hint about, if any.
    pub(super) fn finish(&mut self, item: FinishItem, now: i64) -> (FinishOutcome, Option<i64>) {
        let id = item.id.as_str();
        if !self.held(id, item.token) {
            return (FinishOutcome::Stale, None);
        }
        // A slot is free: the claims that found the topic (or a key) full are woken.
        let freed = std::mem::take(&mut self.full).then_some(now);
        let (outcome, hint) = self.finish_held(item, now);
        let hint = self.fair_hint(hint, now);
        (outcome, hint.or(freed))
    }

    /// Finishes one job whose lease `item` holds.
    fn finish_held(&mut self, item: FinishItem, now: i64) -> (FinishOutcome, Option<i64>) {
        // A provider's limit holds the job's key when it has one (not the key `""`), else the topic;
        // and is a retry counted as nothing.
        let item = match item.finish {
            Finish::RateLimited { record, delay_ms } => {
                match self.fair.key_of(&item.id).filter(|k| !k.is_empty()) {
                    Some(key) => {
                        let key = key.to_owned();
                        self.fair.hold(&key, resolve(Due::In(delay_ms), now));
                    }
                    None => self.hold(delay_ms, now),
                }
                let finish = Finish::Retry {
                    record,
                    delay_ms,
                    counted: false,
                };
                FinishItem::new(item.id, item.token, finish)
            }
            _ => item,
        };
        let id = item.id.as_str();
        match item.finish {
            Finish::Done | Finish::Succeeded { .. } => {
                let result = match item.finish {
                    Finish::Succeeded { result } => result,
                    _ => Vec::new(),
                };
                self.end(id, Ended::Succeeded { result }, now);
                self.counters.processed += 1;
                self.history.tally(now, |m| m.processed += 1);
                (FinishOutcome::Applied, None)
            }
            Finish::Retry { .. } if self.cancels.contains(id) => {
                self.end(id, Ended::Cancelled, now);
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
                self.put_due(id, due_at_ms, now);
                self.jobs.insert(item.id, record);
                if counted {
                    self.counters.retried += 1;
                    self.history.tally(now, |m| m.retried += 1);
                }
                (FinishOutcome::Applied, hint)
            }
            Finish::Dead { record, reason } => {
                self.bury(id, record, reason, now);
                self.counters.failed += 1;
                self.history.tally(now, |m| m.failed += 1);
                (FinishOutcome::Applied, None)
            }
            Finish::RateLimited { .. } => unreachable!("made a retry above"),
        }
    }

    /// Renews one lease if its token matches.
    pub(super) fn extend(&mut self, id: &str, token: u64, lease_ms: u64, now: i64) -> LeaseStatus {
        if !self.held(id, token) {
            return LeaseStatus::Lost;
        }
        self.active.insert(id, add_ms(now, lease_ms));
        if self.cancels.contains(id) {
            LeaseStatus::Cancelled
        } else {
            LeaseStatus::Held
        }
    }

    pub(super) fn cancel(&mut self, id: &str, now: i64) -> CancelOutcome {
        if self.due.contains(id) {
            self.end(id, Ended::Cancelled, now);
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
        let current = self.due.score(id);
        if current.is_some_and(deps::is_waiting) {
            (RescheduleOutcome::Waiting, None)
        } else if current.is_some() {
            let due_at_ms = resolve(due, now);
            let hint = self.is_earliest(due_at_ms).then_some(due_at_ms);
            self.put_due(id, due_at_ms, now);
            let hint = self.fair_hint(hint, now);
            (RescheduleOutcome::Rescheduled { due_at_ms }, hint)
        } else if self.active.contains(id) {
            (RescheduleOutcome::Running, None)
        } else {
            (RescheduleOutcome::NotFound, None)
        }
    }

    /// Live job `id`'s key for fairness, when it has one (a waiting job's, or the one it is filed under).
    fn key_of(&self, id: &str) -> Option<String> {
        self.waits
            .key_of(id)
            .or_else(|| self.fair.key_of(id).filter(|k| !k.is_empty()))
            .map(str::to_owned)
    }

    /// Fills in a due or running job's key load and the limits per key, when it has a key.
    fn with_key_load(&self, mut job: StoredJob, now: i64) -> StoredJob {
        if let Some(key) = &job.key {
            job.key_load = Some(self.fair.load_of(key, now));
            job.key_limits = self.fair.limits();
        }
        job
    }

    /// The live job with this id, else the dead one.
    pub(super) fn job(&self, id: &str, now: i64) -> Option<StoredJob> {
        let state = if let Some(due_at_ms) = self.due.score(id) {
            if deps::is_waiting(due_at_ms) {
                let parents = self.parents_left(id);
                StoredState::Waiting { parents }
            } else {
                StoredState::Due { due_at_ms }
            }
        } else if let Some(lease_deadline_ms) = self.active.score(id) {
            let mut job = StoredJob::new(
                StoredState::Active { lease_deadline_ms },
                self.jobs.get(id).cloned().unwrap_or_default(),
            );
            job.stalls = self.stalls.get(id).copied().unwrap_or(0);
            job.holder = self.leases.get(id).map(|l| l.holder).filter(|h| *h != 0);
            job.progress = self.progress_of(id);
            job.key = self.key_of(id);
            return Some(self.with_key_load(job, now));
        } else {
            let grave = self
                .deaths_of(id)
                .next_back()
                .and_then(|member| self.graves.get(member));
            if let Some(kept) = self.kept_job(id, grave.map(|g| g.died_at_ms)) {
                return Some(kept);
            }
            let grave = grave?;
            let member = grave.death.member();
            let member = member.as_str();
            let state = StoredState::Dead {
                seq: grave.death.seq,
                died_at_ms: grave.died_at_ms,
                reason: grave.reason.clone(),
                delivered: !self.dead_pending.contains(member),
            };
            let mut job = StoredJob::new(state, grave.record.clone());
            job.key = grave.key.clone();
            return Some(job);
        };
        let mut job = StoredJob::new(state, self.jobs.get(id).cloned().unwrap_or_default());
        job.stalls = self.stalls.get(id).copied().unwrap_or(0);
        job.progress = self.progress_of(id);
        job.key = self.key_of(id);
        if matches!(job.state, StoredState::Due { .. }) {
            job = self.with_key_load(job, now);
        }
        Some(job)
    }

    pub(super) fn counts(&self, now: i64) -> TopicCounts {
        let ready = self.due.count_up_to(now);
        let waiting = self.waits.len();
        TopicCounts {
            scheduled: (self.due.len() - ready - waiting) as u64,
            waiting: waiting as u64,
            ready: ready as u64,
            active: self.active.len() as u64,
            dead: self.dead.len() as u64,
            dead_pending: self.dead_pending.len() as u64,
            done: self.done().len() as u64,
            paused: self.paused,
            flow: FlowCounts::from_stored(
                self.flow_seen
                    .0
                    .map(|r| (r.jobs(), crate::time::millis(r.per()))),
                self.flow_seen.1,
                self.hold_until,
                self.rate_tat,
                now,
            ),
            ..self.counters
        }
    }

    /// The busiest keys of its keyed jobs (see [`crate::store::OpsStore::busiest_keys`]).
    pub(super) fn busiest_keys(&self, limit: usize, now: i64) -> crate::store::KeysPage {
        self.fair.busiest(limit, now)
    }

    /// Whether the topic holds any per-job state (for tests that nothing is left behind). Claim records
    /// are not per job, and go by themselves when their lease would have ended.
    #[cfg(test)]
    pub(super) fn holds_nothing(&self) -> bool {
        self.due.len() == 0
            && self.active.len() == 0
            && self.jobs.is_empty()
            && self.leases.is_empty()
            && self.stalls.is_empty()
            && self.cancels.is_empty()
            && self.priority.is_empty()
            && self.prio_ready.len() == 0
            && self.prio_wait.len() == 0
            && self.graves.is_empty()
            && self.dead_ids.is_empty()
            && self.dead.len() == 0
            && self.dead_pending.len() == 0
            && self.delivered.len() == 0
            && self.keys.is_empty()
            && self.fair.holds_nothing()
            && self.outcomes.is_empty()
            && self.waits.is_empty()
    }
}
