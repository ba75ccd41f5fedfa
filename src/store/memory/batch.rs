//! One batch as the memory backend keeps it, and the namespace's batches: members in add order, their
//! counts, and which callbacks fired. These are plain functions of the state and the time; enqueueing
//! what they decide (members, fired callbacks) is `workflow.rs`'s part.

use std::collections::{BTreeSet, HashMap};

use crate::store::workflow::BATCH_KEEP_MS;
use crate::store::{BatchJob, BatchMember, BatchStatus, CallbackKind, MemberState, NewBatch};
use crate::time::add_ms;

/// A callback: its job, and whether it fired.
#[derive(Debug)]
struct Callback {
    kind: CallbackKind,
    job: BatchJob,
    fired: bool,
}

/// One batch.
#[derive(Debug)]
pub(super) struct Batch {
    description: String,
    created_at: i64,
    /// At most one of each kind, in the order of [`CallbackKind::ALL`].
    callbacks: Vec<Callback>,
    /// Members in the order they were added.
    members: Vec<BatchMember>,
    /// Each member's place in `members`, by store topic then id.
    places: HashMap<String, HashMap<String, usize>>,
    succeeded: u64,
    dead: u64,
    cancelled: u64,
    closed: bool,
    completed_at: Option<i64>,
}

impl Batch {
    /// A batch with `batch`'s description and callbacks, no member yet, open.
    fn new(batch: &mut NewBatch, now: i64) -> Self {
        let mut callbacks: Vec<Callback> = Vec::new();
        for (kind, job) in std::mem::take(&mut batch.callbacks) {
            // At most one of each kind (the client checks it): the first one counts.
            if !callbacks.iter().any(|c| c.kind == kind) {
                let fired = false;
                callbacks.push(Callback { kind, job, fired });
            }
        }
        callbacks.sort_by_key(|c| c.kind);
        Batch {
            description: std::mem::take(&mut batch.description),
            created_at: now,
            callbacks,
            members: Vec::new(),
            places: HashMap::new(),
            succeeded: 0,
            dead: 0,
            cancelled: 0,
            closed: false,
            completed_at: None,
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed
    }

    /// Adds a member; returns whether it was new (a member already in the batch changes nothing).
    pub(super) fn add(&mut self, job: &BatchJob) -> bool {
        let ids = match self.places.get_mut(&job.topic) {
            Some(ids) => ids,
            None => self.places.entry(job.topic.clone()).or_default(),
        };
        if ids.contains_key(&job.job.id) {
            return false;
        }
        ids.insert(job.job.id.clone(), self.members.len());
        self.members.push(BatchMember {
            topic: job.topic.clone(),
            id: job.job.id.clone(),
            state: MemberState::Pending,
        });
        true
    }

    /// Counts the end of member `id` of `topic` (its first end only); returns the callbacks it fires.
    pub(super) fn count_end(
        &mut self,
        topic: &str,
        id: &str,
        state: MemberState,
        now: i64,
    ) -> Vec<BatchJob> {
        let place = self.places.get(topic).and_then(|ids| ids.get(id)).copied();
        let Some(member) = place.and_then(|p| self.members.get_mut(p)) else {
            return Vec::new();
        };
        if member.state != MemberState::Pending || state == MemberState::Pending {
            return Vec::new();
        }
        member.state = state;
        let mut fired = Vec::new();
        match state {
            MemberState::Succeeded => self.succeeded += 1,
            MemberState::Cancelled => self.cancelled += 1,
            MemberState::Dead => {
                self.dead += 1;
                fired.extend(self.fire(CallbackKind::Death));
            }
            MemberState::Pending => {}
        }
        fired.extend(self.check_complete(now));
        fired
    }

    /// Closes the batch (it takes no more members); returns the callbacks that fire when every member
    /// ended already.
    pub(super) fn close(&mut self, now: i64) -> Vec<BatchJob> {
        self.closed = true;
        self.check_complete(now)
    }

    /// Completes a closed batch whose members all ended (once): fires `Complete`, and `Success` when
    /// every member succeeded.
    fn check_complete(&mut self, now: i64) -> Vec<BatchJob> {
        let ended = self.succeeded + self.dead + self.cancelled;
        if !self.closed || self.completed_at.is_some() || ended < self.members.len() as u64 {
            return Vec::new();
        }
        self.completed_at = Some(now);
        let mut fired: Vec<BatchJob> = self.fire(CallbackKind::Complete).into_iter().collect();
        if self.succeeded == self.members.len() as u64 {
            fired.extend(self.fire(CallbackKind::Success));
        }
        fired
    }

    /// The callback of `kind`, when the batch has one that has not fired yet; marks it fired.
    fn fire(&mut self, kind: CallbackKind) -> Option<BatchJob> {
        let callback = self
            .callbacks
            .iter_mut()
            .find(|c| c.kind == kind && !c.fired)?;
        callback.fired = true;
        Some(callback.job.clone())
    }

    /// Whether it completed more than [`BATCH_KEEP_MS`] ago: then it is as good as gone.
    fn expired(&self, now: i64) -> bool {
        self.completed_at
            .is_some_and(|at| add_ms(at, BATCH_KEEP_MS) < now)
    }

    pub(super) fn status(&self, id: &str) -> BatchStatus {
        BatchStatus {
            id: id.to_owned(),
            description: self.description.clone(),
            created_at_ms: self.created_at,
            total: self.members.len() as u64,
            succeeded: self.succeeded,
            dead: self.dead,
            cancelled: self.cancelled,
            closed: self.closed,
            completed_at_ms: self.completed_at,
            callbacks: self.callbacks.iter().map(|c| (c.kind, c.fired)).collect(),
        }
    }

    pub(super) fn members(&self, offset: usize, limit: usize) -> Vec<BatchMember> {
        self.members
            .iter()
            .skip(offset)
            .take(limit)
            .cloned()
            .collect()
    }
}

/// The namespace's batches.
#[derive(Debug, Default)]
pub(super) struct Batches {
    by_id: HashMap<String, Batch>,
    /// Ids by creation time (ties by id, as in a Redis sorted set).
    created: BTreeSet<(i64, String)>,
    /// Completed batches' ids by completion time.
    completed: BTreeSet<(i64, String)>,
}

impl Batches {
    /// Batch `id`, unless none has this id or it completed more than [`BATCH_KEEP_MS`] ago.
    pub(super) fn get(&self, id: &str, now: i64) -> Option<&Batch> {
        self.by_id.get(id).filter(|b| !b.expired(now))
    }

