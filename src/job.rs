//! Declaring job types.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::flow::RateLimit;
use crate::schedule::RetrySchedule;
use crate::store::Retention;

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

    /// What its handler returns on success: `()` unless declared with `output = Type`. A result
    /// reaches the callers waiting for the job ([`Client::wait`](crate::Client::wait)) and, when the
    /// type keeps finished jobs ([`Job::keep`]), is kept with the job. A type whose output is `()` (or
    /// any other zero-sized type) sends and stores nothing.
    ///
    /// ```
    /// use postpone::{Job, JobContext, JobError};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Pdf { url: String, pages: u32 }
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "invoices.render", output = Pdf, keep = "1d")]
    /// struct RenderInvoice { invoice_id: u64 }
    ///
    /// async fn render(job: RenderInvoice, _ctx: JobContext) -> Result<Pdf, JobError> {
    ///     Ok(Pdf { url: format!("https://files.example/{}.pdf", job.invoice_id), pages: 2 })
    /// }
    /// # let _ = postpone::Worker::builder(&postpone::Client::memory()).handle(render);
    /// ```
    type Output: Serialize + DeserializeOwned + Send + 'static;

    /// How long finished jobs of this type (succeeded and cancelled) are kept, with their results:
    /// declared as `keep = "1d"` (at most the newest 10,000) and/or `keep_last = 1000` (for at most 7
    /// days). Default: none kept, and a finished job is gone. Workers trim kept jobs beyond it.
    fn keep() -> Option<Keep> {
        None
    }

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

    /// This job's key for fairness (`#[job(key = "customer_id")]`: that field's value, formatted with
    /// `Display`), used by every enqueue that sets none with [`Enqueue::key`](crate::Enqueue::key).
    /// Default: none.
    ///
    /// ```
    /// # use postpone::Job;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "shop.sync", key = "shop_id")]
    /// struct SyncShop { shop_id: u64 }
    ///
    /// assert_eq!(SyncShop { shop_id: 7 }.key(), Some("7".to_string()));
    /// ```
    ///
    /// Within a topic, due jobs of different keys are claimed round-robin between keys, so one key's
    /// backlog of 100,000 jobs takes its turn and no more, and a key with one due job starts at the next
    /// free slot whatever the others hold; a key's own jobs go in due order. A key is 1 to 128 bytes
    /// without control characters ([`validate_key`](crate::validate_key)). See the guide's chapter
    /// [Fairness by key](crate::guide::fairness).
    fn key(&self) -> Option<String> {
        None
    }

    /// The limits of each key of this type's keyed jobs (`#[job(key_max_running = 2, key_rate =
    /// "10/s")]`): at most that many jobs of one key running at once, and started per period, across
    /// every worker. Default: none. A worker may override them with
    /// [`WorkerBuilder::key_limits`](crate::WorkerBuilder::key_limits).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use postpone::{Job, KeyLimits, RateLimit};
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "shop.sync", key = "shop_id", key_max_running = 2, key_rate = "10/s")]
    /// struct SyncShop { shop_id: u64 }
    ///
    /// assert_eq!(
    ///     SyncShop::key_limits(),
    ///     KeyLimits::new().max_running(2).rate(RateLimit::new(10, Duration::from_secs(1)))
    /// );
    /// ```
    ///
    /// `key_rate` is written as `rate` is (`"10/s"`, `"600/m"`, `"10/500ms"`); `key_max_running` is an
    /// integer, at least 1. Neither needs `key`: they hold as well for the keys that enqueues give
    /// ([`Enqueue::key`](crate::Enqueue::key)).
    fn key_limits() -> crate::KeyLimits {
        crate::KeyLimits::new()
    }
}

/// How long a job type's finished jobs are kept (see [`Job::keep`]): at most `max_count` of them, none
/// older than `max_age`, whichever bound is reached first.
///
/// ```
/// use std::time::Duration;
/// let keep = postpone::Keep::new(Duration::from_secs(3600), 500);
/// assert_eq!(keep.max_age(), Duration::from_secs(3600));
/// assert_eq!(keep.max_count(), 500);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    max_age: Duration,
    max_count: u64,
}

impl Keep {
    /// Keep finished jobs for `max_age`, at most `max_count` of them (at least 1).
    pub fn new(max_age: Duration, max_count: u64) -> Self {
        Keep {
            max_age,
            max_count: max_count.max(1),
        }
    }

    /// The longest a finished job is kept.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// The most finished jobs kept.
    pub fn max_count(&self) -> u64 {
        self.max_count
    }

    /// As the store takes it.
    pub(crate) fn retention(&self) -> Retention {
        Retention::new(crate::time::millis(self.max_age), self.max_count)
    }
}
