//! Middleware: code around every handler of a worker, or of one job type.
//!
//! A [`Middleware`] gets the job's [`JobContext`] and a [`Next`]: it may act before the handler, run the
//! rest of the chain and the handler with [`Next::run`], act after, and return the handler's outcome or
//! another one. It may also not call [`Next::run`] at all: the handler does not run, and the job
//! continues as the middleware's own result says (done, retried, dead-lettered, snoozed).
//!
//! Register middleware with [`WorkerBuilder::middleware`](crate::WorkerBuilder::middleware) (every job
//! type of the worker) and [`WorkerBuilder::middleware_for`](crate::WorkerBuilder::middleware_for) (one
//! job type). The first registered is the outermost; a job type's own middleware runs inside the
//! worker's. A worker without middleware runs its handlers as if this module did not exist.
//!
//! What a middleware sees as the handler's result is what the worker would act on: a handler that
//! panicked is an `Err` ("handler panicked: ..."), and one that outlived its job type's timeout is an
//! `Err` ("timed out after ..."), each retrying by schedule unless the middleware returns otherwise.
//! The payload is decoded before the chain runs: a payload that does not decode is dead-lettered and no
//! middleware runs. A middleware that panics fails the attempt ("middleware panicked: ..."). The job
//! type's timeout bounds the handler only, not the middleware around it. At the end of the shutdown
//! grace period the whole chain is dropped, like a handler, with no "after" run: the job is handed back.
//!
//! The chain runs in the job's span (`job`, with `topic`, `job_id`, `attempt`). [`TraceTiming`] is a
//! middleware that adds a span and times what runs inside it.
//!
//! See the guide's chapter [Middleware](crate::guide::middleware).

mod trace_timing;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use crate::handler::{HandlerFuture, JobContext, JobError};
pub use trace_timing::TraceTiming;

/// Code around a handler: before it, after it, or instead of it.
///
/// ```
/// use postpone::middleware::{Middleware, Next};
/// use postpone::{JobContext, JobError};
///
/// /// Fails fast the jobs of tenants that were deleted.
/// struct SkipDeletedTenants;
///
/// #[postpone::async_trait]
/// impl Middleware for SkipDeletedTenants {
///     async fn call(&self, job: &JobContext, next: Next) -> Result<(), JobError> {
///         if job.meta("tenant") == Some("deleted-co") {
///             return Err(JobError::fail("tenant deleted")); // the handler does not run
///         }
///         next.run().await
///     }
/// }
/// ```
///
/// The trait is declared with `async-trait`, re-exported as [`postpone::async_trait`](crate::async_trait):
/// your crate needs no dependency of its own. For a closure, [`middleware_fn`] needs neither.
#[async_trait]
pub trait Middleware: Send + Sync + 'static {
    /// Runs around one attempt of a job: `next.run().await` runs the rest of the chain and the handler
    /// and returns its result; what this returns is what the worker acts on.
    async fn call(&self, job: &JobContext, next: Next) -> Result<(), JobError>;
}

/// The rest of a middleware chain, then the handler. Run it with [`run`](Self::run), at most once.
pub struct Next {
    chain: Arc<[Arc<dyn Middleware>]>,
    /// The next middleware to call in `chain`.
    at: usize,
    ctx: JobContext,
    handler: HandlerFuture,
}

impl Next {
    /// The whole `chain`, then `handler`.
    pub(crate) fn start(
        chain: Arc<[Arc<dyn Middleware>]>,
        ctx: JobContext,
        handler: HandlerFuture,
    ) -> Self {
        Next {
            chain,
            at: 0,
            ctx,
            handler,
        }
    }

