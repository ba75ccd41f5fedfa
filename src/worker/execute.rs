//! Runs one claimed job and turns what happened into a [`Finish`].

use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::future::{abortable, Aborted};
use futures_util::FutureExt;
use tracing::{Instrument, Span};

use super::shared::{ServedTopic, Shared, Start};
use crate::handler::{JobContext, JobError, Outcome, StopSender};
use crate::middleware::Next;
use crate::observe::{trace, Tally};
use crate::record::{AttemptError, Record};
use crate::schedule::RetrySchedule;
use crate::store::{ClaimedJob, Finish, FinishItem};
use crate::time::{millis, ms_to_time, system_now_ms};

/// The message of a panic (a handler's, or a dead-letter sink's).
pub(crate) fn panic_message(panic: Box<dyn Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .unwrap_or_else(|| "non-string panic".into()),
    }
}

/// Runs a started job on this worker, then the jobs claimed ahead that its slot may take
/// ([`ServedTopic::next_claimed`]): a task per slot in use rather than per job. When none is left,
/// gives back the slot and the tracker guard, and waits for the claim loop to start the next job on
/// it ([`ServedTopic::idle_run`]); returns once the claim loop has ended or the worker stops.
pub(crate) async fn run_job<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    start: Start,
) {
    let mut start = start;
    loop {
        let (mut job, slot, guard) = start;
        let stopping = loop {
            run_one(&shared, &topic, job).await;
            let stopping = *shared.shutdown.borrow();
            match topic.next_claimed(&shared.global, stopping) {
                Some(next) => job = next,
                None => break stopping,
            }
            // Runs that finish at once must still let the worker's other tasks run (the claim loop,
            // the acker): this yields once the task's cooperative budget is spent.
            tokio::task::consume_budget().await;
        };
        drop((slot, guard));
        if stopping {
            return;
        }
        match topic.idle_run().await {
            Some(next) => start = next,
            None => return,
        }
    }
}

/// Runs one job and hands its outcome to the acker.
async fn run_one<S: Send + Sync + 'static>(
    shared: &Arc<Shared<S>>,
    topic: &Arc<ServedTopic<S>>,
    job: ClaimedJob,
) {
    let started = std::time::Instant::now();
    let ClaimedJob {
        id,
        token,
        due_at_ms,
        record: bytes,
        ..
    } = job;
    // A job of a batch may end its batch: the acker wakes the end pump once the end is recorded.
    let mut in_batch = false;
    let (finish, tally) = match Record::decode_head(&bytes) {
        Ok((record, payload)) => {
            in_batch = record.meta.contains_key(crate::meta::BATCH_KEY);
            let job = Attempt {
                id: &id,
                token,
                due_at_ms,
                payload,
                original: &bytes,
            };
            execute(shared, topic, job, record).await
        }
        Err(e) => {
            tracing::error!(topic = topic.name, partition = topic.partition, job_id = %id, error = %e, "damaged job record: dead-lettered");
            let finish = Finish::Dead {
                record: bytes,
                reason: format!("damaged record: {e}"),
            };
            (finish, Tally::Failed)
        }
    };
    topic.ran_for(started.elapsed());
    topic.send_finish(FinishItem::new(id, token, finish), tally, in_batch);
}

/// `record` (decoded by [`Record::decode_head`] from `original`) encoded, with `original`'s key for
/// fairness.
fn encode_keeping_key(record: &Record, original: &[u8]) -> Vec<u8> {
    let mut bytes = record.encode();
    crate::record::keep_key(&mut bytes, original);
    bytes
}

/// One claimed job, borrowed from its claim.
struct Attempt<'a> {
    id: &'a str,
    token: u64,
    due_at_ms: i64,
    /// The payload, within `original`.
    payload: &'a [u8],
    /// The record as claimed.
    original: &'a [u8],
}

