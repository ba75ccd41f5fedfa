//! The overview: every topic with its counts, the last hour's throughput, its pause state; live workers.

use askama::Template;
use axum::extract::{OriginalUri, Query, State};
use axum::http::Uri;
use axum::response::Response;
use futures_util::future::join_all;
use postpone::ops::{PageState, TopicInfo};

use super::chart::{Chart, MINUTES};
use crate::links;
use crate::view::{render, Chrome, ErrorPage, Flash};

/// A topic's row.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) info: TopicInfo,
    pub(crate) link: String,
    pub(crate) running_link: String,
    pub(crate) waiting_link: String,
    pub(crate) dead_link: String,
    pub(crate) groups_link: String,
    pub(crate) serving: usize,
    pub(crate) chart: Option<Chart>,
}

#[derive(Debug, Template)]
#[template(path = "overview.html")]
pub(crate) struct Overview {
    pub(crate) chrome: Chrome,
    pub(crate) rows: Vec<Row>,
    pub(crate) workers: usize,
    pub(crate) minutes: u32,
}

pub(crate) async fn page(
    State(shared): State<crate::State>,
    original: OriginalUri,
    uri: Uri,
    Query(flash): Query<Flash>,
) -> Response {
    let chrome = Chrome::new(
        &shared,
        &original,
        &uri,
        flash,
        "overview",
        "Overview".into(),
    );
    let ops = &shared.ops;
    let (topics, workers, now_ms) = tokio::join!(ops.topics(), ops.workers(), ops.now_ms());
    let (topics, workers, now_ms) = match (topics, workers, now_ms) {
        (Ok(t), Ok(w), Ok(n)) => (t, w, n),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return ErrorPage::ops(chrome, e),
    };
    let histories = join_all(topics.iter().map(|t| ops.history(&t.name, MINUTES))).await;
    let rows = topics
        .into_iter()
        .zip(histories)
        .map(|(info, history)| Row {
            link: links::topic(&info.name, PageState::Scheduled),
            running_link: links::topic(&info.name, PageState::Running),
            waiting_link: links::topic(&info.name, PageState::Waiting),
            dead_link: links::topic(&info.name, PageState::Dead),
            groups_link: links::dead(&info.name),
            serving: workers.iter().filter(|w| w.serves(&info.name)).count(),
            // A topic whose history cannot be read still shows its counts.
            chart: history.ok().map(|h| Chart::new(&h, now_ms)),
            info,
        })
        .collect();
    render(&Overview {
        chrome,
        rows,
        workers: workers.len(),
        minutes: MINUTES,
    })
}
