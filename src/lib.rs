//! # postpone
//!
//! Typed, reliable background jobs on Redis.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

mod error;
mod id;
mod job;
mod record;
mod schedule;
pub mod store;
mod validate;

pub use error::{BoxError, Error, Result};
pub use job::Job;
pub use record::AttemptError;
pub use schedule::RetrySchedule;
pub use validate::{validate_id, validate_namespace, validate_topic};

#[cfg(feature = "macros")]
pub use postpone_macros::Job;

#[doc(hidden)]
pub mod __private {
    pub use crate::schedule::RetrySchedule;
    pub use core::option::Option;
    pub use std::time::Duration;

    /// Used by `#[derive(Job)]`: the schedule it checked at compile time.
    pub fn schedule_from_millis(slots: &[u64]) -> RetrySchedule {
        RetrySchedule::from_millis(slots).expect("postpone-macros checked this schedule")
    }
}
