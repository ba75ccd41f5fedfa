//! A topic's dead letters: list, requeue, purge, trim, and their delivery to the hook.

use super::Topic;
use crate::store::{DeadEntry, DeadSelection, RequeueOutcome, TrimPolicy};
use crate::time::{add_ms, millis_i64};

impl Topic {
    pub(in crate::store::memory) fn dead_list(
        &self,
        offset: usize,
        limit: usize,
    ) -> Vec<DeadEntry> {
        let newest_first = self.dead.iter().rev().skip(offset).take(limit);
        newest_first
            .filter_map(|(_, id)| self.dead_entry(id))
            .collect()
    }

    /// Moves a dead job back to due (now); returns the outcome and the hint.
    pub(in crate::store::memory) fn dead_requeue(
        &mut self,
        id: &str,
        record: Vec<u8>,
        now: i64,
    ) -> (RequeueOutcome, Option<i64>) {
        if !self.graves.contains_key(id) {
            return (RequeueOutcome::NotFound, None);
        }
        if self.jobs.contains_key(id) {
            return (RequeueOutcome::LiveJobExists, None);
        }
        self.unbury(id);
        let hint = self.is_earliest(now).then_some(now);
        self.due.insert(id, now);
        self.jobs.insert(id.to_owned(), record);
        (RequeueOutcome::Requeued { due_at_ms: now }, hint)
    }

    pub(in crate::store::memory) fn dead_purge(&mut self, which: DeadSelection<'_>) -> u64 {
        match which {
            DeadSelection::Id(id) => u64::from(self.unbury(id).is_some()),
            DeadSelection::All => {
                let n = self.graves.len() as u64;
                self.graves.clear();
                self.dead.clear();
                self.dead_pending.clear();
                n
            }
        }
    }

    pub(in crate::store::memory) fn dead_trim(
        &mut self,
        policy: TrimPolicy,
        limit: usize,
        now: i64,
    ) -> u64 {
        let older_than_ms = match policy.max_age {
            Some(age) => now.saturating_sub(millis_i64(age)),
            None => i64::MIN,
        };
        let beyond_keep = match policy.keep {
            Some(keep) => self
                .dead
                .len()
                .saturating_sub(usize::try_from(keep).unwrap_or(usize::MAX)),
            None => 0,
        };
        let mut victims = Vec::new();
        for (rank, (died_at, id)) in self.dead.iter().enumerate() {
            if victims.len() >= limit || (died_at >= older_than_ms && rank >= beyond_keep) {
                break;
            }
            if !self.dead_pending.contains(id) {
                victims.push(id.to_owned());
            }
        }
        for id in &victims {
            self.unbury(id);
        }
        let n = victims.len() as u64;
        self.counters.trimmed += n;
        n
    }

    pub(in crate::store::memory) fn dead_claim(
        &mut self,
        max: usize,
        lease_ms: u64,
        now: i64,
    ) -> Vec<DeadEntry> {
        let due = self.dead_pending.take_up_to(now, max);
        let until = add_ms(now, lease_ms);
        due.into_iter()
            .filter_map(|(_, id)| {
                self.dead_pending.insert(&id, until);
                self.dead_entry(&id)
            })
            .collect()
    }

    pub(in crate::store::memory) fn dead_ack(&mut self, ids: &[String]) {
        for id in ids {
            self.dead_pending.remove(id);
        }
    }

    pub(in crate::store::memory) fn dead_retry(&mut self, id: &str, delay_ms: u64, now: i64) {
        if self.graves.contains_key(id) {
            self.dead_pending.insert(id, add_ms(now, delay_ms));
        }
    }
}
