use postpone::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "search.reindex", unique = ["product_id", "region"], unique_for = "10m")]
struct Reindex {
    product_id: u64,
    region: String,
    note: String,
}

#[test]
fn compiles_and_runs() {
    let job = Reindex {
        product_id: 42,
        region: "eu".into(),
        note: "not part of the key".into(),
    };
    let unique = job.unique().expect("unique by product and region");
    let same = postpone::Unique::new(
        "product_id=42,region=\"eu\"",
        std::time::Duration::from_secs(600),
    );
    assert_eq!(unique, same);
}
