//! The store's side of results and waiting: finished jobs kept for a while, how a job ended, the
//! announcements a waiter hears, and the progress of running jobs.
//!
//! Nothing here costs a job whose topic keeps nothing and that nobody waits for: a finish reads one
//! more field of a hash it already reads (`keep`, `waits` and `progress` in the topic's stats on
//! Redis), and announces nothing.

/// How long a topic keeps its finished jobs (succeeded and cancelled), both bounds applying: at most
/// `max_count` of them, none older than `max_age_ms` (by the store's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// The longest a finished job is kept, ms.
    pub max_age_ms: u64,
    /// The most finished jobs kept (the oldest go first).
    pub max_count: u64,
}

impl Retention {
    /// Keep finished jobs for `max_age_ms`, at most `max_count` of them.
    pub const fn new(max_age_ms: u64, max_count: u64) -> Self {
        Retention {
            max_age_ms,
            max_count,
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// Its handler succeeded, with this result (encoded; empty when its type returns none).
    Succeeded {
        /// The encoded result.
        result: Vec<u8>,
    },
    /// It was cancelled.
    Cancelled,
    /// It died (its newest death, when it died more than once).
    Dead {
        /// Why.
        reason: String,
    },
}

/// A running job's progress, as its handler last reported it ([`crate::JobContext::progress`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Progress {
    /// The number the handler reported (a percentage, items done: the handler's choice).
    pub value: f64,
    /// A short message, possibly empty (at most [`Progress::MAX_MESSAGE`] bytes).
    pub message: String,
}

impl Progress {
    /// The longest message kept, in bytes; a longer one is cut at a character boundary.
    pub const MAX_MESSAGE: usize = 200;

    /// Progress `value` with `message` (cut to [`Progress::MAX_MESSAGE`] bytes).
    pub fn new(value: f64, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > Self::MAX_MESSAGE {
            let mut end = Self::MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        let value = if value.is_finite() { value } else { 0.0 };
        Progress { value, message }
    }

    /// As stored: `"<value> <message>"`.
    pub(crate) fn encode(&self) -> String {
        format!("{} {}", self.value, self.message)
    }

    /// From [`Progress::encode`]'s form.
    pub(crate) fn decode(text: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(text).ok()?;
        let (value, message) = text.split_once(' ').unwrap_or((text, ""));
        Some(Progress::new(value.parse().ok()?, message))
    }
}

/// How a lookup of a job's outcome registers its caller ([`JobStore::outcome`](super::JobStore::outcome)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Watch {
    /// Look only.
    No,
    /// When the job is live, register a waiter until the store's now + this many ms.
    Live(u64),
    /// Register a waiter until the store's now + `wait_ms` whether or not the job exists yet: it is
    /// about to be enqueued, and its end must not go unheard even if it comes before anything else.
    /// Its end as told is this job's; a kept finish or a death is only if after `since_ms`. The first
    /// lookup gives 0: the store's now (reported in [`Lookup::Expected`] or [`Lookup::Live`], for the
    /// next lookups to give), and forgets the end an older job of the id was told.
    Expect {
        /// How long to wait, ms.
        wait_ms: u64,
        /// Ends before this time (ms) are another job's of the same id; 0 for the store's now.
        since_ms: i64,
    },
}

/// What a waiter finds when it looks a job up ([`JobStore::outcome`](super::JobStore::outcome)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Lookup {
    /// It ended, at this time (ms).
    Ended {
        /// How.
        ended: Ended,
        /// When, ms since the epoch.
        at_ms: i64,
    },
    /// It is live (due or running), with the progress its handler last reported.
    Live {
        /// Its progress, if reported.
        progress: Option<Progress>,
        /// The store's now, ms (where a [`Watch::Expect`] waiter's ends count from).
        now_ms: i64,
    },
    /// No job of this id is live, and none ended since the time asked ([`Watch::Expect`]): the waiter
    /// is registered for the job to come.
    Expected {
        /// The time ends count from (the one asked, or the store's now), ms.
        since_ms: i64,
    },
    /// No job of this id is live, kept or dead (never enqueued, or finished and not kept).
    Unknown,
}

/// What a store announces to waiters (see [`JobStore::announcements`](super::JobStore::announcements)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Announcement {
    /// A waited job ended.
    Ended {
        /// Its topic (the partition's name on a partitioned topic).
        topic: String,
        /// Its id.
        id: String,
        /// How it ended.
        ended: Ended,
    },
    /// A waited job reported progress.
    Progress {
        /// Its topic (the partition's name on a partitioned topic).
        topic: String,
        /// Its id.
        id: String,
        /// Its progress.
        progress: Progress,
    },
    /// Announcements may have been lost (the store's subscription was re-established): every waiter
    /// should look its job up again.
    Resync,
}

/// A kept finished job's state, as listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DoneState {
    Succeeded,
    Cancelled,
}

impl DoneState {
    pub(crate) fn from_code(code: u8) -> Option<Self> {
        match code {
            b's' => Some(DoneState::Succeeded),
            b'c' => Some(DoneState::Cancelled),
            _ => None,
        }
    }
}

/// A kept finished job as stored: `"<s|c> <finished ms> <record length>\n<record><result>"` (the same
/// form on Redis, where `finish.lua` and `cancel.lua` write it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    pub(crate) state: DoneState,
    pub(crate) at_ms: i64,
    pub(crate) record: Vec<u8>,
    pub(crate) result: Vec<u8>,
}

