//! Typed handlers: async fns or trait impls that run jobs.

mod context;
mod error;

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;

pub(crate) use context::StopSender;
pub use context::{JobContext, StopReason};
pub use error::{JobError, Outcome};

use crate::job::Job;

/// A boxed future of a handler's result.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'static>>;

/// A handler written as a trait impl, for handlers that hold their own fields.
///
/// ```
/// use postpone::{Job, JobContext, JobError, JobHandler};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "emails.welcome")]
/// struct Welcome { user_id: u64 }
///
/// struct SendWelcome { sender: String }
///
/// #[postpone::async_trait] // the `async-trait` crate, re-exported: no dependency of your own needed
/// impl JobHandler for SendWelcome {
///     type Job = Welcome;
///     async fn handle(&self, job: Welcome, ctx: JobContext, _state: &()) -> Result<(), JobError> {
///         println!("{} welcomes user {} (attempt {})", self.sender, job.user_id, ctx.attempt());
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait JobHandler<S = ()>: Send + Sync + 'static {
    /// The job type it handles.
    type Job: Job;

    /// Runs one attempt; returns the job type's [`Output`](Job::Output) (`()` unless declared).
    async fn handle(
        &self,
        job: Self::Job,
        ctx: JobContext,
        state: &S,
    ) -> Result<<Self::Job as Job>::Output, JobError>;
}

/// Something a worker can run for a job type: an async fn `(job, ctx)` or `(job, ctx, state)` returning
/// `Result<J::Output, JobError>` (`Result<(), JobError>` unless the job type declares an
/// [`output`](Job::Output)). `M` tells the forms apart; you never name it.
///
/// A handler that takes the state gets a clone of it for each job, so the state type must be `Clone`
/// (and `Send + Sync + 'static`, as every worker state): derive `Clone`, or give the worker an
/// `Arc<State>` and take `Arc<State>`. The compiler cannot tell which of the rules a rejected handler
/// breaks, so its error lists them all, naming the worker's state type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a postpone handler for this worker, whose state is `{S}`",
    label = "not a handler for this worker",
    note = "a handler is an async fn taking `(job: J, ctx: JobContext)`, or `(job: J, ctx: JobContext, state: {S})` \
            with this worker's state, where `J` derives `postpone::Job`, and returning `Result<(), JobError>` \
            (`Result<T, JobError>` when `J` declares `output = T`)",
    note = "a handler that takes the state gets a clone of it for each job, so `{S}` must be `Clone` (and `Send + \
            Sync + 'static`): derive `Clone` for it, or make the worker's state an `Arc` of it",
    note = "for a type implementing `JobHandler`, register it with `.handler(..)`"
)]
pub trait Handler<M, S>: Clone + Send + Sync + 'static {
    /// The job type it handles.
    type Job: Job;

    /// Runs one attempt.
    fn call(&self, job: Self::Job, ctx: JobContext, state: &Arc<S>) -> HandlerFuture;
}

/// Marker for `async fn(job, ctx)` handlers.
#[doc(hidden)]
#[derive(Debug)]
pub struct WithoutState<J>(PhantomData<fn(J)>);

/// Marker for `async fn(job, ctx, state)` handlers.
#[doc(hidden)]
#[derive(Debug)]
pub struct WithState<J>(PhantomData<fn(J)>);

impl<F, Fut, J, S> Handler<WithoutState<J>, S> for F
where
    F: Fn(J, JobContext) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<J::Output, JobError>> + Send + 'static,
    J: Job,
{
    type Job = J;

    fn call(&self, job: J, ctx: JobContext, _state: &Arc<S>) -> HandlerFuture {
        with_output::<J, _>(ctx, |ctx| (self)(job, ctx))
    }
}

impl<F, Fut, J, S> Handler<WithState<J>, S> for F
where
    F: Fn(J, JobContext, S) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<J::Output, JobError>> + Send + 'static,
    J: Job,
    S: Clone + Send + Sync + 'static,
{
    type Job = J;

    fn call(&self, job: J, ctx: JobContext, state: &Arc<S>) -> HandlerFuture {
        with_output::<J, _>(ctx, |ctx| (self)(job, ctx, S::clone(state)))
    }
}

/// Whether a job type's output carries anything (a zero-sized output, such as `()`, does not: it is
/// neither encoded nor sent).
pub(crate) fn has_output<J: Job>() -> bool {
    std::mem::size_of::<J::Output>() != 0
}

/// The largest encoded result a handler may return: 512 KiB, as the default limit on a job
/// ([`DEFAULT_MAX_PAYLOAD`](crate::DEFAULT_MAX_PAYLOAD)). A result is stored with its job and sent to
/// its waiters; bigger ones belong in your own storage, with their address as the result.
pub const MAX_RESULT: usize = 512 * 1024;

/// Runs a handler's future as a [`HandlerFuture`]: its output, when it has one, is encoded into the
/// attempt's context, where the worker takes it for the finish. An output that does not encode, or is
/// larger than [`MAX_RESULT`], fails the attempt for good (a retry would encode it no better).
fn with_output<J, Fut>(ctx: JobContext, start: impl FnOnce(JobContext) -> Fut) -> HandlerFuture
where
    J: Job,
    Fut: Future<Output = Result<J::Output, JobError>> + Send + 'static,
{
    if !has_output::<J>() {
        let run = start(ctx);
        return Box::pin(async move { run.await.map(drop) });
    }
    let slot = ctx.clone();
    let run = start(ctx);
    Box::pin(async move {
        let output = run.await?;
        match serde_json::to_vec(&output) {
            Ok(bytes) if bytes.len() > MAX_RESULT => Err(JobError::fail(format!(
                "the handler's result is {} bytes, more than the {MAX_RESULT} a result may have: \
                 store it elsewhere and return its address",
                bytes.len()
            ))),
            Ok(bytes) => {
                slot.set_result(bytes);
                Ok(())
            }
            Err(e) => Err(JobError::fail(format!(
                "the handler's result does not encode as JSON: {e}"
            ))),
        }
    })
}

/// Adapts a [`JobHandler`] impl to [`Handler`].
#[doc(hidden)]
#[derive(Debug)]
pub struct ViaTrait<H>(pub(crate) Arc<H>);

impl<H> Clone for ViaTrait<H> {
    fn clone(&self) -> Self {
        ViaTrait(self.0.clone())
    }
}

impl<H, S> Handler<ViaTrait<H>, S> for ViaTrait<H>
where
    H: JobHandler<S>,
    S: Send + Sync + 'static,
{
    type Job = H::Job;

    fn call(&self, job: H::Job, ctx: JobContext, state: &Arc<S>) -> HandlerFuture {
        let handler = self.0.clone();
        let state = state.clone();
        with_output::<H::Job, _>(
            ctx,
            |ctx| async move { handler.handle(job, ctx, &state).await },
        )
    }
}
