//! Jobs that wait for jobs at the store seam: a job enqueued after its parents waits (not claimable,
//! holding its id, counted waiting) until each parent's end is delivered, then becomes due at the time
//! its enqueue asked for, counted from its release; parents already ended count at once, unknown ones
//! enqueue nothing. How parents' failures end it is in `workflow_failures.rs`.

use std::sync::Arc;

use postpone::store::workflow::WAITING_DUE_MS;
use postpone::store::{
    AfterOutcome, CancelOutcome, Due, EnqueueOutcome, NewJob, OnParentFailure, PageQuery,
    PageState, ParentRef, RescheduleOutcome, Retention, Store, StoredState,
};

use super::*;

/// `job`, enqueued into `topic` to wait for `parents` with `policy`.
pub(super) async fn after(
    s: &dyn Store,
    topic: &str,
    job: NewJob,
    parents: &[&ParentRef],
    policy: OnParentFailure,
) -> AfterOutcome {
    let parents = parents.iter().map(|p| (*p).clone()).collect();
    s.enqueue_after(topic, job, parents, policy).await.unwrap()
}

/// A parent due now in `topic`, enqueued there.
pub(super) async fn live_parent(s: &dyn Store, topic: &str, id: &str) -> ParentRef {
    create(s, topic, id, REC, Due::In(0)).await;
    ParentRef::new(topic, id)
}

/// The parents job `id` still waits for (it must be waiting).
pub(super) async fn waits_for(s: &dyn Store, topic: &str, id: &str) -> Vec<ParentRef> {
    match state(s, topic, id).await {
        Some(StoredState::Waiting { parents }) => parents,
        other => panic!("{id:?} should be waiting, is {other:?}"),
    }
}

/// Ends parent `p` as `finish_as` (it must be the only job due in its topic), and delivers that end
/// once: a second delivery has nothing left.
pub(super) async fn end_parent(s: &dyn Store, p: &ParentRef, finish_as: Finish) {
    let job = claim_id(s, &p.topic, &p.id, LONG).await;
    assert_eq!(
        finish(s, &p.topic, &job, finish_as).await,
        FinishOutcome::Applied
    );
    assert!(
        claim(s, &p.topic, 0, LONG).await.ends_pending,
        "{p:?}'s end"
    );
    assert_eq!(s.deliver_ends(&p.topic, 100).await.unwrap(), 1);
    assert_eq!(s.deliver_ends(&p.topic, 100).await.unwrap(), 0);
}

/// Job `id` is due, at a time no later than now.
async fn due_now(s: &dyn Store, topic: &str, id: &str) -> i64 {
    match state(s, topic, id).await {
        Some(StoredState::Due { due_at_ms }) if due_at_ms <= now(s).await => due_at_ms,
        other => panic!("{id:?} should be due now, is {other:?}"),
    }
}

pub(crate) async fn workflow_job_waits_for_its_parent_then_runs_once_it_succeeded(
    store: Arc<dyn Store>,
) {
    let (s, ta, tb) = (&*store, &topic("wf_wait_a"), &topic("wf_wait_b"));
    let p = live_parent(s, ta, "p").await;
    let job = new_job("b", b"rec b", Due::In(0));
    let out = after(s, tb, job, &[&p], OnParentFailure::DeadLetter).await;
    assert_eq!(out, AfterOutcome::Waiting { parents_left: 1 });

    assert!(
        claim(s, tb, 10, LONG).await.jobs.is_empty(),
        "not claimable"
    );
    assert_eq!(waits_for(s, tb, "b").await, vec![p.clone()]);
    assert_eq!(s.job(tb, "b").await.unwrap().unwrap().record, b"rec b");
    let c = s.counts(tb).await.unwrap();
    assert_eq!((c.waiting, c.scheduled, c.ready), (1, 0, 0));
    let scheduled = PageQuery::new(PageState::Scheduled, 10);
    let page = s.page(tb, &scheduled).await.unwrap();
    assert!(page.is_empty(), "not listed as scheduled: {page:?}");

    // It holds its id: an enqueue, even replacing, changes nothing; it has no due time to move.
    let waiting = EnqueueOutcome::Exists {
        due_at_ms: WAITING_DUE_MS,
    };
    assert_eq!(enqueue(s, tb, "b", b"other", Due::In(0)).await, waiting);
    let replace = s.enqueue(tb, vec![replacing("b", b"other", Due::In(0))]);
    assert_eq!(replace.await.unwrap(), [waiting]);
    let again = new_job("b", b"other", Due::In(0));
    let out = after(s, tb, again, &[&p], OnParentFailure::DeadLetter).await;
    assert_eq!(out, AfterOutcome::Exists(waiting));
    let moved = s.reschedule(tb, "b", Due::In(0)).await.unwrap();
    assert_eq!(moved, RescheduleOutcome::Waiting);
    assert_eq!(s.job(tb, "b").await.unwrap().unwrap().record, b"rec b");
    assert_eq!(waits_for(s, tb, "b").await, vec![p.clone()]);

    end_parent(s, &p, Finish::Done).await;
    due_now(s, tb, "b").await;
    assert_eq!(s.counts(tb).await.unwrap().waiting, 0);
    assert_eq!(claim_id(s, tb, "b", LONG).await.record, b"rec b");
}

