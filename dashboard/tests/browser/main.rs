//! The dashboard in headless Chromium (Debian's chromium and chromium-driver), against a redis-server
//! each test starts: live counts, a dead letter requeued by its button, read-only mode, escaping, CSRF,
//! and pause and the job actions by their buttons. Screenshots go to
//! `target/tmp/dashboard-screenshots/`. One test binary, a module per behaviour.

#![allow(missing_docs)]

#[path = "../support/mod.rs"]
mod support;

mod actions;
mod dead_letters;
mod hosts;
mod jobs;
mod live;
mod security;
