//! The one place for time conversions: durations to whole milliseconds, milliseconds since the Unix
//! epoch to `chrono` times, and sums of the two. Every conversion saturates: a duration too long for
//! the target type becomes its largest value, never a wrapped or truncated one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};

/// A duration in whole milliseconds (rounded down), saturating at `u64::MAX`.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A duration in whole milliseconds as a signed offset, saturating at `i64::MAX`.
pub(crate) fn millis_i64(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `at + ms`, saturating.
pub(crate) fn add_ms(at: i64, ms: u64) -> i64 {
    at.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// A time from ms since the Unix epoch (out of chrono's range: the epoch itself).
pub(crate) fn ms_to_time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// This process's wall clock, ms since the Unix epoch (negative before it). Used only for what the
/// store's clock does not decide: the time written next to an error message.
pub(crate) fn system_now_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => millis_i64(d),
        Err(e) => millis_i64(e.duration()).saturating_neg(),
    }
}

/// Whole seconds, minutes, hours and days as `"4m 12s"`, `"3h 5m"`, `"2d 1h"` (two units at most;
/// under a second: `"312ms"`).
pub fn human_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (days, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (days, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) if sec == 0 => format!("{m}m"),
        (0, 0, _) => format!("{m}m {sec}s"),
        (0, _, 0) => format!("{h}h"),
        (0, _, _) => format!("{h}h {m}m"),
        (_, 0, _) => format!("{days}d"),
        _ => format!("{days}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_saturate() {
        assert_eq!(millis(Duration::MAX), u64::MAX);
        assert_eq!(millis_i64(Duration::MAX), i64::MAX);
        assert_eq!(millis(Duration::from_micros(1_999)), 1);
        assert_eq!(add_ms(i64::MAX - 1, 5), i64::MAX);
        assert_eq!(add_ms(10, u64::MAX), i64::MAX);
        assert_eq!(ms_to_time(i64::MAX), DateTime::<Utc>::default());
        assert_eq!(ms_to_time(1_500).timestamp_millis(), 1_500);
    }
}
