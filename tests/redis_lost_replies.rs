//! A claim whose reply is lost (Redis paused past the response timeout) costs no stall: the same claim,
//! sent again, gets back what the first send took.

mod support;

use std::time::Duration;

use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::{Finish, FinishItem, JobStore, WorkerStore};
use support::redis_server::RedisServer;
use support::store::*;
use support::wait::eventually;

#[tokio::test]
async fn a_claim_whose_reply_was_lost_is_handed_back_when_sent_again() {
    let server = RedisServer::start();
    let options = RedisOptions::new("shop").response_timeout(Duration::from_millis(300));
    let s = RedisStore::connect_with(&server.url(), options)
        .await
        .unwrap();
    let jobs = (0..3)
        .map(|i| job(&format!("j{i}"), postpone::store::Due::In(0)))
        .collect();
    s.enqueue(T, jobs).await.unwrap();
    // Loads the claim script (a retry after "function not found" would send it twice).
    s.claim(T, claim(0)).await.unwrap();

    // Redis stops answering: the claim is sent, times out, and runs once Redis goes on.
    server.pause();
    let request = claim(10);
    let lost = s.claim(T, request).await;
    server.resume();
    assert!(lost.is_err(), "the reply should have been lost: {lost:?}");
    // The first send ran once Redis went on: its jobs are leased, to nobody who knows them.
    eventually("the lost claim to have run", || async {
        let c = s.counts(T).await.ok()?;
        (c.active == 3).then_some(())
    })
    .await;

    let batch = until_ok("the claim sent again", || s.claim(T, request.again())).await;
    assert_eq!(batch.jobs.len(), 3, "{batch:?}");
    assert!(batch.jobs.iter().all(|j| j.token == request.token));
    let items = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    s.finish(T, items).await.unwrap();
    let c = s.counts(T).await.unwrap();
    assert_eq!((c.processed, c.stalled, c.active, c.ready), (3, 0, 0, 0));
}
