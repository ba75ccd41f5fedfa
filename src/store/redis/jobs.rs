//! [`JobStore`] on Redis: enqueue, cancel, reschedule, look up and count jobs by id.

use async_trait::async_trait;

use super::exec::Conns;
use super::keys::TopicKeys;
use super::reply::{as_int, ints, Reply};
use super::scripts::SCRIPTS;
use super::{due_args, RedisStore};
use crate::error::{Error, Result};
use crate::store::{
    CancelOutcome, Death, Due, EnqueueOutcome, JobStore, NewJob, RescheduleOutcome, StoredJob,
    StoredState, TopicCounts,
};

/// Jobs per enqueue script call (each job is atomic on its own; chunks keep scripts short).
const ENQUEUE_CHUNK: usize = 1000;

/// An enqueue script's outcome code and due time.
fn outcome(code: i64, due_at_ms: i64) -> EnqueueOutcome {
    match code {
        1 => EnqueueOutcome::Created { due_at_ms },
        2 => EnqueueOutcome::Replaced { due_at_ms },
        3 => EnqueueOutcome::Exists { due_at_ms },
        _ => EnqueueOutcome::Running,
    }
}

#[async_trait]
impl JobStore for RedisStore {
    /// "redis", or "redis-cluster".
    fn backend_name(&self) -> &'static str {
        match self.inner.conns {
            Conns::Single(_) => "redis",
            Conns::Cluster(_) => "redis-cluster",
        }
    }

    async fn enqueue(&self, topic: &str, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        let keys = self.keys(topic)?;
        if let [job] = &jobs[..] {
            return enqueue_one(self, topic, &keys, job).await.map(|o| vec![o]);
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

    async fn cancel(&self, topic: &str, id: &str) -> Result<CancelOutcome> {
        let keys = self.keys(topic)?;
        let reply = self
            .eval("cancelling a job", &SCRIPTS.cancel, &keys, |inv| {
                inv.arg(id);
            })
            .await?;
        Ok(match as_int(&reply) {
            Some(1) => CancelOutcome::Removed,
            Some(2) => CancelOutcome::Marked,
            _ => CancelOutcome::NotFound,
        })
    }

    async fn reschedule(&self, topic: &str, id: &str, due: Due) -> Result<RescheduleOutcome> {
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

    async fn job(&self, topic: &str, id: &str) -> Result<Option<StoredJob>> {
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
        if code == 3 {
            let death = r.bytes()?;
            let (Some(record), Some(info)) = (r.opt_bytes()?, r.opt_bytes()?) else {
                return Ok(None);
            };
            let Some(Death { seq, .. }) = Death::parse(&death) else {
                return Ok(None);
            };
            let (died_at_ms, reason) = super::dead::parse_info(&info);
            let state = StoredState::Dead {
                seq,
                died_at_ms,
                reason,
                delivered: r.int()? == 1,
            };
            return Ok(Some(StoredJob { state, record }));
        }
        let at = r.int()?;
        let Some(record) = r.opt_bytes()? else {
            return Ok(None);
        };
        let state = match code {
            1 => StoredState::Due { due_at_ms: at },
            _ => StoredState::Active {
                lease_deadline_ms: at,
            },
        };
        Ok(Some(StoredJob { state, record }))
    }

    async fn counts(&self, topic: &str) -> Result<TopicCounts> {
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

/// One job: `enqueue_one.lua`, which needs only the first three keys (due, active, jobs).
async fn enqueue_one(
    store: &RedisStore,
    topic: &str,
    keys: &TopicKeys,
    job: &NewJob,
) -> Result<EnqueueOutcome> {
    const CONTEXT: &str = "enqueueing a job";
    let (kind, value) = due_args(job.due);
    let reply = store
        .eval_with(CONTEXT, &SCRIPTS.enqueue_one, &keys.0[..3], |cmd| {
            cmd.arg(&store.inner.channel)
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
