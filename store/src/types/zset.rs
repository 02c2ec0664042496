//! Sorted sets: members ordered by score, then by member (bytes compared as `memcmp`
//! compares them, a prefix first), exactly as redis-server 7.0 orders them.
//!
//! Two representations, switched the way Redis switches its encodings:
//!
//! - **small** (OBJECT ENCODING `listpack`), for at most [`LISTPACK_ENTRIES`] members of at
//!   most [`LISTPACK_VALUE`] bytes: one exact-size buffer, a count byte and then the
//!   entries in order, each `[len][member][score: 8 bytes][len]` (the length at both ends
//!   walks it in both directions, as a listpack's back-lengths do). Lookups are linear
//!   scans within those limits, as Redis's are. Like a listpack, which stores an integral
//!   score as an integer, it keeps no negative zero: `-0` is stored as `0`.
//! - **large** (reported `skiplist`, Redis's name for it): an order-statistic B+tree —
//!   leaves of up to 64 scores and element ids linked in order, inner nodes of up to 32
//!   children with each one's element count and lowest element — for rank and range in
//!   O(log n + m) with a few cache lines per level (a skiplist misses the cache at every
//!   step); the elements in one arena, linked by `u32` indexes; and a member → element
//!   index, a chained hash table whose chains run through the arena (a `u32` bucket and a
//!   `u32` link per member). Its buckets are what [`SortedSet::scan_step`] walks with
//!   Redis's reverse-binary cursor.
//!
//! A small set becomes large when a member would be one too many or too long, and never
//! goes back, as in Redis; [`SortedSet::from_entries`] (the destination of a STORE
//! command) chooses the form its size calls for.
//!
//! Reading goes through positions ([`Pos`]): the first or last element, an element by rank,
//! the first or last element in a score or lex range, and the next or previous of a
//! position. A position is valid until the set changes.

use std::cmp::Ordering;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use super::thresholds;
use foldhash::fast::RandomState;

/// redis-server 7.0's default `zset-max-listpack-entries` (in force:
/// [`thresholds::ZSET_LISTPACK_ENTRIES`]): more members make it large (`skiplist`).
pub const LISTPACK_ENTRIES: usize = 128;
/// redis-server 7.0's default `zset-max-listpack-value` (in force:
/// [`thresholds::ZSET_LISTPACK_VALUE`]): a longer member makes it large.
pub const LISTPACK_VALUE: usize = 64;

/// No element or node: the end of a list, of a hash chain.
const NIL: u32 = u32::MAX;
/// Bytes a small entry costs beyond its member: the length before and after it, the score.
const ENTRY_OVERHEAD: usize = 10;
/// Fewest hash buckets a large set keeps (it has more than 128 members anyway).
const MIN_BUCKETS: usize = 16;
/// A large set's bucket array shrinks once fewer than one bucket in this many is used
/// (Redis's `HASHTABLE_MIN_FILL` of 10%).
const MIN_FILL: usize = 10;
/// The arenas are rebuilt once fewer than one element slot in this many is in use (so a
/// set that shrank gives its memory back).
const ARENA_MIN_FILL: usize = 4;
/// Arenas smaller than this are never compacted.
const ARENA_COMPACT_FLOOR: usize = 1024;
/// An arena grows by one part in this many of its size (amortized O(1) still).
const ARENA_GROWTH: usize = 4;
/// An arena grows by at least this many slots.
const ARENA_GROWTH_MIN: usize = 16;
/// Bytes a sorted set costs before its members (its box and bookkeeping).
const BASE: usize = 64;

/// The per-process hasher of large sets' members: random, since members are chosen by
/// clients, and fixed for the process, so that no set carries hasher state of its own.
fn hasher() -> &'static RandomState {
    static STATE: OnceLock<RandomState> = OnceLock::new();
    STATE.get_or_init(RandomState::default)
}

fn hash(member: &[u8]) -> u64 {
    hasher().hash_one(member)
}

/// Whether `(s1, m1)` sorts before `(s2, m2)`: by score, then by member. Scores compare as
/// numbers (`-0 == 0`); they are never NaN.
fn before(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> bool {
    s1 < s2 || (s1 == s2 && m1 < m2)
}

/// The order of two elements.
fn order(a: (&[u8], f64), b: (&[u8], f64)) -> Ordering {
    if before(a.1, a.0, b.1, b.0) {
        Ordering::Less
    } else if before(b.1, b.0, a.1, a.0) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// A score range: `min`/`max`, each inclusive or exclusive (Redis's `zrangespec`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    /// The lower bound.
    pub min: f64,
    /// The upper bound.
    pub max: f64,
    /// The lower bound is exclusive (`(min`).
    pub min_ex: bool,
    /// The upper bound is exclusive (`(max`).
    pub max_ex: bool,
}

impl ScoreRange {
    /// Whether `v` is at or above the lower bound.
    pub fn gte_min(&self, v: f64) -> bool {
        if self.min_ex {
            v > self.min
        } else {
            v >= self.min
        }
    }

    /// Whether `v` is at or below the upper bound.
    pub fn lte_max(&self, v: f64) -> bool {
        if self.max_ex {
            v < self.max
        } else {
            v <= self.max
        }
    }

    /// Whether no score can be in the range.
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_ex || self.max_ex))
    }
}

/// One end of a lex range: `-`, `+`, or a member (Redis's `shared.minstring`,
/// `shared.maxstring` and an sds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// A member.
    Value(Vec<u8>),
}

impl LexBound {
    /// Redis's `sdscmplex`: the order of two bounds, where `-` and `+` are below and above
    /// everything (and equal to themselves).
    fn cmp_to(&self, other: &LexBound) -> Ordering {
        match (self, other) {
            (LexBound::Min, LexBound::Min) | (LexBound::Max, LexBound::Max) => Ordering::Equal,
            (LexBound::Min, _) | (_, LexBound::Max) => Ordering::Less,
            (LexBound::Max, _) | (_, LexBound::Min) => Ordering::Greater,
            (LexBound::Value(a), LexBound::Value(b)) => a.as_slice().cmp(b.as_slice()),
        }
    }

    /// The order of a member against this bound.
    fn member_cmp(&self, member: &[u8]) -> Ordering {
        match self {
            LexBound::Min => Ordering::Greater,
            LexBound::Max => Ordering::Less,
            LexBound::Value(b) => member.cmp(b.as_slice()),
        }
    }
}

/// A lex range (Redis's `zlexrangespec`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    /// The lower bound.
    pub min: LexBound,
    /// The upper bound.
    pub max: LexBound,
    /// The lower bound is exclusive.
    pub min_ex: bool,
    /// The upper bound is exclusive.
    pub max_ex: bool,
}

impl LexRange {
    /// Whether `m` is at or above the lower bound.
    pub fn gte_min(&self, m: &[u8]) -> bool {
        let c = self.min.member_cmp(m);
        if self.min_ex { c.is_gt() } else { c.is_ge() }
    }

    /// Whether `m` is at or below the upper bound.
    pub fn lte_max(&self, m: &[u8]) -> bool {
        let c = self.max.member_cmp(m);
        if self.max_ex { c.is_lt() } else { c.is_le() }
    }

    /// Whether no member can be in the range.
    pub fn is_empty(&self) -> bool {
        let c = self.min.cmp_to(&self.max);
        c.is_gt() || (c.is_eq() && (self.min_ex || self.max_ex))
    }
}

/// ZADD's conditions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddFlags {
    /// Only add new members.
    pub nx: bool,
    /// Only update existing members.
    pub xx: bool,
    /// Only update to a greater score.
    pub gt: bool,
    /// Only update to a lower score.
    pub lt: bool,
    /// The score is an increment.
    pub incr: bool,
}

/// What [`SortedSet::add`] did (Redis's `zsetAdd` out-flags and new score).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Added {
    /// A new member, with this score.
    Added(f64),
    /// An existing member given this new score.
    Updated(f64),
    /// An existing member whose score this already was.
    Unchanged(f64),
    /// Nothing done: a condition refused it.
    Skipped,
}

/// The score an increment would give is not a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotANumber;

/// Where an element is: its rank (0 for the lowest) and its place in the representation.
/// Valid until the set changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    rank: usize,
    /// The small form's byte offset, or the large form's leaf.
    at: u32,
    /// The large form's slot in its leaf.
    slot: u32,
}

impl Pos {
    /// The element's rank, 0 for the lowest.
    pub fn rank(&self) -> usize {
        self.rank
    }
}

/// A sorted set.
#[derive(Clone, Debug, Default)]
pub struct SortedSet {
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    /// A count byte and the entries (see the module's documentation); empty when the
    /// set is.
    Small(Box<[u8]>),
    /// The tree and the member index.
    Large(Box<Large>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Small(Box::default())
    }
}

impl PartialEq for SortedSet {
    /// Equal when they have the same encoding and the same elements, scores compared bit
    /// for bit.
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() || self.encoding() != other.encoding() {
            return false;
        }
        let (mut a, mut b) = (self.first(), other.first());
        while let (Some(pa), Some(pb)) = (a, b) {
            let (ea, eb) = (self.entry(pa), other.entry(pb));
            if ea.0 != eb.0 || ea.1.to_bits() != eb.1.to_bits() {
                return false;
            }
            a = self.next(pa);
            b = other.next(pb);
        }
        a.is_none() && b.is_none()
    }
}

/// A small set's score as a listpack keeps it: an integral score is stored as an integer,
/// so a negative zero comes back as zero.
fn listpack_score(score: f64) -> f64 {
    if score == 0.0 { 0.0 } else { score }
}

// --- the small form: a count byte, then `[len][member][score][len]` entries ---

fn lp_count(buf: &[u8]) -> usize {
    buf.first().map_or(0, |&n| usize::from(n))
}

fn lp_first(buf: &[u8]) -> Option<usize> {
    (buf.len() > 1).then_some(1)
}

fn lp_last(buf: &[u8]) -> Option<usize> {
    let last = *buf.last()? as usize;
    (buf.len() > 1).then(|| buf.len() - last - ENTRY_OVERHEAD)
}

fn lp_next(buf: &[u8], at: usize) -> Option<usize> {
    let next = at + usize::from(buf[at]) + ENTRY_OVERHEAD;
    (next < buf.len()).then_some(next)
}

fn lp_prev(buf: &[u8], at: usize) -> Option<usize> {
    (at > 1).then(|| at - usize::from(buf[at - 1]) - ENTRY_OVERHEAD)
}

