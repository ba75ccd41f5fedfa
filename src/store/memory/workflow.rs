//! [`WorkflowStore`] in memory: batches and the delivery of followed jobs' ends (see
//! [`crate::store::workflow`]).
//!
//! Batches sit in a map of their own (see `batch.rs`), locked after the topics' map (never the other
//! way round), so each call is one atomic step across the batch and every topic it touches: nothing is
//! ever half done, and [`recover_batches`](WorkflowStore::recover_batches) only forgets old batches.
//! Ends are recorded by the ending step (see `topic/follow.rs`) and applied by
//! [`deliver_ends`](WorkflowStore::deliver_ends), as on Redis.

use std::collections::HashMap;
use std::sync::PoisonError;

use async_trait::async_trait;

use super::batch::Batches;
use super::topic::Topic;
use super::MemoryStore;
use crate::error::{Error, Result};
use crate::store::{
    AfterOutcome, BatchAdded, BatchCreated, BatchJob, BatchMember, BatchStatus, MemberState,
    NewBatch, NewJob, OnParentFailure, ParentRef, WorkflowStore,
};

/// One workflow step: every topic and every batch, under the store's lock, and the hints to send once
/// it lets go.
struct Step<'a> {
    topics: &'a mut HashMap<String, Topic>,
    batches: &'a mut Batches,
    now: i64,
    /// The earliest due time to hint about, by topic.
    hints: HashMap<String, i64>,
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
            state.follow(&id, batch);
        }
        if let Some(at) = hint {
            let earliest = self.hints.entry(job.topic).or_insert(at);
            *earliest = (*earliest).min(at);
        }
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
        };
        let out = step(&mut state);
        let hints = state.hints;
        drop(batches);
        drop(topics);
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
                for batch in &end.batches {
                    step.count_end(batch, topic, &end.id, end.state);
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
        _topic: &str,
        _job: NewJob,
        _parents: Vec<ParentRef>,
        _on_failure: OnParentFailure,
    ) -> Result<AfterOutcome> {
        Err(Error::InvalidConfig {
            reason: "jobs that wait for jobs are not built on this backend yet".into(),
        })
    }
}
