use postpone::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[serde(tag = "kind")]
#[job(topic = "notify", retry = ["0", "0", "1m"])]
enum Notify {
    Email { to: String },
    Sms { number: String },
    Push,
}

#[test]
fn compiles_and_runs() {
    assert_eq!(Notify::TOPIC, "notify");
    assert_eq!(Notify::retry_schedule().attempts(), 2);
}
