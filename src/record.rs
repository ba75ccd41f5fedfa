//! The stored form of a job: a compact binary header followed by the JSON payload.
//!
//! Backends store records as opaque bytes; only this module reads or writes them, so the Redis scripts
//! never parse a job. Layout (all integers LEB128 varints):
//!
//! ```text
//! u8 version (2) << 4 | flags
//! [flags & 8: key]      len, utf-8 bytes (the job's key for fairness, 1 to 128 bytes)
//! attempt | enqueued_at_ms
//! [flags & 1: schedule] slot count, slots in ms..., jitter permille
//! [flags & 2: errors]   count, then per error: attempt, at_ms, len, utf-8 bytes
//! [flags & 4: metadata] count, then per entry: key len, key bytes, value len, value bytes (utf-8)
//! payload: the rest
//! ```
//!
//! A new job's header is 8 bytes (a version byte, attempt 1, and 6 bytes of milliseconds). Version 1
//! had the flags in a byte of their own (`u8 1 | u8 flags | ...`); it is still read. Metadata (flag 4)
//! came later within version 2: a record without it is what it was, so older records read as before.
//!
//! The key (flag 8) comes right after the first byte, so that the Redis scripts, which never parse the
//! rest, can read it with a few `string.byte` calls (fair.lua's `record_key`) on the paths that start
//! from a job's id (a cancel, a reschedule, an expired lease); a keyed job then needs no entry of its own
//! beside its record.

use crate::error::BoxError;
use crate::meta::Meta;

const VERSION: u8 = 2;
/// The first version, with a separate flags byte.
const VERSION_1: u8 = 1;
const HAS_SCHEDULE: u8 = 1;
const HAS_ERRORS: u8 = 2;
const HAS_META: u8 = 4;
const HAS_KEY: u8 = 8;
/// Errors kept per job (the newest).
pub(crate) const MAX_ERRORS: usize = 20;
/// Longest error message kept, in bytes.
pub(crate) const MAX_ERROR_LEN: usize = 2048;

/// One failed attempt, as kept in a job's error history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct AttemptError {
    /// The attempt that failed (1-based).
    pub attempt: u32,
    /// When it failed, in milliseconds since the Unix epoch (by the worker's clock).
    pub at_ms: i64,
    /// What went wrong.
    pub message: String,
}

impl AttemptError {
    pub(crate) fn new(attempt: u32, at_ms: i64, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > MAX_ERROR_LEN {
            let mut cut = MAX_ERROR_LEN;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        AttemptError {
            attempt,
            at_ms,
            message,
        }
    }
}

/// A job as stored: its metadata and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// The attempt the next run is (1 for a new job).
    pub(crate) attempt: u32,
    pub(crate) enqueued_at_ms: i64,
    /// A per-enqueue schedule override: slots in ms and jitter in permille.
    pub(crate) schedule: Option<(Vec<u64>, u16)>,
    pub(crate) errors: Vec<AttemptError>,
    /// Free-form metadata (validated at enqueue); empty for most jobs, and then not stored at all.
    pub(crate) meta: Meta,
    /// The job's key for fairness (validated at enqueue), if it has one.
    pub(crate) key: Option<String>,
    pub(crate) payload: Vec<u8>,
}

impl Record {
    pub(crate) fn new(enqueued_at_ms: i64, payload: Vec<u8>) -> Self {
        Record {
            attempt: 1,
            enqueued_at_ms,
            schedule: None,
            errors: Vec::new(),
            meta: Meta::new(),
            key: None,
            payload,
        }
    }

