//! One topic's finished jobs kept, waiters and progress (the layout of `outcomes.lua`): a job that
//! ends is kept when the topic keeps finished jobs, announced when a caller waits for it, and its
//! progress forgotten.

use std::collections::HashMap;

use super::super::zset::ZSet;
use super::{StoredJob, Topic};
use crate::store::{
    DoneState, Ended, Kept, Lease, Lookup, PageEntry, Progress, Retention, StoredState, Watch,
};
use crate::time::add_ms;

/// Most kept jobs one keep deletes beyond what it kept (bounded steps, as on Redis).
const TRIM_EXTRA: usize = 16;

#[derive(Debug, Default)]
pub(in crate::store::memory) struct Outcomes {
    /// The topic's retention (see [`crate::store::WorkerStore::retain`]).
    keep: Option<Retention>,
    /// Kept finished jobs by when they finished.
    done: ZSet,
    kept: HashMap<String, Kept>,
    /// Waited ids by until when.
    waited: ZSet,
    /// How waited jobs ended, and when, while they are waited for.
    told: HashMap<String, (Ended, i64)>,
    progress: HashMap<String, Progress>,
    /// The batches following the topic's jobs, and their recorded ends (see `follow.rs`).
    pub(in crate::store::memory) follows: super::follow::Follows,
    /// What this step announced, for the store to send once it lets go of its lock.
    pub(in crate::store::memory) announced: Vec<Announced>,
}

/// An announcement of this topic: a waited job's end or progress.
#[derive(Debug)]
pub(in crate::store::memory) enum Announced {
    Ended(String, Ended),
    Progress(String, Progress),
}

impl Outcomes {
    /// A job ended: kept (unless dead) when the topic keeps finished jobs, announced when waited,
    /// recorded for the batches that follow it. Every way a job ends comes here.
    fn end(&mut self, id: &str, record: Vec<u8>, ended: Ended, now: i64) {
        self.progress.remove(id);
        self.follows.on_end(id, &ended);
        let state = match &ended {
            Ended::Succeeded { .. } => Some(DoneState::Succeeded),
            Ended::Cancelled => Some(DoneState::Cancelled),
            Ended::Dead { .. } => None,
        };
        if let (Some(keep), Some(state)) = (self.keep, state) {
            let result = match &ended {
                Ended::Succeeded { result } => result.clone(),
                _ => Vec::new(),
            };
            self.done.insert(id, now);
            let kept = Kept {
                state,
                at_ms: now,
                record,
                result,
            };
            self.kept.insert(id.to_owned(), kept);
            self.trim(Some(keep), now, 1 + TRIM_EXTRA);
        }
        if self.waited.contains(id) {
            self.told.insert(id.to_owned(), (ended.clone(), now));
            self.announced.push(Announced::Ended(id.to_owned(), ended));
        }
    }

    /// Drops up to `limit` waiters whose time ended, and what they were told.
    fn drop_waiters(&mut self, now: i64, limit: usize) {
        for (_, old) in self.waited.take_up_to(now - 1, limit) {
            self.waited.remove(&old);
            self.told.remove(&old);
        }
    }

    /// Registers a waiter of `id` until `until`.
    fn register(&mut self, id: &str, until: i64, now: i64) {
        self.drop_waiters(now, 16);
        if self.waited.score(id).is_none_or(|u| u < until) {
            self.waited.insert(id, until);
        }
    }

    /// Deletes kept jobs beyond `keep` (all without one), oldest first, at most `limit`.
    fn trim(&mut self, keep: Option<Retention>, now: i64, limit: usize) -> u64 {
        let mut gone = Vec::new();
        let over = match keep {
            Some(k) => {
                // Older than the age: finished before now - age.
                let age = i64::try_from(k.max_age_ms).unwrap_or(i64::MAX);
                gone.extend(
                    self.done
                        .take_up_to(now.saturating_sub(age).saturating_sub(1), limit)
                        .into_iter()
                        .map(|(_, id)| id),
                );
                (self.done.len() - gone.len()).saturating_sub(k.max_count as usize)
            }
            None => limit,
        };
        let more = over.min(limit - gone.len());
        let skip = gone.len();
        gone.extend(
            self.done
                .iter()
                .skip(skip)
                .take(more)
                .map(|(_, id)| id.to_owned()),
        );
        for id in &gone {
            self.done.remove(id);
            self.kept.remove(id);
        }
        gone.len() as u64
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.done.len() == 0
            && self.kept.is_empty()
            && self.waited.len() == 0
            && self.told.is_empty()
            && self.progress.is_empty()
            && self.follows.is_empty()
    }
}

