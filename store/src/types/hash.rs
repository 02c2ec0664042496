//! Hashes: field → value.
//!
//! The representation is private to this module; what the rest of Goblin uses is the
//! API below (the contract every representation keeps: `len`, `get`, `insert`, `remove`,
//! `for_each`, `encoding`, `heap_bytes`).

use std::collections::HashMap;

/// redis-server 7.0's `hash-max-listpack-entries`: more fields make it a hashtable.
pub const LISTPACK_ENTRIES: usize = 512;
/// redis-server 7.0's `hash-max-listpack-value`: a longer field or value makes it a
/// hashtable.
pub const LISTPACK_VALUE: usize = 64;
/// Bytes a field costs beyond its field and value: the table's slot and two vectors.
const PER_FIELD: usize = 64;
/// Bytes a hash costs before its fields.
const BASE: usize = 64;

/// A hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hash {
    fields: HashMap<Vec<u8>, Vec<u8>>,
}

impl Hash {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when there is no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.fields.get(field).map(Vec::as_slice)
    }

    /// Sets `field` to `value`; true when the field is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        self.fields.insert(field.to_vec(), value.to_vec()).is_none()
    }

    /// Removes `field`; true when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        self.fields.remove(field).is_some()
    }

    /// Calls `f` with every field and its value.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        for (k, v) in &self.fields {
            f(k, v);
        }
    }

    /// The encoding OBJECT ENCODING reports: `listpack` while small, else `hashtable`.
    pub fn encoding(&self) -> &'static str {
        let small = self.fields.len() <= LISTPACK_ENTRIES
            && self
                .fields
                .iter()
                .all(|(k, v)| k.len() <= LISTPACK_VALUE && v.len() <= LISTPACK_VALUE);
        if small { "listpack" } else { "hashtable" }
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.fields
            .iter()
            .map(|(k, v)| k.len() + v.len() + PER_FIELD)
            .sum::<usize>()
            + BASE
    }
}
