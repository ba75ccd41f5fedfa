use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close", timeout = "0ms")]
struct CloseOrder {
    id: u64,
}

fn main() {}
