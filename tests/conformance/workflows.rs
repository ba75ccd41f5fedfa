//! Jobs that wait for jobs, through the client and a worker: charge, then (only once it succeeded) the
//! receipt; a charge that dies dead-letters its receipt (the hook hears of it, the reason names the
//! charge); fan-in from parents of three types; a parent that is not known refuses the enqueue; a
//! waiting job can be cancelled; the policy can run the job anyway.

use std::time::Instant;

use postpone::{
    EnqueueStatus, Error, Job, JobContext, JobError, JobState, OnParentFailure, Worker,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use super::*;

/// A parent: `fail` fails for good.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "workflow.charge")]
pub(crate) struct Charge {
    pub order: u64,
    pub fail: bool,
}

/// Another parent type, partitioned.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "workflow.reserve", partitions = 3)]
pub(crate) struct Reserve {
    pub order: u64,
}

/// The child.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "workflow.receipt")]
pub(crate) struct Receipt {
    pub order: u64,
}

/// What ran, and when (this process's clock).
#[derive(Debug)]
pub(crate) enum Ran {
    Charge(u64, Instant),
    Reserve(u64, Instant),
    Receipt(u64, Instant),
}

fn worker(
    b: &Backend,
    tx: UnboundedSender<Ran>,
    dead: UnboundedSender<postpone::DeadLetter>,
) -> Running {
    let charges = tx.clone();
    let on_charge = move |job: Charge, _ctx: JobContext| {
        let tx = charges.clone();
        async move {
            if job.fail {
                return Err(JobError::fail("card declined"));
            }
            let _ = tx.send(Ran::Charge(job.order, Instant::now()));
            Ok(())
        }
    };
    let reserves = tx.clone();
    let on_reserve = move |job: Reserve, _ctx: JobContext| {
        let tx = reserves.clone();
        async move {
            let _ = tx.send(Ran::Reserve(job.order, Instant::now()));
            Ok(())
        }
    };
    let on_receipt = move |job: Receipt, _ctx: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(Ran::Receipt(job.order, Instant::now()));
            Ok(())
        }
    };
    spawn(
        Worker::builder(&b.client)
            .handle(on_charge)
            .handle(on_reserve)
            .handle(on_receipt)
            .dead_letter_sink(channel_sink(dead))
            .build()
            .unwrap(),
    )
}

fn charge(order: u64, fail: bool) -> Charge {
    Charge { order, fail }
}

pub(crate) async fn workflow_receipt_runs_only_after_its_charge_succeeded(b: Backend) {
    let client = &b.client;
    // Enqueued before any worker runs: the receipt waits, the charge is due.
    client
        .enqueue(charge(1, false))
        .id("charge:1")
        .await
        .unwrap();
    let receipt = client
        .enqueue(Receipt { order: 1 })
        .id("receipt:1")
        .after_job::<Charge>("charge:1")
        .await
        .unwrap();
    assert_eq!(
        (receipt.status, receipt.due_at),
        (EnqueueStatus::Waiting, None)
    );
    let topic = client.topic::<Receipt>();
    let info = topic.job("receipt:1").await.unwrap().unwrap();
    assert_eq!(
        info.state,
        JobState::Waiting {
            waiting_for: vec![("workflow.charge".into(), "charge:1".into())]
        }
    );
    let counts = topic.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.scheduled, counts.ready), (1, 0, 0));
    // Its id is held; it has no time to move.
    let again = client
        .enqueue(Receipt { order: 1 })
        .id("receipt:1")
        .replace()
        .await
        .unwrap();
    assert_eq!(again.status, EnqueueStatus::AlreadyWaiting);
    let moved = topic
        .reschedule("receipt:1", Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(moved, Error::JobWaiting { .. }), "{moved}");

    let (tx, mut rx) = events();
    let (dead_tx, _dead_rx) = events();
    let running = worker(&b, tx, dead_tx);
    let charged = match next(&mut rx).await {
        Ran::Charge(1, at) => at,
        other => panic!("the charge runs first, not {other:?}"),
    };
    match next(&mut rx).await {
        Ran::Receipt(1, at) => assert!(at >= charged),
        other => panic!("then the receipt, not {other:?}"),
    }
    running.stop().await;
}

