//! Enqueues at most once per delivery token, as `enqueue_once.lua` does it (see
//! [`JobStore::enqueue_once`](crate::store::JobStore::enqueue_once)).

use super::Topic;
use crate::store::{EnqueueOutcome, NewJob};

/// Expired tokens dropped per call, like the script's bounded trim.
const TRIM_LIMIT: usize = 1000;

impl Topic {
    /// Enqueues `job` unless `token` was recorded within `keep_ms`; records it when enqueued. Returns the
    /// outcome (`None`: delivered before) and the hint of [`Topic::enqueue`].
    pub(in crate::store::memory) fn enqueue_once(
        &mut self,
        token: String,
        job: NewJob,
        keep_ms: u64,
        now: i64,
    ) -> (Option<EnqueueOutcome>, Option<i64>) {
        let horizon = now.saturating_sub(i64::try_from(keep_ms).unwrap_or(i64::MAX));
        for (_, old) in self.delivered.take_up_to(horizon, TRIM_LIMIT) {
            self.delivered.remove(&old);
        }
        if self.delivered.contains(&token) {
            return (None, None);
        }
        let (outcome, hint) = self.enqueue(job, now);
        self.delivered.insert(&token, now);
        (Some(outcome), hint)
    }

    /// Drops delivery tokens.
    pub(in crate::store::memory) fn forget_tokens(&mut self, tokens: &[String]) {
        for token in tokens {
            self.delivered.remove(token);
        }
    }
}
