//! `scripts [--prune]`: postpone's function libraries on the store's servers (see the library's
//! `Ops::script_libraries`), and with `--prune` other builds' deleted.

use postpone::ops::Ops;

use crate::failure::Failure;
use crate::output::say;
use crate::output::Out;

/// `scripts`.
pub(crate) async fn scripts(
    ops: &Ops,
    out: &Out,
    server: &str,
    prune: bool,
) -> Result<(), Failure> {
    let found = if prune {
        ops.prune_script_libraries().await?
    } else {
        ops.script_libraries().await?
    };
    if out.json {
        out.json(&found);
        return Ok(());
    }
    let servers = match found.servers {
        0 => "no server (in memory)".to_owned(),
        1 => "1 server".to_owned(),
        n => format!("{n} servers"),
    };
    say!(
        "{}",
        out.bold(&format!(
            "postpone's function libraries on {server} ({servers}; every namespace's)"
        ))
    );
    if found.without_functions > 0 {
        say!(
            "{} without functions (before Redis 7.0, or FUNCTION renamed or denied): scripts run there by \
             EVALSHA",
            found.without_functions
        );
    }
    say!("this build's:    {}", found.current);
    say!("other builds':   {}", found.others);
    if prune {
        say!("deleted:         {}", found.deleted);
    }
    say!(
        "memory:          {} KiB (every function library of the servers)",
        found.memory_bytes / 1024
    );
    if found.others > 0 && !prune {
        say!(
            "{} postpone scripts --prune deletes other builds' libraries; a process of one that still runs \
             loads its own again at its next call",
            out.dim("->")
        );
    }
    Ok(())
}
