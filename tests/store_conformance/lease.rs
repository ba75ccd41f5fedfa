//! Finishing a claimed job and extending its lease.

use std::sync::Arc;

use postpone::store::{
    CancelOutcome, Due, EnqueueOutcome, FinishItem, FinishOutcome, LeaseStatus, Store, StoredState,
};

use super::*;

pub(crate) async fn finish_done_deletes_the_job_and_counts_processed(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("finish_done"));
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    assert_eq!(
        finish(s, t, &job, Finish::Done).await,
        FinishOutcome::Applied
    );

    assert_eq!(state(s, t, "a").await, None);
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.processed, counts.active, counts.ready, counts.dead),
        (1, 0, 0, 0)
    );
    assert_eq!(
        finish(s, t, &job, Finish::Done).await,
        FinishOutcome::Stale,
        "finished once"
    );
    assert_eq!(s.counts(t).await.unwrap().processed, 1);
    assert_eq!(s.cancel(t, "a").await.unwrap(), CancelOutcome::NotFound);
    assert!(matches!(
        enqueue(s, t, "a", REC, Due::In(0)).await,
        EnqueueOutcome::Created { .. }
    ));
}

pub(crate) async fn finish_retry_delays_the_job_with_its_new_record_and_counts_retried(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("finish_retry"));
    create(s, t, "a", b"attempt 1", Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    let before = now(s).await;
    assert_eq!(
        finish(s, t, &job, retry(b"attempt 2", 60_000, true)).await,
        FinishOutcome::Applied
    );
    let after = now(s).await;

    let stored = s.job(t, "a").await.unwrap().unwrap();
    let StoredState::Due { due_at_ms } = stored.state else {
        panic!("{stored:?}")
    };
    assert!(before + 60_000 <= due_at_ms && due_at_ms <= after + 60_000);
    assert_eq!(stored.record, b"attempt 2");
    let batch = claim(s, t, 10, LONG).await;
    assert!(batch.jobs.is_empty(), "not claimable before the delay");
    assert_eq!(batch.next_due_ms, Some(due_at_ms));
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (
            counts.retried,
            counts.scheduled,
            counts.active,
            counts.processed
        ),
        (1, 1, 0, 0)
    );
    assert_eq!(
        finish(s, t, &job, Finish::Done).await,
        FinishOutcome::Stale,
        "the lease ended"
    );

    create(s, t, "b", b"attempt 1", Due::In(0)).await;
    let job = claim_id(s, t, "b", LONG).await;
    assert_eq!(
        finish(s, t, &job, retry(b"attempt 2", SHORT, true)).await,
        FinishOutcome::Applied
    );
    let again = eventually_within(WAIT, "the retried job to be due again", || async move {
        claim(s, t, 1, LONG).await.jobs.into_iter().next()
    })
    .await;
    assert_eq!(
        (again.id.as_str(), again.record.as_slice()),
        ("b", &b"attempt 2"[..])
    );
    assert_ne!(again.token, job.token);
    assert_eq!(s.counts(t).await.unwrap().retried, 2);
}

pub(crate) async fn finish_retry_not_counted_is_not_counted(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("finish_snooze"));
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    assert_eq!(
        finish(s, t, &job, retry(b"snoozed", 0, false)).await,
        FinishOutcome::Applied
    );
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.retried, counts.ready, counts.active), (0, 1, 0));
    assert_eq!(claim_id(s, t, "a", LONG).await.record, b"snoozed");
}

pub(crate) async fn finish_dead_moves_the_job_to_the_dead_letters_and_counts_failed(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("finish_dead"));
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    let before = now(s).await;
    assert_eq!(
        finish(s, t, &job, dead(b"final", "boom")).await,
        FinishOutcome::Applied
    );
    let after = now(s).await;

    let stored = s.job(t, "a").await.unwrap().unwrap();
    let StoredState::Dead {
        died_at_ms,
        reason,
        delivered,
        ..
    } = stored.state
    else {
        panic!("{stored:?}")
    };
    assert!(before <= died_at_ms && died_at_ms <= after);
    assert_eq!((reason.as_str(), delivered), ("boom", false));
    assert_eq!(stored.record, b"final");
    let list = s.dead_list(t, 0, 10).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0].id.as_str(), list[0].reason.as_str()),
        ("a", "boom")
    );
    assert_eq!(
        (list[0].record.as_slice(), list[0].died_at_ms),
        (&b"final"[..], died_at_ms)
    );

    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (
            counts.dead,
            counts.dead_pending,
            counts.failed,
            counts.dead_total
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(
        (
            counts.active,
            counts.ready,
            counts.processed,
            counts.retried
        ),
        (0, 0, 0, 0)
    );
    let batch = claim(s, t, 10, LONG).await;
    assert!(batch.jobs.is_empty());
    assert!(batch.dead_pending, "the hook is due");
    assert_eq!(finish(s, t, &job, Finish::Done).await, FinishOutcome::Stale);
}

