//! The order service behind `main.rs`: its orders and its outbox in PostgreSQL, and what the HTTP API
//! (`api.rs`) and the timer (`timer.rs`) share.
//!
//! An order and its timer change in one transaction: placing an order writes its row and the outbox
//! row that enqueues its timer, paying writes the payment and the row that cancels the timer,
//! extending writes the new deadline and the row that moves it. The relay (`postpone_postgres::Relay`,
//! run by [`App::serve`]) moves committed outbox rows to the queue, in order per timer. So a committed
//! order always gets its timer, even when Redis is away or the process dies right after the commit,
//! and a request that rolls back leaves no timer behind.
//!
//! The database decides and the timer makes it happen on time. Every change of an order is one
//! conditional `UPDATE` (a payment counts only while the order is pending and its deadline has not
//! passed; closing needs the same order pending and its deadline passed), and the job's handler reads
//! the order before it acts. So a timer that fires while its cancel or its move is still on its way
//! through the outbox finds the order paid and does nothing, or finds its deadline moved and snoozes
//! until then.

use std::future::{Future, IntoFuture};
use std::time::Duration;

use chrono::{DateTime, Utc};
use postpone::{BoxError, Client, EnqueueItem, EnqueueStatus, Worker};
use postpone_postgres::{Outbox, Relay};
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, PgPool, Row};
use tokio::net::TcpListener;

use crate::api::{router, ApiError};
use crate::timer::{close_unpaid, timer_id, CloseUnpaidOrder};

/// What the service is told at start.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// How long a customer has to pay, and how much an extension adds (30 minutes in the README; the
    /// tests use seconds).
    pub(crate) payment_window: Duration,
    /// The PostgreSQL schema that holds the `orders` table and the outbox table `outbox` (all created
    /// when missing).
    pub(crate) schema: String,
}

/// An order as stored and as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Order {
    pub(crate) id: i64,
    pub(crate) item: String,
    pub(crate) amount_cents: i64,
    pub(crate) status: Status,
    pub(crate) placed_at: DateTime<Utc>,
    /// The end of the payment window: unpaid by then, the order is closed.
    pub(crate) pay_by: DateTime<Utc>,
    pub(crate) paid_at: Option<DateTime<Utc>>,
    pub(crate) closed_at: Option<DateTime<Utc>>,
}

/// Where an order is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Pending,
    Paid,
    Closed,
}

/// The columns of [`Order`], as a literal for `concat!`: sqlx takes SQL as a `&'static str`, so the
/// queries are built at compile time and never from input.
macro_rules! order_columns {
    () => {
        "id, item, amount_cents, status, placed_at, pay_by, paid_at, closed_at"
    };
}
pub(crate) use order_columns;

impl<'r> sqlx::FromRow<'r, PgRow> for Order {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let status = match row.try_get::<&str, _>("status")? {
            "pending" => Status::Pending,
            "paid" => Status::Paid,
            _ => Status::Closed,
        };
        Ok(Order {
            id: row.try_get("id")?,
            item: row.try_get("item")?,
            amount_cents: row.try_get("amount_cents")?,
            status,
            placed_at: row.try_get("placed_at")?,
            pay_by: row.try_get("pay_by")?,
            paid_at: row.try_get("paid_at")?,
            closed_at: row.try_get("closed_at")?,
        })
    }
}

/// The body of `POST /orders`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct NewOrder {
    pub(crate) item: String,
    pub(crate) amount_cents: i64,
}

/// What the HTTP handlers and the job handler share. Cheap to clone.
#[derive(Clone)]
pub(crate) struct App {
    /// Connections whose `search_path` is the service's schema.
    pub(crate) db: PgPool,
    pub(crate) jobs: Client,
    /// Where requests write their timers' changes, in their own transactions.
    pub(crate) outbox: Outbox,
    /// The payment window.
    pub(crate) window: Duration,
}

