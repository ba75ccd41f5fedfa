//! What the parts of a running worker share: the store, the settings, the slots, and per served topic
//! (or partition) its handler, wake-ups and running jobs. The orchestrator (`run.rs`) builds these and
//! hands them to the claim loops, heartbeats, ackers and dead-letter pumps, which import only this.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch, Notify, OwnedSemaphorePermit, Semaphore};

use super::config::Config;
use super::in_flight::InFlight;
use super::outcomes::ProgressQueue;
use super::registry::ErasedHandler;
use super::slots::{Permit, SlotPool};
use crate::dead_letter::DeadLetterSink;
use crate::flow::Flow;
use crate::middleware::Middleware;
use crate::observe::{Tally, TopicMetrics};
use crate::store::{ClaimedJob, FinishItem, Store};

/// What every part of a worker shares.
pub(crate) struct Shared<S> {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) state: Arc<S>,
    pub(crate) config: Config,
    /// The worker-wide concurrency limit, shared by the topics as the worker's sharing says.
    pub(crate) global: Arc<SlotPool>,
    pub(crate) sink: Arc<dyn DeadLetterSink>,
    /// Raised when the worker should stop claiming.
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) jobs: Arc<Tracker>,
    /// This worker's number: kept with every lease it takes, and its id in the registry of workers.
    pub(crate) holder: u64,
}

/// A job's outcome on its way to the acker: how it counts in the metrics, and whether the job is in a
/// batch.
pub(crate) type Finished = (FinishItem, Tally, bool);

/// One topic this worker serves (one partition of it, on a partitioned topic).
pub(crate) struct ServedTopic<S> {
    /// The topic, as the user named it.
    pub(crate) name: &'static str,
    /// Its partition, on a partitioned topic.
    pub(crate) partition: Option<u16>,
    /// The store's name for it (`<topic>#<p>` on a partitioned topic).
    pub(crate) stored_as: String,
    pub(crate) handler: Arc<dyn ErasedHandler<S>>,
    /// The middleware around the handler, outermost first; `None` when there is none.
    pub(crate) middleware: Option<Arc<[Arc<dyn Middleware>]>>,
    pub(crate) lease_ms: u64,
    /// The topic's own concurrency limit, shared by its partitions.
    pub(crate) limit: Option<Arc<Semaphore>>,
    /// Wakes the claim loop (hints).
    pub(crate) wake: Notify,
    /// Wakes the dead-letter pump.
    pub(crate) dead_wake: Notify,
    /// Wakes the end pump (ends of jobs that batches follow wait to be delivered).
    pub(crate) ends_wake: Notify,
    pub(crate) in_flight: InFlight,
    /// True while the claim loop waits for a free slot (then the heartbeat sweeps).
    pub(crate) saturated: AtomicBool,
    /// Jobs claimed ahead, in claim order, waiting for a slot: the claim loop starts them on slots
    /// that free up, and a run that ends takes the next one on its own slot
    /// ([`ServedTopic::next_claimed`]).
    waiting: Mutex<VecDeque<ClaimedJob>>,
    /// Raised when a run that ended took a job claimed ahead and left no more than the low-water mark
    /// (half of [`ServedTopic::ahead`]): the claim loop claims more.
    pub(crate) waiting_low: Notify,
    /// Its metrics (nothing without the `metrics` feature).
    pub(crate) metrics: TopicMetrics,
    /// Progress reports of its running jobs, on their way to the store.
    pub(crate) progress: Arc<ProgressQueue>,
    /// This topic's (partition's) share of the slots: what claiming ahead is sized by.
    share: usize,
    /// Its flow limits across every worker (this partition's part of the topic's).
    pub(crate) flow: Flow,
    /// Its lane in the worker's slot pool (one per topic, shared by its partitions).
    lane: usize,
    /// How long a run takes here, a moving average, µs (`u64::MAX` until one ran).
    mean_run_us: AtomicU64,
    /// Outcomes on their way to the acker; taken away at shutdown once no handler runs.
    finishes: Mutex<Option<mpsc::UnboundedSender<Finished>>>,
    /// Run tasks whose runs ended, each waiting for the next job the claim loop starts, latest first
    /// (a task kept rather than one made per run: see [`ServedTopic::idle_run`]); `None` once the
    /// claim loop has ended, which lets them end.
    idle_runs: Mutex<Option<Vec<oneshot::Sender<Start>>>>,
}

