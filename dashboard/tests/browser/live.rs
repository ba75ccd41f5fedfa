//! Live figures and times in the browser's zone.

use std::time::Duration;

use crate::jobs::*;
use crate::support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overview_counts_change_live_when_jobs_are_enqueued() {
    let h = Harness::start(false).await;
    // A worker serving the timers declares their schedule (the jobs are an hour away).
    let shutdown = worker(&h, &Flags::default());
    for n in 0..2 {
        h.client
            .enqueue(Timer { n })
            .id(format!("timer:{n}"))
            .after(Duration::from_secs(3600))
            .await
            .unwrap();
    }
    h.goto("").await;
    let cell = live("scheduled", "live.timers");
    assert_eq!(h.text(&cell).await, "2");
    h.wait_for(
        "the event stream to connect",
        "document.getElementById('live').textContent.includes('live')",
    )
    .await;
    h.js("window.__sameDocument = true; return null").await;

    for n in 2..5 {
        h.client
            .enqueue(Timer { n })
            .id(format!("timer:{n}"))
            .after(Duration::from_secs(3600))
            .await
            .unwrap();
    }
    h.wait_for(
        "the scheduled count to become 5 without a reload",
        &format!(
            "document.querySelector('{}').textContent === '5'",
            cell.replace('\'', "\\'")
        ),
    )
    .await;
    // A topic that was not there appears, still without a reload.
    h.client
        .enqueue(Counted { n: 1 })
        .id("c:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    h.wait_for(
        "the new topic's row",
        &format!(
            "document.querySelector('{}') !== null",
            live("scheduled", "pause.jobs").replace('\'', "\\'")
        ),
    )
    .await;
    assert_eq!(
        h.js("return window.__sameDocument === true").await,
        true,
        "the page was reloaded"
    );
    // Times are formatted in the browser's zone, relative and absolute.
    h.goto("topic?name=live.timers").await;
    h.wait_for(
        "times formatted",
        "document.querySelector('td time').textContent.startsWith('in ')",
    )
    .await;
    assert_eq!(h.count("table.jobs tbody tr").await, 5);
    // In the browser's zone (the harness runs it at UTC+9), absolute and relative; UTC in the title.
    let shown = h.text("td time").await;
    assert!(
        shown.starts_with("in 59m") || shown.starts_with("in 1h"),
        "{shown}"
    );
    assert!(shown.contains("GMT+9"), "{shown}");
    let title = h.js("return document.querySelector('td time').title").await;
    assert!(title.as_str().unwrap().ends_with("Z)"), "{title}");
    h.screenshot("topic").await;
    h.goto("").await;
    h.wait_for("live figures", "document.body.hasAttribute('data-live-at')")
        .await;
    h.screenshot("overview").await;
    h.goto("job?topic=live.timers&id=timer%3A3").await;
    assert!(
        h.text("#attempt").await.starts_with("1 of 3"),
        "{}",
        h.text("#attempt").await
    );
    assert_eq!(h.count("ol.timeline li").await, 3);
    h.wait_for(
        "times formatted",
        "document.querySelector('ol.timeline time').textContent.startsWith('in ')",
    )
    .await;
    h.screenshot("job-scheduled").await;
    // The workers, and the doctor's checks of this Redis.
    h.goto("workers").await;
    assert_eq!(h.count("table.workers tbody tr").await, 1);
    assert!(h.count("table.health tbody tr").await >= 3);
    assert!(h.text("table.health").await.contains("maxmemory-policy"));
    h.screenshot("workers").await;
    shutdown.shutdown();
    h.finish().await;
}
