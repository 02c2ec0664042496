//! Sorted sets, for now as member → score (the commands Goblin has so far need no order:
//! ZADD, ZSCORE).

use std::collections::HashMap;

/// A sorted set: member → score.
pub type SortedSet = HashMap<Vec<u8>, f64>;

/// redis-server 7.0's `zset-max-listpack-entries`: more members make it a skiplist.
const LISTPACK_ENTRIES: usize = 128;
/// redis-server 7.0's `zset-max-listpack-value`: a longer member makes it a skiplist.
const LISTPACK_VALUE: usize = 64;
/// Bytes a member costs beyond its bytes: the table's slot, the vector and the score.
const PER_MEMBER: usize = 48;
/// Bytes a sorted set costs before its members.
const BASE: usize = 64;

/// The encoding OBJECT ENCODING reports: `listpack` while small, else `skiplist`.
pub fn encoding(z: &SortedSet) -> &'static str {
    let small = z.len() <= LISTPACK_ENTRIES && z.keys().all(|k| k.len() <= LISTPACK_VALUE);
    if small { "listpack" } else { "skiplist" }
}

/// Approximate heap bytes.
pub fn heap_bytes(z: &SortedSet) -> usize {
    z.keys().map(|k| k.len() + PER_MEMBER).sum::<usize>() + BASE
}
