//! Enqueues at most once per delivery token, for an outbox relay (see
//! [`JobStore::enqueue_once`](crate::store::JobStore::enqueue_once)): `enqueue_once.lua`, and the
//! topic's `delivered` zset of tokens.
//!
//! Not coalesced like the other enqueues: a relay already sends its rows in batches, one call per topic.

use super::jobs::{outcome, ENQUEUE_CHUNK};
use super::keys::TopicKeys;
use super::reply::ints;
use super::scripts::SCRIPTS;
use super::{due_args, RedisStore};
use crate::error::{Error, Result};
use crate::store::{EnqueueOutcome, NewJob};

impl RedisStore {
    /// See [`JobStore::enqueue_once`](crate::store::JobStore::enqueue_once).
    pub(super) async fn enqueue_once_chunked(
        &self,
        topic: &str,
        jobs: Vec<(String, NewJob)>,
        keep_ms: u64,
    ) -> Result<Vec<Option<EnqueueOutcome>>> {
        let keys = self.keys(topic)?;
        let all_keys = with_delivered(&keys);
        let mut out = Vec::with_capacity(jobs.len());
        for chunk in jobs.chunks(ENQUEUE_CHUNK) {
            out.extend(
                self.enqueue_once_call(topic, &all_keys, chunk, keep_ms)
                    .await?,
            );
        }
        Ok(out)
    }

    async fn enqueue_once_call(
        &self,
        topic: &str,
        keys: &[String],
        jobs: &[(String, NewJob)],
        keep_ms: u64,
    ) -> Result<Vec<Option<EnqueueOutcome>>> {
        const CONTEXT: &str = "enqueueing delivered jobs";
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.enqueue_once, keys, |inv| {
                inv.arg(&self.inner.channel).arg(topic).arg(keep_ms);
                for (token, job) in jobs {
                    let (kind, value) = due_args(job.due);
                    inv.arg(token)
                        .arg(&job.id)
                        .arg(&job.record[..])
                        .arg(kind)
                        .arg(value)
                        .arg(u8::from(job.replace))
                        .arg(job.priority)
                        .arg(job.key.as_deref().unwrap_or(""));
                }
            })
            .await?;
        let codes = ints(reply, CONTEXT)?;
        if codes.len() != jobs.len() * 2 {
            return Err(Error::backend(
                CONTEXT,
                "the script's reply has the wrong length",
            ));
        }
        Ok(codes
            .chunks(2)
            .map(|c| (c[0] != 0).then(|| outcome(c[0], c[1])))
            .collect())
    }

    /// See [`JobStore::forget_tokens`](crate::store::JobStore::forget_tokens): one ZREM.
    pub(super) async fn forget_tokens_now(&self, topic: &str, tokens: &[String]) -> Result<()> {
        if tokens.is_empty() {
            return Ok(());
        }
        let keys = self.keys(topic)?;
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(keys.other("delivered")).arg(tokens);
        self.command::<i64>("forgetting delivery tokens", &cmd)
            .await
            .map(drop)
    }
}

/// The topic's keys and its `delivered` zset, as `enqueue_once.lua` takes them.
fn with_delivered(keys: &TopicKeys) -> Vec<String> {
    let mut all = keys.0.to_vec();
    all.push(keys.other("delivered"));
    all
}
