use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close", retry = ["0", "0", "2x", "10m"])]
struct CloseOrder {
    id: u64,
}

fn main() {}
