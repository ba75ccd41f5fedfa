//! Jobs that wait for jobs through the router without a browser, on a redis-server of the test's own
//! with the jobs made through the store: the overview's waiting column, the topic page's waiting tab
//! (no due time), and a waiting job's page with the jobs it waits for linked, hostile ids escaped.

#![allow(missing_docs)]

#[path = "support/mod.rs"]
mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use postpone::store::redis::RedisStore;
use postpone::Client;
use postpone_dashboard::Dashboard;
use support::workflows::{parent, waiting};
use support::RedisServer;
use tower::ServiceExt;

const RECEIPTS: &str = "dash.receipts";
const HOSTILE: &str = "<script>x</script>";

async fn send(app: &Router, uri: &str) -> (StatusCode, String) {
    // A loopback Host: without a token, the only names the dashboard answers to.
    let req = Request::get(uri)
        .header("host", "127.0.0.1")
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A dashboard on a namespace where `receipt:7` waits for a charge and a stock reservation (in
/// partition 1 of its topic), `hostile:1` for a charge whose id is markup, and `receipt:6` is
/// scheduled.
async fn world(server: &RedisServer) -> Router {
    let store = RedisStore::connect(&server.url(), "dash").await.unwrap();
    parent(&store, "dash.charges", "charge:7").await;
    parent(&store, "dash.charges", HOSTILE).await;
    parent(&store, "dash.stock#1", "stock:7").await;
    let both = [("dash.charges", "charge:7"), ("dash.stock#1", "stock:7")];
    waiting(&store, RECEIPTS, "receipt:7", &both).await;
    waiting(&store, RECEIPTS, "hostile:1", &[("dash.charges", HOSTILE)]).await;
    parent(&store, RECEIPTS, "receipt:6").await;
    let client = Client::builder()
        .namespace("dash")
        .redis(&server.url())
        .await
        .unwrap();
    Dashboard::new(client).router()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_waiting_tab_and_overview_column_list_waiting_jobs() {
    let server = RedisServer::start();
    let app = world(&server).await;

    let (status, body) = send(&app, "/").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains(">Waiting</th>"), "{body}");
    let row = &body[body
        .find("<tr data-topic=\"dash.receipts\"")
        .expect("its row")..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("state=waiting\" data-live=\"waiting\" data-topic=\"dash.receipts\">2</a>"),
        "{row}"
    );

    let (status, body) = send(&app, "/topic?name=dash.receipts&state=waiting").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("aria-current=\"page\">Waiting <span class=\"pill\">2</span>"),
        "{body}"
    );
    assert!(
        body.contains("data-live=\"waiting\" data-topic=\"dash.receipts\">2</b>"),
        "{body}"
    );
    assert!(
        body.contains("Scheduled <span class=\"pill\">1</span>"),
        "{body}"
    );
    let hostile = body
        .find("job?topic=dash.receipts&#38;id=hostile%3A1")
        .expect("hostile:1");
    let receipt = body
        .find("job?topic=dash.receipts&#38;id=receipt%3A7")
        .expect("receipt:7");
    assert!(hostile < receipt, "by id: {body}");
    assert!(!body.contains("receipt:6"), "not waiting: {body}");
    assert!(
        !body.contains("<th>Due</th>") && !body.contains("10000"),
        "no due time: {body}"
    );
    assert!(
        body.contains("each becomes due once the jobs it waits for succeed"),
        "{body}"
    );

    let (_, body) = send(&app, "/topic?name=dash.receipts&state=scheduled").await;
    assert!(
        body.contains("receipt:6") && !body.contains("receipt:7"),
        "{body}"
    );
    let (_, body) = send(&app, "/topic?name=dash.receipts&state=waiting&q=rec").await;
    assert!(
        body.contains("receipt:7") && !body.contains("hostile:1"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_waiting_job_page_links_the_jobs_it_waits_for() {
    let server = RedisServer::start();
    let app = world(&server).await;
    let (status, body) = send(&app, "/job?topic=dash.receipts&id=receipt%3A7").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("<span class=\"badge state-waiting\">waiting</span>"),
        "{body}"
    );
    assert!(
        body.contains(
            "waiting for dash.charges/charge:7, dash.stock/stock:7: it becomes due once they all \
             succeed"
        ),
        "the why line: {body}"
    );
    let parents = &body[body.find("id=\"parents\"").expect("the parents")..];
    let parents = &parents[..parents.find("</dd>").unwrap()];
    let charge = "job?topic=dash.charges&#38;id=charge%3A7";
    let stock = "job?topic=dash.stock&#38;id=stock%3A7";
    assert!(
        parents.contains(charge) && parents.contains(stock),
        "{parents}"
    );
    assert!(
        parents.contains("of topic dash.stock, partition 1"),
        "{parents}"
    );
    assert!(
        body.contains("state=waiting\">waiting</a>"),
        "the crumbs: {body}"
    );
    assert!(
        body.contains("id=\"cancel\""),
        "a waiting job can be cancelled: {body}"
    );
    // Each link opens its parent's page.
    for link in [charge, stock] {
        let (status, page) = send(&app, &format!("/{}", link.replace("&#38;", "&"))).await;
        assert_eq!(status, StatusCode::OK, "{link}: {page}");
        assert!(page.contains("state-scheduled"), "{link}: {page}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_waiting_job_page_escapes_a_hostile_parent_id() {
    let server = RedisServer::start();
    let app = world(&server).await;
    let (status, body) = send(&app, "/job?topic=dash.receipts&id=hostile%3A1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!body.contains("<script>x"), "{body}");
    let parents = &body[body.find("id=\"parents\"").expect("the parents")..];
    let parents = &parents[..parents.find("</dd>").unwrap()];
    assert!(
        parents.contains("job?topic=dash.charges&#38;id=%3Cscript%3Ex%3C%2Fscript%3E"),
        "{parents}"
    );
    assert!(
        parents.contains("&#60;script&#62;x&#60;/script&#62;</a>"),
        "{parents}"
    );
    assert!(
        body.contains("waiting for dash.charges/&#60;script&#62;x&#60;/script&#62;"),
        "the why line, escaped: {body}"
    );
}
