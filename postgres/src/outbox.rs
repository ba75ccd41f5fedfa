//! Writing to the outbox inside the application's transaction: enqueue, cancel, reschedule.

use std::sync::Arc;
use std::time::Duration;

use postpone::store::{Due, NewJob};
use postpone::{Client, EnqueueItem, Job, RetrySchedule, When};
use sqlx::{AssertSqlSafe, PgConnection};

use crate::error::Result;
use crate::row::Op;
use crate::schema::{Table, DEFAULT_TABLE};

/// The outbox: jobs written to PostgreSQL inside the application's transaction, which a [`Relay`]
/// moves to the queue once the transaction has committed. Cheap to clone.
///
/// Every call takes the application's open transaction (or any connection: `&mut *tx` of a
/// `sqlx::Transaction<'_, Postgres>` is a `&mut PgConnection`): the row exists, and so the job will,
/// exactly when that transaction commits. A job is validated and encoded here, as
/// [`Client::enqueue`] would: an invalid id, a payload over the limit or an invalid option fails the
/// call inside the transaction, never later at the relay.
///
/// [`Relay`]: crate::Relay
#[derive(Debug, Clone)]
pub struct Outbox {
    client: Client,
    sql: Arc<Statements>,
}

/// The statements of one table, built once.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) table: Table,
    insert: Arc<str>,
}

impl Statements {
    pub(crate) fn new(table: Table) -> Self {
        // One round trip: the row, and the notification that wakes relays at commit.
        let insert = format!(
            "WITH row AS (INSERT INTO {} (topic, partitions, job_id, op, record, due_in_ms, \
             due_at_ms, replace, priority, fair_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
             $10) RETURNING seq) SELECT pg_notify($11, '') FROM row",
            table.name
        );
        Statements {
            table,
            insert: insert.into(),
        }
    }
}

impl Outbox {
    /// The outbox of `client`'s queue, in table [`DEFAULT_TABLE`]. The table must exist: see
    /// [`migrate`](crate::migrate).
    pub fn new(client: &Client) -> Self {
        let table = Table::new(DEFAULT_TABLE).expect("the default table name is valid");
        Outbox {
            client: client.clone(),
            sql: Arc::new(Statements::new(table)),
        }
    }

    /// Uses table `name` (`name` or `schema.name`, each `[a-z_][a-z0-9_]*`, at most 63 characters)
    /// instead of [`DEFAULT_TABLE`]: one table per postpone namespace. Its relay must use the same.
    pub fn table(self, name: &str) -> Result<Self> {
        Ok(Outbox {
            client: self.client,
            sql: Arc::new(Statements::new(Table::new(name)?)),
        })
    }

    /// The client whose queue this outbox feeds.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn statements(&self) -> &Arc<Statements> {
        &self.sql
    }

    /// Enqueues a job when the transaction commits: set options on the returned builder, as on
    /// [`Client::enqueue`], then [`write`](OutboxEnqueue::write) it with the transaction.
    pub fn enqueue<J: Job>(&self, job: J) -> OutboxEnqueue<'_, J> {
        OutboxEnqueue {
            outbox: self,
            item: EnqueueItem::new(job),
        }
    }

    /// Cancels job `id` of `J`'s topic when the transaction commits (as [`Client::cancel`]; an id
    /// that is not found by then is fine: nothing to cancel).
    pub async fn cancel<J: Job>(&self, conn: &mut PgConnection, id: &str) -> Result<()> {
        postpone::validate_id(id)?;
        let job = NewJob::new(id.to_owned(), Vec::new(), Due::In(0), false);
        self.write(conn, J::TOPIC, J::partitions(), Op::Cancel, &job)
            .await
    }

    /// Moves job `id` of `J`'s topic to `when` when the transaction commits (as
    /// [`Client::reschedule`]; a delay counts from this call). An id not found by then, or running,
    /// is left alone.
    pub async fn reschedule<J: Job>(
        &self,
        conn: &mut PgConnection,
        id: &str,
        when: impl Into<When>,
    ) -> Result<()> {
        postpone::validate_id(id)?;
        let due = match when.into() {
            When::After(d) => Due::In(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            When::At(t) => Due::At(t.timestamp_millis()),
            _ => Due::In(0),
        };
        let job = NewJob::new(id.to_owned(), Vec::new(), due, false);
        self.write(conn, J::TOPIC, J::partitions(), Op::Reschedule, &job)
            .await
    }

    async fn write(
        &self,
        conn: &mut PgConnection,
        topic: &str,
        partitions: u16,
        op: Op,
        job: &NewJob,
    ) -> Result<()> {
        let (due_in, due_at) = match job.due {
            Due::In(ms) => (Some(i64::try_from(ms).unwrap_or(i64::MAX)), None),
            Due::At(ms) => (None, Some(ms)),
        };
        let record = (op == Op::Enqueue).then_some(&job.record[..]);
        sqlx::query(AssertSqlSafe(self.sql.insert.clone()))
            .bind(topic)
            .bind(i32::from(partitions))
            .bind(&job.id)
            .bind(op as i16)
            .bind(record)
            .bind(due_in)
            .bind(due_at)
            .bind(job.replace)
            .bind(i16::from(job.priority))
            .bind(job.key.as_deref().filter(|_| op == Op::Enqueue))
            .bind(&self.sql.table.channel)
            .execute(conn)
            .await?;
        Ok(())
    }
}

