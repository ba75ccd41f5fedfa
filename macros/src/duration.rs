//! Durations written as string literals: `"0"`, `"500ms"`, `"30s"`, `"5m"`, `"2h"`, `"1d"`.

use syn::LitStr;

/// The forms a duration may take, for error messages.
pub(crate) const FORMS: &str = r#""500ms", "30s", "5m", "2h", "1d""#;

/// One day in milliseconds.
pub(crate) const DAY_MS: u64 = 24 * 3600 * 1000;
/// One year (365 days) in milliseconds: the longest retry delay (`postpone::schedule::MAX_DELAY`).
pub(crate) const YEAR_MS: u64 = 365 * DAY_MS;

/// Why a duration string was rejected.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DurationError {
    /// Not an integer followed by a known unit.
    Unparsable,
    /// A number other than 0 with no unit.
    NoUnit(u64),
    /// More milliseconds than a `u64` holds.
    Overflow,
}

/// Parses `"0"` or an integer followed by `ms`, `s`, `m`, `h` or `d` into milliseconds.
///
/// Strict on purpose: no spaces, signs, fractions or upper-case units, so the attribute reads the way
/// the schedule is printed.
pub(crate) fn parse_millis(s: &str) -> Result<u64, DurationError> {
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(digits_end);
    if number.is_empty() {
        return Err(DurationError::Unparsable);
    }
    let n: u64 = number.parse().map_err(|_| DurationError::Overflow)?;
    let factor: u64 = match unit {
        "" if n == 0 => return Ok(0),
        "" => return Err(DurationError::NoUnit(n)),
        "ms" => 1,
        "s" => 1000,
        "m" => 60 * 1000,
        "h" => 3600 * 1000,
        "d" => DAY_MS,
        _ => return Err(DurationError::Unparsable),
    };
    n.checked_mul(factor).ok_or(DurationError::Overflow)
}

/// Reads a duration literal of the setting `key`, with an error spanning the literal.
pub(crate) fn lit_millis(lit: &LitStr, key: &str) -> syn::Result<u64> {
    let text = lit.value();
    parse_millis(&text).map_err(|err| {
        let msg = match err {
            DurationError::Unparsable => {
                format!("unparsable duration {text:?} in {key}: use a number and a unit: {FORMS}")
            }
            DurationError::NoUnit(n) => format!(
                "duration {text:?} in {key} has no unit: write \"{n}ms\", \"{n}s\", \"{n}m\", \"{n}h\" or \
                 \"{n}d\" (only \"0\" goes without one)"
            ),
            DurationError::Overflow => {
                format!("duration {text:?} in {key} is too long to count in milliseconds")
            }
        };
        syn::Error::new(lit.span(), msg)
    })
}

/// Describes `ms` the way a user would write it, for error messages: `"2m"`, `"1500ms"`.
pub(crate) fn format_millis(ms: u64) -> String {
    let units = [(DAY_MS, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")];
    if ms == 0 {
        return "0".into();
    }
    for (size, unit) in units {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        let table = [
            ("0", 0),
            ("0s", 0),
            ("500ms", 500),
            ("30s", 30_000),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("1d", DAY_MS),
            ("365d", YEAR_MS),
            ("007s", 7000),
        ];
        for (text, ms) in table {
            assert_eq!(parse_millis(text), Ok(ms), "{text}");
        }
    }

    #[test]
    fn rejected_forms() {
        for text in [
            "", "s", "2x", "1.5s", "-1s", " 5s", "5 s", "5S", "5sec", "1m30s", "ms5",
        ] {
            assert_eq!(
                parse_millis(text),
                Err(DurationError::Unparsable),
                "{text:?}"
            );
        }
        assert_eq!(parse_millis("5"), Err(DurationError::NoUnit(5)));
        assert_eq!(
            parse_millis("99999999999999999999s"),
            Err(DurationError::Overflow)
        );
        assert_eq!(
            parse_millis("9999999999999999d"),
            Err(DurationError::Overflow)
        );
    }

    #[test]
    fn messages_name_the_setting_and_the_fix() {
        let lit: LitStr = syn::parse_quote!("2x");
        let err = lit_millis(&lit, "retry").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unparsable duration "2x" in retry: use a number and a unit: "500ms", "30s", "5m", "2h", "1d""#
        );
        let lit: LitStr = syn::parse_quote!("30");
        let err = lit_millis(&lit, "lease").unwrap_err();
        assert!(err.to_string().contains(r#"write "30ms", "30s""#), "{err}");
    }

    #[test]
    fn formats_like_the_schedule_display() {
        assert_eq!(format_millis(0), "0");
        assert_eq!(format_millis(1500), "1500ms");
        assert_eq!(format_millis(120_000), "2m");
        assert_eq!(format_millis(2 * DAY_MS), "2d");
    }
}
