//! Samples a served topic's (partition's) depth by state into the `postpone_queue_depth` gauge, every
//! [`WorkerBuilder::queue_depth_interval`](super::WorkerBuilder::queue_depth_interval): one `counts`
//! call per interval, whatever the load. Without the `metrics` feature it returns at once.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::shared::{ServedTopic, Shared};
use crate::observe::TopicMetrics;

/// Starts sampling `topic` until `stop` is raised.
pub(crate) fn spawn<S: Send + Sync + 'static>(
    shared: &Arc<Shared<S>>,
    topic: &Arc<ServedTopic<S>>,
    stop: &watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(sample(shared.clone(), topic.clone(), stop.clone()))
}

/// Samples until `stop` is raised.
async fn sample<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    mut stop: watch::Receiver<bool>,
) {
    if !TopicMetrics::ENABLED {
        return;
    }
    let every = shared.config.queue_depth_interval;
    loop {
        match shared.store.counts(&topic.stored_as).await {
            Ok(counts) => topic.metrics.depth(&counts),
            Err(e) => {
                tracing::debug!(topic = topic.name, partition = topic.partition, error = %e.report(), "could not sample the queue depth")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