/// A job on its way to the outbox: the options of [`Client::enqueue`], then
/// [`write`](Self::write) with the transaction.
#[derive(Debug)]
#[must_use = "nothing is written until `write` is awaited"]
pub struct OutboxEnqueue<'a, J> {
    outbox: &'a Outbox,
    item: EnqueueItem<J>,
}

/// What an outbox enqueue wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxEnqueued {
    /// The job's id: the one given, or a random one (generated now, so that the caller can keep it
    /// with its own row).
    pub id: String,
}

impl<'a, J: Job> OutboxEnqueue<'a, J> {
    /// Uses this id (a business key such as `order:42`). When the row is delivered, an id that is
    /// scheduled or running changes nothing, unless [`replace`](Self::replace) is set.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.item = self.item.id(id);
        self
    }

    /// Runs `delay` after this call (PostgreSQL's clock until the row is delivered, Redis's after).
    pub fn after(mut self, delay: Duration) -> Self {
        self.item = self.item.after(delay);
        self
    }

    /// Runs at `time`.
    pub fn at(mut self, time: chrono::DateTime<chrono::Utc>) -> Self {
        self.item = self.item.at(time);
        self
    }

    /// Runs at `when`.
    pub fn when(mut self, when: impl Into<When>) -> Self {
        self.item = self.item.when(when);
        self
    }

    /// Replaces the payload and due time of a scheduled job with the same id.
    pub fn replace(mut self) -> Self {
        self.item = self.item.replace();
        self
    }

    /// Uses this retry schedule instead of the job type's.
    pub fn retry(mut self, schedule: RetrySchedule) -> Self {
        self.item = self.item.retry(schedule);
        self
    }

    /// Claims this job before due jobs of a lower priority (see [`EnqueueItem::priority`]).
    pub fn priority(mut self, priority: u8) -> Self {
        self.item = self.item.priority(priority);
        self
    }

    /// Gives the job this key for fairness (see [`EnqueueItem::key`]): within its topic, due jobs of
    /// different keys are claimed round-robin, each key under its own limits.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.item = self.item.key(key);
        self
    }

    /// Stores a metadata entry with the job (see [`EnqueueItem::meta`]).
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.item = self.item.meta(key, value);
        self
    }

    /// Validates and encodes the job, then writes its row with `conn` (the application's open
    /// transaction): the job is enqueued once that transaction commits, and never if it rolls back.
    pub async fn write(self, conn: &mut PgConnection) -> Result<OutboxEnqueued> {
        let prepared = self.outbox.client.prepare(self.item)?;
        self.outbox
            .write(
                conn,
                prepared.topic,
                prepared.partitions,
                Op::Enqueue,
                &prepared.job,
            )
            .await?;
        Ok(OutboxEnqueued {
            id: prepared.job.id,
        })
    }
}
