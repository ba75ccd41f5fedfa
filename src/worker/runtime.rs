//! The worker's moving parts: per-topic claim loops, heartbeats, ackers and dead-letter pumps, and the
//! shutdown sequence that ties them together.
//!
//! A partitioned topic runs all four per partition. Its partitions share the topic's handler and its
//! concurrency limit: each claim loop waits for a slot in the same (first-come, first-served)
//! semaphores, so partitions with work take turns and none starves, and an idle partition costs one
//! claim per poll interval.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch, Notify, OwnedSemaphorePermit, Semaphore};

use super::lease::InFlight;
use super::registry::ErasedHandler;
use super::{ack, dead, lease, topic, Config, WorkerBuilder};
use crate::client::millis;
use crate::dead_letter::DeadLetterSink;
use crate::error::Result;
use crate::partition::store_topic;
use crate::store::{FinishItem, Hint, Store};

/// What every part of a worker shares.
pub(crate) struct Shared<S> {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) state: Arc<S>,
    pub(crate) config: Config,
    pub(crate) global: Arc<Semaphore>,
    pub(crate) sink: Arc<dyn DeadLetterSink>,
    /// Raised when the worker should stop claiming.
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) jobs: Arc<Tracker>,
}

/// One topic's part of a worker (one partition's, on a partitioned topic).
pub(crate) struct TopicRt<S> {
    /// The topic, as the user named it.
    pub(crate) name: &'static str,
    /// Its partition, on a partitioned topic.
    pub(crate) partition: Option<u16>,
    /// The store's name for it (`<topic>#<p>` on a partitioned topic).
    pub(crate) stored_as: String,
    pub(crate) handler: Arc<dyn ErasedHandler<S>>,
    pub(crate) lease_ms: u64,
    pub(crate) limit: Option<Arc<Semaphore>>,
    /// Wakes the claim loop (hints).
    pub(crate) wake: Notify,
    /// Wakes the dead-letter pump.
    pub(crate) dead_wake: Notify,
    pub(crate) inflight: InFlight,
    /// True while the claim loop waits for a free slot (then the heartbeat sweeps).
    pub(crate) saturated: AtomicBool,
    finishes: Mutex<Option<mpsc::UnboundedSender<FinishItem>>>,
}

impl<S> TopicRt<S> {
    pub(crate) fn send_finish(&self, item: FinishItem) {
        let sent = match &*self.finishes.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(tx) => tx.send(item).is_ok(),
            None => false,
        };
        if !sent {
            tracing::error!(topic = self.name, partition = self.partition, "worker stopped before a result could be recorded; the job runs again after its lease");
        }
    }
}

/// A running job's claim on the global limit and its topic's limit.
#[derive(Debug)]
pub(crate) struct Slot {
    _global: OwnedSemaphorePermit,
    _topic: Option<OwnedSemaphorePermit>,
}

impl<S> TopicRt<S> {
    /// Waits for a free slot (topic limit first, so a full topic does not hold global slots).
    pub(crate) async fn slot(&self, global: &Arc<Semaphore>) -> Slot {
        let topic = match &self.limit {
            Some(s) => Some(
                s.clone()
                    .acquire_owned()
                    .await
                    .expect("semaphore never closed"),
            ),
            None => None,
        };
        let global = global
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore never closed");
        Slot {
            _global: global,
            _topic: topic,
        }
    }

    pub(crate) fn try_slot(&self, global: &Arc<Semaphore>) -> Option<Slot> {
        let topic = match &self.limit {
            Some(s) => Some(s.clone().try_acquire_owned().ok()?),
            None => None,
        };
        let global = global.clone().try_acquire_owned().ok()?;
        Some(Slot {
            _global: global,
            _topic: topic,
        })
    }
}

/// Counts running job tasks, so that shutdown can wait for them.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    count: AtomicUsize,
    idle: Notify,
}

/// Held by a running job task.
#[derive(Debug)]
pub(crate) struct TrackGuard(Arc<Tracker>);

