// One retry schedule per type: `retry` or `retry_delays`, not both.
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "webhooks.send", retry = ["0", "0", "1m"], retry_delays = ["1m"])]
struct SendWebhook {
    url: String,
}

fn main() {}
