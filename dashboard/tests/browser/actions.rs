//! Pause, run now, reschedule and cancel by their buttons.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::jobs::*;
use crate::support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_paused_by_its_button_stops_being_claimed() {
    let h = Harness::start(false).await;
    let flags = Flags::default();
    let shutdown = worker(&h, &flags);
    h.client.enqueue(Counted { n: 1 }).await.unwrap();
    let ran = &flags.ran_ok;
    h.until("the first job to run", || async {
        ran.load(Ordering::SeqCst) == 1
    })
    .await;

    h.goto("topic?name=pause.jobs").await;
    h.click("#pause").await;
    h.wait_for("the paused badge", "!document.querySelector('h1 .badge.paused').hidden && document.getElementById('resume') !== null").await;
    h.client
        .enqueue(Counted { n: 2 })
        .id("after-pause")
        .await
        .unwrap();
    let ops = h.client.ops();
    let why = ops
        .job("pause.jobs", "after-pause")
        .await
        .unwrap()
        .expect("it waits")
        .why;
    assert!(why.contains("paused"), "{why}");
    // Not claimed while paused: watched for a second (a negative can only be watched for a while).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ran.load(Ordering::SeqCst), 1, "a paused topic's job ran");
    assert_eq!(counts(&h, "pause.jobs").await.active, 0);

    h.click("#resume").await;
    h.wait_for(
        "the pause button again",
        "document.getElementById('pause') !== null",
    )
    .await;
    h.until("the job to run once resumed", || async {
        ran.load(Ordering::SeqCst) == 2
    })
    .await;
    shutdown.shutdown();
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_run_now_rescheduled_and_cancelled_by_its_buttons() {
    let h = Harness::start(false).await;
    let flags = Flags::default();
    let shutdown = worker(&h, &flags);
    for id in ["t/1", "t/2", "t/3"] {
        h.client
            .enqueue(Timer { n: 0 })
            .id(id)
            .after(Duration::from_secs(3600))
            .await
            .unwrap();
    }
    let ops = h.client.ops();

    h.goto("job?topic=live.timers&id=t%2F1").await;
    h.click("#run-now").await;
    h.wait_for("the run-now message", "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('due now')").await;
    let ran = &flags.ran_ok;
    h.until("t/1 to run", || async { ran.load(Ordering::SeqCst) == 1 })
        .await;

    h.goto("job?topic=live.timers&id=t%2F2").await;
    h.js("document.querySelector('input[name=amount]').value = '2'; document.querySelector('select[name=unit]').value = 'h'; return null").await;
    h.click("#reschedule").await;
    h.wait_for("the reschedule's message", "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('rescheduled')").await;
    let now = chrono::DateTime::from_timestamp_millis(ops.now_ms().await.unwrap()).unwrap();
    match ops.job("live.timers", "t/2").await.unwrap().unwrap().state {
        postpone::JobState::Scheduled { due_at } => {
            let left = due_at - now;
            assert!(
                left > chrono::Duration::minutes(119) && left <= chrono::Duration::minutes(120),
                "{left}"
            );
        }
        other => panic!("{other:?}"),
    }

    h.goto("job?topic=live.timers&id=t%2F3").await;
    h.click("#cancel").await;
    // It asks first.
    assert!(h.alert_open().await, "cancel did not ask");
    h.browser().accept_alert().await.unwrap();
    h.wait_for("the cancel's message", "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('cancelled')").await;
    assert!(ops.job("live.timers", "t/3").await.unwrap().is_none());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    shutdown.shutdown();
    h.finish().await;
}
