//! Checks on names and ids that reach Redis keys and members.

use crate::error::{Error, Result};

/// Longest job id, in bytes.
pub const MAX_ID_LEN: usize = 512;

fn name_chars_ok(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Checks a topic name: `[A-Za-z0-9_.-]{1,128}`.
///
/// ```
/// assert!(postpone::validate_topic("orders.close").is_ok());
/// assert!(postpone::validate_topic("bad topic").is_err());
/// ```
pub fn validate_topic(topic: &str) -> Result<()> {
    if topic.is_empty() {
        return Err(Error::invalid_topic(topic, "it is empty"));
    }
    if topic.len() > 128 {
        return Err(Error::invalid_topic(
            topic,
            "it is longer than 128 characters",
        ));
    }
    if !name_chars_ok(topic) {
        return Err(Error::invalid_topic(
            topic,
            "it holds a character outside the allowed set",
        ));
    }
    Ok(())
}

/// Checks a namespace: `[A-Za-z0-9_.-]{1,64}`.
pub fn validate_namespace(namespace: &str) -> Result<()> {
    if namespace.is_empty() {
        return Err(Error::invalid_namespace(namespace, "it is empty"));
    }
    if namespace.len() > 64 {
        return Err(Error::invalid_namespace(
            namespace,
            "it is longer than 64 characters",
        ));
    }
    if !name_chars_ok(namespace) {
        return Err(Error::invalid_namespace(
            namespace,
            "it holds a character outside the allowed set",
        ));
    }
    Ok(())
}

/// Checks a job id: 1 to 512 bytes of UTF-8 with no control characters.
///
/// Ids are stored only as set members and hash fields, never inside key names, so any other
/// character (`{`, `:`, `*`, spaces, unicode) is safe.
///
/// ```
/// assert!(postpone::validate_id("order:42").is_ok());
/// assert!(postpone::validate_id("").is_err());
/// ```
pub fn validate_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid_id(id, "it is empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(Error::invalid_id(id, "it is longer than 512 bytes"));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid_id(id, "it holds a control character"));
    }
    Ok(())
}

/// Longest fairness key, in bytes.
const MAX_KEY_LEN: usize = 128;

/// Checks a job's key for fairness ([`Job::key`](crate::Job::key)): 1 to 128 bytes of UTF-8 with no
/// control characters. A key never appears in a Redis key name as given (its SHA-1 does), so any other
/// character is safe.
///
/// ```
/// assert!(postpone::validate_key("customer:42").is_ok());
/// assert!(postpone::validate_key("").is_err());
/// assert!(postpone::validate_key(&"k".repeat(129)).is_err());
/// ```
pub fn validate_key(key: &str) -> Result<()> {
    let reason = if key.is_empty() {
        "it is empty"
    } else if key.len() > MAX_KEY_LEN {
        "it is longer than 128 bytes"
    } else if key.chars().any(char::is_control) {
        "it holds a control character"
    } else {
        return Ok(());
    };
    Err(Error::invalid_key(key, reason))
}

/// Longest batch id, in bytes.
pub const MAX_BATCH_ID_LEN: usize = 128;

/// Checks a batch id: `[A-Za-z0-9_.:-]{1,128}`.
///
/// ```
/// assert!(postpone::validate_batch_id("billing:2026-11").is_ok());
/// assert!(postpone::validate_batch_id("billing run").is_err());
/// ```
pub fn validate_batch_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid_batch_id(id, "it is empty"));
    }
    if id.len() > MAX_BATCH_ID_LEN {
        return Err(Error::invalid_batch_id(id, "it is longer than 128 bytes"));
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-');
    if !id.bytes().all(allowed) {
        return Err(Error::invalid_batch_id(
            id,
            "it holds a character outside the allowed set",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics() {
        for ok in ["a", "orders.close", "A-b_c.9", &"x".repeat(128)] {
            assert!(validate_topic(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a{b}", "a:b", "a*", "é", &"x".repeat(129)] {
            assert!(validate_topic(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn batch_ids() {
        for ok in ["1", "billing:2026-11", "a.b_c-d:e", &"x".repeat(128)] {
            assert!(validate_batch_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a{b}", "a/b", "é", "a\n", &"x".repeat(129)] {
            let e = validate_batch_id(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidBatchId { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn ids() {
        for ok in ["1", "order:42", "{x}*: y", "zoé", &"x".repeat(512)] {
            assert!(validate_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a\nb", "a\0", &"x".repeat(513)] {
            assert!(validate_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn namespaces() {
        assert!(validate_namespace("shop").is_ok());
        assert!(validate_namespace("sh op").is_err());
        assert!(validate_namespace("").is_err());
    }
}
