//! Pub/Sub across threads: who subscribes where, and how a message reaches them.
//!
//! Three name spaces, as in Redis: channels (SUBSCRIBE, PUBLISH), patterns (PSUBSCRIBE,
//! matched against the channel a message is published to) and shard channels
//! (SSUBSCRIBE, SPUBLISH). Each is held at three levels:
//!
//! - a client's own subscriptions ([`Subscriptions`], in its `Client`): what its
//!   replies count, and what it leaves when it unsubscribes from everything or closes;
//! - each worker's index ([`Local`]): name → the worker's connections subscribed to it,
//!   in the order they subscribed, used to deliver;
//! - one [`Directory`] shared by every worker: name → how many subscribers each worker
//!   has. PUBLISH reads it to answer its receiver count at once and to know which
//!   workers the message must reach.
//!
//! A publication (a PUBLISH, or a keyspace notification made by the shard's write path)
//! is appended to the [`Outbound`] buffer of each worker that has receivers. At the end
//! of its loop iteration a worker sends each buffer to its worker as one message
//! (`Msg::Publish`) — one message per destination thread per iteration, whatever the
//! number of publications and subscribers — and delivers its own at once. A buffer is
//! written in the order publications were made, and messages between two workers keep
//! their order, so the messages of one publisher reach every subscriber in publish order.

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};

use goblin_protocol::{Encoder, Version};

use crate::runtime::msg::ConnRef;
use crate::util::glob_match;

/// A subscription's name space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// SUBSCRIBE / PUBLISH.
    Channels = 0,
    /// PSUBSCRIBE: glob patterns matched against PUBLISH's channel.
    Patterns = 1,
    /// SSUBSCRIBE / SPUBLISH.
    ShardChannels = 2,
}

impl Space {
    const ALL: [Space; 3] = [Space::Channels, Space::Patterns, Space::ShardChannels];

    fn from_byte(b: u8) -> Option<Space> {
        Space::ALL.into_iter().find(|s| *s as u8 == b)
    }
}

type Names<V> = hashbrown::HashMap<Box<[u8]>, V, foldhash::fast::RandomState>;

/// One client's subscriptions.
#[derive(Debug, Default)]
pub struct Subscriptions {
    sets: [HashSet<Box<[u8]>, foldhash::fast::RandomState>; 3],
}

impl Subscriptions {
    /// Whether `allowed(name, pattern)` holds for every subscription (channels and
    /// shard channels by name, patterns as patterns).
    pub fn all(&self, mut allowed: impl FnMut(&[u8], bool) -> bool) -> bool {
        Space::ALL.into_iter().all(|space| {
            self.sets[space as usize]
                .iter()
                .all(|name| allowed(name, space == Space::Patterns))
        })
    }

    /// Whether the client subscribes to anything: in RESP2 it then may run only the
    /// Pub/Sub commands, PING, QUIT and RESET.
    pub fn active(&self) -> bool {
        self.sets.iter().any(|s| !s.is_empty())
    }

    /// What a (un)subscription's confirmation in `space` counts: channels and patterns
    /// together, or shard channels.
    pub fn counted(&self, space: Space) -> usize {
        match space {
            Space::ShardChannels => self.sets[2].len(),
            _ => self.sets[0].len() + self.sets[1].len(),
        }
    }

    /// The number of subscriptions in `space` (CLIENT LIST's `sub`, `psub`, `ssub`).
    pub fn len(&self, space: Space) -> usize {
        self.sets[space as usize].len()
    }

    /// What its tables take (client eviction weighs it; the names' own bytes are not
    /// counted, as Redis does not count them).
    pub fn table_bytes(&self) -> usize {
        self.sets
            .iter()
            .map(|s| s.capacity() * (size_of::<Box<[u8]>>() + 1))
            .sum()
    }

    /// The names the client subscribes to in `space`.
    pub fn names(&self, space: Space) -> Vec<Box<[u8]>> {
        self.sets[space as usize].iter().cloned().collect()
    }
}

/// A count per worker.
type Counts = Vec<(u32, u32)>;

fn add_count(counts: &mut Counts, worker: usize) {
    let w = worker as u32;
    match counts.iter_mut().find(|(x, _)| *x == w) {
        Some((_, n)) => *n += 1,
        None => counts.push((w, 1)),
    }
}

