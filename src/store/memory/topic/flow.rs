//! Flow control on one topic, as `claim.lua` does it: a provider's hold, max running, the rate's
//! budget (see [`crate::flow`]), and priorities.

use super::{resolve, Topic};
use crate::flow::{Budget, KeyLimits, RateLimit};
use crate::store::{ClaimBatch, ClaimRequest, Due, HeldBack};

impl Topic {
    /// Holds claims for `delay_ms` (never shortening a hold in force).
    pub(in crate::store::memory) fn hold(&mut self, delay_ms: u64, now: i64) {
        self.hold_until = self.hold_until.max(resolve(Due::In(delay_ms), now));
    }

    /// With jobs due now and the topic not paused: how many the claim may take, and the rate's
    /// budget it takes them from. Marks `batch` when a limit holds jobs back.
    pub(super) fn flow_before_claim(
        &mut self,
        request: &ClaimRequest,
        now: i64,
        batch: &mut ClaimBatch,
    ) -> (usize, Option<(RateLimit, Budget)>) {
        if self.hold_until > now {
            batch.held_back = Some(HeldBack::Provider);
            return (0, None);
        }
        let mut max = request.max;
        if request.max_running > 0 {
            let room = (request.max_running as usize).saturating_sub(self.active.len());
            if room == 0 {
                self.full = true;
                batch.held_back = Some(HeldBack::MaxRunning);
            }
            max = max.min(room);
        }
        let mut budget = None;
        if let (Some(rate), true) = (request.rate, max > 0) {
            let b = Budget::at(rate, self.rate_tat, now);
            max = max.min(b.allowed);
            budget = Some((rate, b));
        }
        (max, budget)
    }

    /// After the claim: spends the rate's budget, and moves the next due time to when the next job may
    /// go (none while the topic is full: the finish that frees a slot hints).
    pub(super) fn flow_after_claim(
        &mut self,
        budget: Option<(RateLimit, Budget)>,
        batch: &mut ClaimBatch,
        now: i64,
    ) {
        if let Some((rate, b)) = budget {
            let tat = b.after(rate, batch.jobs.len());
            if !batch.jobs.is_empty() {
                self.rate_tat = tat;
            }
            let at = Budget::next_at(rate, tat);
            if let Some(next) = batch.next_due_ms.filter(|next| at > now && at > *next) {
                if next <= now {
                    batch.held_back = Some(HeldBack::Rate);
                }
                batch.next_due_ms = Some(at);
            }
        }
        match batch.held_back {
            Some(HeldBack::MaxRunning) => batch.next_due_ms = None,
            Some(HeldBack::Provider) => {
                batch.next_due_ms = batch.next_due_ms.map(|next| next.max(self.hold_until));
            }
            _ => {}
        }
    }

    /// Files job `id`, due at `due_at`, among the jobs with a priority if it has one.
    pub(super) fn file_prio(&mut self, id: &str, due_at: i64, now: i64) {
        self.prio_ready.remove(id);
        self.prio_wait.remove(id);
        if let Some(p) = self.priority.get(id) {
            if due_at <= now {
                self.prio_ready.insert(id, due_at - (i64::from(*p) << 48));
            } else {
                self.prio_wait.insert(id, due_at);
            }
        }
    }

    /// Up to `max` due jobs, those with a priority first (highest first, then the earliest due), then
    /// the others by due time; when the topic has keyed jobs, the keyed ones among the others go
    /// round-robin between their keys, each within `key_limits` (see `fair.rs`).
    pub(super) fn due_first(
        &mut self,
        now: i64,
        max: usize,
        key_limits: KeyLimits,
    ) -> Vec<(i64, String)> {
        for (due_at, id) in self.prio_wait.take_up_to(now, usize::MAX) {
            self.file_prio(&id, due_at, now);
        }
        let mut out: Vec<(i64, String)> = self
            .prio_ready
            .take_up_to(i64::MAX, max)
            .into_iter()
            .filter_map(|(_, id)| Some((self.due.score(&id)?, id)))
            .collect();
        let fair = !self.fair.is_empty();
        if fair {
            for (_, id) in &out {
                self.fair.claimed(id, key_limits.max_running_per_key(), now);
            }
        } else {
            self.fair.clear_idle();
        }
        if out.len() < max {
            let slots = max - out.len();
            let more = self.due.take_up_to(now, max);
            let window: Vec<_> = more
                .into_iter()
                .filter(|(_, id)| !self.prio_ready.contains(id))
                .take(slots)
                .collect();
            if fair {
                let (taken, parked) = self.fair.claim(window, slots, key_limits, now);
                out.extend(taken);
                // A key parked at its max running: the finish that frees a slot hints.
                self.full |= parked;
            } else {
                out.extend(window);
            }
        }
        out
    }
}
