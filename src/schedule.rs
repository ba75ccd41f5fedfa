//! The retry schedule: an array of delays indexed by attempt number.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};

/// Longest delay a schedule slot may hold (one year).
pub const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Most slots a schedule may hold.
pub const MAX_SLOTS: usize = 1001;

/// When a failed job runs again, as an array of delays indexed by attempt number.
///
/// Slot `N` is the delay before attempt `N`. Slot 0 is never read, and must be 0. Attempt 1 runs at the
/// due time the enqueue asked for plus slot 1 (0 in the default); each failure of attempt `N` schedules
/// attempt `N + 1` after slot `N + 1`; when that slot does not exist the job is exhausted and goes to the
/// dead letters. So a schedule of `len` slots allows `len - 1` attempts.
///
/// To write the delays between failures instead (as Sidekiq or BullMQ read a list of delays), use
/// [`between_failures`](Self::between_failures): `between_failures([1m, 5m, 30m])` is
/// `[0, 0, 1m, 5m, 30m]`, four attempts. In `#[job(...)]` the two forms are `retry = [...]` and
/// `retry_delays = [...]`.
///
/// The default is `[0, 0, 2m, 10m, 10m, 1h, 2h, 6h, 15h]`: eight attempts; the first at the due time, the
/// second 2 minutes after the first failed, the third 10 minutes after that, ..., the eighth 15 hours after
/// the seventh failed.
///
/// ```
/// use std::time::Duration;
/// use postpone::RetrySchedule;
///
/// let schedule = RetrySchedule::default();
/// assert_eq!(schedule.attempts(), 8);
/// assert_eq!(schedule.delay_before(3), Some(Duration::from_secs(600)));
/// assert_eq!(schedule.delay_before(9), None); // exhausted after attempt 8
///
/// let fast = RetrySchedule::from_millis(&[0, 0, 10, 20])?;
/// assert_eq!(fast.attempts(), 3);
///
/// // Retries 1, 5 and 30 minutes after successive failures:
/// let m = |n: u64| Duration::from_secs(n * 60);
/// let sidekiq_like = RetrySchedule::between_failures([m(1), m(5), m(30)])?;
/// assert_eq!(sidekiq_like.to_string(), "[0, 0, 1m, 5m, 30m]");
/// assert_eq!(sidekiq_like.retry_delay(1), Some(m(1))); // attempt 1 failed: attempt 2 in a minute
/// # Ok::<(), postpone::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    slots: Vec<Duration>,
    jitter_permille: u16,
}

impl RetrySchedule {
    /// A schedule from its slots, indexed by attempt. Fails when it has fewer than two slots (no attempt
    /// at all), more than [`MAX_SLOTS`], a delay over [`MAX_DELAY`], or a slot 0 other than 0 (never read:
    /// for delays between failures, use [`between_failures`](Self::between_failures)).
    pub fn new(slots: impl IntoIterator<Item = Duration>) -> Result<Self> {
        let slots: Vec<Duration> = slots.into_iter().collect();
        if let Some(slot0) = slots.first().filter(|d| !d.is_zero()) {
            return Err(Error::InvalidSchedule {
                reason: format!(
                    "slot 0 is {}, but slot 0 is never read: slot 1 is the delay before the first attempt \
                     and slot n the delay before attempt n; for delays between failures use \
                     RetrySchedule::between_failures, otherwise make slot 0 zero",
                    format_duration(*slot0)
                ),
            });
        }
        Self::checked(slots)
    }

    /// A schedule from the delays between failures: the first attempt runs at the due time, and retry
    /// `n` runs `delays[n - 1]` after attempt `n` failed. `between_failures([1m, 5m, 30m])` allows four
    /// attempts, retried 1, 5 and 30 minutes after each failure; no delays, one attempt and no retry. It
    /// is the attempt-indexed schedule `[0, 0, delays...]`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use postpone::RetrySchedule;
    ///
    /// let schedule = RetrySchedule::between_failures([Duration::from_secs(60), Duration::from_secs(300)])?;
    /// assert_eq!(schedule.attempts(), 3);
    /// assert_eq!(schedule.retry_delay(1), Some(Duration::from_secs(60)));
    /// assert_eq!(schedule.retry_delay(2), Some(Duration::from_secs(300)));
    /// assert_eq!(schedule.retry_delay(3), None); // attempt 3 failed: dead letter
    /// # Ok::<(), postpone::Error>(())
    /// ```
    pub fn between_failures(delays: impl IntoIterator<Item = Duration>) -> Result<Self> {
        Self::new([Duration::ZERO, Duration::ZERO].into_iter().chain(delays))
    }

