//! Steering a topic: pause and resume, run a job now, requeue and purge dead letters in bulk by a
//! reason filter, and the per-minute history.

use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use serde::Serialize;

use super::listing::{JobQuery, MAX_PAGE};
use crate::client::{Topic, When};
use crate::error::{Error, Result};
use crate::flow::KeyLimits;
use crate::store::{Death, KeyLoad, KeysPage, MinuteCounts, PageState};

/// Dead letters handled at once by a bulk requeue or purge.
const BULK_CHUNK: usize = 200;

/// What a bulk requeue or purge did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BulkOutcome {
    /// Dead letters the filter selected.
    pub matched: u64,
    /// Of those, requeued or purged.
    pub done: u64,
    /// Of those, left alone: a live job has the id (requeue), or it went meanwhile.
    pub skipped: u64,
}

impl BulkOutcome {
    /// One dead letter (named by id), done.
    pub(crate) fn one() -> Self {
        BulkOutcome {
            matched: 1,
            done: 1,
            skipped: 0,
        }
    }
}

/// Which dead letters a bulk action takes: all of them, or those whose reason contains a text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadFilter {
    /// Only dead letters whose reason contains this text (case-sensitive).
    pub reason_contains: Option<String>,
}

impl DeadFilter {
    /// Every dead letter.
    pub fn all() -> Self {
        DeadFilter::default()
    }

    /// Dead letters whose reason contains `text`.
    pub fn reason_contains(text: impl Into<String>) -> Self {
        DeadFilter {
            reason_contains: Some(text.into()),
        }
    }

    fn selects(&self, reason: &str) -> bool {
        self.reason_contains
            .as_deref()
            .is_none_or(|t| reason.contains(t))
    }
}

/// Which bulk action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bulk {
    Requeue,
    Purge,
}

impl Topic {
    /// Pauses the topic (every partition), persisted in the store: no worker claims its jobs until
    /// [`resume`](Self::resume); running jobs finish, enqueues are still accepted, dead letters still
    /// reach their hook.
    pub async fn pause(&self) -> Result<()> {
        self.set_paused(true).await
    }

    /// Resumes a paused topic: its workers claim again at once.
    pub async fn resume(&self) -> Result<()> {
        self.set_paused(false).await
    }

    async fn set_paused(&self, paused: bool) -> Result<()> {
        let store = self.store();
        self.each(|t| async move { store.set_paused(&t, paused).await })
            .await?;
        Ok(())
    }

    /// Makes a scheduled job due now (it keeps its attempt). Fails with [`Error::JobNotFound`] when no
    /// scheduled job has this id, [`Error::JobRunning`] when it is running and [`Error::JobWaiting`]
    /// when it waits for other jobs.
    pub async fn run_now(&self, id: &str) -> Result<DateTime<Utc>> {
        self.reschedule(id, When::Now).await
    }

    /// The topic's history, minute by minute, for the last `minutes` minutes (at most 25 hours), summed
    /// over its partitions, oldest first; minutes with nothing counted are left out.
    pub async fn history(&self, minutes: u32) -> Result<Vec<MinuteCounts>> {
        let store = self.store();
        let per_partition = self
            .each(|t| async move { store.history(&t, minutes).await })
            .await?;
        let mut by_minute = std::collections::BTreeMap::<i64, MinuteCounts>::new();
        for m in per_partition.into_iter().flatten() {
            let sum = by_minute.entry(m.minute_ms).or_insert(MinuteCounts {
                minute_ms: m.minute_ms,
                ..MinuteCounts::default()
            });
            sum.enqueued += m.enqueued;
            sum.processed += m.processed;
            sum.retried += m.retried;
            sum.failed += m.failed;
            sum.dead += m.dead;
        }
        Ok(by_minute.into_values().collect())
    }

    /// The busiest keys of the topic's keyed jobs ([fairness by key](crate::guide::fairness)): at most
    /// `limit`, by jobs queued, over its partitions (a key's jobs with generated ids are in one
    /// partition; a key found in several is summed). Each partition looks at a sample of at most 1,000
    /// keys of each kind (ready, waiting, running), never at every key: [`KeysPage::sampled`] says
    /// when it did. Empty for a topic without keyed jobs.
    ///
    /// With `limit` 0 it looks at no key's jobs: [`KeysPage::keys`] is empty, [`KeysPage::total`] and
    /// [`KeysPage::running_counted`] and [`KeysPage::limits`] are as ever, and it costs about as little as
    /// [`counts`](Self::counts) at any number of keys (a dashboard asks this to know whether a topic
    /// has keyed jobs; the sample of 1,000 keys costs some milliseconds of the store's time).
    pub async fn busiest_keys(&self, limit: usize) -> Result<KeysPage> {
        const SAMPLE: usize = 1000;
        let sample = if limit == 0 { 1 } else { SAMPLE };
        let store = self.store();
        let pages = self
            .each(|t| async move { store.busiest_keys(&t, limit, sample).await })
            .await?;
        let mut by_key = std::collections::BTreeMap::<String, KeyLoad>::new();
        let mut all = KeysPage::default();
        for page in pages {
            all.total += page.total;
            all.sampled |= page.sampled;
            all.running_counted |= page.running_counted;
            all.limits = all.limits.or(page.limits);
            for k in page.keys {
                let sum = by_key.entry(k.key.clone()).or_insert(KeyLoad {
                    key: k.key,
                    queued: 0,
                    running: 0,
                    held_until_ms: None,
                    own_limits: None,
                });
                sum.own_limits = sum.own_limits.or(k.own_limits);
                sum.queued += k.queued;
                sum.running += k.running;
                sum.held_until_ms = sum.held_until_ms.max(k.held_until_ms);
            }
        }
        // With no key asked for, no sample of keys is shown.
        all.sampled &= limit > 0;
        all.keys = by_key.into_values().collect();
        all.keys
            .sort_by(|a, b| b.queued.cmp(&a.queued).then_with(|| a.key.cmp(&b.key)));
        all.keys.truncate(limit);
        Ok(all)
    }

