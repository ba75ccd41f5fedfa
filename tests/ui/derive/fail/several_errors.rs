use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "a b", retry = ["0", "2x"], timeout = "0")]
struct CloseOrder {
    id: u64,
}

fn main() {}
