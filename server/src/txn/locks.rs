//! A shard's lock table: per-key lock state for the keys that transactions hold or wait
//! for, and which transaction holds what.
//!
//! The table knows a key by a 64-bit hash of its bytes ([`lock_key`]), computed once per
//! command: locking, checking and releasing copy no key and allocate nothing per key.
//! Two keys with one hash share one lock, which is coarser than needed but never wrong
//! (a command waits for a key it does not touch; the seed is random per process, so a
//! client cannot choose keys that collide).
//!
//! The table only answers questions and records grants; the shard keeps the FIFO list of
//! waiting items and decides when they run (see `shard/mod.rs`). Keys that nobody holds
//! or wants have no entry, so an idle table is empty and [`LockTable::quiet`] is one
//! branch.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher as _;
use std::sync::OnceLock;

use crate::runtime::msg::{ConnRef, LockMode, TxRef};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Lock state of one key that is locked or wanted.
#[derive(Debug, Default)]
struct KeyLock {
    readers: u32,
    writer: bool,
    /// Waiting items that need the key.
    queued: u32,
    /// Of its holders, those that locked it early (`EARLY_SEQ`).
    early: u32,
}

impl KeyLock {
    /// Whether it can be had in `mode` besides its holders.
    fn admits(&self, mode: LockMode) -> bool {
        match mode {
            LockMode::Shared => !self.writer,
            LockMode::Exclusive => !self.writer && self.readers == 0,
        }
    }
}

/// A key as the lock table knows it: [`lock_key`] of its bytes.
pub type LockKey = u64;

/// The [`LockKey`] of `key`: a hash with a seed drawn once per process.
pub fn lock_key(key: &[u8]) -> LockKey {
    static HASHER: OnceLock<foldhash::fast::FixedState> = OnceLock::new();
    HASHER
        .get_or_init(|| {
            let seed = foldhash::fast::RandomState::default().hash_one(0u64);
            foldhash::fast::FixedState::with_seed(seed)
        })
        .hash_one(key)
}

/// What a waiting item needs before it can go on: keys in a mode, or the whole shard.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Needs {
    /// Keys and how.
    pub keys: Vec<(LockKey, LockMode)>,
    /// The whole shard (keyspace-wide commands).
    pub all: bool,
}

impl Needs {
    /// The needs of `keys` (and of the whole shard with `all`).
    pub fn of(keys: &[(Vec<u8>, LockMode)], all: bool) -> Needs {
        Needs {
            keys: keys.iter().map(|(k, m)| (lock_key(k), *m)).collect(),
            all,
        }
    }

    /// True when nothing is needed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && !self.all
    }
}

/// Who holds and who waits for which key on one shard.
#[derive(Debug, Default)]
pub struct LockTable {
    locks: FastMap<LockKey, KeyLock>,
    holders: FastMap<TxRef, Needs>,
    all_holder: Option<TxRef>,
    queued_all: usize,
    waiting_conns: FastMap<ConnRef, usize>,
    /// Keys (by hash) that someone had to wait for lately: a connection's command does
    /// not lock them ahead of its turn (`Shard::hold_early`), which would hold the
    /// others back for a round trip each time. Forgotten every second (and past
    /// `CONTENDED_MAX` keys).
    contended: HashSet<LockKey, foldhash::fast::FixedState>,
    contended_since: u64,
    /// Keys locked early, and items that started waiting for a key locked early, in
    /// the window that began at `window_since`: when more than one lock in
    /// `EARLY_WAITS_PER` made something wait, no key is locked early here in the next
    /// window (readers that keep reading the keys a writer is writing would hold it back
    /// a round trip for each; with keys spread wide, a wait is rare and costs little).
    early_locks: u64,
    early_waits: u64,
    window_since: u64,
    cooling: bool,
    /// Key lists of released holders, for the next ones: a connection that locks keys
    /// early for each round trip allocates nothing for it.
    spare: Vec<Vec<(LockKey, LockMode)>>,
}