fn lp_entry(buf: &[u8], at: usize) -> (&[u8], f64) {
    let len = usize::from(buf[at]);
    let member = &buf[at + 1..at + 1 + len];
    let mut score = [0u8; 8];
    score.copy_from_slice(&buf[at + 1 + len..at + 9 + len]);
    (member, f64::from_le_bytes(score))
}

/// The offset of `member`'s entry and its score.
fn lp_find(buf: &[u8], member: &[u8]) -> Option<(usize, f64)> {
    let mut at = lp_first(buf);
    while let Some(o) = at {
        let (m, s) = lp_entry(buf, o);
        if m == member {
            return Some((o, s));
        }
        at = lp_next(buf, o);
    }
    None
}

/// Appends one entry to `out`.
fn lp_push(out: &mut Vec<u8>, member: &[u8], score: f64) {
    let len = member.len() as u8;
    out.push(len);
    out.extend_from_slice(member);
    out.extend_from_slice(&listpack_score(score).to_le_bytes());
    out.push(len);
}

/// `buf` with a new entry inserted in order.
fn lp_insert(buf: &[u8], member: &[u8], score: f64) -> Box<[u8]> {
    let score = listpack_score(score);
    let mut at = lp_first(buf);
    // Redis's zzlInsert: before the first element with a greater score, or an equal
    // score and a greater member.
    while let Some(o) = at {
        let (m, s) = lp_entry(buf, o);
        if before(score, member, s, m) {
            break;
        }
        at = lp_next(buf, o);
    }
    let split = at.unwrap_or(buf.len()).max(1);
    let mut out = Vec::with_capacity(buf.len().max(1) + member.len() + ENTRY_OVERHEAD);
    out.push(lp_count(buf) as u8 + 1);
    out.extend_from_slice(buf.get(1..split).unwrap_or(&[]));
    lp_push(&mut out, member, score);
    out.extend_from_slice(buf.get(split..).unwrap_or(&[]));
    out.into_boxed_slice()
}

/// `buf` without the `n` entries from offset `from` (to offset `to`).
fn lp_remove(buf: &[u8], from: usize, to: usize, n: usize) -> Box<[u8]> {
    let count = lp_count(buf) - n;
    if count == 0 {
        return Box::default();
    }
    let mut out = Vec::with_capacity(buf.len() - (to - from));
    out.push(count as u8);
    out.extend_from_slice(&buf[1..from]);
    out.extend_from_slice(&buf[to..]);
    out.into_boxed_slice()
}

// --- the large form: an order-statistic B+tree, and a member index ---

/// Entries a leaf holds at most.
const LEAF: usize = 64;
/// Children an inner node has at most.
const FAN: usize = 32;
/// A leaf with fewer entries than this (but the root) is merged with or refilled from a
/// neighbour: every leaf stays at least a quarter full, which keeps the tree O(log n)
/// deep and its memory proportional to its elements.
const LEAF_MIN: usize = LEAF / 4;
/// An inner node with fewer children than this (but the root) is merged or refilled.
const FAN_MIN: usize = FAN / 4;
/// Depth of the tree at most: a tree of quarter-full nodes holding 2^32 elements is less
/// than half as deep.
const MAX_DEPTH: usize = 24;

/// An element: its score, its member, and the next element of its hash chain (or of the
/// free list).
#[derive(Clone, Debug)]
struct Elem {
    score: f64,
    member: Box<[u8]>,
    next: u32,
}

/// A leaf: its elements' scores and ids in order, linked to its neighbours.
#[derive(Clone, Debug)]
struct Leaf {
    n: u32,
    prev: u32,
    next: u32,
    scores: [f64; LEAF],
    ids: [u32; LEAF],
}

impl Leaf {
    fn empty() -> Leaf {
        Leaf {
            n: 0,
            prev: NIL,
            next: NIL,
            scores: [0.0; LEAF],
            ids: [NIL; LEAF],
        }
    }
}

/// An inner node: its children, how many elements each holds, and each one's lowest
/// element (score and id).
#[derive(Clone, Debug)]
struct Inner {
    n: u32,
    child: [u32; FAN],
    count: [u32; FAN],
    min_score: [f64; FAN],
    min_id: [u32; FAN],
}

impl Inner {
    fn empty() -> Inner {
        Inner {
            n: 0,
            child: [NIL; FAN],
            count: [0; FAN],
            min_score: [0.0; FAN],
            min_id: [NIL; FAN],
        }
    }

    /// Elements under the children before `c`.
    fn before(&self, c: usize) -> usize {
        self.count[..c].iter().map(|&k| k as usize).sum()
    }

    /// Removes `k` entries from `at`.
    fn remove(&mut self, at: usize, k: usize) {
        let n = self.n as usize;
        self.child.copy_within(at + k..n, at);
        self.count.copy_within(at + k..n, at);
        self.min_score.copy_within(at + k..n, at);
        self.min_id.copy_within(at + k..n, at);
        self.n -= k as u32;
    }
}

/// The way down to a node: each inner node passed (from the root) and the child taken.
#[derive(Clone, Copy)]
struct Path {
    steps: [(u32, usize); MAX_DEPTH],
    len: usize,
}

impl Path {
    fn new() -> Path {
        Path {
            steps: [(NIL, 0); MAX_DEPTH],
            len: 0,
        }
    }

    fn push(&mut self, node: u32, child: usize) {
        self.steps[self.len] = (node, child);
        self.len += 1;
    }
}

/// The large form: elements in an arena, chained by member hash into buckets; their ids
/// in an order-statistic B+tree ordered by (score, member) — leaves of up to [`LEAF`]
/// scores and ids linked in order, inner nodes of up to [`FAN`] children with each
/// child's element count and lowest element. Rank, position by rank and range bounds are
/// one descent; ranges then walk the leaves.
#[derive(Clone, Debug)]
struct Large {
    elems: Vec<Elem>,
    free_elem: u32,
    /// Chain heads; a power of two of them.
    buckets: Box<[u32]>,
    leaves: Vec<Leaf>,
    free_leaf: u32,
    inners: Vec<Inner>,
    free_inner: u32,
    root: u32,
    /// Inner levels above the leaves (0: the root is a leaf).
    height: usize,
    first_leaf: u32,
    last_leaf: u32,
    len: u32,
    /// Bytes of the members.
    bytes: usize,
}

impl Large {
    /// An empty tree with room for `capacity` members.
    fn new(capacity: usize) -> Large {
        let mut leaves = Vec::with_capacity(capacity.div_ceil(LEAF).max(1));
        leaves.push(Leaf::empty());
        Large {
            elems: Vec::with_capacity(capacity),
            free_elem: NIL,
            buckets: vec![NIL; bucket_count(capacity)].into_boxed_slice(),
            leaves,
            free_leaf: NIL,
            inners: Vec::new(),
            free_inner: NIL,
            root: 0,
            height: 0,
            first_leaf: 0,
            last_leaf: 0,
            len: 0,
            bytes: 0,
        }
    }

    fn score(&self, id: u32) -> f64 {
        self.elems[id as usize].score
    }

    fn member(&self, id: u32) -> &[u8] {
        &self.elems[id as usize].member
    }

    /// Whether `(score, member)` sorts before the element `id` of score `s` (its member is
    /// read only on a tie).
    fn key_before(&self, score: f64, member: &[u8], s: f64, id: u32) -> bool {
        score < s || (score == s && member < self.member(id))
    }

    fn leaf(&self, l: u32) -> &Leaf {
        &self.leaves[l as usize]
    }

    fn inner(&self, i: u32) -> &Inner {
        &self.inners[i as usize]
    }

    // --- the member index ---

    fn bucket(&self, h: u64) -> usize {
        (h as usize) & (self.buckets.len() - 1)
    }

    /// The element of `member`, or `NIL`.
    fn find(&self, member: &[u8]) -> u32 {
        let mut e = self.buckets[self.bucket(hash(member))];
        while e != NIL {
            let elem = &self.elems[e as usize];
            if *elem.member == *member {
                return e;
            }
            e = elem.next;
        }
        NIL
    }

    fn index(&mut self, id: u32) {
        let b = self.bucket(hash(self.member(id)));
        self.elems[id as usize].next = self.buckets[b];
        self.buckets[b] = id;
    }

    fn unindex(&mut self, id: u32) {
        let b = self.bucket(hash(self.member(id)));
        let after = self.elems[id as usize].next;
        if self.buckets[b] == id {
            self.buckets[b] = after;
            return;
        }
        let mut c = self.buckets[b];
        while c != NIL {
            let next = self.elems[c as usize].next;
            if next == id {
                self.elems[c as usize].next = after;
                return;
            }
            c = next;
        }
    }

    /// Rebuilds the index with `size` buckets.
    fn rehash(&mut self, size: usize) {
        self.buckets = vec![NIL; size].into_boxed_slice();
        let mut leaf = self.first_leaf;
        while leaf != NIL {
            for slot in 0..self.leaf(leaf).n as usize {
                let id = self.leaf(leaf).ids[slot];
                self.index(id);
            }
            leaf = self.leaf(leaf).next;
        }
    }

    // --- the arenas ---

    fn alloc_elem(&mut self, score: f64, member: &[u8]) -> u32 {
        let elem = Elem {
            score,
            member: member.into(),
            next: NIL,
        };
        self.bytes += member.len();
        if self.free_elem == NIL {
            push_arena(&mut self.elems, elem)
        } else {
            let id = self.free_elem;
            self.free_elem = self.elems[id as usize].next;
            self.elems[id as usize] = elem;
            id
        }
    }

    fn release_elem(&mut self, id: u32) {
        let free = self.free_elem;
        let e = &mut self.elems[id as usize];
        self.bytes -= e.member.len();
        e.member = Box::default();
        e.next = free;
        self.free_elem = id;
    }

    fn alloc_leaf(&mut self) -> u32 {
        if self.free_leaf == NIL {
            push_arena(&mut self.leaves, Leaf::empty())
        } else {
            let l = self.free_leaf;
            self.free_leaf = self.leaf(l).next;
            self.leaves[l as usize] = Leaf::empty();
            l
        }
    }

    fn release_leaf(&mut self, l: u32) {
        let leaf = &mut self.leaves[l as usize];
        leaf.n = 0;
        leaf.next = self.free_leaf;
        self.free_leaf = l;
    }

    fn alloc_inner(&mut self) -> u32 {
        if self.free_inner == NIL {
            push_arena(&mut self.inners, Inner::empty())
        } else {
            let i = self.free_inner;
            self.free_inner = self.inner(i).child[0];
            self.inners[i as usize] = Inner::empty();
            i
        }
    }

    fn release_inner(&mut self, i: u32) {
        let inner = &mut self.inners[i as usize];
        inner.n = 0;
        inner.child[0] = self.free_inner;
        self.free_inner = i;
    }

