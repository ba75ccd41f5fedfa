//! Limits per key, with the type's key and without it (an enqueue gives the key).

use std::time::Duration;

use postpone::{Job, KeyLimits, RateLimit};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(
    topic = "shop.sync",
    key = "shop_id",
    key_max_running = 2,
    key_rate = "10/s"
)]
struct SyncShop {
    shop_id: u64,
}

#[derive(Serialize, Deserialize, Job)]
#[job(
    topic = "mail.send",
    key_rate = "600/m",
    rate = "100/s",
    max_running = 5
)]
struct SendMail {
    to: String,
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "reports", key_max_running = 1)]
enum Report {
    Daily,
    Weekly,
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "plain")]
struct Plain;

#[test]
fn compiles_and_runs() {
    assert_eq!(
        SyncShop::key_limits(),
        KeyLimits::new()
            .max_running(2)
            .rate(RateLimit::new(10, Duration::from_secs(1)))
    );
    assert_eq!(SyncShop { shop_id: 7 }.key(), Some("7".to_string()));

    assert_eq!(
        SendMail::key_limits(),
        KeyLimits::new().rate(RateLimit::new(600, Duration::from_secs(60)))
    );
    let mail = SendMail {
        to: "ops@acme.test".into(),
    };
    assert_eq!(mail.key(), None);
    assert_eq!(mail.to, "ops@acme.test");
    // The topic's own limits stay apart.
    assert_eq!(SendMail::rate_limit(), Some(RateLimit::per_second(100)));
    assert_eq!(SendMail::max_running(), Some(5));

    assert_eq!(Report::key_limits(), KeyLimits::new().max_running(1));
    assert_eq!(Report::key_limits().rate_per_key(), None);
    assert!(matches!(Report::Weekly, Report::Weekly | Report::Daily));

    assert!(Plain::key_limits().is_none());
}
