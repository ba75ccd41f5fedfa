// A type without `#[derive(Job)]` cannot be enqueued.
#[derive(serde::Serialize, serde::Deserialize)]
struct NotAJob {
    n: u64,
}

async fn run(client: postpone::Client) {
    let _ = client.enqueue(NotAJob { n: 1 }).await;
}

fn main() {}
