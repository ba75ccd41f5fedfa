//! The timer: the "close if unpaid" job, one per order, and its handler.

use std::time::Duration;

use postpone::{Job, JobContext, JobError};
use serde::{Deserialize, Serialize};

use crate::app::App;

/// Closes an order that is still unpaid at its deadline: one per order, with the id `order:<id>`, so
/// that paying can cancel it and extending can move it. It is enqueued, cancelled and moved through
/// the outbox, in the transaction of the request that places, pays or extends the order.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "orders.close_unpaid")]
pub(crate) struct CloseUnpaidOrder {
    pub(crate) order_id: i64,
}

/// The job id of an order's timer.
pub(crate) fn timer_id(order_id: i64) -> String {
    format!("order:{order_id}")
}

/// The job handler: closes the order if it is still pending at its deadline. It may run more than
/// once for one timer (delivery is at least once); closing a closed or paid order changes nothing.
pub(crate) async fn close_unpaid(
    job: CloseUnpaidOrder,
    ctx: JobContext,
    app: App,
) -> Result<(), JobError> {
    let closed = sqlx::query(
        "UPDATE orders SET status = 'closed', closed_at = now()
         WHERE id = $1 AND status = 'pending' AND pay_by <= now()",
    )
    .bind(job.order_id)
    .execute(&app.db)
    .await?;
    if closed.rows_affected() == 1 {
        tracing::info!(
            order_id = job.order_id,
            attempt = ctx.attempt(),
            // The trace of the request that placed the order (with the `opentelemetry` feature and a
            // propagator set: see `observe.rs`).
            placed_in = ctx.meta("traceparent"),
            "closed unpaid order"
        );
        return Ok(());
    }
    // Paid, closed already, deleted, or its deadline was moved after this timer was set.
    let order: Option<(String, i64)> = sqlx::query_as(
        "SELECT status, (EXTRACT(EPOCH FROM pay_by - now()) * 1000)::bigint
         FROM orders WHERE id = $1",
    )
    .bind(job.order_id)
    .fetch_optional(&app.db)
    .await?;
    match order {
        Some((status, wait_ms)) if status == "pending" => {
            // Not due yet by the database's clock: run again then, without using an attempt.
            Err(JobError::snooze(Duration::from_millis(
                wait_ms.max(1) as u64
            )))
        }
        _ => Ok(()),
    }
}
