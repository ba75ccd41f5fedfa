//! Batches on Redis (see [`crate::store::workflow`] for the contract).
//!
//! # Who owns which fact
//!
//! A batch lives in a slot of its own (`{<ns>:batch:<id>}`: its hash, its members, its staged entries;
//! see keys.rs and `scripts/batch_prelude.lua`); each member lives in its topic's slot; the namespace's
//! listing and recovery queue live in the namespace's slot. No script touches two slots, so:
//!
//! - **the batch's slot** owns membership, the counts, `closed`, `completed` and which callbacks fired.
//!   Adding members, counting an end and firing callbacks are each one script there: all or none.
//!   Whatever it decides must reach a topic (a member to enqueue, a callback fired) is first *staged*
//!   there, in the same script, numbered;
//! - **a topic's slot** owns its jobs and who follows them: `enqueue_member.lua` enqueues a staged
//!   entry under the token `b:<batch>:<number>` (the topic remembers tokens for [`TOKEN_KEEP_MS`], so
//!   a second enqueue of the same entry is a no-op) and, for a member, makes the batch a follower of the
//!   job in the same step. The job's first end records the end with its followers (outcomes.lua), in
//!   the step that ends it;
//! - **the namespace's slot** owns `batch_check`: every batch not yet done with (completed, every
//!   staged entry enqueued) is there, put there before the batch exists.
//!
//! # What a crash leaves
//!
//! - after `batch_mark` and before the batch's script: a listed batch that does not exist; recovery
//!   drops it;
//! - after staging and before the enqueues: staged entries; recovery (every [`CHECK_EVERY_MS`])
//!   enqueues them, and the tokens make any entry enqueued twice count once;
//! - after the enqueues and before unstaging: the same, every enqueue a no-op;
//! - after an end is recorded and before it is counted: the end in the topic's `ends`, which the
//!   topic's workers deliver (a claim reports it); after counting and before `ends_ack`: the end comes
//!   back after [`END_LEASE_MS`] and counting it again changes nothing (a member is counted only while
//!   pending); callbacks it fired are staged, so enqueued by the next dispatch or by recovery.
//!
//! Tokens are remembered for [`TOKEN_KEEP_MS`] (an hour); recovery looks at a batch every
//! [`CHECK_EVERY_MS`] while any worker runs. A dispatch repeated later than the hour can only follow an
//! hour with no worker at all, so no member ran meanwhile: its job is still due, and enqueueing it
//! again finds it there (an existing job stays as it is, and a batch follows a job once).
//!
//! So every step is atomic where it decides something and idempotent where it crosses slots.

use async_trait::async_trait;
use futures_util::future::join_all;

use super::reply::{ints, Reply};
use super::scripts::SCRIPTS;
use super::{due_args, RedisStore};
use crate::error::{Error, Result};
use crate::store::workflow::{BATCH_KEEP_MS, MAX_BATCH_ADD};
use crate::store::{
    AfterOutcome, BatchAdded, BatchCreated, BatchJob, BatchMember, BatchStatus, CallbackKind, Due,
    Ended, EnqueueOutcome, JobStore, Lookup, MemberState, NewBatch, NewJob, OnParentFailure,
    ParentRef, Watch, WorkflowStore,
};
use crate::validate::validate_batch_id;

/// How long a topic remembers the token of a staged entry it enqueued: a dispatch repeated within it
/// (a crashed caller's, by recovery) enqueues nothing twice.
const TOKEN_KEEP_MS: u64 = 3_600_000;
/// How long recorded ends taken for delivery stay hidden from other workers: a worker killed while
/// delivering them delays them this long (delivering them twice counts nothing twice).
const END_LEASE_MS: u64 = 5_000;
/// How often recovery looks at a batch not yet done with (and first, this long after its creation).
const CHECK_EVERY_MS: u64 = 60_000;
/// Staged entries per enqueue or unstage call.
const DISPATCH_CHUNK: usize = 1000;

/// A staged entry: a member, or a fired callback, and where it goes.
struct Entry {
    number: u64,
    member: bool,
    topic: String,
    job: NewJob,
}

