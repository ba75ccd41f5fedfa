//! Batches in the operations API: the namespace's batches newest first, one batch's status (counts,
//! closed, completed, which callbacks fired), and its members with their states, paged by offset. They
//! are the client's views ([`BatchStatus`], [`BatchMember`]), which serialize to the JSON the CLI prints.

use serde::Serialize;

use super::{JobDetail, Ops, MAX_PAGE};
use crate::client::{BatchMember, BatchStatus};
use crate::error::Result;
use crate::store::MemberState;
use crate::validate::validate_batch_id;

impl JobDetail {
    /// The batch it belongs to, as a member or a callback: its metadata `postpone.batch` (see
    /// [`JobContext::batch_id`](crate::JobContext::batch_id)); `None` for a job of no batch.
    pub fn batch_id(&self) -> Option<&str> {
        self.meta.get(crate::meta::BATCH_KEY).map(String::as_str)
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
    pub batches: Vec<BatchStatus>,
    /// The offset of the next page; `None` when this is the last.
    pub next: Option<usize>,
}

/// One page of a batch's members, in the order they were added.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct MemberPage {
    /// The members.
    pub members: Vec<BatchMember>,
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
        let mut batches: Vec<BatchStatus> = found.into_iter().map(Into::into).collect();
        let next = next_offset(&mut batches, offset, limit);
        Ok(BatchPage { batches, next })
    }

    /// One batch's status; `None` when there is no batch of this id (or it completed more than
    /// [`BATCH_KEEP_MS`](crate::store::workflow::BATCH_KEEP_MS) ago). An id that cannot name a batch
    /// (see [`validate_batch_id`]) fails with [`Error::InvalidBatchId`](crate::Error::InvalidBatchId).
    pub async fn batch(&self, id: &str) -> Result<Option<BatchStatus>> {
        validate_batch_id(id)?;
        let status = self.client.backend().batch(id).await?;
        Ok(status.map(Into::into))
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
        let mut members: Vec<BatchMember> = found.into_iter().map(Into::into).collect();
        let next = next_offset(&mut members, offset, limit);
        Ok(MemberPage { members, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_of_a_partition_is_named_by_its_topic() {
        let member = |topic: &str| crate::store::BatchMember {
            topic: topic.to_owned(),
            id: "a#1".to_owned(),
            state: MemberState::Dead,
        };
        let m = BatchMember::from(member("mail.send#3"));
        assert_eq!(
            (m.topic.as_str(), m.partition, m.id.as_str()),
            ("mail.send", 3, "a#1")
        );
        let m = BatchMember::from(member("mail.send"));
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
