//! Where the memory backend gets its time: the system clock, or a manual clock for tests.

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::broadcast;

use crate::store::Hint;

/// A source of time for [`MemoryStore`](super::MemoryStore), in ms since the Unix epoch.
pub trait Clock: Send + Sync + Debug {
    /// The current time, ms since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Called by [`MemoryStore::with_clock`](super::MemoryStore::with_clock) with the store's hint
    /// channel. A clock that can jump (like [`ManualClock`]) keeps it and sends [`Hint::All`] whenever it
    /// moves, so that sleeping workers look again. The default ignores it.
    fn register_hints(&self, hints: broadcast::Sender<Hint>) {
        let _ = hints;
    }
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        }
    }
}

/// A clock that only moves when told to: for tests of handlers and schedules without waiting.
///
/// Every move sends [`Hint::All`] to the stores built on it, so a worker sleeping until a due time
/// wakes up and claims again.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use postpone::store::memory::{ManualClock, MemoryStore};
///
/// let clock = Arc::new(ManualClock::new(1_700_000_000_000));
/// let store = MemoryStore::with_clock(clock.clone());
/// clock.advance(Duration::from_secs(30 * 60));
/// # drop(store);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
    hints: Mutex<Vec<broadcast::Sender<Hint>>>,
}

impl ManualClock {
    /// A clock that reads `start_ms` (ms since the Unix epoch) until moved.
    pub fn new(start_ms: i64) -> Self {
        ManualClock {
            now_ms: AtomicI64::new(start_ms),
            hints: Mutex::new(Vec::new()),
        }
    }

    /// Moves the clock forward by `by` (whole ms) and tells the stores' workers to look again.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        let _ = self
            .now_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(ms))
            });
        self.moved();
    }

    /// Sets the clock to `now_ms` (ms since the Unix epoch; it may go back) and tells the stores'
    /// workers to look again.
    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
        self.moved();
    }

    fn moved(&self) {
        let senders = self.hints.lock().unwrap_or_else(PoisonError::into_inner);
        for sender in senders.iter() {
            // No receiver yet is fine: nobody is sleeping.
            let _ = sender.send(Hint::All);
        }
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }

    fn register_hints(&self, hints: broadcast::Sender<Hint>) {
        self.hints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(hints);
    }
}
