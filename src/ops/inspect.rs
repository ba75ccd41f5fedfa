//! One job, as an operator sees it: payload, attempts, errors, schedule, and a plain line saying why it
//! is not running.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::listing::{payload_json, result_json};
use super::workers::{worker_id, WorkerInfo};
use crate::client::{JobState, Topic};
use crate::error::Result;
use crate::partition::partition_of;
use crate::record::{AttemptError, Record};
use crate::store::{StoredJob, StoredState, TopicCounts};
use crate::time::human_duration;
use crate::time::ms_to_time;

/// A job in full.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct JobDetail {
    /// Its topic.
    pub topic: String,
    /// Its id.
    pub id: String,
    /// Its partition, of `partitions`.
    pub partition: u16,
    /// The topic's partitions.
    pub partitions: u16,
    /// Where it is (flattened in JSON: `state` and its times).
    #[serde(flatten)]
    pub state: JobState,
    /// A dead letter's death number.
    pub death: Option<u64>,
    /// A dead letter: whether its hook has succeeded.
    pub hook_delivered: Option<bool>,
    /// The attempt it is on (dead: the attempts it ran).
    pub attempt: u32,
    /// Attempts its schedule allows, when known.
    pub max_attempts: Option<u32>,
    /// Its retry schedule, delays in ms indexed by attempt (slot 0 unused), when known: set on this job
    /// at enqueue, or its topic's as a live worker serving it declares.
    pub retry_ms: Option<Vec<u64>>,
    /// When it was first enqueued.
    pub enqueued_at: DateTime<Utc>,
    /// Its payload as JSON (a string when it is not JSON).
    pub payload: serde_json::Value,
    /// Its key for fairness (see [`Job::key`](crate::Job::key) and
    /// [`Enqueue::key`](crate::Enqueue::key)): while it waits, is due or runs, and as a dead letter (a
    /// requeue files it under it again); `None` for a job without one and for a kept finished job.
    pub key: Option<String>,
    /// A due or running job's key as claims see it now: its jobs queued and running, and until when it
    /// is held back (as [`Ops::busiest_keys`](crate::ops::Ops::busiest_keys) shows keys).
    pub key_load: Option<crate::store::KeyLoad>,
    /// The limits per key its topic's workers last claimed keyed jobs under, beside
    /// [`key_load`](Self::key_load) (whose `own_limits`, when set, replace them for its key).
    pub key_limits: Option<crate::KeyLimits>,
    /// Errors of its failed attempts, oldest first.
    pub errors: Vec<AttemptError>,
    /// How often its lease expired.
    pub stalls: u32,
    /// The worker holding it (running), when known.
    pub worker: Option<String>,
    /// Whether its topic is paused.
    pub paused: bool,
    /// Where it is stored, on a Redis Cluster: the master serving its partition (`host:port`).
    pub node: Option<String>,
    /// Why it is not running (or what it is doing), in a sentence.
    pub why: String,
    /// Its metadata (see [`Enqueue::meta`](crate::Enqueue::meta)), the entries postpone sets included:
    /// `postpone.batch` ([`batch_id`](Self::batch_id)), `postpone.unique` ([`unique`](Self::unique)),
    /// `postpone.debounce` ([`debounce`](Self::debounce)).
    pub meta: std::collections::BTreeMap<String, String>,
    /// A kept succeeded job's result as JSON (when its type returns one).
    pub result: Option<serde_json::Value>,
    /// A running job's progress, as its handler last reported it.
    pub progress: Option<crate::store::Progress>,
}

impl JobDetail {
    /// A unique job's key, window and the states that hold the key, as operators read them
    /// (`product:42 for 10m (scheduled, running, finished)`): its metadata `postpone.unique`; `None`
    /// for a job enqueued without a unique key.
    pub fn unique(&self) -> Option<&str> {
        self.meta.get(crate::meta::UNIQUE_KEY).map(String::as_str)
    }

    /// A debounced job's key, quiet period and max wait (`product:42 quiet 5s max 1m`): its metadata
    /// `postpone.debounce`; `None` for a job enqueued without a debounce key.
    pub fn debounce(&self) -> Option<&str> {
        self.meta.get(crate::meta::DEBOUNCE_KEY).map(String::as_str)
    }
}

fn span(from_ms: i64, to_ms: i64) -> String {
    human_duration(Duration::from_millis(
        u64::try_from(to_ms.saturating_sub(from_ms)).unwrap_or(0),
    ))
}

/// Everything the "why" line is made of.
struct Facts<'a> {
    topic: &'a Topic,
    id: &'a str,
    stored: &'a StoredJob,
    now_ms: i64,
    /// The counts of the job's topic (partition): paused, flow control.
    counts: TopicCounts,
    workers: &'a [WorkerInfo],
    node: Option<&'a str>,
}

