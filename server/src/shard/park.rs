//! Plans parked on this shard's keys: who waits for which key, in the order they came.
//!
//! A plan parks on keys of one or more shards; each shard keeps, for its keys, a queue
//! of waits in the order their commands came (their *turn*: when the command's bytes
//! reached the machine, or when its connection's thread began it — not when its wait
//! reached this shard — so a client on another thread that sent its command first is
//! served first, as in Redis; a plan served that must wait again keeps its turn). Every wait carries a claim flag shared by all its shards: whichever
//! shard serves it first sets the flag, so a plan waiting on keys of several shards is
//! served at most once; the coordinator sets it too when the wait times out or is given
//! up, so a late event serves nobody.
//!
//! After a unit of work wrote a key that some plan waits for, the shard looks down that
//! key's queue: a wait whose key is ready (per the plan's readiness test) is served —
//! a *notify* wait is told (`Msg::Woken`), a *lock* wait is granted an exclusive lock on
//! the key first (so nothing else can take what made it ready: the wait is served in the
//! same step as the write, and the plan runs with the key locked). Lock waits are served
//! one per write, the first in line first: the plan's own write to the key (a pop) serves
//! the next. The flag is the one piece of state shared across threads besides the inboxes.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use goblin_store::{Keyspace, Millis};

use crate::runtime::msg::TxRef;
use crate::txn::plan::{ReadyFn, Watch};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// How a wait is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serve {
    /// Tell the plan which key changed.
    Notify,
    /// Lock the key exclusively for the plan's transaction, then tell it.
    Lock,
}

/// One transaction's wait on this shard.
#[derive(Debug)]
struct Wait {
    id: u64,
    /// The database its keys are in.
    db: usize,
    keys: Vec<Watched>,
    claim: Arc<AtomicBool>,
}

/// A key a wait watches, with its readiness test and how it serves the wait.
#[derive(Debug)]
struct Watched {
    key: Box<[u8]>,
    ready: Option<ReadyFn>,
    serve: Serve,
    arg: Box<[u8]>,
    with: Option<Box<[u8]>>,
}

/// A wait to serve: the transaction, its wait number, the key, how, and the key a lock
/// wait is granted with ([`Watch::with`]).
pub type Wake = (TxRef, u64, Vec<u8>, Serve, Option<Vec<u8>>);

/// Who waits for which key on one shard.
#[derive(Debug, Default)]
pub struct Waiters {
    /// Per key, its waits by turn.
    by_key: FastMap<Box<[u8]>, VecDeque<(u64, TxRef)>>,
    by_tx: FastMap<TxRef, Wait>,
}

impl Waiters {
    /// True when no one waits.
    pub fn is_empty(&self) -> bool {
        self.by_tx.is_empty()
    }

    /// Number of waits registered here.
    pub fn len(&self) -> usize {
        self.by_tx.len()
    }

    /// Whether anyone waits for `key`.
    pub fn waits_for(&self, key: &[u8]) -> bool {
        self.by_key.contains_key(key)
    }

    /// Registers wait `id` of `tx` on `keys` of database `db` (replacing an earlier wait
    /// of `tx`), in each key's queue after the waits whose turn is not later.
    pub fn register(
        &mut self,
        tx: TxRef,
        id: u64,
        db: usize,
        keys: Vec<Watch>,
        claim: Arc<AtomicBool>,
        turn: u64,
    ) {
        self.remove(tx);
        let keys: Vec<Watched> = keys
            .into_iter()
            .map(|w| Watched {
                key: w.key.into_boxed_slice(),
                ready: w.ready,
                serve: w.serve,
                arg: w.arg.into_boxed_slice(),
                with: w.with.map(Vec::into_boxed_slice),
            })
            .collect();
        for w in &keys {
            let queue = self.by_key.entry(w.key.clone()).or_default();
            // Mostly the last: searched from the back.
            let at = queue
                .iter()
                .rposition(|(t, _)| *t <= turn)
                .map_or(0, |i| i + 1);
            queue.insert(at, (turn, tx));
        }
        self.by_tx.insert(
            tx,
            Wait {
                id,
                db,
                keys,
                claim,
            },
        );
    }

    /// Removes wait `id` of `tx` (if it is still the registered one).
    pub fn cancel(&mut self, tx: TxRef, id: u64) {
        if self.by_tx.get(&tx).is_some_and(|w| w.id == id) {
            self.remove(tx);
        }
    }

    fn remove(&mut self, tx: TxRef) {
        let Some(wait) = self.by_tx.remove(&tx) else {
            return;
        };
        for w in wait.keys {
            if let Some(queue) = self.by_key.get_mut(&w.key) {
                queue.retain(|(_, t)| *t != tx);
                if queue.is_empty() {
                    self.by_key.remove(&w.key);
                }
            }
        }
    }