    /// A `Next` that runs `handler` alone, for calling a middleware directly in a test (with
    /// [`JobContext::for_test`]): `handler` stands in for the job's handler.
    ///
    /// ```
    /// use postpone::middleware::{Middleware, Next};
    /// use postpone::{middleware_fn, JobContext, JobError, Outcome};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let skip_deleted = middleware_fn(|job, next| async move {
    ///     if job.meta("tenant") == Some("deleted-co") {
    ///         return Err(JobError::fail("tenant deleted"));
    ///     }
    ///     next.run().await
    /// });
    /// let job = JobContext::for_test("invoices", "invoice:7").with_meta("tenant", "deleted-co");
    /// let next = Next::for_test(job.clone(), async { panic!("the handler must not run") });
    /// let e = skip_deleted.call(&job, next).await.unwrap_err();
    /// assert_eq!(e.outcome(), Outcome::Fail);
    /// # }
    /// ```
    pub fn for_test(
        ctx: JobContext,
        handler: impl Future<Output = Result<(), JobError>> + Send + 'static,
    ) -> Self {
        Next::start(Arc::new([]), ctx, Box::pin(handler))
    }

    /// Runs the rest of the chain and the handler; returns the handler's result as the middleware
    /// inside this one left it. Dropping a `Next` without running it skips the handler.
    // Not an `async fn`: the signature promises `Send + 'static`, which a closure given to
    // `middleware_fn` relies on.
    #[allow(clippy::manual_async_fn)]
    pub fn run(self) -> impl Future<Output = Result<(), JobError>> + Send + 'static {
        async move {
            let Next {
                chain,
                at,
                ctx,
                handler,
            } = self;
            match chain.get(at) {
                Some(middleware) => {
                    let next = Next {
                        chain: chain.clone(),
                        at: at + 1,
                        ctx: ctx.clone(),
                        handler,
                    };
                    middleware.call(&ctx, next).await
                }
                None => handler.await,
            }
        }
    }
}

impl fmt::Debug for Next {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next")
            .field("job", &self.ctx)
            .field("middleware_left", &(self.chain.len() - self.at))
            .finish_non_exhaustive()
    }
}

/// A middleware from an async closure that takes the job's context and the [`Next`] step.
///
/// ```
/// use postpone::{middleware_fn, JobError};
///
/// let skip_deleted = middleware_fn(|job, next| async move {
///     if job.meta("tenant") == Some("deleted-co") {
///         return Err(JobError::fail("tenant deleted"));
///     }
///     next.run().await
/// });
/// ```
pub fn middleware_fn<F, Fut>(f: F) -> FnMiddleware<F>
where
    F: Fn(JobContext, Next) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    FnMiddleware(f)
}

/// A [`Middleware`] made by [`middleware_fn`].
pub struct FnMiddleware<F>(F);

impl<F> fmt::Debug for FnMiddleware<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnMiddleware")
    }
}

#[async_trait]
impl<F, Fut> Middleware for FnMiddleware<F>
where
    F: Fn(JobContext, Next) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    async fn call(&self, job: &JobContext, next: Next) -> Result<(), JobError> {
        (self.0)(job.clone(), next).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Notes "<name> before" and "<name> after" around the rest.
    fn layer(name: &'static str, log: Arc<Mutex<Vec<String>>>) -> Arc<dyn Middleware> {
        Arc::new(middleware_fn(move |_, next| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(format!("{name} before"));
                let result = next.run().await;
                log.lock().unwrap().push(format!("{name} after"));
                result
            }
        }))
    }

    #[tokio::test]
    async fn middleware_chain_runs_in_order_around_the_handler() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let chain: Arc<[_]> = vec![layer("a", log.clone()), layer("b", log.clone())].into();
        let in_handler = log.clone();
        let handler: HandlerFuture = Box::pin(async move {
            in_handler.lock().unwrap().push("handler".into());
            Ok(())
        });
        let ctx = JobContext::for_test("t", "1");
        Next::start(chain, ctx, handler).run().await.unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            ["a before", "b before", "handler", "b after", "a after"]
        );
    }

    #[tokio::test]
    async fn middleware_that_skips_next_skips_the_handler() {
        let chain: Arc<[Arc<dyn Middleware>]> = vec![Arc::new(middleware_fn(|_, _next| async {
            Err(JobError::fail("no"))
        })) as Arc<dyn Middleware>]
        .into();
        let handler: HandlerFuture = Box::pin(async { panic!("the handler ran") });
        let ctx = JobContext::for_test("t", "1");
        let e = Next::start(chain, ctx, handler).run().await.unwrap_err();
        assert_eq!(e.outcome(), crate::Outcome::Fail);
    }
}
