//! The stream type, as Redis 7.0 keeps it: entries in listpacks ("nodes") keyed by the ID
//! of their first entry (Redis's radix tree of listpacks; here an ordered map), each node
//! starting with a *master entry* — the fields of its first entry — so that entries with
//! the same fields store only their values. Entries are laid out in the listpack exactly
//! as `streamAppendItem` lays them out (flags, ID deltas against the node's key, fields or
//! only values, the count of elements to walk back), deletions only mark an entry (the
//! node goes once nothing in it is live), and a node is closed under Redis's rules
//! (`stream-node-max-bytes`, `stream-node-max-entries`): the nodes are redis-server's,
//! which is what makes `~` trimming remove the same entries, the memory per entry
//! comparable, and the RDB form a copy.
//!
//! The stream's metadata — length, last ID, first ID, the greatest deleted ID, entries
//! ever added — and its consumer groups (last delivered ID, entries read, the pending
//! entries list, consumers with their own pending IDs) follow Redis 7.0's `stream` and
//! `streamCG`, with its estimate of a group's lag.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;

use super::listpack::{self as lp, Elem};

/// A stream entry's ID: milliseconds and a sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The greatest ID.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An ID.
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID (`None` after the greatest).
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            (self.ms != u64::MAX).then(|| StreamId::new(self.ms + 1, 0))
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (`None` before `0-0`).
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            (self.ms != 0).then(|| StreamId::new(self.ms - 1, u64::MAX))
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// Whether this is `0-0`.
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The 128-bit big-endian form (a node's key in an RDB file, a PEL entry's ID).
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// The ID of a 128-bit big-endian form.
    pub fn from_be_bytes(b: [u8; 16]) -> StreamId {
        let mut ms = [0u8; 8];
        let mut seq = [0u8; 8];
        ms.copy_from_slice(&b[..8]);
        seq.copy_from_slice(&b[8..]);
        StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An entry marked deleted.
const FLAG_DELETED: i64 = 1;
/// An entry with its node's master fields: only its values are stored.
const FLAG_SAMEFIELDS: i64 = 2;

/// When a node is closed: `stream-node-max-bytes` and `stream-node-max-entries`.
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    /// A node whose listpack would reach this many bytes is closed (0: no limit but
    /// the listpack's own).
    pub max_bytes: usize,
    /// A node holding this many entries, live or deleted, is closed (0: no limit).
    pub max_entries: i64,
}

impl Default for NodeLimits {
    fn default() -> NodeLimits {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

/// The largest listpack Redis makes (`STREAM_LISTPACK_MAX_SIZE`, 1 GiB).
const LISTPACK_MAX: usize = 1 << 30;
/// What a new node's listpack reserves (`STREAM_LISTPACK_MAX_PRE_ALLOCATE`).
const PREALLOCATE: usize = 4096;

/// An entry too large for a node (`ERR Elements are too large to be stored`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge;

/// An entry read out of a stream: its ID and its fields and values, alternating.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamEntry {
    /// The ID.
    pub id: StreamId,
    /// Field, value, field, value …
    pub fields: Vec<Vec<u8>>,
}

/// How a stream is trimmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// To at most this many entries.
    MaxLen(u64),
    /// Removing entries with IDs below this one.
    MinId(StreamId),
}

/// A pending entry of a group: delivered to a consumer, not acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// When it was last delivered (Unix ms).
    pub delivery_time: u64,
    /// How many times it was delivered.
    pub delivery_count: u64,
    /// The consumer that holds it.
    pub consumer: Vec<u8>,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// When it last did something (Unix ms).
    pub seen_time: u64,
    /// The IDs pending for it.
    pub pel: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// The logical count of entries read (`-1`: unknown).
    pub entries_read: i64,
    /// The pending entries.
    pub pel: BTreeMap<StreamId, Nack>,
    /// The consumers, by name.
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

/// `entries_read` when it is not known (`SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

