//! Lease tokens: random, so that a token never comes back (a per-topic counter would, after a Redis
//! failover or the loss of an fsync window, and a stale worker's token could then match a current
//! lease).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

/// Tokens stay below 2^53, so that Lua (whose numbers are doubles) could even read them as numbers;
/// the scripts compare them as strings.
const MASK: u64 = (1 << 53) - 1;

/// Seeded randomly once per process (the standard library seeds `RandomState` from the OS).
static SEED: LazyLock<RandomState> = LazyLock::new(RandomState::new);
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh lease token: 53 random bits, never 0.
pub(crate) fn fresh() -> u64 {
    let mut h = SEED.build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() & MASK).max(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_differ_and_fit_53_bits() {
        let tokens: std::collections::HashSet<u64> = (0..10_000).map(|_| super::fresh()).collect();
        assert_eq!(tokens.len(), 10_000);
        assert!(tokens.iter().all(|t| *t > 0 && *t < 1 << 53));
    }
}
