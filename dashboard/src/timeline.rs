//! A job's retry timeline, drawn from its schedule: past attempts with their errors and times, the one it
//! is on, and the ones still to come with the earliest times the schedule allows.

use chrono::{DateTime, Utc};
use postpone::ops::JobDetail;
use postpone::JobState;

use crate::view::Time;

/// Where an attempt stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// It ran and failed.
    Failed,
    /// It ran before this one (no error kept for it).
    Ran,
    /// The attempt the job is on: due, running, or the last one of a dead job.
    Current,
    /// Still to come, if the ones before fail.
    Next,
}

/// One attempt on the timeline.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) attempt: u32,
    pub(crate) stage: Stage,
    /// When it failed, or when it is due (at the earliest, for the ones to come).
    pub(crate) at: Option<Time>,
    /// The delay before it by the schedule (slot `attempt`), as text.
    pub(crate) delay: Option<String>,
    pub(crate) text: String,
}

impl Step {
    /// Its class in the page's stylesheet.
    pub(crate) fn class(&self) -> &'static str {
        match self.stage {
            Stage::Failed => "failed",
            Stage::Ran => "ran",
            Stage::Current => "current",
            Stage::Next => "next",
        }
    }
}

fn delay_text(ms: u64) -> String {
    if ms == 0 {
        "at once".to_owned()
    } else {
        format!(
            "+{}",
            postpone::ops::human_duration(std::time::Duration::from_millis(ms))
        )
    }
}

/// The timeline of `job`; `now` is the store's clock (a running job's next attempt is counted from
/// it).
pub(crate) fn timeline(job: &JobDetail, now: DateTime<Utc>) -> Vec<Step> {
    let k = job.attempt.max(1);
    let last_error = job.errors.iter().map(|e| e.attempt).max().unwrap_or(0);
    let n = job.max_attempts.unwrap_or(0).max(k).max(last_error);
    let slot = |a: u32| -> Option<u64> { job.retry_ms.as_ref()?.get(a as usize).copied() };
    // A dead or kept finished job has no attempts to come.
    let ended = matches!(
        job.state,
        JobState::Dead { .. } | JobState::Succeeded { .. } | JobState::Cancelled { .. }
    );
    // The earliest the attempt after the current one may run: the current one failing at once.
    let mut next_at = match &job.state {
        JobState::Scheduled { due_at } => Some((*due_at).max(now)),
        JobState::Running { .. } => Some(now),
        _ => None,
    };
    let mut steps = Vec::new();
    for a in 1..=n {
        let error = job.errors.iter().rev().find(|e| e.attempt == a);
        let delay = (a > 1).then(|| slot(a)).flatten().map(delay_text);
        let step = if a < k || (ended && error.is_some()) {
            match error {
                Some(e) => Step {
                    attempt: a,
                    stage: Stage::Failed,
                    at: Some(Time::of_ms(e.at_ms)),
                    delay,
                    text: e.message.clone(),
                },
                None => Step {
                    attempt: a,
                    stage: Stage::Ran,
                    at: None,
                    delay,
                    text: "ran (no error kept: snoozed, stalled, or its history trimmed)"
                        .to_owned(),
                },
            }
        } else if a == k {
            let (at, text) = match &job.state {
                JobState::Scheduled { due_at } => (
                    Some(Time::of(*due_at)),
                    if *due_at <= now {
                        "due now, waiting for a worker".to_owned()
                    } else {
                        "scheduled".to_owned()
                    },
                ),
                JobState::Waiting { .. } => (
                    None,
                    "waiting for other jobs: it becomes due once they succeed".to_owned(),
                ),
                JobState::Running { lease_until } => (
                    Some(Time::of(*lease_until)),
                    "running now (the time is its lease deadline, renewed while it runs)"
                        .to_owned(),
                ),
                JobState::Dead { died_at, reason } => {
                    (Some(Time::of(*died_at)), format!("dead: {reason}"))
                }
                JobState::Succeeded { finished_at } => {
                    (Some(Time::of(*finished_at)), "succeeded".to_owned())
                }
                JobState::Cancelled { cancelled_at } => {
                    (Some(Time::of(*cancelled_at)), "cancelled".to_owned())
                }
                _ => (None, String::new()),
            };
            Step {
                attempt: a,
                stage: Stage::Current,
                at,
                delay,
                text,
            }
        } else if ended {
            break;
        } else {
            let at = match (next_at, slot(a)) {
                (Some(t), Some(ms)) => {
                    let t = t + chrono::Duration::milliseconds(
                        i64::try_from(ms).unwrap_or(i64::MAX / 4),
                    );
                    next_at = Some(t);
                    Some(Time::of(t))
                }
                _ => None,
            };
            Step {
                attempt: a,
                stage: Stage::Next,
                at,
                delay,
                text: if a == n {
                    "last attempt: if it fails, the job is dead-lettered".to_owned()
                } else {
                    "if the attempts before it fail (earliest time)".to_owned()
                },
            }
        };
        steps.push(step);
    }
    steps
}
