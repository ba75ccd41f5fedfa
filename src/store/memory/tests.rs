//! Memory-only behaviour: the manual clock, and exact times. The shared semantics are pinned by the
//! conformance suite in `tests/store_conformance`.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::store::{ClaimBatch, ClaimedJob, Finish, StoredState};
use crate::{KeyLimits, RateLimit};

const T0: i64 = 1_700_000_000_000;

fn store() -> (Arc<ManualClock>, MemoryStore) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = MemoryStore::with_clock(clock.clone());
    (clock, store)
}

fn new_job(id: &str, due: Due) -> NewJob {
    NewJob::new(id.to_owned(), id.as_bytes().to_vec(), due, false)
}

fn claim_req(max: usize, lease_ms: u64, stall_limit: u32) -> ClaimRequest {
    ClaimRequest::new(max, lease_ms, 100, stall_limit)
}

#[tokio::test]
async fn advancing_the_manual_clock_sends_hint_all() {
    let (clock, store) = store();
    let mut hints = store.hints();
    clock.advance(Duration::from_millis(5));
    assert_eq!(hints.try_recv().unwrap(), Hint::All);
    clock.set(T0);
    assert_eq!(hints.try_recv().unwrap(), Hint::All);
    assert_eq!(store.now_ms().await.unwrap(), T0);
}

#[tokio::test]
async fn one_manual_clock_wakes_every_store_on_it() {
    let clock = Arc::new(ManualClock::new(T0));
    let a = MemoryStore::with_clock(clock.clone());
    let b = MemoryStore::with_clock(clock.clone());
    let (mut ha, mut hb) = (a.hints(), b.hints());
    clock.advance(Duration::from_secs(1));
    assert_eq!(ha.try_recv().unwrap(), Hint::All);
    assert_eq!(hb.try_recv().unwrap(), Hint::All);
}

#[tokio::test]
async fn jobs_become_due_when_the_clock_moves() {
    let (clock, store) = store();
    let out = store
        .enqueue("t", vec![new_job("order:42", Due::In(30 * 60_000))])
        .await
        .unwrap();
    assert_eq!(
        out,
        [EnqueueOutcome::Created {
            due_at_ms: T0 + 30 * 60_000
        }]
    );
    let batch = store.claim("t", claim_req(10, 1_000, 3)).await.unwrap();
    assert!(batch.jobs.is_empty());
    assert_eq!(batch.next_due_ms, Some(T0 + 30 * 60_000));

    clock.advance(Duration::from_millis(30 * 60_000 - 1));
    assert!(store
        .claim("t", claim_req(10, 1_000, 3))
        .await
        .unwrap()
        .jobs
        .is_empty());
    clock.advance(Duration::from_millis(1));
    let batch = store.claim("t", claim_req(10, 1_000, 3)).await.unwrap();
    assert_eq!(batch.now_ms(), T0 + 30 * 60_000);
    assert_eq!(batch.jobs.len(), 1);
    assert_eq!(batch.jobs[0].due_at_ms, T0 + 30 * 60_000);
    assert_eq!(batch.next_lease_deadline_ms, Some(T0 + 30 * 60_000 + 1_000));
}

#[tokio::test]
async fn a_past_absolute_time_is_stored_as_now() {
    let (_clock, store) = store();
    let out = store
        .enqueue("t", vec![new_job("a", Due::At(T0 - 5_000))])
        .await
        .unwrap();
    assert_eq!(out, [EnqueueOutcome::Created { due_at_ms: T0 }]);
}

#[tokio::test]
async fn leases_expire_by_the_clock_and_stalls_are_counted_exactly() {
    let (clock, store) = store();
    store
        .enqueue("t", vec![new_job("a", Due::In(0))])
        .await
        .unwrap();
    let first = store
        .claim("t", claim_req(1, 100, 1))
        .await
        .unwrap()
        .jobs
        .remove(0);

    // At the deadline the lease has expired (deadline <= now).
    clock.advance(Duration::from_millis(100));
    let batch = store.claim("t", claim_req(1, 100, 1)).await.unwrap();
    assert_eq!((batch.swept, batch.swept_dead), (1, 0));
    assert_eq!(batch.jobs.len(), 1);
    assert_ne!(batch.jobs[0].token, first.token);
    assert_eq!(
        batch.jobs[0].due_at_ms, T0,
        "a swept job keeps its due time (its place in line)"
    );

    clock.advance(Duration::from_millis(100));
    let batch = store.claim("t", claim_req(1, 100, 1)).await.unwrap();
    assert_eq!((batch.swept, batch.swept_dead), (0, 1));
    let job = store.job("t", "a").await.unwrap().unwrap();
    assert_eq!(
        job.state,
        StoredState::Dead {
            seq: 1,
            died_at_ms: T0 + 200,
            reason: "stalled: lease expired 2 times".into(),
            delivered: false
        }
    );
    let counts = store.counts("t").await.unwrap();
    assert_eq!(
        (counts.stalled, counts.dead_total, counts.failed),
        (1, 1, 0)
    );
}

