//! Watched keys (WATCH): which clients watch which keys of this shard, and how the key
//! events of each unit of work make their transactions fail.
//!
//! A client that watches keys holds a [`Watching`]: a [`WatchState`] shared with the
//! shards that own its keys, and the keys (for EXEC's locks). Each of those shards keeps,
//! per watched key of a database, one entry per client in its [`WatchTable`], put there
//! by a hop of WATCH's plan on the shard's own thread. After every unit of work the shard
//! hands the unit's events to the table (`Shard::publish`), in order, which applies
//! redis-server 7.0's rules (`touchWatchedKey`, `touchAllWatchedKeysInDb`):
//!
//! - a key written, deleted or expired makes its watchers dirty — except a watcher that
//!   found the key already expired (stale) when it watched it, when the change removed
//!   the key: a stale key going away is no logical change;
//! - a database emptied or swapped (FLUSHDB, FLUSHALL, SWAPDB) makes dirty the watchers of
//!   the keys it held before (stale ones included) or holds after — but for a stale key
//!   that is gone or stays stale, and an absent key that comes back stale.
//!
//! The flag is set on the shard's thread inside the unit of work that changed the key, so
//! a lock the shard grants afterwards carries it: EXEC locks the watched keys (shared)
//! with its own, and reads the flag once it holds every lock. It then also fails if a key
//! that was live when watched has reached its expiry since ([`WatchState::voided`]), even
//! if nothing removed it yet — Redis's `isWatchedKeyExpired`.
//!
//! Unwatching (EXEC, DISCARD, UNWATCH, RESET, the connection's end) drops the client's
//! [`Watching`], which marks its state gone. A shard drops the entries of a state that is
//! gone or dirty (there is nothing more to tell it) whenever it meets them, and sweeps the
//! whole table when it has doubled since the last sweep, or after as many units of work as
//! it has entries: it cannot grow without bound, and it empties soon after the last client
//! stops watching. While it holds entries the shard's keyspaces record their key events,
//! writes listed with their keys; while it is empty it costs nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use goblin_store::{Change, Event, KeyEvent, Millis};

/// Entries a table may hold before its first sweep (and at least between two sweeps):
/// below this a sweep would cost more than the memory it gives back.
const SWEEP_MIN: usize = 64;

/// What one client's watch has come to, shared by the client and the shards that own
/// its keys.
#[derive(Debug)]
pub struct WatchState {
    /// A watched key changed: EXEC fails.
    dirty: AtomicBool,
    /// The client stopped watching: the shards may drop its entries.
    gone: AtomicBool,
    /// The earliest expiry among the watched keys that were live when watched
    /// (`u64::MAX`: none): past it, EXEC fails.
    deadline: AtomicU64,
}

impl WatchState {
    fn new() -> WatchState {
        WatchState {
            dirty: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            deadline: AtomicU64::new(u64::MAX),
        }
    }

    /// Whether a watched key changed.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Whether a transaction run at `now` must fail: a watched key changed, or one that
    /// was live when watched has expired since.
    pub fn voided(&self, now: Millis) -> bool {
        self.is_dirty() || now > self.deadline.load(Ordering::Acquire)
    }

    fn touch(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Whether nothing more needs telling: the client stopped watching, or a key changed.
    fn settled(&self) -> bool {
        self.gone.load(Ordering::Acquire) || self.is_dirty()
    }
}

/// A client's watch: its state and the keys it watches, by database. Dropping it
/// unwatches them all.
#[derive(Debug)]
pub struct Watching {
    state: Arc<WatchState>,
    keys: HashSet<(usize, Box<[u8]>), foldhash::fast::RandomState>,
}

impl Default for Watching {
    fn default() -> Self {
        Watching {
            state: Arc::new(WatchState::new()),
            keys: HashSet::default(),
        }
    }
}

impl Watching {
    /// The state the shards update.
    pub fn state(&self) -> &Arc<WatchState> {
        &self.state
    }

