//! A check of the store for operators: what was looked at, how it came out, what to do. Made by the
//! stores (`JobStore`'s doctor) and the operations API ([`crate::ops::Ops::doctor`]); below both, so
//! neither imports the other for it.

use serde::Serialize;

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
