//! A topic: its scheduled, running, dead and kept finished jobs, one page at a time by cursor (never
//! all of them), a search by id prefix (not of kept finished jobs), pause / resume, and, when it has
//! keyed jobs (fairness by key), a tab of its busiest keys.

use askama::Template;
use axum::extract::{OriginalUri, Query, State};
use axum::http::Uri;
use axum::response::Response;
use postpone::ops::{Cursor, JobQuery, JobSummary, KeysPage, PageState};
use postpone::TopicCounts;
use serde::Deserialize;

use crate::links;
use crate::view::{render, Chrome, ErrorPage, Flash, Time};

/// Jobs one page shows.
pub(crate) const PAGE: usize = 50;

/// Keys the keys tab shows, busiest first.
pub(crate) const KEYS: usize = 50;

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
    /// Its key for fairness, when it has one.
    pub(crate) key: Option<String>,
}

/// A key's row on the keys tab.
#[derive(Debug)]
pub(crate) struct KeyRow {
    /// The key; `None`: the jobs without a key (in a topic with keyed jobs).
    pub(crate) key: Option<String>,
    pub(crate) queued: u64,
    /// `None` when the topic does not count running jobs per key (no max running per key).
    pub(crate) running: Option<u64>,
    /// The limits per key it is under (the workers' last claim; `-` until one claimed keyed jobs;
    /// `none` for the jobs without a key).
    pub(crate) limit: String,
    /// Until when the key is held back (its rate per key, or a handler's `rate_limited`).
    pub(crate) held_until: Option<Time>,
}

/// The keys tab: the busiest keys, and what the store says of them all.
#[derive(Debug)]
pub(crate) struct Keys {
    pub(crate) rows: Vec<KeyRow>,
    /// Keys with a job queued (not those at their max running).
    pub(crate) total: u64,
    /// The rows are the busiest of a sample of the topic's keys.
    pub(crate) sampled: bool,
    pub(crate) running_counted: bool,
}

impl Keys {
    fn of(page: KeysPage) -> Self {
        let counted = page.running_counted;
        let limit = page
            .limits
            .map_or_else(|| "-".to_owned(), |l| l.to_string());
        Keys {
            rows: page
                .keys
                .into_iter()
                .map(|k| KeyRow {
                    limit: match (k.key.is_empty(), k.own_limits, page.limits) {
                        (true, _, Some(_)) => "none".to_owned(),
                        // Its own (set by an operator), in place of the topic's.
                        (false, Some(own), _) => format!("{own} (own)"),
                        _ => limit.clone(),
                    },
                    key: Some(k.key).filter(|k| !k.is_empty()),
                    queued: k.queued,
                    running: counted.then_some(k.running),
                    held_until: k.held_until_ms.map(Time::of_ms),
                })
                .collect(),
            total: page.total,
            sampled: page.sampled,
            running_counted: counted,
        }
    }
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
    /// Whether a job of the page has a key for fairness (then the table has a Key column).
    pub(crate) keyed: bool,
    pub(crate) prefix: String,
    pub(crate) next: Option<String>,
    pub(crate) first: Option<String>,
    pub(crate) here: String,
    pub(crate) groups_link: String,
    /// On the keys tab: the busiest keys.
    pub(crate) keys: Option<Keys>,
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
        key: j.key,
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
    let keys_tab = p.state.as_deref() == Some("keys");
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
    // The keys' counts on every tab (cheap at any number of keys: no key's jobs are looked at), to
    // show the keys tab only for a topic with keyed jobs; the busiest keys on that tab alone.
    let topic = async {
        let topic = ops.topic(&p.name).await?;
        let limit = if keys_tab { KEYS } else { 0 };
        tokio::try_join!(topic.counts(), topic.busiest_keys(limit))
    };
    let jobs = async {
        match keys_tab {
            true => Ok(None),
            false => ops.jobs(&p.name, &query).await.map(Some),
        }
    };
    let (topic, page) = tokio::join!(topic, jobs);
    let ((counts, keys), page) = match (topic, page) {
        (Ok(t), Ok(p)) => (t, p),
        (Err(e), _) | (_, Err(e)) => return ErrorPage::ops(chrome, e),
    };
    let mut tabs: Vec<Tab> = [
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
        current: s == state && !keys_tab,
    })
    .collect();
    if keys_tab || keys.total > 0 || keys.running_counted {
        tabs.push(Tab {
            label: "Busiest keys",
            count: keys.total,
            link: links::topic_keys(&p.name),
            current: keys_tab,
        });
    }
    let (rows, next) = match page {
        Some(page) => (
            page.jobs.into_iter().map(|j| row(&p.name, j)).collect(),
            page.next,
        ),
        None => (Vec::new(), None),
    };
    let next = next.map(|c| links::topic_page(&p.name, state, Some(&prefix), Some(&c.to_string())));
    let first = (p.cursor.is_some() && !keys_tab)
        .then(|| links::topic_page(&p.name, state, Some(&prefix), None));
    render(&TopicPage {
        here: match keys_tab {
            true => links::topic_keys(&p.name),
            false => links::topic_page(&p.name, state, Some(&prefix), p.cursor.as_deref()),
        },
        groups_link: links::dead(&p.name),
        keys: keys_tab.then(|| Keys::of(keys)),
        state: match keys_tab {
            true => "keys",
            false => links::state_name(state),
        },
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
        keyed: rows.iter().any(|r: &Row| r.key.is_some()),
        rows,
        prefix,
        next,
        first,
        name: p.name,
        chrome,
    })
}