pub(crate) async fn workflow_two_parents_in_two_topics_release_the_job_after_both_in_any_order(
    store: Arc<dyn Store>,
) {
    let s = &*store;
    for first_ends_a in [true, false] {
        let (ta, tb, tc) = (&topic("wf_two_a"), &topic("wf_two_b"), &topic("wf_two_c"));
        let (a, b) = (live_parent(s, ta, "a").await, live_parent(s, tb, "b").await);
        let job = new_job("c", REC, Due::In(0));
        let out = after(s, tc, job, &[&a, &b], OnParentFailure::DeadLetter).await;
        assert_eq!(out, AfterOutcome::Waiting { parents_left: 2 });
        assert_eq!(waits_for(s, tc, "c").await, [a.clone(), b.clone()]);

        let (first, second) = if first_ends_a { (&a, &b) } else { (&b, &a) };
        end_parent(s, first, Finish::Done).await;
        assert_eq!(waits_for(s, tc, "c").await, vec![second.clone()]);
        assert!(
            claim(s, tc, 10, LONG).await.jobs.is_empty(),
            "one parent left"
        );

        let result = Finish::Succeeded {
            result: b"42".to_vec(),
        };
        end_parent(s, second, result).await;
        due_now(s, tc, "c").await;
        claim_id(s, tc, "c", LONG).await;
    }
}

pub(crate) async fn workflow_parent_named_twice_counts_once(store: Arc<dyn Store>) {
    let (s, ta, tb) = (&*store, &topic("wf_twice_a"), &topic("wf_twice_b"));
    let p = live_parent(s, ta, "p").await;
    let job = new_job("b", REC, Due::In(0));
    let out = after(s, tb, job, &[&p, &p], OnParentFailure::DeadLetter).await;
    assert_eq!(out, AfterOutcome::Waiting { parents_left: 1 });
    assert_eq!(waits_for(s, tb, "b").await, vec![p.clone()]);
    end_parent(s, &p, Finish::Done).await;
    claim_id(s, tb, "b", LONG).await;
}

pub(crate) async fn workflow_an_end_delivered_twice_counts_once(store: Arc<dyn Store>) {
    let (s, ta, tb) = (&*store, &topic("wf_once_a"), &topic("wf_once_b"));
    let (p, q) = (live_parent(s, ta, "p").await, live_parent(s, ta, "q").await);
    let job = new_job("b", REC, Due::In(0));
    let out = after(s, tb, job, &[&p, &q], OnParentFailure::DeadLetter).await;
    assert_eq!(out, AfterOutcome::Waiting { parents_left: 2 });

    let running = claim_id(s, ta, "p", LONG).await;
    finish(s, ta, &running, Finish::Done).await;
    assert_eq!(s.deliver_ends(ta, 100).await.unwrap(), 1);
    assert_eq!(s.deliver_ends(ta, 100).await.unwrap(), 0, "delivered");
    assert!(!claim(s, ta, 0, LONG).await.ends_pending);
    assert_eq!(waits_for(s, tb, "b").await, vec![q.clone()]);
    assert_eq!(s.counts(tb).await.unwrap().waiting, 1);
}

pub(crate) async fn workflow_parent_already_succeeded_and_kept_or_none_enqueues_the_job_at_once(
    store: Arc<dyn Store>,
) {
    let (s, ta, tb) = (&*store, &topic("wf_kept_a"), &topic("wf_kept_b"));
    s.retain(ta, Some(Retention::new(3_600_000, 100)), 100)
        .await
        .unwrap();
    let p = live_parent(s, ta, "p").await;
    let job = claim_id(s, ta, "p", LONG).await;
    finish(s, ta, &job, Finish::Done).await;

    let before = now(s).await;
    let job = new_job("b", REC, Due::In(0));
    match after(s, tb, job, &[&p], OnParentFailure::DeadLetter).await {
        AfterOutcome::Enqueued(EnqueueOutcome::Created { due_at_ms }) => {
            assert!(due_at_ms >= before && due_at_ms <= now(s).await)
        }
        other => panic!("a kept success counts as done: {other:?}"),
    }
    assert_eq!(s.counts(tb).await.unwrap().waiting, 0);
    claim_id(s, tb, "b", LONG).await;

    // With no parent at all, as an enqueue.
    let tc = &topic("wf_kept_c");
    match after(
        s,
        tc,
        new_job("c", REC, Due::In(0)),
        &[],
        OnParentFailure::Cancel,
    )
    .await
    {
        AfterOutcome::Enqueued(EnqueueOutcome::Created { .. }) => {}
        other => panic!("no parent is an enqueue: {other:?}"),
    }
    claim_id(s, tc, "c", LONG).await;
}