impl App {
    /// Connects to PostgreSQL at `url` with the schema of `settings` as `search_path`, and creates
    /// the schema, the `orders` table and the outbox table when missing.
    pub(crate) async fn connect(
        url: &str,
        jobs: Client,
        settings: &Settings,
    ) -> Result<Self, BoxError> {
        let schema = checked_schema(&settings.schema)?;
        let db = crate::postgres::pool(url, schema).await?;
        let mut conn = db.acquire().await?;
        // `schema` is checked above: lowercase letters, digits and `_` only.
        sqlx::raw_sql(AssertSqlSafe(format!(
            "CREATE SCHEMA IF NOT EXISTS {schema}"
        )))
        .execute(&mut *conn)
        .await?;
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS orders (
                 id           bigserial PRIMARY KEY,
                 item         text NOT NULL,
                 amount_cents bigint NOT NULL CHECK (amount_cents > 0),
                 status       text NOT NULL DEFAULT 'pending'
                              CHECK (status IN ('pending', 'paid', 'closed')),
                 placed_at    timestamptz NOT NULL DEFAULT now(),
                 pay_by       timestamptz NOT NULL,
                 paid_at      timestamptz,
                 closed_at    timestamptz
             )",
        )
        .execute(&mut *conn)
        .await?;
        let table = format!("{schema}.outbox");
        postpone_postgres::migrate(&mut conn, &table).await?;
        Ok(App {
            outbox: Outbox::new(&jobs).table(&table)?,
            db,
            jobs,
            window: settings.payment_window,
        })
    }

    /// With the in-memory backend only: sets the timer of every pending order, and returns how many
    /// were set. In memory the queue lives as long as the process, so the timers of a previous run
    /// are gone; on Redis nothing is missing (a committed order's timer is in Redis, or in the outbox
    /// on its way there), and this does nothing. Timers that exist are left as they are (enqueueing an
    /// id that is scheduled or running changes nothing).
    pub(crate) async fn rearm_in_memory_timers(&self) -> Result<usize, BoxError> {
        if self.jobs.backend_name() != "memory" {
            return Ok(0);
        }
        let pending: Vec<(i64, DateTime<Utc>)> =
            sqlx::query_as("SELECT id, pay_by FROM orders WHERE status = 'pending'")
                .fetch_all(&self.db)
                .await?;
        let timers = pending.into_iter().map(|(order_id, pay_by)| {
            EnqueueItem::new(CloseUnpaidOrder { order_id })
                .id(timer_id(order_id))
                .at(pay_by)
        });
        let enqueued = self.jobs.enqueue_many(timers).await?;
        Ok(enqueued
            .iter()
            .filter(|e| e.status == EnqueueStatus::Created)
            .count())
    }

    /// Serves the API on `listener`, and runs the outbox relay and the job worker, until `shutdown`
    /// completes. Then the HTTP server finishes the requests it has; after it the relay finishes its
    /// round (rows it has not taken stay in the outbox for the next start), and the worker lets
    /// running jobs finish within its grace period and hands the rest back (due again, no attempt
    /// used).
    pub(crate) async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), BoxError> {
        let relay = Relay::new(&self.outbox, self.db.clone());
        let stop_relay = relay.shutdown_handle();
        let mut relay = tokio::spawn(relay.run());
        let worker = Worker::with_state(&self.jobs, self.clone())
            .handle(close_unpaid)
            .shutdown_grace(Duration::from_secs(10))
            .build()?;
        let stop_worker = worker.shutdown_handle();
        let mut worker = tokio::spawn(worker.run());
        let http = axum::serve(listener, router(self))
            .with_graceful_shutdown(shutdown)
            .into_future();
        tokio::select! {
            served = http => served?,
            ended = &mut relay => return Err(format!("the outbox relay stopped: {ended:?}").into()),
            ended = &mut worker => return Err(format!("the job worker stopped: {ended:?}").into()),
        }
        // No request is left that could write to the outbox: stop the relay, then the worker.
        stop_relay.shutdown();
        relay.await??;
        stop_worker.shutdown();
        worker.await??;
        Ok(())
    }

    /// The order `id`, if there is one.
    pub(crate) async fn find(&self, id: i64) -> Result<Option<Order>, ApiError> {
        let sql = concat!("SELECT ", order_columns!(), " FROM orders WHERE id = $1");
        Ok(sqlx::query_as(sql)
            .bind(id)
            .fetch_optional(&self.db)
            .await?)
    }
}

/// `schema` if it can name the schema and prefix its outbox table: 1 to 56 of `a-z`, `0-9`, `_`, not
/// starting with a digit (the outbox's notification channel, `<schema>_outbox`, must fit PostgreSQL's
/// 63 bytes).
fn checked_schema(schema: &str) -> Result<&str, String> {
    let valid = (1..=56).contains(&schema.len())
        && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    match valid {
        true => Ok(schema),
        false => Err(format!(
            "schema {schema:?}: use 1 to 56 of a-z, 0-9 and _, not starting with a digit"
        )),
    }
}
