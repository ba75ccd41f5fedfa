//! One outbox row as the relay reads it, and what it asks of the queue.

use std::time::Duration;

use postpone::outbox::Delivery;
use postpone::store::{Due, NewJob};
use postpone::{Client, When};
use sqlx::postgres::PgRow;
use sqlx::Row as _;

/// What a row asks for (the `op` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i16)]
pub(crate) enum Op {
    Enqueue = 1,
    Cancel = 2,
    Reschedule = 3,
}

/// The columns the relay reads, in its SELECT's order.
pub(crate) const COLUMNS: &str = "seq, token, topic, partitions, job_id, op, record, due_in_ms, \
    due_at_ms, replace, priority, fair_key, failures, \
    (EXTRACT(EPOCH FROM (clock_timestamp() - created_at)) * 1000)::BIGINT AS age_ms";

/// A row read by the relay.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) seq: i64,
    pub(crate) token: String,
    pub(crate) topic: String,
    pub(crate) partitions: i32,
    pub(crate) job_id: String,
    pub(crate) op: i16,
    pub(crate) record: Option<Vec<u8>>,
    pub(crate) due_in_ms: Option<i64>,
    pub(crate) due_at_ms: Option<i64>,
    pub(crate) replace: bool,
    pub(crate) priority: i16,
    /// The job's key for fairness (an enqueue's), if any.
    pub(crate) fair_key: Option<String>,
    pub(crate) failures: i32,
    /// How long ago the row was written, by PostgreSQL's clock.
    pub(crate) age_ms: i64,
}

/// What the relay does with a row, once read and checked.
#[derive(Debug)]
pub(crate) enum Action {
    Enqueue(Delivery),
    Cancel,
    Reschedule(When),
}

impl Row {
    pub(crate) fn read(row: &PgRow) -> Result<Self, sqlx::Error> {
        Ok(Row {
            seq: row.try_get("seq")?,
            token: row.try_get("token")?,
            topic: row.try_get("topic")?,
            partitions: row.try_get("partitions")?,
            job_id: row.try_get("job_id")?,
            op: row.try_get("op")?,
            record: row.try_get("record")?,
            due_in_ms: row.try_get("due_in_ms")?,
            due_at_ms: row.try_get("due_at_ms")?,
            replace: row.try_get("replace")?,
            priority: row.try_get("priority")?,
            fair_key: row.try_get("fair_key")?,
            failures: row.try_get("failures")?,
            age_ms: row.try_get::<Option<i64>, _>("age_ms")?.unwrap_or(0),
        })
    }

    /// The row's due time: a delay less the time the row has waited (by PostgreSQL's clock), or its
    /// absolute time.
    fn due(&self) -> Due {
        match (self.due_in_ms, self.due_at_ms) {
            (_, Some(at)) => Due::At(at),
            (Some(ms), None) => Due::In(u64::try_from(ms.saturating_sub(self.age_ms)).unwrap_or(0)),
            (None, None) => Due::In(0),
        }
    }

    /// Partitions as postpone takes them (an out-of-range value fails the check below).
    pub(crate) fn partitions(&self) -> u16 {
        u16::try_from(self.partitions).unwrap_or(0)
    }

    /// Checks the row against `client` (which may have other limits than the client that wrote it)
    /// and says what to do with it; an error means the row cannot be delivered as it is.
    pub(crate) fn action(&self, client: &Client) -> Result<Action, String> {
        let op = match self.op {
            1 => Op::Enqueue,
            2 => Op::Cancel,
            3 => Op::Reschedule,
            other => {
                return Err(format!(
                    "unknown op {other} (1 enqueue, 2 cancel, 3 reschedule)"
                ))
            }
        };
        let priority = u8::try_from(self.priority)
            .ok()
            .filter(|p| *p <= postpone::store::MAX_PRIORITY)
            .ok_or_else(|| format!("priority {} is not a priority (0 to 31)", self.priority))?;
        let record = match (op, &self.record) {
            (Op::Enqueue, None) => return Err("an enqueue row without a record".to_owned()),
            (Op::Enqueue, Some(record)) => record.clone(),
            _ => Vec::new(),
        };
        let job = NewJob::new(self.job_id.clone(), record, self.due(), self.replace)
            .priority(priority)
            .with_key(self.fair_key.clone().filter(|_| op == Op::Enqueue));
        client
            .check_delivery(&self.topic, self.partitions(), &job)
            .map_err(|e| e.report().to_string())?;
        Ok(match op {
            Op::Enqueue => Action::Enqueue(Delivery::new(self.token.clone(), job)),
            Op::Cancel => Action::Cancel,
            Op::Reschedule => Action::Reschedule(match job.due {
                Due::At(ms) => {
                    chrono::DateTime::from_timestamp_millis(ms).map_or(When::Now, When::At)
                }
                Due::In(ms) => When::After(Duration::from_millis(ms)),
            }),
        })
    }
}
