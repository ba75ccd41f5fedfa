//! Who follows a topic's jobs (the batches they are members of, the jobs that wait for them), and the
//! ends recorded for them until [`WorkflowStore::deliver_ends`](crate::store::WorkflowStore::deliver_ends)
//! hands them over.
//!
//! A job's first end consumes its followers and records the end, in the same step as the end itself
//! (see `Outcomes::end`). A topic whose jobs nobody follows pays one check of an empty map per end.

use std::collections::{HashMap, VecDeque};

use super::Topic;
use crate::store::{Ended, MemberState};

/// The followers of a topic's jobs, and their recorded ends.
#[derive(Debug, Default)]
pub(in crate::store::memory) struct Follows {
    /// What follows each live job, by job id.
    followers: HashMap<String, Vec<Follower>>,
    /// Ends not yet delivered, oldest first.
    ends: VecDeque<RecordedEnd>,
    /// An end was recorded in this step: the store wakes the topic's workers once it lets go of its
    /// lock.
    woke: bool,
}

/// What follows a job: a batch it is a member of, or a job that waits for it (see `deps.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::store::memory) enum Follower {
    /// The batch of this id.
    Batch(String),
    /// The job `id` of store topic `topic`, parked under `nonce` (a job of that id parked again later
    /// is another follower).
    Job {
        topic: String,
        id: String,
        nonce: u64,
    },
}

/// A followed job's end, waiting to be delivered to what followed it.
#[derive(Debug)]
pub(in crate::store::memory) struct RecordedEnd {
    /// The job's id.
    pub(in crate::store::memory) id: String,
    /// How it ended, as its batches count it.
    pub(in crate::store::memory) state: MemberState,
    /// Why it died (empty unless it did).
    pub(in crate::store::memory) reason: String,
    /// What followed it.
    pub(in crate::store::memory) followers: Vec<Follower>,
}

/// How a batch counts an end.
fn member_state(ended: &Ended) -> MemberState {
    match ended {
        Ended::Succeeded { .. } => MemberState::Succeeded,
        Ended::Cancelled => MemberState::Cancelled,
        Ended::Dead { .. } => MemberState::Dead,
    }
}

impl Follows {
    /// Job `id` ended: when followed, its followers go and the end is recorded for them. A job nobody
    /// follows costs the check of an empty map (or one lookup, when the topic has followed jobs).
    pub(super) fn on_end(&mut self, id: &str, ended: &Ended) {
        if self.followers.is_empty() {
            return;
        }
        if let Some(followers) = self.followers.remove(id) {
            let reason = match ended {
                Ended::Dead { reason } => reason.clone(),
                _ => String::new(),
            };
            self.ends.push_back(RecordedEnd {
                id: id.to_owned(),
                state: member_state(ended),
                reason,
                followers,
            });
            self.woke = true;
        }
    }

    /// Whether this step recorded an end (and forgets it).
    pub(in crate::store::memory) fn take_woke(&mut self) -> bool {
        std::mem::take(&mut self.woke)
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.followers.is_empty() && self.ends.is_empty()
    }
}

impl Topic {
    /// `follower` follows live job `id` (once, however often it is asked).
    pub(in crate::store::memory) fn follow(&mut self, id: &str, follower: Follower) {
        let followers = &mut self.outcomes.follows.followers;
        let of_id = match followers.get_mut(id) {
            Some(of_id) => of_id,
            None => followers.entry(id.to_owned()).or_default(),
        };
        if !of_id.contains(&follower) {
            of_id.push(follower);
        }
    }

    /// Whether ends wait to be delivered (reported by every claim).
    pub(super) fn ends_pending(&self) -> bool {
        !self.outcomes.follows.ends.is_empty()
    }

    /// Takes up to `max` recorded ends, oldest first.
    pub(in crate::store::memory) fn take_ends(&mut self, max: usize) -> Vec<RecordedEnd> {
        let ends = &mut self.outcomes.follows.ends;
        let n = max.min(ends.len());
        ends.drain(..n).collect()
    }
}
