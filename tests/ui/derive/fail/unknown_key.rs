use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close", retries = ["0", "0", "1m"])]
struct CloseOrder {
    id: u64,
}

fn main() {}
