//! [`Ops::doctor`](crate::ops::Ops::doctor) on Redis: the version, `maxmemory-policy`, persistence and
//! fsync, and this machine's clock against the server's, of the one Redis or of every master of a
//! cluster; on a cluster also the slot coverage and the replicas.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{RedisError, Value};

use super::cluster::{Node, NodeConn};
use super::conn;
use super::exec::Conns;
use super::RedisStore;
use crate::error::{Error, Result};
use crate::ops::Check;

/// Hash slots of a Redis Cluster.
const SLOTS: u32 = 16384;

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
            Conns::Cluster(conn) => cluster_checks(conn).await,
        }
    }
}

/// What one server showed.
struct NodeFindings {
    /// Version, eviction policy, persistence.
    checks: Vec<Check>,
    /// The server's clock minus this machine's (ms).
    clock_offset_ms: i64,
    /// The round trip of the TIME command (ms): the offset is known to about half of it.
    round_trip_ms: i64,
}

/// Checks one server.
async fn node(conn: &mut (impl ConnectionLike + Send)) -> Result<NodeFindings, RedisError> {
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
    Ok(NodeFindings {
        checks: vec![version, eviction, persistence],
        clock_offset_ms: server_ms.saturating_sub(local_ms),
        round_trip_ms,
    })
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

/// AOF and its fsync policy, else RDB snapshots, else nothing.
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
                Check::ok(NAME, format!("AOF on, appendfsync {p}"))
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
fn clock_check(offset_ms: i64, round_trip_ms: i64, masters: Option<usize>) -> Check {
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

/// A range of slots with its master and how many replicas serve it, from `CLUSTER SLOTS`.
struct SlotRange {
    first: u16,
    last: u16,
    master: Node,
    replicas: usize,
}

fn node_of(value: &Value) -> Option<Node> {
    let Value::Array(fields) = value else {
        return None;
    };
    let host = match fields.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    match fields.get(1)? {
        Value::Int(port) => Some((host, u16::try_from(*port).ok()?)),
        _ => None,
    }
}

fn slot_ranges(reply: Value) -> Vec<SlotRange> {
    let Value::Array(ranges) = reply else {
        return Vec::new();
    };
    ranges
        .into_iter()
        .filter_map(|range| {
            let Value::Array(fields) = range else {
                return None;
            };
            let (Some(Value::Int(first)), Some(Value::Int(last))) = (fields.first(), fields.get(1))
            else {
                return None;
            };
            Some(SlotRange {
                first: u16::try_from(*first).ok()?,
                last: u16::try_from(*last).ok()?,
                master: node_of(fields.get(2)?)?,
                replicas: fields.iter().skip(3).filter_map(node_of).count(),
            })
        })
        .collect()
}

/// Slot coverage and replicas from `CLUSTER SLOTS`, then each master's checks, merged: a check that
/// came out the same on every master is one line, one that differs is one line per master.
async fn cluster_checks(conn: &ClusterConnection) -> Result<Vec<Check>> {
    // From any node: up to three tries, since the one picked may be down.
    let mut tries = 0;
    let reply = loop {
        let asked = conn
            .clone()
            .route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await;
        tries += 1;
        match asked {
            Ok(reply) => break reply,
            Err(e) if tries >= 3 => {
                return Err(Error::backend(
                    "reading the cluster's slot map (CLUSTER SLOTS)",
                    e,
                ))
            }
            Err(_) => {}
        }
    };
    let ranges = slot_ranges(reply);
    let mut masters: Vec<Node> = ranges.iter().map(|r| r.master.clone()).collect();
    masters.sort();
    masters.dedup();
    let mut checks = vec![
        coverage(&ranges, masters.len()),
        replicas(&ranges, &masters),
    ];

    let mut per_master = Vec::new();
    let mut clock = None::<(i64, i64)>;
    for (host, port) in &masters {
        let mut node_conn = NodeConn::new(conn, host, *port);
        let addr = node_conn.addr();
        match node(&mut node_conn).await {
            Ok(found) => {
                if clock.is_none_or(|(o, _)| found.clock_offset_ms.abs() > o.abs()) {
                    clock = Some((found.clock_offset_ms, found.round_trip_ms));
                }
                per_master.push((addr, found.checks));
            }
            Err(e) => checks.push(Check::bad(
                format!("master {addr}"),
                format!("did not answer: {e}"),
                "bring it back or fail it over to a replica: the topics and partitions it serves stop \
                 until then",
            )),
        }
    }
    checks.extend(merge(per_master));
    if let Some((offset, round_trip)) = clock {
        checks.push(clock_check(offset, round_trip, Some(masters.len())));
    }
    Ok(checks)
}

fn coverage(ranges: &[SlotRange], masters: usize) -> Check {
    const NAME: &str = "cluster slots";
    let mut served = vec![false; SLOTS as usize];
    for r in ranges {
        for s in r.first..=r.last.min((SLOTS - 1) as u16) {
            served[usize::from(s)] = true;
        }
    }
    let covered = served.iter().filter(|s| **s).count();
    if covered == SLOTS as usize {
        Check::ok(
            NAME,
            format!("all {SLOTS} slots served by {masters} masters"),
        )
    } else {
        Check::bad(
            NAME,
            format!(
                "{covered} of {SLOTS} slots served ({} unserved)",
                SLOTS as usize - covered
            ),
            "assign the unserved slots (redis-cli --cluster fix) or bring their master back: topics \
             stored there can be neither enqueued to nor claimed",
        )
    }
}

fn replicas(ranges: &[SlotRange], masters: &[Node]) -> Check {
    const NAME: &str = "cluster replicas";
    let alone: Vec<String> = masters
        .iter()
        .filter(|m| ranges.iter().any(|r| &r.master == *m && r.replicas == 0))
        .map(|(h, p)| format!("{h}:{p}"))
        .collect();
    if alone.is_empty() {
        Check::ok(
            NAME,
            format!("every master ({}) has a replica", masters.len()),
        )
    } else {
        Check::warn(
            NAME,
            format!(
                "{} of {} masters without a replica: {}",
                alone.len(),
                masters.len(),
                alone.join(", ")
            ),
            "give every master a replica (redis-cli --cluster add-node --cluster-slave): when a master \
             without one fails, its topics stop until it is back",
        )
    }
}

/// Per-master checks as lines: one per check when every master agrees, else one per master.
fn merge(per_master: Vec<(String, Vec<Check>)>) -> Vec<Check> {
    let Some((_, first)) = per_master.first() else {
        return Vec::new();
    };
    let n = per_master.len();
    let mut out = Vec::new();
    for (i, check) in first.iter().enumerate() {
        let same = per_master.iter().all(|(_, checks)| {
            checks
                .get(i)
                .is_some_and(|c| c.level == check.level && c.found == check.found)
        });
        if same {
            let mut c = check.clone();
            if n > 1 {
                c.found = format!("{} (all {n} masters)", c.found);
            }
            out.push(c);
        } else {
            for (addr, checks) in &per_master {
                if let Some(c) = checks.get(i) {
                    let mut c = c.clone();
                    c.name = format!("{} {addr}", c.name);
                    out.push(c);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Level;

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

    #[test]
    fn masters_that_agree_make_one_line() {
        let a = vec![Check::ok("maxmemory-policy", "noeviction")];
        let b = vec![Check::bad("maxmemory-policy", "allkeys-lru", "fix")];
        let merged = merge(vec![("a:1".into(), a.clone()), ("b:2".into(), a.clone())]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].found, "noeviction (all 2 masters)");
        let merged = merge(vec![("a:1".into(), a), ("b:2".into(), b)]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[1].name, "maxmemory-policy b:2");
        assert_eq!(merged[1].level, Level::Bad);
    }

    #[test]
    fn slot_coverage_counts_every_range() {
        let node = |p| ("h".to_owned(), p);
        let ranges = vec![
            SlotRange {
                first: 0,
                last: 8191,
                master: node(1),
                replicas: 1,
            },
            SlotRange {
                first: 8192,
                last: 16383,
                master: node(2),
                replicas: 0,
            },
        ];
        assert_eq!(coverage(&ranges, 2).level, Level::Ok);
        assert_eq!(coverage(&ranges[..1], 1).level, Level::Bad);
        let r = replicas(&ranges, &[node(1), node(2)]);
        assert_eq!(r.level, Level::Warn);
        assert!(r.found.contains("h:2"), "{}", r.found);
    }
}
