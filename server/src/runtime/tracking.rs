//! Client-side caching (CLIENT TRACKING), as Redis 7.0 does it.
//!
//! - A client's own state ([`ClientTracking`], in its `Client`): on or off, its mode
//!   (default, BCAST, OPTIN, OPTOUT, NOLOOP), where its invalidations go (REDIRECT), its
//!   prefixes, and whether CLIENT CACHING was given for the next command.
//! - One [`Registry`] shared by every worker: every connection by client id (REDIRECT
//!   names a client of any worker), the tracking clients (a flush tells them all), the
//!   BCAST clients with their prefixes (each shard matches its written keys against
//!   them), and the counters INFO shows.
//! - Each shard's table of the keys tracking clients read there (`shard/tracking.rs`):
//!   written in the shard's thread as the read runs, so that no write can come between
//!   the read and the key being remembered.
//!
//! An invalidation travels as an entry of the worker's Pub/Sub buffers
//! (`runtime/pubsub.rs`) to the tracking client's worker, which checks that the client
//! still tracks in that mode, and sends it (RESP3: a push), or forwards it to the
//! client its invalidations are redirected to (RESP3: a push; RESP2 in Pub/Sub mode: a
//! message on `__redis__:invalidate`), or tells it that client is gone
//! (`tracking-redir-broken`). While no client tracks, nothing of this costs anything but
//! one branch per command and one atomic load per unit of work on a shard.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use crate::runtime::msg::ConnRef;

/// An invalidation of keys a client read (default mode).
pub const KIND_KEYS: u8 = 0;
/// An invalidation of keys matching a BCAST client's prefix.
pub const KIND_BCAST: u8 = 1;
/// Every key (FLUSHALL, FLUSHDB): a null in place of the keys.
pub const KIND_FLUSH: u8 = 2;

/// One client's tracking state.
#[derive(Debug, Default, Clone)]
pub struct ClientTracking {
    /// CLIENT TRACKING ON.
    pub on: bool,
    /// BCAST mode.
    pub bcast: bool,
    /// OPTIN mode.
    pub optin: bool,
    /// OPTOUT mode.
    pub optout: bool,
    /// NOLOOP: not told of its own writes.
    pub noloop: bool,
    /// CLIENT CACHING given for the next command.
    pub caching: bool,
    /// The client its invalidations go to is gone.
    pub broken_redirect: bool,
    /// REDIRECT: the id of the client its invalidations go to (0: none).
    pub redirect: u64,
    /// BCAST's prefixes, sorted.
    pub prefixes: Vec<Box<[u8]>>,
}

impl ClientTracking {
    /// Whether the keys of a read-only command run now are remembered for the client
    /// (Redis's `trackingRememberKeys` conditions).
    pub fn remembers(&self) -> bool {
        self.on && !self.bcast && !((self.optin && !self.caching) || (self.optout && self.caching))
    }
}

/// A tracking client, named across threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reader {
    /// Its client id.
    pub id: u64,
    /// Its connection.
    pub conn: ConnRef,
}

/// The identity of the client a command on a shard runs for, when it tracks, and whether
/// that command's keys are to be remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tracked {
    /// The client.
    pub reader: Reader,
    /// Remember the keys the command reads.
    pub read: bool,
    /// A flush whose own client's worker tells it, after the reply, that every key
    /// changed (the shards do not).
    pub own_flush: bool,
}

/// A client in BCAST mode.
#[derive(Debug, Clone)]
pub struct BcastClient {
    /// The client.
    pub reader: Reader,
    /// Its prefixes (the empty prefix matches every key).
    pub prefixes: Vec<Box<[u8]>>,
    /// NOLOOP.
    pub noloop: bool,
}

/// What every worker shares about tracking.
#[derive(Debug, Default)]
pub struct Registry {
    /// Clients with tracking on.
    active: AtomicUsize,
    /// Every connection, by client id.
    conns: Mutex<HashMap<u64, ConnRef>>,
    /// The tracking clients, by id.
    tracking: Mutex<HashMap<u64, ConnRef>>,
    /// The BCAST clients.
    bcast: RwLock<Arc<[BcastClient]>>,
    /// Bumped when `bcast` changes: shards keep a copy until then.
    bcast_version: AtomicU64,
    /// Keys in the shards' tables (INFO's `tracking_total_keys`).
    pub keys: AtomicUsize,
    /// Client entries in the shards' tables (`tracking_total_items`).
    pub items: AtomicUsize,
    /// `tracking-table-max-keys` (0: no limit).
    max_keys: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Registry {
    /// A registry whose tables hold at most `max_keys` keys (0: no limit).
    pub fn with_max_keys(max_keys: u64) -> Registry {
        let reg = Registry::default();
        reg.set_max_keys(max_keys);
        reg
    }

    /// CONFIG SET `tracking-table-max-keys`.
    pub fn set_max_keys(&self, max_keys: u64) {
        let n = usize::try_from(max_keys).unwrap_or(usize::MAX);
        self.max_keys.store(n, Ordering::Relaxed);
    }

    /// Whether the tables hold more keys than `tracking-table-max-keys` allows.
    pub fn over_limit(&self) -> bool {
        let max = self.max_keys.load(Ordering::Relaxed);
        max != 0 && self.keys.load(Ordering::Relaxed) > max
    }

    /// Takes one key of the tables' excess over `tracking-table-max-keys` off the count,
    /// for the caller to forget; false when there is none. Shards trimming at once so
    /// take the excess between them, and no more (each seeing the count over the limit
    /// and forgetting a key, three shards trimmed three keys where one was too many).
    pub fn claim_excess(&self) -> bool {
        let max = self.max_keys.load(Ordering::Relaxed);
        max != 0
            && self
                .keys
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| {
                    (k > max).then(|| k - 1)
                })
                .is_ok()
    }

