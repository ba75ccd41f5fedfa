//! The HTTP API: place, read, pay, and extend the payment window of orders.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::app::{App, NewOrder, Order, Status, COLUMNS};
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

/// Places an order and sets its timer: closed at the end of the payment window unless paid. Its span is
/// the trace that the timer's job carries (see `observe.rs`).
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
