//! Dead letters across the seam: deaths, dead entries, and what the dead-letter operations take and give.

/// One death of a job: its id and the topic-wide sequence number of the death. Each death is a dead
/// letter of its own (the same id may die twice: a requeued job, or a new job under a freed id), and
/// every dead-letter operation names the death it means.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Death {
    /// The job's id.
    pub id: String,
    /// The death's sequence number in its topic (increasing).
    pub seq: u64,
}

impl Death {
    /// A death of job `id`.
    pub fn new(id: impl Into<String>, seq: u64) -> Self {
        Death { id: id.into(), seq }
    }

    /// The death as one string, `<id>\n<sequence, 15 digits>`: ids hold no control characters, so the
    /// members of one id sort together, oldest death first.
    pub(crate) fn member(&self) -> String {
        format!("{}\n{:015}", self.id, self.seq)
    }

    /// The death a [`member`](Self::member) names; `None` for a string postpone did not write.
    pub(crate) fn parse(member: &[u8]) -> Option<Death> {
        let at = member.iter().rposition(|b| *b == b'\n')?;
        let seq = std::str::from_utf8(&member[at + 1..]).ok()?.parse().ok()?;
        let id = String::from_utf8(member[..at].to_vec()).ok()?;
        Some(Death { id, seq })
    }
}

/// A dead job: one death (see [`Death`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeadEntry {
    /// Its id.
    pub id: String,
    /// The death's sequence number (with `id`, the [`Death`]).
    pub seq: u64,
    /// Its final record.
    pub record: Vec<u8>,
    /// Why it died.
    pub reason: String,
    /// When it died (ms).
    pub died_at_ms: i64,
}

impl DeadEntry {
    /// Which death this is.
    pub fn death(&self) -> Death {
        Death::new(self.id.clone(), self.seq)
    }
}

/// What re-enqueueing a dead job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequeueOutcome {
    /// Moved from the dead letters to due, due now (ms).
    Requeued {
        /// Due time, ms since the epoch.
        due_at_ms: i64,
    },
    /// No dead job has this id.
    NotFound,
    /// A live job has this id (beside the dead one): nothing changed.
    LiveJobExists,
}

/// Which dead jobs a purge deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadSelection<'a> {
    /// This death.
    Death(&'a Death),
    /// Every death of the topic.
    All,
}

/// Which delivered dead jobs a trim deletes: those older than `max_age` (by the store's clock), and
/// those beyond the newest `keep`. `None` leaves that rule out.
///
/// ```
/// use postpone::store::TrimPolicy;
/// use std::time::Duration;
///
/// let policy = TrimPolicy::new(Some(Duration::from_secs(30 * 86_400)), Some(10_000));
/// assert_eq!(policy.keep, Some(10_000));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrimPolicy {
    /// Dead jobs that died longer ago than this go.
    pub max_age: Option<std::time::Duration>,
    /// Only the newest this many dead jobs stay (pending ones count towards it, and are never trimmed).
    pub keep: Option<u64>,
}

impl TrimPolicy {
    /// A trim policy.
    pub fn new(max_age: Option<std::time::Duration>, keep: Option<u64>) -> Self {
        TrimPolicy { max_age, keep }
    }
}
