//! The worker process's handlers, one per workload, and what they count and record: handler runs,
//! how late each job started by the Redis clock, how long their sleeps took.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postpone::{Job, JobContext, JobError};
use tokio::sync::Notify;

use crate::jobs::*;

/// Counts handler runs and wakes the main task when the target is reached.
pub(crate) struct Counter {
    pub(crate) handled: AtomicU64,
    pub(crate) target: AtomicU64,
    pub(crate) done: Notify,
}

impl Counter {
    fn hit(&self) {
        let n = self.handled.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.target.load(Ordering::Relaxed) {
            self.done.notify_one();
        }
        if n.is_multiple_of(5000) && std::env::var_os("BENCH_PROGRESS").is_some() {
            eprintln!("    {n} handled at {:?}", START.get().map(|s| s.elapsed()));
        }
    }
}

/// When the worker process started.
pub(crate) static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// The handlers' state: what they count and record, shared with the worker process's main task.
#[derive(Clone)]
pub(crate) struct State {
    pub(crate) counter: Arc<Counter>,
    /// `delayed`, `steady`: Redis, for its clock, and the lateness of each job's first attempt.
    redis: Option<redis::aio::MultiplexedConnection>,
    pub(crate) lateness: Arc<Mutex<Vec<Start>>>,
    /// `steady`: the lateness of second attempts, ms.
    pub(crate) retry_lateness: Arc<Mutex<Vec<f64>>>,
    /// `drain-io`, `steady`: nanoseconds spent in the handlers' sleeps, all attempts.
    pub(crate) slept_ns: Arc<AtomicU64>,
    /// `steady`: handlers running now.
    running: Arc<AtomicU64>,
}

/// How late a handler started, by the Redis clock.
#[derive(Clone, Copy)]
pub(crate) struct Lateness {
    pub(crate) late_ms: f64,
    /// The TIME round trip that read it, ms.
    pub(crate) clock_rtt_ms: f64,
}

/// When a job's first attempt started, against its due time.
#[derive(Clone, Copy)]
pub(crate) struct Start {
    pub(crate) late: Lateness,
    pub(crate) due_ms: i64,
    pub(crate) order_id: u64,
    /// Handlers running then (0 where not counted).
    pub(crate) busy: u32,
}

/// Counts a handler as running until dropped.
struct Running(Arc<AtomicU64>);