/// Lowers `worker`'s count; whether none is left for anyone.
fn remove_count(counts: &mut Counts, worker: usize) -> bool {
    let w = worker as u32;
    if let Some(i) = counts.iter().position(|(x, _)| *x == w) {
        counts[i].1 -= 1;
        if counts[i].1 == 0 {
            counts.swap_remove(i);
        }
    }
    counts.is_empty()
}

/// Stripes of the channel tables: publishers on different threads rarely meet on a lock.
const STRIPES: usize = 64;

/// Who subscribes to what, per worker, shared by every worker.
#[derive(Debug)]
pub struct Directory {
    hasher: foldhash::fast::FixedState,
    channels: Box<[Mutex<Names<Counts>>]>,
    shard_channels: Box<[Mutex<Names<Counts>>]>,
    patterns: RwLock<Names<Counts>>,
    /// Distinct patterns subscribed to: a PUBLISH skips the pattern table while none.
    pattern_count: AtomicUsize,
}

impl Default for Directory {
    fn default() -> Self {
        let stripes = || (0..STRIPES).map(|_| Mutex::new(Names::default())).collect();
        Directory {
            hasher: foldhash::fast::FixedState::with_seed(0x9e37_79b9),
            channels: stripes(),
            shard_channels: stripes(),
            patterns: RwLock::new(Names::default()),
            pattern_count: AtomicUsize::new(0),
        }
    }
}

/// Locks a table, whatever a panicking holder left (the counts stay usable).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Directory {
    fn stripe(&self, space: Space, name: &[u8]) -> &Mutex<Names<Counts>> {
        let i = (self.hasher.hash_one(name) as usize) % STRIPES;
        match space {
            Space::ShardChannels => &self.shard_channels[i],
            _ => &self.channels[i],
        }
    }

    fn with_table<R>(
        &self,
        space: Space,
        name: &[u8],
        f: impl FnOnce(&mut Names<Counts>) -> R,
    ) -> R {
        match space {
            Space::Patterns => {
                let mut t = self
                    .patterns
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let r = f(&mut t);
                self.pattern_count.store(t.len(), Ordering::Relaxed);
                r
            }
            _ => f(&mut lock(self.stripe(space, name))),
        }
    }

    /// A connection of `worker` subscribed to `name`.
    pub fn add(&self, space: Space, name: &[u8], worker: usize) {
        self.with_table(space, name, |t| {
            match t.get_mut(name) {
                Some(c) => add_count(c, worker),
                None => {
                    t.insert(name.into(), vec![(worker as u32, 1)]);
                }
            };
        });
    }

    /// A connection of `worker` unsubscribed from `name`.
    pub fn remove(&self, space: Space, name: &[u8], worker: usize) {
        self.with_table(space, name, |t| {
            if t.get_mut(name).is_some_and(|c| remove_count(c, worker)) {
                t.remove(name);
            }
        });
    }

    /// Calls `f` with each worker that has subscribers of the channel `name` of `space`
    /// (channels or shard channels; not patterns), and how many.
    fn for_each_receiver(&self, space: Space, name: &[u8], mut f: impl FnMut(usize, usize)) {
        if let Some(c) = lock(self.stripe(space, name)).get(name) {
            for &(w, n) in c {
                f(w as usize, n as usize);
            }
        }
    }

    /// Calls `f` with each worker that has subscribers of a pattern matching `channel`,
    /// and how many (once per matching pattern).
    fn for_each_pattern_receiver(&self, channel: &[u8], mut f: impl FnMut(usize, usize)) {
        if self.pattern_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let t = self
            .patterns
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (pattern, counts) in t.iter() {
            if glob_match(pattern, channel, false) {
                for &(w, n) in counts {
                    f(w as usize, n as usize);
                }
            }
        }
    }

    /// The active names of `space` (channels or shard channels) matching `pattern`
    /// (PUBSUB CHANNELS, SHARDCHANNELS).
    pub fn names(&self, space: Space, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        let stripes = match space {
            Space::ShardChannels => &self.shard_channels,
            _ => &self.channels,
        };
        let mut out = Vec::new();
        for stripe in stripes.iter() {
            out.extend(
                lock(stripe)
                    .keys()
                    .filter(|n| pattern.is_none_or(|p| glob_match(p, n, false)))
                    .cloned(),
            );
        }
        out
    }

    /// Subscribers of the channel `name` of `space` (PUBSUB NUMSUB, SHARDNUMSUB).
    pub fn subscribers(&self, space: Space, name: &[u8]) -> usize {
        let mut total = 0;
        self.for_each_receiver(space, name, |_, n| total += n);
        total
    }

    /// Distinct patterns subscribed to (PUBSUB NUMPAT).
    pub fn patterns(&self) -> usize {
        self.pattern_count.load(Ordering::Relaxed)
    }

    /// Distinct names subscribed to in `space` (INFO's `pubsub_channels`,
    /// `pubsub_patterns`, `pubsubshard_channels`).
    pub fn len(&self, space: Space) -> usize {
        match space {
            Space::Patterns => self.patterns(),
            Space::Channels => self.channels.iter().map(|s| lock(s).len()).sum(),
            Space::ShardChannels => self.shard_channels.iter().map(|s| lock(s).len()).sum(),
        }
    }
}

