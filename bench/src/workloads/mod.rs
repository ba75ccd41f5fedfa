//! The workloads of BENCHMARKS.md. Each takes an empty Redis (or empties it when told to), runs, checks
//! that every job ended as it should, empties the Redis again and returns its [`Report`].

mod batch;
mod delayed;
mod drain;
mod enqueue;
mod fairness;
mod floor;
mod idle;
mod memory;
mod outbox;
mod page;
mod steady;
mod wait;

pub(crate) use fairness::worker as fairness_worker;
use postpone::{Client, EnqueueStatus, Enqueued, TopicCounts};

use crate::args::{Args, Workload};
use crate::jobs::Order;
use crate::probe::Probe;
use crate::report::Report;
use crate::BoxResult;

/// Runs `args.workload`.
pub(crate) async fn run(args: &Args) -> BoxResult<Report> {
    let mut probe = Probe::connect(&args.redis).await?;
    outln!(
        "postpone-bench {}: Redis {} at {}",
        args.workload,
        probe.version().await?,
        args.redis
    );
    probe.empty(&args.redis, args.flush).await?;
    let report = match args.workload {
        Workload::Enqueue => enqueue::single(args, &mut probe).await,
        Workload::EnqueueBulk => enqueue::bulk(args, &mut probe).await,
        Workload::EnqueueConcurrent => enqueue::concurrent(args, &mut probe).await,
        Workload::Drain => drain::plain(args, &mut probe).await,
        Workload::DrainIo => drain::io(args, &mut probe).await,
        Workload::Backlog => drain::backlog(args, &mut probe).await,
        Workload::Delayed => delayed::run(args, &mut probe).await,
        Workload::Memory => memory::run(args, &mut probe).await,
        Workload::Idle => idle::run(args, &mut probe).await,
        Workload::Page => page::run(args, &mut probe).await,
        Workload::Outbox => outbox::run(args, &mut probe).await,
        Workload::Steady => steady::run(args, &mut probe).await,
        Workload::Wait => wait::run(args, &mut probe).await,
        Workload::Batch => batch::run(args, &mut probe).await,
        Workload::Fairness => fairness::run(args, &mut probe).await,
        Workload::Floor => floor::run(args, &mut probe).await,
    }?;
    // Leave the Redis empty, as it was given, so that the next run takes it. (A failed run leaves its
    // jobs there to look at; the next run then wants --flush.)
    if report.ok {
        probe.flushall().await?;
    }
    Ok(report)
}

/// A client of the library, as an application would make one.
/// A worker running in this process on a client of its own (its own connections, as BullMQ's worker
/// has), at `args.concurrency`, with the handlers `handlers` registers; stopped by [`Running::stop`].
async fn spawn_worker<S: Send + Sync + 'static>(
    args: &Args,
    state: S,
    handlers: impl FnOnce(postpone::WorkerBuilder<S>) -> postpone::WorkerBuilder<S>,
) -> BoxResult<Running> {
    let worker_client = client(args).await?;
    let worker =
        handlers(postpone::Worker::with_state(&worker_client, state).concurrency(args.concurrency))
            .build()?;
    let stop = worker.shutdown_handle();
    Ok(Running {
        stop,
        task: tokio::spawn(worker.run()),
    })
}

/// A worker started by [`spawn_worker`].
struct Running {
    stop: postpone::ShutdownHandle,
    task: tokio::task::JoinHandle<postpone::Result<()>>,
}

impl Running {
    /// Stops the worker and waits for it (its jobs done).
    async fn stop(self) -> BoxResult<()> {
        self.stop.shutdown();
        self.task.await??;
        Ok(())
    }
}

async fn client(args: &Args) -> BoxResult<Client> {
    Ok(Client::connect(&args.redis).await?)
}

/// Loads the scripts (the first FCALL of a script on a server finds no function and loads its
/// library), leaving nothing behind.
async fn warm_up(client: &Client) -> BoxResult<()> {
    client
        .enqueue(Order::new(0))
        .id("warm-up")
        .after(std::time::Duration::from_secs(3600))
        .await?;
    client.cancel::<Order>("warm-up").await?;
    Ok(())
}

/// Whether every enqueue created a job.
fn all_created(done: &[Enqueued]) -> bool {
    done.iter().all(|e| e.status == EnqueueStatus::Created)
}

/// Checks counts; prints what is wrong. `live` is how many jobs should still be waiting.
fn counts_ok(c: &TopicCounts, processed: u64, live: u64) -> bool {
    counts_ok_retried(c, processed, live, 0)
}

/// [`counts_ok`] where `retried` attempts failed and were retried (and none went to the dead letters).
fn counts_ok_retried(c: &TopicCounts, processed: u64, live: u64, retried: u64) -> bool {
    let ok = c.processed == processed
        && c.scheduled + c.ready == live
        && c.active == 0
        && c.dead == 0
        && c.failed == 0
        && c.retried == retried
        && c.stalled == 0;
    if !ok {
        outln!(
            "  FAILED: expected {processed} processed, {retried} retried and {live} waiting, found {c:?}"
        );
    }
    ok
}

/// Jobs per second.
fn rate(jobs: u64, secs: f64) -> f64 {
    jobs as f64 / secs
}

/// Enqueues `n` jobs due after `delay_ms(i)` with the bulk API, 1,000 per call; returns whether all
/// were created.
async fn enqueue_bulk(
    client: &Client,
    first: u64,
    n: u64,
    delay_ms: impl Fn(u64) -> u64,
) -> BoxResult<bool> {
    enqueue_bulk_with(client, first, n, delay_ms, |_| 0).await
}

/// [`enqueue_bulk`], job `k` with priority `priority(k)`.
async fn enqueue_bulk_with(
    client: &Client,
    first: u64,
    n: u64,
    delay_ms: impl Fn(u64) -> u64,
    priority: impl Fn(u64) -> u8,
) -> BoxResult<bool> {
    let mut ok = true;
    let mut i = first;
    while i < first + n {
        let end = (i + 1000).min(first + n);
        let items = (i..end).map(|k| {
            postpone::EnqueueItem::new(Order::new(k))
                .after(std::time::Duration::from_millis(delay_ms(k)))
                .priority(priority(k))
        });
        ok &= all_created(&client.enqueue_many(items).await?);
        i = end;
    }
    Ok(ok)
}
