//! The order service behind `main.rs`: the `orders` table, the HTTP API, and the "close if unpaid" job.
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

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use postpone::{BoxError, Client, EnqueueItem, EnqueueStatus, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_postgres::Row;

/// Closes an order that is still unpaid at its deadline: one per order, with the id `order:<id>`, so
/// that paying can cancel it and extending can move it.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "orders.close_unpaid")]
pub(crate) struct CloseUnpaidOrder {
    pub(crate) order_id: i64,
}

/// The job id of an order's timer.
pub(crate) fn timer_id(order_id: i64) -> String {
    format!("order:{order_id}")
}

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
const COLUMNS: &str = "id, item, amount_cents, status, placed_at, pay_by, paid_at, closed_at";

impl Order {
    fn from_row(row: &Row) -> Result<Self, tokio_postgres::Error> {
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
    db: Arc<tokio_postgres::Client>,
    jobs: Client,
    window: Duration,
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

    async fn find(&self, id: i64) -> Result<Option<Order>, ApiError> {
        let sql = format!("SELECT {COLUMNS} FROM orders WHERE id = $1");
        match self.db.query_opt(&sql, &[&id]).await? {
            Some(row) => Ok(Some(Order::from_row(&row)?)),
            None => Ok(None),
        }
    }
}

/// Why an order that a conditional UPDATE did not match cannot be changed.
fn refusal(id: i64, order: Option<Order>) -> ApiError {
    let Some(order) = order else {
        return ApiError::NotFound(id);
    };
    ApiError::Conflict(match order.status {
        Status::Paid => format!("order {id} is paid"),
        Status::Closed => format!("order {id} was closed unpaid"),
        Status::Pending => format!(
            "order {id}'s payment window ended at {}; it is being closed",
            order.pay_by
        ),
    })
}

/// The HTTP API: `POST /orders`, `GET /orders/{id}`, `POST /orders/{id}/pay`,
/// `POST /orders/{id}/extend`.
pub(crate) fn router(app: App) -> Router {
    Router::new()
        .route("/orders", post(place_order))
        .route("/orders/{id}", get(get_order))
        .route("/orders/{id}/pay", post(pay_order))
        .route("/orders/{id}/extend", post(extend_payment_window))
        .with_state(app)
}

/// Places an order and sets its timer: closed at the end of the payment window unless paid.
async fn place_order(
    State(app): State<App>,
    Json(new): Json<NewOrder>,
) -> Result<(StatusCode, Json<Order>), ApiError> {
    if new.item.trim().is_empty() || new.amount_cents <= 0 {
        return Err(ApiError::BadRequest(
            "an order needs an item and a positive amount_cents".into(),
        ));
    }
    let sql = format!(
        "INSERT INTO orders (item, amount_cents, pay_by)
         VALUES ($1, $2, now() + make_interval(secs => $3))
         RETURNING {COLUMNS}"
    );
    let window = app.window.as_secs_f64();
    let row = app
        .db
        .query_one(&sql, &[&new.item, &new.amount_cents, &window])
        .await?;
    let order = Order::from_row(&row)?;
    let timer = app
        .jobs
        .enqueue(CloseUnpaidOrder { order_id: order.id })
        .id(timer_id(order.id))
        .at(order.pay_by)
        .await;
    if let Err(e) = timer {
        // A pending order always has a timer: without one, there is no order.
        app.db
            .execute("DELETE FROM orders WHERE id = $1", &[&order.id])
            .await?;
        return Err(e.into());
    }
    tracing::info!(order_id = order.id, pay_by = %order.pay_by, "order placed");
    Ok((StatusCode::CREATED, Json(order)))
}

async fn get_order(State(app): State<App>, Path(id): Path<i64>) -> Result<Json<Order>, ApiError> {
    app.find(id).await?.map(Json).ok_or(ApiError::NotFound(id))
}

/// Pays an order that is pending and within its payment window, and cancels its timer. Paying a paid
/// order again changes nothing.
async fn pay_order(State(app): State<App>, Path(id): Path<i64>) -> Result<Json<Order>, ApiError> {
    let sql = format!(
        "UPDATE orders SET status = 'paid', paid_at = now()
         WHERE id = $1 AND status = 'pending' AND pay_by > now()
         RETURNING {COLUMNS}"
    );
    let Some(row) = app.db.query_opt(&sql, &[&id]).await? else {
        return match app.find(id).await? {
            Some(order) if order.status == Status::Paid => Ok(Json(order)),
            other => Err(refusal(id, other)),
        };
    };
    let order = Order::from_row(&row)?;
    // The timer is not needed any more. Should this fail, it fires later and finds the order paid.
    match app.jobs.cancel::<CloseUnpaidOrder>(&timer_id(id)).await {
        Ok(_) | Err(postpone::Error::JobNotFound { .. }) => {}
        Err(e) => {
            tracing::warn!(order_id = id, error = %e, "could not cancel the timer of a paid order")
        }
    }
    tracing::info!(order_id = id, "order paid");
    Ok(Json(order))
}

/// Gives a pending order one more payment window, and moves its timer to the new deadline.
async fn extend_payment_window(
    State(app): State<App>,
    Path(id): Path<i64>,
) -> Result<Json<Order>, ApiError> {
    let sql = format!(
        "UPDATE orders SET pay_by = pay_by + make_interval(secs => $2)
         WHERE id = $1 AND status = 'pending' AND pay_by > now()
         RETURNING {COLUMNS}"
    );
    let window = app.window.as_secs_f64();
    let Some(row) = app.db.query_opt(&sql, &[&id, &window]).await? else {
        return Err(refusal(id, app.find(id).await?));
    };
    let order = Order::from_row(&row)?;
    let timer = timer_id(id);
    match app
        .jobs
        .reschedule::<CloseUnpaidOrder>(&timer, order.pay_by)
        .await
    {
        Ok(_) => {}
        // Firing right now: its handler reads the new deadline and snoozes until then.
        Err(postpone::Error::JobRunning { .. }) => {}
        // No timer (it was lost): set one.
        Err(postpone::Error::JobNotFound { .. }) => {
            app.jobs
                .enqueue(CloseUnpaidOrder { order_id: id })
                .id(timer)
                .at(order.pay_by)
                .await?;
        }
        // The old timer fires early, finds the deadline moved and snoozes until then.
        Err(e) => {
            tracing::warn!(order_id = id, error = %e, "could not move the timer of an extended order")
        }
    }
    tracing::info!(order_id = id, pay_by = %order.pay_by, "payment window extended");
    Ok(Json(order))
}

/// The job handler: closes the order if it is still pending at its deadline. It may run more than
/// once for one timer (delivery is at least once); closing a closed or paid order changes nothing.
pub(crate) async fn close_unpaid(
    job: CloseUnpaidOrder,
    ctx: JobContext,
    app: App,
) -> Result<(), JobError> {
    let closed = app
        .db
        .execute(
            "UPDATE orders SET status = 'closed', closed_at = now()
             WHERE id = $1 AND status = 'pending' AND pay_by <= now()",
            &[&job.order_id],
        )
        .await?;
    if closed == 1 {
        tracing::info!(
            order_id = job.order_id,
            attempt = ctx.attempt(),
            "closed unpaid order"
        );
        return Ok(());
    }
    // Paid, closed already, deleted, or its deadline was moved after this timer was set.
    let row = app
        .db
        .query_opt(
            "SELECT status, (EXTRACT(EPOCH FROM pay_by - now()) * 1000)::bigint
             FROM orders WHERE id = $1",
            &[&job.order_id],
        )
        .await?;
    match row {
        Some(row) if row.get::<_, &str>(0) == "pending" => {
            let wait_ms: i64 = row.get(1);
            // Not due yet by the database's clock: run again then, without using an attempt.
            Err(JobError::snooze(Duration::from_millis(
                wait_ms.max(1) as u64
            )))
        }
        _ => Ok(()),
    }
}

/// An API error: a status and a message, sent as `{"error": "..."}`.
#[derive(Debug)]
pub(crate) enum ApiError {
    BadRequest(String),
    NotFound(i64),
    Conflict(String),
    Database(tokio_postgres::Error),
    Jobs(postpone::Error),
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        ApiError::Database(e)
    }
}

impl From<postpone::Error> for ApiError {
    fn from(e: postpone::Error) -> Self {
        ApiError::Jobs(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            ApiError::NotFound(id) => (StatusCode::NOT_FOUND, format!("no order {id}")),
            ApiError::Conflict(m) => (StatusCode::CONFLICT, m),
            ApiError::Database(e) => {
                tracing::error!(error = %e, "database error");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "database unavailable".into(),
                )
            }
            ApiError::Jobs(e) => {
                tracing::error!(error = %e, "job store error");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "job store unavailable".into(),
                )
            }
        };
        (status, Json(serde_json::json!({ "error": message }))).into_response()
    }
}
