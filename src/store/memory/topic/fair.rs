//! Fairness by key, as `docs/design/fairness.md` lays it out and `fair.lua` does it: a topic's due jobs
//! of different keys are claimed round-robin between keys, a key's own in due order, each key within its
//! limits (at most `max running` jobs of it at once, a rate per key, a hold).
//!
//! Each key with a job due now is *ready* with a tag (a virtual time); a claim serves the ready key with
//! the lowest tag, takes its earliest due job (all the slots left when it is the only ready key, within
//! its limits), and puts it back at tag + 1 while it has a job due. A key whose jobs are all in the
//! future *waits* by the due time of its earliest, and so does a key held back by its rate or a hold,
//! until it may go; either joins the ready keys at the topic's virtual time (`vt`, the tag of the key
//! served last) once that time comes; so does a key that gets a job due now, unless it is ready already
//! (then it keeps its tag). A key at its max running is *parked* (neither ready nor waiting) until one
//! of its leases ends. A key with no job left is forgotten (its running jobs, rate and hold are kept
//! while they matter).
//!
//! A topic with keyed jobs files the jobs created without a key under the key `""`: they take their
//! turn as one key, under no limit per key. Jobs created without a key before the topic had keyed
//! jobs have no entry here: a claim takes those among the first due jobs, in due order.
//!
//! Unlike Redis, which checks its per-key queues against `due` lazily, this state is kept exact: every
//! change of a keyed job's place in `due` comes through here. As on Redis, a key ready or waiting is
//! only where the claim looks next: the claim checks its limits again. A topic without keyed jobs pays
//! the check of an empty map per call.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::flow::{Budget, KeyLimits};
use crate::store::memory::zset::ZSet;
use crate::store::MAX_DUE_MS;

/// The key of the jobs created without one in a topic with keyed jobs: under no limit per key.
const UNKEYED: &str = "";

/// A live keyed job: its key, its due time while it is in its key's queue (none while it runs), and
/// whether its lease counts against its key's max running.
#[derive(Debug)]
struct Filed {
    key: String,
    queued_at: Option<i64>,
    counted: bool,
}

/// The keys of one topic's keyed jobs, their turns and their limits.
#[derive(Debug, Default)]
pub(in crate::store::memory) struct Fair {
    /// Each live keyed job, by id.
    jobs: HashMap<String, Filed>,
    /// Each key's jobs in `due`, by (due time, id); only keys with some.
    queues: HashMap<String, BTreeSet<(i64, String)>>,
    /// Keys with a job due now, by tag, then key.
    ready: ZSet,
    /// Keys whose jobs are all in the future, or held back by their rate or a hold, by when a claim
    /// looks at them again.
    waiting: ZSet,
    /// Keys at their max running with a job in `due` (in neither `ready` nor `waiting`): the end of one
    /// of their leases files them again.
    parked: HashSet<String>,
    /// Running jobs per key (those claimed under a max running per key); only keys with some.
    running: HashMap<String, u32>,
    /// Each key's rate TAT in µs (Redis keeps it in ms to 3 decimals), while it is in the future.
    tat: ZSet,
    /// Keys held by a rate-limited finish of one of their jobs, until when (ms).
    held: ZSet,
    /// The topic's virtual time: the tag of the key served last (0 once no key has a job in `due`).
    vt: i64,
    /// A key became ready, or a parked key was filed again, since this was last taken: claimers that
    /// wait for the next due time (which left that key out) want a hint.
    readied: bool,
    /// The limits per key of the last claim of keyed jobs, for operators (none once no keyed job is
    /// left, as on Redis).
    limits: Option<KeyLimits>,
    /// Keys with limits of their own, set by operators ([`Fair::set_own_limits`]): in place of the
    /// claim's limits per key, for that key alone. Kept until cleared, whatever the key's jobs.
    own: HashMap<String, KeyLimits>,
}

impl Fair {
    /// Whether the topic has no live keyed job (then it claims as if keys did not exist).
    pub(super) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Whether nothing is held for keys (for tests that nothing is left behind).
    #[cfg(test)]
    pub(super) fn holds_nothing(&self) -> bool {
        self.jobs.is_empty()
            && self.queues.is_empty()
            && self.ready.len() == 0
            && self.waiting.len() == 0
            && self.parked.is_empty()
            && self.running.is_empty()
            && self.tat.len() == 0
            && self.held.len() == 0
            && self.vt == 0
    }

