use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "search.reindex", unique = ["product_id"])]
struct Reindex {
    product_id: u64,
}

fn main() {}
