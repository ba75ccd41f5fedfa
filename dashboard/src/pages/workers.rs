//! The live workers, from their heartbeats, and the store's health (the `doctor` checks).

use askama::Template;
use axum::extract::{OriginalUri, Query, State};
use axum::http::Uri;
use axum::response::Response;
use postpone::ops::{Check, Level, PageState, WorkerInfo};

use crate::links;
use crate::view::{render, Chrome, ErrorPage, Flash, Time};

/// A worker's row.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) info: WorkerInfo,
    pub(crate) started: Time,
    pub(crate) beat: Time,
    pub(crate) expires: Time,
    /// Topics served: name, link, lease as text.
    pub(crate) topics: Vec<(String, String, String)>,
}

/// A `doctor` check as the page shows it.
#[derive(Debug)]
pub(crate) struct Health {
    pub(crate) check: Check,
    /// "ok", "warn" or "bad".
    pub(crate) level: &'static str,
}

#[derive(Debug, Template)]
#[template(path = "workers.html")]
pub(crate) struct WorkersPage {
    pub(crate) chrome: Chrome,
    pub(crate) rows: Vec<Row>,
    /// The checks, or why they could not be made.
    pub(crate) health: Result<Vec<Health>, String>,
}

pub(crate) async fn page(
    State(shared): State<crate::State>,
    original: OriginalUri,
    uri: Uri,
    Query(flash): Query<Flash>,
) -> Response {
    let chrome = Chrome::new(&shared, &original, &uri, flash, "workers", "Workers".into());
    let (workers, checks) = tokio::join!(shared.ops.workers(), shared.ops.doctor());
    let health = checks
        .map(|checks| {
            checks
                .into_iter()
                .map(|check| Health {
                    level: match check.level {
                        Level::Ok => "ok",
                        Level::Warn => "warn",
                        _ => "bad",
                    },
                    check,
                })
                .collect()
        })
        .map_err(|e| e.report().to_string());
    let workers = match workers {
        Ok(w) => w,
        Err(e) => return ErrorPage::ops(chrome, e),
    };
    let rows = workers
        .into_iter()
        .map(|info| Row {
            started: Time::of(info.started_at),
            beat: Time::of(info.last_beat),
            expires: Time::of(info.expires_at),
            topics: info
                .topics
                .iter()
                .map(|t| {
                    let lease =
                        postpone::ops::human_duration(std::time::Duration::from_millis(t.lease_ms));
                    (
                        t.name.clone(),
                        links::topic(&t.name, PageState::Running),
                        lease,
                    )
                })
                .collect(),
            info,
        })
        .collect();
    render(&WorkersPage {
        chrome,
        rows,
        health,
    })
}
