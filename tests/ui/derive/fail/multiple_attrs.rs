use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close")]
#[job(lease = "30s")]
struct CloseOrder {
    id: u64,
}

fn main() {}
