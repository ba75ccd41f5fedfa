//! Waiters across Redis faults: a caller waiting for a job gets its result even when Redis restarts
//! while it waits (the announcement subscription comes back and the waiter looks its job up again), and
//! when the announcement itself is lost (its subscription was cut while the job ended).

mod support;

use std::sync::Arc;
use std::time::Duration;

use postpone::store::redis::RedisStore;
use postpone::{Client, Job, JobContext, JobError, JobOutcome, Worker};
use serde::{Deserialize, Serialize};
use support::redis_server::RedisServer;
use tokio::sync::Semaphore;
use tokio::time::Instant;

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "invoices.render", output = String, keep = "1h")]
struct Render {
    invoice: u64,
}

const PATIENCE: Duration = Duration::from_secs(20);

async fn client(server: &RedisServer) -> Client {
    Client::builder().store(RedisStore::connect(&server.url(), "shop").await.unwrap())
}

/// A worker whose handler waits for a permit of `gate`, then returns the invoice's URL.
fn worker(
    client: &Client,
    gate: Arc<Semaphore>,
) -> (
    postpone::ShutdownHandle,
    tokio::task::JoinHandle<postpone::Result<()>>,
) {
    let handler = move |job: Render, _ctx: JobContext| {
        let gate = gate.clone();
        async move {
            gate.acquire().await.expect("gate").forget();
            Ok::<_, JobError>(format!("https://files.example/{}.pdf", job.invoice))
        }
    };
    let worker = Worker::builder(client).handle(handler).build().unwrap();
    (worker.shutdown_handle(), tokio::spawn(worker.run()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_across_a_redis_restart_gets_the_result() {
    let server = RedisServer::builder()
        .aof(true)
        .appendfsync("always")
        .start();
    let client = client(&server).await;
    client
        .enqueue(Render { invoice: 1 })
        .id("invoice:1")
        .await
        .unwrap();
    let mut waiter = client.waiter::<Render>("invoice:1").unwrap();
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(
        waiter.next_progress(soon).await.unwrap(),
        None,
        "registered"
    );

    // Redis dies and comes back (its data from the append-only file): the waiter's subscription is
    // gone meanwhile.
    server.kill9();
    server.restart();
    let gate = Arc::new(Semaphore::new(1));
    let (stop, running) = worker(&client, gate);
    let outcome = waiter.outcome(PATIENCE).await.unwrap();
    assert_eq!(
        outcome,
        JobOutcome::Succeeded("https://files.example/1.pdf".to_owned())
    );
    stop.shutdown();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_whose_announcement_is_lost_finds_the_kept_result() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let gate = Arc::new(Semaphore::new(0));
    let (stop, running) = worker(&client, gate.clone());
    client
        .enqueue(Render { invoice: 2 })
        .id("invoice:2")
        .await
        .unwrap();
    let mut waiter = client.waiter::<Render>("invoice:2").unwrap();
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(
        waiter.next_progress(soon).await.unwrap(),
        None,
        "registered"
    );

    // The subscription is cut, and the job ends before it is back (it is back within 100 ms at the
    // earliest): the announcement goes to nobody, and the waiter finds the job kept.
    server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap();
    gate.add_permits(1);
    let outcome = waiter.outcome(PATIENCE).await.unwrap();
    assert_eq!(
        outcome,
        JobOutcome::Succeeded("https://files.example/2.pdf".to_owned())
    );
    stop.shutdown();
    running.await.unwrap().unwrap();
}
