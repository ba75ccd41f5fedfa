//! The dead letters: listing, requeue, purge, trim, and the hook's claim/ack/retry.

use std::sync::Arc;

use postpone::store::{
    DeadEntry, DeadSelection, Death, Due, RequeueOutcome, Store, StoredState, TrimPolicy,
};

use super::*;

fn ids(entries: &[DeadEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.id.as_str()).collect()
}

async fn dead_ids(s: &dyn Store, t: &str) -> Vec<String> {
    s.dead_list(t, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

/// The newest listed death of each id (sequence 0, which no death has, for an id with none).
async fn deaths(s: &dyn Store, t: &str, ids: &[&str]) -> Vec<Death> {
    let mut out = Vec::new();
    for id in ids {
        let newest = s.dead_of(t, id, 1).await.unwrap();
        out.push(newest.first().map_or(Death::new(*id, 0), DeadEntry::death));
    }
    out
}

async fn death(s: &dyn Store, t: &str, id: &str) -> Death {
    deaths(s, t, &[id]).await.remove(0)
}

async fn delivered(s: &dyn Store, t: &str, id: &str) -> bool {
    match state(s, t, id).await {
        Some(StoredState::Dead { delivered, .. }) => delivered,
        other => panic!("{id:?} should be dead, is {other:?}"),
    }
}

pub(crate) async fn dead_list_is_newest_first_with_offset_and_limit(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_list"));
    let died = make_dead(s, t, &["d1", "d2", "d3", "d4"]).await;
    let all = s.dead_list(t, 0, 10).await.unwrap();
    assert_eq!(ids(&all), ["d4", "d3", "d2", "d1"]);
    let times: Vec<i64> = all.iter().map(|e| e.died_at_ms).collect();
    assert_eq!(times, died.iter().rev().copied().collect::<Vec<_>>());
    assert_eq!(
        (all[0].reason.as_str(), all[0].record.as_slice()),
        ("boom d4", &b"final d4"[..])
    );

    assert_eq!(ids(&s.dead_list(t, 1, 2).await.unwrap()), ["d3", "d2"]);
    assert_eq!(ids(&s.dead_list(t, 3, 10).await.unwrap()), ["d1"]);
    assert!(s.dead_list(t, 4, 10).await.unwrap().is_empty());
    assert!(s.dead_list(t, 0, 0).await.unwrap().is_empty());
}

pub(crate) async fn dead_requeue_moves_a_dead_job_back_to_due(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_requeue"));
    make_dead(s, t, &["a"]).await;
    let a = death(s, t, "a").await;
    let before = now(s).await;
    let outcome = s.dead_requeue(t, &a, b"again".to_vec()).await.unwrap();
    let after = now(s).await;

    let job = s.job(t, "a").await.unwrap().unwrap();
    let StoredState::Due { due_at_ms } = job.state else {
        panic!("{job:?}")
    };
    assert!(before <= due_at_ms && due_at_ms <= after, "due now");
    assert_eq!(outcome, RequeueOutcome::Requeued { due_at_ms });
    assert_eq!(job.record, b"again");
    assert!(dead_ids(s, t).await.is_empty());
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.dead, counts.dead_pending, counts.ready),
        (0, 1, 1),
        "no longer listed, but its hook still runs"
    );
    assert_eq!(claim_id(s, t, "a", LONG).await.record, b"again");
    assert_eq!(
        s.dead_requeue(t, &a, b"x".to_vec()).await.unwrap(),
        RequeueOutcome::NotFound,
        "no longer dead"
    );
}

pub(crate) async fn dead_requeue_of_a_missing_job_is_false(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_requeue_missing"));
    assert_eq!(
        s.dead_requeue(t, &Death::new("nope", 1), REC.to_vec())
            .await
            .unwrap(),
        RequeueOutcome::NotFound
    );
    assert_eq!(state(s, t, "nope").await, None);
    let due = create(s, t, "live", b"live", Due::In(60_000)).await;
    assert_eq!(
        s.dead_requeue(t, &Death::new("live", 1), REC.to_vec())
            .await
            .unwrap(),
        RequeueOutcome::NotFound,
        "live but not dead"
    );
    let job = s.job(t, "live").await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.record),
        (StoredState::Due { due_at_ms: due }, b"live".to_vec())
    );
}

