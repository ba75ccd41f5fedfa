//! Shared test support. Each test binary uses only part of it.
#![allow(dead_code, unreachable_pub)]

pub mod batches;
pub mod enqueuers;
pub mod events;
pub mod example;
pub mod redis_cluster;
pub mod redis_server;
pub mod store;
pub mod tempdir;
pub mod wait;
pub mod workflows;
