//! Connections: URL parsing, the connections to one Redis, and the server checks.
//!
//! Every command goes over one shared multiplexed connection (see `mux.rs`: pipelined, reconnected on
//! demand, never waited for). A bb8 pool of dedicated connections, opened on demand and checked with a
//! PING when lent, serves what must not share that pipe.

use std::time::Duration;

use bb8_redis::bb8;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError,
};

use super::mux::Mux;
use crate::error::{BoxError, Error, Result};

mod url;

/// Parses a Redis URL (its connections skip redis-rs's `CLIENT SETINFO`). An error says what is wrong
/// (scheme, host, port, database...) and shows the URL with its user-info replaced by `***`: it never
/// contains the password.
pub(super) fn parse_url(url: &str) -> Result<ConnectionInfo> {
    let invalid = |problem: String| Error::InvalidUrl {
        reason: format!("{:?}: {problem}", url::shown(url)),
    };
    if let Some(problem) = url::problem(url) {
        return Err(invalid(problem));
    }
    let info = url
        .into_connection_info()
        .map_err(|e| invalid(redact(&e.to_string(), url)))?;
    // redis-rs names itself to the server on connect (`CLIENT SETINFO`, from Redis 7.2), which Redis 6.2
    // and 7.0 answer with an error that lands in `INFO errorstats` at every connect and reconnect: the
    // store does without the name.
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    Ok(info.set_redis_settings(settings))
}

/// `host:port` of a connection (never the credentials).
pub(super) fn addr_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
        ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port}"),
        ConnectionAddr::Unix(path) => path.display().to_string(),
        other => other.to_string(),
    }
}

/// Removes the user-info part of `url` (and its pieces) wherever it appears in `message`.
pub(super) fn redact(message: &str, url: &str) -> String {
    let mut out = message.to_owned();
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let Some((userinfo, _)) = rest.rsplit_once('@') else {
        return out;
    };
    let mut secrets: Vec<&str> = vec![userinfo];
    if let Some((user, pass)) = userinfo.split_once(':') {
        secrets.push(pass);
        secrets.push(user);
    }
    for s in secrets.into_iter().filter(|s| s.len() >= 2) {
        out = out.replace(s, "***");
    }
    out
}

/// A dedicated connection, lent by the pool.
pub(super) struct Conn {
    /// The connection itself.
    pub(super) inner: MultiplexedConnection,
}

/// Makes the pool's connections.
pub(super) struct Manager {
    client: Client,
    config: AsyncConnectionConfig,
}

impl bb8::ManageConnection for Manager {
    type Connection = Conn;
    type Error = RedisError;

    async fn connect(&self) -> Result<Conn, RedisError> {
        let inner = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        Ok(Conn { inner })
    }

    async fn is_valid(&self, conn: &mut Conn) -> Result<(), RedisError> {
        redis::cmd("PING").query_async::<()>(&mut conn.inner).await
    }

    fn has_broken(&self, _: &mut Conn) -> bool {
        false
    }
}

/// A dedicated connection, lent for one operation.
pub(super) type Pooled<'a> = bb8::PooledConnection<'a, Manager>;

/// The connections to one Redis: the shared multiplexed connection that carries every command
/// ([`Mux`]), and a bb8 pool of dedicated connections, opened on demand, for what must not share that
/// pipe (today only the worker's start-up checks; blocking commands would go there too).
pub(super) struct Pool {
    shared: Mux,
    pool: bb8::Pool<Manager>,
}

impl Pool {
    /// The shared connection starts as `first` (already checked); the pool holds at most `size`
    /// dedicated connections and opens none until one is asked for.
    pub(super) fn new(
        client: Client,
        settings: PoolSettings,
        addr: String,
        first: MultiplexedConnection,
    ) -> Self {
        let config = settings.config();
        let shared = Mux::new(
            client.clone(),
            config.clone(),
            settings.connect_timeout,
            addr,
            first,
        );
        let pool = bb8::Pool::builder()
            .max_size(settings.size)
            .connection_timeout(settings.connect_timeout + settings.response_timeout)
            // A failed connect fails the operation at once instead of retrying in a loop until the
            // pool's timeout.
            .retry_connection(false)
            // Dedicated connections are used rarely: a PING on each checkout finds the dead ones.
            .test_on_check_out(true)
            .error_sink(Box::new(LogErrors))
            .build_unchecked(Manager { client, config });
        Pool { shared, pool }
    }

    /// The shared connection (connected first if need be) and its number, for [`Pool::failed_shared`].
    pub(super) async fn shared(
        &self,
        context: &'static str,
    ) -> Result<(MultiplexedConnection, u64)> {
        self.shared
            .get()
            .await
            .map_err(|e| Error::backend(context, e))
    }

    /// Records a command that failed on shared connection `n`.
    pub(super) fn failed_shared(&self, n: u64, e: &RedisError) {
        self.shared.failed(n, e);
    }