/// Most key lists [`LockTable::spare`] keeps.
const SPARE_LISTS: usize = 64;

/// Most keys [`LockTable::contended`] remembers.
const CONTENDED_MAX: usize = 4096;

/// The sequence numbers of the holders of keys locked early (`Worker::run_early`): a
/// range transactions do not reach.
pub const EARLY_SEQ: u64 = 1 << 63;

/// The window over which waits for keys locked early are counted, in ms.
const EARLY_WINDOW_MS: u64 = 100;

/// Keys locked early per wait for one, at least, for keys to go on being locked early.
const EARLY_WAITS_PER: u64 = 50;

impl LockTable {
    /// True when nothing is locked or wanted.
    pub fn quiet(&self) -> bool {
        self.locks.is_empty() && self.holders.is_empty()
    }

    /// Whether `tx` holds any lock here.
    pub fn holds(&self, tx: TxRef) -> bool {
        self.holders.contains_key(&tx)
    }

    /// Whether `key` is locked or wanted (or the whole shard held): eviction passes it by.
    pub fn locked(&self, key: &[u8]) -> bool {
        self.all_holder.is_some()
            || (!self.locks.is_empty() && self.locks.contains_key(&lock_key(key)))
    }

    /// Whether `tx` holds `key` and nobody else does: exclusively, or as its only reader.
    pub fn holds_alone(&self, tx: TxRef, key: &[u8]) -> bool {
        self.holds_alone_key(tx, lock_key(key))
    }

    /// [`LockTable::holds_alone`] of a [`LockKey`].
    fn holds_alone_key(&self, tx: TxRef, key: LockKey) -> bool {
        let (Some(needs), Some(lock)) = (self.holders.get(&tx), self.locks.get(&key)) else {
            return false;
        };
        needs.keys.iter().any(|(k, mode)| {
            *k == key
                && match mode {
                    LockMode::Exclusive => true,
                    LockMode::Shared => lock.readers == 1 && !lock.writer,
                }
        })
    }

    /// Whether a transaction coordinated by another worker than `me` holds locks here:
    /// its next step (or its release) comes from that worker.
    pub fn held_for_others(&self, me: usize) -> bool {
        !self.holders.is_empty()
            && self
                .holders
                .keys()
                .any(|tx| tx.worker != me && tx.seq & EARLY_SEQ == 0)
    }

    /// The transaction that holds the whole shard, if one does.
    pub fn whole_shard_holder(&self) -> Option<TxRef> {
        self.all_holder
    }

    /// Whether a keyspace-wide transaction holds the whole shard.
    pub fn whole_shard_held(&self) -> bool {
        self.all_holder.is_some()
    }

    /// Whether `needs` can be granted now (to `holder`, whose own locks do not conflict
    /// with it).
    pub fn compatible(&self, needs: &Needs, holder: Option<TxRef>) -> bool {
        if self.all_holder.is_some() && self.all_holder != holder {
            return false;
        }
        if needs.all && self.holders.keys().any(|t| Some(*t) != holder) {
            return false;
        }
        needs
            .keys
            .iter()
            .all(|(k, mode)| self.locks.get(k).is_none_or(|l| l.admits(*mode)))
    }

    /// [`LockTable::compatible`] for `tx`, to which the keys it holds alone are free.
    pub fn compatible_beside_own(&self, needs: &Needs, tx: TxRef) -> bool {
        if self.all_holder.is_some_and(|h| h != tx) {
            return false;
        }
        needs.keys.iter().all(|(k, mode)| {
            self.locks
                .get(k)
                .is_none_or(|l| l.admits(*mode) || self.holds_alone_key(tx, *k))
        })
    }

