//! The ends of batch members at the store seam: recorded by whatever ends them (finish, cancel, sweep;
//! a retry is no end), reported by the claim with a hint, delivered once, and the callbacks (success,
//! complete, death) enqueued exactly once into their topics.

use std::sync::Arc;

use postpone::store::{
    BatchAdded, BatchJob, CallbackKind, CancelOutcome, ClaimRequest, Death, Due, MemberState,
    RequeueOutcome, Store, StoredState,
};

use super::batches::{
    callback_topics, callbacks, claim_all, counted, create_batch, end_member, fired, member,
    new_batch, status,
};
use super::*;

pub(crate) async fn batch_member_success_is_reported_by_the_claim_and_delivered_once(
    store: Arc<dyn Store>,
) {
    let (s, t, id) = (&*store, &topic("batch_end"), &topic("batch_end_id"));
    let mut rx = s.hints();
    hints_for(s, &mut rx, t).await;
    let jobs = vec![member(t, "a"), member(t, "b"), member(t, "c")];
    create_batch(s, id, new_batch(jobs, Vec::new(), true)).await;
    hints_for(s, &mut rx, t).await;

    let job = claim_id(s, t, "a", LONG).await;
    assert!(
        !claim(s, t, 0, LONG).await.ends_pending,
        "running is no end"
    );
    let before = now(s).await;
    finish(s, t, &job, Finish::Done).await;
    let hints = hints_for(s, &mut rx, t).await;
    assert!(
        hints.iter().any(|at| *at >= before),
        "the end wakes the topic's workers: {hints:?}"
    );
    assert!(claim(s, t, 0, LONG).await.ends_pending);
    assert_eq!(counted(s, id).await, (3, 0, 0, 0), "counted once delivered");
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 1);
    assert_eq!(counted(s, id).await, (3, 1, 0, 0));
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 0);
    assert!(!claim(s, t, 0, LONG).await.ends_pending);

    // Two ends, delivered one at a time.
    for id in ["b", "c"] {
        let job = claim_id(s, t, id, LONG).await;
        finish(s, t, &job, Finish::Done).await;
    }
    assert_eq!(s.deliver_ends(t, 1).await.unwrap(), 1);
    assert!(claim(s, t, 0, LONG).await.ends_pending, "one end left");
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 1);
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 0);
    let b = status(s, id).await;
    assert_eq!((b.total, b.succeeded), (3, 3));
    assert!(b.completed_at_ms.is_some_and(|at| at >= before));
}

pub(crate) async fn batch_success_and_complete_callbacks_fire_once_when_the_last_member_succeeds(
    store: Arc<dyn Store>,
) {
    let (s, t1, t2) = (&*store, &topic("batch_ok_1"), &topic("batch_ok_2"));
    let (id, cb) = (&topic("batch_ok_id"), callback_topics("batch_ok"));
    let jobs = vec![member(t1, "a"), member(t2, "b")];
    create_batch(s, id, new_batch(jobs, callbacks(&cb), false)).await;

    end_member(s, t1, "a", Finish::Done).await;
    let result = Finish::Succeeded {
        result: b"42".to_vec(),
    };
    end_member(s, t2, "b", result).await;
    assert!(fired(s, id).await.is_empty(), "the batch is still open");
    assert!(claim_all(s, &cb.1).await.is_empty());

    assert_eq!(
        s.batch_add(id, Vec::new(), true).await.unwrap(),
        BatchAdded::Added { new: 0 }
    );
    assert_eq!(
        fired(s, id).await,
        [CallbackKind::Success, CallbackKind::Complete]
    );
    assert!(status(s, id).await.completed_at_ms.is_some());
    let success = claim_all(s, &cb.0).await;
    assert_eq!(success, [("on-success".to_owned(), b"s".to_vec())]);
    let complete = claim_all(s, &cb.1).await;
    assert_eq!(complete, [("on-complete".to_owned(), b"c".to_vec())]);
    assert!(claim_all(s, &cb.2).await.is_empty(), "nothing died");

    // Nothing fires twice, whatever runs again.
    assert_eq!(s.deliver_ends(t1, 100).await.unwrap(), 0);
    s.recover_batches(100).await.unwrap();
    s.batch_add(id, Vec::new(), true).await.unwrap();
    for t in [&cb.0, &cb.1, &cb.2] {
        assert!(claim_all(s, t).await.is_empty());
        assert_eq!(s.counts(t).await.unwrap().ready, 0);
    }
}

