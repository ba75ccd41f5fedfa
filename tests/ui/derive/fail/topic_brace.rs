use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.{id}")]
struct CloseOrder {
    id: u64,
}

fn main() {}
