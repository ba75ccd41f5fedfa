//! "lease lost" is logged for runs that really lost their lease, never for jobs whose result was
//! recorded: the heartbeat does not renew a job whose handler has returned (its acknowledgement may
//! remove the lease at any moment), and a lease found lost for a job that is finishing or gone is no
//! warning and stops nothing.
//!
//! Each test runs its worker on the test's current-thread runtime, where the captured log sees it.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use postpone::__private::failpoint::{self, Point};
use postpone::store::{ClaimRequest, FinishOutcome};
use postpone::{Client, Job, JobContext, JobError, JobHandler, StopReason, Worker};
use serde::{Deserialize, Serialize};
use support::events::Events;
use support::redis_server::RedisServer;
use support::wait::eventually;
use tokio::sync::mpsc;
use tracing::Level;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "quick")]
struct Quick {
    n: u32,
}

/// Ids of `quick` jobs whose result the store recorded (the failpoint hook is process-wide).
static RECORDED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn record_applied(point: &Point<'_>) {
    if let Point::Finished {
        topic: "quick",
        items,
        outcomes,
    } = point
    {
        let mut recorded = RECORDED.lock().unwrap();
        let recorded = recorded.get_or_insert_with(HashSet::new);
        for (item, outcome) in items.iter().zip(outcomes.iter()) {
            if *outcome == FinishOutcome::Applied {
                recorded.insert(item.id.clone());
            }
        }
    }
}

#[tokio::test]
async fn no_lease_lost_warning_for_jobs_whose_result_was_recorded() {
    const JOBS: u32 = 2000;
    failpoint::set_hook(record_applied);
    let (log, _guard) = Events::capture(Level::WARN);
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let runs: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let counted = runs.clone();
    let handler = move |_job: Quick, ctx: JobContext| {
        *counted
            .lock()
            .unwrap()
            .entry(ctx.id().to_owned())
            .or_default() += 1;
        async move {
            tokio::task::yield_now().await;
            Ok::<_, JobError>(())
        }
    };
    client
        .enqueue_many((0..JOBS).map(|n| Quick { n }))
        .await
        .unwrap();
    // A short lease: a heartbeat every 10 ms, while jobs finish all the time.
    let worker = Worker::builder(&client)
        .handle(handler)
        .concurrency(32)
        .lease(Duration::from_millis(30))
        .stall_limit(1000)
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let topic = client.topic::<Quick>();
    eventually("every job to be processed", || async {
        (topic.counts().await.unwrap().processed == u64::from(JOBS)).then_some(())
    })
    .await;
    stop.shutdown();
    running.await.unwrap().unwrap();

    let recorded = RECORDED.lock().unwrap().clone().unwrap_or_default();
    let runs = runs.lock().unwrap();
    // A job that ran once and whose result was recorded never lost its lease.
    let ran_once_recorded = |id: &str| recorded.contains(id) && runs.get(id) == Some(&1);
    let lost = log.containing("lease lost");
    let false_alarms: Vec<_> = lost
        .iter()
        .filter(|e| e.field("job_id").is_some_and(ran_once_recorded))
        .collect();
    assert!(
        recorded.len() * 2 > JOBS as usize,
        "most jobs ran once, recorded: {}",
        recorded.len()
    );
    assert!(
        false_alarms.is_empty(),
        "{} of {} `lease lost` warnings were for jobs that ran once and whose result was recorded: {:?}",
        false_alarms.len(),
        lost.len(),
        false_alarms.iter().take(5).collect::<Vec<_>>()
    );
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "held")]
struct Held;

/// Blocks its worker's thread until another store client has taken its job, then waits to be stopped.
struct Blocking {
    started: std_mpsc::Sender<()>,
    taken: Mutex<std_mpsc::Receiver<()>>,
    stopped: mpsc::UnboundedSender<StopReason>,
}

#[async_trait::async_trait]
impl JobHandler for Blocking {
    type Job = Held;

    async fn handle(&self, _job: Held, ctx: JobContext, _state: &()) -> Result<(), JobError> {
        self.started.send(()).unwrap();
        // The worker's runtime stands still (a paused process): no heartbeat renews the lease.
        self.taken.lock().unwrap().recv().unwrap();
        let reason = tokio::time::timeout(Duration::from_secs(30), ctx.stopped())
            .await
            .expect("stopped once the heartbeat finds the lease lost");
        self.stopped.send(reason).unwrap();
        Ok(())
    }
}

#[tokio::test]
async fn a_running_handler_whose_lease_is_lost_is_warned_about_and_stopped() {
    let (log, _guard) = Events::capture(Level::WARN);
    let client = Client::memory();
    client.enqueue(Held).id("held:1").await.unwrap();
    let (started_tx, started) = std_mpsc::channel();
    let (taken, taken_rx) = std_mpsc::channel();
    let (stopped_tx, mut stopped) = mpsc::unbounded_channel();
    // Another store client, on a thread of its own: once the lease has expired, it sweeps the job and
    // claims it.
    let other = client.clone();
    let thief = std::thread::spawn(move || {
        started.recv().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(eventually(
            "the expired lease to be swept and claimed",
            || {
                let store = other.store().clone();
                async move {
                    let batch = store
                        .claim(Held::TOPIC, ClaimRequest::new(1, 60_000, 100, 3))
                        .await
                        .unwrap();
                    (!batch.jobs.is_empty()).then_some(())
                }
            },
        ));
        taken.send(()).unwrap();
    });
    let worker = Worker::builder(&client)
        .handler(Blocking {
            started: started_tx,
            taken: Mutex::new(taken_rx),
            stopped: stopped_tx,
        })
        .lease(Duration::from_millis(100))
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    assert_eq!(stopped.recv().await, Some(StopReason::LeaseLost));
    thief.join().unwrap();
    stop.shutdown();
    running.await.unwrap().unwrap();

    let lost = log.containing("lease lost");
    assert_eq!(lost.len(), 1, "{:?}", log.all());
    assert_eq!(lost[0].level, Level::WARN);
    assert_eq!(lost[0].field("topic"), Some("held"));
    assert_eq!(lost[0].field("job_id"), Some("held:1"));
}
