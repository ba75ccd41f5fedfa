//! Periodic jobs through a worker on the memory backend's manual clock: ticks by the store's clock,
//! missed ticks after downtime by policy, run now, listing and removal.

#[path = "support/wait.rs"]
mod wait;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use postpone::store::memory::{ManualClock, MemoryStore};
use postpone::{Client, Job, JobContext, JobError, Missed, Periodic, Worker};
use serde::{Deserialize, Serialize};
use wait::eventually;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const FIVE_MIN: i64 = 300_000;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "periodic.report")]
struct Report {
    at_ms: i64,
}

type Ran = Arc<Mutex<Vec<i64>>>;

async fn report(job: Report, _ctx: JobContext, ran: Ran) -> Result<(), JobError> {
    ran.lock().unwrap().push(job.at_ms);
    Ok(())
}

struct Rig {
    clock: Arc<ManualClock>,
    client: Client,
    ran: Ran,
}

impl Rig {
    fn new() -> Self {
        // One second past a tick of the five-minute schedule.
        let clock = Arc::new(ManualClock::new(T0 + 1000));
        let client = Client::builder().store(MemoryStore::with_clock(clock.clone()));
        Rig {
            clock,
            client,
            ran: Ran::default(),
        }
    }

    /// Starts a worker running the five-minute schedule with `missed`; returns its shutdown handle and
    /// task once the schedule is stored.
    async fn worker(
        &self,
        missed: Missed,
    ) -> (
        postpone::ShutdownHandle,
        tokio::task::JoinHandle<postpone::Result<()>>,
    ) {
        let five = Periodic::every("five", Duration::from_secs(300))
            .unwrap()
            .missed(missed)
            .job(|tick| Report {
                at_ms: tick.timestamp_millis(),
            });
        let worker = Worker::with_state(&self.client, self.ran.clone())
            .handle(report)
            .periodic(five)
            .poll_interval(Duration::from_millis(20))
            .build()
            .unwrap();
        let stop = worker.shutdown_handle();
        let running = tokio::spawn(worker.run());
        let topic = self.client.topic::<Report>();
        eventually("the schedule to be stored", || async {
            (!topic.schedules().await.unwrap().is_empty()).then_some(())
        })
        .await;
        (stop, running)
    }

    fn ran(&self) -> Vec<i64> {
        self.ran.lock().unwrap().clone()
    }

    async fn ran_exactly(&self, what: &str, expect: &[i64]) {
        eventually(what, || async { (self.ran() == expect).then_some(()) }).await;
    }

    /// Waits until the stored next tick is `next`.
    async fn next_is(&self, next: i64) {
        let topic = self.client.topic::<Report>();
        eventually("the schedule to advance", || async {
            let list = topic.schedules().await.unwrap();
            (list[0].next.timestamp_millis() == next).then_some(())
        })
        .await;
    }
}

/// Runs one tick, stops the worker, moves the clock 22 minutes on (ticks at 10, 15, 20 and 25 minutes
/// pass, the last two minutes ago), starts a new worker with `missed`: returns the ticks that ran
/// after the downtime, and checks the next tick runs.
async fn after_downtime(missed: Missed) -> Vec<i64> {
    let rig = Rig::new();
    let (stop, running) = rig.worker(missed).await;
    rig.next_is(T0 + FIVE_MIN).await;
    rig.clock.advance(Duration::from_secs(300));
    rig.ran_exactly("the five-minute tick", &[T0 + FIVE_MIN])
        .await;
    stop.shutdown();
    running.await.unwrap().unwrap();

    rig.clock.advance(Duration::from_secs(22 * 60));
    let (stop, running) = rig.worker(missed).await;
    rig.next_is(T0 + 6 * FIVE_MIN).await;
    let caught_up = rig.ran()[1..].to_vec();
    // On time (a second late) for the next tick.
    rig.clock.set(T0 + 6 * FIVE_MIN + 1000);
    let mut expect = rig.ran();
    expect.push(T0 + 6 * FIVE_MIN);
    rig.ran_exactly("the tick after the downtime", &expect)
        .await;
    stop.shutdown();
    running.await.unwrap().unwrap();
    caught_up
}

#[tokio::test]
async fn missed_ticks_are_skipped_by_default() {
    assert_eq!(after_downtime(Missed::Skip).await, Vec::<i64>::new());
}

#[tokio::test]
async fn missed_last_runs_the_last_missed_tick() {
    assert_eq!(after_downtime(Missed::Last).await, [T0 + 5 * FIVE_MIN]);
}

#[tokio::test]
async fn missed_up_to_n_runs_the_latest_n_oldest_first() {
    assert_eq!(
        after_downtime(Missed::UpTo(3)).await,
        [T0 + 3 * FIVE_MIN, T0 + 4 * FIVE_MIN, T0 + 5 * FIVE_MIN]
    );
}

