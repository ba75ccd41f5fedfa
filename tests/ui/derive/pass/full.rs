use postpone::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "orders.close", retry = ["0", "0", "2m", "10m"], lease = "30s", timeout = "5m")]
struct CloseOrder {
    order_id: u64,
}

/// Keys in any order, a bare `0`, a trailing comma, other attributes around it.
#[derive(Debug, Serialize, Deserialize, Job)]
#[serde(rename_all = "camelCase")]
#[job(
    timeout = "1d",
    retry = [0, "500ms", "30s", "5m", "2h", "1d", "365d"],
    topic = "Webhooks_v2.retry-9",
)]
#[allow(dead_code)]
pub struct SendWebhook {
    url: String,
    body: Vec<u8>,
}

/// A partitioned topic.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "hot", partitions = 16)]
struct Hot;

/// Unit and tuple structs are jobs too.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "tick")]
struct Tick;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "pair")]
struct Pair(u32, String);

#[test]
fn compiles_and_runs() {
    assert_eq!(Hot::partitions(), 16);
    assert_eq!(Tick::partitions(), 1);
}
