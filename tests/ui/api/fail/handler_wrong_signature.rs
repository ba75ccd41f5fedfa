// A handler must take (job, ctx) or (job, ctx, state) and return Result<(), JobError>.
use postpone::{Client, Job, Worker};

#[derive(serde::Serialize, serde::Deserialize, Job)]
#[job(topic = "orders.close")]
struct CloseOrder {
    order_id: u64,
}

async fn handler(_job: CloseOrder) -> Result<(), String> {
    Ok(())
}

fn main() {
    let client = Client::memory();
    let _ = Worker::builder(&client).handle(handler);
}
