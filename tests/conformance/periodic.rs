//! Periodic jobs: two workers tick one schedule, each tick is one job; run now.

use std::collections::BTreeSet;
use std::time::Duration;

use postpone::{Job, JobContext, JobError, Missed, Periodic, Worker};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "periodic.beat")]
pub(crate) struct Beat {
    pub at_ms: i64,
}

/// (tick, job id, due time) per run.
type Run = (i64, String, i64);

async fn beat(job: Beat, ctx: JobContext, tx: UnboundedSender<Run>) -> Result<(), JobError> {
    let _ = tx.send((
        job.at_ms,
        ctx.id().to_owned(),
        ctx.due_at().timestamp_millis(),
    ));
    Ok(())
}

fn worker(backend: &Backend, tx: &UnboundedSender<Run>) -> Running {
    // Missed ticks catch up (10 at most), so that a machine too loaded to wake both workers within a
    // second does not look like a lost tick.
    let every_second = Periodic::every("beat", Duration::from_secs(1))
        .unwrap()
        .missed(Missed::UpTo(10))
        .job(|tick| Beat {
            at_ms: tick.timestamp_millis(),
        });
    let w = Worker::with_state(&backend.client, tx.clone())
        .handle(beat)
        .periodic(every_second)
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    spawn(w)
}

pub(crate) async fn two_workers_enqueue_each_tick_once_and_run_now_adds_one(backend: Backend) {
    let (tx, mut rx) = events::<Run>();
    let (a, b) = (worker(&backend, &tx), worker(&backend, &tx));
    let mut runs = Vec::new();
    while runs.len() < 4 {
        runs.push(next(&mut rx).await);
    }
    let topic = backend.client.topic::<Beat>();
    let at = topic
        .trigger_schedule("beat")
        .await
        .unwrap()
        .expect("the schedule is stored");
    // The run now, and the ticks that came meanwhile.
    loop {
        let run = next(&mut rx).await;
        let triggered = run.0 == at.timestamp_millis();
        runs.push(run);
        if triggered {
            break;
        }
    }
    a.stop().await;
    b.stop().await;

    let ids: BTreeSet<&String> = runs.iter().map(|r| &r.1).collect();
    assert_eq!(ids.len(), runs.len(), "a job ran twice: {runs:?}");
    let ticks: BTreeSet<i64> = runs
        .iter()
        .map(|r| r.0)
        .filter(|t| *t != at.timestamp_millis())
        .collect();
    let ticks: Vec<i64> = ticks.into_iter().collect();
    for pair in ticks.windows(2) {
        assert_eq!(pair[1] - pair[0], 1000, "consecutive seconds: {runs:?}");
    }
    for (tick, id, due) in &runs {
        assert!(due >= tick, "due before its tick: {runs:?}");
        assert!(id.starts_with("beat:"), "{id}");
    }
    let listed = topic.schedules().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].expression, "every 1s");
    assert!(listed[0].last.unwrap().timestamp_millis() >= *ticks.last().unwrap());
    assert_eq!(listed[0].triggered, None);
}
