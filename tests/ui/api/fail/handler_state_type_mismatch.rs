// A handler that takes state must take the worker's state type.
use postpone::{Client, Job, JobContext, JobError, Worker};

#[derive(serde::Serialize, serde::Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

#[derive(Clone)]
struct Db;

async fn handler(_job: CloseOrder, _ctx: JobContext, _db: Db) -> Result<(), JobError> {
    Ok(())
}

fn main() {
    let client = Client::memory();
    let _ = Worker::with_state(&client, String::from("not a Db")).handle(handler);
}
