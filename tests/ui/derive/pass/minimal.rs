use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

#[test]
fn compiles_and_runs() {
    assert_eq!(<CloseOrder as postpone::Job>::TOPIC, "orders.close");
}
