//! The store conformance suite on the in-memory backend (system clock).

#[macro_use]
mod store_conformance;
mod support;

use std::sync::Arc;

use postpone::store::memory::MemoryStore;
use postpone::store::Store;

store_conformance!(async { Arc::new(MemoryStore::new()) as Arc<dyn Store> });
