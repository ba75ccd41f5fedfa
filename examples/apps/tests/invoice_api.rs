//! The invoice service (`examples/apps/invoice_api/`) over HTTP, on a redis-server of its own: a
//! rendering that ends within the request's wait answers 200 with the typed result, a longer one 202
//! with its progress, and asking again later (or after it ended) gets the kept result.

#[path = "../invoice_api/invoices.rs"]
mod invoices;
mod support;

use std::time::Duration;

use postpone::Client;
use reqwest::StatusCode;
use serde_json::Value;
use support::redis_server::RedisServer;
use tokio::net::TcpListener;

/// The service on a free port: its address, and its worker's stop handle.
async fn serve(client: &Client, render_time: Duration) -> (String, postpone::ShutdownHandle) {
    let worker = invoices::worker(client, render_time).unwrap();
    let stop = worker.shutdown_handle();
    tokio::spawn(worker.run());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let router = invoices::router(client.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (addr, stop)
}

async fn call(method: reqwest::Method, url: &str) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .request(method, url)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_within_the_wait_is_200_a_longer_rendering_202_with_progress_then_200() {
    let server = RedisServer::start();
    let client = Client::builder()
        .namespace("invoices")
        .redis(&server.url())
        .await
        .unwrap();
    let (base, stop) = serve(&client, Duration::from_millis(600)).await;

    // Rendered within the 10 s the request waits: the typed result.
    let (status, body) = call(
        reqwest::Method::POST,
        &format!("{base}/invoices/7/pdf?wait_ms=10000"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["url"], "https://files.example/invoices/7.pdf");
    assert_eq!(body["pages"], 5);

    // Not within 350 ms: 202, with the pages reported so far, and where to ask again.
    let (status, body) = call(
        reqwest::Method::POST,
        &format!("{base}/invoices/8/pdf?wait_ms=350"),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "rendering");
    assert_eq!(body["poll"], "/invoices/8/pdf?wait_ms=5000");
    let percent = body["progress"]["percent"]
        .as_f64()
        .expect("progress by now");
    assert!((20.0..100.0).contains(&percent), "{body}");
    // Asking again waits for the end.
    let (status, body) = call(
        reqwest::Method::GET,
        &format!("{base}{}", body["poll"].as_str().unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["url"], "https://files.example/invoices/8.pdf");

    // Long after: the kept result, at once; a rendering never asked for: 404.
    let (status, body) = call(
        reqwest::Method::GET,
        &format!("{base}/invoices/7/pdf?wait_ms=0"),
    )
    .await;
    assert_eq!((status, body["pages"].as_u64()), (StatusCode::OK, Some(5)));
    let (status, _) = call(
        reqwest::Method::GET,
        &format!("{base}/invoices/9/pdf?wait_ms=0"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    stop.shutdown();
}
