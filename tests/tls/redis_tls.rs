//! `rediss://`: a real TLS round trip with a password, through the client, the worker and the hints.
//!
//! A crate of its own (`tests/tls`) because TLS is postpone's `tls` feature, which builds OpenSSL
//! bindings: the `postpone` package and its quickstart build without it, on a machine with no OpenSSL
//! headers.

#[path = "../support/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;
#[path = "../support/tempdir.rs"]
#[allow(dead_code, unreachable_pub)]
mod tempdir;

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use postpone::{Client, Job, JobContext, JobError, Worker};
use redis_server::RedisServer;
use serde::{Deserialize, Serialize};
use tempdir::TempDir;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "tls.ping")]
struct Ping {
    n: u32,
}

/// A self-signed certificate for 127.0.0.1, made with the `openssl` command.
fn self_signed(dir: &std::path::Path) -> (String, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the `openssl` command is needed for this test: apt-get install openssl");
    assert!(status.success(), "openssl could not make a certificate");
    (cert.display().to_string(), key.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_over_tls_with_a_password() {
    let certs = TempDir::new("postpone-tls-");
    let (cert, key) = self_signed(certs.path());
    let tls_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let server = RedisServer::builder()
        .arg("--tls-port")
        .arg(&tls_port)
        .arg("--tls-cert-file")
        .arg(&cert)
        .arg("--tls-key-file")
        .arg(&key)
        .arg("--tls-ca-cert-file")
        .arg(&cert)
        .arg("--tls-auth-clients")
        .arg("no")
        .arg("--requirepass")
        .arg("s3cret-pw")
        .start();
    // The certificate is self-signed, so the URL asks not to verify it (`#insecure`); the traffic is TLS.
    let url = format!("rediss://:s3cret-pw@127.0.0.1:{tls_port}/#insecure");
    let client = Client::builder()
        .namespace("tls")
        .redis(&url)
        .await
        .expect("connect over TLS");
    assert_eq!(client.backend_name(), "redis");

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |job: Ping, _: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(job.n);
            Ok::<(), JobError>(())
        }
    };
    // A long poll interval: the delayed job can only run on time if the hint (pub/sub over TLS) arrives.
    let worker = Worker::builder(&client)
        .handle(handler)
        .poll_interval(Duration::from_secs(60))
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    client.enqueue(Ping { n: 1 }).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("job over TLS")
        .unwrap();
    assert_eq!(first, 1);
    client
        .enqueue(Ping { n: 2 })
        .after(Duration::from_millis(200))
        .await
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("hinted job over TLS")
        .unwrap();
    assert_eq!(second, 2);
    shutdown.shutdown();
    running.await.unwrap().unwrap();

    // The plain port of the same server still demands the password: nothing got in without it.
    let err = Client::connect(&server.url()).await.unwrap_err();
    assert!(matches!(err, postpone::Error::Connect { .. }), "{err}");
}
