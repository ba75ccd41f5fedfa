//! Wake-up hints: sent when a job becomes due earlier than the topic's earliest, not otherwise.

use std::sync::Arc;

use postpone::store::{Due, EnqueueOutcome, FinishOutcome, RescheduleOutcome, Store, StoredState};

use super::*;

const NO_HINTS: [i64; 0] = [];

pub(crate) async fn hint_on_enqueue_earlier_than_the_topics_earliest_and_not_on_a_later_one(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("hint_enqueue"));
    let mut rx = s.hints();
    assert_eq!(hints_for(s, &mut rx, t).await, NO_HINTS, "nothing yet");

    let first = create(s, t, "first", REC, Due::In(60_000)).await;
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        [first],
        "the topic had nothing due"
    );
    create(s, t, "later", REC, Due::In(120_000)).await;
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        NO_HINTS,
        "later than the earliest"
    );
    enqueue(s, t, "first", REC, Due::In(0)).await;
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        NO_HINTS,
        "an existing id changes nothing"
    );
    let earlier = create(s, t, "earlier", REC, Due::In(30_000)).await;
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        [earlier],
        "earlier than the earliest"
    );
}

/// A batch of enqueues (what concurrent callers' enqueues become) sends one hint, for its earliest new
/// job, and only when that is earlier than the topic's earliest.
pub(crate) async fn hint_on_bulk_enqueue_for_its_earliest_new_job_only_when_earlier(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("hint_bulk"));
    let mut rx = s.hints();
    create(s, t, "first", REC, Due::In(60_000)).await;
    hints_for(s, &mut rx, t).await;

    let later = |id: &str, ms| new_job(id, REC, Due::In(ms));
    s.enqueue(t, vec![later("b1", 90_000), later("b2", 120_000)])
        .await
        .unwrap();
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        NO_HINTS,
        "all later than the earliest"
    );
    let out = s
        .enqueue(
            t,
            vec![
                later("c1", 90_000),
                later("c2", 30_000),
                later("c3", 45_000),
            ],
        )
        .await
        .unwrap();
    let EnqueueOutcome::Created { due_at_ms: c2 } = out[1] else {
        panic!("{out:?}");
    };
    assert_eq!(hints_for(s, &mut rx, t).await, [c2], "its earliest new job");
    // Equal due times: the batch's short reply, and still one hint.
    let out = s
        .enqueue(t, vec![later("d1", 0), later("d2", 0)])
        .await
        .unwrap();
    let EnqueueOutcome::Created { due_at_ms: d } = out[0] else {
        panic!("{out:?}");
    };
    assert_eq!(hints_for(s, &mut rx, t).await, [d], "due now");
}

pub(crate) async fn hint_on_reschedule_earlier_than_the_topics_earliest(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("hint_reschedule"));
    let mut rx = s.hints();
    create(s, t, "a", REC, Due::In(60_000)).await;
    create(s, t, "b", REC, Due::In(120_000)).await;
    hints_for(s, &mut rx, t).await;

    assert!(matches!(
        s.reschedule(t, "b", Due::In(90_000)).await.unwrap(),
        RescheduleOutcome::Rescheduled { .. }
    ));
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        NO_HINTS,
        "still later than a"
    );
    let RescheduleOutcome::Rescheduled { due_at_ms } =
        s.reschedule(t, "b", Due::In(10_000)).await.unwrap()
    else {
        panic!("b should be due");
    };
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        [due_at_ms],
        "now the earliest"
    );
}

pub(crate) async fn hint_on_retry_earlier_than_the_topics_earliest(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("hint_retry"));
    let mut rx = s.hints();
    create(s, t, "later", REC, Due::In(60_000)).await;
    create(s, t, "a", REC, Due::In(0)).await;
    create(s, t, "b", REC, Due::In(0)).await;
    hints_for(s, &mut rx, t).await;
    let batch = claim(s, t, 2, LONG).await;
    assert_eq!(batch.jobs.len(), 2);

    let (a, b) = (&batch.jobs[0], &batch.jobs[1]);
    assert_eq!(
        finish(s, t, a, retry(REC, 120_000, true)).await,
        FinishOutcome::Applied
    );
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        NO_HINTS,
        "later than the earliest"
    );
    assert_eq!(
        finish(s, t, b, retry(REC, 30_000, true)).await,
        FinishOutcome::Applied
    );
    let Some(StoredState::Due { due_at_ms }) = state(s, t, &b.id).await else {
        panic!("retried job should be due");
    };
    assert_eq!(
        hints_for(s, &mut rx, t).await,
        [due_at_ms],
        "now the earliest"
    );
}
