//! Jobs that wait for jobs whose parents fail: a parent's death or cancellation dead-letters the job
//! (its reason naming the parent, its hook pending), cancels it, or counts as done, by the job's
//! policy; a job ended that way ends like any other, so chains propagate; a parent already dead ends
//! the job at once. The helpers are in `workflow_deps.rs`.

use std::sync::Arc;

use postpone::store::{
    AfterOutcome, BatchCreated, BatchJob, CancelOutcome, Due, Ended, EnqueueOutcome, NewBatch,
    OnParentFailure, ParentRef, Store, StoredState,
};

use super::workflow_deps::{after, end_parent, live_parent};
use super::*;

/// Job `id` is dead for `reason`, its hook pending; its one death is claimable by the hook, with
/// the job's record.
async fn dead_for(s: &dyn Store, topic: &str, id: &str, reason: &str) {
    match state(s, topic, id).await {
        Some(StoredState::Dead {
            reason: why,
            delivered,
            ..
        }) => {
            assert_eq!(why, reason);
            assert!(!delivered, "its hook is pending");
        }
        other => panic!("{id:?} should be dead, is {other:?}"),
    }
    let hooks = s.dead_claim(topic, 10, LONG).await.unwrap();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!(
        (hooks[0].id.as_str(), hooks[0].reason.as_str()),
        (id, reason)
    );
    assert_eq!(hooks[0].record, format!("rec {id}").into_bytes());
    let c = s.counts(topic).await.unwrap();
    assert_eq!(
        (c.dead, c.dead_pending, c.dead_total, c.waiting),
        (1, 1, 1, 0)
    );
}

/// Job `id` with record `rec <id>`, due now.
fn job(id: &str) -> postpone::store::NewJob {
    new_job(id, format!("rec {id}").as_bytes(), Due::In(0))
}

pub(crate) async fn workflow_parent_death_dead_letters_the_waiting_job(store: Arc<dyn Store>) {
    let (s, ta, tb) = (&*store, &topic("wf_death_a"), &topic("wf_death_b"));
    let p = live_parent(s, ta, "p").await;
    let out = after(s, tb, job("b"), &[&p], OnParentFailure::DeadLetter).await;
    assert_eq!(out, AfterOutcome::Waiting { parents_left: 1 });

    end_parent(s, &p, dead(b"final p", "boom")).await;
    dead_for(s, tb, "b", &format!("parent {ta}/p died: boom")).await;
    assert!(claim(s, tb, 10, LONG).await.jobs.is_empty());
    assert_eq!(s.counts(tb).await.unwrap().failed, 0, "no attempt failed");
}

pub(crate) async fn workflow_parent_death_cancels_or_counts_as_done_by_the_jobs_policy(
    store: Arc<dyn Store>,
) {
    let (s, ta, tb) = (&*store, &topic("wf_policy_a"), &topic("wf_policy_b"));
    let p = live_parent(s, ta, "p").await;
    let q = live_parent(s, ta, "q").await;
    let out = after(s, tb, job("cancel"), &[&p], OnParentFailure::Cancel).await;
    assert_eq!(out, AfterOutcome::Waiting { parents_left: 1 });
    let out = after(s, tb, job("run"), &[&p, &q], OnParentFailure::Run).await;
    assert_eq!(out, AfterOutcome::Waiting { parents_left: 2 });

    // One end, heard by both.
    let running = claim_id(s, ta, "p", LONG).await;
    finish(s, ta, &running, dead(b"final p", "boom")).await;
    assert_eq!(s.deliver_ends(ta, 100).await.unwrap(), 1);
    assert_eq!(state(s, tb, "cancel").await, None, "cancelled");
    assert_eq!(
        s.cancel(tb, "cancel").await.unwrap(),
        CancelOutcome::NotFound
    );
    let c = s.counts(tb).await.unwrap();
    assert_eq!((c.cancelled, c.dead, c.waiting), (1, 0, 1));
    match state(s, tb, "run").await {
        Some(StoredState::Waiting { parents }) => assert_eq!(parents, vec![q.clone()]),
        other => panic!("run should wait for q only, is {other:?}"),
    }

    end_parent(s, &q, Finish::Done).await;
    assert_eq!(claim_id(s, tb, "run", LONG).await.record, b"rec run");
}

