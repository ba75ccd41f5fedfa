//! The batch pages through the router without a browser, on a redis-server of the test's own with
//! batches made through the store: the list, a batch's counts, callbacks and members (each linked to
//! its job), paging, hostile text escaped, and the status codes of unknown and impossible ids; and a
//! member's job page linking to its batch.

#![allow(missing_docs)]

#[path = "support/mod.rs"]
mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use postpone::store::redis::RedisStore;
use postpone::store::{CallbackKind, OpsStore};
use postpone::{Client, EnqueueItem, Job};
use postpone_dashboard::Dashboard;
use serde::{Deserialize, Serialize};
use support::batches::{create, end, End};
use support::RedisServer;
use tower::ServiceExt;

const INVOICES: &str = "dash.invoices";
const HOSTILE: &str = "<script>alert('batch')</script>";

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

/// Asserts that no hostile markup made it into a page as markup.
#[track_caller]
fn escaped(body: &str) {
    assert!(!body.contains("<script>alert"), "{body}");
    assert!(!body.contains("<script>x"), "{body}");
}

/// A dashboard on a namespace with `billing:2026-11` (hostile description; 60 members, the first
/// ended: succeeded, dead, cancelled; the member `<script>x</script>` among them) and `import:7`.
async fn world(server: &RedisServer) -> Router {
    let store = RedisStore::connect(&server.url(), "dash").await.unwrap();
    store.register_topic(INVOICES, 1).await.unwrap();
    let mut ids: Vec<String> = (1..=59).map(|n| format!("inv:{n:02}")).collect();
    ids.insert(3, "<script>x</script>".to_owned());
    let members: Vec<(&str, &str)> = ids.iter().map(|id| (INVOICES, id.as_str())).collect();
    let callbacks = [
        (CallbackKind::Complete, "dash.billing", "billing-report"),
        (CallbackKind::Death, "dash.billing", "billing-alert"),
    ];
    let description = format!("November billing run {HOSTILE}");
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
        ("inv:01", End::Succeed),
        ("inv:02", End::Die("card declined")),
        ("inv:03", End::Cancel),
    ];
    end(&store, INVOICES, &ends).await;
    create(
        &store,
        "import:7",
        "",
        &[("dash.import", "row:1")],
        &[],
        false,
    )
    .await;
    let client = Client::builder()
        .namespace("dash")
        .redis(&server.url())
        .await
        .unwrap();
    Dashboard::new(client).router()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_batches_page_lists_batches_newest_first() {
    let server = RedisServer::start();
    let app = world(&server).await;
    let (status, body) = send(&app, "/batches").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    escaped(&body);
    assert!(
        body.contains("<a href=\"batches\" aria-current=\"page\">Batches</a>"),
        "the navigation: {body}"
    );
    let import = body.find("batch?id=import%3A7").expect("import:7 listed");
    let billing = body
        .find("href=\"batch?id=billing%3A2026-11\"")
        .expect("billing listed");
    assert!(import < billing, "newest first: {body}");
    assert!(
        body.contains("November billing run &#60;script&#62;"),
        "{body}"
    );
    let row = &body[billing..];
    let row = &row[..row.find("</tr>").unwrap()];
    let numbers: Vec<&str> = row
        .split("<td class=\"num\">")
        .skip(1)
        .map(|c| &c[..c.find('<').unwrap()])
        .collect();
    assert_eq!(numbers, ["60", "1", "1", "1", "57"], "{row}");
    assert!(row.contains("batch-closed\">closed"), "{row}");
    assert!(
        row.contains(">death</span>"),
        "the death callback fired: {row}"
    );
    assert!(!row.contains(">complete</span>"), "{row}");
    // The other pages link to it.
    let (_, overview) = send(&app, "/").await;
    assert!(overview.contains("href=\"batches\""), "{overview}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_batch_page_shows_counts_callbacks_and_members_paged() {
    let server = RedisServer::start();
    let app = world(&server).await;
    let (status, body) = send(&app, "/batch?id=billing%3A2026-11").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    escaped(&body);
    assert!(
        body.contains("&#60;script&#62;x&#60;/script&#62;"),
        "the id as text: {body}"
    );
    assert!(
        body.contains("November billing run &#60;script&#62;alert("),
        "the description as text: {body}"
    );
    for figure in [
        "total <b>60</b>",
        "succeeded <b>1</b>",
        "dead <b>1</b>",
        "cancelled <b>1</b>",
        "pending <b>57</b>",
    ] {
        assert!(body.contains(figure), "{figure}: {body}");
    }
    assert!(
        body.contains("complete <span class=\"badge\">not fired</span>"),
        "{body}"
    );
    assert!(
        body.contains("death <span class=\"badge state-succeeded\">fired</span>"),
        "{body}"
    );
    // Each member links to its job page, with its state.
    for (id, state) in [
        ("inv%3A01", "succeeded"),
        ("inv%3A02", "dead"),
        ("inv%3A03", "cancelled"),
        ("%3Cscript%3Ex%3C%2Fscript%3E", "pending"),
    ] {
        let link = format!("<a href=\"job?topic=dash.invoices&#38;id={id}\">");
        let at = body.find(&link).unwrap_or_else(|| panic!("{link}: {body}"));
        let row = &body[at..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(row.contains(&format!("state-{state}\">{state}")), "{row}");
    }
    // 50 a page, then the next.
    assert_eq!(body.matches("href=\"job?topic=").count(), 50, "{body}");
    assert!(
        body.contains("href=\"batch?id=billing%3A2026-11&#38;offset=50\""),
        "{body}"
    );
    let (status, rest) = send(&app, "/batch?id=billing%3A2026-11&offset=50").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(rest.matches("href=\"job?topic=").count(), 10, "{rest}");
    assert!(rest.contains("id=inv%3A59\""), "{rest}");
    assert!(!rest.contains("id=\"next\""), "the last page: {rest}");
    assert!(rest.contains("First page"), "{rest}");
    // A member's link opens its job.
    let (status, job) = send(&app, "/job?topic=dash.invoices&id=inv%3A10").await;
    assert_eq!(status, StatusCode::OK, "{job}");

    let (status, open) = send(&app, "/batch?id=import%3A7").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        open.contains("batch-open\" id=\"batch-state\">open"),
        "{open}"
    );
    assert!(open.contains("<dd id=\"callbacks\">none</dd>"), "{open}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_batch_page_of_an_unknown_or_impossible_id_says_so() {
    let server = RedisServer::start();
    let app = world(&server).await;
    let (status, body) = send(&app, "/batch?id=billing%3A2026-12").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body.contains("no batch &#34;billing:2026-12&#34;"),
        "{body}"
    );
    let (status, body) = send(&app, "/batch?id=%3Cscript%3Ex%3C%2Fscript%3E").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    escaped(&body);
    assert!(body.contains("invalid batch id"), "{body}");
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "dash.orders")]
struct CloseOrder {
    order_id: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_job_page_links_a_member_to_its_batch() {
    let server = RedisServer::start();
    // Through the client, which marks each member with its batch (`postpone.batch`).
    let client = Client::builder()
        .namespace("dash")
        .redis(&server.url())
        .await
        .unwrap();
    client
        .batch()
        .id("orders:7")
        .add(EnqueueItem::new(CloseOrder { order_id: 1 }).id("order:1"))
        .enqueue()
        .await
        .unwrap();
    client
        .enqueue(CloseOrder { order_id: 2 })
        .id("order:2")
        .await
        .unwrap();
    let app = Dashboard::new(client).router();

    let (status, body) = send(&app, "/job?topic=dash.orders&id=order%3A1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains(
            "<dt>Batch</dt><dd id=\"batch\"><a class=\"mono\" href=\"batch?id=orders%3A7\">orders:7</a></dd>"
        ),
        "{body}"
    );
    let (status, body) = send(&app, "/batch?id=orders%3A7").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the link leads to its batch: {body}"
    );
    let (_, other) = send(&app, "/job?topic=dash.orders&id=order%3A2").await;
    assert!(!other.contains("id=\"batch\""), "no batch: {other}");
}
