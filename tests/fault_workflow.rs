//! Fault suite: batches and jobs that wait for jobs, with real worker processes. Members end while
//! workers are SIGKILLed; the last members of a batch finish at once on several processes, so that the
//! ends racing to fire the callbacks come from different workers. At least once holds for every job
//! (a killed worker's job runs again); exactly once holds for what the workflow decides: each callback
//! is *created* once (the topic's history counts every job it creates), a job waiting for another
//! runs only after that one succeeded.

mod fault;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use fault::log::Event;
use fault::{Expect, Rig, Rng, Spec, Work, TOPIC};
use postpone::store::{
    AfterOutcome, CallbackKind, Due, MemberState, NewJob, OnParentFailure, ParentRef,
};
use postpone::{BatchStatus, Client, EnqueueItem};
use support::redis_server::RedisServer;

const LEASE_MS: u64 = 400;

/// The Redis times of the `finish` lines of `id` (one per run that succeeded).
fn finishes(events: &[Event], id: &str) -> Vec<i64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Finish { id: i, ms, .. } if i == id => Some(*ms),
            _ => None,
        })
        .collect()
}

/// The Redis time of the first claim of `id`.
fn first_claim(events: &[Event], id: &str) -> Option<i64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Claim { id: i, ms, .. } if i == id => Some(*ms),
            _ => None,
        })
        .min()
}

/// Whether any line names `id`.
fn mentioned(events: &[Event], id: &str) -> bool {
    events.iter().any(|e| match e {
        Event::Claim { id: i, .. }
        | Event::Start { id: i, .. }
        | Event::Finish { id: i, .. }
        | Event::Fail { id: i, .. }
        | Event::Ack { id: i, .. }
        | Event::Dead { id: i, .. } => i == id,
        _ => false,
    })
}

/// The three callbacks of a batch, each a `Work` job with id `<prefix>success` (and so on).
fn callback(prefix: &str, kind: CallbackKind) -> EnqueueItem<Work> {
    EnqueueItem::new(Work::sleeping(10)).id(format!("{prefix}{}", kind.as_str()))
}

/// Kills the worker in the next slot (round robin) every 300 ms, and starts a new one in its place.
fn killer(spec: Spec) -> impl FnMut(&mut Rig) {
    let mut last = Instant::now();
    let mut next = 0;
    move |rig: &mut Rig| {
        if last.elapsed() >= Duration::from_millis(300) {
            let slot = next % rig.procs.len();
            rig.kill9(slot);
            rig.respawn(slot, spec.clone());
            next += 1;
            last = Instant::now();
        }
    }
}

/// A completed batch whose `total` members all succeeded, with its success and completion callbacks
/// fired and its death callback not.
fn assert_succeeded(status: &BatchStatus, total: u64) {
    assert_eq!(
        (
            status.total,
            status.succeeded,
            status.dead,
            status.cancelled
        ),
        (total, total, 0, 0),
        "{status:?}"
    );
    assert_eq!(status.pending(), 0, "{status:?}");
    assert!(status.closed && status.is_complete(), "{status:?}");
    let fired: BTreeMap<CallbackKind, bool> = status.callbacks.iter().copied().collect();
    let want = BTreeMap::from([
        (CallbackKind::Success, true),
        (CallbackKind::Complete, true),
        (CallbackKind::Death, false),
    ]);
    assert_eq!(fired, want, "callbacks fired: {status:?}");
}

/// The death callback `id` was never created nor run.
async fn assert_never_created(rig: &Rig, events: &[Event], id: &str) {
    assert!(!mentioned(events, id), "{id:?} ran");
    let job = rig.client.store().job(TOPIC, id).await.unwrap();
    assert!(job.is_none(), "{id:?} exists: {job:?}");
}

/// Every callback's first claim comes after every member's last successful run (its end, which fires
/// the callback, is acknowledged after that run's `finish` line). Returns how long after that run the
/// last callback was first claimed (ms).
fn assert_callbacks_after_members(
    events: &[Event],
    members: &[String],
    callbacks: &[String],
) -> i64 {
    let last_member = members
        .iter()
        .flat_map(|m| finishes(events, m))
        .max()
        .expect("members finished");
    let mut latency = 0;
    for cb in callbacks {
        let claimed = first_claim(events, cb).unwrap_or_else(|| panic!("{cb:?} never claimed"));
        assert!(
            claimed >= last_member,
            "{cb:?} claimed at {claimed}, before the last member finished at {last_member}"
        );
        latency = latency.max(claimed - last_member);
    }
    latency
}

