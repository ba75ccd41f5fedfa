//! The checker: every enqueued id is classified as done once, done more than
//! once, dead, or lost, and the delivery promise is asserted.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use postpone::store::StoredState;

use super::log::Event;
use super::{Rig, TOPIC};

/// What a test promises beyond the common part (every id ends once; nothing lost, early, or run after
/// its acknowledgement).
#[derive(Debug, Clone, Default)]
pub struct Expect {
    /// Ids that must end dead, with a reason containing `dead_reason`.
    pub must_die: Vec<String>,
    /// Ids that may end dead (besides `must_die`).
    pub may_die: Vec<String>,
    /// Text the reason of each dead job must contain.
    pub dead_reason: Option<&'static str>,
    /// No job is claimed or run twice (no fault hit a running job).
    pub once: bool,
    /// Handlers never fail, so every run is attempt 1: a crash or pause used no attempt.
    pub attempt_one: bool,
    /// Every job's first claim comes within this many ms of its due time (by the Redis clock).
    pub late_within_ms: Option<i64>,
    /// A job whose worker was killed, crashed or stopped is due again within this many ms.
    pub rerun_within_ms: Option<i64>,
}

/// A test's figures.
#[derive(Debug, Default)]
pub struct Report {
    pub jobs: usize,
    pub faults: BTreeMap<String, usize>,
    pub claims: usize,
    pub reruns_after_worker_fault: usize,
    pub reruns_after_redis_fault: usize,
    pub reruns_unexplained: usize,
    pub retries: usize,
    pub done_once: usize,
    pub done_more_than_once: usize,
    pub extra_runs: usize,
    pub dead: usize,
    pub lost: usize,
    pub stale_acks: usize,
    /// Ids whose enqueue returned an error, and how many of them Redis had stored all the same.
    pub uncertain: usize,
    pub uncertain_stored: usize,
    /// Claims sent but never answered (their worker died meanwhile): they may have taken jobs.
    pub unseen_claims: usize,
    /// Re-runs not measured: an unseen claim may have taken the job in between.
    pub reruns_through_unseen_claims: usize,
    /// Latest first claim after the due time (measured when `late_within_ms` is set).
    pub max_late_ms: i64,
    /// Longest time from a worker fault to its job being claimed again (a swept job keeps its place in
    /// line, so this is bounded by the lease, not by the backlog).
    pub max_rerun_ms: i64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, n)| format!("{k}:{n}"))
            .collect();
        write!(
            f,
            "jobs={} (+{} uncertain, {} of them stored) faults={} [{}] claims={} reruns={}+{}+{} (after worker faults + Redis faults + \
             unexplained) retries={} done_once={} done_more_than_once={} extra_runs={} dead={} lost={} \
             stale_acks={} unseen_claims={} (reruns not measured: {}) max_rerun_ms={} max_late_ms={}",
            self.jobs,
            self.uncertain,
            self.uncertain_stored,
            self.faults.values().sum::<usize>(),
            faults.join(" "),
            self.claims,
            self.reruns_after_worker_fault,
            self.reruns_after_redis_fault,
            self.reruns_unexplained,
            self.retries,
            self.done_once,
            self.done_more_than_once,
            self.extra_runs,
            self.dead,
            self.lost,
            self.stale_acks,
            self.unseen_claims,
            self.reruns_through_unseen_claims,
            self.max_rerun_ms,
            self.max_late_ms
        )
    }
}

/// What the log tells about faults beyond the test's own record.
struct Clues<'a> {
    /// When each worker that crashed by itself did, on the Redis clock.
    crashed_at: &'a HashMap<u32, i64>,
    /// Claims no line shows, each as (claim before it, claim after it) times.
    unseen: &'a [(i64, i64)],
}

#[derive(Default)]
struct Seen {
    /// (token, pid, ms, due ms at the claim)
    claims: Vec<(u64, u32, i64, i64)>,
    starts: Vec<(u32, i64)>,
    finishes: usize,
    done_acks: Vec<u64>,
    retry_acks: Vec<u64>,
    hooks: Vec<String>,
}

