//! Jobs that wait for jobs, as operators list them: [`PageState::Waiting`] pages them by id (their
//! score is [`WAITING_DUE_MS`]), apart from the scheduled jobs of the same topic, and the search by id
//! prefix keeps the two apart too.

use std::sync::Arc;

use postpone::store::workflow::WAITING_DUE_MS;
use postpone::store::{Due, OnParentFailure, PagePosition, PageQuery, PageState, Store};

use super::workflow_deps::{after, live_parent};
use super::*;

/// The ids of every entry of a listing, `limit` at a time, each page after the previous page's last.
async fn ids(
    s: &dyn Store,
    t: &str,
    state: PageState,
    newest_first: bool,
    limit: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut after: Option<PagePosition> = None;
    loop {
        let mut q = PageQuery::new(state, limit);
        q.newest_first = newest_first;
        q.after = after.clone();
        let page = s.page(t, &q).await.unwrap();
        assert!(page.len() <= limit);
        let Some(last) = page.last() else {
            return out;
        };
        after = Some(last.position());
        out.extend(page.into_iter().map(|e| e.id));
    }
}

pub(crate) async fn workflow_waiting_jobs_are_listed_by_id_apart_from_the_scheduled_ones(
    store: Arc<dyn Store>,
) {
    let (s, tp, t) = (&*store, &topic("wf_list_p"), &topic("wf_list"));
    let empty = s.page(t, &PageQuery::new(PageState::Waiting, 10)).await;
    assert!(empty.unwrap().is_empty(), "no waiting job yet");
    let p = live_parent(s, tp, "p").await;
    for id in ["w3", "w1", "w5", "w2", "w4"] {
        let job = new_job(id, REC, Due::In(0));
        after(s, t, job, &[&p], OnParentFailure::DeadLetter).await;
    }
    let later = now(s).await + 3_600_000;
    for id in ["s2", "s1", "z9"] {
        create(s, t, id, REC, Due::At(later)).await;
    }

    let first = s
        .page(t, &PageQuery::new(PageState::Waiting, 2))
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    assert!(first
        .iter()
        .all(|e| e.score == WAITING_DUE_MS && e.record == REC));
    assert!(first.iter().all(|e| e.death.is_none() && e.ended.is_none()));
    let waiting = ["w1", "w2", "w3", "w4", "w5"];
    assert_eq!(ids(s, t, PageState::Waiting, false, 2).await, waiting);
    let mut reversed = ids(s, t, PageState::Waiting, true, 2).await;
    reversed.reverse();
    assert_eq!(reversed, waiting, "newest first: the reverse");
    assert_eq!(
        ids(s, t, PageState::Scheduled, false, 2).await,
        ["s1", "s2", "z9"]
    );
    let mut reversed = ids(s, t, PageState::Scheduled, true, 2).await;
    reversed.reverse();
    assert_eq!(
        reversed,
        ["s1", "s2", "z9"],
        "no waiting job among the scheduled"
    );

    // A page after a scheduled job's place starts at the first waiting job, and one after a waiting
    // job's place, asked of the scheduled jobs, has none.
    let mut q = PageQuery::new(PageState::Waiting, 10);
    q.after = Some(PagePosition {
        score: later,
        member: "s1".to_owned(),
    });
    assert_eq!(s.page(t, &q).await.unwrap().len(), 5);
    let mut q = PageQuery::new(PageState::Scheduled, 10);
    q.after = Some(PagePosition {
        score: WAITING_DUE_MS,
        member: "w2".to_owned(),
    });
    assert!(s.page(t, &q).await.unwrap().is_empty());
    q.newest_first = true;
    assert_eq!(s.page(t, &q).await.unwrap().len(), 3);

    // A waiting job cancelled leaves the listing.
    s.cancel(t, "w3").await.unwrap();
    let left = ids(s, t, PageState::Waiting, false, 10).await;
    assert_eq!(left, ["w1", "w2", "w4", "w5"]);
}

pub(crate) async fn workflow_waiting_jobs_are_found_by_id_prefix_apart_from_the_scheduled_ones(
    store: Arc<dyn Store>,
) {
    let (s, tp, t) = (&*store, &topic("wf_find_p"), &topic("wf_find"));
    let p = live_parent(s, tp, "p").await;
    for n in 0..12 {
        let job = new_job(&format!("order:{n}:waits"), REC, Due::In(0));
        after(s, t, job, &[&p], OnParentFailure::DeadLetter).await;
        create(s, t, &format!("order:{n}:due"), REC, Due::In(LONG)).await;
    }
    for (state, kind) in [(PageState::Waiting, "waits"), (PageState::Scheduled, "due")] {
        let mut found = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..1000 {
            let step = s
                .find_prefix(t, state, "order:1", cursor.as_deref(), 3)
                .await
                .unwrap();
            found.extend(step.entries.into_iter().map(|e| (e.id, e.score)));
            cursor = step.next;
            if cursor.is_none() {
                break;
            }
        }
        found.sort();
        let expected: Vec<String> = ["order:10:", "order:11:", "order:1:"]
            .iter()
            .map(|p| format!("{p}{kind}"))
            .collect();
        let got: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(got, expected, "{state:?}");
        let waiting = found.iter().all(|(_, score)| *score == WAITING_DUE_MS);
        assert_eq!(waiting, state == PageState::Waiting, "{found:?}");
    }
}
