//! Periodic schedules: upsert, the tick decision (compare-and-set on the store's clock), grace, overlap,
//! triggers, removal.

use std::sync::Arc;

use postpone::store::{
    Due, FinishOutcome, Store, StoredSchedule, StoredState, TickJob, TickPlan, TickRequest,
    TickStatus, UpsertStatus,
};

use super::*;

const DEF: &str = r#"{"expression":"every 60s","missed":"skip","overlap":"allow"}"#;
const MINUTE: i64 = 60_000;

fn job(tick_ms: i64) -> TickJob {
    TickJob::new(tick_ms, format!("s:{tick_ms}"), tick_record(tick_ms))
}

/// Tick `tick_ms`'s record, as the library encodes one (so that a key can go in it: see KEYED_REC).
fn tick_record(tick_ms: i64) -> Vec<u8> {
    let mut record = KEYED_REC[..3].to_vec();
    record.extend_from_slice(format!("tick {tick_ms}").as_bytes());
    record
}

/// A plan from `schedule` that runs `runs` and moves the next tick to `new_next`.
fn plan(schedule: &StoredSchedule, runs: &[i64], new_next: i64) -> TickPlan {
    let mut p = TickPlan::new(schedule.next_ms, new_next);
    p.expect_last = schedule.last_ms.map(|l| (l, format!("s:{l}")));
    p.runs = runs.iter().map(|t| job(*t)).collect();
    p
}

fn request(plan: Option<TickPlan>, trigger: Option<TickJob>) -> TickRequest {
    let mut r = TickRequest::new("s".into(), DEF.into());
    r.plan = plan;
    r.trigger = trigger;
    r
}

/// Stores schedule "s" with its next tick `first_next`.
async fn stored(s: &dyn Store, t: &str, first_next: i64) -> StoredSchedule {
    let (status, _, schedule) = s.schedule_upsert(t, "s", DEF, first_next).await.unwrap();
    assert_eq!(status, UpsertStatus::Created);
    schedule
}

pub(crate) async fn periodic_upsert_is_idempotent_and_a_changed_definition_replaces(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("periodic_upsert"));
    let now = now(s).await;
    // Ten workers at once (each its first tick a little different): one schedule.
    let tries: Vec<_> = (0..10)
        .map(|i| {
            let (store, t) = (store.clone(), t.clone());
            tokio::spawn(async move { store.schedule_upsert(&t, "s", DEF, now + MINUTE + i).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tries {
        outcomes.push(task.await.unwrap());
    }
    let created = outcomes
        .iter()
        .filter(|o| o.as_ref().unwrap().0 == UpsertStatus::Created)
        .count();
    assert_eq!(created, 1, "{outcomes:?}");
    let (_, list) = s.schedules(t).await.unwrap();
    assert_eq!(list.len(), 1);
    let first = list[0].clone();
    assert_eq!((first.name.as_str(), first.definition.as_str()), ("s", DEF));
    assert!(outcomes.iter().all(|o| o.as_ref().unwrap().2 == first));

    let changed = DEF.replace("skip", "last");
    let (status, _, replaced) = s
        .schedule_upsert(t, "s", &changed, now + 2 * MINUTE)
        .await
        .unwrap();
    assert_eq!(status, UpsertStatus::Replaced);
    assert_eq!(
        (replaced.next_ms, replaced.definition.as_str()),
        (now + 2 * MINUTE, &*changed)
    );
    let (status, _, same) = s.schedule_upsert(t, "s", &changed, now).await.unwrap();
    assert_eq!((status, same), (UpsertStatus::Unchanged, replaced));

    assert!(s.schedule_remove(t, "s").await.unwrap());
    assert!(!s.schedule_remove(t, "s").await.unwrap());
    assert!(s.schedules(t).await.unwrap().1.is_empty());
    let gone = s.schedule_tick(t, request(None, None)).await.unwrap();
    assert_eq!((gone.status, gone.schedule), (TickStatus::Gone, None));
}

pub(crate) async fn periodic_tick_enqueues_due_ticks_once_and_advances(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("periodic_tick"));
    let now = now(s).await;
    let first = now - 2 * MINUTE;
    let schedule = stored(s, t, first).await;
    let p = plan(&schedule, &[first, first + MINUTE], now + MINUTE);
    let out = s
        .schedule_tick(t, request(Some(p.clone()), None))
        .await
        .unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::Advanced, 2));
    let after = out.schedule.unwrap();
    assert_eq!(
        (after.next_ms, after.last_ms),
        (now + MINUTE, Some(first + MINUTE))
    );
    for tick in [first, first + MINUTE] {
        let Some(StoredState::Due { due_at_ms }) = state(s, t, &format!("s:{tick}")).await else {
            panic!("tick {tick} not enqueued")
        };
        assert!(
            due_at_ms >= now,
            "due now (a tick in the past), never before it was decided"
        );
    }
    let got = s.job(t, &format!("s:{first}")).await.unwrap().unwrap();
    assert_eq!(got.record, tick_record(first));

    // Counted as enqueued in the topic's history, like any new job.
    let history = s.history(t, 2).await.unwrap();
    assert_eq!(
        history.iter().map(|m| m.enqueued).sum::<u64>(),
        2,
        "{history:?}"
    );

    // The same plan again (another worker, late): moved, nothing enqueued.
    let again = s.schedule_tick(t, request(Some(p), None)).await.unwrap();
    assert_eq!((again.status, again.enqueued), (TickStatus::Moved, 0));
    assert_eq!(again.schedule.unwrap(), after);
    assert_eq!(s.counts(t).await.unwrap().ready, 2);
}

