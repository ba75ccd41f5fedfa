//! Each death is its own dead letter; lost claim replies; swept jobs keep their place (issue 11).

use std::sync::Arc;

use postpone::store::{
    ClaimRequest, DeadEntry, DeadSelection, Death, Due, RequeueOutcome, Store, StoredState,
};

use super::*;

fn deaths_of(entries: &[DeadEntry]) -> Vec<(String, u64)> {
    entries.iter().map(|e| (e.id.clone(), e.seq)).collect()
}

/// Kills job `id` (enqueue, claim, finish `Dead` with reason `why`) and returns its death.
async fn kill(s: &dyn Store, t: &str, id: &str, why: &str) -> Death {
    create(s, t, id, REC, Due::In(0)).await;
    let job = claim_id(s, t, id, LONG).await;
    assert_eq!(
        finish(s, t, &job, dead(why.as_bytes(), why)).await,
        FinishOutcome::Applied
    );
    s.dead_of(t, id, 1).await.unwrap().remove(0).death()
}

pub(crate) async fn two_deaths_of_one_id_are_two_dead_letters(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("two_deaths"));
    let first = kill(s, t, "x", "first").await;
    let second = kill(s, t, "x", "second").await;
    assert_ne!(first, second);

    let listed = s.dead_list(t, 0, 10).await.unwrap();
    assert_eq!(
        deaths_of(&listed),
        [("x".into(), second.seq), ("x".into(), first.seq)],
        "newest first, both listed"
    );
    assert_eq!(
        (listed[0].reason.as_str(), listed[1].reason.as_str()),
        ("second", "first"),
        "the newer death did not overwrite the older"
    );
    let of_x = s.dead_of(t, "x", 10).await.unwrap();
    assert_eq!(deaths_of(&of_x), deaths_of(&listed));
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.dead, counts.dead_pending, counts.dead_total),
        (2, 2, 2)
    );
    let hooks = s.dead_claim(t, 10, LONG).await.unwrap();
    assert_eq!(hooks.len(), 2, "both deaths reach the hook");
}

pub(crate) async fn acking_one_death_leaves_a_newer_death_of_the_same_id_pending(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("late_ack"));
    let first = kill(s, t, "x", "first").await;
    // The hook takes the first death; meanwhile the job is requeued and dies again.
    let taken = s.dead_claim(t, 10, LONG).await.unwrap();
    assert_eq!(deaths_of(&taken), [("x".into(), first.seq)]);
    assert!(matches!(
        s.dead_requeue(t, &first, REC.to_vec()).await.unwrap(),
        RequeueOutcome::Requeued { .. }
    ));
    let job = claim_id(s, t, "x", LONG).await;
    finish(s, t, &job, dead(b"again", "second")).await;
    let second = s.dead_of(t, "x", 1).await.unwrap().remove(0).death();
    assert_ne!(second, first);

    // The hook's late acknowledgement of the first death leaves the second pending.
    s.dead_ack(t, std::slice::from_ref(&first)).await.unwrap();
    assert_eq!(s.counts(t).await.unwrap().dead_pending, 1);
    let next = s.dead_claim(t, 10, LONG).await.unwrap();
    assert_eq!(deaths_of(&next), [("x".into(), second.seq)]);
    assert_eq!(next[0].reason, "second");
}

pub(crate) async fn requeue_and_purge_touch_only_the_death_they_name(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("death_ops"));
    let first = kill(s, t, "x", "first").await;
    let second = kill(s, t, "x", "second").await;

    assert!(matches!(
        s.dead_requeue(t, &first, REC.to_vec()).await.unwrap(),
        RequeueOutcome::Requeued { .. }
    ));
    let listed = s.dead_list(t, 0, 10).await.unwrap();
    assert_eq!(deaths_of(&listed), [("x".into(), second.seq)]);
    assert_eq!(
        s.dead_requeue(t, &second, REC.to_vec()).await.unwrap(),
        RequeueOutcome::LiveJobExists,
        "the requeued first death's job is live"
    );
    assert_eq!(
        s.dead_purge(t, DeadSelection::Death(&first)).await.unwrap(),
        0,
        "no longer listed"
    );
    assert_eq!(
        s.dead_purge(t, DeadSelection::Death(&second))
            .await
            .unwrap(),
        1
    );
    assert!(s.dead_list(t, 0, 10).await.unwrap().is_empty());
    // Neither requeue nor purge took a death from its hook.
    let mut hooks = deaths_of(&s.dead_claim(t, 10, LONG).await.unwrap());
    hooks.sort();
    let mut want = vec![("x".to_string(), first.seq), ("x".to_string(), second.seq)];
    want.sort();
    assert_eq!(hooks, want);
    s.dead_ack(t, &[first, second]).await.unwrap();
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.dead, counts.dead_pending), (0, 0));
}

