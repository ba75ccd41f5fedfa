//! Checks of the store a deployment runs on (`postpone doctor`, the dashboard): what was found, and what
//! to do about it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> postpone::Result<()> {
//! use postpone::ops::Level;
//!
//! let checks = postpone::Client::memory().ops().doctor().await?;
//! assert_eq!(checks[0].name, "backend");
//! assert_eq!(checks[0].level, Level::Warn); // in memory, nothing persists
//! # Ok(()) }
//! ```

use serde::Serialize;

use super::Ops;
use crate::error::Result;

/// How a check came out (as JSON: `"ok"`, `"warn"`, `"bad"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Level {
    /// Nothing to do.
    Ok,
    /// Works, at a risk worth knowing (jobs lost on a crash, times shown off).
    Warn,
    /// Jobs can be lost or not run: fix it.
    Bad,
}

/// One check of the store: what was looked at, how it came out, what was found, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Check {
    /// What was checked, e.g. `"maxmemory-policy"` (on a cluster, a check that differs between masters
    /// is named once per master: `"maxmemory-policy 10.0.0.1:7000"`).
    pub name: String,
    /// How it came out.
    pub level: Level,
    /// What was found, e.g. `"allkeys-lru"`.
    pub found: String,
    /// What to do about it; `None` when nothing is to be done.
    pub advice: Option<String>,
}

impl Check {
    /// A check that passed.
    pub fn ok(name: impl Into<String>, found: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            level: Level::Ok,
            found: found.into(),
            advice: None,
        }
    }

    /// A risk worth knowing, and what to do about it.
    pub fn warn(
        name: impl Into<String>,
        found: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Check {
            name: name.into(),
            level: Level::Warn,
            found: found.into(),
            advice: Some(advice.into()),
        }
    }

    /// A problem to fix, and how.
    pub fn bad(
        name: impl Into<String>,
        found: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Check {
            name: name.into(),
            level: Level::Bad,
            found: found.into(),
            advice: Some(advice.into()),
        }
    }
}

impl Ops {
    /// Checks the store: on Redis, the server version, `maxmemory-policy` (anything but `noeviction`
    /// can evict jobs), persistence and fsync, this machine's clock against the server's, and on a
    /// cluster the slot coverage and replicas (each master checked); in memory, that nothing persists.
    /// Then one check per transactional outbox whose relay reports ([`Ops::outboxes`]); reports that
    /// cannot be read (on a cluster, the master holding them is down) make one warning, never a failed
    /// doctor.
    /// One [`Check`] per line of `postpone doctor`; any [`Level::Bad`] means jobs are at risk.
    pub async fn doctor(&self) -> Result<Vec<Check>> {
        let mut checks = self.client.inner.store.doctor().await?;
        checks.extend(self.outbox_checks().await);
        Ok(checks)
    }
}
