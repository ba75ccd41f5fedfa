//! Enqueue: outcomes, idempotence, replace, due times.

use std::sync::Arc;

use postpone::store::{
    Due, EnqueueOutcome, FinishOutcome, RescheduleOutcome, Store, StoredState, MAX_DUE_MS,
};

use super::*;

pub(crate) async fn enqueue_new_job_is_created_and_stored(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("enqueue_new"));
    let before = now(s).await;
    let due = create(s, t, "a", REC, Due::In(0)).await;
    let after = now(s).await;
    assert!(
        before <= due && due <= after,
        "due {due} not within [{before}, {after}]"
    );

    let job = s.job(t, "a").await.unwrap().expect("the job is stored");
    assert_eq!(job.state, StoredState::Due { due_at_ms: due });
    assert_eq!(job.record, REC);
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.ready, counts.scheduled, counts.active), (1, 0, 0));
}

pub(crate) async fn enqueue_existing_due_id_is_exists_and_changes_nothing(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("enqueue_exists"));
    let due = create(s, t, "a", b"first", Due::In(60_000)).await;

    let again = enqueue(s, t, "a", b"second", Due::In(0)).await;
    assert_eq!(again, EnqueueOutcome::Exists { due_at_ms: due });
    let job = s.job(t, "a").await.unwrap().unwrap();
    assert_eq!(
        job.state,
        StoredState::Due { due_at_ms: due },
        "due time unchanged"
    );
    assert_eq!(job.record, b"first", "record unchanged");
    assert!(claim(s, t, 10, LONG).await.jobs.is_empty(), "still not due");
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.scheduled, counts.ready), (1, 0));
}

pub(crate) async fn enqueue_with_replace_replaces_record_and_due_time(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("enqueue_replace"));
    create(s, t, "a", b"first", Due::In(60_000)).await;

    let before = now(s).await;
    let out = s
        .enqueue(t, vec![replacing("a", b"second", Due::In(0))])
        .await
        .unwrap();
    let after = now(s).await;
    let EnqueueOutcome::Replaced { due_at_ms } = out[0] else {
        panic!("replace gave {out:?}");
    };
    assert!(before <= due_at_ms && due_at_ms <= after);
    let job = s.job(t, "a").await.unwrap().unwrap();
    assert_eq!(job.state, StoredState::Due { due_at_ms });
    assert_eq!(job.record, b"second");
    let claimed = claim_id(s, t, "a", LONG).await;
    assert_eq!(claimed.record, b"second");
    assert_eq!(claimed.due_at_ms, due_at_ms);
}

pub(crate) async fn enqueue_of_an_active_id_is_running_and_changes_nothing(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("enqueue_running"));
    create(s, t, "a", b"first", Due::In(0)).await;
    let claimed = claim_id(s, t, "a", LONG).await;
    let active = state(s, t, "a").await;
    assert!(
        matches!(active, Some(StoredState::Active { .. })),
        "{active:?}"
    );

    assert_eq!(
        enqueue(s, t, "a", b"second", Due::In(0)).await,
        EnqueueOutcome::Running
    );
    let out = s
        .enqueue(t, vec![replacing("a", b"second", Due::In(0))])
        .await
        .unwrap();
    assert_eq!(
        out,
        [EnqueueOutcome::Running],
        "an active job is never replaced"
    );

    let job = s.job(t, "a").await.unwrap().unwrap();
    assert_eq!(Some(job.state), active);
    assert_eq!(job.record, b"first");
    assert_eq!(s.counts(t).await.unwrap().ready, 0);
    assert_eq!(
        finish(s, t, &claimed, Finish::Done).await,
        FinishOutcome::Applied,
        "lease untouched"
    );
}

