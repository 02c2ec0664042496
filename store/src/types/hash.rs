//! Hashes: field → value, kept in one of redis-server 7.0's two encodings, with its
//! conversions, so that OBJECT ENCODING answers what Redis would:
//!
//! - **packed** (`listpack`) while the hash has at most [`LISTPACK_ENTRIES`] fields and no
//!   field or value longer than [`LISTPACK_VALUE`] bytes: one exact-size buffer, a field
//!   count then each pair as `[field length][field][value length][value]` (LEB128 lengths:
//!   one byte each below 128 bytes), in insertion order — Redis's listpack order,
//!   which HGETALL shows. Lookups scan it, as Redis scans a listpack.
//! - **table** (`hashtable`) once either limit is passed (and never back, as in Redis): an
//!   open-addressing table, linear probing with Robin Hood ordering, one allocation per
//!   field (`[field length (LEB128)][field][value]`), and beside each slot a byte holding
//!   its distance from its home slot (0: empty). A field's home slot is the top bits of its
//!   hash, so the slots are in hash order — across resizes too, which is what HSCAN's
//!   cursor relies on ([`Hash::scan`]). Filled at most 3/4; a resize (doubling, or
//!   shrinking once under 1/8 full) drains the former array into the new one a few runs of slots per
//!   write, as Redis rehashes incrementally, so no command pays for a whole rehash.
//!
//! Fields are hashed with one foldhash state per process, seeded randomly (fields are
//! client-controlled); a hash holds no hasher of its own.

use super::thresholds;
use crate::leb128;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// redis-server 7.0's default `hash-max-listpack-entries` (in force:
/// [`thresholds::HASH_LISTPACK_ENTRIES`]): more fields make it a hashtable.
pub const LISTPACK_ENTRIES: usize = 512;
/// redis-server 7.0's default `hash-max-listpack-value` (in force:
/// [`thresholds::HASH_LISTPACK_VALUE`]): a longer field or value makes it a hashtable.
pub const LISTPACK_VALUE: usize = 64;

/// A hash.
#[derive(Clone, Default)]
pub struct Hash {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Packed(Packed),
    Table(Box<Table>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Packed(Packed::default())
    }
}

impl Hash {
    /// Starts loading what a lookup of `field` reads (its slot, and the entry there), for
    /// a pipeline's fields to be looked up ahead of its commands (`Keyspace::prefetch`
    /// says why). A packed hash is one buffer: nothing to do. Changes nothing.
    pub fn prefetch(&self, field: &[u8]) {
        let Repr::Table(table) = &self.repr else {
            return;
        };
        let hash = hash_of(field);
        for array in table.arrays() {
            let home = array.home(hash);
            if let Some(dist) = array.dist.get(home) {
                crate::prefetch::read(dist);
            }
            // (The field is at its home slot or a little past it.)
            if let Some(Some(entry)) = array.slots.get(home) {
                crate::prefetch::read(entry.as_ptr());
            }
        }
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Packed(p) => p.len(),
            Repr::Table(t) => t.len(),
        }
    }

    /// True when there is no field.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Packed(p) => p.find(field).map(|at| p.value(&at)),
            Repr::Table(t) => t.get(field),
        }
    }

    /// Whether `field` is there.
    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; true when the field is new. Converts the hash to a table
    /// as Redis's `hashTypeSet` does: before, when the field or the value is longer than
    /// `hash-max-listpack-value`; after, when it has more fields than
    /// `hash-max-listpack-entries`.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        if matches!(self.repr, Repr::Packed(_)) {
            let longest = thresholds::HASH_LISTPACK_VALUE.get();
            if field.len() > longest || value.len() > longest {
                self.convert();
            }
        }
        match &mut self.repr {
            Repr::Packed(p) => {
                let added = p.insert(field, value);
                if p.len() > thresholds::HASH_LISTPACK_ENTRIES.get() {
                    self.convert();
                }
                added
            }
            Repr::Table(t) => t.insert(field, value),
        }
    }

    /// Removes `field`; true when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Packed(p) => p.remove(field),
            Repr::Table(t) => t.remove(field),
        }
    }

    /// Calls `f` with every field and its value, in the hash's order (insertion order
    /// while packed, as a listpack keeps it).
    pub fn for_each<'a>(&'a self, mut f: impl FnMut(&'a [u8], &'a [u8])) {
        for (field, value) in self.iter() {
            f(field, value);
        }
    }

    /// Every field and its value, in the order of [`Hash::for_each`].
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Packed(p) => Iter(IterInner::Packed(p.pairs())),
            Repr::Table(t) => {
                let old = t.old.as_ref().map_or(&[][..], |(o, _)| &o.slots[..]);
                Iter(IterInner::Table(t.main.slots.iter().chain(old.iter())))
            }
        }
    }

    /// The encoding OBJECT ENCODING reports: `listpack` while small, else `hashtable`.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Packed(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    /// Heap bytes: the boxed hash itself and what it holds.
    pub fn heap_bytes(&self) -> usize {
        size_of::<Hash>()
            + match &self.repr {
                Repr::Packed(p) => p.buf.len(),
                Repr::Table(t) => size_of::<Table>() + t.heap_bytes(),
            }
    }

    /// One call of HSCAN from `cursor`: calls `f` with the pairs it returns and gives the
    /// next cursor (0 when the iteration is over). About `count` pairs are returned.
    ///
    /// A packed hash returns everything at once with cursor 0, whatever the cursor, as
    /// Redis does for a listpack. A table's cursor is a position in hash space: a call
    /// returns every field whose hash lies in `[cursor rounded down to a slot, next)`, so
    /// successive calls cover the hash space once whatever happens in between, and every
    /// field present for the whole iteration is returned (at least once: a table that
    /// shrank meanwhile may return a slot's fields again). During a resize, both arrays
    /// give their fields of the call's range.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        match &self.repr {
            Repr::Packed(_) => {
                self.for_each(f);
                0
            }
            Repr::Table(t) => t.scan(cursor, count.max(1), f),
        }
    }

    /// A random field and its value, each equally likely; `None` when empty. `rng` gives
    /// uniform random numbers.
    pub fn random_pair(&self, rng: &mut impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        match &self.repr {
            Repr::Packed(p) => {
                let n = p.len();
                if n == 0 {
                    return None;
                }
                p.pairs().nth(below(rng(), n))
            }
            Repr::Table(t) => t.random_pair(rng),
        }
    }

    /// Random picks with replacement (HRANDFIELD with a negative count): a packed hash is
    /// indexed once, so that each pick costs O(1).
    pub fn sampler(&self) -> Sampler<'_> {
        match &self.repr {
            Repr::Packed(p) => Sampler(SamplerInner::Pairs(p.pairs().collect())),
            Repr::Table(t) => Sampler(SamplerInner::Table(t)),
        }
    }

    /// Calls `f` with `count` distinct fields and their values, chosen at random (every
    /// subset equally likely); all of them when `count >= len`. A packed hash gives them in
    /// its order (as Redis's `lpRandomPairsUnique`); a table in no particular order.
    pub fn distinct_sample<'a>(
        &'a self,
        count: usize,
        rng: &mut impl FnMut() -> u64,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) {
        let n = self.len();
        if count >= n {
            return self.for_each(f);
        }
        match &self.repr {
            Repr::Packed(p) => {
                // Floyd's algorithm over the indexes, kept in a bitmap.
                let mut chosen = vec![0u64; n.div_ceil(64)];
                for j in n - count..n {
                    let mut i = below(rng(), j + 1);
                    if chosen[i / 64] >> (i % 64) & 1 == 1 {
                        i = j;
                    }
                    chosen[i / 64] |= 1 << (i % 64);
                }
                for (i, (field, value)) in p.pairs().enumerate() {
                    if chosen[i / 64] >> (i % 64) & 1 == 1 {
                        f(field, value);
                    }
                }
            }
            Repr::Table(t) => t.distinct_sample(count, rng, f),
        }
    }

    /// Makes the hash a table (Redis's `hashTypeConvert`); nothing when it is one.
    fn convert(&mut self) {
        if let Repr::Packed(p) = &self.repr {
            let mut table = Table::with_capacity(p.len());
            for (field, value) in p.pairs() {
                table.insert_new(entry(field, value));
            }
            self.repr = Repr::Table(Box::new(table));
        }
    }
}

