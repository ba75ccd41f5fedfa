//! Flow control in the claim: max running across claimers, the rate limit's budget, a provider's hold.

use std::sync::Arc;
use std::time::Duration;

use postpone::flow::RateLimit;
use postpone::store::{
    ClaimBatch, ClaimRequest, Due, Finish, FinishOutcome, HeldBack, Store, StoredState,
};

use super::*;

/// A claim of up to `max` under `max_running` (a fresh token: another claimer, as far as the store
/// knows).
async fn claim_running(s: &dyn Store, t: &str, max: usize, max_running: u32) -> ClaimBatch {
    let request = ClaimRequest::new(max, LONG, 100, 10).max_running(max_running);
    s.claim(t, request).await.unwrap()
}

async fn claim_rated(s: &dyn Store, t: &str, max: usize, rate: RateLimit) -> ClaimBatch {
    let request = ClaimRequest::new(max, LONG, 100, 10).rate_limit(rate);
    s.claim(t, request).await.unwrap()
}

pub(crate) async fn max_running_caps_active_jobs_across_claimers_and_a_finish_frees_a_slot(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("max_running"));
    for id in ["a", "b", "c", "d"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    let first = claim_running(s, t, 10, 2).await;
    let ids: Vec<_> = first.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"], "two may run");
    assert_eq!(first.held_back, None, "{first:?}");
    let other = claim_running(s, t, 10, 2).await;
    assert!(other.jobs.is_empty(), "{other:?}");
    assert_eq!(other.held_back, Some(HeldBack::MaxRunning));
    assert_eq!(
        other.next_due_ms, None,
        "a full topic waits for a free slot, not for a due time"
    );
    assert!(matches!(
        state(s, t, "c").await,
        Some(StoredState::Due { .. })
    ));

    let mut rx = s.hints();
    // The listener is up; what it saw of this topic were the enqueues' hints, due before the finish
    // (on a Redis Cluster a PUBLISH reaches the other nodes a little later).
    hints_for(s, &mut rx, t).await;
    let before_finish = now(s).await;
    assert_eq!(
        finish(s, t, &first.jobs[0], Finish::Done).await,
        FinishOutcome::Applied
    );
    let seen = hints_for(s, &mut rx, t).await;
    assert!(
        seen.iter().any(|due| *due >= before_finish),
        "the finish that frees a slot of a full topic wakes its claimers: {seen:?}"
    );
    let next = claim_running(s, t, 10, 2).await;
    let ids: Vec<_> = next.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["c"], "one slot was free");
    assert_eq!(next.held_back, None);
    let unlimited = claim(s, t, 10, LONG).await;
    assert_eq!(
        unlimited.jobs.len(),
        1,
        "a claim without the limit is not held"
    );
}

pub(crate) async fn max_running_frees_the_slot_of_an_expired_lease_once_swept(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("max_running_swept"));
    create(s, t, "a", REC, Due::In(0)).await;
    create(s, t, "b", REC, Due::In(1)).await;
    wait_past(s, now(s).await + 1).await;
    let request = ClaimRequest::new(1, SHORT, 100, 10).max_running(1);
    let first = s.claim(t, request).await.unwrap();
    assert_eq!(first.jobs.len(), 1);
    // Its worker crashed: once its lease expires, the claim sweeps it first and the slot is free.
    wait_past(s, first.now_ms() + SHORT as i64).await;
    let next = claim_running(s, t, 10, 1).await;
    assert_eq!(next.swept, 1, "{next:?}");
    assert_eq!(next.jobs.len(), 1, "{next:?}");
    assert_eq!(
        next.jobs[0].id, "a",
        "the swept job keeps its place in line"
    );
}

pub(crate) async fn rate_limit_lets_its_budget_go_and_reports_when_the_next_job_may(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("rate"));
    // 2 per second: a burst of 1, then one every 500 ms.
    let rate = RateLimit::new(2, Duration::from_secs(1));
    for id in ["a", "b", "c"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    let first = claim_rated(s, t, 10, rate).await;
    assert_eq!(first.jobs.len(), 1, "{first:?}");
    assert_eq!(first.jobs[0].id, "a");
    let go_at = first.now_ms() + 500;
    assert_eq!(first.next_due_ms, Some(go_at), "{first:?}");
    assert_eq!(first.held_back, Some(HeldBack::Rate));

    let other = claim_rated(s, t, 10, rate).await;
    if other.now_ms() < go_at {
        assert!(other.jobs.is_empty(), "another claimer shares the budget");
        assert_eq!(other.held_back, Some(HeldBack::Rate));
        assert_eq!(other.next_due_ms, Some(go_at));
        match state(s, t, "b").await {
            Some(StoredState::Due { due_at_ms }) => assert!(due_at_ms <= first.now_ms()),
            other => panic!("b stays due as it was, {other:?}"),
        }
        assert_eq!(s.job(t, "b").await.unwrap().unwrap().record, REC);
    }
    wait_past(s, go_at - 1).await;
    let next = claim_rated(s, t, 10, rate).await;
    assert_eq!(next.jobs.len(), 1, "{next:?}");
    assert_eq!(next.jobs[0].id, "b");
    let unlimited = claim(s, t, 10, LONG).await;
    assert_eq!(
        unlimited.jobs.len(),
        1,
        "a claim without the limit is not held"
    );
}

