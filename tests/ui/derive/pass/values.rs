//! The values the derive generates, checked at run time.

use std::time::Duration;

use postpone::{Job, RetrySchedule};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "orders.close", retry = ["0", 0, "2m", "10m", "1500ms"], lease = "30s", timeout = "1d")]
struct CloseOrder {
    order_id: u64,
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "defaults")]
struct Defaults;

/// The topic may come through a `macro_rules!` fragment.
macro_rules! job_with_topic {
    ($name:ident, $topic:expr) => {
        #[derive(Serialize, Deserialize, Job)]
        #[job(topic = $topic, lease = "5m")]
        struct $name;
    };
}
job_with_topic!(FromMacro, "from.macro");

#[test]
fn compiles_and_runs() {
    assert_eq!(CloseOrder::TOPIC, "orders.close");
    let schedule = CloseOrder::retry_schedule();
    assert_eq!(schedule.attempts(), 4);
    assert_eq!(
        schedule.slots(),
        [0, 0, 120, 600]
            .map(Duration::from_secs)
            .into_iter()
            .chain([Duration::from_millis(1500)])
            .collect::<Vec<_>>(),
    );
    assert_eq!(CloseOrder::lease(), Some(Duration::from_secs(30)));
    assert_eq!(CloseOrder::timeout(), Some(Duration::from_secs(24 * 3600)));

    assert_eq!(Defaults::TOPIC, "defaults");
    assert_eq!(Defaults::retry_schedule(), RetrySchedule::default());
    assert_eq!(Defaults::lease(), None);
    assert_eq!(Defaults::timeout(), None);

    assert_eq!(FromMacro::TOPIC, "from.macro");
    assert_eq!(FromMacro::lease(), Some(Duration::from_secs(300)));

    assert!(postpone::validate_topic(CloseOrder::TOPIC).is_ok());
}
