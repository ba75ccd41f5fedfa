use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close", partitions = 0)]
struct CloseOrder {
    id: u64,
}

fn main() {}
