//! Test support for the examples: the workspace's own redis-server and wait helpers (shared with the
//! `postpone` crate's tests, in `tests/support/`), and PostgreSQL schemas, which only these tests use.
#![allow(dead_code, unreachable_pub)]

pub mod postgres;
#[path = "../../../../tests/support/redis_server.rs"]
pub mod redis_server;
#[path = "../../../../tests/support/tempdir.rs"]
pub mod tempdir;
#[path = "../../../../tests/support/wait.rs"]
pub mod wait;
