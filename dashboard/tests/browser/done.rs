//! The done tab: kept finished jobs, newest first, paged by cursor, each succeeded or cancelled with the
//! start of its result; the job page's result and a running job's progress, escaped.

use std::sync::Arc;
use std::time::Duration;

use postpone::{Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::jobs::{counts, XSS};
use crate::support::Harness;

/// What a render returns.
#[derive(Serialize, Deserialize)]
pub(crate) struct Receipt {
    pub(crate) note: String,
}

/// Kept for an hour when finished; a slow one reports progress, then waits for the test.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "kept.renders", output = Receipt, keep = "1h")]
pub(crate) struct Render {
    pub(crate) n: u32,
    pub(crate) slow: bool,
}

async fn render(job: Render, ctx: JobContext, gate: Arc<Notify>) -> Result<Receipt, JobError> {
    if job.slow {
        ctx.progress(50.0, format!("half way {XSS}"));
        gate.notified().await;
    }
    Ok(Receipt {
        note: format!("made {} {XSS}", job.n),
    })
}

/// Runs `id` to its end and waits for it.
async fn run(h: &Harness, n: u32, id: &str) {
    let job = Render { n, slow: false };
    h.client.enqueue(job).id(id).await.unwrap();
    let patience = Duration::from_secs(20);
    h.client.wait::<Render>(id, patience).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_tab_pages_kept_jobs_and_the_job_page_shows_result_and_progress() {
    let h = Harness::start(false).await;
    let gate = Arc::new(Notify::new());
    let worker = Worker::with_state(&h.client, gate.clone())
        .handle(render)
        .build()
        .expect("a worker");
    let shutdown = worker.shutdown_handle();
    tokio::spawn(worker.run());
    // The worker records the retention before it claims: its first job is kept.
    let topic = h.client.topic::<Render>();
    run(&h, 0, "warm:0").await;
    assert!(
        topic.job("warm:0").await.unwrap().is_some(),
        "the first job is kept"
    );
    // 55 succeeded (one at a time, so that they finish in order), then one cancelled: 57 kept.
    for n in 0..55 {
        run(&h, n, &format!("render:{n:02}")).await;
    }
    let later = Render { n: 99, slow: false };
    let in_an_hour = Duration::from_secs(3600);
    let cancelled = "render:cancelled";
    h.client
        .enqueue(later)
        .id(cancelled)
        .after(in_an_hour)
        .await
        .unwrap();
    h.client.cancel::<Render>(cancelled).await.unwrap();
    assert_eq!(counts(&h, "kept.renders").await.done, 57);

    // The tab, with its count; no search (kept jobs are not searched by prefix).
    h.goto("topic?name=kept.renders&state=done").await;
    let current = h.text("nav.tabs a[aria-current=page]").await;
    assert_eq!(current, "Done 57");
    let labels = h
        .js("return [...document.querySelectorAll('nav.tabs a')].map(a => a.textContent.trim())")
        .await;
    assert_eq!(
        labels,
        serde_json::json!([
            "Scheduled 0",
            "Waiting 0",
            "Running 0",
            "Dead 0",
            "Done 57",
            "Dead letters by error"
        ])
    );
    assert_eq!(h.count("form.search").await, 0);
    // Newest first: the cancelled one, then the last render, each saying how it ended.
    let ids =
        "return [...document.querySelectorAll('table.jobs tbody td.id a')].map(a => a.textContent)";
    let first = h.js(ids).await;
    let first: Vec<String> = serde_json::from_value(first).unwrap();
    assert_eq!(first.len(), 50);
    assert_eq!(first[0], cancelled);
    assert_eq!(first[1], "render:54");
    let states = "table.jobs tbody tr td .badge";
    assert_eq!(h.text(states).await, "cancelled");
    let second_row = "table.jobs tbody tr:nth-child(2)";
    let row = h.text(second_row).await;
    assert!(row.contains("succeeded"), "{row}");
    assert!(
        row.contains(&format!("made 54 {XSS}")),
        "the result as text: {row}"
    );
    assert!(!h.alert_open().await);
    h.screenshot("topic-done").await;
    // The next page: the rest, none twice.
    h.click("#next").await;
    h.wait_for("the next page", "location.search.includes('cursor=')")
        .await;
    let rest: Vec<String> = serde_json::from_value(h.js(ids).await).unwrap();
    assert_eq!(rest.len(), 7, "{rest:?}");
    assert_eq!(rest[..2], ["render:05", "render:04"]);
    assert!(rest[6].starts_with("warm:"), "{rest:?}");
    assert!(rest.iter().all(|id| !first.contains(id)), "{rest:?}");

    // A kept job's page: its state and its result, escaped.
    h.click("table.jobs tbody tr:first-child td.id a").await;
    h.wait_for("the job page", "document.getElementById('result')")
        .await;
    assert_eq!(h.text("h1 .badge").await, "succeeded");
    let result = h.text("#result").await;
    assert!(
        result.contains(&format!("\"note\": \"made 5 {XSS}\"")),
        "{result}"
    );
    assert!(!h.alert_open().await);
    h.screenshot("job-succeeded").await;
    h.goto("job?topic=kept.renders&id=render%3Acancelled").await;
    assert_eq!(h.text("h1 .badge").await, "cancelled");
    assert_eq!(h.count("#result").await, 0);

    // A running job's progress, escaped.
    let slow = Render { n: 7, slow: true };
    h.client.enqueue(slow).id("render:slow").await.unwrap();
    h.until("its progress to be recorded", || async {
        let job = h.client.ops().job("kept.renders", "render:slow").await;
        job.unwrap().is_some_and(|j| j.progress.is_some())
    })
    .await;
    h.goto("job?topic=kept.renders&id=render%3Aslow").await;
    assert_eq!(h.text("h1 .badge").await, "running");
    let progress = h.text("#progress").await;
    assert_eq!(progress, format!("50 · half way {XSS}"));
    assert!(!h.alert_open().await);
    h.screenshot("job-progress").await;
    gate.notify_one();
    let patience = Duration::from_secs(20);
    h.client
        .wait::<Render>("render:slow", patience)
        .await
        .unwrap();
    shutdown.shutdown();
    h.finish().await;
}