    /// Whether some client tracks.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed) != 0
    }

    /// INFO's `tracking_clients`.
    pub fn clients(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// A connection opened.
    pub fn connected(&self, id: u64, conn: ConnRef) {
        lock(&self.conns).insert(id, conn);
    }

    /// A connection closed.
    pub fn disconnected(&self, id: u64) {
        lock(&self.conns).remove(&id);
    }

    /// The connection of client `id`, if it is connected.
    pub fn conn_of(&self, id: u64) -> Option<ConnRef> {
        lock(&self.conns).get(&id).copied()
    }

    /// Client `id` turned tracking on (or changed its options while on).
    pub fn enable(&self, reader: Reader, state: &ClientTracking) {
        if lock(&self.tracking)
            .insert(reader.id, reader.conn)
            .is_none()
        {
            self.active.fetch_add(1, Ordering::Relaxed);
        }
        self.set_bcast(
            reader,
            state.bcast.then(|| (state.prefixes.clone(), state.noloop)),
        );
    }

    /// Client `id` turned tracking off, or left.
    pub fn disable(&self, reader: Reader) {
        if lock(&self.tracking).remove(&reader.id).is_some() {
            self.active.fetch_sub(1, Ordering::Relaxed);
        }
        self.set_bcast(reader, None);
    }

    fn set_bcast(&self, reader: Reader, entry: Option<(Vec<Box<[u8]>>, bool)>) {
        let mut bcast = self
            .bcast
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let was = bcast.iter().any(|b| b.reader.id == reader.id);
        if !was && entry.is_none() {
            return;
        }
        let mut list: Vec<BcastClient> = bcast
            .iter()
            .filter(|b| b.reader.id != reader.id)
            .cloned()
            .collect();
        if let Some((prefixes, noloop)) = entry {
            list.push(BcastClient {
                reader,
                prefixes,
                noloop,
            });
            list.sort_by_key(|b| b.reader.id);
        }
        *bcast = list.into();
        self.bcast_version.fetch_add(1, Ordering::Release);
    }

    /// The version of the BCAST list.
    #[inline]
    pub fn bcast_version(&self) -> u64 {
        self.bcast_version.load(Ordering::Acquire)
    }

    /// The BCAST clients.
    pub fn bcast(&self) -> Arc<[BcastClient]> {
        Arc::clone(
            &self
                .bcast
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The tracking clients (a flush tells each).
    pub fn tracking_clients(&self) -> Vec<Reader> {
        lock(&self.tracking)
            .iter()
            .map(|(&id, &conn)| Reader { id, conn })
            .collect()
    }

    /// INFO's `tracking_total_prefixes`: distinct prefixes of the BCAST clients.
    pub fn prefixes(&self) -> usize {
        let bcast = self.bcast();
        let mut all: Vec<&[u8]> = bcast
            .iter()
            .flat_map(|b| b.prefixes.iter().map(|p| &p[..]))
            .collect();
        all.sort_unstable();
        all.dedup();
        all.len()
    }
}

/// An invalidation entry, as it travels in a worker's Pub/Sub buffer.
#[derive(Debug)]
pub struct Notice<'a> {
    /// The tracking client (the entry's first leg), or the client it redirects to (the
    /// second).
    pub conn: ConnRef,
    /// The tracking client's id.
    pub id: u64,
    /// [`KIND_KEYS`], [`KIND_BCAST`] or [`KIND_FLUSH`].
    pub kind: u8,
    /// The client whose command made the change (0: none).
    pub writer: u64,
    /// The null of a flush in RESP3 (`_`) rather than RESP2 (`$-1`): the tracking
    /// client's protocol.
    pub null_resp3: bool,
    /// The keys (none for a flush), each length-prefixed.
    pub keys: &'a [u8],
    /// How many keys.
    pub count: u32,
}

impl Notice<'_> {
    /// Appends the entry (without its tag) to `buf`.
    pub fn write(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&(self.conn.key as u64).to_le_bytes());
        buf.extend_from_slice(&self.conn.generation.to_le_bytes());
        buf.extend_from_slice(&self.id.to_le_bytes());
        buf.push(self.kind);
        buf.extend_from_slice(&self.writer.to_le_bytes());
        buf.push(u8::from(self.null_resp3));
        buf.extend_from_slice(&self.count.to_le_bytes());
        buf.extend_from_slice(&(self.keys.len() as u32).to_le_bytes());
        buf.extend_from_slice(self.keys);
    }

    /// Reads an entry written by [`Notice::write`] for worker `worker`: it and the rest.
    pub fn read(buf: &[u8], worker: usize) -> Option<(Notice<'_>, &[u8])> {
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(buf.get(at..at + 8)?.try_into().ok()?))
        };
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?))
        };
        let key = usize::try_from(u64_at(0)?).ok()?;
        let generation = u64_at(8)?;
        let id = u64_at(16)?;
        let kind = *buf.get(24)?;
        let writer = u64_at(25)?;
        let null_resp3 = *buf.get(33)? != 0;
        let count = u32_at(34)?;
        let len = u32_at(38)? as usize;
        let keys = buf.get(42..42 + len)?;
        let rest = buf.get(42 + len..)?;
        Some((
            Notice {
                conn: ConnRef {
                    worker,
                    key,
                    generation,
                },
                id,
                kind,
                writer,
                null_resp3,
                keys,
                count,
            },
            rest,
        ))
    }

    /// The keys.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest = self.keys;
        std::iter::from_fn(move || {
            let (len, after) = rest.split_at_checked(4)?;
            let n = u32::from_le_bytes(len.try_into().ok()?) as usize;
            let (key, tail) = after.split_at_checked(n)?;
            rest = tail;
            Some(key)
        })
    }
}

