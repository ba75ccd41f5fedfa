//! Batches through the client and a worker: members of several types end by success, death or after
//! retries, and each callback is enqueued exactly once (death at the first death, completion with the
//! counts once the batch is closed and every member ended, success only when all succeeded); an open
//! batch takes members until it is closed; every member and callback sees its batch's id.

use std::time::Duration;

use postpone::{BatchStatus, CallbackKind, EnqueueItem, Error, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use super::*;

/// A member. `fail`: fails for good; `flaky`: fails its first attempt, then succeeds.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "batch.invoice_email", retry = ["0", "0", "5ms", "5ms"])]
pub(crate) struct InvoiceEmail {
    pub customer: u64,
    pub how: String,
}

/// A member of another topic, partitioned.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "batch.receipt", partitions = 3)]
pub(crate) struct Receipt {
    pub customer: u64,
}

/// A callback: says which kind it was given as.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "batch.callback")]
pub(crate) struct RunEnded {
    pub kind: String,
}

/// What the handlers report.
#[derive(Debug)]
pub(crate) enum Seen {
    /// A member ran: its batch id, as its handler read it.
    Member(Option<String>),
    /// A callback ran: its kind, and its batch's status as its handler read it.
    Callback(String, BatchStatus),
}

fn email(customer: u64, how: &str) -> InvoiceEmail {
    InvoiceEmail {
        customer,
        how: how.into(),
    }
}

fn callback(kind: &str) -> RunEnded {
    RunEnded { kind: kind.into() }
}

/// A worker for the members and the callbacks, reporting on `tx`.
fn billing_worker(b: &Backend, tx: UnboundedSender<Seen>) -> Running {
    billing_worker_polling(b, tx, None)
}

/// The same, polling every `poll` when given.
fn billing_worker_polling(
    b: &Backend,
    tx: UnboundedSender<Seen>,
    poll: Option<Duration>,
) -> Running {
    let members = tx.clone();
    let on_email = move |job: InvoiceEmail, ctx: JobContext| {
        let tx = members.clone();
        async move {
            if job.how == "fail" {
                return Err(JobError::fail(format!(
                    "customer {} has no address",
                    job.customer
                )));
            }
            if job.how == "flaky" && ctx.attempt() == 1 {
                return Err(JobError::retry("the mail server said try again"));
            }
            let _ = tx.send(Seen::Member(ctx.batch_id().map(str::to_owned)));
            Ok(())
        }
    };
    let members = tx.clone();
    let on_receipt = move |_: Receipt, ctx: JobContext| {
        let tx = members.clone();
        async move {
            let _ = tx.send(Seen::Member(ctx.batch_id().map(str::to_owned)));
            Ok(())
        }
    };
    let client = b.client.clone();
    let on_callback = move |job: RunEnded, ctx: JobContext| {
        let (tx, client) = (tx.clone(), client.clone());
        async move {
            let batch = ctx.batch_id().expect("a callback carries its batch's id");
            let status = client.batch_status(batch).await?;
            let _ = tx.send(Seen::Callback(job.kind, status));
            Ok(())
        }
    };
    let worker = Worker::builder(&b.client)
        .handle(on_email)
        .handle(on_receipt)
        .handle(on_callback)
        .concurrency(8);
    let worker = match poll {
        Some(poll) => worker.poll_interval(poll),
        None => worker,
    };
    spawn(worker.build().unwrap())
}

/// Waits for `n` callbacks, ignoring members; returns them by kind.
async fn callbacks(rx: &mut mpsc::UnboundedReceiver<Seen>, n: usize) -> Vec<(String, BatchStatus)> {
    let mut got = Vec::new();
    while got.len() < n {
        if let Seen::Callback(kind, status) = next(rx).await {
            got.push((kind, status));
        }
    }
    got.sort_by(|a, b| a.0.cmp(&b.0));
    got
}

/// Asserts that no callback runs within a while (members may still report).
async fn no_more_callbacks(rx: &mut mpsc::UnboundedReceiver<Seen>) {
    let quiet = tokio::time::sleep(Duration::from_millis(500));
    tokio::pin!(quiet);
    loop {
        tokio::select! {
            _ = &mut quiet => return,
            seen = rx.recv() => {
                if let Some(Seen::Callback(kind, status)) = seen {
                    panic!("unexpected callback {kind}: {status:?}");
                }
            }
        }
    }
}

pub(crate) async fn batch_billing_run_with_two_deaths_fires_death_once_and_complete_with_counts(
    b: Backend,
) {
    let (tx, mut rx) = events();
    let running = billing_worker(&b, tx);
    let emails = (1..=20).map(|n| match n {
        7 | 14 => email(n, "fail"),
        n if n % 3 == 0 => email(n, "flaky"),
        n => email(n, "ok"),
    });
    let batch = b
        .client
        .batch()
        .id("billing:2026-11")
        .description("November billing run")
        .on_success(callback("success"))
        .on_complete(callback("complete"))
        .on_death(callback("death"))
        .add_all(emails)
        .enqueue()
        .await
        .unwrap();
    assert_eq!(batch.id(), "billing:2026-11");

    let got = callbacks(&mut rx, 2).await;
    let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["complete", "death"]);
    let complete = &got[0].1;
    assert_eq!(
        (
            complete.total,
            complete.succeeded,
            complete.dead,
            complete.cancelled
        ),
        (20, 18, 2, 0),
        "{complete:?}"
    );
    assert_eq!(complete.pending(), 0);
    assert!(complete.closed && complete.is_complete(), "{complete:?}");
    assert_eq!(complete.description, "November billing run");
    no_more_callbacks(&mut rx).await;

    let status = batch.status().await.unwrap();
    assert_eq!(status.fired(CallbackKind::Success), Some(false));
    assert_eq!(status.fired(CallbackKind::Complete), Some(true));
    assert_eq!(status.fired(CallbackKind::Death), Some(true));
    // The members, in the order they were added, each with how it ended.
    let members = batch.members(0, 100).await.unwrap();
    assert_eq!(members.len(), 20);
    let dead: Vec<usize> = (0..20)
        .filter(|&i| members[i].state == postpone::MemberState::Dead)
        .collect();
    assert_eq!(dead, [6, 13]);
    assert!(members.iter().all(|m| m.topic == "batch.invoice_email"));
    // The death callback ran once, and so did the completion: counted by the topic.
    let topic = b.client.topic::<RunEnded>();
    eventually("the two callbacks to be recorded", || async {
        let counts = topic.counts().await.unwrap();
        (counts.processed >= 2).then_some(())
    })
    .await;
    assert_eq!(topic.counts().await.unwrap().processed, 2);
    running.stop().await;
}

