//! Finishes what crashed callers left of batches, namespace-wide: one loop per worker calls
//! [`WorkflowStore::recover_batches`](crate::store::WorkflowStore::recover_batches) at start and every
//! [`EVERY`] (members committed but not yet in their topics, callbacks fired but not yet enqueued,
//! batches past their keep time). Every worker runs it; the store makes each step idempotent, so
//! none depends on another being alive.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::store::Store;

/// How often the loop runs.
pub(crate) const EVERY: Duration = Duration::from_secs(5);
/// Batches looked at per store call.
const MAX: usize = 100;
/// Most store calls in one round (a full reply asks for another at once).
const ROUNDS: usize = 10;

/// Runs until `stop` is raised.
pub(crate) async fn recovery(store: Arc<dyn Store>, mut stop: watch::Receiver<bool>) {
    loop {
        for _ in 0..ROUNDS {
            match store.recover_batches(MAX).await {
                Ok(n) if n >= MAX => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e.report(), retry_in = ?EVERY, "could not recover batches left half done; retrying");
                    break;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
