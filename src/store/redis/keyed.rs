//! Keyed enqueues on Redis (see [`JobStore::enqueue_keyed`](crate::store::JobStore::enqueue_keyed)):
//! `enqueue_keyed.lua`, coalesced per topic like the other enqueues, on the topic's keys and its four
//! key sets (`unique`, `unique_until`, `debounce`, `debounce_at`).

use super::group_commit::{Batched, GroupCommit};
use super::jobs::{outcome, ENQUEUE_CHUNK};
use super::keys::TopicKeys;
use super::reply::Reply;
use super::scripts::SCRIPTS;
use super::{due_args, RedisStore};
use crate::error::{Error, Result};
use crate::store::{Keyed, KeyedJob, KeyedOutcome};

/// Most argument bytes of a coalesced call.
const BATCH_BYTES: usize = 1 << 20;

/// Keyed enqueues, coalesced per topic.
pub(super) struct KeyedEnqueues;

impl Batched for KeyedEnqueues {
    type Item = KeyedJob;
    type Out = KeyedOutcome;
    const CONTEXT: &'static str = "enqueueing keyed jobs";
    const MAX_ITEMS: usize = ENQUEUE_CHUNK;
    const MAX_BYTES: usize = BATCH_BYTES;

    fn bytes(item: &KeyedJob) -> usize {
        let key = item.keyed.as_ref().map_or(0, |k| k.key().len());
        item.job.id.len() + item.job.record.len() + key + 48
    }

    fn queues(store: &RedisStore) -> &GroupCommit<Self> {
        &store.inner.keyed
    }

    async fn run(
        store: &RedisStore,
        topic: &str,
        keys: &TopicKeys,
        jobs: &[KeyedJob],
    ) -> Result<Vec<KeyedOutcome>> {
        let all_keys = with_key_sets(keys);
        let reply = store
            .eval_with(Self::CONTEXT, &SCRIPTS.enqueue_keyed, &all_keys, |inv| {
                inv.arg(&store.inner.channel).arg(topic);
                for KeyedJob { job, keyed } in jobs {
                    let (kind, value) = due_args(job.due);
                    inv.arg(&job.id)
                        .arg(&job.record[..])
                        .arg(kind)
                        .arg(value)
                        .arg(u8::from(job.replace))
                        .arg(job.priority);
                    match keyed {
                        None => inv.arg("-").arg("").arg(0).arg(0).arg(0),
                        Some(Keyed::Unique {
                            key,
                            window_ms,
                            states,
                        }) => inv
                            .arg("u")
                            .arg(key)
                            .arg(*window_ms)
                            .arg(states.bits())
                            .arg(0),
                        Some(Keyed::Debounce {
                            key,
                            quiet_ms,
                            max_wait_ms,
                            replace,
                        }) => inv
                            .arg("d")
                            .arg(key)
                            .arg(*quiet_ms)
                            .arg(*max_wait_ms)
                            .arg(u8::from(*replace)),
                    };
                    inv.arg(job.key.as_deref().unwrap_or(""));
                }
            })
            .await?;
        let mut r = Reply::new(reply, Self::CONTEXT)?;
        if r.remaining() != jobs.len() * 3 {
            return Err(Error::backend(
                Self::CONTEXT,
                "the script's reply has the wrong length",
            ));
        }
        let mut out = Vec::with_capacity(jobs.len());
        for _ in jobs {
            let (code, at, id) = (r.int()?, r.int()?, r.bytes()?);
            let id = String::from_utf8_lossy(&id).into_owned();
            out.push(match code {
                5 => KeyedOutcome::Duplicate {
                    id,
                    due_at_ms: (at >= 0).then_some(at),
                },
                6 => KeyedOutcome::Throttled { id, until_ms: at },
                7 => KeyedOutcome::Debounced { id, due_at_ms: at },
                code => KeyedOutcome::Enqueued(outcome(code, at)),
            });
        }
        Ok(out)
    }
}

impl RedisStore {
    /// See [`JobStore::enqueue_keyed`](crate::store::JobStore::enqueue_keyed).
    pub(super) async fn enqueue_keyed_chunked(
        &self,
        topic: &str,
        jobs: Vec<KeyedJob>,
    ) -> Result<Vec<KeyedOutcome>> {
        let keys = self.keys(topic)?;
        let mut out = Vec::with_capacity(jobs.len());
        let mut jobs = jobs.into_iter();
        loop {
            let chunk: Vec<KeyedJob> = jobs.by_ref().take(ENQUEUE_CHUNK).collect();
            if chunk.is_empty() {
                return Ok(out);
            }
            out.extend(self.inner.keyed.submit(self, topic, &keys, chunk).await?);
        }
    }
}

/// The topic's keys and its four key sets, as `enqueue_keyed.lua` takes them.
fn with_key_sets(keys: &TopicKeys) -> Vec<String> {
    let mut all = keys.0.to_vec();
    for set in ["unique", "unique_until", "debounce", "debounce_at"] {
        all.push(keys.other(set));
    }
    all
}
