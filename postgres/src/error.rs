//! The crate's error: a job that postpone refused, or the database.

use std::fmt;

/// What can go wrong in the outbox.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// postpone refused the job or the call (an invalid id, a payload over the limit, Redis away...).
    Job(postpone::Error),
    /// PostgreSQL failed: the statement, the connection, or the transaction.
    Database(sqlx::Error),
    /// An option was invalid (a table name, a batch size).
    InvalidConfig {
        /// What was wrong.
        reason: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Job(e) => write!(f, "{e}"),
            Error::Database(e) => write!(f, "postgresql: {e}"),
            Error::InvalidConfig { reason } => write!(f, "invalid outbox configuration: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Job(e) => Some(e),
            Error::Database(e) => Some(e),
            Error::InvalidConfig { .. } => None,
        }
    }
}

impl From<postpone::Error> for Error {
    fn from(e: postpone::Error) -> Self {
        Error::Job(e)
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Database(e)
    }
}