impl Group {
    /// A group that last delivered `last_id`, having read `entries_read` entries.
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// The consumer `name`, created (seen at `now`) when absent; whether it was created.
    pub fn consumer(&mut self, name: &[u8], now: u64) -> (&mut Consumer, bool) {
        let created = !self.consumers.contains_key(name);
        let c = self
            .consumers
            .entry(name.to_vec())
            .or_insert_with(|| Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            });
        (c, created)
    }

    /// Acknowledges `id`: whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(nack) => {
                if let Some(c) = self.consumers.get_mut(&nack.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Deletes consumer `name`: how many entries it had pending (which go), or `None`.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Records the delivery of `id` to `consumer` at `time`, its `deliveries`-th: a new
    /// pending entry, or one that changes hands. Whether the consumer was created (seen
    /// at `time`).
    pub fn deliver(&mut self, id: StreamId, consumer: &[u8], time: u64, deliveries: u64) -> bool {
        let prior = self.pel.get(&id).map(|n| n.consumer.clone());
        if let Some(prior) = prior
            && prior != consumer
            && let Some(c) = self.consumers.get_mut(&prior)
        {
            c.pel.remove(&id);
        }
        let nack = self.pel.entry(id).or_insert_with(|| Nack {
            delivery_time: time,
            delivery_count: deliveries,
            consumer: consumer.to_vec(),
        });
        nack.delivery_time = time;
        nack.delivery_count = deliveries;
        nack.consumer = consumer.to_vec();
        let (c, created) = self.consumer(consumer, time);
        c.pel.insert(id);
        created
    }

    fn heap_bytes(&self) -> usize {
        let pel = self
            .pel
            .values()
            .map(|n| 64 + n.consumer.len())
            .sum::<usize>();
        let consumers = self
            .consumers
            .iter()
            .map(|(name, c)| 64 + name.len() + c.pel.len() * 24)
            .sum::<usize>();
        96 + pel + consumers
    }
}

/// A stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    /// Nodes by the ID of their master entry: listpacks.
    nodes: BTreeMap<StreamId, Vec<u8>>,
    /// Live entries.
    pub length: u64,
    /// The greatest ID ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The first live entry's ID (`0-0` when empty).
    pub first_id: StreamId,
    /// The greatest ID deleted (XDEL).
    pub max_deleted: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// The consumer groups, by name.
    pub groups: BTreeMap<Vec<u8>, Group>,
}

/// A node's master entry.
struct Master<'a> {
    count: i64,
    deleted: i64,
    fields: Vec<Elem<'a>>,
    /// The position of the first entry (`None`: none).
    first_entry: Option<usize>,
}

/// Reads a node's master entry; `None` when the listpack is not a stream node.
fn master(node: &[u8]) -> Option<Master<'_>> {
    let p = lp::first(node)?;
    let count = lp::get(node, p).as_int()?;
    let p = lp::next(node, p)?;
    let deleted = lp::get(node, p).as_int()?;
    let mut p = lp::next(node, p)?;
    let n = lp::get(node, p).as_int()?;
    let mut fields = Vec::with_capacity(usize::try_from(n).ok()?.min(1024));
    for _ in 0..n {
        p = lp::next(node, p)?;
        fields.push(lp::get(node, p));
    }
    p = lp::next(node, p)?; // The zero terminator.
    Some(Master {
        count,
        deleted,
        fields,
        first_entry: lp::next(node, p),
    })
}

/// A node's live and deleted counts (the master entry's first two elements).
fn counts(node: &[u8]) -> Option<(i64, i64)> {
    let p = lp::first(node)?;
    let live = lp::get(node, p).as_int()?;
    let deleted = lp::get(node, lp::next(node, p)?).as_int()?;
    Some((live, deleted))
}

