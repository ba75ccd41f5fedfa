//! Registering middleware on a worker, and the chain each topic runs.

use std::sync::Arc;

use super::WorkerBuilder;
use crate::job::Job;
use crate::middleware::Middleware;

/// The middleware a worker registered, in the order registered.
#[derive(Default)]
pub(crate) struct Layers {
    /// Around every handler.
    worker: Vec<Arc<dyn Middleware>>,
    /// Around one job type's handler, inside the worker's: (topic, middleware).
    by_type: Vec<(&'static str, Arc<dyn Middleware>)>,
}

impl Layers {
    /// The chain around `topic`'s handler, outermost first; `None` when there is none (the handler
    /// then runs as if middleware did not exist).
    pub(crate) fn chain(&self, topic: &str) -> Option<Arc<[Arc<dyn Middleware>]>> {
        let chain: Vec<_> = self
            .worker
            .iter()
            .chain(
                self.by_type
                    .iter()
                    .filter(|(t, _)| *t == topic)
                    .map(|(_, m)| m),
            )
            .cloned()
            .collect();
        (!chain.is_empty()).then(|| chain.into())
    }

    /// The topics given middleware of their own.
    pub(crate) fn typed_topics(&self) -> impl Iterator<Item = &str> {
        self.by_type.iter().map(|(t, _)| -> &str { t })
    }

    pub(crate) fn len(&self) -> usize {
        self.worker.len() + self.by_type.len()
    }
}

impl<S: Send + Sync + 'static> WorkerBuilder<S> {
    /// Runs `middleware` around the handler of every job type of this worker. The first registered is
    /// the outermost; [`middleware_for`](Self::middleware_for) runs inside all of these. See
    /// [`Middleware`] for what it sees (a panic, a timeout) and may do.
    ///
    /// ```
    /// use postpone::{middleware_fn, Client, Job, JobContext, JobError, Worker};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "invoices")]
    /// struct Invoice { id: u64 }
    ///
    /// async fn send_invoice(_job: Invoice, _ctx: JobContext) -> Result<(), JobError> { Ok(()) }
    ///
    /// # fn main() -> postpone::Result<()> {
    /// let worker = Worker::builder(&Client::memory())
    ///     .handle(send_invoice)
    ///     .middleware(postpone::middleware::TraceTiming::new())
    ///     .middleware(middleware_fn(|job, next| async move {
    ///         if job.meta("tenant") == Some("deleted-co") {
    ///             return Err(JobError::fail("tenant deleted")); // dead-lettered; no handler runs
    ///         }
    ///         next.run().await
    ///     }))
    ///     .build()?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    pub fn middleware(mut self, middleware: impl Middleware) -> Self {
        self.layers.worker.push(Arc::new(middleware));
        self
    }

    /// Runs `middleware` around the handler of `J` only, inside the worker's own
    /// [`middleware`](Self::middleware); the first registered for `J` is the outermost of `J`'s.
    /// [`build`](Self::build) fails if this worker has no handler for `J`.
    ///
    /// ```
    /// use postpone::{middleware_fn, Client, Job, JobContext, JobError, Worker};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "webhooks")]
    /// struct Webhook { url: String }
    ///
    /// async fn deliver(_job: Webhook, _ctx: JobContext) -> Result<(), JobError> {
    ///     Err(JobError::msg("410 Gone"))
    /// }
    ///
    /// # fn main() -> postpone::Result<()> {
    /// // A 410 will not get better: stop retrying it.
    /// let worker = Worker::builder(&Client::memory())
    ///     .handle(deliver)
    ///     .middleware_for::<Webhook>(middleware_fn(|_job, next| async move {
    ///         match next.run().await {
    ///             Err(e) if e.to_string().contains("410") => Err(JobError::fail(e.to_string())),
    ///             other => other,
    ///         }
    ///     }))
    ///     .build()?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    pub fn middleware_for<J: Job>(mut self, middleware: impl Middleware) -> Self {
        self.layers.by_type.push((J::TOPIC, Arc::new(middleware)));
        self
    }
}
