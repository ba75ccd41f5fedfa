//! Enqueue once per delivery token: what a transactional outbox's relay relies on.

use std::sync::Arc;

use postpone::store::{Due, EnqueueOutcome, Finish, Store, StoredState};

use super::*;

/// Delivers `(token, id)` pairs (record `REC`, due now) and returns their outcomes.
async fn deliver(
    s: &dyn Store,
    topic: &str,
    jobs: &[(&str, &str)],
    keep_ms: u64,
) -> Vec<Option<EnqueueOutcome>> {
    let jobs = jobs
        .iter()
        .map(|(token, id)| (token.to_string(), new_job(id, REC, Due::In(0))))
        .collect();
    s.enqueue_once(topic, jobs, keep_ms).await.unwrap()
}

pub(crate) async fn outbox_delivery_enqueues_once_per_token_even_after_the_job_ran(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("outbox_once"));
    let first = deliver(s, t, &[("tok-1", "a")], LONG).await;
    assert!(
        matches!(first[..], [Some(EnqueueOutcome::Created { .. })]),
        "{first:?}"
    );
    assert_eq!(deliver(s, t, &[("tok-1", "a")], LONG).await, [None]);

    // The job runs and is done; the same row delivered again (a relay that crashed before removing
    // it) must not bring it back.
    let job = claim_id(s, t, "a", LONG).await;
    finish(s, t, &job, Finish::Done).await;
    assert_eq!(deliver(s, t, &[("tok-1", "a")], LONG).await, [None]);
    assert_eq!(state(s, t, "a").await, None, "the job did not come back");
    assert_eq!(s.counts(t).await.unwrap().processed, 1);

    // Another row (another token) of the same id is a new job.
    let again = deliver(s, t, &[("tok-2", "a")], LONG).await;
    assert!(
        matches!(again[..], [Some(EnqueueOutcome::Created { .. })]),
        "{again:?}"
    );
}

pub(crate) async fn outbox_delivery_batch_reports_in_order_and_takes_a_token_once(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("outbox_batch"));
    deliver(s, t, &[("old", "x")], LONG).await;
    let out = deliver(
        s,
        t,
        &[("new-1", "a"), ("old", "x"), ("new-1", "a"), ("new-2", "x")],
        LONG,
    )
    .await;
    assert!(
        matches!(
            out[..],
            [
                Some(EnqueueOutcome::Created { .. }),
                None,
                None,
                Some(EnqueueOutcome::Exists { .. })
            ]
        ),
        "{out:?}"
    );
    assert!(matches!(
        state(s, t, "a").await,
        Some(StoredState::Due { .. })
    ));
}

pub(crate) async fn outbox_delivery_tokens_go_when_forgotten_or_older_than_keep(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("outbox_forget"));
    deliver(s, t, &[("f", "a")], LONG).await;
    s.forget_tokens(t, &["f".to_owned(), "unknown".to_owned()])
        .await
        .unwrap();
    let out = deliver(s, t, &[("f", "a")], LONG).await;
    assert!(
        matches!(out[..], [Some(EnqueueOutcome::Exists { .. })]),
        "a forgotten token delivers again (the job exists): {out:?}"
    );

    let recorded = now(s).await;
    deliver(s, t, &[("k", "b")], SHORT).await;
    wait_past(s, recorded + SHORT as i64 + 1).await;
    let out = deliver(s, t, &[("k", "b")], SHORT).await;
    assert!(
        matches!(out[..], [Some(EnqueueOutcome::Exists { .. })]),
        "a token older than keep is dropped: {out:?}"
    );
}
