use postpone::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "shop.sync", key = "shop_id")]
struct SyncShop {
    shop_id: u64,
    region: String,
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "mail.send", key = "tenant")]
struct SendMail {
    tenant: String,
    to: String,
}

// `key = "type"` names the field `r#type`.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "events", key = "type")]
struct Event {
    r#type: char,
}

#[test]
fn compiles_and_runs() {
    let job = SyncShop {
        shop_id: 7,
        region: "eu".into(),
    };
    assert_eq!(job.key(), Some("7".to_string()));
    assert_eq!(job.region, "eu");
    let mail = SendMail {
        tenant: "acme".into(),
        to: "ops@acme.test".into(),
    };
    assert_eq!(mail.key().as_deref(), Some("acme"));
    assert_eq!(mail.to, "ops@acme.test");
    assert_eq!(Event { r#type: 'x' }.key(), Some("x".to_string()));
}