/// What a run task is handed: a claimed job, the slot it runs on and the tracker guard held while it
/// runs.
pub(crate) type Start = (ClaimedJob, Slot, TrackGuard);

impl<S> ServedTopic<S> {
    /// A served topic whose outcomes go to `finishes`.
    pub(crate) fn new(
        name: &'static str,
        partition: Option<u16>,
        stored_as: String,
        handler: Arc<dyn ErasedHandler<S>>,
        lease_ms: u64,
        limit: Option<Arc<Semaphore>>,
        finishes: mpsc::UnboundedSender<Finished>,
    ) -> Self {
        ServedTopic {
            name,
            partition,
            stored_as,
            handler,
            middleware: None,
            lease_ms,
            limit,
            wake: Notify::new(),
            dead_wake: Notify::new(),
            ends_wake: Notify::new(),
            in_flight: InFlight::default(),
            saturated: AtomicBool::new(false),
            waiting: Mutex::default(),
            waiting_low: Notify::new(),
            metrics: TopicMetrics::new(name, partition),
            progress: Arc::default(),
            share: 1,
            flow: Flow::default(),
            lane: 0,
            mean_run_us: AtomicU64::new(u64::MAX),
            finishes: Mutex::new(Some(finishes)),
            idle_runs: Mutex::new(Some(Vec::new())),
        }
    }

    /// Sets how many slots this topic (partition) may count on (default 1).
    pub(crate) fn with_share(mut self, share: usize) -> Self {
        self.share = share.max(1);
        self
    }

    /// Sets the topic's lane in the worker's slot pool.
    pub(crate) fn with_lane(mut self, lane: usize) -> Self {
        self.lane = lane;
        self
    }

    /// Sets the middleware around the handler.
    pub(crate) fn with_middleware(mut self, chain: Option<Arc<[Arc<dyn Middleware>]>>) -> Self {
        self.middleware = chain;
        self
    }

    /// Sets the flow limits this topic (partition) is claimed under.
    pub(crate) fn with_flow(mut self, flow: Flow) -> Self {
        self.flow = flow;
        self
    }

    /// Records how long a run took (from its start to its outcome).
    pub(crate) fn ran_for(&self, took: Duration) {
        let took = took.as_micros().min(u64::MAX as u128 - 1) as u64;
        let mean = self.mean_run_us.load(Ordering::Relaxed);
        let mean = if mean == u64::MAX {
            took
        } else {
            mean - mean / 8 + took / 8
        };
        self.mean_run_us.store(mean, Ordering::Relaxed);
    }

