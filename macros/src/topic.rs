//! The topic rule, checked at compile time: `[A-Za-z0-9_.-]{1,128}`.
//!
//! It must accept exactly what `postpone::validate_topic` accepts.

/// Longest topic, in bytes (`postpone::validate_topic`).
const MAX_TOPIC_LEN: usize = 128;

/// Why `topic` is not a valid topic name, or `None` when it is.
pub(crate) fn topic_problem(topic: &str) -> Option<String> {
    if topic.is_empty() {
        return Some("it is empty".into());
    }
    // Characters first: past this check the topic is ASCII, so bytes and characters agree.
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Some(format!(
            "it holds {c:?}, and only letters, digits, '_', '.' and '-' are allowed"
        ));
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Some(format!(
            "it is {} characters long, and at most {MAX_TOPIC_LEN} are allowed",
            topic.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same table as `postpone::validate`'s tests.
    #[test]
    fn same_rule_as_validate_topic() {
        for ok in ["a", "orders.close", "A-b_c.9", &"x".repeat(128)] {
            assert_eq!(topic_problem(ok), None, "{ok}");
        }
        for bad in ["", "a b", "a{b}", "a:b", "a*", "é", &"x".repeat(129)] {
            assert!(topic_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn names_the_offending_character() {
        assert_eq!(
            topic_problem("orders close").unwrap(),
            "it holds ' ', and only letters, digits, '_', '.' and '-' are allowed"
        );
        assert_eq!(
            topic_problem(&"x".repeat(129)).unwrap(),
            "it is 129 characters long, and at most 128 are allowed"
        );
    }
}
