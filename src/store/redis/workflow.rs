//! Batches and the delivery of followed jobs' ends (see [`crate::store::workflow`]). Not built yet.

use async_trait::async_trait;

use super::RedisStore;
use crate::error::Result;
use crate::store::{
    BatchAdded, BatchCreated, BatchJob, BatchMember, BatchStatus, NewBatch, WorkflowStore,
};

#[async_trait]
impl WorkflowStore for RedisStore {
    async fn batch_create(&self, _id: &str, _batch: NewBatch) -> Result<BatchCreated> {
        Ok(BatchCreated::Exists)
    }

    async fn batch_add(&self, _id: &str, _jobs: Vec<BatchJob>, _close: bool) -> Result<BatchAdded> {
        Ok(BatchAdded::NotFound)
    }

    async fn batch(&self, _id: &str) -> Result<Option<BatchStatus>> {
        Ok(None)
    }

    async fn batch_members(
        &self,
        _id: &str,
        _offset: usize,
        _limit: usize,
    ) -> Result<Vec<BatchMember>> {
        Ok(Vec::new())
    }

    async fn batches(&self, _offset: usize, _limit: usize) -> Result<Vec<BatchStatus>> {
        Ok(Vec::new())
    }

    async fn deliver_ends(&self, _topic: &str, _max: usize) -> Result<usize> {
        Ok(0)
    }

    async fn recover_batches(&self, _max: usize) -> Result<usize> {
        Ok(0)
    }
}
