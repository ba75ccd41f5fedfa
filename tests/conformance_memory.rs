//! The conformance suite on the in-memory backend.

#[macro_use]
mod conformance;
mod support;

use conformance::Backend;

async fn memory() -> Backend {
    Backend {
        client: postpone::Client::memory(),
        _keep: Box::new(()),
    }
}

conformance_tests!(memory);
