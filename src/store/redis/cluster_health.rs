//! On a Redis Cluster: the masters known to be down, so that a call for one of their slots fails at once
//! instead of waiting out the response timeout (the cluster connection would retry it until then).
//!
//! A master is *suspected* when a call for one of its slots fails at the connection level (refused,
//! reset, timed out), and known down when, suspected or not answering at connect, it does not answer a
//! PING of its own within [`PROBE_TIMEOUT`]. While any master is suspected or down, a prober runs every
//! [`PROBE_EVERY`]: it reloads the slot map (`CLUSTER SLOTS` from any node: after a failover the slots
//! belong to the new master, and their calls go through again) and PINGs each suspected or down
//! master; one that answers is up again. So a call for a down master's slot fails at once, and works
//! again within about [`PROBE_EVERY`] of the master answering (or of its slots moving).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, ErrorKind, RedisError};

use super::cluster::{slot_map, Node};
use crate::error::{Error, Result};

/// How often the prober runs while a master is suspected or down.
const PROBE_EVERY: Duration = Duration::from_millis(100);
/// How long a probe's connect and PING may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);
/// How long the slot map reload may take.
const SLOTS_TIMEOUT: Duration = Duration::from_millis(500);

/// The masters known to be down, of one cluster store.
pub(super) struct Health {
    inner: Arc<Inner>,
}

struct Inner {
    conn: ClusterConnection,
    /// A seed's connection info: credentials and TLS for a probe connection to any node.
    template: ConnectionInfo,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `(first slot, last slot, master)`, sorted.
    slots: Vec<(u16, u16, Node)>,
    /// Masters known down, since when.
    down: HashMap<Node, Instant>,
    /// Masters a call failed on, to probe.
    suspected: Vec<Node>,
    probing: bool,
}

impl Health {
    /// Tracks the masters of `slots`; `down` did not answer at connect.
    pub(super) fn new(
        conn: ClusterConnection,
        template: ConnectionInfo,
        slots: Vec<(u16, u16, Node)>,
        down: Vec<Node>,
    ) -> Self {
        let now = Instant::now();
        let health = Health {
            inner: Arc::new(Inner {
                conn,
                template,
                state: Mutex::new(State {
                    slots,
                    down: down.into_iter().map(|node| (node, now)).collect(),
                    ..State::default()
                }),
            }),
        };
        if !health.inner.lock().down.is_empty() {
            Inner::probe_soon(&health.inner);
        }
        health
    }

    /// The master serving `key`'s slot, as `host:port`, by the slot map last loaded.
    pub(super) fn node_of(&self, key: &str) -> Option<String> {
        let state = self.inner.lock();
        let node = state.master_of(slot_of(key.as_bytes()))?;
        Some(format!("{}:{}", node.0, node.1))
    }

    /// Fails at once when the master serving `key`'s slot is known to be down.
    pub(super) fn check(&self, context: &'static str, key: &str) -> Result<()> {
        let slot = slot_of(key.as_bytes());
        let state = self.inner.lock();
        let Some(node) = state.master_of(slot) else {
            return Ok(());
        };
        match state.down.get(node) {
            None => Ok(()),
            Some(since) => Err(Error::backend(
                context,
                format!(
                    "Redis Cluster master {}:{} (serving slot {slot}) is down (known for {} ms); calls \
                     to it fail at once until it answers again or its slots move to another master",
                    node.0,
                    node.1,
                    since.elapsed().as_millis()
                ),
            )),
        }
    }

    /// Records a call for `key` that failed: at the connection level, its master is probed.
    pub(super) fn failed(&self, key: &str, e: &RedisError) {
        let connection_level = e.is_io_error()
            || e.is_unrecoverable_error()
            || e.kind() == ErrorKind::ClusterConnectionNotFound;
        if !connection_level {
            return;
        }
        let slot = slot_of(key.as_bytes());
        {
            let mut state = self.inner.lock();
            let Some(node) = state.master_of(slot).cloned() else {
                return;
            };
            if state.down.contains_key(&node) || state.suspected.contains(&node) {
                return;
            }
            tracing::debug!(master = %format!("{}:{}", node.0, node.1), error = %e, "postpone: a call to a Redis Cluster master failed; probing it");
            state.suspected.push(node);
        }
        Inner::probe_soon(&self.inner);
    }
}

