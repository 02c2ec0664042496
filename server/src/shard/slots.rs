//! The slot map: which shard owns each of the 16384 hash slots.
//!
//! Every worker holds its own copy (an `Arc`), with a version. A new map reaches the
//! workers by message (`Msg::Slots`), so that slots can move between threads now and
//! between nodes later; a worker keeps the newest version it has seen. A batch or a
//! transaction step carries the version it was routed with: the owner checks its keys
//! against its own map only when the versions differ (the same version is the same map,
//! so the common case costs nothing), and refuses a key it does not own.
//!
//! Nothing assumes a shard's slots are one contiguous range: SCAN walks slots in order and
//! hands over to whichever shard owns the next one.

use goblin_store::{SLOTS, key_slot};

/// Which shard owns each hash slot, at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMap {
    owner: Box<[u16]>,
    shards: usize,
    version: u64,
}

impl SlotMap {
    /// Version 1: `shards` contiguous ranges of (nearly) equal size.
    pub fn contiguous(shards: usize) -> Self {
        let shards = shards.clamp(1, SLOTS);
        let owner = (0..SLOTS)
            .map(|slot| (slot * shards / SLOTS) as u16)
            .collect();
        SlotMap {
            owner,
            shards,
            version: 1,
        }
    }

    /// The next version, with each `(slot, shard)` of `moves` given to its new shard.
    /// Slots past the end and shards that do not exist are ignored.
    pub fn with_moves(&self, moves: &[(usize, usize)]) -> SlotMap {
        let mut next = self.clone();
        for &(slot, shard) in moves {
            if let Some(o) = next.owner.get_mut(slot)
                && shard < self.shards
            {
                *o = shard as u16;
            }
        }
        next.version += 1;
        next
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The version: higher is newer.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The shard owning `slot` (slots past the end wrap, as cursors may).
    pub fn shard_of_slot(&self, slot: usize) -> usize {
        usize::from(self.owner[slot % SLOTS])
    }

    /// The shard owning `key`.
    pub fn shard_of_key(&self, key: &[u8]) -> usize {
        usize::from(self.owner[usize::from(key_slot(key))])
    }

    /// The shards that own `keys` (each with its index), in the order they first
    /// appear, each with the indexes of its keys, in order: how a multi-key plan splits
    /// its reads.
    pub fn group_by_shard<'a>(
        &self,
        keys: impl IntoIterator<Item = (usize, &'a [u8])>,
    ) -> Vec<(usize, Vec<usize>)> {
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, key) in keys {
            let shard = self.shard_of_key(key);
            match groups.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, idx)) => idx.push(i),
                None => groups.push((shard, vec![i])),
            }
        }
        groups
    }

    /// Whether `shard` owns `slot`.
    pub fn owns(&self, shard: usize, slot: usize) -> bool {
        self.owner
            .get(slot)
            .is_some_and(|&o| usize::from(o) == shard)
    }

    /// The slots `shard` owns, in ascending order.
    pub fn slots_of(&self, shard: usize) -> impl Iterator<Item = usize> + '_ {
        (0..SLOTS).filter(move |&s| usize::from(self.owner[s]) == shard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_ranges_cover_every_slot_once() {
        for n in [1, 2, 3, 4, 7, 64] {
            let t = SlotMap::contiguous(n);
            let mut total = 0;
            for shard in 0..n {
                let slots: Vec<usize> = t.slots_of(shard).collect();
                assert!(!slots.is_empty());
                assert!(slots.windows(2).all(|w| w[1] == w[0] + 1));
                total += slots.len();
            }
            assert_eq!(total, SLOTS);
        }
    }

    #[test]
    fn keys_follow_their_slot() {
        let t = SlotMap::contiguous(4);
        assert_eq!(t.shard_of_key(b"{a}x"), t.shard_of_key(b"{a}y"));
        assert_eq!(t.shard_of_key(b"foo"), t.shard_of_slot(12182));
    }

    #[test]
    fn moves_make_a_newer_version() {
        let t = SlotMap::contiguous(2);
        let moved = t.with_moves(&[(0, 1), (SLOTS - 1, 0), (5, 9), (SLOTS, 0)]);
        assert_eq!(moved.version(), t.version() + 1);
        assert!(moved.owns(1, 0) && moved.owns(0, SLOTS - 1) && moved.owns(0, 5));
        assert_eq!(moved.slots_of(0).count(), SLOTS / 2);
    }
}
