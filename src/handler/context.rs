//! What a handler knows about the job it runs.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use crate::meta::Meta;
use crate::record::AttemptError;
use crate::store::Progress;
use crate::worker::ProgressQueue;

/// Why a running job was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The job was cancelled by id: it will not be retried.
    Cancelled,
    /// The worker lost the job's lease (it was paused or cut off from the store for too long): another
    /// worker may be running it now, and this run's result will be ignored.
    LeaseLost,
}

/// The context of one attempt: the job's id, attempt number, times, and a stop signal.
///
/// Cheap to clone; clones share the stop signal.
#[derive(Clone)]
pub struct JobContext {
    inner: Arc<Inner>,
}

struct Inner {
    topic: &'static str,
    id: String,
    attempt: u32,
    attempts_allowed: u32,
    enqueued_at: DateTime<Utc>,
    due_at: DateTime<Utc>,
    errors: Vec<AttemptError>,
    meta: Meta,
    /// The stop signal: [`NOT_STOPPED`] or a [`StopReason`] code, set once.
    stop: AtomicU8,
    stopped: Notify,
    /// The handler's result, encoded (a job type with an output: see [`crate::Job::Output`]).
    result: OnceLock<Vec<u8>>,
    /// The progress last reported (see [`JobContext::progress`]).
    progress: Mutex<Option<Progress>>,
    /// Where reported progress goes, with the attempt's lease token (a worker's attempt; none in a
    /// test's context).
    reporter: OnceLock<(Arc<ProgressQueue>, u64)>,
}

const NOT_STOPPED: u8 = 0;
const CANCELLED: u8 = 1;
const LEASE_LOST: u8 = 2;

/// The worker's side of a context: it raises the stop signal.
pub(crate) struct StopSender(Arc<Inner>);

impl fmt::Debug for StopSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StopSender").field(&self.0.id).finish()
    }
}

impl StopSender {
    /// Raises the signal; the first reason stays.
    pub(crate) fn stop(&self, reason: StopReason) {
        let code = match reason {
            StopReason::Cancelled => CANCELLED,
            StopReason::LeaseLost => LEASE_LOST,
        };
        let inner = &self.0;
        if inner
            .stop
            .compare_exchange(NOT_STOPPED, code, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            inner.stopped.notify_waiters();
        }
    }
}

