//! Partitioned topics: which partition an id belongs to, and the store's name for each partition.
//!
//! A topic declared with `partitions = N` (N > 1) is N store-level topics: partition 0 under the topic's
//! plain name, and `<topic>#1` to `<topic>#<N-1>`, each with its own keys and hash tag
//! (`postpone:{<ns>:<topic>#<p>}:*`), so on a Redis Cluster the partitions spread over slots and nodes.
//! `#` cannot appear in a topic name, so a partition never collides with a real topic. A topic with one
//! partition is its partition 0, so growing a topic from 1 partition to N keeps every stored job where
//! it is.
//!
//! An id always maps to the same partition: [`partition_of`], which is part of the stored format and
//! never changes. When a topic grows, an id moves only to a new partition, and the partitions it lived
//! in before are [`partition_history`]: lookups by id try those too, so jobs stored before the growth
//! are still found.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::validate::validate_topic;

/// Most partitions a topic may have.
pub const MAX_PARTITIONS: u16 = 1024;

/// The partition of job `id` in a topic of `partitions` partitions (0 when `partitions` <= 1).
///
/// The hash is fixed, because it decides where stored jobs are found: **jump consistent hash**
/// (Lamping and Veach, 2014) of the 64-bit **FNV-1a** hash of the id's UTF-8 bytes, mixed by
/// MurmurHash3's 64-bit finalizer (`fmix64`; FNV alone leaves ids that differ in their last character
/// correlated). With jump hash, growing a topic from N to N + 1 partitions moves only the ids that now
/// belong to the new partition (about one in N + 1); every other id keeps its partition.
///
/// ```
/// use postpone::partition_of;
/// assert_eq!(partition_of("order:42", 1), 0);
/// let p = partition_of("order:42", 3);
/// assert!(p < 3);
/// assert_eq!(partition_of("order:42", 3), p); // always the same
/// ```
pub fn partition_of(id: &str, partitions: u16) -> u16 {
    if partitions <= 1 {
        return 0;
    }
    jump_hash(fmix64(fnv1a_64(id.as_bytes())), partitions, |_| {})
}

/// An id drawn by `draw` that lands in the partition of `key` (a key for fairness), so that a key's jobs
/// with generated ids stay in one partition while every lookup by id still finds them in the id's
/// partition. Draws `partitions` times on average; after 64 times as many it takes the last draw.
pub(crate) fn id_with_key(key: &str, partitions: u16, mut draw: impl FnMut() -> String) -> String {
    let mut id = draw();
    if partitions <= 1 {
        return id;
    }
    let wanted = partition_of(key, partitions);
    for _ in 0..64 * u32::from(partitions) {
        if partition_of(&id, partitions) == wanted {
            break;
        }
        id = draw();
    }
    id
}

/// MurmurHash3's 64-bit finalizer.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// FNV-1a, 64 bits.
fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// Jump consistent hash: a bucket in `0..buckets` for `key`. `visited` is called with every bucket the
/// key takes as the count grows from 1 to `buckets` (the last is the answer).
fn jump_hash(mut key: u64, buckets: u16, mut visited: impl FnMut(u16)) -> u16 {
    let (mut b, mut j): (i64, i64) = (-1, 0);
    while j < i64::from(buckets) {
        b = j;
        visited(b as u16);
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as u16
}

/// The partitions job `id` belonged to while its topic grew to `partitions`, newest first: its
/// partition now, then each earlier one (about ln N of them). A job stored before the topic grew is in
/// one of them.
pub(crate) fn partition_history(id: &str, partitions: u16) -> Vec<u16> {
    let mut visited = Vec::new();
    if partitions > 1 {
        jump_hash(fmix64(fnv1a_64(id.as_bytes())), partitions, |b| {
            visited.push(b)
        });
    } else {
        visited.push(0);
    }
    visited.reverse();
    visited
}

/// The store's name for partition `p` of `topic`: the topic itself for partition 0 (so a topic of one
/// partition, and one grown from it, keep its jobs there), else `<topic>#<p>`.
pub(crate) fn store_topic(topic: &str, p: u16) -> Cow<'_, str> {
    if p == 0 {
        Cow::Borrowed(topic)
    } else {
        Cow::Owned(format!("{topic}#{p}"))
    }
}

/// An error from partition `p` of `topic` (of `partitions`), said so when the topic has several: a
/// failure to reach the store becomes [`Error::Partition`], and the store's name of the partition in a
/// job error becomes the topic's name.
pub(crate) fn partition_error(topic: &str, p: u16, partitions: u16, e: Error) -> Error {
    if partitions <= 1 {
        return e;
    }
    match e {
        Error::JobExists { id, .. } => Error::JobExists {
            topic: topic.to_owned(),
            id,
        },
        Error::JobNotFound { id, .. } => Error::JobNotFound {
            topic: topic.to_owned(),
            id,
        },
        Error::JobRunning { id, .. } => Error::JobRunning {
            topic: topic.to_owned(),
            id,
        },
        e if e.is_transient() => Error::Partition {
            topic: topic.to_owned(),
            partition: p,
            partitions,
            source: Box::new(e),
        },
        e => e,
    }
}

