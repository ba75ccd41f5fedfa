//! The Redis backend (to be written).

/// Jobs kept in Redis.
#[derive(Debug)]
pub struct RedisStore {}