impl PartialEq for Hash {
    /// Two hashes are equal when they map the same fields to the same values, whatever
    /// their encodings and orders.
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len() && self.iter().all(|(f, v)| other.get(f) == Some(v))
    }
}

impl Eq for Hash {}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        write!(f, "Hash({}) ", self.encoding())?;
        f.debug_map()
            .entries(self.iter().map(|(k, v)| (text(k), text(v))))
            .finish()
    }
}

/// A uniform random number below `n` (> 0) from a uniform 64-bit one (Lemire's
/// multiply-shift; the bias is at most n / 2^64).
fn below(r: u64, n: usize) -> usize {
    ((u128::from(r) * n as u128) >> 64) as usize
}

/// The fields and values of a hash, in its order ([`Hash::iter`]).
#[derive(Clone, Debug)]
pub struct Iter<'a>(IterInner<'a>);

/// The slots of a table's arrays, in order.
type SlotsIter<'a> = std::iter::Chain<
    std::slice::Iter<'a, Option<Box<[u8]>>>,
    std::slice::Iter<'a, Option<Box<[u8]>>>,
>;

#[derive(Clone, Debug)]
enum IterInner<'a> {
    Packed(PackedPairs<'a>),
    Table(SlotsIter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterInner::Packed(p) => p.next(),
            IterInner::Table(slots) => slots.find_map(|s| s.as_deref()).map(split_entry),
        }
    }
}

/// Random picks with replacement from a hash ([`Hash::sampler`]).
#[derive(Debug)]
pub struct Sampler<'a>(SamplerInner<'a>);

#[derive(Debug)]
enum SamplerInner<'a> {
    /// A packed hash's pairs, indexed.
    Pairs(Vec<(&'a [u8], &'a [u8])>),
    Table(&'a Table),
}

impl<'a> Sampler<'a> {
    /// A random field and its value, each equally likely; `None` when the hash is empty.
    pub fn pick(&self, rng: &mut impl FnMut() -> u64) -> Option<(&'a [u8], &'a [u8])> {
        match &self.0 {
            SamplerInner::Pairs(pairs) if pairs.is_empty() => None,
            SamplerInner::Pairs(pairs) => pairs.get(below(rng(), pairs.len())).copied(),
            SamplerInner::Table(t) => t.random_pair(rng),
        }
    }
}

// --- The packed form ----------------------------------------------------------------------

/// Bytes of the packed form's header: the field count, little-endian.
const HEADER: usize = 2;

/// A small hash in one exact-size buffer: `[count: u16]` then `[field length][field]
/// [value length][value]` per pair, in insertion order, each length LEB128 (one byte
/// below 128, as fields and values mostly are). Empty: no buffer at all.
#[derive(Clone, Default)]
struct Packed {
    buf: Box<[u8]>,
}

/// Where a pair lies in a packed buffer.
struct PairAt {
    /// Offset of the pair (its field's length).
    start: usize,
    /// Offset of the value's length.
    value_at: usize,
    /// Offset of the value.
    value_start: usize,
    /// The value's length.
    value_len: usize,
}

impl PairAt {
    fn end(&self) -> usize {
        self.value_start + self.value_len
    }
}

/// Writes `n` as LEB128 at the start of `room`; the bytes after it.
fn put_len(room: &mut [u8], n: usize) -> &mut [u8] {
    let mut i = 0;
    leb128::write(n, |b| {
        room[i] = b;
        i += 1;
    });
    &mut room[i..]
}

impl Packed {
    fn len(&self) -> usize {
        match *self.buf {
            [lo, hi, ..] => usize::from(u16::from_le_bytes([lo, hi])),
            _ => 0,
        }
    }

    fn set_len(&mut self, n: usize) {
        if let Some(h) = self.buf.get_mut(..HEADER) {
            h.copy_from_slice(&(n as u16).to_le_bytes());
        }
    }

    fn pairs(&self) -> PackedPairs<'_> {
        PackedPairs {
            rest: self.buf.get(HEADER..).unwrap_or(&[]),
        }
    }

    fn value(&self, at: &PairAt) -> &[u8] {
        self.buf.get(at.value_start..at.end()).unwrap_or_default()
    }

    fn find(&self, field: &[u8]) -> Option<PairAt> {
        let buf = &self.buf[..];
        let mut o = HEADER;
        while o < buf.len() {
            let mut at = o;
            let flen = leb128::read(buf, &mut at);
            let value_at = at + flen;
            let mut value_start = value_at;
            let value_len = leb128::read(buf, &mut value_start);
            if buf.get(at..value_at) == Some(field) {
                return Some(PairAt {
                    start: o,
                    value_at,
                    value_start,
                    value_len,
                });
            }
            o = value_start + value_len;
        }
        None
    }

    /// Sets a field (both lengths at most `hash-max-listpack-value`); true when it is
    /// new.
    fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Some(at) = self.find(field) {
            if at.value_len == value.len() {
                // The common update: same length, rewritten in place.
                self.buf[at.value_start..at.end()].copy_from_slice(value);
            } else {
                let room = splice(
                    &mut self.buf,
                    at.value_at,
                    at.end() - at.value_at,
                    leb128::len(value.len()) + value.len(),
                );
                put_len(room, value.len()).copy_from_slice(value);
            }
            return false;
        }
        let n = self.len();
        let at = self.buf.len();
        // The first pair brings the header.
        let header = if at == 0 { HEADER } else { 0 };
        let size = leb128::len(field.len()) + field.len() + leb128::len(value.len()) + value.len();
        let room = splice(&mut self.buf, at, 0, header + size);
        let room = put_len(&mut room[header..], field.len());
        let (f, room) = room.split_at_mut(field.len());
        f.copy_from_slice(field);
        put_len(room, value.len()).copy_from_slice(value);
        self.set_len(n + 1);
        true
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let Some(at) = self.find(field) else {
            return false;
        };
        let n = self.len() - 1;
        if n == 0 {
            self.buf = Box::default();
        } else {
            splice(&mut self.buf, at.start, at.end() - at.start, 0);
            self.set_len(n);
        }
        true
    }
}