pub(crate) async fn batch_death_callback_fires_at_the_first_death_only_once(store: Arc<dyn Store>) {
    let (s, t, id) = (&*store, &topic("batch_death"), &topic("batch_death_id"));
    let cb = callback_topics("batch_death");
    let jobs = vec![member(t, "a"), member(t, "b"), member(t, "c")];
    create_batch(s, id, new_batch(jobs, callbacks(&cb), true)).await;

    end_member(s, t, "a", dead(b"final a", "boom a")).await;
    assert_eq!(fired(s, id).await, [CallbackKind::Death]);
    let death = claim_all(s, &cb.2).await;
    assert_eq!(death, [("on-death".to_owned(), b"d".to_vec())]);
    assert_eq!(counted(s, id).await, (3, 0, 1, 0));

    end_member(s, t, "b", dead(b"final b", "boom b")).await;
    assert!(
        claim_all(s, &cb.2).await.is_empty(),
        "a second death fires nothing"
    );
    end_member(s, t, "c", Finish::Done).await;
    assert_eq!(counted(s, id).await, (3, 1, 2, 0));
    assert_eq!(
        fired(s, id).await,
        [CallbackKind::Complete, CallbackKind::Death]
    );
    assert_eq!(claim_all(s, &cb.1).await.len(), 1);
    assert!(
        claim_all(s, &cb.0).await.is_empty(),
        "not every member succeeded"
    );
    let members = s.batch_members(id, 0, 10).await.unwrap();
    let states: Vec<_> = members.iter().map(|m| m.state).collect();
    assert_eq!(
        states,
        [MemberState::Dead, MemberState::Dead, MemberState::Succeeded]
    );
}

pub(crate) async fn batch_cancelled_members_count_cancelled_and_complete_without_success(
    store: Arc<dyn Store>,
) {
    let (s, t, id) = (&*store, &topic("batch_cancel"), &topic("batch_cancel_id"));
    let cb = callback_topics("batch_cancel");
    let later = BatchJob::new(t, new_job("due", REC, Due::In(60_000)));
    let jobs = vec![later, member(t, "running"), member(t, "swept")];
    create_batch(s, id, new_batch(jobs, callbacks(&cb), true)).await;

    let running = claim_id(s, t, "running", LONG).await;
    assert_eq!(s.cancel(t, "due").await.unwrap(), CancelOutcome::Removed);
    assert!(
        claim(s, t, 0, LONG).await.ends_pending,
        "a due job cancelled ended"
    );
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 1);
    assert_eq!(counted(s, id).await, (3, 0, 0, 1));

    // An active job cancelled ends when its retry ends it...
    assert_eq!(s.cancel(t, "running").await.unwrap(), CancelOutcome::Marked);
    assert!(!claim(s, t, 0, LONG).await.ends_pending, "still running");
    assert_eq!(
        finish(s, t, &running, retry(REC, 0, true)).await,
        FinishOutcome::Cancelled
    );
    assert!(claim(s, t, 0, LONG).await.ends_pending);
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 1);
    assert_eq!(counted(s, id).await, (3, 0, 0, 2));
    assert!(fired(s, id).await.is_empty(), "one member is still running");

    // ... or when the sweep of its expired lease does. Claimed just before it is cancelled: its short
    // lease must not expire (and be swept by a claim) before the cancel.
    claim_id(s, t, "swept", SHORT).await;
    assert_eq!(s.cancel(t, "swept").await.unwrap(), CancelOutcome::Marked);
    let Some(StoredState::Active { lease_deadline_ms }) = state(s, t, "swept").await else {
        panic!("swept is running")
    };
    wait_past(s, lease_deadline_ms).await;
    let sweep = claim(s, t, 0, LONG).await;
    assert_eq!((sweep.swept_dead, sweep.ends_pending), (1, true));
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 1);
    assert_eq!(counted(s, id).await, (3, 0, 0, 3));
    assert_eq!(fired(s, id).await, [CallbackKind::Complete]);
    assert_eq!(claim_all(s, &cb.1).await.len(), 1);
    assert!(claim_all(s, &cb.0).await.is_empty());
    assert!(claim_all(s, &cb.2).await.is_empty());
}

