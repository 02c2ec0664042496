//! A keyspace's tables, one per hash slot, made as keys come.
//!
//! Each of the 16,384 slots has a table of its own (a slot's keys are counted, listed
//! and moved without looking at the others', and a table grows without rehashing the
//! whole keyspace). An empty table is 32 bytes, so all of them take half a megabyte:
//! made at a keyspace's first key, that was half a megabyte per thread for one key, which
//! a `maxmemory` set a little above the memory in use (as Redis's own tests set it)
//! refused at once. Tables are made in chunks of [`CHUNK`] slots (512 bytes), at the
//! first key of one of them, after an index of the chunks (8 KiB) at the keyspace's
//! first key; a chunk whose tables are all empty again is freed. So a keyspace's tables
//! take memory as its keys come and go, as redis-server's dictionary does: evicting
//! keys gives back what new keys in other slots take (Redis's maxmemory tests add keys
//! in random slots up to 4 KiB under the limit, and then as many again).

use hashbrown::HashTable;

use crate::arena::Handle;
use crate::slot::SLOTS;

/// Slots per chunk (a divisor of [`SLOTS`]).
pub const CHUNK: usize = 16;

/// A slot's table: the handles of its entries.
pub type Table = HashTable<Handle>;

/// The tables of [`CHUNK`] consecutive slots.
type Chunk = [Table; CHUNK];

/// The slot tables of one keyspace.
#[derive(Debug, Default)]
pub struct SlotTables {
    /// Per chunk of slots, its tables once one of them had a key (none at all before the
    /// keyspace's first key).
    chunks: Box<[Option<Box<Chunk>>]>,
}

impl SlotTables {
    /// `slot`'s table, if it was made.
    #[inline]
    pub fn get(&self, slot: usize) -> Option<&Table> {
        self.chunks
            .get(slot / CHUNK)?
            .as_deref()
            .map(|c| &c[slot % CHUNK])
    }

    /// `slot`'s table, if it was made.
    #[inline]
    pub fn get_mut(&mut self, slot: usize) -> Option<&mut Table> {
        self.chunks
            .get_mut(slot / CHUNK)?
            .as_deref_mut()
            .map(|c| &mut c[slot % CHUNK])
    }

    /// `slot`'s table, made (with its chunk) if it was not (`slot` is taken modulo
    /// [`SLOTS`]).
    pub fn get_or_make(&mut self, slot: usize) -> &mut Table {
        if self.chunks.is_empty() {
            self.chunks = (0..SLOTS / CHUNK).map(|_| None).collect();
        }
        let slot = slot % SLOTS;
        let chunk = self.chunks[slot / CHUNK]
            .get_or_insert_with(|| Box::new(std::array::from_fn(|_| HashTable::new())));
        &mut chunk[slot % CHUNK]
    }

    /// Frees `slot`'s chunk when none of its tables holds anything, not even buckets.
    pub fn release_if_empty(&mut self, slot: usize) {
        if let Some(entry) = self.chunks.get_mut(slot / CHUNK)
            && entry
                .as_deref()
                .is_some_and(|c| c.iter().all(|t| t.capacity() == 0))
        {
            *entry = None;
        }
    }

    /// The tables made, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &Table> {
        self.chunks.iter().flatten().flat_map(|c| c.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_made_a_chunk_at_a_time() {
        let mut t = SlotTables::default();
        assert!(t.get(0).is_none() && t.iter().next().is_none());
        t.get_or_make(CHUNK + 3).insert_unique(7, 1, |_| 7);
        assert_eq!(t.iter().count(), CHUNK, "one chunk made");
        assert_eq!(t.get(CHUNK + 3).map(Table::len), Some(1));
        assert_eq!(
            t.get(CHUNK).map(Table::len),
            Some(0),
            "its neighbours are there"
        );
        assert!(
            t.get(0).is_none() && t.get(SLOTS - 1).is_none(),
            "other chunks are not"
        );
        assert!(t.get(SLOTS).is_none(), "past the last slot: nothing");
        t.get_or_make(SLOTS - 1);
        assert_eq!(t.iter().count(), 2 * CHUNK);
        assert!(t.get_mut(SLOTS - 1).is_some());
        // A chunk goes once its tables are empty and hold no buckets.
        t.release_if_empty(SLOTS - 1);
        assert!(t.get(SLOTS - 1).is_none());
        t.release_if_empty(CHUNK);
        assert!(t.get(CHUNK).is_some(), "a table of the chunk holds a key");
        if let Some(table) = t.get_mut(CHUNK + 3) {
            *table = Table::new();
        }
        t.release_if_empty(CHUNK);
        assert!(t.get(CHUNK + 3).is_none() && t.iter().next().is_none());
    }
}
