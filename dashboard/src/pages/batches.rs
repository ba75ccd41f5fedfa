//! Batches: the namespace's batches newest first, and one batch (its counts, which callbacks fired,
//! its members with their states, each linked to its job), both paged by offset.

use askama::Template;
use axum::extract::{OriginalUri, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use postpone::ops::{member_state_name, BatchStatus, PageState};
use serde::Deserialize;

use crate::links;
use crate::view::{render, Chrome, ErrorPage, Flash, Time};

/// Batches, or members, one page shows.
pub(crate) const PAGE: usize = 50;

/// How many days a completed batch stays readable.
pub(crate) const KEEP_DAYS: u64 = postpone::store::workflow::BATCH_KEEP_MS / 86_400_000;

/// A batch as a row of the list or the head of its page.
#[derive(Debug)]
pub(crate) struct Summary {
    pub(crate) info: BatchStatus,
    pub(crate) link: String,
    pub(crate) created: Time,
    pub(crate) completed: Option<Time>,
    /// "open", "closed" or "completed".
    pub(crate) state: &'static str,
    /// Its callbacks: name, and whether it fired.
    pub(crate) callbacks: Vec<(&'static str, bool)>,
}

impl Summary {
    fn new(info: BatchStatus) -> Self {
        Summary {
            link: links::batch(&info.id, 0),
            created: Time::of(info.created_at),
            completed: info.completed_at.map(Time::of),
            state: match (info.is_complete(), info.closed) {
                (true, _) => "completed",
                (false, true) => "closed",
                (false, false) => "open",
            },
            callbacks: info
                .callbacks
                .iter()
                .map(|&(kind, fired)| (kind.as_str(), fired))
                .collect(),
            info,
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListParams {
    offset: Option<usize>,
}

#[derive(Debug, Template)]
#[template(path = "batches.html")]
pub(crate) struct BatchesPage {
    pub(crate) chrome: Chrome,
    pub(crate) rows: Vec<Summary>,
    pub(crate) first: Option<String>,
    pub(crate) next: Option<String>,
    pub(crate) keep_days: u64,
}

/// `batches[?offset=N]`.
pub(crate) async fn list(
    State(shared): State<crate::State>,
    original: OriginalUri,
    uri: Uri,
    Query(flash): Query<Flash>,
    Query(p): Query<ListParams>,
) -> Response {
    let chrome = Chrome::new(&shared, &original, &uri, flash, "batches", "Batches".into());
    let offset = p.offset.unwrap_or(0);
    let page = match shared.ops.batches(offset, PAGE).await {
        Ok(page) => page,
        Err(e) => return ErrorPage::ops(chrome, e),
    };
    render(&BatchesPage {
        rows: page.batches.into_iter().map(Summary::new).collect(),
        first: (offset > 0).then(|| links::batches(0)),
        next: page.next.map(links::batches),
        keep_days: KEEP_DAYS,
        chrome,
    })
}

#[derive(Debug, Deserialize)]
pub(crate) struct BatchParams {
    id: String,
    offset: Option<usize>,
}

/// A member's row.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) topic: String,
    pub(crate) topic_link: String,
    pub(crate) partition: u16,
    pub(crate) id: String,
    pub(crate) link: String,
    /// "pending", "succeeded", "dead" or "cancelled".
    pub(crate) state: &'static str,
}

#[derive(Debug, Template)]
#[template(path = "batch.html")]
pub(crate) struct BatchPage {
    pub(crate) chrome: Chrome,
    pub(crate) batch: Summary,
    pub(crate) members: Vec<Member>,
    pub(crate) partitioned: bool,
    /// The position of the page's first member, from 1.
    pub(crate) from: usize,
    pub(crate) first: Option<String>,
    pub(crate) next: Option<String>,
}

/// `batch?id=…[&offset=N]`.
pub(crate) async fn page(
    State(shared): State<crate::State>,
    original: OriginalUri,
    uri: Uri,
    Query(flash): Query<Flash>,
    Query(p): Query<BatchParams>,
) -> Response {
    let title = format!("Batch · {}", p.id);
    let chrome = Chrome::new(&shared, &original, &uri, flash, "batches", title);
    let offset = p.offset.unwrap_or(0);
    let ops = &shared.ops;
    let (batch, members) = tokio::join!(ops.batch(&p.id), ops.batch_members(&p.id, offset, PAGE));
    let (batch, members) = match (batch, members) {
        (Ok(b), Ok(m)) => (b, m),
        (Err(e), _) | (_, Err(e)) => return ErrorPage::ops(chrome, e),
    };
    let Some(batch) = batch else {
        let message = format!(
            "no batch {:?}: it never existed, or it completed more than {KEEP_DAYS} days ago",
            p.id
        );
        return ErrorPage::response(chrome, StatusCode::NOT_FOUND, message);
    };
    let next = members.next.map(|n| links::batch(&p.id, n));
    let members: Vec<Member> = members
        .members
        .into_iter()
        .map(|m| Member {
            topic_link: links::topic(&m.topic, PageState::Scheduled),
            link: links::job(&m.topic, &m.id),
            state: member_state_name(m.state),
            partition: m.partition,
            topic: m.topic,
            id: m.id,
        })
        .collect();
    render(&BatchPage {
        partitioned: members.iter().any(|m| m.partition > 0),
        from: offset.saturating_add(1),
        first: (offset > 0).then(|| links::batch(&p.id, 0)),
        next,
        members,
        batch: Summary::new(batch),
        chrome,
    })
}