    /// Adds `key` of database `db`; false when it was watched already.
    pub fn add(&mut self, db: usize, key: &[u8]) -> bool {
        self.keys.insert((db, key.into()))
    }

    /// The watched keys, whatever their database.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.keys.iter().map(|(_, k)| &**k)
    }

    /// What its table of keys takes (client eviction weighs it; the keys' own bytes
    /// are not counted, as Redis does not count them).
    pub fn table_bytes(&self) -> usize {
        self.keys.capacity() * (size_of::<(usize, Box<[u8]>)>() + 1)
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.state.gone.store(true, Ordering::Release);
    }
}

/// One client watching a key.
#[derive(Debug)]
struct Watcher {
    state: Arc<WatchState>,
    /// The key was stored but expired when the client watched it (Redis's
    /// `watchedKey.expired`).
    expired: bool,
}

/// A watched key of one database.
#[derive(Debug)]
struct WatchedKey {
    db: usize,
    /// The key is stored, stale or not (kept by the key events).
    present: bool,
    watchers: Vec<Watcher>,
}

/// The watched keys of one shard's databases.
#[derive(Debug)]
pub struct WatchTable {
    keys: HashMap<Box<[u8]>, Vec<WatchedKey>, foldhash::fast::RandomState>,
    /// Watchers in all.
    watchers: usize,
    /// A registration sweeps first once `watchers` reaches this.
    sweep_at: usize,
    /// Units of work seen since the last sweep.
    units: usize,
}

impl Default for WatchTable {
    fn default() -> Self {
        WatchTable {
            keys: HashMap::default(),
            watchers: 0,
            sweep_at: SWEEP_MIN,
            units: 0,
        }
    }
}

/// Whether a key stored with this expiry (`stored`: `None` when absent) is stale at `now`.
fn stale(stored: Option<Option<Millis>>, now: Millis) -> bool {
    matches!(stored, Some(Some(at)) if now > at)
}

impl WatchTable {
    /// Whether no key is watched.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Entries held (one per client and key).
    pub fn len(&self) -> usize {
        self.watchers
    }

    /// Makes `state` watch `key` of database `db`, stored as `stored` says (`None`:
    /// absent; else its expiry) at `now`.
    pub fn watch(
        &mut self,
        state: &Arc<WatchState>,
        db: usize,
        key: &[u8],
        stored: Option<Option<Millis>>,
        now: Millis,
    ) {
        let expired = stale(stored, now);
        if let Some(Some(at)) = stored
            && !expired
        {
            state.deadline.fetch_min(at, Ordering::AcqRel);
        }
        if self.watchers >= self.sweep_at {
            self.sweep();
        }
        let list = match self.keys.get_mut(key) {
            Some(list) => list,
            None => self.keys.entry(key.into()).or_default(),
        };
        let at = match list.iter().position(|w| w.db == db) {
            Some(at) => at,
            None => {
                list.push(WatchedKey {
                    db,
                    present: false,
                    watchers: Vec::new(),
                });
                list.len() - 1
            }
        };
        list[at].present = stored.is_some();
        list[at].watchers.push(Watcher {
            state: Arc::clone(state),
            expired,
        });
        self.watchers += 1;
    }

    /// Applies the events of a unit of work done at `now`, in order. `stored` says how a
    /// key of a database is stored now (`None`: absent; else its expiry): what replaced
    /// the keys of a database that was emptied or swapped.
    pub fn on_events(
        &mut self,
        events: &[Event],
        stored: impl Fn(usize, &[u8]) -> Option<Option<Millis>>,
        now: Millis,
    ) {
        for event in events {
            match event {
                Event::Key(k) => self.touch(k),
                Event::Flushed { db } => self.flushed(usize::from(*db), &stored, now),
            }
        }
        self.units += 1;
        if self.units >= self.watchers.max(SWEEP_MIN) {
            self.sweep();
        }
    }

