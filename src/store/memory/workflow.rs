//! [`WorkflowStore`] in memory: batches and the delivery of followed jobs' ends (see
//! [`crate::store::workflow`]).
//!
//! Batches sit in a map of their own (see `batch.rs`), locked after the topics' map (never the other
//! way round), so each call is one atomic step across the batch and every topic it touches: nothing is
//! ever half done, and [`recover_batches`](WorkflowStore::recover_batches) only forgets old batches.
//! Ends are recorded by the ending step (see `topic/follow.rs`) and applied by
//! [`deliver_ends`](WorkflowStore::deliver_ends), as on Redis: to batches, and to jobs that wait for
//! jobs (see `topic/deps.rs`), which are parked by [`enqueue_after`](WorkflowStore::enqueue_after) in
//! one step with the following of their parents (so no end can arrive before its job is parked).

use std::collections::HashMap;
use std::sync::PoisonError;

use async_trait::async_trait;

use super::batch::Batches;
use super::topic::{parent_failure, Follower, RecordedEnd, Topic};
use super::MemoryStore;
use crate::error::Result;
use crate::store::{
    AfterOutcome, BatchAdded, BatchCreated, BatchJob, BatchMember, BatchStatus, Lookup,
    MemberState, NewBatch, NewJob, OnParentFailure, ParentRef, Watch, WorkflowStore,
};

/// One workflow step: every topic and every batch, under the store's lock, and the hints to send once
/// it lets go.
struct Step<'a> {
    topics: &'a mut HashMap<String, Topic>,
    batches: &'a mut Batches,
    now: i64,
    /// The earliest due time to hint about, by topic.
    hints: HashMap<String, i64>,
    /// Topics where a job ended in this step (their workers are woken for the ends recorded, their
    /// waiters told), once the step lets go of the lock.
    ended_in: Vec<String>,
}

/// Notes `at` as a due time to hint `topic`'s workers about, when earlier than the one noted.
fn note_hint(hints: &mut HashMap<String, i64>, topic: &str, at: Option<i64>) {
    let Some(at) = at else {
        return;
    };
    match hints.get_mut(topic) {
        Some(earliest) => *earliest = (*earliest).min(at),
        None => {
            hints.insert(topic.to_owned(), at);
        }
    }
}

