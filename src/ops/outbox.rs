//! Transactional outboxes as operators see them: what each relay last reported (rows waiting, the
//! oldest one's age, rows that cannot be delivered), and the checks `postpone doctor` makes of them.
//! The relays of `postpone-postgres` report every poll interval; a report expires after its
//! time-to-live, so an outbox whose relays all stopped drops out (and a stale one is flagged).

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

    fn encode(&self) -> String {
        format!("{} {} {}", self.rows, millis(self.oldest), self.failing)
    }

    fn decode(s: &str) -> Option<Self> {
        let mut n = s.split(' ').map(str::parse::<u64>);
        let (rows, oldest, failing) = (n.next()?.ok()?, n.next()?.ok()?, n.next()?.ok()?);
        Some(OutboxReport::new(
            rows,
            Duration::from_millis(oldest),
            failing,
        ))
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
    /// What it reported.
    #[serde(flatten)]
    pub report: OutboxReport,
}

/// A row waiting longer than this is worth a warning: is a relay running, is Redis reachable?
const OLD_ROW: Duration = Duration::from_secs(60);

impl Ops {
    /// Records what a relay found in outbox `name`, kept for `ttl` (a relay reports more often than
    /// that while it runs).
    pub async fn report_outbox(
        &self,
        name: &str,
        report: &OutboxReport,
        ttl: Duration,
    ) -> Result<()> {
        self.client
            .backend()
            .outbox_report(name, &report.encode(), millis(ttl))
            .await
    }

    /// The outboxes whose relays reported recently, by name.
    pub async fn outboxes(&self) -> Result<Vec<OutboxInfo>> {
        let reports = self.client.backend().outbox_reports().await?;
        Ok(reports
            .into_iter()
            .filter_map(|(name, at, report)| {
                Some(OutboxInfo {
                    name,
                    reported_at: ms_to_time(at),
                    report: OutboxReport::decode(&report)?,
                })
            })
            .collect())
    }

    /// One doctor check per outbox: rows that cannot be delivered are bad; a row waiting over a minute
    /// is a warning. Reports that cannot be read are one warning.
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
    let found = match r.rows {
        0 => "no rows waiting".to_owned(),
        n => format!(
            "{n} rows waiting, oldest {}, {} failing",
            super::human_duration(r.oldest),
            r.failing
        ),
    };
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
    fn reports_round_trip_and_bad_ones_are_none() {
        let r = OutboxReport::new(3, Duration::from_millis(1500), 1);
        assert_eq!(OutboxReport::decode(&r.encode()), Some(r));
        assert_eq!(OutboxReport::decode("3 x 1"), None);
        assert_eq!(OutboxReport::decode("3"), None);
    }
}
