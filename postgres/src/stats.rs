//! What operators see of the outbox: its depth, its oldest row, rows failing; and the relay's metrics.

use std::time::Duration;

use sqlx::{AssertSqlSafe, PgConnection, Row as _};

use crate::error::Result;
use crate::outbox::Outbox;

/// The outbox's state, read from its table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxStats {
    /// Committed rows not yet delivered.
    pub rows: u64,
    /// How long the oldest of them has waited (zero when there is none).
    pub oldest: Duration,
    /// Rows that could not be delivered and wait to be tried again (see `last_error` in the table).
    pub failing: u64,
}

impl Outbox {
    /// Reads the outbox's depth, its oldest row's age and its failing rows (one query; it counts the
    /// table, which holds only rows not yet delivered).
    pub async fn stats(&self, conn: &mut PgConnection) -> Result<OutboxStats> {
        let table = &self.statements().table.name;
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT count(*)::BIGINT AS n, \
             COALESCE((EXTRACT(EPOCH FROM (clock_timestamp() - min(created_at))) * 1000)::BIGINT, 0) \
             AS oldest_ms, count(*) FILTER (WHERE failures > 0)::BIGINT AS failing FROM {table}"
        )))
        .fetch_one(conn)
        .await?;
        let n = |col: &str| -> Result<u64> {
            Ok(u64::try_from(row.try_get::<i64, _>(col)?).unwrap_or(0))
        };
        let stats = OutboxStats {
            rows: n("n")?,
            oldest: Duration::from_millis(n("oldest_ms")?),
            failing: n("failing")?,
        };
        gauges(table, &stats);
        Ok(stats)
    }
}

/// Counts a round's rows: `postpone_outbox_delivered_total`, `postpone_outbox_undeliverable_total`.
pub(crate) fn delivered(delivered: usize, undeliverable: usize) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("postpone_outbox_delivered_total").increment(delivered as u64);
        metrics::counter!("postpone_outbox_undeliverable_total").increment(undeliverable as u64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (delivered, undeliverable);
}

/// Sets `postpone_outbox_rows`, `postpone_outbox_oldest_seconds` and `postpone_outbox_failing_rows`,
/// labelled by table.
fn gauges(table: &str, stats: &OutboxStats) {
    #[cfg(feature = "metrics")]
    {
        let table = table.to_owned();
        metrics::gauge!("postpone_outbox_rows", "table" => table.clone()).set(stats.rows as f64);
        metrics::gauge!("postpone_outbox_oldest_seconds", "table" => table.clone())
            .set(stats.oldest.as_secs_f64());
        metrics::gauge!("postpone_outbox_failing_rows", "table" => table).set(stats.failing as f64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (table, stats);
}
