//! A webhook receiver to deliver to, on a free local port: `/flaky` answers 503 to the first deliveries
//! of each event, then 200; `/down` always answers 503; `/gone` always answers 410.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;

/// Requests per `Idempotency-Key`.
type Seen = Arc<Mutex<HashMap<String, u32>>>;

/// The running receiver; it stops when dropped.
#[derive(Debug)]
pub(crate) struct Receiver {
    /// `http://127.0.0.1:<port>`.
    pub(crate) url: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Starts it; `/flaky` fails the first `fail_first` deliveries of each event.
    pub(crate) async fn start(fail_first: u32) -> std::io::Result<Self> {
        let seen = Seen::default();
        let flaky_seen = seen.clone();
        let app = Router::new()
            .route(
                "/flaky",
                post(move |headers: HeaderMap| async move {
                    match count(&flaky_seen, &headers) <= fail_first {
                        true => StatusCode::SERVICE_UNAVAILABLE,
                        false => StatusCode::OK,
                    }
                }),
            )
            .route(
                "/down",
                post(|State(seen): State<Seen>, headers: HeaderMap| async move {
                    count(&seen, &headers);
                    StatusCode::SERVICE_UNAVAILABLE
                }),
            )
            .route(
                "/gone",
                post(|State(seen): State<Seen>, headers: HeaderMap| async move {
                    count(&seen, &headers);
                    StatusCode::GONE
                }),
            )
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Receiver { url, seen, task })
    }

    /// How many requests carried this `Idempotency-Key`.
    pub(crate) fn requests(&self, key: &str) -> u32 {
        self.seen.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts a request by its `Idempotency-Key`; returns its number for that key, from 1.
fn count(seen: &Seen, headers: &HeaderMap) -> u32 {
    let key = headers
        .get("Idempotency-Key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut seen = seen.lock().unwrap();
    let n = seen.entry(key).or_default();
    *n += 1;
    *n
}
