//! [`OpsStore`] in memory: the registries of topics and workers, and each topic's listings, pause and
//! history (in `topic/ops.rs`).

use std::collections::BTreeMap;
use std::sync::PoisonError;

use async_trait::async_trait;

use super::MemoryStore;
use crate::error::Result;
use crate::store::{
    Hint, MinuteCounts, OpsStore, PageEntry, PageQuery, PageState, PrefixPage, WorkerBeat,
};
use crate::time::add_ms;
use crate::validate::validate_topic;

/// The namespace's registries.
#[derive(Debug, Default)]
pub(super) struct Registries {
    /// Topic name -> partitions.
    topics: BTreeMap<String, u16>,
    /// Worker id -> (info, last beat, expires at).
    workers: BTreeMap<String, (String, i64, i64)>,
    /// Outbox name -> (report, reported at, expires at).
    outboxes: BTreeMap<String, (String, i64, i64)>,
}

impl MemoryStore {
    fn registries<R>(&self, step: impl FnOnce(&mut Registries, i64) -> R) -> R {
        let mut registries = self
            .registries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now_ms();
        registries
            .workers
            .retain(|_, (_, _, expires)| *expires > now);
        registries
            .outboxes
            .retain(|_, (_, _, expires)| *expires > now);
        step(&mut registries, now)
    }
}

#[async_trait]
impl OpsStore for MemoryStore {
    async fn register_topic(&self, topic: &str, partitions: u16) -> Result<()> {
        validate_topic(topic)?;
        self.registries(|r, _| {
            let known = r.topics.entry(topic.to_owned()).or_insert(0);
            *known = (*known).max(partitions.max(1));
        });
        Ok(())
    }

    async fn topics(&self) -> Result<Vec<(String, u16)>> {
        Ok(self.registries(|r, _| r.topics.iter().map(|(t, p)| (t.clone(), *p)).collect()))
    }

    async fn set_paused(&self, topic: &str, paused: bool) -> Result<()> {
        self.with_topic(topic, |state, _| state.set_paused(paused));
        if !paused {
            let _ = self.hints.send(Hint::Topic {
                topic: topic.to_owned(),
                due_at_ms: self.clock.now_ms(),
            });
        }
        Ok(())
    }

    async fn worker_beat(&self, id: &str, info: &str, ttl_ms: u64) -> Result<()> {
        self.registries(|r, now| {
            let entry = (info.to_owned(), now, add_ms(now, ttl_ms.max(1)));
            r.workers.insert(id.to_owned(), entry);
        });
        Ok(())
    }

    async fn worker_gone(&self, id: &str) -> Result<()> {
        self.registries(|r, _| r.workers.remove(id));
        Ok(())
    }

    async fn workers(&self) -> Result<Vec<WorkerBeat>> {
        Ok(self.registries(|r, _| {
            r.workers
                .iter()
                .map(|(id, (info, beat, expires))| WorkerBeat {
                    id: id.clone(),
                    info: info.clone(),
                    beat_at_ms: *beat,
                    expires_at_ms: *expires,
                })
                .collect()
        }))
    }

    async fn outbox_report(&self, name: &str, report: &str, ttl_ms: u64) -> Result<()> {
        self.registries(|r, now| {
            let entry = (report.to_owned(), now, add_ms(now, ttl_ms.max(1)));
            r.outboxes.insert(name.to_owned(), entry);
        });
        Ok(())
    }

    async fn outbox_reports(&self) -> Result<Vec<(String, i64, String)>> {
        Ok(self.registries(|r, _| {
            r.outboxes
                .iter()
                .map(|(name, (report, at, _))| (name.clone(), *at, report.clone()))
                .collect()
        }))
    }

    async fn page(&self, topic: &str, query: &PageQuery) -> Result<Vec<PageEntry>> {
        Ok(self.read_topic(topic, |state, _| state.page(query)))
    }

    async fn find_prefix(
        &self,
        topic: &str,
        state: PageState,
        prefix: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<PrefixPage> {
        let (entries, next) =
            self.read_topic(topic, |t, _| t.find_prefix(state, prefix, cursor, limit));
        Ok(PrefixPage { entries, next })
    }

    async fn busiest_keys(
        &self,
        topic: &str,
        limit: usize,
        _sample: usize,
    ) -> Result<crate::store::KeysPage> {
        Ok(self.read_topic(topic, |state, now| state.busiest_keys(limit, now)))
    }

    async fn set_key_limits(
        &self,
        topic: &str,
        key: &str,
        limits: Option<crate::KeyLimits>,
    ) -> Result<()> {
        let (readied, now) = self.with_topic(topic, |state, now| {
            (state.set_key_limits(key, limits, now), now)
        });
        self.hint(topic, readied.then_some(now));
        Ok(())
    }

    async fn key_limits(&self, topic: &str) -> Result<Vec<(String, crate::KeyLimits)>> {
        Ok(self.read_topic(topic, |state, _| state.key_limits()))
    }

    async fn history(&self, topic: &str, minutes: u32) -> Result<Vec<MinuteCounts>> {
        Ok(self.read_topic(topic, |state, now| state.history(minutes, now)))
    }

    async fn doctor(&self) -> Result<Vec<crate::check::Check>> {
        Ok(vec![crate::check::Check::warn(
            "backend",
            "memory, nothing persists",
            "jobs live in this process only: use Redis (REDIS_URL) to keep them across restarts",
        )])
    }
}
