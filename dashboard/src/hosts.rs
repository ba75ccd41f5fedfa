//! Which host names the dashboard answers to. A DNS-rebinding page (a name of the attacker's that
//! resolves to the dashboard's address) sends its own name as `Host`: refused before any page, event
//! stream, script or action, it reads nothing and gets no CSRF token.
//!
//! The host a request was sent to is its `Host` header (HTTP/2: its URI's authority), or, when the
//! application opts in behind its own proxy
//! ([`Dashboard::trust_forwarded_headers`](crate::Dashboard::trust_forwarded_headers)), its
//! `X-Forwarded-Host`. The same-origin check of actions compares `Origin` with that host.
//!
//! Without a token and without a list of the application's, a dashboard answers to loopback names
//! only ([`LOOPBACK`]), mounted or served alone.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The names a dashboard without a token answers to unless the application lists its own: loopback,
/// with any port.
pub(crate) const LOOPBACK: [&str; 3] = ["127.0.0.1", "localhost", "[::1]"];

/// The host names a dashboard answers to, and where it reads a request's host.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    /// `None`: any.
    allowed: Option<Vec<Allowed>>,
    trust_forwarded: bool,
}

/// One allowed name: `host` (any port) or `host:port`; IPv6 literals in brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Allowed {
    host: String,
    port: Option<u16>,
}

impl Hosts {
    pub(crate) fn new(allowed: Option<&[String]>, trust_forwarded: bool) -> Self {
        Hosts {
            allowed: allowed.map(|names| names.iter().map(|n| split(n)).collect()),
            trust_forwarded,
        }
    }

    /// The host (`name[:port]`) the request was sent to, as the dashboard reads it: a trusted
    /// `X-Forwarded-Host`, else `Host`, else the authority of the request's URI (HTTP/2 sends it
    /// there, as `:authority`, instead of a `Host` header).
    pub(crate) fn of<'a>(&self, headers: &'a HeaderMap, uri: &'a Uri) -> Option<&'a str> {
        let get = |name: HeaderName| {
            headers
                .get_all(name)
                .iter()
                .next_back()
                .and_then(|v| v.to_str().ok())
        };
        if self.trust_forwarded {
            // With several proxies, the value added last is the one of the proxy nearest the app.
            if let Some(forwarded) = get(HeaderName::from_static("x-forwarded-host")) {
                return forwarded.rsplit(',').next().map(str::trim);
            }
        }
        get(header::HOST).or_else(|| uri.authority().map(|a| a.as_str()))
    }

    /// Whether the dashboard answers to this host.
    fn allows(&self, host: Option<&str>) -> bool {
        let Some(allowed) = &self.allowed else {
            return true;
        };
        let Some(host) = host else {
            return false;
        };
        let (name, port) = split_port(host);
        let name = name.to_ascii_lowercase();
        allowed.iter().any(|a| {
            a.host == name
                && match (a.port, port) {
                    (None, _) => true,
                    (Some(want), Some(got)) => want == got,
                    // No port: HTTP's default.
                    (Some(want), None) => want == 80,
                }
        })
    }
}

fn split(name: &str) -> Allowed {
    let (host, port) = split_port(name.trim());
    Allowed {
        host: host.to_ascii_lowercase(),
        port,
    }
}

/// `host[:port]` apart; `[v6]:port` keeps its brackets.
fn split_port(authority: &str) -> (&str, Option<u16>) {
    let colon = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => i,
        _ => return (authority, None),
    };
    match authority[colon + 1..].parse() {
        // A bare IPv6 address without brackets has no port.
        Ok(port) if !authority[..colon].contains(':') || authority.starts_with('[') => {
            (&authority[..colon], Some(port))
        }
        _ => (authority, None),
    }
}

/// Refuses (403) a request sent to a host the dashboard does not answer to.
pub(crate) async fn guard(State(hosts): State<Arc<Hosts>>, req: Request, next: Next) -> Response {
    let host = hosts.of(req.headers(), req.uri());
    if hosts.allows(host) {
        return next.run(req).await;
    }
    tracing::warn!(
        host = host.unwrap_or(""),
        "postpone dashboard: a request to a host it does not answer to was refused (a DNS-rebinding page, or a name missing from Dashboard::allowed_hosts)"
    );
    (
        StatusCode::FORBIDDEN,
        "this dashboard does not answer to the host this request was sent to: open it by a name it \
         serves (without a token and without allowed hosts: 127.0.0.1, localhost or [::1]), or add \
         the name to its allowed hosts\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn names_with_and_without_a_port() {
        let names = [
            "127.0.0.1:8080",
            "[::1]:8080",
            "LocalHost:8080",
            "jobs.example.com",
        ]
        .map(String::from);
        let hosts = Hosts::new(Some(&names), false);
        for ok in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "jobs.example.com",
            "jobs.example.com:443",
        ] {
            assert!(hosts.allows(Some(ok)), "{ok}");
        }
        for refused in [
            "127.0.0.1:8081",
            "127.0.0.1",
            "[::1]",
            "rebind.attacker.example:8080",
            "localhost.:8080",
            "evil.example",
        ] {
            assert!(!hosts.allows(Some(refused)), "{refused}");
        }
        assert!(!hosts.allows(None));
        assert!(Hosts::new(None, false).allows(Some("anything.example")));
        assert!(Hosts::new(None, false).allows(None));
    }

    #[test]
    fn forwarded_host_only_when_trusted() {
        let h = headers(&[
            ("host", "127.0.0.1:8080"),
            ("x-forwarded-host", "forged.example, jobs.example.com"),
        ]);
        let path = Uri::from_static("/jobs");
        assert_eq!(
            Hosts::new(None, false).of(&h, &path),
            Some("127.0.0.1:8080")
        );
        assert_eq!(
            Hosts::new(None, true).of(&h, &path),
            Some("jobs.example.com")
        );
        let plain = headers(&[("host", "127.0.0.1:8080")]);
        assert_eq!(
            Hosts::new(None, true).of(&plain, &path),
            Some("127.0.0.1:8080")
        );
    }

    #[test]
    fn without_a_host_header_the_uri_names_the_host() {
        // HTTP/2: the authority travels in the URI.
        let none = HeaderMap::new();
        let h2 = Uri::from_static("https://localhost:8443/jobs");
        assert_eq!(
            Hosts::new(None, false).of(&none, &h2),
            Some("localhost:8443")
        );
        let loopback = LOOPBACK.map(String::from);
        let hosts = Hosts::new(Some(&loopback), false);
        assert!(hosts.allows(hosts.of(&none, &h2)));
        let rebound = Uri::from_static("https://rebind.attacker.example:8443/jobs");
        assert!(!hosts.allows(hosts.of(&none, &rebound)));
        // A Host header wins over the URI.
        let host = headers(&[("host", "rebind.attacker.example:8443")]);
        assert!(!hosts.allows(hosts.of(&host, &h2)));
        assert_eq!(hosts.of(&none, &Uri::from_static("/jobs")), None);
    }

    #[test]
    fn loopback_names_with_any_port() {
        let loopback = LOOPBACK.map(String::from);
        let hosts = Hosts::new(Some(&loopback), false);
        for ok in [
            "127.0.0.1:3000",
            "127.0.0.1",
            "localhost:8080",
            "[::1]:3000",
            "[::1]",
        ] {
            assert!(hosts.allows(Some(ok)), "{ok}");
        }
        for refused in [
            "rebind.attacker.example:3000",
            "10.0.0.7:3000",
            "localhost.evil.example",
        ] {
            assert!(!hosts.allows(Some(refused)), "{refused}");
        }
    }
}
