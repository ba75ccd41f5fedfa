//! The optional token of a standalone dashboard: HTTP basic auth whose password is the token (browsers
//! prompt for it), or a bearer token.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The token every request must carry.
#[derive(Debug)]
pub(crate) struct Token(String);

impl Token {
    pub(crate) fn new(token: String) -> Self {
        Token(token)
    }

    /// Whether an `Authorization` header value carries the token.
    fn accepts(&self, authorization: &str) -> bool {
        if let Some(bearer) = authorization.strip_prefix("Bearer ") {
            return same(bearer.trim().as_bytes(), self.0.as_bytes());
        }
        let Some(basic) = authorization.strip_prefix("Basic ") else {
            return false;
        };
        let Some(decoded) = base64_decode(basic.trim()) else {
            return false;
        };
        match decoded.iter().position(|&b| b == b':') {
            Some(colon) => same(&decoded[colon + 1..], self.0.as_bytes()),
            None => false,
        }
    }
}

/// Byte strings compared in time that depends on their lengths only.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s {
        acc = (acc << 6) | value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Lets a request through when it carries the token; else 401 with a basic-auth challenge.
pub(crate) async fn require(State(token): State<Arc<Token>>, req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| token.accepts(v));
    if ok {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            "Basic realm=\"postpone dashboard\", charset=\"UTF-8\"",
        )],
        "this dashboard needs its token (as the basic-auth password, any user name)\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_and_bearer_carry_the_token() {
        let t = Token::new("s3cret".into());
        // "ops:s3cret" and "ops:wrong"
        assert!(t.accepts("Basic b3BzOnMzY3JldA=="));
        assert!(!t.accepts("Basic b3BzOndyb25n"));
        assert!(t.accepts("Bearer s3cret"));
        assert!(!t.accepts("Bearer s3cre"));
        assert!(!t.accepts("s3cret"));
        assert!(!t.accepts("Basic !!!"));
    }
}
