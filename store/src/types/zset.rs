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
//! - **large** (`skiplist`): Redis's skiplist with spans (rank and range in O(log n + m)),
//!   its nodes in one arena linked by `u32` indexes, each node's levels and member in one
//!   allocation; and a member → node index: a chained hash table whose chains run through
//!   the nodes, so it costs a `u32` bucket and a `u32` link per member. Its buckets are
//!   what [`SortedSet::scan_step`] walks with Redis's reverse-binary cursor.
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
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use foldhash::fast::RandomState;

/// redis-server 7.0's `zset-max-listpack-entries`: more members make it a skiplist.
pub const LISTPACK_ENTRIES: usize = 128;
/// redis-server 7.0's `zset-max-listpack-value`: a longer member makes it a skiplist.
pub const LISTPACK_VALUE: usize = 64;

/// Levels a skiplist node has at most (Redis's `ZSKIPLIST_MAXLEVEL`).
const MAX_LEVEL: usize = 32;
/// No node: the end of a level, of the backward links, of a hash chain.
const NIL: u32 = u32::MAX;
/// The skiplist's header node: always the first node of the arena.
const HEAD: u32 = 0;
/// Bytes of one level in a node's data: its forward link and its span, `u32` each.
const LEVEL_BYTES: usize = 8;
/// Bytes a small entry costs beyond its member: the length before and after it, the score.
const ENTRY_OVERHEAD: usize = 10;
/// Fewest hash buckets a large set keeps (it has more than 128 members anyway).
const MIN_BUCKETS: usize = 16;
/// A large set's bucket array shrinks once fewer than one bucket in this many is used
/// (Redis's `HASHTABLE_MIN_FILL` of 10%).
const MIN_FILL: usize = 10;
/// The arena is compacted once fewer than one node in this many is in use (so a set that
/// shrank gives its memory back).
const ARENA_MIN_FILL: usize = 4;
/// Arenas smaller than this are never compacted.
const ARENA_COMPACT_FLOOR: usize = 1024;
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

/// A fresh seed for a skiplist's level generator: random per process, different per set.
fn level_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, AtomicOrdering::Relaxed);
    hasher().hash_one(n) | 1
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
    at: u32,
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
    /// The skiplist and the member index.
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

// --- the large form ---

/// A skiplist node in the arena. `data` holds its height, its levels (forward link and
/// span, `u32` each) and its member; the header's member is empty. A free node has empty
/// data and `next` links the free list.
#[derive(Clone, Debug)]
struct Node {
    score: f64,
    data: Box<[u8]>,
    /// The previous node at level 0 (`NIL` for the first).
    back: u32,
    /// The next node in its hash chain (or in the free list).
    next: u32,
}