impl Facts<'_> {
    /// Why a due job waits, when flow control holds its topic back.
    fn held_back(&self, due: i64) -> Option<String> {
        let (now, flow, name) = (self.now_ms, &self.counts.flow, self.topic.name());
        let ago = span(due, now);
        if let Some(until) = flow.held_until_ms {
            return Some(format!(
                "due {ago} ago, but a handler reported a provider's rate limit: no worker claims topic \
                 {name} until {} UTC (in {})",
                ms_to_time(until).format("%H:%M:%S"),
                span(now, until)
            ));
        }
        if let Some(max) = flow
            .max_running
            .filter(|m| self.counts.active >= u64::from(*m))
        {
            return Some(format!(
                "due {ago} ago, waiting for a slot: topic {name} runs its most at once ({max}, \
                 max_running, across every worker)"
            ));
        }
        match (flow.rate, flow.rate_budget) {
            (Some(rate), Some(0)) => Some(format!(
                "due {ago} ago, waiting for topic {name}'s rate limit ({} per {:?}): the budget is \
                 spent for now",
                rate.jobs(),
                rate.per()
            )),
            _ => None,
        }
    }

    /// Why a due job of a key waits, when its key's limits hold it back (a hold, its rate, its max
    /// running).
    fn key_held_back(&self, due: i64) -> Option<String> {
        let (now, load) = (self.now_ms, self.stored.key_load.as_ref()?);
        let (ago, key) = (span(due, now), &load.key);
        if let Some(until) = load.held_until_ms.filter(|u| *u > now) {
            return Some(format!(
                "due {ago} ago, but its key {key:?} is held back until {} UTC (in {}): by its rate \
                 per key, or a handler's rate_limited for that key; the topic's other keys run",
                ms_to_time(until).format("%H:%M:%S"),
                span(now, until)
            ));
        }
        // Its own limits, if it has some, else the topic's limits per key.
        let max = load
            .own_limits
            .or(self.stored.key_limits)
            .map(|l| l.max_running_per_key())
            .filter(|m| *m > 0 && load.running >= u64::from(*m))?;
        Some(format!(
            "due {ago} ago, waiting for its key: key {key:?} runs its most at once ({max}, max \
             running per key, across every worker); the topic's other keys run"
        ))
    }

    /// Where a due job of a key stands among its key's jobs, for the line of a job that waits for a
    /// slot.
    fn key_turn(&self) -> String {
        match &self.stored.key_load {
            Some(load) => format!(
                " (its key {:?} takes its turn among the topic's keys: {} of its jobs queued)",
                load.key, load.queued
            ),
            None => String::new(),
        }
    }

    fn stall_limit(&self) -> Option<u32> {
        self.serving().map(|w| w.stall_limit).min()
    }

    fn serving(&self) -> impl Iterator<Item = &WorkerInfo> {
        self.workers.iter().filter(|w| w.serves(self.topic.name()))
    }

    fn stalls(&self) -> String {
        match (self.stored.stalls, self.stall_limit()) {
            (0, _) => String::new(),
            (n, Some(limit)) => format!("; stalled {n} of {limit} (its lease expired {n} times)"),
            (n, None) => format!("; stalled {n} times (its lease expired)"),
        }
    }

    fn where_stored(&self) -> String {
        let n = self.topic.partitions();
        let on = self
            .node
            .map(|n| format!(" on node {n}"))
            .unwrap_or_default();
        if n <= 1 {
            return match on.is_empty() {
                true => String::new(),
                false => format!(" [stored{on}]"),
            };
        }
        let p = partition_of(self.id, n);
        format!(" [partition {p} of {n}{on}]")
    }

    fn why(&self) -> String {
        let now = self.now_ms;
        let line = match &self.stored.state {
            StoredState::Waiting { parents } => super::waiting::why(parents),
            StoredState::Due { due_at_ms } => {
                let due = *due_at_ms;
                let when = format!("{} UTC", ms_to_time(due).format("%Y-%m-%d %H:%M:%S"));
                if self.counts.paused {
                    format!(
                        "topic {} is paused: no worker claims it until it is resumed (due {})",
                        self.topic.name(),
                        if due > now {
                            format!("in {}", span(now, due))
                        } else {
                            format!("{} ago", span(due, now))
                        }
                    )
                } else if due > now {
                    let clock = match self.topic.store().backend_name() {
                        b if b.starts_with("redis") => "the Redis clock",
                        _ => "the store's clock",
                    };
                    format!("due in {} ({when}, by {clock})", span(now, due))
                } else if let Some(held) = self.held_back(due).or_else(|| self.key_held_back(due)) {
                    held
                } else {
                    let n = self.serving().count();
                    match n {
                        0 => format!(
                            "due {} ago, but no live worker serves topic {}: start one",
                            span(due, now),
                            self.topic.name()
                        ),
                        _ => format!(
                            "due {} ago, waiting for a free slot on the {n} worker(s) serving it{}",
                            span(due, now),
                            self.key_turn()
                        ),
                    }
                }
            }
            StoredState::Active { lease_deadline_ms } => {
                let who = match self.stored.holder.map(worker_id) {
                    Some(id) => match self.workers.iter().find(|w| w.id == id) {
                        Some(w) => format!("worker {id} (host {}, pid {})", w.host, w.pid),
                        None => format!("worker {id} (no longer alive)"),
                    },
                    None => "a worker".to_owned(),
                };
                if *lease_deadline_ms > now {
                    format!(
                        "running: leased to {who} until {} UTC (in {}, renewed while it runs)",
                        ms_to_time(*lease_deadline_ms).format("%H:%M:%S"),
                        span(now, *lease_deadline_ms)
                    )
                } else {
                    format!(
                        "its lease from {who} expired {} ago (the worker died or stalled): the next \
                         claim makes it due again at its place in line",
                        span(*lease_deadline_ms, now)
                    )
                }
            }
            StoredState::Dead {
                died_at_ms,
                reason,
                delivered,
                ..
            } => format!(
                "dead since {} ago: {reason}; dead-letter hook {}; requeue it to run it again",
                span(*died_at_ms, now),
                if *delivered { "delivered" } else { "pending" }
            ),
            StoredState::Done {
                cancelled,
                done_at_ms,
            } => format!(
                "{} {} ago; kept by the topic's retention of finished jobs",
                if *cancelled { "cancelled" } else { "succeeded" },
                span(*done_at_ms, now)
            ),
        };
        format!("{line}{}{}", self.stalls(), self.where_stored())
    }
}

