//! Results, waiters, progress and kept finished jobs at the store seam: a finish keeps its job only
//! under a retention, a registered waiter hears every way a job ends (finish, cancel, death, sweep),
//! progress holds only under the lease, and the retention trims by count and age in bounded steps.

use std::sync::Arc;

use postpone::store::{
    Announcement, Due, Ended, Lookup, Progress, Retention, Store, StoredState, Watch,
};
use tokio::sync::broadcast;

use super::*;

const KEEP: Retention = Retention::new(3_600_000, 100);

fn succeeded(result: &[u8]) -> Finish {
    Finish::Succeeded {
        result: result.to_vec(),
    }
}

/// The next announcement about `topic` (skipping resyncs and other topics').
async fn heard(rx: &mut broadcast::Receiver<Announcement>, topic: &str) -> Announcement {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let a = tokio::time::timeout(left, rx.recv())
            .await
            .expect("no announcement in time")
            .expect("announcements closed");
        match &a {
            Announcement::Ended { topic: t, .. } | Announcement::Progress { topic: t, .. }
                if t == topic =>
            {
                return a
            }
            _ => {}
        }
    }
}

/// Announcements, listening (its first resync received).
async fn listening(s: &dyn Store) -> broadcast::Receiver<Announcement> {
    let mut rx = s.announcements();
    loop {
        let a = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("never listening");
        if matches!(a, Ok(Announcement::Resync)) {
            return rx;
        }
    }
}

fn ended(topic: &str, id: &str, ended: Ended) -> Announcement {
    Announcement::Ended {
        topic: topic.to_owned(),
        id: id.to_owned(),
        ended,
    }
}

pub(crate) async fn result_is_kept_with_its_record_only_under_a_retention(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("result_kept"));
    // No retention: a finished job is gone, whatever its result.
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    finish(s, t, &job, succeeded(b"{\"n\":1}")).await;
    assert_eq!(state(s, t, "a").await, None);
    assert_eq!(s.outcome(t, "a", Watch::No).await.unwrap(), Lookup::Unknown);

    assert_eq!(s.retain(t, Some(KEEP), 100).await.unwrap(), 0);
    create(s, t, "b", REC, Due::In(0)).await;
    let job = claim_id(s, t, "b", LONG).await;
    let before = now(s).await;
    finish(s, t, &job, succeeded(b"{\"n\":2}")).await;
    let kept = s.job(t, "b").await.unwrap().expect("kept");
    let StoredState::Done {
        cancelled: false,
        done_at_ms,
    } = kept.state
    else {
        panic!("{kept:?}")
    };
    assert!(done_at_ms >= before);
    assert_eq!(
        (kept.record.as_slice(), kept.result.as_deref()),
        (REC, Some(&b"{\"n\":2}"[..]))
    );
    assert_eq!(
        s.outcome(t, "b", Watch::No).await.unwrap(),
        Lookup::Ended {
            ended: Ended::Succeeded {
                result: b"{\"n\":2}".to_vec()
            },
            at_ms: done_at_ms
        }
    );
    // A kept job does not hold its id; the new job is live, and found first.
    create(s, t, "b", REC, Due::In(60_000)).await;
    assert!(matches!(
        state(s, t, "b").await,
        Some(StoredState::Due { .. })
    ));
    // A cancelled due job is kept too, without a result; the counters are as ever.
    assert_eq!(
        s.cancel(t, "b").await.unwrap(),
        postpone::store::CancelOutcome::Removed
    );
    let kept = s.job(t, "b").await.unwrap().unwrap();
    assert!(
        matches!(
            kept.state,
            StoredState::Done {
                cancelled: true,
                ..
            }
        ),
        "{kept:?}"
    );
    assert_eq!(kept.result, None);
    let counts = s.counts(t).await.unwrap();
    assert_eq!((counts.processed, counts.cancelled), (2, 1));
    // Without a retention again: the kept ones go.
    assert_eq!(s.retain(t, None, 100).await.unwrap(), 1);
    assert_eq!(state(s, t, "b").await, None);
}