    /// Whether a key became ready (or a parked one was filed again) since the last call: the caller
    /// hints now.
    pub(super) fn take_readied(&mut self) -> bool {
        std::mem::take(&mut self.readied)
    }

    /// The key of live job `id`, if it has one (`""`: created without one in a topic with keyed jobs).
    pub(super) fn key_of(&self, id: &str) -> Option<&str> {
        self.jobs.get(id).map(|f| f.key.as_str())
    }

    /// Sets or drops job `id`'s key as its creation gives it (an enqueue, a replace, a dead job
    /// requeued, a job that waited for jobs made due): a job without a key is filed under the key `""`
    /// when the topic has keyed jobs (or `keyed_batch`: the enqueue that creates it files keyed jobs
    /// too). The caller files the job with [`Fair::file`] right after.
    pub(super) fn set_key(&mut self, id: &str, key: Option<String>, keyed_batch: bool, now: i64) {
        if key.is_none() && self.jobs.is_empty() && !keyed_batch {
            return;
        }
        if let Some(old) = self.jobs.remove(id) {
            if let Some(at) = old.queued_at {
                self.unqueue(&old.key, at, id);
            }
            // The same key keeps its turn: the job is filed again under it at once.
            if key.as_deref().unwrap_or(UNKEYED) != old.key {
                self.after_removal(&old.key, now);
            }
        }
        let key = match key {
            Some(key) => key,
            // Its key was the last: the topic has keyed jobs no more.
            None if self.jobs.is_empty() && !keyed_batch => return,
            None => UNKEYED.to_owned(),
        };
        let filed = Filed {
            key,
            queued_at: None,
            counted: false,
        };
        self.jobs.insert(id.to_owned(), filed);
    }

    /// Files live job `id`, now in `due` at `due_at`, in its key's queue if it has a key (an enqueue, a
    /// retry, an expired lease, a reschedule); a lease it held ends.
    pub(super) fn file(&mut self, id: &str, due_at: i64, now: i64) {
        if self.jobs.is_empty() {
            return;
        }
        let Some(filed) = self.jobs.get_mut(id) else {
            return;
        };
        let key = filed.key.clone();
        let counted = std::mem::take(&mut filed.counted);
        let old = filed.queued_at.replace(due_at);
        if let Some(old) = old {
            self.unqueue(&key, old, id);
        }
        if counted {
            self.release(&key, now);
        }
        let queue = match self.queues.get_mut(&key) {
            Some(queue) => queue,
            None => self.queues.entry(key.clone()).or_default(),
        };
        queue.insert((due_at, id.to_owned()));
        if old.is_some() {
            self.after_removal(&key, now);
        }
        self.place(&key, due_at, now);
    }

    /// Job `id` was claimed outside the round (it has a priority): out of its key's queue, the key's
    /// turn unchanged; it counts against its key's max running (`key_max`, 0: none).
    pub(super) fn claimed(&mut self, id: &str, key_max: u32, now: i64) {
        if self.jobs.is_empty() {
            return;
        }
        let Some(filed) = self.jobs.get_mut(id) else {
            return;
        };
        let key = filed.key.clone();
        let key_max = self
            .own
            .get(&key)
            .map_or(key_max, |own| own.max_running_per_key());
        if key_max > 0 && key != UNKEYED {
            filed.counted = true;
            *self.running.entry(key.clone()).or_default() += 1;
        }
        if let Some(at) = filed.queued_at.take() {
            self.unqueue(&key, at, id);
            self.after_removal(&key, now);
        }
    }

    /// Job `id` ended (done, dead, cancelled): its key is forgotten, its lease if any ends, and the key
    /// too when it has no job left in `due`.
    pub(super) fn forget(&mut self, id: &str, now: i64) {
        if self.jobs.is_empty() {
            return;
        }
        let Some(filed) = self.jobs.remove(id) else {
            return;
        };
        if filed.counted {
            self.release(&filed.key, now);
        }
        if let Some(at) = filed.queued_at {
            self.unqueue(&filed.key, at, id);
            self.after_removal(&filed.key, now);
        }
    }

