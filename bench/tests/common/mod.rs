//! What the harness's end-to-end tests share: a `redis-server` of their own, and a run of
//! `postpone-bench` that must succeed, read by its last line of JSON.

#![allow(dead_code, unreachable_pub)]

use std::process::Command;

/// The workspace's test `redis-server` (tests/support at the top).
#[path = "../../../tests/support/redis_server.rs"]
pub mod redis_server;
#[path = "../../../tests/support/tempdir.rs"]
pub mod tempdir;

pub use redis_server::RedisServer;

/// Runs `postpone-bench` with `args` against `redis`, asserts that it succeeded, and returns its JSON
/// line.
pub fn bench(redis: &RedisServer, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_postpone-bench"))
        .args(args)
        .args(["--redis", &redis.url()])
        .output()
        .expect("postpone-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("a JSON line");
    serde_json::from_str(last).expect("the last line is JSON")
}