    // --- nodes of either kind, by height (0: a leaf) ---

    fn size(&self, node: u32, h: usize) -> usize {
        if h == 0 {
            self.leaf(node).n as usize
        } else {
            self.inner(node).n as usize
        }
    }

    fn capacity(h: usize) -> usize {
        if h == 0 { LEAF } else { FAN }
    }

    /// Elements under `node`.
    fn total(&self, node: u32, h: usize) -> u32 {
        if h == 0 {
            self.leaf(node).n
        } else {
            let i = self.inner(node);
            i.count[..i.n as usize].iter().sum()
        }
    }

    /// The lowest element under `node`: score and id (`NIL` when it is empty).
    fn min_of(&self, node: u32, h: usize) -> (f64, u32) {
        if h == 0 {
            let l = self.leaf(node);
            if l.n == 0 {
                (0.0, NIL)
            } else {
                (l.scores[0], l.ids[0])
            }
        } else {
            let i = self.inner(node);
            (i.min_score[0], i.min_id[0])
        }
    }

    /// The child of `node` whose range holds `(score, member)`: the last whose lowest
    /// element does not sort after it (the first child when every one does).
    fn route(&self, node: u32, score: f64, member: &[u8]) -> usize {
        let i = self.inner(node);
        let (mut lo, mut hi) = (1usize, i.n as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key_before(score, member, i.min_score[mid], i.min_id[mid]) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo - 1
    }

    /// In a leaf, the first slot whose element does not sort before `(score, member)`.
    fn leaf_slot(&self, leaf: u32, score: f64, member: &[u8]) -> usize {
        let l = self.leaf(leaf);
        let (mut lo, mut hi) = (0usize, l.n as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if before(l.scores[mid], self.member(l.ids[mid]), score, member) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    // --- insertion ---

    fn insert(&mut self, member: &[u8], score: f64) {
        let id = self.alloc_elem(score, member);
        self.index(id);
        self.link(id);
        if self.len as usize > self.buckets.len() {
            self.rehash(self.buckets.len() * 2);
        }
    }

    /// Puts the element `id` into the tree, down from the root, splitting each full node
    /// on the way first (so that its parent always has room for the new half).
    fn link(&mut self, id: u32) {
        let score = self.score(id);
        if self.size(self.root, self.height) == Large::capacity(self.height) {
            self.grow_root();
        }
        let mut node = self.root;
        let mut h = self.height;
        while h > 0 {
            let mut c = self.route(node, score, self.member(id));
            let child = self.inner(node).child[c];
            if self.size(child, h - 1) == Large::capacity(h - 1) {
                self.split(node, c, h - 1, score, id);
                let i = self.inner(node);
                if !self.key_before(score, self.member(id), i.min_score[c + 1], i.min_id[c + 1]) {
                    c += 1;
                }
            }
            let new_min = c == 0 && {
                let i = self.inner(node);
                self.key_before(score, self.member(id), i.min_score[0], i.min_id[0])
            };
            let inner = &mut self.inners[node as usize];
            inner.count[c] += 1;
            if new_min {
                inner.min_score[0] = score;
                inner.min_id[0] = id;
            }
            node = inner.child[c];
            h -= 1;
        }
        let slot = self.leaf_slot(node, score, self.member(id));
        let l = &mut self.leaves[node as usize];
        let n = l.n as usize;
        l.scores.copy_within(slot..n, slot + 1);
        l.ids.copy_within(slot..n, slot + 1);
        l.scores[slot] = score;
        l.ids[slot] = id;
        l.n += 1;
        self.len += 1;
    }

    /// A new root above the old one.
    fn grow_root(&mut self) {
        let (old, h) = (self.root, self.height);
        let (min_score, min_id) = self.min_of(old, h);
        let total = self.total(old, h);
        let root = self.alloc_inner();
        let r = &mut self.inners[root as usize];
        r.n = 1;
        r.child[0] = old;
        r.count[0] = total;
        r.min_score[0] = min_score;
        r.min_id[0] = min_id;
        self.root = root;
        self.height += 1;
    }

    /// Splits the full child `c` of `p` (of height `h`) in two, the new half after it. The
    /// last leaf, when `(score, id)` would be appended to it, keeps all but its last entry
    /// (so that ascending inserts fill their leaves, and only the last leaf may be less
    /// than a quarter full); any other node is halved.
    fn split(&mut self, p: u32, c: usize, h: usize, score: f64, id: u32) {
        let child = self.inner(p).child[c];
        let (right, moved) = if h == 0 {
            let last = LEAF - 1;
            let l = self.leaf(child);
            // Only the last leaf: a small leaf in the middle could stay small.
            let appends = l.next == NIL
                && !self.key_before(score, self.member(id), l.scores[last], l.ids[last]);
            let at = if appends { last } else { LEAF / 2 };
            let r = self.alloc_leaf();
            let (scores, ids, next) = {
                let l = self.leaf(child);
                (l.scores, l.ids, l.next)
            };
            let k = LEAF - at;
            let rl = &mut self.leaves[r as usize];
            rl.scores[..k].copy_from_slice(&scores[at..]);
            rl.ids[..k].copy_from_slice(&ids[at..]);
            rl.n = k as u32;
            rl.prev = child;
            rl.next = next;
            let l = &mut self.leaves[child as usize];
            l.n = at as u32;
            l.next = r;
            if next == NIL {
                self.last_leaf = r;
            } else {
                self.leaves[next as usize].prev = r;
            }
            (r, k as u32)
        } else {
            let at = FAN / 2;
            let r = self.alloc_inner();
            let src = self.inner(child).clone();
            let k = FAN - at;
            let ri = &mut self.inners[r as usize];
            ri.child[..k].copy_from_slice(&src.child[at..]);
            ri.count[..k].copy_from_slice(&src.count[at..]);
            ri.min_score[..k].copy_from_slice(&src.min_score[at..]);
            ri.min_id[..k].copy_from_slice(&src.min_id[at..]);
            ri.n = k as u32;
            self.inners[child as usize].n = at as u32;
            (r, src.count[at..].iter().sum())
        };
        let (min_score, min_id) = self.min_of(right, h);
        let pi = &mut self.inners[p as usize];
        let n = pi.n as usize;
        pi.child.copy_within(c + 1..n, c + 2);
        pi.count.copy_within(c + 1..n, c + 2);
        pi.min_score.copy_within(c + 1..n, c + 2);
        pi.min_id.copy_within(c + 1..n, c + 2);
        pi.child[c + 1] = right;
        pi.count[c + 1] = moved;
        pi.min_score[c + 1] = min_score;
        pi.min_id[c + 1] = min_id;
        pi.count[c] -= moved;
        pi.n += 1;
    }

    // --- lookups by key and by rank ---

    /// The leaf and slot of the element `id`, with the path to its leaf.
    fn locate(&self, id: u32, path: &mut Path) -> (u32, usize) {
        let (score, member) = (self.score(id), self.member(id));
        let mut node = self.root;
        for _ in 0..self.height {
            let c = self.route(node, score, member);
            path.push(node, c);
            node = self.inner(node).child[c];
        }
        (node, self.leaf_slot(node, score, member))
    }

    /// The rank (0-based) of the element `id`.
    fn rank_of(&self, id: u32) -> usize {
        let (score, member) = (self.score(id), self.member(id));
        let mut rank = 0;
        let mut node = self.root;
        for _ in 0..self.height {
            let c = self.route(node, score, member);
            rank += self.inner(node).before(c);
            node = self.inner(node).child[c];
        }
        rank + self.leaf_slot(node, score, member)
    }

    /// The leaf and slot of rank `rank` (0-based, below the length), with the path.
    fn at_rank(&self, mut rank: usize, path: &mut Path) -> (u32, usize) {
        let mut node = self.root;
        for _ in 0..self.height {
            let i = self.inner(node);
            let mut c = 0;
            while c + 1 < i.n as usize && rank >= i.count[c] as usize {
                rank -= i.count[c] as usize;
                c += 1;
            }
            path.push(node, c);
            node = i.child[c];
        }
        (node, rank)
    }

    /// The first element for which `holds` is true, given that it is false for some first
    /// elements and true for the rest: its leaf, slot and rank.
    fn first_where(&self, holds: impl Fn(f64, u32) -> bool) -> Option<(u32, usize, usize)> {
        let mut node = self.root;
        let mut rank = 0;
        for _ in 0..self.height {
            let i = self.inner(node);
            let (mut lo, mut hi) = (1usize, i.n as usize);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if holds(i.min_score[mid], i.min_id[mid]) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            rank += i.before(lo - 1);
            node = i.child[lo - 1];
        }
        let l = self.leaf(node);
        let n = l.n as usize;
        let slot = (0..n)
            .position(|s| holds(l.scores[s], l.ids[s]))
            .unwrap_or(n);
        if slot < n {
            Some((node, slot, rank + slot))
        } else if l.next != NIL {
            Some((l.next, 0, rank + n))
        } else {
            None
        }
    }

    /// The last element for which `holds` is true, given that it is true for some first
    /// elements and false for the rest.
    fn last_where(&self, holds: impl Fn(f64, u32) -> bool) -> Option<(u32, usize, usize)> {
        let mut node = self.root;
        let mut rank = 0;
        for _ in 0..self.height {
            let i = self.inner(node);
            let (mut lo, mut hi) = (1usize, i.n as usize);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if holds(i.min_score[mid], i.min_id[mid]) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            rank += i.before(lo - 1);
            node = i.child[lo - 1];
        }
        let l = self.leaf(node);
        let n = l.n as usize;
        let held = (0..n)
            .position(|s| !holds(l.scores[s], l.ids[s]))
            .unwrap_or(n);
        if held > 0 {
            Some((node, held - 1, rank + held - 1))
        } else if l.prev != NIL && rank > 0 {
            let prev = self.leaf(l.prev);
            Some((l.prev, prev.n as usize - 1, rank - 1))
        } else {
            None
        }
    }

    // --- removal ---

    /// Takes the element `id` out of the tree (it stays in the arena and the index).
    fn unlink(&mut self, id: u32) {
        let mut path = Path::new();
        let (leaf, slot) = self.locate(id, &mut path);
        self.remove_slots(&mut path, leaf, slot, 1);
    }

    /// Removes `k` entries of `leaf` from `slot` on (the path leads to it), then keeps the
    /// tree's invariants: counts, lowest elements, fill.
    fn remove_slots(&mut self, path: &mut Path, leaf: u32, slot: usize, k: usize) {
        let l = &mut self.leaves[leaf as usize];
        let n = l.n as usize;
        l.scores.copy_within(slot + k..n, slot);
        l.ids.copy_within(slot + k..n, slot);
        l.n -= k as u32;
        for &(node, c) in &path.steps[..path.len] {
            self.inners[node as usize].count[c] -= k as u32;
        }
        self.len -= k as u32;
        if slot == 0 {
            self.refresh_min(path, path.len);
        }
        self.rebalance(path, leaf);
    }

    /// The node at depth `depth` of `path` has a new lowest element: its parent's entry
    /// for it, and up while it is a first child.
    fn refresh_min(&mut self, path: &Path, depth: usize) {
        for k in (0..depth).rev() {
            let (p, c) = path.steps[k];
            let child = self.inner(p).child[c];
            let (score, id) = self.min_of(child, self.height - k - 1);
            let pi = &mut self.inners[p as usize];
            pi.min_score[c] = score;
            pi.min_id[c] = id;
            if c != 0 {
                break;
            }
        }
    }

    /// After removals from `node` (at the end of `path`): merges it with a neighbour or
    /// refills it from one while it is too small, up to the root; a root left with one
    /// child gives way to it.
    fn rebalance(&mut self, path: &mut Path, mut node: u32) {
        loop {
            let depth = path.len;
            let h = self.height - depth;
            if depth == 0 {
                if h > 0 && self.inner(node).n == 1 {
                    let child = self.inner(node).child[0];
                    self.release_inner(node);
                    self.root = child;
                    self.height -= 1;
                    node = child;
                    continue;
                }
                return;
            }
            let min = if h == 0 { LEAF_MIN } else { FAN_MIN };
            if self.size(node, h) >= min {
                return;
            }
            let (p, c) = path.steps[depth - 1];
            let siblings = self.inner(p).n as usize;
            if siblings < 2 {
                return;
            }
            let left = if c + 1 < siblings { c } else { c - 1 };
            let (l, r) = (self.inner(p).child[left], self.inner(p).child[left + 1]);
            if self.size(l, h) + self.size(r, h) <= Large::capacity(h) {
                self.merge(p, left, h);
            } else {
                self.redistribute(p, left, h);
            }
            path.steps[depth - 1] = (p, left);
            self.refresh_min(path, depth);
            path.len = depth - 1;
            node = p;
        }
    }

    /// Moves the child `i + 1` of `p` (of height `h`) into the child `i`.
    fn merge(&mut self, p: u32, i: usize, h: usize) {
        let (l, r) = (self.inner(p).child[i], self.inner(p).child[i + 1]);
        if h == 0 {
            let src = self.leaf(r).clone();
            let dst = &mut self.leaves[l as usize];
            let (at, k) = (dst.n as usize, src.n as usize);
            dst.scores[at..at + k].copy_from_slice(&src.scores[..k]);
            dst.ids[at..at + k].copy_from_slice(&src.ids[..k]);
            dst.n += src.n;
            dst.next = src.next;
            if src.next == NIL {
                self.last_leaf = l;
            } else {
                self.leaves[src.next as usize].prev = l;
            }
            self.release_leaf(r);
        } else {
            let src = self.inner(r).clone();
            let dst = &mut self.inners[l as usize];
            let (at, k) = (dst.n as usize, src.n as usize);
            dst.child[at..at + k].copy_from_slice(&src.child[..k]);
            dst.count[at..at + k].copy_from_slice(&src.count[..k]);
            dst.min_score[at..at + k].copy_from_slice(&src.min_score[..k]);
            dst.min_id[at..at + k].copy_from_slice(&src.min_id[..k]);
            dst.n += src.n;
            self.release_inner(r);
        }
        let pi = &mut self.inners[p as usize];
        pi.count[i] += pi.count[i + 1];
        pi.remove(i + 1, 1);
    }

    /// Evens out the children `i` and `i + 1` of `p` (of height `h`).
    fn redistribute(&mut self, p: u32, i: usize, h: usize) {
        let (l, r) = (self.inner(p).child[i], self.inner(p).child[i + 1]);
        let (nl, nr) = (self.size(l, h), self.size(r, h));
        let half = (nl + nr) / 2;
        if h == 0 {
            let (mut a, mut b) = (self.leaf(l).clone(), self.leaf(r).clone());
            let (sa, sb) = redistribute_arrays(&mut a.scores, &mut b.scores, nl, nr, half);
            redistribute_arrays(&mut a.ids, &mut b.ids, nl, nr, half);
            a.n = sa as u32;
            b.n = sb as u32;
            self.leaves[l as usize] = a;
            self.leaves[r as usize] = b;
        } else {
            let (mut a, mut b) = (self.inner(l).clone(), self.inner(r).clone());
            let (sa, sb) = redistribute_arrays(&mut a.child, &mut b.child, nl, nr, half);
            redistribute_arrays(&mut a.count, &mut b.count, nl, nr, half);
            redistribute_arrays(&mut a.min_score, &mut b.min_score, nl, nr, half);
            redistribute_arrays(&mut a.min_id, &mut b.min_id, nl, nr, half);
            a.n = sa as u32;
            b.n = sb as u32;
            self.inners[l as usize] = a;
            self.inners[r as usize] = b;
        }
        let (cl, cr) = (self.total(l, h), self.total(r, h));
        let (min_score, min_id) = self.min_of(r, h);
        let pi = &mut self.inners[p as usize];
        pi.count[i] = cl;
        pi.count[i + 1] = cr;
        pi.min_score[i + 1] = min_score;
        pi.min_id[i + 1] = min_id;
    }

    /// Gives `id` a new score: in place when it keeps its place in its leaf, else taken
    /// out and put back.
    fn update(&mut self, id: u32, score: f64) {
        let mut path = Path::new();
        let (leaf, slot) = self.locate(id, &mut path);
        let l = self.leaf(leaf);
        let n = l.n as usize;
        let member = self.member(id);
        let after_prev = slot > 0
            && before(
                l.scores[slot - 1],
                self.member(l.ids[slot - 1]),
                score,
                member,
            );
        let before_next =
            slot + 1 < n && self.key_before(score, member, l.scores[slot + 1], l.ids[slot + 1]);
        if after_prev && before_next {
            self.leaves[leaf as usize].scores[slot] = score;
            self.elems[id as usize].score = score;
            return;
        }
        self.remove_slots(&mut path, leaf, slot, 1);
        self.elems[id as usize].score = score;
        self.link(id);
    }

    /// Removes the element `id` for good.
    fn delete(&mut self, id: u32) {
        self.unlink(id);
        self.unindex(id);
        self.release_elem(id);
        self.shrink();
    }

    /// Removes the elements of ranks `start..=end` (0-based, within the set): a leaf's
    /// worth per descent.
    fn delete_ranks(&mut self, start: usize, end: usize) -> usize {
        let mut left = end - start + 1;
        while left > 0 {
            let mut path = Path::new();
            let (leaf, slot) = self.at_rank(start, &mut path);
            let k = left.min(self.leaf(leaf).n as usize - slot);
            for s in slot..slot + k {
                let id = self.leaf(leaf).ids[s];
                self.unindex(id);
                self.release_elem(id);
            }
            self.remove_slots(&mut path, leaf, slot, k);
            left -= k;
        }
        self.shrink();
        end - start + 1
    }

    /// Gives memory back after removals: fewer buckets, and compacted arenas.
    fn shrink(&mut self) {
        let len = self.len as usize;
        if self.buckets.len() > MIN_BUCKETS && len * MIN_FILL < self.buckets.len() {
            self.rehash(bucket_count(len));
        }
        if self.elems.len() > ARENA_COMPACT_FLOOR && len * ARENA_MIN_FILL < self.elems.len() {
            let mut compact = Large::new(len);
            let mut leaf = self.first_leaf;
            while leaf != NIL {
                let l = self.leaf(leaf);
                for s in 0..l.n as usize {
                    compact.insert(self.member(l.ids[s]), l.scores[s]);
                }
                leaf = l.next;
            }
            *self = compact;
        }
    }
}

/// Pushes onto an arena, growing it by a quarter at a time: a doubling `Vec` may leave
/// half its room unused, and the arenas of a large set are large. Returns the index.
fn push_arena<T>(arena: &mut Vec<T>, item: T) -> u32 {
    if arena.len() == arena.capacity() {
        arena.reserve_exact(arena.capacity() / ARENA_GROWTH + ARENA_GROWTH_MIN);
    }
    arena.push(item);
    (arena.len() - 1) as u32
}

/// Moves entries between two neighbouring arrays of `nl` and `nr` entries so that the
/// first holds `half` of them: from the front of the second to the end of the first, or
/// from the end of the first to the front of the second. Returns the new sizes.
fn redistribute_arrays<T: Copy, const N: usize>(
    a: &mut [T; N],
    b: &mut [T; N],
    nl: usize,
    nr: usize,
    half: usize,
) -> (usize, usize) {
    if nl < half {
        let k = half - nl;
        a[nl..half].copy_from_slice(&b[..k]);
        b.copy_within(k..nr, 0);
    } else {
        let k = nl - half;
        b.copy_within(0..nr, k);
        b[..k].copy_from_slice(&a[half..nl]);
    }
    (half, nl + nr - half)
}

/// The bucket count for `n` members: the next power of two, at least [`MIN_BUCKETS`].
fn bucket_count(n: usize) -> usize {
    n.max(MIN_BUCKETS).next_power_of_two()
}

impl SortedSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(b) => lp_count(b),
            Repr::Large(l) => l.len as usize,
        }
    }

