//! One shard's keyspace: a table per hash slot, compact entries, and expiry in two tiers —
//! lazily on every access, and actively by a timer wheel under a budget.
//!
//! Keys are grouped by hash slot so that a slot is the unit of iteration (SCAN returns
//! whole slots, which is what makes its guarantee hold while keys come and go) and, later,
//! of migration between shards and nodes. A table per slot also keeps every rehash small:
//! growing never copies more than one slot's keys at once.
//!
//! An entry is one chunk of the keyspace's arena (see `blob.rs`, `arena.rs`): key,
//! expiry and small string value together; the slot tables hold 4-byte handles. Hashes,
//! sorted sets and strings longer than [`INLINE_MAX`] live boxed in a side slab and the
//! entry holds their index.
//!
//! Every change goes through the methods here, and each records its [`Event`] (written,
//! deleted, expired, flushed) while the keyspace is observed: lazy expiry inside a read
//! and active expiry included. Values change in place only through [`Keyspace::modify`]
//! and [`Keyspace::upsert`], which delete a collection left empty.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use slab::Slab;

use crate::arena::{self, Arena, Handle};
use crate::blob::{self, Payload};
use crate::events::{Change, Event, Recorder};
use crate::rdb::RdbWriter;
use crate::slot::{SLOTS, key_slot};
use crate::slot_tables::SlotTables;
use crate::types::{Value, ValueRef};
use crate::wheel::{Timer, Wheel};

/// Milliseconds since the Unix epoch; every command reads the clock once and passes it in.
pub type Millis = u64;

/// Strings up to this many bytes are stored inside their entry; longer ones are boxed,
/// so that APPEND and SETRANGE grow them in amortized constant time instead of copying
/// the entry each time.
pub const INLINE_MAX: usize = 256;

/// Bytes a table bucket costs: the entry's handle and hashbrown's control byte.
const BUCKET_BYTES: usize = size_of::<Handle>() + 1;

fn value_ref<'a>(blob: &'a [u8], boxed: &'a Slab<Value>) -> ValueRef<'a> {
    match blob::payload(blob) {
        Payload::Inline(s) => ValueRef::Str(s),
        Payload::Boxed(i) => match boxed.get(i as usize) {
            Some(v) => v.as_ref(),
            None => ValueRef::Str(b""),
        },
    }
}

/// A live entry, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    blob: &'a [u8],
    value: ValueRef<'a>,
}

impl<'a> Entry<'a> {
    /// The key.
    pub fn key(&self) -> &'a [u8] {
        blob::key(self.blob)
    }

    /// The absolute expiry in milliseconds, if any.
    pub fn expire_at(&self) -> Option<Millis> {
        blob::expire(self.blob)
    }

    /// The value.
    pub fn value(&self) -> ValueRef<'a> {
        self.value
    }

    /// Bytes the key takes (MEMORY USAGE): its entry (key, metadata, an inline value), its
    /// bucket in the slot's table, and a value kept apart with what it holds.
    pub fn memory_usage(&self) -> usize {
        let apart = match self.value {
            ValueRef::Str(s) if self.blob.as_ptr_range().contains(&s.as_ptr()) => 0,
            ValueRef::Str(s) => s.len(),
            ValueRef::Hash(h) => h.heap_bytes(),
            ValueRef::List(l) => l.heap_bytes(),
            ValueRef::Set(s) => s.heap_bytes(),
            ValueRef::ZSet(z) => z.heap_bytes(),
            ValueRef::Stream(x) => x.heap_bytes(),
        };
        arena::chunk_size(self.blob.len()) + BUCKET_BYTES + apart
    }

    /// The encoding flags ([`crate::ENCODING_FLAGS`]) set with [`Keyspace::add_flags`].
    pub fn flags(&self) -> u8 {
        blob::encoding_flags(self.blob)
    }

    /// The encoding OBJECT ENCODING reports for the value.
    pub fn encoding(&self) -> &'static str {
        self.value.encoding(self.flags())
    }
}

/// An entry taken out of the keyspace.
#[derive(Debug, PartialEq)]
pub struct Removed {
    /// Its value.
    pub value: Value,
    /// Its expiry.
    pub expire_at: Option<Millis>,
    /// Its encoding flags.
    pub flags: u8,
}

