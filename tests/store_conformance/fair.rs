//! Fairness by key: due jobs of different keys are claimed round-robin between keys (one job per key
//! and turn, all the slots left to the only key with a job due), a key's own in due order; jobs created
//! without a key once the topic has keyed jobs take their turn as one key (""), those created before
//! are claimed in due order beside them, and jobs with a priority before all. A key that gets a due job
//! keeps its turn if it has one, and else joins at the others' turn (never making up for the turns it
//! missed). A job keeps its key through a retry, an expired lease and a reschedule, and a replace gives
//! it the new job's key.
//!
//! Where keys tie for a turn, any order is right: these tests never depend on it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use postpone::store::{
    AfterOutcome, BatchCreated, BatchJob, CancelOutcome, ClaimBatch, ClaimRequest, Due,
    EnqueueOutcome, Finish, FinishOutcome, Keyed, KeyedJob, KeyedOutcome, NewBatch, NewJob,
    OnParentFailure, PageQuery, PageState, RequeueOutcome, RescheduleOutcome, Retention, Store,
    UniqueStates,
};
use postpone::{KeyLimits, RateLimit};

use super::*;

/// A job of key `key`.
fn keyed(id: &str, key: &str, due: Due) -> NewJob {
    new_job(id, KEYED_REC, due).with_key(Some(key.into()))
}

/// `n` jobs of key `key`, due now, with ids `<key>-0000`, `<key>-0001`...
fn flood(key: &str, n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| keyed(&format!("{key}-{i:04}"), key, Due::In(0)))
        .collect()
}

/// The key of a job named `<key>-<n>` (or the id itself).
fn key_of(id: &str) -> &str {
    id.split('-').next().unwrap_or(id)
}

/// Waits until the backend's clock has moved on, so that a job enqueued due now is due after every
/// job enqueued before.
async fn later(s: &dyn Store) {
    wait_past(s, now(s).await).await;
}

/// The due time an enqueue of one new job gave it.
async fn enqueue_one(s: &dyn Store, t: &str, job: NewJob) -> i64 {
    let id = job.id.clone();
    match s.enqueue(t, vec![job]).await.unwrap()[..] {
        [EnqueueOutcome::Created { due_at_ms }] => due_at_ms,
        ref other => panic!("enqueue of {id:?} gave {other:?}, not Created"),
    }
}

async fn reschedule(s: &dyn Store, t: &str, id: &str, due: Due) -> i64 {
    match s.reschedule(t, id, due).await.unwrap() {
        RescheduleOutcome::Rescheduled { due_at_ms } => due_at_ms,
        other => panic!("reschedule of {id:?} gave {other:?}"),
    }
}

pub(crate) async fn fair_claim_takes_one_job_per_key_before_any_key_gets_a_second(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_one_each"));
    let enqueued = [("a", 10), ("b", 3), ("c", 1)];
    let jobs = enqueued
        .iter()
        .flat_map(|(key, n)| flood(key, *n))
        .collect();
    s.enqueue(t, jobs).await.unwrap();

    let first = claimed_ids(s, t, 3).await;
    let mut keys: Vec<_> = first.iter().map(|id| key_of(id)).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["a", "b", "c"], "one of each key: {first:?}");

    // Jobs claimed and jobs left, by key.
    let mut claimed: BTreeMap<String, usize> = BTreeMap::new();
    let mut left: BTreeMap<String, usize> =
        enqueued.iter().map(|(k, n)| (k.to_string(), *n)).collect();
    let mut batch = first;
    while !batch.is_empty() {
        for id in &batch {
            *claimed.entry(key_of(id).to_owned()).or_default() += 1;
            let n = left.get_mut(key_of(id)).unwrap();
            *n -= 1;
        }
        // A key with due jobs left is never more than one job behind any other.
        for (key, n) in left.iter().filter(|(_, n)| **n > 0) {
            let mine = claimed.get(key).copied().unwrap_or(0);
            for (other, theirs) in &claimed {
                assert!(
                    *theirs <= mine + 1,
                    "{key} (with {n} due) had {mine} claimed, {other} had {theirs}: {claimed:?}"
                );
            }
        }
        batch = claimed_ids(s, t, 2).await;
    }
    let all: BTreeMap<String, usize> = enqueued.iter().map(|(k, n)| (k.to_string(), *n)).collect();
    assert_eq!(claimed, all, "every job, once");
}

pub(crate) async fn fair_flood_does_not_delay_a_job_of_another_key(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_flood"));
    s.enqueue(t, flood("flood", 1000)).await.unwrap();
    later(s).await;
    enqueue_one(s, t, keyed("quiet", "quiet", Due::In(0))).await;

    let ids = claimed_ids(s, t, 10).await;
    assert_eq!(ids.len(), 10, "{ids:?}");
    assert!(ids.iter().any(|id| id == "quiet"), "quiet waits: {ids:?}");
    let mut flooded: Vec<_> = ids.into_iter().filter(|id| id != "quiet").collect();
    flooded.sort_unstable();
    let earliest: Vec<_> = (0..9).map(|i| format!("flood-{i:04}")).collect();
    assert_eq!(flooded, earliest, "the flood's earliest");
}

/// One batch of jobs with keys, one without and one that exists already, all due at one time or each
/// at its own: each job created is filed once under its key (the one without under the key "", the
/// topic having keyed jobs), and the claims take one job of each key per turn.
pub(crate) async fn fair_a_batch_of_keyed_unkeyed_and_existing_jobs_files_each_created_job_once(
    store: Arc<dyn Store>,
) {
    for own_times in [false, true] {
        let s = &*store;
        let t = &topic(if own_times {
            "fair_mixed_own"
        } else {
            "fair_mixed_shared"
        });
        enqueue_one(s, t, keyed("a-0", "a", Due::In(0))).await;
        let due = |ms: u64| Due::In(if own_times { ms } else { 0 });
        let batch = vec![
            keyed("a-0", "a", due(0)),
            keyed("b-0", "b", due(1)),
            new_job("u", REC, due(2)),
            keyed("a-1", "a", due(3)),
            keyed("c-0", "c", due(4)),
        ];
        let outcomes = s.enqueue(t, batch).await.unwrap();
        assert!(
            matches!(outcomes[0], EnqueueOutcome::Exists { .. })
                && outcomes[1..]
                    .iter()
                    .all(|o| matches!(o, EnqueueOutcome::Created { .. })),
            "{outcomes:?}"
        );
        wait_past(s, now(s).await + 4).await;
        let first = claimed_ids(s, t, 4).await;
        let mut keys: Vec<_> = first.iter().map(|id| key_of(id)).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["a", "b", "c", "u"],
            "one job of each key, the one without a key as one (own times: {own_times}): {first:?}"
        );
        assert_eq!(
            claimed_ids(s, t, 4).await,
            ["a-1"],
            "own times: {own_times}"
        );
        assert!(claimed_ids(s, t, 4).await.is_empty(), "each job once");
    }
}

/// Six hundred keys with two jobs each, in one batch: a claim of 600 takes one job of every key, the
/// next the other 600 (more keys than the Redis scripts keep the names of from call to call, and than
/// the heap of turns holds in most claims).
pub(crate) async fn fair_six_hundred_keys_each_take_one_turn_per_claim(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_600_keys"));
    let jobs = (0..2)
        .flat_map(|n| {
            (0..600).map(move |k| keyed(&format!("k{k:03}-{n}"), &format!("k{k:03}"), Due::In(0)))
        })
        .collect();
    s.enqueue(t, jobs).await.unwrap();
    for round in 0..2 {
        let ids = claimed_ids(s, t, 600).await;
        let mut keys: Vec<_> = ids.iter().map(|id| key_of(id)).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(
            (ids.len(), keys.len()),
            (600, 600),
            "claim {round}: one job of each key"
        );
    }
    assert!(claimed_ids(s, t, 600).await.is_empty(), "each job once");
}

pub(crate) async fn fair_key_takes_its_own_jobs_in_due_order(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_own_order"));
    let base = now(s).await + 200;
    // Ids against due order; two jobs due at one time go by id.
    let asked = [
        ("a-late", "a", 40),
        ("a-mid", "a", 30),
        ("a-tie2", "a", 20),
        ("a-tie1", "a", 20),
        ("a-first", "a", 0),
        ("b-late", "b", 35),
        ("b-first", "b", 5),
    ];
    let jobs = asked
        .iter()
        .map(|(id, key, at)| keyed(id, key, Due::At(base + at)))
        .collect();
    let out = s.enqueue(t, jobs).await.unwrap();
    let mut due = BTreeMap::new();
    for ((id, _, _), outcome) in asked.iter().zip(out) {
        match outcome {
            EnqueueOutcome::Created { due_at_ms } => due.insert(*id, due_at_ms),
            other => panic!("enqueue of {id:?} gave {other:?}"),
        };
    }
    let order = claim_one_at_a_time(s, t, &due).await;
    assert_eq!(order.len(), asked.len(), "{order:?}");
    assert_each_keys_order(&order, &due, &["a", "b"]);
}

