//! Key events: what a change to the keyspace tells those who watch it.
//!
//! The keyspace records an event for every change it makes — whatever made it: a
//! command, a step of a cross-shard plan, lazy expiry on access, active expiry, a flush —
//! but only while someone observes it ([`crate::Keyspace::observe`]); otherwise recording
//! costs one branch per change. The shard hands the events of each unit of work to its
//! observers (WATCH, blocking waits, notifications, the log, snapshots, migration).

use crate::keyspace::Millis;

/// What happened to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// Created or changed: a new value, a changed value, a changed expiry.
    Written,
    /// Removed by a command (DEL, GETDEL, an emptied collection, RENAME's source …).
    Deleted,
    /// Found expired and removed (lazily on access, or actively by the timer wheel).
    Expired,
}

/// A change to one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    /// What happened.
    pub change: Change,
    /// The database of the key.
    pub db: u16,
    /// The key's hash slot.
    pub slot: u16,
    /// The key.
    pub key: Box<[u8]>,
    /// A write that created the key (keyspace notifications' `new` event).
    pub created: bool,
    /// A write of what Redis changes without `signalModifiedKey` (a stream's consumer
    /// groups, its last ID set by XSETID): WATCH does not see it; the log and
    /// notifications do. Never for a write that created its key.
    pub quiet: bool,
}

/// One event of the keyspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// One key changed.
    Key(KeyEvent),
    /// Every key of the database was removed or replaced at once (FLUSHALL, FLUSHDB,
    /// SWAPDB).
    Flushed {
        /// The database.
        db: u16,
    },
}

impl Event {
    /// The key event, if this is one.
    pub fn key(&self) -> Option<&KeyEvent> {
        match self {
            Event::Key(k) => Some(k),
            Event::Flushed { .. } => None,
        }
    }
}

/// The events of a keyspace, recorded only while it is observed.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub(crate) on: bool,
    /// Writes are counted in `unlisted` rather than listed with their keys (no one
    /// observing needs to know which keys were written, only that something was).
    pub(crate) count_writes: bool,
    pub(crate) events: Vec<Event>,
    /// Writes are quiet ([`KeyEvent::quiet`]) while set.
    pub(crate) quiet: bool,
    pub(crate) unlisted: usize,
    /// Keys removed because they expired, lazily or actively, observed or not (INFO's
    /// `expired_keys`).
    pub(crate) expired: u64,
    /// Keys written or deleted, observed or not (what INFO's
    /// `rdb_changes_since_last_save` and the `save` rules count).
    pub(crate) changes: u64,
}

impl Recorder {
    /// Records a key event, when observed.
    #[inline]
    pub(crate) fn key(&mut self, change: Change, db: u16, slot: usize, key: &[u8]) {
        self.key_created(change, db, slot, key, false);
    }

    /// Records a key event, saying whether the write created the key, when observed.
    #[inline]
    pub(crate) fn key_created(
        &mut self,
        change: Change,
        db: u16,
        slot: usize,
        key: &[u8],
        created: bool,
    ) {
        if change == Change::Expired {
            self.expired += 1;
        } else {
            self.changes += 1;
        }
        if self.on {
            if self.count_writes && change == Change::Written {
                self.unlisted += 1;
                return;
            }
            self.events.push(Event::Key(KeyEvent {
                change,
                db,
                slot: slot as u16,
                key: key.into(),
                created,
                quiet: self.quiet && change == Change::Written && !created,
            }));
        }
    }

    /// Records a flush, when observed.
    pub(crate) fn flushed(&mut self, db: u16) {
        if self.on {
            self.events.push(Event::Flushed { db });
        }
    }
}

/// Whether an entry with this expiry is gone at `now`. Redis keeps a key alive through
/// its expiry millisecond: it is expired once `now` is strictly later.
pub(crate) fn is_past(expire: Option<Millis>, now: Millis) -> bool {
    expire.is_some_and(|at| now > at)
}