/// Appends `key` to a notice's key list.
pub fn push_key(keys: &mut Vec<u8>, key: &[u8]) {
    keys.extend_from_slice(&(key.len() as u32).to_le_bytes());
    keys.extend_from_slice(key);
}

/// Writes the invalidation message a client receives: in RESP3 a push
/// `invalidate` with the keys (or a null); in RESP2 (a redirect target in Pub/Sub mode)
/// a `message` on `__redis__:invalidate`.
pub fn encode(out: &mut Vec<u8>, resp3: bool, notice: &Notice<'_>) {
    if resp3 {
        out.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else {
        out.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    }
    if notice.kind == KIND_FLUSH {
        out.extend_from_slice(if notice.null_resp3 {
            b"_\r\n"
        } else {
            b"$-1\r\n"
        });
        return;
    }
    let mut n = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(n.format(notice.count).as_bytes());
    out.extend_from_slice(b"\r\n");
    for key in notice.keys() {
        out.push(b'$');
        out.extend_from_slice(n.format(key.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(key);
        out.extend_from_slice(b"\r\n");
    }
}

/// The push a RESP3 tracking client receives when the client its invalidations are
/// redirected to is gone.
pub fn encode_broken(out: &mut Vec<u8>, redirect: u64) {
    out.extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n:");
    out.extend_from_slice(itoa::Buffer::new().format(redirect).as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_travel_whole() {
        let mut keys = Vec::new();
        push_key(&mut keys, b"a");
        push_key(&mut keys, b"");
        let conn = ConnRef {
            worker: 3,
            key: 7,
            generation: 9,
        };
        let n = Notice {
            conn,
            id: 12,
            kind: KIND_BCAST,
            writer: 5,
            null_resp3: true,
            keys: &keys,
            count: 2,
        };
        let mut buf = Vec::new();
        n.write(&mut buf);
        buf.push(0xff);
        let (back, rest) = Notice::read(&buf, 3).expect("a notice");
        assert_eq!(rest, &[0xff]);
        assert_eq!(back.conn, conn);
        assert_eq!(
            (back.id, back.kind, back.writer, back.count),
            (12, KIND_BCAST, 5, 2)
        );
        assert_eq!(back.keys().collect::<Vec<_>>(), vec![&b"a"[..], &b""[..]]);
        let mut out = Vec::new();
        encode(&mut out, true, &back);
        assert_eq!(
            out,
            b">2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\na\r\n$0\r\n\r\n"
        );
        assert!(Notice::read(&buf[..20], 3).is_none());
    }

    #[test]
    fn remembering_follows_optin_and_optout() {
        let mut t = ClientTracking {
            on: true,
            ..Default::default()
        };
        assert!(t.remembers());
        t.optin = true;
        assert!(!t.remembers());
        t.caching = true;
        assert!(t.remembers());
        t.optin = false;
        t.optout = true;
        assert!(!t.remembers());
        t.caching = false;
        assert!(t.remembers());
        t.bcast = true;
        assert!(!t.remembers());
    }
}