impl Tracker {
    pub(crate) fn enter(self: &Arc<Self>) -> TrackGuard {
        self.count.fetch_add(1, Ordering::SeqCst);
        TrackGuard(self.clone())
    }

    pub(crate) fn running(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for TrackGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

async fn dispatch_hints<S>(
    mut rx: broadcast::Receiver<Hint>,
    topics: HashMap<String, Arc<TopicRt<S>>>,
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
    let store = builder.client.inner.store.clone();
    store.check_worker_start().await?;
    let config = builder.config;
    let (stop_tx, stop_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        store: store.clone(),
        state: Arc::new(builder.state),
        global: Arc::new(Semaphore::new(config.concurrency)),
        config,
        sink: builder.sink,
        shutdown: shutdown.subscribe(),
        jobs: Arc::new(Tracker::default()),
    });
    let hints = store.hints();
    let (mut fetchers, mut ackers, mut background) = (Vec::new(), Vec::new(), Vec::new());
    let mut topics = HashMap::new();
    for handler in builder.handlers {
        let name = handler.topic();
        let partitions = handler.partitions();
        let lease_ms = millis(handler.lease().unwrap_or(shared.config.lease));
        // One limit per topic, shared by its partitions.
        let limit = builder
            .topic_limits
            .get(name)
            .map(|n| Arc::new(Semaphore::new(*n)));
        for p in 0..partitions {
            let (tx, rx) = mpsc::unbounded_channel();
            let rt = Arc::new(TopicRt {
                name,
                partition: (partitions > 1).then_some(p),
                stored_as: store_topic(name, p, partitions).into_owned(),
                lease_ms,
                limit: limit.clone(),
                handler: handler.clone(),
                wake: Notify::new(),
                dead_wake: Notify::new(),
                inflight: InFlight::default(),
                saturated: AtomicBool::new(false),
                finishes: Mutex::new(Some(tx)),
            });
            ackers.push(tokio::spawn(ack::acker(
                shared.clone(),
                rt.clone(),
                rx,
                stop_rx.clone(),
            )));
            background.push(tokio::spawn(lease::heartbeat(
                shared.clone(),
                rt.clone(),
                stop_rx.clone(),
            )));
            background.push(tokio::spawn(dead::pump(
                shared.clone(),
                rt.clone(),
                stop_rx.clone(),
            )));
            fetchers.push(tokio::spawn(topic::claim_loop(shared.clone(), rt.clone())));
            topics.insert(rt.stored_as.clone(), rt);
        }
    }
    background.push(tokio::spawn(dispatch_hints(hints, topics.clone())));
    let mut names: Vec<_> = topics.keys().collect();
    names.sort();
    tracing::info!(backend = store.backend_name(), topics = ?names, concurrency = shared.config.concurrency, "worker started");

    let mut signal = shutdown.subscribe();
    let _ = signal.wait_for(|s| *s).await;
    tracing::info!(
        running = shared.jobs.running(),
        "worker stopping: no new claims"
    );
    for f in fetchers {
        let _ = f.await;
    }
    let grace = shared.config.shutdown_grace;
    if tokio::time::timeout(grace, shared.jobs.wait_idle())
        .await
        .is_err()
    {
        let n: usize = topics.values().map(|t| t.inflight.abort_all()).sum();
        tracing::warn!(
            jobs = n,
            ?grace,
            "grace period over: stopping handlers and handing their jobs back"
        );
        let _ = tokio::time::timeout(Duration::from_secs(10), shared.jobs.wait_idle()).await;
    }
    for t in topics.values() {
        t.finishes.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
    // Results still unrecorded get a last chance, then the ackers give up (those jobs' leases expire).
    let drain = async {
        for a in ackers {
            let _ = a.await;
        }
    };
    tokio::pin!(drain);
    if tokio::time::timeout(Duration::from_secs(5), &mut drain)
        .await
        .is_err()
    {
        stop_tx.send_replace(true);
        drain.await;
    }
    stop_tx.send_replace(true);
    for b in background {
        b.abort();
    }
    tracing::info!("worker stopped");
    Ok(())
}
