//! A topic's dead letters through the client: list, requeue and purge, by id or by dead letter.

use super::topic::Topic;
use crate::dead_letter::DeadLetter;
use crate::error::{Error, Result};
use crate::store::{DeadEntry, DeadSelection, Death, RequeueOutcome};

/// Most deaths of one id read at once (each death of an id stays a dead letter until handled).
const DEATHS_OF_ONE_ID: usize = 1000;

impl Topic {
    /// Dead jobs, newest first (over all partitions: each partition gives its newest `offset + limit`,
    /// merged by time of death).
    pub async fn dead_letters(&self, offset: usize, limit: usize) -> Result<Vec<DeadLetter>> {
        let limit = limit.min(10_000);
        let store = self.store();
        let mut entries = if self.count()? == 1 {
            store.dead_list(self.name(), offset, limit).await?
        } else {
            let want = offset.saturating_add(limit);
            let lists = self
                .each(|t| async move { store.dead_list(&t, 0, want).await })
                .await?;
            let mut all: Vec<_> = lists.into_iter().flatten().collect();
            // Newest first; ties as one sorted set would order them (by id, descending).
            all.sort_by(|a, b| {
                (b.died_at_ms, b.id.as_bytes(), b.seq).cmp(&(a.died_at_ms, a.id.as_bytes(), a.seq))
            });
            all.into_iter().skip(offset).take(limit).collect()
        };
        entries.truncate(limit);
        Ok(entries
            .into_iter()
            .map(|e| DeadLetter::from_entry(self.name(), e))
            .collect())
    }

    /// Puts a dead job back, due now, with its attempts reset (its error history is kept): its newest
    /// death, when it died more than once (see [`Topic::requeue_dead_letter`] for a given one). Fails
    /// with [`Error::JobNotFound`] when no dead job has this id and [`Error::JobExists`] when a live one
    /// does.
    pub async fn requeue_dead(&self, id: &str) -> Result<()> {
        let (p, stored_as, newest) = self.deaths_of(id, 1).await?;
        let Some(entry) = newest.into_iter().next() else {
            return Err(self.not_found(id));
        };
        self.requeue_entry(p, &stored_as, entry.death(), &entry.record)
            .await
    }

    /// Puts this dead letter's job back, due now, with its attempts reset. Only this death: another
    /// death of the same id stays a dead letter. Fails with [`Error::JobNotFound`] when it is no longer
    /// a dead letter (requeued, purged or trimmed) and [`Error::JobExists`] when a live job has its id.
    pub async fn requeue_dead_letter(&self, dead: &DeadLetter) -> Result<()> {
        self.requeue_death(&Death::new(dead.id.clone(), dead.death))
            .await
    }

    /// [`requeue_dead_letter`](Self::requeue_dead_letter) by death.
    pub(crate) async fn requeue_death(&self, death: &Death) -> Result<()> {
        let store = self.store();
        let (p, stored_as, entries) = self
            .by_id(
                &death.id,
                |t| async move { store.dead_of(&t, &death.id, DEATHS_OF_ONE_ID).await },
                |entries| entries.iter().any(|e| e.seq == death.seq),
            )
            .await?;
        let Some(entry) = entries.into_iter().find(|e| e.seq == death.seq) else {
            return Err(self.not_found(&death.id));
        };
        self.requeue_entry(p, &stored_as, death.clone(), &entry.record)
            .await
    }

    async fn requeue_entry(
        &self,
        p: u16,
        stored_as: &str,
        death: Death,
        record: &[u8],
    ) -> Result<()> {
        let mut record = self.decode(&death.id, record)?;
        record.attempt = 1;
        let requeued = self
            .store()
            .dead_requeue(stored_as, &death, record.encode())
            .await
            .map_err(self.in_partition(p))?;
        match requeued {
            RequeueOutcome::Requeued { .. } => Ok(()),
            RequeueOutcome::LiveJobExists => Err(Error::JobExists {
                topic: self.name().to_owned(),
                id: death.id,
            }),
            _ => Err(self.not_found(&death.id)),
        }
    }

    /// Deletes the dead letters of this id (every death of it; hooks still pending still run). Fails
    /// with [`Error::JobNotFound`] when there is none.
    pub async fn purge_dead(&self, id: &str) -> Result<()> {
        let (p, stored_as, deaths) = self.deaths_of(id, DEATHS_OF_ONE_ID).await?;
        let store = self.store();
        let mut purged = 0;
        for entry in deaths {
            purged += store
                .dead_purge(&stored_as, DeadSelection::Death(&entry.death()))
                .await
                .map_err(self.in_partition(p))?;
        }
        match purged {
            0 => Err(self.not_found(id)),
            _ => Ok(()),
        }
    }

    /// Deletes this dead letter only (its hook, if still pending, still runs). Fails with
    /// [`Error::JobNotFound`] when it is no longer a dead letter.
    pub async fn purge_dead_letter(&self, dead: &DeadLetter) -> Result<()> {
        self.purge_death(&Death::new(dead.id.clone(), dead.death))
            .await
    }

    /// [`purge_dead_letter`](Self::purge_dead_letter) by death.
    pub(crate) async fn purge_death(&self, death: &Death) -> Result<()> {
        let store = self.store();
        let (_, _, purged) = self
            .by_id(
                &death.id,
                |t| async move { store.dead_purge(&t, DeadSelection::Death(death)).await },
                |n| *n > 0,
            )
            .await?;
        match purged {
            0 => Err(self.not_found(&death.id)),
            _ => Ok(()),
        }
    }

    /// Deletes every dead job of the topic (of every partition); returns how many.
    pub async fn purge_all_dead(&self) -> Result<u64> {
        let store = self.store();
        let purged = self
            .each(|t| async move { store.dead_purge(&t, DeadSelection::All).await })
            .await?;
        Ok(purged.into_iter().sum())
    }

    /// The listed deaths of `id`, newest first, and where they are.
    async fn deaths_of(&self, id: &str, limit: usize) -> Result<(u16, String, Vec<DeadEntry>)> {
        let store = self.store();
        self.by_id(
            id,
            |t| async move { store.dead_of(&t, id, limit).await },
            |deaths| !deaths.is_empty(),
        )
        .await
    }
}
