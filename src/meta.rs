//! A job's metadata: a small map of strings stored with its record, set at enqueue
//! ([`Enqueue::meta`](crate::Enqueue::meta)) and read by the handler
//! ([`JobContext::meta`](crate::JobContext::meta)). It carries what is about the job rather than in it: a
//! request id, a tenant, and, with the `opentelemetry` feature, the W3C trace context of the enqueue
//! (`traceparent`, `tracestate`). A retry keeps it. Bounded so that it never outgrows the job.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Most metadata entries per job.
pub const MAX_META_ENTRIES: usize = 16;
/// Longest metadata key, in bytes: 1 to 64 of `A-Z a-z 0-9 _ . - :`.
pub const MAX_META_KEY_LEN: usize = 64;
/// Longest metadata value, in bytes (UTF-8).
pub const MAX_META_VALUE_LEN: usize = 1024;

/// The metadata key under which every member and callback of a batch carries the batch's id (see
/// [`JobContext::batch_id`](crate::JobContext::batch_id)).
pub(crate) const BATCH_KEY: &str = "postpone.batch";
/// The metadata key under which a unique job shows its key, window and the states that hold it (see
/// [`JobDetail::unique`](crate::ops::JobDetail::unique)).
pub(crate) const UNIQUE_KEY: &str = "postpone.unique";
/// The metadata key under which a debounced job shows its key, quiet period and max wait (see
/// [`JobDetail::debounce`](crate::ops::JobDetail::debounce)).
pub(crate) const DEBOUNCE_KEY: &str = "postpone.debounce";

/// A job's metadata, by key.
pub(crate) type Meta = BTreeMap<String, String>;

/// Checks one entry.
pub(crate) fn validate_entry(key: &str, value: &str) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid_meta(key, "the key is empty"));
    }
    if key.len() > MAX_META_KEY_LEN {
        return Err(Error::invalid_meta(key, "the key is longer than 64 bytes"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | ':');
    if !key.chars().all(allowed) {
        return Err(Error::invalid_meta(
            key,
            "the key holds a character not allowed",
        ));
    }
    if value.len() > MAX_META_VALUE_LEN {
        return Err(Error::invalid_meta(
            key,
            "the value is longer than 1024 bytes",
        ));
    }
    Ok(())
}

/// Checks a whole map: every entry, and their number.
pub(crate) fn validate(meta: &Meta) -> Result<()> {
    for (key, value) in meta {
        validate_entry(key, value)?;
    }
    if meta.len() > MAX_META_ENTRIES {
        let last = meta.keys().next_back().map(String::as_str).unwrap_or("");
        return Err(Error::invalid_meta(
            last,
            "a job holds at most 16 metadata entries",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_bounded() {
        assert!(validate_entry("traceparent", "00-ab-cd-01").is_ok());
        assert!(validate_entry("tenant:id", "").is_ok());
        assert!(validate_entry("", "x").is_err());
        assert!(validate_entry("a b", "x").is_err());
        assert!(validate_entry("ü", "x").is_err());
        assert!(validate_entry(&"k".repeat(65), "x").is_err());
        assert!(validate_entry("k", &"v".repeat(1025)).is_err());
        let many: Meta = (0..17)
            .map(|i| (format!("k{i:02}"), String::new()))
            .collect();
        let e = validate(&many).unwrap_err();
        assert!(
            matches!(e, Error::InvalidMeta { ref key, .. } if key == "k16"),
            "{e}"
        );
    }
}
