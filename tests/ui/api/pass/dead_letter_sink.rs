// A dead-letter sink written with `async fn`, through `postpone::async_trait`: this crate has no
// dependency on async-trait. And the builder without a namespace takes a store.
use postpone::store::memory::MemoryStore;
use postpone::{BoxError, Client, DeadLetter, DeadLetterSink, Job, JobContext, JobError, Worker};

#[derive(serde::Serialize, serde::Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

async fn close(_job: CloseOrder, _ctx: JobContext) -> Result<(), JobError> {
    Ok(())
}

#[derive(Debug)]
struct Alert;

#[postpone::async_trait]
impl DeadLetterSink for Alert {
    async fn deliver(&self, dead: &DeadLetter) -> Result<(), BoxError> {
        eprintln!("{} died: {}", dead.id, dead.reason);
        Ok(())
    }
}

#[test]
fn compiles_and_runs() {
    let client = Client::builder()
        .max_payload(1024)
        .store(MemoryStore::new());
    let _ = Worker::builder(&client)
        .handle(close)
        .dead_letter_sink(Alert)
        .build();
}