impl State {
    fn master_of(&self, slot: u16) -> Option<&Node> {
        let i = self.slots.partition_point(|(first, _, _)| *first <= slot);
        let (first, last, node) = self.slots.get(i.checked_sub(1)?)?;
        (*first <= slot && slot <= *last).then_some(node)
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the prober unless it runs.
    fn probe_soon(this: &Arc<Self>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut state = this.lock();
        if !state.probing {
            state.probing = true;
            rt.spawn(prober(Arc::downgrade(this)));
        }
    }

    /// Whether `node` answers a PING on a connection of its own.
    async fn answers(&self, node: &Node) -> bool {
        let addr = match self.template.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: node.0.clone(),
                port: node.1,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(node.0.clone(), node.1),
        };
        let Ok(client) = redis::Client::open(self.template.clone().set_addr(addr)) else {
            return false;
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(PROBE_TIMEOUT))
            .set_response_timeout(Some(PROBE_TIMEOUT));
        let ping = async {
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("PING").query_async::<()>(&mut conn).await
        };
        matches!(
            tokio::time::timeout(PROBE_TIMEOUT * 2, ping).await,
            Ok(Ok(()))
        )
    }
}

/// Reloads the slot map and probes suspected and down masters, every [`PROBE_EVERY`], until none is
/// left (or the store is dropped).
async fn prober(inner: Weak<Inner>) {
    let mut first = true;
    loop {
        if !first {
            tokio::time::sleep(PROBE_EVERY).await;
        }
        first = false;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let slots = tokio::time::timeout(SLOTS_TIMEOUT, slot_map(&inner.conn)).await;
        let to_probe = {
            let mut state = inner.lock();
            if let Ok(Ok(slots)) = slots {
                if !slots.is_empty() {
                    state.slots = slots;
                }
            }
            let masters: Vec<Node> = state.slots.iter().map(|(_, _, n)| n.clone()).collect();
            // A master that serves no slot any more (failed over) needs no probe.
            let mut to_probe: Vec<Node> = state.down.keys().cloned().collect();
            to_probe.append(&mut state.suspected);
            to_probe.retain(|n| masters.contains(n));
            to_probe.sort();
            to_probe.dedup();
            state.down.retain(|n, _| masters.contains(n));
            if to_probe.is_empty() {
                state.probing = false;
                return;
            }
            to_probe
        };
        for node in to_probe {
            let up = inner.answers(&node).await;
            let mut state = inner.lock();
            let addr = format!("{}:{}", node.0, node.1);
            if up {
                if state.down.remove(&node).is_some() {
                    tracing::info!(master = %addr, "postpone: Redis Cluster master answers again");
                }
            } else if let std::collections::hash_map::Entry::Vacant(down) = state.down.entry(node) {
                tracing::warn!(master = %addr, "postpone: Redis Cluster master is down; calls for its slots fail at once until it answers again");
                down.insert(Instant::now());
            }
        }
    }
}

/// The hash slot of a key (CRC16/XMODEM of its hash tag, or of the whole key, mod 16384).
pub(super) fn slot_of(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|b| *b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged) % 16384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for byte in bytes {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // From CLUSTER KEYSLOT on Redis 7.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"bar"), 5061);
        assert_eq!(slot_of(b"{foo}.bar"), 12182);
        assert_eq!(slot_of(b"x{}y"), slot_of(b"x{}y"));
        assert_eq!(slot_of(b"{}foo"), crc16(b"{}foo") % 16384);
    }

    #[test]
    fn the_master_of_a_slot_is_found_by_range() {
        let node = |p: u16| ("127.0.0.1".to_owned(), p);
        let state = State {
            slots: vec![
                (0, 5460, node(1)),
                (5461, 10922, node(2)),
                (10923, 16383, node(3)),
            ],
            ..State::default()
        };
        assert_eq!(state.master_of(0), Some(&node(1)));
        assert_eq!(state.master_of(5460), Some(&node(1)));
        assert_eq!(state.master_of(5461), Some(&node(2)));
        assert_eq!(state.master_of(16383), Some(&node(3)));
        let gap = State {
            slots: vec![(0, 10, node(1)), (20, 30, node(2))],
            ..State::default()
        };
        assert_eq!(gap.master_of(15), None);
        assert_eq!(gap.master_of(31), None);
    }
}
