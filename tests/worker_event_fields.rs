//! Warnings and errors about a job name it in their own fields (topic, partition, job id), so that a
//! log filtered at `warn`, where the job's INFO span is off, still tells which job.

mod support;

use postpone::{Client, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use support::events::{Captured, Events};
use support::wait::eventually;
use tracing::Level;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "hooks.send", partitions = 2, retry = ["0", "0", "1ms"])]
struct Send;

/// The same topic, with a payload that does not decode into [`Send`].
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "hooks.send", partitions = 2)]
struct Wrong {
    url: u32,
}

/// Fails every attempt: the first is retried, the second dead-lettered.
async fn failing(_job: Send, _ctx: JobContext) -> Result<(), JobError> {
    Err(JobError::msg("endpoint said 503"))
}

fn assert_names_the_job(event: &Captured, id: &str) {
    let partition = postpone::partition_of(id, 2).to_string();
    assert_eq!(event.field("topic"), Some("hooks.send"), "{event:?}");
    assert_eq!(
        event.field("partition"),
        Some(partition.as_str()),
        "{event:?}"
    );
    assert_eq!(event.field("job_id"), Some(id), "{event:?}");
}

#[tokio::test]
async fn retry_dead_letter_and_decode_events_name_their_job() {
    let (log, _guard) = Events::capture(Level::WARN);
    let client = Client::memory();
    client.enqueue(Send).id("hook:7").await.unwrap();
    client.enqueue(Wrong { url: 1 }).id("hook:8").await.unwrap();
    let worker = Worker::builder(&client).handle(failing).build().unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let topic = client.topic::<Send>();
    eventually("both jobs to be dead-lettered", || async {
        (topic.counts().await.unwrap().dead_total == 2).then_some(())
    })
    .await;
    stop.shutdown();
    running.await.unwrap().unwrap();

    let retried = log.containing("will retry");
    assert_eq!(retried.len(), 1, "{:?}", log.all());
    assert_eq!(retried[0].level, Level::WARN);
    assert_names_the_job(&retried[0], "hook:7");
    let dead = log.containing("job dead-lettered: ");
    assert_eq!(dead.len(), 1, "{:?}", log.all());
    assert_eq!(dead[0].level, Level::ERROR);
    assert_names_the_job(&dead[0], "hook:7");
    let undecodable = log.containing("payload cannot succeed");
    assert_eq!(undecodable.len(), 1, "{:?}", log.all());
    assert_eq!(undecodable[0].level, Level::ERROR);
    assert_names_the_job(&undecodable[0], "hook:8");
}