async fn execute<S: Send + Sync + 'static>(
    shared: &Shared<S>,
    topic: &ServedTopic<S>,
    job: Attempt<'_>,
    mut record: Record,
) -> (Finish, Tally) {
    let Attempt {
        id,
        token,
        due_at_ms,
        payload,
        original,
    } = job;
    let handler = &topic.handler;
    let schedule = match &record.schedule {
        Some((slots, jitter)) => Cow::Owned(
            RetrySchedule::from_parts(slots, *jitter)
                .unwrap_or_else(|_| handler.schedule().clone()),
        ),
        None => Cow::Borrowed(handler.schedule()),
    };
    let attempt = record.attempt;
    let span = trace::job_span(topic.name, topic.partition, id, attempt);
    #[cfg(feature = "opentelemetry")]
    trace::follow(&span, &record.meta, shared.config.trace_parent);
    let (ctx, stop) = JobContext::new(
        topic.name,
        id.to_owned(),
        attempt,
        schedule.attempts(),
        ms_to_time(record.enqueued_at_ms),
        ms_to_time(due_at_ms),
        record.errors.clone(),
        record.meta.clone(),
    );
    ctx.report_to(topic.progress.clone(), token);
    // The handler's result is taken from the context (a handle on it only when the type has one).
    let mut result_ctx = handler.has_output().then(|| ctx.clone());
    // Middleware gets its own handle on the context (a reference count, and only when there is some).
    let chain = topic
        .middleware
        .as_ref()
        .map(|chain| (chain.clone(), ctx.clone()));
    let future = match handler.start(payload, ctx, &shared.state) {
        Ok(f) => f,
        Err(e) => {
            let message = format!("payload does not decode into {}: {e}", handler.job_type());
            tracing::error!(topic = topic.name, partition = topic.partition, job_id = %id, error = %message, "dead-lettered: the payload cannot succeed on retry");
            record.payload = payload.to_vec();
            record.push_error(AttemptError::new(attempt, system_now_ms(), message.clone()));
            let finish = Finish::Dead {
                record: encode_keeping_key(&record, original),
                reason: message,
            };
            return (finish, Tally::Failed);
        }
    };
    topic.metrics.started(due_at_ms);
    let timeout = handler.timeout();
    let handler_run = async move {
        match timeout {
            Some(t) => tokio::time::timeout(t, future)
                .await
                .unwrap_or_else(|_| Err(JobError::msg(format!("timed out after {t:?}")))),
            None => future.await,
        }
    };
    // Without middleware, the handler alone, as if middleware did not exist. With it, the chain around
    // the handler, which sees the handler's panic as the error it becomes.
    let (returned, who) = match chain {
        None => (
            supervise(topic, id, token, stop, &span, handler_run).await,
            "handler",
        ),
        Some((chain, ctx)) => {
            let handler_run = AssertUnwindSafe(handler_run)
                .catch_unwind()
                .map(|returned| returned.unwrap_or_else(|panic| Err(handler_panicked(panic))));
            let next = Next::start(chain, ctx, Box::pin(handler_run));
            (
                supervise(topic, id, token, stop, &span, next.run()).await,
                "middleware",
            )
        }
    };
    let error = match returned {
        Ok(Ok(Ok(()))) => {
            tracing::debug!(parent: &span, "job done");
            let finish = match result_ctx.as_mut().and_then(JobContext::take_result) {
                Some(result) => Finish::Succeeded { result },
                None => Finish::Done,
            };
            return (finish, Tally::Done);
        }
        Ok(Ok(Err(e))) => e,
        Err(panic) => JobError::msg(format!("{who} panicked: {}", panic_message(panic))),
        Ok(Err(Aborted)) => {
            // Aborted at the end of the shutdown grace period: hand the job back, no attempt used.
            span.in_scope(|| tracing::info!("shutdown: job handed back"));
            let finish = Finish::Retry {
                record: original.to_vec(),
                delay_ms: 0,
                counted: false,
            };
            return (finish, Tally::Uncounted);
        }
    };
    let _enter = span.enter();
    record.payload = payload.to_vec();
    let job = JobRef {
        topic: topic.name,
        partition: topic.partition,
        id,
    };
    let fail_now = error.outcome() == Outcome::Fail;
    let finish = failure(&job, record, &schedule, error, original);
    let tally = match &finish {
        Finish::Retry { counted: true, .. } => Tally::Retried,
        Finish::Dead { .. } if fail_now => Tally::Failed,
        Finish::Dead { .. } => Tally::Dead,
        _ => Tally::Uncounted,
    };
    (finish, tally)
}

/// The error a handler's panic becomes.
fn handler_panicked(panic: Box<dyn Any + Send>) -> JobError {
    JobError::msg(format!("handler panicked: {}", panic_message(panic)))
}

/// What running a job's future returned: its result, `Err(Aborted)` when it was stopped at the end of
/// the shutdown grace period, or the panic it raised.
type Returned = Result<Result<Result<(), JobError>, Aborted>, Box<dyn Any + Send>>;

/// Runs `future` (the handler, or the middleware chain around it) in the job's span, stoppable and
/// with its panics caught, and counts its run time.
async fn supervise<S>(
    topic: &ServedTopic<S>,
    id: &str,
    token: u64,
    stop: StopSender,
    span: &Span,
    future: impl Future<Output = Result<(), JobError>>,
) -> Returned {
    // The job runs in its slot's task, which may run more jobs after it: `abortable` stands in for a
    // task's abort handle (the shutdown grace period), `catch_unwind` for its panic catching.
    let (future, abort) = abortable(future);
    topic.in_flight.insert(id.to_owned(), token, stop, abort);
    let ran = std::time::Instant::now();
    let returned = AssertUnwindSafe(future.instrument(span.clone()))
        .catch_unwind()
        .await;
    if !matches!(returned, Ok(Err(Aborted))) {
        topic.metrics.ran(ran.elapsed());
    }
    // From here the job's outcome is on its way to the acker: its lease is no longer renewed.
    topic.in_flight.finishing(id, token);
    returned
}

