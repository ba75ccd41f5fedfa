// A handler whose first argument is not a job type cannot be registered.
use postpone::{Client, JobContext, JobError, Worker};

async fn handler(_order_id: u64, _ctx: JobContext) -> Result<(), JobError> {
    Ok(())
}

fn main() {
    let client = Client::memory();
    let _ = Worker::builder(&client).handle(handler);
}
