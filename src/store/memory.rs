//! The in-memory backend (to be written).

/// Jobs kept in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {}
