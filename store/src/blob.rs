//! The compact encoding of a keyspace entry: one heap allocation holding the key, the
//! expiry (when there is one) and, for small strings, the value.
//!
//! ```text
//! [flags: u8][access: 24 bits LE][key length: LEB128][value length: LEB128, if inline]
//!     [expiry: u64 LE, if flags & EXPIRES][key][payload]
//! ```
//!
//! A blob says how long it is ([`len`]): it lives in an arena chunk that may be longer
//! (see `arena.rs`), and is read from a slice that may run past its end.
//!
//! The access field is what eviction reads, as Redis keeps it in each object's 24 `lru`
//! bits: the last access in seconds (LRU), or the access frequency's logarithmic counter
//! and the minute it was last decayed (LFU).
//!
//! The payload is the string itself (`INLINE`), or the 4-byte index of a boxed value kept
//! beside the table (`BOXED`: hashes, sorted sets, strings too large to copy on every
//! change). A 16-byte key with a 32-byte value and no expiry is a 54-byte blob in a
//! 56-byte chunk; a key, its value and its expiry are read from one cache line or two.

use crate::keyspace::Millis;
use crate::leb128;

/// The entry has an expiry.
const EXPIRES: u8 = 1;
/// The payload is an index into the boxed values, not the string.
const BOXED: u8 = 1 << 1;
/// The string was changed in place (APPEND, SETRANGE): Redis reports such strings'
/// encoding as `raw`, whatever their length.
pub const RAW: u8 = 1 << 2;
/// The string is never integer-encoded by Redis, even if it reads as an integer (the
/// result of INCRBYFLOAT).
pub const NOT_INT: u8 = 1 << 3;
/// An integer string that Redis would not share (a COPY): OBJECT REFCOUNT is 1.
pub const UNSHARED: u8 = 1 << 4;
/// Eviction passes the entry by: a claim or a claim's result (GOBLIN.CLAIM, PUBLISH).
/// Kept when the expiry changes (GOBLIN.RENEW); any other write of the key clears it.
pub const PINNED: u8 = 1 << 5;

/// Whether eviction passes the entry by ([`PINNED`]).
pub fn pinned(blob: &[u8]) -> bool {
    blob.first().is_some_and(|f| f & PINNED != 0)
}

/// Pins the entry ([`PINNED`]).
pub fn pin(blob: &mut [u8]) {
    if let Some(f) = blob.first_mut() {
        *f |= PINNED;
    }
}

/// The flags that describe Redis's encoding of a value, kept when the entry is
/// rewritten with another expiry or moved to another key.
pub const ENCODING_FLAGS: u8 = RAW | NOT_INT | UNSHARED;

/// What an entry's payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// A string stored in the blob.
    Inline(&'a [u8]),
    /// The index of a boxed value.
    Boxed(u32),
}

/// Bytes of the access field.
const ACCESS: usize = 3;

/// The access field (24 bits).
pub fn access(blob: &[u8]) -> u32 {
    match blob.get(1..1 + ACCESS) {
        Some(&[a, b, c]) => u32::from(a) | u32::from(b) << 8 | u32::from(c) << 16,
        _ => 0,
    }
}

/// Sets the access field (its low 24 bits).
pub fn set_access(blob: &mut [u8], value: u32) {
    if let Some(field) = blob.get_mut(1..1 + ACCESS) {
        field.copy_from_slice(&value.to_le_bytes()[..ACCESS]);
    }
}

/// The parsed header of a blob.
#[derive(Clone, Copy, Debug)]
struct Header {
    flags: u8,
    key_len: usize,
    /// Offset of the key.
    key_at: usize,
    /// Bytes of the payload (4 when boxed).
    payload_len: usize,
}

fn header(blob: &[u8]) -> Header {
    let flags = blob.first().copied().unwrap_or(0);
    let mut at = 1 + ACCESS;
    let key_len = leb128::read(blob, &mut at);
    let payload_len = if flags & BOXED != 0 {
        4
    } else {
        leb128::read(blob, &mut at)
    };
    let key_at = at + if flags & EXPIRES != 0 { 8 } else { 0 };
    Header {
        flags,
        key_len,
        key_at,
        payload_len,
    }
}

/// Bytes of the blob that starts `bytes` (which may run past its end).
pub fn len(bytes: &[u8]) -> usize {
    let h = header(bytes);
    h.key_at + h.key_len + h.payload_len
}

