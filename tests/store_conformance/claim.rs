//! Claim: order, `max`, tokens, and the times a claim reports.

use std::sync::Arc;

use postpone::store::{Due, FinishItem, FinishOutcome, Store, StoredState};

use super::*;

pub(crate) async fn claim_takes_the_earliest_due_first_up_to_max(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("claim_order"));
    // Ids in another order than their due times.
    let due_c = create(s, t, "job-c", b"c", Due::In(10)).await;
    let due_a = create(s, t, "job-a", b"a", Due::In(30)).await;
    let due_b = create(s, t, "job-b", b"b", Due::In(50)).await;
    let due_later = create(s, t, "later", b"l", Due::In(60_000)).await;
    assert!(due_c < due_a && due_a < due_b);
    wait_past(s, due_b).await;

    let batch = claim(s, t, 2, LONG).await;
    let got: Vec<_> = batch
        .jobs
        .iter()
        .map(|j| (j.id.as_str(), j.due_at_ms, j.record.as_slice()))
        .collect();
    assert_eq!(
        got,
        [("job-c", due_c, &b"c"[..]), ("job-a", due_a, &b"a"[..])]
    );
    assert_eq!(batch.next_due_ms, Some(due_b));

    let batch = claim(s, t, 2, LONG).await;
    let got: Vec<_> = batch.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(got, ["job-b"], "only the due ones");
    assert_eq!(batch.next_due_ms, Some(due_later));
    assert!(claim(s, t, 2, LONG).await.jobs.is_empty());
}

/// Jobs due in runs of one shared due time and alone, in one batch: `key` files them under one key
/// for fairness (then the key, alone, claims from the head of the due jobs).
pub(crate) async fn claims_report_each_jobs_own_due_time(
    s: &dyn Store,
    t: &str,
    key: Option<&str>,
) {
    // A first script call in a test's process builds every script (100 to 250 ms in a debug build on
    // a busy machine): made here, so the enqueue below is done before its jobs' due times.
    assert!(claim(s, t, 1, LONG).await.jobs.is_empty());
    // Runs of 3, 1, 1, 5 and 1 jobs sharing a due time; ids in due order.
    let base = now(s).await + 200;
    let runs = [(0, 3), (1, 1), (2, 1), (3, 5), (4, 1)];
    let mut jobs = Vec::new();
    let mut want = Vec::new();
    for (offset, n) in runs {
        for _ in 0..n {
            let id = format!("j-{:02}", jobs.len());
            jobs.push(
                new_job(&id, KEYED_REC, Due::At(base + offset)).with_key(key.map(str::to_owned)),
            );
            want.push((id, base + offset));
        }
    }
    s.enqueue(t, jobs).await.unwrap();
    wait_past(s, base + 4).await;
    let mut got = Vec::new();
    // Claims of 7 (ends inside the run of five), then of 3 (starts inside it), then the rest.
    for max in [7, 3, 50] {
        let batch = claim(s, t, max, LONG).await;
        got.extend(batch.jobs.into_iter().map(|j| (j.id, j.due_at_ms)));
    }
    assert_eq!(got, want, "each job with its own due time, in due order");
    assert!(claim(s, t, 50, LONG).await.jobs.is_empty());
}

pub(crate) async fn claim_reports_each_jobs_own_due_time_in_runs_and_alone(store: Arc<dyn Store>) {
    claims_report_each_jobs_own_due_time(&*store, &topic("claim_due_runs"), None).await;
}

pub(crate) async fn claim_reports_next_due_next_lease_deadline_and_now(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("claim_reports"));
    create(s, t, "a", REC, Due::In(0)).await;
    let due_b = create(s, t, "b", REC, Due::In(60_000)).await;

    let before = now(s).await;
    let batch = claim(s, t, 1, 30_000).await;
    let after = now(s).await;
    assert!(
        before <= batch.now_ms() && batch.now_ms() <= after,
        "{batch:?} vs [{before}, {after}]"
    );
    assert_eq!(
        batch.now_us.div_euclid(1000),
        batch.now_ms(),
        "now_us is the same time, finer"
    );
    assert_eq!(batch.jobs.len(), 1);
    assert_eq!(batch.jobs[0].id, "a");
    assert_eq!(batch.jobs[0].record, REC);
    let deadline = batch.now_ms() + 30_000;
    assert_eq!(batch.next_due_ms, Some(due_b));
    assert_eq!(batch.next_lease_deadline_ms, Some(deadline));
    assert!(!batch.dead_pending);
    assert_eq!((batch.swept, batch.swept_dead), (0, 0));
    assert_eq!(
        state(s, t, "a").await,
        Some(StoredState::Active {
            lease_deadline_ms: deadline
        })
    );

    let batch = claim(s, t, 1, LONG).await;
    assert!(batch.jobs.is_empty());
    assert_eq!(
        batch.next_lease_deadline_ms,
        Some(deadline),
        "the earliest lease deadline"
    );
    assert_eq!(batch.next_due_ms, Some(due_b));
}

pub(crate) async fn claim_on_an_empty_topic_reports_nothing(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("claim_empty"));
    let batch = claim(s, t, 10, LONG).await;
    assert!(batch.jobs.is_empty());
    assert_eq!(batch.next_due_ms, None);
    assert_eq!(batch.next_lease_deadline_ms, None);
    assert!(!batch.dead_pending);
    assert_eq!((batch.swept, batch.swept_dead), (0, 0));
}

pub(crate) async fn claim_with_max_zero_claims_nothing(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("claim_max_zero"));
    let due = create(s, t, "a", REC, Due::In(0)).await;
    let batch = claim(s, t, 0, LONG).await;
    assert!(batch.jobs.is_empty());
    assert_eq!(
        batch.next_due_ms,
        Some(due),
        "reported even when due already"
    );
    assert!(due <= batch.now_ms());
    assert_eq!(batch.next_lease_deadline_ms, None);
    assert_eq!(
        state(s, t, "a").await,
        Some(StoredState::Due { due_at_ms: due })
    );
}

pub(crate) async fn claim_gives_one_token_per_claim_and_a_new_token_each_claim(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("claim_tokens"));
    for id in ["a", "b", "c"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    let first = claim(s, t, 2, LONG).await;
    assert_eq!(first.jobs.len(), 2);
    assert_eq!(
        first.jobs[0].token, first.jobs[1].token,
        "one token per claim"
    );
    let second = claim(s, t, 2, LONG).await;
    assert_eq!(second.jobs.len(), 1);
    assert_ne!(
        second.jobs[0].token, first.jobs[0].token,
        "a new token each claim"
    );

    // A token belongs to its claim: another claim's token does not finish the job.
    let wrong = FinishItem::new("a".into(), second.jobs[0].token, Finish::Done);
    assert_eq!(
        s.finish(t, vec![wrong]).await.unwrap(),
        [FinishOutcome::Stale]
    );
    assert!(matches!(
        state(s, t, "a").await,
        Some(StoredState::Active { .. })
    ));
}