    /// A key changed (`touchWatchedKey`).
    fn touch(&mut self, event: &KeyEvent) {
        if self.keys.is_empty() || event.quiet {
            return;
        }
        let Some(list) = self.keys.get_mut(&*event.key) else {
            return;
        };
        let db = usize::from(event.db);
        let Some(at) = list.iter().position(|w| w.db == db) else {
            return;
        };
        let present = event.change == Change::Written;
        let watched = &mut list[at];
        watched.present = present;
        let before = watched.watchers.len();
        watched.watchers.retain_mut(|w| {
            if w.state.settled() {
                return false;
            }
            if w.expired && !present {
                // The stale key it watched is gone: no logical change.
                w.expired = false;
                return true;
            }
            w.state.touch();
            false
        });
        self.watchers -= before - watched.watchers.len();
        if watched.watchers.is_empty() {
            list.swap_remove(at);
            if list.is_empty() {
                self.keys.remove(&*event.key);
            }
        }
    }

    /// Database `db` was emptied, or swapped with another (`touchAllWatchedKeysInDb`):
    /// its keys are now those `stored` tells of.
    fn flushed(
        &mut self,
        db: usize,
        stored: &impl Fn(usize, &[u8]) -> Option<Option<Millis>>,
        now: Millis,
    ) {
        let mut dropped = 0;
        self.keys.retain(|key, list| {
            for watched in list.iter_mut().filter(|w| w.db == db) {
                let after = stored(db, key);
                let (there_after, stale_after) = (after.is_some(), stale(after, now));
                let there_before = watched.present;
                watched.present = there_after;
                if !there_before && !there_after {
                    continue;
                }
                let before = watched.watchers.len();
                watched.watchers.retain_mut(|w| {
                    if w.state.settled() {
                        return false;
                    }
                    if w.expired {
                        if !there_after {
                            // The stale key is gone.
                            w.expired = false;
                            return true;
                        }
                        if stale_after {
                            // Stale it was, stale it stays.
                            return true;
                        }
                    } else if !there_before && stale_after {
                        // An absent key replaced by a stale one.
                        w.expired = true;
                        return true;
                    }
                    w.state.touch();
                    false
                });
                dropped += before - watched.watchers.len();
            }
            list.retain(|w| !w.watchers.is_empty());
            !list.is_empty()
        });
        self.watchers -= dropped;
    }