/// Replaces `remove` bytes at `at` with `insert` bytes of room (returned for the caller
/// to fill), keeping the buffer exactly as long as its contents.
fn splice(buf: &mut Box<[u8]>, at: usize, remove: usize, insert: usize) -> &mut [u8] {
    let old = buf.len();
    let tail = at + remove;
    if insert > remove {
        let mut v = std::mem::take(buf).into_vec();
        v.reserve_exact(insert - remove);
        v.resize(old + insert - remove, 0);
        v.copy_within(tail..old, at + insert);
        *buf = v.into_boxed_slice();
    } else if insert < remove {
        buf.copy_within(tail..old, at + insert);
        let mut v = std::mem::take(buf).into_vec();
        v.truncate(old - remove + insert);
        *buf = v.into_boxed_slice();
    }
    &mut buf[at..at + insert]
}

/// The pairs of a packed hash, in order.
#[derive(Clone, Debug)]
struct PackedPairs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for PackedPairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let mut at = 0;
        let flen = leb128::read(self.rest, &mut at);
        let (field, rest) = self.rest.get(at..)?.split_at_checked(flen)?;
        let mut at = 0;
        let vlen = leb128::read(rest, &mut at);
        let (value, rest) = rest.get(at..)?.split_at_checked(vlen)?;
        self.rest = rest;
        Some((field, value))
    }
}

// --- The table ----------------------------------------------------------------------------

/// Smallest array: slots.
const MIN_CAP: usize = 8;
/// Largest distance of a field from its home slot that a distance byte holds (it stores
/// the distance plus one); past it the array grows. With random hashes and a load of at
/// most [`MAX_LOAD`], Robin Hood distances stay far below it.
const MAX_DIST: usize = 254;
/// Slots of the array being drained that each write looks at (finishing the run of
/// occupied slots it is in): a resize moves the fields a few at a time, as Redis's
/// incremental rehashing does, instead of stalling one command for all of them.
const DRAIN_STEP: usize = 16;
/// The most an array is filled, as a fraction: with linear probing the runs of occupied
/// slots (what a lookup of an absent field and an insertion walk) lengthen quickly past
/// it.
const MAX_LOAD: (usize, usize) = (3, 4);

/// Whether `n` entries overfill an array of `cap` slots.
fn overfull(n: usize, cap: usize) -> bool {
    n.saturating_mul(MAX_LOAD.1) > cap.saturating_mul(MAX_LOAD.0)
}

/// The process's field hasher: seeded once, randomly (fields are client-controlled).
fn hasher() -> &'static foldhash::quality::RandomState {
    static HASHER: OnceLock<foldhash::quality::RandomState> = OnceLock::new();
    HASHER.get_or_init(Default::default)
}

fn hash_of(field: &[u8]) -> u64 {
    hasher().hash_one(field)
}

/// A table entry: `[field length, LEB128][field][value]`.
fn entry(field: &[u8], value: &[u8]) -> Box<[u8]> {
    let mut e = Vec::with_capacity(leb128::len(field.len()) + field.len() + value.len());
    leb128::write(field.len(), |b| e.push(b));
    e.extend_from_slice(field);
    e.extend_from_slice(value);
    e.into_boxed_slice()
}

/// The field and the value of an entry.
fn split_entry(e: &[u8]) -> (&[u8], &[u8]) {
    let mut i = 0;
    let n = leb128::read(e, &mut i);
    let rest = e.get(i..).unwrap_or_default();
    rest.split_at_checked(n).unwrap_or((rest, &[]))
}

fn entry_field(e: &[u8]) -> &[u8] {
    split_entry(e).0
}

/// Replaces the value of an entry; the change in its size.
fn set_value(e: &mut Box<[u8]>, value: &[u8]) -> isize {
    let value_at = e.len() - split_entry(e).1.len();
    if e.len() - value_at == value.len() {
        e[value_at..].copy_from_slice(value);
        return 0;
    }
    let mut new = Vec::with_capacity(value_at + value.len());
    new.extend_from_slice(&e[..value_at]);
    new.extend_from_slice(value);
    let delta = new.len() as isize - e.len() as isize;
    *e = new.into_boxed_slice();
    delta
}

/// Where a field is, or where it would go.
enum Probe {
    /// At this slot.
    Found(usize),
    /// Absent: it would go at this slot, this far from its home.
    Vacant(usize, usize),
}

/// Where an HSCAN call over an array stops.
#[derive(Clone, Copy)]
enum Stop {
    /// Once about this many entries were found (or ten times as many slots looked at).
    Count(usize),
    /// At this position in hash space (exclusive; 2^64 is the end), a slot boundary.
    At(u128),
}

/// One open-addressing array: linear probing with Robin Hood ordering (along a run of
/// occupied slots the home slots never decrease), removals by backward shifting. A
/// field's home slot is the top bits of its hash, so the slots are in hash order.
#[derive(Clone)]
struct Slots {
    /// Per slot: 0 when empty, else the entry's distance from its home slot plus one.
    dist: Box<[u8]>,
    /// Per slot: the entry.
    slots: Box<[Option<Box<[u8]>>]>,
    /// Number of entries.
    len: usize,
}

impl Slots {
    fn empty(cap: usize) -> Slots {
        // Both zeroed: allocated as zeroed memory, which the system provides lazily.
        Slots {
            dist: vec![0; cap].into_boxed_slice(),
            slots: vec![None; cap].into_boxed_slice(),
            len: 0,
        }
    }

    fn cap(&self) -> usize {
        self.dist.len()
    }

    /// How far a hash shifts right to give its home slot.
    fn shift(&self) -> u32 {
        64 - self.cap().trailing_zeros()
    }

    /// The home slot of a hash: its top bits.
    fn home(&self, hash: u64) -> usize {
        (hash >> self.shift()) as usize
    }