/// Encodes a member (`m`) or callback (`c`) as staged: `"<m|c> <topic> <id len> <record len> <in|at>
/// <value> <priority> <replace 0|1>[ <key len>]\n<id><record>[<key>]"`, the key for fairness when
/// the job has one. Only this module reads it; the scripts keep it as is.
fn encode_entry(member: bool, job: &BatchJob) -> Vec<u8> {
    let (kind, value) = due_args(job.job.due);
    let mut out = format!(
        "{} {} {} {} {kind} {value} {} {}",
        if member { 'm' } else { 'c' },
        job.topic,
        job.job.id.len(),
        job.job.record.len(),
        job.job.priority,
        u8::from(job.job.replace),
    );
    if let Some(key) = &job.job.key {
        out.push_str(&format!(" {}", key.len()));
    }
    out.push('\n');
    let mut out = out.into_bytes();
    out.extend_from_slice(job.job.id.as_bytes());
    out.extend_from_slice(&job.job.record);
    if let Some(key) = &job.job.key {
        out.extend_from_slice(key.as_bytes());
    }
    out
}

fn decode_entry(number: u64, bytes: &[u8]) -> Option<Entry> {
    let newline = bytes.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&bytes[..newline]).ok()?;
    let mut f = head.split(' ');
    let member = match f.next()? {
        "m" => true,
        "c" => false,
        _ => return None,
    };
    let topic = f.next()?.to_owned();
    let id_len: usize = f.next()?.parse().ok()?;
    let rec_len: usize = f.next()?.parse().ok()?;
    let kind = f.next()?;
    let value: i64 = f.next()?.parse().ok()?;
    let priority: u8 = f.next()?.parse().ok()?;
    let replace = f.next()? == "1";
    let key_len: Option<usize> = match f.next() {
        Some(n) => Some(n.parse().ok()?),
        None => None,
    };
    let body = &bytes[newline + 1..];
    if body.len() != id_len + rec_len + key_len.unwrap_or(0) {
        return None;
    }
    let key = match key_len {
        Some(_) => Some(
            std::str::from_utf8(&body[id_len + rec_len..])
                .ok()?
                .to_owned(),
        ),
        None => None,
    };
    let id = std::str::from_utf8(&body[..id_len]).ok()?.to_owned();
    let due = match kind {
        "in" => Due::In(u64::try_from(value).ok()?),
        "at" => Due::At(value),
        _ => return None,
    };
    let job = NewJob::new(id, body[id_len..id_len + rec_len].to_vec(), due, replace)
        .priority(priority)
        .with_key(key);
    Some(Entry {
        number,
        member,
        topic,
        job,
    })
}

/// A member's ref in its batch: `"<store topic>\t<id>"`.
fn member_ref(topic: &str, id: &str) -> String {
    format!("{topic}\t{id}")
}

/// A recorded end, as `ends_claim.lua` returns it.
struct RecordedEnd {
    kind: char,
    id: String,
    /// Its reason (a death's), empty otherwise.
    reason: String,
    batches: Vec<String>,
    /// The jobs waiting for it: store topic, id, nonce.
    children: Vec<(String, String, String)>,
}

fn parse_end(info: &[u8]) -> Option<RecordedEnd> {
    let newline = info.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&info[..newline]).ok()?;
    let mut f = head.split(' ');
    let kind = f.next()?.chars().next()?;
    let id_len: usize = f.next()?.parse().ok()?;
    let refs_len: usize = f.next()?.parse().ok()?;
    let body = info.get(newline + 1..)?;
    let id = std::str::from_utf8(body.get(..id_len)?).ok()?.to_owned();
    let refs = std::str::from_utf8(body.get(id_len..id_len + refs_len)?).ok()?;
    let reason = String::from_utf8_lossy(body.get(id_len + refs_len..)?).into_owned();
    let mut end = RecordedEnd {
        kind,
        id,
        reason,
        batches: Vec::new(),
        children: Vec::new(),
    };
    for r in refs.split('\n') {
        if let Some(batch) = r.strip_prefix("b:") {
            end.batches.push(batch.to_owned());
        } else if let Some(child) = r.strip_prefix("j:") {
            let mut f = child.splitn(3, '\t');
            if let (Some(topic), Some(id), Some(nonce)) = (f.next(), f.next(), f.next()) {
                end.children
                    .push((topic.to_owned(), id.to_owned(), nonce.to_owned()));
            }
        }
    }
    Some(end)
}

impl RedisStore {
    /// A batch's three keys: its hash, its members, its staged entries.
    fn batch_keys(&self, id: &str) -> Result<[String; 3]> {
        validate_batch_id(id)?;
        let ns = &self.inner.namespace;
        Ok(["batch", "members", "staged"].map(|s| format!("postpone:{{{ns}:batch:{id}}}:{s}")))
    }

    /// The namespace's listing of batches and its recovery queue.
    fn batch_registry(&self) -> [String; 2] {
        let ns = &self.inner.namespace;
        ["batches", "batch_check"].map(|s| format!("postpone:{{{ns}}}:{s}"))
    }

