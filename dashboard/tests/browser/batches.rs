//! The batch pages in the browser: from the navigation to the list, to a batch (its counts, which
//! callbacks fired, its members' states, hostile text shown as text), to a member's job page.

use postpone::store::redis::RedisStore;
use postpone::store::{CallbackKind, OpsStore};

use crate::jobs::XSS;
use crate::support::batches::{create, end, End};
use crate::support::Harness;

const INVOICES: &str = "billing.invoices";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_batch_page_from_the_navigation_to_a_member() {
    let h = Harness::start(false).await;
    let store = RedisStore::connect(&h.redis.url(), postpone::DEFAULT_NAMESPACE)
        .await
        .unwrap();
    store.register_topic(INVOICES, 1).await.unwrap();
    let mut ids: Vec<String> = (1..=12).map(|n| format!("invoice:{n:03}")).collect();
    ids.push(format!("invoice:{XSS}"));
    let members: Vec<(&str, &str)> = ids.iter().map(|id| (INVOICES, id.as_str())).collect();
    let callbacks = [
        (CallbackKind::Success, "billing.runs", "run-done"),
        (CallbackKind::Complete, "billing.runs", "run-report"),
        (CallbackKind::Death, "billing.alerts", "run-alert"),
    ];
    let description = format!("November billing run {XSS}");
    create(
        &store,
        "billing:2026-11",
        &description,
        &members,
        &callbacks,
        true,
    )
    .await;
    let ends = [
        ("invoice:001", End::Succeed),
        ("invoice:002", End::Succeed),
        ("invoice:003", End::Succeed),
        ("invoice:004", End::Die("card declined")),
        ("invoice:005", End::Cancel),
    ];
    end(&store, INVOICES, &ends).await;
    create(
        &store,
        "import:7",
        "Customer import",
        &[("imports", "row:1")],
        &[],
        false,
    )
    .await;

    h.goto("").await;
    h.click("header nav a[href=batches]").await;
    h.wait_for("the batches", "document.querySelector('table.batches')")
        .await;
    assert_eq!(h.count("table.batches tbody tr").await, 2);
    assert_eq!(h.text("table.batches tbody tr td.id").await, "import:7");
    let row = h.text("table.batches tbody tr:nth-child(2)").await;
    assert!(
        row.contains(&format!("November billing run {XSS}")),
        "{row}"
    );
    assert!(!h.alert_open().await);
    h.screenshot("batches").await;

    h.click("table.batches tbody tr:nth-child(2) td.id a").await;
    h.wait_for("the batch page", "document.getElementById('counts')")
        .await;
    assert_eq!(h.text("#batch-state").await, "closed");
    assert_eq!(
        h.text("#description").await,
        format!("November billing run {XSS}")
    );
    let counts = h.text("#counts").await;
    assert_eq!(
        counts,
        "total 13 · succeeded 3 · dead 1 · cancelled 1 · pending 8"
    );
    let callbacks = h.text("#callbacks").await;
    assert_eq!(
        callbacks,
        "success not fired · complete not fired · death fired"
    );
    let states = h
        .js("return [...document.querySelectorAll('table.members tbody tr')].map(r => [r.querySelector('td.id').textContent, r.querySelector('.badge').textContent])")
        .await;
    let states: Vec<(String, String)> = serde_json::from_value(states).unwrap();
    assert_eq!(states.len(), 13);
    assert_eq!(states[0], ("invoice:001".into(), "succeeded".into()));
    assert_eq!(states[3], ("invoice:004".into(), "dead".into()));
    assert_eq!(states[4], ("invoice:005".into(), "cancelled".into()));
    assert_eq!(states[12], (format!("invoice:{XSS}"), "pending".into()));
    h.wait_for(
        "times formatted",
        "document.querySelector('dl.facts time').textContent.includes('ago')",
    )
    .await;
    assert!(!h.alert_open().await);
    h.screenshot("batch").await;

    // A member's link opens its job.
    h.click("table.members tbody tr:nth-child(13) td.id a")
        .await;
    h.wait_for("the member's job page", "document.getElementById('why')")
        .await;
    assert_eq!(h.text("h1.id").await, format!("invoice:{XSS} scheduled"));
    assert!(!h.alert_open().await);
    h.finish().await;
}