pub(crate) async fn rate_limit_never_lets_more_than_its_budget_go(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("rate_budget"));
    // 100 per second: a burst of 5, then one every 10 ms.
    let rate = RateLimit::per_second(100);
    let jobs: Vec<_> = (0..40)
        .map(|i| new_job(&format!("j{i:02}"), REC, Due::In(0)))
        .collect();
    s.enqueue(t, jobs).await.unwrap();
    let mut taken = 0;
    let start = now(s).await;
    let mut last = start;
    while taken < 40 {
        let batch = claim_rated(s, t, 10, rate).await;
        taken += batch.jobs.len();
        last = batch.now_ms();
        // At most the burst, plus one per 10 ms since the start.
        let budget = 5 + ((last - start) / 10) as usize;
        assert!(taken <= budget, "{taken} jobs by {} ms", last - start);
        if let Some(at) = batch.next_due_ms.filter(|at| *at > last) {
            assert_eq!(batch.held_back, Some(HeldBack::Rate));
            wait_past(s, at - 1).await;
        }
    }
    assert!(last - start >= 350, "40 jobs at 100/s take 350 ms at least");
}

pub(crate) async fn a_rate_limited_finish_holds_the_topic_and_retries_the_job_without_counting(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("provider_limit"));
    create(s, t, "a", REC, Due::In(0)).await;
    create(s, t, "b", REC, Due::In(0)).await;
    let a = claim_id(s, t, "a", LONG).await;
    let hold = Finish::RateLimited {
        record: b"same".to_vec(),
        delay_ms: 300,
    };
    assert_eq!(finish(s, t, &a, hold).await, FinishOutcome::Applied);
    let Some(StoredState::Due { due_at_ms: again }) = state(s, t, "a").await else {
        panic!("a is due again");
    };
    let held = claim(s, t, 10, LONG).await;
    if held.now_ms() < again {
        assert!(held.jobs.is_empty(), "{held:?}");
        assert_eq!(held.held_back, Some(HeldBack::Provider));
        assert_eq!(
            held.next_due_ms,
            Some(again),
            "the hold ends with a's retry"
        );
    }
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.retried, counts.failed), (0, 0));
    wait_past(s, again).await;
    let batch = claim(s, t, 10, LONG).await;
    let ids: Vec<_> = batch.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["b", "a"], "{batch:?}");
    assert_eq!(batch.jobs[1].record, b"same");
}

pub(crate) async fn counts_show_the_flow_limits_the_budget_and_a_hold(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("flow_counts"));
    assert_eq!(s.counts(t).await.unwrap().flow, Default::default());
    for id in ["a", "b", "c"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    // 40 per second: a burst of 2.
    let rate = RateLimit::new(40, Duration::from_secs(1));
    let request = ClaimRequest::new(1, LONG, 100, 10)
        .rate_limit(rate)
        .max_running(7);
    let batch = s.claim(t, request).await.unwrap();
    assert_eq!(batch.jobs.len(), 1);
    let flow = s.counts(t).await.unwrap().flow;
    assert_eq!(flow.rate, Some(rate));
    assert_eq!(flow.max_running, Some(7));
    assert!(
        matches!(flow.rate_budget, Some(0..=2)),
        "one of a burst of 2 went: {flow:?}"
    );
    assert_eq!(flow.held_until_ms, None);
    let hold = Finish::RateLimited {
        record: REC.to_vec(),
        delay_ms: LONG,
    };
    finish(s, t, &batch.jobs[0], hold).await;
    let flow = s.counts(t).await.unwrap().flow;
    let until = flow.held_until_ms.expect("the hold shows");
    assert!(until > now(s).await + LONG as i64 / 2, "{flow:?}");
}

pub(crate) async fn a_hold_without_a_job_holds_claims_and_is_never_shortened(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("hold"));
    create(s, t, "a", REC, Due::In(0)).await;
    s.hold(t, LONG).await.unwrap();
    s.hold(t, SHORT).await.unwrap();
    let batch = claim(s, t, 10, LONG).await;
    assert!(batch.jobs.is_empty(), "{batch:?}");
    assert_eq!(batch.held_back, Some(HeldBack::Provider));
    let until = batch.next_due_ms.expect("the hold's end is reported");
    assert!(until > batch.now_ms() + LONG as i64 / 2, "{batch:?}");
    assert_eq!(s.counts(t).await.unwrap().flow.held_until_ms, Some(until));
}