    /// How many due jobs to claim ahead, to wait in the worker for a free slot: so many that a run
    /// ending finds the next one at hand (no round trip to the store between two runs), but no more
    /// than would wait [`AHEAD_WAIT`] on average at the current pace (share / mean run time), and at
    /// most twice the share. The runs of a handler that waits on a timer end together, on one tick of
    /// Tokio's timer, so each freed slot should find its next job at hand: at most half the share,
    /// `drain-io` ran at 80 % of its measured ceiling, at the whole share at 85 % (96 % once runs took
    /// the next job on their own slots). Twice the share keeps a whole share at hand after the claim
    /// loop's low-water mark (half of it), so each claim carries a share's worth of jobs rather than
    /// half: `drain-io` at 98 % of its ceiling (95.5 % before) with a fifth less Redis CPU per job,
    /// `drain` 1.18 times as fast (performance guide, 2026-11-29). So a job claimed ahead starts at
    /// most about [`AHEAD_WAIT`] later than if it had been left in the store for the next free slot
    /// (where, with every slot busy, it would have waited too), and none is claimed ahead before a
    /// run's time is known, or when runs are long.
    pub(crate) fn ahead(&self) -> usize {
        let mean = self.mean_run_us.load(Ordering::Relaxed).max(1);
        if mean == u64::MAX {
            return 0;
        }
        let pace = (self.share as u128 * AHEAD_WAIT.as_micros() / mean as u128) as usize;
        pace.min(2 * self.share)
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, VecDeque<ClaimedJob>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many jobs claimed ahead wait for a slot.
    pub(crate) fn waiting_len(&self) -> usize {
        self.lock_waiting().len()
    }

    /// The first job claimed ahead that may start, with how many are left after it: a job whose lease
    /// was found lost while it waited is passed over (and forgotten).
    pub(crate) fn pop_waiting(&self) -> Option<(ClaimedJob, usize)> {
        loop {
            let (job, left) = {
                let mut waiting = self.lock_waiting();
                let job = waiting.pop_front()?;
                (job, waiting.len())
            };
            if !self.in_flight.lost_while_waiting(&job.id, job.token) {
                return Some((job, left));
            }
            tracing::debug!(topic = self.name, partition = self.partition, job_id = %job.id, "lease lost while the job waited for a slot: not started");
        }
    }

    /// Jobs just claimed ahead, after those already waiting.
    pub(crate) fn push_waiting(&self, jobs: impl IntoIterator<Item = ClaimedJob>) {
        self.lock_waiting().extend(jobs);
    }

    /// Every job claimed ahead (at shutdown, to hand them back).
    pub(crate) fn take_waiting(&self) -> VecDeque<ClaimedJob> {
        std::mem::take(&mut *self.lock_waiting())
    }

    /// The next job claimed ahead, for the slot of a run of this topic that just ended, so that it
    /// starts without a task of its own, a slot given back and taken again, or a turn of the claim
    /// loop. `None` when the worker stops, when another topic or partition waits for a slot (the slot
    /// goes back to the pool, which shares slots as the worker's [`SlotSharing`] says), when this
    /// partition holds a permit of its topic's limit that another partition may wait for, or when no
    /// job waits. A job whose lease was found lost while it waited is passed over.
    ///
    /// [`SlotSharing`]: super::SlotSharing
    pub(crate) fn next_claimed(&self, global: &SlotPool, stopping: bool) -> Option<ClaimedJob> {
        if stopping || (self.limit.is_some() && self.partition.is_some()) {
            return None;
        }
        // The claim loop of this topic may wait for a slot too: a run that takes the next job does
        // what that slot would have.
        let own = usize::from(self.saturated.load(Ordering::Relaxed));
        if global.waiters() > own {
            return None;
        }
        let (job, left) = self.pop_waiting()?;
        if left <= self.ahead() / 2 {
            self.waiting_low.notify_one();
        }
        Some(job)
    }

    /// Waits, as a run task whose run ended (its slot and guard given back), for the next job the claim
    /// loop starts ([`ServedTopic::hand_to_idle_run`]); `None` once the claim loop has ended. With a
    /// quick handler a run ends whenever the jobs claimed ahead run out, and the next claim's jobs
    /// start on tasks already made instead of a task each (an allocation of the whole run's future,
    /// and its scheduling).
    pub(crate) async fn idle_run(&self) -> Option<Start> {
        let (tx, rx) = oneshot::channel();
        self.lock_idle_runs().as_mut()?.push(tx);
        rx.await.ok()
    }

    fn lock_idle_runs(&self) -> MutexGuard<'_, Option<Vec<oneshot::Sender<Start>>>> {
        self.idle_runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `start` to a run task waiting in [`ServedTopic::idle_run`]; gives it back when none
    /// waits.
    pub(crate) fn hand_to_idle_run(&self, mut start: Start) -> Result<(), Start> {
        loop {
            let tx = self.lock_idle_runs().as_mut().and_then(Vec::pop);
            match tx {
                Some(tx) => match tx.send(start) {
                    Ok(()) => return Ok(()),
                    // That task is gone (its runtime shutting down): the next one.
                    Err(back) => start = back,
                },
                None => return Err(start),
            }
        }
    }

    /// Lets the run tasks waiting in [`ServedTopic::idle_run`] end, and no other wait there: the
    /// claim loop has ended.
    pub(crate) fn end_idle_runs(&self) {
        self.lock_idle_runs().take();
    }

    /// Hands a job's outcome to the acker, with how it counts in the metrics and whether the job is
    /// in a batch (its end may be waited for).
    pub(crate) fn send_finish(&self, item: FinishItem, tally: Tally, in_batch: bool) {
        let unsent = match &*self.finishes.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(tx) => tx.send((item, tally, in_batch)).err().map(|e| e.0 .0),
            None => Some(item),
        };
        if let Some(item) = unsent {
            tracing::error!(topic = self.name, partition = self.partition, job_id = %item.id, "worker stopped before a result could be recorded; the job runs again after its lease");
        }
    }

