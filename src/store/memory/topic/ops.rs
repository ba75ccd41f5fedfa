//! A topic's side of [`OpsStore`](crate::store::OpsStore): listings by state (kept finished jobs'
//! entries come from `outcomes.rs`), search by id prefix, pause, and per-minute history.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::Topic;
use crate::store::memory::zset::Member;
use crate::store::workflow::WAITING_DUE_MS;
use crate::store::{MinuteCounts, PageEntry, PageQuery, PageState, HISTORY_MINUTES};

/// Per-minute counts, the last [`HISTORY_MINUTES`] minutes with something counted.
#[derive(Debug, Default)]
pub(in crate::store::memory) struct History(BTreeMap<i64, MinuteCounts>);

impl History {
    /// Counts into the minute of `now`, and forgets minutes older than the history keeps.
    pub(in crate::store::memory) fn tally(
        &mut self,
        now: i64,
        add: impl FnOnce(&mut MinuteCounts),
    ) {
        let minute = now.div_euclid(60_000);
        let entry = self.0.entry(minute).or_insert_with(|| MinuteCounts {
            minute_ms: minute * 60_000,
            ..MinuteCounts::default()
        });
        add(entry);
        while let Some((&oldest, _)) = self.0.first_key_value() {
            if oldest > minute - HISTORY_MINUTES {
                break;
            }
            self.0.remove(&oldest);
        }
    }
}

impl Topic {
    /// Pauses or resumes claims.
    pub(in crate::store::memory) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Sets (`Some`) or clears key `key`'s own limits; returns whether a key parked at its max running
    /// was filed again (then the claimers want a hint).
    pub(in crate::store::memory) fn set_key_limits(
        &mut self,
        key: &str,
        limits: Option<crate::KeyLimits>,
        now: i64,
    ) -> bool {
        self.fair.set_own_limits(key, limits, now);
        self.fair.take_readied()
    }

    /// The keys with limits of their own, by key.
    pub(in crate::store::memory) fn key_limits(&self) -> Vec<(String, crate::KeyLimits)> {
        self.fair.own_limits()
    }

    /// The last `minutes` minutes of history, oldest first.
    pub(in crate::store::memory) fn history(&self, minutes: u32, now: i64) -> Vec<MinuteCounts> {
        let minutes = i64::from(minutes).clamp(0, HISTORY_MINUTES);
        let current = now.div_euclid(60_000);
        self.history
            .0
            .range(current - minutes + 1..=current)
            .map(|(_, m)| *m)
            .collect()
    }

    /// A live job as an entry of a listing.
    fn live_entry(&self, id: &str, score: i64) -> PageEntry {
        PageEntry {
            id: id.to_owned(),
            score,
            record: self.jobs.get(id).cloned().unwrap_or_default(),
            stalls: self.stalls.get(id).copied().unwrap_or(0),
            holder: self.leases.get(id).map(|l| l.holder).filter(|h| *h != 0),
            death: None,
            ended: None,
            key: self.key_of(id),
        }
    }

    /// A listed death as an entry of a listing.
    fn dead_entry(&self, member: &str) -> Option<PageEntry> {
        let grave = self.graves.get(member)?;
        Some(PageEntry {
            id: grave.death.id.clone(),
            score: grave.died_at_ms,
            record: grave.record.clone(),
            stalls: 0,
            holder: None,
            death: Some((grave.death.seq, grave.reason.clone())),
            ended: None,
            key: grave.key.clone(),
        })
    }

    fn page_entry(&self, state: PageState, score: i64, member: &str) -> Option<PageEntry> {
        match state {
            PageState::Dead => self.dead_entry(member),
            PageState::Done => self.done_entry(member, score),
            _ => Some(self.live_entry(member, score)),
        }
    }

