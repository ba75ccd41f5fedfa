//! The flow-control keys of `#[job(...)]`: `rate = "100/s"` and `max_running = 5`.

use syn::Expr;

use super::{int_literal, str_literal, Key};
use crate::duration::{parse_millis, FORMS};

/// `rate = "<jobs>/<period>"`: the period a unit (`s`, `m`, `h`, `d`: one of it) or a duration
/// (`"500ms"`, `"10s"`); returns (jobs, period ms).
pub(crate) fn rate_value(value: &Expr) -> syn::Result<(u32, u64)> {
    let lit = str_literal(value, Key::Rate)?;
    let text = lit.value();
    let err = |why: String| Err(syn::Error::new(lit.span(), why));
    let Some((jobs, per)) = text.split_once('/') else {
        return err(format!(
            "rate {text:?} has no `/`: write jobs per period, e.g. \"100/s\", \"600/m\" or \"10/500ms\""
        ));
    };
    let jobs = match jobs.parse::<u32>() {
        Ok(0) => {
            return err(format!(
                "rate {text:?} lets no job go: write at least 1 job per period"
            ))
        }
        Ok(n) => n,
        Err(_) => {
            return err(format!(
                "rate {text:?}: {jobs:?} is not a number of jobs (1 to {})",
                u32::MAX
            ))
        }
    };
    let per_ms = match per {
        "ms" => 1,
        "s" | "m" | "h" | "d" => parse_millis(&format!("1{per}")).expect("a known unit"),
        _ => match parse_millis(per) {
            Ok(ms) if ms > 0 => ms,
            _ => {
                return err(format!(
                    "rate {text:?}: the period {per:?} is not `s`, `m`, `h`, `d` or a duration ({FORMS})"
                ))
            }
        },
    };
    Ok((jobs, per_ms))
}

/// `max_running = <n>`: an integer literal, at least 1.
pub(crate) fn max_running_value(value: &Expr) -> syn::Result<u32> {
    let lit = int_literal(value, Key::MaxRunning)?;
    match lit.base10_parse::<u32>() {
        Ok(0) => Err(syn::Error::new(
            lit.span(),
            "max_running must be at least 1: leave it out for no limit",
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(syn::Error::new(
            lit.span(),
            format!("max_running must be from 1 to {}", u32::MAX),
        )),
    }
}