impl JobDetail {
    /// Builds the detail of a stored job.
    pub(super) fn new(
        topic: &Topic,
        id: &str,
        stored: StoredJob,
        now_ms: i64,
        counts: TopicCounts,
        workers: &[WorkerInfo],
        node: Option<String>,
    ) -> Result<JobDetail> {
        let paused = counts.paused;
        let record = topic.decode(id, &stored.record)?;
        let why = Facts {
            topic,
            id,
            stored: &stored,
            now_ms,
            counts,
            workers,
            node: node.as_deref(),
        }
        .why();
        let retry_ms = retry_of(&record, topic.name(), workers);
        let (death, hook_delivered) = match stored.state {
            StoredState::Dead { seq, delivered, .. } => (Some(seq), Some(delivered)),
            _ => (None, None),
        };
        let result = stored.result.as_deref().and_then(result_json);
        let progress = stored.progress.clone();
        let (key, key_load, key_limits) = (
            stored.key.clone(),
            stored.key_load.clone(),
            stored.key_limits,
        );
        let state = JobState::of(stored.state);
        Ok(JobDetail {
            topic: topic.name().to_owned(),
            id: id.to_owned(),
            partition: partition_of(id, topic.partitions()),
            partitions: topic.partitions(),
            state,
            death,
            hook_delivered,
            attempt: record.attempt,
            max_attempts: retry_ms
                .as_ref()
                .map(|r| u32::try_from(r.len().saturating_sub(1)).unwrap_or(u32::MAX)),
            retry_ms,
            enqueued_at: ms_to_time(record.enqueued_at_ms),
            payload: payload_json(&record.payload),
            key,
            key_load,
            key_limits,
            errors: record.errors,
            stalls: stored.stalls,
            worker: stored.holder.map(worker_id),
            paused,
            node,
            why,
            meta: record.meta.into_iter().collect(),
            result,
            progress,
        })
    }
}

/// A job's retry schedule: its own, else its topic's as a live worker declares it.
fn retry_of(record: &Record, topic: &str, workers: &[WorkerInfo]) -> Option<Vec<u64>> {
    if let Some((slots, _)) = &record.schedule {
        return Some(slots.clone());
    }
    workers
        .iter()
        .flat_map(|w| &w.topics)
        .find(|t| t.name == topic)
        .map(|t| t.retry_ms.clone())
}

#[cfg(test)]
mod tests {
    use super::human_duration;
    use std::time::Duration;

    #[test]
    fn durations_read_like_a_person_would_say_them() {
        let cases = [
            (0, "0ms"),
            (312, "312ms"),
            (4_000, "4s"),
            (252_000, "4m 12s"),
            (600_000, "10m"),
            (3_600_000, "1h"),
            (11_100_000, "3h 5m"),
            (86_400_000, "1d"),
            (176_400_000, "2d 1h"),
        ];
        for (ms, text) in cases {
            assert_eq!(human_duration(Duration::from_millis(ms)), text, "{ms}");
        }
    }
}