/// One worker's index of its connections' subscriptions.
#[derive(Debug, Default)]
pub struct Local {
    spaces: [Names<Vec<usize>>; 3],
}

impl Local {
    /// Whether any of this worker's connections subscribes to a name of `space`.
    pub fn any(&self, space: Space) -> bool {
        !self.spaces[space as usize].is_empty()
    }

    fn add(&mut self, space: Space, name: &[u8], key: usize) {
        let names = &mut self.spaces[space as usize];
        match names.get_mut(name) {
            Some(keys) => keys.push(key),
            None => {
                names.insert(name.into(), vec![key]);
            }
        }
    }

    fn remove(&mut self, space: Space, name: &[u8], key: usize) {
        let names = &mut self.spaces[space as usize];
        if let Some(keys) = names.get_mut(name) {
            keys.retain(|&k| k != key);
            if keys.is_empty() {
                names.remove(name);
            }
        }
    }

    /// Calls `f(connection, pattern)` for each of this worker's receivers of a message
    /// published to `channel` in `space`: the channel's subscribers in the order they
    /// subscribed, then (for channels) the subscribers of each matching pattern.
    pub fn receivers(&self, space: Space, channel: &[u8], mut f: impl FnMut(usize, Option<&[u8]>)) {
        if let Some(keys) = self.spaces[space as usize].get(channel) {
            keys.iter().for_each(|&k| f(k, None));
        }
        if space == Space::Channels {
            for (pattern, keys) in &self.spaces[Space::Patterns as usize] {
                if glob_match(pattern, channel, false) {
                    keys.iter().for_each(|&k| f(k, Some(pattern)));
                }
            }
        }
    }
}

/// A connection's view of Pub/Sub, for the connection commands: its worker's index, the
/// worker's outgoing publications, and who it is.
#[derive(Debug)]
pub struct Hub<'a> {
    /// The worker's index.
    pub local: &'a mut Local,
    /// Where publications go.
    pub out: &'a mut Outbound,
    /// The worker's shard's feed of the replication stream, when it feeds one (PUBLISH
    /// goes to replicas, in order with the shard's writes).
    pub repl: Option<&'a mut crate::repl::master::Feed>,
    /// The connection.
    pub me: ConnRef,
}

