//! Waiting for something that happens later: poll a condition until it holds, failing the test with
//! what was awaited once a deadline passes. Never a bare sleep.
//!
//! ```ignore
//! let counts = eventually("the job to be processed", || async {
//!     let c = topic.counts().await.unwrap();
//!     (c.processed == 1).then_some(c)
//! })
//! .await;
//! wait_until("every job to run", || runs.lock().unwrap().len() == N).await;
//! ```
//!
//! It is `support::wait` for a binary that has `mod support;` (the conformance suites use it from
//! there); a binary that does not want the rest of `support` includes this file alone, with
//! `#[path = "support/wait.rs"] mod wait;` (never both: clippy rejects a file loaded twice).
// Each test binary uses only part of it.
#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a wait lasts unless told otherwise: generous, since a loaded machine is slow, and a wait
/// ends as soon as its condition holds.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// The first pause between two checks; it doubles up to [`MAX_POLL`], so a condition that holds soon
/// is seen soon and a long wait does not keep the machine busy.
const FIRST_POLL: Duration = Duration::from_millis(5);
const MAX_POLL: Duration = Duration::from_millis(50);

/// Polls `check` until it gives `Some`, and returns that; panics, naming `what`, after [`WAIT`].
pub(crate) async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(WAIT, what, check).await
}

/// Polls `check` until it gives `Some`, and returns that; panics, naming `what`, after `timeout`. The
/// last check is made after the deadline.
pub(crate) async fn eventually_within<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    let mut pause = FIRST_POLL;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// Polls the synchronous condition `cond` until it holds; panics, naming `what`, after [`WAIT`].
pub(crate) async fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    wait_until_within(WAIT, what, cond).await
}

/// Polls the synchronous condition `cond` until it holds; panics, naming `what`, after `timeout`.
pub(crate) async fn wait_until_within(
    timeout: Duration,
    what: &str,
    mut cond: impl FnMut() -> bool,
) {
    eventually_within(timeout, what, || std::future::ready(cond().then_some(()))).await
}