pub(crate) async fn periodic_tick_checks_the_plan_against_the_stores_clock(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("periodic_clock"));
    let now = now(s).await;
    let schedule = stored(s, t, now + MINUTE).await;
    // A worker whose clock runs ahead plans a tick that is not due yet.
    let early = plan(&schedule, &[now + MINUTE], now + 2 * MINUTE);
    let out = s
        .schedule_tick(t, request(Some(early), None))
        .await
        .unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::Early, 0));
    assert!(out.now_ms >= now);
    assert_eq!(out.schedule.unwrap(), schedule);
    // Not due yet with no runs either.
    let out = s
        .schedule_tick(
            t,
            request(Some(plan(&schedule, &[], now + 2 * MINUTE)), None),
        )
        .await
        .unwrap();
    assert_eq!(out.status, TickStatus::Early);

    // A worker whose clock runs behind plans a next tick that has already passed.
    let (_, _, schedule) = s.schedule_upsert(t, "s", DEF, now - MINUTE).await.unwrap();
    assert_eq!(schedule.next_ms, now + MINUTE, "unchanged: same definition");
    s.schedule_remove(t, "s").await.unwrap();
    let schedule = stored(s, t, now - MINUTE).await;
    let behind = plan(&schedule, &[now - MINUTE], now - 1);
    let out = s
        .schedule_tick(t, request(Some(behind), None))
        .await
        .unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::Behind, 0));
    assert_eq!(out.schedule.unwrap(), schedule);
    assert_eq!(s.counts(t).await.unwrap().ready, 0);
}

pub(crate) async fn periodic_tick_skips_a_tick_later_than_its_grace(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("periodic_grace"));
    let now = now(s).await;
    let first = now - 3 * MINUTE;
    let schedule = stored(s, t, first).await;
    let mut late = plan(&schedule, &[first], now + MINUTE);
    late.grace_ms = Some(60_000);
    let out = s.schedule_tick(t, request(Some(late), None)).await.unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::Advanced, 0));
    let schedule = out.schedule.unwrap();
    assert_eq!((schedule.next_ms, schedule.last_ms), (now + MINUTE, None));
    assert_eq!(state(s, t, &format!("s:{first}")).await, None);
}