/// Once the last of `due`'s jobs (id -> due time) is due, claims one job at a time until none is left,
/// each with its own due time; returns the ids in the order claimed.
async fn claim_one_at_a_time(s: &dyn Store, t: &str, due: &BTreeMap<&str, i64>) -> Vec<String> {
    wait_past(s, due.values().copied().max().unwrap()).await;
    let mut order = Vec::new();
    loop {
        let batch = claim(s, t, 1, LONG).await;
        let Some(job) = batch.jobs.first() else {
            break;
        };
        assert_eq!(job.due_at_ms, due[job.id.as_str()], "its own due time");
        order.push(job.id.clone());
    }
    order
}

/// Each of `keys`' jobs came in `order` by due time (in `due`), then id.
fn assert_each_keys_order(order: &[String], due: &BTreeMap<&str, i64>, keys: &[&str]) {
    for key in keys {
        let got: Vec<&str> = order
            .iter()
            .map(String::as_str)
            .filter(|id| key_of(id) == *key)
            .collect();
        let mut expected: Vec<&str> = due
            .keys()
            .copied()
            .filter(|id| key_of(id) == *key)
            .collect();
        expected.sort_by_key(|id| (due[id], *id));
        assert_eq!(got, expected, "key {key}'s jobs by due time, then id");
    }
}

/// A key's jobs enqueued one at a time and in twos, the first of a key alone (the Redis store keeps a
/// key's one job without a queue of its own, and gives it one when a second comes), one cancelled
/// alone and one cancelled beside another: each key's jobs are claimed in due order, each once.
pub(crate) async fn fair_a_keys_jobs_enqueued_one_at_a_time_keep_due_order_and_cancels(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_one_by_one"));
    let base = now(s).await + 200;
    let mut due = BTreeMap::new();
    // "a": its later job first, alone; then its earlier one. "c": one job, cancelled. "d": one job,
    // then two at once. "e": two jobs one at a time, the first cancelled.
    for (id, key, at) in [
        ("a-2", "a", 30),
        ("b-1", "b", 10),
        ("a-1", "a", 0),
        ("c-1", "c", 20),
        ("d-1", "d", 5),
        ("e-1", "e", 1),
        ("e-2", "e", 2),
    ] {
        due.insert(
            id,
            enqueue_one(s, t, keyed(id, key, Due::At(base + at))).await,
        );
    }
    let out = s
        .enqueue(
            t,
            vec![
                keyed("d-3", "d", Due::At(base + 25)),
                keyed("d-2", "d", Due::At(base + 15)),
            ],
        )
        .await
        .unwrap();
    for (id, outcome) in ["d-3", "d-2"].into_iter().zip(out) {
        match outcome {
            EnqueueOutcome::Created { due_at_ms } => due.insert(id, due_at_ms),
            other => panic!("enqueue of {id:?} gave {other:?}"),
        };
    }
    for id in ["c-1", "e-1"] {
        assert_eq!(s.cancel(t, id).await.unwrap(), CancelOutcome::Removed);
        due.remove(id);
    }
    let order = claim_one_at_a_time(s, t, &due).await;
    let mut all = order.clone();
    all.sort_unstable();
    assert_eq!(
        all,
        ["a-1", "a-2", "b-1", "d-1", "d-2", "d-3", "e-2"],
        "each once"
    );
    assert_each_keys_order(&order, &due, &["a", "d"]);
}

/// A key's flood claimed from the head of its queue while writes to the queue land between claims: a
/// retry of a job claimed, a cancel, a turn beside another key, a new job; claims alternately under no
/// limit per key and under a max running per key (which reads the key's queue where a claim under none
/// may take from the head of the topic's due jobs; the Redis store moves a key taking from there past
/// its jobs' queue entries without removing them, and removes them before a write to its queue): each
/// job is claimed once, the key's in due order.
pub(crate) async fn fair_a_flood_claimed_between_writes_to_its_queue_keeps_each_job_once_in_order(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_flood_writes"));
    // A claim that reads the keys' queues: under a max running per key that none of these jobs reaches.
    let read = |max: usize| async move {
        let request =
            ClaimRequest::new(max, LONG, 100, 10).key_limits(KeyLimits::new().max_running(1000));
        let batch = s.claim(t, request).await.unwrap();
        batch.jobs.into_iter().map(|j| j.id).collect::<Vec<_>>()
    };
    let flood_ids = |from: usize, to: usize| -> Vec<String> {
        (from..to).map(|i| format!("f-{i:04}")).collect()
    };
    s.enqueue(t, flood("f", 20)).await.unwrap();
    let first = claim(s, t, 5, LONG).await.jobs;
    let first_ids: Vec<_> = first.iter().map(|j| j.id.clone()).collect();
    assert_eq!(first_ids, flood_ids(0, 5));
    // f-0000 retries, due now: after the rest of the flood.
    later(s).await;
    assert_eq!(
        finish(s, t, &first[0], retry(&rec_with_key("f"), 0, true)).await,
        FinishOutcome::Applied
    );
    assert_eq!(read(3).await, flood_ids(5, 8));
    assert_eq!(claimed_ids(s, t, 2).await, flood_ids(8, 10));
    assert_eq!(s.cancel(t, "f-0010").await.unwrap(), CancelOutcome::Removed);
    later(s).await;
    enqueue_one(s, t, keyed("q-1", "q", Due::In(0))).await;
    let mut turn = claimed_ids(s, t, 2).await;
    turn.sort_unstable();
    assert_eq!(turn, ["f-0011", "q-1"], "one turn each");
    assert_eq!(claimed_ids(s, t, 2).await, flood_ids(12, 14));
    assert_eq!(read(2).await, flood_ids(14, 16));
    assert_eq!(claimed_ids(s, t, 1).await, flood_ids(16, 17));
    later(s).await;
    enqueue_one(s, t, keyed("f-0020", "f", Due::In(0))).await;
    let mut rest = flood_ids(17, 20);
    rest.extend(["f-0000".to_owned(), "f-0020".to_owned()]);
    assert_eq!(read(100).await, rest, "the rest, in due order");
    assert!(claimed_ids(s, t, 100).await.is_empty(), "each job once");
}

pub(crate) async fn fair_unkeyed_jobs_take_one_turn_as_the_key_of_no_key_and_older_ones_go_in_due_order(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_unkeyed"));
    let base = now(s).await + 200;
    // Created without a key before the topic has keyed jobs: `old` (due among the flood's first 10)
    // and `older` (due after the whole flood). Such jobs are claimed in due order, among the first due.
    create(s, t, "old", REC, Due::At(base + 50)).await;
    create(s, t, "older", REC, Due::At(base + 200)).await;
    // Due in this order: 5 of the flood, `old`, 995 of the flood, `older`.
    let jobs = (0..1000)
        .map(|i| {
            let at = if i < 5 { base } else { base + 100 };
            keyed(&format!("flood-{i:04}"), "flood", Due::At(at))
        })
        .collect();
    s.enqueue(t, jobs).await.unwrap();
    wait_past(s, base + 200).await;
    // Created without a key once the topic has keyed jobs: both take their turns as one key, "",
    // under no limit per key.
    let late = enqueue_one(s, t, new_job("late", REC, Due::In(0))).await;
    later(s).await;
    enqueue_one(s, t, new_job("late2", REC, Due::In(0))).await;
    assert!(late > base + 200, "late is due after the whole flood");

    let first = claimed_ids(s, t, 10).await;
    assert_eq!(first.len(), 10, "{first:?}");
    assert!(
        first.iter().any(|id| id == "old"),
        "old is among the first 10 due: {first:?}"
    );
    assert!(
        !first.iter().any(|id| id == "older"),
        "older is due after the whole flood: {first:?}"
    );
    assert!(
        first.iter().any(|id| id == "late"),
        "late has the turn of the key \"\" beside the flood's: {first:?}"
    );
    // One job of the key "" per turn: the flood had its turn between `late` and `late2` (a claim lists
    // its jobs in the order it took them).
    let at = |id: &str| first.iter().position(|x| x == id).unwrap();
    assert!(at("late") < at("late2"), "{first:?}");
    assert!(
        first[at("late")..at("late2")]
            .iter()
            .any(|id| id.starts_with("flood-")),
        "{first:?}"
    );
    // Every job once; `older` no later than a plain queue would claim it (the 1,003rd due job of
    // 1,004, in claim 101 of 10).
    let mut seen: Vec<String> = first;
    let mut claims = 1;
    let mut older_in = None;
    loop {
        let ids = claimed_ids(s, t, 10).await;
        if ids.is_empty() {
            break;
        }
        claims += 1;
        if ids.iter().any(|id| id == "older") {
            older_in = Some(claims);
        }
        seen.extend(ids);
    }
    let older_in = older_in.expect("older was never claimed");
    assert!(older_in <= 101, "older was claimed in claim {older_in}");
    assert_eq!(seen.len(), 1004, "every job once");
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 1004, "every job once");
}

pub(crate) async fn fair_only_key_left_fills_the_whole_claim(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_only_key"));
    s.enqueue(t, flood("only", 100)).await.unwrap();
    // Another key, not due yet, leaves the claim to the one that is.
    enqueue_one(s, t, keyed("other", "other", Due::In(60_000))).await;

    let first = claimed_ids(s, t, 50).await;
    let expected: Vec<_> = (0..50).map(|i| format!("only-{i:04}")).collect();
    let mut sorted = first.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, expected, "50 jobs, the key's earliest");
    assert_eq!(claimed_ids(s, t, 50).await.len(), 50);
    assert_eq!(claimed_ids(s, t, 50).await, Vec::<String>::new());
}