    /// True when there is no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Small(b) => lp_find(b, member).map(|(_, s)| s),
            Repr::Large(l) => {
                let id = l.find(member);
                (id != NIL).then(|| l.score(id))
            }
        }
    }

    /// Sets `member`'s score (left as it is when equal, as ZADD leaves it); its old score,
    /// if it was there. `score` must not be NaN.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        let old = self.score(member);
        let _ = self.add(member, score, AddFlags::default());
        old
    }

    /// Redis's `zsetAdd`: adds or updates `member` as ZADD's `flags` say, converting a
    /// small set that the new member would take past the small limits.
    ///
    /// # Errors
    /// [`NotANumber`] when `score` is NaN, or the increment makes it NaN; nothing changed.
    pub fn add(&mut self, member: &[u8], score: f64, flags: AddFlags) -> Result<Added, NotANumber> {
        if score.is_nan() {
            return Err(NotANumber);
        }
        if let Some(current) = self.score(member) {
            if flags.nx {
                return Ok(Added::Skipped);
            }
            let mut score = score;
            if flags.incr {
                score += current;
                if score.is_nan() {
                    return Err(NotANumber);
                }
            }
            if (flags.lt && score >= current) || (flags.gt && score <= current) {
                return Ok(Added::Skipped);
            }
            if score == current {
                return Ok(Added::Unchanged(score));
            }
            match &mut self.repr {
                Repr::Small(b) => {
                    if let Some((at, _)) = lp_find(b, member) {
                        let next = at + member.len() + ENTRY_OVERHEAD;
                        let without = lp_remove(b, at, next, 1);
                        *b = lp_insert(&without, member, score);
                    }
                }
                Repr::Large(l) => {
                    let id = l.find(member);
                    if id != NIL {
                        l.update(id, score);
                    }
                }
            }
            return Ok(Added::Updated(score));
        }
        if flags.xx {
            return Ok(Added::Skipped);
        }
        if let Repr::Small(b) = &self.repr
            && (lp_count(b) + 1 > thresholds::ZSET_LISTPACK_ENTRIES.get()
                || member.len() > thresholds::ZSET_LISTPACK_VALUE.get())
        {
            self.convert();
        }
        match &mut self.repr {
            Repr::Small(b) => *b = lp_insert(b, member, score),
            Repr::Large(l) => l.insert(member, score),
        }
        Ok(Added::Added(score))
    }

    /// Makes a small set large (Redis's `zsetConvert` to a skiplist).
    fn convert(&mut self) {
        if let Repr::Small(b) = &self.repr {
            let mut large = Large::new(lp_count(b) + 1);
            let mut at = lp_first(b);
            while let Some(o) = at {
                let (m, s) = lp_entry(b, o);
                large.insert(m, s);
                at = lp_next(b, o);
            }
            self.repr = Repr::Large(Box::new(large));
        }
    }

    /// Removes `member`; its score, if it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Small(b) => {
                let (at, score) = lp_find(b, member)?;
                *b = lp_remove(b, at, at + member.len() + ENTRY_OVERHEAD, 1);
                Some(score)
            }
            Repr::Large(l) => {
                let id = l.find(member);
                if id == NIL {
                    return None;
                }
                let score = l.score(id);
                l.delete(id);
                Some(score)
            }
        }
    }

    /// Removes the elements of ranks `start..=end` (0-based, within the set); how many.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        if start > end || start >= self.len() {
            return 0;
        }
        let end = end.min(self.len() - 1);
        match &mut self.repr {
            Repr::Small(b) => {
                let (Some(from), Some(last)) = (nth(b, start), nth(b, end)) else {
                    return 0;
                };
                let to = last + usize::from(b[last]) + ENTRY_OVERHEAD;
                let n = end - start + 1;
                *b = lp_remove(b, from, to, n);
                n
            }
            Repr::Large(l) => l.delete_ranks(start, end),
        }
    }

    /// Calls `f` with every member and its score, in order.
    pub fn for_each<'a>(&'a self, mut f: impl FnMut(&'a [u8], f64)) {
        let mut p = self.first();
        while let Some(pos) = p {
            let (m, s) = self.entry(pos);
            f(m, s);
            p = self.next(pos);
        }
    }

    /// The encoding OBJECT ENCODING reports: `listpack` while small, else `skiplist`.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Small(_) => "listpack",
            Repr::Large(_) => "skiplist",
        }
    }

    /// Whether the set is in its small form (`listpack`).
    pub fn is_small(&self) -> bool {
        matches!(self.repr, Repr::Small(_))
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        BASE + match &self.repr {
            Repr::Small(b) => b.len(),
            Repr::Large(l) => {
                size_of::<Large>()
                    + l.elems.capacity() * size_of::<Elem>()
                    + l.bytes
                    + l.buckets.len() * size_of::<u32>()
                    + l.leaves.capacity() * size_of::<Leaf>()
                    + l.inners.capacity() * size_of::<Inner>()
            }
        }
    }

    /// A sorted set of `entries` (distinct members, no NaN score), in the form its size
    /// calls for: small when it has at most `zset-max-listpack-entries` members of at most
    /// `zset-max-listpack-value` bytes — what Redis gives the destination of a STORE
    /// command.
    pub fn from_entries(mut entries: Vec<(Vec<u8>, f64)>) -> SortedSet {
        entries.sort_by(|a, b| order((&a.0, a.1), (&b.0, b.1)));
        let longest = thresholds::ZSET_LISTPACK_VALUE.get();
        let small = entries.len() <= thresholds::ZSET_LISTPACK_ENTRIES.get()
            && entries.iter().all(|(m, _)| m.len() <= longest);
        if small {
            if entries.is_empty() {
                return SortedSet::default();
            }
            let bytes: usize = entries.iter().map(|(m, _)| m.len() + ENTRY_OVERHEAD).sum();
            let mut out = Vec::with_capacity(1 + bytes);
            out.push(entries.len() as u8);
            for (m, s) in &entries {
                lp_push(&mut out, m, *s);
            }
            return SortedSet {
                repr: Repr::Small(out.into_boxed_slice()),
            };
        }
        let mut large = Large::new(entries.len());
        for (m, s) in &entries {
            large.insert(m, *s);
        }
        SortedSet {
            repr: Repr::Large(Box::new(large)),
        }
    }

    /// An empty set in the form Redis starts a destination of `n` elements in (a
    /// ZRANGESTORE by rank): large when `n` is past `zset-max-listpack-entries`, else small (and
    /// [`SortedSet::add`] converts it as members come).
    pub fn for_size(n: usize) -> SortedSet {
        if n > thresholds::ZSET_LISTPACK_ENTRIES.get() {
            SortedSet {
                repr: Repr::Large(Box::new(Large::new(n))),
            }
        } else {
            SortedSet::default()
        }
    }

    // --- positions ---

    /// The lowest element.
    pub fn first(&self) -> Option<Pos> {
        match &self.repr {
            Repr::Small(b) => lp_first(b).map(|at| Pos {
                rank: 0,
                at: at as u32,
                slot: 0,
            }),
            Repr::Large(l) => (l.len > 0).then_some(Pos {
                rank: 0,
                at: l.first_leaf,
                slot: 0,
            }),
        }
    }

    /// The highest element.
    pub fn last(&self) -> Option<Pos> {
        let rank = self.len().checked_sub(1)?;
        match &self.repr {
            Repr::Small(b) => lp_last(b).map(|at| Pos {
                rank,
                at: at as u32,
                slot: 0,
            }),
            Repr::Large(l) => Some(Pos {
                rank,
                at: l.last_leaf,
                slot: l.leaf(l.last_leaf).n.checked_sub(1)?,
            }),
        }
    }

    /// The element after `p`.
    pub fn next(&self, p: Pos) -> Option<Pos> {
        let rank = p.rank + 1;
        match &self.repr {
            Repr::Small(b) => lp_next(b, p.at as usize).map(|at| Pos {
                rank,
                at: at as u32,
                slot: 0,
            }),
            Repr::Large(l) => {
                let leaf = l.leaf(p.at);
                if p.slot + 1 < leaf.n {
                    return Some(Pos {
                        rank,
                        at: p.at,
                        slot: p.slot + 1,
                    });
                }
                (leaf.next != NIL).then_some(Pos {
                    rank,
                    at: leaf.next,
                    slot: 0,
                })
            }
        }
    }

    /// The element before `p`.
    pub fn prev(&self, p: Pos) -> Option<Pos> {
        let rank = p.rank.checked_sub(1)?;
        match &self.repr {
            Repr::Small(b) => lp_prev(b, p.at as usize).map(|at| Pos {
                rank,
                at: at as u32,
                slot: 0,
            }),
            Repr::Large(l) => {
                if p.slot > 0 {
                    return Some(Pos {
                        rank,
                        at: p.at,
                        slot: p.slot - 1,
                    });
                }
                let prev = l.leaf(p.at).prev;
                (prev != NIL).then(|| Pos {
                    rank,
                    at: prev,
                    slot: l.leaf(prev).n - 1,
                })
            }
        }
    }

    /// The member and score at `p`.
    pub fn entry(&self, p: Pos) -> (&[u8], f64) {
        match &self.repr {
            Repr::Small(b) => lp_entry(b, p.at as usize),
            Repr::Large(l) => {
                let leaf = l.leaf(p.at);
                let slot = p.slot as usize;
                (l.member(leaf.ids[slot]), leaf.scores[slot])
            }
        }
    }

    /// The element of rank `rank` (0-based).
    pub fn at_rank(&self, rank: usize) -> Option<Pos> {
        if rank >= self.len() {
            return None;
        }
        match &self.repr {
            Repr::Small(b) => nth(b, rank).map(|at| Pos {
                rank,
                at: at as u32,
                slot: 0,
            }),
            Repr::Large(l) => {
                let (leaf, slot) = l.at_rank(rank, &mut Path::new());
                Some(Pos {
                    rank,
                    at: leaf,
                    slot: slot as u32,
                })
            }
        }
    }

    /// The rank of `member` (0-based), if it is there.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match &self.repr {
            Repr::Small(b) => {
                let mut at = lp_first(b);
                let mut rank = 0;
                while let Some(o) = at {
                    if lp_entry(b, o).0 == member {
                        return Some(rank);
                    }
                    rank += 1;
                    at = lp_next(b, o);
                }
                None
            }
            Repr::Large(l) => {
                let id = l.find(member);
                (id != NIL).then(|| l.rank_of(id))
            }
        }
    }

    /// Whether some element may be in the score range: the highest at or above its
    /// minimum, the lowest at or below its maximum (`zslIsInRange`).
    fn may_hold_scores(&self, range: &ScoreRange) -> bool {
        if range.is_empty() {
            return false;
        }
        match (self.first(), self.last()) {
            (Some(f), Some(l)) => range.gte_min(self.entry(l).1) && range.lte_max(self.entry(f).1),
            _ => false,
        }
    }

    /// The first element in `range` (`zzlFirstInRange`, `zslFirstInRange`).
    pub fn first_in_score_range(&self, range: &ScoreRange) -> Option<Pos> {
        if !self.may_hold_scores(range) {
            return None;
        }
        let p = match &self.repr {
            Repr::Small(_) => {
                let mut p = self.first();
                while let Some(pos) = p {
                    if range.gte_min(self.entry(pos).1) {
                        break;
                    }
                    p = self.next(pos);
                }
                p?
            }
            Repr::Large(l) => large_pos(l.first_where(|s, _| range.gte_min(s)))?,
        };
        range.lte_max(self.entry(p).1).then_some(p)
    }

    /// The last element in `range` (`zzlLastInRange`, `zslLastInRange`).
    pub fn last_in_score_range(&self, range: &ScoreRange) -> Option<Pos> {
        if !self.may_hold_scores(range) {
            return None;
        }
        let p = match &self.repr {
            Repr::Small(_) => {
                let mut p = self.last();
                while let Some(pos) = p {
                    if range.lte_max(self.entry(pos).1) {
                        break;
                    }
                    p = self.prev(pos);
                }
                p?
            }
            Repr::Large(l) => large_pos(l.last_where(|s, _| range.lte_max(s)))?,
        };
        range.gte_min(self.entry(p).1).then_some(p)
    }

    /// Whether some member may be in the lex range (`zslIsInLexRange`).
    fn may_hold_members(&self, range: &LexRange) -> bool {
        if range.is_empty() {
            return false;
        }
        match (self.first(), self.last()) {
            (Some(f), Some(l)) => range.gte_min(self.entry(l).0) && range.lte_max(self.entry(f).0),
            _ => false,
        }
    }

    /// The first element in the lex `range`: in a small set found as Redis scans a
    /// listpack (exactly Redis's answer, whatever the scores); in a large one by a descent
    /// of the tree, which assumes members of equal scores (over different scores Redis's
    /// own answer depends on its skiplist's random levels: unspecified).
    pub fn first_in_lex_range(&self, range: &LexRange) -> Option<Pos> {
        if !self.may_hold_members(range) {
            return None;
        }
        let p = match &self.repr {
            Repr::Small(_) => {
                let mut p = self.first();
                while let Some(pos) = p {
                    if range.gte_min(self.entry(pos).0) {
                        break;
                    }
                    p = self.next(pos);
                }
                p?
            }
            Repr::Large(l) => large_pos(l.first_where(|_, id| range.gte_min(l.member(id))))?,
        };
        range.lte_max(self.entry(p).0).then_some(p)
    }

    /// The last element in the lex `range` (see [`SortedSet::first_in_lex_range`]).
    pub fn last_in_lex_range(&self, range: &LexRange) -> Option<Pos> {
        if !self.may_hold_members(range) {
            return None;
        }
        let p = match &self.repr {
            Repr::Small(_) => {
                let mut p = self.last();
                while let Some(pos) = p {
                    if range.lte_max(self.entry(pos).0) {
                        break;
                    }
                    p = self.prev(pos);
                }
                p?
            }
            Repr::Large(l) => large_pos(l.last_where(|_, id| range.lte_max(l.member(id))))?,
        };
        range.gte_min(self.entry(p).0).then_some(p)
    }

    /// How many elements are in the score range (ZCOUNT): counted from the first while in
    /// range in a small set, the difference of ranks in a large one.
    pub fn count_in_score_range(&self, range: &ScoreRange) -> usize {
        let Some(first) = self.first_in_score_range(range) else {
            return 0;
        };
        if self.is_small() {
            return self.run(first, |_, s| range.lte_max(s));
        }
        match self.last_in_score_range(range) {
            Some(last) => (last.rank + 1).saturating_sub(first.rank),
            None => self.len() - first.rank,
        }
    }

    /// How many elements are in the lex range (ZLEXCOUNT), as
    /// [`SortedSet::count_in_score_range`] counts.
    pub fn count_in_lex_range(&self, range: &LexRange) -> usize {
        let Some(first) = self.first_in_lex_range(range) else {
            return 0;
        };
        if self.is_small() {
            return self.run(first, |m, _| range.lte_max(m));
        }
        match self.last_in_lex_range(range) {
            Some(last) => (last.rank + 1).saturating_sub(first.rank),
            None => self.len() - first.rank,
        }
    }

    /// How many elements from `p` on satisfy `keep`, up to the first that does not.
    fn run(&self, p: Pos, keep: impl Fn(&[u8], f64) -> bool) -> usize {
        let mut n = 0;
        let mut at = Some(p);
        while let Some(pos) = at {
            let (m, s) = self.entry(pos);
            if !keep(m, s) {
                break;
            }
            n += 1;
            at = self.next(pos);
        }
        n
    }

    /// Removes the elements in the score range (ZREMRANGEBYSCORE); how many.
    pub fn remove_score_range(&mut self, range: &ScoreRange) -> usize {
        let Some(first) = self.first_in_score_range(range) else {
            return 0;
        };
        let n = self.run(first, |_, s| range.lte_max(s));
        self.remove_ranks(first.rank, first.rank + n - 1)
    }

    /// Removes the elements in the lex range (ZREMRANGEBYLEX); how many.
    pub fn remove_lex_range(&mut self, range: &LexRange) -> usize {
        let Some(first) = self.first_in_lex_range(range) else {
            return 0;
        };
        let n = self.run(first, |m, _| range.lte_max(m));
        self.remove_ranks(first.rank, first.rank + n - 1)
    }

    /// One step of a scan: the elements found at `cursor`, and the next cursor (0 at the
    /// end). A small set gives everything at once with cursor 0, as Redis does for a
    /// listpack. A large one walks its buckets with Redis's reverse-binary cursor
    /// (`dictScan`): every member present for the whole of a scan is found, even when the
    /// index grows or shrinks between steps.
    pub fn scan_step<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], f64)) -> u64 {
        match &self.repr {
            Repr::Small(_) => {
                self.for_each(f);
                0
            }
            Repr::Large(l) => {
                let mask = (l.buckets.len() - 1) as u64;
                let mut e = l.buckets[(cursor & mask) as usize];
                while e != NIL {
                    let elem = &l.elems[e as usize];
                    f(&elem.member, elem.score);
                    e = elem.next;
                }
                (cursor | !mask)
                    .reverse_bits()
                    .wrapping_add(1)
                    .reverse_bits()
            }
        }
    }
}

