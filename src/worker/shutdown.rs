//! The shutdown sequence: stop claiming, let running handlers finish within the grace period, stop the
//! rest (their jobs are handed back, no attempt used), record what finished, then stop the background
//! tasks.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::shared::{ServedTopic, Shared};

/// How long a stopped handler may take to hand its job back after the grace period.
const ABORT_WAIT: Duration = Duration::from_secs(10);
/// How long the ackers get to record the last results before they give up on a failing store.
const LAST_ACKS: Duration = Duration::from_secs(5);

/// A running worker's tasks, by the order in which shutdown ends them.
#[derive(Default)]
pub(crate) struct Tasks {
    /// Claim loops: they stop by themselves once shutdown is raised.
    pub(crate) claim_loops: Vec<JoinHandle<()>>,
    /// Ackers: they end once every result is recorded (or they give up).
    pub(crate) ackers: Vec<JoinHandle<()>>,
    /// Heartbeats, dead-letter pumps and the hint dispatcher: aborted last.
    pub(crate) background: Vec<JoinHandle<()>>,
}

/// Shuts a worker down: see the module docs. `stop` tells the ackers to give up and the background
/// tasks to end.
pub(crate) async fn shut_down<'a, S: Send + Sync + 'static>(
    shared: &Shared<S>,
    topics: impl Iterator<Item = &'a Arc<ServedTopic<S>>> + Clone,
    tasks: Tasks,
    stop: watch::Sender<bool>,
) {
    tracing::info!(
        running = shared.jobs.running(),
        "worker stopping: no new claims"
    );
    for claim_loop in tasks.claim_loops {
        let _ = claim_loop.await;
    }
    let grace = shared.config.shutdown_grace;
    if tokio::time::timeout(grace, shared.jobs.wait_idle())
        .await
        .is_err()
    {
        for t in topics.clone() {
            let running = t.in_flight.abort_all();
            for id in running {
                tracing::warn!(
                    topic = t.name,
                    partition = t.partition,
                    job_id = %id,
                    ?grace,
                    "grace period over: stopping the handler and handing the job back"
                );
            }
        }
        let _ = tokio::time::timeout(ABORT_WAIT, shared.jobs.wait_idle()).await;
    }
    for t in topics {
        t.close_finishes();
    }
    // Results still unrecorded get a last chance, then the ackers give up (those jobs' leases expire).
    let drain = async {
        for acker in tasks.ackers {
            let _ = acker.await;
        }
    };
    tokio::pin!(drain);
    if tokio::time::timeout(LAST_ACKS, &mut drain).await.is_err() {
        stop.send_replace(true);
        drain.await;
    }
    stop.send_replace(true);
    for task in tasks.background {
        task.abort();
    }
    tracing::info!("worker stopped");
}