#[tokio::test]
async fn finished_and_cancelled_jobs_leave_nothing_behind() {
    let (clock, store) = store();
    let jobs = [
        "done",
        "retry-cancelled",
        "swept-cancelled",
        "x-due-cancelled",
    ];
    store
        .enqueue("t", jobs.iter().map(|id| new_job(id, Due::In(0))).collect())
        .await
        .unwrap();
    let batch = store.claim("t", claim_req(3, 100, 5)).await.unwrap();
    let token = batch.jobs[0].token;
    assert_eq!(
        store.cancel("t", "retry-cancelled").await.unwrap(),
        CancelOutcome::Marked
    );
    assert_eq!(
        store.cancel("t", "swept-cancelled").await.unwrap(),
        CancelOutcome::Marked
    );
    assert_eq!(
        store.cancel("t", "x-due-cancelled").await.unwrap(),
        CancelOutcome::Removed
    );
    let retry = Finish::Retry {
        record: vec![1],
        delay_ms: 0,
        counted: true,
    };
    let out = store
        .finish(
            "t",
            vec![
                FinishItem::new("done".into(), token, Finish::Done),
                FinishItem::new("retry-cancelled".into(), token, retry),
            ],
        )
        .await
        .unwrap();
    assert_eq!(out, [FinishOutcome::Applied, FinishOutcome::Cancelled]);
    clock.advance(Duration::from_millis(100));
    assert_eq!(
        store
            .claim("t", claim_req(3, 100, 5))
            .await
            .unwrap()
            .swept_dead,
        1
    );
    assert!(store.holds_nothing("t"));
    assert_eq!(store.counts("t").await.unwrap().cancelled, 3);
}

#[tokio::test]
async fn dead_jobs_leave_nothing_behind_once_purged_or_requeued_and_done() {
    let (_clock, store) = store();
    store
        .enqueue(
            "t",
            vec![new_job("a", Due::In(0)), new_job("b", Due::In(0))],
        )
        .await
        .unwrap();
    let batch = store.claim("t", claim_req(2, 100, 5)).await.unwrap();
    let dead = |id: &str| {
        let finish = Finish::Dead {
            record: vec![9],
            reason: "boom".into(),
        };
        FinishItem::new(id.to_owned(), batch.jobs[0].token, finish)
    };
    store.finish("t", vec![dead("a"), dead("b")]).await.unwrap();
    let (a, b) = (Death::new("a", 1), Death::new("b", 2));
    assert_eq!(
        store
            .dead_purge("t", DeadSelection::Death(&a))
            .await
            .unwrap(),
        1
    );
    assert!(matches!(
        store.dead_requeue("t", &b, vec![7]).await.unwrap(),
        RequeueOutcome::Requeued { .. }
    ));
    assert!(!store.holds_nothing("t"), "the hooks are still pending");
    store.dead_ack("t", &[a, b]).await.unwrap();
    let job = store
        .claim("t", claim_req(1, 100, 5))
        .await
        .unwrap()
        .jobs
        .remove(0);
    assert_eq!(job.record, [7]);
    store
        .finish("t", vec![FinishItem::new(job.id, job.token, Finish::Done)])
        .await
        .unwrap();
    assert!(store.holds_nothing("t"));
}

#[tokio::test]
async fn reads_do_not_create_topics() {
    let (_clock, store) = store();
    store.job("never", "x").await.unwrap();
    store.counts("never").await.unwrap();
    store.dead_list("never", 0, 10).await.unwrap();
    assert_eq!(store.topics.lock().unwrap().len(), 0);
}