/// A position in a large set from a leaf, a slot and a rank.
fn large_pos(found: Option<(u32, usize, usize)>) -> Option<Pos> {
    found.map(|(leaf, slot, rank)| Pos {
        rank,
        at: leaf,
        slot: slot as u32,
    })
}

/// The offset of the small set's entry of rank `rank`.
fn nth(buf: &[u8], rank: usize) -> Option<usize> {
    let mut at = lp_first(buf)?;
    for _ in 0..rank {
        at = lp_next(buf, at)?;
    }
    Some(at)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A large set, whatever its size (a member longer than the small limit forces it,
    /// and is removed again).
    fn large() -> SortedSet {
        let mut z = SortedSet::default();
        let long = vec![b'~'; LISTPACK_VALUE + 1];
        z.insert(&long, 0.0);
        z.remove(&long);
        assert_eq!(z.encoding(), "skiplist");
        z
    }

    fn elements(z: &SortedSet) -> Vec<(Vec<u8>, f64)> {
        let mut out = Vec::new();
        z.for_each(|m, s| out.push((m.to_vec(), s)));
        out
    }

    /// Checks the large form's invariants: every count and lowest element right, nodes
    /// at least a quarter full (but the root), leaves linked in order, elements sorted
    /// and indexed.
    fn check(z: &SortedSet) {
        let Repr::Large(l) = &z.repr else {
            let e = elements(z);
            assert_eq!(e.len(), z.len());
            assert!(
                e.windows(2)
                    .all(|w| order((&w[0].0, w[0].1), (&w[1].0, w[1].1)).is_lt())
            );
            return;
        };
        /// The elements under `node` in order, its leaves appended to `leaves`.
        fn walk_node(
            l: &Large,
            node: u32,
            h: usize,
            root: bool,
            leaves: &mut Vec<u32>,
        ) -> Vec<u32> {
            if h == 0 {
                let leaf = l.leaf(node);
                let last = leaf.next == NIL && leaf.n > 0;
                assert!(
                    root || last || leaf.n as usize >= LEAF_MIN,
                    "leaf of {}",
                    leaf.n
                );
                leaves.push(node);
                return leaf.ids[..leaf.n as usize].to_vec();
            }
            let i = l.inner(node);
            assert!(
                if root {
                    i.n >= 2
                } else {
                    i.n as usize >= FAN_MIN
                },
                "inner of {}",
                i.n
            );
            let mut out = Vec::new();
            for c in 0..i.n as usize {
                let ids = walk_node(l, i.child[c], h - 1, false, leaves);
                assert_eq!(i.count[c] as usize, ids.len(), "count");
                assert_eq!(
                    (i.min_score[c], i.min_id[c]),
                    (l.score(ids[0]), ids[0]),
                    "min"
                );
                out.extend(ids);
            }
            out
        }
        let mut leaves = Vec::new();
        let ids = walk_node(l, l.root, l.height, true, &mut leaves);
        assert_eq!(ids.len(), l.len as usize);
        assert_eq!(ids.len(), z.len());
        let mut linked = Vec::new();
        let mut prev = NIL;
        let mut leaf = l.first_leaf;
        while leaf != NIL {
            assert_eq!(l.leaf(leaf).prev, prev);
            linked.push(leaf);
            prev = leaf;
            leaf = l.leaf(leaf).next;
        }
        assert_eq!(l.last_leaf, prev);
        assert_eq!(linked, leaves);
        for &leaf in &leaves {
            let lf = l.leaf(leaf);
            for s in 0..lf.n as usize {
                assert_eq!(lf.scores[s].to_bits(), l.score(lf.ids[s]).to_bits());
            }
        }
        for w in ids.windows(2) {
            assert!(before(
                l.score(w[0]),
                l.member(w[0]),
                l.score(w[1]),
                l.member(w[1])
            ));
        }
        for &id in &ids {
            assert_eq!(l.find(l.member(id)), id);
        }
    }

    #[test]
    fn small_sets_keep_order_and_convert_on_limits() {
        let mut z = SortedSet::default();
        assert_eq!(z.encoding(), "listpack");
        assert_eq!(z.insert(b"b", 2.0), None);
        assert_eq!(z.insert(b"a", 2.0), None);
        assert_eq!(z.insert(b"c", 1.0), None);
        assert_eq!(z.insert(b"c", 3.0), Some(1.0));
        assert_eq!(
            elements(&z),
            vec![
                (b"a".to_vec(), 2.0),
                (b"b".to_vec(), 2.0),
                (b"c".to_vec(), 3.0)
            ]
        );
        assert_eq!(z.rank(b"b"), Some(1));
        for i in 0..LISTPACK_ENTRIES - 3 {
            z.insert(format!("m{i:03}").as_bytes(), i as f64);
        }
        assert_eq!((z.len(), z.encoding()), (LISTPACK_ENTRIES, "listpack"));
        z.insert(b"one more", 0.5);
        assert_eq!(z.encoding(), "skiplist");
        check(&z);
        // Never back.
        while z.len() > 1 {
            let first = z.entry(z.first().unwrap()).0.to_vec();
            z.remove(&first);
        }
        assert_eq!(z.encoding(), "skiplist");
        let mut z = SortedSet::default();
        z.insert(&[b'x'; LISTPACK_VALUE], 1.0);
        assert_eq!(z.encoding(), "listpack");
        z.insert(&[b'x'; LISTPACK_VALUE + 1], 1.0);
        assert_eq!(z.encoding(), "skiplist");
    }

    #[test]
    fn negative_zero_is_zero_in_a_small_set_only() {
        let mut z = SortedSet::default();
        z.insert(b"m", -0.0);
        assert!(z.score(b"m").unwrap().is_sign_positive());
        let mut z = large();
        z.insert(b"m", -0.0);
        assert!(z.score(b"m").unwrap().is_sign_negative());
        // Equal scores: no update.
        z.insert(b"m", 0.0);
        assert!(z.score(b"m").unwrap().is_sign_negative());
    }

    #[test]
    fn add_follows_zadd_conditions() {
        let mut z = SortedSet::default();
        let f = |nx, xx, gt, lt, incr| AddFlags {
            nx,
            xx,
            gt,
            lt,
            incr,
        };
        assert_eq!(
            z.add(b"a", 1.0, f(false, true, false, false, false)),
            Ok(Added::Skipped)
        );
        assert_eq!(
            z.add(b"a", 1.0, f(true, false, false, false, false)),
            Ok(Added::Added(1.0))
        );
        assert_eq!(
            z.add(b"a", 5.0, f(true, false, false, false, false)),
            Ok(Added::Skipped)
        );
        assert_eq!(
            z.add(b"a", 0.5, f(false, false, true, false, false)),
            Ok(Added::Skipped)
        );
        assert_eq!(
            z.add(b"a", 2.0, f(false, false, true, false, false)),
            Ok(Added::Updated(2.0))
        );
        assert_eq!(
            z.add(b"a", 3.0, f(false, false, false, true, false)),
            Ok(Added::Skipped)
        );
        assert_eq!(
            z.add(b"a", 2.0, f(false, false, false, false, false)),
            Ok(Added::Unchanged(2.0))
        );
        assert_eq!(
            z.add(b"a", 1.5, f(false, false, false, false, true)),
            Ok(Added::Updated(3.5))
        );
        z.add(b"i", f64::INFINITY, AddFlags::default()).unwrap();
        assert_eq!(
            z.add(b"i", f64::NEG_INFINITY, f(false, false, false, false, true)),
            Err(NotANumber)
        );
        assert_eq!(z.add(b"n", f64::NAN, AddFlags::default()), Err(NotANumber));
        assert_eq!(z.score(b"i"), Some(f64::INFINITY));
    }

    #[test]
    fn scans_find_every_member_while_the_index_grows_and_shrinks() {
        let mut z = large();
        for i in 0..1000 {
            z.insert(format!("m{i}").as_bytes(), f64::from(i));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = z.scan_step(cursor, |m, _| {
                seen.insert(m.to_vec());
            });
            steps += 1;
            // Grow and shrink in the middle of the scan.
            if steps == 100 {
                for i in 1000..5000 {
                    z.insert(format!("m{i}").as_bytes(), f64::from(i));
                }
            }
            if steps == 400 {
                for i in 1000..5000 {
                    z.remove(format!("m{i}").as_bytes());
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            assert!(seen.contains(format!("m{i}").as_bytes()), "m{i} missed");
        }
        check(&z);
    }

    /// Ascending inserts fill their leaves; random ones leave them about two thirds
    /// full; either way the tree is shallow.
    #[test]
    fn the_tree_stays_full_and_shallow() {
        let mut z = large();
        for i in 0..100_000 {
            z.insert(format!("m{i}").as_bytes(), f64::from(i));
        }
        check(&z);
        let Repr::Large(l) = &z.repr else { panic!() };
        assert!(
            l.leaves.len() * LEAF < 100_000 * 102 / 100,
            "{} leaves",
            l.leaves.len()
        );
        assert!(l.height <= 3, "height {}", l.height);
        let mut z = large();
        let mut x: u64 = 1;
        for i in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            z.insert(format!("m{i}").as_bytes(), (x >> 40) as f64);
        }
        check(&z);
        let Repr::Large(l) = &z.repr else { panic!() };
        assert!(
            l.leaves.len() * LEAF < 100_000 * 2,
            "{} leaves",
            l.leaves.len()
        );
    }

    /// A tree three levels deep shrinks level by level (merges and refills of inner nodes
    /// too) back to a lone leaf, every invariant holding on the way.
    #[test]
    fn a_deep_tree_shrinks_through_every_level() {
        let mut z = large();
        let mut model = DeepModel::default();
        apply_bulk(&mut z, &mut model, &Bulk::Insert(0, 65535, -20));
        apply_bulk(&mut z, &mut model, &Bulk::Insert(7, 60000, 3));
        check(&z);
        let height = |z: &SortedSet| match &z.repr {
            Repr::Large(l) => l.height,
            Repr::Small(_) => 0,
        };
        assert!(height(&z) >= 2, "height {}", height(&z));
        for op in [
            Bulk::RemoveEvery(2),
            Bulk::Rescore(3, -7),
            Bulk::RemoveRanks(1000, 20000),
            Bulk::RemoveEvery(3),
            Bulk::RemoveScores(-20, 0),
            Bulk::RemoveRanks(0, 65535),
        ] {
            apply_bulk(&mut z, &mut model, &op);
            check(&z);
            assert_eq!(z.len(), model.order.len(), "{op:?}");
        }
        assert_eq!(z.len(), 0);
        assert_eq!(height(&z), 0);
    }

    #[test]
    fn a_shrunk_set_compacts_its_arena() {
        let mut z = large();
        for i in 0..10_000 {
            z.insert(format!("m{i}").as_bytes(), f64::from(i));
        }
        let big = z.heap_bytes();
        z.remove_ranks(0, 9_899);
        check(&z);
        assert_eq!(z.len(), 100);
        assert!(z.heap_bytes() * 10 < big, "{} of {big}", z.heap_bytes());
        assert_eq!(z.entry(z.first().unwrap()), (&b"m9900"[..], 9900.0));
    }

    #[test]
    fn store_destinations_take_the_form_their_size_calls_for() {
        let small: Vec<_> = (0..128)
            .map(|i| (format!("{i}").into_bytes(), -0.0))
            .collect();
        let z = SortedSet::from_entries(small.clone());
        assert_eq!(z.encoding(), "listpack");
        assert!(z.score(b"7").unwrap().is_sign_positive());
        let mut more = small;
        more.push((b"x".to_vec(), 1.0));
        let z = SortedSet::from_entries(more);
        assert_eq!(z.encoding(), "skiplist");
        assert!(z.score(b"7").unwrap().is_sign_negative());
        check(&z);
        let z = SortedSet::from_entries(vec![(vec![b'a'; 65], 1.0)]);
        assert_eq!(z.encoding(), "skiplist");
    }

    // --- property tests against a naive model ---

    /// The model: elements sorted by (score, member).
    #[derive(Default)]
    struct Model(Vec<(Vec<u8>, f64)>);

    impl Model {
        fn insert(&mut self, m: &[u8], s: f64) {
            if let Some(i) = self.0.iter().position(|(x, _)| x == m) {
                if self.0[i].1 == s {
                    return;
                }
                self.0.remove(i);
            }
            let at = self.0.partition_point(|(x, y)| before(*y, x, s, m));
            self.0.insert(at, (m.to_vec(), s));
        }
        fn remove(&mut self, m: &[u8]) -> Option<f64> {
            let i = self.0.iter().position(|(x, _)| x == m)?;
            Some(self.0.remove(i).1)
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, i8),
        Remove(u8),
        RemoveRanks(u8, u8),
        RemoveScores(i8, i8, bool, bool),
        RemoveLex(u8, u8, bool, bool),
    }

    fn member(i: u8) -> Vec<u8> {
        // Varied lengths, shared prefixes.
        format!("m{}", u32::from(i) * 7 % 1000).into_bytes()
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<u8>(), -20i8..20).prop_map(|(m, s)| Op::Insert(m, s)),
            2 => any::<u8>().prop_map(Op::Remove),
            1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::RemoveRanks(a / 4, b / 4)),
            1 => (-20i8..20, -20i8..20, any::<bool>(), any::<bool>())
                .prop_map(|(a, b, x, y)| Op::RemoveScores(a, b, x, y)),
            1 => (any::<u8>(), any::<u8>(), any::<bool>(), any::<bool>())
                .prop_map(|(a, b, x, y)| Op::RemoveLex(a, b, x, y)),
        ]
    }

    fn score_range(a: i8, b: i8, x: bool, y: bool) -> ScoreRange {
        ScoreRange {
            min: f64::from(a) / 2.0,
            max: f64::from(b) / 2.0,
            min_ex: x,
            max_ex: y,
        }
    }

    fn lex_bound(i: u8) -> LexBound {
        match i % 16 {
            0 => LexBound::Min,
            1 => LexBound::Max,
            _ => LexBound::Value(member(i)),
        }
    }

    fn lex_range(a: u8, b: u8, x: bool, y: bool) -> LexRange {
        let (min, max) = (lex_bound(a), lex_bound(b));
        LexRange {
            min_ex: x || matches!(min, LexBound::Min | LexBound::Max),
            max_ex: y || matches!(max, LexBound::Min | LexBound::Max),
            min,
            max,
        }
    }

    /// Reads a range from `start` by positions, forward or backward, while `inside`.
    fn walk(
        z: &SortedSet,
        start: Option<Pos>,
        reverse: bool,
        limit: usize,
        inside: impl Fn(&[u8], f64) -> bool,
    ) -> Vec<(Vec<u8>, f64)> {
        let mut out = Vec::new();
        let mut p = start;
        while let Some(pos) = p {
            let (m, s) = z.entry(pos);
            if out.len() == limit || !inside(m, s) {
                break;
            }
            out.push((m.to_vec(), s));
            p = if reverse { z.prev(pos) } else { z.next(pos) };
        }
        out
    }

    /// Checks every query against the model: scores, ranks, elements by rank, score
    /// and lex ranges (first, last, counts) in both directions with limits.
    fn agree(z: &SortedSet, model: &Model, probe: (i8, i8, u8, u8, u8)) {
        check(z);
        assert_eq!(z.len(), model.0.len());
        assert_eq!(elements(z), model.0);
        for (r, (m, s)) in model.0.iter().enumerate() {
            assert_eq!(z.score(m), Some(*s));
            assert_eq!(z.rank(m), Some(r));
            let p = z.at_rank(r).unwrap();
            assert_eq!(p.rank(), r);
            assert_eq!(z.entry(p), (m.as_slice(), *s));
        }
        assert_eq!(z.at_rank(model.0.len()), None);
        assert_eq!(z.rank(b"absent"), None);
        let (a, b, la, lb, limit) = probe;
        let limit = match limit % 8 {
            7 => usize::MAX,
            n => usize::from(n),
        };
        for (x, y) in [(false, false), (true, false), (false, true), (true, true)] {
            let range = score_range(a, b, x, y);
            let inside: Vec<_> = model
                .0
                .iter()
                .filter(|(_, s)| range.gte_min(*s) && range.lte_max(*s))
                .cloned()
                .collect();
            assert_eq!(z.count_in_score_range(&range), inside.len());
            let first = z.first_in_score_range(&range);
            let last = z.last_in_score_range(&range);
            assert_eq!(first.map(|p| p.rank()).is_some(), !inside.is_empty());
            let fwd = walk(z, first, false, limit, |_, s| range.lte_max(s));
            assert_eq!(fwd, inside.iter().take(limit).cloned().collect::<Vec<_>>());
            let rev = walk(z, last, true, limit, |_, s| range.gte_min(s));
            assert_eq!(
                rev,
                inside.iter().rev().take(limit).cloned().collect::<Vec<_>>()
            );
            // Lex ranges, on a model where every score is equal only: over members of
            // different scores the answer is Redis's unspecified one.
            let range = lex_range(la, lb, x, y);
            let same_score = model.0.windows(2).all(|w| w[0].1 == w[1].1);
            if same_score {
                let inside: Vec<_> = model
                    .0
                    .iter()
                    .filter(|(m, _)| range.gte_min(m) && range.lte_max(m))
                    .cloned()
                    .collect();
                assert_eq!(z.count_in_lex_range(&range), inside.len());
                let first = z.first_in_lex_range(&range);
                let fwd = walk(z, first, false, limit, |m, _| range.lte_max(m));
                assert_eq!(fwd, inside.iter().take(limit).cloned().collect::<Vec<_>>());
                let last = z.last_in_lex_range(&range);
                let rev = walk(z, last, true, limit, |m, _| range.gte_min(m));
                assert_eq!(
                    rev,
                    inside.iter().rev().take(limit).cloned().collect::<Vec<_>>()
                );
            }
        }
    }

    fn apply(z: &mut SortedSet, model: &mut Model, op: &Op, same_score: bool) {
        match *op {
            Op::Insert(m, s) => {
                let s = if same_score { 0.0 } else { f64::from(s) / 2.0 };
                let old = model.0.iter().find(|(x, _)| *x == member(m)).map(|e| e.1);
                assert_eq!(z.insert(&member(m), s), old);
                model.insert(&member(m), s);
            }
            Op::Remove(m) => assert_eq!(z.remove(&member(m)), model.remove(&member(m))),
            Op::RemoveRanks(a, b) => {
                let (a, b) = (usize::from(a), usize::from(b));
                let want = if a > b || a >= model.0.len() {
                    0
                } else {
                    let end = b.min(model.0.len() - 1);
                    model.0.drain(a..=end).count()
                };
                assert_eq!(z.remove_ranks(a, b), want);
            }
            Op::RemoveScores(a, b, x, y) => {
                let range = score_range(a, b, x, y);
                let before = model.0.len();
                model
                    .0
                    .retain(|(_, s)| !(range.gte_min(*s) && range.lte_max(*s)));
                assert_eq!(z.remove_score_range(&range), before - model.0.len());
            }
            Op::RemoveLex(a, b, x, y) => {
                let range = lex_range(a, b, x, y);
                if same_score {
                    let before = model.0.len();
                    model
                        .0
                        .retain(|(m, _)| !(range.gte_min(m) && range.lte_max(m)));
                    assert_eq!(z.remove_lex_range(&range), before - model.0.len());
                }
            }
        }
    }

    /// Bulk operations, to grow trees several levels deep and shrink them again.
    #[derive(Clone, Debug)]
    enum Bulk {
        /// Members `start..start + count`, scores in halves from `base` (many ties).
        Insert(u16, u16, i8),
        /// Every member of a stride, re-scored.
        Rescore(u16, i8),
        RemoveRanks(u16, u16),
        RemoveScores(i8, i8),
        RemoveEvery(u8),
    }

    fn bulk() -> impl Strategy<Value = Bulk> {
        prop_oneof![
            4 => (any::<u16>(), 0u16..6000, -20i8..20).prop_map(|(a, n, s)| Bulk::Insert(a, n, s)),
            1 => (1u16..50, -20i8..20).prop_map(|(k, s)| Bulk::Rescore(k, s)),
            2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Bulk::RemoveRanks(a / 4, b / 2)),
            1 => (-20i8..20, -20i8..20).prop_map(|(a, b)| Bulk::RemoveScores(a, b)),
            1 => (2u8..10).prop_map(Bulk::RemoveEvery),
        ]
    }

    /// The model of a deep set: (twice the score, member) in order, and member → score.
    #[derive(Default)]
    struct DeepModel {
        order: std::collections::BTreeSet<(i64, Vec<u8>)>,
        scores: std::collections::HashMap<Vec<u8>, i64>,
    }

    impl DeepModel {
        fn insert(&mut self, m: Vec<u8>, twice: i64) {
            if let Some(old) = self.scores.insert(m.clone(), twice) {
                self.order.remove(&(old, m.clone()));
            }
            self.order.insert((twice, m));
        }
        fn remove(&mut self, m: &[u8]) {
            if let Some(old) = self.scores.remove(m) {
                self.order.remove(&(old, m.to_vec()));
            }
        }
    }

    fn deep_member(i: u32) -> Vec<u8> {
        format!("{:x}", i.wrapping_mul(2654435761) % 65536).into_bytes()
    }

    fn apply_bulk(z: &mut SortedSet, model: &mut DeepModel, op: &Bulk) {
        match *op {
            Bulk::Insert(start, n, base) => {
                for i in 0..u32::from(n) {
                    let m = deep_member(u32::from(start) + i);
                    let twice = i64::from(base) + i64::from(i % 7);
                    z.insert(&m, twice as f64 / 2.0);
                    model.insert(m, twice);
                }
            }
            Bulk::Rescore(stride, base) => {
                let all: Vec<Vec<u8>> = model.scores.keys().cloned().collect();
                for (k, m) in all.into_iter().enumerate() {
                    if k % usize::from(stride) == 0 {
                        let twice = i64::from(base) + (k % 5) as i64;
                        z.insert(&m, twice as f64 / 2.0);
                        model.insert(m, twice);
                    }
                }
            }
            Bulk::RemoveRanks(a, b) => {
                let (a, b) = (usize::from(a), usize::from(b));
                let doomed: Vec<Vec<u8>> = model
                    .order
                    .iter()
                    .enumerate()
                    .filter(|(r, _)| *r >= a && *r <= b)
                    .map(|(_, (_, m))| m.clone())
                    .collect();
                assert_eq!(z.remove_ranks(a, b), doomed.len());
                doomed.iter().for_each(|m| model.remove(m));
            }
            Bulk::RemoveScores(a, b) => {
                let range = score_range(a, b, false, true);
                let doomed: Vec<Vec<u8>> = model
                    .order
                    .iter()
                    .filter(|(t, _)| {
                        range.gte_min(*t as f64 / 2.0) && range.lte_max(*t as f64 / 2.0)
                    })
                    .map(|(_, m)| m.clone())
                    .collect();
                assert_eq!(z.remove_score_range(&range), doomed.len());
                doomed.iter().for_each(|m| model.remove(m));
            }
            Bulk::RemoveEvery(k) => {
                let doomed: Vec<Vec<u8>> = model
                    .order
                    .iter()
                    .step_by(usize::from(k))
                    .map(|(_, m)| m.clone())
                    .collect();
                for m in &doomed {
                    assert!(z.remove(m).is_some());
                    model.remove(m);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Trees several levels deep (tens of thousands of members, many equal scores),
        /// grown and shrunk in bulk: structure checked after every operation, contents,
        /// ranks and positions against the model.
        #[test]
        fn deep_trees_agree_with_the_model(ops in prop::collection::vec(bulk(), 1..24)) {
            let mut z = large();
            let mut model = DeepModel::default();
            for op in &ops {
                apply_bulk(&mut z, &mut model, op);
                check(&z);
                prop_assert_eq!(z.len(), model.order.len());
            }
            let want: Vec<(Vec<u8>, f64)> =
                model.order.iter().map(|(t, m)| (m.clone(), *t as f64 / 2.0)).collect();
            prop_assert_eq!(elements(&z), want.clone());
            for (r, (m, s)) in want.iter().enumerate().step_by(97) {
                prop_assert_eq!(z.rank(m), Some(r));
                let p = z.at_rank(r).unwrap();
                prop_assert_eq!(z.entry(p), (m.as_slice(), *s));
                let back = walk(&z, Some(p), true, 300, |_, _| true);
                prop_assert_eq!(back.len(), (r + 1).min(300));
            }
            for a in (-20..20).step_by(7) {
                let range = score_range(a, a + 5, a % 2 == 0, false);
                let inside = want.iter().filter(|(_, s)| range.gte_min(*s) && range.lte_max(*s)).count();
                prop_assert_eq!(z.count_in_score_range(&range), inside);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Small sets (which turn large past 128 members) against the model.
        #[test]
        fn small_then_large_agrees_with_the_model(
            ops in prop::collection::vec(op(), 1..400),
            same_score in any::<bool>(),
            probe in (any::<i8>(), any::<i8>(), any::<u8>(), any::<u8>(), any::<u8>()),
        ) {
            let mut z = SortedSet::default();
            let mut model = Model::default();
            for op in &ops {
                apply(&mut z, &mut model, op, same_score);
            }
            let probe = (probe.0 % 21, probe.1 % 21, probe.2, probe.3, probe.4);
            agree(&z, &model, probe);
        }

        /// Large sets from the start, checked after every operation.
        #[test]
        fn large_agrees_with_the_model_at_every_step(
            ops in prop::collection::vec(op(), 1..150),
            same_score in any::<bool>(),
            probe in (any::<i8>(), any::<i8>(), any::<u8>(), any::<u8>(), any::<u8>()),
        ) {
            let mut z = large();
            let mut model = Model::default();
            let probe = (probe.0 % 21, probe.1 % 21, probe.2, probe.3, probe.4);
            for op in &ops {
                apply(&mut z, &mut model, op, same_score);
                agree(&z, &model, probe);
            }
        }
    }
}