    /// Closes the way to the acker (no handler runs any more), so that it ends once it has recorded
    /// what it holds.
    pub(crate) fn close_finishes(&self) {
        self.finishes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// Waits for a free slot (topic limit first, so a full topic does not hold global slots).
    pub(crate) async fn slot(&self, global: &Arc<SlotPool>) -> Slot {
        let topic = match &self.limit {
            Some(s) => Some(
                s.clone()
                    .acquire_owned()
                    .await
                    .expect("semaphore never closed"),
            ),
            None => None,
        };
        let global = global.acquire(self.lane).await;
        Slot {
            _global: global,
            _topic: topic,
        }
    }

    /// A free slot, if there is one now.
    pub(crate) fn try_slot(&self, global: &Arc<SlotPool>) -> Option<Slot> {
        let topic = match &self.limit {
            Some(s) => Some(s.clone().try_acquire_owned().ok()?),
            None => None,
        };
        let global = global.try_acquire()?;
        Some(Slot {
            _global: global,
            _topic: topic,
        })
    }
}

/// What a job claimed ahead may wait in the worker for a slot, on average (see [`ServedTopic::ahead`]).
pub(crate) const AHEAD_WAIT: Duration = Duration::from_millis(4);

/// A running job's claim on the global limit and its topic's limit.
#[derive(Debug)]
pub(crate) struct Slot {
    _global: Permit,
    _topic: Option<OwnedSemaphorePermit>,
}

/// Counts running job tasks, so that shutdown can wait for them.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    count: AtomicUsize,
    idle: Notify,
}

/// Held by a running job task.
#[derive(Debug)]
pub(crate) struct TrackGuard(Arc<Tracker>);

impl Tracker {
    pub(crate) fn enter(self: &Arc<Self>) -> TrackGuard {
        self.count.fetch_add(1, Ordering::SeqCst);
        TrackGuard(self.clone())
    }