/// Every job claimed again was held by a process that had been SIGKILLed by then (at or before the
/// new claim, by the Redis clock): no rerun the kills do not explain. Returns how many reruns.
///
/// The checker's own attribution (`Report::reruns_unexplained`) looks for the fault from 5 ms before
/// the first claim only: a claim that Redis answered between the rig's reading of the time and the
/// kill itself falls outside, and a busy machine makes that window wider. A process is killed once
/// (a new process takes its slot), so any kill of it before the new claim is the one.
fn assert_reruns_follow_kills(rig: &Rig, events: &[Event]) -> usize {
    let mut claims: BTreeMap<&str, Vec<(i64, u32)>> = BTreeMap::new();
    for e in events {
        if let Event::Claim { id, pid, ms, .. } = e {
            claims.entry(id.as_str()).or_default().push((*ms, *pid));
        }
    }
    let killed: BTreeMap<u32, i64> = rig
        .faults
        .iter()
        .filter(|f| f.kind == "kill")
        .filter_map(|f| Some((f.pid?, f.at_ms)))
        .collect();
    let mut reruns = 0;
    for (id, mut claims) in claims {
        claims.sort();
        for pair in claims.windows(2) {
            let ((_, held_by), (again_ms, again_pid)) = (pair[0], pair[1]);
            reruns += 1;
            let kill = killed.get(&held_by);
            assert!(
                kill.is_some_and(|&at| at <= again_ms),
                "{id:?} claimed again at {again_ms} (pid {again_pid}) while pid {held_by}, which \
                 held it, was not killed (killed at {kill:?}): {claims:?}"
            );
        }
    }
    reruns
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_callbacks_fire_once_while_workers_are_sigkilled() {
    let _serial = fault::serial().await;
    let name = "batch-sigkill";
    let mut rng = Rng::new(name);
    let mut rig = Rig::start(name, RedisServer::builder()).await;
    let spec = Spec::new(LEASE_MS, 8).env("FAULT_STALL_LIMIT", 1000);
    rig.spawn_ready(4, &spec).await;
    // 1500 members due now and 500 over the next 5 s, each working 10 to 30 ms: the kills go on
    // while the last members end and the callbacks fire.
    const MEMBERS: usize = 2000;
    let members: Vec<String> = (0..MEMBERS).map(|i| format!("m{i}")).collect();
    let items: Vec<EnqueueItem<Work>> = members
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let item = EnqueueItem::new(Work::sleeping(rng.range(10, 30))).id(id.clone());
            match i < 1500 {
                true => item,
                false => item.after(Duration::from_millis(rng.range(0, 5000))),
            }
        })
        .collect();
    let t0 = rig.redis_ms();
    let start = Instant::now();
    let batch = rig
        .client
        .batch()
        .id("fault-batch")
        .description("2000 members under SIGKILL")
        .on_success(callback("cb:", CallbackKind::Success))
        .on_complete(callback("cb:", CallbackKind::Complete))
        .on_death(callback("cb:", CallbackKind::Death))
        .add_all(items)
        .enqueue()
        .await
        .unwrap();
    rig.ledger_add(members.clone(), t0);
    let callbacks = vec!["cb:success".to_owned(), "cb:complete".to_owned()];

    let done = |events: &[Event]| callbacks.iter().all(|cb| !finishes(events, cb).is_empty());
    // Usually 5 s; 5 s more each time a kill hits a worker between taking members' ends for delivery
    // and counting them: the store hides ends taken for delivery for 5 s (`END_LEASE_MS`), then hands
    // them out again.
    rig.drain_until(
        Duration::from_secs(60),
        "both callbacks ran",
        done,
        killer(spec.clone()),
    )
    .await;
    let took = start.elapsed();

    assert_succeeded(&batch.status().await.unwrap(), MEMBERS as u64);
    let listed = batch.members(0, 2 * MEMBERS).await.unwrap();
    assert_eq!(listed.len(), MEMBERS);
    assert!(listed.iter().all(|m| m.state == MemberState::Succeeded));
    // Created exactly once each: the members, and two callbacks.
    assert_eq!(rig.enqueued_total().await, MEMBERS as u64 + 2);
    let events = rig.events();
    assert_never_created(&rig, &events, "cb:death").await;
    let latency_ms = assert_callbacks_after_members(&events, &members, &callbacks);
    rig.ledger_add(callbacks.clone(), t0);
    let report = rig
        .check(Expect {
            attempt_one: true,
            rerun_within_ms: Some(2 * LEASE_MS as i64 + 1000),
            ..Expect::default()
        })
        .await;
    let reruns = assert_reruns_follow_kills(&rig, &events);
    eprintln!(
        "{name}: drained with both callbacks run in {took:?}; {reruns} reruns, each after its \
         process was killed; callbacks claimed {latency_ms} ms after the last member finished"
    );
    assert!(
        report.faults["kill"] >= 10,
        "only {} kills happened: the test did not test much",
        report.faults["kill"]
    );
    assert!(
        report.reruns_after_worker_fault > 0,
        "no job was hit by a kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_last_members_finishing_together_on_several_workers_fire_each_callback_once() {
    let _serial = fault::serial().await;
    let name = "batch-race";
    let mut rig = Rig::start(name, RedisServer::builder()).await;
    // No fault here: a long lease, so that nothing runs twice.
    let spec = Spec::new(2000, 16);
    rig.spawn_ready(4, &spec).await;
    const ROUNDS: usize = 8;
    const MEMBERS: usize = 40;
    // Per round: how many processes finished a member within 5 ms of the last member's finish.
    let mut together = Vec::new();
    // Per round: ms from the last member's finish to the last callback's first claim.
    let mut latencies = Vec::new();
    let start = Instant::now();
    for round in 0..ROUNDS {
        let created_before = rig.enqueued_total().await;
        let prefix = format!("r{round}:");
        let members: Vec<String> = (0..MEMBERS).map(|i| format!("{prefix}m{i}")).collect();
        // Equal work: members claimed together finish together.
        let items = members
            .iter()
            .map(|id| EnqueueItem::new(Work::sleeping(5)).id(id.clone()));
        let t0 = rig.redis_ms();
        let cb = format!("{prefix}cb:");
        let batch = rig
            .client
            .batch()
            .id(format!("race-{round}"))
            .on_success(callback(&cb, CallbackKind::Success))
            .on_complete(callback(&cb, CallbackKind::Complete))
            .on_death(callback(&cb, CallbackKind::Death))
            .add_all(items)
            .enqueue()
            .await
            .unwrap();
        let callbacks = vec![format!("{cb}success"), format!("{cb}complete")];
        let done = |events: &[Event]| callbacks.iter().all(|c| !finishes(events, c).is_empty());
        rig.drain_until(Duration::from_secs(30), "both callbacks ran", done, |_| {})
            .await;

        assert_succeeded(&batch.status().await.unwrap(), MEMBERS as u64);
        let created = rig.enqueued_total().await - created_before;
        assert_eq!(
            created,
            MEMBERS as u64 + 2,
            "round {round}: jobs created (members and callbacks)"
        );
        let events = rig.events();
        assert_never_created(&rig, &events, &format!("{cb}death")).await;
        latencies.push(assert_callbacks_after_members(
            &events, &members, &callbacks,
        ));
        let last = members
            .iter()
            .flat_map(|m| finishes(&events, m))
            .max()
            .unwrap();
        let pids: BTreeSet<u32> = events
            .iter()
            .filter_map(|e| match e {
                Event::Finish { id, pid, ms, .. } if id.starts_with(&prefix) => {
                    (members.contains(id) && *ms >= last - 5).then_some(*pid)
                }
                _ => None,
            })
            .collect();
        together.push(pids.len());
        rig.ledger_add(members, t0);
        rig.ledger_add(callbacks, t0);
    }
    let took = start.elapsed();
    rig.check(Expect {
        once: true,
        attempt_one: true,
        ..Expect::default()
    })
    .await;
    eprintln!(
        "{name}: {ROUNDS} rounds of {MEMBERS} members in {took:?}; processes finishing members \
         within 5 ms of each round's last: {together:?}; callbacks claimed (ms after the last \
         member finished): {latencies:?}"
    );
    assert!(
        together.iter().any(|&n| n >= 2),
        "no round had its last members finish together on several processes: {together:?}"
    );
}

