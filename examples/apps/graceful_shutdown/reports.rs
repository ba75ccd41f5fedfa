//! The service part: a report renderer whose worker stops gracefully when told to.

use std::future::Future;
use std::time::{Duration, Instant};

use postpone::{BoxError, Client, Job, JobContext, JobError, JobState, Worker};
use serde::{Deserialize, Serialize};

/// Render a report; it takes `seconds`.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "reports.render")]
pub(crate) struct RenderReport {
    pub(crate) report: u32,
    pub(crate) seconds: u64,
}

/// The reports the demo renders: two short ones and one that outlasts any grace period.
pub(crate) const REPORTS: [(u32, u64); 3] = [(1, 1), (2, 3), (3, 60)];

pub(crate) fn report_id(report: u32) -> String {
    format!("report:{report}")
}

async fn render(job: RenderReport, ctx: JobContext) -> Result<(), JobError> {
    println!(
        "  report {}: started, takes {} s (attempt {})",
        job.report,
        job.seconds,
        ctx.attempt()
    );
    // Stands for real work. When the grace period ends, this future is dropped at an `.await`, and
    // the job runs again from the start elsewhere: like every handler, it must be idempotent.
    tokio::time::sleep(Duration::from_secs(job.seconds)).await;
    println!("  report {}: finished", job.report);
    Ok(())
}

/// Where a job is after the worker stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// It finished (before the signal, or within the grace period).
    Done,
    /// It was running when the grace period ended: due again, on the same attempt.
    HandedBack { attempt: u32 },
    /// Anything else (another worker has it, or it is dead).
    Other(String),
}

/// Enqueues the reports (by id, so a report handed back by an earlier run is not doubled), runs a
/// worker until `stop` completes, shuts it down with `grace`, and says where each report is.
pub(crate) async fn run(
    client: &Client,
    grace: Duration,
    stop: impl Future<Output = &'static str> + Send,
) -> Result<Vec<(String, Fate)>, BoxError> {
    for (report, seconds) in REPORTS {
        let enqueued = client
            .enqueue(RenderReport { report, seconds })
            .id(report_id(report))
            .await?;
        println!("enqueued {}: {:?}", enqueued.id, enqueued.status);
    }
    let worker = Worker::builder(client)
        .handle(render)
        .concurrency(4)
        .shutdown_grace(grace)
        .build()?;
    // Runs until `stop`: then it claims no more jobs, waits up to `grace` for the running ones, stops
    // those still running and hands their jobs back, and returns.
    let stopping = async {
        let signal = stop.await;
        println!(
            "{signal}: claiming no more jobs; running ones have {} s to finish",
            grace.as_secs_f64()
        );
        Instant::now()
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    worker
        .run_until(async {
            let _ = stop_tx.send(stopping.await);
        })
        .await?;
    let took = stop_rx.await.map(|at| at.elapsed()).unwrap_or_default();
    println!(
        "worker stopped {:.1} s after the signal",
        took.as_secs_f64()
    );

    let topic = client.topic::<RenderReport>();
    let mut fates = Vec::new();
    for (report, _) in REPORTS {
        let id = report_id(report);
        let fate = match topic.job(&id).await? {
            None => Fate::Done,
            Some(info) => match info.state {
                JobState::Scheduled { .. } => Fate::HandedBack {
                    attempt: info.attempt,
                },
                other => Fate::Other(format!("{other:?}")),
            },
        };
        fates.push((id, fate));
    }
    Ok(fates)
}