/// Whether `fields` (field, value, …) has exactly the node's master fields, in order —
/// read in place.
fn same_fields(node: &[u8], fields: &[&[u8]]) -> Option<bool> {
    let mut p = lp::next(node, lp::next(node, lp::first(node)?)?)?;
    let n = lp::get(node, p).as_int()?;
    if n != (fields.len() / 2) as i64 {
        return Some(false);
    }
    for f in fields.iter().step_by(2) {
        p = lp::next(node, p)?;
        if !lp::get(node, p).eq_bytes(f) {
            return Some(false);
        }
    }
    Some(true)
}

/// An entry of a node, decoded.
struct Decoded {
    id: StreamId,
    flags: i64,
    /// The positions of its fields and values, alternating (a field `None`: the
    /// master's field at the same index).
    at: usize,
    /// The position after its lp-count (`None`: the last).
    next: Option<usize>,
}

/// Decodes the entry whose flags are at `p`; `fields`, when given, receives its fields
/// and values.
fn decode(
    node: &[u8],
    p: usize,
    key: StreamId,
    master: &Master<'_>,
    fields: Option<&mut Vec<Vec<u8>>>,
) -> Option<Decoded> {
    let flags = lp::get(node, p).as_int()?;
    let mut q = lp::next(node, p)?;
    let ms = lp::get(node, q).as_int()?;
    q = lp::next(node, q)?;
    let seq = lp::get(node, q).as_int()?;
    q = lp::next(node, q)?;
    let id = StreamId::new(
        key.ms.wrapping_add(ms as u64),
        key.seq.wrapping_add(seq as u64),
    );
    let same = flags & FLAG_SAMEFIELDS != 0;
    let n = if same {
        master.fields.len()
    } else {
        let n = usize::try_from(lp::get(node, q).as_int()?).ok()?;
        q = lp::next(node, q)?;
        n
    };
    match fields {
        Some(out) => {
            out.clear();
            for i in 0..n {
                if same {
                    out.push(master.fields.get(i)?.to_vec());
                } else {
                    out.push(lp::get(node, q).to_vec());
                    q = lp::next(node, q)?;
                }
                out.push(lp::get(node, q).to_vec());
                q = lp::next(node, q)?;
            }
        }
        None => {
            let skip = if same { n } else { 2 * n };
            for _ in 0..skip {
                q = lp::next(node, q)?;
            }
        }
    }
    // `q` is the lp-count.
    Some(Decoded {
        id,
        flags,
        at: p,
        next: lp::next(node, q),
    })
}

/// A node's entries from the last to the first, by their lp-counts: each entry ends with
/// the number of elements before its lp-count, so the walk steps back over one entry at
/// a time without reading the node from its start.
struct Backwards<'a> {
    node: &'a [u8],
    /// The first entry's position: the walk stops before the master entry.
    first: Option<usize>,
    /// The next entry's lp-count (or the master entry's terminator once done).
    at: Option<usize>,
}

impl<'a> Backwards<'a> {
    fn new(node: &'a [u8], m: &Master<'_>) -> Backwards<'a> {
        Backwards {
            node,
            first: m.first_entry,
            at: lp::last(node),
        }
    }

    /// The position of the next entry's flags, going backwards.
    fn next_entry(&mut self) -> Option<usize> {
        let first = self.first?;
        let at = self.at.filter(|&at| at > first)?;
        let count = lp::get(self.node, at).as_int()?;
        let mut p = at;
        for _ in 0..count {
            p = lp::prev(self.node, p)?;
        }
        if p < first {
            return None;
        }
        self.at = lp::prev(self.node, p);
        Some(p)
    }
}

