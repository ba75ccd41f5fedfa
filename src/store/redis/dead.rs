//! [`DeadLetterStore`] on Redis: list, requeue, purge and trim dead jobs, and their delivery to the hook
//! (claim, ack, retry).

use async_trait::async_trait;

use super::keys::DEAD_PENDING;
use super::reply::{as_int, Reply};
use super::scripts::SCRIPTS;
use super::RedisStore;
use crate::error::Result;
use crate::store::{DeadEntry, DeadLetterStore, DeadSelection, RequeueOutcome, TrimPolicy};
use crate::time::millis;

/// Entries per dead-list or dead-claim script call.
const LIST_CHUNK: usize = 1000;
/// Deletions per trim script call.
const TRIM_CHUNK: usize = 1000;
/// Ids per acknowledgement command.
const ACK_CHUNK: usize = 2000;
/// Largest list offset passed to Redis (Lua formats bigger numbers with an exponent, which Redis refuses
/// as an index; no sorted set comes near it).
const MAX_OFFSET: usize = 1 << 50;

/// Reads `id, died at, record, reason` quadruples.
fn entries(reply: redis::Value, context: &'static str) -> Result<Vec<DeadEntry>> {
    let mut r = Reply::new(reply, context)?;
    let mut out = Vec::with_capacity(r.remaining() / 4);
    while r.remaining() > 0 {
        let id = r.bytes()?;
        let died_at_ms = r.int()?;
        let record = r.bytes()?;
        let reason = String::from_utf8_lossy(&r.bytes()?).into_owned();
        let Ok(id) = String::from_utf8(id) else {
            // Not an id this crate wrote: skip it rather than fail the call, which would keep every
            // other dead job from its hook and its listing.
            tracing::error!(
                context,
                "postpone: a dead job id is not UTF-8 (written outside postpone); skipped"
            );
            continue;
        };
        out.push(DeadEntry {
            id,
            record,
            reason,
            died_at_ms,
        });
    }
    Ok(out)
}

#[async_trait]
impl DeadLetterStore for RedisStore {
    async fn dead_list(&self, topic: &str, offset: usize, limit: usize) -> Result<Vec<DeadEntry>> {
        const CONTEXT: &str = "listing dead jobs";
        let keys = self.keys(topic)?;
        let mut out = Vec::new();
        while out.len() < limit {
            let want = (limit - out.len()).min(LIST_CHUNK);
            let from = offset.saturating_add(out.len()).min(MAX_OFFSET);
            let reply = self
                .eval(CONTEXT, &SCRIPTS.dead_list, &keys, |inv| {
                    inv.arg(from).arg(want);
                })
                .await?;
            let page = entries(reply, CONTEXT)?;
            let short = page.len() < want;
            out.extend(page);
            if short {
                break;
            }
        }
        Ok(out)
    }

    async fn dead_requeue(&self, topic: &str, id: &str, record: Vec<u8>) -> Result<RequeueOutcome> {
        const CONTEXT: &str = "re-enqueueing a dead job";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.dead_requeue, &keys, |inv| {
                inv.arg(&self.inner.channel)
                    .arg(topic)
                    .arg(id)
                    .arg(&record[..]);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        Ok(match (r.int()?, r.int()?) {
            (1, due_at_ms) => RequeueOutcome::Requeued { due_at_ms },
            (2, _) => RequeueOutcome::LiveJobExists,
            _ => RequeueOutcome::NotFound,
        })
    }

    async fn dead_purge(&self, topic: &str, which: DeadSelection<'_>) -> Result<u64> {
        const CONTEXT: &str = "purging dead jobs";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.dead_purge, &keys, |inv| {
                match which {
                    DeadSelection::Id(id) => inv.arg("one").arg(id),
                    DeadSelection::All => inv.arg("all"),
                };
            })
            .await?;
        Ok(as_int(&reply).unwrap_or(0).max(0) as u64)
    }

    async fn dead_trim(&self, topic: &str, policy: TrimPolicy, limit: usize) -> Result<u64> {
        const CONTEXT: &str = "trimming dead jobs";
        let keys = self.keys(topic)?;
        let mut total = 0u64;
        let mut left = limit;
        while left > 0 {
            let want = left.min(TRIM_CHUNK);
            let reply = self
                .eval(CONTEXT, &SCRIPTS.dead_trim, &keys, |inv| {
                    // '' leaves a rule out.
                    match policy.max_age {
                        Some(age) => inv.arg(millis(age).min(i64::MAX as u64 / 2)),
                        None => inv.arg(""),
                    };
                    match policy.keep {
                        Some(keep) => inv.arg(keep.min(i64::MAX as u64 / 2)),
                        None => inv.arg(""),
                    };
                    inv.arg(want);
                })
                .await?;
            let n = as_int(&reply).unwrap_or(0).max(0) as usize;
            total += n as u64;
            left -= n.min(left);
            if n < want {
                break;
            }
        }
        Ok(total)
    }

    async fn dead_claim(&self, topic: &str, max: usize, lease_ms: u64) -> Result<Vec<DeadEntry>> {
        const CONTEXT: &str = "claiming dead jobs for the hook";
        let keys = self.keys(topic)?;
        if max == 0 {
            return Ok(Vec::new());
        }
        let reply = self
            .eval(CONTEXT, &SCRIPTS.dead_claim, &keys, |inv| {
                inv.arg(max.min(LIST_CHUNK * 10))
                    .arg(lease_ms.min(i64::MAX as u64 / 2));
            })
            .await?;
        entries(reply, CONTEXT)
    }

    async fn dead_ack(&self, topic: &str, ids: &[String]) -> Result<()> {
        let keys = self.keys(topic)?;
        for chunk in ids.chunks(ACK_CHUNK) {
            let mut cmd = redis::cmd("ZREM");
            cmd.arg(&keys.0[DEAD_PENDING]).arg(chunk);
            self.command::<()>("acknowledging dead-letter hooks", &cmd)
                .await?;
        }
        Ok(())
    }

    async fn dead_retry(&self, topic: &str, id: &str, delay_ms: u64) -> Result<()> {
        let keys = self.keys(topic)?;
        self.eval(
            "rescheduling a dead-letter hook",
            &SCRIPTS.dead_retry,
            &keys,
            |inv| {
                inv.arg(id).arg(delay_ms.min(i64::MAX as u64 / 2));
            },
        )
        .await?;
        Ok(())
    }
}
