//! Hands the ends of jobs that batches follow to their batches (see
//! [`crate::store::workflow`]): one pump per served topic (per partition), woken when a claim or an
//! acknowledgement says ends are waiting, and once at start.
//!
//! A topic whose jobs are in no batch never has ends waiting: its pump sleeps, and its claim loop
//! checks one flag of each claim's reply.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::shared::{ServedTopic, Shared};

/// Ends delivered per store call.
const BATCH: usize = 1000;
/// The first pause after a failed delivery; it doubles with each failure up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two tries while the store fails: ends left waiting meanwhile are
/// kept by the store, and the next claim wakes the pump again.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// The pause after `failures` failed deliveries in a row.
fn pause(failures: u32) -> Duration {
    FIRST_PAUSE
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(MAX_PAUSE)
}

/// Delivers ends whenever woken, until none is left; stops when `stop` is raised.
pub(crate) async fn pump<S: Send + Sync + 'static>(
    shared: Arc<Shared<S>>,
    topic: Arc<ServedTopic<S>>,
    mut stop: watch::Receiver<bool>,
) {
    topic.ends_wake.notify_one();
    loop {
        tokio::select! {
            _ = topic.ends_wake.notified() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let mut failures = 0;
        loop {
            match shared.store.deliver_ends(&topic.stored_as, BATCH).await {
                Ok(0) => break,
                Ok(n) => {
                    failures = 0;
                    tracing::debug!(
                        topic = topic.name,
                        partition = topic.partition,
                        ends = n,
                        "delivered job ends to their batches"
                    );
                }
                Err(e) => {
                    failures += 1;
                    let wait = pause(failures);
                    tracing::warn!(topic = topic.name, partition = topic.partition, error = %e.report(), failures, retry_in = ?wait, "could not deliver job ends to their batches; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_up_to_the_cap() {
        let pauses: Vec<u64> = (1..=8).map(|n| pause(n).as_millis() as u64).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(pause(u32::MAX), MAX_PAUSE);
    }
}
