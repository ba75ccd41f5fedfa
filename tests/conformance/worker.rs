//! The worker: leases, stale tokens, stalls, shutdown, limits, several topics and workers.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postpone::store::{ClaimRequest, Finish, FinishItem, FinishOutcome};
use postpone::{EnqueueItem, Job, JobContext, JobError, JobHandler, JobState, Worker};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "work")]
pub(crate) struct Work {
    pub n: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "mail")]
pub(crate) struct Mail {
    pub n: u64,
}

fn reporting(
    tx: mpsc::UnboundedSender<(u64, u32)>,
) -> impl Fn(
    Work,
    JobContext,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), JobError>> + Send>>
       + Clone
       + Send
       + Sync
       + 'static {
    move |job: Work, ctx: JobContext| {
        let tx = tx.clone();
        Box::pin(async move {
            let _ = tx.send((job.n, ctx.attempt()));
            Ok(())
        })
    }
}

/// Claims directly through the store, as a worker that then crashes would.
async fn claim_and_crash(b: &Backend, lease_ms: u64) -> u64 {
    let batch = b
        .client
        .store()
        .claim(Work::TOPIC, ClaimRequest::new(1, lease_ms, 100, 3))
        .await
        .unwrap();
    assert_eq!(batch.jobs.len(), 1);
    batch.jobs[0].token
}

pub(crate) async fn expired_lease_runs_again_without_using_an_attempt(b: Backend) {
    b.client.enqueue(Work { n: 1 }).id("w").await.unwrap();
    claim_and_crash(&b, 100).await;
    let info = b.client.topic::<Work>().job("w").await.unwrap().unwrap();
    assert!(matches!(info.state, JobState::Running { .. }));
    let (tx, mut rx) = events();
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(reporting(tx))
            .build()
            .unwrap(),
    );
    assert_eq!(
        next(&mut rx).await,
        (1, 1),
        "run again after the lease, still attempt 1"
    );
    let topic = b.client.topic::<Work>();
    let c = eventually("processed", || async {
        let c = topic.counts().await.unwrap();
        (c.processed == 1).then_some(c)
    })
    .await;
    assert_eq!((c.stalled, c.retried), (1, 0));
    worker.stop().await;
}

pub(crate) async fn stale_token_ack_changes_nothing(b: Backend) {
    b.client.enqueue(Work { n: 1 }).id("w").await.unwrap();
    let stale = claim_and_crash(&b, 50).await;
    let (tx, mut rx) = events();
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let handler = move |job: Work, ctx: JobContext| {
        let tx = tx.clone();
        let mut release = release_rx.clone();
        async move {
            let _ = tx.send((job.n, ctx.attempt()));
            let _ = release.wait_for(|r| *r).await;
            Ok::<(), JobError>(())
        }
    };
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    assert_eq!(next(&mut rx).await, (1, 1));
    // The crashed claim comes back to life and acknowledges: it must change nothing.
    let late = b
        .client
        .store()
        .finish(
            Work::TOPIC,
            vec![FinishItem::new("w".into(), stale, Finish::Done)],
        )
        .await
        .unwrap();
    assert_eq!(late, vec![FinishOutcome::Stale]);
    let info = b
        .client
        .topic::<Work>()
        .job("w")
        .await
        .unwrap()
        .expect("still there, running on the live worker");
    assert!(matches!(info.state, JobState::Running { .. }));
    assert_eq!(
        b.client.topic::<Work>().counts().await.unwrap().processed,
        0
    );
    release_tx.send_replace(true);
    let topic = b.client.topic::<Work>();
    eventually("processed once", || async {
        (topic.counts().await.unwrap().processed == 1).then_some(())
    })
    .await;
    worker.stop().await;
}

