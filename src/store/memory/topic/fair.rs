//! Fairness by key, as `docs/design/fairness.md` lays it out: a topic's due jobs of different keys are
//! claimed round-robin between keys, a key's own in due order.
//!
//! Each key with a job due now is *ready* with a tag (a virtual time); a claim serves the ready key with
//! the lowest tag, takes its earliest due job (all the slots left when it is the only ready key), and
//! puts it back at tag + 1 while it has a job due. A key whose jobs are all in the future *waits* by the
//! due time of its earliest, and joins the ready keys at the topic's virtual time (`vt`, the tag of the
//! key served last) once that job is due; so does a key that gets a job due now, unless it is ready
//! already (then it keeps its tag). A key with no job left is forgotten.
//!
//! Unlike Redis, which checks its per-key queues against `due` lazily, this state is kept exact: every
//! change of a keyed job's place in `due` comes through here. A topic without keyed jobs pays the check
//! of an empty map per call.

use std::collections::{BTreeSet, HashMap};

use crate::store::memory::zset::ZSet;

/// A live keyed job: its key, and its due time while it is in its key's queue (none while it runs).
#[derive(Debug)]
struct Filed {
    key: String,
    queued_at: Option<i64>,
}

/// The keys of one topic's keyed jobs, and their turns.
#[derive(Debug, Default)]
pub(in crate::store::memory) struct Fair {
    /// Each live keyed job, by id.
    jobs: HashMap<String, Filed>,
    /// Each key's jobs in `due`, by (due time, id); only keys with some.
    queues: HashMap<String, BTreeSet<(i64, String)>>,
    /// Keys with a job due now, by tag, then key.
    ready: ZSet,
    /// Keys whose jobs are all in the future, by the due time of their earliest.
    waiting: ZSet,
    /// The topic's virtual time: the tag of the key served last (0 once no key has a job in `due`).
    vt: i64,
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
            && self.vt == 0
    }

    /// Sets or drops job `id`'s key, as an enqueue (or a replace) gives it. The enqueue files the job
    /// with [`Fair::file`] right after.
    pub(super) fn set_key(&mut self, id: &str, key: Option<String>, now: i64) {
        if key.is_none() && self.jobs.is_empty() {
            return;
        }
        let old = match &key {
            Some(key) => {
                let filed = Filed {
                    key: key.clone(),
                    queued_at: None,
                };
                self.jobs.insert(id.to_owned(), filed)
            }
            None => self.jobs.remove(id),
        };
        if let Some(old) = old {
            if let Some(at) = old.queued_at {
                self.unqueue(&old.key, at, id);
            }
            // The same key keeps its turn: the job is filed again under it at once.
            if key.as_ref() != Some(&old.key) {
                self.refile(&old.key, now);
            }
        }
    }

    /// Files live job `id`, now in `due` at `due_at`, in its key's queue if it has a key (an enqueue, a
    /// retry, an expired lease, a reschedule).
    pub(super) fn file(&mut self, id: &str, due_at: i64, now: i64) {
        if self.jobs.is_empty() {
            return;
        }
        let Some(filed) = self.jobs.get_mut(id) else {
            return;
        };
        let key = filed.key.clone();
        if let Some(old) = filed.queued_at.replace(due_at) {
            self.unqueue(&key, old, id);
        }
        let queue = match self.queues.get_mut(&key) {
            Some(queue) => queue,
            None => self.queues.entry(key.clone()).or_default(),
        };
        queue.insert((due_at, id.to_owned()));
        self.refile(&key, now);
    }

    /// Job `id` was claimed outside the round (it has a priority): out of its key's queue, the key's
    /// turn unchanged.
    pub(super) fn claimed(&mut self, id: &str, now: i64) {
        if self.jobs.is_empty() {
            return;
        }
        let Some(filed) = self.jobs.get_mut(id) else {
            return;
        };
        if let Some(at) = filed.queued_at.take() {
            let key = filed.key.clone();
            self.unqueue(&key, at, id);
            self.refile(&key, now);
        }
    }

    /// Job `id` ended (done, dead, cancelled): its key is forgotten, and the key too when it has no job
    /// left in `due`.
    pub(super) fn forget(&mut self, id: &str, now: i64) {
        if self.jobs.is_empty() {
            return;
        }
        if let Some(Filed {
            key,
            queued_at: Some(at),
        }) = self.jobs.remove(id)
        {
            self.unqueue(&key, at, id);
            self.refile(&key, now);
        }
    }

    /// The claim's share after the jobs with a priority, given `window`, the first `slots` due jobs
    /// without a priority in due order: its unkeyed jobs, then up to the slots left from the keys in
    /// turn (the only ready key takes them all). Each comes with its due time.
    pub(super) fn claim(
        &mut self,
        window: Vec<(i64, String)>,
        slots: usize,
        now: i64,
    ) -> Vec<(i64, String)> {
        let mut out: Vec<(i64, String)> = window
            .into_iter()
            .filter(|(_, id)| !self.jobs.contains_key(id))
            .collect();
        let mut left = slots.saturating_sub(out.len());
        if left == 0 {
            return out;
        }
        for (_, key) in self.waiting.take_up_to(now, usize::MAX) {
            self.waiting.remove(&key);
            self.ready.insert(&key, self.vt);
        }
        while left > 0 {
            let Some((tag, key)) = self.ready.pop_first() else {
                break;
            };
            self.vt = tag;
            let n = if self.ready.len() == 0 { left } else { 1 };
            let taken = self.take_due(&key, n, now);
            left = left.saturating_sub(taken.len());
            out.extend(taken);
            self.put_back(&key, tag.saturating_add(1), now);
        }
        out
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

    /// Puts `key`, just served, back: ready at `tag` while it has a job due, waiting while its jobs are
    /// all in the future, forgotten once it has none.
    fn put_back(&mut self, key: &str, tag: i64, now: i64) {
        match self.head(key) {
            None => self.drop_key(key),
            Some(at) if at <= now => self.ready.insert(key, tag),
            Some(at) => self.waiting.insert(key, at),
        }
    }

    /// Files `key` again after its queue changed: ready (at `vt`, unless it is ready already) when a
    /// job of it is due, waiting when its jobs are all in the future, forgotten when it has none.
    fn refile(&mut self, key: &str, now: i64) {
        match self.head(key) {
            None => self.drop_key(key),
            Some(at) if at <= now => {
                self.waiting.remove(key);
                if !self.ready.contains(key) {
                    self.ready.insert(key, self.vt);
                }
            }
            Some(at) => {
                self.ready.remove(key);
                self.waiting.insert(key, at);
            }
        }
    }

    /// Forgets `key` (it has no job in `due`), and the virtual time once no key has one.
    fn drop_key(&mut self, key: &str) {
        self.queues.remove(key);
        self.ready.remove(key);
        self.waiting.remove(key);
        if self.queues.is_empty() {
            self.vt = 0;
        }
    }
}

/// What operators see of the keys (see [`OpsStore::busiest_keys`](crate::store::OpsStore::busiest_keys)).
impl Fair {
    /// The busiest keys by jobs queued (then by key), at most `limit`.
    pub(super) fn busiest(&self, limit: usize) -> crate::store::KeysPage {
        let mut keys: Vec<crate::store::KeyLoad> = self
            .queues
            .iter()
            .map(|(key, queue)| crate::store::KeyLoad {
                key: key.clone(),
                queued: queue.len() as u64,
                running: 0,
                held_until_ms: None,
            })
            .collect();
        keys.sort_by(|a, b| b.queued.cmp(&a.queued).then_with(|| a.key.cmp(&b.key)));
        let total = keys.len() as u64;
        keys.truncate(limit);
        crate::store::KeysPage {
            keys,
            total,
            sampled: false,
            running_counted: false,
        }
    }
}