    /// Drops the entries of states that are gone or dirty.
    fn sweep(&mut self) {
        let mut kept = 0;
        self.keys.retain(|_, list| {
            for watched in list.iter_mut() {
                watched.watchers.retain(|w| !w.state.settled());
                kept += watched.watchers.len();
            }
            list.retain(|w| !w.watchers.is_empty());
            !list.is_empty()
        });
        if self.keys.capacity() > SWEEP_MIN && self.keys.len() * 4 < self.keys.capacity() {
            self.keys.shrink_to_fit();
        }
        self.watchers = kept;
        self.sweep_at = (2 * kept).max(SWEEP_MIN);
        self.units = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Millis = 1_000_000;

    fn key_event(change: Change, db: u16, key: &[u8]) -> Event {
        Event::Key(KeyEvent {
            change,
            db,
            slot: 0,
            key: key.into(),
            created: false,
            quiet: false,
        })
    }

    fn nothing(_: usize, _: &[u8]) -> Option<Option<Millis>> {
        None
    }

    #[test]
    fn a_write_dirties_and_settles_the_entry() {
        let mut table = WatchTable::default();
        let client = Watching::default();
        table.watch(client.state(), 0, b"k", Some(None), NOW);
        table.on_events(&[key_event(Change::Written, 1, b"k")], nothing, NOW);
        assert!(!client.state().is_dirty(), "another database's k");
        table.on_events(&[key_event(Change::Written, 0, b"k")], nothing, NOW);
        assert!(client.state().is_dirty());
        assert!(table.is_empty(), "a dirty state's entries go");
    }

    #[test]
    fn a_stale_key_going_away_is_no_change_but_coming_back_is() {
        let mut table = WatchTable::default();
        let client = Watching::default();
        table.watch(client.state(), 0, b"k", Some(Some(NOW - 1)), NOW);
        assert!(
            !client.state().voided(NOW + 1_000),
            "stale keys set no deadline"
        );
        table.on_events(&[key_event(Change::Expired, 0, b"k")], nothing, NOW);
        assert!(!client.state().is_dirty());
        table.on_events(&[key_event(Change::Written, 0, b"k")], nothing, NOW);
        assert!(client.state().is_dirty());
    }

    #[test]
    fn a_live_key_expiring_voids_the_watch() {
        let mut table = WatchTable::default();
        let client = Watching::default();
        table.watch(client.state(), 0, b"k", Some(Some(NOW + 10)), NOW);
        assert!(!client.state().voided(NOW + 10));
        assert!(client.state().voided(NOW + 11));
    }

    #[test]
    fn flushes_touch_only_keys_that_were_or_are_there() {
        let mut table = WatchTable::default();
        let absent = Watching::default();
        let present = Watching::default();
        let stale = Watching::default();
        table.watch(absent.state(), 0, b"a", None, NOW);
        table.watch(present.state(), 0, b"p", Some(None), NOW);
        table.watch(stale.state(), 0, b"s", Some(Some(NOW - 5)), NOW);
        table.on_events(&[Event::Flushed { db: 0 }], nothing, NOW);
        assert!(!absent.state().is_dirty());
        assert!(present.state().is_dirty());
        assert!(!stale.state().is_dirty());
    }

    #[test]
    fn swaps_follow_what_replaced_the_keys() {
        let mut table = WatchTable::default();
        let into_stale = Watching::default();
        let stale_to_stale = Watching::default();
        let stale_to_live = Watching::default();
        let into_live = Watching::default();
        table.watch(into_stale.state(), 1, b"a", None, NOW);
        table.watch(stale_to_stale.state(), 1, b"b", Some(Some(NOW - 5)), NOW);
        table.watch(stale_to_live.state(), 1, b"c", Some(Some(NOW - 5)), NOW);
        table.watch(into_live.state(), 1, b"d", None, NOW);
        let after = |db: usize, key: &[u8]| match (db, key) {
            (1, b"a" | b"b") => Some(Some(NOW - 1)),
            (1, b"c" | b"d") => Some(None),
            _ => None,
        };
        table.on_events(&[Event::Flushed { db: 1 }], after, NOW);
        assert!(!into_stale.state().is_dirty());
        assert!(!stale_to_stale.state().is_dirty());
        assert!(stale_to_live.state().is_dirty());
        assert!(into_live.state().is_dirty());
        // `a` is now watched as stale: its removal changes nothing.
        table.on_events(&[key_event(Change::Deleted, 1, b"a")], nothing, NOW);
        assert!(!into_stale.state().is_dirty());
    }

    #[test]
    fn unwatched_entries_are_swept() {
        let mut table = WatchTable::default();
        let kept = Watching::default();
        table.watch(kept.state(), 0, b"kept", None, NOW);
        for i in 0..10 * SWEEP_MIN {
            let client = Watching::default();
            table.watch(client.state(), 0, format!("k{i}").as_bytes(), None, NOW);
        }
        assert!(table.len() <= 2 * SWEEP_MIN, "{}", table.len());
        // Units of work sweep too, once there have been as many as there are entries.
        for _ in 0..SWEEP_MIN {
            table.on_events(&[key_event(Change::Written, 0, b"other")], nothing, NOW);
        }
        assert_eq!(table.len(), 1);
        drop(kept);
        for _ in 0..SWEEP_MIN {
            table.on_events(&[key_event(Change::Written, 0, b"other")], nothing, NOW);
        }
        assert!(table.is_empty());
    }
}
