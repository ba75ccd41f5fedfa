//! Every death reaches the dead-letter sink: a panicking sink, two deaths of one id (issue 11).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postpone::{JobError, Worker};

use super::retry::Webhook;
use super::*;

fn fail_now(_: Webhook, _: postpone::JobContext) -> std::future::Ready<Result<(), JobError>> {
    std::future::ready(Err(JobError::fail("no")))
}

pub(crate) async fn a_panicking_sink_is_retried_and_other_deaths_still_flow(b: Backend) {
    let (tx, mut rx) = events::<(String, &'static str)>();
    let panicked = Arc::new(AtomicBool::new(false));
    let sink = {
        let tx = Arc::new(tx);
        postpone::sink_fn(move |dead| {
            let (tx, panicked) = (tx.clone(), panicked.clone());
            async move {
                if dead.id == "p" && !panicked.swap(true, Ordering::SeqCst) {
                    let _ = tx.send((dead.id.clone(), "panicking"));
                    panic!("the sink's bug");
                }
                let _ = tx.send((dead.id, "delivered"));
                Ok(())
            }
        })
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(fail_now)
            .dead_letter_sink(sink)
            .poll_interval(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    for id in ["p", "q"] {
        b.client
            .enqueue(Webhook { url: "u".into() })
            .id(id)
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    while !seen.contains(&("p".to_string(), "delivered")) {
        seen.push(next(&mut rx).await);
    }
    assert!(seen.contains(&("p".into(), "panicking")), "{seen:?}");
    assert!(seen.contains(&("q".into(), "delivered")), "{seen:?}");
    let topic = b.client.topic::<Webhook>();
    eventually("every hook to be marked done", || async {
        (topic.counts().await.unwrap().dead_pending == 0).then_some(())
    })
    .await;
    worker.stop().await;
}

pub(crate) async fn each_death_of_an_id_reaches_the_sink(b: Backend) {
    let (dead_tx, mut dead_rx) = events();
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(fail_now)
            .dead_letter_sink(channel_sink(dead_tx))
            .poll_interval(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    let topic = b.client.topic::<Webhook>();
    b.client
        .enqueue(Webhook { url: "u".into() })
        .id("x")
        .await
        .unwrap();
    let first = next(&mut dead_rx).await;
    topic.requeue_dead("x").await.unwrap();
    let second = next(&mut dead_rx).await;
    assert_eq!((first.id.as_str(), second.id.as_str()), ("x", "x"));
    assert_ne!(first.death, second.death, "two deaths, two dead letters");
    let listed: HashSet<u64> = topic
        .dead_letters(0, 10)
        .await
        .unwrap()
        .iter()
        .map(|d| d.death)
        .collect();
    assert_eq!(
        listed,
        HashSet::from([second.death]),
        "the requeued one left the list"
    );
    worker.stop().await;
}
