//! Order timeout in a web backend: an axum service that closes orders left unpaid, with transactional
//! enqueue (PostgreSQL via sqlx, and the outbox of `postpone-postgres`).
//!
//! Placing an order (`POST /orders`) is one transaction: it inserts the order and writes "close if
//! unpaid" for the end of its payment window (30 minutes), under the job id `order:<id>`, to the
//! outbox. Paying it (`POST /orders/{id}/pay`) is one transaction that records the payment and cancels
//! that timer; extending the payment window (`POST /orders/{id}/extend`) records the new deadline and
//! moves the timer in one transaction. A relay inside the service moves committed outbox rows to the
//! queue, so a timer exists if and only if its order committed, and a cancel takes effect if and only
//! if its payment did. At the deadline a worker closes the order if it is still unpaid. `app.rs` holds
//! the service and explains why it stays correct when a timer races a payment; `timer.rs` has the job
//! and its handler, `api.rs` the HTTP handlers.
//!
//! ```text
//! cargo run -p postpone-examples --example order_timeout     # jobs in memory, orders in PostgreSQL
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p postpone-examples --example order_timeout -- --payment-window 20s
//! ```
//!
//! Needs PostgreSQL: `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`); it creates the
//! schema `postpone_orders` and its tables `orders` and `outbox` when missing. On Redis, timers survive
//! restarts, and one whose order committed while Redis was away waits in the outbox until it is back.
//! Without `REDIS_URL` the timers live in this process and die with it: at the next start the service
//! sets them again for every pending order (a start-up scan that only the in-memory backend needs).
//! Then, in another
//! shell (each order's id is taken from the answer that placed it):
//!
//! ```sh
//! a=$(curl -s localhost:3000/orders -H 'content-type: application/json' -d '{"item":"book","amount_cents":1200}' | grep -o '"id":[0-9]*' | cut -d: -f2)
//! b=$(curl -s localhost:3000/orders -H 'content-type: application/json' -d '{"item":"pen","amount_cents":300}' | grep -o '"id":[0-9]*' | cut -d: -f2)
//! curl -s -X POST localhost:3000/orders/$a/pay      # paid: its timer is cancelled with the payment
//! curl -s -X POST localhost:3000/orders/$b/extend   # a longer window: its timer moves with it
//! curl -s localhost:3000/orders/$b                  # still pending, closed at pay_by unless paid
//! ```
//!
//! Metrics and traces (`observe.rs`): `GET /metrics` serves postpone's metrics in the Prometheus text
//! format, and `--trace stdout` prints the spans, to follow an order's trace from its request to the
//! handler that closes it:
//!
//! ```text
//! curl -s localhost:3000/metrics | grep postpone_
//! ```
//!
//! Ctrl-C or SIGTERM stops it gracefully: the HTTP server finishes its requests, the relay its round
//! (rows it has not taken stay in the outbox for the next start), then the worker lets running jobs
//! finish (10 s at most) and hands the rest back.
//!
//! `examples/apps/tests/order_timeout.rs` drives this service over HTTP with a payment window of
//! seconds and checks the database, the outbox and the queue (a request that rolls back leaves no
//! timer; a payment and its cancel commit together); `order_timeout_curl.rs` runs the `curl` lines
//! above, as written, against the example's binary.

#[path = "../support/flags.rs"]
mod flags;
#[path = "../support/postgres.rs"]
mod postgres;
#[path = "../support/shutdown.rs"]
mod shutdown;

mod api;
mod app;
mod observe;
mod timer;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tokio::net::TcpListener;

const USAGE: &str = "\
usage: order_timeout [--listen ADDR] [--payment-window DURATION] [--schema NAME] [--trace stdout]

  --listen ADDR               where to serve HTTP (default 127.0.0.1:3000)
  --payment-window DURATION   time to pay, and what an extension adds: 500ms, 20s, 30m... (default 30m)
  --schema NAME               PostgreSQL schema of the orders and outbox tables: a-z 0-9 _
                              (default postpone_orders)
  --trace stdout              print the spans (OpenTelemetry) on stdout (default off)

environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), REDIS_URL (default: jobs in
memory), POSTPONE_NAMESPACE, RUST_LOG (default info)";

#[tokio::main]
async fn main() -> ExitCode {
    let flags = flags::Flags::from_env(USAGE, &["listen", "payment-window", "schema", "trace"]);
    let trace_stdout = match flags.get("trace", "off".to_owned()).as_str() {
        "stdout" => true,
        "off" => false,
        other => {
            eprintln!("--trace {other:?}: use stdout or off\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let tracer = observe::init_tracing(trace_stdout);
    observe::install_metrics();
    let listen: SocketAddr = flags.get("listen", SocketAddr::from(([127, 0, 0, 1], 3000)));
    let settings = app::Settings {
        payment_window: flags.duration("payment-window", Duration::from_secs(30 * 60)),
        schema: flags.get("schema", "postpone_orders".to_owned()),
    };
    let result = run(listen, settings).await;
    if let Some(tracer) = tracer {
        let _ = tracer.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("order_timeout: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(listen: SocketAddr, settings: app::Settings) -> Result<(), postpone::BoxError> {
    let jobs = postpone::Client::from_env().await?;
    // PostgreSQL before serving: without it there is nothing to serve, and the error says so at once.
    let app = app::App::connect(&postgres::database_url(), jobs.clone(), &settings).await?;
    let rearmed = app.rearm_in_memory_timers().await?;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    println!(
        "order service on http://{} (payment window {}; orders and outbox in schema {:?}; timers on {}{})",
        listener.local_addr()?,
        flags::show_duration(settings.payment_window),
        settings.schema,
        jobs.backend_name(),
        if rearmed > 0 {
            format!("; in memory, set {rearmed} timer(s) of pending orders again")
        } else {
            String::new()
        }
    );
    let stop = shutdown::signal();
    app.serve(listener, async move {
        let signal = stop.await;
        println!("{signal}: finishing requests, the outbox relay's round and running jobs, then stopping");
    })
    .await?;
    println!("stopped");
    Ok(())
}