pub(crate) async fn fair_only_key_left_passes_its_stale_entries_and_still_fills_the_claim(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_only_key_stale"));
    // Twenty jobs of one key, three of them with a priority: claimed first, they leave their entries
    // in the key's queue between jobs still due.
    let jobs = flood("s", 20)
        .into_iter()
        .enumerate()
        .map(|(i, job)| {
            if [3, 7, 11].contains(&i) {
                job.priority(1)
            } else {
                job
            }
        })
        .collect();
    s.enqueue(t, jobs).await.unwrap();
    let mut first = claimed_ids(s, t, 3).await;
    first.sort_unstable();
    assert_eq!(
        first,
        ["s-0003", "s-0007", "s-0011"],
        "the jobs with a priority"
    );

    let ids = |ns: &[usize]| -> Vec<String> { ns.iter().map(|i| format!("s-{i:04}")).collect() };
    assert_eq!(
        claimed_ids(s, t, 10).await,
        ids(&[0, 1, 2, 4, 5, 6, 8, 9, 10, 12]),
        "a full claim in due order, past the entries of the jobs already claimed"
    );
    assert_eq!(
        claimed_ids(s, t, 50).await,
        ids(&[13, 14, 15, 16, 17, 18, 19])
    );
    assert_eq!(claimed_ids(s, t, 50).await, Vec::<String>::new());
}

pub(crate) async fn fair_only_key_left_reports_each_jobs_own_due_time(store: Arc<dyn Store>) {
    let t = topic("fair_due_runs");
    claims_report_each_jobs_own_due_time(&*store, &t, Some("k")).await;
}

pub(crate) async fn fair_claims_take_each_job_once_in_its_keys_order_however_the_keys_interleave(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_interleaved"));
    // Key f's jobs first (the head of the due jobs), then g's and h's, then more of f's behind them,
    // and a last run where the three alternate.
    let mut order = Vec::new();
    let mut next = BTreeMap::<&str, usize>::new();
    let mut add = |key: &'static str, n: usize, order: &mut Vec<NewJob>| {
        for _ in 0..n {
            let i = next.entry(key).or_default();
            order.push(keyed(&format!("{key}-{i:04}"), key, Due::In(0)));
            *i += 1;
        }
    };
    add("f", 150, &mut order);
    add("g", 30, &mut order);
    add("h", 30, &mut order);
    add("f", 60, &mut order);
    for _ in 0..20 {
        for key in ["g", "f", "h"] {
            add(key, 1, &mut order);
        }
    }
    let total = order.len();
    // One enqueue per run of jobs, each due after the one before.
    for chunk in order.chunk_by(|a, b| key_of(&a.id) == key_of(&b.id)) {
        s.enqueue(t, chunk.to_vec()).await.unwrap();
        later(s).await;
    }

    let mut seen: Vec<String> = Vec::new();
    for max in [7, 50, 3, 120, 1, 33].into_iter().cycle() {
        let batch = claim(s, t, max, LONG).await;
        if batch.jobs.is_empty() {
            break;
        }
        assert!(batch.jobs.len() <= max, "{batch:?}");
        for job in &batch.jobs {
            seen.push(job.id.clone());
            assert_eq!(
                finish(s, t, job, Finish::Done).await,
                FinishOutcome::Applied
            );
        }
    }
    assert_eq!(seen.len(), total, "every job once: {seen:?}");
    let mut once = seen.clone();
    once.sort_unstable();
    once.dedup();
    assert_eq!(once.len(), total, "a job claimed twice: {seen:?}");
    for key in ["f", "g", "h"] {
        let of_key: Vec<_> = seen.iter().filter(|id| key_of(id) == key).collect();
        let mut sorted = of_key.clone();
        sorted.sort_unstable();
        assert_eq!(of_key, sorted, "key {key}'s jobs in due order");
    }
    assert_eq!(s.counts(t).await.unwrap().ready, 0);
}

pub(crate) async fn fair_jobs_delivered_once_and_batch_members_keep_their_keys(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_once"));
    let of = |ids: &[&str]| -> Vec<NewJob> {
        ids.iter()
            .map(|id| keyed(id, key_of(id), Due::In(0)))
            .collect()
    };
    // Through an outbox's delivery: three jobs of a, one of b.
    let jobs = of(&["a-0000", "a-0001", "a-0002", "b-0000"])
        .into_iter()
        .map(|job| (format!("tok-{}", job.id), job))
        .collect();
    let out = s.enqueue_once(t, jobs, LONG).await.unwrap();
    assert!(
        out.iter()
            .all(|o| matches!(o, Some(EnqueueOutcome::Created { .. }))),
        "{out:?}"
    );
    let first = claim(s, t, 2, LONG).await;
    assert_eq!(
        per_key(&first),
        counts_of(&[("a", 1), ("b", 1)]),
        "{first:?}"
    );

    // As a batch's members, in a topic of their own.
    let tb = topic("fair_batch");
    let mut batch = NewBatch::default();
    batch.jobs = of(&["c-0000", "c-0001", "c-0002", "d-0000"])
        .into_iter()
        .map(|job| BatchJob::new(tb.clone(), job))
        .collect();
    batch.close = true;
    let created = s
        .batch_create(&topic("fair_batch_id"), batch)
        .await
        .unwrap();
    assert_eq!(created, BatchCreated::Created);
    let first = claim(s, &tb, 2, LONG).await;
    assert_eq!(
        per_key(&first),
        counts_of(&[("c", 1), ("d", 1)]),
        "{first:?}"
    );
}

pub(crate) async fn fair_retry_and_expired_lease_keep_the_key(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_keeps_key"));
    s.enqueue(t, flood("flood", 1000)).await.unwrap();
    later(s).await;
    // Without its key, a job of `k` is due after the whole flood; with it, it has its key's turn.
    enqueue_one(s, t, keyed("k-1", "k", Due::In(0))).await;

    // A retry.
    let batch = claim(s, t, 2, LONG).await;
    let job = batch.jobs.iter().find(|j| j.id == "k-1").cloned();
    let job = job.unwrap_or_else(|| panic!("one job of each key: {batch:?}"));
    assert_eq!(
        finish(s, t, &job, retry(REC, 0, true)).await,
        FinishOutcome::Applied
    );
    let ids = claimed_ids(s, t, 2).await;
    assert!(ids.iter().any(|id| id == "k-1"), "after a retry: {ids:?}");

    // An expired lease.
    enqueue_one(s, t, keyed("k-2", "k", Due::In(0))).await;
    let short = s
        .claim(t, ClaimRequest::new(2, SHORT, 100, 10))
        .await
        .unwrap();
    assert!(
        short.jobs.iter().any(|j| j.id == "k-2"),
        "one job of each key: {short:?}"
    );
    wait_past(s, short.now_ms() + SHORT as i64).await;
    let batch = claim(s, t, 2, LONG).await;
    assert_eq!(batch.swept, 2, "{batch:?}");
    assert!(
        batch.jobs.iter().any(|j| j.id == "k-2"),
        "after an expired lease: {batch:?}"
    );
}

pub(crate) async fn fair_reschedule_and_cancel_of_keyed_jobs(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_reschedule"));
    s.enqueue(t, flood("flood", 20)).await.unwrap();
    let jobs = vec![
        keyed("soon-1", "soon", Due::In(60_000)),
        keyed("later-1", "later", Due::In(0)),
        keyed("cancelled-1", "cancelled", Due::In(0)),
        keyed("cancelled-2", "cancelled", Due::In(0)),
    ];
    s.enqueue(t, jobs).await.unwrap();
    // Earlier: due now, its key's turn comes at once; later: not claimed before its new time.
    reschedule(s, t, "soon-1", Due::In(0)).await;
    let later_due = reschedule(s, t, "later-1", Due::In(300)).await;
    assert_eq!(
        s.cancel(t, "cancelled-1").await.unwrap(),
        CancelOutcome::Removed
    );

    let first = claim(s, t, 10, LONG).await;
    let ids: Vec<_> = first.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids.len(), 10, "{ids:?}");
    assert!(ids.contains(&"soon-1"), "rescheduled to now: {ids:?}");
    assert!(ids.contains(&"cancelled-2"), "its key's other job: {ids:?}");
    let mut seen: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    let mut batch = first;
    let mut waited = false;
    loop {
        for job in &batch.jobs {
            assert_ne!(job.id, "cancelled-1", "a cancelled job is never claimed");
            if job.id == "later-1" {
                assert!(
                    batch.now_ms() >= later_due,
                    "later-1 claimed at {}, before its new time {later_due}",
                    batch.now_ms()
                );
            }
        }
        if seen.len() == 23 {
            break;
        }
        if batch.jobs.is_empty() {
            assert!(!waited, "jobs were left unclaimed: {seen:?}");
            // Only later-1 is left, due at its new time.
            wait_past(s, later_due - 1).await;
            waited = true;
        }
        batch = claim(s, t, 10, LONG).await;
        seen.extend(batch.jobs.iter().map(|j| j.id.clone()));
    }
    seen.sort_unstable();
    let mut expected: Vec<String> = (0..20).map(|i| format!("flood-{i:04}")).collect();
    expected.extend(["cancelled-2", "later-1", "soon-1"].map(String::from));
    expected.sort_unstable();
    assert_eq!(seen, expected);
    assert_eq!(state(s, t, "cancelled-1").await, None);
}

