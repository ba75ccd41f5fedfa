//! Calls on a fixed schedule: the replay of `steady`'s handler at the run's rate, and `floor --pace`'s
//! drain calls.

use std::time::Duration;

use tokio::time::Instant;

/// Waits until the next call's time, `every` after the last one's (the first at once); a zero `every`
/// never waits. A caller that falls behind catches up without waiting.
pub(crate) struct Pacer {
    every: Duration,
    next: Instant,
}

impl Pacer {
    pub(crate) fn new(every: Duration) -> Self {
        Pacer {
            every,
            next: Instant::now(),
        }
    }

    /// One call every 1/`rate` s.
    pub(crate) fn per_second(rate: u64) -> Self {
        Pacer::new(Duration::from_nanos(1_000_000_000 / rate.max(1)))
    }

    pub(crate) async fn wait(&mut self) {
        if !self.every.is_zero() {
            tokio::time::sleep_until(self.next).await;
            self.next += self.every;
        }
    }
}