/// A value being changed in place (HSET, ZADD, APPEND on a long string).
#[derive(Debug)]
pub enum ValueMut<'a> {
    /// A short string, stored in its entry: replace it with [`Keyspace::set_str`].
    InlineStr(&'a [u8]),
    /// A boxed value.
    Boxed(&'a mut Value),
}

/// Whether an entry has expired at `now`.
fn expired(blob: &[u8], now: Millis) -> bool {
    crate::events::is_past(blob::expire(blob), now)
}

/// Whether a removed entry's removal is an expiry or a deletion.
fn removal(blob: &[u8], now: Millis) -> Change {
    if expired(blob, now) {
        Change::Expired
    } else {
        Change::Deleted
    }
}

/// The keyspace's counters.
#[derive(Debug, Default)]
struct Counts {
    len: usize,
    volatile: usize,
    /// The sum of the volatile keys' deadlines (INFO's `avg_ttl`:
    /// [`Keyspace::deadlines`]).
    deadlines: u128,
}

impl Counts {
    /// A key's deadline counts.
    fn add_deadline(&mut self, at: Millis) {
        self.volatile += 1;
        self.deadlines += u128::from(at);
    }

    /// A key's deadline no longer counts.
    fn drop_deadline(&mut self, at: Millis) {
        self.volatile -= 1;
        self.deadlines = self.deadlines.saturating_sub(u128::from(at));
    }
}

/// Accounts for an entry leaving: its counters, its boxed value. (Its chunk is the
/// caller's to free, once it is done reading the entry.)
fn forget(counts: &mut Counts, boxed: &mut Slab<Value>, blob: &[u8]) -> Option<Value> {
    counts.len -= 1;
    if let Some(at) = blob::expire(blob) {
        counts.drop_deadline(at);
    }
    match blob::payload(blob) {
        Payload::Boxed(i) => boxed.try_remove(i as usize),
        Payload::Inline(_) => None,
    }
}

/// [`forget`] of an entry whose value goes: freed, in the background if it is big
/// ([`crate::lazyfree`]).
fn discard(counts: &mut Counts, boxed: &mut Slab<Value>, blob: &[u8]) {
    if let Some(value) = forget(counts, boxed, blob) {
        crate::lazyfree::free(value);
    }
}

/// A point-in-time image of the keyspace, written slot by slot while the keyspace keeps
/// changing (see [`Keyspace::begin_snapshot`]).
struct Snapshot {
    /// One bit per slot not yet written.
    pending: Vec<u64>,
    /// Where the walk over the slots goes on.
    next: usize,
    out: RdbWriter,
    keys: u64,
    /// The database the image's records belong to.
    db: u16,
    /// Set when the save it is part of is abandoned: a [`Keyspace::clear`] then drops
    /// the image rather than write what it clears ([`Keyspace::cancel_snapshot_with`]).
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Snapshot {
    fn is_pending(&self, slot: usize) -> bool {
        self.pending[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// Writes `slot`'s keys as they are now (none when the keyspace has no tables yet),
    /// and marks it written.
    fn write_slot(
        &mut self,
        slot: usize,
        table: Option<&HashTable<Handle>>,
        arena: &Arena,
        boxed: &Slab<Value>,
    ) {
        self.pending[slot / 64] &= !(1 << (slot % 64));
        let Some(table) = table else { return };
        // Keys past their deadline that are still stored are written too, as
        // redis-server writes them: a loading master counts and drops them (and has its
        // replicas delete them), a replica keeps them until its master deletes them.
        for &h in table.iter() {
            let blob = arena.get(h);
            self.out
                .entry(blob::key(blob), value_ref(blob, boxed), blob::expire(blob));
            self.keys += 1;
        }
    }
}

/// What an entry's access field holds (the eviction policy's family), as Redis keeps
/// its objects' `lru` bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessMode {
    /// The last access, in seconds (24 bits, wrapping every 194 days).
    #[default]
    Lru,
    /// A logarithmic access counter (8 bits) and the minute it was last decayed (16 bits).
    Lfu {
        /// `lfu-log-factor`: how slowly the counter grows.
        log_factor: u32,
        /// `lfu-decay-time`: minutes for the counter to lose one (0: never).
        decay_minutes: u32,
    },
}

/// A new key's counter under LFU (Redis's `LFU_INIT_VAL`), so that it is not evicted
/// before it had a chance to be used.
const LFU_INIT: u32 = 5;

/// The LRU clock: seconds, 24 bits (INFO's `lru_clock`).
pub fn lru_clock(now: Millis) -> u32 {
    ((now / 1000) & 0xFF_FFFF) as u32
}

/// Seconds from the LRU clock reading `then` to `now` (the clock wraps every 194 days).
fn lru_idle(then: u32, now: Millis) -> u32 {
    let clock = lru_clock(now);
    if clock >= then {
        clock - then
    } else {
        0xFF_FFFF - then + clock
    }
}

/// The LFU clock: minutes, 16 bits.
fn lfu_minutes(now: Millis) -> u32 {
    ((now / 60_000) & 0xFFFF) as u32
}

impl AccessMode {
    /// The field of a new entry.
    fn fresh(self, now: Millis) -> u32 {
        match self {
            AccessMode::Lru => lru_clock(now),
            AccessMode::Lfu { .. } => lfu_minutes(now) << 8 | LFU_INIT,
        }
    }

    /// The LFU counter of `field` decayed to `now` (Redis's `LFUDecrAndReturn`).
    fn decayed(self, field: u32, now: Millis) -> u32 {
        let AccessMode::Lfu { decay_minutes, .. } = self else {
            return 0;
        };
        let counter = field & 0xFF;
        if decay_minutes == 0 {
            return counter;
        }
        let then = field >> 8;
        let now = lfu_minutes(now);
        let elapsed = if now >= then {
            now - then
        } else {
            0xFFFF - then + now
        };
        counter.saturating_sub(elapsed / decay_minutes)
    }

    /// The field after an access at `now`; `coin` is a uniform draw in [0, 1).
    fn touched(self, field: u32, now: Millis, coin: f64) -> u32 {
        match self {
            AccessMode::Lru => lru_clock(now),
            AccessMode::Lfu { log_factor, .. } => {
                let mut counter = self.decayed(field, now);
                if counter < 255 {
                    let base = f64::from(counter.saturating_sub(LFU_INIT));
                    if coin < 1.0 / (base * f64::from(log_factor) + 1.0) {
                        counter += 1;
                    }
                }
                lfu_minutes(now) << 8 | counter
            }
        }
    }
}

/// What eviction looks for among its samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictBy {
    /// The least recently used (per the LRU clock).
    Lru,
    /// The least frequently used (per the LFU counter).
    Lfu,
    /// Any.
    Random,
    /// The nearest expiry.
    Ttl,
}

/// The keys of one database of one shard.
pub struct Keyspace {
    hasher: foldhash::fast::RandomState,
    /// A table per hash slot; none at all until the first key is stored (16384 empty
    /// tables are 512 KiB, and most databases of most shards stay empty).
    slots: SlotTables,
    /// The entries the tables' handles name.
    arena: Arena,
    boxed: Slab<Value>,
    wheel: Wheel,
    counts: Counts,
    db: u16,
    recorder: Recorder,
    snapshot: Option<Box<Snapshot>>,
    /// How entries' access fields are kept.
    access: AccessMode,
    /// A xorshift state: LFU's coin, eviction's samples.
    rng: u64,
    /// Eviction's pool: the best candidates seen so far (score, key), best last, as
    /// Redis keeps its `EvictionPoolLRU`, so that each eviction takes the best of many
    /// samples, not of the few just drawn.
    pool: Vec<(u64, Vec<u8>)>,
    /// How the running unit's lookups behave ([`Keyspace::set_read_mode`]).
    mode: ReadMode,
    /// INFO's `keyspace_hits` / `keyspace_misses`: lookups of live and absent keys made
    /// while [`ReadMode::count`].
    hits: u64,
    misses: u64,
}

/// How the lookups of the unit of work running behave: set for each unit by its shard
/// (the default: a write's).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadMode {
    /// Count them as INFO's hits and misses (a read-only command, as Redis counts its
    /// `lookupKeyRead`s).
    pub count: bool,
    /// A key found expired reads as missing but stays (a read-only command during
    /// CLIENT PAUSE, as Redis's `expireIfNeeded` leaves it). Only for commands that
    /// store nothing: a write would find the key there.
    pub keep_expired: bool,
    /// Leave the access field alone (TTL, TYPE, EXISTS …: Redis's `LOOKUP_NOTOUCH`).
    pub untouched: bool,
    /// A key past its deadline is live, and a deadline set in the past is kept, not
    /// applied: a replica applying its master's writes, where the master's DEL removes
    /// the key (as Redis's `expireIfNeeded` spares its master's client, and its
    /// `checkAlreadyExpired` a replica).
    pub replica: bool,
}

/// Candidates kept in the eviction pool (Redis's `EVPOOL_SIZE`).
const POOL: usize = 16;

impl Default for Keyspace {
    fn default() -> Self {
        Keyspace::new()
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("len", &self.counts.len)
            .field("volatile", &self.counts.volatile)
            .finish()
    }
}

impl Keyspace {
    /// An empty keyspace of database 0 (with a randomly seeded hasher: keys are
    /// client-controlled).
    pub fn new() -> Self {
        Keyspace::for_db(0)
    }

    /// An empty keyspace of database `db` (the database its events name).
    pub fn for_db(db: u16) -> Self {
        Keyspace {
            hasher: foldhash::fast::RandomState::default(),
            slots: SlotTables::default(),
            arena: Arena::new(),
            boxed: Slab::new(),
            wheel: Wheel::new(0),
            counts: Counts::default(),
            db,
            recorder: Recorder::default(),
            snapshot: None,
            access: AccessMode::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ u64::from(db),
            pool: Vec::new(),
            mode: ReadMode::default(),
            hits: 0,
            misses: 0,
        }
    }

    /// How entries' access fields are kept.
    pub fn access_mode(&self) -> AccessMode {
        self.access
    }

    /// How entries' access fields are kept from now on (entries keep what they hold until
    /// their next access, as in Redis after a change of policy).
    pub fn set_access_mode(&mut self, mode: AccessMode) {
        self.access = mode;
    }

    fn next_random(&mut self) -> u64 {
        // (Xorshift's one fixed point: a state of zero stays zero.)
        let mut x = if self.rng == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            self.rng
        };
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Seconds since `key` was last accessed (OBJECT IDLETIME), without accessing it;
    /// `None` when it is absent.
    pub fn idle_secs(&mut self, key: &[u8], now: Millis) -> Option<u64> {
        let (blob, _) = self.live_untouched(key, now)?;
        Some(u64::from(lru_idle(blob::access(blob), now)))
    }

    /// Sets `key`'s access field as RESTORE's IDLETIME or FREQ gives it (Redis's
    /// `objectSetLRUOrLFU`): under an LFU policy the counter `freq`, otherwise the last
    /// access `idle_secs` before `now` on the wrapping LRU clock. What the policy does
    /// not keep is ignored.
    pub fn set_access_of(
        &mut self,
        key: &[u8],
        idle_secs: Option<u64>,
        freq: Option<u8>,
        now: Millis,
    ) {
        let field = match (self.access, idle_secs, freq) {
            (AccessMode::Lfu { .. }, _, Some(freq)) => lfu_minutes(now) << 8 | u32::from(freq),
            (AccessMode::Lru, Some(idle), _) => {
                // As object.c: `idle*1000/1000` (in 64 bits), then one wrap back, then
                // the 24 bits the field keeps.
                let idle = i64::try_from(idle).unwrap_or(i64::MAX).wrapping_mul(1000) / 1000;
                let mut at = i64::from(lru_clock(now)).wrapping_sub(idle);
                if at < 0 {
                    at += 0xFF_FFFF;
                }
                (at as u64 & 0xFF_FFFF) as u32
            }
            _ => return,
        };
        let (slot, hash) = self.locate(key);
        if let Some(h) = self.find(slot, hash, key) {
            blob::set_access(self.arena.get_mut(h), field);
        }
    }

    /// `key`'s access frequency counter (OBJECT FREQ), decayed to `now`, without accessing
    /// it; `None` when it is absent.
    pub fn frequency(&mut self, key: &[u8], now: Millis) -> Option<u32> {
        let access = self.access;
        let (blob, _) = self.live_untouched(key, now)?;
        Some(access.decayed(blob::access(blob), now))
    }

    /// How good a candidate for eviction `entry` is, by `by` (higher is better).
    fn eviction_score(&self, entry: &[u8], by: EvictBy, now: Millis) -> u64 {
        let field = blob::access(entry);
        match by {
            EvictBy::Random => 0,
            EvictBy::Lru => u64::from(lru_idle(field, now)),
            EvictBy::Lfu => 255 - u64::from(self.access.decayed(field, now).min(255)),
            EvictBy::Ttl => u64::MAX - blob::expire(entry).unwrap_or(u64::MAX),
        }
    }

    /// A key to evict by `by` (among keys with an expiry only, if `volatile`): `samples`
    /// live keys drawn at random join the pool of the best candidates seen so far, and
    /// the best of those still there (scored again: a key read since it joined may have
    /// become a worse candidate) is the one; `None` when there is none.
    pub fn eviction_candidate(
        &mut self,
        by: EvictBy,
        volatile: bool,
        samples: usize,
        now: Millis,
    ) -> Option<Vec<u8>> {
        if self.counts.len == 0 || (volatile && self.counts.volatile == 0) {
            self.pool.clear();
            return None;
        }
        if by != EvictBy::Random {
            for (score, key) in self.sample_candidates(by, volatile, samples, now) {
                if self.pool.iter().any(|(_, k)| *k == key) {
                    continue;
                }
                let at = self.pool.partition_point(|(s, _)| *s <= score);
                self.pool.insert(at, (score, key));
                if self.pool.len() > POOL {
                    self.pool.remove(0);
                }
            }
            while let Some((score, key)) = self.pool.pop() {
                let (slot, hash) = self.locate(&key);
                let Some(entry) = self.find(slot, hash, &key).map(|h| self.arena.get(h)) else {
                    continue;
                };
                if (volatile && blob::expire(entry).is_none()) || blob::pinned(entry) {
                    continue;
                }
                let now_score = self.eviction_score(entry, by, now);
                if now_score < score && self.pool.last().is_some_and(|(s, _)| *s > now_score) {
                    // Worse than it was, and than the next one: back in its new place.
                    let at = self.pool.partition_point(|(s, _)| *s <= now_score);
                    self.pool.insert(at, (now_score, key));
                    continue;
                }
                return Some(key);
            }
            return None;
        }
        self.sample_candidates(by, volatile, 1, now)
            .pop()
            .map(|(_, key)| key)
    }

    /// A non-empty slot drawn at random: slots drawn until one holds keys (a shard owns
    /// a part of the slots, often a contiguous range, so the next non-empty slot after
    /// a random one would favour the first slot of each range), then, for a keyspace of
    /// very few keys, the next non-empty one.
    fn random_slot(&mut self) -> Option<usize> {
        for _ in 0..64 {
            let slot = (self.next_random() % SLOTS as u64) as usize;
            if self.slots.get(slot).is_some_and(|t| !t.is_empty()) {
                return Some(slot);
            }
        }
        let start = (self.next_random() % SLOTS as u64) as usize;
        (0..SLOTS)
            .map(|i| (start + i) % SLOTS)
            .find(|&s| self.slots.get(s).is_some_and(|t| !t.is_empty()))
    }

    /// Up to `samples` live keys drawn at random (with an expiry only, if `volatile`),
    /// with their scores.
    fn sample_candidates(
        &mut self,
        by: EvictBy,
        volatile: bool,
        samples: usize,
        now: Millis,
    ) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::with_capacity(samples);
        // Draws, so that a keyspace with few keys with an expiry still finds them.
        let draws = if volatile {
            samples.max(1) * 8
        } else {
            samples.max(1)
        };
        for _ in 0..draws {
            if out.len() >= samples.max(1) {
                break;
            }
            let r = self.next_random();
            let Some(slot) = self.random_slot() else {
                break;
            };
            let Some(table) = self.slots.get(slot) else {
                break;
            };
            let pick = ((r >> 20) % table.len() as u64) as usize;
            let Some(entry) = table.iter().nth(pick).map(|&h| self.arena.get(h)) else {
                continue;
            };
            if (volatile && blob::expire(entry).is_none()) || blob::pinned(entry) {
                continue;
            }
            out.push((
                self.eviction_score(entry, by, now),
                blob::key(entry).to_vec(),
            ));
        }
        if out.is_empty() && volatile && self.counts.volatile > 0 {
            // Keys with an expiry are too rare for random draws to meet: the first one
            // from a random slot on (Redis draws from its dict of expiring keys).
            let start = (self.next_random() % SLOTS as u64) as usize;
            let found = (0..SLOTS)
                .map(|i| (start + i) % SLOTS)
                .filter_map(|s| self.slots.get(s))
                .find_map(|t| {
                    t.iter()
                        .map(|&h| self.arena.get(h))
                        .find(|b| blob::expire(b).is_some() && !blob::pinned(b))
                });
            if let Some(entry) = found {
                out.push((
                    self.eviction_score(entry, by, now),
                    blob::key(entry).to_vec(),
                ));
            }
        }
        out
    }

    /// Renumbers the keyspace (SWAPDB exchanges two databases' keyspaces and their
    /// numbers stay with their places). An image in progress keeps the number it began
    /// with: it is the database as it was at its instant.
    pub fn set_db(&mut self, db: u16) {
        self.db = db;
    }

    /// Records that every key may have changed at once (the keyspace now holds another
    /// database's keys: SWAPDB), as a flush does.
    pub fn touch_all(&mut self) {
        self.recorder.flushed(self.db);
    }

    /// Starts or stops recording an [`Event`] for every change. Stopping drops the events
    /// not yet taken.
    pub fn observe(&mut self, on: bool) {
        self.recorder.on = on;
        if !on {
            self.recorder.events.clear();
            self.recorder.unlisted = 0;
        }
    }

    /// While observed, whether writes are listed as [`Change::Written`] events with their
    /// keys (the default) or only counted ([`Keyspace::take_unlisted`]): an observer that
    /// replays effects needs to know that something was written, not what — and listing
    /// costs a copy of the key per write.
    pub fn list_writes(&mut self, list: bool) {
        self.recorder.count_writes = !list;
    }

    /// A write that changed no key (FUNCTION LOAD …) but that observers must see, when
    /// observed: counted as an unlisted write.
    pub fn note_keyless_write(&mut self) {
        if self.recorder.on {
            self.recorder.unlisted += 1;
        }
    }

    /// Writes counted and not listed since the last call.
    pub fn take_unlisted(&mut self) -> usize {
        std::mem::take(&mut self.recorder.unlisted)
    }

    /// Whether changes are being recorded.
    pub fn observed(&self) -> bool {
        self.recorder.on
    }

    /// Takes the events recorded since the last call, oldest first.
    pub fn take_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.recorder.events.drain(..)
    }

    /// Whether events are waiting to be taken.
    pub fn has_events(&self) -> bool {
        !self.recorder.events.is_empty() || self.recorder.unlisted > 0
    }

    fn record(&mut self, change: Change, slot: usize, key: &[u8]) {
        self.recorder.key(change, self.db, slot, key);
    }

    /// [`Keyspace::record`] for the entry at `h` (before its chunk is freed), its key read
    /// where it lies.
    fn record_entry(&mut self, change: Change, slot: usize, h: Handle) {
        let Keyspace {
            recorder,
            arena,
            db,
            ..
        } = self;
        recorder.key(change, *db, slot, blob::key(arena.get(h)));
    }

    /// Runs `f` with the writes it makes marked quiet ([`crate::KeyEvent::quiet`]): what
    /// Redis changes without telling WATCH.
    pub fn quietly<R>(&mut self, f: impl FnOnce(&mut Keyspace) -> R) -> R {
        self.recorder.quiet = true;
        let r = f(self);
        self.recorder.quiet = false;
        r
    }

    /// Records a write, saying whether it created the key.
    fn record_write(&mut self, slot: usize, key: &[u8], created: bool) {
        self.recorder
            .key_created(Change::Written, self.db, slot, key, created);
    }

    /// Starts a point-in-time image of the keyspace as it is now, in RDB key records
    /// (replacing one in progress). It is written slot by slot by
    /// [`Keyspace::snapshot_step`], and a slot not yet written is written first whenever
    /// a change is about to touch it (copy before write, at the grain of a slot): the
    /// image is the keyspace at this instant, while it keeps changing, with at most a
    /// slot's worth of keys copied ahead of the walk. Returns the number of keys and of
    /// keys with an expiry (the sizes an RDB file announces).
    pub fn begin_snapshot(&mut self) -> (usize, usize) {
        self.snapshot = Some(Box::new(Snapshot {
            pending: vec![u64::MAX; SLOTS.div_ceil(64)],
            next: 0,
            out: RdbWriter::records(),
            keys: 0,
            db: self.db,
            cancel: None,
        }));
        (self.counts.len, self.counts.volatile)
    }

    /// The image in progress is dropped by the next [`Keyspace::clear`] once `flag` is
    /// set (a background save a FLUSHALL abandons, as redis-server kills its child):
    /// what is cleared is then not written first.
    pub fn cancel_snapshot_with(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        if let Some(snap) = self.snapshot.as_deref_mut() {
            snap.cancel = Some(flag);
        }
    }

    /// The database the image in progress is of (the keyspace's number when it began:
    /// SWAPDB may have renumbered the keyspace since).
    pub fn snapshot_db(&self) -> Option<u16> {
        self.snapshot.as_deref().map(|s| s.db)
    }

    /// Whether an image is being written.
    pub fn snapshot_active(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Writes the image's next slots, until at least `max_keys` keys or `max_bytes` bytes
    /// are waiting in it or every slot is written; true once every slot is.
    pub fn snapshot_step(&mut self, max_keys: usize, max_bytes: usize) -> bool {
        let Some(snap) = self.snapshot.as_deref_mut() else {
            return true;
        };
        let start_keys = snap.keys;
        while snap.next < SLOTS {
            let slot = snap.next;
            snap.next += 1;
            if snap.is_pending(slot) {
                snap.write_slot(slot, self.slots.get(slot), &self.arena, &self.boxed);
                if snap.keys - start_keys >= max_keys as u64 || snap.out.pending() >= max_bytes {
                    break;
                }
            }
        }
        snap.next >= SLOTS
    }

    /// Takes the image's bytes written so far.
    pub fn snapshot_take(&mut self) -> Vec<u8> {
        self.snapshot
            .as_deref_mut()
            .map(|s| s.out.take())
            .unwrap_or_default()
    }

    /// Bytes of the image waiting in [`Keyspace::snapshot_take`].
    pub fn snapshot_pending(&self) -> usize {
        self.snapshot.as_deref().map_or(0, |s| s.out.pending())
    }

    /// Ends the image: its last bytes and the number of keys it holds. (Slots not yet
    /// written are left out: call it once [`Keyspace::snapshot_step`] is done.)
    pub fn end_snapshot(&mut self) -> (Vec<u8>, u64) {
        match self.snapshot.take() {
            Some(mut s) => (s.out.take(), s.keys),
            None => (Vec::new(), 0),
        }
    }

    /// Before a change to a key of `slot`: an image in progress that has not written
    /// the slot yet writes it now, as it is.
    #[inline]
    fn preserve(&mut self, slot: usize) {
        if let Some(snap) = self.snapshot.as_deref_mut()
            && snap.is_pending(slot)
        {
            snap.write_slot(slot, self.slots.get(slot), &self.arena, &self.boxed);
        }
    }

    /// [`Keyspace::preserve`] for `key`'s slot (its hash computed only while an image
    /// is in progress).
    #[inline]
    fn preserve_key(&mut self, key: &[u8]) {
        if self.snapshot.is_some() {
            self.preserve(usize::from(key_slot(key)));
        }
    }

    /// Number of keys, including ones that expired but were not yet removed (as Redis's
    /// DBSIZE counts them).
    pub fn len(&self) -> usize {
        self.counts.len
    }

    /// True when there are no keys.
    pub fn is_empty(&self) -> bool {
        self.counts.len == 0
    }

    /// Number of keys that have an expiry.
    pub fn volatile_len(&self) -> usize {
        self.counts.volatile
    }

    /// The sum of the volatile keys' deadlines (Unix ms): with
    /// [`Keyspace::volatile_len`], their average time to live (INFO's `avg_ttl`).
    pub fn deadlines(&self) -> u128 {
        self.counts.deadlines
    }

    /// Number of keys stored in `slot`.
    pub fn slot_len(&self, slot: u16) -> usize {
        self.slots.get(usize::from(slot)).map_or(0, |t| t.len())
    }

    /// Keys removed because they expired (lazily or actively) since start or the last
    /// [`Keyspace::reset_stats`].
    pub fn expired_keys(&self) -> u64 {
        self.recorder.expired
    }

    /// CONFIG RESETSTAT: the counts of expired keys, hits and misses start again.
    pub fn reset_stats(&mut self) {
        self.recorder.expired = 0;
        self.hits = 0;
        self.misses = 0;
    }

    /// How the lookups that follow behave.
    #[inline]
    pub fn set_read_mode(&mut self, mode: ReadMode) {
        self.mode = mode;
    }

    /// Whether keys past their deadline expire in the running unit (not in a replica's:
    /// [`ReadMode::replica`]).
    #[inline]
    pub fn expires(&self) -> bool {
        !self.mode.replica
    }

    /// The clock the running unit's expiry checks read: `now`, or, in a replica's unit,
    /// the start of time (nothing has expired).
    #[inline]
    fn deadline_clock(&self, now: Millis) -> Millis {
        if self.mode.replica { 0 } else { now }
    }

    /// Keys written or deleted since the keyspace was made (expiries left out).
    #[inline]
    pub fn changes(&self) -> u64 {
        self.recorder.changes
    }

    /// Lookups counted: hits (live keys) and misses (absent or expired).
    pub fn read_stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Bytes the keyspace holds: entries (their chunks), boxed values, tables and
    /// pending timers.
    pub fn used_bytes(&self) -> usize {
        let tables: usize = self.slots.iter().map(|t| t.capacity() * BUCKET_BYTES).sum();
        let boxed: usize = self.boxed.iter().map(|(_, v)| v.heap_bytes()).sum();
        self.arena.live_bytes() + tables + boxed + self.wheel.len() * size_of::<Timer>()
    }

    fn locate(&self, key: &[u8]) -> (usize, u64) {
        (usize::from(key_slot(key)), self.hasher.hash_one(key))
    }

    /// The handle of `key`'s entry, live or not.
    #[inline]
    fn find(&self, slot: usize, hash: u64, key: &[u8]) -> Option<Handle> {
        let arena = &self.arena;
        self.slots
            .get(slot)?
            .find(hash, |&h| blob::key(arena.get(h)) == key)
            .copied()
    }

    /// Takes `key`'s entry out of its table, live or not: its handle, whose chunk the
    /// caller frees ([`Keyspace::discard`]).
    fn unlink(&mut self, slot: usize, hash: u64, key: &[u8]) -> Option<Handle> {
        let arena = &self.arena;
        let found = self
            .slots
            .get_mut(slot)?
            .find_entry(hash, |&h| blob::key(arena.get(h)) == key)
            .ok()?;
        Some(found.remove().0)
    }

    /// [`forget`] the entry at `h`, and free its chunk.
    fn forget(&mut self, h: Handle) -> Option<Value> {
        let value = forget(&mut self.counts, &mut self.boxed, self.arena.get(h));
        self.arena.free(h);
        value
    }

    /// [`discard`] the entry at `h` (its value freed, in the background if big), and free
    /// its chunk.
    fn discard(&mut self, h: Handle) {
        discard(&mut self.counts, &mut self.boxed, self.arena.get(h));
        self.arena.free(h);
    }

    /// Gives a slot table's memory back after many removals (all of it when the slot is
    /// empty: 16384 slots of idle buckets would otherwise add up).
    fn maybe_shrink(&mut self, slot: usize) {
        if self.counts.len == 0 && self.arena.page_bytes() > arena::PAGE {
            // The last key gone: the pages go too (but one, so that a keyspace that empties
            // and fills again and again does not allocate a page each time) — freed in
            // the background when there are many (a mass expiry's last key).
            let pages = std::mem::take(&mut self.arena);
            if pages.page_bytes() > crate::lazyfree::THRESHOLD * arena::PAGE {
                crate::lazyfree::free_later(pages);
            }
        }
        let Some(table) = self.slots.get_mut(slot) else {
            return;
        };
        if table.is_empty() {
            if table.capacity() > 0 {
                *table = HashTable::new();
            }
            self.slots.release_if_empty(slot);
        } else if table.capacity() > 16 && table.len() * 4 < table.capacity() {
            let (hasher, arena) = (&self.hasher, &self.arena);
            table.shrink_to(table.len() * 2, |&h| {
                hasher.hash_one(blob::key(arena.get(h)))
            });
        }
    }

    /// The blob of `key`'s live entry, with the boxed values beside it, its access
    /// recorded; an expired entry is removed on the way (lazy expiry).
    fn live(&mut self, key: &[u8], now: Millis) -> Option<(&[u8], &mut Slab<Value>)> {
        self.lookup(key, now, true)
    }

    /// [`Keyspace::live`] without recording an access (OBJECT IDLETIME and FREQ).
    fn live_untouched(&mut self, key: &[u8], now: Millis) -> Option<(&[u8], &mut Slab<Value>)> {
        self.lookup(key, now, false)
    }

    fn lookup(
        &mut self,
        key: &[u8],
        now: Millis,
        touch: bool,
    ) -> Option<(&[u8], &mut Slab<Value>)> {
        let coin = match self.access {
            AccessMode::Lfu { .. } if touch => {
                (self.next_random() >> 11) as f64 / (1u64 << 53) as f64
            }
            _ => 0.0,
        };
        let (slot, hash) = self.locate(key);
        let mode = self.mode;
        let counting = u64::from(mode.count);
        let Some(h) = self.find(slot, hash, key) else {
            self.misses += counting;
            return None;
        };
        if expired(self.arena.get(h), self.deadline_clock(now)) {
            if !mode.keep_expired {
                self.unlink(slot, hash, key);
                self.discard(h);
                self.record(Change::Expired, slot, key);
            }
            self.misses += counting;
            return None;
        }
        self.hits += counting;
        let touch = touch && !mode.untouched;
        let access = self.access;
        let Keyspace { arena, boxed, .. } = self;
        let blob = arena.get_mut(h);
        if touch {
            // (Written only when it changes: under LRU, once a second at most.)
            let old = blob::access(blob);
            let field = access.touched(old, now, coin);
            if field != old {
                blob::set_access(blob, field);
            }
        }
        Some((blob, boxed))
    }

    /// Where `key` is looked up: its slot and its hash, for [`Keyspace::prefetch`].
    #[inline]
    pub fn position(&self, key: &[u8]) -> (usize, u64) {
        self.locate(key)
    }

    /// Starts loading what a lookup of the key at `position` ([`Keyspace::position`])
    /// reads, without waiting for it: the key's bucket is found (its control bytes and
    /// pointer are read) and its entry is prefetched. Called for the keys of a pipeline
    /// before its commands run, in a loop that does little else, so that their cache
    /// misses overlap (the CPU runs ahead through these independent lookups) instead of
    /// each command waiting for its own. Changes nothing.
    #[inline]
    pub fn prefetch(&self, (slot, hash): (usize, u64)) {
        // (The first bucket whose hash tag matches: rarely another key's, and then the
        // hint is merely wasted.)
        if let Some(&h) = self.slots.get(slot).and_then(|t| t.find(hash, |_| true)) {
            // Both ends: an entry of a 16-byte key and a 32-byte value (56 bytes) spans
            // two cache lines more often than not. (The length is in the entry, not yet
            // read: this is the common one.)
            let at = self.arena.address(h);
            crate::prefetch::read(at);
            crate::prefetch::read(at.wrapping_add(55));
        }
    }

    /// [`Keyspace::prefetch`] for a field of the hash at `key` (at `position`): the
    /// field's slot and entry, once the key's entry is in cache — so call it after the
    /// keys' own prefetches. Nothing when the key holds no hash.
    #[inline]
    pub fn prefetch_field(&self, key: &[u8], (slot, hash): (usize, u64), field: &[u8]) {
        let Some(h) = self.find(slot, hash, key) else {
            return;
        };
        if let Payload::Boxed(i) = blob::payload(self.arena.get(h))
            && let Some(Value::Hash(h)) = self.boxed.get(i as usize)
        {
            h.prefetch(field);
        }
    }

    /// The live entry for `key`, removing it first if it has expired.
    pub fn get(&mut self, key: &[u8], now: Millis) -> Option<Entry<'_>> {
        let (blob, boxed) = self.live(key, now)?;
        Some(Entry {
            blob,
            value: value_ref(blob, boxed),
        })
    }

    /// The entry stored for `key`, live or not, and its idle seconds at `now`: nothing
    /// is removed and no access is recorded (DEBUG OBJECT, which in Redis looks the key
    /// up in the keyspace's dictionary, expired or not).
    pub fn peek_stored(&self, key: &[u8], now: Millis) -> Option<(Entry<'_>, u64)> {
        let (slot, hash) = self.locate(key);
        let h = self.find(slot, hash, key)?;
        let blob = self.arena.get(h);
        let idle = u64::from(lru_idle(blob::access(blob), now));
        Some((
            Entry {
                blob,
                value: value_ref(blob, &self.boxed),
            },
            idle,
        ))
    }

    /// How `key` is stored, live or not: `None` when absent, else its expiry, which may
    /// have passed. Nothing is removed and no access is recorded: WATCH looks at a key
    /// this way (Redis's `keyIsExpired` does not delete either).
    pub fn peek_expiry(&self, key: &[u8]) -> Option<Option<Millis>> {
        let (slot, hash) = self.locate(key);
        let h = self.find(slot, hash, key)?;
        Some(blob::expire(self.arena.get(h)))
    }

    /// Whether `key` holds a live value.
    pub fn contains(&mut self, key: &[u8], now: Millis) -> bool {
        self.live(key, now).is_some()
    }

    /// Changes the live value of `key` in place. `f` returns its result and whether it
    /// changed the value; a change records [`Change::Written`], and a collection the
    /// change left empty is deleted ([`Change::Deleted`]). `None` when the key is absent.
    pub fn modify<R>(
        &mut self,
        key: &[u8],
        now: Millis,
        f: impl FnOnce(ValueMut<'_>) -> (R, bool),
    ) -> Option<R> {
        self.preserve_key(key);
        let (result, changed, emptied) = self.change_in_place(key, now, f)?;
        if emptied {
            self.delete_quietly(key);
            self.record(Change::Deleted, usize::from(key_slot(key)), key);
        } else if changed {
            self.record(Change::Written, usize::from(key_slot(key)), key);
        }
        Some(result)
    }

    /// Like [`Keyspace::modify`], creating the key with `make()` first when it is absent.
    /// A created value that `f` leaves empty is removed again, and records nothing.
    /// (Always `Some`: the key is there when `f` runs.)
    pub fn upsert<R>(
        &mut self,
        key: &[u8],
        now: Millis,
        make: impl FnOnce() -> Value,
        f: impl FnOnce(ValueMut<'_>) -> (R, bool),
    ) -> Option<R> {
        self.preserve_key(key);
        let created = !self.contains(key, now);
        if created {
            self.put_value(key, make(), None, now);
        }
        let (result, changed, emptied) = self.change_in_place(key, now, f)?;
        let slot = usize::from(key_slot(key));
        if emptied {
            self.delete_quietly(key);
            if !created {
                self.record(Change::Deleted, slot, key);
            }
        } else if changed || created {
            self.record_write(slot, key, created);
        }
        Some(result)
    }

    /// Runs `f` on the live value: its result, whether it changed the value, and whether
    /// the value is now an empty collection.
    fn change_in_place<R>(
        &mut self,
        key: &[u8],
        now: Millis,
        f: impl FnOnce(ValueMut<'_>) -> (R, bool),
    ) -> Option<(R, bool, bool)> {
        let (blob, boxed) = self.live(key, now)?;
        match blob::payload(blob) {
            Payload::Inline(s) => {
                let (r, changed) = f(ValueMut::InlineStr(s));
                Some((r, changed, false))
            }
            Payload::Boxed(i) => {
                let value = boxed.get_mut(i as usize)?;
                let (r, changed) = f(ValueMut::Boxed(value));
                let emptied = value.is_empty_collection();
                Some((r, changed, emptied))
            }
        }
    }

    /// Stores a new entry or replaces one, reusing the entry's allocation when the new one
    /// has the same size (a SET of a same-length value allocates nothing); its slot, and
    /// whether it created the key. Records nothing: the public methods that call it do.
    fn put(
        &mut self,
        key: &[u8],
        expire_at: Option<Millis>,
        payload: Payload<'_>,
        now: Millis,
    ) -> (usize, bool) {
        let (slot, hash) = self.locate(key);
        let mut created = false;
        let size = blob::size(key, expire_at, payload);
        let mut freed = None;
        let mut replaced_expire = None;
        if let Some(h) = self.find(slot, hash, key) {
            let old = self.arena.get(h);
            let old_expire = blob::expire(old);
            // An overwrite is an access; under LFU the key keeps its counter.
            let field = match self.access {
                AccessMode::Lru => lru_clock(now),
                AccessMode::Lfu { .. } => blob::access(old),
            };
            if let Payload::Boxed(i) = blob::payload(old) {
                freed = Some(i);
            }
            let at = self.arena.refit(h, size);
            if at != h
                && let Some(place) = self
                    .slots
                    .get_mut(slot)
                    .and_then(|t| t.find_mut(hash, |&x| x == h))
            {
                // Another size: another chunk, in the same bucket.
                *place = at;
            }
            let chunk = self.arena.chunk_mut(at, size);
            blob::write(chunk, key, expire_at, payload);
            blob::set_access(chunk, field);
            if let Some(at) = old_expire {
                self.counts.drop_deadline(at);
            }
            replaced_expire = old_expire;
        } else {
            created = true;
            let h = self.arena.alloc(size);
            let chunk = self.arena.chunk_mut(h, size);
            blob::write(chunk, key, expire_at, payload);
            blob::set_access(chunk, self.access.fresh(now));
            let (hasher, arena) = (&self.hasher, &self.arena);
            self.slots
                .get_or_make(slot)
                .insert_unique(hash, h, |&h| hasher.hash_one(blob::key(arena.get(h))));
            self.counts.len += 1;
        }
        if let Some(i) = freed {
            // A boxed value being replaced by a new payload (possibly its own index:
            // callers re-boxing pass the index they got from `boxed.insert`, never the
            // old one).
            if !matches!(payload, Payload::Boxed(j) if j == i)
                && let Some(old) = self.boxed.try_remove(i as usize)
            {
                crate::lazyfree::free(old);
            }
        }
        if let Some(at) = expire_at {
            self.counts.add_deadline(at);
            self.schedule(slot, hash, at, replaced_expire);
        }
        (slot, created)
    }

    /// Schedules the expiry of the entry at (`slot`, `hash`) at `at`, unless the timer of
    /// its earlier deadline `previous` is still pending: that one fires first and, finding
    /// the entry alive, schedules it again (see [`Keyspace::expire_due`]). So a key whose
    /// TTL is refreshed over and over keeps one timer, not one per refresh.
    fn schedule(&mut self, slot: usize, hash: u64, at: Millis, previous: Option<Millis>) {
        if previous.is_none_or(|p| at < p) {
            // Due once `now > at`.
            self.wheel
                .insert(Timer::new(at.saturating_add(1), slot as u16, hash));
        }
    }

    /// Stores the string `value` at `key` with `expire_at`, replacing whatever was there.
    /// (`now`, the command's time, is the entry's last access.)
    pub fn set_str(&mut self, key: &[u8], value: &[u8], expire_at: Option<Millis>, now: Millis) {
        self.preserve_key(key);
        let (slot, created) = if value.len() <= INLINE_MAX {
            self.put(key, expire_at, Payload::Inline(value), now)
        } else {
            self.put_value(key, Value::Str(value.to_vec()), expire_at, now)
        };
        self.record_write(slot, key, created);
    }

    /// Stores `value` at `key` with `expire_at`, replacing whatever was there.
    pub fn insert(&mut self, key: &[u8], value: Value, expire_at: Option<Millis>, now: Millis) {
        self.preserve_key(key);
        let (slot, created) = self.put_value(key, value, expire_at, now);
        self.record_write(slot, key, created);
    }

    /// Stores a value, inline when it is a short string (see [`Keyspace::put`]); records
    /// nothing.
    fn put_value(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at: Option<Millis>,
        now: Millis,
    ) -> (usize, bool) {
        match value {
            Value::Str(s) if s.len() <= INLINE_MAX => {
                self.put(key, expire_at, Payload::Inline(&s), now)
            }
            other => {
                let index = self.boxed.insert(other) as u32;
                self.put(key, expire_at, Payload::Boxed(index), now)
            }
        }
    }

    /// Removes `key` whatever its state; records nothing.
    fn delete_quietly(&mut self, key: &[u8]) {
        let (slot, hash) = self.locate(key);
        if let Some(h) = self.unlink(slot, hash, key) {
            self.discard(h);
            self.maybe_shrink(slot);
        }
    }

    /// Removes `key`; its value and expiry when it was live at `now`.
    pub fn remove(&mut self, key: &[u8], now: Millis) -> Option<Removed> {
        let (slot, hash) = self.locate(key);
        self.preserve(slot);
        let h = self.unlink(slot, hash, key)?;
        let clock = self.deadline_clock(now);
        let blob = self.arena.get(h);
        let change = removal(blob, clock);
        let removed = (change == Change::Deleted).then(|| {
            let value = match blob::payload(blob) {
                Payload::Inline(s) => Some(Value::Str(s.to_vec())),
                Payload::Boxed(_) => None,
            };
            (value, blob::expire(blob), blob::encoding_flags(blob))
        });
        let boxed = self.forget(h);
        self.maybe_shrink(slot);
        self.record(change, slot, key);
        let (inline, expire_at, flags) = removed?;
        Some(Removed {
            value: inline.or(boxed).unwrap_or(Value::Str(Vec::new())),
            expire_at,
            flags,
        })
    }

    /// Deletes `key`; true when it was live at `now`. Unlike [`Keyspace::remove`], copies
    /// nothing out.
    pub fn delete(&mut self, key: &[u8], now: Millis) -> bool {
        let (slot, hash) = self.locate(key);
        self.preserve(slot);
        let Some(h) = self.unlink(slot, hash, key) else {
            return false;
        };
        let change = removal(self.arena.get(h), self.deadline_clock(now));
        self.discard(h);
        self.maybe_shrink(slot);
        self.record(change, slot, key);
        change == Change::Deleted
    }

    /// Sets or clears the expiry of a live key; false when the key is absent at `now`.
    pub fn set_expire(&mut self, key: &[u8], expire_at: Option<Millis>, now: Millis) -> bool {
        let (slot, hash) = self.locate(key);
        self.preserve(slot);
        let arena = &self.arena;
        let Some(place) = self
            .slots
            .get_mut(slot)
            .and_then(|t| t.find_mut(hash, |&h| blob::key(arena.get(h)) == key))
        else {
            return false;
        };
        let h = *place;
        let entry = self.arena.get(h);
        if !self.mode.replica && expired(entry, now) {
            self.delete(key, now);
            return false;
        }
        // Rewrite the entry with the new expiry, the same payload and encoding flags.
        let old_expire = blob::expire(entry);
        let mut rebuilt = blob::build(key, expire_at, blob::payload(entry));
        blob::add_encoding_flags(&mut rebuilt, blob::encoding_flags(entry));
        blob::set_access(&mut rebuilt, blob::access(entry));
        if blob::pinned(entry) {
            blob::pin(&mut rebuilt);
        }
        let at = self.arena.refit(h, rebuilt.len());
        *place = at;
        self.arena
            .chunk_mut(at, rebuilt.len())
            .copy_from_slice(&rebuilt);
        if let Some(at) = old_expire {
            self.counts.drop_deadline(at);
        }
        if let Some(at) = expire_at {
            self.counts.add_deadline(at);
        }
        if let Some(at) = expire_at {
            self.schedule(slot, hash, at, old_expire);
        }
        self.record(Change::Written, slot, key);
        true
    }

    /// Keeps eviction away from a live key (a claim, a claim's result: evicting it would
    /// let a duplicate run the work again); it still expires. Any later write of the key
    /// but an expiry change unpins it.
    pub fn pin(&mut self, key: &[u8], now: Millis) {
        if let Some(b) = self.live_entry_mut(key, now) {
            blob::pin(b);
        }
    }

    /// `key`'s live entry, to change its flags (no access recorded, nothing removed).
    fn live_entry_mut(&mut self, key: &[u8], now: Millis) -> Option<&mut [u8]> {
        let (slot, hash) = self.locate(key);
        let h = self.find(slot, hash, key)?;
        let clock = self.deadline_clock(now);
        Some(self.arena.get_mut(h)).filter(|b| !expired(b, clock))
    }

    /// Adds encoding flags ([`crate::ENCODING_FLAGS`]: what OBJECT ENCODING and REFCOUNT
    /// report) to a live key. Any later SET clears them; expiry changes and moves keep them.
    pub fn add_flags(&mut self, key: &[u8], flags: u8, now: Millis) {
        if let Some(b) = self.live_entry_mut(key, now) {
            blob::add_encoding_flags(b, flags);
        }
    }

    /// Removes every key (one [`Event::Flushed`], not an event per key). An image in
    /// progress writes them first — unless its save was abandoned: the image is dropped
    /// (true is returned then).
    pub fn clear(&mut self) -> bool {
        let mut dropped = false;
        if let Some(snap) = self.snapshot.as_deref() {
            if snap
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(std::sync::atomic::Ordering::Acquire))
            {
                self.snapshot = None;
                dropped = true;
            } else {
                (0..SLOTS).for_each(|slot| self.preserve(slot));
            }
        }
        // (Freed in the background: a million keys take a while. The next keys make
        // their slots' tables a chunk at a time, a few KiB: `slot_tables.rs`.)
        let slots = std::mem::take(&mut self.slots);
        let arena = std::mem::take(&mut self.arena);
        let boxed = std::mem::take(&mut self.boxed);
        let wheel = std::mem::replace(&mut self.wheel, Wheel::new(0));
        if self.counts.len > crate::lazyfree::THRESHOLD {
            crate::lazyfree::free_later((slots, arena, boxed, wheel));
        }
        self.counts = Counts::default();
        self.recorder.flushed(self.db);
        dropped
    }

    /// Calls `f` on every live key of `slot`, removing the expired ones it meets.
    pub fn for_each_in_slot(&mut self, slot: u16, now: Millis, mut f: impl FnMut(Entry<'_>)) {
        let Some(table) = self.slots.get_mut(usize::from(slot)) else {
            return;
        };
        let arena = &self.arena;
        let mut gone = Vec::new();
        table.retain(|&mut h| {
            if expired(arena.get(h), now) {
                gone.push(h);
                false
            } else {
                true
            }
        });
        for h in gone {
            self.record_entry(Change::Expired, usize::from(slot), h);
            self.discard(h);
        }
        if let Some(table) = self.slots.get(usize::from(slot)) {
            for &h in table.iter() {
                let blob = self.arena.get(h);
                f(Entry {
                    blob,
                    value: value_ref(blob, &self.boxed),
                });
            }
        }
    }

    /// Removes every key of `slot`, handing each live one to `f` with its value and
    /// expiry (moving, not copying, boxed values); expired ones are dropped. Records
    /// nothing: for moving a whole keyspace elsewhere (loading).
    pub fn drain_slot(
        &mut self,
        slot: u16,
        now: Millis,
        mut f: impl FnMut(Vec<u8>, Value, Option<Millis>),
    ) {
        let Some(table) = self.slots.get_mut(usize::from(slot)) else {
            return;
        };
        let table = std::mem::take(table);
        for h in table {
            let blob = self.arena.get(h);
            let (key, expire_at, live) = (
                blob::key(blob).to_vec(),
                blob::expire(blob),
                !expired(blob, now),
            );
            let inline = match blob::payload(blob) {
                Payload::Inline(s) if live => Some(Value::Str(s.to_vec())),
                _ => None,
            };
            let boxed = self.forget(h);
            if let Some(value) = inline.or(boxed).filter(|_| live) {
                f(key, value, expire_at);
            }
        }
    }

    /// A random live key, chosen with `seed`: a random non-empty slot
    /// ([`Keyspace::random_slot`]), then a random key in it. Expired keys met on the way
    /// are removed.
    pub fn random_key(&mut self, seed: u64, now: Millis) -> Option<Vec<u8>> {
        // A few tries, so that a keyspace of mostly expired keys still finds a live one.
        for attempt in 0..8u64 {
            if self.counts.len == 0 {
                return None;
            }
            let mixed = seed.wrapping_add(attempt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            self.rng ^= mixed | 1;
            let slot = self.random_slot()?;
            let table = self.slots.get(slot)?;
            let pick = ((mixed >> 16) % table.len() as u64) as usize;
            let blob = self.arena.get(*table.iter().nth(pick)?);
            let key = blob::key(blob).to_vec();
            if !expired(blob, now) {
                return Some(key);
            }
            self.remove(&key, now);
        }
        None
    }

    /// When the next key may expire, per the timer wheel (never later than that).
    pub fn next_expiry(&self) -> Option<Millis> {
        self.wheel.next_deadline()
    }

    /// Active expiry: removes keys whose expiry passed by `now`, at most `budget` timers'
    /// worth; returns how many keys it removed. Timers made stale by an overwrite, a
    /// PERSIST or a DEL find no expired entry and are skipped.
    pub fn expire_due(&mut self, now: Millis, budget: usize) -> usize {
        let mut due = Vec::new();
        self.wheel.advance(now, budget, |t| due.push(t));
        // The entries first, all at once (their cache misses overlap), then the removals.
        for t in &due {
            self.prefetch((usize::from(t.slot()), t.hash));
        }
        let mut removed = 0;
        for t in due {
            let slot = usize::from(t.slot());
            let (hasher, arena) = (&self.hasher, &self.arena);
            let Some(Ok(found)) = self.slots.get_mut(slot).map(|table| {
                table.find_entry(t.hash, |&h| {
                    hasher.hash_one(blob::key(arena.get(h))) == t.hash
                })
            }) else {
                continue;
            };
            let h = *found.get();
            let blob = arena.get(h);
            if expired(blob, now) {
                found.remove();
                self.record_entry(Change::Expired, slot, h);
                self.discard(h);
                removed += 1;
                self.maybe_shrink(slot);
            } else if let Some(at) = blob::expire(blob) {
                // Its deadline moved later since this timer was set: one timer follows it.
                self.wheel
                    .insert(Timer::new(at.saturating_add(1), t.slot(), t.hash));
            }
        }
        removed
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn eviction_takes_the_idlest_and_passes_pinned_keys_by() {
        let mut k = Keyspace::new();
        k.set_str(b"old", b"v", None, 1_000);
        k.set_str(b"claim", b"t", Some(1_000_000), 1_000);
        k.pin(b"claim", 1_000);
        k.set_str(b"new", b"v", None, 50_000);
        // The oldest unpinned key goes first, whatever the samples.
        assert_eq!(
            k.eviction_candidate(EvictBy::Lru, false, 64, 60_000),
            Some(b"old".to_vec())
        );
        k.delete(b"old", 60_000);
        assert_eq!(
            k.eviction_candidate(EvictBy::Lru, false, 64, 60_000),
            Some(b"new".to_vec())
        );
        k.delete(b"new", 60_000);
        assert_eq!(k.eviction_candidate(EvictBy::Lru, false, 64, 60_000), None);
        assert_eq!(k.eviction_candidate(EvictBy::Ttl, true, 64, 60_000), None);
        // A renewal keeps the pin; a plain write clears it.
        k.set_expire(b"claim", Some(2_000_000), 60_000);
        assert_eq!(
            k.eviction_candidate(EvictBy::Random, false, 5, 60_000),
            None
        );
        k.set_str(b"claim", b"other", None, 60_000);
        assert_eq!(
            k.eviction_candidate(EvictBy::Random, false, 5, 60_000),
            Some(b"claim".to_vec())
        );
    }

    #[test]
    fn reads_refresh_the_lru_clock_and_object_idletime_does_not() {
        let mut k = Keyspace::new();
        k.set_str(b"k", b"v", None, 10_000);
        assert_eq!(k.idle_secs(b"k", 15_000), Some(5));
        assert_eq!(
            k.idle_secs(b"k", 15_000),
            Some(5),
            "IDLETIME does not touch"
        );
        k.get(b"k", 17_000);
        assert_eq!(k.idle_secs(b"k", 20_000), Some(3));
    }

    #[test]
    fn peeking_sees_stale_keys_and_removes_nothing() {
        let mut k = Keyspace::new();
        k.observe(true);
        k.set_str(b"live", b"v", None, 1_000);
        k.set_str(b"stale", b"v", Some(1_500), 1_000);
        k.take_events().for_each(drop);
        assert_eq!(k.peek_expiry(b"live"), Some(None));
        assert_eq!(k.peek_expiry(b"stale"), Some(Some(1_500)));
        assert_eq!(k.peek_expiry(b"absent"), None);
        // However long ago it expired, the stale key is still there and nothing was
        // recorded (peeking takes no clock).
        assert_eq!(k.peek_expiry(b"stale"), Some(Some(1_500)));
        assert_eq!(k.len(), 2);
        assert!(!k.has_events());
    }

    fn s(v: &[u8]) -> Value {
        Value::Str(v.to_vec())
    }

    fn get_str(ks: &mut Keyspace, key: &[u8], now: Millis) -> Option<Vec<u8>> {
        ks.get(key, now)
            .and_then(|e| e.value().as_str().map(<[u8]>::to_vec))
    }

    #[test]
    fn insert_get_remove() {
        let mut ks = Keyspace::new();
        ks.insert(b"a", s(b"1"), None, 0);
        ks.set_str(b"a", b"2", None, 0);
        assert_eq!(ks.len(), 1);
        assert_eq!(get_str(&mut ks, b"a", 0), Some(b"2".to_vec()));
        assert_eq!(
            ks.remove(b"a", 0),
            Some(Removed {
                value: s(b"2"),
                expire_at: None,
                flags: 0
            })
        );
        assert!(ks.remove(b"a", 0).is_none());
        assert!(ks.is_empty());
        assert_eq!(ks.arena.live_bytes(), 0);
    }

    #[test]
    fn long_strings_and_other_types_are_boxed() {
        let mut ks = Keyspace::new();
        let long = vec![b'x'; INLINE_MAX + 1];
        ks.set_str(b"long", &long, Some(50), 0);
        assert_eq!(get_str(&mut ks, b"long", 0), Some(long.clone()));
        ks.insert(b"h", Value::Hash(Box::default()), None, 0);
        let added = ks.modify(b"h", 0, |v| match v {
            ValueMut::Boxed(Value::Hash(h)) => (h.insert(b"f", b"v"), true),
            other => panic!("{other:?}"),
        });
        assert_eq!(added, Some(true));
        assert_eq!(ks.get(b"h", 0).map(|e| e.value().type_name()), Some("hash"));
        // Replacing a boxed value frees it.
        ks.set_str(b"long", b"short", None, 0);
        assert_eq!(ks.boxed.len(), 1);
        assert_eq!(ks.remove(b"long", 0).map(|r| r.value), Some(s(b"short")));
        assert!(ks.delete(b"h", 0));
        assert!(ks.boxed.is_empty());
        assert_eq!(ks.arena.live_bytes(), 0);
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
    fn deadlines_add_up_through_writes_expiries_and_removals() {
        let mut ks = Keyspace::new();
        ks.insert(b"a", s(b"v"), Some(1000), 0);
        ks.set_str(b"b", b"v", Some(3000), 0);
        ks.set_str(b"c", b"v", None, 0);
        assert_eq!((ks.volatile_len(), ks.deadlines()), (2, 4000));
        // Overwritten with another deadline, given one, persisted, deleted.
        ks.set_str(b"b", b"w", Some(5000), 0);
        assert_eq!(ks.deadlines(), 6000);
        assert!(ks.set_expire(b"c", Some(7000), 0));
        assert!(ks.set_expire(b"a", Some(2000), 0));
        assert_eq!((ks.volatile_len(), ks.deadlines()), (3, 14000));
        assert!(ks.set_expire(b"b", None, 0));
        assert!(ks.delete(b"c", 0));
        assert_eq!((ks.volatile_len(), ks.deadlines()), (1, 2000));
        // Expired lazily.
        assert!(!ks.contains(b"a", 2001));
        assert_eq!((ks.volatile_len(), ks.deadlines()), (0, 0));
        ks.set_str(b"d", b"v", Some(9), 0);
        ks.clear();
        assert_eq!(ks.deadlines(), 0);
    }

    #[test]
    fn set_expire_tracks_volatile_keys() {
        let mut ks = Keyspace::new();
        ks.insert(b"k", s(b"v"), None, 0);
        assert!(ks.set_expire(b"k", Some(5), 0));
        assert_eq!(ks.volatile_len(), 1);
        assert_eq!(ks.get(b"k", 0).and_then(|e| e.expire_at()), Some(5));
        assert!(ks.set_expire(b"k", None, 0));
        assert_eq!(ks.volatile_len(), 0);
        assert_eq!(get_str(&mut ks, b"k", 0), Some(b"v".to_vec()));
        assert!(!ks.set_expire(b"missing", None, 0));
    }

    #[test]
    fn a_replicas_writes_see_keys_past_their_deadline_as_live() {
        let mut ks = Keyspace::new();
        ks.insert(b"k", s(b"v"), Some(5), 0);
        ks.insert(b"gone", s(b"v"), Some(5), 0);
        ks.set_read_mode(ReadMode {
            replica: true,
            ..ReadMode::default()
        });
        assert!(!ks.expires());
        assert_eq!(get_str(&mut ks, b"k", 10), Some(b"v".to_vec()));
        // A deadline already past is kept; a deletion is a deletion, not an expiry.
        assert!(ks.set_expire(b"k", Some(7), 10));
        assert_eq!(ks.get(b"k", 10).and_then(|e| e.expire_at()), Some(7));
        assert!(ks.delete(b"gone", 10));
        // Elsewhere the key has expired.
        ks.set_read_mode(ReadMode::default());
        assert!(ks.expires());
        assert_eq!(get_str(&mut ks, b"k", 10), None);
        assert_eq!(ks.len(), 0);
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
    fn active_expiry_removes_due_keys_and_skips_stale_timers() {
        let mut ks = Keyspace::new();
        let now = 1_700_000_000_000;
        for i in 0..1000u32 {
            ks.set_str(format!("k{i}").as_bytes(), b"v", Some(now + 100), now);
        }
        // Overwritten with a later expiry, and persisted: their first timers are stale.
        ks.set_str(b"k1", b"v", Some(now + 10_000), now);
        ks.set_expire(b"k2", None, now);
        assert!(ks.next_expiry().is_some_and(|d| d <= now + 101));
        assert_eq!(
            ks.expire_due(now + 100, usize::MAX),
            0,
            "alive through their last ms"
        );
        let mut removed = 0;
        while removed < 998 {
            let n = ks.expire_due(now + 101, 100);
            assert!(n <= 100);
            removed += n;
            if n == 0 {
                break;
            }
        }
        assert_eq!(removed, 998);
        assert_eq!(ks.len(), 2);
        assert!(ks.contains(b"k1", now + 101) && ks.contains(b"k2", now + 101));
        assert_eq!(ks.expire_due(now + 10_001, usize::MAX), 1);
        assert_eq!(ks.len(), 1);
    }

    #[test]
    fn a_refreshed_ttl_keeps_one_timer() {
        let mut ks = Keyspace::new();
        let now = 1_700_000_000_000;
        for i in 0..1000 {
            ks.set_str(b"set", b"v", Some(now + 100 + i), now);
            assert!(ks.set_expire(b"expire", Some(now + 100 + i), now) || i == 0);
            if i == 0 {
                ks.set_str(b"expire", b"v", None, now);
            }
        }
        assert!(ks.wheel.len() <= 2, "{} timers", ks.wheel.len());
        // The first timers fire, find the keys alive, and follow their deadlines.
        assert_eq!(ks.expire_due(now + 101, usize::MAX), 0);
        assert_eq!(ks.len(), 2);
        assert_eq!(ks.expire_due(now + 1100, usize::MAX), 2);
        assert_eq!(ks.len(), 0);
        // A deadline moved earlier gets a timer of its own.
        ks.set_str(b"k", b"v", Some(now + 5000), now);
        ks.set_expire(b"k", Some(now + 2000), now);
        assert_eq!(ks.expire_due(now + 2001, usize::MAX), 1);
    }

    #[test]
    fn same_size_overwrites_reuse_the_entry() {
        let mut ks = Keyspace::new();
        ks.set_str(b"k", b"aaaa", None, 0);
        let before = ks.used_bytes();
        for v in [b"bbbb", b"cccc"] {
            ks.set_str(b"k", v, None, 0);
        }
        assert_eq!(ks.used_bytes(), before);
        assert_eq!(get_str(&mut ks, b"k", 0), Some(b"cccc".to_vec()));
    }

    fn events(ks: &mut Keyspace) -> Vec<(Change, Vec<u8>)> {
        ks.take_events()
            .map(|e| match e {
                Event::Key(k) => (k.change, k.key.to_vec()),
                Event::Flushed { .. } => (Change::Deleted, b"*flushed*".to_vec()),
            })
            .collect()
    }

    #[test]
    fn nothing_is_recorded_unless_observed() {
        let mut ks = Keyspace::new();
        ks.set_str(b"a", b"1", None, 0);
        ks.delete(b"a", 0);
        assert!(!ks.has_events());
        ks.observe(true);
        ks.set_str(b"a", b"1", None, 0);
        assert!(ks.has_events());
        ks.observe(false);
        assert!(!ks.has_events());
    }

    #[test]
    fn every_change_records_its_event() {
        use Change::{Deleted, Expired, Written};
        let mut ks = Keyspace::new();
        ks.observe(true);
        ks.set_str(b"s", b"v", None, 0);
        ks.insert(b"long", Value::Str(vec![b'x'; INLINE_MAX + 1]), Some(10), 0);
        ks.set_expire(b"s", Some(5), 0);
        ks.set_expire(b"missing", Some(5), 0);
        assert_eq!(
            events(&mut ks),
            [
                (Written, b"s".to_vec()),
                (Written, b"long".to_vec()),
                (Written, b"s".to_vec())
            ]
        );
        // Lazy expiry, on a read.
        assert!(ks.get(b"s", 6).is_none());
        assert_eq!(events(&mut ks), [(Expired, b"s".to_vec())]);
        // A deletion of a live key, and of an expired one.
        ks.set_str(b"d", b"v", Some(3), 0);
        ks.set_str(b"e", b"v", None, 0);
        events(&mut ks);
        assert!(ks.delete(b"e", 0));
        assert!(!ks.delete(b"d", 4));
        assert!(ks.remove(b"long", 0).is_some());
        assert_eq!(
            events(&mut ks),
            [
                (Deleted, b"e".to_vec()),
                (Expired, b"d".to_vec()),
                (Deleted, b"long".to_vec())
            ]
        );
        // Active expiry.
        ks.set_str(b"t", b"v", Some(100), 0);
        events(&mut ks);
        ks.expire_due(101, usize::MAX);
        assert_eq!(events(&mut ks), [(Expired, b"t".to_vec())]);
        // Slot iteration meets an expired key.
        ks.set_str(b"{x}a", b"v", Some(100), 0);
        events(&mut ks);
        ks.for_each_in_slot(key_slot(b"x"), 200, |_| {});
        assert_eq!(events(&mut ks), [(Expired, b"{x}a".to_vec())]);
        // A flush is one event.
        ks.set_str(b"a", b"v", None, 0);
        ks.set_str(b"b", b"v", None, 0);
        events(&mut ks);
        ks.clear();
        assert_eq!(events(&mut ks), [(Deleted, b"*flushed*".to_vec())]);
        // Writes counted, not listed; deletions still listed.
        ks.list_writes(false);
        ks.set_str(b"a", b"v", None, 0);
        ks.set_str(b"b", b"v", None, 0);
        assert!(ks.has_events());
        assert_eq!(events(&mut ks), []);
        assert_eq!(ks.take_unlisted(), 2);
        assert!(!ks.has_events());
        ks.delete(b"a", 0);
        assert_eq!(events(&mut ks), [(Deleted, b"a".to_vec())]);
        assert_eq!(ks.take_unlisted(), 0);
    }

    #[test]
    fn changes_in_place_and_emptied_collections() {
        use Change::{Deleted, Written};
        let mut ks = Keyspace::new();
        ks.observe(true);
        let hash = || Value::Hash(Box::default());
        let add = |v: ValueMut<'_>| match v {
            ValueMut::Boxed(Value::Hash(h)) => (h.insert(b"f", b"v"), true),
            _ => (false, false),
        };
        let drop_f = |v: ValueMut<'_>| match v {
            ValueMut::Boxed(Value::Hash(h)) => {
                let gone = h.remove(b"f");
                (gone, gone)
            }
            _ => (false, false),
        };
        assert_eq!(ks.upsert(b"h", 0, hash, add), Some(true));
        // Unchanged: no event.
        assert_eq!(ks.modify(b"h", 0, |_| ((), false)), Some(()));
        assert_eq!(ks.modify(b"h", 0, drop_f), Some(true));
        assert!(!ks.contains(b"h", 0), "an emptied hash deletes its key");
        // A collection created and left empty was never there.
        assert_eq!(ks.upsert(b"h2", 0, hash, |_| ((), false)), Some(()));
        assert!(!ks.contains(b"h2", 0));
        assert_eq!(ks.modify(b"absent", 0, |_| ((), true)), None);
        assert_eq!(
            events(&mut ks),
            [(Written, b"h".to_vec()), (Deleted, b"h".to_vec())]
        );
        assert_eq!(ks.len(), 0);
        assert!(ks.boxed.is_empty());
    }

    /// Random writes, expiry changes, deletions and expiries of keys and values of every
    /// size (inline, boxed, keys long enough to live outside the arena's pages), checked
    /// against a model after each step: entries moved between chunks of other sizes and
    /// chunks handed out again never mix up keys, and the arena's count of live bytes is
    /// exactly what the entries take.
    #[test]
    fn the_arena_keeps_every_entry_through_random_changes() {
        use std::collections::BTreeMap;
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let key_of = |i: u64| -> Vec<u8> {
            let mut k = format!("key:{i}").into_bytes();
            if i.is_multiple_of(17) {
                k.resize(600, b'x'); // past SMALL_MAX: allocated on its own
            }
            k
        };
        let mut ks = Keyspace::new();
        let mut model: BTreeMap<Vec<u8>, (Vec<u8>, Option<Millis>)> = BTreeMap::new();
        let mut now = 1_000;
        for step in 0..20_000u64 {
            let key = key_of(next(300));
            match next(10) {
                0..=4 => {
                    let len = [0, 1, 7, 31, 32, 100, 256, 257, 400][next(9) as usize];
                    let value = vec![b'a' + (step % 26) as u8; len];
                    let expire = (next(3) == 0).then(|| now + next(50));
                    ks.set_str(&key, &value, expire, now);
                    model.insert(key, (value, expire));
                }
                5 | 6 => {
                    let expire = (next(2) == 0).then(|| now + next(50));
                    let live = model.contains_key(&key);
                    assert_eq!(ks.set_expire(&key, expire, now), live);
                    if let Some(m) = model.get_mut(&key) {
                        m.1 = expire;
                    }
                }
                7 => assert_eq!(ks.delete(&key, now), model.remove(&key).is_some()),
                8 => {
                    let removed = ks.remove(&key, now).map(|r| (r.value, r.expire_at));
                    let expected = model.remove(&key).map(|(v, e)| (Value::Str(v), e));
                    assert_eq!(removed, expected);
                }
                _ => {
                    now += next(20);
                    ks.expire_due(now, 1_000);
                    model.retain(|_, (_, e)| e.is_none_or(|at| at >= now));
                }
            }
            if step.is_multiple_of(500) || step == 19_999 {
                for (k, (v, e)) in &model {
                    let got = ks.get(k, now).unwrap();
                    assert_eq!(got.key(), k.as_slice());
                    assert_eq!(got.value().as_str(), Some(v.as_slice()), "step {step}");
                    assert_eq!(got.expire_at(), *e);
                }
                let mut chunks = 0;
                for slot in 0..SLOTS as u16 {
                    ks.for_each_in_slot(slot, now, |e| {
                        chunks += arena::chunk_size(e.blob.len());
                    });
                }
                assert_eq!(ks.len(), model.len());
                assert_eq!(ks.arena.live_bytes(), chunks);
            }
        }
    }
}
