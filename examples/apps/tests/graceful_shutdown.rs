//! The graceful-shutdown example (`examples/apps/graceful_shutdown/`) on a redis-server of its own: a real
//! SIGTERM while three jobs run lets the two that fit in the grace period finish and hands the third
//! back, due again on the same attempt, for the next worker to run.
//!
//! This file holds one test on purpose: it sends SIGTERM to its own process (the example's handler
//! catches it), and the signal would reach any other test running in the same process.
#![cfg(unix)]

#[path = "../graceful_shutdown/reports.rs"]
mod reports;
#[path = "../support/shutdown.rs"]
mod shutdown;
mod support;

use std::time::Duration;

use postpone::{Client, JobContext, JobError, JobState, Worker};
use reports::{Fate, RenderReport};
use support::redis_server::RedisServer;
use support::wait::eventually;
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_running_jobs_finish_and_hands_back_the_rest() {
    let server = RedisServer::start();
    let client = Client::builder()
        .namespace("reports")
        .redis(&server.url())
        .await
        .expect("connecting to the test redis-server");
    let topic = client.topic::<RenderReport>();
    // From here on SIGTERM is caught, not fatal.
    let signal = shutdown::signal();
    let grace = Duration::from_secs(5);
    let running = tokio::spawn({
        let client = client.clone();
        async move { reports::run(&client, grace, signal).await.unwrap() }
    });

    // Once all three reports run, send the SIGTERM an orchestrator would.
    eventually("the three reports to start", || async {
        (topic.counts().await.unwrap().active >= 3).then_some(())
    })
    .await;
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("running kill");
    assert!(sent.success());
    let fates = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the worker stops within its grace period and a little more")
        .unwrap();

    // Reports 1 (1 s) and 2 (3 s) finish within the 5 s of grace; report 3 (60 s) is handed back.
    let expected = [
        ("report:1".to_owned(), Fate::Done),
        ("report:2".to_owned(), Fate::Done),
        ("report:3".to_owned(), Fate::HandedBack { attempt: 1 }),
    ];
    assert_eq!(fates, expected);
    let handed_back = topic.job("report:3").await.unwrap().unwrap();
    assert!(matches!(handed_back.state, JobState::Scheduled { .. }));
    assert!(handed_back.errors.is_empty(), "{handed_back:?}");
    let counts = topic.counts().await.unwrap();
    assert_eq!(
        (counts.processed, counts.retried, counts.dead),
        (2, 0, 0),
        "{counts:?}"
    );

    // The next worker runs it, on its first attempt still.
    let (tx, mut ran) = mpsc::unbounded_channel();
    let handler = move |job: RenderReport, ctx: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send((job.report, ctx.attempt()));
            Ok::<(), JobError>(())
        }
    };
    let next = Worker::builder(&client).handle(handler).build().unwrap();
    let stop = next.shutdown_handle();
    let next = tokio::spawn(next.run());
    let (report, attempt) = tokio::time::timeout(Duration::from_secs(30), ran.recv())
        .await
        .expect("the next worker runs the report that was handed back")
        .unwrap();
    assert_eq!((report, attempt), (3, 1));
    stop.shutdown();
    next.await.unwrap().unwrap();
}
