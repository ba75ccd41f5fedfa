// A store built elsewhere keeps its own namespace: `.namespace(..)` before `.store(..)` would be silently
// ignored, so it does not compile.
use postpone::store::memory::MemoryStore;
use postpone::Client;

fn main() {
    let _ = Client::builder().namespace("shop").store(MemoryStore::new());
}
