//! The benchmark's job types and payload.

use postpone::Job;
use serde::{Deserialize, Serialize};

/// The payload of every workload: `{"order_id": <n>, "note": "<padding to ~100 bytes>"}`.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "bench")]
pub(crate) struct Order {
    pub(crate) order_id: u64,
    pub(crate) note: String,
}

/// JSON of 100 bytes for a 5-digit `order_id`.
const NOTE_LEN: usize = 72;

impl Order {
    pub(crate) fn new(order_id: u64) -> Self {
        Order {
            order_id,
            note: "x".repeat(NOTE_LEN),
        }
    }
}

/// `wait`: the payload of [`Order`], on a topic of its own, returning its order id to the waiter.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "bench.waited", output = u64)]
pub(crate) struct Waited {
    pub(crate) order_id: u64,
    pub(crate) note: String,
}

impl Waited {
    pub(crate) fn new(order_id: u64) -> Self {
        let Order { order_id, note } = Order::new(order_id);
        Waited { order_id, note }
    }
}

/// `drain --keep`: the payload of [`Order`], returning its order id, every finished job kept (with
/// its result) for an hour, up to a million of them.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "bench.kept", output = u64, keep = "1h", keep_last = 1000000)]
pub(crate) struct Kept {
    pub(crate) order_id: u64,
    pub(crate) note: String,
}

impl Kept {
    pub(crate) fn new(order_id: u64) -> Self {
        let Order { order_id, note } = Order::new(order_id);
        Kept { order_id, note }
    }
}

/// Job types on ten topics, for the idle workload (a worker registers the first `--topics` of them).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.0")]
pub(crate) struct Idle0 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.1")]
pub(crate) struct Idle1 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.2")]
pub(crate) struct Idle2 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.3")]
pub(crate) struct Idle3 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.4")]
pub(crate) struct Idle4 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.5")]
pub(crate) struct Idle5 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.6")]
pub(crate) struct Idle6 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.7")]
pub(crate) struct Idle7 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.8")]
pub(crate) struct Idle8 {}
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(topic = "bench.idle.9")]
pub(crate) struct Idle9 {}
