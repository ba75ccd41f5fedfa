//! What the CLI's tests share: a redis-server of their own (the repository's helper), the `postpone`
//! binary run as a user would, and jobs seeded with the library.
#![allow(dead_code, unreachable_pub)]

#[path = "../../../tests/support/batches.rs"]
pub mod batches;
#[path = "../../../tests/support/redis_cluster/mod.rs"]
pub mod redis_cluster;
#[path = "../../../tests/support/redis_server.rs"]
pub mod redis_server;
#[path = "../../../tests/support/tempdir.rs"]
pub mod tempdir;
#[path = "../../../tests/support/wait.rs"]
pub mod wait;
#[path = "../../../tests/support/workflows.rs"]
pub mod workflows;

use std::process::{Command, Stdio};
use std::time::Duration;

use postpone::{Client, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};

pub use redis_server::RedisServer;

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Stdout as one JSON document (panics, showing the run, when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {self:#?}"))
    }

    /// Asserts the exit code, showing the run when it differs.
    #[track_caller]
    pub fn expect(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code: {self:#?}");
        self
    }
}

/// The entry of `array` whose `key` is `value`.
pub fn find<'a>(array: &'a serde_json::Value, key: &str, value: &str) -> &'a serde_json::Value {
    array
        .as_array()
        .expect("an array")
        .iter()
        .find(|v| v[key] == value)
        .unwrap_or_else(|| panic!("no {key} = {value:?} in {array:#}"))
}

/// The binary with a clean environment: no Redis or namespace from the caller's, no colour.
pub fn command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postpone"));
    cmd.env_remove("REDIS_URL")
        .env_remove("REDIS_CLUSTER_NODES")
        .env_remove("POSTPONE_NAMESPACE")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    cmd
}

/// Runs a prepared command.
pub fn run(mut cmd: Command) -> Run {
    let output = cmd.output().expect("running the postpone binary");
    Run {
        code: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(output.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("utf-8 stderr"),
    }
}

/// `postpone --redis <url> --namespace <ns> <args...>`.
pub fn postpone(url: &str, namespace: &str, args: &[&str]) -> Run {
    let mut cmd = command();
    cmd.args(["--redis", url, "--namespace", namespace])
        .args(args);
    run(cmd)
}

/// An order to close later.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "cli.orders")]
pub struct CloseOrder {
    pub order_id: u64,
}

/// A mail that fails for good with its `fail` text (to make dead letters).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "cli.mail")]
pub struct Mail {
    pub to: String,
    pub fail: String,
}

/// A report that runs until the test lets it finish (to have a running job).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "cli.report")]
pub struct Report {
    pub month: String,
}

/// A client of `server` in `namespace`.
pub async fn client(server: &RedisServer, namespace: &str) -> Client {
    Client::builder()
        .namespace(namespace)
        .redis(&server.url())
        .await
        .expect("connecting to the test server")
}

/// Seeds a namespace: `cli.orders` with orders 1 to `orders` due in an hour, and `cli.mail` with the
/// dead letters of `dead` (id, reason text) pairs, made by a worker that fails them.
pub async fn seed(client: &Client, orders: u64, dead: &[(&str, &str)]) {
    for n in 1..=orders {
        client
            .enqueue(CloseOrder { order_id: n })
            .id(format!("order:{n}"))
            .after(Duration::from_secs(3600))
            .await
            .unwrap();
    }
    if dead.is_empty() {
        return;
    }
    let worker = Worker::builder(client)
        .handle(
            |mail: Mail, _ctx: JobContext| async move { Err::<(), _>(JobError::fail(mail.fail)) },
        )
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let task = tokio::spawn(worker.run());
    for (id, reason) in dead {
        client
            .enqueue(Mail {
                to: format!("{id}@example.com"),
                fail: (*reason).to_owned(),
            })
            .id(*id)
            .await
            .unwrap();
    }
    let topic = client.topic_named("cli.mail").unwrap();
    let want = dead.len() as u64;
    wait::eventually("the mails to be dead-lettered", || async {
        (topic.counts().await.unwrap().dead >= want).then_some(())
    })
    .await;
    stop.shutdown();
    task.await.unwrap().unwrap();
}
