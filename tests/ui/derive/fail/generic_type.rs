use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, postpone::Job)]
#[job(topic = "wrapped")]
struct Wrapped<T> {
    inner: T,
}

fn main() {}
