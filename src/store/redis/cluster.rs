//! Redis Cluster: connecting from seed nodes, and the checks run on every master.
//!
//! No pool: redis-rs's `ClusterConnection` is already multiplexed and `Clone` (clones share one
//! connection per node and one slot map), follows MOVED and ASK, refreshes its slot map when the
//! topology changes and reconnects to a node by itself. A bb8 pool of cluster connections would multiply
//! the connections to every node and the slot-map refreshes, and buy no concurrency a multiplexed
//! connection does not already have.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClientBuilder;
pub(super) use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, RedisError, RedisFuture, Value};

use super::cluster_health::Health;
use super::conn;
use crate::error::{Error, Result};

/// A connected cluster.
pub(super) struct Connected {
    /// The cluster connection.
    pub(super) conn: ClusterConnection,
    /// One client per seed, for the hint subscription.
    pub(super) seed_clients: Vec<redis::Client>,
    /// `host:port,host:port,...` of the seeds (never the credentials).
    pub(super) addrs: String,
    /// Masters known to be down.
    pub(super) health: Health,
}

/// Connects to the cluster of the seed `urls` (at least one), checks its masters' versions, and makes a
/// client per seed. Each command, retries and redirections included, fails after `response_timeout`.
/// Errors never contain a password.
pub(super) async fn connect<S: AsRef<str>>(
    urls: &[S],
    connect_timeout: Duration,
    response_timeout: Duration,
) -> Result<Connected> {
    if urls.is_empty() {
        return Err(Error::InvalidUrl {
            reason:
                "no cluster nodes given: pass at least one seed URL, e.g. redis://127.0.0.1:7000"
                    .into(),
        });
    }
    let redact = |e: RedisError| {
        urls.iter()
            .fold(e.to_string(), |msg, u| conn::redact(&msg, u.as_ref()))
    };
    let infos = urls
        .iter()
        .map(|u| conn::parse_url(u.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let addrs = infos
        .iter()
        .map(conn::addr_of)
        .collect::<Vec<_>>()
        .join(",");
    let client = ClusterClientBuilder::new(infos.clone())
        .connection_timeout(connect_timeout)
        .response_timeout(response_timeout)
        .build()
        .map_err(|e| Error::InvalidUrl { reason: redact(e) })?;
    let template = infos[0].clone();
    let seed_clients = infos
        .into_iter()
        .map(redis::Client::open)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::InvalidUrl { reason: redact(e) })?;
    let conn = client
        .get_async_connection()
        .await
        .map_err(|e| Error::Connect {
            addr: addrs.clone(),
            source: redact(e).into(),
        })?;
    let (slots, down) = check_versions(&conn, &addrs).await?;
    let health = Health::new(conn.clone(), template, slots, down);
    Ok(Connected {
        conn,
        seed_clients,
        addrs,
        health,
    })
}

/// A node, as `(host, port)`.
pub(super) type Node = (String, u16);

/// Sends `cmd` to the master of `key`'s slot (any master without a key): a FUNCTION LOAD goes to the one
/// node whose FCALL found no function, not to every master (as redis-rs routes it by itself).
pub(super) async fn send_to_node_of(
    conn: &ClusterConnection,
    cmd: &Cmd,
    key: Option<&str>,
) -> Result<Value, RedisError> {
    let node = match key {
        Some(key) => SingleNodeRoutingInfo::SpecificNode(Route::new(
            super::cluster_health::slot_of(key.as_bytes()),
            SlotAddr::Master,
        )),
        None => SingleNodeRoutingInfo::RandomPrimary,
    };
    conn.clone()
        .route_command(cmd.clone(), RoutingInfo::SingleNode(node))
        .await
}

/// `CLUSTER SLOTS` from any node: up to three nodes tried, since the one picked may be down.
pub(super) async fn cluster_slots(conn: &ClusterConnection) -> Result<Value, RedisError> {
    let mut tries = 0;
    loop {
        let asked = conn
            .clone()
            .route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await;
        tries += 1;
        match asked {
            Ok(reply) => return Ok(reply),
            Err(e) if tries >= 3 => return Err(e),
            Err(_) => {}
        }
    }
}

/// The slot map: `(first slot, last slot, master)` per range, from [`cluster_slots`].
pub(super) async fn slot_map(
    conn: &ClusterConnection,
) -> Result<Vec<(u16, u16, Node)>, RedisError> {
    let reply = cluster_slots(conn).await?;
    let mut out = Vec::new();
    if let Value::Array(ranges) = reply {
        for range in ranges {
            let Value::Array(fields) = range else {
                continue;
            };
            let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                continue;
            };
            let host = match master.first() {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(Value::SimpleString(s)) => s.clone(),
                _ => continue,
            };
            let Some(Value::Int(port)) = master.get(1) else {
                continue;
            };
            let (Ok(first), Ok(last), Ok(port)) = (
                u16::try_from(*first),
                u16::try_from(*last),
                u16::try_from(*port),
            ) else {
                continue;
            };
            out.push((first, last, (host, port)));
        }
    }
    out.sort();
    Ok(out)
}