pub(crate) async fn fair_future_jobs_of_a_key_join_when_due(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_future"));
    s.enqueue(t, flood("flood", 20)).await.unwrap();
    let due = enqueue_one(s, t, keyed("future-1", "future", Due::In(200))).await;

    let mut claimed_at = None;
    for _ in 0..3 {
        let batch = claim(s, t, 2, LONG).await;
        if batch.jobs.iter().any(|j| j.id == "future-1") {
            claimed_at = Some(batch.now_ms());
            break;
        }
    }
    if claimed_at.is_none() {
        wait_past(s, due - 1).await;
        let batch = claim(s, t, 2, LONG).await;
        assert!(
            batch.jobs.iter().any(|j| j.id == "future-1"),
            "once due, its key has its turn at once: {batch:?}"
        );
        claimed_at = Some(batch.now_ms());
    }
    let at = claimed_at.unwrap();
    assert!(at >= due, "claimed at {at}, before it was due at {due}");
}

pub(crate) async fn fair_jobs_with_a_priority_go_first_whatever_their_key(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_priority"));
    s.enqueue(t, flood("flood", 20)).await.unwrap();
    later(s).await;
    let jobs = vec![
        keyed("urgent", "flood", Due::In(0)).priority(5),
        keyed("soon", "other", Due::In(0)).priority(3),
        new_job("plain", REC, Due::In(0)).priority(1),
        keyed("quiet", "quiet", Due::In(0)),
    ];
    s.enqueue(t, jobs).await.unwrap();
    assert_eq!(claimed_ids(s, t, 3).await, ["urgent", "soon", "plain"]);
    // Then the keys' turns, as before.
    let ids = claimed_ids(s, t, 2).await;
    assert!(ids.iter().any(|id| id == "quiet"), "{ids:?}");
    assert!(ids.iter().any(|id| id == "flood-0000"), "{ids:?}");
}

pub(crate) async fn fair_replace_applies_the_new_jobs_key(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_replace"));
    s.enqueue(t, flood("flood", 20)).await.unwrap();
    later(s).await;
    enqueue_one(s, t, keyed("x", "x1", Due::In(0))).await;
    enqueue_one(s, t, keyed("x1-other", "x1", Due::In(0))).await;
    // Replaced without a key: the key "" has its turn beside the flood and x1 (one job each).
    s.enqueue(t, vec![replacing("x", REC, Due::In(0))])
        .await
        .unwrap();
    let batch = claim(s, t, 3, LONG).await;
    let mut ids: Vec<_> = batch.jobs.iter().map(|j| j.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["flood-0000", "x", "x1-other"], "x has the key \"\"");
    let x = batch.jobs.iter().find(|j| j.id == "x").unwrap();
    assert_eq!(finish(s, t, x, Finish::Done).await, FinishOutcome::Applied);
    // Replaced with a key: its key's turn, beside the flood and the key "" (of `plain`).
    enqueue_one(s, t, new_job("x", REC, Due::In(0))).await;
    enqueue_one(s, t, new_job("plain", REC, Due::In(0))).await;
    let again = replacing("x", KEYED_REC, Due::In(0)).with_key(Some("x2".into()));
    s.enqueue(t, vec![again]).await.unwrap();
    let mut ids = claimed_ids(s, t, 3).await;
    ids.sort_unstable();
    assert_eq!(ids, ["flood-0001", "plain", "x"], "x has key x2");
}

pub(crate) async fn fair_a_ready_key_keeps_its_turn_when_it_gets_another_job(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_keeps_turn"));
    let jobs = ["a", "b", "c"].iter().flat_map(|k| flood(k, 3)).collect();
    s.enqueue(t, jobs).await.unwrap();
    assert_eq!(claimed_ids(s, t, 3).await.len(), 3, "one of each key");
    // A second turn for one key, which then gets one more job: the others' turns still come first.
    let served = claimed_ids(s, t, 1).await;
    let [served] = &served[..] else {
        panic!("one job: {served:?}");
    };
    let key = key_of(served);
    enqueue_one(s, t, keyed(&format!("{key}-new"), key, Due::In(0))).await;
    let ids = claimed_ids(s, t, 2).await;
    let mut keys: Vec<_> = ids.iter().map(|id| key_of(id)).collect();
    keys.sort_unstable();
    let others: Vec<_> = ["a", "b", "c"].into_iter().filter(|k| *k != key).collect();
    assert_eq!(keys, others, "{key} had its turn: {ids:?}");
}

pub(crate) async fn fair_a_key_that_joins_late_does_not_make_up_for_missed_turns(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_joins_late"));
    let jobs = ["a", "b"].iter().flat_map(|k| flood(k, 20)).collect();
    s.enqueue(t, jobs).await.unwrap();
    for _ in 0..5 {
        let ids = claimed_ids(s, t, 2).await;
        let mut keys: Vec<_> = ids.iter().map(|id| key_of(id)).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["a", "b"], "{ids:?}");
    }
    // `c` joins at the turn the others are at: one turn ahead at most, never the five it missed.
    s.enqueue(t, flood("c", 20)).await.unwrap();
    let mut ids = claimed_ids(s, t, 3).await;
    ids.extend(claimed_ids(s, t, 3).await);
    let count = |key: &str| ids.iter().filter(|id| key_of(id) == key).count();
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert!(
        count("c") <= 3 && count("a") >= 1 && count("b") >= 1,
        "{ids:?}"
    );
}

pub(crate) async fn fair_a_debounced_job_pushed_back_keeps_its_turn(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_debounce"));
    s.enqueue(t, flood("flood", 5)).await.unwrap();
    // Created without a key in a topic with keyed jobs (the key ""), then pushed back.
    let debounce = |id: &str| {
        let keyed = Keyed::Debounce {
            key: "d".into(),
            quiet_ms: 50,
            max_wait_ms: 0,
            replace: false,
        };
        KeyedJob::new(new_job(id, REC, Due::In(0)), Some(keyed))
    };
    let created = s.enqueue_keyed(t, vec![debounce("d1")]).await.unwrap();
    assert!(
        matches!(
            created[..],
            [KeyedOutcome::Enqueued(EnqueueOutcome::Created { .. })]
        ),
        "{created:?}"
    );
    later(s).await;
    let pushed = s.enqueue_keyed(t, vec![debounce("d2")]).await.unwrap();
    let due = match &pushed[..] {
        [KeyedOutcome::Debounced { id, due_at_ms }] if id == "d1" => *due_at_ms,
        other => panic!("{other:?}"),
    };
    wait_past(s, due - 1).await;
    let ids = claimed_ids(s, t, 3).await;
    assert!(
        ids.iter().any(|id| id == "d1"),
        "its turn once due: {ids:?}"
    );
}

pub(crate) async fn fair_unique_and_debounced_jobs_keep_their_keys(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_unique"));
    s.enqueue(t, flood("a", 3)).await.unwrap();
    let unique = Keyed::Unique {
        key: "u".into(),
        window_ms: 60_000,
        states: UniqueStates::ALL,
    };
    let debounce = Keyed::Debounce {
        key: "d".into(),
        quiet_ms: 50,
        max_wait_ms: 0,
        replace: false,
    };
    let jobs = vec![
        KeyedJob::new(keyed("b-0000", "b", Due::In(0)), Some(unique.clone())),
        KeyedJob::new(keyed("c-0000", "c", Due::In(0)), Some(debounce.clone())),
    ];
    let out = s.enqueue_keyed(t, jobs).await.unwrap();
    assert!(
        out.iter()
            .all(|o| matches!(o, KeyedOutcome::Enqueued(EnqueueOutcome::Created { .. }))),
        "{out:?}"
    );
    // Their keys' turns: one of each key, not the flood's three first.
    let first = claim(s, t, 3, LONG).await;
    assert_eq!(
        per_key(&first),
        counts_of(&[("a", 1), ("b", 1), ("c", 1)]),
        "{first:?}"
    );
    // A duplicate is refused as before; a debounced job pushed back keeps its key.
    let again = vec![
        KeyedJob::new(keyed("b-0001", "b", Due::In(0)), Some(unique)),
        KeyedJob::new(keyed("c-0001", "c", Due::In(0)), Some(debounce.clone())),
    ];
    let out = s.enqueue_keyed(t, again).await.unwrap();
    assert!(matches!(out[0], KeyedOutcome::Duplicate { .. }), "{out:?}");
    assert!(
        matches!(
            out[1],
            KeyedOutcome::Enqueued(EnqueueOutcome::Created { .. })
        ),
        "c-0000 ran: a new job of the key: {out:?}"
    );
    later(s).await;
    let pushed = s
        .enqueue_keyed(
            t,
            vec![KeyedJob::new(
                keyed("c-0002", "c", Due::In(0)),
                Some(debounce),
            )],
        )
        .await
        .unwrap();
    let due = match &pushed[..] {
        [KeyedOutcome::Debounced { id, due_at_ms }] if id == "c-0001" => *due_at_ms,
        other => panic!("{other:?}"),
    };
    wait_past(s, due - 1).await;
    let next = claim(s, t, 2, LONG).await;
    assert_eq!(per_key(&next), counts_of(&[("a", 1), ("c", 1)]), "{next:?}");
}

