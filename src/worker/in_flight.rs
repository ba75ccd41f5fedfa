//! The jobs of one served topic that this worker is running, by id and lease token: what the heartbeat
//! renews, what a cancel or a lost lease stops, and what shutdown aborts.

use std::collections::HashMap;
use std::sync::Mutex;

use futures_util::future::AbortHandle;

use crate::handler::{StopReason, StopSender};

struct Entry {
    token: u64,
    stop: StopSender,
    abort: AbortHandle,
}

/// The jobs of one topic that this worker is running, by id.
#[derive(Default)]
pub(crate) struct InFlight {
    map: Mutex<HashMap<String, Entry>>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn insert(&self, id: String, token: u64, stop: StopSender, abort: AbortHandle) {
        self.lock().insert(id, Entry { token, stop, abort });
    }

    /// Forgets a job once its outcome is recorded (only the claim with this token).
    pub(crate) fn remove(&self, id: &str, token: u64) {
        let mut map = self.lock();
        if map.get(id).is_some_and(|e| e.token == token) {
            map.remove(id);
        }
    }

    pub(crate) fn leases(&self) -> Vec<(String, u64)> {
        self.lock()
            .iter()
            .map(|(id, e)| (id.clone(), e.token))
            .collect()
    }

    pub(crate) fn stop(&self, id: &str, token: u64, reason: StopReason) {
        if let Some(e) = self.lock().get(id).filter(|e| e.token == token) {
            e.stop.stop(reason);
        }
    }

    /// Stops every running handler (end of the shutdown grace period); returns how many.
    pub(crate) fn abort_all(&self) -> usize {
        let map = self.lock();
        for e in map.values() {
            e.abort.abort();
        }
        map.len()
    }
}
