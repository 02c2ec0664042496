//! Lists: sequences of elements, pushed and popped at both ends.
//!
//! The representation is private to this module; what the rest of Goblin uses is the
//! API below (the contract every representation keeps: `len`, `push_front`, `push_back`,
//! `pop_front`, `pop_back`, `get`, `for_each`, `encoding`, `heap_bytes`; and what the
//! list commands need beside it: iterators from any index in both directions, `set`,
//! `insert`, `remove`, `trim_front`, `trim_back`).
//!
//! Redis's quicklist of listpacks is the model: a deque of **nodes**, each one packed
//! buffer of elements holding at most [`NODE_BYTES`] of them (`list-max-listpack-size
//! -2`); an element larger than that gets a node of its own. An element is packed as its
//! length (LEB128), its bytes, and its length again written backwards, so that a node
//! reads from either end: 2 bytes of overhead for an element under 128 bytes, no
//! allocation per element.
//!
//! A node keeps free room at both ends of its buffer (a gap buffer), so a push or a pop
//! at either end of the list moves no other element: O(1) amortized. Free room grows
//! geometrically up to the node limit and shrinks back when the node empties; a node that
//! stops being an end node (another node was pushed beyond it) is cut to its exact size.
//! Changes inside a node (LSET, LINSERT, LREM) rewrite that one node, at most 8 KiB,
//! exactly sized, splitting it when it outgrows the limit. An index is found by hopping
//! over whole nodes (by their counts) from the nearer end, then walking within one node.
//!
//! OBJECT ENCODING: redis-server 7.0 stores every list as a quicklist (7.2 introduced
//! small lists encoded as a single listpack), so [`List::encoding`] is always
//! `quicklist`, whatever the list's size or history.

use crate::leb128;
use std::collections::VecDeque;
use std::collections::vec_deque;
use std::fmt;
use std::iter::FusedIterator;
use std::ops::Range;

/// redis-server 7.0's `list-max-listpack-size`: -2 means nodes of at most 8 KiB.
pub const LISTPACK_SIZE: i64 = -2;

/// Bytes of packed elements a node holds at most: the 8 KiB that
/// `list-max-listpack-size -2` allows a listpack. A larger element gets a node of its own.
pub const NODE_BYTES: usize = 8192;

/// A list's only node whose buffer is larger than this and at most a quarter used gives
/// memory back.
const SHRINK_ABOVE: usize = 64;

/// Free bytes a node may keep when it stops being an end node: less than most elements
/// take, not worth copying the node for.
const SEAL_SLACK: usize = 64;

/// The buffer size a node grows to for at least `n` bytes: multiples of 16 up to 128,
/// then four sizes per doubling (jemalloc's size classes, which Redis's listpacks
/// grow through): each step adds about a quarter, so a push copies each byte a few
/// times at most and a node leaves at most a fifth of its buffer free.
fn size_class(n: usize) -> usize {
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    let log = usize::BITS - 1 - (n - 1).leading_zeros();
    let step = 1usize << (log - 2);
    n.div_ceil(step) * step
}

/// Bytes `element` takes packed: its length before and after its bytes.
fn packed_len(element: &[u8]) -> usize {
    element.len() + 2 * leb128::len(element.len())
}

/// Packs `element` into `dst`, which is exactly [`packed_len`] long.
fn pack(dst: &mut [u8], element: &[u8]) {
    let k = leb128::len(element.len());
    let last = dst.len() - 1;
    let mut n = element.len();
    for i in 0..k {
        let mut b = (n & 0x7f) as u8;
        n >>= 7;
        if i + 1 < k {
            b |= 0x80;
        }
        dst[i] = b;
        dst[last - i] = b;
    }
    dst[k..k + element.len()].copy_from_slice(element);
}

/// Reads a varint from bytes given in order, least significant group first: its value
/// and how many bytes it took.
fn read_varint(bytes: impl Iterator<Item = u8>) -> Option<(usize, usize)> {
    let mut n = 0usize;
    for (i, b) in bytes.enumerate() {
        let shift = 7 * i as u32;
        if shift >= usize::BITS {
            return None;
        }
        n |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some((n, i + 1));
        }
    }
    None
}

/// The element packed at `pos` in `b`: the range of its bytes, and where the next starts.
#[inline]
fn decode_at(b: &[u8], pos: usize) -> Option<(Range<usize>, usize)> {
    let first = *b.get(pos)?;
    let (n, k) = if first < 0x80 {
        (usize::from(first), 1)
    } else {
        read_varint(b.get(pos..)?.iter().copied())?
    };
    let start = pos + k;
    let end = start.checked_add(n)?;
    let next = end + k;
    (next <= b.len()).then_some((start..end, next))
}

