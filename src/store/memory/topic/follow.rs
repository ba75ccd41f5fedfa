//! Who follows a topic's jobs (the batches they are members of), and the ends recorded for them until
//! [`WorkflowStore::deliver_ends`](crate::store::WorkflowStore::deliver_ends) hands them over.
//!
//! A job's first end consumes its followers and records the end, in the same step as the end itself
//! (see `Outcomes::end`). A topic whose jobs nobody follows pays one check of an empty map per end.

use std::collections::{HashMap, VecDeque};

use super::Topic;
use crate::store::{Ended, MemberState};

/// The followers of a topic's jobs, and their recorded ends.
#[derive(Debug, Default)]
pub(in crate::store::memory) struct Follows {
    /// The batches following each live job, by job id.
    followers: HashMap<String, Vec<String>>,
    /// Ends not yet delivered, oldest first.
    ends: VecDeque<RecordedEnd>,
    /// An end was recorded in this step: the store wakes the topic's workers once it lets go of its
    /// lock.
    woke: bool,
}

/// A followed job's end, waiting to be delivered to the batches that followed it.
#[derive(Debug)]
pub(in crate::store::memory) struct RecordedEnd {
    /// The job's id.
    pub(in crate::store::memory) id: String,
    /// How it ended, as its batches count it.
    pub(in crate::store::memory) state: MemberState,
    /// The batches that followed it.
    pub(in crate::store::memory) batches: Vec<String>,
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
        if let Some(batches) = self.followers.remove(id) {
            self.ends.push_back(RecordedEnd {
                id: id.to_owned(),
                state: member_state(ended),
                batches,
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
    /// Batch `batch` follows live job `id` (once, however often it is asked).
    pub(in crate::store::memory) fn follow(&mut self, id: &str, batch: &str) {
        let followers = &mut self.outcomes.follows.followers;
        let batches = match followers.get_mut(id) {
            Some(batches) => batches,
            None => followers.entry(id.to_owned()).or_default(),
        };
        if !batches.iter().any(|b| b == batch) {
            batches.push(batch.to_owned());
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
