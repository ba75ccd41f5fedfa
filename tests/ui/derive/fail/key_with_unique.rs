use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "shop.sync", key = "shop_id", unique = ["shop_id"], unique_for = "10m")]
struct SyncShop {
    shop_id: u64,
}

fn main() {}