/// The element packed just before `end` in `b`: the range of its bytes, and where it
/// starts (its first length byte).
#[inline]
fn decode_before(b: &[u8], end: usize) -> Option<(Range<usize>, usize)> {
    let last = *b.get(end.checked_sub(1)?)?;
    let (n, k) = if last < 0x80 {
        (usize::from(last), 1)
    } else {
        read_varint(b.get(..end)?.iter().rev().copied())?
    };
    let data_end = end - k;
    let data_start = data_end.checked_sub(n)?;
    let pos = data_start.checked_sub(k)?;
    Some((data_start..data_end, pos))
}

/// The elements packed in a byte slice, read from either end.
#[derive(Clone, Debug)]
struct Packed<'a> {
    bytes: &'a [u8],
    front: usize,
    back: usize,
}

impl<'a> Packed<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Packed {
            bytes,
            front: 0,
            back: bytes.len(),
        }
    }

    /// The next element's bytes as a range of the slice, and its packed range.
    fn next_span(&mut self) -> Option<(Range<usize>, Range<usize>)> {
        if self.front >= self.back {
            return None;
        }
        let (data, next) = decode_at(self.bytes, self.front)?;
        let packed = self.front..next;
        self.front = next;
        Some((data, packed))
    }

    /// The last element's bytes as a range of the slice, and its packed range.
    fn next_back_span(&mut self) -> Option<(Range<usize>, Range<usize>)> {
        if self.front >= self.back {
            return None;
        }
        let (data, pos) = decode_before(self.bytes, self.back)?;
        let packed = pos..self.back;
        self.back = pos;
        Some((data, packed))
    }
}

impl<'a> Iterator for Packed<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let (data, _) = self.next_span()?;
        self.bytes.get(data)
    }
}

impl<'a> DoubleEndedIterator for Packed<'a> {
    #[inline]
    fn next_back(&mut self) -> Option<&'a [u8]> {
        let (data, _) = self.next_back_span()?;
        self.bytes.get(data)
    }
}

/// A run of packed elements: a buffer with free room at both ends.
struct Node {
    buf: Box<[u8]>,
    head: usize,
    tail: usize,
    count: usize,
}

impl Node {
    /// A node holding exactly `bytes` (packed elements, `count` of them).
    fn from_packed(bytes: &[u8], count: usize) -> Node {
        Node {
            buf: bytes.into(),
            head: 0,
            tail: bytes.len(),
            count,
        }
    }

    /// A node of one element, exactly sized.
    fn single(element: &[u8]) -> Node {
        let mut buf = vec![0u8; packed_len(element)].into_boxed_slice();
        pack(&mut buf, element);
        let tail = buf.len();
        Node {
            buf,
            head: 0,
            tail,
            count: 1,
        }
    }

    /// A node of one element at an end of a list that already filled a node there: room
    /// for a quarter of a node at once, on the side pushes go (at the front or the back),
    /// so that a growing list grows each node in a few steps — not so much that a list
    /// whose length hovers at a node boundary allocates a whole node per push.
    fn first_of_many(element: &[u8], front: bool) -> Node {
        let need = packed_len(element);
        let cap = (NODE_BYTES / 4).max(need);
        let mut buf = vec![0u8; cap].into_boxed_slice();
        let head = if front { cap - need } else { 0 };
        pack(&mut buf[head..head + need], element);
        Node {
            buf,
            head,
            tail: head + need,
            count: 1,
        }
    }

