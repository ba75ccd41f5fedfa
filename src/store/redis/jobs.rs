//! [`JobStore`] on Redis: enqueue, cancel, reschedule, look up and count jobs by id.

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::exec::Conns;
use super::group_commit::{Batched, GroupCommit};
use super::keys::TopicKeys;
use super::reply::{ints, Reply};
use super::scripts::SCRIPTS;
use super::{due_args, RedisStore};
use crate::error::{Error, Result};
use crate::store::{
    parse_told, Announcement, CancelOutcome, Death, DoneState, Due, Ended, EnqueueOutcome,
    FlowCounts, JobStore, Kept, KeyedJob, KeyedOutcome, Lookup, NewJob, ParentRef, Progress,
    RescheduleOutcome, StoredJob, StoredState, TopicCounts, Watch, MAX_DUE_MS,
};

/// A job's key for fairness as the job script replies it (`''`: none).
fn key_of(r: &mut Reply) -> Result<Option<String>> {
    Ok(super::ops::key_text(&r.bytes()?))
}

/// A live job's key and its key's state as the job script replies them (see job.lua).
fn key_facts(r: &mut Reply, job: &mut StoredJob) -> Result<()> {
    job.key = key_of(r)?;
    let load = super::ops::key_load(r, job.key.clone().unwrap_or_default())?;
    let limits = String::from_utf8_lossy(&r.bytes()?).into_owned();
    if job.key.is_some() {
        job.key_load = Some(load);
        job.key_limits = crate::flow::KeyLimits::from_label(&limits);
    }
    Ok(())
}

/// A kept finished job as found by id.
pub(super) fn kept_job(kept: Kept) -> StoredJob {
    let state = StoredState::Done {
        cancelled: kept.state == DoneState::Cancelled,
        done_at_ms: kept.at_ms,
    };
    let mut job = StoredJob::new(state, kept.record);
    if kept.state == DoneState::Succeeded {
        job.result = Some(kept.result);
    }
    job
}

/// Jobs per enqueue script call (each job is atomic on its own; chunks keep scripts short).
pub(super) const ENQUEUE_CHUNK: usize = 1000;
/// Ids per coalesced cancel or reschedule call.
const ID_CHUNK: usize = 1000;
/// Most argument bytes of a coalesced call (a caller with more goes alone).
const BATCH_BYTES: usize = 1 << 20;