/// Checks a partition count: 1 to [`MAX_PARTITIONS`].
pub(crate) fn validate_partitions(topic: &str, partitions: u16) -> Result<()> {
    if partitions == 0 || partitions > MAX_PARTITIONS {
        return Err(Error::InvalidConfig {
            reason: format!(
                "topic {topic:?} has {partitions} partitions; use 1 to {MAX_PARTITIONS}"
            ),
        });
    }
    Ok(())
}

/// The topic and partition a store topic names (`<topic>`: partition 0, or `<topic>#<p>`); a suffix
/// that is not a partition number is part of the topic.
pub(crate) fn split_store_topic(stored: &str) -> (&str, u16) {
    match stored.rsplit_once('#') {
        Some((topic, p)) => match p.parse() {
            Ok(p) => (topic, p),
            Err(_) => (stored, 0),
        },
        None => (stored, 0),
    }
}

/// Checks a store-level topic name: a topic name, or `<topic>#<p>` with `p` in `0..MAX_PARTITIONS`
/// written without leading zeros. Store keys are built only from names that pass.
pub(crate) fn validate_store_topic(name: &str) -> Result<()> {
    let Some((topic, p)) = name.split_once('#') else {
        return validate_topic(name);
    };
    validate_topic(topic)?;
    let canonical = p
        .parse::<u16>()
        .is_ok_and(|n| n < MAX_PARTITIONS && n.to_string() == p);
    if !canonical {
        return Err(Error::invalid_topic(
            name,
            "its partition suffix is not `#<0 to 1023>`",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_of_a_key_land_in_its_partition() {
        for key in ["tenant:1", "tenant:2", "", "zoé"] {
            for partitions in [1, 2, 7, 64] {
                let id = id_with_key(key, partitions, crate::id::generate);
                assert_eq!(
                    partition_of(&id, partitions),
                    partition_of(key, partitions),
                    "{key} {partitions}"
                );
            }
        }
    }

    /// Pinned values: stored jobs are found by this mapping, so it must never change.
    #[test]
    fn the_mapping_never_changes() {
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
        // Jump hash as in the paper's C code (transcribed to Python to compute these).
        assert_eq!(jump_hash(0xdead_beef, 128, |_| {}), 87);
        assert_eq!(jump_hash(0x0ddc_0ffe_ebad_f00d, 1000, |_| {}), 113);
        let got: Vec<u16> = [
            "order:1", "order:2", "order:3", "order:42", "zoé", "{x}*: y",
        ]
        .iter()
        .map(|id| partition_of(id, 3))
        .collect();
        assert_eq!(got, PINNED_3);
        let got: Vec<u16> = (0..8)
            .map(|i| partition_of(&format!("job-{i}"), 1024))
            .collect();
        assert_eq!(got, PINNED_1024);
    }

    /// Computed independently (a Python transcription of FNV-1a, fmix64 and the paper's jump hash).
    const PINNED_3: [u16; 6] = [2, 2, 1, 2, 1, 0];
    const PINNED_1024: [u16; 8] = [871, 818, 811, 357, 835, 542, 232, 523];

    #[test]
    fn ids_spread_evenly() {
        for n in [2u16, 3, 7, 16] {
            let mut counts = vec![0u32; n as usize];
            for i in 0..30_000 {
                counts[partition_of(&format!("order:{i}"), n) as usize] += 1;
            }
            let fair = 30_000 / u32::from(n);
            for c in &counts {
                assert!(c.abs_diff(fair) < fair / 10, "{n} partitions: {counts:?}");
            }
        }
    }

    #[test]
    fn growing_moves_ids_only_to_the_new_partition() {
        for i in 0..5_000 {
            let id = format!("id{i}");
            let (before, after) = (partition_of(&id, 4), partition_of(&id, 5));
            assert!(after == before || after == 4, "{id}: {before} -> {after}");
        }
    }

    #[test]
    fn the_history_of_an_id_holds_every_partition_it_had() {
        for i in 0..2_000 {
            let id = format!("id{i}");
            let history = partition_history(&id, 64);
            assert_eq!(history[0], partition_of(&id, 64));
            for n in 1..=64 {
                assert!(history.contains(&partition_of(&id, n)), "{id} at {n}");
            }
            assert!(history.len() <= 12, "{id}: {history:?}");
        }
        assert_eq!(partition_history("x", 1), [0]);
    }

    #[test]
    fn store_topic_names() {
        assert_eq!(store_topic("orders", 0), "orders");
        assert_eq!(store_topic("orders", 2), "orders#2");
        for ok in ["orders", "orders#0", "orders#2", "orders#1023"] {
            assert!(validate_store_topic(ok).is_ok(), "{ok}");
        }
        for bad in [
            "orders#",
            "orders#01",
            "orders#1024",
            "orders#-1",
            "orders#1#2",
            "#1",
            "a b#1",
            "orders#+1",
        ] {
            assert!(validate_store_topic(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn partition_counts() {
        assert!(validate_partitions("t", 1).is_ok());
        assert!(validate_partitions("t", MAX_PARTITIONS).is_ok());
        assert!(validate_partitions("t", 0).is_err());
        assert!(validate_partitions("t", MAX_PARTITIONS + 1).is_err());
    }
}
