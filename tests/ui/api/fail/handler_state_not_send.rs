// A worker's state is shared by its tasks: a state that is not `Send + Sync` is refused where the worker
// is given it, and the error names the cause.
use std::rc::Rc;

use postpone::{Client, Worker};

fn main() {
    let client = Client::memory();
    let _ = Worker::with_state(&client, Rc::new(1u32));
}
