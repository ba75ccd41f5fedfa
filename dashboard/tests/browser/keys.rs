//! The busiest keys tab (fairness by key): shown only for a topic with keyed jobs, its keys by jobs
//! queued with their running jobs (under a max running per key), the limit per key they are under and
//! holds, a hostile key as text.

use std::sync::Arc;
use std::time::Duration;

use postpone::{Job, JobContext, JobError, KeyLimits, RateLimit, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::jobs::Timer;
use crate::support::Harness;

/// A shop's sync, keyed per enqueue by its shop.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "fair.sync")]
pub(crate) struct Sync {
    pub(crate) shop: String,
}

const IMG: &str = "<img src=x onerror=alert(1)>";

/// globex's provider says "not for an hour" (which holds globex alone); the others' jobs run until the
/// test lets them go.
async fn sync(job: Sync, _ctx: JobContext, gate: Arc<Semaphore>) -> Result<(), JobError> {
    if job.shop == "globex" {
        return Err(JobError::rate_limited(Duration::from_secs(3600)));
    }
    let _ = gate.acquire().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_busiest_keys_tab_shows_keys_running_and_held_fair() {
    let h = Harness::start(false).await;
    // A topic without keyed jobs: no keys tab.
    h.client
        .enqueue(Timer { n: 1 })
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    h.goto("topic?name=live.timers").await;
    let labels =
        "return [...document.querySelectorAll('nav.tabs a')].map(a => a.textContent.trim())";
    assert_eq!(
        h.js(labels).await,
        json!([
            "Scheduled 1",
            "Waiting 0",
            "Running 0",
            "Dead 0",
            "Done 0",
            "Dead letters by error"
        ])
    );

    let mut hostile = Vec::new();
    for (shop, n) in [("acme", 5), (IMG, 3), ("globex", 2)] {
        for _ in 0..n {
            let job = Sync { shop: shop.into() };
            let enqueued = h.client.enqueue(job).key(shop).await.unwrap();
            if shop == IMG {
                hostile.push(enqueued.id);
            }
        }
    }
    // A job without a key, due in an hour: the jobs without one take their turn as one more key.
    let later = Duration::from_secs(3600);
    let plain = Sync {
        shop: String::new(),
    };
    h.client.enqueue(plain).after(later).await.unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::with_state(&h.client, gate.clone())
        .concurrency(10)
        .handle(sync)
        .key_limits::<Sync>(KeyLimits::new().max_running(1))
        .build()
        .expect("a worker");
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    // acme and the hostile key run one job each (their max), globex is held.
    let ops = h.client.ops();
    h.until("two keys running and globex held", || async {
        let page = ops.busiest_keys("fair.sync", 10).await.unwrap();
        let held = page.keys.iter().any(|k| k.held_until_ms.is_some());
        let running: u64 = page.keys.iter().map(|k| k.running).sum();
        held && running == 2
    })
    .await;
    let total = ops.busiest_keys("fair.sync", 0).await.unwrap().total;

    // The tab, after the others, with the keys queued; it opens the keys.
    h.goto("topic?name=fair.sync").await;
    let tab = "nav.tabs a:nth-last-child(2)";
    assert_eq!(h.text(tab).await, format!("Busiest keys {total}"));
    h.click(tab).await;
    h.wait_for("the keys tab", "location.search.includes('state=keys')")
        .await;
    assert_eq!(
        h.text("nav.tabs a[aria-current=page]").await,
        format!("Busiest keys {total}")
    );
    assert_eq!(h.text("#keys h2").await, "Busiest keys");
    // No job table, no search on this tab.
    assert_eq!(h.count("table.jobs").await, 0);
    assert_eq!(h.count("form.search").await, 0);
    h.wait_for(
        "the hold's time formatted",
        "document.querySelector('table.keys td time').textContent.startsWith('in ')",
    )
    .await;
    let rows = h
        .js("return [...document.querySelectorAll('table.keys tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()))")
        .await;
    let rows: Vec<Vec<String>> = serde_json::from_value(rows).unwrap();
    println!("{rows:?}");
    // Most queued first, then by key ("<" before "g"); the hostile key as its text.
    let keys: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(keys, ["acme", IMG, "globex", "(no key)"]);
    // The worker's limit per key beside each key; the jobs without a key are under none.
    assert_eq!(rows[0][1..], ["4", "1", "max 1 running", "-"]);
    assert_eq!(rows[1][1..4], ["2", "1", "max 1 running"]);
    assert_eq!(rows[2][1..4], ["2", "0", "max 1 running"]);
    assert!(
        rows[2][4].starts_with("in 59m") || rows[2][4].starts_with("in 1h"),
        "globex held for an hour: {rows:?}"
    );
    assert!(
        rows[2][4].contains("GMT+9"),
        "in the browser's zone: {rows:?}"
    );
    assert_eq!(rows[3][1..], ["1", "0", "none", "-"]);
    // Text, not markup: no image made, no alert.
    assert_eq!(h.count("table.keys img").await, 0);
    assert_eq!(
        h.js("return document.querySelector('table.keys tbody tr:nth-child(2) td').innerHTML")
            .await,
        "&lt;img src=x onerror=alert(1)&gt;"
    );
    assert!(!h.alert_open().await);
    let footer = h.text("#keys-total").await;
    assert!(
        footer.starts_with(&format!("{total} key")) && !footer.contains("max running"),
        "{footer}"
    );
    // A key with limits of its own (an operator's): they show in its row, marked, in place of the
    // worker's.
    let own = KeyLimits::new().rate(RateLimit::new(600, Duration::from_secs(60)));
    ops.set_key_limits("fair.sync", "globex", own)
        .await
        .unwrap();
    h.goto("topic?name=fair.sync&state=keys").await;
    let limits = h
        .js("return [...document.querySelectorAll('table.keys td.limit')].map(c => c.textContent.trim())")
        .await;
    assert_eq!(
        limits,
        json!(["max 1 running", "max 1 running", "600/60s (own)", "none"])
    );
    h.screenshot("topic-keys").await;

    // A job's page shows its key, as text, with a link to the busiest keys.
    h.goto(&format!("job?topic=fair.sync&id={}", hostile[2]))
        .await;
    assert_eq!(h.text("#key .mono").await, IMG);
    // The first of its key's jobs runs: this one waits for its key, not for a slot.
    let why = h.text("#why").await;
    assert!(
        why.contains(&format!(
            "waiting for its key: key {IMG:?} runs its most at once"
        )),
        "{why}"
    );
    assert_eq!(h.count("dl.facts img").await, 0);
    assert!(!h.alert_open().await);
    h.screenshot("job-key").await;
    h.click("#key a").await;
    h.wait_for("the keys tab", "location.search.includes('state=keys')")
        .await;

    // The topic's listing has a Key column: each job's key as text, `-` for the job without one.
    h.goto("topic?name=fair.sync&state=scheduled").await;
    assert_eq!(h.text("table.jobs thead th:nth-child(2)").await, "KEY");
    let keys = h
        .js("return [...document.querySelectorAll('table.jobs td.key')].map(c => c.textContent)")
        .await;
    let keys: Vec<String> = serde_json::from_value(keys).unwrap();
    for key in ["acme", IMG, "globex", "-"] {
        assert!(keys.iter().any(|k| k == key), "{key:?} in {keys:?}");
    }
    assert_eq!(h.count("table.jobs img").await, 0);
    assert!(!h.alert_open().await);
    h.screenshot("topic-keyed-jobs").await;

    gate.add_permits(10);
    stop.shutdown();
    running.await.unwrap().unwrap();
    h.finish().await;
}
