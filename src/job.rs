//! Declaring job types.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::flow::RateLimit;
use crate::schedule::RetrySchedule;

/// A typed job: a serde type bound to one topic.
///
/// Derive it, naming the topic and, optionally, the retry schedule, the lease and a timeout:
///
/// ```
/// use postpone::Job;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "orders.close", retry = ["0", "0", "30s", "5m"], lease = "1m", timeout = "10m")]
/// struct CloseOrder {
///     order_id: u64,
/// }
///
/// assert_eq!(CloseOrder::TOPIC, "orders.close");
/// assert_eq!(CloseOrder::retry_schedule().attempts(), 3);
/// ```
///
/// Durations are written as `"500ms"`, `"30s"`, `"5m"`, `"2h"`, `"1d"` or `"0"`. The topic must match
/// `[A-Za-z0-9_.-]{1,128}`; the derive checks it at compile time.
///
/// A hot topic can be split into partitions, each stored under its own key prefix (and so, on a Redis
/// Cluster, spread over slots and nodes), with `partitions = N` (1 to 1024):
///
/// ```
/// # use postpone::Job;
/// # use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "webhooks", partitions = 3)]
/// struct Webhook { url: String }
///
/// assert_eq!(Webhook::partitions(), 3);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a postpone job",
    label = "not a job type",
    note = "add `#[derive(postpone::Job)]` and `#[job(topic = \"...\")]` to `{Self}`"
)]
pub trait Job: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The topic this job type is enqueued to and handled from.
    const TOPIC: &'static str;

    /// The retry schedule for jobs of this type (the default unless declared).
    fn retry_schedule() -> RetrySchedule {
        RetrySchedule::default()
    }

    /// How long a worker holds a claimed job before another may take it, unless renewed by the
    /// worker's heartbeat. `None` uses the worker's default.
    fn lease() -> Option<Duration> {
        None
    }

    /// How long one attempt may run before it counts as failed. `None` means no limit.
    fn timeout() -> Option<Duration> {
        None
    }

    /// How many partitions the topic is split into (1 to [`MAX_PARTITIONS`](crate::MAX_PARTITIONS);
    /// default 1). A job's id decides its partition ([`partition_of`](crate::partition_of)), so
    /// cancel, reschedule and lookup by id touch one partition. Growing it keeps stored jobs running
    /// and findable by id (partition 0 is the topic's own name, and lookups follow an id's partition
    /// history); shrinking strands the jobs of the removed partitions: drain them first.
    fn partitions() -> u16 {
        1
    }

    /// The topic's rate limit, across every worker (default none; a worker may override it with
    /// [`WorkerBuilder::rate_limit`](crate::WorkerBuilder::rate_limit)). Declared as
    /// `rate = "100/s"` (jobs per `s`, `m`, `h`, `d`, or a duration such as `"10/500ms"`).
    ///
    /// ```
    /// # use postpone::{Job, RateLimit};
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "sms", rate = "100/s", max_running = 5)]
    /// struct Sms { to: String }
    ///
    /// assert_eq!(Sms::rate_limit(), Some(RateLimit::per_second(100)));
    /// assert_eq!(Sms::max_running(), Some(5));
    /// ```
    ///
    /// On a partitioned topic each of its `P` partitions gets `jobs` per `P × per`: together they keep
    /// the limit when the jobs spread evenly over the partitions.
    fn rate_limit() -> Option<RateLimit> {
        None
    }

    /// Most jobs of the topic running at once across every worker (default none; a worker may
    /// override it with [`WorkerBuilder::max_running`](crate::WorkerBuilder::max_running)). A job
    /// counts from its claim to its outcome; a crashed worker's jobs count until their leases expire.
    ///
    /// On a partitioned topic each partition gets `n / P` (rounded down, at least 1).
    fn max_running() -> Option<u32> {
        None
    }

    /// The uniqueness of this job (`#[job(unique = ["product_id"], unique_for = "10m")]`: the key is
    /// made of those fields' values), used by every enqueue that sets none of its own with
    /// [`Enqueue::unique`](crate::Enqueue::unique) or [`Enqueue::debounce`](crate::Enqueue::debounce).
    /// Default: none.
    fn unique(&self) -> Option<crate::Unique> {
        None
    }
}
