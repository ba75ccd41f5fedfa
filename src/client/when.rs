//! When a job should run, as the caller says it.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::Due;
use crate::time::{add_ms, millis};

/// When a job should run.
///
/// Converts from a [`Duration`] (after that long) and a [`DateTime<Utc>`] (at that time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum When {
    /// As soon as a worker is free.
    #[default]
    Now,
    /// After this delay, by the store's clock.
    After(Duration),
    /// At this time, by the store's clock (a time in the past means now).
    At(DateTime<Utc>),
}

impl From<Duration> for When {
    fn from(d: Duration) -> Self {
        When::After(d)
    }
}

impl From<DateTime<Utc>> for When {
    fn from(t: DateTime<Utc>) -> Self {
        When::At(t)
    }
}

impl When {
    /// The store's form, with `extra` (the schedule's slot 1) added.
    pub(crate) fn to_due(self, extra: Duration) -> Due {
        let extra_ms = millis(extra);
        match self {
            When::Now => Due::In(extra_ms),
            When::After(d) => Due::In(millis(d).saturating_add(extra_ms)),
            When::At(t) => Due::At(add_ms(t.timestamp_millis(), extra_ms)),
        }
    }
}
