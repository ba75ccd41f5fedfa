//! Batches in the operations API on Redis: the listing newest first and paged by offset, one batch's
//! status (`None` when unknown, a clear error for an impossible id), its members with their states,
//! named by topic and partition, paged by offset; and their JSON.

mod support;

use postpone::ops::{CallbackKind, MemberState};
use postpone::store::redis::RedisStore;
use postpone::Client;
use support::batches::{create, end, End};
use support::redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_batches_batch_and_batch_members() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "ops").await.unwrap();
    let client = Client::builder()
        .namespace("ops")
        .redis(&server.url())
        .await
        .unwrap();
    let ops = client.ops();
    assert!(ops.batches(0, 20).await.unwrap().batches.is_empty());

    // A member in partition 2 of its topic is stored in `<topic>#2`.
    let members = [
        ("ops.mail", "mail:1"),
        ("ops.mail", "mail:2"),
        ("ops.sms#2", "sms:1"),
    ];
    let callbacks = [(CallbackKind::Complete, "ops.runs", "report")];
    create(&store, "run:1", "first run", &members, &callbacks, true).await;
    end(
        &store,
        "ops.mail",
        &[("mail:1", End::Succeed), ("mail:2", End::Die("bounced"))],
    )
    .await;
    create(&store, "run:2", "", &[], &[], false).await;
    create(&store, "run:3", "", &[], &[], false).await;

    let page = ops.batches(0, 2).await.unwrap();
    let ids: Vec<&str> = page.batches.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["run:3", "run:2"]);
    assert_eq!(page.next, Some(2));
    let page = ops.batches(2, 2).await.unwrap();
    assert_eq!(page.batches.len(), 1);
    assert_eq!(page.next, None);
    let b = &page.batches[0];
    assert_eq!(b.id, "run:1");
    assert_eq!(b.description, "first run");
    assert_eq!(
        (b.total, b.succeeded, b.dead, b.cancelled, b.pending()),
        (3, 1, 1, 0, 1)
    );
    assert!(b.closed && !b.is_complete());
    assert_eq!(b.fired(CallbackKind::Complete), Some(false));
    assert_eq!(b.callbacks, [(CallbackKind::Complete, false)]);

    let one = ops.batch("run:1").await.unwrap().expect("run:1 exists");
    assert_eq!(&one, b);
    assert!(ops.batch("run:9").await.unwrap().is_none());
    let err = ops.batch("run 1").await.unwrap_err();
    assert!(
        matches!(err, postpone::Error::InvalidBatchId { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("invalid batch id"), "{err}");
    assert!(ops.batch_members("", 0, 10).await.is_err());

    let first = ops.batch_members("run:1", 0, 2).await.unwrap();
    let seen: Vec<(&str, u16, &str, MemberState)> = first
        .members
        .iter()
        .map(|m| (m.topic.as_str(), m.partition, m.id.as_str(), m.state))
        .collect();
    assert_eq!(
        seen,
        [
            ("ops.mail", 0, "mail:1", MemberState::Succeeded),
            ("ops.mail", 0, "mail:2", MemberState::Dead),
        ]
    );
    assert_eq!(first.next, Some(2));
    let rest = ops.batch_members("run:1", 2, 2).await.unwrap();
    assert_eq!(rest.next, None);
    let m = &rest.members[0];
    assert_eq!(
        (m.topic.as_str(), m.partition, m.id.as_str(), m.state),
        ("ops.sms", 2, "sms:1", MemberState::Pending)
    );
    assert!(ops
        .batch_members("run:9", 0, 10)
        .await
        .unwrap()
        .members
        .is_empty());

    // Their JSON: the field names the CLI's --json documents.
    let json = serde_json::to_value(&one).unwrap();
    assert_eq!(json["pending"], 1);
    assert_eq!(
        json["callbacks"],
        serde_json::json!([{"kind": "complete", "fired": false}])
    );
    assert!(json["completed_at"].is_null());
    assert!(json["created_at"].is_string());
    let json = serde_json::to_value(&rest).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "members": [{"topic": "ops.sms", "partition": 2, "id": "sms:1", "state": "pending"}],
            "next": null,
        })
    );
}
