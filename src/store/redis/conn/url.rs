//! What is wrong with a Redis URL, in words, before the redis crate parses it (whose own errors are
//! often only "Redis URL did not parse"). No message here ever contains the URL's user-info: only the
//! parts after it (scheme, host, port, database) are quoted, and the URL itself is shown with its
//! user-info replaced by `***`.

/// Schemes of one server over TCP; the `s` forms are TLS.
const TCP: &[&str] = &["redis", "rediss", "valkey", "valkeys"];
/// Schemes of a Unix socket.
const UNIX: &[&str] = &["unix", "redis+unix", "valkey+unix"];
/// What a Redis URL looks like, for messages.
const EXAMPLE: &str = "redis://127.0.0.1:6379";

/// The problem with `url`, or `None` when it looks right (the redis crate then parses it).
pub(super) fn problem(url: &str) -> Option<String> {
    if url.trim().is_empty() {
        return Some(format!("it is empty; write e.g. {EXAMPLE}"));
    }
    if url.trim() != url {
        return Some(
            "it starts or ends with whitespace (a newline from a file or a shell?); remove it"
                .into(),
        );
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(no_scheme(url));
    };
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return Some(format!(
            "it does not start with a scheme: write e.g. {EXAMPLE}"
        ));
    }
    let scheme = scheme.to_ascii_lowercase();
    if UNIX.contains(&scheme.as_str()) {
        return rest.is_empty().then(|| {
            format!("{scheme}:// needs a socket path, e.g. {scheme}:///run/redis/redis.sock")
        });
    }
    if !TCP.contains(&scheme.as_str()) {
        return Some(format!(
            "unsupported scheme {scheme:?}: use redis:// (or rediss:// for TLS, redis+unix:// for a Unix \
             socket), e.g. {EXAMPLE}"
        ));
    }
    let tls = matches!(scheme.as_str(), "rediss" | "valkeys");
    if tls && !cfg!(feature = "tls") {
        return Some(format!(
            "{scheme}:// (TLS) needs postpone's `tls` feature, which is off by default: in Cargo.toml, \
             postpone = {{ version = \"0.1\", features = [\"tls\"] }} (it builds OpenSSL's bindings: \
             Debian's libssl-dev and pkg-config)"
        ));
    }
    // The user-info ends at the last '@' (a password may hold one); what follows is never secret.
    let (userinfo, after) = match rest.rsplit_once('@') {
        Some((userinfo, after)) => (Some(userinfo), after),
        None => (None, rest),
    };
    if userinfo.is_some_and(|u| u.contains(['/', '?', '#'])) {
        return Some(
            "the user name or password holds '/', '?' or '#': percent-encode them (%2F, %3F, %23)"
                .into(),
        );
    }
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (hostport, tail) = after.split_at(end);
    host_and_port(hostport)
        .or_else(|| database(tail))
        .or_else(|| fragment(&scheme, tls, tail))
}

/// No `://`: say what to write, quoting the input only when it cannot hold a password.
fn no_scheme(url: &str) -> String {
    if url.contains('@') {
        format!("it has no scheme: start it with redis://, e.g. {EXAMPLE}")
    } else if url.starts_with("redis:") || url.starts_with("rediss:") {
        format!("it needs \"://\" after the scheme, e.g. {EXAMPLE}")
    } else {
        format!("it has no scheme: write \"redis://{url}\"")
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn host_and_port(hostport: &str) -> Option<String> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let Some((inside, after)) = v6.split_once(']') else {
            return Some(format!(
                "the IPv6 host {hostport:?} has no closing ']'; write e.g. redis://[::1]:6379"
            ));
        };
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => {
                    return Some(format!(
                        "unexpected {after:?} after the IPv6 host [{inside}]; write e.g. redis://[::1]:6379"
                    ))
                }
            },
        };
        (inside, port)
    } else {
        match hostport.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Some(format!("it has no host; write e.g. {EXAMPLE}"));
    }
    if host == "0.0.0.0" || host == "::" {
        return Some(format!(
            "{host} is an address to listen on, not to connect to; use 127.0.0.1 or the server's address"
        ));
    }
    if let Some(c) = host.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!("the host {host:?} holds {c:?}"));
    }
    match port {
        None => None,
        Some("") => Some(format!(
            "the port after \"{host}:\" is missing; write e.g. {host}:6379, or leave out the ':' for 6379"
        )),
        Some(port) if !port.bytes().all(|b| b.is_ascii_digit()) => Some(format!(
            "the port {port:?} is not a number; write a port from 1 to 65535, e.g. {host}:6379"
        )),
        Some(port) => match port.parse::<u16>() {
            Ok(p) if p > 0 => None,
            _ => Some(format!("the port {port} is out of range: ports go from 1 to 65535")),
        },
    }
}