/// An enqueue script's outcome code and due time.
pub(super) fn outcome(code: i64, due_at_ms: i64) -> EnqueueOutcome {
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

    /// Concurrent calls for one topic are coalesced while one is in flight: see `group_commit.rs`.
    async fn enqueue(&self, topic: &str, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        let keys = self.keys(topic)?;
        let queues = &self.inner.enqueues;
        if jobs.len() <= ENQUEUE_CHUNK {
            if jobs.is_empty() {
                return Ok(Vec::new());
            }
            return queues.submit(self, topic, &keys, jobs).await;
        }
        let mut out = Vec::with_capacity(jobs.len());
        let mut jobs = jobs.into_iter();
        loop {
            let chunk: Vec<NewJob> = jobs.by_ref().take(ENQUEUE_CHUNK).collect();
            if chunk.is_empty() {
                return Ok(out);
            }
            out.extend(queues.submit(self, topic, &keys, chunk).await?);
        }
    }

    async fn enqueue_keyed(&self, topic: &str, jobs: Vec<KeyedJob>) -> Result<Vec<KeyedOutcome>> {
        self.enqueue_keyed_chunked(topic, jobs).await
    }

    async fn enqueue_once(
        &self,
        topic: &str,
        jobs: Vec<(String, NewJob)>,
        keep_ms: u64,
    ) -> Result<Vec<Option<EnqueueOutcome>>> {
        self.enqueue_once_chunked(topic, jobs, keep_ms).await
    }

    async fn forget_tokens(&self, topic: &str, tokens: &[String]) -> Result<()> {
        self.forget_tokens_now(topic, tokens).await
    }

    async fn cancel(&self, topic: &str, id: &str) -> Result<CancelOutcome> {
        let keys = self.keys(topic)?;
        let mut out = self
            .inner
            .cancels
            .submit(self, topic, &keys, vec![id.to_owned()])
            .await?;
        Ok(out.pop().unwrap_or(CancelOutcome::NotFound))
    }

    async fn reschedule(&self, topic: &str, id: &str, due: Due) -> Result<RescheduleOutcome> {
        let keys = self.keys(topic)?;
        let mut out = self
            .inner
            .reschedules
            .submit(self, topic, &keys, vec![(id.to_owned(), due)])
            .await?;
        Ok(out.pop().unwrap_or(RescheduleOutcome::NotFound))
    }

    async fn job(&self, topic: &str, id: &str) -> Result<Option<StoredJob>> {
        const CONTEXT: &str = "looking up a job";
        let keys = self.keys(topic)?;
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.job, keys.with_outcomes(), |inv| {
                inv.arg(id);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let code = r.int()?;
        if code == 0 {
            return Ok(None);
        }
        if code == 4 {
            return Ok(Kept::parse(&r.bytes()?).map(kept_job));
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
            let mut job = StoredJob::new(state, record);
            job.key = key_of(&mut r)?;
            return Ok(Some(job));
        }
        let at = r.int()?;
        let Some(record) = r.opt_bytes()? else {
            return Ok(None);
        };
        let stalls = u32::try_from(r.int()?.max(0)).unwrap_or(u32::MAX);
        let mut job = match code {
            5 => {
                let refs = String::from_utf8_lossy(&r.bytes()?).into_owned();
                let parents = refs
                    .split('\n')
                    .filter_map(|r| r.split_once('\t'))
                    .map(|(topic, id)| ParentRef::new(topic, id))
                    .collect();
                let mut job = StoredJob::new(StoredState::Waiting { parents }, record);
                job.key = key_of(&mut r)?;
                job
            }
            1 => {
                let mut job = StoredJob::new(StoredState::Due { due_at_ms: at }, record);
                key_facts(&mut r, &mut job)?;
                job
            }
            _ => {
                let state = StoredState::Active {
                    lease_deadline_ms: at,
                };
                let mut job = StoredJob::new(state, record);
                key_facts(&mut r, &mut job)?;
                job.holder = u64::try_from(r.int()?).ok().filter(|h| *h != 0);
                job
            }
        };
        job.stalls = stalls;
        if r.remaining() > 0 {
            job.progress = r.opt_bytes()?.and_then(|p| Progress::decode(&p));
        }
        Ok(Some(job))
    }

    async fn outcome(&self, topic: &str, id: &str, watch: Watch) -> Result<Lookup> {
        const CONTEXT: &str = "looking up a job's outcome";
        let keys = self.keys(topic)?;
        let (wait_ms, mode, since_ms) = match watch {
            Watch::Live(ms) => (ms, "1", 0),
            Watch::Expect { wait_ms, since_ms } => (wait_ms, "2", since_ms.max(0)),
            _ => (0, "0", 0),
        };
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.outcome, keys.with_outcomes(), |inv| {
                inv.arg(id)
                    .arg(wait_ms.min(MAX_DUE_MS as u64))
                    .arg(mode)
                    .arg(since_ms);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        Ok(match r.int()? {
            1 => Lookup::Live {
                now_ms: r.int()?,
                progress: r.opt_bytes()?.and_then(|p| Progress::decode(&p)),
            },
            2 => match Kept::parse(&r.bytes()?) {
                Some(kept) => Lookup::Ended {
                    ended: kept.ended(),
                    at_ms: kept.at_ms,
                },
                None => Lookup::Unknown,
            },
            3 => {
                let (died_at_ms, reason) = super::dead::parse_info(&r.bytes()?);
                Lookup::Ended {
                    ended: Ended::Dead { reason },
                    at_ms: died_at_ms,
                }
            }
            4 => match parse_told(&r.bytes()?) {
                Some((ended, at_ms)) => Lookup::Ended { ended, at_ms },
                None => Lookup::Unknown,
            },
            5 => Lookup::Expected { since_ms: r.int()? },
            _ => Lookup::Unknown,
        })
    }

    fn announcements(&self) -> broadcast::Receiver<Announcement> {
        self.inner.announcements.subscribe()
    }

    async fn counts(&self, topic: &str) -> Result<TopicCounts> {
        const CONTEXT: &str = "counting jobs";
        let keys = self.keys(topic)?;
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.counts, keys.with_outcomes(), |_| {})
            .await?;
        let n = ints(reply, CONTEXT)?;
        if n.len() != 21 {
            return Err(Error::backend(
                CONTEXT,
                "the script's reply has the wrong length",
            ));
        }
        let flow = FlowCounts::from_stored(
            Some((
                u32::try_from(n[13]).unwrap_or(0),
                u64::try_from(n[14]).unwrap_or(0),
            )),
            u32::try_from(n[15]).unwrap_or(0),
            n[16],
            n[17] as f64,
            n[18],
        );
        let n: Vec<u64> = n.into_iter().map(|v| v.max(0) as u64).collect();
        Ok(TopicCounts {
            scheduled: n[0],
            ready: n[1],
            active: n[2],
            dead: n[3],
            dead_pending: n[4],
            done: n[19],
            waiting: n[20],
            processed: n[5],
            retried: n[6],
            failed: n[7],
            dead_total: n[8],
            cancelled: n[9],
            stalled: n[10],
            trimmed: n[11],
            paused: n[12] == 1,
            flow,
        })
    }
}

/// Enqueues, coalesced per topic.
pub(super) struct Enqueues;

impl Batched for Enqueues {
    type Item = NewJob;
    type Out = EnqueueOutcome;
    const CONTEXT: &'static str = "enqueueing jobs";
    const MAX_ITEMS: usize = ENQUEUE_CHUNK;
    const MAX_BYTES: usize = BATCH_BYTES;

    fn bytes(job: &NewJob) -> usize {
        job.id.len() + job.record.len() + 32
    }

    fn queues(store: &RedisStore) -> &GroupCommit<Self> {
        &store.inner.enqueues
    }

    async fn run(
        store: &RedisStore,
        topic: &str,
        keys: &TopicKeys,
        jobs: &[NewJob],
    ) -> Result<Vec<EnqueueOutcome>> {
        // A replace (which may move a job under another key for fairness) or a priority (the priority
        // keys) takes the general batch script; jobs with keys for fairness take the lean one.
        let lean = |job: &NewJob| !job.replace && job.priority == 0;
        match jobs {
            // One job, a key for fairness or not (never with a replace): the lean script.
            [job] if !job.replace && job.priority == 0 => {
                enqueue_one(store, topic, keys, job).await.map(|o| vec![o])
            }
            [first, ..]
                if jobs
                    .iter()
                    .all(|job| lean(job) && due_args(job.due).0 == due_args(first.due).0)
                    && distinct_ids(jobs) =>
            {
                enqueue_plain(store, topic, keys, jobs).await
            }
            _ => enqueue_many(store, topic, keys, jobs).await,
        }
    }
}

/// Whether no two jobs share an id: `enqueue_plain.lua` counts on it (a repeated id, two callers
/// enqueueing one business id at once, takes `enqueue.lua`, which gives the later job the earlier one's
/// outcome).
fn distinct_ids(jobs: &[NewJob]) -> bool {
    // Sorted, not hashed: a batch is a few dozen ids, and a sort of their references costs less than
    // SipHash over each (no hash of the caller's ids to choose collisions against either).
    let mut ids: Vec<&str> = jobs.iter().map(|job| job.id.as_str()).collect();
    ids.sort_unstable();
    ids.windows(2).all(|w| w[0] != w[1])
}

/// Many jobs: `enqueue.lua`.
async fn enqueue_many(
    store: &RedisStore,
    topic: &str,
    keys: &TopicKeys,
    jobs: &[NewJob],
) -> Result<Vec<EnqueueOutcome>> {
    const CONTEXT: &str = "enqueueing jobs";
    let reply = store
        .eval(CONTEXT, &SCRIPTS.enqueue, keys, |inv| {
            inv.arg(&store.inner.channel).arg(topic);
            for job in jobs {
                let (kind, value) = due_args(job.due);
                inv.arg(&job.id)
                    .arg(&job.record[..])
                    .arg(kind)
                    .arg(value)
                    .arg(u8::from(job.replace))
                    .arg(job.priority)
                    .arg(job.key.as_deref().unwrap_or(""));
            }
        })
        .await?;
    outcomes(reply, jobs.len(), CONTEXT)
}

/// Many lean jobs (no replace, no priority, all due `in` or all `at`, with keys for fairness or not):
/// `enqueue_plain.lua`, which needs only the first four keys, and two arguments per job when all share a
/// due value and none has a key (one more for a due value of its own, one more for a key: a batch
/// with keys says so in its kind).
async fn enqueue_plain(
    store: &RedisStore,
    topic: &str,
    keys: &TopicKeys,
    jobs: &[NewJob],
) -> Result<Vec<EnqueueOutcome>> {
    const CONTEXT: &str = "enqueueing jobs";
    let (kind, first) = jobs.first().map_or(("in", 0), |job| due_args(job.due));
    let shared = jobs.iter().all(|job| due_args(job.due).1 == first);
    let keyed = jobs.iter().any(|job| job.key.is_some());
    let reply = store
        .eval_with(CONTEXT, &SCRIPTS.enqueue_plain, &keys.0[..4], |inv| {
            // Jobs with keys are marked in the kind ("in:k", "at:k"): a plain batch sends nothing more.
            inv.arg(&store.inner.channel).arg(topic);
            match (keyed, kind) {
                (false, kind) => inv.arg(kind),
                (true, "in") => inv.arg("in:k"),
                (true, _) => inv.arg("at:k"),
            };
            if shared {
                inv.arg(first);
            } else {
                inv.arg("");
            }
            for job in jobs {
                inv.arg(&job.id).arg(&job.record[..]);
                if !shared {
                    inv.arg(due_args(job.due).1);
                }
                if keyed {
                    inv.arg(job.key.as_deref().unwrap_or(""));
                }
            }
        })
        .await?;
    // Every job created, all due at one time: that time alone.
    if let redis::Value::Array(items) = &reply {
        if let [redis::Value::Int(due_at_ms)] = items[..] {
            let created = EnqueueOutcome::Created { due_at_ms };
            return Ok(vec![created; jobs.len()]);
        }
    }
    outcomes(reply, jobs.len(), CONTEXT)
}

/// The outcomes of a batch script: two integers per job.
fn outcomes(
    reply: redis::Value,
    jobs: usize,
    context: &'static str,
) -> Result<Vec<EnqueueOutcome>> {
    let codes = ints(reply, context)?;
    if codes.len() != jobs * 2 {
        return Err(Error::backend(
            context,
            "the script's reply has the wrong length",
        ));
    }
    Ok(codes.chunks(2).map(|c| outcome(c[0], c[1])).collect())
}

/// One job: `enqueue_one.lua`, which needs only the first four keys (due, active, jobs, history).
async fn enqueue_one(
    store: &RedisStore,
    topic: &str,
    keys: &TopicKeys,
    job: &NewJob,
) -> Result<EnqueueOutcome> {
    const CONTEXT: &str = "enqueueing a job";
    let (kind, value) = due_args(job.due);
    let reply = store
        .eval_with(CONTEXT, &SCRIPTS.enqueue_one, &keys.0[..4], |cmd| {
            cmd.arg(&store.inner.channel)
                .arg(topic)
                .arg(&job.id)
                .arg(&job.record[..])
                .arg(kind)
                .arg(value)
                .arg(u8::from(job.replace))
                .arg(job.key.as_deref().unwrap_or(""));
        })
        .await?;
    let mut r = Reply::new(reply, CONTEXT)?;
    let (code, due_at_ms) = (r.int()?, r.int()?);
    Ok(outcome(code, due_at_ms))
}

/// Cancels, coalesced per topic.
pub(super) struct Cancels;

impl Batched for Cancels {
    type Item = String;
    type Out = CancelOutcome;
    const CONTEXT: &'static str = "cancelling a job";
    const MAX_ITEMS: usize = ID_CHUNK;
    const MAX_BYTES: usize = BATCH_BYTES;

    fn bytes(id: &String) -> usize {
        id.len() + 16
    }

    fn queues(store: &RedisStore) -> &GroupCommit<Self> {
        &store.inner.cancels
    }

    async fn run(
        store: &RedisStore,
        topic: &str,
        keys: &TopicKeys,
        ids: &[String],
    ) -> Result<Vec<CancelOutcome>> {
        const CONTEXT: &str = "cancelling a job";
        let reply = store
            .eval_with(CONTEXT, &SCRIPTS.cancel, keys.with_outcomes(), |inv| {
                inv.arg(&store.inner.channel).arg(topic).arg(ids);
            })
            .await?;
        let codes = ints(reply, CONTEXT)?;
        if codes.len() != ids.len() {
            return Err(Error::backend(
                CONTEXT,
                "the script's reply has the wrong length",
            ));
        }
        Ok(codes
            .into_iter()
            .map(|c| match c {
                1 => CancelOutcome::Removed,
                2 => CancelOutcome::Marked,
                _ => CancelOutcome::NotFound,
            })
            .collect())
    }
}

/// Reschedules, coalesced per topic.
pub(super) struct Reschedules;

impl Batched for Reschedules {
    type Item = (String, Due);
    type Out = RescheduleOutcome;
    const CONTEXT: &'static str = "rescheduling a job";
    const MAX_ITEMS: usize = ID_CHUNK;
    const MAX_BYTES: usize = BATCH_BYTES;

    fn bytes((id, _): &(String, Due)) -> usize {
        id.len() + 32
    }

    fn queues(store: &RedisStore) -> &GroupCommit<Self> {
        &store.inner.reschedules
    }

    async fn run(
        store: &RedisStore,
        topic: &str,
        keys: &TopicKeys,
        items: &[(String, Due)],
    ) -> Result<Vec<RescheduleOutcome>> {
        const CONTEXT: &str = "rescheduling a job";
        let reply = store
            .eval(CONTEXT, &SCRIPTS.reschedule, keys, |inv| {
                inv.arg(&store.inner.channel).arg(topic);
                for (id, due) in items {
                    let (kind, value) = due_args(*due);
                    inv.arg(id).arg(kind).arg(value);
                }
            })
            .await?;
        let codes = ints(reply, CONTEXT)?;
        if codes.len() != items.len() * 2 {
            return Err(Error::backend(
                CONTEXT,
                "the script's reply has the wrong length",
            ));
        }
        Ok(codes
            .chunks(2)
            .map(|c| match c[0] {
                1 => RescheduleOutcome::Rescheduled { due_at_ms: c[1] },
                2 => RescheduleOutcome::Running,
                4 => RescheduleOutcome::Waiting,
                _ => RescheduleOutcome::NotFound,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Due;

    fn jobs(ids: &[&str]) -> Vec<NewJob> {
        ids.iter()
            .map(|id| NewJob::new((*id).to_owned(), Vec::new(), Due::In(0), false))
            .collect()
    }

    #[test]
    fn distinct_ids_finds_an_id_given_twice_anywhere_in_a_batch() {
        assert!(distinct_ids(&jobs(&[])));
        assert!(distinct_ids(&jobs(&["a"])));
        assert!(distinct_ids(&jobs(&["b", "a", "ab", "ba"])));
        assert!(!distinct_ids(&jobs(&["a", "a"])));
        assert!(!distinct_ids(&jobs(&["x", "b", "c", "a", "d", "x"])));
        assert!(!distinct_ids(&jobs(&["c", "b", "c"])));
    }
}