pub(crate) async fn batch_all_succeed_fires_success_and_complete_once_each(b: Backend) {
    let (tx, mut rx) = events();
    let running = billing_worker(&b, tx);
    b.client
        .batch()
        .id("receipts:1")
        .on_success(callback("success"))
        .on_complete(callback("complete"))
        .on_death(callback("death"))
        .add_all((1..=10).map(|n| email(n, if n % 2 == 0 { "flaky" } else { "ok" })))
        .add_all((1..=10).map(|customer| Receipt { customer }))
        .enqueue()
        .await
        .unwrap();
    let got = callbacks(&mut rx, 2).await;
    let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["complete", "success"]);
    for (_, status) in &got {
        assert_eq!((status.total, status.succeeded, status.dead), (20, 20, 0));
    }
    no_more_callbacks(&mut rx).await;
    let status = b.client.batch_status("receipts:1").await.unwrap();
    assert_eq!(status.fired(CallbackKind::Death), Some(false));
    let listed = b.client.batches(0, 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, "receipts:1");
    running.stop().await;
}

pub(crate) async fn batch_open_takes_members_until_closed_then_completes(b: Backend) {
    let (tx, mut rx) = events();
    let running = billing_worker(&b, tx);
    let batch = b
        .client
        .batch()
        .id("import:customers.csv")
        .on_complete(callback("complete"))
        .open()
        .await
        .unwrap();
    assert_eq!(batch.add(email(1, "ok")).await.unwrap(), 1);
    // From another process: the same batch by id. A member added twice is counted once.
    let again = b.client.batch_handle("import:customers.csv").unwrap();
    let item = EnqueueItem::new(email(2, "ok")).id("email:2");
    assert_eq!(again.add(item.clone()).await.unwrap(), 1);
    assert_eq!(again.add(item).await.unwrap(), 0);
    assert_eq!(
        again
            .add_all((1..=3).map(|customer| Receipt { customer }))
            .await
            .unwrap(),
        3
    );
    // Every member ended, but the batch is open: it does not complete.
    eventually("the members to succeed", || async {
        let s = batch.status().await.unwrap();
        (s.succeeded == 5).then_some(())
    })
    .await;
    no_more_callbacks(&mut rx).await;
    assert!(!batch.status().await.unwrap().is_complete());

    batch.close().await.unwrap();
    let got = callbacks(&mut rx, 1).await;
    assert_eq!(got[0].0, "complete");
    assert_eq!((got[0].1.total, got[0].1.succeeded), (5, 5));
    // Closed: no more members; closing again changes nothing.
    let late = batch.add(email(3, "ok")).await.unwrap_err();
    assert!(matches!(late, Error::BatchClosed { .. }), "{late}");
    batch.close().await.unwrap();
    no_more_callbacks(&mut rx).await;
    running.stop().await;
}