    /// Appends an error, keeping the newest [`MAX_ERRORS`].
    pub(crate) fn push_error(&mut self, error: AttemptError) {
        self.errors.push(error);
        if self.errors.len() > MAX_ERRORS {
            let extra = self.errors.len() - MAX_ERRORS;
            self.errors.drain(..extra);
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = self.encode_head(self.payload.len());
        out.extend_from_slice(&self.payload);
        out
    }

    /// Everything [`encode`](Self::encode) writes before the payload, with room for `payload` bytes
    /// more: a new job's payload is encoded straight after it (no buffer of its own to copy from).
    pub(crate) fn encode_head(&self, payload: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(payload + 16);
        let mut flags = 0;
        if self.schedule.is_some() {
            flags |= HAS_SCHEDULE;
        }
        if !self.errors.is_empty() {
            flags |= HAS_ERRORS;
        }
        if !self.meta.is_empty() {
            flags |= HAS_META;
        }
        if self.key.is_some() {
            flags |= HAS_KEY;
        }
        out.push(VERSION << 4 | flags);
        if let Some(key) = &self.key {
            put(&mut out, key.len() as u64);
            out.extend_from_slice(key.as_bytes());
        }
        put(&mut out, u64::from(self.attempt));
        put(&mut out, self.enqueued_at_ms.max(0) as u64);
        if let Some((slots, jitter)) = &self.schedule {
            put(&mut out, slots.len() as u64);
            for s in slots {
                put(&mut out, *s);
            }
            put(&mut out, u64::from(*jitter));
        }
        if !self.errors.is_empty() {
            put(&mut out, self.errors.len() as u64);
            for e in &self.errors {
                put(&mut out, u64::from(e.attempt));
                put(&mut out, e.at_ms.max(0) as u64);
                put(&mut out, e.message.len() as u64);
                out.extend_from_slice(e.message.as_bytes());
            }
        }
        if !self.meta.is_empty() {
            put(&mut out, self.meta.len() as u64);
            for (key, value) in &self.meta {
                put(&mut out, key.len() as u64);
                out.extend_from_slice(key.as_bytes());
                put(&mut out, value.len() as u64);
                out.extend_from_slice(value.as_bytes());
            }
        }
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, BoxError> {
        let (mut record, payload) = Self::decode_parts(bytes, true)?;
        record.payload = payload.to_vec();
        Ok(record)
    }

    /// Decodes all but the payload (left empty in the record), which is returned as a slice of `bytes`,
    /// and the key (left in `bytes`: a worker does not need it, and [`keep_key`] puts it back into a
    /// record it encodes from this one).
    pub(crate) fn decode_head(bytes: &[u8]) -> Result<(Self, &[u8]), BoxError> {
        Self::decode_parts(bytes, false)
    }

    fn decode_parts(bytes: &[u8], with_key: bool) -> Result<(Self, &[u8]), BoxError> {
        let mut r = Reader { bytes, pos: 0 };
        let first = r.byte()?;
        let flags = match (first, first >> 4) {
            (VERSION_1, _) => r.byte()?,
            (_, VERSION) => first & 0x0f,
            _ => return Err(format!("unknown record version {}", first >> 4).into()),
        };
        // A key came with version 2's one-byte header; a version 1 record has none.
        let known = if first == VERSION_1 {
            HAS_SCHEDULE | HAS_ERRORS | HAS_META
        } else {
            HAS_SCHEDULE | HAS_ERRORS | HAS_META | HAS_KEY
        };
        if flags & !known != 0 {
            return Err(format!("unknown record flags {flags:#x}").into());
        }
        let key = if flags & HAS_KEY == 0 {
            None
        } else if with_key {
            Some(r.string()?)
        } else {
            let len = r.len()?;
            std::str::from_utf8(r.take(len)?)?;
            None
        };
        let attempt = u32::try_from(r.varint()?)?;
        let enqueued_at_ms = i64::try_from(r.varint()?)?;
        let schedule = if flags & HAS_SCHEDULE != 0 {
            let n = r.len()?;
            let slots = (0..n).map(|_| r.varint()).collect::<Result<Vec<_>, _>>()?;
            let jitter = u16::try_from(r.varint()?)?;
            Some((slots, jitter))
        } else {
            None
        };
        let mut errors = Vec::new();
        if flags & HAS_ERRORS != 0 {
            for _ in 0..r.len()? {
                let attempt = u32::try_from(r.varint()?)?;
                let at_ms = i64::try_from(r.varint()?)?;
                let message = r.string()?;
                errors.push(AttemptError {
                    attempt,
                    at_ms,
                    message,
                });
            }
        }
        let mut meta = Meta::new();
        if flags & HAS_META != 0 {
            for _ in 0..r.len()? {
                let key = r.string()?;
                let value = r.string()?;
                meta.insert(key, value);
            }
        }
        let record = Record {
            attempt,
            enqueued_at_ms,
            schedule,
            errors,
            meta,
            key,
            payload: Vec::new(),
        };
        Ok((record, &bytes[r.pos..]))
    }
}

/// Makes encoded record `record` carry `key` as its key for fairness (flag 8, the key right after the
/// first byte), or none: in place, reading only the header's first bytes, and nothing to do when it
/// already does (the client encodes a keyed job's record with its key). Bytes that are not a version 2
/// record are left as they are: the store keeps records opaque, and such a job's key is then the one
/// its enqueue gave (a retry or an expired lease files it under no key).
pub(crate) fn put_key(record: &mut Vec<u8>, key: Option<&str>) {
    let Some((old, rest)) = key_span(record) else {
        return;
    };
    let first = record[0];
    if old.map(|span| &record[span]) == key.map(str::as_bytes) {
        return;
    }
    let mut out = Vec::with_capacity(record.len() + key.map_or(0, |k| k.len() + 2));
    match key {
        Some(k) => {
            out.push(first | HAS_KEY);
            put(&mut out, k.len() as u64);
            out.extend_from_slice(k.as_bytes());
        }
        None => out.push(first & !HAS_KEY),
    }
    out.extend_from_slice(&record[rest..]);
    *record = out;
}

/// Puts the key of record `original` (if any) into `record`, encoded from a record that
/// [`Record::decode_head`] decoded from `original` (a retry's or a death's).
pub(crate) fn keep_key(record: &mut Vec<u8>, original: &[u8]) {
    if let Some(Some(span)) = key_span(original).map(|(key, _)| key) {
        if let Ok(key) = std::str::from_utf8(&original[span]) {
            put_key(record, Some(key));
        }
    }
}

/// Where version 2 record `record` holds its key (`None`: it has none), and where the rest of its
/// header starts; `None` for bytes that are not a version 2 record, or a damaged key.
fn key_span(record: &[u8]) -> Option<(Option<std::ops::Range<usize>>, usize)> {
    let first = *record.first()?;
    if first >> 4 != VERSION {
        return None;
    }
    if first & HAS_KEY == 0 {
        return Some((None, 1));
    }
    let mut r = Reader {
        bytes: record,
        pos: 1,
    };
    let len = r.len().ok()?;
    let start = r.pos;
    Some((Some(start..start + len), start + len))
}

fn put(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, BoxError> {
        let b = *self.bytes.get(self.pos).ok_or("record is truncated")?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, BoxError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err("record holds an overlong number".into())
    }

    /// A count or length, bounded by what is left so a damaged record cannot ask for a huge allocation.
    fn len(&mut self) -> Result<usize, BoxError> {
        let n = usize::try_from(self.varint()?)?;
        if n > self.bytes.len() - self.pos {
            return Err("record is truncated".into());
        }
        Ok(n)
    }

    /// A length, then that many bytes of UTF-8.
    fn string(&mut self) -> Result<String, BoxError> {
        let len = self.len()?;
        Ok(String::from_utf8(self.take(len)?.to_vec())?)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], BoxError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or("record is truncated")?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut r = Record::new(1_732_240_000_123, br#"{"order_id":42}"#.to_vec());
        assert_eq!(Record::decode(&r.encode()).unwrap(), r);
        r.attempt = 3;
        r.schedule = Some((vec![0, 0, 10, 120_000], 100));
        r.push_error(AttemptError::new(1, 5, "boom"));
        r.push_error(AttemptError::new(2, 6, "ünïcode"));
        assert_eq!(Record::decode(&r.encode()).unwrap(), r);
    }

    #[test]
    fn metadata_round_trips_and_costs_nothing_when_empty() {
        let plain = Record::new(1_732_240_000_123, b"{}".to_vec());
        let mut r = plain.clone();
        r.meta
            .insert("traceparent".into(), "00-0af7-b7ad-01".into());
        r.meta.insert("tenant".into(), "ünï".into());
        r.push_error(AttemptError::new(1, 5, "boom"));
        let bytes = r.encode();
        assert_eq!(bytes[0], 2 << 4 | HAS_ERRORS | HAS_META);
        assert_eq!(Record::decode(&bytes).unwrap(), r);
        // A record written before metadata existed (version 2, flags 0) reads with none.
        let old = plain.encode();
        assert_eq!(old[0], 2 << 4);
        assert!(Record::decode(&old).unwrap().meta.is_empty());
        for cut in 0..bytes.len() {
            let _ = Record::decode(&bytes[..cut]);
        }
    }

    #[test]
    fn a_key_round_trips_right_after_the_first_byte() {
        let mut r = Record::new(1_732_240_000_123, b"{}".to_vec());
        r.key = Some("customer:ü".into());
        r.meta.insert("tenant".into(), "a".into());
        let bytes = r.encode();
        // Where fair.lua's record_key reads it: flag 8, then its length and bytes.
        assert_eq!(bytes[0], 2 << 4 | HAS_META | HAS_KEY);
        assert_eq!(usize::from(bytes[1]), "customer:ü".len());
        assert_eq!(&bytes[2..2 + "customer:ü".len()], "customer:ü".as_bytes());
        assert_eq!(Record::decode(&bytes).unwrap(), r);
        // A key of 128 bytes takes a two-byte length.
        r.key = Some("k".repeat(128));
        let bytes = r.encode();
        assert_eq!((bytes[1], bytes[2]), (0x80, 0x01));
        assert_eq!(Record::decode(&bytes).unwrap(), r);
        for cut in 0..bytes.len() {
            let _ = Record::decode(&bytes[..cut]);
        }
    }

    #[test]
    fn put_key_puts_replaces_and_takes_out_a_key_in_place() {
        let mut r = Record::new(7, b"{}".to_vec());
        r.meta.insert("m".into(), "v".into());
        let mut bytes = r.encode();
        put_key(&mut bytes, Some("acme"));
        r.key = Some("acme".into());
        assert_eq!(bytes, r.encode());
        put_key(&mut bytes, Some("globex"));
        r.key = Some("globex".into());
        assert_eq!(bytes, r.encode());
        put_key(&mut bytes, None);
        r.key = None;
        assert_eq!(bytes, r.encode());
        // A record decoded without its key (a worker's) gets it back from the one it came from.
        put_key(&mut bytes, Some("acme"));
        let (head, _) = Record::decode_head(&bytes).unwrap();
        assert_eq!(head.key, None);
        let mut again = head.encode();
        keep_key(&mut again, &bytes);
        assert_eq!(Record::decode(&again).unwrap().key.as_deref(), Some("acme"));
        // Not a version 2 record: left as it is.
        let mut other = b"record of a".to_vec();
        put_key(&mut other, Some("acme"));
        assert_eq!(other, b"record of a");
    }

    #[test]
    fn header_is_small() {
        let r = Record::new(1_732_240_000_123, vec![b'x'; 100]);
        assert_eq!(r.encode().len(), 100 + 8);
    }

    #[test]
    fn version_1_records_are_read() {
        // u8 1 | u8 flags (errors) | attempt 2 | enqueued 5 | 1 error: attempt 1, at 6, "e" | payload
        let old = [1, 2, 2, 5, 1, 1, 6, 1, b'e', b'{', b'}'];
        let r = Record::decode(&old).unwrap();
        assert_eq!((r.attempt, r.enqueued_at_ms), (2, 5));
        assert_eq!(r.errors, vec![AttemptError::new(1, 6, "e")]);
        assert_eq!(r.payload, b"{}");
        assert_eq!(Record::decode(&r.encode()).unwrap(), r);
        assert!(Record::decode(&[1, 8, 1, 1]).is_err(), "unknown flags");
        assert!(Record::decode(&[0x30, 1, 1]).is_err(), "unknown version");
    }

    #[test]
    fn error_history_is_bounded() {
        let mut r = Record::new(0, vec![]);
        for i in 0..50 {
            r.push_error(AttemptError::new(i, 0, "x".repeat(10_000)));
        }
        assert_eq!(r.errors.len(), MAX_ERRORS);
        assert_eq!(r.errors[0].attempt, 30);
        assert!(r.errors[0].message.len() <= MAX_ERROR_LEN + 3);
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        let good = Record::new(7, b"{}".to_vec());
        let mut with_errors = good.clone();
        with_errors.push_error(AttemptError::new(1, 1, "e"));
        for bytes in [good.encode(), with_errors.encode()] {
            for cut in 0..bytes.len() {
                let _ = Record::decode(&bytes[..cut]);
            }
        }
        assert!(Record::decode(&[]).is_err());
        assert!(Record::decode(&[9, 0, 1, 1]).is_err());
        assert!(Record::decode(&[1, 2, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }
}
