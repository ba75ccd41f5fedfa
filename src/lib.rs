//! # postpone
//!
//! Typed, reliable background jobs on Redis.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

mod client;
mod dead_letter;
mod error;
mod handler;
mod id;
mod job;
mod record;
mod schedule;
pub mod store;
mod validate;
mod worker;

pub use client::{
    CancelStatus, Client, ClientBuilder, Enqueue, EnqueueItem, EnqueueStatus, Enqueued, JobInfo,
    JobState, Topic, When, DEFAULT_MAX_PAYLOAD, DEFAULT_NAMESPACE,
};
pub use dead_letter::{sink_fn, DeadLetter, DeadLetterSink, FnSink, LogSink};
pub use error::{BoxError, Error, Result};
pub use handler::{Handler, HandlerFuture, JobContext, JobError, JobHandler, Outcome, StopReason};
pub use job::Job;
pub use record::AttemptError;
pub use schedule::{RetrySchedule, MAX_DELAY, MAX_SLOTS};
pub use store::TopicCounts;
pub use validate::{validate_id, validate_namespace, validate_topic, MAX_ID_LEN};
pub use worker::{ShutdownHandle, Worker, WorkerBuilder};

#[cfg(feature = "macros")]
pub use postpone_macros::Job;

#[doc(hidden)]
pub mod __private {
    pub use crate::handler::{ViaTrait, WithState, WithoutState};
    pub use crate::schedule::RetrySchedule;
    pub use core::option::Option;
    pub use std::time::Duration;

    /// Used by `#[derive(Job)]`: the schedule it checked at compile time.
    pub fn schedule_from_millis(slots: &[u64]) -> RetrySchedule {
        RetrySchedule::from_millis(slots).expect("postpone-macros checked this schedule")
    }
}