pub(crate) async fn stalled_job_is_dead_lettered_after_the_bound(b: Backend) {
    b.client.enqueue(Work { n: 1 }).id("poison").await.unwrap();
    b.client
        .enqueue(Work { n: 2 })
        .id("fine")
        .after(Duration::from_millis(50))
        .await
        .unwrap();
    // Two crashed claims in a row: with a stall limit of 1 the second expiry is one too many.
    claim_and_crash(&b, 30).await;
    eventually("the first lease to expire and be swept", || async {
        let batch = b
            .client
            .store()
            .claim(Work::TOPIC, ClaimRequest::new(1, 30, 100, 1))
            .await
            .unwrap();
        batch.jobs.iter().any(|j| j.id == "poison").then_some(())
    })
    .await;
    let (tx, mut rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(reporting(tx))
            .stall_limit(1)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    let dead = next(&mut dead_rx).await;
    assert_eq!(dead.id, "poison");
    assert!(dead.reason.contains("stalled"), "{}", dead.reason);
    assert_eq!(next(&mut rx).await, (2, 1), "other jobs continue");
    none_within(&mut rx, Duration::from_millis(200)).await;
    worker.stop().await;
}

pub(crate) async fn shutdown_waits_for_running_handlers(b: Backend) {
    let (tx, mut rx) = events();
    let handler = move |job: Work, _: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(("started", job.n));
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _ = tx.send(("finished", job.n));
            Ok::<(), JobError>(())
        }
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .shutdown_grace(Duration::from_secs(10))
            .build()
            .unwrap(),
    );
    b.client.enqueue(Work { n: 1 }).id("w").await.unwrap();
    assert_eq!(next(&mut rx).await, ("started", 1));
    worker.stop().await;
    assert_eq!(
        next(&mut rx).await,
        ("finished", 1),
        "the handler finished within the grace period"
    );
    let c = b.client.topic::<Work>().counts().await.unwrap();
    assert_eq!((c.processed, c.ready, c.active), (1, 0, 0));
}

pub(crate) async fn shutdown_hands_back_unfinished_jobs(b: Backend) {
    let (tx, mut rx) = events();
    let handler = move |job: Work, ctx: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send((job.n, ctx.attempt()));
            std::future::pending::<()>().await;
            Ok::<(), JobError>(())
        }
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .shutdown_grace(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    b.client.enqueue(Work { n: 1 }).id("w").await.unwrap();
    assert_eq!(next(&mut rx).await, (1, 1));
    worker.stop().await;
    let info = b
        .client
        .topic::<Work>()
        .job("w")
        .await
        .unwrap()
        .expect("handed back, not lost");
    assert!(
        matches!(info.state, JobState::Scheduled { .. }),
        "{:?}",
        info.state
    );
    assert_eq!(info.attempt, 1, "no attempt used");
    assert!(info.errors.is_empty());
    // A new worker picks it up.
    let (tx, mut rx) = events();
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(reporting(tx))
            .build()
            .unwrap(),
    );
    assert_eq!(next(&mut rx).await, (1, 1));
    worker.stop().await;
}

pub(crate) async fn concurrency_limits_hold(b: Backend) {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = events();
    let handler = {
        let (running, peak) = (running.clone(), peak.clone());
        move |_: Work, _: JobContext| {
            let (running, peak, tx) = (running.clone(), peak.clone(), tx.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(());
                Ok::<(), JobError>(())
            }
        }
    };
    let mail_peak = Arc::new(AtomicUsize::new(0));
    let mail_running = Arc::new(AtomicUsize::new(0));
    let mail = {
        let (running, peak) = (mail_running.clone(), mail_peak.clone());
        move |_: Mail, _: JobContext| {
            let (running, peak) = (running.clone(), peak.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), JobError>(())
            }
        }
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .handle(mail)
            .concurrency(5)
            .topic_concurrency::<Mail>(2)
            .build()
            .unwrap(),
    );
    b.client
        .enqueue_many((0..40).map(|n| Work { n }))
        .await
        .unwrap();
    b.client
        .enqueue_many((0..20).map(|n| Mail { n }))
        .await
        .unwrap();
    for _ in 0..40 {
        next(&mut rx).await;
    }
    let topic = b.client.topic::<Mail>();
    eventually("mail drained", || async {
        (topic.counts().await.unwrap().processed == 20).then_some(())
    })
    .await;
    assert!(
        peak.load(Ordering::SeqCst) <= 5,
        "global limit 5, saw {}",
        peak.load(Ordering::SeqCst)
    );
    assert!(
        mail_peak.load(Ordering::SeqCst) <= 2,
        "topic limit 2, saw {}",
        mail_peak.load(Ordering::SeqCst)
    );
    assert!(peak.load(Ordering::SeqCst) >= 2, "jobs ran concurrently");
    worker.stop().await;
}

