//! [`Ops::doctor`](crate::ops::Ops::doctor) on Redis: the version, `maxmemory-policy`, persistence and
//! fsync, and this machine's clock against the server's, of the one Redis or of every master of a
//! cluster; on a cluster also the slot coverage and the replicas.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionLike;
use redis::RedisError;

use super::conn;
use super::exec::Conns;
use super::RedisStore;
use crate::check::Check;
use crate::error::{Error, Result};

#[cfg(feature = "cluster")]
mod cluster;

/// A clock offset past this is worth a warning (ms).
const CLOCK_WARN_MS: i64 = 1000;

impl RedisStore {
    /// The checks of `postpone doctor`.
    pub(super) async fn doctor_checks(&self) -> Result<Vec<Check>> {
        match &self.inner.conns {
            Conns::Single(pool) => {
                let mut conn = pool.get("connecting to Redis for its checks").await?;
                let found = node(&mut conn.inner)
                    .await
                    .map_err(|e| Error::backend("checking Redis (INFO, CONFIG GET, TIME)", e))?;
                let mut checks = found.checks;
                checks.push(clock_check(
                    found.clock_offset_ms,
                    found.round_trip_ms,
                    None,
                ));
                Ok(checks)
            }
            #[cfg(feature = "cluster")]
            Conns::Cluster(conn) => cluster::checks(conn).await,
            #[cfg(not(feature = "cluster"))]
            Conns::Cluster(conn) => match *conn {},
        }
    }
}

/// What one server showed.
pub(super) struct NodeFindings {
    /// Version, eviction policy, persistence.
    pub(super) checks: Vec<Check>,
    /// The server's clock minus this machine's (ms).
    pub(super) clock_offset_ms: i64,
    /// The round trip of the TIME command (ms): the offset is known to about half of it.
    pub(super) round_trip_ms: i64,
}

/// Checks one server.
pub(super) async fn node(
    conn: &mut (impl ConnectionLike + Send),
) -> Result<NodeFindings, RedisError> {
    let version = conn::server_version(conn).await?;
    let version = match conn::require_6_2(&version) {
        Ok(()) => Check::ok("redis version", format!("Redis {version}")),
        Err(_) => Check::bad(
            "redis version",
            format!("Redis {version}"),
            "upgrade to Redis 6.2 or later (7.x recommended): postpone's scripts need it",
        ),
    };
    let eviction = match conn::eviction_policy(conn).await {
        Some(p) if p == "noeviction" => Check::ok("maxmemory-policy", p),
        Some(p) => Check::bad(
            "maxmemory-policy",
            p.clone(),
            format!(
                "set `maxmemory-policy noeviction` (redis.conf, or CONFIG SET): with {p} Redis deletes \
                 keys, jobs included, when it runs out of memory"
            ),
        ),
        None => Check::warn(
            "maxmemory-policy",
            "unreadable (CONFIG GET and INFO memory refused)",
            "make sure it is `noeviction`: any other policy lets Redis delete jobs when memory runs out",
        ),
    };
    let persistence = persistence(conn).await?;
    let before = SystemTime::now();
    let started = Instant::now();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await?;
    let round_trip_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let local_ms = before
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .saturating_add(round_trip_ms / 2);
    let server_ms = secs.saturating_mul(1000).saturating_add(micros / 1000);
    let libraries = libraries_check(conn).await;
    Ok(NodeFindings {
        checks: vec![version, eviction, persistence, libraries],
        clock_offset_ms: server_ms.saturating_sub(local_ms),
        round_trip_ms,
    })
}

/// postpone's function libraries on the server: this build's, other builds', and the memory function
/// libraries hold (see `libraries.rs`).
async fn libraries_check(conn: &mut (impl ConnectionLike + Send)) -> Check {
    const NAME: &str = "script libraries";
    let found = match super::libraries::node_libraries(conn, false).await {
        Ok(found) => found,
        Err(e) => {
            return Check::warn(
                NAME,
                format!("unreadable (FUNCTION LIST, INFO memory): {e}"),
                "nothing to do for jobs: scripts run all the same",
            )
        }
    };
    if found.without_functions > 0 {
        return Check::ok(
            NAME,
            "none: this server runs no functions (before Redis 7.0, or FUNCTION renamed or denied); \
             scripts run by EVALSHA",
        );
    }
    let mut check = Check::ok(
        NAME,
        format!(
            "{} of this build's {} loaded, {} of other builds; {} KiB held by function libraries",
            found.current,
            super::scripts::SCRIPTS.all().len(),
            found.others,
            found.memory_bytes / 1024,
        ),
    );
    if found.others > 0 {
        check.advice = Some(
            "`postpone scripts --prune` deletes other builds' libraries (a process of one that still \
             runs loads its own again at its next call)"
                .to_owned(),
        );
    }
    check
}

