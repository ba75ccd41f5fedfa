//! The webhook job and its handler: post the event, and let the answer decide how to go on.

use std::time::Duration;

use postpone::{Job, JobContext, JobError, RetrySchedule};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

/// One event to deliver to one endpoint. No `retry = [...]`: it keeps postpone's default schedule,
/// eight attempts over about a day (2m, 10m, 10m, 1h, 2h, 6h and 15h after each failure).
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "webhooks.deliver")]
pub(crate) struct Webhook {
    pub(crate) url: String,
    pub(crate) event: String,
    pub(crate) payload: serde_json::Value,
}

/// Posts the webhook once; the answer decides what happens next:
///
/// - 2xx: delivered.
/// - no answer, 408, 429 or 5xx: the endpoint may recover, so retry by the schedule (after
///   `Retry-After` instead, when a 429 or 503 gives one in seconds).
/// - any other status (400, 404, 410, 422...): the endpoint refuses this event, and will tomorrow too:
///   dead-letter it now instead of knocking for a day.
///
/// The job id goes along as `Idempotency-Key`: delivery is at least once, so a receiver may see an event
/// twice (a worker died after the POST, before it recorded the success) and should drop the repeat.
pub(crate) async fn deliver(
    http: &reqwest::Client,
    hook: &Webhook,
    ctx: &JobContext,
) -> Result<(), JobError> {
    let response = http
        .post(&hook.url)
        .header("Idempotency-Key", ctx.id())
        .header("Webhook-Event", &hook.event)
        .header("Webhook-Attempt", ctx.attempt())
        .json(&hook.payload)
        .timeout(Duration::from_secs(10))
        .send()
        .await?; // no answer: `?` makes any error a retry by the schedule
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let error = format!("{} answered {status}", hook.url);
    let retry_after = retry_after(response.headers());
    match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            if retry_after.is_some() =>
        {
            Err(JobError::retry_after(
                retry_after.unwrap_or_default(),
                error,
            ))
        }
        StatusCode::REQUEST_TIMEOUT | StatusCode::TOO_MANY_REQUESTS => Err(JobError::msg(error)),
        status if status.is_server_error() => Err(JobError::msg(error)),
        _ => Err(JobError::fail(error)),
    }
}

/// `Retry-After: <seconds>` (the HTTP-date form is left to the schedule).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

/// postpone's default schedule with every delay divided by `speedup` (1 keeps it as it is), for a demo
/// that cannot wait a day.
pub(crate) fn default_schedule_faster(speedup: f64) -> RetrySchedule {
    let slots = RetrySchedule::default().slots().to_vec();
    RetrySchedule::new(slots.into_iter().map(|d| d.div_f64(speedup.max(1.0))))
        .expect("a shorter default schedule is valid")
}
