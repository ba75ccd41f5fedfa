//! The actions: POSTs from the pages' forms, each checked (read-only, CSRF token, same origin), done
//! through the operations API, then answered with a redirect back to the page with what happened (a
//! message the server keeps: the address carries only its key).

use std::collections::HashSet;
use std::time::Duration;

use axum::extract::{Form, OriginalUri, Path, Request, State};
use axum::http::Uri;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::future::join_all;
use postpone::ops::{DeadFilter, Ops};
use serde::Deserialize;

use crate::fingerprint::fingerprint;
use crate::links;

/// Dead letters of a group handled at once.
const CONCURRENCY: usize = 32;

/// Refuses every request of a read-only dashboard but GET and HEAD, whatever its path or body: 403.
pub(crate) async fn guard(
    State(shared): State<crate::State>,
    req: Request,
    next: Next,
) -> Response {
    if shared.read_only && !matches!(*req.method(), Method::GET | Method::HEAD) {
        return (
            StatusCode::FORBIDDEN,
            "this dashboard is read-only: actions are refused\n",
        )
            .into_response();
    }
    next.run(req).await
}

/// Every action's fields (each action reads those it needs).
#[derive(Debug, Deserialize)]
pub(crate) struct ActionForm {
    csrf: Option<String>,
    topic: String,
    id: Option<String>,
    /// A dead-letter group's fingerprint.
    group: Option<String>,
    /// Reschedule: in `amount` `unit`s (s, m, h, d).
    amount: Option<u64>,
    unit: Option<String>,
    /// The page to go back to.
    back: Option<String>,
}

pub(crate) async fn act(
    State(shared): State<crate::State>,
    Path(name): Path<String>,
    original: OriginalUri,
    uri: Uri,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    let host = shared.hosts.of(&headers, &original.0);
    if let Some(why) = shared.csrf.refuse(&headers, host, form.csrf.as_deref()) {
        return (StatusCode::FORBIDDEN, format!("{why}\n")).into_response();
    }
    let message = match run(&shared.ops, &name, &form).await {
        Ok(done) => done,
        Err(e) => format!("{name} failed: {e}"),
    };
    tracing::info!(action = %name, topic = %form.topic, id = ?form.id, outcome = %message, "dashboard action");
    let back = match form.back.as_deref().filter(|b| links::is_own_page(b)) {
        Some(back) => back.to_owned(),
        None => crate::view::home_href(original.0.path(), uri.path()),
    };
    let sep = if back.contains('?') { '&' } else { '?' };
    // The action's URL is `action/<name>`: the dashboard's root is one level up.
    let location = format!("../{back}{sep}done={}", shared.flashes.put(message));
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

fn need<'a>(field: &'a Option<String>, name: &str) -> Result<&'a str, String> {
    field
        .as_deref()
        .ok_or_else(|| format!("the form has no {name}"))
}

/// An error of the operations API as the page shows it.
fn report(e: postpone::Error) -> String {
    e.report().to_string()
}

async fn run(ops: &Ops, name: &str, f: &ActionForm) -> Result<String, String> {
    let topic = f.topic.as_str();
    Ok(match name {
        "pause" => {
            ops.pause(topic).await.map_err(report)?;
            format!("paused {topic}: no worker claims its jobs until it is resumed")
        }
        "resume" => {
            ops.resume(topic).await.map_err(report)?;
            format!("resumed {topic}")
        }
        "run-now" => {
            let id = need(&f.id, "id")?;
            ops.run_now(topic, id).await.map_err(report)?;
            format!("{id} is due now")
        }
        "reschedule" => {
            let id = need(&f.id, "id")?;
            let unit = match f.unit.as_deref() {
                Some("s") => 1,
                Some("h") => 3600,
                Some("d") => 86_400,
                _ => 60,
            };
            let delay = Duration::from_secs(f.amount.unwrap_or(0).saturating_mul(unit));
            let at = ops.reschedule(topic, id, delay).await.map_err(report)?;
            format!("{id} rescheduled to {}", at.format("%Y-%m-%d %H:%M:%S UTC"))
        }
        "cancel" => {
            let id = need(&f.id, "id")?;
            match ops.cancel(topic, id).await.map_err(report)? {
                postpone::CancelStatus::Removed => format!("{id} cancelled"),
                _ => format!(
                    "{id} is running: it will not be retried, and its handler is told to stop"
                ),
            }
        }
        "requeue" => {
            let id = need(&f.id, "id")?;
            ops.requeue_dead(topic, Some(id), &DeadFilter::all(), |_| {})
                .await
                .map_err(report)?;
            format!("{id} requeued: due now")
        }
        "purge" => {
            let id = need(&f.id, "id")?;
            ops.purge_dead(topic, Some(id), &DeadFilter::all(), |_| {})
                .await
                .map_err(report)?;
            format!("dead letters of {id} purged")
        }
        "requeue-all" => {
            let outcome = ops
                .requeue_dead(topic, None, &DeadFilter::all(), |_| {})
                .await
                .map_err(report)?;
            format!(
                "requeued {} dead letter(s) of {topic} ({} skipped: a live job has the id)",
                outcome.done, outcome.skipped
            )
        }
        "purge-all" => {
            let outcome = ops
                .purge_dead(topic, None, &DeadFilter::all(), |_| {})
                .await
                .map_err(report)?;
            format!("purged {} dead letter(s) of {topic}", outcome.done)
        }
        "requeue-group" | "purge-group" => {
            let group = need(&f.group, "group")?;
            bulk(ops, topic, group, name == "requeue-group")
                .await
                .map_err(report)?
        }
        other => format!("unknown action {other:?}"),
    })
}

/// Requeues or purges a group's dead letters one by one, each named by its id and death: the dead
/// letters whose reason has this fingerprint, read again now (the newest
/// [`SCAN`](crate::pages::dead::SCAN)). Another death of the same id, in another group, is never
/// touched. A requeue takes an id's newest death in the group: its older ones there stay dead (the id
/// has a live job again) and count as skipped.
async fn bulk(ops: &Ops, topic: &str, group: &str, requeue: bool) -> postpone::Result<String> {
    let (dead, _) = crate::pages::dead::scan(ops, topic).await?;
    // Newest first, as scanned.
    let mut deaths: Vec<(String, u64)> = dead
        .into_iter()
        .filter(|j| fingerprint(j.reason.as_deref().unwrap_or("")) == group)
        .filter_map(|j| Some((j.id, j.death?)))
        .collect();
    let (mut done, mut skipped) = (0, 0);
    if requeue {
        let mut seen = HashSet::new();
        let before = deaths.len();
        deaths.retain(|(id, _)| seen.insert(id.clone()));
        skipped += before - deaths.len();
    }
    for chunk in deaths.chunks(CONCURRENCY) {
        let results = join_all(chunk.iter().map(|(id, death)| async move {
            if requeue {
                ops.requeue_death(topic, id, *death).await
            } else {
                ops.purge_death(topic, id, *death).await
            }
        }))
        .await;
        for r in results {
            match r {
                Ok(()) => done += 1,
                Err(postpone::Error::JobExists { .. } | postpone::Error::JobNotFound { .. }) => {
                    skipped += 1
                }
                Err(e) => return Err(e),
            }
        }
    }
    let verb = if requeue { "requeued" } else { "purged" };
    Ok(format!(
        "{verb} {done} dead letter(s) of “{group}”{}",
        if skipped > 0 {
            format!(
                " ({skipped} skipped: a live job has the id, or the dead letter went meanwhile)"
            )
        } else {
            String::new()
        }
    ))
}
