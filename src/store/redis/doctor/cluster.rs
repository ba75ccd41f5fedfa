//! The cluster's side of the checks: slot coverage and replicas from `CLUSTER SLOTS`, then every
//! master's checks, merged into one line each where the masters agree.

use redis::cluster_async::ClusterConnection;
use redis::Value;

use super::super::cluster::{cluster_slots, Node, NodeConn};
use super::{clock_check, node};
use crate::check::Check;
use crate::error::{Error, Result};

/// Hash slots of a Redis Cluster.
const SLOTS: u32 = 16384;

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
pub(super) async fn checks(conn: &ClusterConnection) -> Result<Vec<Check>> {
    let reply = cluster_slots(conn)
        .await
        .map_err(|e| Error::backend("reading the cluster's slot map (CLUSTER SLOTS)", e))?;
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
    use crate::check::Level;

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
