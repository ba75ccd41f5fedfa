//! Standard output that outlives its reader. Rust ignores `SIGPIPE`, so a line written after the reader
//! has gone (`postpone-bench drain | head -3`) fails with `BrokenPipe`, and `println!` panics on it. The
//! harness writes its lines through `outln!` instead: once standard output is closed, the lines are
//! dropped and the run goes on to its end, so that its worker processes are stopped and Redis is left
//! empty as after any run (exiting there would leave a worker process waiting for jobs that never
//! come). Any other write error is said once on standard error.

use std::fmt::Arguments;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to standard output failed: later lines are dropped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` and a newline to standard output, unless it is closed. See the module's doc.
pub(crate) fn line(args: Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = io::stdout().lock();
    if let Err(e) = writeln!(out, "{args}").and_then(|()| out.flush()) {
        if !CLOSED.swap(true, Ordering::Relaxed) && e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("postpone-bench: standard output failed ({e}); its later lines are dropped");
        }
    }
}

/// `println!` for the harness: a closed standard output drops the line instead of panicking.
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
