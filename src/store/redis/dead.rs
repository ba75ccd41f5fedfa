//! [`DeadLetterStore`] on Redis: list, requeue, purge and trim dead jobs (one entry per death), and
//! their delivery to the hook (claim, ack, retry).

use async_trait::async_trait;

use super::reply::{as_int, Reply};
use super::scripts::SCRIPTS;
use super::RedisStore;
use crate::error::Result;
use crate::store::{DeadEntry, DeadLetterStore, DeadSelection, Death, RequeueOutcome, TrimPolicy};
use crate::time::millis;

/// Entries per dead-list or dead-claim script call.
const LIST_CHUNK: usize = 1000;
/// Deletions per trim script call.
const TRIM_CHUNK: usize = 1000;
/// Deaths taken off per purge-all script call (`dead_purge.lua`).
const PURGE_CHUNK: u64 = 1000;
/// Deaths per acknowledgement script call.
const ACK_CHUNK: usize = 2000;
/// Largest list offset passed to Redis (Lua formats bigger numbers with an exponent, which Redis refuses
/// as an index; no sorted set comes near it).
const MAX_OFFSET: usize = 1 << 50;

/// The time of death and the reason in a `dead_info` value, `"<died at ms> <reason>"`.
pub(super) fn parse_info(info: &[u8]) -> (i64, String) {
    let text = String::from_utf8_lossy(info);
    match text.split_once(' ') {
        Some((at, reason)) => (at.parse().unwrap_or(0), reason.to_owned()),
        None => (text.parse().unwrap_or(0), String::new()),
    }
}

/// Reads `death, record, info` triples.
fn entries(reply: redis::Value, context: &'static str) -> Result<Vec<DeadEntry>> {
    let mut r = Reply::new(reply, context)?;
    let mut out = Vec::with_capacity(r.remaining() / 3);
    while r.remaining() > 0 {
        let (member, record, info) = (r.bytes()?, r.bytes()?, r.bytes()?);
        let Some(Death { id, seq }) = Death::parse(&member) else {
            // Not a death this crate wrote: skip it rather than fail the call, which would keep every
            // other dead job from its hook and its listing.
            tracing::error!(
                context,
                death = %String::from_utf8_lossy(&member),
                "postpone: a dead job's entry was not written by postpone (not UTF-8, or no death number); skipped"
            );
            continue;
        };
        let (died_at_ms, reason) = parse_info(&info);
        out.push(DeadEntry {
            id,
            seq,
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

    async fn dead_of(&self, topic: &str, id: &str, limit: usize) -> Result<Vec<DeadEntry>> {
        const CONTEXT: &str = "listing the deaths of a job";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.dead_of, &keys, |inv| {
                inv.arg(id).arg(limit.min(LIST_CHUNK));
            })
            .await?;
        entries(reply, CONTEXT)
    }

    async fn dead_requeue(
        &self,
        topic: &str,
        death: &Death,
        record: Vec<u8>,
    ) -> Result<RequeueOutcome> {
        const CONTEXT: &str = "re-enqueueing a dead job";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.dead_requeue, &keys, |inv| {
                inv.arg(&self.inner.channel)
                    .arg(topic)
                    .arg(death.member())
                    .arg(&death.id)
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
        let mut total = 0;
        loop {
            let reply = self
                .eval(CONTEXT, &SCRIPTS.dead_purge, &keys, |inv| {
                    match which {
                        DeadSelection::Death(death) => inv.arg("one").arg(death.member()),
                        DeadSelection::All => inv.arg("all"),
                    };
                })
                .await?;
            let n = as_int(&reply).unwrap_or(0).max(0) as u64;
            total += n;
            if !matches!(which, DeadSelection::All) || n < PURGE_CHUNK {
                return Ok(total);
            }
        }
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

    async fn dead_ack(&self, topic: &str, deaths: &[Death]) -> Result<()> {
        let keys = self.keys(topic)?;
        for chunk in deaths.chunks(ACK_CHUNK) {
            self.eval(
                "acknowledging dead-letter hooks",
                &SCRIPTS.dead_ack,
                &keys,
                |inv| {
                    for death in chunk {
                        inv.arg(death.member());
                    }
                },
            )
            .await?;
        }
        Ok(())
    }

    async fn dead_retry(&self, topic: &str, death: &Death, delay_ms: u64) -> Result<()> {
        let keys = self.keys(topic)?;
        self.eval(
            "rescheduling a dead-letter hook",
            &SCRIPTS.dead_retry,
            &keys,
            |inv| {
                inv.arg(death.member())
                    .arg(delay_ms.min(i64::MAX as u64 / 2));
            },
        )
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deaths_and_infos_round_trip() {
        let d = Death::new("order:42", 7);
        let m = d.member();
        assert_eq!(m, "order:42\n000000000000007");
        assert_eq!(Death::parse(m.as_bytes()), Some(d));
        assert_eq!(Death::parse(b"no-sequence"), None);
        assert_eq!(parse_info(b"1700 boom: x y"), (1700, "boom: x y".into()));
    }
}
