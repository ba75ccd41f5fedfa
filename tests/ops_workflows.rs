//! Jobs that wait for jobs in the operations API on Redis: counted waiting (not scheduled), listed in
//! the waiting listing by id and paged by cursor, found by id prefix apart from the scheduled jobs, and
//! shown one by one with the parents they wait for (by topic and partition) and a why line naming them.

mod support;

use postpone::ops::{JobParent, JobQuery, PageState};
use postpone::store::redis::RedisStore;
use postpone::store::WAITING_DUE_MS;
use postpone::Client;
use postpone::JobState;
use support::redis_server::RedisServer;
use support::workflows::{parent, waiting};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_lists_and_shows_workflow_jobs_waiting_for_their_parents() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "ops").await.unwrap();
    let client = Client::builder()
        .namespace("ops")
        .redis(&server.url())
        .await
        .unwrap();
    let ops = client.ops();
    // A parent in partition 1 of its topic is stored in `<topic>#1`.
    parent(&store, "ops.pay", "charge:7").await;
    parent(&store, "ops.stock#1", "stock:7").await;
    let both = [("ops.pay", "charge:7"), ("ops.stock#1", "stock:7")];
    waiting(&store, "ops.receipt", "receipt:7", &both).await;
    waiting(&store, "ops.receipt", "mail:7", &both[..1]).await;
    parent(&store, "ops.receipt", "receipt:6").await;

    let topics = ops.topics().await.unwrap();
    let receipt = topics.iter().find(|t| t.name == "ops.receipt").unwrap();
    assert_eq!((receipt.counts.waiting, receipt.counts.scheduled), (2, 1));

    // By id, a page at a time; the scheduled listing holds the other job only.
    let query = JobQuery::new(PageState::Waiting).limit(1);
    let first = ops.jobs("ops.receipt", &query).await.unwrap();
    assert_eq!(first.jobs.len(), 1);
    let job = &first.jobs[0];
    assert_eq!((job.id.as_str(), job.state), ("mail:7", PageState::Waiting));
    assert_eq!(job.at.timestamp_millis(), WAITING_DUE_MS);
    assert_eq!(job.payload, serde_json::json!({ "id": "mail:7" }));
    let next = first.next.clone().expect("a second page");
    let second = ops
        .jobs("ops.receipt", &query.clone().cursor(next))
        .await
        .unwrap();
    let ids: Vec<&str> = second.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["receipt:7"]);
    let json = serde_json::to_value(&second).unwrap();
    assert_eq!(json["jobs"][0]["state"], "waiting", "{json:#}");
    let scheduled = JobQuery::new(PageState::Scheduled);
    let page = ops.jobs("ops.receipt", &scheduled).await.unwrap();
    let ids: Vec<&str> = page.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["receipt:6"]);

    // By id prefix: a waiting job is found among the waiting, not among the scheduled.
    let search = JobQuery::new(PageState::Waiting).id_prefix("receipt");
    let found = ops.jobs("ops.receipt", &search).await.unwrap();
    let ids: Vec<&str> = found.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["receipt:7"]);
    let search = JobQuery::new(PageState::Scheduled).id_prefix("receipt");
    let found = ops.jobs("ops.receipt", &search).await.unwrap();
    let ids: Vec<&str> = found.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["receipt:6"]);

    // One job: its parents by topic and partition, and a why line naming them.
    let detail = ops.job("ops.receipt", "receipt:7").await.unwrap().unwrap();
    assert!(
        matches!(&detail.state, JobState::Waiting { waiting_for } if waiting_for.len() == 2),
        "{:?}",
        detail.state
    );
    let parents: Vec<(String, u16, String)> = detail
        .parents()
        .into_iter()
        .map(
            |JobParent {
                 topic,
                 partition,
                 id,
                 ..
             }| (topic, partition, id),
        )
        .collect();
    assert_eq!(
        parents,
        [
            ("ops.pay".to_owned(), 0, "charge:7".to_owned()),
            ("ops.stock".to_owned(), 1, "stock:7".to_owned()),
        ]
    );
    assert_eq!(
        detail.why,
        "waiting for ops.pay/charge:7, ops.stock/stock:7: it becomes due once they all succeed"
    );
    let one = ops.job("ops.receipt", "mail:7").await.unwrap().unwrap();
    assert_eq!(
        one.why,
        "waiting for ops.pay/charge:7: it becomes due once that job succeeds"
    );
    let json = serde_json::to_value(&detail).unwrap();
    assert_eq!(json["state"], "waiting", "{json:#}");
    assert_eq!(
        json["waiting_for"],
        serde_json::json!([["ops.pay", "charge:7"], ["ops.stock#1", "stock:7"]])
    );
    // A scheduled job waits for nothing.
    let other = ops.job("ops.receipt", "receipt:6").await.unwrap().unwrap();
    assert!(other.parents().is_empty());

    // A waiting job has no due time to move; it can be cancelled.
    let err = ops.run_now("ops.receipt", "mail:7").await.unwrap_err();
    assert!(matches!(err, postpone::Error::JobWaiting { .. }), "{err}");
    let status = ops.cancel("ops.receipt", "mail:7").await.unwrap();
    assert_eq!(status, postpone::CancelStatus::Removed);
    let topic = ops.topic("ops.receipt").await.unwrap();
    assert_eq!(topic.counts().await.unwrap().waiting, 1);
}