    /// Holds key `key` until `until` (a rate-limited finish of one of its jobs): none of its jobs is
    /// claimed before, the other keys' are.
    pub(super) fn hold(&mut self, key: &str, until: i64) {
        let until = self.held.score(key).map_or(until, |h| h.max(until));
        self.held.insert(key, until);
        if self.ready.remove(key).is_some() {
            self.waiting.insert(key, until);
        } else if let Some(w) = self.waiting.score(key) {
            self.waiting.insert(key, w.max(until));
        }
    }

    /// Sets (`Some`) or clears key `key`'s own limits, which replace the claim's limits per key for
    /// it. Limits with a max running count every running job of the key against it from now on,
    /// however it was claimed (as Redis does: it takes the uncounted mark off their leases). A key
    /// parked at its max running is filed again (the claimers want a hint): its new limits are the
    /// next claim's to apply.
    pub(super) fn set_own_limits(&mut self, key: &str, limits: Option<KeyLimits>, now: i64) {
        match limits {
            Some(limits) => self.own.insert(key.to_owned(), limits),
            None => self.own.remove(key),
        };
        if limits.is_some_and(|l| l.max_running_per_key() > 0) {
            let mut running = 0;
            for filed in self.jobs.values_mut() {
                // Claimed (out of its key's queue): running.
                if filed.key == key && filed.queued_at.is_none() {
                    filed.counted = true;
                    running += 1;
                }
            }
            if running > 0 {
                self.running.insert(key.to_owned(), running);
            } else {
                self.running.remove(key);
            }
        }
        self.unpark(key, now);
    }

