//! Periodic jobs: a schedule (a cron expression in a time zone, or a fixed interval) whose every tick
//! enqueues a job built from the tick's time.
//!
//! Declare one with [`Periodic`] and give it to a worker with
//! [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic). Every worker that declares it runs its
//! tick loop, and each tick is enqueued exactly once whatever their number, their clocks, restarts or
//! crashes: the job of a tick has the id `<name>:<tick>` (the tick in UTC, `2026-11-23T09:00:00Z`), and
//! one atomic step of the store decides a tick and advances the schedule, on the store's clock.

mod cadence;
mod definition;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use crate::error::{Error, Result};
use crate::job::Job;
use crate::time::ms_to_time;
use crate::Client;
pub(crate) use cadence::Cadence;
pub(crate) use definition::Definition;

/// Most missed ticks [`Missed::UpTo`] runs.
pub const MAX_CATCH_UP: u32 = 100;

/// How late a tick may be decided and still run under [`Missed::Skip`].
pub const SKIP_GRACE: Duration = Duration::from_secs(60);

/// What to do with the ticks that passed while no worker ran the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Missed {
    /// Run none of them: the schedule resumes at its next tick. (A tick is missed when it is decided
    /// more than [`SKIP_GRACE`] late, or a later tick has passed too.)
    #[default]
    Skip,
    /// Run the last one that passed, however late.
    Last,
    /// Run up to this many of the latest that passed (1 to [`MAX_CATCH_UP`]), oldest first.
    UpTo(u32),
}

/// What to do with a tick while the job of the schedule's previous tick is still scheduled or running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Overlap {
    /// Enqueue it all the same (the jobs may run at once).
    #[default]
    Allow,
    /// Skip it: no job for this tick.
    Skip,
}

/// A periodic schedule: its name, when it ticks, and its policies. Give it the job to build with
/// [`job`](Self::job).
///
/// ```
/// use std::time::Duration;
/// use postpone::{Client, Job, JobContext, JobError, Missed, Overlap, Periodic, Worker};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "carts.expire")]
/// struct ExpireCarts { older_than_ms: i64 }
///
/// async fn expire(job: ExpireCarts, _ctx: JobContext) -> Result<(), JobError> { Ok(()) }
///
/// # fn main() -> postpone::Result<()> {
/// let client = Client::memory();
/// let every_five_minutes = Periodic::every("expire-carts", Duration::from_secs(300))?
///     .missed(Missed::Last)
///     .overlap(Overlap::Skip)
///     .job(|tick| ExpireCarts { older_than_ms: tick.timestamp_millis() - 3_600_000 });
/// let worker = Worker::builder(&client)
///     .handle(expire)
///     .periodic(every_five_minutes)
///     .build()?;
/// # drop(worker);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Periodic {
    name: String,
    cadence: Cadence,
    expression: String,
    zone: Option<String>,
    missed: Missed,
    overlap: Overlap,
}

fn invalid(name: &str, reason: impl fmt::Display) -> Error {
    Error::InvalidSchedule {
        reason: format!("periodic schedule {name:?}: {reason}"),
    }
}

/// Checks a schedule's name: `[A-Za-z0-9_.-]{1,128}`.
fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            name,
            "a name is 1 to 128 characters of A-Z, a-z, 0-9, '_', '.', '-'",
        ))
    }
}

impl Periodic {
    /// Ticks every `interval` (whole seconds, at least one), at the multiples of `interval` since the
    /// Unix epoch: `every(.., 5 min)` ticks at :00, :05, :10 of every hour, on every worker alike.
    pub fn every(name: impl Into<String>, interval: Duration) -> Result<Self> {
        let name = name.into();
        validate_name(&name)?;
        if interval < Duration::from_secs(1) || interval.subsec_nanos() != 0 {
            return Err(invalid(
                &name,
                "an interval is a whole number of seconds, at least 1",
            ));
        }
        let secs = interval.as_secs();
        Ok(Periodic {
            name,
            cadence: Cadence::Every { secs },
            expression: format!("every {secs}s"),
            zone: None,
            missed: Missed::Skip,
            overlap: Overlap::Allow,
        })
    }