    /// Runs `batch_add.lua`; returns its status, the staged number per job, and how many callbacks
    /// fired.
    async fn batch_add_call(
        &self,
        id: &str,
        create: Option<&NewBatch>,
        jobs: &[BatchJob],
        close: bool,
    ) -> Result<(i64, Vec<u64>, i64)> {
        const CONTEXT: &str = "adding jobs to a batch";
        let keys = self.batch_keys(id)?;
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.batch_add, &keys, |inv| {
                inv.arg(if create.is_some() { "create" } else { "add" })
                    .arg(if close { "1" } else { "0" });
                match create {
                    Some(batch) => {
                        inv.arg(&batch.description).arg(batch.callbacks.len());
                        for (kind, job) in &batch.callbacks {
                            inv.arg(kind.as_str()).arg(encode_entry(false, job));
                        }
                    }
                    None => {
                        inv.arg("").arg(0);
                    }
                }
                for job in jobs {
                    inv.arg(member_ref(&job.topic, &job.job.id))
                        .arg(encode_entry(true, job));
                }
            })
            .await?;
        let codes = ints(reply, CONTEXT)?;
        let status = *codes.first().ok_or_else(|| short(CONTEXT))?;
        if status != 1 {
            return Ok((status, Vec::new(), 0));
        }
        if codes.len() != jobs.len() + 2 {
            return Err(short(CONTEXT));
        }
        let numbers = codes[1..=jobs.len()]
            .iter()
            .map(|&n| u64::try_from(n).unwrap_or(0))
            .collect();
        Ok((status, numbers, codes[jobs.len() + 1]))
    }

    /// Enqueues the jobs just staged (numbered as `batch_add.lua` said; 0: not staged), then anything
    /// else staged when callbacks fired.
    async fn dispatch_added(
        &self,
        id: &str,
        jobs: Vec<BatchJob>,
        numbers: Vec<u64>,
        fired: i64,
    ) -> Result<()> {
        let entries = jobs
            .into_iter()
            .zip(numbers)
            .filter(|(_, n)| *n > 0)
            .map(|(job, number)| Entry {
                number,
                member: true,
                topic: job.topic,
                job: job.job,
            })
            .collect();
        self.dispatch(id, entries).await?;
        if fired > 0 {
            self.dispatch_staged(id).await?;
        }
        Ok(())
    }

    /// Enqueues staged entries into their topics (members followed by the batch), then unstages them;
    /// once the batch is done with, takes it off the recovery queue.
    async fn dispatch(&self, id: &str, entries: Vec<Entry>) -> Result<()> {
        let follower = format!("b:{id}");
        // By topic and kind, in staged order within each.
        let mut groups: Vec<((String, bool), Vec<Entry>)> = Vec::new();
        for e in entries {
            match groups
                .iter_mut()
                .find(|((t, m), _)| *t == e.topic && *m == e.member)
            {
                Some((_, group)) => group.push(e),
                None => groups.push(((e.topic.clone(), e.member), vec![e])),
            }
        }
        let mut numbers = Vec::new();
        for ((topic, member), group) in groups {
            let reference = if member { follower.as_str() } else { "" };
            for chunk in group.chunks(DISPATCH_CHUNK) {
                self.enqueue_member_call(id, &topic, reference, chunk)
                    .await?;
                numbers.extend(chunk.iter().map(|e| e.number));
            }
        }
        self.unstage(id, &numbers).await
    }

    async fn enqueue_member_call(
        &self,
        batch: &str,
        topic: &str,
        reference: &str,
        entries: &[Entry],
    ) -> Result<()> {
        const CONTEXT: &str = "enqueueing a batch's jobs";
        let keys = self.keys(topic)?;
        let mut all = keys.0.to_vec();
        all.push(keys.other("delivered"));
        all.push(keys.other("follows"));
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.enqueue_member, &all, |inv| {
                inv.arg(&self.inner.channel)
                    .arg(topic)
                    .arg(TOKEN_KEEP_MS)
                    .arg(reference);
                for e in entries {
                    let (kind, value) = due_args(e.job.due);
                    inv.arg(format!("b:{batch}:{}", e.number))
                        .arg(&e.job.id)
                        .arg(&e.job.record[..])
                        .arg(kind)
                        .arg(value)
                        .arg(u8::from(e.job.replace))
                        .arg(e.job.priority)
                        .arg(e.job.key.as_deref().unwrap_or(""));
                }
            })
            .await?;
        if ints(reply, CONTEXT)?.len() != entries.len() * 2 {
            return Err(short(CONTEXT));
        }
        Ok(())
    }

    /// Deletes staged entries (by number) and, when the batch is done with, its recovery entry.
    async fn unstage(&self, id: &str, numbers: &[u64]) -> Result<()> {
        const CONTEXT: &str = "unstaging a batch's entries";
        let keys = self.batch_keys(id)?;
        let mut done = false;
        let mut chunks: Vec<&[u64]> = numbers.chunks(DISPATCH_CHUNK).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for chunk in chunks {
            let reply = self
                .eval_with(CONTEXT, &SCRIPTS.batch_unstage, &keys, |inv| {
                    inv.arg(BATCH_KEEP_MS).arg(chunk);
                })
                .await?;
            done =
                redis::from_redis_value::<i64>(reply).map_err(|e| Error::backend(CONTEXT, e))? == 1;
        }
        if done {
            let mut cmd = redis::cmd("ZREM");
            cmd.arg(&self.batch_registry()[1]).arg(id);
            self.command::<i64>(CONTEXT, &cmd).await?;
        }
        Ok(())
    }

    /// Enqueues whatever the batch has staged (a crashed caller's leftovers, fired callbacks).
    async fn dispatch_staged(&self, id: &str) -> Result<()> {
        const CONTEXT: &str = "reading a batch's staged entries";
        let keys = self.batch_keys(id)?;
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(&keys[2]);
        let staged: Vec<(u64, Vec<u8>)> = self.command(CONTEXT, &cmd).await?;
        let mut entries = Vec::with_capacity(staged.len());
        let mut broken = Vec::new();
        for (number, bytes) in staged {
            match decode_entry(number, &bytes) {
                Some(e) => entries.push(e),
                None => {
                    tracing::error!(
                        batch = id,
                        number,
                        "postpone: a batch's staged entry is not in postpone's format (written outside postpone); dropped"
                    );
                    broken.push(number);
                }
            }
        }
        entries.sort_by_key(|e| e.number);
        if !broken.is_empty() {
            self.unstage(id, &broken).await?;
        }
        self.dispatch(id, entries).await
    }

    /// Counts ends in one batch (`ends`: member ref and kind); dispatches what that fired or
    /// completed.
    async fn count_ends(&self, id: &str, ends: &[(String, char)]) -> Result<()> {
        const CONTEXT: &str = "counting a batch's ended jobs";
        let keys = self.batch_keys(id)?;
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.batch_count, &keys, |inv| {
                for (reference, kind) in ends {
                    inv.arg(reference).arg(kind.to_string());
                }
            })
            .await?;
        let r = ints(reply, CONTEXT)?;
        let (fired, completed) = match r[..] {
            [fired, completed] => (fired, completed == 1),
            _ => return Err(short(CONTEXT)),
        };
        if fired == -1 {
            // The batch is gone (completed long ago): nothing follows this member any more.
            return Ok(());
        }
        if fired > 0 || completed {
            self.dispatch_staged(id).await?;
        }
        Ok(())
    }
}

