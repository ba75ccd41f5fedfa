//! A batch by id, through the client: add members while it is open, close it, read its progress.

use super::batch::{too_many, Stamp};
use super::{BatchMember, BatchStatus, Client, EnqueueItem};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::store::workflow::MAX_BATCH_ADD;
use crate::store::{BatchAdded, BatchJob};
use crate::validate::validate_batch_id;

/// A batch by id: add members while it is open, close it, read its progress. Cheap to clone.
///
/// ```
/// use postpone::{Client, Error, Job};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "imports.row")]
/// struct ImportRow { n: u64 }
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "imports.done")]
/// struct ImportDone { file: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> postpone::Result<()> {
/// let client = Client::memory();
/// let batch = client
///     .batch()
///     .id("import:42")
///     .on_complete(ImportDone { file: "customers.csv".into() })
///     .open()
///     .await?;
/// batch.add(ImportRow { n: 1 }).await?;
/// batch.add_all((2..=3).map(|n| ImportRow { n })).await?;
/// batch.close().await?;
/// assert_eq!(batch.status().await?.total, 3);
/// // Closed: it takes no more members.
/// let late = batch.add(ImportRow { n: 4 }).await;
/// assert!(matches!(late, Err(Error::BatchClosed { .. })));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Batch {
    client: Client,
    id: String,
}

impl Batch {
    pub(super) fn new(client: Client, id: String) -> Self {
        Batch { client, id }
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Adds a member (a job of any type, or an [`EnqueueItem`]) to the open batch and enqueues it.
    /// Returns 1, or 0 when it was a member already (nothing changed). Fails with
    /// [`Error::BatchClosed`] once the batch is closed and [`Error::BatchNotFound`] when there is no
    /// batch of this id.
    pub async fn add<J: Job>(&self, job: impl Into<EnqueueItem<J>>) -> Result<u64> {
        self.add_all(std::iter::once(job.into())).await
    }

    /// Adds members of one type, all or none, and enqueues them (at most
    /// [`MAX_BATCH_ADD`](crate::store::workflow::MAX_BATCH_ADD) in one call). Returns how many were
    /// not members already. Fails as [`add`](Self::add) does, with nothing added when one of them is
    /// not valid.
    pub async fn add_all<J, I>(&self, jobs: I) -> Result<u64>
    where
        J: Job,
        I: IntoIterator,
        I::Item: Into<EnqueueItem<J>>,
    {
        let mut stamp = Stamp::new();
        let jobs = jobs
            .into_iter()
            .map(|job| stamp.prepare(&self.client, &self.id, job.into()))
            .collect::<Result<Vec<_>>>()?;
        if jobs.len() > MAX_BATCH_ADD {
            return Err(too_many(&self.id, jobs.len()));
        }
        stamp.register(&self.client).await;
        match self.add_jobs(jobs, false).await? {
            BatchAdded::Added { new } => Ok(new),
            _ => unreachable!("add_jobs turns the other outcomes into errors"),
        }
    }

    /// Closes the batch: it takes no more members, and completes once every member has ended (at
    /// once, when they all have). Closing a closed batch changes nothing.
    pub async fn close(&self) -> Result<()> {
        match self.add_jobs(Vec::new(), true).await {
            Ok(_) | Err(Error::BatchClosed { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn add_jobs(&self, jobs: Vec<BatchJob>, close: bool) -> Result<BatchAdded> {
        let store = self.client.backend();
        match store.batch_add(&self.id, jobs, close).await? {
            BatchAdded::Closed => Err(Error::BatchClosed {
                id: self.id.clone(),
            }),
            BatchAdded::NotFound => Err(Error::BatchNotFound {
                id: self.id.clone(),
            }),
            added => Ok(added),
        }
    }

    /// Its progress: see [`Client::batch_status`].
    pub async fn status(&self) -> Result<BatchStatus> {
        self.client.batch_status(&self.id).await
    }

    /// Its members: see [`Client::batch_members`].
    pub async fn members(&self, offset: usize, limit: usize) -> Result<Vec<BatchMember>> {
        self.client.batch_members(&self.id, offset, limit).await
    }
}

impl Client {
    /// The batch of this id, to add members, close it or read it (no round trip: a batch that does
    /// not exist shows at the first call). Fails on an id that is not valid.
    pub fn batch_handle(&self, id: &str) -> Result<Batch> {
        validate_batch_id(id)?;
        Ok(Batch::new(self.clone(), id.to_owned()))
    }
}