/// The masters of a slot map, each once, sorted.
fn masters_of(slots: &[(u16, u16, Node)]) -> Vec<Node> {
    let mut out: Vec<Node> = slots.iter().map(|(_, _, node)| node.clone()).collect();
    out.sort();
    out.dedup();
    out
}

/// A connection to each master of the cluster, from its slot map.
pub(super) async fn master_conns(conn: &ClusterConnection) -> Result<Vec<NodeConn>, RedisError> {
    let slots = slot_map(conn).await?;
    Ok(masters_of(&slots)
        .iter()
        .map(|(host, port)| NodeConn::new(conn, host, *port))
        .collect())
}

/// The cluster connection, with every command sent to one node.
pub(super) struct NodeConn {
    conn: ClusterConnection,
    host: String,
    port: u16,
}

impl NodeConn {
    pub(super) fn new(conn: &ClusterConnection, host: &str, port: u16) -> Self {
        NodeConn {
            conn: conn.clone(),
            host: host.to_owned(),
            port,
        }
    }

    /// `host:port`.
    pub(super) fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl ConnectionLike for NodeConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
            host: self.host.clone(),
            port: self.port,
        });
        Box::pin(self.conn.route_command(cmd.clone(), routing))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _pipeline: &'a redis::Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async {
            Err(RedisError::from((
                redis::ErrorKind::Client,
                "postpone sends no pipelines to one cluster node",
            )))
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// Checks the version of every master (6.2 or later). A master that cannot be asked is logged and
/// skipped: its partitions fail on their own, clearly, while the others work. Fails when no master
/// answers at all. Returns the slot map, and the masters that did not answer.
async fn check_versions(
    conn: &ClusterConnection,
    seeds: &str,
) -> Result<(Vec<(u16, u16, Node)>, Vec<Node>)> {
    let slots = slot_map(conn).await.map_err(|e| Error::Connect {
        addr: seeds.to_owned(),
        source: Box::new(e),
    })?;
    let mut answered = 0;
    let mut last_error = None;
    let mut down = Vec::new();
    for (host, port) in masters_of(&slots) {
        let mut node = NodeConn::new(conn, &host, port);
        match conn::server_version(&mut node).await {
            Ok(version) => {
                conn::require_6_2(&version)?;
                answered += 1;
                tracing::debug!(addr = %node.addr(), %version, "postpone: cluster master checked");
            }
            Err(e) => {
                tracing::warn!(addr = %node.addr(), error = %e, "postpone: a Redis Cluster master did not answer; the topics and partitions it serves will fail until it is back");
                last_error = Some(e);
                down.push((host, port));
            }
        }
    }
    match (answered, last_error) {
        (0, Some(e)) => Err(Error::Connect {
            addr: seeds.to_owned(),
            source: Box::new(e),
        }),
        _ => Ok((slots, down)),
    }
}

/// At worker start: every master's version, and its eviction policy (warned about unless
/// `noeviction`). Masters that do not answer are logged and skipped, so that a worker can start while one
/// master is down and serve the topics and partitions of the others.
pub(super) async fn check_worker_start(conn: &ClusterConnection) -> Result<()> {
    let masters = match slot_map(conn).await {
        Ok(slots) => masters_of(&slots),
        Err(e) => {
            tracing::warn!(error = %e, "postpone: could not list the Redis Cluster masters (CLUSTER SLOTS) at worker start; their versions and eviction policies are unchecked");
            return Ok(());
        }
    };
    for (host, port) in masters {
        let mut node = NodeConn::new(conn, &host, port);
        let addr = node.addr();
        let version = match conn::server_version(&mut node).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(%addr, error = %e, "postpone: a Redis Cluster master did not answer at worker start; the topics and partitions it serves will fail until it is back");
                continue;
            }
        };
        conn::require_6_2(&version)?;
        conn::warn_about_eviction(&addr, conn::eviction_policy(&mut node).await);
    }
    Ok(())
}