impl JobContext {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        topic: &'static str,
        id: String,
        attempt: u32,
        attempts_allowed: u32,
        enqueued_at: DateTime<Utc>,
        due_at: DateTime<Utc>,
        errors: Vec<AttemptError>,
        meta: Meta,
    ) -> (Self, StopSender) {
        let inner = Arc::new(Inner {
            topic,
            id,
            attempt,
            attempts_allowed,
            enqueued_at,
            due_at,
            errors,
            meta,
            stop: AtomicU8::new(NOT_STOPPED),
            stopped: Notify::new(),
            result: OnceLock::new(),
            progress: Mutex::new(None),
            reporter: OnceLock::new(),
        });
        (
            JobContext {
                inner: inner.clone(),
            },
            StopSender(inner),
        )
    }

    /// A context for calling a handler directly in a test: attempt 1 of `attempts_allowed`, enqueued and
    /// due now, never stopped.
    ///
    /// ```
    /// let ctx = postpone::JobContext::for_test("emails", "welcome:7");
    /// assert_eq!(ctx.attempt(), 1);
    /// assert!(!ctx.is_stopped());
    /// ```
    pub fn for_test(topic: &'static str, id: impl Into<String>) -> Self {
        Self::for_test_attempt(topic, id, 1, 8)
    }

    /// A context for calling a handler directly in a test, on attempt `attempt` of `attempts_allowed`:
    /// for a handler that acts on the attempt, for example differently on its last one.
    ///
    /// ```
    /// let ctx = postpone::JobContext::for_test_attempt("emails", "welcome:7", 3, 3);
    /// assert_eq!(ctx.attempt(), 3);
    /// assert!(ctx.is_last_attempt());
    /// ```
    pub fn for_test_attempt(
        topic: &'static str,
        id: impl Into<String>,
        attempt: u32,
        attempts_allowed: u32,
    ) -> Self {
        let now = Utc::now();
        Self::new(
            topic,
            id.into(),
            attempt,
            attempts_allowed,
            now,
            now,
            Vec::new(),
            Meta::new(),
        )
        .0
    }

    /// This context with a metadata entry, for a test of a handler that reads one.
    ///
    /// ```
    /// let ctx = postpone::JobContext::for_test("emails", "welcome:7").with_meta("tenant", "acme");
    /// assert_eq!(ctx.meta("tenant"), Some("acme"));
    /// ```
    #[must_use]
    pub fn with_meta(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let i = &self.inner;
        let mut meta = i.meta.clone();
        meta.insert(key.into(), value.into());
        let (ctx, _stop) = Self::new(
            i.topic,
            i.id.clone(),
            i.attempt,
            i.attempts_allowed,
            i.enqueued_at,
            i.due_at,
            i.errors.clone(),
            meta,
        );
        ctx
    }

    /// The job's topic.
    pub fn topic(&self) -> &'static str {
        self.inner.topic
    }

    /// The job's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// This attempt's number, from 1.
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// How many attempts the job's schedule allows in all.
    pub fn attempts_allowed(&self) -> u32 {
        self.inner.attempts_allowed
    }

    /// Whether a failure now sends the job to the dead letters.
    pub fn is_last_attempt(&self) -> bool {
        self.inner.attempt >= self.inner.attempts_allowed
    }

    /// When the job was first enqueued.
    pub fn enqueued_at(&self) -> DateTime<Utc> {
        self.inner.enqueued_at
    }

    /// When this attempt became due (by the store's clock).
    pub fn due_at(&self) -> DateTime<Utc> {
        self.inner.due_at
    }

    /// The errors of earlier attempts, oldest first (at most the newest 20).
    pub fn previous_errors(&self) -> &[AttemptError] {
        &self.inner.errors
    }

    /// A metadata entry stored with the job at enqueue ([`Enqueue::meta`](crate::Enqueue::meta)).
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.inner.meta.get(key).map(String::as_str)
    }

    /// The id of the batch this job is a member or a callback of ([`Client::batch`](crate::Client::batch)),
    /// if any: a callback's handler looks the batch's counts up with
    /// [`Client::batch_status`](crate::Client::batch_status). It is the metadata entry
    /// `postpone.batch`, set by the batch.
    ///
    /// ```
    /// let ctx = postpone::JobContext::for_test("billing.done", "run:7")
    ///     .with_meta("postpone.batch", "billing:2026-11");
    /// assert_eq!(ctx.batch_id(), Some("billing:2026-11"));
    /// assert_eq!(postpone::JobContext::for_test("emails", "e:1").batch_id(), None);
    /// ```
    pub fn batch_id(&self) -> Option<&str> {
        self.meta(crate::meta::BATCH_KEY)
    }

    /// All the metadata stored with the job, by key (with the `opentelemetry` feature, the trace
    /// context of its enqueue among them).
    pub fn metadata(&self) -> &std::collections::BTreeMap<String, String> {
        &self.inner.meta
    }

    /// Reports the job's progress: a number (a percentage, items done: yours to choose) and a short
    /// message (at most 200 bytes kept; may be empty). Operators see it (`postpone job`, the
    /// dashboard), and so do callers waiting for the job. Cheap: it returns at once, and the worker
    /// sends the latest report of each running job at most every 100 ms, in one store call for all of
    /// them; a job's progress goes with it when it ends.
    ///
    /// ```
    /// let ctx = postpone::JobContext::for_test("imports", "import:7");
    /// for done in [25.0, 50.0, 100.0] {
    ///     ctx.progress(done, format!("{done}% of the rows"));
    /// }
    /// assert_eq!(ctx.reported_progress().unwrap().value, 100.0);
    /// ```
    pub fn progress(&self, value: f64, message: impl Into<String>) {
        let progress = Progress::new(value, message);
        if let Some((queue, token)) = self.inner.reporter.get() {
            queue.report(&self.inner.id, *token, progress.clone());
        }
        *self
            .inner
            .progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(progress);
    }

    /// The progress this attempt last reported with [`progress`](Self::progress), if any: for tests of
    /// handlers.
    pub fn reported_progress(&self) -> Option<Progress> {
        self.inner
            .progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Sends this attempt's progress reports to `queue`, under its lease `token`.
    pub(crate) fn report_to(&self, queue: Arc<ProgressQueue>, token: u64) {
        let _ = self.inner.reporter.set((queue, token));
    }

    /// The handler's encoded result (a job type with an output).
    pub(crate) fn set_result(&self, result: Vec<u8>) {
        let _ = self.inner.result.set(result);
    }

    /// Takes the handler's encoded result, if it set one.
    pub(crate) fn take_result(&mut self) -> Option<Vec<u8>> {
        Arc::get_mut(&mut self.inner)
            .and_then(|inner| inner.result.take())
            .or_else(|| self.inner.result.get().cloned())
    }

    /// Why the job was asked to stop, if it was.
    pub fn stop_reason(&self) -> Option<StopReason> {
        match self.inner.stop.load(Ordering::Acquire) {
            CANCELLED => Some(StopReason::Cancelled),
            LEASE_LOST => Some(StopReason::LeaseLost),
            _ => None,
        }
    }

    /// Whether the job was asked to stop (cancelled, or its lease was lost). Long handlers should check
    /// this, or select on [`stopped`](Self::stopped), and return early.
    pub fn is_stopped(&self) -> bool {
        self.stop_reason().is_some()
    }

    /// Completes when the job is asked to stop (never, if it is not).
    pub async fn stopped(&self) -> StopReason {
        loop {
            let notified = self.inner.stopped.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(reason) = self.stop_reason() {
                return reason;
            }
            notified.await;
        }
    }
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("topic", &self.inner.topic)
            .field("id", &self.inner.id)
            .field("attempt", &self.inner.attempt)
            .field("stop", &self.stop_reason())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_is_seen_by_clones() {
        let now = Utc::now();
        let (ctx, stop) = JobContext::new("t", "1".into(), 2, 8, now, now, vec![], Meta::new());
        let clone = ctx.clone();
        let waiter = tokio::spawn(async move { clone.stopped().await });
        stop.stop(StopReason::Cancelled);
        stop.stop(StopReason::LeaseLost); // the first reason stays
        assert_eq!(waiter.await.unwrap(), StopReason::Cancelled);
        assert!(ctx.is_stopped());
        assert!(!ctx.is_last_attempt());
    }

    #[test]
    fn test_contexts_say_their_attempt() {
        let first = JobContext::for_test("t", "1");
        assert_eq!((first.attempt(), first.attempts_allowed()), (1, 8));
        assert!(!first.is_last_attempt() && !first.is_stopped());
        let last = JobContext::for_test_attempt("t", "1", 3, 3);
        assert_eq!((last.topic(), last.id(), last.attempt()), ("t", "1", 3));
        assert!(last.is_last_attempt() && !last.is_stopped());
    }
}
