//! A topic's dead letters grouped by error fingerprint, each group with its requeue and purge.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{OriginalUri, Query, State};
use axum::http::Uri;
use axum::response::Response;
use chrono::{DateTime, Utc};
use postpone::ops::{JobQuery, JobSummary, Ops, PageState, MAX_PAGE};
use serde::Deserialize;

use crate::fingerprint::fingerprint;
use crate::links;
use crate::view::{render, Chrome, ErrorPage, Flash, Time};

/// Most dead letters one grouping reads (newest first): the page says when there were more.
pub(crate) const SCAN: usize = 10_000;
/// Members a group lists unless it is the one shown alone.
const SAMPLE: usize = 5;

#[derive(Debug, Deserialize)]
pub(crate) struct Params {
    topic: String,
    /// One group's fingerprint: show it alone, with all its members.
    group: Option<String>,
}

/// A dead letter in a group.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) id: String,
    pub(crate) link: String,
    pub(crate) died: Time,
    pub(crate) reason: String,
}

/// Dead letters whose reasons share a fingerprint.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) fingerprint: String,
    pub(crate) link: String,
    pub(crate) count: usize,
    pub(crate) newest: Time,
    pub(crate) oldest: Time,
    /// Distinct reasons, a few.
    pub(crate) examples: Vec<String>,
    pub(crate) members: Vec<Member>,
}

/// The newest dead letters of a topic (at most [`SCAN`]) and whether there were more.
pub(crate) async fn scan(ops: &Ops, topic: &str) -> postpone::Result<(Vec<JobSummary>, bool)> {
    let mut query = JobQuery::new(PageState::Dead)
        .newest_first()
        .limit(MAX_PAGE);
    let mut all = Vec::new();
    loop {
        let page = ops.jobs(topic, &query).await?;
        all.extend(page.jobs);
        match page.next {
            Some(next) if all.len() < SCAN => query = query.cursor(next),
            Some(_) => return Ok((all, true)),
            None => return Ok((all, false)),
        }
    }
}

/// Dead letters grouped by fingerprint, largest group first.
pub(crate) fn group(topic: &str, dead: Vec<JobSummary>) -> Vec<Group> {
    let mut by: HashMap<String, Vec<JobSummary>> = HashMap::new();
    for j in dead {
        by.entry(fingerprint(j.reason.as_deref().unwrap_or("")))
            .or_default()
            .push(j);
    }
    let mut groups: Vec<Group> = by
        .into_iter()
        .map(|(fp, members)| {
            let times = members.iter().map(|m| m.at);
            let newest = times.clone().max().unwrap_or_default();
            let oldest: DateTime<Utc> = times.min().unwrap_or_default();
            let mut examples: Vec<String> = Vec::new();
            for m in &members {
                let r = m.reason.clone().unwrap_or_default();
                if examples.len() < 3 && !examples.contains(&r) {
                    examples.push(r);
                }
            }
            Group {
                link: format!("{}&group={}", links::dead(topic), links::encode(&fp)),
                count: members.len(),
                newest: Time::of(newest),
                oldest: Time::of(oldest),
                examples,
                members: members
                    .into_iter()
                    .map(|m| Member {
                        link: links::dead_letter(topic, &m.id, m.death),
                        died: Time::of(m.at),
                        reason: m.reason.unwrap_or_default(),
                        id: m.id,
                    })
                    .collect(),
                fingerprint: fp,
            }
        })
        .collect();
    groups.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.fingerprint.cmp(&b.fingerprint))
    });
    groups
}

#[derive(Debug, Template)]
#[template(path = "dead.html")]
pub(crate) struct DeadPage {
    pub(crate) chrome: Chrome,
    pub(crate) topic: String,
    pub(crate) groups: Vec<Group>,
    pub(crate) total: usize,
    pub(crate) more: bool,
    pub(crate) alone: bool,
    pub(crate) sample: usize,
    pub(crate) scan: usize,
    pub(crate) topic_link: String,
    pub(crate) list_link: String,
    pub(crate) all_link: String,
    pub(crate) here: String,
}

pub(crate) async fn page(
    State(shared): State<crate::State>,
    original: OriginalUri,
    uri: Uri,
    Query(flash): Query<Flash>,
    Query(p): Query<Params>,
) -> Response {
    let title = format!("Dead letters · {}", p.topic);
    let chrome = Chrome::new(&shared, &original, &uri, flash, "", title);
    let (dead, more) = match scan(&shared.ops, &p.topic).await {
        Ok(d) => d,
        Err(e) => return ErrorPage::ops(chrome, e),
    };
    let total = dead.len();
    let mut groups = group(&p.topic, dead);
    let alone = p.group.is_some();
    if let Some(fp) = &p.group {
        groups.retain(|g| &g.fingerprint == fp);
    }
    let here = match &p.group {
        Some(fp) => format!("{}&group={}", links::dead(&p.topic), links::encode(fp)),
        None => links::dead(&p.topic),
    };
    render(&DeadPage {
        topic_link: links::topic(&p.topic, PageState::Scheduled),
        list_link: links::topic(&p.topic, PageState::Dead),
        all_link: links::dead(&p.topic),
        here,
        groups,
        total,
        more,
        alone,
        sample: if alone { usize::MAX } else { SAMPLE },
        scan: SCAN,
        topic: p.topic,
        chrome,
    })
}
