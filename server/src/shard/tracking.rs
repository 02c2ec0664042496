//! The keys tracking clients read on this shard (CLIENT TRACKING's default mode), and
//! the keys written here that BCAST clients are to hear of (`runtime/tracking.rs`).
//!
//! A read-only command of a tracking client remembers its keys here, on the shard's
//! thread, right after it ran: no write can come between the read and the key being
//! remembered. A key written (or deleted, expired, evicted) is forgotten at once, and
//! each client remembered for it is sent one invalidation. Keys written that match a
//! BCAST client's prefix are gathered over the worker's loop iteration and sent at its
//! end: one message per prefix and client, its keys in byte order, each once — as Redis
//! sends them once per event-loop iteration.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use goblin_store::Event;

use crate::runtime::pubsub::Outbound;
use crate::runtime::tracking::{
    BcastClient, KIND_BCAST, KIND_FLUSH, KIND_KEYS, Notice, Reader, Registry, push_key,
};

/// Each key tracking clients read, with its readers.
type Keys = hashbrown::HashMap<Box<[u8]>, Vec<Reader>, foldhash::fast::RandomState>;

/// A shard's tracking table.
#[derive(Debug, Default)]
pub struct TrackTable {
    keys: Keys,
    bcast: Option<Arc<[BcastClient]>>,
    bcast_version: u64,
    /// Keys written this iteration that match some BCAST prefix, with who wrote them.
    pending: Vec<(Box<[u8]>, u64)>,
}

impl TrackTable {
    /// Takes the BCAST clients as they are now, if they changed.
    pub fn refresh(&mut self, reg: &Registry) {
        let version = reg.bcast_version();
        if self.bcast.is_none() || version != self.bcast_version {
            self.bcast = Some(reg.bcast());
            self.bcast_version = version;
        }
    }

