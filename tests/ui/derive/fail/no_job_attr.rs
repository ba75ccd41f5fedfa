use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
struct CloseOrder {
    order_id: u64,
}

fn main() {}