/// Bytes a blob for these parts takes.
pub fn size(key: &[u8], expire: Option<Millis>, payload: Payload<'_>) -> usize {
    let payload_len = match payload {
        Payload::Inline(s) => leb128::len(s.len()) + s.len(),
        Payload::Boxed(_) => 4,
    };
    1 + ACCESS
        + leb128::len(key.len())
        + if expire.is_some() { 8 } else { 0 }
        + key.len()
        + payload_len
}

/// Writes a blob into `out`, which must be [`size`] bytes long (its access field zero:
/// the keyspace sets it); what does not fit is left out, never written past.
pub fn write(out: &mut [u8], key: &[u8], expire: Option<Millis>, payload: Payload<'_>) {
    let mut w = 0;
    let mut put = |bytes: &[u8]| {
        if let Some(to) = out.get_mut(w..w + bytes.len()) {
            to.copy_from_slice(bytes);
        }
        w += bytes.len();
    };
    let flags = if expire.is_some() { EXPIRES } else { 0 }
        | if matches!(payload, Payload::Boxed(_)) {
            BOXED
        } else {
            0
        };
    put(&[flags]);
    put(&[0; ACCESS]);
    leb128::write(key.len(), |b| put(&[b]));
    if let Payload::Inline(s) = payload {
        leb128::write(s.len(), |b| put(&[b]));
    }
    if let Some(at) = expire {
        put(&at.to_le_bytes());
    }
    put(key);
    match payload {
        Payload::Inline(s) => put(s),
        Payload::Boxed(i) => put(&i.to_le_bytes()),
    }
}

/// A new blob.
pub fn build(key: &[u8], expire: Option<Millis>, payload: Payload<'_>) -> Box<[u8]> {
    let mut blob = vec![0u8; size(key, expire, payload)].into_boxed_slice();
    write(&mut blob, key, expire, payload);
    blob
}

/// The key.
pub fn key(blob: &[u8]) -> &[u8] {
    let h = header(blob);
    blob.get(h.key_at..h.key_at + h.key_len).unwrap_or(b"")
}

/// The expiry.
pub fn expire(blob: &[u8]) -> Option<Millis> {
    let h = header(blob);
    if h.flags & EXPIRES == 0 {
        return None;
    }
    let at = h.key_at - 8;
    blob.get(at..h.key_at)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
}

/// The entry's encoding flags ([`ENCODING_FLAGS`]).
pub fn encoding_flags(blob: &[u8]) -> u8 {
    blob.first().map_or(0, |f| f & ENCODING_FLAGS)
}

/// Sets encoding flags on the entry.
pub fn add_encoding_flags(blob: &mut [u8], flags: u8) {
    if let Some(f) = blob.first_mut() {
        *f |= flags & ENCODING_FLAGS;
    }
}

/// The payload.
pub fn payload(blob: &[u8]) -> Payload<'_> {
    let h = header(blob);
    let at = h.key_at + h.key_len;
    let rest = blob.get(at..at + h.payload_len).unwrap_or(b"");
    if h.flags & BOXED != 0 {
        let index = rest
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes);
        Payload::Boxed(index)
    } else {
        Payload::Inline(rest)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let long_key = vec![b'k'; 300];
        for key in [&b""[..], b"k", b"key:000000000001", &long_key] {
            for expire in [None, Some(0), Some(1_700_000_000_123)] {
                for payload in [
                    Payload::Inline(b""),
                    Payload::Inline(b"value\0\r\n"),
                    Payload::Inline(&[b'v'; 200]),
                    Payload::Boxed(7),
                ] {
                    let blob = build(key, expire, payload);
                    assert_eq!(blob.len(), size(key, expire, payload));
                    assert_eq!(len(&blob), blob.len());
                    // Read from a longer slice (an arena chunk), the blob is the same.
                    let mut padded = blob.to_vec();
                    padded.extend_from_slice(&[0xff; 9]);
                    assert_eq!(len(&padded), blob.len());
                    assert_eq!(super::key(&padded), key);
                    assert_eq!(super::payload(&padded), payload);
                    assert_eq!(super::key(&blob), key);
                    assert_eq!(super::expire(&blob), expire);
                    assert_eq!(super::payload(&blob), payload);
                    let mut blob = blob;
                    set_access(&mut blob, 0x00ab_cdef);
                    assert_eq!(access(&blob), 0x00ab_cdef);
                    assert_eq!(super::key(&blob), key);
                    assert_eq!(super::expire(&blob), expire);
                }
            }
        }
    }

    #[test]
    fn a_small_entry_is_small() {
        assert_eq!(size(&[b'k'; 16], None, Payload::Inline(&[b'v'; 32])), 54);
        assert_eq!(size(&[b'k'; 16], Some(1), Payload::Inline(&[b'v'; 32])), 62);
    }
}