#[tokio::test]
async fn listed_triggered_and_removed() {
    let rig = Rig::new();
    let (stop, running) = rig.worker(Missed::Skip).await;
    let topic = rig.client.topic::<Report>();
    let list = topic.schedules().await.unwrap();
    assert_eq!(list.len(), 1);
    let s = &list[0];
    assert_eq!(
        (s.name.as_str(), s.expression.as_str(), s.zone.as_deref()),
        ("five", "every 300s", None)
    );
    assert_eq!(
        (s.missed, s.last, s.triggered),
        (Some(Missed::Skip), None, None)
    );
    assert_eq!(s.next.timestamp_millis(), T0 + FIVE_MIN);

    // The operations API sees the same, by topic name.
    let ops = rig.client.ops();
    assert_eq!(ops.schedules("periodic.report").await.unwrap(), list);
    let all = ops.all_schedules().await.unwrap();
    assert_eq!(all, [("periodic.report".to_owned(), list[0].clone())]);

    // Run now: a job for the store's current time, whatever the ticks.
    let at = ops
        .trigger_schedule("periodic.report", "five")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(at.timestamp_millis(), T0 + 1000);
    rig.ran_exactly("the triggered run", &[T0 + 1000]).await;
    let s = &topic.schedules().await.unwrap()[0];
    assert_eq!(
        (s.triggered, s.next.timestamp_millis(), s.last),
        (None, T0 + FIVE_MIN, None)
    );
    assert_eq!(topic.trigger_schedule("nope").await.unwrap(), None);

    // Removed: the worker stops ticking it.
    assert!(topic.remove_schedule("five").await.unwrap());
    rig.clock.advance(Duration::from_secs(600));
    let counts = topic.counts().await.unwrap();
    assert_eq!(counts.scheduled + counts.ready, 0);
    assert!(
        topic.schedules().await.unwrap().is_empty(),
        "not stored again by the running worker"
    );
    stop.shutdown();
    running.await.unwrap().unwrap();
    assert_eq!(rig.ran(), [T0 + 1000]);
}

/// A cron schedule through a worker, across both daylight-saving changes of 2026 in Berlin: the
/// nonexistent 02:30 runs once at 03:00, the repeated 02:30 once (its first occurrence).
#[cfg(feature = "cron")]
#[tokio::test]
async fn a_cron_schedule_runs_once_across_both_daylight_saving_changes() {
    let ms = |utc: &str| {
        chrono::DateTime::parse_from_rfc3339(utc)
            .unwrap()
            .timestamp_millis()
    };
    let clock = Arc::new(ManualClock::new(ms("2026-03-28T12:00:00Z")));
    let client = Client::builder().store(MemoryStore::with_clock(clock.clone()));
    let ran = Ran::default();
    let nightly = Periodic::cron("nightly", "30 2 * * *", "Europe/Berlin")
        .unwrap()
        .job(|tick| Report {
            at_ms: tick.timestamp_millis(),
        });
    let worker = Worker::with_state(&client, ran.clone())
        .handle(report)
        .periodic(nightly)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let topic = client.topic::<Report>();
    let next = || async {
        let list = topic.schedules().await.unwrap();
        list.first().map(|s| s.next.timestamp_millis())
    };
    let mut expect = Vec::new();
    // Each run: the clock moves a second past the expected tick; the tick runs, the next is stored.
    for (tick, following) in [
        // 02:30 does not exist on 2026-03-29: 03:00 CEST, then 02:30 CEST the next day.
        ("2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"),
        ("2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"),
        // 02:30 occurs twice on 2026-10-25: 02:30 CEST, then 02:30 CET the next day (not 02:30 CET
        // the same night).
        ("2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"),
    ] {
        clock.set(ms(tick) - 60_000);
        eventually("the schedule's next tick", || async {
            (next().await == Some(ms(tick))).then_some(())
        })
        .await;
        clock.set(ms(tick) + 1000);
        expect.push(ms(tick));
        let want = expect.clone();
        eventually("the tick to run", || {
            let (ran, want) = (ran.clone(), want.clone());
            async move { (*ran.lock().unwrap() == want).then_some(()) }
        })
        .await;
        eventually("the following tick to be stored", || async {
            (next().await == Some(ms(following))).then_some(())
        })
        .await;
    }
    stop.shutdown();
    running.await.unwrap().unwrap();
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "periodic.split", partitions = 2)]
struct Split;

async fn split(_: Split, _: JobContext) -> Result<(), JobError> {
    Ok(())
}

#[test]
fn a_partitioned_topic_or_a_name_given_twice_is_refused_at_build() {
    let client = Client::memory();
    let every = |name: &str| Periodic::every(name, Duration::from_secs(60)).unwrap();
    let err = Worker::builder(&client)
        .handle(split)
        .periodic(every("s").job(|_| Split))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("partitions"), "{err}");
    let err = Worker::builder(&client)
        .handle(split)
        .periodic(every("r").job(|t| Report {
            at_ms: t.timestamp_millis(),
        }))
        .periodic(every("r").job(|t| Report {
            at_ms: t.timestamp_millis(),
        }))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("two periodic schedules"), "{err}");
}

/// A worker started with a changed definition replaces the stored one; a worker still running the old
/// one leaves the schedule to it: each tick still runs once.
#[tokio::test]
async fn a_changed_definition_replaces_the_old_and_its_workers_step_aside() {
    let rig = Rig::new();
    let (old_stop, old_running) = rig.worker(Missed::Skip).await;
    rig.next_is(T0 + FIVE_MIN).await;
    let (new_stop, new_running) = rig.worker(Missed::Last).await;
    let topic = rig.client.topic::<Report>();
    eventually("the new definition to be stored", || async {
        let list = topic.schedules().await.unwrap();
        (list[0].missed == Some(Missed::Last)).then_some(())
    })
    .await;
    for n in 1..=3 {
        rig.clock.set(T0 + n * FIVE_MIN + 1000);
        let expect: Vec<i64> = (1..=n).map(|i| T0 + i * FIVE_MIN).collect();
        rig.ran_exactly("each tick once", &expect).await;
        rig.next_is(T0 + (n + 1) * FIVE_MIN).await;
    }
    old_stop.shutdown();
    new_stop.shutdown();
    old_running.await.unwrap().unwrap();
    new_running.await.unwrap().unwrap();
    assert_eq!(rig.ran().len(), 3);
}