pub(crate) async fn enqueue_beside_a_dead_job_of_the_same_id_is_created(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("enqueue_beside_dead"));
    make_dead(s, t, &["a"]).await;
    let due = create(s, t, "a", b"live", Due::In(60_000)).await;
    let job = s.job(t, "a").await.unwrap().unwrap();
    assert_eq!(
        job.state,
        StoredState::Due { due_at_ms: due },
        "the live job is the one found"
    );
    assert_eq!(job.record, b"live");
    let dead = s.dead_list(t, 0, 10).await.unwrap();
    assert_eq!(dead.len(), 1, "the dead job is still there");
    assert_eq!(dead[0].record, b"final a");
}

pub(crate) async fn due_in_counts_from_the_backends_now(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("due_in"));
    let before = now(s).await;
    let due = create(s, t, "a", REC, Due::In(60_000)).await;
    let after = now(s).await;
    assert!(
        before + 60_000 <= due && due <= after + 60_000,
        "{due} vs [{before}, {after}] + 60s"
    );

    let batch = claim(s, t, 10, LONG).await;
    assert!(batch.jobs.is_empty(), "not claimable before its time");
    assert_eq!(batch.next_due_ms, Some(due));
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.scheduled, counts.ready), (1, 0));
}

pub(crate) async fn due_at_in_the_past_means_now(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("due_at_past"));
    let before = now(s).await;
    let due = create(s, t, "a", REC, Due::At(before - 3_600_000)).await;
    let after = now(s).await;
    assert!(
        before <= due && due <= after,
        "a past time is stored as now: {due} vs [{before}, {after}]"
    );
    assert_eq!(
        state(s, t, "a").await,
        Some(StoredState::Due { due_at_ms: due })
    );

    let claimed = claim_id(s, t, "a", LONG).await;
    assert_eq!(claimed.due_at_ms, due);
}

pub(crate) async fn due_at_in_the_future_is_not_claimable_before_its_time(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("due_at_future"));
    let later = now(s).await + 60_000;
    assert_eq!(
        create(s, t, "later", REC, Due::At(later)).await,
        later,
        "kept exactly"
    );
    let batch = claim(s, t, 10, LONG).await;
    assert!(batch.jobs.is_empty());
    assert_eq!(batch.next_due_ms, Some(later));

    let at = now(s).await + 50;
    let soon = create(s, t, "soon", REC, Due::At(at)).await;
    // Kept exactly, unless this machine was so slow that `at` had passed (then it is due now).
    assert!(soon >= at);
    let claimed = eventually_within(WAIT, "the job due soon to be claimable", || async move {
        let batch = claim(s, t, 10, LONG).await;
        if batch.now_ms() < soon {
            assert!(
                batch.jobs.is_empty(),
                "claimed at {} before its time {soon}",
                batch.now_ms()
            );
        }
        batch.jobs.into_iter().next()
    })
    .await;
    assert_eq!(claimed.id, "soon");
    assert_eq!(claimed.due_at_ms, soon);
    assert_eq!(
        state(s, t, "later").await,
        Some(StoredState::Due { due_at_ms: later })
    );
}

pub(crate) async fn bulk_enqueue_reports_one_outcome_per_job_in_order(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("bulk"));
    // Every 7th id exists beforehand, due in a minute.
    let existing: Vec<NewJob> = (0..999)
        .step_by(7)
        .map(|i| new_job(&format!("job-{i}"), REC, Due::In(60_000)))
        .collect();
    let existing_due = match s.enqueue(t, existing).await.unwrap()[0] {
        EnqueueOutcome::Created { due_at_ms } => due_at_ms,
        other => panic!("{other:?}"),
    };

    // 1,000 jobs: ids 0..999, then id 500 again.
    let mut jobs: Vec<NewJob> = (0..999)
        .map(|i| new_job(&format!("job-{i}"), format!("r{i}").as_bytes(), Due::In(0)))
        .collect();
    jobs.push(new_job("job-500", b"dup", Due::In(0)));
    let out = s.enqueue(t, jobs).await.unwrap();
    assert_eq!(out.len(), 1_000);
    for (i, outcome) in out.iter().enumerate().take(999) {
        if i % 7 == 0 {
            assert!(
                matches!(outcome, EnqueueOutcome::Exists { due_at_ms } if *due_at_ms >= existing_due),
                "job {i}: {outcome:?}"
            );
        } else {
            assert!(
                matches!(outcome, EnqueueOutcome::Created { .. }),
                "job {i}: {outcome:?}"
            );
        }
    }
    let due_500 = match out[500] {
        EnqueueOutcome::Created { due_at_ms } => due_at_ms,
        other => panic!("job 500: {other:?}"),
    };
    assert_eq!(
        out[999],
        EnqueueOutcome::Exists { due_at_ms: due_500 },
        "the repeat sees the first"
    );

    let counts = s.counts(t).await.unwrap();
    assert_eq!(counts.scheduled, 143);
    assert_eq!(counts.ready, 999 - 143);
    assert_eq!(s.job(t, "job-500").await.unwrap().unwrap().record, b"r500");
}

