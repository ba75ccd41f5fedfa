//! Error fingerprints: a dead letter's reason with what varies between occurrences replaced, so that
//! "timeout after 31s" and "timeout after 30s" fall in one group.

/// The fingerprint of an error text: quoted strings become `"…"`, UUIDs and hex ids (8+ hex digits, or
/// `0x…`) `<hex>`, and numbers `<n>` (with their decimals); runs of white space one space.
///
/// ```
/// use postpone_dashboard::fingerprint;
///
/// assert_eq!(fingerprint("timeout after 31s"), fingerprint("timeout after 30s"));
/// assert_eq!(fingerprint("HTTP 503 from 'https://a.example/x'"), "HTTP <n> from '…'");
/// assert_eq!(fingerprint("order 9f86d081884c7d65 not found"), "order <hex> not found");
/// ```
pub fn fingerprint(reason: &str) -> String {
    let chars: Vec<char> = reason.chars().collect();
    let mut out = String::with_capacity(reason.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let word_start = i == 0 || !is_word(chars[i - 1]);
        if word_start && (c == '"' || c == '\'' || c == '`') {
            if let Some(len) = chars[i + 1..].iter().position(|&d| d == c) {
                out.push(c);
                out.push('…');
                out.push(c);
                i += len + 2;
                continue;
            }
        }
        if word_start && is_word(c) {
            let end = i + chars[i..]
                .iter()
                .take_while(|&&d| is_word(d) || d == '-')
                .count();
            let word: String = chars[i..end].iter().collect();
            if is_hex_id(&word) {
                out.push_str("<hex>");
                i = end;
                continue;
            }
        }
        if c.is_ascii_digit() {
            let end = i + chars[i..]
                .iter()
                .take_while(|&&d| d.is_ascii_digit() || d == '.' || d == '_' || d == ',')
                .count();
            // A trailing separator is punctuation, not part of the number.
            let end = (i + 1..=end)
                .rev()
                .find(|&e| chars[e - 1].is_ascii_digit())
                .unwrap_or(end);
            out.push_str("<n>");
            i = end;
            continue;
        }
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
            i += 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out.trim().to_owned()
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `0x1f`, a UUID, or 8+ characters of hex digits (with a digit among them, so that words such as
/// "deadbeef" or "accepted" are not taken).
fn is_hex_id(word: &str) -> bool {
    if let Some(hex) = word.strip_prefix("0x") {
        return !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    let digits: String = word.chars().filter(|&c| c != '-').collect();
    digits.len() >= 8
        && digits.chars().all(|c| c.is_ascii_hexdigit())
        && digits.chars().any(|c| c.is_ascii_digit())
        && digits.chars().any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::fingerprint;

    #[test]
    fn what_varies_is_replaced() {
        let same = [
            ("timeout after 31s", "timeout after 30s"),
            ("timeout after 1.5s", "timeout after 30s"),
            ("HTTP 503: \"busy\"", "HTTP 502: \"gateway gone\""),
            (
                "job 550e8400-e29b-41d4-a716-446655440000 failed",
                "job 123e4567-e89b-12d3-a456-426614174000 failed",
            ),
            ("lock held by 0x7f3a", "lock held by 0x1"),
            ("user 42  not   found", "user 7 not found"),
            (
                "decode: missing field `order_id` at line 1 column 12",
                "decode: missing field `x` at line 3 column 99",
            ),
        ];
        for (a, b) in same {
            assert_eq!(fingerprint(a), fingerprint(b), "{a} / {b}");
        }
        let different = [
            ("timeout after 30s", "connection refused"),
            ("HTTP 503", "SMTP 503"),
        ];
        for (a, b) in different {
            assert_ne!(fingerprint(a), fingerprint(b), "{a} / {b}");
        }
        assert_eq!(fingerprint("timeout after 31s"), "timeout after <n>s");
        assert_eq!(fingerprint("retry 3, then 4."), "retry <n>, then <n>.");
        assert_eq!(fingerprint("deadbeef accepted"), "deadbeef accepted");
        assert_eq!(fingerprint("it's 'unclosed"), "it's 'unclosed");
    }
}
