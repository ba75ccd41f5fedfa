use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Tenant {
    id: u64,
}

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "shop.sync", key = "tenant")]
struct SyncShop {
    tenant: Tenant,
}

fn main() {}