fn rd(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

fn wr(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Redis's skiplist with spans, in an arena, and a chained hash index of its members.
#[derive(Clone, Debug)]
struct Large {
    nodes: Vec<Node>,
    /// Chain heads; a power of two of them.
    buckets: Box<[u32]>,
    /// Head of the free list.
    free: u32,
    len: u32,
    /// Levels in use (at least 1).
    level: u8,
    tail: u32,
    /// Bytes of the live nodes' data.
    bytes: usize,
    /// The level generator's state (xorshift).
    rng: u64,
}

impl Large {
    /// An empty skiplist with room for `capacity` members.
    fn new(capacity: usize) -> Large {
        let mut head = vec![0u8; 1 + MAX_LEVEL * LEVEL_BYTES];
        head[0] = MAX_LEVEL as u8;
        for i in 0..MAX_LEVEL {
            wr(&mut head, 1 + i * LEVEL_BYTES, NIL);
        }
        let mut nodes = Vec::with_capacity(capacity + 1);
        nodes.push(Node {
            score: 0.0,
            data: head.into_boxed_slice(),
            back: NIL,
            next: NIL,
        });
        Large {
            nodes,
            buckets: vec![NIL; bucket_count(capacity)].into_boxed_slice(),
            free: NIL,
            len: 0,
            level: 1,
            tail: NIL,
            bytes: 0,
            rng: level_seed(),
        }
    }

    fn node(&self, n: u32) -> &Node {
        &self.nodes[n as usize]
    }

    fn fwd(&self, n: u32, i: usize) -> u32 {
        rd(&self.node(n).data, 1 + i * LEVEL_BYTES)
    }

    fn span(&self, n: u32, i: usize) -> u32 {
        rd(&self.node(n).data, 5 + i * LEVEL_BYTES)
    }

    fn set_fwd(&mut self, n: u32, i: usize, v: u32) {
        wr(&mut self.nodes[n as usize].data, 1 + i * LEVEL_BYTES, v);
    }

    fn set_span(&mut self, n: u32, i: usize, v: u32) {
        wr(&mut self.nodes[n as usize].data, 5 + i * LEVEL_BYTES, v);
    }

    fn height(&self, n: u32) -> usize {
        usize::from(self.node(n).data[0])
    }

    fn member(&self, n: u32) -> &[u8] {
        let d = &self.node(n).data;
        &d[1 + usize::from(d[0]) * LEVEL_BYTES..]
    }

    fn score(&self, n: u32) -> f64 {
        self.node(n).score
    }

    fn first(&self) -> u32 {
        self.fwd(HEAD, 0)
    }

    /// Redis's `zslRandomLevel`: each further level with probability 1/4.
    fn random_level(&mut self) -> usize {
        let mut level = 1;
        loop {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if level >= MAX_LEVEL || (self.rng >> 48) & 0xFFFF >= 0x4000 {
                return level;
            }
            level += 1;
        }
    }

    // --- the member index ---

    fn bucket(&self, h: u64) -> usize {
        (h as usize) & (self.buckets.len() - 1)
    }

    /// The node of `member`, or `NIL`.
    fn find(&self, member: &[u8]) -> u32 {
        let mut n = self.buckets[self.bucket(hash(member))];
        while n != NIL {
            if self.member(n) == member {
                return n;
            }
            n = self.node(n).next;
        }
        NIL
    }

    fn index(&mut self, n: u32) {
        let b = self.bucket(hash(self.member(n)));
        self.nodes[n as usize].next = self.buckets[b];
        self.buckets[b] = n;
    }

    fn unindex(&mut self, n: u32) {
        let b = self.bucket(hash(self.member(n)));
        let after = self.node(n).next;
        if self.buckets[b] == n {
            self.buckets[b] = after;
            return;
        }
        let mut c = self.buckets[b];
        while c != NIL {
            let next = self.node(c).next;
            if next == n {
                self.nodes[c as usize].next = after;
                return;
            }
            c = next;
        }
    }

    /// Rebuilds the index with `size` buckets.
    fn rehash(&mut self, size: usize) {
        self.buckets = vec![NIL; size].into_boxed_slice();
        let mut n = self.first();
        while n != NIL {
            self.index(n);
            n = self.fwd(n, 0);
        }
    }

    // --- the arena ---

    fn alloc(&mut self, score: f64, member: &[u8]) -> u32 {
        let height = self.random_level();
        let mut data = Vec::with_capacity(1 + height * LEVEL_BYTES + member.len());
        data.push(height as u8);
        data.resize(1 + height * LEVEL_BYTES, 0);
        data.extend_from_slice(member);
        let data = data.into_boxed_slice();
        self.bytes += data.len();
        let node = Node {
            score,
            data,
            back: NIL,
            next: NIL,
        };
        if self.free == NIL {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        } else {
            let n = self.free;
            self.free = self.node(n).next;
            self.nodes[n as usize] = node;
            n
        }
    }

    fn release(&mut self, n: u32) {
        let free = self.free;
        let node = &mut self.nodes[n as usize];
        self.bytes -= node.data.len();
        node.data = Box::default();
        node.next = free;
        self.free = n;
    }

    // --- the skiplist (Redis's zsl* functions) ---

    /// Links the node `n` (allocated, with its score and member) into the skiplist
    /// (`zslInsert`).
    fn link(&mut self, n: u32) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let score = self.score(n);
        let top = usize::from(self.level);
        let mut x = HEAD;
        for i in (0..top).rev() {
            rank[i] = if i == top - 1 { 0 } else { rank[i + 1] };
            loop {
                let f = self.fwd(x, i);
                if f != NIL && before(self.score(f), self.member(f), score, self.member(n)) {
                    rank[i] += self.span(x, i);
                    x = f;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let level = self.height(n);
        if level > top {
            for i in top..level {
                rank[i] = 0;
                update[i] = HEAD;
                self.set_span(HEAD, i, self.len);
            }
            self.level = level as u8;
        }
        for i in 0..level {
            let u = update[i];
            self.set_fwd(n, i, self.fwd(u, i));
            self.set_fwd(u, i, n);
            self.set_span(n, i, self.span(u, i) - (rank[0] - rank[i]));
            self.set_span(u, i, rank[0] - rank[i] + 1);
        }
        for (i, &u) in update
            .iter()
            .enumerate()
            .take(usize::from(self.level))
            .skip(level)
        {
            self.set_span(u, i, self.span(u, i) + 1);
        }
        self.nodes[n as usize].back = if update[0] == HEAD { NIL } else { update[0] };
        let f0 = self.fwd(n, 0);
        if f0 == NIL {
            self.tail = n;
        } else {
            self.nodes[f0 as usize].back = n;
        }
        self.len += 1;
    }

    /// The last node at each level before `(score, member)`; returns the node after
    /// them at level 0.
    fn path(&self, score: f64, member: &[u8], update: &mut [u32; MAX_LEVEL]) -> u32 {
        let mut x = HEAD;
        for i in (0..usize::from(self.level)).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && before(self.score(f), self.member(f), score, member) {
                    x = f;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        self.fwd(x, 0)
    }

    /// Unlinks `x`, given the path to it (`zslDeleteNode`).
    fn unlink(&mut self, x: u32, update: &[u32; MAX_LEVEL]) {
        for (i, &u) in update.iter().enumerate().take(usize::from(self.level)) {
            if self.fwd(u, i) == x {
                self.set_span(u, i, self.span(u, i) + self.span(x, i) - 1);
                self.set_fwd(u, i, self.fwd(x, i));
            } else {
                self.set_span(u, i, self.span(u, i) - 1);
            }
        }
        let f0 = self.fwd(x, 0);
        let back = self.node(x).back;
        if f0 == NIL {
            self.tail = back;
        } else {
            self.nodes[f0 as usize].back = back;
        }
        while self.level > 1 && self.fwd(HEAD, usize::from(self.level) - 1) == NIL {
            self.level -= 1;
        }
        self.len -= 1;
    }

    fn insert(&mut self, member: &[u8], score: f64) {
        let n = self.alloc(score, member);
        self.link(n);
        self.index(n);
        if self.len as usize > self.buckets.len() {
            self.rehash(self.buckets.len() * 2);
        }
    }

    /// Gives `n` a new score (`zslUpdateScore`): in place when it keeps its place,
    /// else unlinked and linked again (keeping its height).
    fn update(&mut self, n: u32, score: f64) {
        let back = self.node(n).back;
        let f0 = self.fwd(n, 0);
        if (back == NIL || self.score(back) < score) && (f0 == NIL || self.score(f0) > score) {
            self.nodes[n as usize].score = score;
            return;
        }
        let mut update = [HEAD; MAX_LEVEL];
        self.path(self.score(n), self.member(n), &mut update);
        self.unlink(n, &update);
        self.nodes[n as usize].score = score;
        self.link(n);
    }

    /// Removes `n` from the skiplist and the index, and frees it.
    fn delete(&mut self, n: u32) {
        let mut update = [HEAD; MAX_LEVEL];
        self.path(self.score(n), self.member(n), &mut update);
        self.unlink(n, &update);
        self.unindex(n);
        self.release(n);
        self.shrink();
    }

    /// Removes the elements of ranks `start..=end` (1-based; `zslDeleteRangeByRank`).
    fn delete_ranks(&mut self, start: u32, end: u32) -> usize {
        let mut update = [HEAD; MAX_LEVEL];
        let mut traversed = 0u32;
        let mut x = HEAD;
        for i in (0..usize::from(self.level)).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && traversed + self.span(x, i) < start {
                    traversed += self.span(x, i);
                    x = f;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        traversed += 1;
        x = self.fwd(x, 0);
        let mut removed = 0;
        while x != NIL && traversed <= end {
            let next = self.fwd(x, 0);
            self.unlink(x, &update);
            self.unindex(x);
            self.release(x);
            removed += 1;
            traversed += 1;
            x = next;
        }
        self.shrink();
        removed
    }

    /// Gives memory back after removals: fewer buckets, and a compacted arena.
    fn shrink(&mut self) {
        let len = self.len as usize;
        if self.buckets.len() > MIN_BUCKETS && len * MIN_FILL < self.buckets.len() {
            self.rehash(bucket_count(len));
        }
        if self.nodes.len() > ARENA_COMPACT_FLOOR && len * ARENA_MIN_FILL < self.nodes.len() {
            let mut compact = Large::new(len);
            let mut n = self.first();
            while n != NIL {
                compact.insert(self.member(n), self.score(n));
                n = self.fwd(n, 0);
            }
            *self = compact;
        }
    }

    /// The 1-based rank of `n` (`zslGetRank`).
    fn rank_of(&self, n: u32) -> usize {
        let (score, member) = (self.score(n), self.member(n));
        let mut rank = 0usize;
        let mut x = HEAD;
        for i in (0..usize::from(self.level)).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL
                    && (self.score(f) < score
                        || (self.score(f) == score && self.member(f) <= member))
                {
                    rank += self.span(x, i) as usize;
                    x = f;
                } else {
                    break;
                }
            }
            if x == n {
                return rank;
            }
        }
        rank
    }

    /// The node of 1-based rank `rank` (`zslGetElementByRank`).
    fn at_rank(&self, rank: usize) -> u32 {
        let mut traversed = 0usize;
        let mut x = HEAD;
        for i in (0..usize::from(self.level)).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && traversed + self.span(x, i) as usize <= rank {
                    traversed += self.span(x, i) as usize;
                    x = f;
                } else {
                    break;
                }
            }
            if traversed == rank {
                return x;
            }
        }
        NIL
    }

    /// Goes forward from the header while `skip` holds for the next node at each level;
    /// returns the last node passed (the header when none) and its 1-based rank.
    fn walk(&self, skip: impl Fn(u32) -> bool) -> (u32, usize) {
        let mut rank = 0usize;
        let mut x = HEAD;
        for i in (0..usize::from(self.level)).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && skip(f) {
                    rank += self.span(x, i) as usize;
                    x = f;
                } else {
                    break;
                }
            }
        }
        (x, rank)
    }
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
                let n = l.find(member);
                (n != NIL).then(|| l.score(n))
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
                    let n = l.find(member);
                    if n != NIL {
                        l.update(n, score);
                    }
                }
            }
            return Ok(Added::Updated(score));
        }
        if flags.xx {
            return Ok(Added::Skipped);
        }
        if let Repr::Small(b) = &self.repr
            && (lp_count(b) + 1 > LISTPACK_ENTRIES || member.len() > LISTPACK_VALUE)
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
                let n = l.find(member);
                if n == NIL {
                    return None;
                }
                let score = l.score(n);
                l.delete(n);
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
            Repr::Large(l) => l.delete_ranks(start as u32 + 1, end as u32 + 1),
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
                    + l.nodes.capacity() * size_of::<Node>()
                    + l.bytes
                    + l.buckets.len() * size_of::<u32>()
                    + MAX_LEVEL * LEVEL_BYTES
            }
        }
    }

    /// A sorted set of `entries` (distinct members, no NaN score), in the form its size
    /// calls for: small when it has at most [`LISTPACK_ENTRIES`] members of at most
    /// [`LISTPACK_VALUE`] bytes — what Redis gives the destination of a STORE command.
    pub fn from_entries(mut entries: Vec<(Vec<u8>, f64)>) -> SortedSet {
        entries.sort_by(|a, b| order((&a.0, a.1), (&b.0, b.1)));
        let small = entries.len() <= LISTPACK_ENTRIES
            && entries.iter().all(|(m, _)| m.len() <= LISTPACK_VALUE);
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
    /// ZRANGESTORE by rank): large when `n` is past [`LISTPACK_ENTRIES`], else small (and
    /// [`SortedSet::add`] converts it as members come).
    pub fn for_size(n: usize) -> SortedSet {
        if n > LISTPACK_ENTRIES {
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
            }),
            Repr::Large(l) => {
                let n = l.first();
                (n != NIL).then_some(Pos { rank: 0, at: n })
            }
        }
    }

    /// The highest element.
    pub fn last(&self) -> Option<Pos> {
        let rank = self.len().checked_sub(1)?;
        match &self.repr {
            Repr::Small(b) => lp_last(b).map(|at| Pos {
                rank,
                at: at as u32,
            }),
            Repr::Large(l) => (l.tail != NIL).then_some(Pos { rank, at: l.tail }),
        }
    }

    /// The element after `p`.
    pub fn next(&self, p: Pos) -> Option<Pos> {
        let at = match &self.repr {
            Repr::Small(b) => lp_next(b, p.at as usize)? as u32,
            Repr::Large(l) => Some(l.fwd(p.at, 0)).filter(|&n| n != NIL)?,
        };
        Some(Pos {
            rank: p.rank + 1,
            at,
        })
    }

    /// The element before `p`.
    pub fn prev(&self, p: Pos) -> Option<Pos> {
        let at = match &self.repr {
            Repr::Small(b) => lp_prev(b, p.at as usize)? as u32,
            Repr::Large(l) => Some(l.node(p.at).back).filter(|&n| n != NIL)?,
        };
        Some(Pos {
            rank: p.rank.checked_sub(1)?,
            at,
        })
    }

    /// The member and score at `p`.
    pub fn entry(&self, p: Pos) -> (&[u8], f64) {
        match &self.repr {
            Repr::Small(b) => lp_entry(b, p.at as usize),
            Repr::Large(l) => (l.member(p.at), l.score(p.at)),
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
            }),
            Repr::Large(l) => {
                let n = l.at_rank(rank + 1);
                (n != NIL && n != HEAD).then_some(Pos { rank, at: n })
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
                let n = l.find(member);
                (n != NIL).then(|| l.rank_of(n).saturating_sub(1))
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
            Repr::Large(l) => {
                let (x, rank) = l.walk(|f| !range.gte_min(l.score(f)));
                let n = l.fwd(x, 0);
                if n == NIL {
                    return None;
                }
                Pos { rank, at: n }
            }
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
            Repr::Large(l) => {
                let (x, rank) = l.walk(|f| range.lte_max(l.score(f)));
                if x == HEAD {
                    return None;
                }
                Pos {
                    rank: rank - 1,
                    at: x,
                }
            }
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

    /// The first element in the lex `range`, found as Redis finds it (a scan of a small
    /// set, a walk of a skiplist; with members of different scores, what is found is
    /// Redis's unspecified answer).
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
            Repr::Large(l) => {
                let (x, rank) = l.walk(|f| !range.gte_min(l.member(f)));
                let n = l.fwd(x, 0);
                if n == NIL {
                    return None;
                }
                Pos { rank, at: n }
            }
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
            Repr::Large(l) => {
                let (x, rank) = l.walk(|f| range.lte_max(l.member(f)));
                if x == HEAD {
                    return None;
                }
                Pos {
                    rank: rank - 1,
                    at: x,
                }
            }
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
                let mut n = l.buckets[(cursor & mask) as usize];
                while n != NIL {
                    f(l.member(n), l.score(n));
                    n = l.node(n).next;
                }
                (cursor | !mask)
                    .reverse_bits()
                    .wrapping_add(1)
                    .reverse_bits()
            }
        }
    }
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

    /// Checks the skiplist's invariants: spans add up to ranks, backward links mirror
    /// forward ones, every node is indexed, the order is right.
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
        let mut ranks = std::collections::HashMap::new();
        let mut n = l.first();
        let mut r = 1usize;
        let mut prev = NIL;
        while n != NIL {
            ranks.insert(n, r);
            assert_eq!(l.node(n).back, prev);
            assert_eq!(l.find(l.member(n)), n);
            if prev != NIL {
                assert!(before(
                    l.score(prev),
                    l.member(prev),
                    l.score(n),
                    l.member(n)
                ));
            }
            prev = n;
            n = l.fwd(n, 0);
            r += 1;
        }
        assert_eq!(l.tail, prev);
        assert_eq!(ranks.len(), l.len as usize);
        for i in 0..usize::from(l.level) {
            let mut x = HEAD;
            let mut at = 0usize;
            loop {
                let f = l.fwd(x, i);
                let next = if f == NIL {
                    l.len as usize + 1
                } else {
                    ranks[&f]
                };
                if f != NIL {
                    assert_eq!(at + l.span(x, i) as usize, next, "level {i}");
                }
                if f == NIL {
                    break;
                }
                at = next;
                x = f;
            }
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