    fn heap_bytes(&self) -> usize {
        self.cap() * (1 + size_of::<Option<Box<[u8]>>>())
    }

    fn pair_at(&self, slot: usize) -> Option<(&[u8], &[u8])> {
        self.slots.get(slot)?.as_deref().map(split_entry)
    }

    fn probe(&self, field: &[u8], hash: u64) -> Probe {
        let mask = self.cap() - 1;
        let (mut p, mut d) = (self.home(hash), 0usize);
        loop {
            let t = usize::from(self.dist[p]);
            if t == 0 || t - 1 < d {
                return Probe::Vacant(p, d);
            }
            if t - 1 == d
                && self.slots[p]
                    .as_deref()
                    .is_some_and(|e| entry_field(e) == field)
            {
                return Probe::Found(p);
            }
            p = (p + 1) & mask;
            d += 1;
        }
    }

    fn find(&self, field: &[u8], hash: u64) -> Option<usize> {
        match self.probe(field, hash) {
            Probe::Found(p) => Some(p),
            Probe::Vacant(..) => None,
        }
    }

    /// Puts `e` at slot `p`, `d` from its home, shifting the rest of the run one slot on.
    /// When a distance would pass [`MAX_DIST`], the entry left in hand is handed back (the
    /// array is consistent without it) for the caller to place in a larger array.
    fn place(&mut self, e: Box<[u8]>, mut p: usize, d: usize) -> Result<(), Box<[u8]>> {
        if d > MAX_DIST {
            return Err(e);
        }
        let mask = self.cap() - 1;
        let (mut carry, mut cd) = (e, d);
        loop {
            let t = usize::from(self.dist[p]);
            self.dist[p] = (cd + 1) as u8;
            match self.slots[p].replace(carry) {
                None => {
                    self.len += 1;
                    return Ok(());
                }
                Some(moved) => carry = moved,
            }
            // The entry moved on is one slot further from its home.
            cd = t;
            p = (p + 1) & mask;
            if cd > MAX_DIST {
                return Err(carry);
            }
        }
    }

    /// Places an entry whose field is not in the array.
    fn place_fresh(&mut self, e: Box<[u8]>) -> Result<(), Box<[u8]>> {
        let mask = self.cap() - 1;
        let (mut p, mut d) = (self.home(hash_of(entry_field(&e))), 0usize);
        while usize::from(self.dist[p]) > d {
            p = (p + 1) & mask;
            d += 1;
        }
        self.place(e, p, d)
    }

    /// Takes the entry at slot `p` out; the rest of its run moves one slot back (until an
    /// empty slot or an entry at its home).
    fn take(&mut self, p: usize) -> Option<Box<[u8]>> {
        let e = self.slots[p].take()?;
        self.len -= 1;
        let mask = self.cap() - 1;
        let mut hole = p;
        loop {
            let next = (hole + 1) & mask;
            let t = self.dist[next];
            if t <= 1 {
                break;
            }
            self.slots[hole] = self.slots[next].take();
            self.dist[hole] = t - 1;
            hole = next;
        }
        self.dist[hole] = 0;
        Some(e)
    }

    /// The entries of an HSCAN call: those whose home slot is in `[first slot, end)`,
    /// where `first` is rounded down to a slot and `end` is given or decided by a count;
    /// returns `end` in hash space. Slots are visited from `first`'s on; with a count, once
    /// enough entries were found the slots taken are those before the current one, whose
    /// entries displaced past it are still gathered.
    fn scan<'a>(&'a self, first: u64, stop: Stop, mut f: impl FnMut(&'a [u8], &'a [u8])) -> u128 {
        let cap = self.cap();
        let shift = self.shift();
        let first = (first >> shift) as usize;
        // The end of the slots taken (exclusive), once decided.
        let mut end = match stop {
            Stop::At(e) => Some(((e >> shift) as usize).min(cap)),
            Stop::Count(_) => None,
        };
        let (count, looked) = match stop {
            Stop::Count(n) => (n.max(1), n.max(1).saturating_mul(10)),
            Stop::At(_) => (usize::MAX, usize::MAX),
        };
        let (mut found, mut p) = (0usize, first);
        let mut stopped = false;
        while p < cap {
            if end.is_none() && (found >= count || p - first >= looked) {
                end = Some(p);
            }
            let t = usize::from(self.dist[p]);
            if t == 0 {
                if end.is_some_and(|e| p >= e) {
                    stopped = true;
                    break;
                }
                p += 1;
                continue;
            }
            let d = t - 1;
            // Skipped: an entry displaced past the last slot (it sits at the start, its
            // home at the end: the call that reaches the end takes it), and one whose home
            // is before the first slot (an earlier call took it). Both only come before
            // the entries of the slots taken, in the run that holds the first of them.
            let home = p.wrapping_sub(d);
            if d > p || home < first {
                p += 1;
                continue;
            }
            if end.is_some_and(|e| home >= e) {
                stopped = true;
                break;
            }
            if let Some((field, value)) = self.pair_at(p) {
                f(field, value);
            }
            found += 1;
            p += 1;
        }
        let end = end.unwrap_or(cap);
        if !stopped {
            // The run went past the last slot: entries of the slots taken may continue at
            // the start.
            for q in 0..cap {
                let t = usize::from(self.dist[q]);
                if t == 0 || t - 1 <= q {
                    break;
                }
                let home = q + cap - (t - 1);
                if home >= end {
                    break;
                }
                if home >= first
                    && let Some((field, value)) = self.pair_at(q)
                {
                    f(field, value);
                }
            }
        }
        (end as u128) << shift
    }
}

/// A large hash: an array of slots ([`Slots`]), and while it is being resized the former
/// array too, drained into the new one a few slots per write (runs of occupied slots
/// move whole, so what is left of the former array is still a valid array). Lookups look
/// in both; new fields go to the new one.
#[derive(Clone)]
struct Table {
    main: Slots,
    /// The array being drained, and the next slot of it to look at.
    old: Option<(Slots, usize)>,
    /// Bytes of the entries.
    bytes: usize,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("len", &self.len())
            .field("cap", &self.main.cap())
            .field("draining", &self.old.as_ref().map(|(o, _)| o.cap()))
            .finish()
    }
}

impl Table {
    /// An empty table for `n` entries.
    fn with_capacity(n: usize) -> Table {
        Table {
            main: Slots::empty(Table::cap_for(n)),
            old: None,
            bytes: 0,
        }
    }

