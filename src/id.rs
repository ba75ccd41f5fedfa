//! Generated job ids and a little randomness, without a dependency for either.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub(crate) const ALPHABET: &[u8; 62] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A random `u64` from the standard library's per-process random hasher keys and a counter.
pub(crate) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

pub(crate) fn push_base62(out: &mut String, mut n: u64, min_len: usize) {
    let mut buf = [0u8; 11];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = ALPHABET[(n % 62) as usize];
        n /= 62;
        if n == 0 && buf.len() - i >= min_len {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&buf[i..]).expect("base 62 digits are ASCII"));
}

/// A new job id: 8 characters that are random per process, then a per-process counter, in base 62
/// (10 to 19 characters). Short, because every id is stored twice per job.
///
/// A collision with a live job is detected at enqueue (the id exists) and a fresh id is drawn, so a
/// generated id never makes an enqueue a silent no-op.
pub(crate) fn generate() -> String {
    // The prefix in base 62, written once.
    static PREFIX: OnceLock<String> = OnceLock::new();
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        let mut prefix = String::with_capacity(8);
        push_base62(&mut prefix, random_u64() % 62u64.pow(8), 8);
        prefix
    });
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut id = String::with_capacity(16);
    id.push_str(prefix);
    push_base62(&mut id, seq, 2);
    id
}

/// A fresh id for a retry after a collision: fully random.
pub(crate) fn generate_random() -> String {
    let mut id = String::with_capacity(22);
    push_base62(&mut id, random_u64(), 11);
    push_base62(&mut id, random_u64(), 11);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_distinct_and_valid() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| generate()).collect();
        assert_eq!(ids.len(), 10_000);
        for id in ids.iter().take(100) {
            crate::validate::validate_id(id).unwrap();
            assert!((10..=19).contains(&id.len()), "{id}");
        }
        assert_ne!(generate_random(), generate_random());
    }

    #[test]
    fn generated_ids_share_the_process_prefix_then_count_in_base_62() {
        let (a, b) = (generate(), generate());
        assert_eq!(a[..8], b[..8], "{a} {b}");
        let mut digits = String::new();
        push_base62(&mut digits, 62 * 62 + 61, 2);
        assert_eq!(digits, "10z");
        digits.clear();
        push_base62(&mut digits, 5, 3);
        assert_eq!(digits, "005");
    }
}
