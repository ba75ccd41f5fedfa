//! The batch builder's validation and encoding, before anything reaches a store.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::*;
use crate::Unique;

#[derive(Serialize, Deserialize)]
struct Email {
    to: String,
}

impl Job for Email {
    const TOPIC: &'static str = "emails";
    type Output = ();
}

#[derive(Serialize, Deserialize)]
struct Sharded {
    n: u64,
}

impl Job for Sharded {
    const TOPIC: &'static str = "sharded";
    type Output = ();
    fn partitions() -> u16 {
        4
    }
}

#[derive(Serialize, Deserialize)]
struct Done;

impl Job for Done {
    const TOPIC: &'static str = "done";
    type Output = ();
}

fn email(n: u64) -> Email {
    Email {
        to: format!("{n}@example.com"),
    }
}

fn meta_of(job: &BatchJob) -> Meta {
    Record::decode(&job.job.record).unwrap().meta
}

#[test]
fn members_and_callbacks_carry_the_batch_id_and_go_to_their_partition() {
    let client = Client::memory();
    let b = client
        .batch()
        .id("billing:2026-11")
        .on_complete(Done)
        .add(email(1))
        .add_all((0..20).map(|n| Sharded { n }))
        .add(
            EnqueueItem::new(email(2))
                .id("email:2")
                .meta("tenant", "acme"),
        );
    assert!(b.error.is_none(), "{:?}", b.error);
    assert_eq!(b.members.len(), 22);
    for job in b.members.iter().chain(b.callbacks.values()) {
        assert_eq!(
            meta_of(job).get(BATCH_KEY).map(String::as_str),
            Some("billing:2026-11")
        );
    }
    let tagged = &b.members[21];
    assert_eq!(
        (tagged.topic.as_str(), tagged.job.id.as_str()),
        ("emails", "email:2")
    );
    assert_eq!(
        meta_of(tagged).get("tenant").map(String::as_str),
        Some("acme")
    );
    for job in &b.members[1..21] {
        let p = partition_of(&job.job.id, 4);
        assert_eq!(job.topic, store_topic("sharded", p));
        assert_eq!(user_topic(&job.topic), "sharded");
    }
    assert!(b.members[1..21].iter().any(|j| j.topic != "sharded"));
    // Generated ids are random in full (22 characters), so never an unrelated live job.
    assert_eq!(b.members[0].job.id.len(), 22);
    assert_eq!(
        b.stamp.topics.iter().collect::<Vec<_>>(),
        [(&"done", &1), (&"emails", &1), (&"sharded", &4)]
    );
}

#[test]
fn an_id_set_after_members_is_stamped_on_every_one() {
    let client = Client::memory();
    let b = client.batch().add(email(1)).on_death(Done).id("late:1");
    assert!(b.error.is_none());
    assert_eq!(b.id, "late:1");
    for job in b.members.iter().chain(b.callbacks.values()) {
        assert_eq!(
            meta_of(job).get(BATCH_KEY).map(String::as_str),
            Some("late:1")
        );
    }
}

#[test]
fn a_second_callback_of_a_kind_replaces_the_first() {
    let client = Client::memory();
    let b = client
        .batch()
        .on_success(EnqueueItem::new(Done).id("first"))
        .on_success(EnqueueItem::new(Done).id("second"));
    assert_eq!(b.callbacks.len(), 1);
    assert_eq!(b.callbacks[&CallbackKind::Success].job.id, "second");
}

#[tokio::test]
async fn the_first_error_is_kept_and_nothing_is_stored() {
    let client = Client::memory();
    let e = client
        .batch()
        .id("bad id")
        .add(EnqueueItem::new(email(1)).id(""))
        .enqueue()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidBatchId { .. }), "{e}");
    assert!(e.to_string().contains("A-Z a-z 0-9 _ . : -"), "{e}");

    let e = client
        .batch()
        .add(email(1))
        .add(EnqueueItem::new(email(2)).id(""))
        .add(EnqueueItem::new(email(3)).meta("a b", "x"))
        .open()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidId { .. }), "{e}");
}

#[tokio::test]
async fn jobs_that_cannot_be_members_are_refused_clearly() {
    let client = Client::memory();
    let unique = EnqueueItem::new(email(1)).unique(Unique::new("k", Duration::from_secs(60)));
    let e = client.batch().add(unique).enqueue().await.unwrap_err();
    assert!(matches!(e, Error::InvalidBatch { .. }), "{e}");
    assert!(e.to_string().contains("unique or debounce key"), "{e}");

    let replace = EnqueueItem::new(email(1)).id("e:1").replace();
    let e = client
        .batch()
        .on_complete(replace)
        .enqueue()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("cannot replace"), "{e}");

    let long = "d".repeat(NewBatch::MAX_DESCRIPTION + 1);
    let e = client
        .batch()
        .description(long)
        .enqueue()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("description"), "{e}");

    let big = EnqueueItem::new(Email {
        to: "x".repeat(crate::DEFAULT_MAX_PAYLOAD),
    });
    let e = client.batch().add(big).enqueue().await.unwrap_err();
    assert!(matches!(e, Error::PayloadTooLarge { .. }), "{e}");
}

#[tokio::test]
async fn a_handle_refuses_a_bad_id_and_bad_members() {
    let client = Client::memory();
    let e = client.batch_handle("").unwrap_err();
    assert!(matches!(e, Error::InvalidBatchId { .. }), "{e}");
    let batch = client.batch_handle("b:1").unwrap();
    assert_eq!(batch.id(), "b:1");
    let e = batch
        .add(EnqueueItem::new(email(1)).id("x".repeat(600)))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidId { .. }), "{e}");
}

#[test]
fn too_many_members_say_what_to_do() {
    let e = too_many("b", MAX_BATCH_ADD + 1);
    assert!(e.to_string().contains("open the batch"), "{e}");
}
