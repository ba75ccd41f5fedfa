//! What a topic holds, by state, and its counters.

use crate::flow::{Budget, RateLimit};

/// Counts for one topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct TopicCounts {
    /// Due later than now.
    pub scheduled: u64,
    /// Due now or earlier, not yet claimed.
    pub ready: u64,
    /// Claimed and leased.
    pub active: u64,
    /// Waiting for parents (see [`WorkflowStore::enqueue_after`](super::WorkflowStore::enqueue_after));
    /// not counted in `scheduled`.
    pub waiting: u64,
    /// In the dead letters.
    pub dead: u64,
    /// Dead jobs whose hook has not yet succeeded.
    pub dead_pending: u64,
    /// Finished jobs kept (succeeded or cancelled), while the topic's retention keeps them (see
    /// [`Job::keep`](crate::Job::keep)).
    pub done: u64,
    /// Counter: attempts that succeeded.
    pub processed: u64,
    /// Counter: failed attempts scheduled for a retry.
    pub retried: u64,
    /// Counter: attempts that failed and went to the dead letters (exhausted or failed now).
    pub failed: u64,
    /// Counter: jobs dead-lettered for any reason (including stalls).
    pub dead_total: u64,
    /// Counter: jobs cancelled.
    pub cancelled: u64,
    /// Counter: expired leases returned to due.
    pub stalled: u64,
    /// Counter: dead jobs removed by trimming (never before their hook succeeded).
    pub trimmed: u64,
    /// Whether claims are paused (for a partitioned topic: any of its partitions).
    pub paused: bool,
    /// The flow limits the topic's workers claimed under last (see [`crate::flow`]), and its budget.
    pub flow: FlowCounts,
}

/// A topic's flow limits, as its workers last claimed it, and where it stands against them. A store
/// learns the limits from the claims (a worker declares them), when a claim finds jobs due.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct FlowCounts {
    /// The rate limit (for a partitioned topic: the sum of its partitions' shares).
    pub rate: Option<RateLimit>,
    /// How many jobs the rate limit lets go now (`None` without one).
    pub rate_budget: Option<u64>,
    /// Most jobs running at once across every worker (summed over partitions).
    pub max_running: Option<u32>,
    /// A provider's limit holds claims until this time (ms), when it is in force.
    pub held_until_ms: Option<i64>,
}

impl FlowCounts {
    /// What a store keeps: the rate as (jobs, per ms), max running (0: none), a hold's end (ms; 0:
    /// none) and the rate's TAT (ms), at `now`.
    pub(crate) fn from_stored(
        rate: Option<(u32, u64)>,
        max_running: u32,
        hold_until: i64,
        tat: f64,
        now: i64,
    ) -> Self {
        let rate = rate
            .filter(|(jobs, per)| *jobs > 0 && *per > 0)
            .map(|(jobs, per)| RateLimit::new(jobs, std::time::Duration::from_millis(per)));
        FlowCounts {
            rate,
            rate_budget: rate.map(|r| Budget::at(r, tat, now).allowed as u64),
            max_running: (max_running > 0).then_some(max_running),
            held_until_ms: (hold_until > now).then_some(hold_until),
        }
    }
}

impl std::ops::AddAssign for FlowCounts {
    /// The flow of a partitioned topic: its partitions' together.
    fn add_assign(&mut self, o: FlowCounts) {
        self.rate = match (self.rate, o.rate) {
            // Each partition of P has `jobs` per `P x per`: together, P x jobs per the same period.
            (Some(a), Some(b)) if a.per() == b.per() => {
                Some(RateLimit::new(a.jobs().saturating_add(b.jobs()), a.per()))
            }
            (a, b) => a.or(b),
        };
        self.rate_budget = add_opt(self.rate_budget, o.rate_budget);
        self.max_running = add_opt(self.max_running, o.max_running);
        self.held_until_ms = self.held_until_ms.max(o.held_until_ms);
    }
}

fn add_opt<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

impl std::ops::AddAssign for TopicCounts {
    /// Adds every count and counter (the counts of a partitioned topic are the sums over its partitions).
    fn add_assign(&mut self, o: TopicCounts) {
        self.scheduled += o.scheduled;
        self.ready += o.ready;
        self.active += o.active;
        self.waiting += o.waiting;
        self.dead += o.dead;
        self.dead_pending += o.dead_pending;
        self.done += o.done;
        self.processed += o.processed;
        self.retried += o.retried;
        self.failed += o.failed;
        self.dead_total += o.dead_total;
        self.cancelled += o.cancelled;
        self.stalled += o.stalled;
        self.trimmed += o.trimmed;
        self.paused |= o.paused;
        self.flow += o.flow;
    }
}