/// Redefines schedule "s" (so that its next tick is `next`, its last tick kept) and decides its next
/// tick with an overlap check; returns how many jobs it created.
async fn overlap_tick(s: &dyn Store, t: &str, version: u32, next: i64, new_next: i64) -> u32 {
    let def = DEF.replace("60s", &format!("{version}s"));
    let (status, _, schedule) = s.schedule_upsert(t, "s", &def, next).await.unwrap();
    assert_eq!(status, UpsertStatus::Replaced);
    let mut p = plan(&schedule, &[next], new_next);
    p.overlap_skip = true;
    let mut r = request(Some(p), None);
    r.definition = def;
    let out = s.schedule_tick(t, r).await.unwrap();
    assert_eq!(out.status, TickStatus::Advanced);
    out.enqueued
}

pub(crate) async fn periodic_overlap_skips_while_the_previous_ticks_job_is_due_or_active(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("periodic_overlap"));
    let now = now(s).await;
    let first = now - 3 * MINUTE;
    let schedule = stored(s, t, first).await;
    // Two due ticks in one plan: the second overlaps the first, still due.
    let mut both = plan(&schedule, &[first, first + MINUTE], now + MINUTE);
    both.overlap_skip = true;
    let out = s.schedule_tick(t, request(Some(both), None)).await.unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::Advanced, 1));
    assert_eq!(
        out.schedule.unwrap().last_ms,
        Some(first),
        "a skipped tick is not the last"
    );
    assert_eq!(state(s, t, &format!("s:{}", first + MINUTE)).await, None);

    // Still due, then running: skipped; done: enqueued.
    assert_eq!(overlap_tick(s, t, 2, now - MINUTE, now + MINUTE).await, 0);
    let running = claim_id(s, t, &format!("s:{first}"), LONG).await;
    assert_eq!(overlap_tick(s, t, 3, now - MINUTE, now + MINUTE).await, 0);
    assert_eq!(
        finish(s, t, &running, postpone::store::Finish::Done).await,
        FinishOutcome::Applied
    );
    assert_eq!(overlap_tick(s, t, 4, now - MINUTE, now + MINUTE).await, 1);
    assert!(matches!(
        state(s, t, &format!("s:{}", now - MINUTE)).await,
        Some(StoredState::Due { .. })
    ));
}

pub(crate) async fn periodic_trigger_enqueues_a_run_now_once(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("periodic_trigger"));
    assert_eq!(s.schedule_trigger(t, "s").await.unwrap(), None);
    let now = now(s).await;
    let schedule = stored(s, t, now + MINUTE).await;
    let at = s.schedule_trigger(t, "s").await.unwrap().unwrap();
    assert!(at >= now);
    assert_eq!(
        s.schedule_trigger(t, "s").await.unwrap(),
        Some(at),
        "one pending run"
    );
    let (_, list) = s.schedules(t).await.unwrap();
    assert_eq!(list[0].trigger_ms, Some(at));

    let out = s
        .schedule_tick(t, request(None, Some(job(at))))
        .await
        .unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::NoPlan, 1));
    let after = out.schedule.unwrap();
    assert_eq!(after.trigger_ms, None);
    assert_eq!(
        (after.next_ms, after.last_ms),
        (schedule.next_ms, None),
        "ticks untouched"
    );
    assert!(matches!(
        state(s, t, &format!("s:{at}")).await,
        Some(StoredState::Due { .. })
    ));
    // Another worker with the same trigger: nothing.
    let out = s
        .schedule_tick(t, request(None, Some(job(at))))
        .await
        .unwrap();
    assert_eq!(out.enqueued, 0);
    assert_eq!(s.counts(t).await.unwrap().ready, 1);
}