impl Stream {
    /// The encoding OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    /// Whether the stream has no entries. (An empty stream is still a key: streams are
    /// not deleted when emptied.)
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// How many nodes hold the entries (XINFO STREAM's `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Freeing's effort ([`super::Value::free_effort`]): the nodes, and each group with
    /// as many pending entries as the first one has (Redis's estimate).
    pub fn free_effort(&self) -> usize {
        let pending = self.groups.values().next().map_or(0, |g| g.pel.len());
        self.nodes.len() + self.groups.len() * (1 + pending)
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        let nodes: usize = self.nodes.values().map(|n| n.capacity() + 48).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| name.len() + g.heap_bytes())
            .sum();
        96 + nodes + groups
    }

    /// Adds an entry with ID `id` (greater than [`Stream::last_id`]: the caller checks)
    /// and `fields` (field, value, …), under `limits`. `Err` when the entry is too large
    /// for a node (`ERR Elements are too large to be stored`).
    pub fn add(
        &mut self,
        id: StreamId,
        fields: &[&[u8]],
        limits: NodeLimits,
    ) -> Result<(), TooLarge> {
        let total: usize = fields.iter().map(|f| f.len()).sum();
        if total > LISTPACK_MAX {
            return Err(TooLarge);
        }
        let numfields = (fields.len() / 2) as i64;
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > LISTPACK_MAX {
            LISTPACK_MAX
        } else {
            limits.max_bytes
        };
        // The tail node, unless it is full.
        let mut tail = self.nodes.iter_mut().next_back();
        if let Some((_, node)) = &tail {
            let full = if node.len() + total >= max_bytes {
                true
            } else if limits.max_entries > 0 {
                let (live, deleted) = counts(node).unwrap_or((0, 0));
                live + deleted >= limits.max_entries
            } else {
                false
            };
            if full {
                if let Some((_, node)) = tail.as_mut() {
                    node.shrink_to_fit();
                }
                tail = None;
            }
        }
        let mut flags = 0;
        let (key, node) = match tail {
            Some((&key, node)) => {
                // One more live entry; are its fields the master's?
                let same = same_fields(node, fields).ok_or(TooLarge)?;
                let count = lp::get_int(node, lp::HEADER);
                lp::replace_int(node, lp::HEADER, count + 1);
                if same {
                    flags |= FLAG_SAMEFIELDS;
                }
                (key, node)
            }
            None => {
                let mut node = Vec::with_capacity(PREALLOCATE.min(max_bytes));
                node.extend_from_slice(&lp::new());
                lp::append_int(&mut node, 1);
                lp::append_int(&mut node, 0);
                lp::append_int(&mut node, numfields);
                for f in fields.iter().step_by(2) {
                    lp::append_str(&mut node, f);
                }
                lp::append_int(&mut node, 0);
                flags |= FLAG_SAMEFIELDS;
                let node = self.nodes.entry(id).or_insert(node);
                (id, node)
            }
        };
        lp::append_int(node, flags);
        lp::append_int(node, id.ms.wrapping_sub(key.ms) as i64);
        lp::append_int(node, id.seq.wrapping_sub(key.seq) as i64);
        let same = flags & FLAG_SAMEFIELDS != 0;
        if !same {
            lp::append_int(node, numfields);
        }
        for pair in fields.chunks_exact(2) {
            if !same {
                lp::append_str(node, pair[0]);
            }
            lp::append_str(node, pair[1]);
        }
        let lp_count = if same {
            numfields + 3
        } else {
            numfields + 3 + numfields + 1
        };
        lp::append_int(node, lp_count);
        self.length += 1;
        self.entries_added = self.entries_added.wrapping_add(1);
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(())
    }

    /// The live entries with IDs in `start..=end`, in order (`rev`: from the end), at most
    /// `count` of them (`0`: all).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
    ) -> Vec<StreamEntry> {
        let mut out = Vec::new();
        self.walk(start, end, rev, true, |id, fields| {
            out.push(StreamEntry {
                id,
                fields: std::mem::take(fields),
            });
            count == 0 || out.len() < count
        });
        out
    }

    /// Whether a live entry has ID `id`.
    pub fn contains(&self, id: StreamId) -> bool {
        let mut found = false;
        self.walk(id, id, false, false, |_, _| {
            found = true;
            false
        });
        found
    }

    /// The entry `id`, if live.
    pub fn get(&self, id: StreamId) -> Option<StreamEntry> {
        self.range(id, id, false, 1).pop()
    }

    /// Calls `f` with each live entry in `start..=end` (its fields when `with_fields`)
    /// until it answers false.
    fn walk(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        with_fields: bool,
        mut f: impl FnMut(StreamId, &mut Vec<Vec<u8>>) -> bool,
    ) {
        if start > end {
            return;
        }
        let mut fields = Vec::new();
        if !rev {
            let before = self.nodes.range(..=start).next_back();
            let after = self
                .nodes
                .range((Bound::Excluded(start), Bound::Included(end)));
            for (&key, node) in before.into_iter().chain(after) {
                let Some(m) = master(node) else { continue };
                let mut p = m.first_entry;
                while let Some(at) = p {
                    // Entries before the range are skipped without reading their
                    // fields.
                    let Some(d) = decode(node, at, key, &m, None) else {
                        break;
                    };
                    p = d.next;
                    if d.id > end {
                        return;
                    }
                    if d.id < start || d.flags & FLAG_DELETED != 0 {
                        continue;
                    }
                    if with_fields && decode(node, at, key, &m, Some(&mut fields)).is_none() {
                        break;
                    }
                    if !f(d.id, &mut fields) {
                        return;
                    }
                }
            }
        } else {
            for (&key, node) in self.nodes.range(..=end).rev() {
                let Some(m) = master(node) else { continue };
                let mut back = Backwards::new(node, &m);
                while let Some(at) = back.next_entry() {
                    let Some(d) = decode(node, at, key, &m, None) else {
                        break;
                    };
                    if d.id < start {
                        return;
                    }
                    if d.id > end || d.flags & FLAG_DELETED != 0 {
                        continue;
                    }
                    if with_fields && decode(node, at, key, &m, Some(&mut fields)).is_none() {
                        break;
                    }
                    if !f(d.id, &mut fields) {
                        return;
                    }
                }
            }
        }
    }

    /// The first (or last) live entry's ID; `None` when empty.
    pub fn edge(&self, first: bool) -> Option<StreamId> {
        let mut found = None;
        self.walk(StreamId::MIN, StreamId::MAX, !first, false, |id, _| {
            found = Some(id);
            false
        });
        found
    }

    /// The first (or last) entry: XINFO STREAM's `first-entry`/`last-entry`.
    pub fn edge_entry(&self, first: bool) -> Option<StreamEntry> {
        self.range(StreamId::MIN, StreamId::MAX, !first, 1).pop()
    }

    /// Marks entry `id` deleted: whether it was live. The node goes with its last live
    /// entry.
    fn delete_one(&mut self, id: StreamId) -> bool {
        let Some((&key, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let Some(m) = master(node) else { return false };
        let (count, deleted) = (m.count, m.deleted);
        let mut p = m.first_entry;
        let mut found = None;
        while let Some(at) = p {
            let Some(d) = decode(node, at, key, &m, None) else {
                break;
            };
            if d.id == id {
                if d.flags & FLAG_DELETED == 0 {
                    found = Some((d.at, d.flags));
                }
                break;
            }
            if d.id > id {
                break;
            }
            p = d.next;
        }
        let Some((at, flags)) = found else {
            return false;
        };
        if count == 1 {
            self.nodes.remove(&key);
        } else {
            lp::replace_int(node, at, flags | FLAG_DELETED);
            set_counts(node, count - 1, deleted + 1);
        }
        self.length -= 1;
        true
    }

    /// XDEL: deletes the live entries among `ids`, updating the greatest deleted ID and
    /// the first ID as Redis 7.0 does; how many were deleted.
    pub fn delete(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_entry = false;
        for &id in ids {
            if self.delete_one(id) {
                if id == self.first_id {
                    first_entry = true;
                }
                if id > self.max_deleted {
                    self.max_deleted = id;
                }
                deleted += 1;
            }
        }
        if deleted > 0 {
            if self.length == 0 {
                self.first_id = StreamId::MIN;
            } else if first_entry {
                self.first_id = self.edge(true).unwrap_or(StreamId::MAX);
            }
        }
        deleted
    }

    /// Trims the stream as `streamTrim` does: whole nodes from the head; then, unless
    /// `approx`, entries inside the next node; with `approx`, at most `limit` entries
    /// (`0`: no limit). How many entries were removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: i64) -> u64 {
        let mut deleted: i64 = 0;
        loop {
            if let Trim::MaxLen(max) = how
                && self.length <= max
            {
                break;
            }
            let Some((&key, node)) = self.nodes.iter_mut().next() else {
                break;
            };
            let Some((entries, _)) = counts(node) else {
                break;
            };
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let remove_node = match how {
                Trim::MaxLen(max) => self.length.saturating_sub(entries as u64) >= max,
                Trim::MinId(min) => {
                    // The node's last entry, deleted or not.
                    let Some(m) = master(node) else { break };
                    let last = Backwards::new(node, &m)
                        .next_entry()
                        .and_then(|at| decode(node, at, key, &m, None))
                        .map_or(key, |d| d.id);
                    last < min
                }
            };
            if remove_node {
                self.nodes.remove(&key);
                self.length -= entries as u64;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            // Mark entries inside this node.
            let Some(m) = master(node) else { break };
            let marked = m.deleted;
            let mut positions = Vec::new();
            let mut p = m.first_entry;
            let mut length = self.length;
            while let Some(at) = p {
                let Some(d) = decode(node, at, key, &m, None) else {
                    break;
                };
                let stop = match how {
                    Trim::MaxLen(max) => length <= max,
                    Trim::MinId(min) => d.id >= min,
                };
                if stop {
                    break;
                }
                if d.flags & FLAG_DELETED == 0 {
                    positions.push((d.at, d.flags));
                    length -= 1;
                }
                p = d.next;
            }
            let from_node = positions.len() as i64;
            // Rewrite from the last so earlier positions stay valid.
            for &(at, flags) in positions.iter().rev() {
                lp::replace_int(node, at, flags | FLAG_DELETED);
            }
            set_counts(node, entries - from_node, marked + from_node);
            self.length = length;
            deleted += from_node;
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else {
            self.first_id = self.edge(true).unwrap_or(StreamId::MAX);
        }
        deleted as u64
    }

    /// Whether a deleted entry may lie in `start..=end` (`streamRangeHasTombstones`).
    pub fn range_has_tombstones(&self, start: Option<StreamId>, end: Option<StreamId>) -> bool {
        if self.length == 0 || self.max_deleted.is_zero() {
            return false;
        }
        // The last deletion came before the first entry left.
        if self.first_id > self.max_deleted {
            return false;
        }
        let start = start.unwrap_or(StreamId::MIN);
        let end = end.unwrap_or(StreamId::MAX);
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// The logical number of entries up to `id` (`streamEstimateDistanceFromFirstEverEntry`);
    /// `None` when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        // (Counters read from a file may be anything: C's unsigned arithmetic, as Redis.)
        let first = self.entries_added.wrapping_sub(self.length);
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return Some(self.entries_added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            match id.cmp(&self.first_id) {
                std::cmp::Ordering::Less => return Some(first),
                std::cmp::Ordering::Equal => return Some(first.wrapping_add(1)),
                std::cmp::Ordering::Greater => {}
            }
        }
        None
    }

    /// A group's lag (`None`: unknown), as XINFO GROUPS reports it.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_UNKNOWN
            && !self.range_has_tombstones(Some(g.last_id), None)
        {
            return Some((self.entries_added as i64).wrapping_sub(g.entries_read));
        }
        self.estimate_distance(g.last_id)
            .map(|read| (self.entries_added as i64).wrapping_sub(read as i64))
    }

    /// Advances group `name` past the delivered entry `id` (its last ID and entries read,
    /// as `streamReplyWithRange` does).
    pub fn advance_group(&mut self, name: &[u8], id: StreamId) {
        let tombstones = self.range_has_tombstones(Some(id), None);
        let estimate = self.estimate_distance(id);
        let added = self.entries_added;
        let Some(g) = self.groups.get_mut(name) else {
            return;
        };
        if id > g.last_id {
            if g.entries_read != ENTRIES_READ_UNKNOWN && !tombstones {
                g.entries_read = g.entries_read.saturating_add(1);
            } else if added > 0 {
                g.entries_read = estimate.map_or(ENTRIES_READ_UNKNOWN, |n| n as i64);
            }
            g.last_id = id;
        }
    }

    /// The nodes, as RDB keys and listpacks.
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, &[u8])> {
        self.nodes.iter().map(|(k, v)| (*k, v.as_slice()))
    }

    /// Adds a node read from a file; `Err` when the listpack is not a well-formed stream
    /// node (every entry decodable, IDs in order, the counts right) or overlaps the
    /// nodes before it.
    pub fn load_node(&mut self, key: StreamId, node: Vec<u8>) -> Result<(), &'static str> {
        if !lp::validate(&node) {
            return Err("a malformed listpack in a stream");
        }
        let m = master(&node).ok_or("a stream node without its master entry")?;
        if m.count < 0 || m.deleted < 0 {
            return Err("a stream node with negative counts");
        }
        if let Some((&last_key, _)) = self.nodes.iter().next_back()
            && last_key >= key
        {
            return Err("stream nodes out of order");
        }
        let (mut live, mut dead) = (0i64, 0i64);
        let mut p = m.first_entry;
        let mut prev: Option<StreamId> = None;
        let mut fields = Vec::new();
        let mut positions = Vec::new();
        while let Some(at) = p {
            positions.push(at);
            let d = decode(&node, at, key, &m, Some(&mut fields))
                .ok_or("a stream entry that does not decode")?;
            if prev.is_some_and(|p| p >= d.id) || d.id < key {
                return Err("stream entries out of order");
            }
            prev = Some(d.id);
            if d.flags & FLAG_DELETED != 0 {
                dead += 1;
            } else {
                live += 1;
            }
            p = d.next;
        }
        if live != m.count || dead != m.deleted {
            return Err("a stream node whose counts do not match its entries");
        }
        // Walked backwards by the entries' lp-counts, the node has the same entries.
        let mut back = Backwards::new(&node, &m);
        let mut backwards = Vec::with_capacity(positions.len());
        while let Some(at) = back.next_entry() {
            backwards.push(at);
            if backwards.len() > positions.len() {
                break;
            }
        }
        backwards.reverse();
        if backwards != positions {
            return Err("a stream node whose entries do not walk backwards");
        }
        if live == 0 {
            return Err("an empty stream node");
        }
        self.nodes.insert(key, node);
        Ok(())
    }
}

