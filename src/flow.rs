//! Flow control: how fast and how many jobs of a topic may run, across every worker.
//!
//! Both limits are enforced inside the claim, by the store's clock: a claim never takes a job that may
//! not run yet, and a job held back stays due, with no attempt used and no lease taken. See
//! [`Job::rate_limit`](crate::Job::rate_limit) and [`Job::max_running`](crate::Job::max_running), and
//! the guide's [flow control](crate::guide::flow_control) chapter.
//!
//! The rate limit is a GCRA (generic cell rate algorithm): the topic keeps one number, its theoretical
//! arrival time (TAT). Each job claimed moves it on by the emission interval `per / jobs`; a claim may
//! take a job while the TAT is no more than the burst tolerance ahead of now. The burst is a twentieth
//! of the budget (at least 1 job): `100/s` lets 5 jobs go at once, then one every 10 ms. So over any
//! window the count stays within the burst of the budget, and claims come in small batches.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};

/// A rate limit: at most `jobs` per `per`, for one topic, across every worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RateLimit {
    jobs: u32,
    per: Duration,
}

impl RateLimit {
    /// At most `jobs` jobs per `per` (at least 1 job per at least 1 ms; checked when a worker is built).
    pub const fn new(jobs: u32, per: Duration) -> Self {
        RateLimit { jobs, per }
    }

    /// At most `jobs` per second.
    pub const fn per_second(jobs: u32) -> Self {
        RateLimit::new(jobs, Duration::from_secs(1))
    }

    /// How many jobs per [`per`](Self::per).
    pub fn jobs(&self) -> u32 {
        self.jobs
    }

    /// The period.
    pub fn per(&self) -> Duration {
        self.per
    }

    /// How many jobs may go at once: a twentieth of the budget, at least 1.
    pub fn burst(&self) -> u32 {
        (self.jobs / 20).max(1)
    }

    /// The emission interval: `per / jobs`, in ms (fractional).
    pub fn interval_ms(&self) -> f64 {
        self.per.as_secs_f64() * 1000.0 / f64::from(self.jobs.max(1))
    }

    /// The limit of each of `partitions` partitions, so that together they keep this one: the same
    /// jobs per a period `partitions` times as long.
    pub(crate) fn split(self, partitions: u16) -> Self {
        RateLimit {
            jobs: self.jobs,
            per: self.per.saturating_mul(u32::from(partitions.max(1))),
        }
    }

    /// What a claim tells the store about the limits it claims under: `<jobs>/<per ms>/<max running>`
    /// (`0/0/<n>` without a rate), for operators.
    pub(crate) fn label(rate: Option<RateLimit>, max_running: u32) -> String {
        let (jobs, per) = rate.map_or((0, 0), |r| (r.jobs, crate::time::millis(r.per)));
        format!("{jobs}/{per}/{max_running}")
    }

    /// Checks that the limit lets jobs go at all.
    pub(crate) fn validate(&self, topic: &str) -> Result<()> {
        if self.jobs == 0 || self.per < Duration::from_millis(1) {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "the rate limit of topic {topic:?} is {self}: it needs at least 1 job per at \
                     least 1 ms (e.g. 100 per second)"
                ),
            });
        }
        Ok(())
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{:?}", self.jobs, self.per)
    }
}

/// What the budget of a rate limit lets one claim do (the GCRA step, as `claim.lua` does it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Budget {
    /// How many jobs may go now.
    pub(crate) allowed: usize,
    /// The TAT it starts from: `max(stored TAT, now)`.
    pub(crate) tat: f64,
}

impl Budget {
    /// The budget at `now` (ms) given the stored TAT (ms, 0 when none).
    pub(crate) fn at(rate: RateLimit, stored_tat: f64, now: i64) -> Self {
        let interval = rate.interval_ms();
        let tat = stored_tat.max(now as f64);
        let allowed = ((now as f64 - tat) / interval + f64::from(rate.burst()) + 1e-9).floor();
        Budget {
            allowed: allowed.max(0.0) as usize,
            tat,
        }
    }

    /// The TAT after `taken` jobs went.
    pub(crate) fn after(&self, rate: RateLimit, taken: usize) -> f64 {
        self.tat + taken as f64 * rate.interval_ms()
    }

    /// When the next job may go, given the TAT `tat` (ms, rounded up).
    pub(crate) fn next_at(rate: RateLimit, tat: f64) -> i64 {
        (tat - f64::from(rate.burst() - 1) * rate.interval_ms() - 1e-6).ceil() as i64
    }
}

/// Limits per key of a topic's jobs (see [`Job::key`](crate::Job::key) and the guide's chapter
/// [Fairness by key](crate::guide::fairness)): at most `max_running` jobs of one key running at once,
/// and at most `rate` of one key's jobs started, across every worker, each key on its own. A job
/// without a key is under neither.
///
/// ```
/// use postpone::{KeyLimits, RateLimit};
/// let limits = KeyLimits::new().max_running(2).rate(RateLimit::per_second(10));
/// assert_eq!(limits.max_running_per_key(), 2);
/// assert_eq!(limits.rate_per_key(), Some(RateLimit::per_second(10)));
/// assert!(KeyLimits::new().is_none());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct KeyLimits {
    max_running: u32,
    rate: Option<RateLimit>,
}

impl KeyLimits {
    /// No limit per key.
    pub const fn new() -> Self {
        KeyLimits {
            max_running: 0,
            rate: None,
        }
    }

