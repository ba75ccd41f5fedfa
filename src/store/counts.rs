//! What a topic holds, by state, and its counters.

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
    /// In the dead letters.
    pub dead: u64,
    /// Dead jobs whose hook has not yet succeeded.
    pub dead_pending: u64,
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
}

impl std::ops::AddAssign for TopicCounts {
    /// Adds every count and counter (the counts of a partitioned topic are the sums over its partitions).
    fn add_assign(&mut self, o: TopicCounts) {
        self.scheduled += o.scheduled;
        self.ready += o.ready;
        self.active += o.active;
        self.dead += o.dead;
        self.dead_pending += o.dead_pending;
        self.processed += o.processed;
        self.retried += o.retried;
        self.failed += o.failed;
        self.dead_total += o.dead_total;
        self.cancelled += o.cancelled;
        self.stalled += o.stalled;
        self.trimmed += o.trimmed;
        self.paused |= o.paused;
    }
}