    /// The waits `key` of database `index` (whose keyspace is `db`) serves now that it
    /// changed, in the order they came: as many ready lock waits as the key can serve
    /// (its readiness count: a list of two elements serves the first two), and every
    /// ready notify wait, each claimed (a wait another shard or the coordinator claimed
    /// first is dropped). They are removed. `reserved` lock waits served earlier have not
    /// yet taken their part: the readiness count is less by as many.
    pub fn serve(
        &mut self,
        key: &[u8],
        index: usize,
        db: &mut Keyspace,
        now: Millis,
        reserved: usize,
    ) -> Vec<Wake> {
        let Some(queue) = self.by_key.get(key) else {
            return Vec::new();
        };
        let mut served = Vec::new();
        let mut dropped = Vec::new();
        // Lock waits served so far, and how many the key can serve (its readiness count,
        // read once, before any of them takes anything).
        let (mut locked, mut capacity) = (0usize, None);
        for &(_, tx) in queue {
            let Some(wait) = self.by_tx.get(&tx).filter(|w| w.db == index) else {
                continue;
            };
            if wait.claim.load(Ordering::Acquire) {
                dropped.push(tx);
                continue;
            }
            let Some(watched) = wait.keys.iter().find(|w| *w.key == *key) else {
                continue;
            };
            let ready = watched
                .ready
                .map_or(1, |ready| ready(db, key, now, &watched.arg));
            if ready == 0 {
                continue;
            }
            let serve = watched.serve;
            if serve == Serve::Lock
                && locked >= *capacity.get_or_insert(ready.saturating_sub(reserved))
            {
                continue;
            }
            if wait
                .claim
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                dropped.push(tx);
                continue;
            }
            locked += usize::from(serve == Serve::Lock);
            let with = watched.with.as_deref().map(<[u8]>::to_vec);
            served.push((tx, wait.id, key.to_vec(), serve, with));
        }
        for tx in dropped.into_iter().chain(served.iter().map(|w| w.0)) {
            self.remove(tx);
        }
        served
    }

    /// Every key someone waits for in database `db` (a flush may have changed them
    /// all).
    pub fn keys(&self, db: usize) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = self
            .by_tx
            .values()
            .filter(|w| w.db == db)
            .flat_map(|w| w.keys.iter().map(|k| k.key.to_vec()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: TxRef = TxRef { worker: 0, seq: 1 };
    const T2: TxRef = TxRef { worker: 1, seq: 1 };
    const T3: TxRef = TxRef { worker: 1, seq: 2 };

    fn exists(db: &mut Keyspace, key: &[u8], now: Millis, _arg: &[u8]) -> usize {
        usize::from(db.contains(key, now))
    }

    fn watch(keys: &[&[u8]], ready: Option<ReadyFn>, serve: Serve) -> Vec<Watch> {
        keys.iter()
            .map(|k| Watch {
                key: k.to_vec(),
                ready,
                ready_first: None,
                serve,
                arg: Vec::new(),
                with: None,
            })
            .collect()
    }

    fn flag() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    /// The `n`th turn.
    fn turn(n: u64) -> u64 {
        1_000 + n
    }

    #[test]
    fn lock_waits_are_served_one_at_a_time_in_order() {
        let mut w = Waiters::default();
        let mut db = Keyspace::new();
        for (n, tx) in [T1, T2].into_iter().enumerate() {
            w.register(
                tx,
                1,
                0,
                watch(&[b"k"], Some(exists), Serve::Lock),
                flag(),
                turn(n as u64),
            );
        }
        assert!(
            w.serve(b"k", 0, &mut db, 0, 0).is_empty(),
            "not ready: nobody served"
        );
        db.set_str(b"k", b"v", None, 0);
        assert_eq!(
            w.serve(b"k", 0, &mut db, 0, 0),
            [(T1, 1, b"k".to_vec(), Serve::Lock, None)]
        );
        assert_eq!(
            w.serve(b"k", 0, &mut db, 0, 0),
            [(T2, 1, b"k".to_vec(), Serve::Lock, None)]
        );
        assert!(w.is_empty());
    }

    #[test]
    fn a_wait_served_elsewhere_or_given_up_is_dropped() {
        let mut w = Waiters::default();
        let mut db = Keyspace::new();
        db.set_str(b"k", b"v", None, 0);
        let taken = flag();
        w.register(
            T1,
            1,
            0,
            watch(&[b"k", b"j"], None, Serve::Lock),
            Arc::clone(&taken),
            turn(1),
        );
        w.register(
            T2,
            1,
            0,
            watch(&[b"k"], None, Serve::Notify),
            flag(),
            turn(2),
        );
        // Registered last, but its command started first (on another thread, say, or
        // it was served and waits again).
        w.register(
            T3,
            4,
            0,
            watch(&[b"k"], None, Serve::Notify),
            flag(),
            turn(0),
        );
        taken.store(true, Ordering::Release);
        let served = w.serve(b"k", 0, &mut db, 0, 0);
        assert_eq!(
            served,
            [
                (T3, 4, b"k".to_vec(), Serve::Notify, None),
                (T2, 1, b"k".to_vec(), Serve::Notify, None)
            ],
            "the first turn first; T1 was claimed elsewhere"
        );
        assert!(w.is_empty(), "T1's other key forgotten too");
    }

    #[test]
    fn a_cancelled_or_replaced_wait_is_not_served() {
        let mut w = Waiters::default();
        let mut db = Keyspace::new();
        w.register(
            T1,
            1,
            0,
            watch(&[b"a"], None, Serve::Notify),
            flag(),
            turn(0),
        );
        w.cancel(T1, 0);
        assert_eq!(w.len(), 1, "an older wait's cancel leaves the newer one");
        w.register(
            T1,
            2,
            0,
            watch(&[b"c"], None, Serve::Notify),
            flag(),
            turn(0),
        );
        assert!(w.serve(b"a", 0, &mut db, 0, 0).is_empty());
        w.cancel(T1, 2);
        assert!(w.is_empty());
    }
}