    /// Grants `tx` those of `needs` it does not hold already in a mode that covers
    /// them (the caller checked [`LockTable::compatible_beside_own`]); how many that is.
    pub fn acquire_more(&mut self, tx: TxRef, needs: &Needs) -> usize {
        let mut n = 0;
        for &(k, mode) in &needs.keys {
            // (A key nobody locked is not its; only a locked one is looked for.)
            let covered = self.locks.contains_key(&k)
                && self.holders.get(&tx).is_some_and(|held| {
                    held.keys.iter().any(|&(h, m)| {
                        h == k && (m == LockMode::Exclusive || mode == LockMode::Shared)
                    })
                });
            if !covered {
                self.grant(tx, k, mode);
                n += 1;
            }
        }
        if needs.all {
            self.grant_all(tx);
        }
        n
    }

    /// Grants `needs` to `tx` (the caller checked [`LockTable::compatible`]).
    pub fn acquire(&mut self, tx: TxRef, needs: &Needs) {
        for &(k, mode) in &needs.keys {
            self.grant(tx, k, mode);
        }
        if needs.all {
            self.grant_all(tx);
        }
    }

    /// Grants `tx` one key in `mode`.
    fn grant(&mut self, tx: TxRef, key: LockKey, mode: LockMode) {
        let early = tx.seq & EARLY_SEQ != 0;
        self.early_locks += u64::from(early);
        let l = self.locks.entry(key).or_default();
        l.early += u32::from(early);
        match mode {
            LockMode::Shared => l.readers += 1,
            LockMode::Exclusive => l.writer = true,
        }
        self.holding(tx).keys.push((key, mode));
    }

    /// Grants `tx` the whole shard.
    fn grant_all(&mut self, tx: TxRef) {
        self.all_holder = Some(tx);
        self.holding(tx).all = true;
    }

    /// What `tx` holds, a new holder taking a list a released one left.
    fn holding(&mut self, tx: TxRef) -> &mut Needs {
        let spare = &mut self.spare;
        self.holders.entry(tx).or_insert_with(|| Needs {
            keys: spare.pop().unwrap_or_default(),
            all: false,
        })
    }

    /// Whether a newcomer must queue behind waiting items: it needs a key (or the whole
    /// shard) some waiting item needs, or its connection already has an item waiting.
    pub fn queued_ahead(&self, needs: &Needs, from: Option<ConnRef>, anyone_waits: bool) -> bool {
        if self.queued_all > 0 {
            return true;
        }
        if needs.all && anyone_waits {
            return true;
        }
        if from.is_some_and(|c| self.waiting_conns.contains_key(&c)) {
            return true;
        }
        needs
            .keys
            .iter()
            .any(|(k, _)| self.locks.get(k).is_some_and(|l| l.queued > 0))
    }

    /// Records that keys were wanted while locked (or wanted already).
    pub fn contend(&mut self, keys: &[(LockKey, LockMode)]) {
        if self.contended.len() + keys.len() > CONTENDED_MAX {
            self.contended.clear();
        }
        self.contended.extend(keys.iter().map(|(k, _)| *k));
    }

    /// Whether any of `keys` was wanted while locked within the last second, or keys
    /// locked early made others wait too often in the last window (`now`: the time in
    /// milliseconds).
    pub fn contended(&mut self, keys: &[(LockKey, LockMode)], now: u64) -> bool {
        if now.saturating_sub(self.window_since) >= EARLY_WINDOW_MS {
            self.cooling = self.early_waits * EARLY_WAITS_PER > self.early_locks;
            (self.early_locks, self.early_waits) = (0, 0);
            self.window_since = now;
        }
        if self.cooling {
            return true;
        }
        if now.saturating_sub(self.contended_since) >= 1000 {
            self.contended.clear();
            self.contended_since = now;
        }
        !self.contended.is_empty() && keys.iter().any(|(k, _)| self.contended.contains(k))
    }

    /// Records that keys locked early here (`Worker::hold_back`) were unlocked before
    /// all their commands ran: the batch they were held for stopped short elsewhere. It counts as a wait for
    /// them (how often early locks cost a round trip decides whether they go on).
    pub fn early_given_up(&mut self) {
        self.early_waits += 1;
    }