pub(crate) async fn fair_a_job_that_waits_for_jobs_takes_its_keys_turn_once_released(
    store: Arc<dyn Store>,
) {
    let (s, t, tp) = (&*store, &topic("fair_after"), &topic("fair_after_parents"));
    s.enqueue(t, flood("a", 3)).await.unwrap();
    // b-0000 waits for a parent; b-0001 for a parent that ended already (due at once).
    let p = live_parent(s, tp, "p").await;
    let waiting = after(
        s,
        t,
        keyed("b-0000", "b", Due::In(0)),
        &[&p],
        OnParentFailure::DeadLetter,
    )
    .await;
    assert_eq!(waiting, AfterOutcome::Waiting { parents_left: 1 });
    end_parent(s, &p, Finish::Done).await;
    later(s).await;
    // A parent whose end is kept: the job is due at once.
    s.retain(tp, Some(Retention::new(3_600_000, 100)), 100)
        .await
        .unwrap();
    let q = live_parent(s, tp, "q").await;
    let job = claim_id(s, tp, "q", LONG).await;
    assert_eq!(
        finish(s, tp, &job, Finish::Done).await,
        FinishOutcome::Applied
    );
    let at_once = after(
        s,
        t,
        keyed("c-0000", "c", Due::In(0)),
        &[&q],
        OnParentFailure::DeadLetter,
    )
    .await;
    assert!(
        matches!(
            at_once,
            AfterOutcome::Enqueued(EnqueueOutcome::Created { .. })
        ),
        "{at_once:?}"
    );
    // Each takes its key's turn beside the older flood.
    let first = claim(s, t, 3, LONG).await;
    assert_eq!(
        per_key(&first),
        counts_of(&[("a", 1), ("b", 1), ("c", 1)]),
        "{first:?}"
    );
}

/// Replaced under another key at the same due time, a job is claimed once.
pub(crate) async fn fair_a_job_replaced_under_another_key_is_claimed_once(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_replace_once"));
    // A job of another key keeps the topic's keys (it is due later).
    enqueue_one(s, t, keyed("k-0", "k", Due::In(60_000))).await;
    let at = now(s).await + 100;
    for round in 0..20 {
        let id = format!("x{round}");
        enqueue_one(s, t, keyed(&id, "one", Due::At(at))).await;
        let again = NewJob::new(id.clone(), KEYED_REC.to_vec(), Due::At(at), true)
            .with_key(Some("two".into()));
        s.enqueue(t, vec![again]).await.unwrap();
        let plain = NewJob::new(id, REC.to_vec(), Due::At(at), true);
        s.enqueue(t, vec![plain]).await.unwrap();
    }
    wait_past(s, at).await;
    let ids = claimed_ids(s, t, 100).await;
    let mut once = ids.clone();
    once.sort_unstable();
    once.dedup();
    assert_eq!(once.len(), ids.len(), "a job claimed twice: {ids:?}");
    assert_eq!(ids.len(), 20, "{ids:?}");
}

// Limits per key (ClaimRequest::key_limits): at most `max running` jobs of one key leased at once, a
// rate per key (a GCRA on the store's clock), and a hold of one key by a rate-limited finish of one of
// its jobs. The key "" (jobs created without a key) is under none of them.

/// A claim of up to `max` under `limits` per key.
async fn claim_limited(
    s: &dyn Store,
    t: &str,
    max: usize,
    lease_ms: u64,
    limits: KeyLimits,
) -> ClaimBatch {
    let request = ClaimRequest::new(max, lease_ms, 100, 10).key_limits(limits);
    s.claim(t, request).await.unwrap()
}

/// How many jobs of each key a claim took (keys from ids `<key>-<n>`).
fn per_key(batch: &ClaimBatch) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for job in &batch.jobs {
        *n.entry(key_of(&job.id).to_owned()).or_default() += 1;
    }
    n
}