/// Which job an event is about: every warning and error names it in its own fields, so that a log
/// filtered at `warn` (without the job's span) still tells which job.
struct JobRef<'a> {
    topic: &'a str,
    partition: Option<u16>,
    id: &'a str,
}

/// What a failed attempt leads to.
fn failure(
    job: &JobRef<'_>,
    mut record: Record,
    schedule: &RetrySchedule,
    error: JobError,
    original: &[u8],
) -> Finish {
    let attempt = record.attempt;
    let message = error.to_string();
    let delay = match error.outcome() {
        Outcome::Snooze(d) => {
            tracing::debug!(snooze = ?d, "job snoozed");
            return Finish::Retry {
                record: original.to_vec(),
                delay_ms: millis(d),
                counted: false,
            };
        }
        Outcome::RateLimited(d) => {
            tracing::info!(topic = job.topic, partition = job.partition, job_id = %job.id, hold = ?d, "provider rate limit: the topic is held");
            return Finish::RateLimited {
                record: original.to_vec(),
                delay_ms: millis(d),
            };
        }
        Outcome::Fail => None,
        Outcome::Retry => schedule.retry_delay(attempt),
        Outcome::RetryAfter(d) => schedule.retry_delay(attempt).map(|_| d),
    };
    record.push_error(AttemptError::new(attempt, system_now_ms(), message.clone()));
    match delay {
        Some(delay) => {
            tracing::warn!(topic = job.topic, partition = job.partition, job_id = %job.id, error = %message, retry_in = ?delay, "job failed; will retry");
            record.attempt += 1;
            Finish::Retry {
                record: encode_keeping_key(&record, original),
                delay_ms: millis(delay),
                counted: true,
            }
        }
        None => {
            let reason = if error.outcome() == Outcome::Fail {
                format!("failed: {message}")
            } else {
                format!(
                    "exhausted {} attempts; last error: {message}",
                    schedule.attempts()
                )
            };
            tracing::error!(topic = job.topic, partition = job.partition, job_id = %job.id, error = %message, "job dead-lettered: {reason}");
            Finish::Dead {
                record: encode_keeping_key(&record, original),
                reason,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const JOB: JobRef<'static> = JobRef {
        topic: "t",
        partition: None,
        id: "1",
    };

    fn record(attempt: u32) -> Record {
        let mut r = Record::new(0, b"{}".to_vec());
        r.attempt = attempt;
        r
    }

    #[test]
    fn failures_follow_the_schedule() {
        let s = RetrySchedule::from_millis(&[0, 0, 10, 20]).unwrap();
        match failure(&JOB, record(1), &s, JobError::msg("x"), b"") {
            Finish::Retry {
                record,
                delay_ms: 10,
                counted: true,
            } => {
                let r = Record::decode(&record).unwrap();
                assert_eq!(r.attempt, 2);
                assert_eq!(r.errors[0].message, "x");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            failure(&JOB, record(3), &s, JobError::msg("x"), b""),
            Finish::Dead { .. }
        ));
        assert!(matches!(
            failure(
                &JOB,
                record(1),
                &s,
                JobError::retry_after(Duration::from_secs(7), "x"),
                b""
            ),
            Finish::Retry { delay_ms: 7000, .. }
        ));
        assert!(matches!(
            failure(
                &JOB,
                record(3),
                &s,
                JobError::retry_after(Duration::from_secs(7), "x"),
                b""
            ),
            Finish::Dead { .. }
        ));
        assert!(
            matches!(failure(&JOB, record(1), &s, JobError::fail("no"), b""), Finish::Dead { reason, .. } if reason == "failed: no")
        );
        assert!(matches!(
            failure(&JOB, record(3), &s, JobError::snooze(Duration::from_millis(5)), b"orig"),
            Finish::Retry { delay_ms: 5, counted: false, record } if record == b"orig"
        ));
    }

    #[test]
    fn a_keyed_jobs_retry_and_death_keep_its_key() {
        let s = RetrySchedule::from_millis(&[0, 0, 10]).unwrap();
        let mut claimed = record(1);
        claimed.key = Some("acme".into());
        let original = claimed.encode();
        // As the worker decodes it: without the key, which stays in the bytes.
        let (head, _) = Record::decode_head(&original).unwrap();
        assert_eq!(head.key, None);
        for attempt in [1, 3] {
            let mut r = head.clone();
            r.attempt = attempt;
            let record = match (attempt, failure(&JOB, r, &s, JobError::msg("x"), &original)) {
                (1, Finish::Retry { record, .. }) | (3, Finish::Dead { record, .. }) => record,
                (_, other) => panic!("attempt {attempt}: {other:?}"),
            };
            assert_eq!(
                Record::decode(&record).unwrap().key.as_deref(),
                Some("acme")
            );
        }
    }
}