impl RedisStore {
    /// Delivers parents' ends to jobs waiting in `topic` (`dep_hear.lua`): per end, the waiting job's
    /// id, its nonce, the parent's ref and how it ended (kind, then reason).
    async fn hear(&self, topic: &str, ends: &[[String; 4]]) -> Result<()> {
        const CONTEXT: &str = "delivering ended jobs to the jobs waiting for them";
        let keys = self.keys(topic)?;
        self.eval_with(CONTEXT, &SCRIPTS.dep_hear, keys.with_outcomes(), |inv| {
            inv.arg(&self.inner.channel).arg(topic);
            for end in ends {
                inv.arg(&end[..]);
            }
        })
        .await?;
        Ok(())
    }

    /// Makes a job that will wait follow `parent` (or stop following, with `stop`); whether the
    /// parent is live.
    async fn follow_parent(&self, parent: &ParentRef, follower: &str, stop: bool) -> Result<bool> {
        const CONTEXT: &str = "following a job's parent";
        let keys = self.keys(&parent.topic)?;
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.dep_follow, keys.with_outcomes(), |inv| {
                inv.arg(&parent.id)
                    .arg(follower)
                    .arg(if stop { "1" } else { "0" });
            })
            .await?;
        Ok(redis::from_redis_value::<i64>(reply).map_err(|e| Error::backend(CONTEXT, e))? == 1)
    }

    /// Stops following `parents` (best effort: a follower left behind costs its parent's end one
    /// delivery that changes nothing).
    async fn unfollow(&self, parents: &[&ParentRef], follower: &str) {
        for parent in parents {
            if let Err(e) = self.follow_parent(parent, follower, true).await {
                tracing::warn!(topic = parent.topic, id = parent.id, error = %e.report(), "postpone: could not stop following a parent");
            }
        }
    }

    /// How `parent` stands for a job about to wait for it: followed now (`live`), or how it ended;
    /// `None` when its topic does not know it.
    async fn parent_state(
        &self,
        parent: &ParentRef,
        follower: &str,
    ) -> Result<Option<(&'static str, String)>> {
        if self.follow_parent(parent, follower, false).await? {
            return Ok(Some(("live", String::new())));
        }
        Ok(
            match self.outcome(&parent.topic, &parent.id, Watch::No).await? {
                Lookup::Ended { ended, .. } => Some(match ended {
                    Ended::Succeeded { .. } => ("s", String::new()),
                    Ended::Cancelled => ("c", String::new()),
                    Ended::Dead { reason } => ("d", reason),
                }),
                // Live again (a new job of that id): follow that one.
                Lookup::Live { .. } => self
                    .follow_parent(parent, follower, false)
                    .await?
                    .then(|| ("live", String::new())),
                _ => None,
            },
        )
    }
}