    /// One page of a listing (see [`OpsStore::page`](crate::store::OpsStore::page)).
    pub(in crate::store::memory) fn page(&self, query: &PageQuery) -> Vec<PageEntry> {
        let set = match query.state {
            PageState::Scheduled | PageState::Waiting => &self.due,
            PageState::Running => &self.active,
            PageState::Dead => &self.dead,
            PageState::Done => self.done(),
        };
        // Jobs that wait for parents sort last in `due`, by id: the scheduled jobs are the members
        // before the first of them, the waiting ones the members from there on.
        let waiting_from = || (WAITING_DUE_MS, String::new());
        let (mut low, mut high) = match query.state {
            PageState::Scheduled => (Bound::Unbounded, Bound::Excluded(waiting_from())),
            PageState::Waiting => (Bound::Included(waiting_from()), Bound::Unbounded),
            _ => (Bound::Unbounded, Bound::Unbounded),
        };
        if let Some(p) = &query.after {
            let after = (p.score, p.member.clone());
            if query.newest_first {
                high = earlier_end(high, after);
            } else {
                low = later_start(low, after);
            }
        }
        if is_empty(&low, &high) {
            return Vec::new();
        }
        let range = set.range((low, high));
        let pick = |(score, member): (i64, &str)| self.page_entry(query.state, score, member);
        if query.newest_first {
            range.rev().filter_map(pick).take(query.limit).collect()
        } else {
            range.filter_map(pick).take(query.limit).collect()
        }
    }

    /// One step of a search by id prefix (see
    /// [`OpsStore::find_prefix`](crate::store::OpsStore::find_prefix)): in id order, the cursor being
    /// the last id (or death) returned.
    pub(in crate::store::memory) fn find_prefix(
        &self,
        state: PageState,
        prefix: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> (Vec<PageEntry>, Option<String>) {
        let limit = limit.max(1);
        if state == PageState::Done {
            return (Vec::new(), None);
        }
        let start = cursor.map_or(Bound::Included(prefix.to_owned()), |c| {
            Bound::Excluded(c.to_owned())
        });
        let members: Vec<String> = match state {
            PageState::Dead => self
                .dead_ids
                .range((start, Bound::Unbounded))
                .take_while(|m| m.starts_with(prefix))
                .take(limit)
                .cloned()
                .collect(),
            live => {
                let set = if live == PageState::Running {
                    &self.active
                } else {
                    &self.due
                };
                // A search of scheduled jobs leaves out the waiting ones, and one of waiting jobs
                // finds only them.
                let listed = |score: i64| match live {
                    PageState::Scheduled => !super::deps::is_waiting(score),
                    PageState::Waiting => super::deps::is_waiting(score),
                    _ => true,
                };
                let mut ids: Vec<&str> = set
                    .iter()
                    .filter(|(score, _)| listed(*score))
                    .map(|(_, id)| id)
                    .filter(|id| id.starts_with(prefix))
                    .filter(|id| cursor.is_none_or(|c| *id > c))
                    .collect();
                ids.sort_unstable();
                ids.into_iter().take(limit).map(str::to_owned).collect()
            }
        };
        let next = (members.len() == limit).then(|| members[limit - 1].clone());
        let entries = members
            .iter()
            .filter_map(|m| match state {
                PageState::Dead => self.dead_entry(m),
                PageState::Running => Some(self.live_entry(m, self.active.score(m)?)),
                PageState::Done => None,
                _ => Some(self.live_entry(m, self.due.score(m)?)),
            })
            .collect();
        (entries, next)
    }
}

/// The later of a listing's start and the start right after `after`.
fn later_start(start: Bound<Member>, after: Member) -> Bound<Member> {
    match start {
        Bound::Included(s) if s > after => Bound::Included(s),
        Bound::Excluded(s) if s >= after => Bound::Excluded(s),
        _ => Bound::Excluded(after),
    }
}

/// The earlier of a listing's end and the end right before `after`.
fn earlier_end(end: Bound<Member>, after: Member) -> Bound<Member> {
    match end {
        Bound::Included(e) if e < after => Bound::Included(e),
        Bound::Excluded(e) if e <= after => Bound::Excluded(e),
        _ => Bound::Excluded(after),
    }
}

/// Whether nothing lies between `start` and `end` (a range the sorted set would refuse to walk).
fn is_empty(start: &Bound<Member>, end: &Bound<Member>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s >= e
        }
        _ => false,
    }
}