impl<'a> Hub<'a> {
    /// The view of connection `key` (of `generation`) on `worker`, whose index and
    /// shard (its outgoing publications and replication feed) these are.
    pub fn of_shard(
        local: &'a mut Local,
        shard: &'a mut crate::shard::Shard,
        worker: usize,
        key: usize,
        generation: u64,
    ) -> Hub<'a> {
        let (out, repl) = shard.publications_and_feed();
        Hub {
            repl,
            ..Hub::new(local, out, worker, key, generation)
        }
    }

    /// The view of connection `key` (of `generation`) on `worker`, whose index and
    /// outgoing publications these are (no replication feed).
    pub fn new(
        local: &'a mut Local,
        out: &'a mut Outbound,
        worker: usize,
        key: usize,
        generation: u64,
    ) -> Hub<'a> {
        Hub {
            local,
            out,
            repl: None,
            me: ConnRef {
                worker,
                key,
                generation,
            },
        }
    }

    /// Subscribes the connection to `name`; false when it already was.
    pub fn subscribe(
        &mut self,
        dir: &Directory,
        subs: &mut Subscriptions,
        space: Space,
        name: &[u8],
    ) -> bool {
        if !subs.sets[space as usize].insert(name.into()) {
            return false;
        }
        self.local.add(space, name, self.me.key);
        dir.add(space, name, self.me.worker);
        true
    }

    /// Unsubscribes the connection from `name`; false when it was not subscribed.
    pub fn unsubscribe(
        &mut self,
        dir: &Directory,
        subs: &mut Subscriptions,
        space: Space,
        name: &[u8],
    ) -> bool {
        if !subs.sets[space as usize].remove(name) {
            return false;
        }
        self.local.remove(space, name, self.me.key);
        dir.remove(space, name, self.me.worker);
        true
    }

    /// Unsubscribes the connection from everything (it closes, or RESET).
    pub fn leave_all(&mut self, dir: &Directory, subs: &mut Subscriptions) {
        for space in Space::ALL {
            for name in std::mem::take(&mut subs.sets[space as usize]) {
                self.local.remove(space, &name, self.me.key);
                dir.remove(space, &name, self.me.worker);
            }
        }
    }
}

/// Publications to send, one buffer per worker (this one included), each in the order
/// the publications were made. An entry: the space (one byte), then the channel and the
/// message, each as a 4-byte little-endian length and its bytes.
#[derive(Debug, Default)]
pub struct Outbound {
    buffers: Vec<Vec<u8>>,
    pending: bool,
}

impl Outbound {
    /// Publishes `message` to `channel` of `space` (channels or shard channels): appends
    /// it for every worker with receivers; how many receivers there are.
    pub fn publish(
        &mut self,
        dir: &Directory,
        space: Space,
        channel: &[u8],
        message: &[u8],
    ) -> usize {
        let mut receivers = 0;
        // Each worker once, however many of its subscriptions match.
        let mut workers: Vec<usize> = Vec::new();
        let mut note = |w: usize, n: usize| {
            receivers += n;
            if !workers.contains(&w) {
                workers.push(w);
            }
        };
        dir.for_each_receiver(space, channel, &mut note);
        if space == Space::Channels {
            dir.for_each_pattern_receiver(channel, &mut note);
        }
        for w in workers {
            if self.buffers.len() <= w {
                self.buffers.resize_with(w + 1, Vec::new);
            }
            let buf = &mut self.buffers[w];
            buf.push(space as u8);
            for part in [channel, message] {
                buf.extend_from_slice(&(part.len() as u32).to_le_bytes());
                buf.extend_from_slice(part);
            }
            self.pending = true;
        }
        receivers
    }

    /// An invalidation for its tracking client (`redirected`: for the client a tracking
    /// client redirects to), appended for the client's worker.
    pub fn track(&mut self, notice: &crate::runtime::tracking::Notice<'_>, redirected: bool) {
        let w = notice.conn.worker;
        if self.buffers.len() <= w {
            self.buffers.resize_with(w + 1, Vec::new);
        }
        let buf = &mut self.buffers[w];
        buf.push(if redirected {
            TAG_REDIRECTED
        } else {
            TAG_TRACK
        });
        notice.write(buf);
        self.pending = true;
    }

    /// Whether publications wait to be sent.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Takes the publications for each worker: `(worker, buffer)` for each non-empty one.
    pub fn take(&mut self) -> impl Iterator<Item = (usize, Vec<u8>)> + '_ {
        self.pending = false;
        self.buffers
            .iter_mut()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(w, b)| (w, std::mem::take(b)))
    }
}

