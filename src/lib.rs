//! # postpone
//!
//! Typed, reliable background jobs on Redis: declare a job type per topic, enqueue it now, after a delay
//! or at a time, cancel or reschedule it by id, and run workers that claim due jobs atomically and call
//! typed async handlers. Failed jobs are retried by a schedule of delays; exhausted ones go to the dead
//! letters through a hook.
//!
//! ```
//! use std::time::Duration;
//! use postpone::{Client, Job, JobContext, JobError, Worker};
//! use serde::{Deserialize, Serialize};
//!
//! // A job type: a serde struct bound to a topic, with its retry schedule (delays by attempt).
//! #[derive(Serialize, Deserialize, Job)]
//! #[job(topic = "orders.close", retry = ["0", "0", "10ms", "20ms"])]
//! struct CloseOrder {
//!     order_id: u64,
//! }
//!
//! // A typed handler. It may run more than once for one job (at-least-once): keep it idempotent.
//! async fn close_order(job: CloseOrder, ctx: JobContext) -> Result<(), JobError> {
//!     println!("closing order {} (attempt {})", job.order_id, ctx.attempt());
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> postpone::Result<()> {
//! // In memory here; `Client::connect("redis://...")` in production.
//! let client = Client::memory();
//!
//! // Close order 42 in 50 ms unless it is cancelled first; the id makes the enqueue idempotent.
//! client.enqueue(CloseOrder { order_id: 42 }).id("order:42").after(Duration::from_millis(50)).await?;
//! // Order 43 was paid: its timer is cancelled before it fires.
//! client.enqueue(CloseOrder { order_id: 43 }).id("order:43").after(Duration::from_secs(60)).await?;
//! client.cancel::<CloseOrder>("order:43").await?;
//!
//! let worker = Worker::builder(&client).handle(close_order).build()?;
//! let shutdown = worker.shutdown_handle();
//! let running = tokio::spawn(worker.run());
//! let topic = client.topic::<CloseOrder>();
//! while topic.counts().await?.processed < 1 {
//!     tokio::time::sleep(Duration::from_millis(10)).await;
//! }
//! shutdown.shutdown(); // graceful: running handlers finish, the rest is handed back
//! running.await.unwrap()?;
//! assert_eq!(topic.counts().await?.cancelled, 1);
//! # Ok(()) }
//! ```
//!
//! ## Where things are
//! - [`Job`] and `#[derive(Job)]`: declaring job types; [`RetrySchedule`]: the retry schedule.
//! - [`Client`]: enqueue ([`Client::enqueue`], [`Client::enqueue_many`]), [`Client::cancel`],
//!   [`Client::reschedule`], and per-topic inspection and dead letters through [`Topic`].
//! - Batches: [`Client::batch`] enqueues jobs of any topics as one set with callbacks on success,
//!   completion and death ([`BatchBuilder`], [`Batch`], [`Client::batch_status`]).
//! - [`Worker`]: handlers ([`Handler`], [`JobHandler`]), [`JobContext`], [`JobError`], limits, leases,
//!   shutdown; [`DeadLetterSink`]: where dead jobs go (implement it with [`macro@async_trait`]).
//! - [`middleware`]: code around every handler of a worker or of one job type ([`Middleware`],
//!   [`middleware_fn`], [`middleware::TraceTiming`]).
//! - [`ops`]: the operations API ([`Client::ops`]): topics and live workers, jobs by state paged by
//!   cursor, one job with why it is not running, pause and resume, run now, dead letters in bulk,
//!   per-minute history; what the `postpone` command and the dashboard are built on.
//! - [`store`]: the backend seam, with the [`store::redis`] (one Redis or a Redis Cluster) and
//!   [`store::memory`] backends; [`partition_of`]: where a job of a partitioned topic is stored.
//! - [`Periodic`]: periodic jobs (cron expressions with the `cron` feature, or intervals), given to a
//!   worker with [`WorkerBuilder::periodic`]; [`Topic::schedules`] lists them.
//! - [`guide`]: the guide, one module per chapter: [getting started](guide::getting_started),
//!   [concepts](guide::concepts), [retry schedules](guide::retries), [dead letters](guide::dead_letters),
//!   cookbooks, periodic jobs, flow control, [batches](guide::batches),
//!   [operating](guide::operating), [deploying Redis](guide::deploying_redis),
//!   [guarantees](guide::guarantees),
//!   [testing your handlers](guide::testing), [troubleshooting](guide::troubleshooting) and
//!   [migrating](guide::migrating) from other queues.
//!
//! postpone reports through [`tracing`](https://docs.rs/tracing): warnings about Redis, failed
//! attempts, and, with the default sink ([`LogSink`]), every dead job. Install a subscriber
//! (`tracing_subscriber::fmt::init()`), or those go nowhere.
//!
//! The [guide] starts with [getting started](guide::getting_started); the README lists the examples:
//! an order timeout in an axum service, a retried webhook, dead letters kept in PostgreSQL, and graceful
//! shutdown.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

mod check;
mod client;
mod dead_letter;
mod error;
pub mod flow;
pub mod guide;
mod handler;
mod id;
mod job;
mod meta;
pub mod middleware;
mod observe;
pub mod ops;
mod partition;
mod periodic;
mod record;
mod schedule;
mod status;
pub mod store;
mod time;
mod token;
mod validate;
mod worker;

/// Support for transactional outboxes (`postpone-postgres`): jobs prepared inside a transaction, delivered
/// later at most once per delivery token.
pub use client::outbox;
pub use client::{
    Batch, BatchBuilder, BatchMember, BatchStatus, CancelStatus, Client, ClientBuilder, Debounce,
    Enqueue, EnqueueItem, EnqueueStatus, Enqueued, JobInfo, JobOutcome, JobState, Namespaced,
    NoNamespace, PartialCounts, ScheduleInfo, StoreKeepsItsOwnNamespace, Topic, Unique,
    UnreadablePartition, Waiter, When, DEFAULT_MAX_PAYLOAD, DEFAULT_NAMESPACE,
};
pub use dead_letter::{sink_fn, DeadLetter, DeadLetterSink, FnSink, LogSink};
pub use error::{BoxError, Error, Report, Result};
pub use flow::{KeyLimits, RateLimit};
pub use handler::{
    Handler, HandlerFuture, JobContext, JobError, JobHandler, Outcome, StopReason, MAX_RESULT,
};
pub use job::{Job, Keep};
pub use meta::{MAX_META_ENTRIES, MAX_META_KEY_LEN, MAX_META_VALUE_LEN};
pub use middleware::{middleware_fn, Middleware};
#[cfg(feature = "opentelemetry")]
pub use observe::trace::TraceParent;
pub use partition::{partition_of, MAX_PARTITIONS};
pub use periodic::{Missed, Overlap, Periodic, PeriodicJob, MAX_CATCH_UP, SKIP_GRACE};
pub use record::AttemptError;
pub use schedule::{RetrySchedule, MAX_DELAY, MAX_SLOTS};
pub use store::{CallbackKind, MemberState, OnParentFailure, Progress, TopicCounts, UniqueStates};
pub use validate::{
    validate_batch_id, validate_id, validate_key, validate_namespace, validate_topic,
    MAX_BATCH_ID_LEN, MAX_ID_LEN,
};
pub use worker::{ShutdownHandle, SlotSharing, Worker, WorkerBuilder};

#[cfg(feature = "macros")]
pub use postpone_macros::Job;

/// The `async-trait` attribute, for implementing [`DeadLetterSink`] and [`JobHandler`] with `async fn`:
/// `#[postpone::async_trait] impl DeadLetterSink for MySink { async fn deliver(..) .. }`. Re-exported so
/// that your crate needs no dependency on `async-trait` (the code it generates names only `core` and
/// `std`).
pub use async_trait::async_trait;

#[doc(hidden)]
pub mod __private {
    pub use crate::flow::{KeyLimits, RateLimit};
    pub use crate::handler::{ViaTrait, WithState, WithoutState};
    pub use crate::schedule::RetrySchedule;
    #[cfg(feature = "test-hooks")]
    pub use crate::worker::failpoint;
    pub use core::option::Option;
    pub use std::string::{String, ToString};
    pub use std::time::Duration;

    /// Used by `#[derive(Job)]`: one field's value in a unique key (as JSON).
    pub fn key_part<T: serde::Serialize + ?Sized>(value: &T) -> String {
        serde_json::to_string(value).unwrap_or_default()
    }

    /// Used by `#[derive(Job)]`: a unique key from (field, value) pairs: `product_id=42,region="eu"`.
    pub fn unique_key(parts: &[(&str, String)]) -> String {
        let mut key = String::new();
        for (i, (field, value)) in parts.iter().enumerate() {
            if i > 0 {
                key.push(',');
            }
            key.push_str(field);
            key.push('=');
            key.push_str(value);
        }
        key
    }

    /// Used by `#[derive(Job)]`: the schedule it checked at compile time.
    pub fn schedule_from_millis(slots: &[u64]) -> RetrySchedule {
        RetrySchedule::from_millis(slots).expect("postpone-macros checked this schedule")
    }
}

/// The README's code, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
