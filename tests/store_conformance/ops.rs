//! What operators need: listings by state (order, ties, a page after an entry that went), the search by
//! id prefix, lease holders, pause in the claim, the registries.

use std::collections::BTreeSet;
use std::sync::Arc;

use postpone::store::{
    ClaimRequest, Due, PageEntry, PagePosition, PageQuery, PageState, Store, StoredState,
};

use super::*;

/// Every entry of a listing, page by page, each page starting after the previous page's last entry;
/// `between` runs between pages.
async fn walk(
    s: &dyn Store,
    t: &str,
    state: PageState,
    newest_first: bool,
    limit: usize,
    mut between: impl FnMut(&PageEntry) -> Option<String>,
) -> Vec<PageEntry> {
    let mut out: Vec<PageEntry> = Vec::new();
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
        if let Some(id) = between(last) {
            s.cancel(t, &id).await.unwrap();
        }
        out.extend(page);
    }
}

pub(crate) async fn page_walks_ties_in_id_order_and_resumes_after_an_entry_that_went(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("page_ties"));
    let at = now(s).await + 3_600_000;
    // Ten jobs at one due time (ties), five later, in no id order.
    for id in ["e", "b", "j", "a", "h", "c", "i", "d", "g", "f"] {
        create(s, t, id, REC, Due::At(at)).await;
    }
    for id in ["z1", "y2", "x3", "w4", "v5"] {
        create(s, t, id, REC, Due::At(at + 5)).await;
    }
    // Each page's last entry is cancelled before the next page is asked for.
    let seen = walk(s, t, PageState::Scheduled, false, 3, |e| Some(e.id.clone())).await;
    let ids: Vec<&str> = seen.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "v5", "w4", "x3", "y2", "z1"]
    );
    assert!(seen.iter().all(|e| e.record == REC && e.death.is_none()));
    // Newest first: the reverse of what is left.
    let left = walk(s, t, PageState::Scheduled, false, 4, |_| None).await;
    let mut reversed = walk(s, t, PageState::Scheduled, true, 4, |_| None).await;
    reversed.reverse();
    assert_eq!(left, reversed);
    assert_eq!(left.len(), 10, "five cancelled on the way");
}

pub(crate) async fn page_lists_running_jobs_with_their_holder_and_dead_letters_with_their_reason(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("page_running"));
    for id in ["r1", "r2", "r3"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    let request = ClaimRequest::new(2, LONG, 100, 3).holder(42);
    let batch = s.claim(t, request).await.unwrap();
    assert_eq!(batch.jobs.len(), 2);
    let running = walk(s, t, PageState::Running, false, 10, |_| None).await;
    assert_eq!(running.len(), 2, "the claimed ones, and nothing else");
    assert!(running.iter().all(|e| e.holder == Some(42)), "{running:?}");
    let job = s.job(t, &batch.jobs[0].id).await.unwrap().unwrap();
    assert!(matches!(job.state, StoredState::Active { .. }));
    assert_eq!(job.holder, Some(42));

    let t = &topic("page_dead");
    make_dead(s, t, &["d1", "d2"]).await;
    let dead = walk(s, t, PageState::Dead, true, 1, |_| None).await;
    let got: Vec<_> = dead
        .iter()
        .map(|e| (e.id.as_str(), e.death.as_ref().map(|(_, r)| r.is_empty())))
        .collect();
    assert_eq!(
        got,
        [("d2", Some(false)), ("d1", Some(false))],
        "newest death first"
    );
}

pub(crate) async fn find_prefix_finds_every_match_step_by_step(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("find_prefix"));
    let mut expected = BTreeSet::new();
    for n in 0..30 {
        let id = format!("order:{n}");
        if id.starts_with("order:1") {
            expected.insert(id.clone());
        }
        create(s, t, &id, REC, Due::In(LONG)).await;
        create(s, t, &format!("cart:{n}"), REC, Due::In(LONG)).await;
    }
    create(s, t, "order:1*?[]\\", REC, Due::In(LONG)).await;
    expected.insert("order:1*?[]\\".to_owned());
    let mut found = BTreeSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let step = s
            .find_prefix(t, PageState::Scheduled, "order:1", cursor.as_deref(), 4)
            .await
            .unwrap();
        for e in step.entries {
            assert!(found.insert(e.id.clone()), "{} twice", e.id);
        }
        cursor = step.next;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(found, expected);

    make_dead(s, t, &["order:1x", "order:2x", "order:1y"]).await;
    let step = s
        .find_prefix(t, PageState::Dead, "order:1", None, 10)
        .await
        .unwrap();
    let ids: Vec<&str> = step.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["order:1x", "order:1y"], "dead letters in id order");
    assert!(step.next.is_none());
}