fn short(context: &'static str) -> Error {
    Error::backend(context, "the script's reply has the wrong length")
}

/// A batch's status from its hash (`HGETALL`; callbacks' values are records, not text), or `None`
/// when it has none.
fn parse_status(id: &str, fields: Vec<(String, Vec<u8>)>) -> Option<BatchStatus> {
    if fields.is_empty() {
        return None;
    }
    let mut s = BatchStatus {
        id: id.to_owned(),
        description: String::new(),
        created_at_ms: 0,
        total: 0,
        succeeded: 0,
        dead: 0,
        cancelled: 0,
        closed: false,
        completed_at_ms: None,
        callbacks: Vec::new(),
    };
    let mut fired = Vec::new();
    for (field, value) in fields {
        if let Some(name) = field.strip_prefix("cb:") {
            if let Some(kind) = callback_kind(name) {
                s.callbacks.push((kind, false));
            }
            continue;
        }
        let value = String::from_utf8_lossy(&value).into_owned();
        let n = || value.parse::<u64>().unwrap_or(0);
        match field.as_str() {
            "desc" => s.description = value.clone(),
            "created" => s.created_at_ms = value.parse().unwrap_or(0),
            "total" => s.total = n(),
            "succeeded" => s.succeeded = n(),
            "dead" => s.dead = n(),
            "cancelled" => s.cancelled = n(),
            "closed" => s.closed = value == "1",
            "completed" => s.completed_at_ms = value.parse().ok(),
            f => {
                if let Some(kind) = f.strip_prefix("fired:").and_then(callback_kind) {
                    fired.push(kind);
                }
            }
        }
    }
    for (kind, has_fired) in &mut s.callbacks {
        *has_fired = fired.contains(kind);
    }
    s.callbacks.sort();
    Some(s)
}

fn callback_kind(name: &str) -> Option<CallbackKind> {
    CallbackKind::ALL.into_iter().find(|k| k.as_str() == name)
}

fn member_state(score: f64) -> MemberState {
    match (score as u64) % 4 {
        1 => MemberState::Succeeded,
        2 => MemberState::Dead,
        3 => MemberState::Cancelled,
        _ => MemberState::Pending,
    }
}

fn check_size(jobs: &[BatchJob]) -> Result<()> {
    if jobs.len() > MAX_BATCH_ADD {
        return Err(Error::InvalidConfig {
            reason: format!(
                "a batch takes at most {MAX_BATCH_ADD} jobs per call ({} given): add them in several calls",
                jobs.len()
            ),
        });
    }
    Ok(())
}

#[async_trait]
impl WorkflowStore for RedisStore {
    async fn batch_create(&self, id: &str, mut batch: NewBatch) -> Result<BatchCreated> {
        const CONTEXT: &str = "creating a batch";
        self.batch_keys(id)?;
        check_size(&batch.jobs)?;
        let [batches, check] = self.batch_registry();
        self.eval_with(CONTEXT, &SCRIPTS.batch_mark, &[batches, check], |inv| {
            inv.arg(id).arg(CHECK_EVERY_MS);
        })
        .await?;
        let jobs = std::mem::take(&mut batch.jobs);
        let close = batch.close;
        let (status, numbers, fired) = self.batch_add_call(id, Some(&batch), &jobs, close).await?;
        if status == 2 {
            return Ok(BatchCreated::Exists);
        }
        self.dispatch_added(id, jobs, numbers, fired).await?;
        Ok(BatchCreated::Created)
    }