    /// The keys with limits of their own, by key.
    pub(super) fn own_limits(&self) -> Vec<(String, KeyLimits)> {
        let mut out: Vec<_> = self.own.iter().map(|(k, l)| (k.clone(), *l)).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Forgets the limits kept for keys (rates, holds) once the topic has no keyed job left, as a
    /// claim on Redis does (called by a claim that finds jobs due).
    pub(super) fn clear_idle(&mut self) {
        if self.tat.len() > 0 || self.held.len() > 0 {
            self.tat = ZSet::default();
            self.held = ZSet::default();
        }
        self.limits = None;
    }

    /// The claim's share after the jobs with a priority, given `window`, the first `slots` due jobs
    /// without a priority in due order: its jobs without any key entry, then up to the slots left from
    /// the keys in turn (the only ready key takes them all), each key within `limits` (the key `""`
    /// under none). Each comes with its due time. Also says whether a key was parked at its max running.
    pub(super) fn claim(
        &mut self,
        window: Vec<(i64, String)>,
        slots: usize,
        limits: KeyLimits,
        now: i64,
    ) -> (Vec<(i64, String)>, bool) {
        let mut out: Vec<(i64, String)> = window
            .into_iter()
            .filter(|(_, id)| !self.jobs.contains_key(id))
            .collect();
        self.limits = Some(limits);
        let mut left = slots.saturating_sub(out.len());
        let mut parked = false;
        if left == 0 {
            return (out, parked);
        }
        for (_, key) in self.waiting.take_up_to(now, usize::MAX) {
            self.waiting.remove(&key);
            if !self.ready.contains(&key) {
                self.ready.insert(&key, self.vt);
            }
        }
        // Rates' TATs and holds that have passed say nothing more.
        for (_, key) in self.tat.take_up_to(now.saturating_mul(1000), usize::MAX) {
            self.tat.remove(&key);
        }
        for (_, key) in self.held.take_up_to(now, usize::MAX) {
            self.held.remove(&key);
        }
        // Each turn claims a job or files a key elsewhere; bounded, as on Redis.
        let mut turns = 4 * left + 16;
        while left > 0 && turns > 0 {
            turns -= 1;
            let Some((tag, key)) = self.ready.pop_first() else {
                break;
            };
            let limited = key != UNKEYED;
            // A key's own limits replace the claim's for it.
            let limits = self.own.get(&key).copied().unwrap_or(limits);
            let (key_max, rate) = (limits.max_running_per_key(), limits.rate_per_key());
            let mut cap = if self.ready.len() == 0 { left } else { 1 };
            let mut running = 0;
            if limited && key_max > 0 {
                running = self.running.get(&key).copied().unwrap_or(0);
                // At its max: parked until one of its leases ends.
                cap = cap.min(key_max.saturating_sub(running) as usize);
            }
            let mut go_at = None;
            if limited && cap > 0 {
                if let Some(until) = self.held.score(&key) {
                    (go_at, cap) = (Some(until), 0);
                }
            }
            let mut budget = None;
            if let (true, true, Some(rate)) = (limited, cap > 0, rate) {
                let stored = self.tat.score(&key).map_or(0.0, |us| us as f64 / 1000.0);
                let b = Budget::at(rate, stored, now);
                if b.allowed < 1 {
                    (go_at, cap) = (Some(Budget::next_at(rate, b.tat)), 0);
                } else {
                    cap = cap.min(b.allowed);
                    budget = Some((rate, b));
                }
            }
            let taken = self.take_due(&key, cap, now);
            let took = taken.len();
            if took > 0 {
                self.vt = tag;
                left = left.saturating_sub(took);
                if limited && key_max > 0 {
                    for (_, id) in &taken {
                        if let Some(filed) = self.jobs.get_mut(id) {
                            filed.counted = true;
                        }
                    }
                    running += took as u32;
                    self.running.insert(key.clone(), running);
                }
                if let Some((rate, b)) = budget {
                    let tat = b.after(rate, took);
                    self.tat.insert(&key, (tat * 1000.0).round() as i64);
                    if Budget::at(rate, tat, now).allowed < 1 {
                        go_at = Some(Budget::next_at(rate, tat));
                    }
                }
                out.extend(taken);
            }
            match self.head(&key) {
                None => self.drop_key(&key),
                Some(_) if limited && key_max > 0 && running >= key_max => {
                    // Parked at its max running: the end of one of its leases files it again.
                    self.parked.insert(key);
                    parked = true;
                }
                Some(head) => match go_at.filter(|at| *at > now) {
                    Some(at) => self.waiting.insert(&key, at.max(head)),
                    None if head <= now => {
                        let tag = if took > 0 { tag.saturating_add(1) } else { tag };
                        self.ready.insert(&key, tag);
                    }
                    None => self.waiting.insert(&key, head),
                },
            }
        }
        (out, parked)
    }

    /// When a claim may next find a job, after a claim of a topic with keyed jobs, given the topic's
    /// earliest entry in `due`: now (that entry's time) when a key is ready, else the earlier of the
    /// first waiting key's time and that entry's when it has no key; none when neither (every key with a
    /// due job is parked at its max running: the end of a lease hints).
    pub(super) fn next_due(&self, first: Option<(i64, &str)>) -> Option<i64> {
        if self.ready.len() > 0 {
            return first.map(|(at, _)| at);
        }
        let waiting = self.waiting.first_score();
        match first {
            Some((at, id))
                if !self.jobs.contains_key(id)
                    && at <= MAX_DUE_MS
                    && waiting.is_none_or(|w| at < w) =>
            {
                Some(at)
            }
            _ => waiting,
        }
    }

    /// Takes up to `n` of `key`'s earliest jobs due by `now` out of its queue.
    fn take_due(&mut self, key: &str, n: usize, now: i64) -> Vec<(i64, String)> {
        let mut taken = Vec::new();
        if let Some(queue) = self.queues.get_mut(key) {
            while taken.len() < n && queue.first().is_some_and(|(at, _)| *at <= now) {
                taken.extend(queue.pop_first());
            }
        }
        for (_, id) in &taken {
            if let Some(filed) = self.jobs.get_mut(id) {
                filed.queued_at = None;
            }
        }
        taken
    }

    /// A lease of a job of `key` that counted against its max running ended: it runs one fewer, and
    /// when it was parked it is filed again.
    fn release(&mut self, key: &str, now: i64) {
        if let Some(n) = self.running.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.running.remove(key);
            }
        }
        self.unpark(key, now);
    }

    /// Files `key` again if it was parked at its max running: ready at `vt` when its first job is due
    /// (the claimers want a hint), else waiting for it.
    fn unpark(&mut self, key: &str, now: i64) {
        if self.parked.remove(key) {
            match self.head(key) {
                Some(at) if at <= now => {
                    self.ready.insert(key, self.vt);
                    self.readied = true;
                }
                Some(at) => self.waiting.insert(key, at),
                None => self.drop_key(key),
            }
        }
    }

    /// Removes job `id`, due at `at`, from `key`'s queue (the caller files the key again).
    fn unqueue(&mut self, key: &str, at: i64, id: &str) {
        if let Some(queue) = self.queues.get_mut(key) {
            queue.remove(&(at, id.to_owned()));
        }
    }

    /// The due time of `key`'s earliest job in `due`.
    fn head(&self, key: &str) -> Option<i64> {
        self.queues.get(key)?.first().map(|(at, _)| *at)
    }

    /// Files `key` after a job of it was filed due at `at`: a key ready, parked, or waiting for a time
    /// no later stays as it is; else it is ready at `vt` when the job is due now (and the claimers want
    /// a hint), or waits until `at`. A key waiting for its rate or a hold may so be looked at sooner:
    /// the claim files it again.
    fn place(&mut self, key: &str, at: i64, now: i64) {
        if self.ready.contains(key) || self.parked.contains(key) {
            return;
        }
        if self.waiting.score(key).is_some_and(|w| w <= at) {
            return;
        }
        if at <= now {
            self.waiting.remove(key);
            self.ready.insert(key, self.vt);
            self.readied = true;
        } else {
            self.waiting.insert(key, at);
        }
    }

    /// Files `key` again after a job left its queue: forgotten when it has none left; a ready key whose
    /// jobs are all in the future now waits for its earliest; a waiting key waits no earlier than its
    /// earliest job.
    fn after_removal(&mut self, key: &str, now: i64) {
        let Some(head) = self.head(key) else {
            self.drop_key(key);
            return;
        };
        if self.parked.contains(key) {
            return;
        }
        if self.ready.contains(key) {
            if head > now {
                self.ready.remove(key);
                self.waiting.insert(key, head);
            }
        } else {
            let at = self.waiting.score(key).map_or(head, |w| w.max(head));
            self.waiting.insert(key, at);
        }
    }

    /// Forgets `key`'s turn (it has no job in `due`), and the virtual time once no key has one. Its
    /// running jobs, rate and hold stay while they matter.
    fn drop_key(&mut self, key: &str) {
        self.queues.remove(key);
        self.ready.remove(key);
        self.waiting.remove(key);
        self.parked.remove(key);
        if self.queues.is_empty() {
            self.vt = 0;
        }
    }
}