pub(crate) async fn wait_registration_hears_finish_cancel_death_and_sweep(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("wait_hears"));
    let mut rx = listening(s).await;
    for id in ["done", "cancelled", "dead", "swept", "running", "quiet"] {
        create(s, t, id, REC, Due::In(60_000)).await;
    }
    for id in ["done", "cancelled", "dead", "swept", "running"] {
        let live = s.outcome(t, id, Watch::Live(60_000)).await.unwrap();
        assert!(
            matches!(live, Lookup::Live { progress: None, .. }),
            "{live:?}"
        );
    }
    // A scheduled job cancelled.
    s.cancel(t, "cancelled").await.unwrap();
    assert_eq!(
        heard(&mut rx, t).await,
        ended(t, "cancelled", Ended::Cancelled)
    );
    for id in ["done", "dead", "swept", "running", "quiet"] {
        s.reschedule(t, id, Due::In(0)).await.unwrap();
    }
    let batch = claim(s, t, 10, LONG).await;
    let job = |id: &str| batch.jobs.iter().find(|j| j.id == id).unwrap().clone();
    // The quiet job, that nobody waits for, ends unannounced.
    finish(s, t, &job("quiet"), Finish::Done).await;
    finish(s, t, &job("done"), succeeded(b"42")).await;
    assert_eq!(
        heard(&mut rx, t).await,
        ended(
            t,
            "done",
            Ended::Succeeded {
                result: b"42".to_vec()
            }
        )
    );
    finish(s, t, &job("dead"), dead(REC, "failed: no")).await;
    assert_eq!(
        heard(&mut rx, t).await,
        ended(
            t,
            "dead",
            Ended::Dead {
                reason: "failed: no".into()
            }
        )
    );
    // A running job cancelled ends at its worker's retry as cancelled.
    s.cancel(t, "running").await.unwrap();
    finish(s, t, &job("running"), retry(REC, 0, true)).await;
    assert_eq!(
        heard(&mut rx, t).await,
        ended(t, "running", Ended::Cancelled)
    );
    // An expired lease of a cancelled job: the sweep ends it.
    s.cancel(t, "swept").await.unwrap();
    s.extend(t, &[("swept".into(), job("swept").token)], SHORT)
        .await
        .unwrap();
    let after = now(s).await + SHORT as i64;
    wait_past(s, after).await;
    claim(s, t, 0, LONG).await;
    assert_eq!(heard(&mut rx, t).await, ended(t, "swept", Ended::Cancelled));
    // Each waiter hears once: nothing more about this topic. Told, each end is found by a lookup while
    // its waiters wait (a waiter whose announcement was lost finds it so).
    match s.outcome(t, "done", Watch::No).await.unwrap() {
        Lookup::Ended {
            ended: Ended::Succeeded { result },
            ..
        } => assert_eq!(result, b"42"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.outcome(t, "cancelled", Watch::No).await.unwrap(),
        Lookup::Ended {
            ended: Ended::Cancelled,
            ..
        }
    ));
    let more = tokio::time::timeout(Duration::from_millis(200), heard(&mut rx, t)).await;
    assert!(more.is_err(), "{more:?}");
    // Dead: found by a later lookup too.
    assert!(matches!(
        s.outcome(t, "dead", Watch::No).await.unwrap(),
        Lookup::Ended {
            ended: Ended::Dead { .. },
            ..
        }
    ));
}

