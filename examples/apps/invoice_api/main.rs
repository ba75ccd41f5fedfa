//! Results and waiting in an axum service: render an invoice's PDF as a job, give it a moment, and
//! answer `200` with the result or `202 Accepted` with its progress and where to ask again.
//!
//! ```text
//! cargo run -p postpone-examples --example invoice_api
//! curl -s -X POST 'localhost:3001/invoices/7/pdf?wait_ms=3000'   # 200 {"pages":5,"url":"..."}
//! curl -s -X POST 'localhost:3001/invoices/8/pdf?wait_ms=100'    # 202 {"progress":...,"poll":...}
//! curl -s 'localhost:3001/invoices/8/pdf?wait_ms=5000'           # 200, once it is rendered
//! curl -s 'localhost:3001/invoices/9/pdf'                        # 404: never rendered
//! ```
//!
//! `POST` enqueues the rendering with `.and_wait(..)`, which registers the wait before the job exists,
//! so that even a rendering that ends at once is heard; `GET` waits with `client.wait`, and finds a
//! rendering that ended before it asked because the job type keeps its results for an hour. The worker
//! runs in the same process (`--render-time`, default 2s, spread over five pages, each reported as
//! progress). With `REDIS_URL` set, jobs live in Redis, and any number of copies of the service share
//! them. `examples/apps/tests/invoice_api.rs` drives it over HTTP.

#[path = "../support/flags.rs"]
mod flags;
#[path = "../support/shutdown.rs"]
mod shutdown;

mod invoices;

use std::process::ExitCode;
use std::time::Duration;

use tokio::net::TcpListener;

const USAGE: &str = "\
usage: invoice_api [--listen ADDR] [--render-time DURATION]

  --listen ADDR            where to serve HTTP (default 127.0.0.1:3001)
  --render-time DURATION   how long rendering one invoice takes (default 2s)

environment: REDIS_URL (default: in memory), POSTPONE_NAMESPACE";

#[tokio::main]
async fn main() -> ExitCode {
    let signal = shutdown::signal();
    let flags = flags::Flags::from_env(USAGE, &["listen", "render-time"]);
    let listen: String = flags.get("listen", "127.0.0.1:3001".to_owned());
    let render_time = flags.duration("render-time", Duration::from_secs(2));
    let client = match postpone::Client::from_env().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("invoice_api: {e}");
            return ExitCode::FAILURE;
        }
    };
    let worker = match invoices::worker(&client, render_time) {
        Ok(worker) => worker,
        Err(e) => {
            eprintln!("invoice_api: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match TcpListener::bind(&listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("invoice_api: cannot listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "invoice service on http://{listen} (jobs {}); Ctrl-C stops it",
        client.backend_name()
    );
    let stop = worker.shutdown_handle();
    let jobs = tokio::spawn(worker.run());
    let served = axum::serve(listener, invoices::router(client))
        .with_graceful_shutdown(async move {
            let which = signal.await;
            println!("{which}: stopping");
        })
        .await;
    stop.shutdown();
    let worked = jobs.await;
    match (served, worked) {
        (Ok(()), Ok(Ok(()))) => ExitCode::SUCCESS,
        (served, worked) => {
            eprintln!("invoice_api: serving: {served:?}; worker: {worked:?}");
            ExitCode::FAILURE
        }
    }
}