pub(crate) async fn stale_token_finish_and_extend_change_nothing(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("stale_token"));
    create(s, t, "a", REC, Due::In(0)).await;
    let old = claim_id(s, t, "a", SHORT).await;
    let new = eventually_within(
        WAIT,
        "the expired lease to be swept and claimed again",
        || async move { claim(s, t, 1, LONG).await.jobs.into_iter().next() },
    )
    .await;
    assert_eq!(new.id, "a");
    assert_ne!(new.token, old.token);
    let active = s.job(t, "a").await.unwrap().unwrap();

    assert_eq!(finish(s, t, &old, Finish::Done).await, FinishOutcome::Stale);
    assert_eq!(
        finish(s, t, &old, retry(b"late", 0, true)).await,
        FinishOutcome::Stale
    );
    assert_eq!(
        finish(s, t, &old, dead(b"late", "late")).await,
        FinishOutcome::Stale
    );
    assert_eq!(
        s.extend(t, &[("a".into(), old.token)], LONG).await.unwrap(),
        [LeaseStatus::Lost]
    );

    let after = s.job(t, "a").await.unwrap().unwrap();
    assert_eq!((after.state, after.record), (active.state, active.record));
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.processed, counts.retried, counts.failed, counts.dead),
        (0, 0, 0, 0)
    );
    assert_eq!(
        finish(s, t, &new, Finish::Done).await,
        FinishOutcome::Applied
    );
}

pub(crate) async fn finish_and_extend_of_unknown_jobs_are_stale_and_lost(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("finish_unknown"));
    let item = FinishItem::new("nope".into(), 1, Finish::Done);
    assert_eq!(
        s.finish(t, vec![item]).await.unwrap(),
        [FinishOutcome::Stale]
    );
    assert_eq!(
        s.extend(t, &[("nope".into(), 1)], LONG).await.unwrap(),
        [LeaseStatus::Lost]
    );
    assert_eq!(s.counts(t).await.unwrap().processed, 0);
    assert_eq!(state(s, t, "nope").await, None);
}

pub(crate) async fn extend_moves_the_lease_deadline_and_reports_held(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("extend_held"));
    create(s, t, "a", REC, Due::In(0)).await;
    create(s, t, "b", REC, Due::In(0)).await;
    let batch = claim(s, t, 2, 30_000).await;
    let token = batch.jobs[0].token;
    let leases = [
        ("a".to_owned(), token),
        ("b".to_owned(), token + 1),
        ("nope".to_owned(), token),
    ];
    let before = now(s).await;
    let status = s.extend(t, &leases, LONG).await.unwrap();
    let after = now(s).await;
    assert_eq!(
        status,
        [LeaseStatus::Held, LeaseStatus::Lost, LeaseStatus::Lost]
    );

    let Some(StoredState::Active { lease_deadline_ms }) = state(s, t, "a").await else {
        panic!()
    };
    let long = LONG as i64;
    assert!(before + long <= lease_deadline_ms && lease_deadline_ms <= after + long);
    let unchanged = StoredState::Active {
        lease_deadline_ms: batch.now_ms() + 30_000,
    };
    assert_eq!(
        state(s, t, "b").await,
        Some(unchanged),
        "a wrong token moves nothing"
    );
}

pub(crate) async fn extend_and_finish_still_hold_an_expired_lease_not_yet_swept(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("extend_expired"));
    create(s, t, "a", REC, Due::In(0)).await;
    create(s, t, "b", REC, Due::In(0)).await;
    let batch = claim(s, t, 2, SHORT).await;
    wait_past(s, batch.now_ms() + SHORT as i64).await;

    let token = batch.jobs[0].token;
    assert_eq!(
        s.extend(t, &[("a".into(), token)], LONG).await.unwrap(),
        [LeaseStatus::Held]
    );
    let Some(StoredState::Active { lease_deadline_ms }) = state(s, t, "a").await else {
        panic!()
    };
    assert!(lease_deadline_ms > batch.now_ms() + SHORT as i64);
    let b = FinishItem::new("b".into(), token, Finish::Done);
    assert_eq!(
        s.finish(t, vec![b]).await.unwrap(),
        [FinishOutcome::Applied]
    );
    assert_eq!(s.counts(t).await.unwrap().processed, 1);
}
