//! The worker's observability options: how often the queue depth is sampled, and how a job's span
//! relates to the span that enqueued it.

use std::time::Duration;

use super::WorkerBuilder;

impl<S: Send + Sync + 'static> WorkerBuilder<S> {
    /// How often each served topic's depth by state (`postpone_queue_depth`: scheduled, ready, active,
    /// dead, dead_pending) is sampled, with the `metrics` feature (default 10 s): one `counts` call per
    /// topic (per partition) each time. Without the feature nothing is sampled.
    ///
    /// ```
    /// # use postpone::{Client, Job, JobContext, JobError, Worker};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize, Job)]
    /// # #[job(topic = "t")]
    /// # struct Ping;
    /// # async fn ping(_: Ping, _: JobContext) -> Result<(), JobError> { Ok(()) }
    /// use std::time::Duration;
    /// let worker = Worker::builder(&Client::memory())
    ///     .handle(ping)
    ///     .queue_depth_interval(Duration::from_secs(30))
    ///     .build()
    ///     .unwrap();
    /// ```
    pub fn queue_depth_interval(mut self, every: Duration) -> Self {
        self.config.queue_depth_interval = every.max(Duration::from_millis(10));
        self
    }

    /// Whether a job's span links to the span that enqueued the job (the default) or is its child, when
    /// the enqueue stored a trace context (the `opentelemetry` feature).
    ///
    /// ```
    /// # use postpone::{Client, Job, JobContext, JobError, TraceParent, Worker};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize, Job)]
    /// # #[job(topic = "t")]
    /// # struct Ping;
    /// # async fn ping(_: Ping, _: JobContext) -> Result<(), JobError> { Ok(()) }
    /// let worker = Worker::builder(&Client::memory())
    ///     .handle(ping)
    ///     .trace_parent(TraceParent::Child)
    ///     .build()
    ///     .unwrap();
    /// ```
    #[cfg(feature = "opentelemetry")]
    pub fn trace_parent(mut self, parent: crate::TraceParent) -> Self {
        self.config.trace_parent = parent;
        self
    }
}
