//! A unique type whose jobs also have a key for fairness, and limits per key.

use postpone::{Job, KeyLimits};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(
    topic = "shop.sync",
    key = "tenant",
    key_max_running = 1,
    unique = ["shop_id"],
    unique_for = "10m"
)]
struct SyncShop {
    tenant: String,
    shop_id: u64,
}

#[test]
fn compiles_and_runs() {
    let job = SyncShop {
        tenant: "acme".into(),
        shop_id: 7,
    };
    assert_eq!(job.key(), Some("acme".to_string()));
    assert!(job.unique().is_some());
    assert_eq!(SyncShop::key_limits(), KeyLimits::new().max_running(1));
}