    /// Gives key `key` of the topic's keyed jobs limits of its own ([fairness by
    /// key](crate::guide::fairness)): for that key alone they replace the limits per key the topic's
    /// workers claim under (the type's, or [`WorkerBuilder::key_limits`](crate::WorkerBuilder::key_limits)),
    /// in every worker, from their next claim on, until [`clear_key_limits`](Self::clear_key_limits).
    /// [`KeyLimits::new()`](crate::KeyLimits::new) lets the key run with no limit. Kept in the store
    /// (in every partition) whether or not the key has jobs; a key waiting at its max running is looked
    /// at again at once. Fails with [`Error::InvalidKey`] for a key no job could have.
    ///
    /// ```
    /// # use postpone::{Client, Job, KeyLimits, RateLimit};
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "webhooks.deliver", key = "endpoint", key_max_running = 2)]
    /// struct Deliver {
    ///     endpoint: String,
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// let client = Client::memory();
    /// let topic = client.topic::<Deliver>();
    /// // One customer's endpoint takes 10 at once and 50 a second; every other endpoint keeps 2.
    /// let big = KeyLimits::new().max_running(10).rate(RateLimit::per_second(50));
    /// topic.set_key_limits("https://big.example/hook", big).await?;
    /// assert_eq!(topic.key_limits().await?, vec![("https://big.example/hook".to_owned(), big)]);
    /// topic.clear_key_limits("https://big.example/hook").await?;
    /// assert!(topic.key_limits().await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn set_key_limits(&self, key: &str, limits: KeyLimits) -> Result<()> {
        self.put_key_limits(key, Some(limits)).await
    }

    /// Takes back key `key`'s own limits ([`set_key_limits`](Self::set_key_limits)): it claims under
    /// the topic's limits per key again, from the workers' next claim on. Nothing happens for a key
    /// without limits of its own.
    pub async fn clear_key_limits(&self, key: &str) -> Result<()> {
        self.put_key_limits(key, None).await
    }

    async fn put_key_limits(&self, key: &str, limits: Option<KeyLimits>) -> Result<()> {
        crate::validate_key(key)?;
        let store = self.store();
        self.each(|t| async move { store.set_key_limits(&t, key, limits).await })
            .await?;
        Ok(())
    }

    /// The keys of the topic with limits of their own ([`set_key_limits`](Self::set_key_limits)),
    /// with them, by key.
    pub async fn key_limits(&self) -> Result<Vec<(String, KeyLimits)>> {
        let store = self.store();
        let per_partition = self
            .each(|t| async move { store.key_limits(&t).await })
            .await?;
        let all: std::collections::BTreeMap<String, KeyLimits> =
            per_partition.into_iter().flatten().collect();
        Ok(all.into_iter().collect())
    }

    /// Requeues the dead letters `filter` selects, oldest first, each an atomic step (due now, attempts
    /// reset; one whose id has a live job is skipped). `progress` is called after each chunk with
    /// what was done so far.
    pub async fn requeue_dead_where(
        &self,
        filter: &DeadFilter,
        progress: impl FnMut(BulkOutcome),
    ) -> Result<BulkOutcome> {
        self.bulk(filter, Bulk::Requeue, progress).await
    }

    /// Purges the dead letters `filter` selects (their hooks, if still pending, still run). Without a
    /// reason filter this is one step per partition.
    pub async fn purge_dead_where(
        &self,
        filter: &DeadFilter,
        mut progress: impl FnMut(BulkOutcome),
    ) -> Result<BulkOutcome> {
        if filter.reason_contains.is_none() {
            let n = self.purge_all_dead().await?;
            let outcome = BulkOutcome {
                matched: n,
                done: n,
                skipped: 0,
            };
            progress(outcome);
            return Ok(outcome);
        }
        self.bulk(filter, Bulk::Purge, progress).await
    }

    async fn bulk(
        &self,
        filter: &DeadFilter,
        action: Bulk,
        mut progress: impl FnMut(BulkOutcome),
    ) -> Result<BulkOutcome> {
        let mut outcome = BulkOutcome::default();
        let mut query = JobQuery::new(PageState::Dead).limit(MAX_PAGE);
        loop {
            let page = self.jobs(&query).await?;
            let selected: Vec<Death> = page
                .jobs
                .iter()
                .filter(|j| filter.selects(j.reason.as_deref().unwrap_or("")))
                .filter_map(|j| Some(Death::new(j.id.clone(), j.death?)))
                .collect();
            for chunk in selected.chunks(BULK_CHUNK) {
                let results = join_all(chunk.iter().map(|d| async move {
                    match action {
                        Bulk::Requeue => self.requeue_death(d).await,
                        Bulk::Purge => self.purge_death(d).await,
                    }
                }))
                .await;
                for r in results {
                    outcome.matched += 1;
                    match r {
                        Ok(()) => outcome.done += 1,
                        Err(Error::JobExists { .. } | Error::JobNotFound { .. }) => {
                            outcome.skipped += 1
                        }
                        Err(e) => return Err(e),
                    }
                }
                progress(outcome);
            }
            match page.next {
                Some(next) => query = query.cursor(next),
                None => return Ok(outcome),
            }
        }
    }
}
