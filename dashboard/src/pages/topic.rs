//! A topic: its scheduled, running, dead and kept finished jobs, one page at a time by cursor (never
//! all of them), a search by id prefix (not of kept finished jobs), and pause / resume.

use askama::Template;
use axum::extract::{OriginalUri, Query, State};
use axum::http::Uri;
use axum::response::Response;
use postpone::ops::{Cursor, JobQuery, JobSummary, PageState};
use postpone::TopicCounts;
use serde::Deserialize;

use crate::links;
use crate::view::{render, Chrome, ErrorPage, Flash, Time};

/// Jobs one page shows.
pub(crate) const PAGE: usize = 50;

#[derive(Debug, Deserialize)]
pub(crate) struct Params {
    name: String,
    state: Option<String>,
    /// An id prefix to search for.
    q: Option<String>,
    cursor: Option<String>,
}

/// A tab: scheduled, running, dead or done, with its count.
#[derive(Debug)]
pub(crate) struct Tab {
    pub(crate) label: &'static str,
    pub(crate) count: u64,
    pub(crate) link: String,
    pub(crate) current: bool,
}

/// A job's row.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) link: String,
    pub(crate) at: Time,
    pub(crate) attempt: u32,
    pub(crate) enqueued_at: Option<Time>,
    pub(crate) worker: Option<String>,
    pub(crate) stalls: u32,
    /// The reason it died, or its last error.
    pub(crate) error: Option<String>,
    pub(crate) payload: String,
    /// A kept finished job: "succeeded" or "cancelled".
    pub(crate) finished: Option<&'static str>,
    /// A kept succeeded job's result (JSON, cut), when its type returns one.
    pub(crate) result: Option<String>,
}

/// `text` cut to `max` characters, with an ellipsis when cut.
fn snippet(mut text: String, max: usize) -> String {
    if text.chars().count() > max {
        text = text.chars().take(max - 1).chain(['…']).collect();
    }
    text
}

#[derive(Debug, Template)]
#[template(path = "topic.html")]
pub(crate) struct TopicPage {
    pub(crate) chrome: Chrome,
    pub(crate) name: String,
    pub(crate) state: &'static str,
    pub(crate) at_label: &'static str,
    pub(crate) counts: TopicCounts,
    pub(crate) tabs: Vec<Tab>,
    pub(crate) rows: Vec<Row>,
    pub(crate) prefix: String,
    pub(crate) next: Option<String>,
    pub(crate) first: Option<String>,
    pub(crate) here: String,
    pub(crate) groups_link: String,
}

fn row(topic: &str, j: JobSummary) -> Row {
    Row {
        payload: snippet(j.payload.to_string(), 120),
        finished: j.finished.map(|f| f.as_str()),
        result: j.result.map(|r| snippet(r.to_string(), 120)),
        link: links::dead_letter(topic, &j.id, j.death),
        at: Time::of(j.at),
        attempt: j.attempt,
        enqueued_at: j.enqueued_at.map(Time::of),
        worker: j.worker,
        stalls: j.stalls,
        error: j.reason.or(j.last_error),
        id: j.id,
    }
}

pub(crate) async fn page(
    State(shared): State<crate::State>,
    original: OriginalUri,
    uri: Uri,
    Query(flash): Query<Flash>,
    Query(p): Query<Params>,
) -> Response {
    let chrome = Chrome::new(&shared, &original, &uri, flash, "", p.name.clone());
    let state = links::parse_state(p.state.as_deref());
    let prefix = p.q.clone().unwrap_or_default();
    let mut query = JobQuery::new(state).limit(PAGE);
    if matches!(state, PageState::Dead | PageState::Done) {
        query = query.newest_first();
    }
    // Kept finished jobs are not searched by prefix (the search box is not shown on their tab).
    let prefix = if state == PageState::Done {
        String::new()
    } else {
        prefix
    };
    if !prefix.is_empty() {
        query = query.id_prefix(prefix.clone());
    }
    if let Some(c) = p.cursor.as_deref().filter(|c| !c.is_empty()) {
        match c.parse::<Cursor>() {
            Ok(c) => query = query.cursor(c),
            Err(e) => return ErrorPage::ops(chrome, e),
        }
    }
    let ops = &shared.ops;
    let counts = async { ops.topic(&p.name).await?.counts().await };
    let (counts, page) = tokio::join!(counts, ops.jobs(&p.name, &query));
    let (counts, page) = match (counts, page) {
        (Ok(c), Ok(p)) => (c, p),
        (Err(e), _) | (_, Err(e)) => return ErrorPage::ops(chrome, e),
    };
    let tabs = [
        (
            "Scheduled",
            PageState::Scheduled,
            counts.scheduled + counts.ready,
        ),
        ("Waiting", PageState::Waiting, counts.waiting),
        ("Running", PageState::Running, counts.active),
        ("Dead", PageState::Dead, counts.dead),
        ("Done", PageState::Done, counts.done),
    ]
    .into_iter()
    .map(|(label, s, count)| Tab {
        label,
        count,
        link: links::topic_page(&p.name, s, Some(&prefix), None),
        current: s == state,
    })
    .collect();
    let next = page
        .next
        .map(|c| links::topic_page(&p.name, state, Some(&prefix), Some(&c.to_string())));
    let first = p
        .cursor
        .is_some()
        .then(|| links::topic_page(&p.name, state, Some(&prefix), None));
    render(&TopicPage {
        here: links::topic_page(&p.name, state, Some(&prefix), p.cursor.as_deref()),
        groups_link: links::dead(&p.name),
        state: links::state_name(state),
        at_label: match state {
            PageState::Running => "Lease until",
            PageState::Dead => "Died",
            PageState::Done => "Finished",
            // Not shown: a waiting job has no due time yet.
            PageState::Waiting => "",
            _ => "Due",
        },
        counts,
        tabs,
        rows: page.jobs.into_iter().map(|j| row(&p.name, j)).collect(),
        prefix,
        next,
        first,
        name: p.name,
        chrome,
    })
}
