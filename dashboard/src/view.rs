//! What every page shares: the chrome (base URL, CSRF token, read-only, a message after an action), times
//! as `<time>` elements, error pages, and the script and stylesheet the router serves.

use askama::Template;
use axum::extract::OriginalUri;
use axum::http::{header, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::Shared;

/// The vendored script: `<time>` formatting in the browser's zone, live figures by server-sent events,
/// confirmations. Plain JavaScript, no build step.
const SCRIPT: &str = include_str!("../assets/dashboard.js");
const STYLESHEET: &str = include_str!("../assets/dashboard.css");

/// What every page's layout needs.
#[derive(Debug)]
pub(crate) struct Chrome {
    /// `<base href>`: the dashboard's root, relative to this page.
    pub(crate) base: String,
    /// The overview, relative to the root.
    pub(crate) home: String,
    /// The CSRF token for forms.
    pub(crate) csrf: String,
    /// Whether actions are hidden (and refused).
    pub(crate) read_only: bool,
    /// What the last action did, shown once: a message the server kept (see [`crate::flash`]).
    pub(crate) flash: Option<String>,
    /// The nav entry that is current: "overview", "workers", "batches", or "" for a topic.
    pub(crate) nav: &'static str,
    /// The page's title.
    pub(crate) title: String,
}

/// The key of a message handed to the page an action redirects to (never the message itself).
#[derive(Debug, Deserialize)]
pub(crate) struct Flash {
    done: Option<String>,
}

impl Chrome {
    pub(crate) fn new(
        shared: &Shared,
        original: &OriginalUri,
        uri: &Uri,
        flash: Flash,
        nav: &'static str,
        title: String,
    ) -> Self {
        Chrome {
            base: base_href(original.0.path(), uri.path()),
            home: home_href(original.0.path(), uri.path()),
            csrf: shared.csrf.token().to_owned(),
            read_only: shared.read_only,
            flash: flash.done.and_then(|key| shared.flashes.take(&key)),
            nav,
            title,
        }
    }
}

/// The dashboard's root relative to a page. Every page but the overview is one level below the root
/// (`topic`, `job`, ...): `./`. The overview is the root itself, which a nested router also serves
/// without its trailing slash (`/jobs`): then the root is `jobs/`.
fn base_href(original_path: &str, inner_path: &str) -> String {
    if inner_path != "/" || original_path.ends_with('/') {
        return "./".to_owned();
    }
    let last = original_path.rsplit('/').next().unwrap_or("");
    // The raw path: its segment is already percent-encoded.
    format!("./{last}/")
}

/// The overview relative to the dashboard's root (its "directory"). Served alone, that is `./`; nested
/// at `/jobs`, axum serves the overview at `/jobs` but not at `/jobs/`, so it is `../jobs`.
pub(crate) fn home_href(original_path: &str, inner_path: &str) -> String {
    let mount = match inner_path {
        "/" => original_path,
        _ => original_path.strip_suffix(inner_path).unwrap_or(""),
    };
    let mount = mount.trim_end_matches('/');
    match mount.rsplit('/').next() {
        Some(last) if !last.is_empty() => format!("../{last}"),
        _ => "./".to_owned(),
    }
}

/// A time shown in the browser's zone by the script, absolute and relative; UTC without it.
#[derive(Debug, Clone)]
pub(crate) struct Time {
    /// RFC 3339 in UTC, for `<time datetime>`.
    pub(crate) iso: String,
    /// What shows before the script runs.
    pub(crate) utc: String,
}

impl Time {
    pub(crate) fn of(t: DateTime<Utc>) -> Self {
        Time {
            iso: t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            utc: t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        }
    }

    pub(crate) fn of_ms(ms: i64) -> Self {
        Time::of(DateTime::from_timestamp_millis(ms).unwrap_or_default())
    }
}

/// Renders a page, or a plain error when the template fails.
pub(crate) fn render(t: &impl Template) -> Response {
    match t.render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("template error: {e}"),
        )
            .into_response(),
    }
}

/// A page that could not be made: the error as text, escaped, with a way back.
#[derive(Debug, Template)]
#[template(path = "error.html")]
pub(crate) struct ErrorPage {
    pub(crate) chrome: Chrome,
    pub(crate) status: u16,
    pub(crate) message: String,
}

impl ErrorPage {
    pub(crate) fn response(chrome: Chrome, status: StatusCode, message: String) -> Response {
        let page = ErrorPage {
            chrome,
            status: status.as_u16(),
            message,
        };
        let mut r = render(&page);
        *r.status_mut() = status;
        r
    }

    /// An error of the operations API: 404 for an unknown topic, else 502 (the store failed).
    pub(crate) fn ops(chrome: Chrome, e: postpone::Error) -> Response {
        let status = match e {
            postpone::Error::TopicNotFound { .. } | postpone::Error::InvalidTopic { .. } => {
                StatusCode::NOT_FOUND
            }
            postpone::Error::InvalidCursor { .. }
            | postpone::Error::InvalidId { .. }
            | postpone::Error::InvalidBatchId { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::BAD_GATEWAY,
        };
        Self::response(chrome, status, e.report().to_string())
    }
}

pub(crate) async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        SCRIPT,
    )
}

pub(crate) async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        STYLESHEET,
    )
}

#[cfg(test)]
mod tests {
    use super::{base_href, home_href};

    #[test]
    fn the_root_relative_to_each_page() {
        assert_eq!(base_href("/", "/"), "./");
        assert_eq!(base_href("/jobs/", "/"), "./");
        assert_eq!(base_href("/jobs", "/"), "./jobs/");
        assert_eq!(base_href("/admin/jobs", "/"), "./jobs/");
        assert_eq!(base_href("/jobs/topic", "/topic"), "./");
        assert_eq!(home_href("/", "/"), "./");
        assert_eq!(home_href("/topic", "/topic"), "./");
        assert_eq!(home_href("/jobs", "/"), "../jobs");
        assert_eq!(home_href("/admin/jobs/topic", "/topic"), "../jobs");
        assert_eq!(home_href("/jobs/action/pause", "/action/pause"), "../jobs");
    }
}
