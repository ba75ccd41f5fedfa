//! Connecting an example to PostgreSQL, with an error that names the URL and says what to do.

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
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.map_err(|e| {
        let mut e: &dyn std::error::Error = &e;
        let mut why = e.to_string();
        while let Some(source) = e.source() {
            why = format!("{why}: {source}");
            e = source;
        }
        format!(
            "cannot connect to PostgreSQL at {shown}: {why}\n\
             This example needs a running PostgreSQL: start one (Debian: `pg_ctlcluster <version> main start`) \
             or set DATABASE_URL to one that runs (default {DEFAULT_DATABASE_URL})."
        )
    })?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("PostgreSQL connection lost: {e}");
        }
    });
    Ok(client)
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