impl Kept {
    pub(crate) fn parse(value: &[u8]) -> Option<Kept> {
        let newline = value.iter().position(|&b| b == b'\n')?;
        let head = std::str::from_utf8(&value[..newline]).ok()?;
        let mut parts = head.split(' ');
        let state = DoneState::from_code(*parts.next()?.as_bytes().first()?)?;
        let at_ms = parts.next()?.parse().ok()?;
        let len: usize = parts.next()?.parse().ok()?;
        let body = &value[newline + 1..];
        if body.len() < len {
            return None;
        }
        Some(Kept {
            state,
            at_ms,
            record: body[..len].to_vec(),
            result: body[len..].to_vec(),
        })
    }

    pub(crate) fn ended(&self) -> Ended {
        match self.state {
            DoneState::Succeeded => Ended::Succeeded {
                result: self.result.clone(),
            },
            DoneState::Cancelled => Ended::Cancelled,
        }
    }
}

/// An end as published and as told (`<kind><data>`): kind `s` (data: the result), `c`, or `d` (data:
/// the reason).
fn parse_end(kind: u8, data: &[u8]) -> Option<Ended> {
    Some(match kind {
        b's' => Ended::Succeeded {
            result: data.to_vec(),
        },
        b'c' => Ended::Cancelled,
        b'd' => Ended::Dead {
            reason: String::from_utf8_lossy(data).into_owned(),
        },
        _ => return None,
    })
}

/// A waited job's end as told (kept until its waiters' time ends): `"<at ms> <kind><data>"`.
pub(crate) fn parse_told(value: &[u8]) -> Option<(Ended, i64)> {
    let space = value.iter().position(|&b| b == b' ')?;
    let at = std::str::from_utf8(&value[..space]).ok()?.parse().ok()?;
    let (&kind, data) = value[space + 1..].split_first()?;
    Some((parse_end(kind, data)?, at))
}

/// An announcement as published: `"<topic>\n<id>\n<kind><data>"`, an end (see [`parse_end`]) or kind
/// `p` (data: the progress).
pub(crate) fn parse_announcement(payload: &[u8]) -> Option<Announcement> {
    let mut parts = payload.splitn(3, |&b| b == b'\n');
    let topic = std::str::from_utf8(parts.next()?).ok()?.to_owned();
    let id = std::str::from_utf8(parts.next()?).ok()?.to_owned();
    let (&kind, data) = parts.next()?.split_first()?;
    if kind == b'p' {
        return Some(Announcement::Progress {
            topic,
            id,
            progress: Progress::decode(data)?,
        });
    }
    let ended = parse_end(kind, data)?;
    Some(Announcement::Ended { topic, id, ended })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_values_parse() {
        let k = Kept::parse(b"s 1700000000000 3\nrec{\"ok\":1}").unwrap();
        assert_eq!(k.state, DoneState::Succeeded);
        assert_eq!(k.at_ms, 1_700_000_000_000);
        assert_eq!(k.record, b"rec");
        assert_eq!(k.result, b"{\"ok\":1}");
        let c = Kept::parse(b"c 5 2\n\n\n").unwrap();
        assert_eq!(
            (c.state, c.record.as_slice()),
            (DoneState::Cancelled, &b"\n\n"[..])
        );
        assert!(Kept::parse(b"s 5 9\nab").is_none());
        assert!(Kept::parse(b"x 5 0\n").is_none());
    }

    #[test]
    fn announcements_parse() {
        assert_eq!(
            parse_announcement(b"pdfs\nmy:id\ns{\"url\":\"x\"}"),
            Some(Announcement::Ended {
                topic: "pdfs".into(),
                id: "my:id".into(),
                ended: Ended::Succeeded {
                    result: b"{\"url\":\"x\"}".to_vec()
                }
            })
        );
        assert_eq!(
            parse_announcement(b"pdfs\n7\ndfailed: no\nway"),
            Some(Announcement::Ended {
                topic: "pdfs".into(),
                id: "7".into(),
                ended: Ended::Dead {
                    reason: "failed: no\nway".into()
                }
            })
        );
        assert_eq!(
            parse_announcement(b"pdfs\n7\np42.5 rendering page 3"),
            Some(Announcement::Progress {
                topic: "pdfs".into(),
                id: "7".into(),
                progress: Progress::new(42.5, "rendering page 3")
            })
        );
        assert_eq!(parse_announcement(b"pdfs\n7"), None);
        assert_eq!(
            parse_told(b"1700000000000 dstalled: lease expired 3 times"),
            Some((
                Ended::Dead {
                    reason: "stalled: lease expired 3 times".into()
                },
                1_700_000_000_000
            ))
        );
        assert_eq!(parse_told(b"5 c"), Some((Ended::Cancelled, 5)));
        assert_eq!(parse_told(b"5c"), None);
        assert_eq!(parse_announcement(b"pdfs\n7\nz"), None);
    }

    #[test]
    fn progress_messages_are_cut_at_a_char_boundary() {
        let p = Progress::new(f64::NAN, "é".repeat(150));
        assert_eq!(p.value, 0.0);
        assert_eq!(p.message.len(), 200);
        assert_eq!(Progress::decode(p.encode().as_bytes()), Some(p));
        assert_eq!(Progress::decode(b"7"), Some(Progress::new(7.0, "")));
    }
}
