use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "search.reindex", unique = ["product", "region"], unique_for = "10m")]
struct Reindex {
    product_id: u64,
    region: String,
}

fn main() {}
