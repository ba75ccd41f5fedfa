//! The HTTP API: place, read, pay, and extend the payment window of orders.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::app::{order_columns, App, NewOrder, Order, Status};
use crate::timer::{timer_id, CloseUnpaidOrder};

/// The HTTP API: `POST /orders`, `GET /orders/{id}`, `POST /orders/{id}/pay`,
/// `POST /orders/{id}/extend`, and `GET /metrics` (Prometheus).
pub(crate) fn router(app: App) -> Router {
    Router::new()
        .route("/metrics", get(crate::observe::scrape))
        .route("/orders", post(place_order))
        .route("/orders/{id}", get(get_order))
        .route("/orders/{id}/pay", post(pay_order))
        .route("/orders/{id}/extend", post(extend_payment_window))
        .with_state(app)
}

/// Places an order and sets its timer, in one transaction: the order's row, and the outbox row that
/// enqueues "close if unpaid" for the end of its payment window. Either both commit or neither does.
/// Its span is the trace that the timer's job carries (see `observe.rs`).
#[tracing::instrument(name = "POST /orders", skip_all)]
async fn place_order(
    State(app): State<App>,
    Json(new): Json<NewOrder>,
) -> Result<(StatusCode, Json<Order>), ApiError> {
    if new.item.trim().is_empty() || new.amount_cents <= 0 {
        return Err(ApiError::BadRequest(
            "an order needs an item and a positive amount_cents".into(),
        ));
    }
    let mut tx = app.db.begin().await?;
    let sql = concat!(
        "INSERT INTO orders (item, amount_cents, pay_by)
         VALUES ($1, $2, now() + make_interval(secs => $3))
         RETURNING ",
        order_columns!()
    );
    let order: Order = sqlx::query_as(sql)
        .bind(&new.item)
        .bind(new.amount_cents)
        .bind(app.window.as_secs_f64())
        .fetch_one(&mut *tx)
        .await?;
    // At the order's own deadline (the database's `now()` plus the window), which the handler checks.
    app.outbox
        .enqueue(CloseUnpaidOrder { order_id: order.id })
        .id(timer_id(order.id))
        .at(order.pay_by)
        .write(&mut tx)
        .await?;
    tx.commit().await?;
    tracing::info!(order_id = order.id, pay_by = %order.pay_by, "order placed");
    Ok((StatusCode::CREATED, Json(order)))
}

async fn get_order(State(app): State<App>, Path(id): Path<i64>) -> Result<Json<Order>, ApiError> {
    app.find(id).await?.map(Json).ok_or(ApiError::NotFound(id))
}

/// Pays an order that is pending and within its payment window, and cancels its timer, in one
/// transaction. Paying a paid order again changes nothing.
async fn pay_order(State(app): State<App>, Path(id): Path<i64>) -> Result<Json<Order>, ApiError> {
    let mut tx = app.db.begin().await?;
    let sql = concat!(
        "UPDATE orders SET status = 'paid', paid_at = now()
         WHERE id = $1 AND status = 'pending' AND pay_by > now()
         RETURNING ",
        order_columns!()
    );
    let paid: Option<Order> = sqlx::query_as(sql)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(order) = paid else {
        // Nothing was written: dropping the transaction rolls it back.
        drop(tx);
        return match app.find(id).await? {
            Some(order) if order.status == Status::Paid => Ok(Json(order)),
            other => Err(refusal(id, other)),
        };
    };
    // Should the timer fire before the cancel reaches the queue, it finds the order paid.
    app.outbox
        .cancel::<CloseUnpaidOrder>(&mut tx, &timer_id(id))
        .await?;
    tx.commit().await?;
    tracing::info!(order_id = id, "order paid");
    Ok(Json(order))
}

/// Gives a pending order one more payment window, and moves its timer to the new deadline, in one
/// transaction. A timer found running when the move arrives is left alone: its handler reads the new
/// deadline and snoozes until then.
async fn extend_payment_window(
    State(app): State<App>,
    Path(id): Path<i64>,
) -> Result<Json<Order>, ApiError> {
    let mut tx = app.db.begin().await?;
    let sql = concat!(
        "UPDATE orders SET pay_by = pay_by + make_interval(secs => $2)
         WHERE id = $1 AND status = 'pending' AND pay_by > now()
         RETURNING ",
        order_columns!()
    );
    let extended: Option<Order> = sqlx::query_as(sql)
        .bind(id)
        .bind(app.window.as_secs_f64())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(order) = extended else {
        drop(tx);
        return Err(refusal(id, app.find(id).await?));
    };
    app.outbox
        .reschedule::<CloseUnpaidOrder>(&mut tx, &timer_id(id), order.pay_by)
        .await?;
    tx.commit().await?;
    tracing::info!(order_id = id, pay_by = %order.pay_by, "payment window extended");
    Ok(Json(order))
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

/// An API error: a status and a message, sent as `{"error": "..."}`.
#[derive(Debug)]
pub(crate) enum ApiError {
    BadRequest(String),
    NotFound(i64),
    Conflict(String),
    /// PostgreSQL failed (the transaction, if any, rolled back: nothing was written).
    Database(sqlx::Error),
    /// The outbox refused the timer (an invalid job: a bug of this service, not the client's).
    Timer(postpone_postgres::Error),
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::Database(e)
    }
}

impl From<postpone_postgres::Error> for ApiError {
    fn from(e: postpone_postgres::Error) -> Self {
        match e {
            postpone_postgres::Error::Database(e) => ApiError::Database(e),
            e => ApiError::Timer(e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            ApiError::NotFound(id) => (StatusCode::NOT_FOUND, format!("no order {id}")),
            ApiError::Conflict(m) => (StatusCode::CONFLICT, m),
            // The server refused a statement or the commit.
            ApiError::Database(sqlx::Error::Database(e)) => {
                tracing::error!(error = %e, "database error");
                (StatusCode::INTERNAL_SERVER_ERROR, "database error".into())
            }
            ApiError::Database(e) => {
                tracing::error!(error = %e, "database error");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "database unavailable".into(),
                )
            }
            ApiError::Timer(e) => {
                tracing::error!(error = %e, "outbox error");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the order's timer could not be set".into(),
                )
            }
        };
        (status, Json(serde_json::json!({ "error": message }))).into_response()
    }
}