pub(crate) async fn workflow_dead_charge_dead_letters_its_receipt_through_the_hook(b: Backend) {
    let client = &b.client;
    client
        .enqueue(charge(2, true))
        .id("charge:2")
        .await
        .unwrap();
    client
        .enqueue(Receipt { order: 2 })
        .id("receipt:2")
        .after_job::<Charge>("charge:2")
        .await
        .unwrap();
    let (tx, mut rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let running = worker(&b, tx, dead_tx);
    let mut deaths = [next(&mut dead_rx).await, next(&mut dead_rx).await];
    deaths.sort_by(|a, b| a.topic.cmp(&b.topic));
    assert_eq!(
        (deaths[0].topic.as_str(), deaths[0].id.as_str()),
        ("workflow.charge", "charge:2")
    );
    assert_eq!(
        (deaths[1].topic.as_str(), deaths[1].id.as_str()),
        ("workflow.receipt", "receipt:2")
    );
    assert!(
        deaths[1]
            .reason
            .starts_with("parent workflow.charge/charge:2 died: "),
        "{}",
        deaths[1].reason
    );
    assert!(
        deaths[1].reason.contains("card declined"),
        "{}",
        deaths[1].reason
    );
    // The receipt never ran, and is dead by its lookup too.
    none_within(&mut rx, Duration::from_millis(200)).await;
    let info = client
        .topic::<Receipt>()
        .job("receipt:2")
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(info.state, JobState::Dead { .. }),
        "{:?}",
        info.state
    );
    running.stop().await;
}

pub(crate) async fn workflow_fan_in_waits_for_every_parent_of_every_type(b: Backend) {
    let client = &b.client;
    let (tx, mut rx) = events();
    let (dead_tx, _dead_rx) = events();
    let running = worker(&b, tx, dead_tx);
    // Parents due a little later, so that all are live when the child is enqueued.
    let later = Duration::from_millis(300);
    client
        .enqueue(charge(3, false))
        .id("charge:3")
        .after(later)
        .await
        .unwrap();
    for part in ["a", "b"] {
        client
            .enqueue(Reserve { order: 3 })
            .id(format!("reserve:3{part}"))
            .after(later)
            .await
            .unwrap();
    }
    let receipt = client
        .enqueue(Receipt { order: 3 })
        .id("receipt:3")
        .after_job::<Charge>("charge:3")
        .after_job::<Reserve>("reserve:3a")
        .after_job::<Reserve>("reserve:3b")
        .after_job::<Charge>("charge:3")
        .await
        .unwrap();
    assert_eq!(receipt.status, EnqueueStatus::Waiting);
    let mut parents_done = Vec::new();
    loop {
        match next(&mut rx).await {
            Ran::Charge(3, at) | Ran::Reserve(3, at) => parents_done.push(at),
            Ran::Receipt(3, at) => {
                assert_eq!(parents_done.len(), 3, "the receipt ran before its parents");
                assert!(parents_done.iter().all(|p| *p <= at));
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    running.stop().await;
}

pub(crate) async fn workflow_unknown_parent_refuses_the_enqueue(b: Backend) {
    let client = &b.client;
    let e = client
        .enqueue(Receipt { order: 4 })
        .id("receipt:4")
        .after_job::<Charge>("charge:nope")
        .await
        .unwrap_err();
    match &e {
        Error::ParentNotFound { topic, id } => {
            assert_eq!(
                (topic.as_str(), id.as_str()),
                ("workflow.charge", "charge:nope")
            )
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("keep"), "{e}");
    assert!(client
        .topic::<Receipt>()
        .job("receipt:4")
        .await
        .unwrap()
        .is_none());
    // Waiting for itself, or with a bad id, is refused before anything is sent.
    let own = client
        .enqueue(Receipt { order: 4 })
        .id("receipt:4")
        .after_job::<Receipt>("receipt:4")
        .await
        .unwrap_err();
    assert!(own.to_string().contains("itself"), "{own}");
    let bad = client
        .enqueue(Receipt { order: 4 })
        .after_job::<Charge>("")
        .await
        .unwrap_err();
    assert!(matches!(bad, Error::InvalidId { .. }), "{bad}");
}

pub(crate) async fn workflow_waiting_job_can_be_cancelled_and_the_policy_can_run_it(b: Backend) {
    let client = &b.client;
    client
        .enqueue(charge(5, true))
        .id("charge:5")
        .await
        .unwrap();
    client
        .enqueue(Receipt { order: 50 })
        .id("receipt:50")
        .after_job::<Charge>("charge:5")
        .await
        .unwrap();
    client
        .enqueue(Receipt { order: 51 })
        .id("receipt:51")
        .after_job::<Charge>("charge:5")
        .on_parent_failure(OnParentFailure::Run)
        .await
        .unwrap();
    client.cancel::<Receipt>("receipt:50").await.unwrap();
    assert!(client
        .topic::<Receipt>()
        .job("receipt:50")
        .await
        .unwrap()
        .is_none());

    let (tx, mut rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let running = worker(&b, tx, dead_tx);
    // The charge dies; receipt:51 runs all the same; receipt:50 was cancelled: nothing of it.
    let dead = next(&mut dead_rx).await;
    assert_eq!(dead.id, "charge:5");
    match next(&mut rx).await {
        Ran::Receipt(51, _) => {}
        other => panic!("receipt 51 runs, not {other:?}"),
    }
    none_within(&mut rx, Duration::from_millis(200)).await;
    none_within(&mut dead_rx, Duration::from_millis(10)).await;
    running.stop().await;
}
