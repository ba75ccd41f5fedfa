//! Finding jobs and counting them; ids and topics that must never mix.

use std::collections::BTreeSet;
use std::sync::Arc;

use postpone::store::{
    CancelOutcome, DeadSelection, Due, FinishItem, FinishOutcome, Store, StoredState,
};

use super::*;

pub(crate) async fn job_lookup_reports_due_active_dead_and_none(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("job_lookup"));
    let died = make_dead(s, t, &["dead"]).await[0];
    let due = create(s, t, "due", b"d", Due::In(60_000)).await;
    create(s, t, "active", b"a", Due::In(0)).await;
    let batch = claim(s, t, 1, 30_000).await;
    assert_eq!(batch.jobs[0].id, "active");

    let job = s.job(t, "due").await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.record),
        (StoredState::Due { due_at_ms: due }, b"d".to_vec())
    );
    let job = s.job(t, "active").await.unwrap().unwrap();
    let active = StoredState::Active {
        lease_deadline_ms: batch.now_ms() + 30_000,
    };
    assert_eq!((job.state, job.record), (active, b"a".to_vec()));
    let job = s.job(t, "dead").await.unwrap().unwrap();
    let dead = StoredState::Dead {
        seq: 1,
        died_at_ms: died,
        reason: "boom dead".into(),
        delivered: false,
    };
    assert_eq!((job.state, job.record), (dead, b"final dead".to_vec()));
    assert!(s.job(t, "nope").await.unwrap().is_none());
}

pub(crate) async fn counts_separate_scheduled_ready_active_and_dead(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("counts"));
    assert_eq!(
        s.counts(t).await.unwrap(),
        Default::default(),
        "an unknown topic counts zero"
    );
    make_dead(s, t, &["d1"]).await;
    for id in ["s1", "s2"] {
        create(s, t, id, REC, Due::In(60_000)).await;
    }
    for id in ["r1", "r2", "r3"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    assert_eq!(claim(s, t, 1, LONG).await.jobs.len(), 1);

    let c = s.counts(t).await.unwrap();
    assert_eq!(
        (c.scheduled, c.ready, c.active, c.dead, c.dead_pending),
        (2, 2, 1, 1, 1)
    );
    assert_eq!(
        (c.failed, c.dead_total, c.processed, c.retried, c.cancelled),
        (1, 1, 0, 0, 0)
    );
    assert_eq!((c.stalled, c.trimmed), (0, 0));
    let d1 = s.dead_of(t, "d1", 1).await.unwrap().remove(0).death();
    s.dead_ack(t, &[d1]).await.unwrap();
    let c = s.counts(t).await.unwrap();
    assert_eq!((c.dead, c.dead_pending), (1, 0));
}

pub(crate) async fn ids_with_special_characters_are_distinct_and_round_trip(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("odd_ids"));
    let ids = [
        "a{b}c",
        "{x}",
        "{",
        "}",
        "{}",
        "k:1",
        "k:1:",
        "k",
        "*",
        "k*",
        "a b",
        " a",
        "a ",
        "ünïcödé ✓",
        "日本",
        "emoji 🎉",
        r"a\b",
        "'\"",
        "%s",
        "-",
        "job:{t}:due",
        "0",
        "-1",
    ];
    let jobs = ids
        .iter()
        .map(|id| new_job(id, id.as_bytes(), Due::In(0)))
        .collect();
    let out = s.enqueue(t, jobs).await.unwrap();
    assert!(
        out.iter()
            .all(|o| matches!(o, EnqueueOutcome::Created { .. })),
        "{out:?}"
    );

    assert_eq!(s.cancel(t, "k*").await.unwrap(), CancelOutcome::Removed);
    assert_eq!(state(s, t, "k*").await, None);
    for id in ids.iter().filter(|id| **id != "k*") {
        let job = s.job(t, id).await.unwrap();
        assert_eq!(
            job.map(|j| j.record),
            Some(id.as_bytes().to_vec()),
            "{id:?}"
        );
    }

    let batch = claim(s, t, 100, LONG).await;
    let claimed: BTreeSet<&str> = batch.jobs.iter().map(|j| j.id.as_str()).collect();
    let expected: BTreeSet<&str> = ids.iter().copied().filter(|id| *id != "k*").collect();
    assert_eq!(claimed, expected);
    for job in &batch.jobs {
        assert_eq!(job.record, job.id.as_bytes());
    }
    let items = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    let out = s.finish(t, items).await.unwrap();
    assert!(out.iter().all(|o| *o == FinishOutcome::Applied), "{out:?}");
    let counts = s.counts(t).await.unwrap();
    assert_eq!(
        (counts.processed, counts.cancelled),
        (ids.len() as u64 - 1, 1)
    );
}

pub(crate) async fn topics_never_see_each_others_jobs(store: Arc<dyn Store>) {
    let s = &*store;
    let (one, two) = (&topic("isolated_one"), &topic("isolated_two"));
    create(s, one, "x", b"one", Due::In(0)).await;
    create(s, two, "x", b"two", Due::In(60_000)).await;

    let batch = claim(s, one, 10, LONG).await;
    assert_eq!(batch.jobs.len(), 1);
    assert_eq!(batch.jobs[0].record, b"one");
    assert!(claim(s, two, 10, LONG).await.jobs.is_empty());
    assert_eq!(s.job(two, "x").await.unwrap().unwrap().record, b"two");

    assert_eq!(s.cancel(two, "x").await.unwrap(), CancelOutcome::Removed);
    assert!(matches!(
        state(s, one, "x").await,
        Some(StoredState::Active { .. })
    ));
    assert_eq!(
        finish(s, one, &batch.jobs[0], dead(b"final", "boom")).await,
        FinishOutcome::Applied
    );
    assert!(s.dead_list(two, 0, 10).await.unwrap().is_empty());
    assert_eq!(s.dead_purge(two, DeadSelection::All).await.unwrap(), 0);

    let (c1, c2) = (s.counts(one).await.unwrap(), s.counts(two).await.unwrap());
    assert_eq!((c1.dead, c1.failed, c1.cancelled), (1, 1, 0));
    assert_eq!(
        (c2.dead, c2.failed, c2.cancelled, c2.scheduled),
        (0, 0, 1, 0)
    );
}
