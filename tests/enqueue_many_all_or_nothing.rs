//! `enqueue_many` checks every item before it stores any: a bad item anywhere in a large batch (past
//! the first store call's worth) fails the call with nothing stored, so a caller who fixes the item and
//! retries gets no duplicates of jobs whose generated ids it never learned.

mod support;

use postpone::{Client, EnqueueItem, Error, Job};
use serde::{Deserialize, Serialize};
use support::redis_server::RedisServer;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "bulk.mail")]
struct Mail {
    n: u32,
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "bulk.split", partitions = 4)]
struct Split {
    n: u32,
}

/// 1,500 items with generated ids, except item 1,200 (index 1,199), whose id is empty.
fn items<J: Job>(make: impl Fn(u32) -> J) -> Vec<EnqueueItem<J>> {
    (0..1500)
        .map(|n| {
            let item = EnqueueItem::new(make(n));
            if n == 1199 {
                item.id("")
            } else {
                item
            }
        })
        .collect()
}

async fn stored(client: &Client, topic: &str, partitions: u16) -> u64 {
    let c = client
        .topic_partitioned(topic, partitions)
        .unwrap()
        .counts()
        .await
        .unwrap();
    c.scheduled + c.ready + c.active + c.dead
}

async fn a_bad_item_after_the_first_chunk_stores_nothing(client: Client) {
    let err = client
        .enqueue_many(items(|n| Mail { n }))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidId { .. }), "{err:?}");
    assert_eq!(stored(&client, Mail::TOPIC, 1).await, 0);

    let err = client
        .enqueue_many(items(|n| Split { n }))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidId { .. }), "{err:?}");
    assert_eq!(stored(&client, Split::TOPIC, 4).await, 0);

    // The same batch without the bad item goes in whole.
    let good: Vec<_> = items(|n| Mail { n })
        .into_iter()
        .enumerate()
        .filter_map(|(i, item)| (i != 1199).then_some(item))
        .collect();
    assert_eq!(client.enqueue_many(good).await.unwrap().len(), 1499);
    assert_eq!(stored(&client, Mail::TOPIC, 1).await, 1499);
}

#[tokio::test]
async fn memory_a_bad_item_after_the_first_chunk_stores_nothing() {
    a_bad_item_after_the_first_chunk_stores_nothing(Client::memory()).await;
}

#[tokio::test]
async fn redis_a_bad_item_after_the_first_chunk_stores_nothing() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    a_bad_item_after_the_first_chunk_stores_nothing(client).await;
}
