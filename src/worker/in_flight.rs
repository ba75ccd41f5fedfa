//! The jobs of one served topic that this worker is running, by id and lease token: what the heartbeat
//! renews, what a cancel or a lost lease stops, and what shutdown aborts.
//!
//! A run is keyed by its id *and* its token: after a lease is lost, this worker may claim the same id
//! again while the old run goes on, and both must stay reachable (each stopped, removed and aborted on
//! its own).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use futures_util::future::AbortHandle;
use rustc_hash::FxHashMap;

use crate::handler::{StopReason, StopSender};

/// Where a run is, as far as its lease goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Claimed ahead: it waits in the worker for a free slot, its handler not started yet. Renewed like
    /// a running job's, so that the wait never costs the lease.
    Waiting,
    /// Its handler runs: the heartbeat renews its lease.
    Running,
    /// Its lease was lost while its handler ran (and the handler was told so): not renewed any more.
    Lost,
    /// Its handler has returned and its outcome is on its way to the acker, which may end the lease at
    /// any moment. Still renewed (a slow acknowledgement must not cost the lease and run the job
    /// again), but a lease found lost now was most likely ended by the acknowledgement: no warning.
    Finishing,
}

struct Entry {
    state: State,
    /// The handler's stop flag and abort handle (none while waiting).
    stop: Option<StopSender>,
    abort: Option<AbortHandle>,
}

/// A run's key: its id and its lease token.
type Key = (String, u64);

/// A run's key as looked up: `(&str, u64)` as well as a [`Key`], so that a lookup by a borrowed id
/// makes no `String` (a job's lookups here were three allocations of its id).
trait KeyRef {
    fn id(&self) -> &str;
    fn token(&self) -> u64;
}

impl KeyRef for Key {
    fn id(&self) -> &str {
        &self.0
    }
    fn token(&self) -> u64 {
        self.1
    }
}

impl KeyRef for (&str, u64) {
    fn id(&self) -> &str {
        self.0
    }
    fn token(&self) -> u64 {
        self.1
    }
}

impl<'a> Borrow<dyn KeyRef + 'a> for Key {
    fn borrow(&self) -> &(dyn KeyRef + 'a) {
        self
    }
}

/// Hashes as a [`Key`] does (a tuple hashes its fields in order), as `Borrow` requires.
impl Hash for dyn KeyRef + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id().hash(state);
        self.token().hash(state);
    }
}

impl PartialEq for dyn KeyRef + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.token() == other.token() && self.id() == other.id()
    }
}

impl Eq for dyn KeyRef + '_ {}

/// The runs of one topic on this worker, by (id, lease token).
#[derive(Default)]
pub(crate) struct InFlight {
    map: Mutex<FxHashMap<Key, Entry>>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<Key, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tracks a run whose handler is about to start.
    pub(crate) fn insert(&self, id: String, token: u64, stop: StopSender, abort: AbortHandle) {
        let entry = Entry {
            state: State::Running,
            stop: Some(stop),
            abort: Some(abort),
        };
        self.lock().insert((id, token), entry);
    }

    /// Tracks a run claimed ahead, waiting for a free slot: its lease is renewed from now on.
    pub(crate) fn waiting(&self, id: String, token: u64) {
        let entry = Entry {
            state: State::Waiting,
            stop: None,
            abort: None,
        };
        self.lock().insert((id, token), entry);
    }

    /// A run claimed ahead is about to start: true (and the run is forgotten) when its lease was found
    /// lost while it waited, so that it must not start.
    pub(crate) fn lost_while_waiting(&self, id: &str, token: u64) -> bool {
        let mut map = self.lock();
        let key = (id, token);
        let key = &key as &dyn KeyRef;
        let lost = map
            .get(key)
            .is_some_and(|e| e.state == State::Lost && e.stop.is_none());
        if lost {
            map.remove(key);
        }
        lost
    }

    /// How many handlers run now (their outcomes are still to come).
    pub(crate) fn running(&self) -> usize {
        self.lock()
            .values()
            .filter(|e| e.state == State::Running)
            .count()
    }

    /// Marks a run whose handler has returned: a lease found lost from now on (its acknowledgement
    /// ended it) stops nothing and is not worth a warning.
    pub(crate) fn finishing(&self, id: &str, token: u64) {
        if let Some(e) = self.lock().get_mut(&(id, token) as &dyn KeyRef) {
            e.state = State::Finishing;
        }
    }

    /// Forgets a run once its outcome is recorded.
    pub(crate) fn remove(&self, id: &str, token: u64) {
        self.lock().remove(&(id, token) as &dyn KeyRef);
    }

