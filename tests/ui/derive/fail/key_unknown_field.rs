use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "shop.sync", key = "shop")]
struct SyncShop {
    shop_id: u64,
    region: String,
}

fn main() {}