impl Topic {
    /// A live job ends (done or cancelled): forgotten, then kept and announced.
    pub(super) fn end(&mut self, id: &str, ended: Ended, now: i64) {
        let record = self.forget(id, now).unwrap_or_default();
        self.outcomes.end(id, record, ended, now);
    }

    /// A live job died (already buried): announced.
    pub(super) fn announce_death(&mut self, id: &str, reason: &str, now: i64) {
        let ended = Ended::Dead {
            reason: reason.to_owned(),
        };
        self.outcomes.end(id, Vec::new(), ended, now);
    }

    /// The kept finish of `id`, when newer than its newest listed death (or it has none).
    pub(super) fn kept_job(&self, id: &str, died_at: Option<i64>) -> Option<StoredJob> {
        let kept = self.outcomes.kept.get(id)?;
        if died_at.is_some_and(|died| died > kept.at_ms) {
            return None;
        }
        let state = StoredState::Done {
            cancelled: kept.state == DoneState::Cancelled,
            done_at_ms: kept.at_ms,
        };
        let mut job = StoredJob::new(state, kept.record.clone());
        if kept.state == DoneState::Succeeded {
            job.result = Some(kept.result.clone());
        }
        Some(job)
    }

    /// The kept finished jobs, by when they finished (the listing of [`crate::store::PageState::Done`]).
    pub(super) fn done(&self) -> &ZSet {
        &self.outcomes.done
    }

    /// A kept finished job as an entry of a listing.
    pub(super) fn done_entry(&self, id: &str, score: i64) -> Option<PageEntry> {
        let kept = self.outcomes.kept.get(id)?;
        Some(PageEntry {
            id: id.to_owned(),
            score,
            record: kept.record.clone(),
            stalls: 0,
            holder: None,
            death: None,
            ended: Some(kept.ended()),
            key: None,
        })
    }

    /// A live job's progress.
    pub(super) fn progress_of(&self, id: &str) -> Option<Progress> {
        self.outcomes.progress.get(id).cloned()
    }

    /// See [`crate::store::JobStore::outcome`].
    pub(in crate::store::memory) fn outcome(&mut self, id: &str, watch: Watch, now: i64) -> Lookup {
        let (wait_ms, expect, since) = match watch {
            Watch::Live(ms) => (ms, false, -1),
            Watch::Expect {
                wait_ms,
                since_ms: 0,
            } => {
                // The first lookup: what an older job of the id was told is not this one's.
                self.outcomes.told.remove(id);
                (wait_ms, true, now)
            }
            Watch::Expect { wait_ms, since_ms } => (wait_ms, true, since_ms),
            _ => (0, false, -1),
        };
        let until = add_ms(now, wait_ms);
        if self.due.contains(id) || self.active.contains(id) {
            if wait_ms > 0 {
                self.outcomes.register(id, until, now);
            }
            return Lookup::Live {
                progress: self.progress_of(id),
                now_ms: now,
            };
        }
        // Its told end (this job's, whatever its time), or a newer kept finish or death after `since`.
        let told = self.outcomes.told.get(id).cloned();
        let kept = self.outcomes.kept.get(id).map(|k| (k.ended(), k.at_ms));
        let dead = self
            .deaths_of(id)
            .next_back()
            .and_then(|member| self.graves.get(member))
            .map(|g| {
                let ended = Ended::Dead {
                    reason: g.reason.clone(),
                };
                (ended, g.died_at_ms)
            });
        let newest = [kept, dead]
            .into_iter()
            .flatten()
            .filter(|(_, at)| *at > since)
            .fold(told, |best, (ended, at)| match best {
                Some((_, best_at)) if best_at >= at => best,
                _ => Some((ended, at)),
            });
        match newest {
            Some((ended, at_ms)) => Lookup::Ended { ended, at_ms },
            None if expect => {
                self.outcomes.register(id, until, now);
                Lookup::Expected { since_ms: since }
            }
            None => Lookup::Unknown,
        }
    }

    /// See [`crate::store::WorkerStore::retain`].
    pub(in crate::store::memory) fn retain(
        &mut self,
        keep: Option<Retention>,
        limit: usize,
        now: i64,
    ) -> u64 {
        self.outcomes.keep = keep;
        self.outcomes.drop_waiters(now, limit);
        self.outcomes.trim(keep, now, limit)
    }

    /// See [`crate::store::WorkerStore::progress`].
    pub(in crate::store::memory) fn record_progress(&mut self, updates: Vec<(Lease, Progress)>) {
        for ((id, token), progress) in updates {
            if !self.held(&id, token) {
                continue;
            }
            if self.outcomes.waited.contains(&id) {
                let announced = Announced::Progress(id.clone(), progress.clone());
                self.outcomes.announced.push(announced);
            }
            self.outcomes.progress.insert(id, progress);
        }
    }
}
