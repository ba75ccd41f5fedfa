//! A topic grown from one partition to several keeps its jobs: they run, and are found by id.

use std::time::Duration;

use postpone::{CancelStatus, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "growing")]
pub(crate) struct Before {
    pub n: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "growing", partitions = 4)]
pub(crate) struct After {
    pub n: u32,
}

pub(crate) async fn a_topic_grown_to_several_partitions_keeps_its_jobs(b: Backend) {
    let ids: Vec<String> = (0..40).map(|i| format!("order:{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        b.client
            .enqueue(Before { n: i as u32 })
            .id(id.as_str())
            .after(Duration::from_millis(300))
            .await
            .unwrap();
    }
    // The application now declares 4 partitions: most ids belong to another partition than where their
    // jobs are stored, and are found there all the same.
    let moved: Vec<&String> = ids
        .iter()
        .filter(|id| postpone::partition_of(id, 4) != 0)
        .collect();
    assert!(moved.len() > 10, "{moved:?}");
    let topic = b.client.topic::<After>();
    assert!(topic.job(moved[0]).await.unwrap().is_some());
    assert_eq!(
        b.client.cancel::<After>(moved[1]).await.unwrap(),
        CancelStatus::Removed
    );
    b.client
        .reschedule::<After>(moved[2], Duration::from_millis(100))
        .await
        .unwrap();

    let (tx, mut rx) = events();
    let handler = move |job: After, _: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(job.n);
            Ok::<(), JobError>(())
        }
    };
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    let mut ran = Vec::new();
    while ran.len() < ids.len() - 1 {
        ran.push(next(&mut rx).await);
    }
    ran.sort();
    ran.dedup();
    assert_eq!(
        ran.len(),
        ids.len() - 1,
        "every job but the cancelled one ran once"
    );
    worker.stop().await;
}
