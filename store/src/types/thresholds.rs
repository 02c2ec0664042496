//! The encodings' thresholds — redis.conf's `hash-max-listpack-entries`,
//! `hash-max-listpack-value`, `zset-max-listpack-entries`, `zset-max-listpack-value` and
//! `set-max-intset-entries` — read as values are written: a hash, sorted set or set
//! past one takes its large form, as in Redis (and, as there, never goes back). They are
//! process-wide (CONFIG SET changes them for every shard at once), each within what its
//! compact form can hold: a compact sorted set keeps at most 255 members of at most 255
//! bytes, a compact hash at most 65,534 fields of at most 4 GiB each, whatever larger
//! value is configured.

use std::sync::atomic::{AtomicUsize, Ordering};

/// One threshold: the configured value, kept within its form's bound.
#[derive(Debug)]
pub struct Threshold {
    value: AtomicUsize,
    bound: usize,
}

impl Threshold {
    const fn new(default: usize, bound: usize) -> Threshold {
        Threshold {
            value: AtomicUsize::new(default),
            bound,
        }
    }

    /// The threshold in force.
    #[inline]
    pub fn get(&self) -> usize {
        self.value.load(Ordering::Relaxed)
    }

    /// Sets it to `value`, or to its form's bound when `value` is past it.
    pub fn set(&self, value: u64) {
        let value = usize::try_from(value).unwrap_or(usize::MAX).min(self.bound);
        self.value.store(value, Ordering::Relaxed);
    }
}

/// `hash-max-listpack-entries` (default 512): more fields make a hash a hashtable.
pub static HASH_LISTPACK_ENTRIES: Threshold = Threshold::new(512, u16::MAX as usize - 1);
/// `hash-max-listpack-value` (default 64): a longer field or value makes it a hashtable.
pub static HASH_LISTPACK_VALUE: Threshold = Threshold::new(64, u32::MAX as usize);
/// `zset-max-listpack-entries` (default 128): more members make a sorted set a skiplist.
pub static ZSET_LISTPACK_ENTRIES: Threshold = Threshold::new(128, u8::MAX as usize);
/// `zset-max-listpack-value` (default 64): a longer member makes it a skiplist.
pub static ZSET_LISTPACK_VALUE: Threshold = Threshold::new(64, u8::MAX as usize);
/// `set-max-intset-entries` (default 512): more integers make an intset a hashtable.
pub static SET_INTSET_ENTRIES: Threshold = Threshold::new(512, usize::MAX);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_past_the_bound_is_the_bound() {
        let t = Threshold::new(64, 255);
        t.set(1000);
        assert_eq!(t.get(), 255);
        t.set(0);
        assert_eq!(t.get(), 0);
        t.set(u64::MAX);
        assert_eq!(t.get(), 255);
    }
}
