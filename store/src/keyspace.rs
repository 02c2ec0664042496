//! One shard's keyspace: a table per hash slot, entries with an optional absolute expiry,
//! expired lazily on every access.
//!
//! Keys are grouped by hash slot so that a slot is the unit of iteration (SCAN returns
//! whole slots, which is what makes its guarantee hold while keys come and go) and, later,
//! of migration between shards and nodes.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry as TableEntry;

use crate::slot::{SLOTS, key_slot};
use crate::value::Value;

/// Milliseconds since the Unix epoch; every command reads the clock once and passes it in.
pub type Millis = u64;

/// A key with its value and optional absolute expiry.
#[derive(Debug)]
pub struct Entry {
    key: Box<[u8]>,
    /// The value.
    pub value: Value,
    expire_at: Option<Millis>,
}

impl Entry {
    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The absolute expiry in milliseconds, if any.
    pub fn expire_at(&self) -> Option<Millis> {
        self.expire_at
    }

    /// Whether the entry is logically gone at `now`. Redis keeps a key alive through its
    /// expiry millisecond: it is expired once `now` is strictly later.
    pub fn is_expired(&self, now: Millis) -> bool {
        matches!(self.expire_at, Some(at) if now > at)
    }
}

type Table = HashTable<Entry>;

/// The keys of one shard.
pub struct Keyspace {
    hasher: foldhash::fast::RandomState,
    slots: Box<[Table]>,
    len: usize,
    volatile: usize,
}

impl Default for Keyspace {
    fn default() -> Self {
        Keyspace::new()
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("len", &self.len)
            .field("volatile", &self.volatile)
            .finish()
    }
}

impl Keyspace {
    /// An empty keyspace (with a randomly seeded hasher: keys are client-controlled).
    pub fn new() -> Self {
        Keyspace {
            hasher: foldhash::fast::RandomState::default(),
            slots: (0..SLOTS).map(|_| Table::new()).collect(),
            len: 0,
            volatile: 0,
        }
    }

    /// Number of keys, including ones that expired but were not yet removed (as Redis's
    /// DBSIZE counts them).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of keys that have an expiry.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    /// Number of keys stored in `slot`.
    pub fn slot_len(&self, slot: u16) -> usize {
        self.slots.get(usize::from(slot)).map_or(0, |t| t.len())
    }

    fn locate(&self, key: &[u8]) -> (usize, u64) {
        (usize::from(key_slot(key)), self.hasher.hash_one(key))
    }

    /// The live entry for `key`, removing it first if it has expired.
    pub fn get(&mut self, key: &[u8], now: Millis) -> Option<&Entry> {
        self.get_mut(key, now).map(|e| &*e)
    }

    /// The live entry for `key`, mutably, removing it first if it has expired. Use
    /// [`Keyspace::set_expire`] to change its expiry.
    pub fn get_mut(&mut self, key: &[u8], now: Millis) -> Option<&mut Entry> {
        let (slot, hash) = self.locate(key);
        let hasher = &self.hasher;
        match self.slots[slot].entry(hash, |e| *e.key == *key, |e| hasher.hash_one(&*e.key)) {
            TableEntry::Occupied(o) if o.get().is_expired(now) => {
                let (old, _) = o.remove();
                self.len -= 1;
                self.volatile -= usize::from(old.expire_at.is_some());
                None
            }
            TableEntry::Occupied(o) => Some(o.into_mut()),
            TableEntry::Vacant(_) => None,
        }
    }

    /// Whether `key` holds a live value.
    pub fn contains(&mut self, key: &[u8], now: Millis) -> bool {
        self.get(key, now).is_some()
    }

    /// Stores `value` at `key` with `expire_at`, replacing whatever was there; returns the
    /// previous value and expiry when they were still live at `now` (the returned entry's
    /// key is empty: the stored key is kept).
    pub fn insert(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at: Option<Millis>,
        now: Millis,
    ) -> Option<Entry> {
        let (slot, hash) = self.locate(key);
        let hasher = &self.hasher;
        let old =
            match self.slots[slot].entry(hash, |e| *e.key == *key, |e| hasher.hash_one(&*e.key)) {
                TableEntry::Occupied(mut o) => {
                    // Keep the stored key; swap in the new value and expiry.
                    let e = o.get_mut();
                    let value = std::mem::replace(&mut e.value, value);
                    let old_expire = std::mem::replace(&mut e.expire_at, expire_at);
                    Some(Entry {
                        key: Box::default(),
                        value,
                        expire_at: old_expire,
                    })
                }
                TableEntry::Vacant(v) => {
                    v.insert(Entry {
                        key: key.into(),
                        value,
                        expire_at,
                    });
                    None
                }
            };
        if expire_at.is_some() {
            self.volatile += 1;
        }
        match old {
            Some(old) => {
                if old.expire_at.is_some() {
                    self.volatile -= 1;
                }
                (!old.is_expired(now)).then_some(old)
            }
            None => {
                self.len += 1;
                None
            }
        }
    }

    /// Removes `key`; returns its entry when it was live at `now`.
    pub fn remove(&mut self, key: &[u8], now: Millis) -> Option<Entry> {
        let (slot, hash) = self.locate(key);
        let found = self.slots[slot].find_entry(hash, |e| *e.key == *key).ok()?;
        let (old, _) = found.remove();
        self.forget(&old);
        (!old.is_expired(now)).then_some(old)
    }

