//! The crate's one error type.

use std::fmt;

/// A boxed error from a backend or codec, kept as the [`source`](std::error::Error::source).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in postpone.
///
/// Messages say what was wrong and, where there is one, what to do about it. Match on the variants to
/// handle a case (for example [`Error::JobNotFound`] when cancelling a timer that already fired).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A topic name is not `[A-Za-z0-9_.-]{1,128}`.
    InvalidTopic {
        /// The name as given (cut to 64 characters).
        topic: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A namespace is not `[A-Za-z0-9_.-]{1,64}`.
    InvalidNamespace {
        /// The namespace as given (cut to 64 characters).
        namespace: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A job id is empty, too long, or holds control characters.
    InvalidId {
        /// The id as given (cut to 64 characters).
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A job's key for fairness is empty, too long, or holds control characters (see
    /// [`validate_key`](crate::validate_key)).
    InvalidKey {
        /// The key as given (cut to 64 characters).
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An encoded job is larger than the configured limit.
    PayloadTooLarge {
        /// The job's topic.
        topic: String,
        /// The encoded size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A retry schedule is empty, too long, or holds an impossible delay; or a periodic schedule has a
    /// bad name, interval, cron expression or time zone.
    InvalidSchedule {
        /// What is wrong with it.
        reason: String,
    },
    /// A job's metadata entry breaks a limit (see [`MAX_META_ENTRIES`](crate::MAX_META_ENTRIES) and
    /// the limits beside it).
    InvalidMeta {
        /// The entry's key (cut to 64 characters).
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A configuration value is out of range.
    InvalidConfig {
        /// What is wrong with it.
        reason: String,
    },
    /// A job could not be serialised.
    Encode {
        /// The job's topic.
        topic: String,
        /// The serialiser's error.
        source: BoxError,
    },
    /// A stored job could not be read back (a payload that no longer fits its type, or a damaged record).
    Decode {
        /// The job's topic.
        topic: String,
        /// The job's id.
        id: String,
        /// The decoder's error.
        source: BoxError,
    },
    /// No job with this id exists in the topic (it finished, was cancelled, or never existed).
    JobNotFound {
        /// The topic.
        topic: String,
        /// The id.
        id: String,
    },
    /// The job is running, so it cannot be replaced or rescheduled now.
    JobRunning {
        /// The topic.
        topic: String,
        /// The id.
        id: String,
    },
    /// A job that a new job was to wait for is not known to its topic: it never existed, or it
    /// finished and its type keeps no finished jobs. Nothing was enqueued.
    ParentNotFound {
        /// The parent's topic.
        topic: String,
        /// The parent's id.
        id: String,
    },
    /// The job waits for other jobs (its parents), so it has no due time to move yet.
    JobWaiting {
        /// The topic.
        topic: String,
        /// The id.
        id: String,
    },
    /// A live job with this id exists, so a dead job of the same id cannot be re-enqueued.
    JobExists {
        /// The topic.
        topic: String,
        /// The id.
        id: String,
    },
    /// A batch id is not 1 to 128 bytes of `A-Z a-z 0-9 _ . : -`.
    InvalidBatchId {
        /// The id as given (cut to 64 characters).
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A batch cannot be made as asked: a description too long, too many members in one call, a
    /// member or callback that cannot be in a batch (a unique or debounced job), two callbacks of one
    /// kind.
    InvalidBatch {
        /// The batch's id.
        id: String,
        /// What is wrong.
        reason: String,
    },
    /// No batch has this id (it never existed, or it completed more than 7 days ago and is gone).
    BatchNotFound {
        /// The batch's id.
        id: String,
    },
    /// The batch is closed: it takes no more members.
    BatchClosed {
        /// The batch's id.
        id: String,
    },
    /// A batch with this id exists already (a create is never applied twice: when a create whose reply
    /// was lost is retried, this says that the first one went through).
    BatchExists {
        /// The batch's id.
        id: String,
    },
    /// A worker has no handler for this topic.
    UnknownTopic {
        /// The topic.
        topic: String,
    },
    /// The operations API does not know this topic: nothing was ever enqueued to it or served from it
    /// in this namespace (see [`Ops::topics`](crate::ops::Ops::topics)).
    TopicNotFound {
        /// The topic.
        topic: String,
    },
    /// A listing's cursor was not one the operations API gave out (or is for another listing).
    InvalidCursor {
        /// The cursor, cut to 64 characters.
        cursor: String,
    },
    /// A Redis URL could not be parsed. The message never contains the password.
    InvalidUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// Redis could not be reached.
    Connect {
        /// `host:port` (never the password).
        addr: String,
        /// The underlying error.
        source: BoxError,
    },
    /// The Redis server is too old: postpone needs 6.2 or later.
    UnsupportedRedis {
        /// The version the server reported.
        version: String,
    },
    /// A command to the backend failed.
    Backend {
        /// What was being done.
        context: &'static str,
        /// The underlying error.
        source: BoxError,
    },
    /// An operation on one partition of a partitioned topic failed (its Redis Cluster node is down, say).
    /// The other partitions are unaffected.
    Partition {
        /// The topic.
        topic: String,
        /// The partition that failed (`0..partitions`).
        partition: u16,
        /// How many partitions the topic has.
        partitions: u16,
        /// What went wrong there.
        source: Box<Error>,
    },
}

/// `Result` with postpone's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn cut(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

impl Error {
    pub(crate) fn invalid_topic(topic: &str, reason: &'static str) -> Self {
        Error::InvalidTopic {
            topic: cut(topic),
            reason,
        }
    }

    pub(crate) fn invalid_namespace(namespace: &str, reason: &'static str) -> Self {
        Error::InvalidNamespace {
            namespace: cut(namespace),
            reason,
        }
    }

    pub(crate) fn invalid_id(id: &str, reason: &'static str) -> Self {
        Error::InvalidId {
            id: cut(id),
            reason,
        }
    }

    pub(crate) fn invalid_key(key: &str, reason: &'static str) -> Self {
        Error::InvalidKey {
            key: cut(key),
            reason,
        }
    }

    pub(crate) fn invalid_meta(key: &str, reason: &'static str) -> Self {
        Error::InvalidMeta {
            key: cut(key),
            reason,
        }
    }

    pub(crate) fn invalid_batch_id(id: &str, reason: &'static str) -> Self {
        Error::InvalidBatchId {
            id: cut(id),
            reason,
        }
    }

    pub(crate) fn invalid_batch(id: &str, reason: impl Into<String>) -> Self {
        Error::InvalidBatch {
            id: cut(id),
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid_cursor(cursor: &str) -> Self {
        Error::InvalidCursor {
            cursor: cut(cursor),
        }
    }

    pub(crate) fn backend(context: &'static str, source: impl Into<BoxError>) -> Self {
        Error::Backend {
            context,
            source: source.into(),
        }
    }

    /// This error and its causes (the [`source`](std::error::Error::source) chain) on one line, separated
    /// by `": "`: what to log or show when the error ends its journey.
    ///
    /// ```
    /// let e = postpone::Error::InvalidConfig { reason: "concurrency must be at least 1".into() };
    /// assert_eq!(e.report().to_string(), "invalid configuration: concurrency must be at least 1");
    /// ```
    pub fn report(&self) -> Report<'_> {
        Report(self)
    }

    /// True for failures of the connection to the backend (worth retrying later), false for bad input.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Connect { .. } | Error::Backend { .. } => true,
            Error::Partition { source, .. } => source.is_transient(),
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidTopic { topic, reason } => {
                write!(
                    f,
                    "invalid topic name {topic:?}: {reason} (use 1 to 128 of A-Z a-z 0-9 _ . -)"
                )
            }
            Error::InvalidNamespace { namespace, reason } => write!(
                f,
                "invalid namespace {namespace:?}: {reason} (use 1 to 64 of A-Z a-z 0-9 _ . -)"
            ),
            Error::InvalidId { id, reason } => write!(f, "invalid job id {id:?}: {reason}"),
            Error::InvalidKey { key, reason } => write!(
                f,
                "invalid job key {key:?}: {reason} (a key for fairness is 1 to 128 bytes without control characters)"
            ),
            Error::PayloadTooLarge { topic, size, limit } => write!(
                f,
                "job for topic {topic:?} is {size} bytes encoded, over the limit of {limit} bytes \
                 (store large data elsewhere and enqueue a reference, or raise the limit)"
            ),
            Error::InvalidSchedule { reason } => write!(f, "invalid retry schedule: {reason}"),
            Error::InvalidMeta { key, reason } => write!(
                f,
                "invalid job metadata {key:?}: {reason} (keys: 1 to 64 of A-Z a-z 0-9 _ . - :, \
                 values: at most 1024 bytes, at most 16 entries)"
            ),
            Error::InvalidConfig { reason } => write!(f, "invalid configuration: {reason}"),
            Error::Encode { topic, .. } => write!(f, "could not encode job for topic {topic:?}"),
            Error::Decode { topic, id, .. } => {
                write!(f, "could not decode job {id:?} of topic {topic:?}")
            }
            Error::JobNotFound { topic, id } => write!(
                f,
                "no job {id:?} in topic {topic:?} (it finished, was cancelled, or never existed)"
            ),
            Error::JobRunning { topic, id } => {
                write!(
                    f,
                    "job {id:?} of topic {topic:?} is running; try again after it finishes"
                )
            }
            Error::ParentNotFound { topic, id } => write!(
                f,
                "no job {id:?} in topic {topic:?} to wait for: it never existed, or it finished and \
                 its type keeps no finished jobs (declare `keep` on it to wait for jobs that may \
                 have finished)"
            ),
            Error::JobWaiting { topic, id } => write!(
                f,
                "job {id:?} of topic {topic:?} waits for other jobs; it becomes due when they are done"
            ),
            Error::JobExists { topic, id } => {
                write!(f, "a live job {id:?} already exists in topic {topic:?}")
            }
            Error::InvalidBatchId { id, reason } => write!(
                f,
                "invalid batch id {id:?}: {reason} (use 1 to 128 of A-Z a-z 0-9 _ . : -)"
            ),
            Error::InvalidBatch { id, reason } => write!(f, "invalid batch {id:?}: {reason}"),
            Error::BatchNotFound { id } => write!(
                f,
                "no batch {id:?} (it never existed, or it completed more than 7 days ago)"
            ),
            Error::BatchClosed { id } => write!(
                f,
                "batch {id:?} is closed: it takes no more members (add them before closing it)"
            ),
            Error::BatchExists { id } => write!(
                f,
                "a batch {id:?} exists already (nothing changed; use another id, or read its status)"
            ),
            Error::UnknownTopic { topic } => {
                write!(f, "no handler is registered for topic {topic:?}")
            }
            Error::TopicNotFound { topic } => write!(
                f,
                "no topic {topic:?} in this namespace (nothing was enqueued to it or served from it; \
                 check the name and the namespace)"
            ),
            Error::InvalidCursor { cursor } => write!(
                f,
                "invalid cursor {cursor:?}: pass a cursor from the previous page of the same listing"
            ),
            Error::InvalidUrl { reason } => write!(f, "invalid Redis URL: {reason}"),
            Error::Connect { addr, .. } => write!(f, "could not connect to Redis at {addr}"),
            Error::UnsupportedRedis { version } => write!(
                f,
                "Redis {version} is too old: postpone needs Redis 6.2 or later"
            ),
            Error::Backend { context, .. } => write!(f, "{context} failed"),
            Error::Partition {
                topic,
                partition,
                partitions,
                ..
            } => {
                write!(
                    f,
                    "partition {partition} of {partitions} of topic {topic:?} (stored as "
                )?;
                match partition {
                    0 => write!(f, "{topic:?}) failed"),
                    p => write!(f, "\"{topic}#{p}\") failed"),
                }
            }
        }
    }
}

/// An error with its causes, on one line: see [`Error::report`].
#[derive(Debug, Clone, Copy)]
pub struct Report<'a>(&'a Error);

impl fmt::Display for Report<'_> {
    /// A cause whose text its error already says (redis-rs's I/O errors print their `io::Error` and
    /// return it as their source) is not said twice.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut said = self.0.to_string();
        f.write_str(&said)?;
        let mut cause = std::error::Error::source(self.0);
        while let Some(e) = cause {
            let text = e.to_string();
            if !said.contains(&text) {
                write!(f, ": {text}")?;
            }
            said = text;
            cause = e.source();
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Encode { source, .. }
            | Error::Decode { source, .. }
            | Error::Connect { source, .. }
            | Error::Backend { source, .. } => Some(source.as_ref()),
            Error::Partition { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_says_each_cause_once() {
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = Error::Connect {
            addr: "127.0.0.1:6390".into(),
            source: Box::new(redis::RedisError::from(refused)),
        };
        assert_eq!(
            e.report().to_string(),
            "could not connect to Redis at 127.0.0.1:6390: Connection refused"
        );
        // Causes that differ are all said.
        let e = Error::backend("claiming jobs", "connection refused");
        assert_eq!(
            e.report().to_string(),
            "claiming jobs failed: connection refused"
        );
    }

    #[test]
    fn partition_errors_name_the_partition_and_keep_the_cause() {
        let e = Error::Partition {
            topic: "orders".into(),
            partition: 2,
            partitions: 3,
            source: Box::new(Error::backend("claiming jobs", "connection refused")),
        };
        assert_eq!(
            e.to_string(),
            "partition 2 of 3 of topic \"orders\" (stored as \"orders#2\") failed"
        );
        assert_eq!(
            e.report().to_string(),
            "partition 2 of 3 of topic \"orders\" (stored as \"orders#2\") failed: claiming jobs \
             failed: connection refused"
        );
        assert!(e.is_transient());
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn every_cause_is_printed_once() {
        let e = Error::Encode {
            topic: "t".into(),
            source: "key must be a string".into(),
        };
        assert_eq!(e.to_string(), "could not encode job for topic \"t\"");
        assert_eq!(
            e.report().to_string(),
            "could not encode job for topic \"t\": key must be a string"
        );
        let e = Error::backend("claiming jobs", "timed out");
        assert_eq!(e.report().to_string(), "claiming jobs failed: timed out");
    }

    #[test]
    fn long_inputs_are_cut_in_messages() {
        let id = "x".repeat(10_000);
        let msg = Error::invalid_id(&id, "too long").to_string();
        assert!(msg.len() < 200, "{msg}");
        assert!(msg.contains("too long"));
    }
}
