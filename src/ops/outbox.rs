//! Transactional outboxes as operators see them: what a relay last reported (rows waiting, the oldest
//! one's age, rows that cannot be delivered), and the checks `postpone doctor` makes of them.
//! The relays of `postpone-postgres` report every poll interval. The last report is kept for a week
//! after it was made, so an outbox whose relays all stopped stays listed: marked stale once no relay has
//! reported for longer than the relay said it would (`stale_after`), which `postpone doctor` warns
//! about.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Check, Ops};
use crate::error::Result;
use crate::time::{millis, ms_to_time};

/// What a relay reports of its outbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct OutboxReport {
    /// Committed rows not yet delivered.
    pub rows: u64,
    /// How long the oldest of them has waited.
    #[serde(rename = "oldest_ms", serialize_with = "as_ms")]
    pub oldest: Duration,
    /// Rows that could not be delivered (kept, tried again later).
    pub failing: u64,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(millis(*d))
}

impl OutboxReport {
    /// A report.
    pub fn new(rows: u64, oldest: Duration, failing: u64) -> Self {
        OutboxReport {
            rows,
            oldest,
            failing,
        }
    }

    /// `"<rows> <oldest ms> <failing> <stale after ms>"`.
    fn encode(&self, stale_after: Duration) -> String {
        format!(
            "{} {} {} {}",
            self.rows,
            millis(self.oldest),
            self.failing,
            millis(stale_after)
        )
    }

    /// A report and when it goes stale; a report of three fields (written before relays said when)
    /// goes stale after [`OUTBOX_STALE_AFTER`].
    fn decode(s: &str) -> Option<(Self, Duration)> {
        let mut n = s.split(' ').map(str::parse::<u64>);
        let (rows, oldest, failing) = (n.next()?.ok()?, n.next()?.ok()?, n.next()?.ok()?);
        let stale_after = match n.next() {
            None => OUTBOX_STALE_AFTER,
            Some(ms) => Duration::from_millis(ms.ok()?),
        };
        let report = OutboxReport::new(rows, Duration::from_millis(oldest), failing);
        Some((report, stale_after))
    }

    /// "no rows waiting", or "3 rows waiting, oldest 2m 5s, 0 failing".
    fn summary(&self) -> String {
        match self.rows {
            0 => "no rows waiting".to_owned(),
            n => format!(
                "{n} rows waiting, oldest {}, {} failing",
                super::human_duration(self.oldest),
                self.failing
            ),
        }
    }
}

/// One outbox and its latest report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct OutboxInfo {
    /// Its name (the outbox table's).
    pub name: String,
    /// When a relay last reported, by the store's clock.
    pub reported_at: DateTime<Utc>,
    /// How long ago that was, by the store's clock.
    #[serde(rename = "age_ms", serialize_with = "as_ms")]
    pub age: Duration,
    /// How long after its report the relay said it would report again, at the latest (see
    /// [`Ops::report_outbox`]).
    #[serde(rename = "stale_after_ms", serialize_with = "as_ms")]
    pub stale_after: Duration,
    /// No relay has reported for longer than `stale_after`: none runs, or none reaches the store. The
    /// report is what the outbox held then; rows committed since are not counted.
    pub stale: bool,
    /// What it reported.
    #[serde(flatten)]
    pub report: OutboxReport,
}

/// A row waiting longer than this is worth a warning: is a relay running, is Redis reachable?
const OLD_ROW: Duration = Duration::from_secs(60);

/// When a relay's report goes stale unless it says otherwise (a relay of `postpone-postgres` says the
/// larger of this and three poll intervals, unless set with `Relay::stale_after`).
pub const OUTBOX_STALE_AFTER: Duration = Duration::from_secs(60);

/// How long the store keeps an outbox's last report after it was made: an outbox whose relays all
/// stopped stays listed (stale) this long, then drops out.
pub const OUTBOX_REPORT_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

impl Ops {
    /// Records what a relay found in outbox `name`, replacing the last report. The relay promises to
    /// report again within `stale_after`: past that without a newer report, [`Ops::outboxes`] marks
    /// the outbox stale and `postpone doctor` warns. The report is kept [`OUTBOX_REPORT_KEPT`] (a week) in
    /// the store, then dropped.
    pub async fn report_outbox(
        &self,
        name: &str,
        report: &OutboxReport,
        stale_after: Duration,
    ) -> Result<()> {
        self.client
            .backend()
            .outbox_report(
                name,
                &report.encode(stale_after),
                millis(OUTBOX_REPORT_KEPT),
            )
            .await
    }

