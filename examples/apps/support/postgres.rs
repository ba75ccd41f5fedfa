//! Connecting an example to PostgreSQL, with an error that names the URL and says what to do: one
//! tokio-postgres connection ([`connect`]), or a sqlx pool ([`pool`], for the outbox of
//! `postpone-postgres`). Each example uses part of this file.
#![allow(dead_code)]

use std::time::Duration;

/// Used when `DATABASE_URL` is not set.
pub(crate) const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// `DATABASE_URL`, or [`DEFAULT_DATABASE_URL`].
pub(crate) fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned())
}

/// Connects within 5 seconds and runs the connection on a task of its own.
///
/// One connection serves the whole example: `tokio_postgres::Client` pipelines the queries of
/// concurrent tasks over it. A production service would use a pool (bb8-postgres, deadpool-postgres).
pub(crate) async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let shown = redact(url);
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| format!("DATABASE_URL {shown} is not a PostgreSQL URL: {e}"))?;
    config.connect_timeout(Duration::from_secs(5));
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| cannot_connect(&shown, causes(&e)))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("PostgreSQL connection lost: {e}");
        }
    });
    Ok(client)
}

/// A sqlx pool of up to 8 connections whose `search_path` is `schema` (so that unqualified table
/// names are that schema's). Its first connection is made at once, within 5 seconds.
pub(crate) async fn pool(url: &str, schema: &str) -> Result<sqlx::PgPool, String> {
    use sqlx::Connection as _;

    let shown = redact(url);
    let options: sqlx::postgres::PgConnectOptions = url
        .parse()
        .map_err(|e| format!("DATABASE_URL {shown} is not a PostgreSQL URL: {e}"))?;
    let options = options.options([("search_path", schema)]);
    // One connection first, on its own: its error says why (a pool retries a refused connection
    // until its timeout, then says only that it timed out).
    let first = tokio::time::timeout(
        Duration::from_secs(5),
        sqlx::PgConnection::connect_with(&options),
    )
    .await
    .map_err(|_| cannot_connect(&shown, "no answer within 5 s".to_owned()))?
    .map_err(|e| cannot_connect(&shown, causes(&e)))?;
    let _ = first.close().await;
    Ok(sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with(options))
}

/// An error and its causes, on one line.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut e = e;
    let mut why = e.to_string();
    while let Some(source) = e.source() {
        why = format!("{why}: {source}");
        e = source;
    }
    why
}

/// That PostgreSQL at `shown` could not be reached, `why`, and what to do.
fn cannot_connect(shown: &str, why: String) -> String {
    format!(
        "cannot connect to PostgreSQL at {shown}: {why}\n\
         This example needs a running PostgreSQL: start one (Debian: `pg_ctlcluster <version> main start`) \
         or set DATABASE_URL to one that runs (default {DEFAULT_DATABASE_URL})."
    )
}

/// The URL with its password, if any, replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{}{user}:***{}", &url[..scheme_end], &rest[at..]),
        None => url.to_owned(),
    }
}