    /// The checks of [`new`](Self::new) but slot 0's: stored schedules are read back as they were.
    fn checked(slots: Vec<Duration>) -> Result<Self> {
        if slots.len() < 2 {
            return Err(Error::InvalidSchedule {
                reason: format!(
                    "it has {} slot(s); it needs at least 2 (slot 0 is never read, slot 1 is the first attempt)",
                    slots.len()
                ),
            });
        }
        if slots.len() > MAX_SLOTS {
            return Err(Error::InvalidSchedule {
                reason: format!(
                    "it has {} slots; at most {MAX_SLOTS} are allowed",
                    slots.len()
                ),
            });
        }
        if let Some((i, d)) = slots.iter().enumerate().find(|(_, d)| **d > MAX_DELAY) {
            return Err(Error::InvalidSchedule {
                reason: format!("slot {i} is {d:?}, longer than a year"),
            });
        }
        Ok(RetrySchedule {
            slots,
            jitter_permille: 0,
        })
    }

    /// A schedule from delays in milliseconds (handy for tests and demos).
    pub fn from_millis(slots: &[u64]) -> Result<Self> {
        Self::new(slots.iter().map(|ms| Duration::from_millis(*ms)))
    }

    /// Spreads every retry delay by up to `fraction` either way (0.0 to 1.0), so that jobs that failed
    /// together do not all come back at the same instant. Off by default: the schedule is what you wrote.
    #[must_use]
    pub fn with_jitter(mut self, fraction: f64) -> Self {
        self.jitter_permille = (fraction.clamp(0.0, 1.0) * 1000.0).round() as u16;
        self
    }

    /// The jitter as a fraction (0.0 when off).
    pub fn jitter(&self) -> f64 {
        f64::from(self.jitter_permille) / 1000.0
    }

    /// How many attempts the schedule allows: its length minus one.
    pub fn attempts(&self) -> u32 {
        (self.slots.len() - 1) as u32
    }

    /// The delay before attempt `attempt` (1-based), or `None` when the schedule allows no such attempt.
    pub fn delay_before(&self, attempt: u32) -> Option<Duration> {
        if attempt == 0 {
            return None;
        }
        self.slots.get(attempt as usize).copied()
    }

    /// The delay before the attempt after a failed `attempt`, with jitter applied, or `None` when the
    /// job is exhausted.
    pub fn retry_delay(&self, failed_attempt: u32) -> Option<Duration> {
        let base = self.delay_before(failed_attempt.checked_add(1)?)?;
        Some(apply_jitter(base, self.jitter_permille))
    }

    /// The slots, slot 0 first.
    pub fn slots(&self) -> &[Duration] {
        &self.slots
    }

    pub(crate) fn to_millis(&self) -> Vec<u64> {
        self.slots.iter().map(|d| d.as_millis() as u64).collect()
    }

    pub(crate) fn from_parts(millis: &[u64], jitter_permille: u16) -> Result<Self> {
        let mut s = Self::checked(millis.iter().map(|ms| Duration::from_millis(*ms)).collect())?;
        s.jitter_permille = jitter_permille.min(1000);
        Ok(s)
    }

    pub(crate) fn jitter_permille(&self) -> u16 {
        self.jitter_permille
    }
}

impl Default for RetrySchedule {
    fn default() -> Self {
        const M: u64 = 60;
        const H: u64 = 3600;
        let secs = [0, 0, 2 * M, 10 * M, 10 * M, H, 2 * H, 6 * H, 15 * H];
        RetrySchedule {
            slots: secs.iter().map(|s| Duration::from_secs(*s)).collect(),
            jitter_permille: 0,
        }
    }
}

impl fmt::Debug for RetrySchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RetrySchedule({self})")
    }
}

impl fmt::Display for RetrySchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.slots.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&format_duration(*d))?;
        }
        f.write_str("]")?;
        if self.jitter_permille > 0 {
            write!(f, " ±{}%", f64::from(self.jitter_permille) / 10.0)?;
        }
        Ok(())
    }
}