pub(crate) async fn a_paused_topic_claims_nothing_but_still_hands_back_a_lost_reply(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("paused"));
    let mut hints = s.hints();
    create(s, t, "a", REC, Due::In(0)).await;
    create(s, t, "b", REC, Due::In(0)).await;
    // The enqueue's hint, out of the way (on a Redis Cluster it may arrive late, over another link).
    hints_for(s, &mut hints, t).await;
    let first = ClaimRequest::new(1, LONG, 100, 3);
    assert_eq!(s.claim(t, first).await.unwrap().jobs.len(), 1);
    let paused_at = now(s).await;
    s.set_paused(t, true).await.unwrap();
    assert!(s.counts(t).await.unwrap().paused);
    // Its reply was lost: sent again, it still gets its job back.
    let again = s.claim(t, first.again()).await.unwrap();
    assert_eq!(again.jobs.len(), 1);
    let batch = s
        .claim(t, ClaimRequest::new(10, LONG, 100, 3))
        .await
        .unwrap();
    assert!(batch.jobs.is_empty() && batch.paused, "{batch:?}");
    assert_eq!(
        batch.next_due_ms, None,
        "a paused topic reports nothing due"
    );
    // Nothing woke the workers while paused: whatever came is an enqueue's hint, due before the pause
    // (on a Redis Cluster a PUBLISH reaches the other nodes a little later).
    let meanwhile = hints_for(s, &mut hints, t).await;
    assert!(
        meanwhile.iter().all(|due| *due < paused_at),
        "{meanwhile:?} (paused at {paused_at})"
    );
    let resumed_at = now(s).await;
    s.set_paused(t, false).await.unwrap();
    let seen = hints_for(s, &mut hints, t).await;
    assert!(
        seen.iter().any(|due| *due >= resumed_at),
        "a resume wakes the workers: {seen:?} (resumed at {resumed_at})"
    );
    let batch = s
        .claim(t, ClaimRequest::new(10, LONG, 100, 3))
        .await
        .unwrap();
    assert_eq!(batch.jobs.len(), 1);
    assert!(!batch.paused && !s.counts(t).await.unwrap().paused);
}

pub(crate) async fn registries_keep_topics_and_expire_workers(store: Arc<dyn Store>) {
    let s = &*store;
    let t = topic("registry");
    s.register_topic(&t, 2).await.unwrap();
    s.register_topic(&t, 1).await.unwrap();
    let topics = s.topics().await.unwrap();
    assert!(
        topics.contains(&(t.clone(), 2)),
        "the larger count stays: {topics:?}"
    );
    let (w1, w2) = (topic("w1"), topic("w2"));
    s.worker_beat(&w1, "{\"a\":1}", SHORT).await.unwrap();
    s.worker_beat(&w2, "{}", LONG).await.unwrap();
    let ids = |ws: Vec<postpone::store::WorkerBeat>| -> BTreeSet<String> {
        ws.into_iter().map(|w| w.id).collect()
    };
    let live = s.workers().await.unwrap();
    let w = live.iter().find(|w| w.id == w1).expect("w1 is live");
    assert_eq!(w.info, "{\"a\":1}");
    assert!(w.beat_at_ms < w.expires_at_ms);
    eventually_within(WAIT, "w1 to expire", || async {
        let live = ids(s.workers().await.unwrap());
        (!live.contains(&w1) && live.contains(&w2)).then_some(())
    })
    .await;
    s.worker_gone(&w2).await.unwrap();
    assert!(!ids(s.workers().await.unwrap()).contains(&w2));
}

pub(crate) async fn history_counts_what_happened_this_minute(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("history"));
    for id in ["a", "b", "c"] {
        create(s, t, id, REC, Due::In(0)).await;
    }
    let a = claim_id(s, t, "a", LONG).await;
    finish(s, t, &a, postpone::store::Finish::Done).await;
    let b = claim_id(s, t, "b", LONG).await;
    finish(s, t, &b, retry(REC, LONG, true)).await;
    let c = claim_id(s, t, "c", LONG).await;
    finish(s, t, &c, dead(REC, "no")).await;
    let h = s.history(t, 2).await.unwrap();
    let sum = h.iter().fold([0u64; 5], |mut x, m| {
        x[0] += m.enqueued;
        x[1] += m.processed;
        x[2] += m.retried;
        x[3] += m.failed;
        x[4] += m.dead;
        x
    });
    assert_eq!(sum, [3, 1, 1, 1, 1]);
    assert!(h.iter().all(|m| m.minute_ms % 60_000 == 0));
}

pub(crate) async fn outbox_reports_are_kept_until_their_ttl(store: Arc<dyn Store>) {
    let s = &*store;
    let name = topic("outbox_report");
    let before = now(s).await;
    s.outbox_report(&name, "3 1500 0", LONG).await.unwrap();
    s.outbox_report(&format!("{name}.short"), "1 0 0", SHORT)
        .await
        .unwrap();
    let reports = s.outbox_reports().await.unwrap();
    let mine = reports
        .iter()
        .find(|(n, _, _)| *n == name)
        .expect("the report");
    assert_eq!(mine.2, "3 1500 0");
    assert!(mine.1 >= before, "reported at the store's now");
    wait_past(s, before + SHORT as i64).await;
    eventually_within(WAIT, "the short report to expire", || async {
        let reports = s.outbox_reports().await.unwrap();
        let short = format!("{name}.short");
        (!reports.iter().any(|(n, _, _)| *n == short)).then_some(())
    })
    .await;
    let reports = s.outbox_reports().await.unwrap();
    assert!(
        reports.iter().any(|(n, _, _)| *n == name),
        "the long one stays"
    );
}
