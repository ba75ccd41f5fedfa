//! Dead letters: jobs that exhausted their schedule or failed for good, and the hook that persists them.

use std::fmt;
use std::future::Future;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::{BoxError, Error, Result};
use crate::job::Job;
use crate::record::{AttemptError, Record};
use crate::store::DeadEntry;
use crate::time::ms_to_time;

/// A dead job: its payload, its attempts, its error history and why it died.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeadLetter {
    /// Its topic.
    pub topic: String,
    /// Its id.
    pub id: String,
    /// Which death of the job this is: each death is a dead letter of its own (a job requeued, or a new
    /// job under a freed id, may die again), numbered in its topic. With `id`, it names this dead letter.
    pub death: u64,
    /// The payload as JSON, exactly as enqueued (it may no longer decode into the job type).
    pub payload: String,
    /// The attempts it ran.
    pub attempts: u32,
    /// The errors of its attempts, oldest first (the newest 20).
    pub errors: Vec<AttemptError>,
    /// Why it died: exhausted, failed now, undecodable payload, stalled.
    pub reason: String,
    /// When it was first enqueued.
    pub enqueued_at: DateTime<Utc>,
    /// When it died.
    pub died_at: DateTime<Utc>,
    /// Its metadata (see [`Enqueue::meta`](crate::Enqueue::meta)): with the `opentelemetry` feature, the
    /// trace context of the enqueue, to find the request that led here.
    pub meta: std::collections::BTreeMap<String, String>,
}

impl DeadLetter {
    /// Never fails: a damaged record still reaches the sink, with its bytes as the payload and the damage
    /// named in the reason.
    pub(crate) fn from_entry(topic: &str, entry: DeadEntry) -> Self {
        let (record, reason) = match Record::decode(&entry.record) {
            Ok(r) => (r, entry.reason),
            Err(e) => {
                let mut r = Record::new(entry.died_at_ms, entry.record);
                r.attempt = 0;
                (r, format!("{} (record damaged: {e})", entry.reason))
            }
        };
        DeadLetter {
            topic: topic.to_owned(),
            id: entry.id,
            death: entry.seq,
            payload: String::from_utf8_lossy(&record.payload).into_owned(),
            attempts: record.attempt,
            errors: record.errors,
            reason,
            enqueued_at: ms_to_time(record.enqueued_at_ms),
            died_at: ms_to_time(entry.died_at_ms),
            meta: record.meta,
        }
    }

    /// Decodes the payload into its job type.
    pub fn job<J: Job>(&self) -> Result<J> {
        serde_json::from_str(&self.payload).map_err(|e| Error::Decode {
            topic: self.topic.clone(),
            id: self.id.clone(),
            source: e.into(),
        })
    }
}

/// Where dead jobs go: a table, a log, an alert. Called by a worker at least once per dead job, even if
/// a worker crashes in between; a failing call is retried with backoff. Make it idempotent on
/// `(topic, id, died_at)`. Plug one in with
/// [`WorkerBuilder::dead_letter_sink`](crate::WorkerBuilder::dead_letter_sink); without one, the worker
/// uses [`LogSink`], which logs each dead job through `tracing` (install a subscriber to see them).
///
/// The trait is declared with `async-trait`, re-exported as [`postpone::async_trait`](crate::async_trait):
/// put `#[postpone::async_trait]` on your impl and write `async fn deliver`; your crate needs no
/// `async-trait` dependency. (A plain `async fn` in an impl without the attribute does not match the
/// trait's signature: rustc says E0195, "lifetime parameters or bounds on method `deliver` do not match".)
/// For a closure, [`sink_fn`] needs neither.
///
/// ```
/// use postpone::{DeadLetter, DeadLetterSink, BoxError};
///
/// #[derive(Debug)]
/// struct Alert;
///
/// #[postpone::async_trait]
/// impl DeadLetterSink for Alert {
///     async fn deliver(&self, dead: &DeadLetter) -> Result<(), BoxError> {
///         eprintln!("job {} of {} died: {}", dead.id, dead.topic, dead.reason);
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait DeadLetterSink: Send + Sync + fmt::Debug + 'static {
    /// Persists one dead job. An error means "try again later".
    async fn deliver(&self, dead: &DeadLetter) -> Result<(), BoxError>;
}

/// The default sink: logs each dead job at error level with `tracing`.
#[derive(Debug, Default, Clone, Copy)]
pub struct LogSink;

#[async_trait]
impl DeadLetterSink for LogSink {
    async fn deliver(&self, dead: &DeadLetter) -> Result<(), BoxError> {
        tracing::error!(
            topic = %dead.topic,
            job_id = %dead.id,
            attempts = dead.attempts,
            reason = %dead.reason,
            "job dead-lettered"
        );
        Ok(())
    }
}

/// A sink from an async closure.
///
/// ```
/// let sink = postpone::sink_fn(|dead| async move {
///     println!("dead: {}", dead.id);
///     Ok(())
/// });
/// ```
pub fn sink_fn<F, Fut>(f: F) -> FnSink<F>
where
    F: Fn(DeadLetter) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    FnSink(f)
}

/// A [`DeadLetterSink`] made by [`sink_fn`].
pub struct FnSink<F>(F);

impl<F> fmt::Debug for FnSink<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnSink")
    }
}

#[async_trait]
impl<F, Fut> DeadLetterSink for FnSink<F>
where
    F: Fn(DeadLetter) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    async fn deliver(&self, dead: &DeadLetter) -> Result<(), BoxError> {
        (self.0)(dead.clone()).await
    }
}
