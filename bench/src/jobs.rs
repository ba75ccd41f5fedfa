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

/// SplitMix64: enough randomness for due times and job mixes, without a dependency.
pub(crate) fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The `steady` workload's mix, the same on every run and known to both processes by `order_id`
/// alone: 10 % of the jobs delayed by 0-5 s, 1 % failing their first attempt.
pub(crate) mod steady {
    use super::splitmix;

    /// The longest delay of a delayed job, ms.
    pub(crate) const MAX_DELAY_MS: u64 = 5_000;

    /// Job `order_id`'s delay, ms: 0 for 90 % of the jobs, else uniform in `0..MAX_DELAY_MS`.
    pub(crate) fn delay_ms(order_id: u64) -> Option<u64> {
        let r = splitmix(order_id ^ 0x5eed_de1a);
        r.is_multiple_of(10).then_some((r / 10) % MAX_DELAY_MS)
    }

    /// Whether job `order_id` fails its first attempt (and then succeeds).
    pub(crate) fn fails_once(order_id: u64) -> bool {
        splitmix(order_id ^ 0x5eed_fa11).is_multiple_of(100)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn shares() {
            let n = 100_000;
            let delayed = (0..n).filter_map(delay_ms).collect::<Vec<_>>();
            let failing = (0..n).filter(|&k| fails_once(k)).count();
            assert!(
                (9_500..10_500).contains(&delayed.len()),
                "{}",
                delayed.len()
            );
            assert!((900..1_100).contains(&failing), "{failing}");
            assert!(delayed.iter().all(|&d| d < MAX_DELAY_MS));
            let mean = delayed.iter().sum::<u64>() as f64 / delayed.len() as f64;
            assert!((2_400.0..2_600.0).contains(&mean), "{mean}");
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

/// `fairness`: the payload of [`Order`], with its tenant's key (its key for fairness) and, for a quiet
/// tenant's job, when it was enqueued (µs on the harness's monotonic clock).
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "bench.fair", key = "key")]
pub(crate) struct Tenant {
    pub(crate) order_id: u64,
    pub(crate) note: String,
    pub(crate) key: String,
    pub(crate) enqueued_us: u64,
}

/// `fairness --no-keys`: [`Tenant`]'s payload on a topic of its own, with no key for fairness (the
/// tenant only in the payload): a plain queue under the same load.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "bench.fair_plain")]
pub(crate) struct PlainTenant {
    pub(crate) order_id: u64,
    pub(crate) note: String,
    pub(crate) key: String,
    pub(crate) enqueued_us: u64,
}

/// What `fairness` needs of its job type, keyed ([`Tenant`]) or not ([`PlainTenant`]).
pub(crate) trait TenantJob: postpone::Job<Output = ()> + Clone {
    fn new(order_id: u64, key: &str, enqueued_us: u64) -> Self;
    fn tenant(&self) -> &str;
    fn enqueued_us(&self) -> u64;
}

macro_rules! tenant_job {
    ($ty:ident) => {
        impl TenantJob for $ty {
            fn new(order_id: u64, key: &str, enqueued_us: u64) -> Self {
                let Order { order_id, note } = Order::new(order_id);
                $ty {
                    order_id,
                    note,
                    key: key.to_owned(),
                    enqueued_us,
                }
            }
            fn tenant(&self) -> &str {
                &self.key
            }
            fn enqueued_us(&self) -> u64 {
                self.enqueued_us
            }
        }
    };
}
tenant_job!(Tenant);
tenant_job!(PlainTenant);

/// `batch`: the success callback of the batch (how many members it had).
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "bench.batch_done")]
pub(crate) struct BatchDone {
    pub(crate) members: u64,
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
