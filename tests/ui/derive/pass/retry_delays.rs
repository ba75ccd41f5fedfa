// `retry_delays`: the delays between failures, stored as the attempt-indexed schedule.
use std::time::Duration;

use postpone::{Job, RetrySchedule};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "webhooks.send", retry_delays = ["1m", "5m", "30m"])]
struct SendWebhook {
    url: String,
}

/// No retries at all: one attempt.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "once", retry_delays = [])]
struct Once;

#[test]
fn compiles_and_runs() {
    let m = |n: u64| Duration::from_secs(n * 60);
    assert_eq!(
        SendWebhook::retry_schedule(),
        RetrySchedule::between_failures([m(1), m(5), m(30)]).unwrap()
    );
    assert_eq!(
        SendWebhook::retry_schedule().to_string(),
        "[0, 0, 1m, 5m, 30m]"
    );
    assert_eq!(Once::retry_schedule().attempts(), 1);
}
