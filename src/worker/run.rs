//! The orchestrator: starts one claim loop, heartbeat, acker, dead-letter pump and end pump per served
//! topic (per partition of a partitioned topic) and one batch recovery loop, routes wake-up hints to
//! them, and hands over to the shutdown sequence when asked to stop.
//!
//! A partitioned topic runs all four per partition. Its partitions share the topic's handler, its
//! concurrency limit and its lane in the worker's slot pool (`slots.rs`): each claim loop waits for a
//! slot in the same first-come, first-served lines, so partitions with work take turns and none
//! starves, and an idle partition costs one claim per poll interval. Between topics, the pool shares
//! scarce slots as the worker's `SlotSharing` says.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, watch, Semaphore};

use super::outcomes;
use super::periodic::TickLoop;
use super::presence::{self, Beat};
use super::shared::{ServedTopic, Shared, Tracker};
use super::shutdown::{shut_down, Tasks};
use super::slots::SlotPool;
use super::{
    acker, batch_recovery, claim_loop, dead_letter_pump, depth_sampler, end_pump, heartbeat,
    WorkerBuilder,
};
use crate::error::Result;
use crate::ops::{worker_id, WorkerTopic};
use crate::partition::store_topic;
use crate::store::Hint;
use crate::time::millis;

/// Wakes the claim loops that a hint concerns.
async fn dispatch_hints<S>(
    mut rx: broadcast::Receiver<Hint>,
    topics: HashMap<String, Arc<ServedTopic<S>>>,
) {
    loop {
        match rx.recv().await {
            Ok(Hint::Topic { topic, .. }) => {
                if let Some(t) = topics.get(topic.as_str()) {
                    t.wake.notify_one();
                }
            }
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                topics.values().for_each(|t| t.wake.notify_one());
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Runs a worker until `shutdown` is raised, then shuts down gracefully.
pub(crate) async fn run<S: Send + Sync + 'static>(
    builder: WorkerBuilder<S>,
    shutdown: Arc<watch::Sender<bool>>,
) -> Result<()> {
    let store = builder.client.backend().clone();
    store.check_worker_start().await?;
    let flows: Vec<_> = builder
        .handlers
        .iter()
        .map(|h| builder.flow_of(h.as_ref()))
        .collect();
    let weights = builder
        .handlers
        .iter()
        .map(|h| builder.weights.get(h.topic()).copied().unwrap_or(1))
        .collect();
    let config = builder.config;
    let (stop_tx, stop_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        store: store.clone(),
        state: Arc::new(builder.state),
        global: SlotPool::new(config.concurrency, builder.sharing, weights),
        config,
        sink: builder.sink,
        shutdown: shutdown.subscribe(),
        jobs: Arc::new(Tracker::default()),
        holder: crate::token::fresh(),
    });
    let hints = store.hints();
    let mut tasks = Tasks::default();
    let mut topics = HashMap::new();
    let mut declared = Vec::new();
    // Started once the worker is in the registry of workers, so that every lease it takes names a
    // worker operators can see.
    let mut claim_loops = Vec::new();
    for (lane, (handler, flow)) in builder.handlers.into_iter().zip(flows).enumerate() {
        let name = handler.topic();
        let partitions = handler.partitions();
        let lease_ms = millis(handler.lease().unwrap_or(shared.config.lease));
        declared.push(WorkerTopic::new(
            name.to_owned(),
            partitions,
            handler.schedule().to_millis(),
            lease_ms,
        ));
        // One limit per topic, shared by its partitions.
        let limit_n = builder.topic_limits.get(name).copied();
        let limit = limit_n.map(|n| Arc::new(Semaphore::new(n)));
        let chain = builder.layers.chain(name);
        // The slots each partition may count on.
        let share =
            limit_n.unwrap_or(usize::MAX).min(shared.config.concurrency) / partitions as usize;
        for p in 0..partitions {
            let (tx, rx) = mpsc::unbounded_channel();
            let served = Arc::new(
                ServedTopic::new(
                    name,
                    (partitions > 1).then_some(p),
                    store_topic(name, p).into_owned(),
                    handler.clone(),
                    lease_ms,
                    limit.clone(),
                    tx,
                )
                .with_share(share)
                .with_flow(flow.per_partition(partitions))
                .with_lane(lane)
                .with_middleware(chain.clone()),
            );
            let (sh, st, stop) = (&shared, &served, &stop_rx);
            let acker = acker::acker(sh.clone(), st.clone(), rx, stop.clone());
            tasks.ackers.push(tokio::spawn(acker));
            let heartbeat = heartbeat::heartbeat(sh.clone(), st.clone(), stop.clone());
            tasks.background.push(tokio::spawn(heartbeat));
            let pump = dead_letter_pump::pump(sh.clone(), st.clone(), stop.clone());
            tasks.background.push(tokio::spawn(pump));
            let ends = end_pump::pump(sh.clone(), st.clone(), stop.clone());
            tasks.background.push(tokio::spawn(ends));
            let progress = outcomes::progress_pump(sh.clone(), st.clone(), stop.clone());
            tasks.background.push(tokio::spawn(progress));
            let retention = outcomes::retention(sh.clone(), st.clone(), stop.clone());
            tasks.background.push(tokio::spawn(retention));
            tasks.background.push(depth_sampler::spawn(sh, st, stop));
            claim_loops.push(claim_loop::claim_loop(sh.clone(), st.clone()));
            topics.insert(served.stored_as.clone(), served);
        }
    }
    for scheduled in builder.periodic {
        let (client, poll, stop) = (
            builder.client.clone(),
            shared.config.poll_interval,
            shutdown.subscribe(),
        );
        let tick_loop = TickLoop {
            store: store.clone(),
            client,
            scheduled,
            poll,
            hints: store.hints(),
            stop,
        };
        tasks.background.push(tokio::spawn(tick_loop.run()));
    }
    tasks
        .background
        .push(tokio::spawn(dispatch_hints(hints, topics.clone())));
    let recovery = batch_recovery::recovery(store.clone(), stop_rx.clone());
    tasks.background.push(tokio::spawn(recovery));
    let shortest_lease = declared.iter().map(|t| t.lease_ms).min().unwrap_or(0);
    let id = worker_id(shared.holder);
    let presence = presence::presence_now(
        declared,
        shared.config.concurrency,
        shared.config.stall_limit,
    );
    let mut beat = Beat::new(
        id.clone(),
        presence,
        std::time::Duration::from_millis(shortest_lease),
    );
    if let Err(e) = beat.once(&shared).await {
        tracing::warn!(error = %e.report(), "could not record this worker in the registry of workers (operators will not see it yet); jobs run all the same, and it retries at every beat");
    }
    tasks
        .background
        .push(tokio::spawn(presence::beat(shared.clone(), beat)));
    // Jobs that finish are kept (or not) by the job type's retention from the first claim on.
    outcomes::record_retentions(&shared, topics.values()).await;
    tasks
        .claim_loops
        .extend(claim_loops.into_iter().map(tokio::spawn));
    let mut names: Vec<_> = topics.keys().collect();
    names.sort();
    tracing::info!(backend = store.backend_name(), worker = %id, topics = ?names, concurrency = shared.config.concurrency, "worker started");

    let mut signal = shutdown.subscribe();
    let _ = signal.wait_for(|s| *s).await;
    shut_down(&shared, topics.values(), tasks, stop_tx).await;
    // Off the registry of live workers at once (a worker that dies instead leaves it to expire).
    let gone = store.worker_gone(&id);
    if let Ok(Err(e)) = tokio::time::timeout(std::time::Duration::from_secs(1), gone).await {
        tracing::debug!(error = %e.report(), "could not remove the worker's heartbeat entry; it expires by itself");
    }
    Ok(())
}