    /// Slots for `n` entries: a power of two, loaded at most [`MAX_LOAD`].
    fn cap_for(n: usize) -> usize {
        (n.saturating_mul(MAX_LOAD.1) / MAX_LOAD.0 + 1)
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX / 2 + 1)
            .max(MIN_CAP)
    }

    fn len(&self) -> usize {
        self.main.len + self.old.as_ref().map_or(0, |(o, _)| o.len)
    }

    fn heap_bytes(&self) -> usize {
        self.main.heap_bytes() + self.old.as_ref().map_or(0, |(o, _)| o.heap_bytes()) + self.bytes
    }

    /// The arrays: the main one, then the one being drained.
    fn arrays(&self) -> impl Iterator<Item = &Slots> {
        std::iter::once(&self.main).chain(self.old.as_ref().map(|(o, _)| o))
    }

    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        let hash = hash_of(field);
        self.arrays()
            .find_map(|a| a.find(field, hash).and_then(|p| a.pair_at(p)))
            .map(|(_, v)| v)
    }

    /// Sets a field; true when it is new.
    fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        self.drain(DRAIN_STEP);
        let hash = hash_of(field);
        let found = match self.main.probe(field, hash) {
            Probe::Found(p) => Some(&mut self.main.slots[p]),
            Probe::Vacant(..) => self
                .old
                .as_mut()
                .and_then(|(o, _)| o.find(field, hash).map(|p| &mut o.slots[p])),
        };
        if let Some(Some(e)) = found {
            self.bytes = self.bytes.wrapping_add_signed(set_value(e, value));
            return false;
        }
        if overfull(self.len() + 1, self.main.cap()) {
            self.resize(self.main.cap() * 2);
        }
        // Absent from both arrays (a resize only moves entries between them).
        if let Probe::Vacant(p, d) = self.main.probe(field, hash) {
            let e = entry(field, value);
            self.bytes += e.len();
            if let Err(carry) = self.main.place(e, p, d) {
                self.rebuild(self.main.cap() * 2, carry);
            }
        }
        true
    }

    /// Adds an entry whose field is not in the table (filling a new table).
    fn insert_new(&mut self, e: Box<[u8]>) {
        if overfull(self.len() + 1, self.main.cap()) {
            self.resize(self.main.cap() * 2);
        }
        self.bytes += e.len();
        if let Err(carry) = self.main.place_fresh(e) {
            self.rebuild(self.main.cap() * 2, carry);
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        self.drain(DRAIN_STEP);
        let hash = hash_of(field);
        let taken = match self.main.find(field, hash) {
            Some(p) => self.main.take(p),
            None => match &mut self.old {
                Some((o, _)) => o.find(field, hash).and_then(|p| o.take(p)),
                None => None,
            },
        };
        let Some(e) = taken else {
            return false;
        };
        self.bytes -= e.len();
        if self.old.as_ref().is_some_and(|(o, _)| o.len == 0) {
            self.old = None;
        }
        // Redis shrinks a hash table filled under 10%; here under 1/8, to half full.
        if self.old.is_none() && self.main.cap() > MIN_CAP && self.len() * 8 < self.main.cap() {
            self.resize(Table::cap_for(self.len() * 2));
        }
        true
    }

    /// Starts moving the entries to a new array of `cap` slots (finishing a resize still
    /// under way first).
    fn resize(&mut self, cap: usize) {
        self.drain(usize::MAX);
        let old = std::mem::replace(&mut self.main, Slots::empty(cap));
        if old.len == 0 {
            return;
        }
        // Draining starts after an empty slot, where a run starts (the array is never
        // full), and goes round from there.
        let empty = old.dist.iter().position(|&d| d == 0).unwrap_or(0);
        let start = (empty + 1) & (old.cap() - 1);
        self.old = Some((old, start));
    }

    /// Moves the runs of the array being drained that start in its next `step` slots into
    /// the main one; drops it once empty.
    fn drain(&mut self, step: usize) {
        let Some((old, at)) = &mut self.old else {
            return;
        };
        let mask = old.cap() - 1;
        let mut looked = 0;
        let mut failed = None;
        while old.len > 0 && looked < step {
            // A run is moved whole, from its first slot (the one before it is empty).
            while let Some(e) = old.slots[*at].take() {
                old.dist[*at] = 0;
                old.len -= 1;
                if let Err(carry) = self.main.place_fresh(e) {
                    failed = Some(carry);
                    break;
                }
                *at = (*at + 1) & mask;
                looked += 1;
            }
            if failed.is_some() {
                break;
            }
            *at = (*at + 1) & mask;
            looked += 1;
        }
        let empty = old.len == 0;
        if let Some(carry) = failed {
            self.rebuild(self.main.cap() * 2, carry);
        } else if empty {
            self.old = None;
        }
    }

    /// Moves every entry (and `pending`) into one new array of `cap` slots at once,
    /// doubling it again while a distance does not fit a byte: the improbable way out of
    /// [`MAX_DIST`].
    fn rebuild(&mut self, mut cap: usize, pending: Box<[u8]>) {
        let mut entries: Vec<Box<[u8]>> = vec![pending];
        let old = self.old.take().map(|(o, _)| o);
        for array in std::iter::once(std::mem::replace(&mut self.main, Slots::empty(0))).chain(old)
        {
            entries.extend(array.slots.into_vec().into_iter().flatten());
        }
        'sizes: loop {
            let mut main = Slots::empty(cap);
            for e in &entries {
                if main.place_fresh(e.clone()).is_err() {
                    cap *= 2;
                    continue 'sizes;
                }
            }
            self.main = main;
            return;
        }
    }

    /// A random entry, each equally likely: a random slot of either array until an
    /// occupied one (the arrays are at least 1/8 full together, unless the smallest).
    fn random_slot(&self, rng: &mut impl FnMut() -> u64) -> Option<(&Slots, usize)> {
        if self.len() == 0 {
            return None;
        }
        let total: usize = self.arrays().map(Slots::cap).sum();
        loop {
            let mut p = below(rng(), total);
            for a in self.arrays() {
                if p < a.cap() {
                    if a.dist[p] != 0 {
                        return Some((a, p));
                    }
                    break;
                }
                p -= a.cap();
            }
        }
    }

    fn random_pair(&self, rng: &mut impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        self.random_slot(rng).and_then(|(a, p)| a.pair_at(p))
    }

    /// `count` (< len) distinct random entries: from a shuffled list of the occupied slots
    /// when they are most of the table (Redis's "CASE 3"), else by drawing slots and
    /// skipping repeats ("CASE 4").
    fn distinct_sample<'a>(
        &'a self,
        count: usize,
        rng: &mut impl FnMut() -> u64,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) {
        if count.saturating_mul(3) > self.len() {
            let mut occupied: Vec<(&Slots, usize)> = self
                .arrays()
                .flat_map(|a| {
                    (0..a.cap())
                        .filter(|&p| a.dist[p] != 0)
                        .map(move |p| (a, p))
                })
                .collect();
            for i in 0..count.min(occupied.len()) {
                let j = i + below(rng(), occupied.len() - i);
                occupied.swap(i, j);
                let (a, p) = occupied[i];
                if let Some((field, value)) = a.pair_at(p) {
                    f(field, value);
                }
            }
        } else {
            let mut seen = hashbrown::HashSet::with_capacity_and_hasher(
                count,
                foldhash::fast::FixedState::default(),
            );
            while seen.len() < count {
                let Some((a, p)) = self.random_slot(rng) else {
                    return;
                };
                if seen.insert((std::ptr::from_ref(a), p))
                    && let Some((field, value)) = a.pair_at(p)
                {
                    f(field, value);
                }
            }
        }
    }

    /// One HSCAN call (see [`Hash::scan`]). While a resize is under way, the array with
    /// more slots decides where the call ends (by the count), rounded up to a slot boundary
    /// of the other; both give their entries of that range of hash space.
    fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        let end = match &self.old {
            None => self.main.scan(cursor, Stop::Count(count), f),
            Some((old, _)) => {
                let (fine, coarse) = if self.main.cap() >= old.cap() {
                    (&self.main, old)
                } else {
                    (old, &self.main)
                };
                let fine_end = fine.scan(cursor, Stop::Count(count), &mut f);
                let unit = 1u128 << coarse.shift();
                let end = fine_end.div_ceil(unit) * unit;
                if end > fine_end {
                    fine.scan(fine_end as u64, Stop::At(end), &mut f);
                }
                coarse.scan(cursor, Stop::At(end), &mut f);
                end
            }
        };
        u64::try_from(end).unwrap_or(0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// A seeded xorshift64*, for tests that draw.
    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed | 1;
        move || {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            s.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    fn field(i: usize) -> Vec<u8> {
        format!("f:{i}").into_bytes()
    }

    fn pairs(h: &Hash) -> Vec<(Vec<u8>, Vec<u8>)> {
        h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    /// Every structural invariant of an array: its count, distances, Robin Hood order.
    fn check_slots(a: &Slots) -> usize {
        let cap = a.cap();
        assert!(cap.is_power_of_two() && cap >= MIN_CAP);
        let (mut len, mut bytes) = (0, 0);
        for p in 0..cap {
            let d = a.dist[p];
            assert_eq!(d == 0, a.slots[p].is_none(), "slot {p}");
            let Some(e) = a.slots[p].as_deref() else {
                continue;
            };
            len += 1;
            bytes += e.len();
            let home = a.home(hash_of(entry_field(e)));
            assert_eq!(
                (home + usize::from(d) - 1) & (cap - 1),
                p,
                "distance of slot {p}"
            );
            // Every slot between the home and here is occupied, and the previous entry's
            // home is not after this one's (Robin Hood order).
            if d > 1 {
                let prev = (p + cap - 1) & (cap - 1);
                assert!(a.dist[prev] >= d - 1, "slot {prev} before {p}");
            }
        }
        assert_eq!(len, a.len);
        bytes
    }

    /// A table's invariants: each array's, the bytes, the load, a drain that stops after
    /// an empty slot.
    fn check_table(t: &Table) {
        let mut bytes = check_slots(&t.main);
        if let Some((old, at)) = &t.old {
            bytes += check_slots(old);
            assert!(old.len > 0, "an empty array left to drain");
            let before = (*at + old.cap() - 1) & (old.cap() - 1);
            assert_eq!(
                old.dist[before], 0,
                "draining resumes at the start of a run"
            );
        }
        assert_eq!(bytes, t.bytes);
        assert!(!overfull(t.len(), t.main.cap()));
    }

    fn check(h: &Hash) {
        if let Repr::Table(t) = &h.repr {
            check_table(t);
        }
    }

    #[test]
    fn packed_pairs_hold_lengths_past_one_byte() {
        // LEB128 lengths: a field or value of 128 bytes and more takes more length bytes,
        // and a value whose length changes class is spliced.
        let mut p = Packed::default();
        let long = |n: usize| vec![b'x'; n];
        assert!(p.insert(b"short", b"1"));
        assert!(p.insert(&long(200), &long(300)));
        assert!(p.insert(b"big", &long(70_000)));
        assert!(p.insert(b"after", b"2"));
        assert!(!p.insert(b"short", &long(128)));
        assert!(!p.insert(&long(200), b"3"));
        assert!(!p.insert(b"big", &long(70_001)));
        let got: Vec<(usize, usize)> = p.pairs().map(|(f, v)| (f.len(), v.len())).collect();
        assert_eq!(got, [(5, 128), (200, 1), (3, 70_001), (5, 1)]);
        assert_eq!(p.len(), 4);
        let at = p.find(b"after").expect("found");
        assert_eq!(p.value(&at), b"2");
        assert!(p.remove(b"big"));
        assert!(p.remove(&long(200)));
        let got: Vec<(usize, usize)> = p.pairs().map(|(f, v)| (f.len(), v.len())).collect();
        assert_eq!(got, [(5, 128), (5, 1)]);
        assert_eq!(p.buf.len(), HEADER + 1 + 5 + 2 + 128 + 1 + 5 + 1 + 1);
    }

    #[test]
    fn packed_keeps_insertion_order_and_updates_in_place() {
        let mut h = Hash::default();
        assert!(h.is_empty());
        assert_eq!(h.heap_bytes(), size_of::<Hash>());
        assert!(h.insert(b"a", b"1"));
        assert!(h.insert(b"b", b"22"));
        assert!(h.insert(b"c", b""));
        assert!(!h.insert(b"a", b"x"));
        assert!(!h.insert(b"b", b"a longer value"));
        assert!(!h.insert(b"b", b""));
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(
            pairs(&h),
            [
                (b"a".to_vec(), b"x".to_vec()),
                (b"b".to_vec(), b"".to_vec()),
                (b"c".to_vec(), b"".to_vec())
            ]
        );
        assert_eq!(h.get(b"b"), Some(&b""[..]));
        assert_eq!(h.get(b"d"), None);
        assert!(h.contains(b"c"));
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        assert_eq!(h.len(), 2);
        assert_eq!(pairs(&h)[1].0, b"c");
        // Exact size: header, then 1+1+1+1 and 1+1+1+0.
        assert_eq!(h.heap_bytes(), size_of::<Hash>() + 2 + 4 + 3);
        assert!(h.remove(b"a") && h.remove(b"c"));
        assert!(h.is_empty());
        assert_eq!(h.heap_bytes(), size_of::<Hash>());
        // The empty string is a field like any other.
        assert!(h.insert(b"", b""));
        assert_eq!(h.get(b""), Some(&b""[..]));
    }

    #[test]
    fn converts_like_redis() {
        // More than 512 fields.
        let mut h = Hash::default();
        for i in 0..LISTPACK_ENTRIES {
            h.insert(&field(i), b"v");
        }
        assert_eq!(h.encoding(), "listpack");
        h.insert(&field(0), b"w");
        assert_eq!(h.encoding(), "listpack");
        h.insert(&field(LISTPACK_ENTRIES), b"v");
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), LISTPACK_ENTRIES + 1);
        assert_eq!(h.get(&field(0)), Some(&b"w"[..]));
        check(&h);
        // Never back, however small it gets.
        for i in 1..=LISTPACK_ENTRIES {
            assert!(h.remove(&field(i)));
            check(&h);
        }
        assert_eq!((h.len(), h.encoding()), (1, "hashtable"));
        // A field or value over 64 bytes, even one that is not kept.
        let long = [b'x'; LISTPACK_VALUE + 1];
        for (f, v) in [
            (&long[..64], &long[..64]),
            (&long[..], &b"v"[..]),
            (b"f", &long[..]),
        ] {
            let mut h = Hash::default();
            h.insert(b"a", b"b");
            h.insert(f, v);
            let big = f.len() > LISTPACK_VALUE || v.len() > LISTPACK_VALUE;
            assert_eq!(h.encoding(), if big { "hashtable" } else { "listpack" });
            assert_eq!(h.get(f), Some(v));
            assert_eq!(h.get(b"a"), Some(&b"b"[..]));
        }
    }

    #[test]
    fn table_grows_and_shrinks_and_keeps_its_invariants() {
        let mut h = Hash::default();
        let mut model = HashMap::new();
        let mut r = rng(7);
        for step in 0..60_000usize {
            let i = (r() % 20_000) as usize;
            let f = field(i);
            if step < 30_000 || !r().is_multiple_of(3) {
                let v = format!("value {step}").into_bytes();
                assert_eq!(h.insert(&f, &v), model.insert(f, v).is_none());
            } else {
                assert_eq!(h.remove(&f), model.remove(&f).is_some());
            }
            if step % 5_000 == 0 {
                check(&h);
            }
        }
        check(&h);
        assert_eq!(h.len(), model.len());
        for (f, v) in &model {
            assert_eq!(h.get(f), Some(&v[..]));
        }
        // Down to a few fields: the table shrinks.
        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
        for f in &keys[3..] {
            assert!(h.remove(f));
        }
        check(&h);
        let Repr::Table(t) = &h.repr else {
            panic!("a table")
        };
        assert!(t.main.cap() <= 32, "{t:?}");
    }

    /// A resize moves the fields a few at a time: each write looks at a few slots of the
    /// former array; every field stays readable, iterable and scannable meanwhile.
    #[test]
    fn resizes_move_fields_a_few_at_a_time() {
        let mut h = Hash::default();
        let n = 2000;
        for i in 0..n {
            h.insert(&field(i), b"v");
        }
        let draining = |h: &Hash| match &h.repr {
            Repr::Table(t) => t.old.as_ref().map(|(o, _)| o.len),
            Repr::Packed(_) => None,
        };
        // Let any earlier resize finish, then pass the load limit.
        let mut i = n;
        while draining(&h).is_some() {
            h.insert(&field(i), b"v");
            i += 1;
        }
        let grows_at = |h: &Hash| match &h.repr {
            Repr::Table(t) => t.main.cap() * MAX_LOAD.0 / MAX_LOAD.1,
            Repr::Packed(_) => 0,
        };
        while h.len() < grows_at(&h) {
            h.insert(&field(i), b"v");
            i += 1;
        }
        h.insert(&field(i), b"v");
        i += 1;
        let mut left = draining(&h).expect("a resize under way");
        let mut writes = 0;
        while let Some(now) = draining(&h) {
            check(&h);
            // The slots looked at, and the rest of the run the last of them is in.
            assert!(
                left - now <= DRAIN_STEP + 400,
                "{} moved by one write",
                left - now
            );
            left = now;
            // Mid-way: every field is there, once, to reads, iteration and HSCAN.
            assert_eq!(h.iter().count(), i);
            let (seen, _) = scan_all(&mut h, 5, |_, _| {});
            assert_eq!(seen.iter().collect::<HashSet<_>>().len(), i);
            assert_eq!(seen.len(), i, "a field returned twice");
            for j in (0..i).step_by(97) {
                assert!(h.contains(&field(j)));
            }
            h.insert(&field(0), b"w");
            writes += 1;
        }
        assert!(writes > 3, "{writes} writes");
        check(&h);
        // Shrinking too.
        for j in 0..i - 10 {
            h.remove(&field(j));
        }
        for j in i - 10..i {
            assert!(h.contains(&field(j)));
        }
        while draining(&h).is_some() {
            h.remove(b"absent");
        }
        check(&h);
    }

    #[test]
    fn long_fields_and_values_round_trip() {
        let mut h = Hash::default();
        let big_field = vec![b'f'; 300];
        let big_value = vec![b'v'; 70_000];
        assert!(h.insert(&big_field, &big_value));
        assert!(h.insert(b"", b""));
        assert_eq!(h.get(&big_field), Some(&big_value[..]));
        assert!(!h.insert(&big_field, b"short"));
        assert_eq!(h.get(&big_field), Some(&b"short"[..]));
        assert_eq!(h.get(b""), Some(&b""[..]));
        check(&h);
    }

    #[test]
    fn equality_ignores_order_and_encoding() {
        let mut a = Hash::default();
        let mut b = Hash::default();
        a.insert(b"x", b"1");
        a.insert(b"y", b"2");
        b.insert(b"y", b"2");
        b.insert(b"x", b"1");
        assert_eq!(a, b);
        b.insert(&[b'z'; 65], b"3");
        b.remove(&[b'z'; 65]);
        assert_eq!(b.encoding(), "hashtable");
        assert_eq!(a, b);
        b.insert(b"x", b"9");
        assert_ne!(a, b);
        let c = b.clone();
        assert_eq!(c, b);
        assert_eq!(c.encoding(), "hashtable");
        assert!(format!("{c:?}").contains("hashtable"));
    }

    /// Scans a whole hash, changing it between calls with `between`; returns every field
    /// returned and the number of calls.
    fn scan_all(
        h: &mut Hash,
        count: usize,
        mut between: impl FnMut(&mut Hash, usize),
    ) -> (Vec<Vec<u8>>, usize) {
        let (mut cursor, mut calls, mut seen) = (0u64, 0usize, Vec::new());
        loop {
            cursor = h.scan(cursor, count, |f, _| seen.push(f.to_vec()));
            calls += 1;
            if cursor == 0 {
                return (seen, calls);
            }
            between(h, calls);
            assert!(calls < 1_000_000, "the scan does not end");
        }
    }

    #[test]
    fn scan_of_a_packed_hash_is_one_call() {
        let mut h = Hash::default();
        for i in 0..100 {
            h.insert(&field(i), b"v");
        }
        let mut n = 0;
        assert_eq!(h.scan(12345, 1, |_, _| n += 1), 0);
        assert_eq!(n, 100);
    }

    #[test]
    fn scan_of_a_still_table_returns_each_field_once() {
        for n in [1usize, 7, 100, 513, 896, 5_000, 7_168] {
            let mut h = Hash::default();
            h.insert(&[b'x'; 65], b"v");
            h.remove(&[b'x'; 65]);
            for i in 0..n {
                h.insert(&field(i), b"v");
            }
            for count in [1, 10, 1000] {
                let (seen, calls) = scan_all(&mut h, count, |_, _| {});
                let distinct: HashSet<_> = seen.iter().collect();
                assert_eq!((seen.len(), distinct.len()), (n, n), "n {n} count {count}");
                if count == 1 && n > 100 {
                    assert!(calls > n / 4, "{calls} calls for {n} fields");
                }
            }
        }
    }

    /// The guarantee: a field present for the whole iteration is returned, whatever is
    /// added and removed meanwhile (growing and shrinking the table).
    #[test]
    fn scan_returns_every_field_present_throughout() {
        for seed in 1..=12u64 {
            let mut r = rng(seed);
            let mut h = Hash::default();
            let stable: Vec<Vec<u8>> = (0..300)
                .map(|i| format!("stable:{i}").into_bytes())
                .collect();
            for f in &stable {
                h.insert(f, b"v");
            }
            let churn = (r() % 3000) as usize + 600;
            for i in 0..churn {
                h.insert(&field(i), b"v");
            }
            let grow = seed % 2 == 0;
            let mut added = 0;
            let (seen, _) = scan_all(&mut h, 1 + (seed as usize % 20), |h, call| {
                // Many changes per call: the table doubles (up to 16 times its size: a
                // hash that keeps growing faster than a scan advances is never done) or
                // halves several times.
                for _ in 0..50 {
                    let i = (r() % 20_000) as usize;
                    if grow && added < 10_000 {
                        h.insert(&field(i + call * 20_000), b"v");
                        added += 1;
                    } else if !grow {
                        h.remove(&field(i % churn));
                    }
                }
                if !grow && call % 4 == 0 {
                    for i in 0..churn {
                        h.remove(&field(i));
                    }
                }
            });
            let seen: HashSet<Vec<u8>> = seen.into_iter().collect();
            for f in &stable {
                assert!(
                    seen.contains(f),
                    "seed {seed}: {} not returned",
                    String::from_utf8_lossy(f)
                );
            }
            check(&h);
        }
    }

    #[test]
    fn random_pairs_are_fields_of_the_hash() {
        for n in [1usize, 3, 50, 600, 3000] {
            let mut h = Hash::default();
            for i in 0..n {
                h.insert(&field(i), format!("{i}").as_bytes());
            }
            let mut r = rng(n as u64);
            let mut seen = HashSet::new();
            for _ in 0..20 * n {
                let (f, v) = h.random_pair(&mut r).unwrap();
                assert_eq!(h.get(f), Some(v));
                seen.insert(f.to_vec());
            }
            assert!(
                seen.len() > n * 9 / 10,
                "{} of {n} fields drawn",
                seen.len()
            );
            let sampler = h.sampler();
            for _ in 0..100 {
                let (f, v) = sampler.pick(&mut r).unwrap();
                assert_eq!(h.get(f), Some(v));
            }
            for count in [0, 1, n / 3, n / 2, n - 1, n, n + 5] {
                let mut got = Vec::new();
                h.distinct_sample(count, &mut r, |f, v| {
                    assert_eq!(h.get(f), Some(v));
                    got.push(f.to_vec());
                });
                let distinct: HashSet<_> = got.iter().collect();
                assert_eq!(got.len(), count.min(n), "n {n} count {count}");
                assert_eq!(distinct.len(), got.len());
            }
        }
        assert_eq!(Hash::default().random_pair(&mut rng(1)), None);
        assert_eq!(Hash::default().sampler().pick(&mut rng(1)), None);
    }

    /// Each field is about equally likely, in both encodings.
    #[test]
    fn random_picks_are_fair() {
        for n in [10usize, 1000] {
            let mut h = Hash::default();
            for i in 0..n {
                h.insert(&field(i), b"v");
            }
            let mut r = rng(99);
            let mut hits: HashMap<Vec<u8>, usize> = HashMap::new();
            let draws = n * 200;
            for _ in 0..draws {
                let (f, _) = h.random_pair(&mut r).unwrap();
                *hits.entry(f.to_vec()).or_default() += 1;
            }
            let (lo, hi) = (hits.values().min().unwrap(), hits.values().max().unwrap());
            assert!(
                *lo > 120 && *hi < 290,
                "n {n}: between {lo} and {hi} of 200 expected"
            );
        }
    }

    #[test]
    fn entries_encode_their_field_length() {
        for len in [0usize, 1, 127, 128, 300, 16_384, 70_000] {
            let f = vec![b'a'; len];
            let e = entry(&f, b"value");
            assert_eq!(e.len(), leb128::len(len) + len + 5);
            assert_eq!(split_entry(&e), (&f[..], &b"value"[..]));
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Insert(u8, usize),
            Remove(u8),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => (any::<u8>(), 0usize..80).prop_map(|(f, n)| Op::Insert(f, n)),
                1 => any::<u8>().prop_map(Op::Remove),
            ]
        }

        proptest! {
            /// Any sequence of inserts and removes agrees with a map, in either encoding.
            #[test]
            fn behaves_like_a_map(ops in prop::collection::vec(op(), 1..400), wide in any::<bool>()) {
                let mut h = Hash::default();
                let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
                let name = |f: u8| -> Vec<u8> {
                    if wide { format!("field-{f}").into_bytes() } else { vec![f % 16] }
                };
                for op in ops {
                    match op {
                        Op::Insert(f, n) => {
                            let v = vec![b'v'; n];
                            prop_assert_eq!(h.insert(&name(f), &v), model.insert(name(f), v).is_none());
                        }
                        Op::Remove(f) => {
                            prop_assert_eq!(h.remove(&name(f)), model.remove(&name(f)).is_some());
                        }
                    }
                    prop_assert_eq!(h.len(), model.len());
                }
                check(&h);
                for (f, v) in &model {
                    prop_assert_eq!(h.get(f), Some(&v[..]));
                }
                let mut all = pairs(&h);
                all.sort();
                let mut want: Vec<_> = model.into_iter().collect();
                want.sort();
                prop_assert_eq!(all, want);
            }
        }
    }
}