impl Rig {
    /// Classifies every enqueued id, asserts the promise and `expect`, prints and returns the figures.
    pub async fn check(&self, expect: Expect) -> Report {
        let events = self.events();
        let mut seen: HashMap<String, Seen> = HashMap::new();
        let mut bad: Vec<String> = Vec::new();
        let mut report = Report {
            jobs: self.ledger.len(),
            ..Report::default()
        };
        for e in &events {
            match e {
                Event::Claim {
                    id,
                    token,
                    pid,
                    ms,
                    due_ms,
                } => {
                    report.claims += 1;
                    seen.entry(id.clone())
                        .or_default()
                        .claims
                        .push((*token, *pid, *ms, *due_ms));
                }
                Event::Start {
                    id, attempt, ms, ..
                } => seen
                    .entry(id.clone())
                    .or_default()
                    .starts
                    .push((*attempt, *ms)),
                Event::Finish { id, .. } => seen.entry(id.clone()).or_default().finishes += 1,
                Event::Ack {
                    id,
                    token,
                    kind,
                    outcome,
                    ..
                } => {
                    let s = seen.entry(id.clone()).or_default();
                    match (kind.as_str(), outcome.as_str()) {
                        ("done", "applied") => s.done_acks.push(*token),
                        ("retry", "applied") => s.retry_acks.push(*token),
                        (_, "stale") => report.stale_acks += 1,
                        _ => {}
                    }
                }
                Event::Dead { id, reason, .. } => seen
                    .entry(id.clone())
                    .or_default()
                    .hooks
                    .push(reason.clone()),
                _ => {}
            }
        }
        for f in &self.faults {
            *report.faults.entry(f.kind.clone()).or_default() += 1;
        }
        // A crash the worker chose itself is placed on the Redis clock through its `ready` line.
        let mut offset = HashMap::new();
        let mut crashed_at = HashMap::new();
        for e in &events {
            match e {
                Event::Ready {
                    pid,
                    redis_ms,
                    local_ms,
                } if *redis_ms >= 0 => {
                    offset.insert(*pid, redis_ms - local_ms);
                }
                Event::Crash { pid, local_ms, .. } => {
                    if let Some(o) = offset.get(pid) {
                        crashed_at.insert(*pid, local_ms + o);
                    }
                }
                _ => {}
            }
        }
        // A claim sent but never answered (its worker died while the reply was on its way) may have
        // taken jobs nobody logged: from when it was sent until its worker's next fault.
        let answered: std::collections::HashSet<u64> = events
            .iter()
            .filter_map(|e| match e {
                Event::Claim { token, .. } | Event::Replied { token, .. } => Some(*token),
                _ => None,
            })
            .collect();
        let unseen: Vec<(i64, i64)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Claiming {
                    token,
                    pid,
                    local_ms,
                } if !answered.contains(token) => {
                    let sent = offset.get(pid).map_or(i64::MIN, |o| local_ms + o);
                    let fault = self
                        .faults
                        .iter()
                        .filter(|f| f.pid == Some(*pid) && f.at_ms >= sent)
                        .map(|f| f.at_ms)
                        .min()
                        .unwrap_or(i64::MAX);
                    Some((sent, fault))
                }
                _ => None,
            })
            .collect();
        report.unseen_claims = unseen.len();
        for id in seen.keys() {
            if !self.ledger.contains_key(id) && !self.uncertain.contains(id) {
                bad.push(format!("{id:?} ran but was never enqueued"));
            }
        }
        let store = self.client.store();
        let empty = Seen::default();
        for (id, &due) in &self.ledger {
            let s = seen.get(id).unwrap_or(&empty);
            let state = lookup(store.as_ref(), id).await;
            if expect.must_die.contains(id) && !matches!(state, Some(StoredState::Dead { .. })) {
                bad.push(format!("{id:?} should have been dead-lettered: {state:?}"));
            }
            match state {
                None if s.finishes == 0 => {
                    report.lost += 1;
                    bad.push(format!(
                        "{id:?} LOST: gone from Redis but its handler never finished"
                    ));
                }
                None => {
                    if s.finishes == 1 {
                        report.done_once += 1;
                    } else {
                        report.done_more_than_once += 1;
                        report.extra_runs += s.finishes - 1;
                    }
                }
                Some(StoredState::Dead { reason, .. }) => {
                    report.dead += 1;
                    if !expect.must_die.contains(id) && !expect.may_die.contains(id) {
                        bad.push(format!("{id:?} died unexpectedly: {reason}"));
                    }
                    if let Some(want) = expect.dead_reason {
                        if !reason.contains(want) {
                            bad.push(format!("{id:?} died for {reason:?}, not {want:?}"));
                        }
                    }
                    if s.hooks.is_empty() {
                        bad.push(format!("{id:?} is dead but its dead-letter hook never ran"));
                    }
                }
                Some(other) => bad.push(format!("{id:?} still live after the drain: {other:?}")),
            }
            if s.done_acks.len() > 1 {
                bad.push(format!(
                    "{id:?} acknowledged done {} times",
                    s.done_acks.len()
                ));
            }
            // A done ack applies only while its claim's lease is current: no claim of the job may come
            // after the acknowledged one.
            if let Some(&acked) = s.done_acks.first() {
                let acked_ms = s
                    .claims
                    .iter()
                    .find(|(token, ..)| *token == acked)
                    .map(|(_, _, ms, _)| *ms);
                for (token, pid, ms, _) in &s.claims {
                    if acked_ms.is_some_and(|at| *ms > at) {
                        bad.push(format!(
                            "{id:?} claimed again (token {token}, pid {pid}) after its done ack (token {acked})"
                        ));
                    }
                }
            }
            if let (Some(limit), Some(first)) =
                (expect.late_within_ms, s.claims.iter().min_by_key(|c| c.2))
            {
                report.max_late_ms = report.max_late_ms.max(first.2 - due);
                if first.2 - due > limit {
                    bad.push(format!(
                        "{id:?} claimed {} ms LATE (limit {limit} ms, pid {})",
                        first.2 - due,
                        first.1
                    ));
                }
            }
            for (token, pid, ms, _) in &s.claims {
                if *ms < due {
                    bad.push(format!(
                        "{id:?} claimed {} ms EARLY (token {token}, pid {pid})",
                        due - ms
                    ));
                }
            }
            for (attempt, ms) in &s.starts {
                if *ms >= 0 && *ms < due {
                    bad.push(format!("{id:?} started {} ms EARLY", due - ms));
                }
                if expect.attempt_one && *attempt != 1 {
                    bad.push(format!(
                        "{id:?} ran as attempt {attempt}: a fault used an attempt"
                    ));
                }
            }
            if expect.once && (s.claims.len() > 1 || s.finishes > 1) {
                bad.push(format!(
                    "{id:?} ran more than once: {} claims, {} finishes",
                    s.claims.len(),
                    s.finishes
                ));
            }
            let clues = Clues {
                crashed_at: &crashed_at,
                unseen: &unseen,
            };
            self.reruns(id, s, &clues, &expect, &mut report, &mut bad);
        }
        // Jobs whose enqueue failed but which Redis had stored ran too, and count as processed.
        let mut done_uncertain = 0;
        for id in self
            .uncertain
            .iter()
            .filter(|id| !self.ledger.contains_key(*id))
        {
            let finished = seen.get(id).is_some_and(|s| s.finishes > 0);
            if finished && lookup(store.as_ref(), id).await.is_none() {
                done_uncertain += 1;
            }
        }
        report.uncertain = self.uncertain.len();
        report.uncertain_stored = done_uncertain;
        let counts = self.counts().await;
        let done = report.done_once + report.done_more_than_once + done_uncertain;
        if counts.processed != done as u64 {
            bad.push(format!(
                "the processed counter is {} but {done} jobs are done: some job was acknowledged twice, \
                 or an acknowledgement was lost",
                counts.processed
            ));
        }
        eprintln!("FAULT-FIGURES {}: {report}", self.name);
        if !bad.is_empty() {
            let shown: Vec<&String> = bad.iter().take(20).collect();
            panic!(
                "{}: the promise is broken ({} violations): {report}\n{}\n{}",
                self.name,
                bad.len(),
                shown
                    .iter()
                    .map(|s| format!("  - {s}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                self.worker_stderr()
            );
        }
        report
    }

    /// Attributes each re-claim of `id` to a fault, and measures how long the fault delayed it.
    fn reruns(
        &self,
        id: &str,
        s: &Seen,
        clues: &Clues<'_>,
        expect: &Expect,
        report: &mut Report,
        bad: &mut Vec<String>,
    ) {
        // In the order they happened (tokens are random).
        let mut claims = s.claims.clone();
        claims.sort_by_key(|(token, _, ms, _)| (*ms, *token));
        for pair in claims.windows(2) {
            let ((prev_token, prev_pid, prev_ms, _), (_, next_pid, next_ms, _)) =
                (pair[0], pair[1]);
            if s.retry_acks.contains(&prev_token) {
                report.retries += 1;
                continue;
            }
            let worker_fault = self
                .faults
                .iter()
                .filter(|f| f.pid == Some(prev_pid) && f.at_ms >= prev_ms - 5 && f.at_ms <= next_ms)
                .min_by_key(|f| f.at_ms);
            if let Some(f) = worker_fault {
                report.reruns_after_worker_fault += 1;
                // A crash the worker chose itself is seen late: measure from its own line.
                let at = match f.kind.as_str() {
                    "crash" => clues.crashed_at.get(&prev_pid).copied().unwrap_or(prev_ms),
                    _ => f.at_ms,
                };
                let from = at.max(prev_ms);
                // The sweep makes the job due again at its own due time: it keeps its place in line, so
                // it runs again as soon as a live worker sweeps it, however long the backlog.
                let delay = next_ms - from;
                let limit = expect.rerun_within_ms.unwrap_or(i64::MAX);
                if clues
                    .unseen
                    .iter()
                    .any(|(before, after)| *after > from && *before < next_ms)
                {
                    // A claim we did not see (its worker died before logging it) may have taken the
                    // job in between: this delay is not this fault's alone.
                    report.reruns_through_unseen_claims += 1;
                    continue;
                }
                report.max_rerun_ms = report.max_rerun_ms.max(delay);
                if delay > limit {
                    bad.push(format!(
                        "{id:?} ran again {delay} ms after its worker ({prev_pid}) was hit by {:?} \
                         (limit {limit} ms; rerun on pid {next_pid})",
                        f.kind
                    ));
                }
            } else if self
                .faults
                .iter()
                .any(|f| f.pid.is_none() && f.at_ms <= next_ms && f.at_ms >= prev_ms - 5_000)
            {
                report.reruns_after_redis_fault += 1;
            } else {
                report.reruns_unexplained += 1;
            }
        }
    }
}

/// A job's state in Redis, retrying while Redis is away.
async fn lookup(store: &dyn postpone::store::Store, id: &str) -> Option<StoredState> {
    for _ in 0..100 {
        match store.job(TOPIC, id).await {
            Ok(j) => return j.map(|j| j.state),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    panic!("looking up {id:?}: Redis does not answer")
}