    /// The leases to renew: every run's but those found lost.
    pub(crate) fn leases(&self) -> Vec<(String, u64)> {
        self.lock()
            .iter()
            .filter(|(_, e)| e.state != State::Lost)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Tells a running handler to stop (its job was cancelled).
    pub(crate) fn stop(&self, id: &str, token: u64, reason: StopReason) {
        if let Some(e) = self.lock().get(&(id, token) as &dyn KeyRef) {
            if let (State::Running, Some(stop)) = (e.state, &e.stop) {
                stop.stop(reason);
            }
        }
    }

    /// The store found this lease lost. When the run's handler still runs, it is told so
    /// ([`StopReason::LeaseLost`]) and this returns true: its result will be ignored, which is worth a
    /// warning. A run still waiting for a slot is marked so, and will not start (true as well). A run
    /// that is finishing or gone (its acknowledgement ended the lease), or was already found lost, is
    /// left alone and this returns false.
    pub(crate) fn lease_lost(&self, id: &str, token: u64) -> bool {
        match self.lock().get_mut(&(id, token) as &dyn KeyRef) {
            Some(e) if matches!(e.state, State::Running | State::Waiting) => {
                e.state = State::Lost;
                if let Some(stop) = &e.stop {
                    stop.stop(StopReason::LeaseLost);
                }
                true
            }
            _ => false,
        }
    }

    /// Aborts every handler (end of the shutdown grace period); returns the ids of those that were
    /// still running.
    pub(crate) fn abort_all(&self) -> Vec<String> {
        let mut running = Vec::new();
        for ((id, _), e) in self.lock().iter() {
            let Some(abort) = &e.abort else { continue };
            abort.abort();
            if e.state != State::Finishing {
                running.push(id.clone());
            }
        }
        running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::JobContext;
    use futures_util::future::{AbortHandle, AbortRegistration};

    fn run(in_flight: &InFlight, id: &str, token: u64) -> (JobContext, AbortRegistration) {
        let now = chrono::Utc::now();
        let (ctx, stop) =
            JobContext::new("t", id.into(), 1, 8, now, now, vec![], Default::default());
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

        assert_eq!(in_flight.abort_all(), ["x", "x"]);
        assert!(aborted(&old_abort) && aborted(&new_abort));

        in_flight.remove("x", 1);
        assert_eq!(in_flight.leases(), [("x".to_owned(), 2)]);
        in_flight.remove("x", 2);
        assert!(in_flight.leases().is_empty());
    }

    #[test]
    fn a_lost_lease_stops_only_a_handler_that_still_runs() {
        let in_flight = InFlight::default();
        let (running, _r) = run(&in_flight, "running", 1);
        let (finishing, _f) = run(&in_flight, "finishing", 2);
        let (_gone, _g) = run(&in_flight, "gone", 3);
        in_flight.finishing("finishing", 2);
        in_flight.finishing("gone", 3);
        in_flight.remove("gone", 3);
        // A returned handler's lease is still renewed until its outcome is recorded.
        let mut leases = in_flight.leases();
        leases.sort();
        assert_eq!(
            leases,
            [("finishing".to_owned(), 2), ("running".to_owned(), 1)]
        );

        // Its acknowledgement ended these leases: no stop, nothing to warn about.
        assert!(!in_flight.lease_lost("finishing", 2));
        assert!(!in_flight.lease_lost("gone", 3));
        assert_eq!(finishing.stop_reason(), None);
        // A wrong token is another run.
        assert!(!in_flight.lease_lost("running", 9));
        assert_eq!(running.stop_reason(), None);

        assert!(in_flight.lease_lost("running", 1));
        assert_eq!(running.stop_reason(), Some(StopReason::LeaseLost));
        // Found lost once: not renewed again, so not warned about again.
        assert_eq!(in_flight.leases(), [("finishing".to_owned(), 2)]);
        assert!(!in_flight.lease_lost("running", 1));
        // Still aborted at shutdown, and reported as running; a finishing one is not.
        assert_eq!(in_flight.abort_all(), ["running"]);
    }
    #[test]
    fn a_job_claimed_ahead_is_renewed_while_it_waits_and_does_not_start_once_lost() {
        let in_flight = InFlight::default();
        in_flight.waiting("a".into(), 1);
        in_flight.waiting("b".into(), 2);
        let mut leases = in_flight.leases();
        leases.sort();
        assert_eq!(leases, [("a".to_owned(), 1), ("b".to_owned(), 2)]);
        assert_eq!(in_flight.running(), 0, "waiting is not running");

        // Lost while it waited: reported (worth a warning), not renewed, and it must not start.
        assert!(in_flight.lease_lost("a", 1));
        assert_eq!(in_flight.leases(), [("b".to_owned(), 2)]);
        assert!(in_flight.lost_while_waiting("a", 1));
        assert!(!in_flight.lost_while_waiting("a", 1), "forgotten");
        assert!(!in_flight.lost_while_waiting("b", 2));

        // It starts: from now on it is a running job; nothing to abort while it waited.
        assert!(in_flight.abort_all().is_empty());
        let (ctx, _r) = run(&in_flight, "b", 2);
        assert_eq!(in_flight.running(), 1);
        assert!(in_flight.lease_lost("b", 2));
        assert_eq!(ctx.stop_reason(), Some(StopReason::LeaseLost));
    }
}