    /// The packed elements.
    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.buf[self.head..self.tail]
    }

    fn used(&self) -> usize {
        self.tail - self.head
    }

    fn elements(&self) -> Packed<'_> {
        Packed::new(self.bytes())
    }

    /// Whether an element of `need` packed bytes may join the node.
    fn accepts(&self, need: usize) -> bool {
        self.used() + need <= NODE_BYTES
    }

    /// Makes `need` bytes of room at the front (or the back) of the buffer: moves the
    /// elements within it when there is room enough elsewhere to pay for the move,
    /// otherwise grows it (to the next [`size_class`], up to the node limit).
    fn reserve(&mut self, need: usize, front: bool) {
        let room = if front {
            self.head
        } else {
            self.buf.len() - self.tail
        };
        if room >= need {
            return;
        }
        let used = self.used();
        let free = self.buf.len() - used;
        if free >= need + used / 4 {
            // Room at the other end: split what is spare between the two ends.
            let spare = free - need;
            let head = if front {
                need + spare / 2
            } else {
                spare - spare / 2
            };
            self.buf.copy_within(self.head..self.tail, head);
            self.head = head;
            self.tail = head + used;
            return;
        }
        let cap = size_class(used + need).min(NODE_BYTES.max(used + need));
        let mut buf = vec![0u8; cap].into_boxed_slice();
        let head = if front { cap - used } else { 0 };
        buf[head..head + used].copy_from_slice(self.bytes());
        self.buf = buf;
        self.head = head;
        self.tail = head + used;
    }

    fn push_front(&mut self, element: &[u8], need: usize) {
        self.reserve(need, true);
        let at = self.head - need;
        pack(&mut self.buf[at..self.head], element);
        self.head = at;
        self.count += 1;
    }

    fn push_back(&mut self, element: &[u8], need: usize) {
        self.reserve(need, false);
        let at = self.tail;
        pack(&mut self.buf[at..at + need], element);
        self.tail = at + need;
        self.count += 1;
    }

    /// The first element.
    fn front(&self) -> Option<&[u8]> {
        self.elements().next()
    }

    /// The last element.
    fn back(&self) -> Option<&[u8]> {
        self.elements().next_back()
    }

    /// Drops the first `n` elements (at most all of them).
    fn drop_front(&mut self, n: usize) {
        let mut it = self.elements();
        let mut dropped = 0;
        while dropped < n && it.next_span().is_some() {
            dropped += 1;
        }
        self.head += it.front;
        self.count -= dropped;
    }

    /// Drops the last `n` elements (at most all of them).
    fn drop_back(&mut self, n: usize) {
        let mut it = self.elements();
        let mut dropped = 0;
        while dropped < n && it.next_back_span().is_some() {
            dropped += 1;
        }
        self.tail = self.head + it.back;
        self.count -= dropped;
    }

    /// Gives memory back when at most a quarter of a large buffer is used (half of it
    /// stays free, so pushes and pops at one size do not reallocate each time).
    fn shrink_if_sparse(&mut self) {
        let used = self.used();
        if self.buf.len() > SHRINK_ABOVE && used * 4 <= self.buf.len() {
            self.resize_to(used * 2);
        }
    }

    /// Cuts the buffer to the elements' exact size when more than a little of it is free
    /// (the node is no longer at an end of the list, where pushes go).
    fn seal(&mut self) {
        if self.buf.len() - self.used() > SEAL_SLACK {
            self.resize_to(self.used());
        }
    }

    /// Moves the elements into a buffer of `cap` bytes, with the free room split between
    /// the two ends.
    fn resize_to(&mut self, cap: usize) {
        let used = self.used();
        let cap = cap.max(used);
        let head = (cap - used) / 2;
        let mut buf = vec![0u8; cap].into_boxed_slice();
        buf[head..head + used].copy_from_slice(self.bytes());
        self.buf = buf;
        self.head = head;
        self.tail = head + used;
    }

    /// The packed range of element `k` within [`Node::bytes`], walking from the nearer
    /// end of the node.
    fn span(&self, k: usize) -> Option<Range<usize>> {
        let mut it = self.elements();
        if k < self.count / 2 {
            for _ in 0..k {
                it.next_span()?;
            }
            it.next_span().map(|(_, packed)| packed)
        } else {
            for _ in k + 1..self.count {
                it.next_back_span()?;
            }
            it.next_back_span().map(|(_, packed)| packed)
        }
    }

    /// The node with the packed bytes `range` replaced by `with` (packed elements whose
    /// number changes the count by `delta`): a new, exactly sized buffer.
    fn splice(&mut self, range: Range<usize>, with: &[u8], added: usize, removed: usize) {
        let old = self.bytes();
        let mut bytes = Vec::with_capacity(old.len() - range.len() + with.len());
        bytes.extend_from_slice(&old[..range.start]);
        bytes.extend_from_slice(with);
        bytes.extend_from_slice(&old[range.end..]);
        *self = Node::from_packed(&bytes, self.count + added - removed);
    }

    /// Whether the node is over the limit and holds more than one element.
    fn oversized(&self) -> bool {
        self.count > 1 && self.used() > NODE_BYTES
    }

    /// Cuts the node into nodes within the limit (each as full as it can be, in order).
    fn split(&self) -> Vec<Node> {
        let bytes = self.bytes();
        let mut out = Vec::new();
        let (mut start, mut count) = (0, 0);
        let mut it = self.elements();
        while let Some((_, packed)) = it.next_span() {
            if count > 0 && packed.end - start > NODE_BYTES {
                out.push(Node::from_packed(&bytes[start..packed.start], count));
                start = packed.start;
                count = 0;
            }
            count += 1;
        }
        if count > 0 {
            out.push(Node::from_packed(&bytes[start..], count));
        }
        out
    }
}

