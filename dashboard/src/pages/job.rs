//! One job: payload, attempt k of n, the retry timeline, why it is not running (a waiting job: the
//! jobs it waits for, linked), its batch (linked), a running job's progress, a kept finished job's
//! result, and its actions.

use askama::Template;
use axum::extract::{OriginalUri, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use postpone::ops::{JobDetail, PageState};
use postpone::JobState;
use serde::Deserialize;

use crate::links;
use crate::timeline::{timeline, Step};
use crate::view::{render, Chrome, ErrorPage, Flash, Time};

#[derive(Debug, Deserialize)]
pub(crate) struct Params {
    topic: String,
    id: String,
    /// The death a dead letter's link meant.
    death: Option<u64>,
}

/// A job that a waiting job waits for, linked to its page.
#[derive(Debug)]
pub(crate) struct Parent {
    pub(crate) topic: String,
    pub(crate) partition: u16,
    pub(crate) id: String,
    pub(crate) link: String,
}

/// The batch a member or callback belongs to, linked to its page.
#[derive(Debug)]
pub(crate) struct BatchLink {
    pub(crate) id: String,
    pub(crate) link: String,
}

#[derive(Debug, Template)]
#[template(path = "job.html")]
pub(crate) struct JobPage {
    pub(crate) chrome: Chrome,
    pub(crate) job: JobDetail,
    /// "scheduled", "waiting", "running", "dead", "succeeded" or "cancelled".
    pub(crate) state: &'static str,
    /// Due time, lease deadline, time of death, or when it finished.
    pub(crate) at: Option<Time>,
    pub(crate) at_label: &'static str,
    pub(crate) reason: Option<String>,
    /// The jobs a waiting job waits for (empty in other states).
    pub(crate) parents: Vec<Parent>,
    /// Its batch, when it is a member or a callback of one.
    pub(crate) batch: Option<BatchLink>,
    pub(crate) enqueued_at: Time,
    pub(crate) payload: String,
    /// A kept succeeded job's result, as pretty JSON.
    pub(crate) result: Option<String>,
    pub(crate) steps: Vec<Step>,
    pub(crate) topic_link: String,
    pub(crate) list_link: String,
    pub(crate) groups_link: String,
    /// The topic's busiest keys (shown beside a keyed job's key).
    pub(crate) keys_link: String,
    pub(crate) here: String,
    /// The page without a death: where a requeue goes back to.
    pub(crate) live_link: String,
    /// When the link meant a death other than the one shown: what happened to it.
    pub(crate) other_death: Option<String>,
}

pub(crate) async fn page(
    State(shared): State<crate::State>,
    original: OriginalUri,
    uri: Uri,
    Query(flash): Query<Flash>,
    Query(p): Query<Params>,
) -> Response {
    let chrome = Chrome::new(
        &shared,
        &original,
        &uri,
        flash,
        "",
        format!("{} · {}", p.id, p.topic),
    );
    let (job, now) = tokio::join!(shared.ops.job(&p.topic, &p.id), shared.ops.now_ms());
    let (job, now) = match (job, now) {
        (Ok(j), Ok(n)) => (j, n),
        (Err(e), _) | (_, Err(e)) => return ErrorPage::ops(chrome, e),
    };
    let Some(job) = job else {
        let message = format!(
            "no job {:?} in topic {:?}: it finished or was cancelled and its topic keeps no finished \
             jobs, was purged, or never existed",
            p.id, p.topic
        );
        return ErrorPage::response(chrome, StatusCode::NOT_FOUND, message);
    };
    let now = chrono::DateTime::from_timestamp_millis(now).unwrap_or_default();
    // The operations API shows an id's live job, else its newest death: say so when the link meant
    // another death.
    let other_death = p.death.filter(|d| job.death != Some(*d)).map(|d| match job.death {
        Some(shown) => format!(
            "The link was to death #{d} of this id; this is its newest dead letter, death #{shown} \
             (older deaths are listed on the topic's dead tab)."
        ),
        None => format!(
            "The link was to death #{d} of this id, which is now a live job again: this is the live job."
        ),
    });
    let (state, list_state, at, at_label, reason) = match &job.state {
        JobState::Scheduled { due_at } => (
            "scheduled",
            PageState::Scheduled,
            Some(Time::of(*due_at)),
            "Due",
            None,
        ),
        // No due time yet: the jobs it waits for are listed instead.
        JobState::Waiting { .. } => ("waiting", PageState::Waiting, None, "", None),
        JobState::Running { lease_until } => (
            "running",
            PageState::Running,
            Some(Time::of(*lease_until)),
            "Lease until",
            None,
        ),
        JobState::Dead { died_at, reason } => (
            "dead",
            PageState::Dead,
            Some(Time::of(*died_at)),
            "Died",
            Some(reason.clone()),
        ),
        JobState::Succeeded { finished_at } => (
            "succeeded",
            PageState::Done,
            Some(Time::of(*finished_at)),
            "Finished",
            None,
        ),
        JobState::Cancelled { cancelled_at } => (
            "cancelled",
            PageState::Done,
            Some(Time::of(*cancelled_at)),
            "Cancelled",
            None,
        ),
        _ => ("unknown", PageState::Scheduled, None, "", None),
    };
    let parents = job
        .parents()
        .into_iter()
        .map(|p| Parent {
            link: links::job(&p.topic, &p.id),
            topic: p.topic,
            partition: p.partition,
            id: p.id,
        })
        .collect();
    let batch = job.batch_id().map(|id| BatchLink {
        id: id.to_owned(),
        link: links::batch(id, 0),
    });
    render(&JobPage {
        parents,
        batch,
        steps: timeline(&job, now),
        payload: serde_json::to_string_pretty(&job.payload).unwrap_or_default(),
        result: job
            .result
            .as_ref()
            .map(|r| serde_json::to_string_pretty(r).unwrap_or_default()),
        enqueued_at: Time::of(job.enqueued_at),
        topic_link: links::topic(&job.topic, PageState::Scheduled),
        list_link: links::topic(&job.topic, list_state),
        groups_link: links::dead(&job.topic),
        keys_link: links::topic_keys(&job.topic),
        here: links::dead_letter(&job.topic, &job.id, job.death),
        other_death,
        live_link: links::job(&job.topic, &job.id),
        state,
        at,
        at_label,
        reason,
        job,
        chrome,
    })
}
