//! How results are shown: JSON for scripts, or aligned tables with relative times and (on a terminal
//! only, never with `NO_COLOR`) colour.

use std::fmt;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use chrono::{DateTime, Utc};
use comfy_table::presets::NOTHING;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};
use console::Style;
use serde::Serialize;

use postpone::ops::human_duration;

/// Writes one line on stdout. When stdout has closed (`postpone jobs t --json | head`), exits quietly
/// at once, as Unix tools do, instead of panicking as `println!` would.
pub(crate) fn write_line(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

/// `println!` through [`write_line`].
macro_rules! say {
    () => {
        $crate::output::write_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::write_line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// Output settings, and the store's clock that relative times are measured against.
#[derive(Debug, Clone)]
pub(crate) struct Out {
    /// One JSON document on stdout.
    pub(crate) json: bool,
    /// Absolute times instead of relative ones.
    pub(crate) absolute: bool,
    /// Colour on stdout.
    colour: bool,
    /// Now, by the store's clock (ms).
    pub(crate) now_ms: i64,
}

impl Out {
    pub(crate) fn new(json: bool, absolute: bool) -> Self {
        // https://no-color.org: a NO_COLOR that is set and not empty turns colour off.
        let allowed = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            && std::env::var("TERM").map_or(true, |t| t != "dumb");
        let colour = allowed && std::io::stdout().is_terminal();
        console::set_colors_enabled(colour);
        console::set_colors_enabled_stderr(allowed && std::io::stderr().is_terminal());
        Out {
            json,
            absolute,
            colour,
            now_ms: 0,
        }
    }

    /// Prints `value` as one pretty JSON document.
    pub(crate) fn json<T: Serialize + ?Sized>(&self, value: &T) {
        let text = serde_json::to_string_pretty(value).expect("the output serialises");
        say!("{text}");
    }

    /// Prints `value` as JSON on one line (for `stats --watch --json`).
    pub(crate) fn json_line<T: Serialize + ?Sized>(&self, value: &T) {
        let text = serde_json::to_string(value).expect("the output serialises");
        say!("{text}");
        let _ = std::io::stdout().flush();
    }

    /// A table with these column headers, no borders, columns as wide as their content.
    pub(crate) fn table(&self, headers: &[&str]) -> Table {
        let mut table = Table::new();
        table
            .load_preset(NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(headers.iter().map(|h| Cell::new(self.bold(h))));
        // Columns of one space, as `ls -l` and `kubectl get` do.
        for column in table.column_iter_mut() {
            column.set_padding((0, 2));
        }
        table
    }

    /// Right-aligns the columns at `indices` (numbers).
    pub(crate) fn numeric(table: &mut Table, indices: &[usize]) {
        for i in indices {
            if let Some(c) = table.column_mut(*i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }

    /// Prints a table (its lines trimmed on the right).
    pub(crate) fn print_table(&self, table: &Table) {
        for line in table.lines() {
            say!("{}", line.trim_end());
        }
    }

    /// `t` as "in 4m 12s", "3m ago" or "now" by the store's clock; absolute with `--absolute`.
    pub(crate) fn time(&self, t: DateTime<Utc>) -> String {
        if self.absolute {
            return absolute(t);
        }
        relative(t.timestamp_millis(), self.now_ms)
    }

    /// `text` in bold.
    pub(crate) fn bold(&self, text: &str) -> String {
        self.paint(Style::new().bold(), text)
    }

    /// `text` dimmed.
    pub(crate) fn dim(&self, text: &str) -> String {
        self.paint(Style::new().dim(), text)
    }

    /// `text` in green, yellow or red.
    pub(crate) fn good(&self, text: &str) -> String {
        self.paint(Style::new().green(), text)
    }

    pub(crate) fn warn(&self, text: &str) -> String {
        self.paint(Style::new().yellow(), text)
    }

    pub(crate) fn bad(&self, text: &str) -> String {
        self.paint(Style::new().red().bold(), text)
    }

    /// A job state's name, coloured: scheduled cyan, waiting (for other jobs) magenta, running and
    /// succeeded green, dead red, cancelled yellow.
    pub(crate) fn state(&self, state: &str) -> String {
        match state {
            "scheduled" => self.paint(Style::new().cyan(), state),
            "waiting" => self.paint(Style::new().magenta(), state),
            "running" | "succeeded" => self.good(state),
            "dead" => self.bad(state),
            "cancelled" => self.warn(state),
            other => other.to_owned(),
        }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.colour {
            style.force_styling(true).apply_to(text).to_string()
        } else {
            text.to_owned()
        }
    }
}

/// `t` as `2026-05-01 09:00:00 UTC`.
pub(crate) fn absolute(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `at_ms` against `now_ms`: "in 4m 12s", "3m ago", or "now" within a second.
pub(crate) fn relative(at_ms: i64, now_ms: i64) -> String {
    let diff = at_ms.saturating_sub(now_ms);
    let span = Duration::from_millis(diff.unsigned_abs());
    if span < Duration::from_secs(1) {
        "now".to_owned()
    } else if diff > 0 {
        format!("in {}", human_duration(span))
    } else {
        format!("{} ago", human_duration(span))
    }
}

/// `text` cut to `max` characters, on one line.
pub(crate) fn cut(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::{cut, relative};

    #[test]
    fn times_read_relative_to_now() {
        assert_eq!(relative(1_000_000 + 252_000, 1_000_000), "in 4m 12s");
        assert_eq!(relative(1_000_000 - 180_000, 1_000_000), "3m ago");
        assert_eq!(relative(1_000_400, 1_000_000), "now");
    }

    #[test]
    fn long_text_is_cut_on_one_line() {
        assert_eq!(cut("a\nb", 10), "a b");
        assert_eq!(cut("abcdef", 3), "abc…");
    }
}