/// What a buffer made by [`Outbound`] holds.
#[derive(Debug)]
pub enum Entry<'a> {
    /// A publication: `(space, channel, message)`.
    Publish(Space, &'a [u8], &'a [u8]),
    /// An invalidation for a tracking client of this worker (`runtime/tracking.rs`).
    Track(crate::runtime::tracking::Notice<'a>),
    /// An invalidation for the client of this worker a tracking client redirects to.
    Redirected(crate::runtime::tracking::Notice<'a>),
}

/// Tag of an invalidation for a tracking client.
const TAG_TRACK: u8 = 3;
/// Tag of an invalidation for a redirect target.
const TAG_REDIRECTED: u8 = 4;

/// The entries of a buffer made by [`Outbound`] for worker `worker`. A malformed tail
/// (which no worker writes) ends the walk.
pub fn entries(buf: &[u8], worker: usize) -> impl Iterator<Item = Entry<'_>> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        let (&tag, tail) = rest.split_first()?;
        if tag == TAG_TRACK || tag == TAG_REDIRECTED {
            let (notice, tail) = crate::runtime::tracking::Notice::read(tail, worker)?;
            rest = tail;
            return Some(if tag == TAG_TRACK {
                Entry::Track(notice)
            } else {
                Entry::Redirected(notice)
            });
        }
        let space = Space::from_byte(tag)?;
        let (channel, tail) = length_prefixed(tail)?;
        let (message, tail) = length_prefixed(tail)?;
        rest = tail;
        Some(Entry::Publish(space, channel, message))
    })
}

/// A 4-byte little-endian length and that many bytes, and what follows them.
fn length_prefixed(buf: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, after) = buf.split_at_checked(4)?;
    let n = u32::from_le_bytes(len.try_into().ok()?) as usize;
    after.split_at_checked(n)
}

/// Writes the message a subscriber receives: `message`, `pmessage` (with the pattern it
/// matched) or `smessage` — a push in RESP3, an array in RESP2.
pub fn encode_message(
    out: &mut Vec<u8>,
    resp: Version,
    space: Space,
    pattern: Option<&[u8]>,
    channel: &[u8],
    message: &[u8],
) {
    let mut e = Encoder::new(out, resp);
    match (space, pattern) {
        (Space::ShardChannels, _) => {
            e.push(3);
            e.bulk(b"smessage");
        }
        (_, Some(p)) => {
            e.push(4);
            e.bulk(b"pmessage");
            e.bulk(p);
        }
        (_, None) => {
            e.push(3);
            e.bulk(b"message");
        }
    }
    e.bulk(channel);
    e.bulk(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_counts_per_worker_and_forgets_empty_names() {
        let dir = Directory::default();
        dir.add(Space::Channels, b"news", 0);
        dir.add(Space::Channels, b"news", 2);
        dir.add(Space::Channels, b"news", 2);
        dir.add(Space::Patterns, b"n*", 1);
        assert_eq!(dir.subscribers(Space::Channels, b"news"), 3);
        assert_eq!(dir.subscribers(Space::ShardChannels, b"news"), 0);
        assert_eq!(dir.patterns(), 1);
        let mut out = Outbound::default();
        assert_eq!(out.publish(&dir, Space::Channels, b"news", b"hi"), 4);
        let sent: Vec<usize> = out.take().map(|(w, _)| w).collect();
        assert_eq!(sent, vec![0, 1, 2]);
        assert!(!out.pending());
        dir.remove(Space::Channels, b"news", 2);
        dir.remove(Space::Channels, b"news", 2);
        dir.remove(Space::Channels, b"news", 0);
        dir.remove(Space::Patterns, b"n*", 1);
        assert!(dir.names(Space::Channels, None).is_empty());
        assert_eq!(dir.patterns(), 0);
        assert_eq!(out.publish(&dir, Space::Channels, b"news", b"hi"), 0);
        assert!(!out.pending());
    }

    #[test]
    fn buffers_keep_publications_in_order() {
        let dir = Directory::default();
        dir.add(Space::Channels, b"a", 1);
        dir.add(Space::ShardChannels, b"b", 1);
        let mut out = Outbound::default();
        out.publish(&dir, Space::Channels, b"a", b"1");
        out.publish(&dir, Space::ShardChannels, b"b", b"");
        out.publish(&dir, Space::Channels, b"a", b"3");
        let (w, buf) = out.take().next().expect("a buffer");
        assert_eq!(w, 1);
        let got: Vec<_> = entries(&buf, 1)
            .filter_map(|e| match e {
                Entry::Publish(s, c, m) => Some((s, c, m)),
                _ => None,
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (Space::Channels, &b"a"[..], &b"1"[..]),
                (Space::ShardChannels, &b"b"[..], &b""[..]),
                (Space::Channels, &b"a"[..], &b"3"[..]),
            ]
        );
        // A cut buffer ends the walk instead of reading past it.
        assert_eq!(entries(&buf[..buf.len() - 1], 1).count(), 2);
    }
}
