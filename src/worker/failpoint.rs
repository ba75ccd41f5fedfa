//! Crash points for fault tests: a process-wide hook the worker calls where a crash matters most.
//!
//! Hidden (`postpone::__private::failpoint`) and inert unless a test process installs a hook: the fault
//! suite's worker process (`examples/fault_worker.rs`) logs what it sees there, and aborts itself at a
//! chosen point to prove that a crash right after a claim, or between a handler's success and its
//! acknowledgement, loses nothing.

use std::sync::OnceLock;

use crate::store::{ClaimedJob, FinishItem, FinishOutcome};

/// A point in a worker's life where a fault test may look, or crash the process.
#[derive(Debug)]
#[non_exhaustive]
pub enum Point<'a> {
    /// A claim is about to be sent, with this lease token (a claim sent again keeps its token).
    Claiming {
        /// The topic.
        topic: &'a str,
        /// The claim's lease token.
        token: u64,
    },
    /// A claim's reply arrived with these jobs, maybe none (at `now_ms` by the store's clock); no
    /// handler of theirs has started.
    Claimed {
        /// The topic.
        topic: &'a str,
        /// The claim's lease token.
        token: u64,
        /// The store's time of the claim, ms.
        now_ms: i64,
        /// The claimed jobs.
        jobs: &'a [ClaimedJob],
    },
    /// These handlers have finished; their outcomes are about to be recorded.
    Finishing {
        /// The topic.
        topic: &'a str,
        /// The outcomes.
        items: &'a [FinishItem],
    },
    /// The store recorded these outcomes.
    Finished {
        /// The topic.
        topic: &'a str,
        /// The outcomes sent.
        items: &'a [FinishItem],
        /// What the store did with each.
        outcomes: &'a [FinishOutcome],
    },
}

static HOOK: OnceLock<fn(&Point<'_>)> = OnceLock::new();

/// Installs the process's hook (once; returns false if one was already set).
pub fn set_hook(hook: fn(&Point<'_>)) -> bool {
    HOOK.set(hook).is_ok()
}

/// Calls the hook, if any.
pub(crate) fn hit(point: Point<'_>) {
    if let Some(hook) = HOOK.get() {
        hook(&point);
    }
}
