//! The invoice service's jobs and HTTP API: rendering an invoice's PDF is a job with a typed result,
//! and a request gives it a moment before it answers `202 Accepted`.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use postpone::{Client, Job, JobContext, JobError, JobOutcome, Worker};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A rendered invoice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Pdf {
    pub(crate) url: String,
    pub(crate) pages: u32,
}

/// Render invoice `invoice`'s PDF: its result is the [`Pdf`], kept for an hour (at most 10,000), so that
/// a client asking later finds it.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "invoices.render", output = Pdf, keep = "1h", keep_last = 10000)]
pub(crate) struct RenderInvoice {
    pub(crate) invoice: u64,
}

/// The job id of invoice `n`'s rendering: one rendering per invoice (enqueueing it again while it is
/// scheduled or running changes nothing).
pub(crate) fn job_id(n: u64) -> String {
    format!("invoice:{n}")
}

/// A worker that renders invoices in `render_time`, five pages, reporting each.
pub(crate) fn worker(client: &Client, render_time: Duration) -> postpone::Result<Worker> {
    let render = move |job: RenderInvoice, ctx: JobContext| async move {
        const PAGES: u32 = 5;
        for page in 1..=PAGES {
            tokio::time::sleep(render_time / PAGES).await;
            let percent = f64::from(page) * 100.0 / f64::from(PAGES);
            ctx.progress(percent, format!("page {page} of {PAGES}"));
        }
        Ok::<_, JobError>(Pdf {
            url: format!("https://files.example/invoices/{}.pdf", job.invoice),
            pages: PAGES,
        })
    };
    Worker::builder(client)
        .handle(render)
        .concurrency(20)
        .build()
}

/// How long a request waits for the rendering: `?wait_ms=`, default 1 s, at most 30 s.
#[derive(Debug, Deserialize)]
pub(crate) struct Wait {
    wait_ms: Option<u64>,
}

impl Wait {
    fn duration(&self) -> Duration {
        Duration::from_millis(self.wait_ms.unwrap_or(1000).min(30_000))
    }
}

/// `POST /invoices/{n}/pdf` renders (or joins the rendering under way), `GET` asks how it went; both
/// wait up to `?wait_ms=` for the end.
pub(crate) fn router(client: Client) -> Router {
    Router::new()
        .route("/invoices/{n}/pdf", get(status).post(render))
        .with_state(client)
}

async fn render(
    State(client): State<Client>,
    Path(n): Path<u64>,
    Query(wait): Query<Wait>,
) -> (StatusCode, Json<Value>) {
    let enqueue = client.enqueue(RenderInvoice { invoice: n }).id(job_id(n));
    match enqueue.and_wait(wait.duration()).await {
        Ok((_, outcome)) => answer(n, outcome),
        Err(e) => unavailable(e),
    }
}

async fn status(
    State(client): State<Client>,
    Path(n): Path<u64>,
    Query(wait): Query<Wait>,
) -> (StatusCode, Json<Value>) {
    match client
        .wait::<RenderInvoice>(&job_id(n), wait.duration())
        .await
    {
        Ok(outcome) => answer(n, outcome),
        Err(e) => unavailable(e),
    }
}

/// The HTTP answer for a rendering's outcome.
fn answer(n: u64, outcome: JobOutcome<Pdf>) -> (StatusCode, Json<Value>) {
    match outcome {
        JobOutcome::Succeeded(pdf) => (StatusCode::OK, Json(json!(pdf))),
        JobOutcome::Pending { progress } => (
            StatusCode::ACCEPTED,
            Json(json!({
                "status": "rendering",
                "progress": progress.map(|p| json!({ "percent": p.value, "step": p.message })),
                "poll": format!("/invoices/{n}/pdf?wait_ms=5000"),
            })),
        ),
        JobOutcome::Dead { reason } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "status": "failed", "reason": reason })),
        ),
        JobOutcome::Cancelled => (StatusCode::GONE, Json(json!({ "status": "cancelled" }))),
        _ => (
            StatusCode::NOT_FOUND,
            Json(json!({ "status": "unknown: never rendered, or rendered over an hour ago" })),
        ),
    }
}

fn unavailable(e: postpone::Error) -> (StatusCode, Json<Value>) {
    let body = json!({ "status": "unavailable", "error": e.report().to_string() });
    (StatusCode::SERVICE_UNAVAILABLE, Json(body))
}