/// `CONFIG GET <name>`'s value; `None` when CONFIG is refused (managed Redis often renames it).
async fn config(conn: &mut (impl ConnectionLike + Send), name: &str) -> Option<String> {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(conn)
        .await
        .ok()?;
    pair.get(1).cloned()
}

/// The advice beside an AOF that Redis loads when a crash tore its end (`aof-load-truncated yes`, the
/// default): see the guide's "Restarting Redis after a crash" (deploying-redis.md).
const TORN: &str = "after a crash, start Redis through `redis-check-aof --fix` (or set \
    `aof-load-truncated no`): Redis 7.0 keeps the start of a transaction a crash tore, and a later \
    restart applies it (the guide's \"Deploying Redis\")";

/// AOF and its fsync policy (with advice when Redis loads a torn AOF), else RDB snapshots, else
/// nothing.
async fn persistence(conn: &mut (impl ConnectionLike + Send)) -> Result<Check, RedisError> {
    const NAME: &str = "persistence";
    const FIX: &str = "set `appendonly yes` and `appendfsync everysec`";
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query_async(conn)
        .await?;
    let aof = conn::info_field(&info, "aof_enabled") == Some("1");
    let check = if aof {
        match config(conn, "appendfsync").await.as_deref() {
            Some(p @ ("everysec" | "always")) => {
                let mut check = Check::ok(NAME, format!("AOF on, appendfsync {p}"));
                if config(conn, "aof-load-truncated").await.as_deref() == Some("yes") {
                    check.advice = Some(TORN.to_owned());
                }
                check
            }
            Some(p) => Check::warn(
                NAME,
                format!("AOF on, appendfsync {p}"),
                "set `appendfsync everysec`: with `no` the OS decides when writes reach the disk, and a \
                 crash of the machine can lose the last ~30 s of jobs",
            ),
            None => Check::warn(
                NAME,
                "AOF on, appendfsync unreadable (CONFIG GET refused)",
                "make sure `appendfsync` is `everysec` or `always`",
            ),
        }
    } else {
        match config(conn, "save").await {
            Some(save) if save.trim().is_empty() => Check::warn(
                NAME,
                "none (appendonly no, no RDB snapshots)",
                format!("every job is lost when Redis restarts: {FIX}"),
            ),
            Some(save) => Check::warn(
                NAME,
                format!("RDB snapshots only (save {save})"),
                format!("jobs enqueued since the last snapshot are lost on a crash: {FIX}"),
            ),
            None => Check::warn(
                NAME,
                "AOF off; RDB snapshots unreadable (CONFIG GET refused)",
                format!(
                    "without AOF, jobs since the last snapshot (if any) are lost on a crash: {FIX}"
                ),
            ),
        }
    };
    Ok(check)
}

/// The clock check, from the largest offset found (`masters`: how many were measured, on a cluster).
pub(super) fn clock_check(offset_ms: i64, round_trip_ms: i64, masters: Option<usize>) -> Check {
    const NAME: &str = "clock";
    let size = offset_ms.unsigned_abs();
    let amount = if size < 1000 {
        format!("{size} ms")
    } else {
        format!("{:.1} s", size as f64 / 1000.0)
    };
    let whose = match masters {
        Some(n) => format!("Redis's (the furthest of {n} masters)"),
        None => "Redis's".to_owned(),
    };
    // The offset is known to within half the round trip.
    let within = (round_trip_ms / 2).max(1);
    let found = match offset_ms {
        0 => format!("this machine's clock is in step with {whose}, to within {within} ms"),
        o => format!(
            "this machine's clock is {amount} {} {whose}, to within {within} ms",
            if o > 0 { "behind" } else { "ahead of" }
        ),
    };
    if offset_ms.abs() > CLOCK_WARN_MS {
        Check::warn(
            NAME,
            found,
            "sync this machine's clock (NTP): Redis's clock decides when jobs are due, so they still run \
             on time, but times taken from this machine are off by that much (its logs, an `--at` time \
             worked out here, the times of errors its workers record)",
        )
    } else {
        Check::ok(NAME, found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Level;

    #[test]
    fn clock_offsets_read_as_ahead_or_behind() {
        let c = clock_check(2_400, 2, None);
        assert_eq!(c.level, Level::Warn);
        assert!(c.found.contains("2.4 s behind Redis's"), "{}", c.found);
        let c = clock_check(-3, 1, Some(3));
        assert_eq!(c.level, Level::Ok);
        assert!(
            c.found
                .contains("3 ms ahead of Redis's (the furthest of 3 masters)"),
            "{}",
            c.found
        );
    }
}