impl Step<'_> {
    /// Enqueues `job` into its topic as [`JobStore::enqueue`](crate::store::JobStore::enqueue) does
    /// (an id live there stays as it is); with `follower`, that batch follows the job.
    fn put(&mut self, job: BatchJob, follower: Option<&str>) {
        let state = match self.topics.get_mut(&job.topic) {
            Some(state) => state,
            None => self.topics.entry(job.topic.clone()).or_default(),
        };
        let id = job.job.id.clone();
        let (_, hint) = state.enqueue(job.job, self.now);
        if let Some(batch) = follower {
            state.follow(&id, Follower::Batch(batch.to_owned()));
        }
        note_hint(&mut self.hints, &job.topic, hint);
    }

    /// Adds members to batch `id` and enqueues the new ones, followed by the batch; returns how many
    /// were new.
    fn add_members(&mut self, id: &str, jobs: Vec<BatchJob>) -> u64 {
        let mut new = 0;
        for job in jobs {
            let Some(batch) = self.batches.get_mut(id, self.now) else {
                break;
            };
            if batch.add(&job) {
                new += 1;
                self.put(job, Some(id));
            }
        }
        new
    }

    /// Closes batch `id`, firing what its completion fires.
    fn close(&mut self, id: &str) {
        let fired = match self.batches.get_mut(id, self.now) {
            Some(batch) => batch.close(self.now),
            None => return,
        };
        self.fired(id, fired);
    }

    /// Counts a member's end in batch `id`, firing what it fires. A batch that is gone counts nothing.
    fn count_end(&mut self, id: &str, topic: &str, member: &str, state: MemberState) {
        let fired = match self.batches.get_mut(id, self.now) {
            Some(batch) => batch.count_end(topic, member, state, self.now),
            None => return,
        };
        self.fired(id, fired);
    }

    /// Enqueues `job` into `topic` to wait for `parents` (see [`WorkflowStore::enqueue_after`]).
    fn enqueue_after(
        &mut self,
        topic: &str,
        job: NewJob,
        parents: Vec<ParentRef>,
        policy: OnParentFailure,
    ) -> AfterOutcome {
        let now = self.now;
        let mut live: Vec<ParentRef> = Vec::with_capacity(parents.len());
        let mut done: Vec<ParentRef> = Vec::new();
        let mut failed = None;
        for parent in parents {
            if live.contains(&parent) || done.contains(&parent) {
                continue;
            }
            let lookup = match self.topics.get_mut(&parent.topic) {
                Some(state) => state.outcome(&parent.id, Watch::No, now),
                None => Lookup::Unknown,
            };
            match lookup {
                Lookup::Live { .. } => live.push(parent),
                Lookup::Ended { ended, .. } => {
                    if policy != OnParentFailure::Run && failed.is_none() {
                        failed = parent_failure(&parent, &ended);
                    }
                    done.push(parent);
                }
                _ => return AfterOutcome::MissingParent(parent),
            }
        }
        let state = match self.topics.get_mut(topic) {
            Some(state) => state,
            None => self.topics.entry(topic.to_owned()).or_default(),
        };
        if let Some(outcome) = state.live_outcome(&job.id) {
            return AfterOutcome::Exists(outcome);
        }
        if let Some(reason) = failed {
            let ended = state.end_at_once(job, policy, reason, now);
            self.ended_in.push(topic.to_owned());
            return AfterOutcome::Ended(ended);
        }
        if live.is_empty() {
            let (outcome, hint) = state.enqueue(job, now);
            note_hint(&mut self.hints, topic, hint);
            return AfterOutcome::Enqueued(outcome);
        }
        let id = job.id.clone();
        let parents_left = u32::try_from(live.len()).unwrap_or(u32::MAX);
        let nonce = state.park(job, live.clone(), policy, now);
        for parent in live {
            let follower = Follower::Job {
                topic: topic.to_owned(),
                id: id.clone(),
                nonce,
            };
            if let Some(state) = self.topics.get_mut(&parent.topic) {
                state.follow(&parent.id, follower);
            }
        }
        AfterOutcome::Waiting { parents_left }
    }

    /// Delivers `end`, of a job of `parent_topic`, to job `id` of `topic` that waits for it under
    /// `nonce`.
    fn hear(&mut self, parent_topic: &str, end: &RecordedEnd, topic: &str, id: &str, nonce: u64) {
        let Some(state) = self.topics.get_mut(topic) else {
            return;
        };
        let parent = ParentRef::new(parent_topic, end.id.as_str());
        let hint = state.hear(id, nonce, &parent, end.state, &end.reason, self.now);
        note_hint(&mut self.hints, topic, hint);
        if self.ended_in.last().is_none_or(|t| t != topic) {
            self.ended_in.push(topic.to_owned());
        }
    }

    /// Enqueues the callbacks batch `id` just fired (each fires once: the batch marked them).
    fn fired(&mut self, id: &str, fired: Vec<BatchJob>) {
        self.batches.note_completed(id);
        for job in fired {
            self.put(job, None);
        }
    }
}