    /// Records that an item with `needs` (from connection `from`) waits.
    pub fn wait(&mut self, needs: &Needs, from: Option<ConnRef>) {
        self.contend(&needs.keys);
        if needs
            .keys
            .iter()
            .any(|(k, _)| self.locks.get(k).is_some_and(|l| l.early > 0))
        {
            self.early_waits += 1;
        }
        for (k, _) in &needs.keys {
            self.locks.entry(*k).or_default().queued += 1;
        }
        if needs.all {
            self.queued_all += 1;
        }
        if let Some(c) = from {
            *self.waiting_conns.entry(c).or_default() += 1;
        }
    }

    /// Records that a waiting item stopped waiting.
    pub fn unwait(&mut self, needs: &Needs, from: Option<ConnRef>) {
        for (k, _) in &needs.keys {
            if let Some(l) = self.locks.get_mut(k) {
                l.queued = l.queued.saturating_sub(1);
                if l.queued == 0 && l.readers == 0 && !l.writer {
                    self.locks.remove(k);
                }
            }
        }
        if needs.all {
            self.queued_all = self.queued_all.saturating_sub(1);
        }
        if let Some(c) = from
            && let Some(n) = self.waiting_conns.get_mut(&c)
        {
            *n -= 1;
            if *n == 0 {
                self.waiting_conns.remove(&c);
            }
        }
    }