impl Clone for Node {
    /// A copy, exactly sized.
    fn clone(&self) -> Self {
        Node::from_packed(self.bytes(), self.count)
    }
}

/// Packs `element` into a new vector.
fn packed(element: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; packed_len(element)];
    pack(&mut v, element);
    v
}

/// A list.
#[derive(Clone, Default)]
pub struct List {
    nodes: VecDeque<Node>,
    len: usize,
}

impl List {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for one more node: a list of one node allocates room for one only.
    fn room_for_a_node(&mut self) {
        if self.nodes.capacity() == 0 {
            self.nodes.reserve_exact(1);
        }
    }

    /// Adds `element` at the head.
    pub fn push_front(&mut self, element: &[u8]) {
        let need = packed_len(element);
        match self.nodes.front_mut() {
            Some(node) if node.accepts(need) => node.push_front(element, need),
            Some(node) => {
                node.seal();
                self.nodes.push_front(Node::first_of_many(element, true));
            }
            None => {
                self.room_for_a_node();
                self.nodes.push_front(Node::single(element));
            }
        }
        self.len += 1;
    }

    /// Adds `element` at the tail.
    pub fn push_back(&mut self, element: &[u8]) {
        let need = packed_len(element);
        match self.nodes.back_mut() {
            Some(node) if node.accepts(need) => node.push_back(element, need),
            Some(node) => {
                node.seal();
                self.nodes.push_back(Node::first_of_many(element, false));
            }
            None => {
                self.room_for_a_node();
                self.nodes.push_back(Node::single(element));
            }
        }
        self.len += 1;
    }

    /// The head.
    pub fn front(&self) -> Option<&[u8]> {
        self.nodes.front()?.front()
    }

    /// The tail.
    pub fn back(&self) -> Option<&[u8]> {
        self.nodes.back()?.back()
    }

