//! Batches in the operations API: the namespace's batches newest first, one batch's status (counts,
//! closed, completed, which callbacks fired), and its members with their states, paged by offset.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Ops, MAX_PAGE};
use crate::error::Result;
use crate::partition::split_store_topic;
use crate::store::{BatchMember, BatchStatus, CallbackKind, MemberState};
use crate::time::ms_to_time;
use crate::validate::validate_batch_id;

/// A batch as operators see it: what it counts, and which of its callbacks fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchInfo {
    /// Its id.
    pub id: String,
    /// Its description (text of the application's: escape it where it is shown as markup).
    pub description: String,
    /// When it was created (by the store's clock).
    pub created_at: DateTime<Utc>,
    /// Its members.
    pub total: u64,
    /// Members that succeeded.
    pub succeeded: u64,
    /// Members that died.
    pub dead: u64,
    /// Members that were cancelled.
    pub cancelled: u64,
    /// Members not ended yet (due, running, or being retried).
    pub pending: u64,
    /// Whether it is closed (takes no more members).
    pub closed: bool,
    /// When it completed: closed, and its last member ended. `None` while it is not.
    pub completed_at: Option<DateTime<Utc>>,
    /// Its callbacks, each with whether it fired (its job was enqueued, or is being).
    pub callbacks: Vec<BatchCallback>,
}

/// A callback of a batch, and whether it fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchCallback {
    /// Which callback: `success`, `complete` or `death` in JSON.
    pub kind: CallbackKind,
    /// Whether it fired.
    pub fired: bool,
}

impl BatchInfo {
    fn new(s: BatchStatus) -> Self {
        BatchInfo {
            pending: s.pending(),
            created_at: ms_to_time(s.created_at_ms),
            completed_at: s.completed_at_ms.map(ms_to_time),
            callbacks: s
                .callbacks
                .iter()
                .map(|&(kind, fired)| BatchCallback { kind, fired })
                .collect(),
            id: s.id,
            description: s.description,
            total: s.total,
            succeeded: s.succeeded,
            dead: s.dead,
            cancelled: s.cancelled,
            closed: s.closed,
        }
    }

    /// Whether every member ended, the batch being closed.
    pub fn completed(&self) -> bool {
        self.completed_at.is_some()
    }

    /// The callbacks that fired, by name (`"success"`, `"complete"`, `"death"`), in the order they are
    /// stored.
    pub fn fired(&self) -> Vec<&'static str> {
        self.callbacks
            .iter()
            .filter(|c| c.fired)
            .map(|c| c.kind.as_str())
            .collect()
    }
}

/// A member of a batch: the job (its topic, partition and id, as [`Ops::job`] finds it) and how it
/// ended, as far as its batch knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchMemberInfo {
    /// Its topic's name.
    pub topic: String,
    /// Its partition (0 for a topic of one partition).
    pub partition: u16,
    /// Its id.
    pub id: String,
    /// `pending`, `succeeded`, `dead` or `cancelled` in JSON.
    pub state: MemberState,
}

impl BatchMemberInfo {
    fn new(m: BatchMember) -> Self {
        // The store names a member by its store topic: the topic, or `<topic>#<p>` for partition p.
        let (topic, partition) = split_store_topic(&m.topic);
        BatchMemberInfo {
            topic: topic.to_owned(),
            partition,
            id: m.id,
            state: m.state,
        }
    }
}

/// The name of a member's state: `"pending"`, `"succeeded"`, `"dead"` or `"cancelled"`.
pub fn member_state_name(state: MemberState) -> &'static str {
    match state {
        MemberState::Succeeded => "succeeded",
        MemberState::Dead => "dead",
        MemberState::Cancelled => "cancelled",
        _ => "pending",
    }
}

/// One page of the namespace's batches, newest first.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct BatchPage {
    /// The batches.
    pub batches: Vec<BatchInfo>,
    /// The offset of the next page; `None` when this is the last.
    pub next: Option<usize>,
}

/// One page of a batch's members, in the order they were added.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct MemberPage {
    /// The members.
    pub members: Vec<BatchMemberInfo>,
    /// The offset of the next page; `None` when this is the last.
    pub next: Option<usize>,
}

/// The next page's offset, given what a read of `limit + 1` found.
fn next_offset<T>(items: &mut Vec<T>, offset: usize, limit: usize) -> Option<usize> {
    let more = items.len() > limit;
    items.truncate(limit);
    more.then(|| offset.saturating_add(limit))
}

impl Ops {
    /// The namespace's batches, newest first: skipping `offset`, at most `limit` (1 to [`MAX_PAGE`]),
    /// with the offset of the next page. A batch completed more than
    /// [`BATCH_KEEP_MS`](crate::store::workflow::BATCH_KEEP_MS) ago is gone.
    pub async fn batches(&self, offset: usize, limit: usize) -> Result<BatchPage> {
        let limit = limit.clamp(1, MAX_PAGE);
        let found = self.client.backend().batches(offset, limit + 1).await?;
        let mut batches: Vec<BatchInfo> = found.into_iter().map(BatchInfo::new).collect();
        let next = next_offset(&mut batches, offset, limit);
        Ok(BatchPage { batches, next })
    }

    /// One batch's status; `None` when there is no batch of this id (or it completed more than
    /// [`BATCH_KEEP_MS`](crate::store::workflow::BATCH_KEEP_MS) ago). An id that cannot name a batch
    /// (see [`validate_batch_id`]) fails with [`Error::InvalidBatchId`](crate::Error::InvalidBatchId).
    pub async fn batch(&self, id: &str) -> Result<Option<BatchInfo>> {
        validate_batch_id(id)?;
        let status = self.client.backend().batch(id).await?;
        Ok(status.map(BatchInfo::new))
    }

    /// A page of a batch's members in the order they were added, each with its state: skipping
    /// `offset`, at most `limit` (1 to [`MAX_PAGE`]), with the offset of the next page. An unknown
    /// batch has no members ([`Ops::batch`] tells whether it exists).
    pub async fn batch_members(&self, id: &str, offset: usize, limit: usize) -> Result<MemberPage> {
        validate_batch_id(id)?;
        let limit = limit.clamp(1, MAX_PAGE);
        let found = self
            .client
            .backend()
            .batch_members(id, offset, limit + 1)
            .await?;
        let mut members: Vec<BatchMemberInfo> =
            found.into_iter().map(BatchMemberInfo::new).collect();
        let next = next_offset(&mut members, offset, limit);
        Ok(MemberPage { members, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_of_a_partition_is_named_by_its_topic() {
        let member = |topic: &str| BatchMember {
            topic: topic.to_owned(),
            id: "a#1".to_owned(),
            state: MemberState::Dead,
        };
        let m = BatchMemberInfo::new(member("mail.send#3"));
        assert_eq!(
            (m.topic.as_str(), m.partition, m.id.as_str()),
            ("mail.send", 3, "a#1")
        );
        let m = BatchMemberInfo::new(member("mail.send"));
        assert_eq!((m.topic.as_str(), m.partition), ("mail.send", 0));
    }

    #[test]
    fn a_page_says_where_the_next_starts() {
        let mut items = vec![1, 2, 3];
        assert_eq!(next_offset(&mut items, 10, 2), Some(12));
        assert_eq!(items, [1, 2]);
        let mut items = vec![1, 2];
        assert_eq!(next_offset(&mut items, 10, 2), None);
    }
}
