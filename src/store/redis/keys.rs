//! Key names. One hash tag per topic, so every script touches one slot (Redis Cluster safe):
//!
//! ```text
//! postpone:{<ns>:<topic>}:due           zset  id -> due time (ms)
//! postpone:{<ns>:<topic>}:active        zset  id -> lease deadline (ms)
//! postpone:{<ns>:<topic>}:jobs          hash  id -> record (due and active jobs)
//! postpone:{<ns>:<topic>}:leases        hash  id -> lease token (active jobs)
//! postpone:{<ns>:<topic>}:stalls        hash  id -> expired leases so far
//! postpone:{<ns>:<topic>}:cancels       set   ids cancelled while active
//! postpone:{<ns>:<topic>}:dead          zset  id -> died at (ms)
//! postpone:{<ns>:<topic>}:dead_jobs     hash  id -> final record
//! postpone:{<ns>:<topic>}:dead_reason   hash  id -> why it died
//! postpone:{<ns>:<topic>}:dead_pending  zset  id -> when its hook may next run (ms)
//! postpone:{<ns>:<topic>}:stats         hash  counters, and `seq` for lease tokens
//! postpone:{<ns>}:wake                  pub/sub channel: "<due ms> <topic>"
//! ```
//!
//! A partition of a partitioned topic is a topic of its own here, named `<topic>#<p>`
//! (`postpone:{<ns>:<topic>#<p>}:due`, ...), so each partition has its own hash tag and slot.
//!
//! Ids are only ever members and fields, never part of a key; namespaces and topics are validated to
//! `[A-Za-z0-9_.-]` (plus exactly one `#<0-1023>` partition suffix), so no input can reach another
//! topic's keys or break the hash tag.

use crate::error::Result;
use crate::partition::validate_store_topic;

/// The suffixes of a topic's keys, in the order every script receives them as `KEYS` (see
/// `scripts/prelude.lua`). `enqueue_one.lua` gets only the first three.
const SUFFIXES: [&str; 11] = [
    "due",
    "active",
    "jobs",
    "leases",
    "stalls",
    "cancels",
    "dead",
    "dead_jobs",
    "dead_reason",
    "dead_pending",
    "stats",
];

/// Index of `dead_pending` in [`SUFFIXES`].
pub(super) const DEAD_PENDING: usize = 9;

/// The keys of one topic, in script order.
#[derive(Debug, Clone)]
pub(super) struct TopicKeys(pub(super) [String; 11]);

impl TopicKeys {
    /// The keys of `topic` (a topic or one partition of it) in namespace `ns` (already validated);
    /// fails on an invalid name.
    pub(super) fn new(ns: &str, topic: &str) -> Result<Self> {
        validate_store_topic(topic)?;
        Ok(TopicKeys(
            SUFFIXES.map(|s| format!("postpone:{{{ns}:{topic}}}:{s}")),
        ))
    }
}

/// The namespace's wake-up channel.
pub(super) fn wake_channel(ns: &str) -> String {
    format!("postpone:{{{ns}}}:wake")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let k = TopicKeys::new("shop", "orders.close").unwrap();
        assert_eq!(k.0[0], "postpone:{shop:orders.close}:due");
        assert_eq!(
            k.0[DEAD_PENDING],
            "postpone:{shop:orders.close}:dead_pending"
        );
        assert_eq!(k.0[10], "postpone:{shop:orders.close}:stats");
        assert_eq!(wake_channel("shop"), "postpone:{shop}:wake");
        assert!(TopicKeys::new("shop", "a}b").is_err());
        let p = TopicKeys::new("shop", "orders.close#2").unwrap();
        assert_eq!(p.0[0], "postpone:{shop:orders.close#2}:due");
        for bad in [
            "orders#",
            "orders#01",
            "orders#1024",
            "orders#1}x",
            "orders#1#1",
        ] {
            assert!(TopicKeys::new("shop", bad).is_err(), "{bad}");
        }
    }
}
