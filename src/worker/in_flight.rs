//! The jobs of one served topic that this worker is running, by id and lease token: what the heartbeat
//! renews, what a cancel or a lost lease stops, and what shutdown aborts.
//!
//! A run is keyed by its id *and* its token: after a lease is lost, this worker may claim the same id
//! again while the old run goes on, and both must stay reachable (each stopped, removed and aborted on
//! its own).

use std::collections::HashMap;
use std::sync::Mutex;

use futures_util::future::AbortHandle;

use crate::handler::{StopReason, StopSender};

struct Entry {
    stop: StopSender,
    abort: AbortHandle,
}

/// The runs of one topic on this worker, by (id, lease token).
#[derive(Default)]
pub(crate) struct InFlight {
    map: Mutex<HashMap<(String, u64), Entry>>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u64), Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tracks a run whose handler is about to start.
    pub(crate) fn insert(&self, id: String, token: u64, stop: StopSender, abort: AbortHandle) {
        self.lock().insert((id, token), Entry { stop, abort });
    }

    /// Forgets a run once its outcome is recorded.
    pub(crate) fn remove(&self, id: &str, token: u64) {
        self.lock().remove(&(id.to_owned(), token));
    }

    /// The leases to renew.
    pub(crate) fn leases(&self) -> Vec<(String, u64)> {
        self.lock().keys().cloned().collect()
    }

    /// Tells a run's handler to stop.
    pub(crate) fn stop(&self, id: &str, token: u64, reason: StopReason) {
        if let Some(e) = self.lock().get(&(id.to_owned(), token)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::JobContext;
    use futures_util::future::{AbortHandle, AbortRegistration};

    fn run(in_flight: &InFlight, id: &str, token: u64) -> (JobContext, AbortRegistration) {
        let now = chrono::Utc::now();
        let (ctx, stop) = JobContext::new("t", id.into(), 1, 8, now, now, vec![]);
        let (abort, registration) = AbortHandle::new_pair();
        in_flight.insert(id.into(), token, stop, abort);
        (ctx, registration)
    }

    fn aborted(registration: &AbortRegistration) -> bool {
        registration.handle().is_aborted()
    }

    #[test]
    fn a_job_claimed_again_while_its_old_run_goes_on_is_tracked_twice() {
        let in_flight = InFlight::default();
        // The lease of run 1 was lost, and this worker claimed the same id again (run 2).
        let (old, old_abort) = run(&in_flight, "x", 1);
        let (new, new_abort) = run(&in_flight, "x", 2);
        let mut leases = in_flight.leases();
        leases.sort();
        assert_eq!(leases, [("x".to_owned(), 1), ("x".to_owned(), 2)]);

        in_flight.stop("x", 1, StopReason::LeaseLost);
        assert_eq!(old.stop_reason(), Some(StopReason::LeaseLost));
        assert_eq!(new.stop_reason(), None, "a stop acts on its own run only");

        assert_eq!(in_flight.abort_all(), 2);
        assert!(aborted(&old_abort) && aborted(&new_abort));

        in_flight.remove("x", 1);
        assert_eq!(in_flight.leases(), [("x".to_owned(), 2)]);
        in_flight.remove("x", 2);
        assert!(in_flight.leases().is_empty());
    }
}
