//! Priorities: among due jobs the highest is claimed first (then the earliest due); scheduled jobs wait
//! for their due time whatever their priority; a job keeps its priority through a retry, an expired
//! lease and a reschedule, and a cancel or a replace takes it away.

use std::sync::Arc;

use postpone::store::{Due, NewJob, Store, StoredState};

use super::*;

fn with_priority(id: &str, due: Due, priority: u8) -> NewJob {
    new_job(id, REC, due).priority(priority)
}

pub(crate) async fn higher_priority_due_jobs_are_claimed_first_then_by_due_time(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("priority_order"));
    let jobs = vec![
        new_job("plain-1", REC, Due::In(0)),
        with_priority("low-1", Due::In(0), 1),
        new_job("plain-2", REC, Due::In(0)),
        with_priority("high", Due::In(0), 9),
        with_priority("low-2", Due::In(0), 1),
        // Scheduled: waits for its time, whatever its priority.
        with_priority("later", Due::In(60_000), 31),
    ];
    s.enqueue(t, jobs).await.unwrap();
    let due_before = match state(s, t, "low-1").await {
        Some(StoredState::Due { due_at_ms }) => due_at_ms,
        other => panic!("low-1 is due, not {other:?}"),
    };
    let batch = claim(s, t, 2, LONG).await;
    let ids: Vec<_> = batch.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["high", "low-1"]);
    assert_eq!(
        batch.jobs[1].due_at_ms, due_before,
        "a job's due time is its own"
    );
    assert_eq!(
        claimed_ids(s, t, 10).await,
        ["low-2", "plain-1", "plain-2"],
        "then the rest by due time; the scheduled one waits"
    );
    assert!(matches!(
        state(s, t, "later").await,
        Some(StoredState::Due { .. })
    ));
    assert_eq!(s.counts(t).await.unwrap().scheduled, 1);
}

pub(crate) async fn a_scheduled_job_with_a_priority_goes_first_once_due(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("priority_due"));
    create(s, t, "plain", REC, Due::In(0)).await;
    let out = s
        .enqueue(t, vec![with_priority("urgent", Due::In(SHORT), 5)])
        .await
        .unwrap();
    let postpone::store::EnqueueOutcome::Created { due_at_ms } = out[0] else {
        panic!("{out:?}");
    };
    wait_past(s, due_at_ms).await;
    assert_eq!(claimed_ids(s, t, 1).await, ["urgent"]);
    assert_eq!(claimed_ids(s, t, 1).await, ["plain"]);
}

pub(crate) async fn a_priority_survives_a_retry_and_a_reschedule(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("priority_keeps"));
    s.enqueue(t, vec![with_priority("p", Due::In(0), 3)])
        .await
        .unwrap();
    create(s, t, "a", REC, Due::In(0)).await;
    // A retry: due again after others, still first once due.
    let p = claim_id(s, t, "p", LONG).await;
    finish(s, t, &p, retry(REC, 0, true)).await;
    create(s, t, "b", REC, Due::In(0)).await;
    wait_past(s, now(s).await).await;
    assert_eq!(claimed_ids(s, t, 1).await, ["p"], "after a retry");
    assert_eq!(claimed_ids(s, t, 10).await, ["a", "b"]);
    // A reschedule into the future: it waits, then goes first.
    s.enqueue(t, vec![with_priority("q", Due::In(0), 2)])
        .await
        .unwrap();
    create(s, t, "c", REC, Due::In(0)).await;
    let due = match s.reschedule(t, "q", Due::In(SHORT)).await.unwrap() {
        postpone::store::RescheduleOutcome::Rescheduled { due_at_ms } => due_at_ms,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        claimed_ids(s, t, 1).await,
        ["c"],
        "q waits for its new time"
    );
    create(s, t, "d", REC, Due::In(0)).await;
    wait_past(s, due).await;
    assert_eq!(claimed_ids(s, t, 1).await, ["q"], "then goes first");
    assert_eq!(claimed_ids(s, t, 1).await, ["d"]);
}

pub(crate) async fn a_swept_job_keeps_its_priority(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("priority_swept"));
    s.enqueue(t, vec![with_priority("p", Due::In(0), 4)])
        .await
        .unwrap();
    let first = s
        .claim(t, postpone::store::ClaimRequest::new(1, SHORT, 100, 10))
        .await
        .unwrap();
    assert_eq!(first.jobs.len(), 1);
    create(s, t, "a", REC, Due::In(0)).await;
    wait_past(s, first.now_ms() + SHORT as i64).await;
    let batch = claim(s, t, 1, LONG).await;
    assert_eq!(batch.swept, 1);
    assert_eq!(batch.jobs[0].id, "p", "swept back, still first");
}

pub(crate) async fn cancel_and_replace_take_a_priority_away(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("priority_gone"));
    create(s, t, "a", REC, Due::In(0)).await;
    s.enqueue(t, vec![with_priority("x", Due::In(0), 7)])
        .await
        .unwrap();
    s.cancel(t, "x").await.unwrap();
    s.enqueue(t, vec![with_priority("y", Due::In(0), 7)])
        .await
        .unwrap();
    // Replaced without a priority: in line by its (new) due time, after `a`.
    let replaced = NewJob::new("y".into(), b"new".to_vec(), Due::In(0), true);
    s.enqueue(t, vec![replaced]).await.unwrap();
    wait_past(s, now(s).await).await;
    create(s, t, "x", REC, Due::In(0)).await;
    wait_past(s, now(s).await).await;
    assert_eq!(claimed_ids(s, t, 10).await, ["a", "y", "x"]);
}
