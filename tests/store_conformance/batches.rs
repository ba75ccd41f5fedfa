//! Batches at the store seam: created and added to once per member, members dispatched into their
//! topics (a live job of the id becomes the member), closing, listings; and the helpers of
//! `batch_ends.rs`, which follows members to their ends and the callbacks they fire.
//!
//! Batches are namespace-wide: each test names its batches with [`topic`], so that tests sharing a
//! server never see each other's.

use std::sync::Arc;

use postpone::store::{
    BatchAdded, BatchCreated, BatchJob, BatchStatus, CallbackKind, Due, MemberState, NewBatch,
    Store, StoredState,
};

use super::*;

/// A member (or callback) due now, with record `record`.
pub(super) fn job_in(topic: &str, id: &str, record: &[u8]) -> BatchJob {
    BatchJob::new(topic, new_job(id, record, Due::In(0)))
}

/// A member due now.
pub(super) fn member(topic: &str, id: &str) -> BatchJob {
    job_in(topic, id, REC)
}

/// A new batch of `jobs` with `callbacks`, closed when `close`.
pub(super) fn new_batch(
    jobs: Vec<BatchJob>,
    callbacks: Vec<(CallbackKind, BatchJob)>,
    close: bool,
) -> NewBatch {
    let mut batch = NewBatch::default();
    batch.description = "nightly import".to_owned();
    batch.jobs = jobs;
    batch.callbacks = callbacks;
    batch.close = close;
    batch
}

/// Creates a batch, which must be new.
pub(super) async fn create_batch(s: &dyn Store, id: &str, batch: NewBatch) {
    assert_eq!(
        s.batch_create(id, batch).await.unwrap(),
        BatchCreated::Created
    );
}

pub(super) async fn status(s: &dyn Store, id: &str) -> BatchStatus {
    s.batch(id).await.unwrap().expect("the batch exists")
}

/// (total, succeeded, dead, cancelled).
pub(super) async fn counted(s: &dyn Store, id: &str) -> (u64, u64, u64, u64) {
    let b = status(s, id).await;
    (b.total, b.succeeded, b.dead, b.cancelled)
}

/// The callbacks that fired, in kind order.
pub(super) async fn fired(s: &dyn Store, id: &str) -> Vec<CallbackKind> {
    let mut kinds: Vec<_> = status(s, id)
        .await
        .callbacks
        .into_iter()
        .filter_map(|(kind, fired)| fired.then_some(kind))
        .collect();
    kinds.sort();
    kinds
}

/// Everything due in `topic` now, claimed: (id, record).
pub(super) async fn claim_all(s: &dyn Store, topic: &str) -> Vec<(String, Vec<u8>)> {
    let batch = claim(s, topic, 100, LONG).await;
    batch.jobs.into_iter().map(|j| (j.id, j.record)).collect()
}

/// Claims member `id` and finishes it with `finish_as`; the next claim of the topic must report the
/// end pending, and one delivery must deliver it.
pub(super) async fn end_member(s: &dyn Store, topic: &str, id: &str, finish_as: Finish) {
    let job = claim_id(s, topic, id, LONG).await;
    assert_eq!(
        finish(s, topic, &job, finish_as).await,
        FinishOutcome::Applied
    );
    assert!(claim(s, topic, 0, LONG).await.ends_pending, "{id}'s end");
    assert_eq!(s.deliver_ends(topic, 100).await.unwrap(), 1);
}

/// The three callbacks, each in a topic of its own: (success, complete, death).
pub(super) fn callbacks(cb: &(String, String, String)) -> Vec<(CallbackKind, BatchJob)> {
    vec![
        (CallbackKind::Success, job_in(&cb.0, "on-success", b"s")),
        (CallbackKind::Complete, job_in(&cb.1, "on-complete", b"c")),
        (CallbackKind::Death, job_in(&cb.2, "on-death", b"d")),
    ]
}

pub(super) fn callback_topics(name: &str) -> (String, String, String) {
    (
        topic(&format!("{name}_success")),
        topic(&format!("{name}_complete")),
        topic(&format!("{name}_death")),
    )
}

