//! What an enqueue did, as its caller and the metrics see it: below the client and the metrics, so
//! that neither imports the other for it.

/// What an enqueue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnqueueStatus {
    /// A new job was stored.
    Created,
    /// An existing scheduled job with this id had its payload and due time replaced.
    Replaced,
    /// A job with this id was already scheduled; nothing changed.
    AlreadyScheduled,
    /// A job with this id is running; nothing changed.
    AlreadyRunning,
    /// The unique key is held by another job ([`Enqueued::id`](crate::Enqueued::id)), scheduled or running: nothing
    /// created (see [`Unique`](crate::Unique)).
    Duplicate,
    /// The unique key's last job ([`Enqueued::id`](crate::Enqueued::id)) has finished and its window lasts until
    /// [`Enqueued::held_until`](crate::Enqueued::held_until): nothing created (see [`Unique`](crate::Unique)).
    Throttled,
    /// The debounce key's pending job ([`Enqueued::id`](crate::Enqueued::id)) was pushed back to [`Enqueued::due_at`](crate::Enqueued::due_at)
    /// (see [`Debounce`](crate::Debounce)).
    Debounced,
    /// A new job was stored to wait for other jobs (see [`Enqueue::after_job`](crate::Enqueue::after_job)):
    /// it becomes due once they succeed.
    Waiting,
    /// A job with this id already waits for other jobs; nothing changed.
    AlreadyWaiting,
    /// A job it was to wait for had already died or been cancelled: by its
    /// [`OnParentFailure`](crate::OnParentFailure) it was dead-lettered, or cancelled, at once.
    ParentFailed,
}
