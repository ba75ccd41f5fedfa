//! The dashboard's URLs, all relative to its root (each page sets `<base href>` to the root), with every
//! value percent-encoded: a topic or an id may hold `/`, `?`, `#`, `&`, spaces or any Unicode.

use std::fmt::Write;

use postpone::ops::PageState;

/// `s` percent-encoded for a query component (everything but `A-Z a-z 0-9 - . _ ~`).
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// A state as the URLs and tabs name it.
pub(crate) fn state_name(state: PageState) -> &'static str {
    match state {
        PageState::Waiting => "waiting",
        PageState::Running => "running",
        PageState::Dead => "dead",
        PageState::Done => "done",
        _ => "scheduled",
    }
}

/// A state from its URL name (scheduled when unknown).
pub(crate) fn parse_state(name: Option<&str>) -> PageState {
    match name {
        Some("waiting") => PageState::Waiting,
        Some("running") => PageState::Running,
        Some("dead") => PageState::Dead,
        Some("done") => PageState::Done,
        _ => PageState::Scheduled,
    }
}

/// A topic's page, on a tab.
pub(crate) fn topic(name: &str, state: PageState) -> String {
    format!("topic?name={}&state={}", encode(name), state_name(state))
}

/// A topic's busiest keys (its keys tab).
pub(crate) fn topic_keys(name: &str) -> String {
    format!("topic?name={}&state=keys", encode(name))
}

/// A topic's page with a search and a cursor.
pub(crate) fn topic_page(
    name: &str,
    state: PageState,
    prefix: Option<&str>,
    cursor: Option<&str>,
) -> String {
    let mut url = topic(name, state);
    if let Some(q) = prefix.filter(|q| !q.is_empty()) {
        let _ = write!(url, "&q={}", encode(q));
    }
    if let Some(c) = cursor {
        let _ = write!(url, "&cursor={}", encode(c));
    }
    url
}

/// A job's page (live, or its newest dead letter).
pub(crate) fn job(topic: &str, id: &str) -> String {
    format!("job?topic={}&id={}", encode(topic), encode(id))
}

/// A dead letter's page: the job's page, naming which death the link meant.
pub(crate) fn dead_letter(topic: &str, id: &str, death: Option<u64>) -> String {
    match death {
        Some(d) => format!("{}&death={d}", job(topic, id)),
        None => job(topic, id),
    }
}

/// A topic's dead letters grouped by error.
pub(crate) fn dead(topic: &str) -> String {
    format!("dead?topic={}", encode(topic))
}

/// The list of batches, from `offset`.
pub(crate) fn batches(offset: usize) -> String {
    match offset {
        0 => "batches".to_owned(),
        n => format!("batches?offset={n}"),
    }
}

/// A batch's page, its members from `offset`.
pub(crate) fn batch(id: &str, offset: usize) -> String {
    match offset {
        0 => format!("batch?id={}", encode(id)),
        n => format!("batch?id={}&offset={n}", encode(id)),
    }
}

/// Whether a `back` address given by a form is one of the dashboard's own relative pages (never
/// another site, never a `javascript:` URL).
pub(crate) fn is_own_page(url: &str) -> bool {
    let path = url.split('?').next().unwrap_or("");
    matches!(path, "topic" | "job" | "dead" | "workers") && !url.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_encoded() {
        assert_eq!(
            job("orders.close", "a/b?c#d e&f=ü"),
            "job?topic=orders.close&id=a%2Fb%3Fc%23d%20e%26f%3D%C3%BC"
        );
        assert_eq!(batch("run 7/<b>", 0), "batch?id=run%207%2F%3Cb%3E");
        assert_eq!(batch("run:7", 50), "batch?id=run%3A7&offset=50");
        assert_eq!(batches(0), "batches");
        assert_eq!(batches(50), "batches?offset=50");
        assert_eq!(
            topic_keys("a b/<c>"),
            "topic?name=a%20b%2F%3Cc%3E&state=keys"
        );
        assert!(is_own_page("job?topic=a&id=b"));
        assert!(!is_own_page("https://evil.example/"));
        assert!(!is_own_page("//evil.example/job"));
        assert!(!is_own_page("javascript:alert(1)"));
        assert!(!is_own_page("job?a\r\nSet-Cookie: x=1"));
    }
}
