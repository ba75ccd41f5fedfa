//! `postpone serve`: the dashboard served by the real binary, against a redis-server of the test's own.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use support::{client, command, postpone, seed, RedisServer};

/// A loopback port free right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` over HTTP/1.1; the whole response, or `None` while nothing listens.
fn get(port: u16, path: &str, auth: Option<&str>) -> Option<String> {
    get_as(port, &format!("127.0.0.1:{port}"), path, auth)
}

/// GET `path` from the server on `port`, sent with this `Host` (as a browser that resolved another
/// name to 127.0.0.1 would).
fn get_as(port: u16, host: &str, path: &str, auth: Option<&str>) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let auth = auth.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_the_dashboard_with_its_token() {
    let server = RedisServer::start();
    let c = client(&server, "served").await;
    seed(&c, 3, &[]).await;
    let port = free_port();
    let mut cmd = command();
    cmd.args(["--redis", &server.url(), "--namespace", "served", "serve"])
        .args(["--addr", &format!("127.0.0.1:{port}"), "--token", "s3cret"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("starting postpone serve");
    let page = support::wait::eventually("the dashboard to answer", || async {
        get(port, "/", Some("s3cret")).filter(|r| r.starts_with("HTTP/1.1 200"))
    })
    .await;
    assert!(
        page.contains("cli.orders"),
        "the overview lists the topic:\n{page}"
    );
    let refused = get(port, "/", None).expect("an answer");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn serve_refuses_a_public_address_without_a_token() {
    let server = RedisServer::start();
    let run = postpone(&server.url(), "served", &["serve", "--addr", "0.0.0.0:0"]);
    run.expect(2);
    assert!(run.stderr.contains("--token"), "{run:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_dashboard_without_a_token_refuses_a_rebinding_host() {
    let server = RedisServer::start();
    let c = client(&server, "served").await;
    seed(&c, 3, &[]).await;
    let port = free_port();
    let mut cmd = command();
    cmd.args(["--redis", &server.url(), "--namespace", "served", "serve"])
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .env_remove("POSTPONE_DASHBOARD_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("starting postpone serve");
    support::wait::eventually("the dashboard to answer", || async {
        get(port, "/", None).filter(|r| r.starts_with("HTTP/1.1 200"))
    })
    .await;
    let local = get_as(port, &format!("localhost:{port}"), "/", None).expect("an answer");
    assert!(local.starts_with("HTTP/1.1 200"), "{local}");
    let rebound = format!("rebind.attacker.example:{port}");
    let refused = get_as(port, &rebound, "/topic?name=cli.orders", None).expect("an answer");
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(!refused.contains("cli.orders"), "{refused}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_dashboard_takes_its_token_from_the_environment_and_its_host_names() {
    let server = RedisServer::start();
    let c = client(&server, "served").await;
    seed(&c, 3, &[]).await;
    let port = free_port();
    let mut cmd = command();
    cmd.args(["--redis", &server.url(), "--namespace", "served", "serve"])
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .args(["--allowed-host", "jobs.example.com"])
        .env("POSTPONE_DASHBOARD_TOKEN", "s3cret")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("starting postpone serve");
    let named = format!("jobs.example.com:{port}");
    let page = support::wait::eventually("the dashboard to answer", || async {
        get_as(port, &named, "/", Some("s3cret")).filter(|r| r.starts_with("HTTP/1.1 200"))
    })
    .await;
    assert!(page.contains("cli.orders"), "{page}");
    // Not in the process list.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("s3cret"));
    let refused =
        get_as(port, &format!("127.0.0.1:{port}"), "/", Some("s3cret")).expect("an answer");
    assert!(
        refused.starts_with("HTTP/1.1 403"),
        "a name not listed: {refused}"
    );
    let refused = get_as(port, &named, "/", None).expect("an answer");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn serve_allowed_hosts_need_a_token() {
    let server = RedisServer::start();
    let mut cmd = command();
    cmd.args([
        "--redis",
        &server.url(),
        "serve",
        "--allowed-host",
        "jobs.example.com",
    ])
    .env_remove("POSTPONE_DASHBOARD_TOKEN");
    let run = support::run(cmd);
    run.expect(2);
    assert!(run.stderr.contains("POSTPONE_DASHBOARD_TOKEN"), "{run:#?}");
}