pub(crate) async fn batch_create_puts_members_due_in_their_topics_and_counts_them(
    store: Arc<dyn Store>,
) {
    let s = &*store;
    let (t1, t2, id) = (&topic("batch_a"), &topic("batch_b"), &topic("batch_id"));
    let cb = callback_topics("batch_create");
    let before = now(s).await;
    let jobs = vec![member(t1, "x"), member(t2, "y"), member(t2, "z")];
    create_batch(s, id, new_batch(jobs, callbacks(&cb), false)).await;
    let after = now(s).await;

    for (t, ids) in [(t1, &["x"][..]), (t2, &["y", "z"][..])] {
        for member in ids {
            let state = state(s, t, member).await;
            assert!(
                matches!(state, Some(StoredState::Due { .. })),
                "{member} due in its topic: {state:?}"
            );
        }
    }
    let b = status(s, id).await;
    assert_eq!(b.id, *id);
    assert_eq!(b.description, "nightly import");
    assert!(b.created_at_ms >= before && b.created_at_ms <= after);
    assert_eq!((b.total, b.succeeded, b.dead, b.cancelled), (3, 0, 0, 0));
    assert_eq!(b.pending(), 3);
    assert!(!b.closed);
    assert_eq!(b.completed_at_ms, None);
    let mut kinds = b.callbacks.clone();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            (CallbackKind::Success, false),
            (CallbackKind::Complete, false),
            (CallbackKind::Death, false)
        ]
    );

    // A batch of that id exists: nothing changes, and the new member is not enqueued.
    let again = new_batch(vec![member(t1, "w")], Vec::new(), true);
    assert_eq!(
        s.batch_create(id, again).await.unwrap(),
        BatchCreated::Exists
    );
    assert_eq!(state(s, t1, "w").await, None);
    assert_eq!(status(s, id).await, b);
    assert_eq!(s.batch("no-such-batch").await.unwrap(), None);
}

pub(crate) async fn batch_add_counts_new_members_once_and_refuses_closed_or_unknown_batches(
    store: Arc<dyn Store>,
) {
    let (s, t, id) = (&*store, &topic("batch_add"), &topic("batch_add_id"));
    create_batch(s, id, new_batch(vec![member(t, "a")], Vec::new(), false)).await;

    let added = s.batch_add(id, vec![member(t, "b")], false).await.unwrap();
    assert_eq!(added, BatchAdded::Added { new: 1 });
    let twice = vec![
        member(t, "a"),
        member(t, "b"),
        member(t, "c"),
        member(t, "c"),
    ];
    let added = s.batch_add(id, twice, false).await.unwrap();
    assert_eq!(added, BatchAdded::Added { new: 1 }, "only c is new");
    assert_eq!(counted(s, id).await, (3, 0, 0, 0));
    assert_eq!(s.counts(t).await.unwrap().ready, 3, "each member once");

    let added = s.batch_add(id, vec![member(t, "d")], true).await.unwrap();
    assert_eq!(added, BatchAdded::Added { new: 1 });
    assert!(status(s, id).await.closed);
    let refused = s.batch_add(id, vec![member(t, "e")], false).await.unwrap();
    assert_eq!(refused, BatchAdded::Closed);
    assert_eq!(
        s.batch_add(id, Vec::new(), true).await.unwrap(),
        BatchAdded::Closed
    );
    assert_eq!(
        state(s, t, "e").await,
        None,
        "nothing added to a closed batch"
    );
    assert_eq!(counted(s, id).await, (4, 0, 0, 0));

    let unknown = s.batch_add("no-such-batch", vec![member(t, "f")], true);
    assert_eq!(unknown.await.unwrap(), BatchAdded::NotFound);
    assert_eq!(state(s, t, "f").await, None);
}

pub(crate) async fn batch_member_already_live_in_its_topic_is_that_job(store: Arc<dyn Store>) {
    let (s, t, id) = (&*store, &topic("batch_live"), &topic("batch_live_id"));
    let due_at = create(s, t, "due", b"mine", Due::In(60_000)).await;
    create(s, t, "running", b"theirs", Due::In(0)).await;
    let running = claim_id(s, t, "running", LONG).await;

    let jobs = vec![member(t, "due"), member(t, "running")];
    create_batch(s, id, new_batch(jobs, Vec::new(), true)).await;
    let stored = s.job(t, "due").await.unwrap().unwrap();
    assert_eq!(stored.state, StoredState::Due { due_at_ms: due_at });
    assert_eq!(stored.record, b"mine", "left as it was");
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.scheduled, counts.ready, counts.active), (1, 0, 1));
    assert_eq!(counted(s, id).await, (2, 0, 0, 0));

    finish(s, t, &running, Finish::Done).await;
    assert_eq!(s.deliver_ends(t, 100).await.unwrap(), 1);
    assert_eq!(counted(s, id).await, (2, 1, 0, 0));
}