fn counts_of(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

pub(crate) async fn fair_key_limit_max_running_holds_per_key_while_other_keys_run_freely(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_max"));
    let limits = KeyLimits::new().max_running(2);
    let jobs = ["a", "b"].iter().flat_map(|k| flood(k, 10)).collect();
    s.enqueue(t, jobs).await.unwrap();

    let first = claim_limited(s, t, 20, LONG, limits).await;
    assert_eq!(
        per_key(&first),
        counts_of(&[("a", 2), ("b", 2)]),
        "{first:?}"
    );
    assert_eq!(
        first.next_due_ms, None,
        "every key with a due job is at its max running: the finish that frees a slot hints"
    );
    let none = claim_limited(s, t, 20, LONG, limits).await;
    assert!(none.jobs.is_empty(), "{none:?}");
    assert_eq!(none.next_due_ms, None);
    // Another key runs beside them, under its own limit.
    s.enqueue(t, flood("c", 3)).await.unwrap();
    let c = claim_limited(s, t, 20, LONG, limits).await;
    assert_eq!(per_key(&c), counts_of(&[("c", 2)]), "{c:?}");

    // Each end of a lease (done, retry, dead) frees exactly one slot, of its key.
    let of = |key: &str| -> Vec<_> {
        let jobs = first.jobs.iter().filter(|j| key_of(&j.id) == key);
        jobs.cloned().collect()
    };
    let (a, b) = (of("a"), of("b"));
    let ends = [
        (&a[0], Finish::Done, "a"),
        (&b[0], retry(REC, 60_000, true), "b"),
        (&a[1], dead(REC, "boom"), "a"),
    ];
    for (job, end, key) in ends {
        let mut rx = s.hints();
        hints_for(s, &mut rx, t).await;
        let before = now(s).await;
        assert_eq!(finish(s, t, job, end).await, FinishOutcome::Applied);
        let seen = hints_for(s, &mut rx, t).await;
        assert!(
            seen.iter().any(|at| *at >= before),
            "the end of {}'s lease frees a slot of its key and wakes the claimers: {seen:?}",
            job.id
        );
        let next = claim_limited(s, t, 20, LONG, limits).await;
        assert_eq!(
            per_key(&next),
            counts_of(&[(key, 1)]),
            "after {}: {next:?}",
            job.id
        );
        let none = claim_limited(s, t, 20, LONG, limits).await;
        assert!(none.jobs.is_empty(), "after {}: {none:?}", job.id);
    }
}

pub(crate) async fn fair_key_limit_a_keys_own_limits_replace_the_claims_for_that_key_alone(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_own"));
    // The claims' limits: 2 of a key at once.
    let limits = KeyLimits::new().max_running(2);
    let jobs = ["a", "b", "c"].iter().flat_map(|k| flood(k, 10)).collect();
    s.enqueue(t, jobs).await.unwrap();
    // b may run 5 at once, c has no limit; a keeps the claims'.
    s.set_key_limits(t, "b", Some(KeyLimits::new().max_running(5)))
        .await
        .unwrap();
    s.set_key_limits(t, "c", Some(KeyLimits::new()))
        .await
        .unwrap();
    let listed = s.key_limits(t).await.unwrap();
    assert_eq!(
        listed,
        [
            ("b".to_owned(), KeyLimits::new().max_running(5)),
            ("c".to_owned(), KeyLimits::new())
        ]
    );

    let first = claim_limited(s, t, 30, LONG, limits).await;
    assert_eq!(
        per_key(&first),
        counts_of(&[("a", 2), ("b", 5), ("c", 10)]),
        "{first:?}"
    );
    let none = claim_limited(s, t, 30, LONG, limits).await;
    assert!(none.jobs.is_empty(), "a and b are at their max: {none:?}");

    // Raising a parked key's limit takes effect at once: the claimers are hinted.
    let mut rx = s.hints();
    hints_for(s, &mut rx, t).await;
    let before = now(s).await;
    s.set_key_limits(t, "a", Some(KeyLimits::new().max_running(4)))
        .await
        .unwrap();
    let seen = hints_for(s, &mut rx, t).await;
    assert!(
        seen.iter().any(|at| *at >= before),
        "a key waiting at its max running is looked at again: {seen:?}"
    );
    let more = claim_limited(s, t, 30, LONG, limits).await;
    assert_eq!(per_key(&more), counts_of(&[("a", 2)]), "{more:?}");

    // Cleared, a key is back under the claims' limits: a (4 running) and b (5) are over 2.
    s.set_key_limits(t, "a", None).await.unwrap();
    s.set_key_limits(t, "b", None).await.unwrap();
    let listed = s.key_limits(t).await.unwrap();
    assert_eq!(listed, [("c".to_owned(), KeyLimits::new())]);
    let none = claim_limited(s, t, 30, LONG, limits).await;
    assert!(none.jobs.is_empty(), "{none:?}");
    s.set_key_limits(t, "c", None).await.unwrap();
    assert!(s.key_limits(t).await.unwrap().is_empty());
}

pub(crate) async fn fair_key_limit_a_max_of_its_own_counts_the_keys_jobs_already_running(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_own_running"));
    let none_per_key = KeyLimits::new();
    s.enqueue(t, flood("a", 6)).await.unwrap();
    // Three of a's jobs run, claimed under no limit per key.
    let first = claim_limited(s, t, 3, LONG, none_per_key).await;
    assert_eq!(per_key(&first), counts_of(&[("a", 3)]), "{first:?}");
    // From now on a may run 2 at once: the 3 running count against it.
    s.set_key_limits(t, "a", Some(KeyLimits::new().max_running(2)))
        .await
        .unwrap();
    let none = claim_limited(s, t, 10, LONG, none_per_key).await;
    assert!(none.jobs.is_empty(), "3 running, max 2: {none:?}");
    // Each end frees the slot its job took: one end leaves 2 running, the next lets one start.
    let done = |i: usize| finish(s, t, &first.jobs[i], Finish::Done);
    assert_eq!(done(0).await, FinishOutcome::Applied);
    let none = claim_limited(s, t, 10, LONG, none_per_key).await;
    assert!(none.jobs.is_empty(), "2 running, max 2: {none:?}");
    assert_eq!(done(1).await, FinishOutcome::Applied);
    let one = claim_limited(s, t, 10, LONG, none_per_key).await;
    assert_eq!(per_key(&one), counts_of(&[("a", 1)]), "{one:?}");
    let none = claim_limited(s, t, 10, LONG, none_per_key).await;
    assert!(none.jobs.is_empty(), "2 running again: {none:?}");
    s.set_key_limits(t, "a", None).await.unwrap();
}

pub(crate) async fn fair_key_limit_a_max_set_on_the_workers_counts_the_jobs_claimed_under_it(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_new_max"));
    s.enqueue(t, flood("a", 8)).await.unwrap();
    // Three of a's jobs run, claimed under no limit per key (workers before a deploy).
    let before = claim_limited(s, t, 3, LONG, KeyLimits::new()).await;
    assert_eq!(per_key(&before), counts_of(&[("a", 3)]), "{before:?}");
    // Workers that claim under a max of 2 per key: the three were not claimed under it.
    let max_two = KeyLimits::new().max_running(2);
    let after = claim_limited(s, t, 10, LONG, max_two).await;
    assert_eq!(per_key(&after), counts_of(&[("a", 2)]), "{after:?}");
    // The three end: the two claimed under the max still run, and still count.
    for job in &before.jobs {
        assert_eq!(
            finish(s, t, job, Finish::Done).await,
            FinishOutcome::Applied
        );
    }
    let none = claim_limited(s, t, 10, LONG, max_two).await;
    assert!(none.jobs.is_empty(), "2 running under a max of 2: {none:?}");
    // One of those ends: one more may start, and no more.
    assert_eq!(
        finish(s, t, &after.jobs[0], Finish::Done).await,
        FinishOutcome::Applied
    );
    let one = claim_limited(s, t, 10, LONG, max_two).await;
    assert_eq!(per_key(&one), counts_of(&[("a", 1)]), "{one:?}");
    let none = claim_limited(s, t, 10, LONG, max_two).await;
    assert!(none.jobs.is_empty(), "2 running again: {none:?}");
}

pub(crate) async fn fair_running_keyed_jobs_show_their_holder_counted_or_not(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_holder"));
    let mut jobs = flood("a", 2);
    jobs.extend(flood("b", 2));
    s.enqueue(t, jobs).await.unwrap();
    // Two claimed under no max per key (not counted under their keys), two under one (counted).
    let uncounted = ClaimRequest::new(2, LONG, 100, 10).holder(7);
    let first = s.claim(t, uncounted).await.unwrap();
    let counted = ClaimRequest::new(2, LONG, 100, 10)
        .holder(8)
        .key_limits(KeyLimits::new().max_running(5));
    let second = s.claim(t, counted).await.unwrap();
    assert_eq!((first.jobs.len(), second.jobs.len()), (2, 2));
    for (batch, holder) in [(&first, 7), (&second, 8)] {
        for job in &batch.jobs {
            let found = s.job(t, &job.id).await.unwrap().unwrap();
            assert_eq!(found.holder, Some(holder), "{}", job.id);
        }
    }
    let running = s
        .page(t, &PageQuery::new(PageState::Running, 10))
        .await
        .unwrap();
    let mut holders: Vec<_> = running.iter().map(|e| e.holder).collect();
    holders.sort();
    assert_eq!(holders, [Some(7), Some(7), Some(8), Some(8)]);
}

pub(crate) async fn fair_key_limit_a_finish_that_frees_a_parked_key_wakes_claimers(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_wake"));
    let limits = KeyLimits::new().max_running(1);
    let mut jobs = flood("a", 2);
    jobs.extend(flood("b", 1));
    s.enqueue(t, jobs).await.unwrap();
    let first = claim_limited(s, t, 10, LONG, limits).await;
    assert_eq!(
        per_key(&first),
        counts_of(&[("a", 1), ("b", 1)]),
        "{first:?}"
    );
    assert_eq!(first.next_due_ms, None, "a is parked, b has nothing due");
    let job = |key: &str| first.jobs.iter().find(|j| key_of(&j.id) == key).unwrap();

    // b's end wakes the claimers, who find a still at its max: they wait for the next end.
    let mut rx = s.hints();
    hints_for(s, &mut rx, t).await;
    assert_eq!(
        finish(s, t, job("b"), Finish::Done).await,
        FinishOutcome::Applied
    );
    let none = claim_limited(s, t, 10, LONG, limits).await;
    assert!(none.jobs.is_empty(), "{none:?}");
    assert_eq!(none.next_due_ms, None);
    hints_for(s, &mut rx, t).await;
    // a's end frees its slot: that wakes them too.
    let before = now(s).await;
    assert_eq!(
        finish(s, t, job("a"), Finish::Done).await,
        FinishOutcome::Applied
    );
    let seen = hints_for(s, &mut rx, t).await;
    assert!(
        seen.iter().any(|at| *at >= before),
        "the end that frees a parked key's slot wakes the claimers: {seen:?}"
    );
    let next = claim_limited(s, t, 10, LONG, limits).await;
    let ids: Vec<_> = next.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a-0001"]);
}

pub(crate) async fn fair_key_limit_an_expired_lease_frees_its_keys_slot(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_key_limit_swept"));
    let limits = KeyLimits::new().max_running(1);
    s.enqueue(t, flood("a", 2)).await.unwrap();
    let first = claim_limited(s, t, 10, SHORT, limits).await;
    let ids: Vec<_> = first.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a-0000"], "one of a may run");
    let none = claim_limited(s, t, 10, LONG, limits).await;
    if none.swept == 0 {
        assert!(none.jobs.is_empty(), "{none:?}");
    }
    // Its worker crashed: once its lease expires, the claim sweeps it and the key's slot is free.
    wait_past(s, first.now_ms() + SHORT as i64).await;
    let after = claim_limited(s, t, 10, LONG, limits).await;
    assert_eq!(after.swept + none.swept, 1, "{after:?}");
    if none.swept == 0 {
        let ids: Vec<_> = after.jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(
            ids,
            ["a-0000"],
            "swept back to its place, and its key's slot free"
        );
    }
    let none = claim_limited(s, t, 10, LONG, limits).await;
    assert!(none.jobs.is_empty(), "one of a runs again: {none:?}");
}

pub(crate) async fn fair_key_limit_a_dead_letter_requeued_keeps_its_key(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_key_limit_requeued"));
    let limits = KeyLimits::new().max_running(1);
    s.enqueue(t, flood("a", 3)).await.unwrap();
    // a-0000 dies by its handler's last failure, a-0001 of stalls (its lease expired once, with a
    // stall limit of 0).
    let first = claim_limited(s, t, 10, LONG, limits).await;
    assert_eq!(per_key(&first), counts_of(&[("a", 1)]), "{first:?}");
    let job = &first.jobs[0];
    assert_eq!(
        finish(s, t, job, dead(REC, "boom")).await,
        FinishOutcome::Applied
    );
    let request = ClaimRequest::new(10, SHORT, 100, 0).key_limits(limits);
    let stalled = s.claim(t, request).await.unwrap();
    assert_eq!(per_key(&stalled), counts_of(&[("a", 1)]), "{stalled:?}");
    wait_past(s, stalled.now_ms() + SHORT as i64).await;
    // a-0002 under a long lease: a short one could expire before the claim below that must find the
    // key at its max (on a loaded machine it did, and a-0002 was claimed again there).
    let long = ClaimRequest::new(10, LONG, 100, 0).key_limits(limits);
    let running = s.claim(t, long).await.unwrap();
    assert_eq!(running.swept_dead, 1, "{running:?}");
    let ids: Vec<_> = running.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a-0002"], "the key's one slot, free again");

    // Both come back under their key: while a-0002 runs, the key is at its max, and neither is
    // claimed (without their key they would be, under no limit).
    let deaths = s.dead_list(t, 0, 10).await.unwrap();
    assert_eq!(deaths.len(), 2, "{deaths:?}");
    for entry in &deaths {
        let requeued = s.dead_requeue(t, &entry.death(), REC.to_vec()).await;
        assert!(
            matches!(requeued, Ok(RequeueOutcome::Requeued { .. })),
            "{requeued:?}"
        );
    }
    let none = claim_limited(s, t, 10, LONG, limits).await;
    assert!(none.jobs.is_empty(), "a is at its max running: {none:?}");
    assert_eq!(
        finish(s, t, &running.jobs[0], Finish::Done).await,
        FinishOutcome::Applied
    );
    for _ in 0..2 {
        let next = claim_limited(s, t, 10, LONG, limits).await;
        assert_eq!(
            per_key(&next),
            counts_of(&[("a", 1)]),
            "one at a time: {next:?}"
        );
        assert_eq!(
            finish(s, t, &next.jobs[0], Finish::Done).await,
            FinishOutcome::Applied
        );
    }
    let gone = claim_limited(s, t, 10, LONG, limits).await;
    assert!(gone.jobs.is_empty(), "{gone:?}");
}

pub(crate) async fn fair_key_limit_a_key_takes_its_jobs_from_between_a_held_keys(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_between"));
    enqueue_one(s, t, keyed("a-0000", "a", Due::In(0))).await;
    let first = claim(s, t, 10, LONG).await;
    let hold = Finish::RateLimited {
        record: REC.to_vec(),
        delay_ms: 60_000,
    };
    assert_eq!(
        finish(s, t, &first.jobs[0], hold).await,
        FinishOutcome::Applied
    );
    // Due in this order while a is held: b's jobs between a's.
    for id in ["b-0000", "b-0001", "a-0001", "b-0002", "a-0002", "b-0003"] {
        later(s).await;
        enqueue_one(s, t, keyed(id, key_of(id), Due::In(0))).await;
    }
    let b = claim(s, t, 3, LONG).await;
    let ids: Vec<_> = b.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["b-0000", "b-0001", "b-0002"]);
    let b = claim(s, t, 10, LONG).await;
    let ids: Vec<_> = b.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["b-0003"]);
    assert!(claim(s, t, 10, LONG).await.jobs.is_empty(), "a is held");
    assert_eq!(s.counts(t).await.unwrap().ready, 2, "a's two are still due");
    assert_eq!(
        s.counts(t).await.unwrap().scheduled,
        1,
        "and a-0000 after the hold"
    );
}

