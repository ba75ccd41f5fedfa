//! Dead letters: opened, requeued by their buttons (one, a group, all), and run.

use std::sync::atomic::Ordering;

use postpone::ops::{JobQuery, PageState};

use crate::jobs::*;
use crate::support::Harness;

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

const ALPHA: &str = "alpha: smtp timeout";
const BETA: &str = "beta: bad address";

/// Job `x` dies with ALPHA then with BETA (two deaths of one id, in two groups), `y` with ALPHA; the
/// worker is stopped before the test acts, so that nothing requeued runs.
async fn two_deaths_of_x_in_two_groups(h: &Harness) {
    deaths(h, &[("x", ALPHA), ("x", BETA), ("y", ALPHA)]).await;
}

/// Each (id, error) dies in turn, on a worker stopped at the end.
async fn deaths(h: &Harness, deaths: &[(&str, &str)]) {
    let worker = postpone::Worker::with_state(&h.client, Flags::default())
        .handle(bounce)
        .build()
        .expect("a worker");
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    for (n, &(id, error)) in deaths.iter().enumerate() {
        h.client
            .enqueue(Bounce {
                error: error.into(),
            })
            .id(id)
            .await
            .unwrap();
        h.until("it to die", || async {
            counts(h, "mail.bounces").await.dead == n as u64 + 1
        })
        .await;
    }
    stop.shutdown();
    running.await.unwrap().unwrap();
}

/// The topic's dead letters as (id, last words of the reason), sorted.
async fn dead_letters(h: &Harness) -> Vec<(String, String)> {
    let query = JobQuery::new(PageState::Dead).limit(100);
    let page = h.client.ops().jobs("mail.bounces", &query).await.unwrap();
    let mut all: Vec<(String, String)> = page
        .jobs
        .into_iter()
        .map(|j| {
            let reason = j.reason.unwrap_or_default();
            let error = reason
                .rsplit("last error: ")
                .next()
                .unwrap_or("")
                .to_owned();
            (j.id, error)
        })
        .collect();
    all.sort();
    all
}

/// Opens the dead letters by error and checks that the first group is ALPHA's (x and y).
async fn open_groups(h: &Harness) {
    h.goto("dead?topic=mail.bounces").await;
    assert_eq!(h.count("section.group").await, 2);
    let first = h.text("section.group .fingerprint").await;
    assert!(first.contains("alpha"), "{first}");
    assert_eq!(h.text("section.group button.purge-group").await, "Purge 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_group_purge_takes_only_the_deaths_in_the_group() {
    let h = Harness::start(false).await;
    two_deaths_of_x_in_two_groups(&h).await;
    open_groups(&h).await;
    h.click("section.group button.purge-group").await;
    assert!(h.alert_open().await, "purge did not ask");
    h.browser().accept_alert().await.unwrap();
    h.wait_for(
        "the group's purge",
        "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('purged')",
    )
    .await;
    let flash = h.text(".flash").await;
    assert!(flash.contains("purged 2 dead letter(s)"), "{flash}");
    // x's other death, in the other group, is still there.
    assert_eq!(dead_letters(&h).await, [("x".to_owned(), BETA.to_owned())]);
    assert_eq!(h.count("section.group").await, 1);
    assert!(h.text("section.group .fingerprint").await.contains("beta"));
    h.screenshot("dead-after-group-purge").await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_group_requeue_takes_only_the_deaths_in_the_group() {
    let h = Harness::start(false).await;
    two_deaths_of_x_in_two_groups(&h).await;
    open_groups(&h).await;
    h.click("section.group button.requeue-group").await;
    h.wait_for(
        "the group's requeue",
        "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('requeued')",
    )
    .await;
    let flash = h.text(".flash").await;
    assert!(flash.contains("requeued 2 dead letter(s)"), "{flash}");
    // The alpha deaths are live jobs again, with their own payloads; x's beta death stays dead.
    assert_eq!(dead_letters(&h).await, [("x".to_owned(), BETA.to_owned())]);
    for id in ["x", "y"] {
        let job = h
            .client
            .ops()
            .job("mail.bounces", id)
            .await
            .unwrap()
            .expect("a live job");
        assert!(
            matches!(job.state, postpone::JobState::Scheduled { .. }),
            "{id}: {:?}",
            job.state
        );
        assert_eq!(job.payload["error"], ALPHA, "{id}");
    }
    assert_eq!(h.count("section.group").await, 1);
    h.screenshot("dead-after-group-requeue").await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_group_requeue_takes_one_death_of_an_id_and_counts_the_other_skipped() {
    let h = Harness::start(false).await;
    deaths(&h, &[("x", ALPHA), ("x", BETA), ("x", ALPHA)]).await;
    h.goto("dead?topic=mail.bounces").await;
    assert_eq!(
        h.text("section.group button.requeue-group").await,
        "Requeue 2"
    );
    h.click("section.group button.requeue-group").await;
    h.wait_for(
        "the group's requeue",
        "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('requeued')",
    )
    .await;
    let flash = h.text(".flash").await;
    assert!(
        flash.contains("requeued 1 dead letter(s)") && flash.contains("1 skipped"),
        "{flash}"
    );
    // x is live again (its newest alpha death); its older alpha death and its beta death stay.
    assert_eq!(
        dead_letters(&h).await,
        [
            ("x".to_owned(), ALPHA.to_owned()),
            ("x".to_owned(), BETA.to_owned())
        ]
    );
    let x = h
        .client
        .ops()
        .job("mail.bounces", "x")
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(x.state, postpone::JobState::Scheduled { .. }),
        "{:?}",
        x.state
    );
    h.finish().await;
}