    /// Sets or clears the expiry of a live key; false when the key is absent at `now`.
    pub fn set_expire(&mut self, key: &[u8], expire_at: Option<Millis>, now: Millis) -> bool {
        let Some(entry) = self.get_mut(key, now) else {
            return false;
        };
        let before = entry.expire_at.is_some();
        entry.expire_at = expire_at;
        match (before, expire_at.is_some()) {
            (false, true) => self.volatile += 1,
            (true, false) => self.volatile -= 1,
            _ => {}
        }
        true
    }

    fn forget(&mut self, old: &Entry) {
        self.len -= 1;
        if old.expire_at.is_some() {
            self.volatile -= 1;
        }
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        for table in self.slots.iter_mut() {
            *table = Table::new();
        }
        self.len = 0;
        self.volatile = 0;
    }

    /// Calls `f` on every live key of `slot`, removing the expired ones it meets.
    pub fn for_each_in_slot(&mut self, slot: u16, now: Millis, mut f: impl FnMut(&Entry)) {
        let Some(table) = self.slots.get_mut(usize::from(slot)) else {
            return;
        };
        let before = table.len();
        let mut expired_volatile = 0;
        table.retain(|e| {
            if e.is_expired(now) {
                expired_volatile += 1;
                false
            } else {
                f(e);
                true
            }
        });
        self.len -= before - table.len();
        self.volatile -= expired_volatile;
    }
}

impl Keyspace {
    /// A random live key, chosen with `seed`: a random slot, then the first non-empty slot
    /// from there, then a random key in it. Expired keys met on the way are removed.
    pub fn random_key(&mut self, seed: u64, now: Millis) -> Option<Vec<u8>> {
        // A few tries, so that a keyspace of mostly expired keys still finds a live one.
        for attempt in 0..8u64 {
            if self.len == 0 {
                return None;
            }
            let mixed = seed.wrapping_add(attempt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let start = (mixed % SLOTS as u64) as usize;
            let slot = (0..SLOTS)
                .map(|i| (start + i) % SLOTS)
                .find(|&s| !self.slots[s].is_empty())?;
            let table = &self.slots[slot];
            let pick = ((mixed >> 16) % table.len() as u64) as usize;
            let entry = table.iter().nth(pick)?;
            if !entry.is_expired(now) {
                return Some(entry.key.to_vec());
            }
            let key = entry.key.clone();
            self.remove(&key, now);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[u8]) -> Value {
        Value::Str(v.to_vec())
    }

    #[test]
    fn insert_get_remove() {
        let mut ks = Keyspace::new();
        assert!(ks.insert(b"a", s(b"1"), None, 0).is_none());
        assert!(ks.insert(b"a", s(b"2"), None, 0).is_some());
        assert_eq!(ks.len(), 1);
        assert!(matches!(&ks.get(b"a", 0).map(|e| &e.value), Some(Value::Str(v)) if v == b"2"));
        assert!(ks.remove(b"a", 0).is_some());
        assert!(ks.remove(b"a", 0).is_none());
        assert!(ks.is_empty());
    }

    #[test]
    fn lazy_expiry_keeps_the_key_through_its_last_millisecond() {
        let mut ks = Keyspace::new();
        ks.insert(b"k", s(b"v"), Some(100), 0);
        assert_eq!(ks.volatile_len(), 1);
        assert!(ks.contains(b"k", 100));
        assert!(!ks.contains(b"k", 101));
        assert_eq!(ks.len(), 0);
        assert_eq!(ks.volatile_len(), 0);
    }

    #[test]
    fn overwrite_of_an_expired_key_reports_no_previous_value() {
        let mut ks = Keyspace::new();
        ks.insert(b"k", s(b"v"), Some(10), 0);
        assert!(ks.insert(b"k", s(b"w"), None, 50).is_none());
        assert_eq!(ks.len(), 1);
        assert_eq!(ks.volatile_len(), 0);
    }

    #[test]
    fn set_expire_tracks_volatile_keys() {
        let mut ks = Keyspace::new();
        ks.insert(b"k", s(b"v"), None, 0);
        assert!(ks.set_expire(b"k", Some(5), 0));
        assert_eq!(ks.volatile_len(), 1);
        assert!(ks.set_expire(b"k", None, 0));
        assert_eq!(ks.volatile_len(), 0);
        assert!(!ks.set_expire(b"missing", None, 0));
    }

    #[test]
    fn random_keys_are_live_keys() {
        let mut ks = Keyspace::new();
        assert_eq!(ks.random_key(1, 0), None);
        ks.insert(b"a", s(b"1"), None, 0);
        ks.insert(b"b", s(b"1"), Some(5), 0);
        for seed in 0..50 {
            assert_eq!(ks.random_key(seed, 10), Some(b"a".to_vec()));
        }
        assert_eq!(ks.len(), 1);
    }

    #[test]
    fn slot_iteration_skips_and_removes_expired_keys() {
        let mut ks = Keyspace::new();
        ks.insert(b"{t}a", s(b"1"), None, 0);
        ks.insert(b"{t}b", s(b"2"), Some(5), 0);
        let mut seen = Vec::new();
        ks.for_each_in_slot(key_slot(b"t"), 10, |e| seen.push(e.key().to_vec()));
        assert_eq!(seen, vec![b"{t}a".to_vec()]);
        assert_eq!(ks.len(), 1);
    }
}