    /// Remembers that `reader` read `key`.
    pub fn remember(&mut self, key: &[u8], reader: Reader, reg: &Registry) {
        match self.keys.get_mut(key) {
            Some(readers) => {
                if !readers.iter().any(|r| r.id == reader.id) {
                    readers.push(reader);
                    reg.items.fetch_add(1, Ordering::Relaxed);
                }
            }
            None => {
                self.keys.insert(key.into(), vec![reader]);
                reg.keys.fetch_add(1, Ordering::Relaxed);
                reg.items.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The keys of a unit of work's events changed (`writer`: the client whose command
    /// changed them, 0 for none): their readers are told, BCAST keys gathered.
    pub fn on_events(&mut self, events: &[Event], writer: u64, reg: &Registry, out: &mut Outbound) {
        let bcast = self.bcast.as_ref().filter(|b| !b.is_empty());
        for k in events.iter().filter_map(Event::key) {
            if k.quiet {
                continue;
            }
            if !self.keys.is_empty() {
                forget(&mut self.keys, &k.key, writer, reg, out);
            }
            if let Some(bcast) = bcast
                && bcast
                    .iter()
                    .any(|b| b.prefixes.iter().any(|p| k.key.starts_with(p)))
            {
                self.pending.push((k.key.clone(), writer));
            }
        }
    }

    /// Past `tracking-table-max-keys` (all shards' tables together): forgets keys of this
    /// table, telling their readers as if the keys had changed, until under it again (or
    /// this table is empty), as Redis's `trackingLimitUsedSlots` does.
    pub fn limit(&mut self, reg: &Registry, out: &mut Outbound) {
        while reg.claim_excess() {
            let Some(key) = self.keys.keys().next().cloned() else {
                // None here: the count goes back, for a shard that has keys.
                reg.keys.fetch_add(1, Ordering::Relaxed);
                return;
            };
            // (Off the count already.)
            if let Some(readers) = self.keys.remove(&key) {
                tell(&key, readers, 0, reg, out);
            }
        }
    }

    /// Whether no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Every key was flushed: nothing is remembered any more.
    pub fn clear(&mut self, reg: &Registry) {
        let items: usize = self.keys.values().map(Vec::len).sum();
        reg.keys.fetch_sub(self.keys.len(), Ordering::Relaxed);
        reg.items.fetch_sub(items, Ordering::Relaxed);
        self.keys = Default::default();
    }

    /// Whether BCAST keys wait to be sent.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Sends the BCAST keys gathered: for each prefix (in byte order), to each of its
    /// clients, the keys matching it, sorted and each once (a NOLOOP client is not told
    /// of the keys it was the last to write).
    pub fn send_bcast(&mut self, out: &mut Outbound) {
        let mut pending = std::mem::take(&mut self.pending);
        let Some(bcast) = self.bcast.as_ref() else {
            return;
        };
        // Sorted by key, the last write of each key kept.
        pending.reverse();
        pending.sort_by(|a, b| a.0.cmp(&b.0));
        pending.dedup_by(|a, b| a.0 == b.0);
        let mut prefixes: Vec<&[u8]> = bcast
            .iter()
            .flat_map(|b| b.prefixes.iter().map(|p| &p[..]))
            .collect();
        prefixes.sort_unstable();
        prefixes.dedup();
        let mut keys = Vec::new();
        for prefix in prefixes {
            for client in bcast
                .iter()
                .filter(|b| b.prefixes.iter().any(|p| &p[..] == prefix))
            {
                keys.clear();
                let mut count = 0u32;
                for (key, writer) in &pending {
                    if key.starts_with(prefix) && !(client.noloop && *writer == client.reader.id) {
                        push_key(&mut keys, key);
                        count += 1;
                    }
                }
                if count == 0 {
                    continue;
                }
                out.track(
                    &Notice {
                        conn: client.reader.conn,
                        id: client.reader.id,
                        kind: KIND_BCAST,
                        writer: 0,
                        null_resp3: false,
                        keys: &keys,
                        count,
                    },
                    false,
                );
            }
        }
    }
}

/// Tells every tracking client but `except` (which its own worker tells after the
/// flush's reply) that every key changed.
pub fn send_flush(reg: &Registry, except: u64, out: &mut Outbound) {
    for reader in reg.tracking_clients() {
        if reader.id == except {
            continue;
        }
        out.track(&flush_notice(reader), false);
    }
}

/// The flush notice for `reader`.
pub fn flush_notice(reader: Reader) -> Notice<'static> {
    Notice {
        conn: reader.conn,
        id: reader.id,
        kind: KIND_FLUSH,
        writer: 0,
        null_resp3: false,
        keys: &[],
        count: 0,
    }
}

/// Forgets `key` of a table's `table`, telling each of its readers that it changed
/// (`writer`: the client whose command changed it, 0 for none).
fn forget(table: &mut Keys, key: &[u8], writer: u64, reg: &Registry, out: &mut Outbound) {
    let Some(readers) = table.remove(key) else {
        return;
    };
    reg.keys.fetch_sub(1, Ordering::Relaxed);
    tell(key, readers, writer, reg, out);
}

/// Tells `key`'s readers, taken out of a table (and off the count of keys), that it
/// changed.
fn tell(key: &[u8], readers: Vec<Reader>, writer: u64, reg: &Registry, out: &mut Outbound) {
    reg.items.fetch_sub(readers.len(), Ordering::Relaxed);
    let mut keys = Vec::with_capacity(4 + key.len());
    push_key(&mut keys, key);
    for r in readers {
        out.track(
            &Notice {
                conn: r.conn,
                id: r.id,
                kind: KIND_KEYS,
                writer,
                null_resp3: false,
                keys: &keys,
                count: 1,
            },
            false,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::msg::ConnRef;
    use crate::runtime::pubsub::{Entry, entries};
    use crate::runtime::tracking::ClientTracking;
    use goblin_store::{Change, KeyEvent};

    fn reader(id: u64, worker: usize) -> Reader {
        Reader {
            id,
            conn: ConnRef {
                worker,
                key: id as usize,
                generation: 1,
            },
        }
    }

    fn written(key: &[u8]) -> Event {
        Event::Key(KeyEvent {
            change: Change::Written,
            db: 0,
            slot: 0,
            key: key.into(),
            created: false,
            quiet: false,
        })
    }

    /// `(client id, kind, keys)` of each notice sent, in order.
    fn sent(out: &mut Outbound) -> Vec<(u64, u8, Vec<Vec<u8>>)> {
        let mut all = Vec::new();
        for (w, buf) in out.take() {
            for e in entries(&buf, w) {
                if let Entry::Track(n) = e {
                    all.push((n.id, n.kind, n.keys().map(<[u8]>::to_vec).collect()));
                }
            }
        }
        all
    }

    #[test]
    fn a_read_key_is_invalidated_once_for_each_reader() {
        let reg = Registry::default();
        let mut table = TrackTable::default();
        table.refresh(&reg);
        table.remember(b"k", reader(1, 0), &reg);
        table.remember(b"k", reader(1, 0), &reg);
        table.remember(b"k", reader(2, 1), &reg);
        table.remember(b"j", reader(2, 1), &reg);
        assert_eq!(reg.keys.load(Ordering::Relaxed), 2);
        assert_eq!(reg.items.load(Ordering::Relaxed), 3);
        let mut out = Outbound::default();
        table.on_events(&[written(b"k"), written(b"x")], 7, &reg, &mut out);
        let got = sent(&mut out);
        assert_eq!(got.len(), 2);
        assert!(
            got.iter()
                .all(|(_, kind, keys)| *kind == KIND_KEYS && keys == &[b"k".to_vec()])
        );
        table.on_events(&[written(b"k")], 7, &reg, &mut out);
        assert!(sent(&mut out).is_empty());
        assert_eq!(reg.keys.load(Ordering::Relaxed), 1);
        table.clear(&reg);
        assert_eq!(reg.keys.load(Ordering::Relaxed), 0);
        assert_eq!(reg.items.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn bcast_keys_go_per_prefix_sorted_once_and_without_a_noloop_clients_own() {
        let reg = Registry::default();
        let state = |prefixes: &[&[u8]], noloop: bool| ClientTracking {
            on: true,
            bcast: true,
            noloop,
            prefixes: prefixes.iter().map(|p| (*p).into()).collect(),
            ..Default::default()
        };
        reg.enable(reader(1, 0), &state(&[b"a", b"b"], false));
        reg.enable(reader(2, 1), &state(&[b"a"], true));
        assert_eq!(reg.prefixes(), 2);
        let mut table = TrackTable::default();
        table.refresh(&reg);
        let mut out = Outbound::default();
        table.on_events(
            &[written(b"a2"), written(b"b1"), written(b"c")],
            9,
            &reg,
            &mut out,
        );
        table.on_events(&[written(b"a1"), written(b"a2")], 2, &reg, &mut out);
        assert!(table.has_pending());
        table.send_bcast(&mut out);
        let mut got = sent(&mut out);
        got.sort();
        let keys = |k: &[&[u8]]| k.iter().map(|k| k.to_vec()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                (1, KIND_BCAST, keys(&[b"a1", b"a2"])),
                (1, KIND_BCAST, keys(&[b"b1"])),
            ]
        );
        // Client 2 (NOLOOP) wrote both `a` keys last: nothing for it.
        reg.disable(reader(1, 0));
        reg.disable(reader(2, 1));
        assert!(!reg.active());
        assert_eq!(reg.prefixes(), 0);
    }

    #[test]
    fn past_the_limit_keys_are_forgotten_and_invalidated() {
        let reg = Registry::with_max_keys(2);
        let mut table = TrackTable::default();
        for k in [&b"k1"[..], b"k2", b"k3", b"k4"] {
            table.remember(k, reader(1, 0), &reg);
        }
        let mut out = Outbound::default();
        table.limit(&reg, &mut out);
        assert_eq!(reg.keys.load(Ordering::Relaxed), 2);
        assert_eq!(sent(&mut out).len(), 2);
    }
}