impl MemoryStore {
    /// Runs one workflow step under the lock of the topics, then of the batches; then sends its hints.
    fn workflow_step<R>(&self, step: impl FnOnce(&mut Step<'_>) -> R) -> R {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = Step {
            topics: &mut topics,
            batches: &mut batches,
            now: self.clock.now_ms(),
            hints: HashMap::new(),
            ended_in: Vec::new(),
        };
        let out = step(&mut state);
        let (now, mut hints, mut ended_in) = (state.now, state.hints, state.ended_in);
        // Where a job ended, its followers' ends wake the topic's workers and its waiters are told.
        ended_in.sort_unstable();
        ended_in.dedup();
        let mut announced = Vec::new();
        for topic in ended_in {
            let Some(state) = topics.get_mut(&topic) else {
                continue;
            };
            if state.outcomes.follows.take_woke() {
                note_hint(&mut hints, &topic, Some(now));
            }
            let told = std::mem::take(&mut state.outcomes.announced);
            if !told.is_empty() {
                announced.push((topic, told));
            }
        }
        drop(batches);
        drop(topics);
        for (topic, told) in announced {
            self.announce(&topic, told);
        }
        for (topic, at) in hints {
            self.hint(&topic, Some(at));
        }
        out
    }

    /// Reads the batches.
    fn read_batches<R>(&self, read: impl FnOnce(&Batches, i64) -> R) -> R {
        let batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        read(&batches, self.clock.now_ms())
    }
}

#[async_trait]
impl WorkflowStore for MemoryStore {
    async fn batch_create(&self, id: &str, mut batch: NewBatch) -> Result<BatchCreated> {
        Ok(self.workflow_step(|step| {
            let jobs = std::mem::take(&mut batch.jobs);
            if !step.batches.create(id, &mut batch, step.now) {
                return BatchCreated::Exists;
            }
            step.add_members(id, jobs);
            if batch.close {
                step.close(id);
            }
            BatchCreated::Created
        }))
    }

    async fn batch_add(&self, id: &str, jobs: Vec<BatchJob>, close: bool) -> Result<BatchAdded> {
        Ok(self.workflow_step(|step| {
            match step.batches.get(id, step.now) {
                None => return BatchAdded::NotFound,
                Some(batch) if batch.is_closed() => return BatchAdded::Closed,
                Some(_) => {}
            }
            let new = step.add_members(id, jobs);
            if close {
                step.close(id);
            }
            BatchAdded::Added { new }
        }))
    }

    async fn batch(&self, id: &str) -> Result<Option<BatchStatus>> {
        Ok(self.read_batches(|batches, now| batches.get(id, now).map(|b| b.status(id))))
    }

    async fn batch_members(
        &self,
        id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<BatchMember>> {
        Ok(self.read_batches(|batches, now| {
            let batch = batches.get(id, now);
            batch.map_or_else(Vec::new, |b| b.members(offset, limit))
        }))
    }

    async fn batches(&self, offset: usize, limit: usize) -> Result<Vec<BatchStatus>> {
        Ok(self.read_batches(|batches, now| batches.list(offset, limit, now)))
    }

    async fn deliver_ends(&self, topic: &str, max: usize) -> Result<usize> {
        Ok(self.workflow_step(|step| {
            let Some(state) = step.topics.get_mut(topic) else {
                return 0;
            };
            let ends = state.take_ends(max);
            for end in &ends {
                for follower in &end.followers {
                    match follower {
                        Follower::Batch(batch) => step.count_end(batch, topic, &end.id, end.state),
                        Follower::Job {
                            topic: t,
                            id,
                            nonce,
                        } => step.hear(topic, end, t, id, *nonce),
                    }
                }
            }
            ends.len()
        }))
    }

    /// Nothing is ever half done in memory: this only forgets batches completed more than
    /// [`BATCH_KEEP_MS`](crate::store::workflow::BATCH_KEEP_MS) ago, and returns how many.
    async fn recover_batches(&self, max: usize) -> Result<usize> {
        Ok(self.workflow_step(|step| step.batches.forget_expired(max, step.now)))
    }

    async fn enqueue_after(
        &self,
        topic: &str,
        job: NewJob,
        parents: Vec<ParentRef>,
        on_failure: OnParentFailure,
    ) -> Result<AfterOutcome> {
        Ok(self.workflow_step(|step| step.enqueue_after(topic, job, parents, on_failure)))
    }
}
