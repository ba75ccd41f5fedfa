//! A schedule's definition as stored with it: JSON, compared whole by the store (a change replaces the
//! stored schedule) and read back by the operations API.

use serde::{Deserialize, Serialize};

use super::{Missed, Overlap, Periodic};

/// What a schedule is, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Definition {
    /// The cron expression, or `every <n>s`.
    pub(crate) expression: String,
    /// The IANA time zone of a cron expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) zone: Option<String>,
    /// `skip`, `last` or `up_to:<n>`.
    pub(crate) missed: String,
    /// `allow` or `skip`.
    pub(crate) overlap: String,
}

impl Definition {
    pub(crate) fn of(p: &Periodic) -> Self {
        let missed = match p.missed {
            Missed::Skip => "skip".to_owned(),
            Missed::Last => "last".to_owned(),
            Missed::UpTo(n) => format!("up_to:{n}"),
        };
        let overlap = match p.overlap {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
        };
        Definition {
            expression: p.expression.clone(),
            zone: p.zone.clone(),
            missed,
            overlap: overlap.to_owned(),
        }
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a definition always serialises")
    }

    /// A stored definition, if it is one (an unreadable one is shown raw by the caller).
    pub(crate) fn parse(json: &str) -> Option<Self> {
        serde_json::from_str(json).ok()
    }

    /// The missed-tick policy.
    pub(crate) fn missed(&self) -> Option<Missed> {
        match self.missed.as_str() {
            "skip" => Some(Missed::Skip),
            "last" => Some(Missed::Last),
            other => other
                .strip_prefix("up_to:")
                .and_then(|n| n.parse().ok())
                .map(Missed::UpTo),
        }
    }

    /// The overlap policy.
    pub(crate) fn overlap(&self) -> Option<Overlap> {
        match self.overlap.as_str() {
            "allow" => Some(Overlap::Allow),
            "skip" => Some(Overlap::Skip),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn round_trip() {
        let p = Periodic::every("x", Duration::from_secs(300))
            .unwrap()
            .missed(Missed::UpTo(5))
            .overlap(Overlap::Skip);
        let json = p.definition();
        assert_eq!(
            json,
            r#"{"expression":"every 300s","missed":"up_to:5","overlap":"skip"}"#
        );
        let d = Definition::parse(&json).unwrap();
        assert_eq!(d.missed(), Some(Missed::UpTo(5)));
        assert_eq!(d.overlap(), Some(Overlap::Skip));
        assert_eq!(d, Definition::of(&p));
    }
}
