//! Live jobs: enqueue, claim, finish, extend, cancel, reschedule, lookup and counts.

use super::keys::TopicKeys;
use super::reply::{ints, Reply};
use super::scripts::SCRIPTS;
use super::{due_args, RedisStore};
use crate::error::{Error, Result};
use crate::store::{
    CancelOutcome, ClaimBatch, ClaimRequest, ClaimedJob, EnqueueOutcome, Finish, FinishItem,
    FinishOutcome, LeaseStatus, NewJob, RescheduleOutcome, StoredJob, StoredState, TopicCounts,
};

/// Jobs per enqueue script call (each job is atomic on its own; chunks keep scripts short).
const ENQUEUE_CHUNK: usize = 1000;
/// Items per finish script call.
const FINISH_CHUNK: usize = 1000;
/// Leases per extend script call.
const EXTEND_CHUNK: usize = 2000;
/// Most jobs one claim takes, and most expired leases one claim sweeps (bounds the script's run time).
const CLAIM_CAP: usize = 10_000;

/// An enqueue script's outcome code and due time.
fn outcome(code: i64, due_at_ms: i64) -> EnqueueOutcome {
    match code {
        1 => EnqueueOutcome::Created { due_at_ms },
        2 => EnqueueOutcome::Replaced { due_at_ms },
        3 => EnqueueOutcome::Exists { due_at_ms },
        _ => EnqueueOutcome::Running,
    }
}

impl RedisStore {
    pub(super) async fn enqueue_jobs(
        &self,
        topic: &str,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        let keys = self.keys(topic)?;
        if let [job] = &jobs[..] {
            return self.enqueue_one(topic, &keys, job).await.map(|o| vec![o]);
        }
        let mut out = Vec::with_capacity(jobs.len());
        for chunk in jobs.chunks(ENQUEUE_CHUNK) {
            let reply = self
                .eval("enqueueing jobs", &SCRIPTS.enqueue, &keys, |inv| {
                    inv.arg(&self.inner.channel).arg(topic);
                    for job in chunk {
                        let (kind, value) = due_args(job.due);
                        inv.arg(&job.id)
                            .arg(&job.record[..])
                            .arg(kind)
                            .arg(value)
                            .arg(u8::from(job.replace));
                    }
                })
                .await?;
            let codes = ints(reply, "enqueueing jobs")?;
            if codes.len() != chunk.len() * 2 {
                return Err(Error::backend(
                    "enqueueing jobs",
                    "the script's reply has the wrong length",
                ));
            }
            out.extend(codes.chunks(2).map(|c| outcome(c[0], c[1])));
        }
        Ok(out)
    }

