use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close", retry = ["0", "0", "5"])]
struct CloseOrder {
    id: u64,
}

fn main() {}