    async fn batch_add(&self, id: &str, jobs: Vec<BatchJob>, close: bool) -> Result<BatchAdded> {
        check_size(&jobs)?;
        let (status, numbers, fired) = self.batch_add_call(id, None, &jobs, close).await?;
        match status {
            3 => return Ok(BatchAdded::Closed),
            4 => return Ok(BatchAdded::NotFound),
            _ => {}
        }
        let new = numbers.iter().filter(|&&n| n > 0).count() as u64;
        self.dispatch_added(id, jobs, numbers, fired).await?;
        Ok(BatchAdded::Added { new })
    }

    async fn batch(&self, id: &str) -> Result<Option<BatchStatus>> {
        let keys = self.batch_keys(id)?;
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(&keys[0]);
        let fields: Vec<(String, Vec<u8>)> = self.command("reading a batch", &cmd).await?;
        Ok(parse_status(id, fields))
    }

    async fn batch_members(
        &self,
        id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<BatchMember>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let keys = self.batch_keys(id)?;
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(&keys[1])
            .arg(offset)
            .arg(offset.saturating_add(limit - 1).min(i64::MAX as usize))
            .arg("WITHSCORES");
        let members: Vec<(String, f64)> = self.command("reading a batch's members", &cmd).await?;
        Ok(members
            .into_iter()
            .map(|(reference, score)| {
                let (topic, job) = reference.split_once('\t').unwrap_or(("", &reference));
                BatchMember {
                    topic: topic.to_owned(),
                    id: job.to_owned(),
                    state: member_state(score),
                }
            })
            .collect())
    }