pub(crate) async fn periodic_tick_of_a_live_id_or_another_definition_changes_nothing(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("periodic_live"));
    let now = now(s).await;
    let first = now - MINUTE;
    create(s, t, &format!("s:{first}"), REC, Due::In(LONG)).await;
    let schedule = stored(s, t, first).await;
    let mut other = request(Some(plan(&schedule, &[first], now + MINUTE)), None);
    other.definition = DEF.replace("allow", "skip");
    let out = s.schedule_tick(t, other).await.unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::Superseded, 0));
    assert_eq!(out.schedule.unwrap(), schedule);

    let out = s
        .schedule_tick(
            t,
            request(Some(plan(&schedule, &[first], now + MINUTE)), None),
        )
        .await
        .unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::Advanced, 0));
    assert_eq!(out.schedule.unwrap().last_ms, Some(first));
    let job = s.job(t, &format!("s:{first}")).await.unwrap().unwrap();
    assert_eq!(job.record, REC, "the live job is left alone");
}

pub(crate) async fn periodic_tick_and_trigger_send_hints(store: Arc<dyn Store>) {
    let (s, t) = (&*store, &topic("periodic_hints"));
    let mut rx = s.hints();
    assert!(hints_for(s, &mut rx, t).await.is_empty(), "nothing yet");
    let now = now(s).await;
    let schedule = stored(s, t, now - MINUTE).await;
    assert!(
        hints_for(s, &mut rx, t).await.is_empty(),
        "storing wakes nobody"
    );

    // A tick's job is the topic's earliest: a hint at its due time.
    let out = s
        .schedule_tick(
            t,
            request(Some(plan(&schedule, &[now - MINUTE], now + MINUTE)), None),
        )
        .await
        .unwrap();
    assert_eq!(out.enqueued, 1);
    let Some(StoredState::Due { due_at_ms }) = state(s, t, &format!("s:{}", now - MINUTE)).await
    else {
        panic!("the tick's job is due")
    };
    assert_eq!(hints_for(s, &mut rx, t).await, [due_at_ms]);

    // Run now wakes the topic's workers (so that one of them enqueues it), at the time asked.
    let at = s.schedule_trigger(t, "s").await.unwrap().unwrap();
    assert_eq!(hints_for(s, &mut rx, t).await, [at]);
}

pub(crate) async fn periodic_ticks_and_a_trigger_keep_their_keys_for_fairness(
    store: Arc<dyn Store>,
) {
    let (s, t) = (&*store, &topic("periodic_keys"));
    let flood: Vec<_> = (0..3)
        .map(|i| new_job(&format!("a-{i}"), KEYED_REC, Due::In(0)).with_key(Some("a".into())))
        .collect();
    s.enqueue(t, flood).await.unwrap();
    let now = now(s).await;
    let first = now - MINUTE;
    let schedule = stored(s, t, first).await;
    let trigger = s.schedule_trigger(t, "s").await.unwrap().unwrap();
    let mut p = plan(&schedule, &[], now + MINUTE);
    p.runs = vec![job(first).with_key(Some("b".into()))];
    let tick = job(trigger).with_key(Some("c".into()));
    let out = s
        .schedule_tick(t, request(Some(p), Some(tick)))
        .await
        .unwrap();
    assert_eq!((out.status, out.enqueued), (TickStatus::Advanced, 2));
    // Filed under their keys, each due now beside the flood.
    let page = s.busiest_keys(t, 10, 1000).await.unwrap();
    let keys: Vec<_> = page
        .keys
        .iter()
        .map(|k| (k.key.as_str(), k.queued))
        .collect();
    assert_eq!(keys, [("a", 3), ("b", 1), ("c", 1)], "{page:?}");
    let mut ids = claimed_ids(s, t, 3).await;
    ids.sort_unstable();
    assert_eq!(
        ids,
        [
            "a-0".to_owned(),
            format!("s:{first}"),
            format!("s:{trigger}")
        ]
    );
}
