//! The order service behind `main.rs`: its orders in PostgreSQL, and what the HTTP API (`api.rs`) and
//! the timer (`timer.rs`) share.
//!
//! The database decides and the timer makes it happen on time. Every change of an order is one
//! conditional `UPDATE` (a payment counts only while the order is pending and its deadline has not
//! passed; closing needs the same order pending and its deadline passed), and the job's handler reads the
//! order before it acts. So the timer calls around it (cancel on payment, reschedule on extension) only
//! save work: if one of them fails, or races the timer, the handler finds the order paid and does
//! nothing, or finds its deadline moved and snoozes until then.

use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use postpone::{BoxError, Client, EnqueueItem, EnqueueStatus, Worker};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_postgres::Row;

use crate::api::{router, ApiError};
use crate::timer::{close_unpaid, timer_id, CloseUnpaidOrder};

/// What the service is told at start.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// How long a customer has to pay, and how much an extension adds (30 minutes in the README; the
    /// tests use seconds).
    pub(crate) payment_window: Duration,
    /// The PostgreSQL schema that holds the `orders` table (both are created when missing).
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

/// The columns of [`Order`], in its order.
pub(crate) const COLUMNS: &str =
    "id, item, amount_cents, status, placed_at, pay_by, paid_at, closed_at";

impl Order {
    pub(crate) fn from_row(row: &Row) -> Result<Self, tokio_postgres::Error> {
        let status = match row.try_get::<_, &str>("status")? {
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
    pub(crate) db: Arc<tokio_postgres::Client>,
    pub(crate) jobs: Client,
    /// The payment window.
    pub(crate) window: Duration,
}

impl App {
    /// Creates the schema and the `orders` table when missing, and points the connection at them.
    pub(crate) async fn new(
        db: tokio_postgres::Client,
        jobs: Client,
        settings: &Settings,
    ) -> Result<Self, BoxError> {
        let schema = format!("\"{}\"", settings.schema.replace('"', "\"\""));
        db.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             SET search_path TO {schema};
             CREATE TABLE IF NOT EXISTS orders (
                 id           bigserial PRIMARY KEY,
                 item         text NOT NULL,
                 amount_cents bigint NOT NULL CHECK (amount_cents > 0),
                 status       text NOT NULL DEFAULT 'pending'
                              CHECK (status IN ('pending', 'paid', 'closed')),
                 placed_at    timestamptz NOT NULL DEFAULT now(),
                 pay_by       timestamptz NOT NULL,
                 paid_at      timestamptz,
                 closed_at    timestamptz
             );"
        ))
        .await?;
        Ok(App {
            db: Arc::new(db),
            jobs,
            window: settings.payment_window,
        })
    }

    /// Sets the timer of every pending order that has none: after a crash between an order's INSERT and
    /// its enqueue, or a restart on the in-memory backend. Timers that exist are left as they are
    /// (enqueueing an id that is scheduled or running changes nothing). Returns how many were set.
    pub(crate) async fn rearm_timers(&self) -> Result<usize, BoxError> {
        let rows = self
            .db
            .query(
                "SELECT id, pay_by FROM orders WHERE status = 'pending'",
                &[],
            )
            .await?;
        let timers = rows.iter().map(|row| {
            let (order_id, pay_by): (i64, DateTime<Utc>) = (row.get(0), row.get(1));
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

    /// Serves the API on `listener` and runs the job worker, until `shutdown` completes. Then the HTTP
    /// server finishes the requests it has, and after it the worker lets running jobs finish within
    /// its grace period and hands the rest back (due again, no attempt used) for the next start.
    pub(crate) async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), BoxError> {
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
            ended = &mut worker => return Err(format!("the job worker stopped: {ended:?}").into()),
        }
        // No request is left that could set a timer: now stop the worker.
        stop_worker.shutdown();
        worker.await??;
        Ok(())
    }

    /// The order `id`, if there is one.
    pub(crate) async fn find(&self, id: i64) -> Result<Option<Order>, ApiError> {
        let sql = format!("SELECT {COLUMNS} FROM orders WHERE id = $1");
        match self.db.query_opt(&sql, &[&id]).await? {
            Some(row) => Ok(Some(Order::from_row(&row)?)),
            None => Ok(None),
        }
    }
}
