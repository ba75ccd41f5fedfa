//! Fault suite: hostile input. Ids with hash-tag braces, colons, globs, spaces and unicode; 10 KB
//! strings; oversized and undecodable payloads; the script cache and function libraries flushed while workers run; two
//! namespaces whose names look alike.

mod fault;
mod support;

use std::time::Duration;

use fault::{Expect, Rig, Spec, Work};
use postpone::{Client, EnqueueItem, Error, Job};
use serde::{Deserialize, Serialize};
use support::redis_server::RedisServer;

/// Same topic as [`Work`], but a payload that does not decode into it.
#[derive(Serialize, Deserialize, Job)]
#[job(topic = "fault.work")]
struct Wrong {
    sleep_ms: String,
}

fn hostile_ids() -> Vec<String> {
    let mut ids: Vec<String> = [
        "{x}",
        "}{",
        "{fault:fault.work}:jobs",
        "postpone:{fault:fault.work}:due",
        "a:b:c",
        "*",
        "?*[a-z]",
        "with space",
        "  leading and trailing  ",
        "zoé ☃ 日本語 🎉",
        "\u{202e}right-to-left",
        "%41%",
        "-1",
        "1e3",
        "null",
        "'quote\"",
        "back\\slash",
        "tab\u{a0}nbsp",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    ids.push("é".repeat(256)); // 512 bytes, the longest id
    ids.push("x".repeat(512));
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_ids_and_payloads_run_correctly_while_the_script_cache_is_flushed() {
    let _serial = fault::serial().await;
    let mut rig = Rig::start("hostile", RedisServer::builder()).await;
    let ten_kb = "☃".repeat(10 * 1024 / 3);
    let ids = hostile_ids();
    let items = ids
        .iter()
        .map(|id| {
            EnqueueItem::new(Work {
                sleep_ms: 1,
                text: ten_kb.clone(),
                ..Work::default()
            })
            .id(id.clone())
        })
        .collect();
    rig.enqueue(items).await.unwrap();
    rig.enqueue_now("n", 1000, 20).await;
    // Payloads that no longer decode into the handler's type.
    let mut wrong = Vec::new();
    for i in 0..5 {
        let id = format!("wrong{i}");
        let e = rig
            .client
            .enqueue(Wrong {
                sleep_ms: "soon".into(),
            })
            .id(id.clone())
            .await
            .unwrap();
        rig.ledger
            .insert(id.clone(), e.due_at.unwrap().timestamp_millis());
        wrong.push(id);
    }
    // The same ids in a namespace whose keys look alike: the workers must never see them.
    let other = Client::builder()
        .namespace("fault.fault")
        .redis(&rig.server.url())
        .await
        .unwrap();
    let items: Vec<_> = ids
        .iter()
        .map(|id| EnqueueItem::new(Work::sleeping(1)).id(id.clone()))
        .collect();
    other.enqueue_many(items).await.unwrap();

    rig.spawn_ready(2, &Spec::new(400, 8)).await;
    let mut flushes = 0;
    rig.drain_with(Duration::from_secs(60), |rig| {
        rig.server.cli(&["SCRIPT", "FLUSH"]).unwrap();
        rig.server.cli(&["FUNCTION", "FLUSH"]).unwrap();
        flushes += 1;
    })
    .await;
    assert!(flushes >= 5, "only {flushes} flushes");
    // Flush while idle too, then run one more job.
    rig.server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    rig.server.cli(&["FUNCTION", "FLUSH"]).unwrap();
    rig.enqueue_now("after-flush", 1, 0).await;
    rig.drain(Duration::from_secs(30)).await;
    let report = rig
        .check(Expect {
            must_die: wrong,
            dead_reason: Some("does not decode"),
            attempt_one: true,
            ..Expect::default()
        })
        .await;
    eprintln!("hostile: {flushes} SCRIPT FLUSH and FUNCTION FLUSH while the workers ran; {report}");
    assert_eq!(report.dead, 5);
    // The other namespace was untouched.
    let counts = other.topic::<Work>().counts().await.unwrap();
    assert_eq!(
        (counts.ready, counts.processed),
        (ids.len() as u64, 0),
        "{counts:?}"
    );
    for id in &ids {
        let job = other.topic::<Work>().job(id).await.unwrap().expect(id);
        assert_eq!(job.id, *id);
    }
    // Every key belongs to one of the two namespaces' topics, or to their registries (topics, workers),
    // whatever the ids held.
    let registries = ["topics", "workers", "worker_info"];
    for key in rig.server.keys() {
        let registry = ["fault", "fault.fault"].iter().any(|ns| {
            registries
                .iter()
                .any(|r| key == format!("postpone:{{{ns}}}:{r}"))
        });
        assert!(
            registry
                || key.starts_with("postpone:{fault:fault.work}:")
                || key.starts_with("postpone:{fault.fault:fault.work}:"),
            "unexpected key {key:?}"
        );
    }
}

#[tokio::test]
async fn hostile_names_ids_and_payloads_get_clear_errors() {
    let server = RedisServer::start();
    let client = Client::builder()
        .namespace("fault")
        .redis(&server.url())
        .await
        .unwrap();
    let big = "x".repeat(10 * 1024);
    for topic in [
        "a b",
        "a{b}",
        "{a}",
        "a:b",
        "*",
        "é",
        "",
        "a\nb",
        big.as_str(),
    ] {
        let err = client.topic_named(topic).unwrap_err();
        assert!(
            matches!(err, Error::InvalidTopic { .. }),
            "{topic:?}: {err:?}"
        );
        assert!(err.to_string().contains("A-Z a-z 0-9 _ . -"), "{err}");
    }
    for ns in ["a{b}", "a:b", "a b", "", big.as_str()] {
        let err = Client::builder()
            .namespace(ns)
            .redis(&server.url())
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidNamespace { .. }),
            "{ns:?}: {err:?}"
        );
    }
    for id in [big.as_str(), "", "a\nb", "nul\0", "x".repeat(513).as_str()] {
        let err = client.enqueue(Work::default()).id(id).await.unwrap_err();
        assert!(matches!(err, Error::InvalidId { .. }), "{id:?}: {err:?}");
        let err = client.cancel::<Work>(id).await.unwrap_err();
        assert!(matches!(err, Error::InvalidId { .. }), "{id:?}: {err:?}");
    }
    let huge = Work {
        text: "x".repeat(600 * 1024),
        ..Work::default()
    };
    let err = client.enqueue(huge).id("huge").await.unwrap_err();
    assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("524288"), "{err}");
    // Nothing of the above reached Redis.
    assert!(server.keys().is_empty(), "{:?}", server.keys());
}

/// Waiting needs a Tokio runtime (its listener is a task): outside one, a clear error, never a panic.
#[test]
fn wait_outside_a_tokio_runtime_is_a_clear_error() {
    let client = Client::memory();
    let err = client.waiter::<Wrong>("job:1").unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
    assert!(err.to_string().contains("needs a Tokio runtime"), "{err}");
    assert!(client.waiter::<Wrong>("bad\nid").is_err());
}