pub(crate) async fn fair_key_limit_rate_per_key_lets_each_key_go_at_its_rate(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_rate"));
    // 100 per second per key: a burst of 5, then one every 10 ms.
    let rate = RateLimit::per_second(100);
    let limits = KeyLimits::new().rate(rate);
    let jobs = ["a", "b"].iter().flat_map(|k| flood(k, 400)).collect();
    s.enqueue(t, jobs).await.unwrap();

    // Claims for one second of the store's clock.
    let mut got: BTreeMap<String, usize> = BTreeMap::new();
    let first = claim_limited(s, t, 50, LONG, limits).await;
    let start = first.now_ms();
    assert_eq!(
        per_key(&first),
        counts_of(&[("a", 5), ("b", 5)]),
        "each key's burst: {first:?}"
    );
    let mut batch = first;
    let mut claims = 0;
    while batch.now_ms() < start + 1_000 {
        for (key, n) in per_key(&batch) {
            *got.entry(key).or_default() += n;
        }
        if let Some(next) = batch.next_due_ms {
            assert!(next <= batch.now_ms() + 10, "the next go time: {batch:?}");
        }
        // Claims about every ms (pacing, not waiting for anything).
        tokio::time::sleep(Duration::from_millis(1)).await;
        batch = claim_limited(s, t, 50, LONG, limits).await;
        claims += 1;
    }
    // A batch claimed past the second is not counted.
    for key in ["a", "b"] {
        let n = got.get(key).copied().unwrap_or(0);
        // At most the burst and one per 10 ms; about that much, whatever else the machine does.
        assert!(
            n <= 105,
            "key {key}: {n} jobs in a second at 100/s: {got:?}"
        );
        assert!(
            n >= 90,
            "key {key}: {n} jobs in a second at 100/s ({claims} claims): {got:?}"
        );
    }
}

pub(crate) async fn fair_key_limit_next_due_is_a_rate_held_keys_go_time_or_none_when_all_are_parked(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_next_parked"));
    let limits = KeyLimits::new().max_running(1);
    let jobs = ["a", "b"].iter().flat_map(|k| flood(k, 2)).collect();
    s.enqueue(t, jobs).await.unwrap();
    let first = claim_limited(s, t, 10, LONG, limits).await;
    assert_eq!(per_key(&first), counts_of(&[("a", 1), ("b", 1)]));
    assert_eq!(first.next_due_ms, None, "both keys are parked: {first:?}");
    assert_eq!(first.held_back, None, "the topic is not held back");

    // 10 per second, a burst of 1: one job, then the next 100 ms later.
    let t = &topic("fair_key_limit_next_rate");
    let limits = KeyLimits::new().rate(RateLimit::per_second(10));
    s.enqueue(t, flood("a", 3)).await.unwrap();
    let first = claim_limited(s, t, 10, LONG, limits).await;
    assert_eq!(first.jobs.len(), 1, "{first:?}");
    let go = first.now_ms() + 100;
    assert_eq!(first.next_due_ms, Some(go), "the key's go time: {first:?}");
    let held = claim_limited(s, t, 10, LONG, limits).await;
    if held.now_ms() < go {
        assert!(held.jobs.is_empty(), "{held:?}");
        assert_eq!(held.next_due_ms, Some(go), "{held:?}");
    }
    // A job of another key, or without a key, is not held by it.
    enqueue_one(s, t, keyed("b-0000", "b", Due::In(0))).await;
    enqueue_one(s, t, new_job("plain", REC, Due::In(0))).await;
    let other = claim_limited(s, t, 10, LONG, limits).await;
    let mut ids: Vec<_> = other.jobs.iter().map(|j| j.id.as_str()).collect();
    ids.sort_unstable();
    if other.now_ms() < go {
        assert_eq!(ids, ["b-0000", "plain"], "{other:?}");
        assert_eq!(other.next_due_ms, Some(go), "{other:?}");
    }
    wait_past(s, go - 1).await;
    let again = claim_limited(s, t, 10, LONG, limits).await;
    assert!(
        again.jobs.iter().any(|j| key_of(&j.id) == "a"),
        "at its go time: {again:?}"
    );
}

pub(crate) async fn fair_key_limit_a_rate_limited_finish_holds_only_its_key(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_key_limit_hold"));
    let jobs = ["a", "b"].iter().flat_map(|k| flood(k, 3)).collect();
    s.enqueue(t, jobs).await.unwrap();
    let first = claim(s, t, 2, LONG).await;
    assert_eq!(per_key(&first), counts_of(&[("a", 1), ("b", 1)]));
    let a0 = first.jobs.iter().find(|j| j.id == "a-0000").unwrap();

    // The provider says: not before 300 ms, for a's calls only.
    let before = now(s).await;
    let hold = Finish::RateLimited {
        record: REC.to_vec(),
        delay_ms: 300,
    };
    assert_eq!(finish(s, t, a0, hold).await, FinishOutcome::Applied);
    let after = now(s).await;
    assert_eq!(
        s.counts(t).await.unwrap().flow.held_until_ms,
        None,
        "the topic is not held"
    );
    let others = claim(s, t, 10, LONG).await;
    let ids: Vec<_> = others.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["b-0001", "b-0002"], "only b's, a is held");
    let go = others.next_due_ms.expect("a's go time");
    assert!(
        (before + 300..=after + 300).contains(&go),
        "a is held until 300 ms after the finish: {go} ({before}..={after})"
    );
    let none = claim(s, t, 10, LONG).await;
    if none.now_ms() < go {
        assert!(none.jobs.is_empty(), "{none:?}");
    }

    // Once the hold is over, a's jobs go (the one that was held among them, its attempt unused).
    wait_past(s, go - 1).await;
    let back = claim(s, t, 10, LONG).await;
    let mut ids: Vec<_> = back.jobs.iter().map(|j| j.id.as_str()).collect();
    ids.extend(none.jobs.iter().map(|j| j.id.as_str()));
    ids.sort_unstable();
    assert_eq!(ids, ["a-0000", "a-0001", "a-0002"], "{back:?}");
    assert_eq!(s.counts(t).await.unwrap().retried, 0);
}

