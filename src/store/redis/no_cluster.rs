//! Without the `cluster` feature: no Redis Cluster client. Connecting to a cluster checks the seed URLs
//! as usual, then fails with a message that names the feature; the types the rest of the backend
//! names for a cluster exist but can never be made.

use std::time::Duration;

use redis::RedisError;

use super::conn;
use crate::error::{Error, Result};

/// A cluster connection: none without the `cluster` feature.
pub(super) enum ClusterConnection {}

/// The masters known to be down: none without the `cluster` feature.
pub(super) enum Health {}

impl Health {
    pub(super) fn node_of(&self, _key: &str) -> Option<String> {
        match *self {}
    }

    pub(super) fn check(&self, _context: &'static str, _key: &str) -> Result<()> {
        match *self {}
    }

    pub(super) fn failed(&self, _key: &str, _e: &RedisError) {
        match *self {}
    }
}

/// A connected cluster (never, here).
pub(super) struct Connected {
    pub(super) conn: ClusterConnection,
    pub(super) seed_clients: Vec<redis::Client>,
    pub(super) addrs: String,
    pub(super) health: Health,
}

/// Checks the seed URLs, then fails: this build has no Redis Cluster client.
pub(super) async fn connect<S: AsRef<str>>(
    urls: &[S],
    _connect_timeout: Duration,
    _response_timeout: Duration,
) -> Result<Connected> {
    for url in urls {
        conn::parse_url(url.as_ref())?;
    }
    Err(Error::InvalidConfig {
        reason: "connecting to a Redis Cluster needs postpone's `cluster` feature, which is off by \
                 default: in Cargo.toml, postpone = { version = \"0.1\", features = [\"cluster\"] } \
                 (or `cargo run --features cluster ...` in this repository)"
            .into(),
    })
}

pub(super) async fn check_worker_start(conn: &ClusterConnection) -> Result<()> {
    match *conn {}
}

pub(super) async fn send_to_node_of(
    conn: &ClusterConnection,
    _cmd: &redis::Cmd,
    _key: Option<&str>,
) -> Result<redis::Value, RedisError> {
    match *conn {}
}