#[tokio::test]
async fn unique_and_debounce_keys_leave_no_state_once_they_no_longer_hold() {
    use crate::store::{Keyed, KeyedJob, UniqueStates};
    let (clock, store) = store();
    let unique = Keyed::Unique {
        key: "product:42".into(),
        window_ms: 1_000,
        states: UniqueStates::ALL,
    };
    let debounce = Keyed::Debounce {
        key: "product:7".into(),
        quiet_ms: 500,
        max_wait_ms: 0,
        replace: false,
    };
    let jobs = vec![
        KeyedJob::new(new_job("a", Due::In(0)), Some(unique)),
        KeyedJob::new(new_job("b", Due::In(500)), Some(debounce)),
    ];
    store.enqueue_keyed("t", jobs).await.unwrap();
    clock.advance(Duration::from_millis(600));
    let batch = store.claim("t", claim_req(10, 60_000, 10)).await.unwrap();
    assert_eq!(batch.jobs.len(), 2);
    let done: Vec<_> = batch
        .jobs
        .iter()
        .map(|j| crate::store::FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    store.finish("t", done).await.unwrap();
    assert!(!store.holds_nothing("t"), "the unique window still runs");
    // Past the window, the next keyed call (with no key of its own) drops both keys.
    clock.advance(Duration::from_millis(500));
    store.enqueue_keyed("t", Vec::new()).await.unwrap();
    store
        .enqueue_keyed("t", vec![KeyedJob::new(new_job("c", Due::In(0)), None)])
        .await
        .unwrap();
    store.cancel("t", "c").await.unwrap();
    assert!(store.holds_nothing("t"), "no per-key state is left");
}

#[tokio::test]
async fn keys_for_fairness_leave_no_state_once_their_jobs_ended() {
    let (clock, store) = store();
    let keyed = |id: &str, key: &str, due| new_job(id, due).with_key(Some(key.to_owned()));
    let jobs = vec![
        keyed("done", "a", Due::In(0)),
        keyed("retried", "a", Due::In(0)),
        keyed("dead", "b", Due::In(0)),
        keyed("swept-dead", "c", Due::In(0)),
        keyed("cancelled-running", "d", Due::In(0)),
        keyed("replaced", "e", Due::In(0)),
        keyed("cancelled-due", "f", Due::In(0)),
        keyed("cancelled-waiting", "g", Due::In(60_000)),
    ];
    store.enqueue("t", jobs).await.unwrap();
    // Replaced without a key; cancelled while due, and while its key waits for it.
    let unkeyed = NewJob::new("replaced".into(), vec![], Due::In(0), true);
    store.enqueue("t", vec![unkeyed]).await.unwrap();
    for id in ["cancelled-due", "cancelled-waiting"] {
        assert_eq!(store.cancel("t", id).await.unwrap(), CancelOutcome::Removed);
    }
    let batch = store.claim("t", claim_req(10, 100, 1)).await.unwrap();
    assert_eq!(batch.jobs.len(), 6, "{batch:?}");
    let token = batch.jobs[0].token;
    assert_eq!(
        store.cancel("t", "cancelled-running").await.unwrap(),
        CancelOutcome::Marked
    );
    let retry = || Finish::Retry {
        record: vec![1],
        delay_ms: 0,
        counted: true,
    };
    let dead = Finish::Dead {
        record: vec![9],
        reason: "boom".into(),
    };
    let finishes = [
        ("done", Finish::Done),
        ("retried", retry()),
        ("dead", dead),
        ("cancelled-running", retry()),
        ("replaced", Finish::Done),
    ];
    let items = finishes
        .into_iter()
        .map(|(id, finish)| FinishItem::new(id.into(), token, finish))
        .collect();
    store.finish("t", items).await.unwrap();
    assert!(!store.holds_nothing("t"), "a retried job keeps its key");

    let again = store.claim("t", claim_req(10, 100, 1)).await.unwrap();
    assert_eq!(again.jobs.len(), 1);
    let job = &again.jobs[0];
    assert_eq!(job.id, "retried");
    let done = FinishItem::new(job.id.clone(), job.token, Finish::Done);
    store.finish("t", vec![done]).await.unwrap();
    // Swept back into due under its key, then swept dead.
    clock.advance(Duration::from_millis(100));
    let batch = store.claim("t", claim_req(10, 100, 1)).await.unwrap();
    assert_eq!((batch.swept, batch.jobs.len()), (1, 1));
    clock.advance(Duration::from_millis(100));
    let batch = store.claim("t", claim_req(10, 100, 1)).await.unwrap();
    assert_eq!(batch.swept_dead, 1);

    // The deaths' own state goes once purged and their hooks delivered.
    store.dead_purge("t", DeadSelection::All).await.unwrap();
    let deaths = [Death::new("dead", 1), Death::new("swept-dead", 2)];
    store.dead_ack("t", &deaths).await.unwrap();
    assert!(store.holds_nothing("t"), "no key is left");
}

#[tokio::test]
async fn limits_per_key_go_by_the_clock_exactly_and_leave_no_state() {
    let (clock, store) = store();
    let limits = KeyLimits::new()
        .max_running(1)
        .rate(RateLimit::per_second(10));
    let request = || claim_req(10, 60_000, 10).key_limits(limits);
    let keyed = |id: &str, key: &str| new_job(id, Due::In(0)).with_key(Some(key.to_owned()));
    let jobs = vec![keyed("a-1", "a"), keyed("a-2", "a"), keyed("b-1", "b")];
    store.enqueue("t", jobs).await.unwrap();
    let ids = |batch: &ClaimBatch| batch.jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>();
    let finish = |job: &ClaimedJob, finish: Finish| {
        let item = FinishItem::new(job.id.clone(), job.token, finish);
        store.finish("t", vec![item])
    };

    let first = store.claim("t", request()).await.unwrap();
    assert_eq!(ids(&first), ["a-1", "b-1"]);
    assert_eq!(
        first.next_due_ms, None,
        "a is at its max running, b has no job"
    );
    // A provider's limit on a-1 holds a for 250 ms (not the topic); its lease ends.
    let hold = Finish::RateLimited {
        record: vec![],
        delay_ms: 250,
    };
    finish(&first.jobs[0], hold).await.unwrap();
    assert_eq!(store.counts("t").await.unwrap().flow.held_until_ms, None);
    let held = store.claim("t", request()).await.unwrap();
    assert!(held.jobs.is_empty());
    assert_eq!(held.next_due_ms, Some(T0 + 250), "when a's hold ends");

    // Then a-2 (due first) goes, and a is at its max again.
    clock.advance(Duration::from_millis(250));
    let second = store.claim("t", request()).await.unwrap();
    assert_eq!(ids(&second), ["a-2"]);
    assert_eq!(second.next_due_ms, None);
    finish(&second.jobs[0], Finish::Done).await.unwrap();
    // Its rate: one per 100 ms, burst 1.
    let rated = store.claim("t", request()).await.unwrap();
    assert!(rated.jobs.is_empty());
    assert_eq!(
        rated.next_due_ms,
        Some(T0 + 350),
        "a's rate lets its next go"
    );
    clock.advance(Duration::from_millis(99));
    assert!(store.claim("t", request()).await.unwrap().jobs.is_empty());
    clock.advance(Duration::from_millis(1));
    let third = store.claim("t", request()).await.unwrap();
    assert_eq!(ids(&third), ["a-1"]);
    for job in [&third.jobs[0], &first.jobs[1]] {
        finish(job, Finish::Done).await.unwrap();
    }
    assert!(
        !store.holds_nothing("t"),
        "a's rate is kept while it matters"
    );

    // Once no keyed job is left, a claim that finds jobs due forgets the keys' rates.
    store
        .enqueue("t", vec![new_job("plain", Due::In(0))])
        .await
        .unwrap();
    let plain = store.claim("t", request()).await.unwrap();
    assert_eq!(ids(&plain), ["plain"]);
    finish(&plain.jobs[0], Finish::Done).await.unwrap();
    assert!(store.holds_nothing("t"), "no key is left");
}

#[tokio::test]
async fn a_completed_batch_is_kept_for_its_time_and_its_members_leave_nothing_behind() {
    use crate::store::workflow::BATCH_KEEP_MS;
    use crate::store::{BatchCreated, BatchJob, NewBatch, WorkflowStore};

    let (clock, store) = store();
    let batch = NewBatch {
        jobs: vec![BatchJob::new("t", new_job("a", Due::In(0)))],
        close: true,
        ..NewBatch::default()
    };
    let created = store.batch_create("b", batch.clone()).await.unwrap();
    assert_eq!(created, BatchCreated::Created);
    let job = store.claim("t", claim_req(1, 1_000, 5)).await.unwrap().jobs[0].clone();
    let item = FinishItem::new(job.id, job.token, Finish::Done);
    store.finish("t", vec![item]).await.unwrap();
    assert_eq!(store.deliver_ends("t", 10).await.unwrap(), 1);
    assert!(store.holds_nothing("t"), "no follower, no end left");
    let status = store.batch("b").await.unwrap().unwrap();
    assert_eq!(status.completed_at_ms, Some(T0));

    // Kept for BATCH_KEEP_MS, then gone (to readers at once, from memory by recovery).
    clock.set(T0 + BATCH_KEEP_MS as i64);
    assert_eq!(store.recover_batches(10).await.unwrap(), 0);
    assert!(store.batch("b").await.unwrap().is_some());
    let again = store.batch_create("b", batch.clone()).await.unwrap();
    assert_eq!(again, BatchCreated::Exists, "still kept");
    clock.set(T0 + BATCH_KEEP_MS as i64 + 1);
    assert_eq!(store.batch("b").await.unwrap(), None);
    assert!(store.batches(0, 10).await.unwrap().is_empty());
    assert_eq!(store.recover_batches(10).await.unwrap(), 1);
    assert_eq!(store.recover_batches(10).await.unwrap(), 0);
    let anew = store.batch_create("b", batch).await.unwrap();
    assert_eq!(anew, BatchCreated::Created, "a new batch of the id");
}
