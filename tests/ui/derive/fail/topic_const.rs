use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = TOPIC)]
struct CloseOrder {
    id: u64,
}

fn main() {}
