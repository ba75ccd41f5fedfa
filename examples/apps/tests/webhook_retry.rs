//! The webhook example (`examples/apps/webhook_retry/`), run on a redis-server of its own with the default
//! schedule 100,000 times faster: a webhook delivered once its endpoint recovers, one dead-lettered when
//! the schedule is exhausted, one dead-lettered at once for a 410; attempts spaced by the schedule.

#[path = "../webhook_retry/demo.rs"]
mod demo;
#[path = "../support/flags.rs"]
mod flags;
#[path = "../webhook_retry/receiver.rs"]
mod receiver;
mod support;
#[path = "../webhook_retry/webhook.rs"]
mod webhook;

use std::time::Duration;

use postpone::{Client, JobContext, Outcome, RetrySchedule};
use support::redis_server::RedisServer;
use webhook::Webhook;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_retried_by_the_default_schedule_then_dead_lettered() {
    let server = RedisServer::start();
    let client = Client::builder()
        .namespace("webhooks")
        .redis(&server.url())
        .await
        .expect("connecting to the test redis-server");
    let options = demo::Options {
        fail_first: 2,
        speedup: 100_000.0,
        print: false,
    };
    let report = demo::run(&client, &options).await.unwrap();

    // The schedule is the default one, every delay divided by the speedup.
    let default = RetrySchedule::default();
    assert_eq!(report.schedule.attempts(), default.attempts());
    for (fast, real) in report.schedule.slots().iter().zip(default.slots()) {
        assert_eq!(fast.as_millis(), real.div_f64(100_000.0).as_millis());
    }

    let [flaky, down, gone] = &report.deliveries[..] else {
        panic!("three webhooks: {:?}", report.deliveries)
    };
    // Refused twice, delivered on the third attempt; the receiver saw three requests with one key.
    assert!(flaky.delivered(), "{flaky:?}");
    assert_eq!(flaky.attempts.len(), 3, "{flaky:?}");
    assert!(flaky.dead.is_none());
    assert_eq!(flaky.requests_received, 3);

    // Always 503: eight attempts, then the dead letters with all eight errors.
    let dead = down.dead.as_ref().expect("/down is dead-lettered");
    assert_eq!(down.attempts.len(), 8, "{down:?}");
    assert_eq!(down.requests_received, 8);
    assert_eq!(dead.attempts, 8);
    assert!(
        dead.reason.starts_with("exhausted 8 attempts"),
        "{}",
        dead.reason
    );
    let numbers: Vec<u32> = dead.errors.iter().map(|e| e.attempt).collect();
    assert_eq!(numbers, (1..=8).collect::<Vec<_>>());
    assert!(dead.errors.iter().all(|e| e.message.contains("503")));
    assert_eq!(dead.job::<Webhook>().unwrap().event, "order.shipped");

    // Each retry waited at least its slot of the schedule (to the store's millisecond).
    for delivery in [flaky, down] {
        for (n, pair) in delivery.attempts.windows(2).enumerate() {
            let attempt = n as u32 + 2;
            let waited = pair[1].at - pair[0].at;
            let slot = report.schedule.delay_before(attempt).unwrap();
            assert!(
                waited + Duration::from_millis(1) >= slot,
                "{} attempt {attempt} came {waited:?} after the previous one, before its slot {slot:?}",
                delivery.label
            );
        }
    }

    // 410: one attempt, dead at once.
    let dead = gone.dead.as_ref().expect("/gone is dead-lettered");
    assert_eq!((gone.attempts.len(), dead.attempts), (1, 1));
    assert!(
        dead.reason.starts_with("failed:") && dead.reason.contains("410"),
        "{}",
        dead.reason
    );

    let counts = client.topic::<Webhook>().counts().await.unwrap();
    assert_eq!(
        (counts.processed, counts.retried, counts.failed),
        (1, 2 + 7, 2),
        "{counts:?}"
    );
    // The demo purges the dead letters it made.
    assert_eq!(counts.dead, 0, "{counts:?}");
}

#[tokio::test]
async fn the_handler_maps_each_answer_to_delivered_retry_or_dead_letter() {
    let receiver = receiver::Receiver::start(1).await.unwrap();
    let http = reqwest::Client::new();
    let ctx = JobContext::for_test(<Webhook as postpone::Job>::TOPIC, "webhook:1");
    let hook = |path: &str| Webhook {
        url: format!("{}{path}", receiver.url),
        event: "order.paid".into(),
        payload: serde_json::json!({ "order_id": 1 }),
    };

    let first = webhook::deliver(&http, &hook("/flaky"), &ctx).await;
    assert_eq!(first.unwrap_err().outcome(), Outcome::Retry);
    webhook::deliver(&http, &hook("/flaky"), &ctx)
        .await
        .expect("the second delivery is accepted");
    assert_eq!(receiver.requests("webhook:1"), 2);

    let gone = webhook::deliver(&http, &hook("/gone"), &ctx).await;
    assert_eq!(gone.unwrap_err().outcome(), Outcome::Fail);

    // 429 with Retry-After: retry after that, not by the schedule.
    let busy = axum::Router::new().route(
        "/hook",
        axum::routing::post(|| async {
            (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                [(axum::http::header::RETRY_AFTER, "7")],
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let busy_url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, busy).await });
    let limited = Webhook {
        url: busy_url,
        ..hook("")
    };
    let limited = webhook::deliver(&http, &limited, &ctx).await;
    assert_eq!(
        limited.unwrap_err().outcome(),
        Outcome::RetryAfter(Duration::from_secs(7))
    );

    // Nothing listens here: no answer is worth a retry.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unreachable = Webhook {
        url: format!("http://{}/hook", closed.local_addr().unwrap()),
        ..hook("")
    };
    drop(closed);
    let refused = webhook::deliver(&http, &unreachable, &ctx).await;
    assert_eq!(refused.unwrap_err().outcome(), Outcome::Retry);
}
