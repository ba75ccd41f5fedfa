//! A topic's dead letters, one entry per death: list, requeue, purge, trim, and their delivery to the
//! hook. A death is listed (`dead`, `dead_ids`) until requeued, purged or trimmed, and pending
//! (`dead_pending`) until its hook succeeded; its grave stays while it is either.

use std::ops::Bound;

use super::Topic;
use crate::store::{DeadEntry, DeadSelection, Death, RequeueOutcome, TrimPolicy};
use crate::time::{add_ms, millis_i64};

impl Topic {
    /// The listed deaths of `id`, oldest first.
    pub(super) fn deaths_of<'a>(
        &'a self,
        id: &str,
    ) -> impl DoubleEndedIterator<Item = &'a String> + use<'a> {
        // Members "<id>\n<seq>": from "<id>\n" up to (not including) "<id>\v", the next byte.
        let range = (
            Bound::Included(format!("{id}\n")),
            Bound::Excluded(format!("{id}\u{b}")),
        );
        self.dead_ids.range(range)
    }

    fn entry(&self, member: &str) -> Option<DeadEntry> {
        self.graves.get(member).map(|g| g.entry())
    }

    /// Takes a death off the listing; its grave goes too unless its hook is pending. Returns whether it
    /// was listed.
    fn unlist(&mut self, member: &str) -> bool {
        let listed = self.dead.remove(member).is_some();
        self.dead_ids.remove(member);
        if !self.dead_pending.contains(member) {
            self.graves.remove(member);
        }
        listed
    }

    pub(in crate::store::memory) fn dead_list(
        &self,
        offset: usize,
        limit: usize,
    ) -> Vec<DeadEntry> {
        let newest_first = self.dead.iter().rev().skip(offset).take(limit);
        newest_first.filter_map(|(_, m)| self.entry(m)).collect()
    }

    pub(in crate::store::memory) fn dead_of(&self, id: &str, limit: usize) -> Vec<DeadEntry> {
        let newest_first = self.deaths_of(id).rev().take(limit);
        newest_first.filter_map(|m| self.entry(m)).collect()
    }

    /// Makes a listed death's job due again (now); returns the outcome and the hint.
    pub(in crate::store::memory) fn dead_requeue(
        &mut self,
        death: &Death,
        record: Vec<u8>,
        now: i64,
    ) -> (RequeueOutcome, Option<i64>) {
        let member = death.member();
        if !self.dead.contains(&member) {
            return (RequeueOutcome::NotFound, None);
        }
        if self.jobs.contains_key(&death.id) {
            return (RequeueOutcome::LiveJobExists, None);
        }
        // It comes back under the key it died with (a job that had none, in a topic with keyed jobs,
        // under the key "").
        let key = self.graves.get(&member).and_then(|g| g.key.clone());
        self.unlist(&member);
        let hint = self.is_earliest(now).then_some(now);
        self.fair.set_key(&death.id, key, false, now);
        self.put_due(&death.id, now, now);
        self.jobs.insert(death.id.clone(), record);
        let hint = self.fair_hint(hint, now);
        (RequeueOutcome::Requeued { due_at_ms: now }, hint)
    }

    pub(in crate::store::memory) fn dead_purge(&mut self, which: DeadSelection<'_>) -> u64 {
        match which {
            DeadSelection::Death(death) => u64::from(self.unlist(&death.member())),
            DeadSelection::All => {
                let all: Vec<String> = self.dead.iter().map(|(_, m)| m.to_owned()).collect();
                all.iter().filter(|m| self.unlist(m)).count() as u64
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
        for (rank, (died_at, member)) in self.dead.iter().enumerate() {
            if victims.len() >= limit || (died_at >= older_than_ms && rank >= beyond_keep) {
                break;
            }
            if !self.dead_pending.contains(member) {
                victims.push(member.to_owned());
            }
        }
        for member in &victims {
            self.unlist(member);
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
            .filter_map(|(_, member)| {
                self.dead_pending.insert(&member, until);
                self.entry(&member)
            })
            .collect()
    }

    pub(in crate::store::memory) fn dead_ack(&mut self, deaths: &[Death]) {
        for death in deaths {
            let member = death.member();
            if self.dead_pending.remove(&member).is_some() && !self.dead.contains(&member) {
                self.graves.remove(&member);
            }
        }
    }

    pub(in crate::store::memory) fn dead_retry(&mut self, death: &Death, delay_ms: u64, now: i64) {
        let member = death.member();
        if self.dead_pending.contains(&member) {
            self.dead_pending.insert(&member, add_ms(now, delay_ms));
        }
    }
}
