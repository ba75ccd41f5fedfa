//! Tasks that enqueue without pause through one client, each recording what it saw: for tests that take
//! Redis away under load and check that no enqueue that returned Ok is lost and that every caller comes
//! back.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// What one enqueuer saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// The ids whose enqueue returned Ok.
    pub ok: Vec<u64>,
    /// How many enqueues failed (each with a transient error).
    pub errors: u64,
    /// The slowest enqueue, failed or not.
    pub slowest: Duration,
    /// When an enqueue sent after [`Enqueuers::mark_back`] first returned Ok.
    pub ok_after_restart: Option<Instant>,
}

/// Running enqueuers.
#[derive(Debug)]
pub struct Enqueuers {
    pub seen: Vec<Arc<Mutex<Seen>>>,
    back: Arc<Mutex<Option<Instant>>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Enqueuers {
    /// Starts `tasks` tasks, each calling `enqueue(id)` in a loop (ids unique: the task's number in the
    /// high 32 bits) until [`Enqueuers::stop`]. A failed call must be transient, and is followed by
    /// `pause` (a caller that retries at once would spin while Redis is away).
    pub fn start<F, Fut>(tasks: usize, pause: Duration, enqueue: F) -> Self
    where
        F: Fn(u64) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = postpone::Result<()>> + Send,
    {
        let back: Arc<Mutex<Option<Instant>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Vec<Arc<Mutex<Seen>>> = (0..tasks).map(|_| Arc::default()).collect();
        let handles = (0..tasks)
            .map(|t| {
                let (enqueue, stop, back, seen) =
                    (enqueue.clone(), stop.clone(), back.clone(), seen[t].clone());
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let id = (t as u64) << 32 | n;
                        n += 1;
                        let start = Instant::now();
                        let r = enqueue(id).await;
                        let failed = {
                            let mut s = seen.lock().unwrap();
                            s.slowest = s.slowest.max(start.elapsed());
                            match r {
                                Ok(()) => {
                                    s.ok.push(id);
                                    let back = *back.lock().unwrap();
                                    if s.ok_after_restart.is_none()
                                        && back.is_some_and(|b| start >= b)
                                    {
                                        s.ok_after_restart = Some(Instant::now());
                                    }
                                    false
                                }
                                Err(e) => {
                                    assert!(e.is_transient(), "{}", e.report());
                                    s.errors += 1;
                                    true
                                }
                            }
                        };
                        if failed {
                            tokio::time::sleep(pause).await;
                        }
                    }
                })
            })
            .collect();
        Enqueuers {
            seen,
            back,
            stop,
            tasks: handles,
        }
    }

    /// How many enqueues returned Ok so far.
    pub fn oks(&self) -> usize {
        self.seen.iter().map(|s| s.lock().unwrap().ok.len()).sum()
    }

    /// Whether every enqueuer has seen a failure.
    pub fn all_failed_once(&self) -> bool {
        self.seen.iter().all(|s| s.lock().unwrap().errors > 0)
    }

    /// Records `at` as when Redis was back: enqueues sent from then on count for `ok_after_restart`.
    pub fn mark_back(&self, at: Instant) {
        *self.back.lock().unwrap() = Some(at);
    }

    /// Whether every enqueuer has succeeded since [`Enqueuers::mark_back`].
    pub fn all_back(&self) -> bool {
        self.seen
            .iter()
            .all(|s| s.lock().unwrap().ok_after_restart.is_some())
    }

    /// The latest first success after `since` over all enqueuers (each must have one).
    pub fn back_within(&self, since: Instant) -> Duration {
        self.seen
            .iter()
            .map(|s| s.lock().unwrap().ok_after_restart.expect("back") - since)
            .max()
            .unwrap_or_default()
    }

    /// Stops the enqueuers and waits for them.
    pub async fn stop(self) -> Vec<Arc<Mutex<Seen>>> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        self.seen
    }
}
