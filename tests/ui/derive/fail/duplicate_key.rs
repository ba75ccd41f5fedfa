use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close", lease = "30s", lease = "1m")]
struct CloseOrder {
    id: u64,
}

fn main() {}
