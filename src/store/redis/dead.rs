//! Dead letters: list, requeue, purge, trim, and the hook's claim/ack/retry.

use super::keys::DEAD_PENDING;
use super::reply::{as_int, Reply};
use super::scripts::SCRIPTS;
use super::RedisStore;
use crate::error::{Error, Result};
use crate::store::DeadEntry;

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

impl RedisStore {
    pub(super) async fn list_dead(
        &self,
        topic: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<DeadEntry>> {
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

    pub(super) async fn requeue_dead(
        &self,
        topic: &str,
        id: &str,
        record: Vec<u8>,
    ) -> Result<bool> {
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
        match as_int(&reply) {
            Some(1) => Ok(true),
            Some(2) => Err(Error::JobExists {
                topic: topic.to_owned(),
                id: id.to_owned(),
            }),
            _ => Ok(false),
        }
    }

    pub(super) async fn purge_dead(&self, topic: &str, id: Option<&str>) -> Result<u64> {
        const CONTEXT: &str = "purging dead jobs";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.dead_purge, &keys, |inv| {
                match id {
                    Some(id) => inv.arg("one").arg(id),
                    None => inv.arg("all"),
                };
            })
            .await?;
        Ok(as_int(&reply).unwrap_or(0).max(0) as u64)
    }

    pub(super) async fn trim_dead(
        &self,
        topic: &str,
        older_than_ms: i64,
        keep: u64,
        limit: usize,
    ) -> Result<u64> {
        const CONTEXT: &str = "trimming dead jobs";
        let keys = self.keys(topic)?;
        let mut total = 0u64;
        let mut left = limit;
        while left > 0 {
            let want = left.min(TRIM_CHUNK);
            let reply = self
                .eval(CONTEXT, &SCRIPTS.dead_trim, &keys, |inv| {
                    inv.arg(older_than_ms).arg(keep).arg(want);
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

    pub(super) async fn claim_dead(
        &self,
        topic: &str,
        max: usize,
        lease_ms: u64,
    ) -> Result<Vec<DeadEntry>> {
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

    pub(super) async fn ack_dead(&self, topic: &str, ids: &[String]) -> Result<()> {
        let keys = self.keys(topic)?;
        for chunk in ids.chunks(ACK_CHUNK) {
            let mut cmd = redis::cmd("ZREM");
            cmd.arg(&keys.0[DEAD_PENDING]).arg(chunk);
            self.command::<()>("acknowledging dead-letter hooks", &cmd)
                .await?;
        }
        Ok(())
    }

    pub(super) async fn retry_dead(&self, topic: &str, id: &str, delay_ms: u64) -> Result<()> {
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
