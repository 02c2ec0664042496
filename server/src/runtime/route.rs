//! The slot table: the one place that decides which shard owns a key.

use std::ops::Range;

use goblin_store::{SLOTS, key_slot};

/// Where a command's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// On the connection's thread (no keys, or a connection command).
    Here,
    /// All on one shard.
    Shard(usize),
    /// On several shards.
    Many,
}

/// What routing found out about a request, kept while it waits so that it is worked out
/// once.
#[derive(Debug, Clone, Copy, Default)]
pub struct Route {
    /// The command's index in the command table, once resolved.
    pub spec: Option<usize>,
    /// Where its keys are, once looked at.
    pub target: Option<Target>,
}

/// Which shard owns each of the 16384 hash slots. Contiguous ranges at start-up; a
/// table (not arithmetic) so that slots can move later.
#[derive(Debug, Clone)]
pub struct SlotTable {
    owner: Box<[u16]>,
    shards: usize,
}

impl SlotTable {
    /// `shards` contiguous ranges of (nearly) equal size.
    pub fn contiguous(shards: usize) -> Self {
        let shards = shards.clamp(1, SLOTS);
        let owner = (0..SLOTS)
            .map(|slot| (slot * shards / SLOTS) as u16)
            .collect();
        SlotTable { owner, shards }
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The shard owning `slot` (slots past the end wrap, as cursors may).
    pub fn shard_of_slot(&self, slot: usize) -> usize {
        usize::from(self.owner[slot % SLOTS])
    }

    /// The shard owning `key`.
    pub fn shard_of_key(&self, key: &[u8]) -> usize {
        usize::from(self.owner[usize::from(key_slot(key))])
    }

    /// The slots `shard` owns, when they are one range (always, for now).
    pub fn range(&self, shard: usize) -> Range<usize> {
        let start = self
            .owner
            .iter()
            .position(|&s| usize::from(s) == shard)
            .unwrap_or(SLOTS);
        let end = self.owner[start..]
            .iter()
            .position(|&s| usize::from(s) != shard)
            .map_or(SLOTS, |n| start + n);
        start..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_slot_once() {
        for n in [1, 2, 3, 4, 7, 64] {
            let t = SlotTable::contiguous(n);
            let mut next = 0;
            for shard in 0..n {
                let r = t.range(shard);
                assert_eq!(r.start, next);
                assert!(!r.is_empty());
                next = r.end;
            }
            assert_eq!(next, SLOTS);
        }
    }

    #[test]
    fn keys_follow_their_slot() {
        let t = SlotTable::contiguous(4);
        assert_eq!(t.shard_of_key(b"{a}x"), t.shard_of_key(b"{a}y"));
        assert_eq!(t.shard_of_key(b"foo"), t.shard_of_slot(12182));
    }
}
