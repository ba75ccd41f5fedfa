use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close", lease = "2d")]
struct CloseOrder {
    id: u64,
}

fn main() {}
