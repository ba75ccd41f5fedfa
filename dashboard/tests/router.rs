//! The router without a browser, on the in-memory store: the token, read-only refusals whatever the
//! body, status codes of bad requests, the base URL under a nest, and `serve`'s refusal off loopback.

#![allow(missing_docs)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use postpone::{Client, Job};
use postpone_dashboard::Dashboard;
use serde::{Deserialize, Serialize};
use tower::ServiceExt;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

async fn client() -> Client {
    let client = Client::memory();
    client
        .enqueue(CloseOrder { order_id: 1 })
        .id("order:1")
        .after(Duration::from_secs(60))
        .await
        .unwrap();
    client
}

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, String) {
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A request to the router as a browser on loopback sends it: with its `Host` (without a token, the
/// dashboard answers to loopback names only).
fn request(method: &str, uri: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "127.0.0.1:3000")
}

fn get(uri: &str) -> Request<Body> {
    request("GET", uri).body(Body::empty()).unwrap()
}

#[tokio::test]
async fn a_token_is_asked_for_and_accepted_as_basic_or_bearer() {
    let app = Dashboard::new(client().await).with_token("s3cret").router();
    let (status, _) = send(&app, get("/")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // "ops:s3cret"
    let basic = request("GET", "/")
        .header(header::AUTHORIZATION, "Basic b3BzOnMzY3JldA==")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, basic).await.0, StatusCode::OK);
    let bearer = request("GET", "/")
        .header(header::AUTHORIZATION, "Bearer s3cret")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, bearer).await.0, StatusCode::OK);
    let wrong = request("GET", "/")
        .header(header::AUTHORIZATION, "Bearer s3cre")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, wrong).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn read_only_refuses_any_post_whatever_its_body() {
    let client = client().await;
    let app = Dashboard::new(client.clone()).read_only(true).router();
    for (path, body) in [
        ("/action/pause", "topic=orders.close"),
        ("/action/pause", ""),
        ("/action/cancel", "%%%garbage"),
        ("/topic?name=orders.close", "topic=orders.close"),
        ("/no/such/page", ""),
    ] {
        let req = request("POST", path)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .unwrap();
        assert_eq!(
            send(&app, req).await.0,
            StatusCode::FORBIDDEN,
            "{path} {body:?}"
        );
    }
    assert!(!client.topic::<CloseOrder>().counts().await.unwrap().paused);
}

