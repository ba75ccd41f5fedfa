use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(retry = ["0", "0", "1m"], lease = "30s")]
struct CloseOrder {
    id: u64,
}

fn main() {}