    /// Removes the head, giving it to `f` first (nothing is copied unless `f` copies).
    pub fn pop_front_with<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let node = self.nodes.front_mut()?;
        let r = f(node.front()?);
        node.drop_front(1);
        if node.count == 0 {
            self.nodes.pop_front();
        }
        self.len -= 1;
        self.shrink_if_sparse();
        Some(r)
    }

    /// Removes the tail, giving it to `f` first.
    pub fn pop_back_with<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let node = self.nodes.back_mut()?;
        let r = f(node.back()?);
        node.drop_back(1);
        if node.count == 0 {
            self.nodes.pop_back();
        }
        self.len -= 1;
        self.shrink_if_sparse();
        Some(r)
    }

    /// Removes and returns the head.
    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        self.pop_front_with(<[u8]>::to_vec)
    }

    /// Removes and returns the tail.
    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        self.pop_back_with(<[u8]>::to_vec)
    }

    /// Removes the first `n` elements (all of them when `n` is at least the length).
    pub fn trim_front(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let Some(node) = self.nodes.front_mut() else {
                break;
            };
            if node.count <= n {
                n -= node.count;
                self.nodes.pop_front();
            } else {
                node.drop_front(n);
                n = 0;
            }
        }
        self.shrink_if_sparse();
    }

    /// Removes the last `n` elements (all of them when `n` is at least the length).
    pub fn trim_back(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let Some(node) = self.nodes.back_mut() else {
                break;
            };
            if node.count <= n {
                n -= node.count;
                self.nodes.pop_back();
            } else {
                node.drop_back(n);
                n = 0;
            }
        }
        self.shrink_if_sparse();
    }

    /// Gives memory back when the list is down to one node that uses at most a quarter of
    /// its buffer (the end nodes of a longer list are emptied and dropped whole).
    fn shrink_if_sparse(&mut self) {
        if self.nodes.len() == 1
            && let Some(node) = self.nodes.front_mut()
        {
            node.shrink_if_sparse();
        }
    }

    /// The node holding element `index`, and the element's position in it: found by
    /// hopping over whole nodes from the nearer end.
    fn locate(&self, index: usize) -> Option<(usize, usize)> {
        if index >= self.len {
            return None;
        }
        if index < self.len / 2 {
            let mut skipped = 0;
            for (i, node) in self.nodes.iter().enumerate() {
                if index < skipped + node.count {
                    return Some((i, index - skipped));
                }
                skipped += node.count;
            }
        } else {
            let mut after = self.len;
            for (i, node) in self.nodes.iter().enumerate().rev() {
                let first = after - node.count;
                if index >= first {
                    return Some((i, index - first));
                }
                after = first;
            }
        }
        None
    }

    /// The element at `index` (0 is the head).
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        let (i, k) = self.locate(index)?;
        let node = &self.nodes[i];
        let span = node.span(k)?;
        let bytes = node.bytes();
        let (data, _) = decode_at(bytes, span.start)?;
        bytes.get(data)
    }

    /// Replaces the element at `index`; false when there is none.
    pub fn set(&mut self, index: usize, element: &[u8]) -> bool {
        let Some((i, k)) = self.locate(index) else {
            return false;
        };
        let Some(span) = self.nodes[i].span(k) else {
            return false;
        };
        self.nodes[i].splice(span, &packed(element), 1, 1);
        self.split_if_oversized(i);
        true
    }

    /// Inserts `element` so that it becomes element `index` (`index` at most the length).
    pub fn insert(&mut self, index: usize, element: &[u8]) {
        if index == 0 {
            return self.push_front(element);
        }
        if index >= self.len {
            return self.push_back(element);
        }
        let Some((i, k)) = self.locate(index) else {
            return;
        };
        let Some(span) = self.nodes[i].span(k) else {
            return;
        };
        self.nodes[i].splice(span.start..span.start, &packed(element), 1, 0);
        self.len += 1;
        self.split_if_oversized(i);
    }

    /// Splits node `i` when an insertion or a replacement took it over the limit.
    fn split_if_oversized(&mut self, i: usize) {
        if !self.nodes[i].oversized() {
            return;
        }
        let parts = self.nodes[i].split();
        self.nodes.remove(i);
        for (j, part) in parts.into_iter().enumerate() {
            self.nodes.insert(i + j, part);
        }
    }

    /// Removes elements equal to `element`: at most `limit` of them (0: all), the first
    /// ones from the head, or from the tail when `from_tail`. Returns how many went.
    pub fn remove(&mut self, element: &[u8], limit: usize, from_tail: bool) -> usize {
        let mut removed = 0;
        let order: Box<dyn Iterator<Item = usize>> = if from_tail {
            Box::new((0..self.nodes.len()).rev())
        } else {
            Box::new(0..self.nodes.len())
        };
        for i in order {
            let left = if limit == 0 {
                usize::MAX
            } else {
                limit - removed
            };
            if left == 0 {
                break;
            }
            let node = &self.nodes[i];
            let bytes = node.bytes();
            let matches = node.elements().filter(|e| *e == element).count();
            if matches == 0 {
                continue;
            }
            let take = matches.min(left);
            // Which matches go: the first `take`, or the last `take`.
            let skip = if from_tail { matches - take } else { 0 };
            let mut kept = Vec::with_capacity(bytes.len());
            let mut it = node.elements();
            let mut seen = 0;
            while let Some((data, packed)) = it.next_span() {
                if &bytes[data] == element {
                    seen += 1;
                    if seen > skip && seen <= skip + take {
                        continue;
                    }
                }
                kept.extend_from_slice(&bytes[packed]);
            }
            let count = node.count - take;
            self.nodes[i] = Node::from_packed(&kept, count);
            removed += take;
        }
        if removed > 0 {
            self.nodes.retain(|n| n.count > 0);
            self.len -= removed;
        }
        removed
    }

    /// The elements from the head to the tail (reversible).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            nodes: self.nodes.iter(),
            front: Packed::new(&[]),
            back: Packed::new(&[]),
            left: self.len,
        }
    }

    /// The elements from `index` to the tail (nothing when `index` is past the end).
    pub fn iter_from(&self, index: usize) -> Iter<'_> {
        let Some((i, k)) = self.locate(index) else {
            return Iter {
                nodes: self.nodes.range(0..0),
                front: Packed::new(&[]),
                back: Packed::new(&[]),
                left: 0,
            };
        };
        let node = &self.nodes[i];
        let mut front = node.elements();
        if let Some(span) = node.span(k) {
            front.front = span.start;
        }
        Iter {
            nodes: self.nodes.range(i + 1..),
            front,
            back: Packed::new(&[]),
            left: self.len - index,
        }
    }

    /// Calls `f` with every element, head to tail.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        for e in self.iter() {
            f(e);
        }
    }

    /// The encoding OBJECT ENCODING reports: redis-server 7.0 keeps every list as a
    /// `quicklist`.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// Heap bytes: the node table and the nodes' buffers.
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * size_of::<Node>()
            + self.nodes.iter().map(|n| n.buf.len()).sum::<usize>()
    }

    /// Number of nodes (for tests and memory reports).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
}