impl Running {
    /// Counts one more; returns the guard and how many run now, this one included.
    fn enter(count: &Arc<AtomicU64>) -> (Self, u64) {
        let now = count.fetch_add(1, Ordering::Relaxed) + 1;
        (Running(count.clone()), now)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl State {
    /// The state of a worker process that waits for `jobs` jobs; `redis` for handlers that read its clock.
    pub(crate) fn new(jobs: u64, redis: Option<redis::aio::MultiplexedConnection>) -> Self {
        State {
            counter: Arc::new(Counter {
                handled: AtomicU64::new(0),
                target: AtomicU64::new(jobs),
                done: Notify::new(),
            }),
            redis,
            lateness: Arc::new(Mutex::new(Vec::with_capacity(jobs as usize))),
            retry_lateness: Arc::new(Mutex::new(Vec::new())),
            slept_ns: Arc::new(AtomicU64::new(0)),
            running: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Reads the Redis clock (first thing in a handler): how late this attempt started.
    async fn lateness(&self, ctx: &JobContext) -> Result<Lateness, JobError> {
        let sent = Instant::now();
        let now_us = self.redis_time_us().await.map_err(JobError::msg)?;
        let late_us = now_us - ctx.due_at().timestamp_millis() * 1000;
        Ok(Lateness {
            late_ms: late_us as f64 / 1000.0,
            clock_rtt_ms: sent.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The Redis clock (TIME), µs.
    async fn redis_time_us(&self) -> redis::RedisResult<i64> {
        let mut redis = self.redis.clone().expect("this workload has a connection");
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut redis).await?;
        Ok(secs * 1_000_000 + micros)
    }

    /// Records the start of `job`'s first attempt, with `busy` handlers running.
    fn record_start(&self, job: &Order, ctx: &JobContext, late: Lateness, busy: u64) {
        self.lateness.lock().unwrap().push(Start {
            late,
            due_ms: ctx.due_at().timestamp_millis(),
            order_id: job.order_id,
            busy: busy as u32,
        });
    }

    /// Sleeps `d` (`tokio::time::sleep`), as a handler waiting on a service, and counts the time.
    async fn wait_on_io(&self, d: Duration) {
        let began = Instant::now();
        tokio::time::sleep(d).await;
        self.slept_ns
            .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// The drain handler: does nothing (the payload is decoded into `Order` by the worker).
pub(crate) async fn drain_order(
    _job: Order,
    _ctx: JobContext,
    state: State,
) -> Result<(), JobError> {
    state.counter.hit();
    Ok(())
}

/// The `drain --keep` handler: does nothing, and returns the order id (kept with the job).
pub(crate) async fn kept_order(job: Kept, _ctx: JobContext, state: State) -> Result<u64, JobError> {
    state.counter.hit();
    Ok(job.order_id)
}

/// How long the `drain-io` handler sleeps.
pub(crate) const IO_HANDLER: Duration = Duration::from_millis(1);

/// The drain-io handler: waits on I/O for 1 ms (`tokio::time::sleep`), as a handler calling a service.
pub(crate) async fn io_order(_job: Order, _ctx: JobContext, state: State) -> Result<(), JobError> {
    state.wait_on_io(IO_HANDLER).await;
    state.counter.hit();
    Ok(())
}

/// `drain-io`'s handler without the library: `concurrency` tasks on this process's runtime sleeping
/// [`IO_HANDLER`] as the handler does (timing each sleep the same way) until `sleeps` sleeps are done.
/// Returns this process's CPU over them, seconds: what the handler itself costs (Tokio's timer, the
/// runtime parking between ticks), the floor under the worker's CPU in `drain-io`.
pub(crate) async fn bare_io_sleeps(concurrency: usize, sleeps: u64) -> f64 {
    let cpu = crate::report::own_cpu_s();
    let state = State::new(sleeps, None);
    let each = sleeps / concurrency.max(1) as u64;
    let extra = sleeps % concurrency.max(1) as u64;
    let tasks: Vec<_> = (0..concurrency.max(1) as u64)
        .map(|k| {
            let state = state.clone();
            tokio::spawn(async move {
                for _ in 0..each + u64::from(k < extra) {
                    state.wait_on_io(IO_HANDLER).await;
                    state.counter.hit();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a sleeping task panicked");
    }
    crate::report::own_cpu_s() - cpu
}

/// How long [`bare_steady_handlers`] replays the handler for, at most.
pub(crate) const STEADY_FLOOR_SECS: u64 = 10;

/// `steady`: what the handler's own work costs (a TIME round trip for the start lag, then the 2 ms
/// sleep), replayed after the worker stopped, with no library: `runs` runs started at `rate` per second
/// on this process's runtime, each on a task of its own. Returns this process's CPU over the replay.
/// (The worker runs jobs on tasks it keeps, so the replay's task per run makes it a little dearer than
/// the handler itself: what is left to the library is, if anything, understated.) Fails when a run
/// could not read the clock.
pub(crate) async fn bare_steady_handlers(
    state: &State,
    rate: u64,
    runs: u64,
) -> Result<f64, redis::RedisError> {
    let cpu = crate::report::own_cpu_s();
    let mut pacer = crate::pacer::Pacer::per_second(rate);
    let mut tasks = Vec::with_capacity(runs as usize);
    for _ in 0..runs {
        pacer.wait().await;
        let state = state.clone();
        tasks.push(tokio::spawn(async move {
            let clock = state.redis_time_us().await;
            state.wait_on_io(STEADY_HANDLER).await;
            clock
        }));
    }
    for task in tasks {
        task.await.expect("a replayed handler panicked")?;
    }
    Ok(crate::report::own_cpu_s() - cpu)
}

/// The delayed handler: reads the Redis clock first thing, and records how late it started.
pub(crate) async fn delayed_order(
    job: Order,
    ctx: JobContext,
    state: State,
) -> Result<(), JobError> {
    let late = state.lateness(&ctx).await?;
    state.record_start(&job, &ctx, late, 0);
    state.counter.hit();
    Ok(())
}

/// How long the `steady` handler sleeps.
pub(crate) const STEADY_HANDLER: Duration = Duration::from_millis(2);

/// The steady handler: records how late it started (by the Redis clock, as `delayed`), waits on I/O
/// for 2 ms, and fails the first attempt of 1 % of the jobs, asking for the retry at once.
pub(crate) async fn steady_order(
    job: Order,
    ctx: JobContext,
    state: State,
) -> Result<(), JobError> {
    let (_running, busy) = Running::enter(&state.running);
    let late = state.lateness(&ctx).await?;
    if ctx.attempt() == 1 {
        state.record_start(&job, &ctx, late, busy);
    } else {
        state.retry_lateness.lock().unwrap().push(late.late_ms);
    }
    state.wait_on_io(STEADY_HANDLER).await;
    if ctx.attempt() == 1 && steady::fails_once(job.order_id) {
        return Err(JobError::retry_after(Duration::ZERO, "fails once"));
    }
    state.counter.hit();
    Ok(())
}

async fn noop<J: Job>(_job: J, _ctx: JobContext, _state: State) -> Result<(), JobError> {
    Ok(())
}

pub(crate) fn idle_handlers(
    mut b: postpone::WorkerBuilder<State>,
    topics: usize,
) -> postpone::WorkerBuilder<State> {
    macro_rules! register {
        ($($i:literal $t:ident),*) => {
            $( if topics > $i { b = b.handle(noop::<$t>); } )*
        };
    }
    register!(0 Idle0, 1 Idle1, 2 Idle2, 3 Idle3, 4 Idle4, 5 Idle5, 6 Idle6, 7 Idle7, 8 Idle8, 9 Idle9);
    b
}
