//! The dashboard in headless Chromium (Debian's chromium and chromium-driver), against a redis-server
//! each test starts: live counts, a dead letter requeued by its button, read-only mode, escaping, CSRF,
//! and pause by its button. Screenshots go to `target/tmp/dashboard-screenshots/`.

#![allow(missing_docs)]

mod support;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postpone::{Job, JobContext, JobError, ShutdownHandle, Worker};
use serde::{Deserialize, Serialize};
use support::Harness;

/// A timer far in the future: counts to watch.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "live.timers", retry = ["0", "0", "1m", "10m"])]
struct Timer {
    n: u32,
}

/// A webhook whose partner times out while `fail` is set; one attempt, then the dead letters.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "flaky.hooks", retry = ["0", "0"])]
struct Hook {
    seconds: u32,
}

/// A payload made to be dangerous; its handler fails with a dangerous error.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "xss.payloads", retry = ["0", "0"])]
struct Evil {
    html: String,
}

/// A job whose runs are counted.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "pause.jobs")]
struct Counted {
    n: u32,
}

const XSS: &str = "<script>alert(1)</script>";

#[derive(Clone, Default)]
struct Flags {
    fail: Arc<AtomicBool>,
    ran_ok: Arc<AtomicU32>,
}

async fn hook(job: Hook, _ctx: JobContext, flags: Flags) -> Result<(), JobError> {
    if flags.fail.load(Ordering::SeqCst) {
        return Err(JobError::msg(format!("timeout after {}s", job.seconds)));
    }
    flags.ran_ok.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn evil(job: Evil, _ctx: JobContext, _flags: Flags) -> Result<(), JobError> {
    Err(JobError::msg(format!("partner said {}", job.html)))
}

async fn timer(_job: Timer, _ctx: JobContext, flags: Flags) -> Result<(), JobError> {
    flags.ran_ok.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn counted(_job: Counted, _ctx: JobContext, flags: Flags) -> Result<(), JobError> {
    flags.ran_ok.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

fn worker(h: &Harness, flags: &Flags) -> ShutdownHandle {
    let worker = Worker::with_state(&h.client, flags.clone())
        .handle(hook)
        .handle(evil)
        .handle(counted)
        .handle(timer)
        .build()
        .expect("a worker");
    let shutdown = worker.shutdown_handle();
    tokio::spawn(worker.run());
    shutdown
}

async fn counts(h: &Harness, topic: &str) -> postpone::TopicCounts {
    h.client
        .ops()
        .topics()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == topic)
        .map(|t| t.counts)
        .unwrap_or_default()
}

/// A CSS selector for a live figure of a topic.
fn live(field: &str, topic: &str) -> String {
    format!("[data-live=\"{field}\"][data-topic=\"{topic}\"]")
}

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
    shutdown.shutdown();
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_is_requeued_by_its_button_and_runs() {
    let h = Harness::start(false).await;
    let flags = Flags::default();
    flags.fail.store(true, Ordering::SeqCst);
    let shutdown = worker(&h, &flags);
    // Ids with what URLs must escape; two errors that differ only in a number.
    let ids = ["hook/1 ?#ü&x=1", "hook/2"];
    for (id, seconds) in ids.iter().zip([31, 30]) {
        h.client.enqueue(Hook { seconds }).id(*id).await.unwrap();
    }
    h.until("both to die", || async {
        counts(&h, "flaky.hooks").await.dead == 2
    })
    .await;
    flags.fail.store(false, Ordering::SeqCst);

    h.goto("dead?topic=flaky.hooks").await;
    assert_eq!(
        h.count("section.group").await,
        1,
        "timeout after 31s and 30s are one group"
    );
    assert_eq!(
        h.text("section.group .fingerprint").await,
        "exhausted <n> attempts; last error: timeout after <n>s"
    );
    let link = h
        .js(&format!(
            "return [...document.querySelectorAll('section.group td.id a')].find(a => a.textContent === '{}').getAttribute('href')",
            ids[0]
        ))
        .await;
    let link = link.as_str().unwrap();
    assert!(
        link.starts_with("job?topic=flaky.hooks&id=hook%2F1%20%3F%23%C3%BC%26x%3D1&death="),
        "{link}"
    );
    h.js(&format!(
        "[...document.querySelectorAll('section.group td.id a')].find(a => a.textContent === '{}').click(); return null",
        ids[0]
    ))
    .await;
    h.wait_for(
        "the dead letter's page",
        "document.getElementById('requeue') !== null",
    )
    .await;
    assert_eq!(h.text("h1.id").await, format!("{} dead", ids[0]));
    assert_eq!(
        h.text("#reason").await,
        "exhausted 1 attempts; last error: timeout after 31s"
    );
    h.wait_for(
        "times formatted",
        "document.querySelector('ol.timeline time').textContent.includes('ago')",
    )
    .await;
    h.screenshot("job-dead").await;

    h.click("#requeue").await;
    h.wait_for("the requeue's message", "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('requeued')")
        .await;
    let ran = &flags.ran_ok;
    h.until("the requeued job to run", || async {
        ran.load(Ordering::SeqCst) == 1
    })
    .await;

    // The other one, by its group's button.
    h.goto("dead?topic=flaky.hooks").await;
    assert_eq!(h.text("button.requeue-group").await, "Requeue 1");
    h.click("button.requeue-group").await;
    h.wait_for(
        "the group's requeue",
        "document.querySelector('.flash').textContent.includes('requeued 1 dead letter')",
    )
    .await;
    h.until("the group's job to run", || async {
        ran.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(counts(&h, "flaky.hooks").await.dead, 0);

    // Both again, then all of the topic's dead letters at once from its dead tab.
    flags.fail.store(true, Ordering::SeqCst);
    for (id, seconds) in ids.iter().zip([31, 30]) {
        h.client.enqueue(Hook { seconds }).id(*id).await.unwrap();
    }
    h.until("both to die again", || async {
        counts(&h, "flaky.hooks").await.dead == 2
    })
    .await;
    flags.fail.store(false, Ordering::SeqCst);
    h.goto("topic?name=flaky.hooks&state=dead").await;
    assert_eq!(h.count("table.jobs tbody tr").await, 2);
    h.click("#requeue-all").await;
    assert!(h.alert_open().await, "requeue all did not ask");
    h.browser().accept_alert().await.unwrap();
    h.wait_for(
        "the requeue's message",
        "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('requeued 2')",
    )
    .await;
    h.until("both to run", || async { ran.load(Ordering::SeqCst) == 4 })
        .await;
    shutdown.shutdown();
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_shows_no_buttons_and_refuses_a_forged_post() {
    let h = Harness::start(true).await;
    h.client
        .enqueue(Timer { n: 1 })
        .id("timer:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    for page in [
        "",
        "topic?name=live.timers",
        "job?topic=live.timers&id=timer%3A1",
        "topic?name=live.timers&state=dead",
        "dead?topic=live.timers",
    ] {
        h.goto(page).await;
        assert_eq!(h.count("form[method=post]").await, 0, "{page}");
        let actions = "#pause, #resume, #run-now, #reschedule, #cancel, #requeue, #purge, #requeue-all, #purge-all, .requeue-group, .purge-group";
        assert_eq!(h.count(actions).await, 0, "{page}");
        assert_eq!(h.count("input[name=csrf]").await, 0, "{page}");
    }
    // From the page itself (same origin), and by hand.
    let status = h
        .js("return fetch('action/pause', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'topic=live.timers'}).then(r => r.status)")
        .await;
    assert_eq!(status, 403);
    let origin = h.origin.clone();
    for action in ["pause", "cancel", "no-such-action"] {
        let status = h
            .raw_post(
                &format!("action/{action}"),
                &[("Origin", &origin)],
                "topic=live.timers&id=timer%3A1",
            )
            .await;
        assert_eq!(status, 403, "{action}");
    }
    let c = counts(&h, "live.timers").await;
    assert!(!c.paused);
    assert_eq!(c.scheduled, 1);
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_in_a_payload_id_or_error_renders_as_text() {
    let h = Harness::start(false).await;
    let shutdown = worker(&h, &Flags::default());
    let id = format!("evil/{XSS}");
    h.client
        .enqueue(Evil { html: XSS.into() })
        .id(&id)
        .await
        .unwrap();
    h.until("it to die", || async {
        counts(&h, "xss.payloads").await.dead == 1
    })
    .await;
    h.client
        .enqueue(Evil { html: XSS.into() })
        .id(format!("later/{XSS}"))
        .after(Duration::from_secs(3600))
        .await
        .unwrap();

    let job = format!(
        "job?topic=xss.payloads&id={}",
        id.replace('/', "%2F")
            .replace('<', "%3C")
            .replace('>', "%3E")
            .replace('(', "%28")
            .replace(')', "%29")
    );
    for page in [
        job.as_str(),
        "topic?name=xss.payloads&state=dead",
        "topic?name=xss.payloads",
        "dead?topic=xss.payloads",
    ] {
        h.goto(page).await;
        assert!(!h.alert_open().await, "{page}: an alert opened");
        // The only script is the dashboard's own.
        assert_eq!(h.count("script").await, 1, "{page}");
        let text = h
            .js("return document.querySelector('main').innerText")
            .await;
        assert!(
            text.as_str().unwrap().contains(XSS),
            "{page}: the text is not shown:\n{text}"
        );
    }
    h.goto(&job).await;
    assert_eq!(h.text("h1.id").await, format!("{id} dead"));
    assert!(h
        .text("#payload")
        .await
        .contains(&format!("\"html\": \"{XSS}\"")));
    assert!(h
        .text("#reason")
        .await
        .contains(&format!("partner said {XSS}")));
    assert!(!h.alert_open().await);
    shutdown.shutdown();
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_without_the_csrf_token_or_from_another_origin_is_refused() {
    let h = Harness::start(false).await;
    h.client
        .enqueue(Timer { n: 1 })
        .id("timer:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    h.goto("topic?name=live.timers").await;
    let post = |body: &str| {
        format!(
            "return fetch('action/pause', {{method: 'POST', redirect: 'manual', headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: '{body}'}}).then(r => r.status)"
        )
    };
    assert_eq!(h.js(&post("topic=live.timers")).await, 403, "no token");
    assert_eq!(
        h.js(&post("topic=live.timers&csrf=0123")).await,
        403,
        "a wrong token"
    );
    let token = h
        .js("return document.querySelector('input[name=csrf]').value")
        .await;
    let token = token.as_str().unwrap().to_owned();
    let body = format!("topic=live.timers&csrf={token}");
    let evil = h
        .raw_post("action/pause", &[("Origin", "http://evil.example")], &body)
        .await;
    assert_eq!(evil, 403, "the right token from another origin");
    let referer = h
        .raw_post(
            "action/pause",
            &[("Referer", "http://evil.example/x")],
            &body,
        )
        .await;
    assert_eq!(referer, 403, "the right token, referred by another origin");
    assert!(
        !counts(&h, "live.timers").await.paused,
        "a refused POST changed something"
    );
    // The page's own form works.
    h.click("#pause").await;
    h.wait_for("the pause's message", "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('paused')").await;
    assert!(counts(&h, "live.timers").await.paused);
    h.finish().await;
}

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