    /// At most `n` jobs of one key running at once (0: no limit). A job counts from its claim to its
    /// outcome; a crashed worker's jobs count until their leases expire.
    pub const fn max_running(self, n: u32) -> Self {
        KeyLimits {
            max_running: n,
            ..self
        }
    }

    /// At most `rate` of one key's jobs started (a GCRA per key on the store's clock, as the topic's
    /// [`RateLimit`]).
    pub const fn rate(self, rate: RateLimit) -> Self {
        KeyLimits {
            rate: Some(rate),
            ..self
        }
    }

    /// Most jobs of one key running at once (0: no limit).
    pub fn max_running_per_key(&self) -> u32 {
        self.max_running
    }

    /// The rate limit of each key.
    pub fn rate_per_key(&self) -> Option<RateLimit> {
        self.rate
    }

    /// Whether neither limit is set.
    pub fn is_none(&self) -> bool {
        self.max_running == 0 && self.rate.is_none()
    }

    /// What a claim tells the store about them, for operators: [`RateLimit::label`]'s form.
    pub(crate) fn label(&self) -> String {
        RateLimit::label(self.rate, self.max_running)
    }

    /// The limits a [`KeyLimits::label`] says (`None` when it is not one).
    pub(crate) fn from_label(label: &str) -> Option<Self> {
        let mut parts = label.split('/').map(str::parse::<u64>);
        let (Some(Ok(jobs)), Some(Ok(per)), Some(Ok(max)), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let limits = KeyLimits::new().max_running(u32::try_from(max).ok()?);
        Some(match (u32::try_from(jobs).ok()?, per) {
            (0, _) | (_, 0) => limits,
            (jobs, per) => limits.rate(RateLimit::new(jobs, Duration::from_millis(per))),
        })
    }
}

/// As operators read them: `max 2 running, 10/1s`, `max 2 running`, `10/1s`, or `none`.
impl fmt::Display for KeyLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.max_running, self.rate) {
            (0, None) => f.write_str("none"),
            (0, Some(rate)) => write!(f, "{rate}"),
            (n, None) => write!(f, "max {n} running"),
            (n, Some(rate)) => write!(f, "max {n} running, {rate}"),
        }
    }
}

/// The flow limits of one topic (or one partition) as a worker claims it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flow {
    /// The rate limit.
    pub(crate) rate: Option<RateLimit>,
    /// Most jobs running at once across every worker (0: no limit).
    pub(crate) max_running: u32,
    /// The limits of each key.
    pub(crate) key: KeyLimits,
}

impl Flow {
    /// The limits of each of `partitions` partitions: the rate split evenly (see
    /// [`RateLimit::split`]), and `max_running` divided, rounded down, at least 1.
    pub(crate) fn per_partition(self, partitions: u16) -> Self {
        if partitions <= 1 {
            return self;
        }
        Flow {
            rate: self.rate.map(|r| r.split(partitions)),
            max_running: match self.max_running {
                0 => 0,
                n => (n / u32::from(partitions)).max(1),
            },
            // A key's jobs with generated ids are in its key's partition: its limits stay whole.
            key: self.key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_limits_read_back_from_their_label() {
        let both = KeyLimits::new()
            .max_running(2)
            .rate(RateLimit::new(10, Duration::from_secs(1)));
        assert_eq!(both.label(), "10/1000/2");
        assert_eq!(KeyLimits::from_label(&both.label()), Some(both));
        assert_eq!(both.to_string(), "max 2 running, 10/1s");
        assert_eq!(KeyLimits::new().to_string(), "none");
        assert_eq!(KeyLimits::from_label("0/0/0"), Some(KeyLimits::new()));
        assert_eq!(
            KeyLimits::from_label("0/0/3"),
            Some(KeyLimits::new().max_running(3))
        );
        for bad in ["", "1/2", "1/2/3/4", "a/1/1", "-1/1/1", "1/1/99999999999"] {
            assert_eq!(KeyLimits::from_label(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn gcra_lets_a_burst_go_then_one_per_interval() {
        let rate = RateLimit::per_second(100);
        assert_eq!(rate.burst(), 5);
        let b = Budget::at(rate, 0.0, 1_000);
        assert_eq!(b.allowed, 5);
        let tat = b.after(rate, 5);
        assert_eq!(tat, 1_050.0);
        assert_eq!(Budget::next_at(rate, tat), 1_010);
        assert_eq!(Budget::at(rate, tat, 1_009).allowed, 0);
        assert_eq!(Budget::at(rate, tat, 1_010).allowed, 1);
        assert_eq!(Budget::at(rate, tat, 1_030).allowed, 3);
        // Idle for long: the burst, no more.
        assert_eq!(Budget::at(rate, tat, 9_000).allowed, 5);
        let slow = RateLimit::new(3, Duration::from_secs(1));
        assert_eq!(slow.burst(), 1);
        let tat = Budget::at(slow, 0.0, 0).after(slow, 1);
        assert_eq!(Budget::next_at(slow, tat), 334);
        assert_eq!(Budget::at(slow, tat, 333).allowed, 0);
        assert_eq!(Budget::at(slow, tat, 334).allowed, 1);
    }

    #[test]
    fn partitions_share_the_limits() {
        let f = Flow {
            rate: Some(RateLimit::per_second(100)),
            max_running: 5,
            key: KeyLimits::new().max_running(2),
        };
        let p = f.per_partition(4);
        assert_eq!(p.rate.unwrap().per(), Duration::from_secs(4));
        assert_eq!(p.max_running, 1);
        assert_eq!(p.key, f.key, "a key's limits are whole in its partition");
        assert_eq!(f.per_partition(1), f);
    }
}
