//! `doctor`: the library's checks of the store, one line each; exit 1 when any is bad.

use postpone::ops::{Check, Level, Ops};
use serde::Serialize;

use crate::failure::Failure;
use crate::output::say;
use crate::output::Out;

/// `doctor --json`.
#[derive(Serialize)]
struct Doc<'a> {
    /// `"ok"`, `"warn"` or `"bad"`: the worst check.
    level: Level,
    checks: &'a [Check],
}

/// `doctor`.
pub(crate) async fn doctor(ops: &Ops, out: &Out, where_: &str) -> Result<(), Failure> {
    let checks = ops.doctor().await?;
    let worst = checks.iter().map(|c| c.level).max().unwrap_or(Level::Ok);
    if out.json {
        out.json(&Doc {
            level: worst,
            checks: &checks,
        });
    } else {
        say!("{}", out.bold(&format!("checking {where_}")));
        let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &checks {
            let level = match c.level {
                Level::Ok => out.good("ok  "),
                Level::Warn => out.warn("warn"),
                _ => out.bad("bad "),
            };
            say!("{level}  {:<width$}  {}", c.name, c.found);
            if let Some(advice) = &c.advice {
                say!("      {:<width$}  {} {advice}", "", out.dim("->"));
            }
        }
    }
    if worst >= Level::Bad {
        let n = checks.iter().filter(|c| c.level == Level::Bad).count();
        return Err(Failure::Shown(format!(
            "{n} check(s) bad: jobs are at risk until fixed (see above)"
        )));
    }
    Ok(())
}
