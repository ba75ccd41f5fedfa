//! The pause between two tries of a store call that failed (claim, acknowledgement, lease renewal).
//!
//! It doubles from a short first pause up to [`MAX`], which is short on purpose: after Redis answers
//! again, a worker tries again within [`MAX`], so it is back at work within half a second; and while
//! Redis stays away, each part of a worker (per served topic) sends at most one call per [`MAX`], so an
//! outage never turns into a busy loop.

use std::time::Duration;

/// The longest pause between two tries.
pub(crate) const MAX: Duration = Duration::from_millis(250);

/// A doubling pause, capped at [`MAX`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    first: Duration,
    next: Duration,
}

impl Backoff {
    /// Starts at `first` (at most [`MAX`]).
    pub(crate) fn new(first: Duration) -> Self {
        let first = first.min(MAX);
        Backoff { first, next: first }
    }

    /// The pause to take now; the one after it is twice as long, up to [`MAX`].
    pub(crate) fn next(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(MAX);
        pause
    }

    /// Back to the first pause (a call succeeded).
    pub(crate) fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(50));
        let pauses: Vec<u64> = (0..5).map(|_| b.next().as_millis() as u64).collect();
        assert_eq!(pauses, [50, 100, 200, 250, 250]);
        b.reset();
        assert_eq!(b.next(), Duration::from_millis(50));
    }
}
