//! When a schedule ticks: a fixed interval aligned to the Unix epoch, or a cron expression read in an IANA
//! time zone (with the `cron` feature). Every tick is a whole second, in ms since the Unix epoch.
//!
//! Daylight saving, for cron expressions:
//! - a local time that does not exist (the clocks jump over it) ticks once, at the first valid instant
//!   after the gap (`30 2 * * *` on a spring-forward night in Berlin ticks at 03:00 local time);
//! - a local time that occurs twice (the clocks go back over it) ticks once, at its first occurrence;
//!   its second occurrence is skipped. `*/15 * * * *` on a fall-back night ticks 02:00, 02:15, 02:30 and
//!   02:45 once each (summer time), then 03:00 (winter time): an interval in real time is
//!   [`Periodic::every`](super::Periodic::every)'s job.
//!
//! croner does the cron arithmetic (and, by the Open Cron Pattern Specification, the gap rule); the one
//! rule added here is the skip of a repeated local time's second occurrence, which croner keeps for
//! expressions with wildcards in their time fields.

/// Most steps one search takes (a repeated hour of a per-second expression is 3,600).
#[cfg(feature = "cron")]
const MAX_STEPS: usize = 10_000;

/// A schedule's ticks.
#[derive(Debug, Clone)]
pub(crate) enum Cadence {
    /// Every `secs` seconds, at the multiples of `secs` since the Unix epoch.
    Every { secs: u64 },
    /// A cron expression in a time zone.
    #[cfg(feature = "cron")]
    Cron {
        cron: Box<croner::Cron>,
        zone: chrono_tz::Tz,
    },
}

impl Cadence {
    /// The first tick strictly after `after_ms`, if any (a cron expression may never match again).
    pub(crate) fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Cadence::Every { secs } => {
                let period = i64::try_from(secs.saturating_mul(1000)).ok()?;
                after_ms
                    .div_euclid(period)
                    .checked_add(1)?
                    .checked_mul(period)
            }
            #[cfg(feature = "cron")]
            Cadence::Cron { cron, zone } => cron::next_after(cron, *zone, after_ms),
        }
    }

    /// The tick at or before `at_ms`, if any.
    pub(crate) fn latest_at_or_before(&self, at_ms: i64) -> Option<i64> {
        match self {
            Cadence::Every { secs } => {
                let period = i64::try_from(secs.saturating_mul(1000)).ok()?;
                at_ms.div_euclid(period).checked_mul(period)
            }
            #[cfg(feature = "cron")]
            Cadence::Cron { cron, zone } => cron::at_or_before(cron, *zone, at_ms),
        }
    }

    /// The latest `n` ticks in `[from_ms, to_ms]`, oldest first.
    pub(crate) fn latest_in(&self, from_ms: i64, to_ms: i64, n: usize) -> Vec<i64> {
        let mut out = Vec::new();
        let mut at = to_ms;
        while out.len() < n {
            match self.latest_at_or_before(at) {
                Some(t) if t >= from_ms => {
                    out.push(t);
                    at = t - 1;
                }
                _ => break,
            }
        }
        out.reverse();
        out
    }
}

#[cfg(feature = "cron")]
pub(crate) mod cron {
    //! Cron arithmetic on croner, with the repeated-local-time rule of the module docs.

    use chrono::{DateTime, LocalResult, TimeZone, Utc};
    use chrono_tz::Tz;
    use croner::parser::{CronParser, Seconds, Year};
    use croner::Cron;

    use super::MAX_STEPS;

