//! The outbox table: its name, its SQL, and the migration.

use sqlx::PgConnection;

use crate::error::{Error, Result};

/// The table's name unless [`Outbox::table`](crate::Outbox::table) says otherwise.
pub const DEFAULT_TABLE: &str = "postpone_outbox";

/// A validated table name (`name` or `schema.name`, each `[a-z_][a-z0-9_]{0,62}`), and the channel its
/// enqueues notify (the name with `.` as `_`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Table {
    pub(crate) name: String,
    pub(crate) channel: String,
}

impl Table {
    pub(crate) fn new(name: &str) -> Result<Self> {
        let part_ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 63
                && p.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        let parts: Vec<&str> = name.split('.').collect();
        // The whole name is the notification channel's (with `.` as `_`), and PostgreSQL takes at most
        // 63 bytes for that.
        if parts.len() > 2 || !parts.iter().all(|p| part_ok(p)) || name.len() > 63 {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "outbox table {name:?}: use `name` or `schema.name`, at most 63 characters of \
                     a-z 0-9 _ (each part not starting with a digit)"
                ),
            });
        }
        Ok(Table {
            name: name.to_owned(),
            channel: name.replace('.', "_"),
        })
    }

    /// The statements that create the table and its index (idempotent).
    pub(crate) fn migration(&self) -> String {
        migration_sql(&self.name)
    }
}

/// The SQL that creates the outbox table `table` and its index, idempotently (`IF NOT EXISTS`): for an
/// application that runs its own migrations (sqlx's, refinery, a SQL file), copy its output into one.
/// [`migrate`] runs the same statements. Needs PostgreSQL 13 or later (`gen_random_uuid()`).
///
/// One row is one enqueue, cancel or reschedule, written inside the application's transaction:
/// - `seq`: the order of rows; rows of one job id are delivered in this order, each after the one
///   before it has been delivered;
/// - `token`: the row's delivery token (random): Redis records it with the job, so a row delivered
///   twice (a relay that died after Redis took the job and before the row was deleted) enqueues once;
/// - `topic`, `partitions`, `job_id`: where the job goes; `op`: 1 enqueue, 2 cancel, 3 reschedule;
/// - `record`: the job as postpone encodes it (payload, retry schedule, metadata);
/// - `due_in_ms` (a delay, counted from `created_at` by PostgreSQL's clock, the rest by Redis's) or
///   `due_at_ms` (an absolute time, ms since the epoch); `replace`, `priority`, `fair_key` (its key for
///   fairness, if any; added by an `ALTER TABLE` to a table made before it): the enqueue's options;
/// - `failures`, `last_error`, `retry_at`: a row the relay could not deliver (reported, kept, tried
///   again later; the rows of its job id after it wait behind it).
pub fn migration_sql(table: &str) -> String {
    let index = table.replace('.', "_");
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token      TEXT NOT NULL DEFAULT gen_random_uuid()::text,
    topic      TEXT NOT NULL,
    partitions INTEGER NOT NULL,
    job_id     TEXT NOT NULL,
    op         SMALLINT NOT NULL,
    record     BYTEA,
    due_in_ms  BIGINT,
    due_at_ms  BIGINT,
    replace    BOOLEAN NOT NULL DEFAULT FALSE,
    priority   SMALLINT NOT NULL DEFAULT 0,
    fair_key   TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    failures   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    retry_at   TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS {index}_by_job ON {table} (topic, job_id, seq);
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS fair_key TEXT;
"
    )
}

/// Creates the outbox table [`DEFAULT_TABLE`] (or `table`) and its index when they do not exist; safe to
/// run at every start, from several processes at once (it takes a transaction-level advisory lock).
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> postpone_postgres::Result<()> {
/// let mut conn = pool.acquire().await?;
/// postpone_postgres::migrate(&mut conn, postpone_postgres::DEFAULT_TABLE).await?;
/// # Ok(()) }
/// ```
pub async fn migrate(conn: &mut PgConnection, table: &str) -> Result<()> {
    let table = Table::new(table)?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    // CREATE ... IF NOT EXISTS races with itself in two sessions: serialize on the table's name.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .bind(&table.name)
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(table.migration()))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_validated() {
        for good in ["postpone_outbox", "app.outbox", "_x1"] {
            assert!(Table::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Outbox",
            "1x",
            "a.b.c",
            "a;drop",
            "a b",
            "a.",
            &"x".repeat(64),
        ] {
            assert!(Table::new(bad).is_err(), "{bad}");
        }
        assert_eq!(Table::new("app.outbox").unwrap().channel, "app_outbox");
    }
}
