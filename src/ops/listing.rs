//! Jobs by state, paged by cursor: scheduled by due time, waiting for other jobs by id, running by
//! lease deadline, dead by time of death, kept finished jobs by when they finished, merged across
//! partitions; and the search by id prefix.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::workers::worker_id;
use crate::client::Topic;
use crate::error::{Error, Result};
use crate::partition::store_topic;
use crate::record::Record;
use crate::store::{Ended, PageEntry, PagePosition, PageQuery, PageState};
use crate::time::ms_to_time;

/// Most jobs one page holds.
pub const MAX_PAGE: usize = 1000;

/// Where the next page of a listing starts: opaque text, handed out with each page
/// ([`JobPage::next`]) and given back to get the next one (`Display` and `FromStr` round-trip it, for
/// a command line or a URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor(Place);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    /// Right after this entry of an ordered listing.
    After(PagePosition),
    /// A search by prefix: partition, the store's cursor in it, and how many of that step's entries
    /// were already handed out (a store step may find more than a page holds).
    Search(u16, Option<String>, usize),
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Place::After(p) => write!(f, "a.{}.{}", p.score, hex(&p.member)),
            Place::Search(p, None, skip) => write!(f, "s.{p}.{skip}."),
            Place::Search(p, Some(c), skip) => write!(f, "s.{p}.{skip}.{}", hex(c)),
        }
    }
}

impl FromStr for Cursor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid_cursor(s);
        let mut parts = s.splitn(3, '.');
        let (kind, a, b) = (parts.next(), parts.next(), parts.next());
        let place = match (kind, a, b) {
            (Some("a"), Some(score), Some(member)) => Place::After(PagePosition {
                score: score.parse().map_err(|_| bad())?,
                member: unhex(member).ok_or_else(bad)?,
            }),
            (Some("s"), Some(p), Some(rest)) => {
                let (skip, c) = rest.split_once('.').ok_or_else(bad)?;
                Place::Search(
                    p.parse().map_err(|_| bad())?,
                    match c {
                        "" => None,
                        c => Some(unhex(c).ok_or_else(bad)?),
                    },
                    skip.parse().map_err(|_| bad())?,
                )
            }
            _ => return Err(bad()),
        };
        Ok(Cursor(place))
    }
}

/// Which page of which jobs: see [`Ops::jobs`](super::Ops::jobs).
///
/// ```
/// use postpone::ops::{JobQuery, PageState};
///
/// let first = JobQuery::new(PageState::Dead).newest_first().limit(50);
/// let by_id = JobQuery::new(PageState::Scheduled).id_prefix("order:4");
/// # let _ = (first, by_id);
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct JobQuery {
    state: PageState,
    newest_first: bool,
    limit: usize,
    cursor: Option<Cursor>,
    id_prefix: Option<String>,
}

impl JobQuery {
    /// The first 20 jobs in `state`, oldest first (earliest due, earliest lease deadline, earliest
    /// death, earliest finish).
    pub fn new(state: PageState) -> Self {
        JobQuery {
            state,
            newest_first: false,
            limit: 20,
            cursor: None,
            id_prefix: None,
        }
    }

    /// Newest (latest) first.
    pub fn newest_first(mut self) -> Self {
        self.newest_first = true;
        self
    }

    /// At most `limit` jobs (1 to [`MAX_PAGE`]).
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit.clamp(1, MAX_PAGE);
        self
    }

    /// The page after the one that gave this cursor.
    pub fn cursor(mut self, cursor: Cursor) -> Self {
        self.cursor = Some(cursor);
        self
    }

    /// Only jobs whose id starts with `prefix`. Dead letters are found in id order in O(log n + page);
    /// scheduled and running jobs by a scan of the topic, in no particular order, each page examining a
    /// bounded number of jobs: a page may hold fewer than the limit (even none) and still have a next
    /// one. Kept finished jobs ([`PageState::Done`]) are not searched: such a listing fails with
    /// [`Error::InvalidConfig`]. (A job whose whole id is known is found directly by
    /// [`Ops::job`](super::Ops::job), finished and kept ones too.)
    pub fn id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.id_prefix = Some(prefix.into());
        self
    }
}

/// How a kept finished job ended (as JSON: `"succeeded"`, `"cancelled"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Finished {
    /// Its handler succeeded.
    Succeeded,
    /// It was cancelled.
    Cancelled,
}