pub(crate) async fn progress_holds_under_the_lease_reaches_waiters_and_goes_with_the_job(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("progress"));
    let mut rx = listening(s).await;
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    let p = Progress::new(40.0, "page 2 of 5");
    s.progress(
        t,
        vec![(("a".into(), job.token + 1), Progress::new(99.0, "stale"))],
    )
    .await
    .unwrap();
    assert_eq!(
        s.job(t, "a").await.unwrap().unwrap().progress,
        None,
        "another lease's"
    );
    s.outcome(t, "a", Watch::Live(60_000)).await.unwrap();
    s.progress(t, vec![(("a".into(), job.token), p.clone())])
        .await
        .unwrap();
    assert_eq!(
        s.job(t, "a").await.unwrap().unwrap().progress,
        Some(p.clone())
    );
    assert_eq!(
        heard(&mut rx, t).await,
        Announcement::Progress {
            topic: t.clone(),
            id: "a".into(),
            progress: p.clone()
        }
    );
    let live = s.outcome(t, "a", Watch::No).await.unwrap();
    assert!(
        matches!(&live, Lookup::Live { progress: Some(q), .. } if *q == p),
        "{live:?}"
    );
    finish(s, t, &job, Finish::Done).await;
    assert_eq!(
        heard(&mut rx, t).await,
        ended(t, "a", Ended::Succeeded { result: vec![] })
    );
    create(s, t, "a", REC, Due::In(0)).await;
    assert_eq!(
        s.job(t, "a").await.unwrap().unwrap().progress,
        None,
        "gone with the job"
    );
}

pub(crate) async fn retention_trims_by_count_and_age_in_bounded_steps(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("retention"));
    s.retain(t, Some(KEEP), 100).await.unwrap();
    for n in 0..30 {
        let id = format!("j{n:02}");
        create(s, t, &id, REC, Due::In(0)).await;
        let job = claim_id(s, t, &id, LONG).await;
        finish(s, t, &job, Finish::Done).await;
    }
    // At most 10: the oldest go, at most 5 per call.
    let ten = Retention::new(3_600_000, 10);
    assert_eq!(s.retain(t, Some(ten), 5).await.unwrap(), 5);
    assert_eq!(s.retain(t, Some(ten), 100).await.unwrap(), 15);
    assert_eq!(s.retain(t, Some(ten), 100).await.unwrap(), 0);
    assert_eq!(state(s, t, "j19").await, None);
    assert!(state(s, t, "j20").await.is_some());
    // By age: everything older than 50 ms goes, however few there are.
    let young = Retention::new(50, 10);
    let after = now(s).await + 60;
    wait_past(s, after).await;
    assert_eq!(s.retain(t, Some(young), 100).await.unwrap(), 10);
    assert_eq!(state(s, t, "j29").await, None);
}

pub(crate) async fn wait_expecting_a_job_hears_its_end_before_any_other_lookup(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("wait_expect"));
    // An older job of the id died: not the one expected.
    make_dead(s, t, &["a"]).await;
    let expect = Watch::Expect {
        wait_ms: 60_000,
        since_ms: 0,
    };
    let Lookup::Expected { since_ms } = s.outcome(t, "a", expect).await.unwrap() else {
        panic!("expected")
    };
    assert!(since_ms >= now(s).await - 60_000);
    // The job comes, runs and ends before the waiter looks again: its end is told (and announced).
    let mut rx = listening(s).await;
    create(s, t, "a", REC, Due::In(0)).await;
    let job = claim_id(s, t, "a", LONG).await;
    finish(s, t, &job, succeeded(b"7")).await;
    let again = Watch::Expect {
        wait_ms: 60_000,
        since_ms,
    };
    match s.outcome(t, "a", again).await.unwrap() {
        Lookup::Ended {
            ended: Ended::Succeeded { result },
            ..
        } => assert_eq!(result, b"7"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        heard(&mut rx, t).await,
        ended(
            t,
            "a",
            Ended::Succeeded {
                result: b"7".to_vec()
            }
        )
    );
    // Nothing kept, nothing told for a job nobody waited for.
    create(s, t, "b", REC, Due::In(0)).await;
    let job = claim_id(s, t, "b", LONG).await;
    finish(s, t, &job, succeeded(b"8")).await;
    assert_eq!(s.outcome(t, "b", Watch::No).await.unwrap(), Lookup::Unknown);
}
