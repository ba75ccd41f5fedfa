//! What a handler returns when a job did not succeed.

use std::fmt;
use std::time::Duration;

use crate::error::BoxError;

/// How a failed attempt should continue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Retry by the job's schedule; dead-letter when it is exhausted.
    Retry,
    /// Retry after this delay instead of the schedule's; still uses an attempt.
    RetryAfter(Duration),
    /// Do not retry: dead-letter now.
    Fail,
    /// Run again after this delay without using an attempt.
    Snooze(Duration),
    /// A provider's rate limit: claim no job of this topic, on any worker, for this long; this job
    /// runs again after it without using an attempt.
    RateLimited(Duration),
}

/// The error a handler returns: what went wrong, and how the job continues.
///
/// Any `std::error::Error` converts into a `JobError` that retries by schedule, so `?` works in handlers.
/// Build one explicitly to choose another path:
///
/// ```
/// use std::time::Duration;
/// use postpone::JobError;
///
/// let retry = JobError::msg("payment provider answered 503");
/// let later = JobError::retry_after(Duration::from_secs(60), "rate limited");
/// let give_up = JobError::fail("order no longer exists");
/// let wait = JobError::snooze(Duration::from_secs(5));
/// assert!(give_up.to_string().contains("no longer exists"));
/// ```
pub struct JobError {
    outcome: Outcome,
    error: Option<BoxError>,
}

impl JobError {
    /// Retry by schedule, with this error.
    pub fn retry(error: impl Into<BoxError>) -> Self {
        JobError {
            outcome: Outcome::Retry,
            error: Some(error.into()),
        }
    }

    /// Retry by schedule, with a message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self::retry(message.to_string())
    }

    /// Retry after `delay` instead of the schedule's next delay (uses an attempt; a job whose schedule
    /// is exhausted still goes to the dead letters).
    pub fn retry_after(delay: Duration, error: impl Into<BoxError>) -> Self {
        JobError {
            outcome: Outcome::RetryAfter(delay),
            error: Some(error.into()),
        }
    }

    /// Fail now: no retry, straight to the dead letters.
    pub fn fail(error: impl Into<BoxError>) -> Self {
        JobError {
            outcome: Outcome::Fail,
            error: Some(error.into()),
        }
    }

    /// Run again after `delay` without using an attempt (the job is not ready yet, nothing failed).
    pub fn snooze(delay: Duration) -> Self {
        JobError {
            outcome: Outcome::Snooze(delay),
            error: None,
        }
    }

    /// A provider said "too many requests" (an HTTP 429, say, with its `Retry-After`): no worker claims
    /// a job of this topic for `retry_in`, and this job runs again after it without using an attempt.
    ///
    /// Jobs of the topic already claimed (running, or waiting in a worker for a slot) are not
    /// stopped.
    ///
    /// ```
    /// use std::time::Duration;
    /// use postpone::{JobError, Outcome};
    ///
    /// let e = JobError::rate_limited(Duration::from_secs(30));
    /// assert_eq!(e.outcome(), Outcome::RateLimited(Duration::from_secs(30)));
    /// ```
    pub fn rate_limited(retry_in: Duration) -> Self {
        JobError {
            outcome: Outcome::RateLimited(retry_in),
            error: None,
        }
    }

    /// How the job continues.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The underlying error, if any.
    pub fn error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.error.as_deref()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for JobError {
    fn from(error: E) -> Self {
        JobError::retry(error)
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            Some(e) => {
                write!(f, "{e}")?;
                let mut source = e.source();
                while let Some(s) = source {
                    write!(f, ": {s}")?;
                    source = s.source();
                }
                Ok(())
            }
            None => match self.outcome {
                Outcome::Snooze(d) => write!(f, "snoozed for {d:?}"),
                Outcome::RateLimited(d) => write!(f, "rate limited for {d:?}"),
                _ => f.write_str("job failed"),
            },
        }
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobError")
            .field("outcome", &self.outcome)
            .field("error", &self.error)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_mark_retries_and_keeps_the_chain() {
        fn parse() -> Result<u32, JobError> {
            Ok("x".parse::<u32>()?)
        }
        let e = parse().unwrap_err();
        assert_eq!(e.outcome(), Outcome::Retry);
        assert!(e.to_string().contains("invalid digit"), "{e}");
    }
}
