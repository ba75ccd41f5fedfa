// `retry` is indexed by attempt and slot 0 is never read: a non-zero slot 0 is almost always a list of
// delays between failures, which is `retry_delays`.
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "webhooks.send", retry = ["1m", "5m", "30m"])]
struct SendWebhook {
    url: String,
}

fn main() {}
