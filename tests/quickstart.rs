//! The quickstart, as the README runs it: in memory, then on a redis-server of the test's own, each time
//! with its output sent to a pipe (no colour codes there); then the README's line that cleans what it
//! left in Redis.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::example::example_binary;
use support::redis_server::RedisServer;

/// The quickstart's binary, newer than its source.
fn quickstart() -> PathBuf {
    example_binary(
        "quickstart",
        &[Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart.rs")],
        "run `cargo build --example quickstart` (plain `cargo test` builds it)",
    )
}

fn run(redis_url: Option<&str>) -> Output {
    let mut cmd = Command::new(quickstart());
    cmd.env_remove("REDIS_URL")
        .env_remove("REDIS_CLUSTER_NODES")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    if let Some(url) = redis_url {
        cmd.env("REDIS_URL", url);
    }
    cmd.output().expect("running the quickstart")
}

/// Exit 0, every check passed, and plain text.
fn check(out: &Output, backend: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}:\n{stdout}\n{stderr}", out.status);
    assert!(
        stdout.starts_with(&format!("postpone quickstart, backend: {backend}\n")),
        "{stdout}"
    );
    assert_eq!(stdout.matches("\nok: ").count(), 4, "{stdout}");
    assert!(!stdout.contains("FAILED"), "{stdout}");
    assert!(
        !stdout.contains('\u{1b}') && !stderr.contains('\u{1b}'),
        "colour codes in a pipe:\n{stdout}"
    );
    // The subscriber is there: the dead job is visible in the log too, not only through the hook.
    assert!(stdout.contains("job dead-lettered"), "{stdout}");
    stdout
}

#[test]
fn in_memory() {
    check(&run(None), "memory");
}

#[test]
fn on_redis_then_cleaned_by_the_readme_line() {
    let server = RedisServer::start();
    check(&run(Some(&server.url())), "redis");
    // Run twice: what the first run left does not trouble the second.
    check(&run(Some(&server.url())), "redis");

    // Every key of this server (the quickstart is its only user): the README's line must leave none.
    let keys = |server: &RedisServer| -> Vec<String> {
        let out = Command::new("redis-cli")
            .args(["-u", &server.url(), "--scan"])
            .output()
            .expect("redis-cli (Debian's redis-tools)");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    };
    assert!(!keys(&server).is_empty(), "the quickstart left no counters");

    let readme = include_str!("../README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("redis-cli ") && l.contains("postpone:{quickstart[:}]*"))
        .expect("the README's line that cleans what the quickstart left");
    let line = line.replace("redis://127.0.0.1:6379", &server.url());
    let status = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &line])
        .status()
        .expect("bash");
    assert!(status.success(), "{line}");
    assert_eq!(keys(&server), Vec::<String>::new(), "left after: {line}");
}

/// Without a Redis at `REDIS_URL`: exit 1 and one line that says where it tried and why it failed, each
/// cause once (not `main`'s Debug output).
#[test]
fn without_redis_says_so_in_one_line() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let out = run(Some(&format!("redis://127.0.0.1:{port}")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line:\n{stderr}"));
    let expected = format!("error: could not connect to Redis at 127.0.0.1:{port}: ");
    assert!(line.starts_with(&expected), "{line}");
    assert_eq!(line.matches("refused").count(), 1, "{line}");
    assert!(!line.contains("Connect {"), "{line}");
}
