//! Sweeping expired leases inside claim: back to due, stall counting, dead-lettering stalled jobs.

use std::sync::Arc;

use postpone::store::{ClaimBatch, ClaimRequest, Due, FinishOutcome, Store, StoredState};

use super::*;

pub(crate) async fn sweep_returns_an_expired_lease_to_due_without_using_an_attempt(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("sweep_due"));
    create(s, t, "a", REC, Due::In(0)).await;
    let old = claim_id(s, t, "a", SHORT).await;
    let Some(StoredState::Active { lease_deadline_ms }) = state(s, t, "a").await else {
        panic!()
    };
    wait_past(s, lease_deadline_ms).await;

    let batch = claim(s, t, 0, LONG).await;
    assert_eq!((batch.swept, batch.swept_dead), (1, 0));
    assert_eq!(
        batch.next_due_ms,
        Some(old.due_at_ms),
        "due at once, at its own due time (its place in line)"
    );
    assert_eq!(batch.next_lease_deadline_ms, None);
    let stored = s.job(t, "a").await.unwrap().unwrap();
    assert_eq!(
        stored.state,
        StoredState::Due {
            due_at_ms: old.due_at_ms
        }
    );
    assert_eq!(
        stored.record, REC,
        "the record (and its attempt) is untouched"
    );
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.stalled, counts.ready, counts.active, counts.retried),
        (1, 1, 0, 0)
    );

    assert_eq!(finish(s, t, &old, Finish::Done).await, FinishOutcome::Stale);
    let new = claim_id(s, t, "a", LONG).await;
    assert_eq!(new.record, REC);
    assert_ne!(new.token, old.token);
}

fn stall_req(max: usize) -> ClaimRequest {
    ClaimRequest::new(max, SHORT, 100, 1)
}

/// Claims with `stall_req`, after the lease of `deadline` expired; returns the batch.
async fn claim_after(s: &dyn Store, t: &str, deadline: i64, max: usize) -> ClaimBatch {
    wait_past(s, deadline).await;
    s.claim(t, stall_req(max)).await.unwrap()
}

pub(crate) async fn sweep_dead_letters_a_job_that_stalls_more_than_stall_limit(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("sweep_stalled"));
    create(s, t, "a", REC, Due::In(0)).await;
    let first = s.claim(t, stall_req(1)).await.unwrap();
    assert_eq!(first.jobs.len(), 1);

    let second = claim_after(s, t, first.now_ms() + SHORT as i64, 1).await;
    assert_eq!(
        (second.swept, second.swept_dead, second.jobs.len()),
        (1, 0, 1),
        "{second:?}"
    );
    let third = claim_after(s, t, second.now_ms() + SHORT as i64, 1).await;
    assert_eq!(
        (third.swept, third.swept_dead, third.jobs.len()),
        (0, 1, 0),
        "{third:?}"
    );
    assert!(third.dead_pending);

    let stored = s.job(t, "a").await.unwrap().unwrap();
    let expected = StoredState::Dead {
        seq: 1,
        died_at_ms: third.now_ms(),
        reason: "stalled: lease expired 2 times".into(),
        delivered: false,
    };
    assert_eq!(stored.state, expected);
    assert_eq!(stored.record, REC);
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.stalled, counts.dead_total, counts.failed),
        (1, 1, 0)
    );
    assert_eq!(
        (
            counts.dead,
            counts.dead_pending,
            counts.active,
            counts.ready
        ),
        (1, 1, 0, 0)
    );
}

pub(crate) async fn sweep_stall_count_survives_retries(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("sweep_stalls_kept"));
    create(s, t, "a", REC, Due::In(0)).await;
    let first = s.claim(t, stall_req(1)).await.unwrap();
    let second = claim_after(s, t, first.now_ms() + SHORT as i64, 1).await;
    assert_eq!((second.swept, second.jobs.len()), (1, 1));
    assert_eq!(
        finish(s, t, &second.jobs[0], retry(b"attempt 2", 0, true)).await,
        FinishOutcome::Applied
    );

    let third = s.claim(t, stall_req(1)).await.unwrap();
    assert_eq!(third.jobs.len(), 1);
    let fourth = claim_after(s, t, third.now_ms() + SHORT as i64, 1).await;
    assert_eq!(
        fourth.swept_dead, 1,
        "the second stall, across a retry, exceeds the limit of 1"
    );
    let stored = s.job(t, "a").await.unwrap().unwrap();
    assert!(
        matches!(&stored.state, StoredState::Dead { reason, .. } if reason == "stalled: lease expired 2 times")
    );
    assert_eq!(stored.record, b"attempt 2");
}

pub(crate) async fn sweep_is_bounded_by_sweep_limit(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("sweep_limit"));
    for id in ["a", "b", "c"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    let batch = claim(s, t, 3, SHORT).await;
    assert_eq!(batch.jobs.len(), 3);
    wait_past(s, batch.now_ms() + SHORT as i64).await;

    let swept = s.claim(t, ClaimRequest::new(0, LONG, 2, 10)).await.unwrap();
    assert_eq!(swept.swept, 2);
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.ready, counts.active), (2, 1));
    let swept = s.claim(t, ClaimRequest::new(0, LONG, 2, 10)).await.unwrap();
    assert_eq!(swept.swept, 1);
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.ready, counts.active, counts.stalled), (3, 0, 3));
}