    pub(super) fn get_mut(&mut self, id: &str, now: i64) -> Option<&mut Batch> {
        self.by_id.get_mut(id).filter(|b| !b.expired(now))
    }

    /// Creates batch `id` (open, without members, with `batch`'s description and callbacks) unless a
    /// batch has this id; returns whether it did. A batch of the id that completed more than
    /// [`BATCH_KEEP_MS`] ago is forgotten first.
    pub(super) fn create(&mut self, id: &str, batch: &mut NewBatch, now: i64) -> bool {
        if self.by_id.get(id).is_some_and(|b| b.expired(now)) {
            self.forget(id);
        }
        if self.by_id.contains_key(id) {
            return false;
        }
        self.created.insert((now, id.to_owned()));
        self.by_id.insert(id.to_owned(), Batch::new(batch, now));
        true
    }

    /// Notes that batch `id` completed (after a step that may have completed it).
    pub(super) fn note_completed(&mut self, id: &str) {
        if let Some(at) = self.by_id.get(id).and_then(|b| b.completed_at) {
            self.completed.insert((at, id.to_owned()));
        }
    }

    /// The batches, newest first, skipping `offset`, at most `limit`.
    pub(super) fn list(&self, offset: usize, limit: usize, now: i64) -> Vec<BatchStatus> {
        let newest_first = self.created.iter().rev();
        let live = newest_first.filter_map(|(_, id)| Some((id, self.get(id, now)?)));
        live.skip(offset)
            .take(limit)
            .map(|(id, b)| b.status(id))
            .collect()
    }

    /// Forgets up to `max` batches completed more than [`BATCH_KEEP_MS`] ago; returns how many.
    pub(super) fn forget_expired(&mut self, max: usize, now: i64) -> usize {
        let expired: Vec<String> = self
            .completed
            .iter()
            .take_while(|(at, _)| add_ms(*at, BATCH_KEEP_MS) < now)
            .take(max)
            .map(|(_, id)| id.clone())
            .collect();
        for id in &expired {
            self.forget(id);
        }
        expired.len()
    }

    fn forget(&mut self, id: &str) {
        if let Some(b) = self.by_id.remove(id) {
            self.created.remove(&(b.created_at, id.to_owned()));
            if let Some(at) = b.completed_at {
                self.completed.remove(&(at, id.to_owned()));
            }
        }
    }
}