pub(crate) async fn fair_key_limit_the_key_of_jobs_without_a_key_is_not_limited(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_key_limit_unkeyed"));
    let limits = KeyLimits::new()
        .max_running(1)
        .rate(RateLimit::per_second(1));
    s.enqueue(t, flood("k", 2)).await.unwrap();
    // Created once the topic has keyed jobs: the key "".
    let plain: Vec<_> = (0..10)
        .map(|i| new_job(&format!("plain-{i}"), REC, Due::In(0)))
        .collect();
    s.enqueue(t, plain).await.unwrap();
    let batch = claim_limited(s, t, 20, LONG, limits).await;
    assert_eq!(
        per_key(&batch),
        counts_of(&[("k", 1), ("plain", 10)]),
        "the key \"\" under no limit: {batch:?}"
    );

    // A rate-limited finish of one of its jobs holds the topic, as for any job without a key.
    let job = batch.jobs.iter().find(|j| j.id == "plain-0").unwrap();
    let hold = Finish::RateLimited {
        record: REC.to_vec(),
        delay_ms: 60_000,
    };
    assert_eq!(finish(s, t, job, hold).await, FinishOutcome::Applied);
    assert!(s.counts(t).await.unwrap().flow.held_until_ms.is_some());
    enqueue_one(s, t, keyed("m-0000", "m", Due::In(0))).await;
    let held = claim_limited(s, t, 20, LONG, limits).await;
    assert!(held.jobs.is_empty(), "the topic is held: {held:?}");
}

pub(crate) async fn fair_a_job_from_before_the_first_key_moved_later_is_still_claimed(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_legacy_moved"));
    // Unkeyed, due soon, enqueued before the topic has any keyed job.
    create(s, t, "old", REC, Due::In(100)).await;
    s.enqueue(t, flood("flood", 3)).await.unwrap();
    // Moved past every due time the topic had when its first keyed job came.
    let at = reschedule(s, t, "old", Due::In(400)).await;
    let mut seen = Vec::new();
    let deadline = at + 5_000;
    while !seen.iter().any(|id| id == "old") {
        let batch = s
            .claim(t, ClaimRequest::new(10, 30_000, 100, 3))
            .await
            .unwrap();
        assert!(batch.now_ms() < deadline, "old was never claimed: {seen:?}");
        for j in &batch.jobs {
            assert!(
                j.id != "old" || batch.now_ms() >= at,
                "claimed before it was due"
            );
        }
        seen.extend(batch.jobs.iter().map(|j| j.id.clone()));
        if batch.jobs.is_empty() {
            wait_past(s, now(s).await).await;
        }
    }
    assert_eq!(seen.len(), 4, "each job once: {seen:?}");
}

/// A keyed job still running when its topic's claim finds no key with anything left (only a job from
/// before the first key is due: the topic claims as a plain one again) comes back by a retry, its key
/// kept, and is claimed once, before another key's job that makes the topic keyed again.
pub(crate) async fn fair_a_keyed_job_that_retries_after_its_topic_claims_plainly_again_is_claimed_once(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("fair_retry_unfiled"));
    // Unkeyed, due a little later, enqueued before the topic's first keyed job.
    let old_at = create(s, t, "old", REC, Due::In(300)).await;
    enqueue_one(s, t, keyed("k", "a", Due::In(0))).await;
    let k = claim_id(s, t, "k", LONG).await;
    // `old` comes due while `k` runs, and no key has a job left.
    wait_past(s, old_at).await;
    claim_id(s, t, "old", LONG).await;
    // `k` retries (its record from the worker with its key, as claimed), due now; then a job of
    // another key.
    assert_eq!(k.record, rec_with_key("a"));
    assert_eq!(
        finish(s, t, &k, retry(&rec_with_key("a"), 0, true)).await,
        FinishOutcome::Applied
    );
    assert_eq!(stored_key(s, t, "k").await.as_deref(), Some("a"));
    later(s).await;
    enqueue_one(s, t, keyed("b-1", "b", Due::In(0))).await;
    assert_eq!(claimed_ids(s, t, 10).await, ["k", "b-1"]);
    assert!(claimed_ids(s, t, 10).await.is_empty());
}

/// Job `id`'s key for fairness as the store finds the job by id.
async fn stored_key(s: &dyn Store, t: &str, id: &str) -> Option<String> {
    let job = s.job(t, id).await.unwrap();
    job.unwrap_or_else(|| panic!("{id:?} not found")).key
}

/// The key of job `id` in the listing of `state`, and in a search of that state by the id's prefix.
async fn listed_key(s: &dyn Store, t: &str, state: PageState, id: &str) -> Option<String> {
    let page = s.page(t, &PageQuery::new(state, 100)).await.unwrap();
    let entry = page.iter().find(|e| e.id == id);
    let listed = entry.unwrap_or_else(|| panic!("{id:?} not listed in {state:?}: {page:?}"));
    let found = s.find_prefix(t, state, id, None, 1000).await.unwrap();
    let searched = found.entries.iter().find(|e| e.id == id);
    let searched = searched.unwrap_or_else(|| panic!("{id:?} not found in {state:?}: {found:?}"));
    assert_eq!(listed.key, searched.key, "{listed:?} against {searched:?}");
    listed.key.clone()
}

/// A job found by id (and listed, and searched by id) shows its key while it waits for jobs, once
/// released, while it runs and once dead; a job without a key, and a finished one, show none.
pub(crate) async fn fair_a_jobs_key_is_found_with_it_in_every_state(store: Arc<dyn Store>) {
    let (s, t, tp) = (
        &*store,
        &topic("fair_key_found"),
        &topic("fair_key_found_p"),
    );
    // A key may hold spaces.
    let key = "tenant 7";
    let p = live_parent(s, tp, "p").await;
    let waiting = after(
        s,
        t,
        keyed("w", key, Due::In(0)),
        &[&p],
        OnParentFailure::DeadLetter,
    )
    .await;
    assert_eq!(waiting, AfterOutcome::Waiting { parents_left: 1 });
    assert_eq!(stored_key(s, t, "w").await.as_deref(), Some(key), "waiting");
    let listed = listed_key(s, t, PageState::Waiting, "w").await;
    assert_eq!(listed.as_deref(), Some(key), "listed waiting");
    end_parent(s, &p, Finish::Done).await;
    assert_eq!(
        stored_key(s, t, "w").await.as_deref(),
        Some(key),
        "released"
    );
    let listed = listed_key(s, t, PageState::Scheduled, "w").await;
    assert_eq!(listed.as_deref(), Some(key), "listed due");
    enqueue_one(s, t, new_job("plain", REC, Due::In(60_000))).await;
    assert_eq!(stored_key(s, t, "plain").await, None, "no key");
    assert_eq!(listed_key(s, t, PageState::Scheduled, "plain").await, None);

    let job = claim_id(s, t, "w", LONG).await;
    assert_eq!(stored_key(s, t, "w").await.as_deref(), Some(key), "running");
    let listed = listed_key(s, t, PageState::Running, "w").await;
    assert_eq!(listed.as_deref(), Some(key), "listed running");
    assert_eq!(
        finish(s, t, &job, dead(REC, "boom")).await,
        FinishOutcome::Applied
    );
    assert_eq!(stored_key(s, t, "w").await.as_deref(), Some(key), "dead");
    let listed = listed_key(s, t, PageState::Dead, "w").await;
    assert_eq!(listed.as_deref(), Some(key), "listed dead");

    s.retain(t, Some(Retention::new(3_600_000, 100)), 100)
        .await
        .unwrap();
    enqueue_one(s, t, keyed("k", "acme", Due::In(0))).await;
    assert_eq!(stored_key(s, t, "k").await.as_deref(), Some("acme"), "due");
    let job = claim_id(s, t, "k", LONG).await;
    assert_eq!(
        finish(s, t, &job, Finish::Done).await,
        FinishOutcome::Applied
    );
    assert_eq!(stored_key(s, t, "k").await, None, "finished: forgotten");
}

/// A job found by id shows its key's load as claims see it: its key's jobs queued and running (at
/// its max running per key, with the limits the claim was under), then held by a rate-limited finish.
pub(crate) async fn fair_key_limit_a_jobs_key_load_shows_its_key_held_back(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("fair_key_limit_load"));
    let limits = KeyLimits::new().max_running(1);
    s.enqueue(t, flood("a", 3)).await.unwrap();
    let first = claim_limited(s, t, 1, LONG, limits).await;
    let ids: Vec<_> = first.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a-0000"], "{first:?}");
    enqueue_one(s, t, new_job("plain", REC, Due::In(60_000))).await;

    let job = s.job(t, "a-0001").await.unwrap().unwrap();
    let load = job.key_load.expect("a due keyed job's key load");
    assert_eq!(
        (
            load.key.as_str(),
            load.queued,
            load.running,
            load.held_until_ms
        ),
        ("a", 2, 1, None),
        "a's two due jobs queued, one running: {load:?}"
    );
    assert_eq!(job.key_limits, Some(limits));
    let running = s.job(t, "a-0000").await.unwrap().unwrap();
    assert_eq!(
        running.key_load.map(|l| l.running),
        Some(1),
        "the running job's key"
    );
    let plain = s.job(t, "plain").await.unwrap().unwrap();
    assert_eq!((plain.key, plain.key_load), (None, None), "no key, no load");

    let before = now(s).await;
    let hold = Finish::RateLimited {
        record: REC.to_vec(),
        delay_ms: 60_000,
    };
    assert_eq!(
        finish(s, t, &first.jobs[0], hold).await,
        FinishOutcome::Applied
    );
    let load = s.job(t, "a-0001").await.unwrap().unwrap().key_load.unwrap();
    let until = load.held_until_ms.expect("a held");
    assert!(until >= before + 60_000, "{until} against {before}");
    assert_eq!((load.queued, load.running), (3, 0), "{load:?}");
}
