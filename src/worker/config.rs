//! A worker's settings, with their defaults.

use std::time::Duration;

/// Worker settings (see the [`WorkerBuilder`](super::WorkerBuilder) methods for what each means).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) concurrency: usize,
    pub(crate) claim_batch: usize,
    pub(crate) lease: Duration,
    pub(crate) poll_interval: Duration,
    pub(crate) stall_limit: u32,
    pub(crate) shutdown_grace: Duration,
    pub(crate) dead_max_age: Duration,
    pub(crate) dead_keep: u64,
    pub(crate) sweep_limit: usize,
    /// How often the queue depth is sampled (the `metrics` feature).
    pub(crate) queue_depth_interval: Duration,
    /// How a job's span relates to its enqueue's (the `opentelemetry` feature).
    #[cfg(feature = "opentelemetry")]
    pub(crate) trace_parent: crate::observe::trace::TraceParent,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            concurrency: 10,
            claim_batch: 100,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(5),
            stall_limit: 3,
            shutdown_grace: Duration::from_secs(20),
            dead_max_age: Duration::from_secs(30 * 24 * 3600),
            dead_keep: 10_000,
            sweep_limit: 100,
            queue_depth_interval: Duration::from_secs(10),
            #[cfg(feature = "opentelemetry")]
            trace_parent: Default::default(),
        }
    }
}
