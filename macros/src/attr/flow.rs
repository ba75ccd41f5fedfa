//! The flow-control keys of `#[job(...)]`: the topic's `rate = "100/s"` and `max_running = 5`, and each
//! key's `key_rate = "10/s"` and `key_max_running = 2` (see `postpone::Job::key_limits`).

use syn::Expr;

use super::{int_literal, str_literal, Key};
use crate::duration::{parse_millis, FORMS};

/// `rate = "<jobs>/<period>"` (or `key_rate`, named by `key`): the period a unit (`s`, `m`, `h`, `d`:
/// one of it) or a duration (`"500ms"`, `"10s"`); returns (jobs, period ms).
pub(crate) fn rate_value(value: &Expr, key: Key) -> syn::Result<(u32, u64)> {
    let lit = str_literal(value, key)?;
    let (name, text) = (key.name(), lit.value());
    let err = |why: String| Err(syn::Error::new(lit.span(), why));
    let Some((jobs, per)) = text.split_once('/') else {
        return err(format!(
            "{name} {text:?} has no `/`: write jobs per period, e.g. \"100/s\", \"600/m\" or \"10/500ms\""
        ));
    };
    let jobs = match jobs.parse::<u32>() {
        Ok(0) => {
            return err(format!(
                "{name} {text:?} lets no job go: write at least 1 job per period"
            ))
        }
        Ok(n) => n,
        Err(_) => {
            return err(format!(
                "{name} {text:?}: {jobs:?} is not a number of jobs (1 to {})",
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
                    "{name} {text:?}: the period {per:?} is not `s`, `m`, `h`, `d` or a duration ({FORMS})"
                ))
            }
        },
    };
    Ok((jobs, per_ms))
}

/// `max_running = <n>` (or `key_max_running`, named by `key`): an integer literal, at least 1.
pub(crate) fn max_running_value(value: &Expr, key: Key) -> syn::Result<u32> {
    let lit = int_literal(value, key)?;
    let name = key.name();
    match lit.base10_parse::<u32>() {
        Ok(0) => Err(syn::Error::new(
            lit.span(),
            format!("{name} must be at least 1: leave it out for no limit"),
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(syn::Error::new(
            lit.span(),
            format!("{name} must be from 1 to {}", u32::MAX),
        )),
    }
}
