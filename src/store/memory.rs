//! The in-memory backend (being written on its own branch).

/// Jobs kept in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {}

impl MemoryStore {
    /// A store with the system clock.
    pub fn new() -> Self {
        MemoryStore {}
    }
}

#[async_trait::async_trait]
impl crate::store::Store for MemoryStore {
    fn backend_name(&self) -> &'static str {
        "stub"
    }
    async fn now_ms(&self) -> crate::Result<i64> {
        todo!()
    }
    async fn enqueue(
        &self,
        _: &str,
        _: Vec<crate::store::NewJob>,
    ) -> crate::Result<Vec<crate::store::EnqueueOutcome>> {
        todo!()
    }
    async fn claim(
        &self,
        _: &str,
        _: crate::store::ClaimRequest,
    ) -> crate::Result<crate::store::ClaimBatch> {
        todo!()
    }
    async fn finish(
        &self,
        _: &str,
        _: Vec<crate::store::FinishItem>,
    ) -> crate::Result<Vec<crate::store::FinishOutcome>> {
        todo!()
    }
    async fn extend(
        &self,
        _: &str,
        _: &[(String, u64)],
        _: u64,
    ) -> crate::Result<Vec<crate::store::LeaseStatus>> {
        todo!()
    }
    async fn cancel(&self, _: &str, _: &str) -> crate::Result<crate::store::CancelOutcome> {
        todo!()
    }
    async fn reschedule(
        &self,
        _: &str,
        _: &str,
        _: crate::store::Due,
    ) -> crate::Result<crate::store::RescheduleOutcome> {
        todo!()
    }
    async fn job(&self, _: &str, _: &str) -> crate::Result<Option<crate::store::StoredJob>> {
        todo!()
    }
    async fn counts(&self, _: &str) -> crate::Result<crate::store::TopicCounts> {
        todo!()
    }
    async fn dead_list(
        &self,
        _: &str,
        _: usize,
        _: usize,
    ) -> crate::Result<Vec<crate::store::DeadEntry>> {
        todo!()
    }
    async fn dead_requeue(&self, _: &str, _: &str, _: Vec<u8>) -> crate::Result<bool> {
        todo!()
    }
    async fn dead_purge(&self, _: &str, _: Option<&str>) -> crate::Result<u64> {
        todo!()
    }
    async fn dead_trim(&self, _: &str, _: i64, _: u64, _: usize) -> crate::Result<u64> {
        todo!()
    }
    async fn dead_claim(
        &self,
        _: &str,
        _: usize,
        _: u64,
    ) -> crate::Result<Vec<crate::store::DeadEntry>> {
        todo!()
    }
    async fn dead_ack(&self, _: &str, _: &[String]) -> crate::Result<()> {
        todo!()
    }
    async fn dead_retry(&self, _: &str, _: &str, _: u64) -> crate::Result<()> {
        todo!()
    }
    fn hints(&self) -> tokio::sync::broadcast::Receiver<crate::store::Hint> {
        todo!()
    }
}