    async fn batches(&self, offset: usize, limit: usize) -> Result<Vec<BatchStatus>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let [listing, _] = self.batch_registry();
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(&listing)
            .arg(offset)
            .arg(offset.saturating_add(limit - 1).min(i64::MAX as usize))
            .arg("REV");
        let ids: Vec<String> = self.command("listing batches", &cmd).await?;
        let found = join_all(ids.iter().map(|id| self.batch(id))).await;
        let mut out = Vec::with_capacity(ids.len());
        let mut gone = Vec::new();
        for (id, status) in ids.iter().zip(found) {
            match status? {
                Some(s) => out.push(s),
                None => gone.push(id),
            }
        }
        if !gone.is_empty() {
            let mut cmd = redis::cmd("ZREM");
            cmd.arg(&listing).arg(gone);
            self.command::<i64>("listing batches", &cmd).await?;
        }
        Ok(out)
    }

    async fn deliver_ends(&self, topic: &str, max: usize) -> Result<usize> {
        const CONTEXT: &str = "delivering ended jobs to their batches";
        if max == 0 {
            return Ok(0);
        }
        let keys = self.keys(topic)?;
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.ends_claim, keys.with_outcomes(), |inv| {
                inv.arg(max).arg(END_LEASE_MS);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let mut ends = Vec::new();
        let mut numbers = Vec::new();
        while r.remaining() >= 2 {
            let number = String::from_utf8_lossy(&r.bytes()?).into_owned();
            let info = r.bytes()?;
            match parse_end(&info) {
                Some(end) => ends.push(end),
                None => tracing::error!(
                    topic,
                    end = number,
                    "postpone: a recorded end is not in postpone's format (written outside postpone); dropped"
                ),
            }
            numbers.push(number);
        }
        if numbers.is_empty() {
            return Ok(0);
        }
        // By batch, each batch's ends counted in one script call.
        let mut by_batch: Vec<(String, Vec<(String, char)>)> = Vec::new();
        for end in &ends {
            let reference = member_ref(topic, &end.id);
            for batch in &end.batches {
                match by_batch.iter_mut().find(|(b, _)| b == batch) {
                    Some((_, list)) => list.push((reference.clone(), end.kind)),
                    None => by_batch.push((batch.clone(), vec![(reference.clone(), end.kind)])),
                }
            }
        }
        for (batch, list) in &by_batch {
            match self.count_ends(batch, list).await {
                Ok(()) => {}
                // An id that is not a batch id cannot come from postpone: drop it, loudly.
                Err(Error::InvalidBatchId { .. }) => tracing::error!(
                    topic,
                    batch,
                    "postpone: a job's follower is not a batch id (written outside postpone); ignored"
                ),
                // Left recorded: delivered again once its lease ends.
                Err(e) => return Err(e),
            }
        }
        // By the waiting job's topic, each topic's in one script call.
        let mut by_topic: Vec<(&str, Vec<[String; 4]>)> = Vec::new();
        for end in &ends {
            let parent = member_ref(topic, &end.id);
            let ended = format!("{}{}", end.kind, end.reason);
            for (child_topic, id, nonce) in &end.children {
                let item = [id.clone(), nonce.clone(), parent.clone(), ended.clone()];
                match by_topic.iter_mut().find(|(t, _)| t == child_topic) {
                    Some((_, list)) => list.push(item),
                    None => by_topic.push((child_topic, vec![item])),
                }
            }
        }
        for (child_topic, list) in &by_topic {
            self.hear(child_topic, list).await?;
        }
        self.eval_with(CONTEXT, &SCRIPTS.ends_ack, keys.with_outcomes(), |inv| {
            inv.arg(&numbers);
        })
        .await?;
        Ok(numbers.len())
    }

    async fn recover_batches(&self, max: usize) -> Result<usize> {
        const CONTEXT: &str = "recovering batches";
        let [listing, check] = self.batch_registry();
        let due: Vec<String> = redis::from_redis_value(
            self.eval_with(CONTEXT, &SCRIPTS.batch_due, &[check], |inv| {
                inv.arg(max).arg(CHECK_EVERY_MS);
            })
            .await?,
        )
        .map_err(|e| Error::backend(CONTEXT, e))?;
        for id in &due {
            match self.dispatch_staged(id).await {
                Ok(()) => {}
                Err(Error::InvalidBatchId { .. }) => {
                    let mut cmd = redis::cmd("ZREM");
                    cmd.arg(&self.batch_registry()[1]).arg(id);
                    self.command::<i64>(CONTEXT, &cmd).await?;
                }
                Err(e) => return Err(e),
            }
        }
        // Listed batches created more than the retention ago that are gone (completed and expired,
        // or never created) leave the listing, a few per call; younger ones are not looked at.
        let old = chrono::Utc::now().timestamp_millis() - BATCH_KEEP_MS as i64;
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(&listing)
            .arg("-inf")
            .arg(format!("({old}"))
            .arg("BYSCORE")
            .arg("LIMIT")
            .arg(0)
            .arg(16);
        let oldest: Vec<String> = self.command(CONTEXT, &cmd).await?;
        let mut gone = Vec::new();
        for id in oldest {
            let exists = match self.batch_keys(&id) {
                Ok(keys) => {
                    let mut cmd = redis::cmd("EXISTS");
                    cmd.arg(&keys[0]);
                    self.command::<i64>(CONTEXT, &cmd).await? == 1
                }
                Err(_) => false,
            };
            if !exists {
                gone.push(id);
            }
        }
        if !gone.is_empty() {
            let mut cmd = redis::cmd("ZREM");
            cmd.arg(&listing).arg(gone);
            self.command::<i64>(CONTEXT, &cmd).await?;
        }
        Ok(due.len())
    }

    async fn enqueue_after(
        &self,
        topic: &str,
        job: NewJob,
        parents: Vec<ParentRef>,
        on_failure: OnParentFailure,
    ) -> Result<AfterOutcome> {
        const CONTEXT: &str = "enqueueing a job that waits for jobs";
        let keys = self.keys(topic)?;
        if parents.is_empty() {
            let mut out = self.enqueue(topic, vec![job]).await?;
            let outcome = out.pop().ok_or_else(|| short(CONTEXT))?;
            return Ok(AfterOutcome::Enqueued(outcome));
        }
        let mut distinct: Vec<ParentRef> = Vec::with_capacity(parents.len());
        for p in parents {
            if !distinct.contains(&p) {
                distinct.push(p);
            }
        }
        // Follow every live parent first, then park the job: a parent that ends in between has its
        // end kept for the park (deps.lua). A parent no longer live is looked up: how it ended, or
        // missing (then nothing is enqueued, and the parents followed so far are let go).
        let nonce = format!("{:x}", crate::id::random_u64());
        let follower = format!("j:{topic}\t{}\t{nonce}", job.id);
        let mut states: Vec<(&ParentRef, &'static str, String)> =
            Vec::with_capacity(distinct.len());
        for parent in &distinct {
            match self.parent_state(parent, &follower).await {
                Ok(Some((state, reason))) => states.push((parent, state, reason)),
                other => {
                    let live: Vec<&ParentRef> = states.iter().map(|s| s.0).collect();
                    self.unfollow(&live, &follower).await;
                    return match other {
                        Ok(_) => Ok(AfterOutcome::MissingParent(parent.clone())),
                        Err(e) => Err(e),
                    };
                }
            }
        }
        let (kind, value) = due_args(job.due);
        // A failed park may have run all the same (a lost reply): its followers are then its own, so
        // they stay; if it did not run, each costs its parent's end one delivery that changes nothing.
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.dep_park, keys.with_outcomes(), |inv| {
                inv.arg(&self.inner.channel)
                    .arg(topic)
                    .arg(&job.id)
                    .arg(&job.record[..])
                    .arg(kind)
                    .arg(value)
                    .arg(job.priority)
                    .arg(on_failure.as_str())
                    .arg(&nonce)
                    .arg(job.key.as_deref().unwrap_or(""));
                for (parent, state, reason) in &states {
                    inv.arg(member_ref(&parent.topic, &parent.id))
                        .arg(*state)
                        .arg(reason);
                }
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let code = r.int()?;
        let live: Vec<&ParentRef> = states
            .iter()
            .filter(|s| s.1 == "live")
            .map(|s| s.0)
            .collect();
        Ok(match code {
            1 => AfterOutcome::Enqueued(EnqueueOutcome::Created {
                due_at_ms: r.int()?,
            }),
            2 => AfterOutcome::Waiting {
                parents_left: u32::try_from(r.int()?).unwrap_or(0),
            },
            3 => {
                self.unfollow(&live, &follower).await;
                AfterOutcome::Exists(EnqueueOutcome::Exists {
                    due_at_ms: r.int()?,
                })
            }
            4 => {
                self.unfollow(&live, &follower).await;
                AfterOutcome::Exists(EnqueueOutcome::Running)
            }
            5 => AfterOutcome::Ended(Ended::Dead {
                reason: String::from_utf8_lossy(&r.bytes()?).into_owned(),
            }),
            6 => AfterOutcome::Ended(Ended::Cancelled),
            _ => return Err(short(CONTEXT)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let job = BatchJob::new(
            "mail#3",
            NewJob::new("a b:1".into(), vec![0, 10, 255], Due::At(1234), false).priority(7),
        );
        let e = decode_entry(9, &encode_entry(true, &job)).unwrap();
        assert!(e.member);
        assert_eq!(
            (e.number, e.topic.as_str(), e.job.id.as_str()),
            (9, "mail#3", "a b:1")
        );
        assert_eq!(
            (e.job.record, e.job.due, e.job.priority),
            (vec![0, 10, 255], Due::At(1234), 7)
        );
        assert!(decode_entry(1, b"x mail 1 1 in 0 0 0\nab").is_none());
        assert!(decode_entry(1, b"m mail 5 1 in 0 0 0\nab").is_none());
        assert!(
            decode_entry(1, b"m mail 1 1 in 0 0 1\nab")
                .unwrap()
                .job
                .replace
        );
    }

    #[test]
    fn entries_keep_a_key_for_fairness_and_read_those_staged_without_one() {
        let keyed = NewJob::new("j1".into(), vec![1, 2], Due::In(0), false)
            .with_key(Some("tenant 7\n".into()));
        let e = decode_entry(1, &encode_entry(true, &BatchJob::new("mail", keyed))).unwrap();
        assert_eq!(e.job.key.as_deref(), Some("tenant 7\n"));
        assert_eq!(e.job.record, vec![1, 2]);
        // Staged before keys: no key field.
        let old = decode_entry(1, b"m mail 1 1 in 0 0 0\nab").unwrap();
        assert_eq!((old.job.key, old.job.record), (None, b"b".to_vec()));
        // A key length that does not add up.
        assert!(decode_entry(1, b"m mail 1 1 in 0 0 0 3\nabxy").is_none());
        assert!(decode_entry(1, b"m mail 1 1 in 0 0 0 x\nab").is_none());
    }

    #[test]
    fn recorded_ends_parse() {
        let end = parse_end(b"d 3 30\nx 1b:one\nj:mail#2\ta b\tf00\nb:two.2stalled").unwrap();
        assert_eq!((end.kind, end.id.as_str()), ('d', "x 1"));
        assert_eq!(end.batches, ["one", "two.2"]);
        assert_eq!(
            end.children,
            [("mail#2".to_owned(), "a b".to_owned(), "f00".to_owned())]
        );
        assert_eq!(end.reason, "stalled");
        assert!(parse_end(b"d 30 1\nx").is_none());
    }
}
