//! Parked plans waiting on this shard's keys: a registry by key, consulted with each
//! unit of work's events.
//!
//! A plan parks on keys of one or more shards; each shard keeps, for its keys, who waits.
//! The first event on a watched key wakes the wait on every key of this shard (the
//! coordinator cancels it on the other shards); a flush wakes every wait.

use std::collections::HashMap;

use goblin_store::Event;

use crate::runtime::msg::TxRef;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// One wait: a transaction's wait number.
type Waiter = (TxRef, u64);
/// A transaction's registered wait: its number and its keys here.
type Wait = (u64, Vec<Box<[u8]>>);

/// Who waits for which key on one shard.
#[derive(Debug, Default)]
pub struct Waiters {
    by_key: FastMap<Box<[u8]>, Vec<Waiter>>,
    by_tx: FastMap<TxRef, Wait>,
}

impl Waiters {
    /// True when no one waits.
    pub fn is_empty(&self) -> bool {
        self.by_tx.is_empty()
    }

    /// Registers wait `id` of `tx` on `keys`, replacing an earlier wait of `tx`.
    pub fn register(&mut self, tx: TxRef, id: u64, keys: Vec<Vec<u8>>) {
        self.remove(tx);
        let keys: Vec<Box<[u8]>> = keys.into_iter().map(Vec::into_boxed_slice).collect();
        for k in &keys {
            self.by_key.entry(k.clone()).or_default().push((tx, id));
        }
        self.by_tx.insert(tx, (id, keys));
    }

    /// Removes wait `id` of `tx` (if it is still the registered one).
    pub fn cancel(&mut self, tx: TxRef, id: u64) {
        if self.by_tx.get(&tx).is_some_and(|(i, _)| *i == id) {
            self.remove(tx);
        }
    }

    fn remove(&mut self, tx: TxRef) {
        let Some((_, keys)) = self.by_tx.remove(&tx) else {
            return;
        };
        for k in keys {
            if let Some(list) = self.by_key.get_mut(&k) {
                list.retain(|(t, _)| *t != tx);
                if list.is_empty() {
                    self.by_key.remove(&k);
                }
            }
        }
    }

    /// The waits `events` wake, each with the key that woke it; they are removed.
    pub fn woken_by(&mut self, events: &[Event]) -> Vec<(TxRef, u64, Vec<u8>)> {
        let mut woken = Vec::new();
        for event in events {
            match event {
                Event::Key(k) => {
                    let Some(list) = self.by_key.get(&k.key) else {
                        continue;
                    };
                    let list = list.clone();
                    for (tx, id) in list {
                        self.remove(tx);
                        woken.push((tx, id, k.key.to_vec()));
                    }
                }
                Event::Flushed { .. } => {
                    let all: Vec<(TxRef, u64, Vec<u8>)> = self
                        .by_tx
                        .iter()
                        .map(|(tx, (id, keys))| {
                            (
                                *tx,
                                *id,
                                keys.first().map(|k| k.to_vec()).unwrap_or_default(),
                            )
                        })
                        .collect();
                    for (tx, _, _) in &all {
                        self.remove(*tx);
                    }
                    woken.extend(all);
                }
            }
        }
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goblin_store::{Change, KeyEvent};

    const T1: TxRef = TxRef { worker: 0, seq: 1 };
    const T2: TxRef = TxRef { worker: 1, seq: 1 };

    fn written(key: &[u8]) -> Event {
        Event::Key(KeyEvent {
            change: Change::Written,
            db: 0,
            slot: 0,
            key: key.into(),
        })
    }

    #[test]
    fn an_event_wakes_each_wait_once() {
        let mut w = Waiters::default();
        w.register(T1, 1, vec![b"a".to_vec(), b"b".to_vec()]);
        w.register(T2, 7, vec![b"b".to_vec()]);
        let woken = w.woken_by(&[written(b"b"), written(b"a")]);
        assert_eq!(woken, [(T1, 1, b"b".to_vec()), (T2, 7, b"b".to_vec())]);
        assert!(w.is_empty());
    }

    #[test]
    fn a_cancelled_or_replaced_wait_is_not_woken() {
        let mut w = Waiters::default();
        w.register(T1, 1, vec![b"a".to_vec()]);
        w.cancel(T1, 0);
        assert!(!w.is_empty(), "an older wait's cancel leaves the newer one");
        w.register(T1, 2, vec![b"c".to_vec()]);
        assert!(w.woken_by(&[written(b"a")]).is_empty());
        w.cancel(T1, 2);
        assert!(w.is_empty());
        w.register(T2, 3, vec![b"x".to_vec()]);
        assert_eq!(w.woken_by(&[Event::Flushed { db: 0 }]).len(), 1);
    }
}