pub(crate) async fn due_times_are_capped_at_max_due_ms(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("due_capped"));
    assert_eq!(create(s, t, "in", REC, Due::In(u64::MAX)).await, MAX_DUE_MS);
    assert_eq!(create(s, t, "at", REC, Due::At(i64::MAX)).await, MAX_DUE_MS);
    let moved = s
        .reschedule(t, "in", Due::At(MAX_DUE_MS + 1))
        .await
        .unwrap();
    assert_eq!(
        moved,
        RescheduleOutcome::Rescheduled {
            due_at_ms: MAX_DUE_MS
        }
    );

    create(s, t, "retried", REC, Due::In(0)).await;
    let job = claim_id(s, t, "retried", LONG).await;
    assert_eq!(
        finish(s, t, &job, retry(REC, u64::MAX, true)).await,
        FinishOutcome::Applied
    );
    let capped = StoredState::Due {
        due_at_ms: MAX_DUE_MS,
    };
    assert_eq!(state(s, t, "retried").await, Some(capped));
}

/// Job "a" due in a minute (its due time returned) and job "b" running, for the bulk enqueue tests.
async fn a_due_and_b_running(s: &dyn Store, t: &str) -> i64 {
    let due_a = create(s, t, "a", b"a1", Due::In(60_000)).await;
    create(s, t, "b", b"b1", Due::In(0)).await;
    claim_id(s, t, "b", LONG).await;
    due_a
}

pub(crate) async fn bulk_enqueue_has_the_outcomes_of_single_enqueues(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("bulk_outcomes"));
    let due_a = a_due_and_b_running(s, t).await;

    let before = now(s).await;
    let out = s
        .enqueue(
            t,
            vec![
                new_job("a", b"a2", Due::In(0)),
                replacing("b", b"b2", Due::In(0)),
                new_job("b", b"b3", Due::In(0)),
                replacing("c", b"c1", Due::In(60_000)),
                replacing("a", b"a3", Due::In(30_000)),
                new_job("d", b"d1", Due::In(0)),
            ],
        )
        .await
        .unwrap();
    let after = now(s).await;
    assert_eq!(out[0], EnqueueOutcome::Exists { due_at_ms: due_a });
    assert_eq!(
        out[1..3],
        [EnqueueOutcome::Running, EnqueueOutcome::Running]
    );
    assert!(
        matches!(out[3], EnqueueOutcome::Created { due_at_ms } if due_at_ms >= before + 60_000)
    );
    let EnqueueOutcome::Replaced { due_at_ms: due_a3 } = out[4] else {
        panic!("{out:?}");
    };
    assert!(before + 30_000 <= due_a3 && due_a3 <= after + 30_000);
    assert!(matches!(out[5], EnqueueOutcome::Created { .. }));

    let a = s.job(t, "a").await.unwrap().unwrap();
    assert_eq!(
        (a.state, a.record),
        (StoredState::Due { due_at_ms: due_a3 }, b"a3".to_vec())
    );
    let b = s.job(t, "b").await.unwrap().unwrap();
    assert!(matches!(b.state, StoredState::Active { .. }));
    assert_eq!(b.record, b"b1", "a running job is never replaced");
    assert_eq!(s.job(t, "c").await.unwrap().unwrap().record, b"c1");
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.scheduled, counts.ready, counts.active), (2, 1, 1));
}