pub(crate) async fn one_worker_serves_many_topics(b: Backend) {
    let (tx, mut rx) = events();
    let work_tx = tx.clone();
    let work = move |job: Work, _: JobContext| {
        let tx = work_tx.clone();
        async move {
            let _ = tx.send(("work", job.n));
            Ok::<(), JobError>(())
        }
    };
    let mail = move |job: Mail, _: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(("mail", job.n));
            Ok::<(), JobError>(())
        }
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(work)
            .handle(mail)
            .build()
            .unwrap(),
    );
    b.client
        .enqueue(Mail { n: 1 })
        .after(Duration::from_millis(80))
        .await
        .unwrap();
    b.client.enqueue(Work { n: 2 }).await.unwrap();
    let got: HashSet<_> = [next(&mut rx).await, next(&mut rx).await]
        .into_iter()
        .collect();
    assert_eq!(got, HashSet::from([("work", 2), ("mail", 1)]));
    worker.stop().await;
}

#[derive(Clone)]
struct AppState {
    tx: mpsc::UnboundedSender<String>,
    prefix: &'static str,
}

struct MailHandler;

#[postpone::async_trait]
impl JobHandler<AppState> for MailHandler {
    type Job = Mail;
    async fn handle(&self, job: Mail, _ctx: JobContext, state: &AppState) -> Result<(), JobError> {
        let _ = state.tx.send(format!("{} trait {}", state.prefix, job.n));
        Ok(())
    }
}

pub(crate) async fn state_and_trait_handlers(b: Backend) {
    let (tx, mut rx) = events();
    let state = AppState { tx, prefix: "app" };
    async fn with_state(job: Work, _ctx: JobContext, state: AppState) -> Result<(), JobError> {
        let _ = state.tx.send(format!("{} fn {}", state.prefix, job.n));
        Ok(())
    }
    let worker = spawn(
        Worker::with_state(&b.client, state)
            .handle(with_state)
            .handler(MailHandler)
            .build()
            .unwrap(),
    );
    b.client.enqueue(Work { n: 1 }).await.unwrap();
    b.client.enqueue(Mail { n: 2 }).await.unwrap();
    let got: HashSet<_> = [next(&mut rx).await, next(&mut rx).await]
        .into_iter()
        .collect();
    assert_eq!(
        got,
        HashSet::from(["app fn 1".to_string(), "app trait 2".to_string()])
    );
    worker.stop().await;
}

/// A worker keeps the tasks its runs ended on, waiting for the jobs it claims next (rather than a task
/// made per run): they take those jobs, and none of them outlives the worker, nor the state they hold.
pub(crate) async fn a_stopped_worker_leaves_no_run_task_behind(b: Backend) {
    let (tx, mut rx) = events();
    let state = Arc::new(tx);
    async fn run(
        job: Work,
        _: JobContext,
        tx: Arc<mpsc::UnboundedSender<u64>>,
    ) -> Result<(), JobError> {
        let _ = tx.send(job.n);
        Ok(())
    }
    let worker = spawn(
        Worker::with_state(&b.client, state.clone())
            .handle(run)
            .concurrency(4)
            .build()
            .unwrap(),
    );
    // Waves of jobs, each run to the end before the next is enqueued: every run ends between them.
    for wave in 0..3u64 {
        let jobs: Vec<_> = (0..8)
            .map(|k| EnqueueItem::new(Work { n: wave * 8 + k }))
            .collect();
        b.client.enqueue_many(jobs).await.unwrap();
        let mut got: Vec<u64> = Vec::new();
        for _ in 0..8 {
            got.push(next(&mut rx).await);
        }
        got.sort_unstable();
        assert_eq!(
            got,
            (wave * 8..wave * 8 + 8).collect::<Vec<_>>(),
            "wave {wave}"
        );
    }
    worker.stop().await;
    eventually("the worker's run tasks to end", || async {
        (Arc::strong_count(&state) == 1).then_some(())
    })
    .await;
}

pub(crate) async fn two_workers_never_run_a_job_twice(b: Backend) {
    let (tx, mut rx) = events();
    let w1 = spawn(
        Worker::builder(&b.client)
            .handle(reporting(tx.clone()))
            .concurrency(8)
            .build()
            .unwrap(),
    );
    let w2 = spawn(
        Worker::builder(&b.client)
            .handle(reporting(tx))
            .concurrency(8)
            .build()
            .unwrap(),
    );
    let n = 500;
    b.client
        .enqueue_many((0..n).map(|n| Work { n }))
        .await
        .unwrap();
    let mut seen = HashSet::new();
    for _ in 0..n {
        let (job, _) = next(&mut rx).await;
        assert!(seen.insert(job), "job {job} ran twice");
    }
    none_within(&mut rx, Duration::from_millis(200)).await;
    w1.stop().await;
    w2.stop().await;
}