/// The record the library encodes for `work` (through a client of its own, in memory): what an
/// enqueue of it would store.
async fn encoded(scratch: &Client, id: &str, work: Work) -> Vec<u8> {
    scratch
        .enqueue_many(vec![EnqueueItem::new(work).id(id)])
        .await
        .unwrap();
    let job = scratch.store().job(TOPIC, id).await.unwrap();
    job.expect("just enqueued").record
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_chain_survives_sigkilled_workers() {
    let _serial = fault::serial().await;
    let name = "workflow-chain";
    let mut rng = Rng::new(name);
    let mut rig = Rig::start(name, RedisServer::builder()).await;
    let spec = Spec::new(LEASE_MS, 8).env("FAULT_STALL_LIMIT", 1000);
    // 200 chains parent -> child -> grandchild; the parents due over the next 5 s, enqueued before
    // any worker runs, so that each is live when its child is enqueued to wait for it.
    const CHAINS: usize = 200;
    let t0 = rig.redis_ms();
    let parents = (0..CHAINS)
        .map(|i| {
            EnqueueItem::new(Work::sleeping(rng.range(10, 30)))
                .id(format!("p{i}"))
                .after(Duration::from_millis(rng.range(0, 5000)))
        })
        .collect();
    rig.enqueue(parents).await.unwrap();
    let scratch = Client::memory();
    let store = rig.client.store().clone();
    for i in 0..CHAINS {
        for (parent, child) in [
            (format!("p{i}"), format!("c{i}")),
            (format!("c{i}"), format!("g{i}")),
        ] {
            let record = encoded(&scratch, &child, Work::sleeping(rng.range(10, 30))).await;
            let job = NewJob::new(child.clone(), record, Due::In(0), false);
            let outcome = store
                .enqueue_after(
                    TOPIC,
                    job,
                    vec![ParentRef::new(TOPIC, parent)],
                    OnParentFailure::DeadLetter,
                )
                .await
                .unwrap();
            assert_eq!(
                outcome,
                AfterOutcome::Waiting { parents_left: 1 },
                "{child:?}"
            );
            rig.ledger_add([child], t0);
        }
    }
    assert_eq!(rig.counts().await.waiting, 2 * CHAINS as u64);
    let start = Instant::now();
    rig.spawn_ready(4, &spec).await;
    // Usually 5 s; 5 s more each time a kill hits a worker delivering parents' ends (see the batch
    // test).
    rig.drain_with(Duration::from_secs(60), killer(spec.clone()))
        .await;
    let took = start.elapsed();

    // Each job waiting for another was first claimed after that one's last successful run.
    let events = rig.events();
    let mut longest_wait_ms = 0;
    for i in 0..CHAINS {
        for (parent, child) in [
            (format!("p{i}"), format!("c{i}")),
            (format!("c{i}"), format!("g{i}")),
        ] {
            let parent_done = finishes(&events, &parent).into_iter().max();
            let parent_done = parent_done.unwrap_or_else(|| panic!("{parent:?} never finished"));
            let claimed = first_claim(&events, &child);
            let claimed = claimed.unwrap_or_else(|| panic!("{child:?} never claimed"));
            assert!(
                claimed >= parent_done,
                "{child:?} claimed at {claimed}, before its parent {parent:?} finished at {parent_done}"
            );
            longest_wait_ms = longest_wait_ms.max(claimed - parent_done);
        }
    }
    assert_eq!(rig.enqueued_total().await, 3 * CHAINS as u64);
    let report = rig
        .check(Expect {
            attempt_one: true,
            rerun_within_ms: Some(2 * LEASE_MS as i64 + 1000),
            ..Expect::default()
        })
        .await;
    let reruns = assert_reruns_follow_kills(&rig, &events);
    eprintln!(
        "{name}: {CHAINS} chains of 3 drained in {took:?}; {reruns} reruns, each after its process \
         was killed; a job waiting for another first claimed at most {longest_wait_ms} ms after \
         that one's last finish"
    );
    assert!(
        report.faults["kill"] >= 10,
        "only {} kills happened: the test did not test much",
        report.faults["kill"]
    );
    assert!(
        report.reruns_after_worker_fault > 0,
        "no job was hit by a kill"
    );
}