impl Finished {
    /// `"succeeded"` or `"cancelled"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Finished::Succeeded => "succeeded",
            Finished::Cancelled => "cancelled",
        }
    }
}

/// A job in a listing.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct JobSummary {
    /// Its id.
    pub id: String,
    /// Its partition (0 for a topic of one partition).
    pub partition: u16,
    /// Its state.
    pub state: PageState,
    /// When it is due (scheduled), its lease deadline (running), when it died (dead), or when it
    /// finished (done). A waiting job has no due time yet: this is the time its store sorts it at
    /// ([`WAITING_DUE_MS`](crate::store::WAITING_DUE_MS), the first instant of year 10000).
    pub at: DateTime<Utc>,
    /// The attempt it is on (dead: the attempts it ran).
    pub attempt: u32,
    /// When it was first enqueued.
    pub enqueued_at: Option<DateTime<Utc>>,
    /// Its payload, as JSON (a string when it is not JSON).
    pub payload: serde_json::Value,
    /// How often its lease expired.
    pub stalls: u32,
    /// The worker holding it (running jobs), when known.
    pub worker: Option<String>,
    /// A dead letter's death number (with the id, the dead letter).
    pub death: Option<u64>,
    /// Why it died (dead letters).
    pub reason: Option<String>,
    /// Its last error, if an attempt failed.
    pub last_error: Option<String>,
    /// How a kept finished job ended (state done); `None` in other states.
    pub finished: Option<Finished>,
    /// A kept succeeded job's result as JSON (a string when it is not JSON), when its type returns one.
    pub result: Option<serde_json::Value>,
    /// Its key for fairness (see [`JobDetail::key`](super::JobDetail::key)); `None` for a job without
    /// one and for a kept finished job.
    pub key: Option<String>,
}

impl JobSummary {
    fn new(e: PageEntry, partition: u16, state: PageState) -> Self {
        let record = Record::decode(&e.record).ok();
        let (death, reason) = match e.death {
            Some((seq, reason)) => (Some(seq), Some(reason)),
            None => (None, None),
        };
        let (finished, result) = match e.ended {
            Some(Ended::Succeeded { result }) => (Some(Finished::Succeeded), result_json(&result)),
            Some(Ended::Cancelled) => (Some(Finished::Cancelled), None),
            _ => (None, None),
        };
        JobSummary {
            partition,
            state,
            at: ms_to_time(e.score),
            attempt: record.as_ref().map_or(0, |r| r.attempt),
            enqueued_at: record.as_ref().map(|r| ms_to_time(r.enqueued_at_ms)),
            payload: record
                .as_ref()
                .map_or(serde_json::Value::Null, |r| payload_json(&r.payload)),
            stalls: e.stalls,
            worker: e.holder.map(worker_id),
            death,
            reason,
            last_error: record.and_then(|r| r.errors.last().map(|e| e.message.clone())),
            finished,
            result,
            key: e.key,
            id: e.id,
        }
    }

    fn position(&self) -> PagePosition {
        let member = match self.death {
            Some(seq) => crate::store::Death::new(self.id.clone(), seq).member(),
            None => self.id.clone(),
        };
        PagePosition {
            score: self.at.timestamp_millis(),
            member,
        }
    }
}

/// A payload as JSON: parsed, or the text itself when it is not JSON.
pub(crate) fn payload_json(payload: &[u8]) -> serde_json::Value {
    serde_json::from_slice(payload).unwrap_or_else(|_| {
        serde_json::Value::String(String::from_utf8_lossy(payload).into_owned())
    })
}

/// A kept result as JSON (a string when it is not JSON); `None` when empty (its type returns none).
pub(crate) fn result_json(result: &[u8]) -> Option<serde_json::Value> {
    (!result.is_empty()).then(|| payload_json(result))
}

/// One page of a listing.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct JobPage {
    /// The jobs, in the listing's order.
    pub jobs: Vec<JobSummary>,
    /// Where the next page starts; `None` when this is the last.
    #[serde(serialize_with = "cursor_text")]
    pub next: Option<Cursor>,
}

fn cursor_text<S: serde::Serializer>(c: &Option<Cursor>, s: S) -> Result<S::Ok, S::Error> {
    match c {
        Some(c) => s.serialize_str(&c.to_string()),
        None => s.serialize_none(),
    }
}