pub(crate) async fn batch_member_stalled_to_death_by_the_sweep_counts_dead(store: Arc<dyn Store>) {
    let (s, t, id) = (&*store, &topic("batch_stall"), &topic("batch_stall_id"));
    create_batch(s, id, new_batch(vec![member(t, "a")], Vec::new(), true)).await;
    let request = ClaimRequest::new(1, SHORT, 100, 0);
    let job = s.claim(t, request).await.unwrap().jobs.remove(0);
    assert_eq!(job.id, "a");
    let Some(StoredState::Active { lease_deadline_ms }) = state(s, t, "a").await else {
        panic!("a is running")
    };
    wait_past(s, lease_deadline_ms).await;

    let swept = s
        .claim(t, ClaimRequest::new(0, LONG, 100, 0))
        .await
        .unwrap();
    assert_eq!(swept.swept_dead, 1, "stalled more than stall_limit");
    assert!(
        swept.ends_pending,
        "the claim that swept it reports its end"
    );
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 1);
    assert_eq!(counted(s, id).await, (1, 0, 1, 0));
    assert!(status(s, id).await.completed_at_ms.is_some());
}

/// A dead member requeued by an operator is a new life of the job, which its batch no longer follows:
/// the batch counted its death.
pub(crate) async fn batch_dead_member_requeued_is_no_longer_followed(store: Arc<dyn Store>) {
    let (s, t, id) = (&*store, &topic("batch_requeue"), &topic("batch_requeue_id"));
    let cb = callback_topics("batch_requeue");
    create_batch(s, id, new_batch(vec![member(t, "a")], callbacks(&cb), true)).await;
    end_member(s, t, "a", dead(REC, "boom")).await;
    assert_eq!(
        fired(s, id).await,
        [CallbackKind::Complete, CallbackKind::Death]
    );

    let seq = s.dead_of(t, "a", 1).await.unwrap()[0].seq;
    let death = Death::new("a", seq);
    let requeued = s.dead_requeue(t, &death, REC.to_vec()).await.unwrap();
    assert!(matches!(requeued, RequeueOutcome::Requeued { .. }));
    let job = claim_id(s, t, "a", LONG).await;
    finish(s, t, &job, Finish::Done).await;
    assert!(!claim(s, t, 0, LONG).await.ends_pending);
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 0);
    assert_eq!(counted(s, id).await, (1, 0, 1, 0));
    assert!(claim_all(s, &cb.0).await.is_empty(), "no success");
    assert_eq!(claim_all(s, &cb.1).await.len(), 1);
    assert_eq!(claim_all(s, &cb.2).await.len(), 1);
}

pub(crate) async fn batch_member_retry_is_not_an_end(store: Arc<dyn Store>) {
    let (s, t, id) = (&*store, &topic("batch_retry"), &topic("batch_retry_id"));
    create_batch(s, id, new_batch(vec![member(t, "a")], Vec::new(), true)).await;
    let job = claim_id(s, t, "a", LONG).await;
    finish(s, t, &job, retry(b"attempt 2", 0, true)).await;
    assert!(!claim(s, t, 0, LONG).await.ends_pending);
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 0);
    assert_eq!(counted(s, id).await, (1, 0, 0, 0));

    // Its later success is its end.
    end_member(s, t, "a", Finish::Done).await;
    assert_eq!(counted(s, id).await, (1, 1, 0, 0));
}

pub(crate) async fn batch_ends_are_not_pending_for_a_job_nobody_follows(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("batch_none"));
    create(s, t, "alone", REC, Due::In(0)).await;
    let job = claim_id(s, t, "alone", LONG).await;
    finish(s, t, &job, Finish::Done).await;
    assert!(!claim(s, t, 0, LONG).await.ends_pending);
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 0);

    // Beside a followed job, an unfollowed one's end is not recorded either.
    let id = &topic("batch_none_id");
    create_batch(
        s,
        id,
        new_batch(vec![member(t, "followed")], Vec::new(), true),
    )
    .await;
    create(s, t, "other", REC, Due::In(0)).await;
    let batch = claim(s, t, 2, LONG).await;
    assert_eq!(batch.jobs.len(), 2);
    let other = batch.jobs.iter().find(|j| j.id == "other").unwrap();
    finish(s, t, other, dead(REC, "boom")).await;
    assert!(!claim(s, t, 0, LONG).await.ends_pending);
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 0);
    assert_eq!(
        s.deliver_ends(&topic("batch_nowhere"), 100).await.unwrap(),
        0
    );
}
