//! Test support for the outbox: the workspace's redis-server, wait and example helpers (in
//! `tests/support/` at the top), and a PostgreSQL schema of each test's own.
#![allow(dead_code, unreachable_pub)]

pub mod db;
#[path = "../../../tests/support/example.rs"]
pub mod example;
#[path = "../../../tests/support/redis_server.rs"]
pub mod redis_server;
#[path = "../../../tests/support/tempdir.rs"]
pub mod tempdir;
#[path = "../../../tests/support/wait.rs"]
pub mod wait;
