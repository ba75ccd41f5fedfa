use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "notify", key = "customer_id")]
enum Notify {
    Email { customer_id: u64 },
    Sms { customer_id: u64 },
}

fn main() {}
