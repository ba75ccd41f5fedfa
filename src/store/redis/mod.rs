//! The Redis backend (being written on its own branch).

use crate::error::Result;

/// Jobs kept in Redis.
#[derive(Debug)]
pub struct RedisStore {}

impl RedisStore {
    /// Connects.
    pub async fn connect(_url: &str, _namespace: &str) -> Result<Self> {
        unimplemented!()
    }
}

#[async_trait::async_trait]
impl crate::store::Store for RedisStore {
    fn backend_name(&self) -> &'static str {
        "stub"
    }
    async fn now_ms(&self) -> crate::Result<i64> {
        unimplemented!("redis backend")
    }
    async fn enqueue(
        &self,
        _: &str,
        _: Vec<crate::store::NewJob>,
    ) -> crate::Result<Vec<crate::store::EnqueueOutcome>> {
        unimplemented!("redis backend")
    }
    async fn claim(
        &self,
        _: &str,
        _: crate::store::ClaimRequest,
    ) -> crate::Result<crate::store::ClaimBatch> {
        unimplemented!("redis backend")
    }
    async fn finish(
        &self,
        _: &str,
        _: Vec<crate::store::FinishItem>,
    ) -> crate::Result<Vec<crate::store::FinishOutcome>> {
        unimplemented!("redis backend")
    }
    async fn extend(
        &self,
        _: &str,
        _: &[(String, u64)],
        _: u64,
    ) -> crate::Result<Vec<crate::store::LeaseStatus>> {
        unimplemented!("redis backend")
    }
    async fn cancel(&self, _: &str, _: &str) -> crate::Result<crate::store::CancelOutcome> {
        unimplemented!("redis backend")
    }
    async fn reschedule(
        &self,
        _: &str,
        _: &str,
        _: crate::store::Due,
    ) -> crate::Result<crate::store::RescheduleOutcome> {
        unimplemented!("redis backend")
    }
    async fn job(&self, _: &str, _: &str) -> crate::Result<Option<crate::store::StoredJob>> {
        unimplemented!("redis backend")
    }
    async fn counts(&self, _: &str) -> crate::Result<crate::store::TopicCounts> {
        unimplemented!("redis backend")
    }
    async fn dead_list(
        &self,
        _: &str,
        _: usize,
        _: usize,
    ) -> crate::Result<Vec<crate::store::DeadEntry>> {
        unimplemented!("redis backend")
    }
    async fn dead_requeue(&self, _: &str, _: &str, _: Vec<u8>) -> crate::Result<bool> {
        unimplemented!("redis backend")
    }
    async fn dead_purge(&self, _: &str, _: Option<&str>) -> crate::Result<u64> {
        unimplemented!("redis backend")
    }
    async fn dead_trim(&self, _: &str, _: i64, _: u64, _: usize) -> crate::Result<u64> {
        unimplemented!("redis backend")
    }
    async fn dead_claim(
        &self,
        _: &str,
        _: usize,
        _: u64,
    ) -> crate::Result<Vec<crate::store::DeadEntry>> {
        unimplemented!("redis backend")
    }
    async fn dead_ack(&self, _: &str, _: &[String]) -> crate::Result<()> {
        unimplemented!("redis backend")
    }
    async fn dead_retry(&self, _: &str, _: &str, _: u64) -> crate::Result<()> {
        unimplemented!("redis backend")
    }
    fn hints(&self) -> tokio::sync::broadcast::Receiver<crate::store::Hint> {
        unimplemented!("redis backend")
    }
}