pub(crate) async fn workflow_cancelled_parent_dead_letters_the_job_as_cancelled(
    store: Arc<dyn Store>,
) {
    let (s, ta, tb) = (&*store, &topic("wf_pcancel_a"), &topic("wf_pcancel_b"));
    let p = live_parent(s, ta, "p").await;
    after(s, tb, job("b"), &[&p], OnParentFailure::DeadLetter).await;

    assert_eq!(s.cancel(ta, "p").await.unwrap(), CancelOutcome::Removed);
    assert!(claim(s, ta, 0, LONG).await.ends_pending);
    assert_eq!(s.deliver_ends(ta, 100).await.unwrap(), 1);
    assert_eq!(s.deliver_ends(ta, 100).await.unwrap(), 0);
    dead_for(s, tb, "b", &format!("parent {ta}/p was cancelled")).await;
}

pub(crate) async fn workflow_death_propagates_down_a_chain_of_three(store: Arc<dyn Store>) {
    let s = &*store;
    let (ta, tb, tc) = (
        &topic("wf_chain_a"),
        &topic("wf_chain_b"),
        &topic("wf_chain_c"),
    );
    let a = live_parent(s, ta, "a").await;
    let b = ParentRef::new(tb, "b");
    let out = after(s, tb, job("b"), &[&a], OnParentFailure::DeadLetter).await;
    assert_eq!(out, AfterOutcome::Waiting { parents_left: 1 });
    let out = after(s, tc, job("c"), &[&b], OnParentFailure::DeadLetter).await;
    assert_eq!(
        out,
        AfterOutcome::Waiting { parents_left: 1 },
        "a waiting job is live"
    );

    end_parent(s, &a, dead(b"final a", "boom")).await;
    let b_why = format!("parent {ta}/a died: boom");
    dead_for(s, tb, "b", &b_why).await;
    assert!(
        claim(s, tb, 0, LONG).await.ends_pending,
        "b's death is an end"
    );
    let c = state(s, tc, "c").await;
    assert!(matches!(c, Some(StoredState::Waiting { .. })), "{c:?}");
    assert_eq!(s.deliver_ends(tb, 100).await.unwrap(), 1);
    assert_eq!(s.deliver_ends(tb, 100).await.unwrap(), 0);
    dead_for(s, tc, "c", &format!("parent {tb}/b died: {b_why}")).await;
}

pub(crate) async fn workflow_parent_already_dead_ends_the_job_at_once_by_its_policy(
    store: Arc<dyn Store>,
) {
    let (s, ta, tb) = (&*store, &topic("wf_dead_a"), &topic("wf_dead_b"));
    make_dead(s, ta, &["p"]).await;
    let p = ParentRef::new(ta, "p");
    let why = format!("parent {ta}/p died: boom p");

    let out = after(s, tb, job("b"), &[&p], OnParentFailure::DeadLetter).await;
    assert_eq!(
        out,
        AfterOutcome::Ended(Ended::Dead {
            reason: why.clone()
        })
    );
    dead_for(s, tb, "b", &why).await;

    let out = after(s, tb, job("cancel"), &[&p], OnParentFailure::Cancel).await;
    assert_eq!(out, AfterOutcome::Ended(Ended::Cancelled));
    assert_eq!(state(s, tb, "cancel").await, None);
    assert_eq!(s.counts(tb).await.unwrap().cancelled, 1);

    match after(s, tb, job("run"), &[&p], OnParentFailure::Run).await {
        AfterOutcome::Enqueued(EnqueueOutcome::Created { .. }) => {}
        other => panic!("with Run a dead parent counts as done: {other:?}"),
    }
    assert_eq!(claim_id(s, tb, "run", LONG).await.record, b"rec run");
}

pub(crate) async fn workflow_batch_hears_the_end_of_a_waiting_member_its_parent_killed(
    store: Arc<dyn Store>,
) {
    let (s, ta, tb) = (&*store, &topic("wf_batch_a"), &topic("wf_batch_b"));
    let id = &topic("wf_batch_id");
    let p = live_parent(s, ta, "p").await;
    after(s, tb, job("b"), &[&p], OnParentFailure::DeadLetter).await;
    let member = BatchJob::new(tb.as_str(), new_job("b", b"other", Due::In(0)));
    let mut batch = NewBatch::default();
    batch.jobs = vec![member];
    batch.close = true;
    assert_eq!(
        s.batch_create(id, batch).await.unwrap(),
        BatchCreated::Created
    );
    assert_eq!(
        s.counts(tb).await.unwrap().waiting,
        1,
        "the member is that job"
    );

    end_parent(s, &p, dead(b"final p", "boom")).await;
    dead_for(s, tb, "b", &format!("parent {ta}/p died: boom")).await;
    assert_eq!(s.deliver_ends(tb, 100).await.unwrap(), 1);
    let status = s.batch(id).await.unwrap().expect("the batch");
    assert_eq!((status.total, status.dead), (1, 1));
    assert!(status.completed_at_ms.is_some());
}
