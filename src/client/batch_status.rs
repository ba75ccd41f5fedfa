//! Reading batches through the client: one batch's progress, its members, the namespace's batches.

use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};

use super::Client;
use crate::error::{Error, Result};
use crate::partition::split_store_topic;
use crate::store::{self, CallbackKind, MemberState};
use crate::time::ms_to_time;
use crate::validate::validate_batch_id;

/// Most batches or members read in one call.
const MAX_PAGE: usize = 10_000;

/// A batch's progress: its counts, whether it is closed and complete, and which callbacks fired.
///
/// The client ([`Client::batch_status`]) and the operations API ([`Ops::batch`](crate::ops::Ops::batch))
/// both answer with it. Its JSON has its fields, `pending` among them, and each callback as
/// `{"kind": "success" | "complete" | "death", "fired": bool}`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchStatus {
    /// Its id.
    pub id: String,
    /// Its description (text of the application's: escape it where it is shown as markup).
    pub description: String,
    /// When it was created (the store's clock).
    pub created_at: DateTime<Utc>,
    /// How many members it has.
    pub total: u64,
    /// Members that succeeded.
    pub succeeded: u64,
    /// Members that died.
    pub dead: u64,
    /// Members that were cancelled.
    pub cancelled: u64,
    /// Whether it is closed (it takes no more members).
    pub closed: bool,
    /// When it completed: closed, with every member ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// Its callbacks, each with whether it fired (its job was enqueued).
    pub callbacks: Vec<(CallbackKind, bool)>,
}

impl BatchStatus {
    /// Members not ended yet (due, running, or being retried).
    pub fn pending(&self) -> u64 {
        self.total
            .saturating_sub(self.succeeded + self.dead + self.cancelled)
    }

    /// Whether it completed (closed, every member ended).
    pub fn is_complete(&self) -> bool {
        self.completed_at.is_some()
    }

    /// Whether its callback of this kind fired; `None` when it has none of this kind.
    pub fn fired(&self, kind: CallbackKind) -> Option<bool> {
        self.callbacks
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, fired)| *fired)
    }
}

/// A callback in [`BatchStatus`]'s JSON.
#[derive(Serialize)]
struct CallbackDoc {
    kind: CallbackKind,
    fired: bool,
}

/// [`BatchStatus`]'s JSON: its fields, with `pending` beside the counts.
#[derive(Serialize)]
struct StatusDoc<'a> {
    id: &'a str,
    description: &'a str,
    created_at: DateTime<Utc>,
    total: u64,
    succeeded: u64,
    dead: u64,
    cancelled: u64,
    pending: u64,
    closed: bool,
    completed_at: Option<DateTime<Utc>>,
    callbacks: Vec<CallbackDoc>,
}

impl Serialize for BatchStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        StatusDoc {
            id: &self.id,
            description: &self.description,
            created_at: self.created_at,
            total: self.total,
            succeeded: self.succeeded,
            dead: self.dead,
            cancelled: self.cancelled,
            pending: self.pending(),
            closed: self.closed,
            completed_at: self.completed_at,
            callbacks: self
                .callbacks
                .iter()
                .map(|&(kind, fired)| CallbackDoc { kind, fired })
                .collect(),
        }
        .serialize(serializer)
    }
}

impl From<store::BatchStatus> for BatchStatus {
    fn from(s: store::BatchStatus) -> Self {
        BatchStatus {
            id: s.id,
            description: s.description,
            created_at: ms_to_time(s.created_at_ms),
            total: s.total,
            succeeded: s.succeeded,
            dead: s.dead,
            cancelled: s.cancelled,
            closed: s.closed,
            completed_at: s.completed_at_ms.map(ms_to_time),
            callbacks: s.callbacks,
        }
    }
}

/// One member of a batch, as far as its batch knows: the job (its topic, partition and id, as
/// [`Ops::job`](crate::ops::Ops::job) finds it) and how it ended. Its JSON has these four fields, the
/// state as `pending`, `succeeded`, `dead` or `cancelled`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchMember {
    /// Its topic.
    pub topic: String,
    /// Its partition (0 for a topic of one partition).
    pub partition: u16,
    /// Its id.
    pub id: String,
    /// How it ended, if it did.
    pub state: MemberState,
}

impl From<store::BatchMember> for BatchMember {
    fn from(m: store::BatchMember) -> Self {
        // The store names a member by its store topic: the topic, or `<topic>#<p>` for partition p.
        let (topic, partition) = split_store_topic(&m.topic);
        BatchMember {
            topic: topic.to_owned(),
            partition,
            id: m.id,
            state: m.state,
        }
    }
}

impl Client {
    /// A batch's progress: its counts (total, succeeded, dead, cancelled, pending), whether it is
    /// closed and complete, and which callbacks fired. A callback's handler finds its batch's id with
    /// [`JobContext::batch_id`](crate::JobContext::batch_id). Fails with [`Error::BatchNotFound`]
    /// when there is no batch of this id (a completed batch is kept 7 days).
    ///
    /// ```
    /// # use postpone::{Client, Job};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize, Job)]
    /// # #[job(topic = "emails")]
    /// # struct Email { to: String }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// let client = Client::memory();
    /// client.batch().id("welcome:7").add(Email { to: "a@example.com".into() }).enqueue().await?;
    /// let status = client.batch_status("welcome:7").await?;
    /// assert_eq!((status.total, status.succeeded, status.pending()), (1, 0, 1));
    /// assert!(matches!(
    ///     client.batch_status("welcome:8").await,
    ///     Err(postpone::Error::BatchNotFound { .. })
    /// ));
    /// # Ok(()) }
    /// ```
    pub async fn batch_status(&self, id: &str) -> Result<BatchStatus> {
        validate_batch_id(id)?;
        match self.backend().batch(id).await? {
            Some(status) => Ok(status.into()),
            None => Err(Error::BatchNotFound { id: id.to_owned() }),
        }
    }

    /// A batch's members in the order they were added, skipping `offset`, at most `limit` (up to
    /// 10,000), each with its state as far as the batch knows. Empty for a batch that does not exist.
    pub async fn batch_members(
        &self,
        id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<BatchMember>> {
        validate_batch_id(id)?;
        let members = self
            .backend()
            .batch_members(id, offset, limit.min(MAX_PAGE))
            .await?;
        Ok(members.into_iter().map(Into::into).collect())
    }

    /// The namespace's batches, newest first, skipping `offset`, at most `limit` (up to 10,000).
    pub async fn batches(&self, offset: usize, limit: usize) -> Result<Vec<BatchStatus>> {
        let batches = self.backend().batches(offset, limit.min(MAX_PAGE)).await?;
        Ok(batches.into_iter().map(Into::into).collect())
    }
}