    pub(crate) fn running(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Returns once no job task runs.
    pub(crate) async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for TrackGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::registry::Registered;
    use super::super::slots::SlotSharing;
    use super::*;
    use crate::handler::JobContext;
    use crate::job::Job;
    use futures_util::FutureExt;
    use std::task::Poll;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Ping;

    impl Job for Ping {
        const TOPIC: &'static str = "ping";
        type Output = ();
    }

    async fn ping(_: Ping, _: JobContext) -> Result<(), crate::JobError> {
        Ok(())
    }

    fn topic(partition: Option<u16>, limit: Option<usize>) -> ServedTopic<()> {
        let (tx, _rx) = mpsc::unbounded_channel();
        let handler: Arc<dyn ErasedHandler<()>> = Arc::new(Registered::new::<()>(ping));
        ServedTopic::new(
            "ping",
            partition,
            "ping".into(),
            handler,
            30_000,
            limit.map(|n| Arc::new(Semaphore::new(n))),
            tx,
        )
        .with_share(4)
    }

    fn claimed(id: &str) -> ClaimedJob {
        ClaimedJob {
            id: id.into(),
            token: 1,
            due_at_ms: 0,
            record: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_run_takes_the_next_job_claimed_ahead_only_while_no_other_topic_waits_for_a_slot() {
        let pool = SlotPool::new(1, SlotSharing::FirstCome, vec![1, 1]);
        let t = topic(None, None);
        t.push_waiting([claimed("a"), claimed("b"), claimed("c")]);
        let _held = pool.try_acquire().expect("the one slot");
        // Nobody waits for a slot: the run's slot takes the next job, in claim order.
        assert_eq!(t.next_claimed(&pool, false).map(|j| j.id), Some("a".into()));
        // The worker stops: the slot goes back, the job stays to be handed back.
        assert!(t.next_claimed(&pool, true).is_none());
        // This topic's own claim loop waits for a slot: the run takes the job it would have started.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut own = Box::pin(pool.acquire(0));
        assert!(own.poll_unpin(&mut cx).is_pending(), "in line");
        t.saturated.store(true, Ordering::Relaxed);
        assert_eq!(t.next_claimed(&pool, false).map(|j| j.id), Some("b".into()));
        // Another topic waits too: the slot goes back to the pool, which shares it.
        let mut other = Box::pin(pool.acquire(1));
        assert!(other.poll_unpin(&mut cx).is_pending(), "in line");
        assert!(t.next_claimed(&pool, false).is_none());
        assert_eq!(t.waiting_len(), 1, "the job stays for the next slot");
    }

    #[test]
    fn a_job_whose_lease_was_lost_while_it_waited_is_passed_over() {
        let pool = SlotPool::new(1, SlotSharing::FirstCome, vec![1]);
        let t = topic(None, None);
        t.push_waiting([claimed("a"), claimed("b")]);
        t.in_flight.waiting("a".into(), 1);
        assert!(t.in_flight.lease_lost("a", 1));
        assert_eq!(t.next_claimed(&pool, false).map(|j| j.id), Some("b".into()));
        assert!(t.next_claimed(&pool, false).is_none(), "none left");
    }

    #[test]
    fn a_partition_holding_its_topics_limit_gives_its_slot_back() {
        let pool = SlotPool::new(4, SlotSharing::FirstCome, vec![1]);
        let t = topic(Some(0), Some(2));
        t.push_waiting([claimed("a")]);
        assert!(t.next_claimed(&pool, false).is_none());
        assert_eq!(t.take_waiting().len(), 1);
        let t = topic(Some(0), None);
        t.push_waiting([claimed("a")]);
        assert!(t.next_claimed(&pool, false).is_some());
    }

    #[tokio::test]
    async fn a_started_job_goes_to_the_run_task_that_waited_last_or_back_when_none_waits() {
        let pool = Arc::new(SlotPool::new(2, SlotSharing::FirstCome, vec![1]));
        let tracker = Arc::new(Tracker::default());
        let t = Arc::new(topic(None, None));
        let start = |id: &str| {
            (
                claimed(id),
                t.try_slot(&pool).expect("a slot"),
                tracker.enter(),
            )
        };
        // No run task waits: the job comes back, to go on a task of its own.
        let (job, _, _) = t
            .hand_to_idle_run(start("a"))
            .expect_err("nobody to take it");
        assert_eq!(job.id, "a");
        // Two wait, the second one last: it gets the next job, the other one the one after.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut first = Box::pin(t.idle_run());
        assert!(first.poll_unpin(&mut cx).is_pending(), "waits");
        let mut second = Box::pin(t.idle_run());
        assert!(second.poll_unpin(&mut cx).is_pending(), "waits");
        assert!(t.hand_to_idle_run(start("b")).is_ok());
        let Poll::Ready(Some((job, _slot, _guard))) = second.poll_unpin(&mut cx) else {
            panic!("the last one to wait runs b");
        };
        assert_eq!((job.id.as_str(), tracker.running()), ("b", 1));
        assert!(first.poll_unpin(&mut cx).is_pending(), "still waits");
        // A waiter that is gone is passed over.
        let mut gone = Box::pin(t.idle_run());
        assert!(gone.poll_unpin(&mut cx).is_pending(), "waits");
        drop(gone);
        assert!(t.hand_to_idle_run(start("c")).is_ok());
        let Poll::Ready(Some((job, _, _))) = first.poll_unpin(&mut cx) else {
            panic!("the first one runs c");
        };
        assert_eq!(job.id, "c");
    }

    #[tokio::test]
    async fn run_tasks_waiting_for_jobs_end_with_the_claim_loop() {
        let t = topic(None, None);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut waiting = Box::pin(t.idle_run());
        assert!(waiting.poll_unpin(&mut cx).is_pending(), "waits");
        t.end_idle_runs();
        assert!(matches!(waiting.poll_unpin(&mut cx), Poll::Ready(None)));
        // No run task waits from now on.
        assert!(matches!(
            Box::pin(t.idle_run()).poll_unpin(&mut cx),
            Poll::Ready(None)
        ));
    }
}
