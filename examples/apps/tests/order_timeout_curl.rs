//! The `curl` lines of `order_timeout/main.rs`, run as written, in order, by `bash` against the example's
//! own binary (jobs in memory, orders in a PostgreSQL schema of the test's own): each does what its
//! comment says, and the service's log, sent to a pipe, holds no colour codes.

#[path = "../../../tests/support/example.rs"]
mod example;
mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::postgres::{database_url, TestSchema};

/// The example's binary, newer than its sources.
fn example_binary() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    example::example_binary(
        "order_timeout",
        &[here.join("order_timeout"), here.join("support")],
        "run `cargo build -p postpone-examples --example order_timeout` (plain `cargo test` builds it)",
    )
}

/// The `sh` block of the doc comment at the top of `main.rs`: the lines a reader copies.
fn curl_lines() -> String {
    let main = include_str!("../order_timeout/main.rs");
    let mut block = None;
    let mut lines = Vec::new();
    for line in main.lines().map_while(|l| l.strip_prefix("//!")) {
        let line = line.strip_prefix(' ').unwrap_or(line);
        match (line, &block) {
            ("```sh", None) => block = Some(()),
            ("```", Some(())) => return lines.join("\n"),
            (line, Some(())) => lines.push(line.to_owned()),
            _ => {}
        }
    }
    panic!("no ```sh block in order_timeout/main.rs");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Stops the service with SIGTERM (what Ctrl-C would do) and returns what it printed.
fn stop(mut child: Child, rest: mpsc::Receiver<String>) -> String {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().expect("waiting for the service");
    let out = rest
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_default();
    assert!(status.success(), "the service exited with {status}:\n{out}");
    out
}

#[tokio::test]
async fn the_curl_lines_work_in_the_order_written() {
    Command::new("curl")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .expect("this test runs the example's curl lines: install curl (`apt-get install curl`)");
    let schema = TestSchema::create("curl_lines").await;
    let port = free_port();
    let mut child = Command::new(example_binary())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--payment-window", "1m", "--schema", schema.name()])
        .env("DATABASE_URL", database_url())
        .env_remove("REDIS_URL")
        .env_remove("REDIS_CLUSTER_NODES")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the order_timeout example");

    // It prints a line when it serves (after a log line or two); the rest is read on a thread until it
    // exits.
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (serving_tx, serving_rx) = mpsc::channel();
    let (rest_tx, rest_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        for line in stdout.lines().map_while(Result::ok) {
            if line.starts_with("order service on http://") {
                let _ = serving_tx.send(());
            }
            out.push_str(&line);
            out.push('\n');
        }
        let _ = rest_tx.send(out);
    });
    if serving_rx.recv_timeout(Duration::from_secs(30)).is_err() {
        let _ = child.kill();
        let out = rest_rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        panic!("the service did not start:\n{out}");
    }

    let script = curl_lines().replace("localhost:3000", &format!("127.0.0.1:{port}"));
    let ran = Command::new("bash")
        .args(["-euo", "pipefail", "-c"])
        .arg(format!("{script}\necho\necho \"a=$a b=$b\""))
        .output()
        .expect("running bash");
    let out = String::from_utf8_lossy(&ran.stdout).into_owned();
    let log = stop(child, rest_rx);
    assert!(
        ran.status.success(),
        "the curl lines failed ({}):\n{out}\n{}",
        ran.status,
        String::from_utf8_lossy(&ran.stderr)
    );

    // Three answers, one a line: the paid order, the extended one, the extended one again.
    let answers: Vec<&str> = out.split_inclusive('}').map(str::trim).collect();
    assert!(answers.len() >= 3, "{out}");
    assert!(
        answers[0].contains(r#""status":"paid""#),
        "pay: {}",
        answers[0]
    );
    assert!(
        answers[1].contains(r#""status":"pending""#),
        "extend: {}",
        answers[1]
    );
    assert!(
        answers[2].contains(r#""status":"pending""#),
        "get: {}",
        answers[2]
    );
    let ids = out.lines().last().unwrap_or_default();
    assert!(
        answers[1].contains(&format!(
            r#""id":{}"#,
            ids.rsplit("b=").next().unwrap_or_default()
        )),
        "{out}"
    );

    assert!(
        !log.contains('\u{1b}'),
        "the service printed colour codes into a pipe:\n{log}"
    );
    assert!(log.contains("order placed"), "its log: {log}");
}