pub(crate) async fn batch_empty_and_closed_fires_complete_and_success(store: Arc<dyn Store>) {
    let s = &*store;
    let (id, cb) = (&topic("batch_empty_id"), callback_topics("batch_empty"));
    create_batch(s, id, new_batch(Vec::new(), callbacks(&cb), true)).await;
    let b = status(s, id).await;
    assert_eq!((b.total, b.closed), (0, true));
    assert!(b.completed_at_ms.is_some());
    assert_eq!(
        fired(s, id).await,
        [CallbackKind::Success, CallbackKind::Complete]
    );
    assert_eq!(claim_all(s, &cb.0).await.len(), 1);
    assert_eq!(claim_all(s, &cb.1).await.len(), 1);
    assert!(claim_all(s, &cb.2).await.is_empty());

    // Open, then closed by an add of nothing.
    let (id, cb) = (
        &topic("batch_empty_id"),
        callback_topics("batch_empty_later"),
    );
    create_batch(s, id, new_batch(Vec::new(), callbacks(&cb), false)).await;
    assert!(fired(s, id).await.is_empty(), "open");
    let closed = s.batch_add(id, Vec::new(), true).await.unwrap();
    assert_eq!(closed, BatchAdded::Added { new: 0 });
    assert_eq!(
        fired(s, id).await,
        [CallbackKind::Success, CallbackKind::Complete]
    );
    assert_eq!(claim_all(s, &cb.0).await.len(), 1);
    assert_eq!(claim_all(s, &cb.1).await.len(), 1);
}

pub(crate) async fn batch_members_are_listed_in_add_order_with_offset_and_limit(
    store: Arc<dyn Store>,
) {
    let (s, t1, t2) = (&*store, &topic("batch_list_1"), &topic("batch_list_2"));
    let id = &topic("batch_list_id");
    let first = vec![member(t1, "z"), member(t2, "a")];
    create_batch(s, id, new_batch(first, Vec::new(), false)).await;
    let more = vec![member(t1, "m"), member(t2, "z"), member(t1, "a")];
    s.batch_add(id, more, false).await.unwrap();

    let listed = s.batch_members(id, 0, 100).await.unwrap();
    let refs: Vec<_> = listed
        .iter()
        .map(|m| (m.topic.as_str(), m.id.as_str()))
        .collect();
    let expected = [(t1, "z"), (t2, "a"), (t1, "m"), (t2, "z"), (t1, "a")];
    let expected: Vec<_> = expected.iter().map(|(t, i)| (t.as_str(), *i)).collect();
    assert_eq!(refs, expected);
    assert!(listed.iter().all(|m| m.state == MemberState::Pending));
    let page = s.batch_members(id, 1, 2).await.unwrap();
    assert_eq!(page, listed[1..3]);
    assert!(s.batch_members(id, 5, 10).await.unwrap().is_empty());
    assert!(s.batch_members(id, 0, 0).await.unwrap().is_empty());
    assert!(s
        .batch_members("no-such-batch", 0, 10)
        .await
        .unwrap()
        .is_empty());

    end_member(s, t2, "a", Finish::Done).await;
    let second = s.batch_members(id, 1, 1).await.unwrap();
    assert_eq!(
        (second[0].id.as_str(), second[0].state),
        ("a", MemberState::Succeeded)
    );
}

pub(crate) async fn batches_are_listed_newest_first(store: Arc<dyn Store>) {
    let s = &*store;
    let mut ids: Vec<String> = Vec::new();
    for n in 0..3 {
        // Each batch created in a later ms than the one before.
        if let Some(previous) = ids.last() {
            wait_past(s, status(s, previous).await.created_at_ms).await;
        }
        let id = topic(&format!("batch_listed_{n}"));
        create_batch(s, &id, new_batch(Vec::new(), Vec::new(), false)).await;
        ids.push(id);
    }
    // Other tests' batches may share the namespace: only ours are looked at.
    let listed = s.batches(0, 10_000).await.unwrap();
    let ours: Vec<_> = listed.iter().filter(|b| ids.contains(&b.id)).collect();
    let newest_first: Vec<_> = ids.iter().rev().collect();
    assert_eq!(ours.iter().map(|b| &b.id).collect::<Vec<_>>(), newest_first);
    assert!(ours
        .windows(2)
        .all(|w| w[0].created_at_ms > w[1].created_at_ms));
    assert_eq!(*ours[0], status(s, &ids[2]).await);

    let at = listed.iter().position(|b| b.id == ids[1]).unwrap();
    let page = s.batches(at, 1).await.unwrap();
    assert_eq!(page.len(), 1);
    assert!(s.batches(0, 0).await.unwrap().is_empty());
}
