//! Command-line flags for the examples: `--name value` or `--name=value`, and `--help`.
//!
//! A real service would use clap; the examples keep to the dependencies they are about. Each example
//! uses part of this file.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;
use std::time::Duration;

/// Parsed flags. Reading a flag with a value that does not parse prints why and exits with status 2.
#[derive(Debug)]
pub(crate) struct Flags {
    values: HashMap<String, String>,
}

impl Flags {
    /// Parses the process's arguments against the flag names in `known` (without `--`). Prints `usage`
    /// and exits on `--help`, or on anything else it does not know.
    pub(crate) fn from_env(usage: &str, known: &[&str]) -> Self {
        match Self::parse(std::env::args().skip(1), known) {
            Ok(Some(flags)) => flags,
            Ok(None) => {
                println!("{usage}");
                std::process::exit(0);
            }
            Err(e) => {
                eprintln!("{e}\n\n{usage}");
                std::process::exit(2);
            }
        }
    }

    /// Parses `args`; `Ok(None)` means `--help` was asked for.
    pub(crate) fn parse(
        args: impl IntoIterator<Item = String>,
        known: &[&str],
    ) -> Result<Option<Self>, String> {
        let mut values = HashMap::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--help" || arg == "-h" {
                return Ok(None);
            }
            let Some(flag) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg:?}"));
            };
            let (name, value) = match flag.split_once('=') {
                Some((name, value)) => (name.to_owned(), value.to_owned()),
                None => {
                    let value = args
                        .next()
                        .ok_or_else(|| format!("--{flag} needs a value"))?;
                    (flag.to_owned(), value)
                }
            };
            if !known.contains(&name.as_str()) {
                return Err(format!("unknown flag --{name}"));
            }
            values.insert(name, value);
        }
        Ok(Some(Flags { values }))
    }

    /// The flag's value, or `default` when it is not given.
    pub(crate) fn get<T: FromStr>(&self, name: &str, default: T) -> T
    where
        T::Err: Display,
    {
        match self.values.get(name) {
            Some(v) => v.parse().unwrap_or_else(|e| bad(name, v, e)),
            None => default,
        }
    }

    /// A duration flag (`500ms`, `2s`, `1.5s`, `30m`, `2h`, `0`), or `default`.
    pub(crate) fn duration(&self, name: &str, default: Duration) -> Duration {
        self.optional_duration(name).unwrap_or(default)
    }

    /// A duration flag, if given.
    pub(crate) fn optional_duration(&self, name: &str) -> Option<Duration> {
        let v = self.values.get(name)?;
        Some(parse_duration(v).unwrap_or_else(|e| bad(name, v, e)))
    }
}

fn bad(name: &str, value: &str, e: impl Display) -> ! {
    eprintln!("--{name} {value:?}: {e}");
    std::process::exit(2)
}

/// Parses `500ms`, `2s`, `1.5s`, `30m`, `2h` or `0`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?} has no unit: write 500ms, 2s, 30m or 2h"))?;
    let (number, unit) = s.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} does not start with a number"))?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?}: use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{s:?}: {e}"))
}

/// Shows a duration the way the flags take it: `2m`, `1.5s`, `12ms`.
pub(crate) fn show_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    let (value, unit) = match ms {
        0.0 => return "0".into(),
        ms if ms < 1000.0 => (ms, "ms"),
        ms if ms < 60_000.0 => (ms / 1000.0, "s"),
        ms if ms < 3_600_000.0 => (ms / 60_000.0, "m"),
        ms => (ms / 3_600_000.0, "h"),
    };
    let text = match unit {
        "ms" => format!("{value:.0}"),
        _ => format!("{value:.2}"),
    };
    let text = match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.'),
        false => &text,
    };
    format!("{text}{unit}")
}
