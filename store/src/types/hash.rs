//! Hashes: field → value.

use std::collections::HashMap;

/// A hash: field → value.
pub type Hash = HashMap<Vec<u8>, Vec<u8>>;

/// redis-server 7.0's `hash-max-listpack-entries`: more fields make it a hashtable.
const LISTPACK_ENTRIES: usize = 512;
/// redis-server 7.0's `hash-max-listpack-value`: a longer field or value makes it a
/// hashtable.
const LISTPACK_VALUE: usize = 64;
/// Bytes a field costs beyond its field and value: the table's slot and two vectors.
const PER_FIELD: usize = 64;
/// Bytes a hash costs before its fields.
const BASE: usize = 64;

/// The encoding OBJECT ENCODING reports: `listpack` while small, else `hashtable`.
pub fn encoding(h: &Hash) -> &'static str {
    let small = h.len() <= LISTPACK_ENTRIES
        && h.iter()
            .all(|(k, v)| k.len() <= LISTPACK_VALUE && v.len() <= LISTPACK_VALUE);
    if small { "listpack" } else { "hashtable" }
}

/// Approximate heap bytes.
pub fn heap_bytes(h: &Hash) -> usize {
    h.iter()
        .map(|(k, v)| k.len() + v.len() + PER_FIELD)
        .sum::<usize>()
        + BASE
}
