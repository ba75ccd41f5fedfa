// A job type that declares an output must have a handler that returns it.
use postpone::{Client, Job, JobContext, JobError, Worker};

#[derive(serde::Serialize, serde::Deserialize)]
struct Pdf {
    url: String,
}

#[derive(serde::Serialize, serde::Deserialize, Job)]
#[job(topic = "invoices.render", output = Pdf)]
struct RenderInvoice {
    invoice: u64,
}

async fn render(_job: RenderInvoice, _ctx: JobContext) -> Result<(), JobError> {
    Ok(())
}

fn main() {
    let client = Client::memory();
    let _ = Worker::builder(&client).handle(render);
}