    /// Parses a cron expression of 5 fields (minute to day of week) or 6 (seconds first), or a nickname
    /// such as `@daily`.
    pub(crate) fn parse(expression: &str) -> std::result::Result<Cron, String> {
        let fields = expression.split_whitespace().count();
        if !expression.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
            return Err(format!(
                "it has {fields} fields; write 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"
            ));
        }
        CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expression)
            .map_err(|e| e.to_string())
    }

    /// Parses an IANA time zone name (`Europe/Berlin`, `UTC`).
    pub(crate) fn zone(name: &str) -> std::result::Result<Tz, String> {
        name.parse::<Tz>().map_err(|_| {
            "it is not an IANA time zone name (such as Europe/Berlin, America/New_York or UTC)"
                .into()
        })
    }

    fn at(zone: Tz, ms: i64) -> Option<DateTime<Tz>> {
        Some(DateTime::<Utc>::from_timestamp_millis(ms)?.with_timezone(&zone))
    }

    /// Whether `t` is the second occurrence of a local time that occurs twice.
    fn second_occurrence(zone: Tz, t: &DateTime<Tz>) -> bool {
        match zone.from_local_datetime(&t.naive_local()) {
            LocalResult::Ambiguous(first, _) => first != *t,
            _ => false,
        }
    }

    // Ticks are whole seconds: the first after `after_ms` is the first after its second, and the last
    // at or before `at_ms` the last at or before its second.
    pub(super) fn next_after(cron: &Cron, zone: Tz, after_ms: i64) -> Option<i64> {
        let mut cursor = at(zone, after_ms.div_euclid(1000) * 1000)?;
        for _ in 0..MAX_STEPS {
            let t = cron.find_next_occurrence(&cursor, false).ok()?;
            if !second_occurrence(zone, &t) {
                return Some(t.timestamp_millis());
            }
            cursor = t;
        }
        None
    }

    pub(super) fn at_or_before(cron: &Cron, zone: Tz, at_ms: i64) -> Option<i64> {
        let mut cursor = at(zone, at_ms.div_euclid(1000) * 1000)?;
        let mut inclusive = true;
        for _ in 0..MAX_STEPS {
            let t = cron.find_previous_occurrence(&cursor, inclusive).ok()?;
            if !second_occurrence(zone, &t) {
                return Some(t.timestamp_millis());
            }
            cursor = t;
            inclusive = false;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_align_to_the_epoch() {
        let c = Cadence::Every { secs: 300 };
        assert_eq!(c.next_after(0), Some(300_000));
        assert_eq!(c.next_after(299_999), Some(300_000));
        assert_eq!(c.next_after(300_000), Some(600_000));
        assert_eq!(c.latest_at_or_before(300_000), Some(300_000));
        assert_eq!(c.latest_at_or_before(599_999), Some(300_000));
        assert_eq!(c.latest_in(300_000, 1_250_000, 2), [900_000, 1_200_000]);
        assert_eq!(c.latest_in(900_000, 1_250_000, 5), [900_000, 1_200_000]);
        assert!(c.latest_in(1_250_000, 1_250_000, 5).is_empty());
    }
}

#[cfg(all(test, feature = "cron"))]
mod dst_tests {
    //! The daylight-saving rules of the module docs, in Europe/Berlin and America/New_York, 2026 and 2027.
    //! Berlin: summer time from the last Sunday of March 02:00 (to 03:00) to the last Sunday of October
    //! 03:00 (back to 02:00). New York: from the second Sunday of March 02:00 to the first Sunday of
    //! November 02:00 (back to 01:00).

    use chrono::{DateTime, Utc};

    use super::*;

    fn cadence(expression: &str, zone: &str) -> Cadence {
        Cadence::Cron {
            cron: Box::new(cron::parse(expression).unwrap()),
            zone: cron::zone(zone).unwrap(),
        }
    }

    fn ms(utc: &str) -> i64 {
        DateTime::parse_from_rfc3339(utc)
            .unwrap()
            .with_timezone(&Utc)
            .timestamp_millis()
    }

    fn utc(ms: i64) -> String {
        DateTime::<Utc>::from_timestamp_millis(ms)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    /// The ticks after `from` (UTC), `n` of them, as UTC strings.
    fn ticks(c: &Cadence, from: &str, n: usize) -> Vec<String> {
        let mut at = ms(from);
        (0..n)
            .map(|_| {
                at = c.next_after(at).unwrap();
                utc(at)
            })
            .collect()
    }

    /// The same ticks found backwards from the last one: the catch-up path agrees with the forward one.
    fn agrees_backwards(c: &Cadence, from: &str, n: usize) {
        let forward = ticks(c, from, n);
        let last = ms(forward.last().unwrap());
        let back: Vec<String> = c
            .latest_in(ms(from) + 1, last, n)
            .into_iter()
            .map(utc)
            .collect();
        assert_eq!(back, forward);
    }

    #[test]
    fn spring_forward_runs_once_at_the_next_valid_instant() {
        // (zone, the day before the change, 00:00 UTC, the daily tick in the gap: 02:30 local, in UTC)
        let cases = [
            (
                "Europe/Berlin",
                "2026-03-28T00:00:00Z",
                "2026-03-29T01:00:00Z",
            ),
            (
                "Europe/Berlin",
                "2027-03-27T00:00:00Z",
                "2027-03-28T01:00:00Z",
            ),
            (
                "America/New_York",
                "2026-03-07T00:00:00Z",
                "2026-03-08T07:00:00Z",
            ),
            (
                "America/New_York",
                "2027-03-13T00:00:00Z",
                "2027-03-14T07:00:00Z",
            ),
        ];
        for (zone, from, in_gap) in cases {
            let daily = cadence("30 2 * * *", zone);
            let got = ticks(&daily, from, 3);
            // 02:30 the day before (winter time), 03:00 on the day (the first instant after the gap),
            // 02:30 the day after (summer time): once a day, never skipped, never twice.
            assert_eq!(got[1], utc(ms(in_gap)), "{zone} {from}: {got:?}");
            let day = 24 * 3600 * 1000;
            assert_eq!(ms(&got[1]) - ms(&got[0]), day - 30 * 60 * 1000, "{zone}");
            assert_eq!(ms(&got[2]) - ms(&got[1]), day - 30 * 60 * 1000, "{zone}");
            agrees_backwards(&daily, from, 3);
            // Every 15 minutes: the gap's four ticks collapse into the first valid instant.
            let quarter = cadence("*/15 * * * *", zone);
            let got = ticks(&quarter, &utc(ms(in_gap) - 3_600_000), 4);
            let expect: Vec<String> = [-45, -30, -15, 0]
                .iter()
                .map(|m| utc(ms(in_gap) + m * 60_000))
                .collect();
            assert_eq!(got, expect, "{zone}");
            agrees_backwards(&quarter, &utc(ms(in_gap) - 3_600_000), 4);
        }
    }

    #[test]
    fn fall_back_runs_once() {
        // (zone, a time before the change in UTC, the first and the second occurrence of the repeated
        // local time 02:30 (Berlin) or 01:30 (New York) in UTC)
        let cases = [
            (
                "Europe/Berlin",
                "2026-10-24T12:00:00Z",
                "2 30",
                "2026-10-25T00:30:00Z",
                "2026-10-25T01:30:00Z",
            ),
            (
                "Europe/Berlin",
                "2027-10-30T12:00:00Z",
                "2 30",
                "2027-10-31T00:30:00Z",
                "2027-10-31T01:30:00Z",
            ),
            (
                "America/New_York",
                "2026-10-31T12:00:00Z",
                "1 30",
                "2026-11-01T05:30:00Z",
                "2026-11-01T06:30:00Z",
            ),
            (
                "America/New_York",
                "2027-11-06T12:00:00Z",
                "1 30",
                "2027-11-07T05:30:00Z",
                "2027-11-07T06:30:00Z",
            ),
        ];
        for (zone, from, hour_minute, first, second) in cases {
            let (hour, minute) = hour_minute.split_once(' ').unwrap();
            let daily = cadence(&format!("{minute} {hour} * * *"), zone);
            let got = ticks(&daily, from, 3);
            // The first occurrence, then the next day's (25 hours later): the second never.
            assert_eq!(got[0], first, "{zone}: {got:?}");
            assert_eq!(ms(&got[1]) - ms(first), 25 * 3_600_000, "{zone}: {got:?}");
            assert!(!got.contains(&second.to_owned()), "{zone}: {got:?}");
            agrees_backwards(&daily, from, 3);
            // Every 15 minutes through the repeated hour: each local time once, at its first occurrence.
            let quarter = cadence("*/15 * * * *", zone);
            let start = utc(ms(first) - 30 * 60_000 - 1000);
            let got = ticks(&quarter, &start, 6);
            let first_pass: Vec<String> = (0..4)
                .map(|i| utc(ms(first) - 30 * 60_000 + i * 15 * 60_000))
                .collect();
            assert_eq!(got[..4], first_pass[..], "{zone}");
            // After the first pass, the next tick is the hour after the repeated one (its second pass skipped).
            assert_eq!(ms(&got[4]), ms(second) + 30 * 60_000, "{zone}: {got:?}");
            agrees_backwards(&quarter, &start, 6);
        }
    }

    #[test]
    fn an_expression_that_never_matches_has_no_next_tick() {
        let never = cadence("0 0 30 2 *", "UTC");
        assert_eq!(never.next_after(ms("2026-01-01T00:00:00Z")), None);
        assert_eq!(never.latest_at_or_before(ms("2026-01-01T00:00:00Z")), None);
    }

    #[test]
    fn six_fields_tick_every_second_and_bad_input_is_refused() {
        let every_second = cadence("* * * * * *", "UTC");
        assert_eq!(
            ticks(&every_second, "2026-01-01T00:00:00Z", 2),
            ["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]
        );
        assert!(cron::parse("0 9 * *").is_err());
        assert!(cron::parse("0 0 9 * * * 2026").is_err());
        assert!(cron::parse("0 25 * * *").is_err());
        assert!(cron::parse("@daily").is_ok());
        assert!(cron::zone("Europe/Berlin").is_ok());
        assert!(cron::zone("Mars/Olympus").is_err());
    }
}