pub(crate) async fn a_claim_sent_again_gets_back_what_it_took(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("claim_again"));
    for id in ["a", "b", "c"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    let request = ClaimRequest::new(2, LONG, 100, 10);
    let first = s.claim(t, request).await.unwrap();
    assert_eq!(first.jobs.len(), 2);
    // Its reply is lost; the worker sends the same claim again.
    let again = s.claim(t, request.again()).await.unwrap();
    let ids = |b: &postpone::store::ClaimBatch| -> Vec<(String, u64, i64)> {
        b.jobs
            .iter()
            .map(|j| (j.id.clone(), j.token, j.due_at_ms))
            .collect()
    };
    assert_eq!(
        ids(&again),
        ids(&first),
        "the same jobs, token and due times"
    );
    assert_eq!(again.jobs[0].record, REC);
    assert_eq!(
        s.counts(t).await.unwrap().ready,
        1,
        "the retry claimed nothing more"
    );
    for job in &again.jobs {
        assert_eq!(
            finish(s, t, job, Finish::Done).await,
            FinishOutcome::Applied
        );
    }
    let next = s.claim(
        t,
        ClaimRequest::new(10, LONG, 100, 10).received(request.token),
    );
    assert_eq!(next.await.unwrap().jobs.len(), 1);
    let c = s.counts(t).await.unwrap();
    assert_eq!((c.processed, c.stalled), (2, 0));
}

pub(crate) async fn a_claim_sent_again_that_never_ran_claims_as_usual(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("claim_again_fresh"));
    create(s, t, "a", REC, Due::In(0)).await;
    let request = ClaimRequest::new(5, LONG, 100, 10).again();
    let batch = s.claim(t, request).await.unwrap();
    assert_eq!(batch.jobs.len(), 1);
    assert_eq!(batch.jobs[0].token, request.token);
}

pub(crate) async fn a_received_claim_is_forgotten(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("claim_received"));
    create(s, t, "a", REC, Due::In(0)).await;
    let request = ClaimRequest::new(5, LONG, 100, 10);
    assert_eq!(s.claim(t, request).await.unwrap().jobs.len(), 1);
    let next = ClaimRequest::new(0, LONG, 100, 10).received(request.token);
    s.claim(t, next).await.unwrap();
    let again = s.claim(t, request.again()).await.unwrap();
    assert!(again.jobs.is_empty(), "{again:?}");
}

pub(crate) async fn an_expired_lease_keeps_its_place_in_line(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("keeps_place"));
    let a_due = create(s, t, "a", REC, Due::In(0)).await;
    let a = claim_id(s, t, "a", SHORT).await;
    assert_eq!(a.due_at_ms, a_due);
    // b becomes due after a was claimed; a's worker dies.
    wait_past(s, a_due).await;
    let b_due = create(s, t, "b", REC, Due::In(0)).await;
    assert!(b_due > a_due);
    let Some(StoredState::Active { lease_deadline_ms }) = state(s, t, "a").await else {
        panic!("a should be active")
    };
    wait_past(s, lease_deadline_ms).await;
    let batch = s
        .claim(t, ClaimRequest::new(1, LONG, 100, 10))
        .await
        .unwrap();
    assert_eq!(batch.swept, 1);
    assert_eq!(batch.jobs.len(), 1);
    assert_eq!(
        (batch.jobs[0].id.as_str(), batch.jobs[0].due_at_ms),
        ("a", a_due),
        "a is due at its own due time, ahead of b"
    );
}