pub(crate) async fn batch_members_and_callbacks_see_their_batch_id(b: Backend) {
    let (tx, mut rx) = events();
    let running = billing_worker(&b, tx);
    b.client
        .batch()
        .id("welcome:42")
        .on_complete(callback("complete"))
        .add(email(1, "ok"))
        .add(Receipt { customer: 1 })
        .enqueue()
        .await
        .unwrap();
    // A job in no batch sees none.
    b.client.enqueue(email(9, "ok")).await.unwrap();
    let mut ids = Vec::new();
    let mut callback_seen = false;
    while ids.len() < 3 || !callback_seen {
        match next(&mut rx).await {
            Seen::Member(id) => ids.push(id),
            Seen::Callback(kind, status) => {
                assert_eq!(
                    (kind.as_str(), status.id.as_str()),
                    ("complete", "welcome:42")
                );
                callback_seen = true;
            }
        }
    }
    ids.sort();
    assert_eq!(
        ids,
        [None, Some("welcome:42".into()), Some("welcome:42".into())]
    );
    running.stop().await;
}

/// A member cancelled while scheduled ends as cancelled (no worker finishes it: the end is found by
/// the topic's next claim): the batch completes, and does not succeed.
pub(crate) async fn batch_cancelled_member_completes_the_batch_without_success(b: Backend) {
    let (tx, mut rx) = events();
    let running = billing_worker_polling(&b, tx, Some(Duration::from_millis(100)));
    let later = EnqueueItem::new(email(2, "ok"))
        .id("reminder:2")
        .after(Duration::from_secs(3600));
    let batch = b
        .client
        .batch()
        .id("reminders:1")
        .on_success(callback("success"))
        .on_complete(callback("complete"))
        .add(email(1, "ok"))
        .add(later)
        .enqueue()
        .await
        .unwrap();
    eventually("the first member to succeed", || async {
        (batch.status().await.unwrap().succeeded == 1).then_some(())
    })
    .await;
    b.client.cancel::<InvoiceEmail>("reminder:2").await.unwrap();
    let got = callbacks(&mut rx, 1).await;
    assert_eq!(got[0].0, "complete");
    let status = &got[0].1;
    assert_eq!(
        (
            status.total,
            status.succeeded,
            status.dead,
            status.cancelled
        ),
        (2, 1, 0, 1),
        "{status:?}"
    );
    no_more_callbacks(&mut rx).await;
    assert_eq!(
        batch.status().await.unwrap().fired(CallbackKind::Success),
        Some(false)
    );
    let members = batch.members(0, 10).await.unwrap();
    assert_eq!(members[1].id, "reminder:2");
    assert_eq!(members[1].state, postpone::MemberState::Cancelled);
    running.stop().await;
}

pub(crate) async fn batch_ids_are_checked_and_never_created_twice(b: Backend) {
    let client = &b.client;
    let e = client.batch().id("no spaces").enqueue().await.unwrap_err();
    assert!(matches!(e, Error::InvalidBatchId { .. }), "{e}");
    client
        .batch()
        .id("once")
        .add(email(1, "ok"))
        .enqueue()
        .await
        .unwrap();
    let e = client
        .batch()
        .id("once")
        .add(email(2, "ok"))
        .enqueue()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::BatchExists { .. }), "{e}");
    assert_eq!(client.batch_status("once").await.unwrap().total, 1);
    let e = client.batch_status("never").await.unwrap_err();
    assert!(matches!(e, Error::BatchNotFound { .. }), "{e}");
    let e = client
        .batch_handle("never")
        .unwrap()
        .add(email(3, "ok"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::BatchNotFound { .. }), "{e}");
}