    /// Releases every lock `tx` holds here; false when it held none.
    pub fn release(&mut self, tx: TxRef) -> bool {
        let Some(held) = self.holders.remove(&tx) else {
            return false;
        };
        let early = tx.seq & EARLY_SEQ != 0;
        let mut keys = held.keys;
        for &(k, mode) in &keys {
            if let Some(l) = self.locks.get_mut(&k) {
                l.early = l.early.saturating_sub(u32::from(early));
                match mode {
                    LockMode::Shared => l.readers = l.readers.saturating_sub(1),
                    LockMode::Exclusive => l.writer = false,
                }
                if l.queued == 0 && l.readers == 0 && !l.writer {
                    self.locks.remove(&k);
                }
            }
        }
        if self.all_holder == Some(tx) {
            self.all_holder = None;
        }
        if self.spare.len() < SPARE_LISTS {
            keys.clear();
            self.spare.push(keys);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: TxRef = TxRef { worker: 0, seq: 1 };
    const T2: TxRef = TxRef { worker: 0, seq: 2 };

    fn needs(keys: &[(&[u8], LockMode)]) -> Needs {
        Needs {
            keys: keys.iter().map(|(k, m)| (lock_key(k), *m)).collect(),
            all: false,
        }
    }

    #[test]
    fn readers_share_and_writers_exclude() {
        let mut t = LockTable::default();
        let read = needs(&[(b"a", LockMode::Shared)]);
        let write = needs(&[(b"a", LockMode::Exclusive)]);
        t.acquire(T1, &read);
        assert!(t.compatible(&read, Some(T2)));
        assert!(!t.compatible(&write, Some(T2)));
        assert!(t.release(T1));
        assert!(t.compatible(&write, Some(T2)));
        assert!(t.quiet());
    }

    #[test]
    fn the_whole_shard_waits_for_every_holder() {
        let mut t = LockTable::default();
        t.acquire(T1, &needs(&[(b"a", LockMode::Shared)]));
        let all = Needs {
            keys: Vec::new(),
            all: true,
        };
        assert!(!t.compatible(&all, Some(T2)));
        assert!(
            t.compatible(&all, Some(T1)),
            "a holder may widen its own locks"
        );
        t.release(T1);
        t.acquire(T2, &all);
        assert!(!t.compatible(&needs(&[(b"z", LockMode::Shared)]), Some(T1)));
    }

    #[test]
    fn holders_for_other_workers_are_told_apart() {
        let mut t = LockTable::default();
        let remote = TxRef { worker: 1, seq: 3 };
        let early = TxRef {
            worker: 1,
            seq: EARLY_SEQ | 4,
        };
        assert!(!t.held_for_others(0));
        t.acquire(T1, &needs(&[(b"a", LockMode::Exclusive)]));
        t.acquire(early, &needs(&[(b"b", LockMode::Shared)]));
        assert!(!t.held_for_others(0), "its own, and a batch's early lock");
        t.acquire(remote, &needs(&[(b"c", LockMode::Shared)]));
        assert!(t.held_for_others(0));
        assert!(
            t.held_for_others(1),
            "worker 0's transaction, seen from worker 1"
        );
        t.release(remote);
        assert!(!t.held_for_others(0));
    }

    #[test]
    fn waiting_items_are_counted_per_key_and_connection() {
        let mut t = LockTable::default();
        let c = ConnRef {
            worker: 0,
            key: 1,
            generation: 1,
        };
        let n = needs(&[(b"a", LockMode::Exclusive)]);
        t.wait(&n, Some(c));
        assert!(t.queued_ahead(&needs(&[(b"a", LockMode::Shared)]), None, true));
        assert!(t.queued_ahead(&needs(&[(b"b", LockMode::Shared)]), Some(c), true));
        assert!(!t.queued_ahead(&needs(&[(b"b", LockMode::Shared)]), None, true));
        t.unwait(&n, Some(c));
        assert!(t.quiet());
    }

    /// A key someone waited for is contended for a second (by the clock given), then
    /// forgotten; others are not.
    #[test]
    fn keys_waited_for_are_contended_for_a_second() {
        let mut table = LockTable::default();
        let hot = needs(&[(b"hot", LockMode::Exclusive)]);
        let cold = needs(&[(b"cold", LockMode::Exclusive)]);
        assert!(!table.contended(&hot.keys, 5_000));
        table.wait(&hot, None);
        assert!(table.contended(&hot.keys, 5_500));
        assert!(!table.contended(&cold.keys, 5_500));
        table.unwait(&hot, None);
        assert!(table.contended(&hot.keys, 5_999));
        assert!(!table.contended(&hot.keys, 6_000));
        // Bounded: past CONTENDED_MAX keys it starts again.
        for i in 0..CONTENDED_MAX {
            table.contend(&needs(&[(format!("k{i}").as_bytes(), LockMode::Shared)]).keys);
        }
        table.contend(&hot.keys);
        assert!(table.contended(&hot.keys, 6_001));
        assert!(table.contended.len() <= CONTENDED_MAX);
    }

    /// When keys locked early make others wait more than once per `EARLY_WAITS_PER`
    /// locks in a window, no key is locked early in the next one.
    #[test]
    fn waits_for_keys_locked_early_cool_every_key() {
        let mut table = LockTable::default();
        let early = TxRef {
            worker: 1,
            seq: EARLY_SEQ | 7,
        };
        let cold = needs(&[(b"cold", LockMode::Shared)]);
        let other = needs(&[(b"other", LockMode::Shared)]);
        table.acquire(T1, &other);
        table.wait(&other, None);
        assert!(table.contended(&other.keys, 100));
        assert!(
            !table.contended(&cold.keys, 100),
            "a plan's key cools only itself"
        );
        // Rare waits: it goes on.
        for i in 0..EARLY_WAITS_PER {
            table.acquire(
                early,
                &needs(&[(format!("k{i}").as_bytes(), LockMode::Shared)]),
            );
        }
        table.wait(&needs(&[(b"k0", LockMode::Exclusive)]), None);
        assert!(!table.contended(&cold.keys, 150));
        assert!(
            !table.contended(&cold.keys, 250),
            "1 wait in {EARLY_WAITS_PER} locks"
        );
        // Frequent ones: the next window locks nothing early.
        table.acquire(early, &needs(&[(b"k1", LockMode::Shared)]));
        table.wait(&needs(&[(b"k1", LockMode::Exclusive)]), None);
        assert!(!table.contended(&cold.keys, 300));
        assert!(table.contended(&cold.keys, 350));
        assert!(
            !table.contended(&cold.keys, 450),
            "nothing waited in the cool window"
        );
    }
}
