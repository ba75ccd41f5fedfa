//! `cancel`, `reschedule`, `run-now`, `pause`, `resume`: one job or one topic at a time.

use chrono::{DateTime, Utc};
use postpone::ops::Ops;
use postpone::{CancelStatus, When};
use serde::Serialize;

use crate::args::RescheduleArgs;
use crate::failure::Failure;
use crate::output::say;
use crate::output::{absolute, relative, Out};

/// `cancel --json`.
#[derive(Serialize)]
struct Cancelled<'a> {
    topic: &'a str,
    id: &'a str,
    /// `"removed"` (it was scheduled) or `"will_not_retry"` (it is running).
    status: &'static str,
}

/// `reschedule --json` and `run-now --json`.
#[derive(Serialize)]
struct Moved<'a> {
    topic: &'a str,
    id: &'a str,
    due_at: DateTime<Utc>,
}

/// `pause --json` and `resume --json`.
#[derive(Serialize)]
struct Paused<'a> {
    topic: &'a str,
    paused: bool,
}

/// `cancel TOPIC ID`.
pub(crate) async fn cancel(ops: &Ops, out: &Out, topic: &str, id: &str) -> Result<(), Failure> {
    let status = ops.cancel(topic, id).await?;
    let (status, text) = match status {
        CancelStatus::Removed => ("removed", "it was scheduled and is gone"),
        CancelStatus::WillNotRetry => (
            "will_not_retry",
            "it is running: it will not be retried, and its handler is told to stop",
        ),
        _ => ("other", "done"),
    };
    if out.json {
        out.json(&Cancelled { topic, id, status });
    } else {
        say!("cancelled job {id} of topic {topic}: {text}");
    }
    Ok(())
}

fn moved(out: &Out, topic: &str, id: &str, due_at: DateTime<Utc>) {
    if out.json {
        out.json(&Moved { topic, id, due_at });
    } else {
        say!(
            "job {id} of topic {topic} is due {} ({})",
            relative(due_at.timestamp_millis(), out.now_ms),
            absolute(due_at)
        );
    }
}

/// `reschedule TOPIC ID (--in D | --at T)`.
pub(crate) async fn reschedule(ops: &Ops, out: &Out, a: RescheduleArgs) -> Result<(), Failure> {
    // Exactly one of them (checked with the command line: `Command::usage_problem`).
    let when = match (a.in_, a.at) {
        (Some(d), _) => When::After(d),
        (None, Some(t)) => When::At(t),
        (None, None) => return Err(Failure::Usage("pass --in DURATION or --at TIME".into())),
    };
    let due_at = ops.reschedule(&a.topic, &a.id, when).await?;
    moved(out, &a.topic, &a.id, due_at);
    Ok(())
}

/// `run-now TOPIC ID`.
pub(crate) async fn run_now(ops: &Ops, out: &Out, topic: &str, id: &str) -> Result<(), Failure> {
    let due_at = ops.run_now(topic, id).await?;
    moved(out, topic, id, due_at);
    Ok(())
}

/// `pause TOPIC` (`paused`) and `resume TOPIC`.
pub(crate) async fn pause(ops: &Ops, out: &Out, topic: &str, paused: bool) -> Result<(), Failure> {
    if paused {
        ops.pause(topic).await?;
    } else {
        ops.resume(topic).await?;
    }
    if out.json {
        out.json(&Paused { topic, paused });
    } else if paused {
        say!(
            "paused topic {topic}: no worker claims its jobs until `postpone resume {topic}` \
             (running jobs finish; enqueues are still accepted)"
        );
    } else {
        say!("resumed topic {topic}: its workers claim its jobs again");
    }
    Ok(())
}
