//! Cross-site request forgery: every form carries the dashboard's token (a random secret made when its
//! router is built), and a POST must carry it and come from the dashboard's own origin.

use axum::http::{header, HeaderMap};

use crate::auth::same;

/// The dashboard's CSRF token.
#[derive(Debug)]
pub(crate) struct Csrf {
    token: String,
}

impl Csrf {
    /// A new random token (32 bytes from the operating system, as hex).
    pub(crate) fn new() -> Self {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("the operating system's random source");
        Csrf {
            token: secret.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }

    /// The token, for a form's hidden field.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Why a POST is refused, or `None` when its token and origin are right. `host` is the host the
    /// request was sent to, as [`Hosts::of`](crate::hosts::Hosts::of) reads it (`Host`, or a trusted
    /// `X-Forwarded-Host`).
    pub(crate) fn refuse(
        &self,
        headers: &HeaderMap,
        host: Option<&str>,
        token: Option<&str>,
    ) -> Option<&'static str> {
        if !token.is_some_and(|t| same(t.as_bytes(), self.token.as_bytes())) {
            return Some("missing or wrong CSRF token: reload the page and try again");
        }
        if !same_origin(headers, host) {
            return Some("cross-origin request refused (Origin or Referer is not this dashboard)");
        }
        None
    }
}

/// Whether the request's `Origin` (else its `Referer`) names `host`, the host it was sent to. A
/// request with neither (not from a browser) passes: the token is the check then.
fn same_origin(headers: &HeaderMap, host: Option<&str>) -> bool {
    let get = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let source = match (get(header::ORIGIN), get(header::REFERER)) {
        (Some(origin), _) => origin,
        (None, Some(referer)) => referer,
        (None, None) => return true,
    };
    let Some(source_host) = authority(source) else {
        return false; // "null", or no scheme
    };
    host.is_some_and(|host| host.eq_ignore_ascii_case(source_host))
}

/// `host[:port]` of an absolute URL.
fn authority(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|a| !a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn host(h: &HeaderMap) -> Option<&str> {
        h.get(header::HOST).and_then(|v| v.to_str().ok())
    }

    #[test]
    fn token_and_origin_are_both_needed() {
        let c = Csrf::new();
        let t = c.token().to_owned();
        let ok = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert_eq!(c.refuse(&ok, host(&ok), Some(&t)), None);
        assert!(c.refuse(&ok, host(&ok), None).is_some());
        assert!(c.refuse(&ok, host(&ok), Some("00")).is_some());
        let evil = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ]);
        assert!(c.refuse(&evil, host(&evil), Some(&t)).is_some());
        let null = headers(&[("host", "127.0.0.1:8080"), ("origin", "null")]);
        assert!(c.refuse(&null, host(&null), Some(&t)).is_some());
        let referer = headers(&[
            ("host", "127.0.0.1:8080"),
            ("referer", "http://127.0.0.1:8080/jobs/topic?name=a"),
        ]);
        assert_eq!(c.refuse(&referer, host(&referer), Some(&t)), None);
        let bad_referer = headers(&[
            ("host", "127.0.0.1:8080"),
            ("referer", "http://127.0.0.1:8081/"),
        ]);
        assert!(c
            .refuse(&bad_referer, host(&bad_referer), Some(&t))
            .is_some());
    }
}