    /// The outboxes whose relays reported in the last week ([`OUTBOX_REPORT_KEPT`]), by name: each one's
    /// last report, its age by the store's clock, and whether it is stale (no relay has reported
    /// since for longer than it said it would).
    pub async fn outboxes(&self) -> Result<Vec<OutboxInfo>> {
        let reports = self.client.backend().outbox_reports().await?;
        if reports.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.client.backend().now_ms().await?;
        Ok(reports
            .into_iter()
            .filter_map(|(name, at, report)| {
                let (report, stale_after) = OutboxReport::decode(&report)?;
                let age = Duration::from_millis(u64::try_from(now - at).unwrap_or(0));
                Some(OutboxInfo {
                    name,
                    reported_at: ms_to_time(at),
                    age,
                    stale_after,
                    stale: age > stale_after,
                    report,
                })
            })
            .collect())
    }

    /// One doctor check per outbox: rows that cannot be delivered are bad; a stale report (no relay
    /// has reported for longer than it said it would) or a row waiting over a minute is a warning.
    /// Reports that cannot be read are one warning.
    pub(super) async fn outbox_checks(&self) -> Vec<Check> {
        match self.outboxes().await {
            Ok(outboxes) => outboxes.into_iter().map(check).collect(),
            Err(e) => vec![Check::warn(
                "outboxes",
                format!("their relays' reports cannot be read: {}", e.report()),
                "see the checks above for the store's health",
            )],
        }
    }
}

fn check(outbox: OutboxInfo) -> Check {
    let r = outbox.report;
    let name = format!("outbox {}", outbox.name);
    if outbox.stale {
        let found = format!(
            "no relay has reported for {} (last report: {})",
            super::human_duration(outbox.age),
            r.summary()
        );
        let advice =
            "no relay runs, or none reaches Redis: rows committed since are not delivered. \
                      Start one (Relay::run) beside the application, or see its logs; this \
                      report is dropped a week after it was made";
        return if r.failing > 0 {
            Check::bad(name, found, advice)
        } else {
            Check::warn(name, found, advice)
        };
    }
    let found = r.summary();
    if r.failing > 0 {
        Check::bad(
            name,
            found,
            "rows that cannot be delivered are kept and retried: see last_error in the table \
             (a payload over the relay's limit, a row edited by hand)",
        )
    } else if r.oldest > OLD_ROW {
        Check::warn(
            name,
            found,
            "rows wait long: check that a relay runs and that it reaches Redis",
        )
    } else {
        Check::ok(name, found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbox_reports_round_trip_and_bad_ones_are_none() {
        let r = OutboxReport::new(3, Duration::from_millis(1500), 1);
        let after = Duration::from_secs(5);
        assert_eq!(OutboxReport::decode(&r.encode(after)), Some((r, after)));
        assert_eq!(
            OutboxReport::decode("3 1500 1"),
            Some((r, OUTBOX_STALE_AFTER))
        );
        assert_eq!(OutboxReport::decode("3 x 1"), None);
        assert_eq!(OutboxReport::decode("3 1500 1 x"), None);
        assert_eq!(OutboxReport::decode("3"), None);
    }

    fn info(report: OutboxReport, age: Duration, stale: bool) -> OutboxInfo {
        OutboxInfo {
            name: "app.outbox".to_owned(),
            reported_at: DateTime::<Utc>::default(),
            age,
            stale_after: OUTBOX_STALE_AFTER,
            stale,
            report,
        }
    }

    #[test]
    fn outbox_doctor_warns_of_a_stale_report_and_says_what_it_held() {
        let waiting = OutboxReport::new(3, Duration::from_secs(2), 0);
        let stale = check(info(waiting, Duration::from_secs(125), true));
        assert_eq!(stale.name, "outbox app.outbox");
        assert_eq!(stale.level, crate::check::Level::Warn);
        assert_eq!(
            stale.found,
            "no relay has reported for 2m 5s (last report: 3 rows waiting, oldest 2s, 0 failing)"
        );
        let empty = check(info(OutboxReport::default(), Duration::from_secs(90), true));
        assert_eq!(
            empty.found,
            "no relay has reported for 1m 30s (last report: no rows waiting)"
        );
        let failing = OutboxReport::new(1, Duration::from_secs(2), 1);
        let bad = check(info(failing, Duration::from_secs(90), true));
        assert_eq!(bad.level, crate::check::Level::Bad);
        let fresh = check(info(waiting, Duration::from_secs(1), false));
        assert_eq!(fresh.level, crate::check::Level::Ok);
        assert_eq!(fresh.found, "3 rows waiting, oldest 2s, 0 failing");
    }
}
