//! A middleware that adds a span with the job's metadata and times what runs inside it.

use std::time::Instant;

use async_trait::async_trait;
use tracing::{Instrument, Level};

use super::{Middleware, Next};
use crate::handler::{JobContext, JobError, Outcome};

/// Runs the rest of the chain and the handler in a span `handler` (INFO, inside the job's span `job`,
/// which carries `topic`, `job_id` and `attempt`) with the field `meta`, the job's metadata; when they
/// return, logs the event "handler finished" in that span with `elapsed_ms` (how long they took, in
/// milliseconds) and `outcome` (`done`, `retry`, `retry_after`, `fail`, `snooze` or `rate_limited`), at
/// INFO unless [`level`](Self::level) says otherwise:
///
/// ```text
/// DEBUG job{topic="emails" job_id="welcome:7" attempt=1}:handler{meta={"tenant": "acme"}}: postpone::middleware::trace_timing: handler finished elapsed_ms=12.034 outcome="done"
/// ```
///
/// Registered first, it times everything the job runs; registered last (or for one job type), the
/// handler alone. The outcome passes through unchanged.
///
/// ```
/// use postpone::middleware::TraceTiming;
/// use postpone::{Client, Job, JobContext, JobError, Worker};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "emails")]
/// struct Email { to: String }
///
/// async fn send(_job: Email, _ctx: JobContext) -> Result<(), JobError> { Ok(()) }
///
/// # fn main() -> postpone::Result<()> {
/// let worker = Worker::builder(&Client::memory())
///     .handle(send)
///     .middleware(TraceTiming::new().level(tracing::Level::DEBUG))
///     .build()?;
/// # drop(worker);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TraceTiming {
    level: Level,
}

impl TraceTiming {
    /// Logs "handler finished" at INFO.
    pub fn new() -> Self {
        TraceTiming { level: Level::INFO }
    }

    /// Logs "handler finished" at `level` (the span stays at INFO).
    #[must_use]
    pub fn level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }
}

impl Default for TraceTiming {
    fn default() -> Self {
        Self::new()
    }
}

/// How a result continues, as a short name.
fn outcome_name(result: &Result<(), JobError>) -> &'static str {
    match result {
        Ok(()) => "done",
        Err(e) => match e.outcome() {
            Outcome::Retry => "retry",
            Outcome::RetryAfter(_) => "retry_after",
            Outcome::Fail => "fail",
            Outcome::Snooze(_) => "snooze",
            Outcome::RateLimited(_) => "rate_limited",
        },
    }
}

#[async_trait]
impl Middleware for TraceTiming {
    async fn call(&self, job: &JobContext, next: Next) -> Result<(), JobError> {
        let span = tracing::info_span!("handler", meta = ?job.metadata());
        let started = Instant::now();
        let result = next.run().instrument(span.clone()).await;
        // In ms, to the µs.
        let elapsed_ms = started.elapsed().as_micros() as f64 / 1e3;
        let outcome = outcome_name(&result);
        let _in = span.enter();
        match self.level {
            // At `warn` and above an event names its job itself, for logs filtered without spans.
            Level::ERROR => {
                tracing::error!(
                    topic = job.topic(),
                    job_id = job.id(),
                    elapsed_ms,
                    outcome,
                    "handler finished"
                )
            }
            Level::WARN => {
                tracing::warn!(
                    topic = job.topic(),
                    job_id = job.id(),
                    elapsed_ms,
                    outcome,
                    "handler finished"
                )
            }
            Level::INFO => tracing::info!(elapsed_ms, outcome, "handler finished"),
            Level::DEBUG => tracing::debug!(elapsed_ms, outcome, "handler finished"),
            _ => tracing::trace!(elapsed_ms, outcome, "handler finished"),
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::handler::HandlerFuture;

    /// Collects what a `fmt` subscriber writes.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn trace_timing_middleware_logs_meta_time_and_outcome() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        tracing::callsite::rebuild_interest_cache();
        let chain: Arc<[Arc<dyn Middleware>]> =
            vec![Arc::new(TraceTiming::new().level(Level::DEBUG)) as Arc<dyn Middleware>].into();
        let handler: HandlerFuture = Box::pin(async { Err(JobError::fail("gone")) });
        let ctx = JobContext::for_test("t", "1").with_meta("tenant", "acme");
        let e = Next::start(chain, ctx, handler).run().await.unwrap_err();
        assert_eq!(e.outcome(), Outcome::Fail, "the outcome passes through");
        let out = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert!(out.contains("DEBUG"), "{out}");
        assert!(out.contains("handler finished"), "{out}");
        assert!(out.contains("outcome=\"fail\""), "{out}");
        assert!(out.contains("elapsed_ms="), "{out}");
        assert!(out.contains("\"tenant\": \"acme\""), "{out}");
    }
}