#[tokio::test]
async fn bad_requests_say_what_was_wrong() {
    let app = Dashboard::new(client().await).router();
    let (status, body) = send(&app, get("/topic?name=no.such.topic")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("no.such.topic"), "{body}");
    let (status, _) = send(&app, get("/topic?name=orders.close&cursor=zz")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = send(&app, get("/job?topic=orders.close&id=order%3A2")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("order:2"), "{body}");
    let (status, body) = send(&app, get("/job?topic=orders.close&id=order%3A1")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("due in"), "{body}");
}

#[tokio::test]
async fn nested_anywhere_its_links_stay_inside_the_mount() {
    let app = Router::new().nest("/admin/jobs", Dashboard::new(client().await).router());
    let (status, body) = send(&app, get("/admin/jobs")).await;
    assert_eq!(status, StatusCode::OK);
    // Relative to /admin/jobs: the root is /admin/jobs/, the overview /admin/jobs.
    assert!(body.contains("<base href=\"./jobs/\">"), "{body}");
    assert!(body.contains("href=\"../jobs\""), "{body}");
    assert!(
        body.contains("href=\"topic?name=orders.close&#38;state=scheduled\""),
        "{body}"
    );
    let (status, body) = send(&app, get("/admin/jobs/topic?name=orders.close")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("<base href=\"./\">"), "{body}");
    assert!(
        body.contains("href=\"job?topic=orders.close&#38;id=order%3A1\""),
        "{body}"
    );
    let (status, body) = send(&app, get("/admin/jobs/assets/dashboard.js")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("EventSource"));
}

#[tokio::test]
async fn serve_refuses_a_public_address_without_a_token() {
    let err = Dashboard::new(Client::memory())
        .serve("0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("with_token"), "{err}");
}

#[tokio::test]
async fn events_send_the_figures_to_every_page_that_watches() {
    use futures_util::StreamExt;
    let app = Dashboard::new(client().await).router();
    let mut streams = Vec::new();
    for _ in 0..2 {
        let response = app.clone().oneshot(get("/events")).await.unwrap();
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        streams.push(response.into_body().into_data_stream());
    }
    for stream in &mut streams {
        let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("figures within 10 s")
            .expect("an event")
            .unwrap();
        let text = String::from_utf8_lossy(&first).into_owned();
        assert!(text.starts_with("event: figures\ndata: {"), "{text}");
        assert!(
            text.contains("\"orders.close\":{\"scheduled\":1,"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn the_workers_page_shows_the_doctor_checks() {
    let app = Dashboard::new(client().await).router();
    let (status, body) = send(&app, get("/workers")).await;
    assert_eq!(status, StatusCode::OK);
    // In memory, nothing persists: a warning.
    assert!(
        body.contains("<span class=\"badge level-warn\">warn</span>"),
        "{body}"
    );
    assert!(body.contains("<td>backend</td>"), "{body}");
}

#[tokio::test]
async fn dashboard_job_page_shows_a_unique_key_and_window_and_a_debounce_key() {
    use postpone::{Debounce, Unique, UniqueStates};

    let client = client().await;
    let unique = client
        .enqueue(CloseOrder { order_id: 42 })
        .unique(
            Unique::new("order:<42>", Duration::from_secs(600))
                .states(UniqueStates::SCHEDULED.and(UniqueStates::RUNNING)),
        )
        // The caller's own entry of that name: kept beside the key postpone shows.
        .meta("unique", "the caller's own")
        .await
        .unwrap();
    let debounced = client
        .enqueue(CloseOrder { order_id: 43 })
        .debounce(
            Debounce::new("order:43", Duration::from_secs(5)).max_wait(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let app = Dashboard::new(client).router();

    let page = |id: &str| format!("/job?topic=orders.close&id={id}");
    let (status, body) = send(&app, get(&page(&unique.id))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains(
            "<dt>Unique</dt><dd class=\"mono\" id=\"unique\">order:&#60;42&#62; for 10m (scheduled, running)</dd>"
        ),
        "the key (escaped) and its window: {body}"
    );
    assert!(!body.contains("id=\"debounce\""), "{body}");
    assert!(
        body.contains("<tr><th>unique</th><td>the caller&#39;s own</td></tr>"),
        "the caller's own entry: {body}"
    );

    let (status, body) = send(&app, get(&page(&debounced.id))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains(
            "<dt>Debounce</dt><dd class=\"mono\" id=\"debounce\">order:43 quiet 5s max 1m</dd>"
        ),
        "the key, quiet period and max wait: {body}"
    );
    assert!(!body.contains("id=\"unique\""), "{body}");
}

#[tokio::test]
async fn dashboard_job_page_shows_a_jobs_key_for_fairness_escaped() {
    let client = client().await;
    let keyed = client
        .enqueue(CloseOrder { order_id: 44 })
        .key("<b>acme</b> & co")
        .await
        .unwrap();
    let plain = client.enqueue(CloseOrder { order_id: 45 }).await.unwrap();
    let app = Dashboard::new(client).router();

    let page = |id: &str| format!("/job?topic=orders.close&id={id}");
    let (status, body) = send(&app, get(&page(&keyed.id))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains(
            "<dt>Key</dt><dd id=\"key\"><span class=\"mono\">&#60;b&#62;acme&#60;/b&#62; &#38; co</span>"
        ),
        "the key, escaped: {body}"
    );
    assert!(
        body.contains("href=\"topic?name=orders.close&#38;state=keys\">busiest keys</a>"),
        "a link to the topic's keys: {body}"
    );
    let (status, body) = send(&app, get(&page(&plain.id))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!body.contains("id=\"key\""), "no key, no row: {body}");

    // The listing: a Key column, as a job of the page has a key; `-` for the one without.
    let (status, body) = send(&app, get("/topic?name=orders.close")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("<th>Id</th><th>Key</th>"), "{body}");
    assert!(
        body.contains("<td class=\"mono key\">&#60;b&#62;acme&#60;/b&#62; &#38; co</td>"),
        "the key, escaped: {body}"
    );
    assert!(
        body.contains("<td class=\"mono key\"><span class=\"small\">-</span></td>"),
        "{body}"
    );
}

#[tokio::test]
async fn dashboard_batch_pages_without_batches_say_so() {
    let app = Dashboard::new(client().await).router();
    let (status, body) = send(&app, get("/batches")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("No batches"), "{body}");
    assert!(
        body.contains("<a href=\"batches\" aria-current=\"page\">Batches</a>"),
        "{body}"
    );
    let (status, body) = send(&app, get("/batch?id=billing%3A2026-11")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("no batch"), "{body}");
    let (status, body) = send(&app, get("/batch?id=billing%20run")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("invalid batch id"), "{body}");
    let (status, _) = send(&app, get("/batch")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// The next chunk of an event stream, as text.
async fn next(stream: &mut axum::body::BodyDataStream) -> String {
    use futures_util::StreamExt;
    let chunk = stream.next().await.expect("an event").unwrap();
    String::from_utf8_lossy(&chunk).into_owned()
}

#[tokio::test(start_paused = true)]
async fn a_page_that_opens_gets_figures_read_at_once() {
    let client = client().await;
    let app = Dashboard::new(client.clone()).router();
    let first = |text: &str| text.contains("\"scheduled\":1,");
    let second = |text: &str| text.contains("\"scheduled\":2,");
    let mut watching = app
        .clone()
        .oneshot(get("/events"))
        .await
        .unwrap()
        .into_body()
        .into_data_stream();
    assert!(first(&next(&mut watching).await));
    // The poller sleeps now; the figures change meanwhile.
    client
        .enqueue(CloseOrder { order_id: 2 })
        .after(Duration::from_secs(60))
        .await
        .unwrap();
    // A page that opens now gets the last figures, then the new ones without waiting for the poller's
    // next second (the clock is paused: only a timer that fires moves it).
    let opened = tokio::time::Instant::now();
    let mut page = app
        .oneshot(get("/events"))
        .await
        .unwrap()
        .into_body()
        .into_data_stream();
    let mut text = next(&mut page).await;
    if first(&text) {
        text = next(&mut page).await;
    }
    assert!(second(&text), "{text}");
    assert_eq!(
        opened.elapsed(),
        Duration::ZERO,
        "the new figures waited for the poller's timer"
    );
}