/// What operators see of the keys (see [`OpsStore::busiest_keys`](crate::store::OpsStore::busiest_keys)).
impl Fair {
    /// Key `key`'s load as operators see it (as [`Fair::busiest`] and `fair_keys.lua` say it): its jobs
    /// queued, running, until when it is held back (a hold, or its rate when that is later) and its
    /// own limits.
    pub(super) fn load_of(&self, key: &str, now: i64) -> crate::store::KeyLoad {
        let mut held = self.held.score(key).unwrap_or(0);
        if let Some(waits) = self.waiting.score(key).filter(|w| *w > held) {
            if self.tat.contains(key) {
                held = waits;
            }
        }
        crate::store::KeyLoad {
            key: key.to_owned(),
            queued: self.queues.get(key).map_or(0, |q| q.len() as u64),
            running: u64::from(self.running.get(key).copied().unwrap_or(0)),
            held_until_ms: (held > now).then_some(held),
            own_limits: self.own.get(key).copied(),
        }
    }

    /// The limits per key of the last claim of keyed jobs (see [`crate::store::KeysPage::limits`]).
    pub(super) fn limits(&self) -> Option<KeyLimits> {
        self.limits
    }

    /// The busiest keys by jobs queued (then by key), at most `limit`.
    pub(super) fn busiest(&self, limit: usize, now: i64) -> crate::store::KeysPage {
        let mut keys: Vec<crate::store::KeyLoad> = self
            .queues
            .keys()
            .map(|key| self.load_of(key, now))
            .collect();
        keys.sort_by(|a, b| b.queued.cmp(&a.queued).then_with(|| a.key.cmp(&b.key)));
        let total = keys.len() as u64;
        keys.truncate(limit);
        crate::store::KeysPage {
            keys,
            total,
            sampled: false,
            running_counted: !self.running.is_empty(),
            limits: self.limits,
        }
    }
}