    /// One job: `enqueue_one.lua`, which needs only the first three keys (due, active, jobs).
    async fn enqueue_one(
        &self,
        topic: &str,
        keys: &TopicKeys,
        job: &NewJob,
    ) -> Result<EnqueueOutcome> {
        const CONTEXT: &str = "enqueueing a job";
        let (kind, value) = due_args(job.due);
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.enqueue_one, &keys.0[..3], |cmd| {
                cmd.arg(&self.inner.channel)
                    .arg(topic)
                    .arg(&job.id)
                    .arg(&job.record[..])
                    .arg(kind)
                    .arg(value)
                    .arg(u8::from(job.replace));
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let (code, due_at_ms) = (r.int()?, r.int()?);
        Ok(outcome(code, due_at_ms))
    }

    pub(super) async fn claim_jobs(
        &self,
        topic: &str,
        request: ClaimRequest,
    ) -> Result<ClaimBatch> {
        const CONTEXT: &str = "claiming jobs";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.claim, &keys, |inv| {
                inv.arg(request.max.min(CLAIM_CAP))
                    .arg(request.lease_ms.min(i64::MAX as u64 / 2))
                    .arg(request.sweep_limit.min(CLAIM_CAP))
                    .arg(request.stall_limit);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let mut batch = ClaimBatch {
            now_ms: r.int()?,
            swept: u32::try_from(r.int()?).unwrap_or(u32::MAX),
            swept_dead: u32::try_from(r.int()?).unwrap_or(u32::MAX),
            next_due_ms: r.opt_int()?,
            next_lease_deadline_ms: r.opt_int()?,
            dead_pending: r.int()? > 0,
            ..ClaimBatch::default()
        };
        let token = u64::try_from(r.int()?).map_err(|e| Error::backend(CONTEXT, e))?;
        batch.now_us = batch.now_ms.saturating_mul(1000) + r.int()?.clamp(0, 999);
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

    pub(super) async fn finish_jobs(
        &self,
        topic: &str,
        items: Vec<FinishItem>,
    ) -> Result<Vec<FinishOutcome>> {
        const CONTEXT: &str = "finishing jobs";
        let keys = self.keys(topic)?;
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(FINISH_CHUNK) {
            let reply = self
                .eval(CONTEXT, &SCRIPTS.finish, &keys, |inv| {
                    inv.arg(&self.inner.channel).arg(topic);
                    for item in chunk {
                        inv.arg(&item.id).arg(item.token);
                        match &item.finish {
                            Finish::Done => inv.arg("done"),
                            Finish::Retry {
                                record,
                                delay_ms,
                                counted,
                            } => inv
                                .arg("retry")
                                .arg(&record[..])
                                .arg(i64::try_from(*delay_ms).unwrap_or(i64::MAX))
                                .arg(u8::from(*counted)),
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

    pub(super) async fn extend_leases(
        &self,
        topic: &str,
        leases: &[(String, u64)],
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

    pub(super) async fn cancel_job(&self, topic: &str, id: &str) -> Result<CancelOutcome> {
        let keys = self.keys(topic)?;
        let reply = self
            .eval("cancelling a job", &SCRIPTS.cancel, &keys, |inv| {
                inv.arg(id);
            })
            .await?;
        Ok(match super::reply::as_int(&reply) {
            Some(1) => CancelOutcome::Removed,
            Some(2) => CancelOutcome::Marked,
            _ => CancelOutcome::NotFound,
        })
    }

    pub(super) async fn reschedule_job(
        &self,
        topic: &str,
        id: &str,
        due: crate::store::Due,
    ) -> Result<RescheduleOutcome> {
        const CONTEXT: &str = "rescheduling a job";
        let keys = self.keys(topic)?;
        let (kind, value) = due_args(due);
        let reply = self
            .eval(CONTEXT, &SCRIPTS.reschedule, &keys, |inv| {
                inv.arg(&self.inner.channel)
                    .arg(topic)
                    .arg(id)
                    .arg(kind)
                    .arg(value);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let (code, at) = (r.int()?, r.int()?);
        Ok(match code {
            1 => RescheduleOutcome::Rescheduled { due_at_ms: at },
            2 => RescheduleOutcome::Running,
            _ => RescheduleOutcome::NotFound,
        })
    }

    pub(super) async fn find_job(&self, topic: &str, id: &str) -> Result<Option<StoredJob>> {
        const CONTEXT: &str = "looking up a job";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.job, &keys, |inv| {
                inv.arg(id);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let code = r.int()?;
        if code == 0 {
            return Ok(None);
        }
        let at = r.int()?;
        let Some(record) = r.opt_bytes()? else {
            return Ok(None);
        };
        let state = match code {
            1 => StoredState::Due { due_at_ms: at },
            2 => StoredState::Active {
                lease_deadline_ms: at,
            },
            _ => {
                let reason = r
                    .opt_bytes()?
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                StoredState::Dead {
                    died_at_ms: at,
                    reason,
                    delivered: r.int()? == 1,
                }
            }
        };
        Ok(Some(StoredJob { state, record }))
    }

    pub(super) async fn topic_counts(&self, topic: &str) -> Result<TopicCounts> {
        const CONTEXT: &str = "counting jobs";
        let keys = self.keys(topic)?;
        let reply = self.eval(CONTEXT, &SCRIPTS.counts, &keys, |_| {}).await?;
        let n = ints(reply, CONTEXT)?;
        if n.len() != 12 {
            return Err(Error::backend(
                CONTEXT,
                "the script's reply has the wrong length",
            ));
        }
        let n: Vec<u64> = n.into_iter().map(|v| v.max(0) as u64).collect();
        Ok(TopicCounts {
            scheduled: n[0],
            ready: n[1],
            active: n[2],
            dead: n[3],
            dead_pending: n[4],
            processed: n[5],
            retried: n[6],
            failed: n[7],
            dead_total: n[8],
            cancelled: n[9],
            stalled: n[10],
            trimmed: n[11],
        })
    }
}