pub(crate) async fn dead_requeue_beside_a_live_job_of_the_same_id_is_job_exists(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("dead_requeue_exists"));
    make_dead(s, t, &["a"]).await;
    let due = create(s, t, "a", b"live", Due::In(60_000)).await;
    let a = death(s, t, "a").await;
    assert_eq!(
        s.dead_requeue(t, &a, b"again".to_vec()).await.unwrap(),
        RequeueOutcome::LiveJobExists
    );

    let dead = s.dead_list(t, 0, 10).await.unwrap();
    assert_eq!(
        (ids(&dead), dead[0].record.as_slice()),
        (vec!["a"], &b"final a"[..]),
        "dead job kept"
    );
    let job = s.job(t, "a").await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.record),
        (StoredState::Due { due_at_ms: due }, b"live".to_vec())
    );
}

pub(crate) async fn dead_purge_deletes_one_or_all(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_purge"));
    make_dead(s, t, &["a", "b", "c"]).await;
    s.dead_ack(t, &deaths(s, t, &["b"]).await).await.unwrap();
    let a = death(s, t, "a").await;
    assert_eq!(s.dead_purge(t, DeadSelection::Death(&a)).await.unwrap(), 1);
    assert_eq!(s.dead_purge(t, DeadSelection::Death(&a)).await.unwrap(), 0);
    assert_eq!(state(s, t, "a").await, None);
    assert_eq!(dead_ids(s, t).await, ["c", "b"]);

    assert_eq!(
        s.dead_purge(t, DeadSelection::All).await.unwrap(),
        2,
        "pending hooks included"
    );
    assert!(dead_ids(s, t).await.is_empty());
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.dead, counts.dead_pending, counts.trimmed),
        (0, 2, 0),
        "purging is not trimming, and the hooks still run"
    );
    let mut to_hook = ids(&s.dead_claim(t, 10, LONG).await.unwrap())
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    to_hook.sort();
    assert_eq!(to_hook, ["a", "c"], "purged deaths still reach the hook");
}

pub(crate) async fn dead_trim_only_removes_delivered_jobs_and_counts_them(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_trim_delivered"));
    let died = make_dead(s, t, &["a", "b", "c"]).await;
    s.dead_ack(t, &deaths(s, t, &["a", "c"]).await)
        .await
        .unwrap();
    wait_past(s, died[2]).await;
    let all = TrimPolicy::new(Some(Duration::ZERO), Some(0));

    assert_eq!(s.dead_trim(t, all, 100).await.unwrap(), 2);
    assert_eq!(dead_ids(s, t).await, ["b"], "the pending one stays");
    assert_eq!(state(s, t, "a").await, None);
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.trimmed, counts.dead, counts.dead_pending),
        (2, 1, 1)
    );
    assert_eq!(s.dead_trim(t, all, 100).await.unwrap(), 0);
    assert_eq!(s.counts(t).await.unwrap().trimmed, 2);
}

pub(crate) async fn dead_trim_keeps_the_newest_keep(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_trim_keep"));
    make_dead(s, t, &["a", "b", "c", "d"]).await;
    s.dead_ack(t, &deaths(s, t, &["a", "b", "d"]).await)
        .await
        .unwrap();

    assert_eq!(
        s.dead_trim(t, keep(2), 100).await.unwrap(),
        2,
        "beyond the newest 2"
    );
    assert_eq!(dead_ids(s, t).await, ["d", "c"]);
    assert_eq!(
        s.dead_trim(t, keep(1), 100).await.unwrap(),
        0,
        "c is beyond, but pending"
    );
    assert_eq!(s.dead_trim(t, keep(0), 100).await.unwrap(), 1);
    assert_eq!(dead_ids(s, t).await, ["c"]);
    assert_eq!(s.counts(t).await.unwrap().trimmed, 3);
}

pub(crate) async fn dead_trim_removes_only_jobs_older_than_the_cutoff(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_trim_age"));
    let died = make_dead(s, t, &["a", "b"]).await;
    // c dies AGE_GAP ms after b, by the store's clock; a trim whose cutoff (the store's now minus the
    // age) falls in between takes a and b only.
    const AGE_GAP: i64 = 500;
    wait_past(s, died[1] + AGE_GAP).await;
    make_dead(s, t, &["c"]).await;
    s.dead_ack(t, &deaths(s, t, &["a", "b", "c"]).await)
        .await
        .unwrap();

    // The cutoff is died[1] + 1 if the trim runs at the `now` read here, later if it runs later: within
    // AGE_GAP of it, the cutoff is still before c died.
    let age = |now: i64| Duration::from_millis((now - died[1] - 1) as u64);
    let by_age = TrimPolicy::new(Some(age(now(s).await)), None);
    assert_eq!(
        s.dead_trim(t, by_age, 100).await.unwrap(),
        2,
        "died before c"
    );
    assert_eq!(dead_ids(s, t).await, ["c"]);
    let by_age = TrimPolicy::new(Some(age(now(s).await)), None);
    assert_eq!(s.dead_trim(t, by_age, 100).await.unwrap(), 0);
    assert_eq!(s.counts(t).await.unwrap().trimmed, 2);
}

