//! Cancel and reschedule by id.

use std::sync::Arc;

use postpone::store::{
    CancelOutcome, Due, FinishOutcome, LeaseStatus, RescheduleOutcome, Store, StoredState,
};

use super::*;

pub(crate) async fn cancel_due_job_removes_it_and_counts_cancelled(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("cancel_due"));
    create(s, t, "a", REC, Due::In(60_000)).await;
    assert_eq!(s.cancel(t, "a").await.unwrap(), CancelOutcome::Removed);
    assert_eq!(state(s, t, "a").await, None);
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.cancelled, counts.scheduled, counts.ready),
        (1, 0, 0)
    );
    assert_eq!(s.cancel(t, "a").await.unwrap(), CancelOutcome::NotFound);
    assert_eq!(claim(s, t, 10, LONG).await.next_due_ms, None);
}

pub(crate) async fn cancel_running_job_marks_it_and_a_retry_ends_it_cancelled(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("cancel_running_retry"));
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", 30_000).await;
    assert_eq!(s.cancel(t, "a").await.unwrap(), CancelOutcome::Marked);
    assert_eq!(
        s.cancel(t, "a").await.unwrap(),
        CancelOutcome::Marked,
        "still running"
    );
    assert_eq!(
        s.counts(t).await.unwrap().cancelled,
        0,
        "counted when it ends"
    );

    let before = now(s).await;
    let status = s.extend(t, &[("a".into(), job.token)], LONG).await.unwrap();
    assert_eq!(status, [LeaseStatus::Cancelled]);
    let Some(StoredState::Active { lease_deadline_ms }) = state(s, t, "a").await else {
        panic!()
    };
    assert!(
        lease_deadline_ms >= before + LONG as i64,
        "extended all the same"
    );

    assert_eq!(
        finish(s, t, &job, retry(b"attempt 2", 0, true)).await,
        FinishOutcome::Cancelled
    );
    assert_eq!(state(s, t, "a").await, None);
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (
            counts.cancelled,
            counts.retried,
            counts.active,
            counts.ready
        ),
        (1, 0, 0, 0)
    );
    assert_eq!(s.cancel(t, "a").await.unwrap(), CancelOutcome::NotFound);
}

pub(crate) async fn cancel_running_job_then_done_is_applied_and_processed(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("cancel_running_done"));
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    assert_eq!(s.cancel(t, "a").await.unwrap(), CancelOutcome::Marked);
    assert_eq!(
        finish(s, t, &job, Finish::Done).await,
        FinishOutcome::Applied
    );
    assert_eq!(state(s, t, "a").await, None);
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.processed, counts.cancelled), (1, 0));
}

pub(crate) async fn cancel_running_job_then_dead_is_dead_lettered(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("cancel_running_dead"));
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    assert_eq!(s.cancel(t, "a").await.unwrap(), CancelOutcome::Marked);
    assert_eq!(
        finish(s, t, &job, dead(b"final", "boom")).await,
        FinishOutcome::Applied
    );
    let state = state(s, t, "a").await;
    assert!(
        matches!(&state, Some(StoredState::Dead { reason, .. }) if reason == "boom"),
        "{state:?}"
    );
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.failed, counts.dead, counts.cancelled), (1, 1, 0));
}

pub(crate) async fn cancel_running_job_whose_lease_expires_ends_cancelled(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("cancel_running_swept"));
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", SHORT).await;
    assert_eq!(s.cancel(t, "a").await.unwrap(), CancelOutcome::Marked);
    let batch = eventually_within(
        WAIT,
        "the cancelled job's lease to be swept",
        || async move {
            let batch = claim(s, t, 1, LONG).await;
            (batch.swept_dead > 0 || !batch.jobs.is_empty()).then_some(batch)
        },
    )
    .await;
    assert!(
        batch.jobs.is_empty(),
        "a cancelled job is not made due again: {batch:?}"
    );
    assert_eq!((batch.swept, batch.swept_dead), (0, 1));
    assert_eq!(state(s, t, "a").await, None);
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.cancelled, counts.stalled, counts.dead, counts.ready),
        (1, 0, 0, 0)
    );
    assert_eq!(finish(s, t, &job, Finish::Done).await, FinishOutcome::Stale);
}

pub(crate) async fn cancel_unknown_or_dead_job_is_not_found(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("cancel_not_found"));
    assert_eq!(s.cancel(t, "nope").await.unwrap(), CancelOutcome::NotFound);
    make_dead(s, t, &["a"]).await;
    assert_eq!(
        s.cancel(t, "a").await.unwrap(),
        CancelOutcome::NotFound,
        "dead is not live"
    );
    assert!(matches!(
        state(s, t, "a").await,
        Some(StoredState::Dead { .. })
    ));
    assert_eq!(s.counts(t).await.unwrap().cancelled, 0);
}

pub(crate) async fn reschedule_due_job_moves_its_due_time(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("reschedule_due"));
    create(s, t, "a", REC, Due::In(60_000)).await;
    let at = now(s).await + 120_000;
    let out = s.reschedule(t, "a", Due::At(at)).await.unwrap();
    assert_eq!(out, RescheduleOutcome::Rescheduled { due_at_ms: at });
    assert_eq!(
        state(s, t, "a").await,
        Some(StoredState::Due { due_at_ms: at })
    );

    let before = now(s).await;
    let out = s.reschedule(t, "a", Due::In(0)).await.unwrap();
    let after = now(s).await;
    let RescheduleOutcome::Rescheduled { due_at_ms } = out else {
        panic!("{out:?}")
    };
    assert!(before <= due_at_ms && due_at_ms <= after);
    let job = claim_id(s, t, "a", LONG).await;
    assert_eq!(
        (job.due_at_ms, job.record.as_slice()),
        (due_at_ms, REC),
        "record unchanged"
    );
}

pub(crate) async fn reschedule_running_job_reports_running(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("reschedule_running"));
    create(s, t, "a", REC, Due::In(0)).await;
    claim_id(s, t, "a", LONG).await;
    let active = state(s, t, "a").await;
    assert_eq!(
        s.reschedule(t, "a", Due::In(60_000)).await.unwrap(),
        RescheduleOutcome::Running
    );
    assert_eq!(state(s, t, "a").await, active);
}

pub(crate) async fn reschedule_unknown_or_dead_job_is_not_found(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("reschedule_not_found"));
    assert_eq!(
        s.reschedule(t, "nope", Due::In(0)).await.unwrap(),
        RescheduleOutcome::NotFound
    );
    make_dead(s, t, &["a"]).await;
    assert_eq!(
        s.reschedule(t, "a", Due::In(0)).await.unwrap(),
        RescheduleOutcome::NotFound
    );
    assert!(matches!(
        state(s, t, "a").await,
        Some(StoredState::Dead { .. })
    ));
}