/// A batch of plain jobs (no replace, no priority: what coalesced single enqueues are) gives each job the
/// outcome it would have had alone, whether due `in` a delay or `at` a time, each due time its own.
pub(crate) async fn plain_bulk_enqueue_has_the_outcomes_of_single_enqueues(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("plain_bulk"));
    let due_a = a_due_and_b_running(s, t).await;

    let before = now(s).await;
    let out = s
        .enqueue(
            t,
            vec![
                new_job("a", b"a2", Due::In(0)),
                new_job("b", b"b2", Due::In(0)),
                new_job("c", b"c1", Due::In(30_000)),
                new_job("d", b"d1", Due::In(0)),
                new_job("c", b"c2", Due::In(0)),
                new_job("e", b"e1", Due::In(30_000)),
            ],
        )
        .await
        .unwrap();
    let after = now(s).await;
    assert_eq!(out[0], EnqueueOutcome::Exists { due_at_ms: due_a });
    assert_eq!(out[1], EnqueueOutcome::Running);
    let EnqueueOutcome::Created { due_at_ms: due_c } = out[2] else {
        panic!("{out:?}");
    };
    assert!(before + 30_000 <= due_c && due_c <= after + 30_000);
    let EnqueueOutcome::Created { due_at_ms: due_d } = out[3] else {
        panic!("{out:?}");
    };
    assert!(before <= due_d && due_d <= after);
    assert_eq!(out[4], EnqueueOutcome::Exists { due_at_ms: due_c });
    assert_eq!(out[5], EnqueueOutcome::Created { due_at_ms: due_c });

    // Due at times: one in the past (due now), one in a minute.
    let at = now(s).await + 60_000;
    let out = s
        .enqueue(
            t,
            vec![
                new_job("past", b"p", Due::At(1_000)),
                new_job("later", b"l", Due::At(at)),
                new_job("a", b"a3", Due::At(at)),
            ],
        )
        .await
        .unwrap();
    assert!(matches!(out[0], EnqueueOutcome::Created { due_at_ms } if due_at_ms >= before));
    assert_eq!(out[1], EnqueueOutcome::Created { due_at_ms: at });
    assert_eq!(out[2], EnqueueOutcome::Exists { due_at_ms: due_a });

    // All new, all due after one delay: each Created at the same time (the script's short reply).
    let out = s
        .enqueue(
            t,
            vec![
                new_job("f", b"f1", Due::In(5_000)),
                new_job("g", b"g1", Due::In(5_000)),
                new_job("h", b"h1", Due::In(5_000)),
            ],
        )
        .await
        .unwrap();
    assert_eq!(out.len(), 3);
    assert!(
        matches!(out[0], EnqueueOutcome::Created { due_at_ms } if due_at_ms >= before + 5_000),
        "{out:?}"
    );
    assert!(out.iter().all(|o| *o == out[0]), "{out:?}");

    assert_eq!(s.job(t, "a").await.unwrap().unwrap().record, b"a1");
    assert_eq!(s.job(t, "b").await.unwrap().unwrap().record, b"b1");
    assert_eq!(s.job(t, "c").await.unwrap().unwrap().record, b"c1");
    assert_eq!(s.job(t, "g").await.unwrap().unwrap().record, b"g1");
    let counts = s.counts(t).await.unwrap();
    // Due later: a, c, e, later, f, g, h; due now: d, past; running: b.
    assert_eq!((counts.scheduled, counts.ready, counts.active), (7, 2, 1));
}