pub(crate) async fn dead_trim_removes_at_most_limit_per_call(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_trim_limit"));
    make_dead(s, t, &["a", "b", "c"]).await;
    s.dead_ack(t, &deaths(s, t, &["a", "b", "c"]).await)
        .await
        .unwrap();

    assert_eq!(s.dead_trim(t, keep(0), 2).await.unwrap(), 2);
    assert_eq!(dead_ids(s, t).await, ["c"], "oldest first");
    assert_eq!(s.dead_trim(t, keep(0), 2).await.unwrap(), 1);
    assert_eq!(s.counts(t).await.unwrap().trimmed, 3);
}

pub(crate) async fn dead_claim_takes_due_hooks_earliest_first_and_leases_them(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("dead_claim"));
    let died = make_dead(s, t, &["a", "b", "c"]).await;
    s.dead_ack(t, &deaths(s, t, &["b"]).await).await.unwrap();
    assert!(claim(s, t, 0, LONG).await.dead_pending);

    let first = s.dead_claim(t, 1, LONG).await.unwrap();
    assert_eq!(ids(&first), ["a"], "earliest first");
    let a = &first[0];
    assert_eq!(
        (a.record.as_slice(), a.reason.as_str(), a.died_at_ms),
        (&b"final a"[..], "boom a", died[0])
    );
    assert_eq!(
        ids(&s.dead_claim(t, 10, LONG).await.unwrap()),
        ["c"],
        "acked ones are not handed out"
    );
    assert!(
        s.dead_claim(t, 10, LONG).await.unwrap().is_empty(),
        "leased ones are not handed out"
    );
    assert!(!claim(s, t, 0, LONG).await.dead_pending);

    assert!(!delivered(s, t, "a").await, "claimed is not delivered");
    assert_eq!(s.counts(t).await.unwrap().dead_pending, 2);
}

pub(crate) async fn dead_claimed_entries_come_back_after_the_lease(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_claim_lease"));
    make_dead(s, t, &["a"]).await;
    assert_eq!(ids(&s.dead_claim(t, 10, SHORT).await.unwrap()), ["a"]);
    let back = eventually_within(
        WAIT,
        "the unacknowledged hook to be due again",
        || async move {
            let got = s.dead_claim(t, 10, LONG).await.unwrap();
            (!got.is_empty()).then_some(got)
        },
    )
    .await;
    assert_eq!(ids(&back), ["a"]);
}

pub(crate) async fn dead_ack_marks_the_hook_delivered(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_ack"));
    make_dead(s, t, &["a", "b"]).await;
    assert_eq!(s.dead_claim(t, 10, LONG).await.unwrap().len(), 2);
    s.dead_ack(t, &deaths(s, t, &["a", "nope"]).await)
        .await
        .unwrap();
    assert!(delivered(s, t, "a").await);
    assert!(!delivered(s, t, "b").await);
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.dead, counts.dead_pending), (2, 1));
    s.dead_ack(t, &deaths(s, t, &["b"]).await).await.unwrap();
    assert_eq!(s.counts(t).await.unwrap().dead_pending, 0);
}

pub(crate) async fn dead_retry_makes_the_hook_due_after_the_delay(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("dead_retry"));
    make_dead(s, t, &["a"]).await;
    assert_eq!(s.dead_claim(t, 10, LONG).await.unwrap().len(), 1);
    let a = death(s, t, "a").await;
    s.dead_retry(t, &a, LONG).await.unwrap();
    assert!(
        s.dead_claim(t, 10, LONG).await.unwrap().is_empty(),
        "not before the delay"
    );
    s.dead_retry(t, &a, SHORT).await.unwrap();
    let back = eventually_within(WAIT, "the failed hook to be due again", || async move {
        let got = s.dead_claim(t, 10, LONG).await.unwrap();
        (!got.is_empty()).then_some(got)
    })
    .await;
    assert_eq!(ids(&back), ["a"]);

    s.dead_retry(t, &Death::new("nope", 1), 0).await.unwrap();
    assert_eq!(state(s, t, "nope").await, None);
    assert_eq!(s.counts(t).await.unwrap().dead_pending, 1);
}

/// Trims by count only.
fn keep(n: u64) -> TrimPolicy {
    TrimPolicy::new(None, Some(n))
}
