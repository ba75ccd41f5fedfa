use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "shop.sync", key_max_running = 0, key_rate = "10")]
struct SyncShop {
    shop_id: u64,
}

fn main() {}