impl Topic {
    /// One page of this topic's jobs in a state: see [`JobQuery`]. Each page costs O(log n + page)
    /// per partition, whatever the backlog; a page starts right after the last job of the page before,
    /// so jobs added or removed meanwhile never make a page repeat or skip the others.
    pub async fn jobs(&self, query: &JobQuery) -> Result<JobPage> {
        if let Some(prefix) = &query.id_prefix {
            if query.state == PageState::Done {
                return Err(Error::InvalidConfig {
                    reason: "kept finished jobs are not searched by id prefix: look one up by its \
                             whole id (`Ops::job`), or page through them"
                        .to_owned(),
                });
            }
            return self.search(query, prefix).await;
        }
        let after = match &query.cursor {
            None => None,
            Some(Cursor(Place::After(p))) => Some(p.clone()),
            Some(c) => return Err(Error::invalid_cursor(&c.to_string())),
        };
        let mut q = PageQuery::new(query.state, query.limit);
        q.newest_first = query.newest_first;
        q.after = after;
        let store = self.store();
        let q = &q;
        let pages = self
            .each(|t| async move { store.page(&t, q).await })
            .await?;
        let mut jobs: Vec<JobSummary> = pages
            .into_iter()
            .zip(0..)
            .flat_map(|(page, p)| page.into_iter().map(move |e| (e, p)))
            .map(|(e, p)| JobSummary::new(e, p, query.state))
            .collect();
        jobs.sort_by_cached_key(JobSummary::position);
        if query.newest_first {
            jobs.reverse();
        }
        let more = jobs.len() >= query.limit;
        jobs.truncate(query.limit);
        let next = match jobs.last() {
            Some(last) if more => Some(Cursor(Place::After(last.position()))),
            _ => None,
        };
        Ok(JobPage { jobs, next })
    }

    /// A search by id prefix: partition by partition, each a bounded store step. A step that finds more
    /// than the page has room for is asked again by the next page, which skips what this one took.
    async fn search(&self, query: &JobQuery, prefix: &str) -> Result<JobPage> {
        let (mut p, mut inner, mut skip) = match &query.cursor {
            None => (0, None, 0),
            Some(Cursor(Place::Search(p, inner, skip))) => (*p, inner.clone(), *skip),
            Some(c) => return Err(Error::invalid_cursor(&c.to_string())),
        };
        let n = self.count()?;
        if p >= n {
            return Err(Error::invalid_cursor(
                &Cursor(Place::Search(p, inner, skip)).to_string(),
            ));
        }
        let mut jobs = Vec::new();
        // Steps until the page is full or the search is complete, at most one step per partition and
        // a few more, so that one page stays bounded work.
        for _ in 0..n.saturating_add(4) {
            let stored_as = store_topic(self.name(), p);
            let room = query.limit - jobs.len();
            let step = self
                .store()
                .find_prefix(&stored_as, query.state, prefix, inner.as_deref(), room)
                .await
                .map_err(self.in_partition(p))?;
            let found = step.entries.len().saturating_sub(skip);
            jobs.extend(
                step.entries
                    .into_iter()
                    .skip(skip)
                    .take(room)
                    .map(|e| JobSummary::new(e, p, query.state)),
            );
            if found > room {
                // The rest of this step goes on the next page.
                let next = Cursor(Place::Search(p, inner, skip + room));
                return Ok(JobPage {
                    jobs,
                    next: Some(next),
                });
            }
            skip = 0;
            inner = step.next;
            if inner.is_none() {
                p += 1;
                if p == n {
                    return Ok(JobPage { jobs, next: None });
                }
            }
            if jobs.len() >= query.limit {
                break;
            }
        }
        Ok(JobPage {
            jobs,
            next: Some(Cursor(Place::Search(p, inner, 0))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_as_text() {
        let c = Cursor(Place::After(PagePosition {
            score: 1_700_000_000_123,
            member: "order:42\n000000000000007".into(),
        }));
        assert_eq!(c.to_string().parse::<Cursor>().unwrap(), c);
        for c in [
            Cursor(Place::Search(3, None, 0)),
            Cursor(Place::Search(0, Some("1234".into()), 7)),
        ] {
            assert_eq!(c.to_string().parse::<Cursor>().unwrap(), c);
        }
        for bad in [
            "",
            "x.1.2",
            "a.notanumber.00",
            "a.1.0",
            "s.1.zz",
            "s.1.0.zz",
            "a.1",
        ] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
    }
}