/// `/N`: the database index.
fn database(tail: &str) -> Option<String> {
    let path = tail.strip_prefix('/')?;
    let db = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    if db.is_empty() || db.bytes().all(|b| b.is_ascii_digit()) && db.parse::<i64>().is_ok() {
        return None;
    }
    Some(format!(
        "the database {db:?} is not a number: the path is the database index, e.g. {EXAMPLE}/0"
    ))
}

/// `#insecure` is the only fragment a TLS URL may carry.
fn fragment(scheme: &str, tls: bool, tail: &str) -> Option<String> {
    let (_, fragment) = tail.split_once('#')?;
    (tls && fragment != "insecure").then(|| {
        format!(
            "the fragment #{fragment} means nothing here: a {scheme}:// URL takes only #insecure (do not \
             verify the server's certificate)"
        )
    })
}

/// `url` with its user-info replaced by `***`, for messages.
pub(super) fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return match url.rsplit_once('@') {
            Some((_, after)) => format!("***@{after}"),
            None => url.to_owned(),
        };
    };
    match rest.rsplit_once('@') {
        Some((_, after)) => format!("{scheme}://***@{after}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted() {
        for url in [
            "redis://127.0.0.1",
            "redis://127.0.0.1:6379",
            "REDIS://localhost:6379/0",
            "redis://:pass@host:1/15",
            "redis://user:p@ss@host:6380",
            "redis://[::1]:6379/2?protocol=resp3",
            "redis://[::1]",
            "valkey://host",
            "redis+unix:///run/redis.sock",
            "unix:///tmp/redis.sock?db=1",
        ] {
            assert_eq!(problem(url), None, "{url}");
        }
    }

    /// Each mistake gets its own message, and none holds the password.
    #[test]
    fn each_mistake_says_what_is_wrong() {
        let cases = [
            ("", "it is empty"),
            (" redis://localhost", "it starts or ends with whitespace"),
            (
                "localhost:6379",
                "it has no scheme: write \"redis://localhost:6379\"",
            ),
            (
                "u:hunter2@localhost",
                "it has no scheme: start it with redis://",
            ),
            ("redis:localhost", "it needs \"://\" after the scheme"),
            ("http://localhost:6379", "unsupported scheme \"http\""),
            ("redis://", "it has no host"),
            ("redis://:hunter2@:6379", "it has no host"),
            (
                "redis://:hunter2@localhost:",
                "the port after \"localhost:\" is missing",
            ),
            (
                "redis://:hunter2@localhost:port",
                "the port \"port\" is not a number",
            ),
            (
                "redis://:hunter2@localhost:99999",
                "the port 99999 is out of range",
            ),
            ("redis://localhost:0", "the port 0 is out of range"),
            (
                "redis://[::1:6379",
                "the IPv6 host \"[::1:6379\" has no closing ']'",
            ),
            (
                "redis://[::1]6379",
                "unexpected \"6379\" after the IPv6 host [::1]",
            ),
            ("redis://0.0.0.0:6379", "0.0.0.0 is an address to listen on"),
            (
                "redis://:hunter2@localhost:6379/db1",
                "the database \"db1\" is not a number",
            ),
            (
                "redis://:hunter/2@localhost",
                "the user name or password holds '/', '?' or '#'",
            ),
            ("redis+unix://", "redis+unix:// needs a socket path"),
            ("u:hunter2@h://x", "it does not start with a scheme"),
            ("://localhost", "it does not start with a scheme"),
        ];
        for (url, want) in cases {
            let got = problem(url).unwrap_or_else(|| panic!("{url:?} was accepted"));
            assert!(
                got.starts_with(want),
                "{url:?}: {got:?} should start with {want:?}"
            );
            assert!(
                !got.contains("hunter"),
                "{url:?}: {got:?} holds the password"
            );
        }
    }

    #[test]
    fn tls_needs_its_feature() {
        let got = problem("rediss://:hunter2@localhost:6379/#insecure");
        if cfg!(feature = "tls") {
            assert_eq!(got, None);
            let got = problem("rediss://localhost/#nope").unwrap();
            assert!(
                got.starts_with("the fragment #nope means nothing here"),
                "{got}"
            );
        } else {
            let got = got.unwrap();
            assert!(
                got.starts_with("rediss:// (TLS) needs postpone's `tls` feature"),
                "{got}"
            );
        }
    }

    #[test]
    fn shown_without_user_info() {
        assert_eq!(shown("redis://u:hunter2@h:1/0"), "redis://***@h:1/0");
        assert_eq!(shown("redis://h:1"), "redis://h:1");
        assert_eq!(shown("u:hunter2@h"), "***@h");
        assert_eq!(shown("redis://u:p@ss@h"), "redis://***@h");
    }
}