    /// Ticks by a cron expression read in an IANA time zone: 5 fields (minute, hour, day of month,
    /// month, day of week) or 6 (seconds first), or a nickname such as `@daily`.
    ///
    /// Daylight saving: a local time that does not exist (the clocks jump over it) ticks once, at the
    /// first valid instant after the gap; a local time that occurs twice ticks once, at its first
    /// occurrence. Needs the `cron` feature.
    ///
    /// ```
    /// # use postpone::Periodic;
    /// let daily = Periodic::cron("daily-report", "0 9 * * *", "Europe/Berlin")?;
    /// assert_eq!(daily.name(), "daily-report");
    /// assert!(Periodic::cron("bad", "0 9 * *", "Europe/Berlin").is_err());
    /// assert!(Periodic::cron("bad", "0 9 * * *", "Europe/Bonn").is_err());
    /// assert!(Periodic::cron("bad", "0 0 30 2 *", "UTC").is_err()); // February 30th
    /// # Ok::<(), postpone::Error>(())
    /// ```
    #[cfg(feature = "cron")]
    pub fn cron(name: impl Into<String>, expression: &str, zone: &str) -> Result<Self> {
        let name = name.into();
        validate_name(&name)?;
        let cron = cadence::cron::parse(expression)
            .map_err(|e| invalid(&name, format_args!("cron expression {expression:?}: {e}")))?;
        let tz = cadence::cron::zone(zone)
            .map_err(|e| invalid(&name, format_args!("time zone {zone:?}: {e}")))?;
        let cadence = Cadence::Cron {
            cron: Box::new(cron),
            zone: tz,
        };
        if cadence.next_after(crate::time::system_now_ms()).is_none() {
            return Err(invalid(
                &name,
                format_args!("cron expression {expression:?} never matches from now on"),
            ));
        }
        Ok(Periodic {
            name,
            cadence,
            expression: expression.trim().to_owned(),
            zone: Some(zone.to_owned()),
            missed: Missed::Skip,
            overlap: Overlap::Allow,
        })
    }

    /// What to do with ticks that passed while no worker ran (default [`Missed::Skip`]). `UpTo(n)` is
    /// kept within 1 to [`MAX_CATCH_UP`].
    pub fn missed(mut self, missed: Missed) -> Self {
        self.missed = match missed {
            Missed::UpTo(n) => Missed::UpTo(n.clamp(1, MAX_CATCH_UP)),
            other => other,
        };
        self
    }

    /// What to do with a tick while the previous tick's job is scheduled or running (default
    /// [`Overlap::Allow`]).
    pub fn overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = overlap;
        self
    }

    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The job each tick enqueues, built from the tick's time.
    pub fn job<J, F>(self, make: F) -> PeriodicJob<J>
    where
        J: Job,
        F: Fn(DateTime<Utc>) -> J + Send + Sync + 'static,
    {
        PeriodicJob {
            schedule: self,
            make: Arc::new(make),
        }
    }

    /// The definition stored with the schedule (compared whole: a change replaces the stored one).
    pub(crate) fn definition(&self) -> String {
        Definition::of(self).to_json()
    }

    pub(crate) fn cadence(&self) -> &Cadence {
        &self.cadence
    }

    pub(crate) fn overlap_skip(&self) -> bool {
        self.overlap == Overlap::Skip
    }

    /// The due ticks to run among `[stored_next, now]` (the latest, oldest first), and the grace the
    /// store applies to them.
    pub(crate) fn due_ticks(&self, stored_next: i64, now: i64) -> (Vec<i64>, Option<u64>) {
        let (n, grace) = match self.missed {
            Missed::Skip => (1, Some(crate::time::millis(SKIP_GRACE))),
            Missed::Last => (1, None),
            Missed::UpTo(n) => (n as usize, None),
        };
        (self.cadence.latest_in(stored_next, now, n), grace)
    }
}

