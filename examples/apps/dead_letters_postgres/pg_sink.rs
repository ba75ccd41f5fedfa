//! A `DeadLetterSink` that keeps dead jobs in a PostgreSQL table, and re-enqueues them from there.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use postpone::{async_trait, BoxError, Client, DeadLetter, DeadLetterSink, Enqueued, Job};
use serde_json::{json, Value};

/// Writes each dead job to a table: its topic, id, payload as JSON, attempts, error history and times.
///
/// A worker hands each dead job to its sink at least once, so the same one may come twice (a worker died
/// after the INSERT, before it recorded the delivery): the table is unique on `(topic, job_id, died_at)`
/// and a second INSERT changes nothing. When the INSERT fails (PostgreSQL is down), the worker calls again
/// later, with backoff; the dead job waits in Redis meanwhile.
#[derive(Debug, Clone)]
pub(crate) struct PgDeadLetterSink {
    db: Arc<tokio_postgres::Client>,
    /// The table's name, quoted for SQL.
    table: String,
}

/// A dead job as stored in the table.
#[derive(Debug, Clone)]
pub(crate) struct StoredDeadJob {
    /// The row's id: what an operator names to re-enqueue it.
    pub(crate) row: i64,
    pub(crate) topic: String,
    pub(crate) job_id: String,
    pub(crate) payload: Value,
    pub(crate) attempts: i32,
    /// `[{"attempt": 1, "at": "<RFC 3339>", "message": "..."}, ...]`, oldest first.
    pub(crate) errors: Value,
    pub(crate) reason: String,
    pub(crate) enqueued_at: DateTime<Utc>,
    pub(crate) died_at: DateTime<Utc>,
    pub(crate) requeued_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str =
    "id, topic, job_id, payload, attempts, errors, reason, enqueued_at, died_at, requeued_at";

impl PgDeadLetterSink {
    /// A sink writing to `table` (created when missing; `name` or `schema.name`).
    pub(crate) async fn create(
        db: Arc<tokio_postgres::Client>,
        table: &str,
    ) -> Result<Self, tokio_postgres::Error> {
        let table = table
            .split('.')
            .map(|part| format!("\"{}\"", part.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(".");
        db.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (
                 id          bigserial PRIMARY KEY,
                 topic       text NOT NULL,
                 job_id      text NOT NULL,
                 payload     jsonb NOT NULL,
                 attempts    integer NOT NULL,
                 errors      jsonb NOT NULL,
                 reason      text NOT NULL,
                 enqueued_at timestamptz NOT NULL,
                 died_at     timestamptz NOT NULL,
                 recorded_at timestamptz NOT NULL DEFAULT now(),
                 requeued_at timestamptz,
                 UNIQUE (topic, job_id, died_at)
             )"
        ))
        .await?;
        Ok(PgDeadLetterSink { db, table })
    }

    /// The dead jobs of `topic` that were not re-enqueued, oldest first.
    pub(crate) async fn waiting(&self, topic: &str) -> Result<Vec<StoredDeadJob>, BoxError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM {} WHERE topic = $1 AND requeued_at IS NULL ORDER BY id",
            self.table
        );
        let rows = self.db.query(&sql, &[&topic]).await?;
        rows.iter().map(stored).collect()
    }

    /// The dead job in row `row`, if there is one.
    pub(crate) async fn get(&self, row: i64) -> Result<Option<StoredDeadJob>, BoxError> {
        let sql = format!("SELECT {COLUMNS} FROM {} WHERE id = $1", self.table);
        match self.db.query_opt(&sql, &[&row]).await? {
            Some(r) => Ok(Some(stored(&r)?)),
            None => Ok(None),
        }
    }

    /// Puts the dead job of row `row` back in the queue as a `J`, due now, under its old id, with a
    /// fresh set of attempts; then marks the row re-enqueued.
    ///
    /// It works from the table alone, so it works after postpone has trimmed its own copy. Enqueueing is
    /// idempotent by id: if this is repeated after a crash between the enqueue and the UPDATE, the job is
    /// not doubled while it is scheduled or running.
    pub(crate) async fn requeue<J: Job>(
        &self,
        jobs: &Client,
        row: i64,
    ) -> Result<Enqueued, BoxError> {
        let Some(dead) = self.get(row).await? else {
            return Err(format!("no dead job in row {row}").into());
        };
        if let Some(at) = dead.requeued_at {
            return Err(format!("the dead job in row {row} was re-enqueued at {at}").into());
        }
        if dead.topic != J::TOPIC {
            return Err(format!(
                "row {row} holds a {:?} job, not a {:?} one",
                dead.topic,
                J::TOPIC
            )
            .into());
        }
        // A payload that no longer fits the type stays in the table, with the reason in this error.
        let job: J = serde_json::from_value(dead.payload)
            .map_err(|e| format!("row {row}'s payload is not a {}: {e}", J::TOPIC))?;
        let enqueued = jobs.enqueue(job).id(&dead.job_id).await?;
        let sql = format!(
            "UPDATE {} SET requeued_at = now() WHERE id = $1",
            self.table
        );
        self.db.execute(&sql, &[&row]).await?;
        Ok(enqueued)
    }
}

#[async_trait]
impl DeadLetterSink for PgDeadLetterSink {
    async fn deliver(&self, dead: &DeadLetter) -> Result<(), BoxError> {
        // The payload is the JSON that was enqueued; a damaged one is kept as a JSON string.
        let payload = serde_json::from_str(&dead.payload)
            .unwrap_or_else(|_| Value::String(dead.payload.clone()));
        let errors: Value = dead
            .errors
            .iter()
            .map(|e| {
                let at = DateTime::from_timestamp_millis(e.at_ms).map(|t| t.to_rfc3339());
                json!({ "attempt": e.attempt, "at": at, "message": e.message })
            })
            .collect();
        let attempts = i32::try_from(dead.attempts).unwrap_or(i32::MAX);
        let sql = format!(
            "INSERT INTO {} (topic, job_id, payload, attempts, errors, reason, enqueued_at, died_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (topic, job_id, died_at) DO NOTHING",
            self.table
        );
        self.db
            .execute(
                &sql,
                &[
                    &dead.topic,
                    &dead.id,
                    &payload,
                    &attempts,
                    &errors,
                    &dead.reason,
                    &dead.enqueued_at,
                    &dead.died_at,
                ],
            )
            .await?;
        Ok(())
    }
}

fn stored(row: &tokio_postgres::Row) -> Result<StoredDeadJob, BoxError> {
    Ok(StoredDeadJob {
        row: row.try_get("id")?,
        topic: row.try_get("topic")?,
        job_id: row.try_get("job_id")?,
        payload: row.try_get("payload")?,
        attempts: row.try_get("attempts")?,
        errors: row.try_get("errors")?,
        reason: row.try_get("reason")?,
        enqueued_at: row.try_get("enqueued_at")?,
        died_at: row.try_get("died_at")?,
        requeued_at: row.try_get("requeued_at")?,
    })
}
