//! Observability: metrics through the `metrics` facade (the `metrics` feature) and trace context across
//! the queue (the `opentelemetry` feature).
//!
//! The worker and the client call small functions of [`metrics`] and [`trace`] from their hot paths, one
//! line each; without the features those functions are empty and compile to nothing.

pub(crate) mod metrics;
pub(crate) mod trace;

pub(crate) use self::metrics::{Tally, TopicMetrics};
