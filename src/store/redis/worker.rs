//! [`WorkerStore`] on Redis: claim, finish, extend leases, the server's clock, hints, start checks.

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::conn;
use super::exec::Conns;
use super::reply::{ints, Reply};
use super::scripts::SCRIPTS;
use super::{cluster, RedisStore};
use crate::error::{Error, Result};
use crate::flow::RateLimit;
use crate::store::{
    ClaimBatch, ClaimRequest, ClaimedJob, Finish, FinishItem, FinishOutcome, HeldBack, Hint, Lease,
    LeaseStatus, Progress, Retention, WorkerStore, MAX_DUE_MS,
};

/// Items per finish script call.
const FINISH_CHUNK: usize = 1000;
/// Leases per extend script call.
const EXTEND_CHUNK: usize = 2000;
/// Most jobs one claim takes, and most expired leases one claim sweeps (bounds the script's run time).
const CLAIM_CAP: usize = 10_000;

#[async_trait]
impl WorkerStore for RedisStore {
    async fn now_ms(&self) -> Result<i64> {
        let (secs, micros): (i64, i64) = self
            .command("reading the Redis time", &redis::cmd("TIME"))
            .await?;
        Ok(secs * 1000 + micros / 1000)
    }

    async fn claim(&self, topic: &str, request: ClaimRequest) -> Result<ClaimBatch> {
        const CONTEXT: &str = "claiming jobs";
        let keys = self.keys(topic)?;
        let mut all_keys = Vec::with_capacity(keys.with_outcomes().len() + 2);
        all_keys.extend_from_slice(keys.with_outcomes());
        let claim_key = keys.claim(request.token);
        // The previous claim's record goes; none named: the same key again, which the script skips.
        all_keys.push(
            request
                .received
                .map_or_else(|| claim_key.clone(), |t| keys.claim(t)),
        );
        all_keys.insert(keys.with_outcomes().len(), claim_key);
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.claim, &all_keys, |inv| {
                inv.arg(request.max.min(CLAIM_CAP))
                    .arg(request.lease_ms.clamp(1, i64::MAX as u64 / 2))
                    .arg(request.sweep_limit.min(CLAIM_CAP))
                    .arg(request.stall_limit)
                    .arg(request.token)
                    .arg(if request.again { "1" } else { "0" })
                    .arg(request.holder)
                    .arg(request.max_running);
                match request.rate {
                    Some(rate) => inv
                        .arg(format!("{:.6}", rate.interval_ms()))
                        .arg(rate.burst()),
                    None => inv.arg("0").arg(1),
                };
                inv.arg(RateLimit::label(request.rate, request.max_running))
                    .arg(&self.inner.channel)
                    .arg(topic)
                    .arg(request.key_limits.max_running_per_key());
                match request.key_limits.rate_per_key() {
                    Some(rate) => inv
                        .arg(format!("{:.6}", rate.interval_ms()))
                        .arg(rate.burst()),
                    None => inv.arg("0").arg(1),
                };
                inv.arg(request.key_limits.label());
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let now_ms = r.int()?;
        let mut batch = ClaimBatch {
            swept: u32::try_from(r.int()?).unwrap_or(u32::MAX),
            swept_dead: u32::try_from(r.int()?).unwrap_or(u32::MAX),
            next_due_ms: r.opt_int()?,
            next_lease_deadline_ms: r.opt_int()?,
            ..ClaimBatch::default()
        };
        let pending = r.int()?;
        batch.dead_pending = pending & 1 != 0;
        batch.ends_pending = pending & 2 != 0;
        let token = u64::try_from(r.int()?).map_err(|e| Error::backend(CONTEXT, e))?;
        batch.now_us = now_ms.saturating_mul(1000) + r.int()?.clamp(0, 999);
        batch.paused = r.int()? == 1;
        batch.held_back = match r.int()? {
            1 => Some(HeldBack::MaxRunning),
            2 => Some(HeldBack::Rate),
            3 => Some(HeldBack::Provider),
            _ => None,
        };
        batch.jobs.reserve(r.remaining() / 3);
        while r.remaining() > 0 {
            let (id, due_at_ms, record) = (r.bytes()?, r.int()?, r.bytes()?);
            match String::from_utf8(id) {
                Ok(id) => batch.jobs.push(ClaimedJob {
                    id,
                    token,
                    due_at_ms,
                    record,
                }),
                // Not an id this crate wrote. Failing the whole claim would strand every job claimed
                // with it (again at each sweep, until the stall limit killed them all): leave this one
                // to its lease, after which it is swept and, past the stall limit, dead-lettered.
                Err(e) => tracing::error!(
                    topic,
                    id = %String::from_utf8_lossy(e.as_bytes()),
                    "postpone: a claimed job id is not UTF-8 (written outside postpone); not run"
                ),
            }
        }
        Ok(batch)
    }

    async fn finish(&self, topic: &str, items: Vec<FinishItem>) -> Result<Vec<FinishOutcome>> {
        const CONTEXT: &str = "finishing jobs";
        let keys = self.keys(topic)?;
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(FINISH_CHUNK) {
            let reply = self
                .eval_with(CONTEXT, &SCRIPTS.finish, keys.with_outcomes(), |inv| {
                    inv.arg(&self.inner.channel).arg(topic);
                    for item in chunk {
                        inv.arg(&item.id).arg(item.token);
                        match &item.finish {
                            Finish::Done => inv.arg("done"),
                            Finish::Succeeded { result } => {
                                inv.arg("result").arg(&result[..]).arg("").arg("")
                            }
                            Finish::Retry {
                                record,
                                delay_ms,
                                counted,
                            } => inv
                                .arg("retry")
                                .arg(&record[..])
                                .arg(i64::try_from(*delay_ms).unwrap_or(i64::MAX))
                                .arg(u8::from(*counted)),
                            Finish::RateLimited { record, delay_ms } => inv
                                .arg("hold")
                                .arg(&record[..])
                                .arg(i64::try_from(*delay_ms).unwrap_or(i64::MAX))
                                .arg(""),
                            Finish::Dead { record, reason } => {
                                inv.arg("dead").arg(&record[..]).arg(reason).arg("")
                            }
                        };
                    }
                })
                .await?;
            let codes = ints(reply, CONTEXT)?;
            if codes.len() != chunk.len() {
                return Err(Error::backend(
                    CONTEXT,
                    "the script's reply has the wrong length",
                ));
            }
            out.extend(codes.into_iter().map(|c| match c {
                1 => FinishOutcome::Applied,
                2 => FinishOutcome::Cancelled,
                _ => FinishOutcome::Stale,
            }));
        }
        Ok(out)
    }

    async fn extend(
        &self,
        topic: &str,
        leases: &[Lease],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>> {
        const CONTEXT: &str = "extending leases";
        let keys = self.keys(topic)?;
        let mut out = Vec::with_capacity(leases.len());
        for chunk in leases.chunks(EXTEND_CHUNK) {
            let reply = self
                .eval(CONTEXT, &SCRIPTS.extend, &keys, |inv| {
                    inv.arg(lease_ms.min(i64::MAX as u64 / 2));
                    for (id, token) in chunk {
                        inv.arg(id).arg(*token);
                    }
                })
                .await?;
            let codes = ints(reply, CONTEXT)?;
            if codes.len() != chunk.len() {
                return Err(Error::backend(
                    CONTEXT,
                    "the script's reply has the wrong length",
                ));
            }
            out.extend(codes.into_iter().map(|c| match c {
                1 => LeaseStatus::Held,
                2 => LeaseStatus::Cancelled,
                _ => LeaseStatus::Lost,
            }));
        }
        Ok(out)
    }

    async fn retain(&self, topic: &str, retention: Option<Retention>, limit: usize) -> Result<u64> {
        const CONTEXT: &str = "trimming kept finished jobs";
        let keys = self.keys(topic)?;
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.retain, keys.with_outcomes(), |inv| {
                match retention {
                    Some(r) => inv
                        .arg(r.max_age_ms.min(MAX_DUE_MS as u64))
                        .arg(r.max_count.min(i64::MAX as u64)),
                    None => inv.arg("").arg(""),
                };
                inv.arg(limit.clamp(1, CLAIM_CAP));
            })
            .await?;
        let n = <i64 as redis::FromRedisValue>::from_redis_value(reply)
            .map_err(|e| Error::backend(CONTEXT, e))?;
        Ok(n.max(0) as u64)
    }

    async fn progress(&self, topic: &str, updates: Vec<(Lease, Progress)>) -> Result<()> {
        const CONTEXT: &str = "recording progress";
        let keys = self.keys(topic)?;
        for chunk in updates.chunks(EXTEND_CHUNK) {
            self.eval_with(CONTEXT, &SCRIPTS.progress, keys.with_outcomes(), |inv| {
                inv.arg(&self.inner.channel).arg(topic);
                for ((id, token), progress) in chunk {
                    inv.arg(id).arg(*token).arg(progress.encode());
                }
            })
            .await?;
        }
        Ok(())
    }

    async fn hold(&self, topic: &str, delay_ms: u64) -> Result<()> {
        const CONTEXT: &str = "holding a topic's claims";
        let keys = self.keys(topic)?;
        self.eval(CONTEXT, &SCRIPTS.hold, &keys, |inv| {
            inv.arg(i64::try_from(delay_ms).unwrap_or(i64::MAX));
        })
        .await?;
        Ok(())
    }

    /// Hints for every topic of the namespace, from a pub/sub listener started on the first call (inside
    /// a Tokio runtime). After every (re)connect the listener sends [`Hint::All`]; a receiver that falls
    /// behind gets `RecvError::Lagged`, which it should treat as [`Hint::All`].
    fn hints(&self) -> broadcast::Receiver<Hint> {
        self.inner.hints.subscribe()
    }

    async fn check_worker_start(&self) -> Result<()> {
        let pool = match &self.inner.conns {
            Conns::Single(pool) => pool,
            Conns::Cluster(conn) => return cluster::check_worker_start(conn).await,
        };
        let mut conn = pool.get("checking Redis at worker start").await?;
        let version = conn::server_version(&mut conn.inner)
            .await
            .map_err(|e| Error::backend("reading the Redis version (INFO server)", e))?;
        conn::require_6_2(&version)?;
        conn::warn_about_eviction(
            &self.inner.addr,
            conn::eviction_policy(&mut conn.inner).await,
        );
        Ok(())
    }
}