    /// Gets a dedicated connection (waits while all `size` are lent).
    pub(super) async fn get(&self, context: &'static str) -> Result<Pooled<'_>> {
        self.pool.get().await.map_err(|e| match e {
            bb8::RunError::User(e) => Error::backend(context, e),
            bb8::RunError::TimedOut => {
                Error::backend(context, "timed out waiting for a Redis connection")
            }
        })
    }
}

/// Connection settings.
#[derive(Debug, Clone, Copy)]
pub(super) struct PoolSettings {
    pub(super) size: u32,
    pub(super) connect_timeout: Duration,
    pub(super) response_timeout: Duration,
}

impl PoolSettings {
    fn config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
    }

    /// Opens one connection (to check the server; it becomes the first shared connection).
    pub(super) async fn connect_one(
        &self,
        client: &Client,
    ) -> Result<MultiplexedConnection, RedisError> {
        client
            .get_multiplexed_async_connection_with_config(&self.config())
            .await
    }
}

#[derive(Debug, Clone, Copy)]
struct LogErrors;

impl bb8::ErrorSink<RedisError> for LogErrors {
    fn sink(&self, e: RedisError) {
        tracing::debug!(error = %e, "Redis connection failed");
    }

    fn boxed_clone(&self) -> Box<dyn bb8::ErrorSink<RedisError>> {
        Box::new(*self)
    }
}

/// The server's version, from `INFO server`.
pub(super) async fn server_version(
    conn: &mut (impl ConnectionLike + Send),
) -> Result<String, RedisError> {
    let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    Ok(info_field(&info, "redis_version")
        .unwrap_or("unknown")
        .to_owned())
}

/// Fails with [`Error::UnsupportedRedis`] before Redis 6.2 (the scripts use `ZMSCORE`, `SMISMEMBER`
/// and `ZRANGE ... BYSCORE`).
pub(super) fn require_6_2(version: &str) -> Result<()> {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < (6, 2) {
        return Err(Error::UnsupportedRedis {
            version: version.to_owned(),
        });
    }
    Ok(())
}

/// A `field:value` line of an INFO reply.
pub(super) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// The eviction policy, from `CONFIG GET` or, when CONFIG is disabled, from `INFO memory`.
pub(super) async fn eviction_policy(conn: &mut (impl ConnectionLike + Send)) -> Option<String> {
    let config: Result<Vec<String>, _> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(conn)
        .await;
    if let Ok(pair) = config {
        if let Some(policy) = pair.get(1) {
            return Some(policy.clone());
        }
    }
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .ok()?;
    info_field(&info, "maxmemory_policy").map(str::to_owned)
}

/// Warns loudly unless the eviction policy of the Redis at `addr` is `noeviction`.
pub(super) fn warn_about_eviction(addr: &str, policy: Option<String>) {
    match policy {
        Some(policy) if policy == "noeviction" => {}
        Some(policy) => tracing::warn!(
            %addr,
            %policy,
            "postpone: Redis maxmemory-policy is {policy:?}, not \"noeviction\": when Redis runs out of \
             memory it will silently delete jobs. Set `maxmemory-policy noeviction`."
        ),
        None => tracing::warn!(
            %addr,
            "postpone: could not read Redis maxmemory-policy (CONFIG GET and INFO memory refused); make \
             sure it is \"noeviction\", or Redis may silently delete jobs when it runs out of memory."
        ),
    }
}

/// A connect error for `addr`, its message scrubbed of the URL's credentials.
pub(super) fn connect_error(addr: String, e: RedisError, url: &str) -> Error {
    let text = e.to_string();
    let source: BoxError = if redact(&text, url) == text {
        Box::new(e)
    } else {
        redact(&text, url).into()
    };
    Error::Connect { addr, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for ok in ["6.2.0", "6.2.14", "7.0.15", "7.2.4", "8.0.0", "10.0"] {
            assert!(require_6_2(ok).is_ok(), "{ok}");
        }
        for old in ["6.0.16", "5.0.7", "2.8", "unknown", ""] {
            assert!(
                matches!(require_6_2(old), Err(Error::UnsupportedRedis { .. })),
                "{old}"
            );
        }
    }

    #[test]
    fn redaction() {
        let url = "redis://admin:hunter2@example.com:6379/0";
        assert_eq!(
            redact("bad hunter2 and admin:hunter2", url),
            "bad *** and ***"
        );
        assert_eq!(redact("nothing here", "redis://localhost"), "nothing here");
    }

    #[test]
    fn addresses() {
        let info = parse_url("redis://u:secret@example.com:7000/2").unwrap();
        assert_eq!(addr_of(&info), "example.com:7000");
        let info = parse_url("redis://example.com").unwrap();
        assert_eq!(addr_of(&info), "example.com:6379");
        let err = parse_url("redis://u:secret@example.com:7000/x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid Redis URL: \"redis://***@example.com:7000/x\": the database \"x\" is not a number: \
             the path is the database index, e.g. redis://127.0.0.1:6379/0"
        );
    }
}
