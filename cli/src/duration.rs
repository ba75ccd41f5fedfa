//! Durations as people type them: `500ms`, `30s`, `10m`, `1h30m`, `2d`.

use std::time::Duration;

/// Parses numbers each followed by a unit (`ms`, `s`, `m`, `h`, `d`), added up: `1h30m`, `2m30s`,
/// `500ms`; `0` alone is zero.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    const FORMS: &str = "write a number and a unit, e.g. 500ms, 30s, 10m, 1h30m, 2d";
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(format!("empty duration: {FORMS}"));
    }
    let mut total_ms: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("unreadable duration {text:?}: {FORMS}"));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("duration {text:?} is too long"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(format!("duration {text:?} lacks a unit after {n}: {FORMS}")),
            unit => return Err(format!("unknown unit {unit:?} in {text:?}: {FORMS}")),
        };
        rest = &rest[unit_len..];
        total_ms = n
            .checked_mul(factor)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or_else(|| format!("duration {text:?} is too long"))?;
    }
    Ok(Duration::from_millis(total_ms))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_add_up_their_parts() {
        for (text, ms) in [
            ("0", 0),
            ("500ms", 500),
            ("30s", 30_000),
            ("10m", 600_000),
            ("1h30m", 5_400_000),
            ("2m30s", 150_000),
            ("1d", 86_400_000),
            ("1s500ms", 1500),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(ms)),
                "{text}"
            );
        }
        for bad in [
            "",
            "10",
            "m",
            "10x",
            "1.5h",
            "-1s",
            "1h 30m",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