impl PartialEq for List {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for List {}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

impl<'a> FromIterator<&'a [u8]> for List {
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(iter: I) -> Self {
        let mut list = List::default();
        for e in iter {
            list.push_back(e);
        }
        list
    }
}

/// The elements of a [`List`] in order, from either end.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    nodes: vec_deque::Iter<'a, Node>,
    front: Packed<'a>,
    back: Packed<'a>,
    left: usize,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("count", &self.count)
            .field("used", &self.used())
            .field("capacity", &self.buf.len())
            .finish()
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        loop {
            if let Some(e) = self.front.next() {
                self.left -= 1;
                return Some(e);
            }
            match self.nodes.next() {
                Some(node) => self.front = node.elements(),
                None => {
                    let e = self.back.next();
                    if e.is_some() {
                        self.left -= 1;
                    }
                    return e;
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<'a> DoubleEndedIterator for Iter<'a> {
    fn next_back(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        loop {
            if let Some(e) = self.back.next_back() {
                self.left -= 1;
                return Some(e);
            }
            match self.nodes.next_back() {
                Some(node) => self.back = node.elements(),
                None => {
                    let e = self.front.next_back();
                    if e.is_some() {
                        self.left -= 1;
                    }
                    return e;
                }
            }
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl FusedIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl List {
        /// Checks the representation's invariants.
        fn check(&self) {
            let mut total = 0;
            for (i, node) in self.nodes.iter().enumerate() {
                assert!(node.count > 0, "node {i} is empty: {:?}", self.nodes);
                assert_eq!(node.elements().count(), node.count, "node {i}'s count");
                assert_eq!(
                    node.elements().rev().count(),
                    node.count,
                    "node {i} backwards"
                );
                assert!(
                    node.count == 1 || node.used() <= NODE_BYTES,
                    "node {i} over the limit: {node:?}"
                );
                assert!(node.head <= node.tail && node.tail <= node.buf.len());
                total += node.count;
            }
            assert_eq!(total, self.len);
        }
    }

    fn list(elements: &[&[u8]]) -> List {
        elements.iter().copied().collect()
    }

    fn all(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn size_classes_grow_by_a_quarter() {
        assert_eq!(size_class(1), 16);
        assert_eq!(size_class(128), 128);
        assert_eq!(size_class(129), 160);
        assert_eq!(size_class(130), 160);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 320);
        assert_eq!(size_class(8192), 8192);
        for n in 1..20_000 {
            let c = size_class(n);
            assert!(c >= n && c - n < 16.max(c / 4 + 1), "{n} -> {c}");
        }
    }

    #[test]
    fn packs_lengths_both_ways() {
        for n in [0usize, 1, 127, 128, 300, 16383, 16384, 70000, 2_000_000] {
            let e = vec![b'x'; n];
            let p = packed(&e);
            assert_eq!(p.len(), packed_len(&e));
            let (data, next) = decode_at(&p, 0).expect("decodes forwards");
            assert_eq!(
                (data.clone(), next),
                (leb128::len(n)..leb128::len(n) + n, p.len())
            );
            let (back, pos) = decode_before(&p, p.len()).expect("decodes backwards");
            assert_eq!((back, pos), (data, 0));
        }
        assert_eq!(packed_len(b"abc"), 5);
    }

    #[test]
    fn pushes_and_pops_at_both_ends() {
        let mut l = List::default();
        assert!(l.is_empty());
        l.push_back(b"b");
        l.push_front(b"a");
        l.push_back(b"c");
        assert_eq!(all(&l), [b"a", b"b", b"c"]);
        assert_eq!(l.len(), 3);
        assert_eq!(l.front(), Some(&b"a"[..]));
        assert_eq!(l.back(), Some(&b"c"[..]));
        assert_eq!(l.pop_back().as_deref(), Some(&b"c"[..]));
        assert_eq!(l.pop_front().as_deref(), Some(&b"a"[..]));
        assert_eq!(l.pop_front().as_deref(), Some(&b"b"[..]));
        assert_eq!(l.pop_front(), None);
        assert!(l.is_empty());
        l.check();
        assert_eq!(l.encoding(), "quicklist");
    }

    #[test]
    fn nodes_hold_at_most_eight_kib() {
        let mut l = List::default();
        for i in 0..10_000 {
            l.push_front(format!("element-{i}").as_bytes());
        }
        l.check();
        assert!(l.node_count() > 10, "{}", l.node_count());
        assert_eq!(l.get(0), Some(&b"element-9999"[..]));
        assert_eq!(l.get(9999), Some(&b"element-0"[..]));
        assert_eq!(l.get(5000), Some(&b"element-4999"[..]));
        assert_eq!(l.get(10_000), None);
        // A large element has a node of its own.
        let big = vec![b'x'; 20_000];
        l.push_back(&big);
        l.push_back(b"after");
        l.check();
        assert_eq!(l.get(10_000), Some(&big[..]));
        // Interior nodes are (nearly) exactly sized.
        let interior: Vec<&Node> = l.nodes.range(1..l.nodes.len() - 1).collect();
        assert!(
            interior
                .iter()
                .all(|n| n.buf.len() - n.used() <= SEAL_SLACK)
        );
        // The bytes per element stay small.
        let per = (l.heap_bytes() - 20_000) as f64 / 10_001.0;
        assert!(per < 16.0, "{per} bytes per element");
    }

    #[test]
    fn iterates_from_any_index_both_ways() {
        let elements: Vec<Vec<u8>> = (0..5000).map(|i| format!("{i}").into_bytes()).collect();
        let l: List = elements.iter().map(Vec::as_slice).collect();
        for start in [0, 1, 1000, 2499, 4999, 5000, 6000] {
            let got: Vec<&[u8]> = l.iter_from(start).collect();
            let want: Vec<&[u8]> = elements.iter().skip(start).map(Vec::as_slice).collect();
            assert_eq!(got, want, "from {start}");
            assert_eq!(l.iter_from(start).len(), want.len());
            let back: Vec<&[u8]> = l.iter_from(start).rev().collect();
            let want_back: Vec<&[u8]> = want.iter().rev().copied().collect();
            assert_eq!(back, want_back, "from {start}, reversed");
        }
        // Meeting in the middle.
        let mut it = l.iter();
        let mut n = 0;
        while it.next().is_some() {
            n += 1;
            if it.next_back().is_some() {
                n += 1;
            }
        }
        assert_eq!(n, 5000);
    }

    #[test]
    fn set_insert_remove_trim() {
        let mut l = list(&[b"a", b"b", b"c", b"b", b"d"]);
        assert!(l.set(1, b"B"));
        assert!(!l.set(5, b"x"));
        l.insert(0, b"0");
        l.insert(6, b"end");
        l.insert(3, b"mid");
        assert_eq!(
            all(&l),
            [&b"0"[..], b"a", b"B", b"mid", b"c", b"b", b"d", b"end"]
        );
        assert_eq!(l.remove(b"b", 0, false), 1);
        l.push_back(b"x");
        l.push_front(b"x");
        l.push_back(b"x");
        assert_eq!(l.remove(b"x", 1, true), 1);
        assert_eq!(all(&l)[0], b"x");
        assert_eq!(l.remove(b"x", 1, false), 1);
        assert_eq!(all(&l).last().map(Vec::as_slice), Some(&b"x"[..]));
        l.trim_front(2);
        l.trim_back(3);
        assert_eq!(all(&l), [&b"B"[..], b"mid", b"c"]);
        l.trim_back(10);
        assert!(l.is_empty());
        l.check();
    }

    #[test]
    fn large_replacements_split_their_node() {
        let mut l: List = (0..2000).map(|_| &b"0123456789"[..]).collect();
        let nodes = l.node_count();
        assert!(l.set(1000, &vec![b'y'; 9000]));
        l.check();
        assert!(l.node_count() > nodes);
        assert_eq!(l.get(1000).map(<[u8]>::len), Some(9000));
        for i in 0..100 {
            l.insert(500 + i, &vec![b'z'; 700]);
        }
        l.check();
        assert_eq!(l.len(), 2100);
    }

    #[test]
    fn queue_traffic_keeps_memory_bounded() {
        let mut l = List::default();
        for round in 0..50_000 {
            l.push_back(b"job-payload");
            if round % 10 != 0 {
                l.pop_front();
            }
        }
        l.check();
        for _ in 0..l.len() {
            l.pop_front();
        }
        assert!(l.is_empty());
        assert_eq!(l.node_count(), 0);
        let mut one = List::default();
        for _ in 0..1000 {
            one.push_back(b"x");
            one.pop_front();
            one.push_front(b"y");
            one.pop_back();
        }
        one.push_back(b"z");
        assert!(one.heap_bytes() < 128, "{}", one.heap_bytes());
    }

    #[test]
    fn clones_compare_by_elements() {
        let mut a = List::default();
        let mut b = List::default();
        for i in 0..3000 {
            a.push_back(format!("{i}").as_bytes());
        }
        for i in (0..3000).rev() {
            b.push_front(format!("{i}").as_bytes());
        }
        assert_eq!(a, b);
        let c = a.clone();
        assert_eq!(c, a);
        c.check();
        b.pop_back();
        assert_ne!(a, b);
        assert_eq!(format!("{:?}", list(&[b"a", b"b"])), r#"["a", "b"]"#);
    }

    /// One operation of the model test.
    #[derive(Clone, Debug)]
    enum Op {
        PushFront(Vec<u8>),
        PushBack(Vec<u8>),
        PopFront,
        PopBack,
        Set(usize, Vec<u8>),
        Insert(usize, Vec<u8>),
        Remove(Vec<u8>, usize, bool),
        TrimFront(usize),
        TrimBack(usize),
    }

    fn element() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => prop::collection::vec(prop::sample::select(vec![b'a', b'b', b'c']), 0..3),
            2 => prop::collection::vec(any::<u8>(), 0..300),
            1 => (100usize..12_000).prop_map(|n| vec![b'L'; n]),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => element().prop_map(Op::PushFront),
            6 => element().prop_map(Op::PushBack),
            3 => Just(Op::PopFront),
            3 => Just(Op::PopBack),
            2 => (any::<usize>(), element()).prop_map(|(i, e)| Op::Set(i, e)),
            2 => (any::<usize>(), element()).prop_map(|(i, e)| Op::Insert(i, e)),
            1 => (element(), 0usize..4, any::<bool>()).prop_map(|(e, n, t)| Op::Remove(e, n, t)),
            1 => (0usize..50).prop_map(Op::TrimFront),
            1 => (0usize..50).prop_map(Op::TrimBack),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any sequence of operations leaves the list equal to a `VecDeque` model, with
        /// its invariants intact.
        #[test]
        fn matches_a_deque(ops in prop::collection::vec(op(), 1..400)) {
            let mut l = List::default();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                match op {
                    Op::PushFront(e) => { l.push_front(&e); m.push_front(e); }
                    Op::PushBack(e) => { l.push_back(&e); m.push_back(e); }
                    Op::PopFront => prop_assert_eq!(l.pop_front(), m.pop_front()),
                    Op::PopBack => prop_assert_eq!(l.pop_back(), m.pop_back()),
                    Op::Set(i, e) => {
                        let i = if m.is_empty() { i % 2 } else { i % (m.len() + 1) };
                        let done = l.set(i, &e);
                        prop_assert_eq!(done, i < m.len());
                        if done { m[i] = e; }
                    }
                    Op::Insert(i, e) => {
                        let i = i % (m.len() + 1);
                        l.insert(i, &e);
                        m.insert(i, e);
                    }
                    Op::Remove(e, limit, from_tail) => {
                        let mut positions: Vec<usize> =
                            (0..m.len()).filter(|&j| m[j] == e).collect();
                        if from_tail { positions.reverse(); }
                        if limit > 0 { positions.truncate(limit); }
                        positions.sort_unstable();
                        for &j in positions.iter().rev() { m.remove(j); }
                        prop_assert_eq!(l.remove(&e, limit, from_tail), positions.len());
                    }
                    Op::TrimFront(n) => { l.trim_front(n); for _ in 0..n { m.pop_front(); } }
                    Op::TrimBack(n) => { l.trim_back(n); for _ in 0..n { m.pop_back(); } }
                }
                l.check();
                prop_assert_eq!(l.len(), m.len());
            }
            let got: Vec<Vec<u8>> = all(&l);
            let want: Vec<Vec<u8>> = m.iter().cloned().collect();
            prop_assert_eq!(&got, &want);
            let back: Vec<Vec<u8>> = l.iter().rev().map(<[u8]>::to_vec).collect();
            let want_back: Vec<Vec<u8>> = m.iter().rev().cloned().collect();
            prop_assert_eq!(back, want_back);
            for (i, e) in m.iter().enumerate() {
                prop_assert_eq!(l.get(i), Some(e.as_slice()));
            }
            if !m.is_empty() {
                let k = m.len() / 3;
                let from: Vec<Vec<u8>> = l.iter_from(k).map(<[u8]>::to_vec).collect();
                prop_assert_eq!(&from[..], &want[k..]);
            }
        }
    }
}