/// `2m`, `1h`, `1500ms`: the shortest exact form.
pub(crate) fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0".into()
    } else if ms % 3_600_000 == 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn apply_jitter(base: Duration, permille: u16) -> Duration {
    if permille == 0 || base.is_zero() {
        return base;
    }
    // Uniform in [-permille, +permille] thousandths of the base.
    let span = u64::from(permille) * 2 + 1;
    let offset = crate::id::random_u64() % span;
    let factor = 1000 + offset as i64 - i64::from(permille);
    let ms = base.as_millis() as i64 * factor / 1000;
    Duration::from_millis(ms.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default schedule, attempt by attempt: the contract in DESIGN.md.
    #[test]
    fn default_schedule_table() {
        let s = RetrySchedule::default();
        let m = |n: u64| Some(Duration::from_secs(n * 60));
        let h = |n: u64| Some(Duration::from_secs(n * 3600));
        // (failed attempt, delay before the next attempt)
        let table = [
            (1, m(2)), // attempt 2 runs 2 minutes after attempt 1 failed
            (2, m(10)),
            (3, m(10)),
            (4, h(1)),
            (5, h(2)),
            (6, h(6)),
            (7, h(15)), // attempt 8 runs 15 hours after attempt 7 failed
        ];
        // attempt 8 is the last one: it fails and the job is exhausted.
        assert_eq!(s.attempts(), 8);
        assert_eq!(s.delay_before(1), Some(Duration::ZERO));
        for (failed, next) in table {
            assert_eq!(s.retry_delay(failed), next, "after attempt {failed} failed");
        }
        assert_eq!(
            s.retry_delay(8),
            None,
            "attempt 8 failing exhausts the schedule"
        );
        assert_eq!(s.delay_before(0), None, "slot 0 is never read");
        assert_eq!(s.to_string(), "[0, 0, 2m, 10m, 10m, 1h, 2h, 6h, 15h]");
    }

    #[test]
    fn invalid_schedules() {
        assert!(RetrySchedule::new([]).is_err());
        assert!(RetrySchedule::from_millis(&[0]).is_err());
        assert!(RetrySchedule::new([Duration::ZERO, MAX_DELAY * 2]).is_err());
        assert!(RetrySchedule::from_millis(&vec![0; MAX_SLOTS + 1]).is_err());
        assert!(RetrySchedule::from_millis(&[0, 0]).is_ok());
        assert!(RetrySchedule::between_failures(vec![Duration::ZERO; MAX_SLOTS - 1]).is_err());
        assert!(RetrySchedule::between_failures(vec![Duration::ZERO; MAX_SLOTS - 2]).is_ok());
    }

    /// Slot 0 is never read: a schedule that sets it was almost always meant as delays between failures.
    #[test]
    fn slot_zero_must_be_zero() {
        let err = RetrySchedule::from_millis(&[60_000, 300_000, 1_800_000]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid retry schedule: slot 0 is 1m, but slot 0 is never read: slot 1 is the delay before \
             the first attempt and slot n the delay before attempt n; for delays between failures use \
             RetrySchedule::between_failures, otherwise make slot 0 zero"
        );
        // Schedules stored by older versions are read back as they were (slot 0 is never read).
        assert_eq!(
            RetrySchedule::from_parts(&[5, 0, 10], 0)
                .unwrap()
                .attempts(),
            2
        );
    }

    #[test]
    fn delays_between_failures() {
        let m = |n: u64| Duration::from_secs(n * 60);
        let s = RetrySchedule::between_failures([m(1), m(5), m(30)]).unwrap();
        assert_eq!(
            s,
            RetrySchedule::new([m(0), m(0), m(1), m(5), m(30)]).unwrap()
        );
        assert_eq!(s.attempts(), 4);
        assert_eq!(
            s.delay_before(1),
            Some(Duration::ZERO),
            "the first attempt at the due time"
        );
        let after: Vec<_> = (1..=4).map(|failed| s.retry_delay(failed)).collect();
        assert_eq!(after, [Some(m(1)), Some(m(5)), Some(m(30)), None]);
        let once = RetrySchedule::between_failures([]).unwrap();
        assert_eq!((once.attempts(), once.retry_delay(1)), (1, None));
    }

    #[test]
    fn jitter_stays_in_bounds() {
        let s = RetrySchedule::from_millis(&[0, 0, 1000])
            .unwrap()
            .with_jitter(0.1);
        for _ in 0..1000 {
            let d = s.retry_delay(1).unwrap();
            assert!((900..=1100).contains(&d.as_millis()), "{d:?}");
        }
        assert_eq!(
            RetrySchedule::default().retry_delay(2),
            Some(Duration::from_secs(600)),
            "no jitter by default"
        );
    }
}