/// A [`Periodic`] schedule with the job its ticks enqueue: give it to
/// [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic).
#[must_use]
pub struct PeriodicJob<J> {
    schedule: Periodic,
    make: Arc<dyn Fn(DateTime<Utc>) -> J + Send + Sync>,
}

impl<J> fmt::Debug for PeriodicJob<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeriodicJob")
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

/// The id of a tick's job: `<name>:<tick in UTC>` (with milliseconds only when it has some: a trigger).
pub(crate) fn tick_id(name: &str, tick_ms: i64) -> String {
    let at = ms_to_time(tick_ms);
    let format = if tick_ms.rem_euclid(1000) == 0 {
        SecondsFormat::Secs
    } else {
        SecondsFormat::Millis
    };
    format!("{name}:{}", at.to_rfc3339_opts(format, true))
}

/// A declared schedule, its job type erased: what the worker's tick loop needs.
pub(crate) trait Scheduled: Send + Sync + fmt::Debug {
    /// The job type's topic.
    fn topic(&self) -> &'static str;
    /// The schedule.
    fn schedule(&self) -> &Periodic;
    /// The job of the tick at `tick_ms`: its id, encoded record and key for fairness.
    fn job_at(&self, client: &Client, tick_ms: i64) -> Result<crate::store::NewJob>;
}

impl<J: Job> Scheduled for PeriodicJob<J> {
    fn topic(&self) -> &'static str {
        J::TOPIC
    }

    fn schedule(&self) -> &Periodic {
        &self.schedule
    }

    fn job_at(&self, client: &Client, tick_ms: i64) -> Result<crate::store::NewJob> {
        let id = tick_id(&self.schedule.name, tick_ms);
        let make = || (self.make)(ms_to_time(tick_ms));
        let job = std::panic::catch_unwind(std::panic::AssertUnwindSafe(make)).map_err(|_| {
            Error::InvalidConfig {
                reason: format!(
                    "periodic schedule {:?}: its job function panicked",
                    self.schedule.name
                ),
            }
        })?;
        client.encode_job(job, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_intervals_are_checked() {
        assert!(Periodic::every("a-b_c.9", Duration::from_secs(1)).is_ok());
        for bad in ["", "a b", "a:b", "a{b}", &"x".repeat(129)] {
            assert!(
                Periodic::every(bad, Duration::from_secs(1)).is_err(),
                "{bad}"
            );
        }
        for bad in [0, 500, 1500] {
            assert!(Periodic::every("x", Duration::from_millis(bad)).is_err());
        }
    }

    #[test]
    fn tick_ids_name_the_tick_in_utc() {
        assert_eq!(
            tick_id("report", 1_795_424_400_000),
            "report:2026-11-23T09:00:00Z"
        );
        assert_eq!(
            tick_id("report", 1_795_424_400_123),
            "report:2026-11-23T09:00:00.123Z"
        );
    }

    #[test]
    fn missed_ticks_by_policy() {
        let p = Periodic::every("p", Duration::from_secs(10)).unwrap();
        // Stored next at 100 s; the worker comes back at 165.5 s: ticks 100..160 passed.
        let (next, now) = (100_000, 165_500);
        assert_eq!(p.due_ticks(next, now), (vec![160_000], Some(60_000)));
        let last = p.clone().missed(Missed::Last);
        assert_eq!(last.due_ticks(next, now), (vec![160_000], None));
        let three = p.clone().missed(Missed::UpTo(3));
        assert_eq!(
            three.due_ticks(next, now),
            (vec![140_000, 150_000, 160_000], None)
        );
        let all = p.clone().missed(Missed::UpTo(1000));
        assert_eq!(all.due_ticks(next, now).0.len(), 7);
        // On time: the one due tick, whatever the policy.
        assert_eq!(three.due_ticks(160_000, 160_002).0, [160_000]);
        assert_eq!(p.cadence().next_after(now), Some(170_000));
    }
}
