//! The dashboard in headless Chromium (Debian's chromium and chromium-driver), against a redis-server
//! each test starts: live counts, a dead letter requeued by its button, read-only mode, escaping, CSRF,
//! pause and the job actions by their buttons, the done tab of kept finished jobs, the batch pages,
//! and the busiest keys tab. Screenshots go to `target/tmp/dashboard-screenshots/`. One test binary, a module per
//! behaviour.

#![allow(missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod actions;
mod batches;
mod dead_letters;
mod done;
mod hosts;
mod jobs;
mod keys;
mod live;
mod security;
