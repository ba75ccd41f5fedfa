// A handler that takes the state gets a clone of it for each job: a state that is not `Clone` is
// named in the error, with what to do.
use postpone::{Client, Job, JobContext, JobError, Worker};

#[derive(serde::Serialize, serde::Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

struct Db; // not Clone

async fn handler(_job: CloseOrder, _ctx: JobContext, _db: Db) -> Result<(), JobError> {
    Ok(())
}

fn main() {
    let client = Client::memory();
    let _ = Worker::with_state(&client, Db).handle(handler);
}