pub(crate) async fn workflow_unknown_parent_is_missing_and_nothing_is_enqueued(
    store: Arc<dyn Store>,
) {
    let (s, ta, tb) = (&*store, &topic("wf_missing_a"), &topic("wf_missing_b"));
    let p = live_parent(s, ta, "p").await;
    let (gone, nowhere) = (
        ParentRef::new(ta, "gone"),
        ParentRef::new(topic("wf_none"), "x"),
    );
    for missing in [&gone, &nowhere] {
        let job = new_job("b", REC, Due::In(0));
        let out = after(s, tb, job, &[&p, missing], OnParentFailure::DeadLetter).await;
        assert_eq!(out, AfterOutcome::MissingParent(missing.clone()));
    }
    assert_eq!(state(s, tb, "b").await, None);
    let c = s.counts(tb).await.unwrap();
    assert_eq!((c.waiting, c.scheduled, c.ready), (0, 0, 0));

    // The live parent it named is not followed: its end records nothing to deliver.
    let job = claim_id(s, ta, "p", LONG).await;
    finish(s, ta, &job, Finish::Done).await;
    assert_eq!(s.deliver_ends(ta, 100).await.unwrap(), 0);
    assert_eq!(state(s, tb, "b").await, None);
    assert!(claim(s, tb, 10, LONG).await.jobs.is_empty());
}

pub(crate) async fn workflow_cancelled_waiting_job_is_gone_and_its_parents_end_changes_nothing(
    store: Arc<dyn Store>,
) {
    let (s, ta, tb) = (&*store, &topic("wf_cancel_a"), &topic("wf_cancel_b"));
    let p = live_parent(s, ta, "p").await;
    let job = new_job("b", REC, Due::In(0));
    after(s, tb, job, &[&p], OnParentFailure::DeadLetter).await;

    assert_eq!(s.cancel(tb, "b").await.unwrap(), CancelOutcome::Removed);
    let c = s.counts(tb).await.unwrap();
    assert_eq!((c.waiting, c.cancelled), (0, 1));
    assert_eq!(state(s, tb, "b").await, None);

    end_parent(s, &p, Finish::Done).await;
    assert_eq!(state(s, tb, "b").await, None);
    assert!(claim(s, tb, 10, LONG).await.jobs.is_empty());
    let c = s.counts(tb).await.unwrap();
    assert_eq!((c.waiting, c.scheduled, c.ready, c.cancelled), (0, 0, 0, 1));
}

pub(crate) async fn workflow_due_time_of_a_waiting_job_counts_from_its_release(
    store: Arc<dyn Store>,
) {
    const DELAY: u64 = 60_000;
    let (s, ta, tb) = (&*store, &topic("wf_due_a"), &topic("wf_due_b"));
    let p = live_parent(s, ta, "p").await;
    let parked = now(s).await;
    let later = new_job("later", REC, Due::In(DELAY)).priority(5);
    after(s, tb, later, &[&p], OnParentFailure::DeadLetter).await;
    let past = new_job("past", REC, Due::At(parked - 1000));
    after(s, tb, past, &[&p], OnParentFailure::DeadLetter).await;
    wait_past(s, parked).await;

    let before = now(s).await;
    end_parent(s, &p, Finish::Done).await;
    let released = now(s).await;
    match state(s, tb, "later").await {
        Some(StoredState::Due { due_at_ms }) => assert!(
            due_at_ms >= before + DELAY as i64 && due_at_ms <= released + DELAY as i64,
            "due {DELAY} ms after its release ({before}..{released}), not its enqueue \
             ({parked}): {due_at_ms}"
        ),
        other => panic!("later should be due, is {other:?}"),
    }
    assert!(
        due_now(s, tb, "past").await >= before,
        "a past time means now"
    );
    let c = s.counts(tb).await.unwrap();
    assert_eq!((c.waiting, c.scheduled, c.ready), (0, 1, 1));
}

pub(crate) async fn workflow_released_job_keeps_its_priority(store: Arc<dyn Store>) {
    let (s, ta, tb) = (&*store, &topic("wf_prio_a"), &topic("wf_prio_b"));
    let p = live_parent(s, ta, "p").await;
    let urgent = new_job("urgent", REC, Due::In(0)).priority(9);
    after(s, tb, urgent, &[&p], OnParentFailure::DeadLetter).await;
    create(s, tb, "plain", REC, Due::In(0)).await;
    wait_past(s, now(s).await).await;

    end_parent(s, &p, Finish::Done).await;
    claim_id(s, tb, "urgent", LONG).await;
    claim_id(s, tb, "plain", LONG).await;
}