/// Rewrites a node's live and deleted counts.
fn set_counts(node: &mut Vec<u8>, count: i64, deleted: i64) {
    lp::replace_int(node, lp::HEADER, count);
    if let Some(p) = lp::next(node, lp::HEADER) {
        lp::replace_int(node, p, deleted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    fn add(s: &mut Stream, ms: u64, fields: &[&str]) {
        let f: Vec<&[u8]> = fields.iter().map(|f| f.as_bytes()).collect();
        s.add(id(ms, 0), &f, NodeLimits::default())
            .expect("an entry of a few bytes fits");
    }

    #[test]
    fn entries_come_back_both_ways_with_their_fields() {
        let mut s = Stream::default();
        for i in 1..=250 {
            if i % 3 == 0 {
                add(&mut s, i, &["a", "1", "other", &i.to_string()]);
            } else {
                add(&mut s, i, &["a", &i.to_string(), "b", "x"]);
            }
        }
        assert_eq!(s.length, 250);
        assert_eq!(s.node_count(), 3);
        let all = s.range(StreamId::MIN, StreamId::MAX, false, 0);
        assert_eq!(all.len(), 250);
        assert_eq!(
            all[2].fields,
            vec![
                b"a".to_vec(),
                b"1".to_vec(),
                b"other".to_vec(),
                b"3".to_vec()
            ]
        );
        assert_eq!(
            all[3].fields,
            vec![b"a".to_vec(), b"4".to_vec(), b"b".to_vec(), b"x".to_vec()]
        );
        let back = s.range(id(10, 0), id(120, 0), true, 0);
        assert_eq!(back.len(), 111);
        assert_eq!(back[0].id, id(120, 0));
        assert_eq!(back[110].id, id(10, 0));
        assert_eq!(s.range(id(5, 1), id(7, 0), false, 0).len(), 2);
        assert_eq!(s.range(StreamId::MIN, StreamId::MAX, true, 5).len(), 5);
    }

    #[test]
    fn deletes_mark_and_nodes_go_with_their_last_entry() {
        let mut s = Stream::default();
        for i in 1..=150 {
            add(&mut s, i, &["f", "v"]);
        }
        assert_eq!(s.delete(&[id(1, 0), id(2, 0), id(999, 0)]), 2);
        assert_eq!(s.first_id, id(3, 0));
        assert_eq!(s.max_deleted, id(2, 0));
        let ids: Vec<StreamId> = (101..=150).map(|i| id(i, 0)).collect();
        assert_eq!(s.delete(&ids), 50);
        assert_eq!(s.node_count(), 1);
        assert_eq!(s.edge(false), Some(id(100, 0)));
        assert_eq!(s.length, 98);
    }

    #[test]
    fn backwards_is_forwards_reversed_whatever_the_nodes_hold() {
        let mut s = Stream::default();
        let mut x: u64 = 7;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 1..=700u64 {
            let n = next();
            let long = "v".repeat((n % 300) as usize);
            let value = (n % 5000).to_string();
            let fields: Vec<&str> = match n % 4 {
                0 => vec!["a", &value],
                1 => vec!["a", &value, "b", &long],
                2 => vec!["only", &long],
                _ => vec!["a", "-17", "b", "x", "c", &value],
            };
            add(&mut s, i * 3, &fields);
            if n % 7 == 0 {
                s.delete(&[id((next() % i + 1) * 3, 0)]);
            }
        }
        let forward = s.range(StreamId::MIN, StreamId::MAX, false, 0);
        let mut backward = s.range(StreamId::MIN, StreamId::MAX, true, 0);
        backward.reverse();
        assert_eq!(forward.len() as u64, s.length);
        assert_eq!(forward, backward);
        assert_eq!(s.edge(false), forward.last().map(|e| e.id));
        assert_eq!(s.edge(true), forward.first().map(|e| e.id));
        let mid = s.range(id(300, 0), id(900, 0), true, 0);
        let want: Vec<&StreamEntry> = forward
            .iter()
            .filter(|e| e.id >= id(300, 0) && e.id <= id(900, 0))
            .rev()
            .collect();
        assert_eq!(mid.iter().collect::<Vec<_>>(), want);
    }

    #[test]
    fn trimming_follows_redis() {
        let mut s = Stream::default();
        for i in 1..=350 {
            add(&mut s, i, &["f", "v"]);
        }
        // Approximate: whole nodes only.
        assert_eq!(s.trim(Trim::MaxLen(120), true, 0), 200);
        assert_eq!(s.length, 150);
        assert_eq!(s.first_id, id(201, 0));
        // Exact: marks inside the first node.
        assert_eq!(s.trim(Trim::MaxLen(120), false, 0), 30);
        assert_eq!(s.first_id, id(231, 0));
        assert_eq!(s.trim(Trim::MinId(id(305, 0)), false, 0), 74);
        assert_eq!(s.first_id, id(305, 0));
        assert_eq!(s.length, 46);
    }
}
