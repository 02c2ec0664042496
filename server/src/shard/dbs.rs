//! A shard's databases (`databases`, 16 by default): a keyspace for each, made on first
//! use, so that databases nobody selects cost nothing.
//!
//! Work on the shard runs against one database, the one its client selected: a handler
//! sees it as `ShardCtx::db`. The few commands that reach across databases (MOVE, COPY …
//! DB, SWAPDB, FLUSHALL, INFO keyspace, a snapshot) reach the others through [`Others`],
//! which remembers that they did, so that the shard collects the events of every
//! database after such a unit of work and of the selected one only otherwise.

use goblin_store::{AccessMode, Keyspace};

/// Whether keyspaces record events, and whether they list written keys (see
/// `Keyspace::observe` and `Keyspace::list_writes`): every database of a shard alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recording {
    /// Record events.
    pub observe: bool,
    /// List written keys (rather than only count the writes).
    pub list_writes: bool,
    /// How keys' access fields are kept (the eviction policy's family).
    pub access: AccessMode,
}

impl Recording {
    fn apply(self, keyspace: &mut Keyspace) {
        keyspace.observe(self.observe);
        keyspace.list_writes(self.list_writes);
        keyspace.set_access_mode(self.access);
    }
}

/// Makes database `db`'s keyspace, recording and keeping access fields as its siblings
/// do.
fn make(db: usize, recording: Recording) -> Box<Keyspace> {
    let mut keyspace = Box::new(Keyspace::for_db(db as u16));
    recording.apply(&mut keyspace);
    keyspace.set_access_mode(recording.access);
    keyspace
}

/// The databases of one shard.
#[derive(Debug)]
pub struct Dbs {
    list: Vec<Option<Box<Keyspace>>>,
    recording: Recording,
}

impl Dbs {
    /// `count` databases (at least one), database 0 made.
    pub fn new(count: usize) -> Dbs {
        let mut list: Vec<Option<Box<Keyspace>>> = (0..count.max(1)).map(|_| None).collect();
        list[0] = Some(make(0, Recording::default()));
        Dbs {
            list,
            recording: Recording::default(),
        }
    }

    /// How many databases there are.
    pub fn count(&self) -> usize {
        self.list.len()
    }

    /// Database `db`'s keyspace, made if it was not yet; `None` past the last database.
    pub fn get_mut(&mut self, db: usize) -> Option<&mut Keyspace> {
        let recording = self.recording;
        let slot = self.list.get_mut(db)?;
        Some(slot.get_or_insert_with(|| make(db, recording)))
    }

    /// Database `db`'s keyspace, if it was made.
    pub fn get(&self, db: usize) -> Option<&Keyspace> {
        self.list.get(db)?.as_deref()
    }

    /// The keyspaces made so far, in database order.
    pub fn iter(&self) -> impl Iterator<Item = &Keyspace> {
        self.list.iter().filter_map(|k| k.as_deref())
    }

    /// The keyspaces made so far, in database order, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Keyspace> {
        self.list.iter_mut().filter_map(|k| k.as_deref_mut())
    }

    /// How every keyspace records.
    pub fn recording(&self) -> Recording {
        self.recording
    }

    /// Sets how every keyspace records (a change of observers or waiters, or of the
    /// eviction policy's family).
    pub fn set_recording(&mut self, recording: Recording) {
        if recording != self.recording {
            self.recording = recording;
            self.iter_mut().for_each(|k| recording.apply(k));
        }
    }

    /// Database `db` to work on, with the others beside it (`db` is clamped to the last
    /// database: callers check the range when the client selects).
    pub fn split(&mut self, db: usize) -> (&mut Keyspace, Others<'_>) {
        let at = db.min(self.list.len() - 1);
        let recording = self.recording;
        let (before, rest) = self.list.split_at_mut(at);
        let (this, after) = rest.split_at_mut(1);
        let this = this[0].get_or_insert_with(|| make(at, recording));
        (
            this,
            Others {
                before,
                after,
                at,
                recording,
                touched: false,
            },
        )
    }
}

/// The databases beside the one a unit of work runs against.
#[derive(Debug)]
pub struct Others<'a> {
    before: &'a mut [Option<Box<Keyspace>>],
    after: &'a mut [Option<Box<Keyspace>>],
    at: usize,
    recording: Recording,
    touched: bool,
}

impl Others<'_> {
    /// The database the unit runs against.
    pub fn selected(&self) -> usize {
        self.at
    }

    /// How many databases there are.
    pub fn count(&self) -> usize {
        self.before.len() + 1 + self.after.len()
    }

    /// Whether another database was reached (its events must be collected too).
    pub fn touched(&self) -> bool {
        self.touched
    }

    fn slot(&mut self, db: usize) -> Option<&mut Option<Box<Keyspace>>> {
        match db.cmp(&self.at) {
            std::cmp::Ordering::Less => self.before.get_mut(db),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => self.after.get_mut(db - self.at - 1),
        }
    }

    /// Database `db`, made if needed; `None` for the selected one or past the last.
    pub fn get(&mut self, db: usize) -> Option<&mut Keyspace> {
        let recording = self.recording;
        if db == self.at || db >= self.count() {
            return None;
        }
        self.touched = true;
        let slot = self.slot(db)?;
        Some(slot.get_or_insert_with(|| make(db, recording)))
    }

    /// Each database made so far, in order, with its number: these and `selected` (the
    /// selected one, held apart) in its place.
    pub fn each_around(
        &mut self,
        selected: &mut Keyspace,
        mut f: impl FnMut(usize, &mut Keyspace),
    ) {
        self.touched = true;
        let at = self.at;
        for (i, k) in self.before.iter_mut().enumerate() {
            if let Some(k) = k.as_deref_mut() {
                f(i, k);
            }
        }
        f(at, selected);
        for (i, k) in self.after.iter_mut().enumerate() {
            if let Some(k) = k.as_deref_mut() {
                f(at + 1 + i, k);
            }
        }
    }
}

impl Others<'_> {
    /// Exchanges databases `a` and `b`, neither of them the selected one; each keeps its
    /// number (SWAPDB).
    pub fn swap(&mut self, a: usize, b: usize) {
        if a == b || a == self.at || b == self.at || a >= self.count() || b >= self.count() {
            return;
        }
        self.touched = true;
        let (lo, hi) = (a.min(b), a.max(b));
        let at = self.at;
        match (lo < at, hi < at) {
            (true, true) => self.before.swap(lo, hi),
            (false, false) => self.after.swap(lo - at - 1, hi - at - 1),
            _ => std::mem::swap(&mut self.before[lo], &mut self.after[hi - at - 1]),
        }
        for db in [lo, hi] {
            if let Some(Some(k)) = self.slot(db) {
                k.set_db(db as u16);
            }
        }
    }
}
