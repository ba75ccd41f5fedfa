//! A relay as a process of its own: moves committed rows of the outbox table to the queue until it is
//! stopped (Ctrl-C). The outbox's fault tests run it and kill it with SIGKILL.
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
//!     cargo run -p postpone-postgres --example outbox_relay
//! ```
//!
//! Environment: `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`), `REDIS_URL` (or
//! `REDIS_CLUSTER_NODES`; in memory without either, which only makes sense for a look),
//! `POSTPONE_NAMESPACE`, `OUTBOX_TABLE` (default `postpone_outbox`; created when missing),
//! `OUTBOX_BATCH` (rows per round, default 500).

use std::process::ExitCode;
use std::time::Duration;

use postpone::Client;
use postpone_postgres::{migrate, Outbox, Relay, DEFAULT_TABLE};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("outbox_relay: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let table = std::env::var("OUTBOX_TABLE").unwrap_or_else(|_| DEFAULT_TABLE.to_owned());
    let client = Client::from_env()
        .await
        .map_err(|e| e.report().to_string())?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(5))
        .connect(&url)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL at {url}: {e}"))?;
    migrate(&mut *pool.acquire().await?, &table).await?;
    let outbox = Outbox::new(&client).table(&table)?;
    let batch = match std::env::var("OUTBOX_BATCH") {
        Ok(n) => n
            .parse()
            .map_err(|_| format!("OUTBOX_BATCH={n:?} is not a number of rows"))?,
        Err(_) => 500,
    };
    let relay = Relay::new(&outbox, pool)
        .poll_interval(Duration::from_millis(200))
        .batch(batch);
    let stop = relay.shutdown_handle();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.shutdown();
    });
    eprintln!("relay ready: table {table} on {}", client.backend_name());
    relay.run().await?;
    Ok(())
}
