use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "shop.sync", key = shop_id)]
struct SyncShop {
    shop_id: u64,
}

fn main() {}
