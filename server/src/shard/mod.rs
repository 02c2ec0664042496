//! A shard: the keys of the hash slots one worker owns, and the lock table that makes
//! multi-shard commands atomic.
//!
//! # The lock protocol
//!
//! A command whose keys span shards runs as a transaction coordinated by the
//! connection's worker (`tx.rs`). On each shard it visits, in ascending shard order, it
//! first locks its keys — shared for reads, exclusive for writes, or the whole shard for
//! keyspace-wide commands — then runs its steps with one timestamp, then releases. Locks
//! are taken on one shard at a time and only in ascending shard order, so the waits-for
//! graph has no cycle: no deadlock.
//!
//! Everything that cannot proceed waits here, in one FIFO list ([`Shard::blocked`]):
//! a transaction's lock request whose keys are taken, and a plain command (with the rest
//! of its batch) that touches a locked key. A waiting item holds no lock on this shard.
//! Fairness: a newcomer that needs a key some waiting item needs queues behind it; when
//! locks are released the list is retried in order, and an item never overtakes an
//! earlier one that wants the same key, nor an earlier batch of the same connection.
//!
//! Single-shard commands pay one branch for all this: while no lock is held or wanted
//! (`Shard::quiet`), nothing is looked up.

use std::collections::{HashMap, HashSet, VecDeque};

use std::time::Instant;

use goblin_protocol::{Encoder, Version};
use goblin_store::{Keyspace, Millis};

use crate::runtime::msg::{
    Batch, ConnRef, LockMode, Moved, Msg, Special, TxRef, TxStep, TxStepDone,
};
use crate::runtime::server::Shared;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandSpec, CommandTable, Flags};

/// Commands are timed one run in this many, for INFO commandstats' `usec` (an estimate).
const TIMING_SAMPLE: u64 = 16;

/// One command's statistics on one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmdStat {
    /// Times dispatched.
    pub calls: u64,
    /// Microseconds spent running it here.
    pub usec: u64,
    /// Times it replied an error here.
    pub failed: u64,
}

/// Lock state of one key that is locked or wanted.
#[derive(Debug, Default)]
struct KeyLock {
    readers: u32,
    writer: bool,
    /// Waiting items that need the key.
    queued: u32,
}

/// What a waiting item needs before it can go on.
#[derive(Debug, Default, Clone)]
struct Needs {
    keys: Vec<(Vec<u8>, LockMode)>,
    all: bool,
}

/// Something waiting on this shard.
#[derive(Debug)]
enum Blocked {
    /// A batch of plain commands stopped at `batch.next`.
    Batch {
        from: ConnRef,
        batch: Box<Batch>,
        needs: Needs,
    },
    /// A transaction step waiting for its locks.
    Step { step: TxStep, needs: Needs },
}

/// A message this shard produced for a worker (possibly its own).
pub type Outgoing = (usize, Msg);

/// One worker's shard.
#[derive(Debug)]
pub struct Shard {
    /// Index of the shard (and of its worker).
    pub id: usize,
    /// The keys.
    pub db: Keyspace,
    /// The hash slots this shard owns.
    pub owned: std::ops::Range<usize>,
    /// Per-command statistics of this worker (INFO commandstats sums them).
    pub stats: Vec<CmdStat>,
    /// Commands run here, for sampling their timing.
    executed: u64,
    locks: HashMap<Vec<u8>, KeyLock>,
    held: HashMap<TxRef, Needs>,
    all_holder: Option<TxRef>,
    queued_all: usize,
    blocked_conns: HashMap<ConnRef, usize>,
    blocked: VecDeque<Blocked>,
}

/// The keys a command touches, with the lock mode its flags imply.
pub fn command_needs(spec: &CommandSpec, args: &Args<'_>) -> (Vec<(Vec<u8>, LockMode)>, bool) {
    let mode = if spec.flags.contains(Flags::WRITE) {
        LockMode::Exclusive
    } else {
        LockMode::Shared
    };
    let keys = spec
        .keys
        .indexes(args.len())
        .map(|i| (args.get(i).to_vec(), mode))
        .collect();
    (keys, matches!(spec.exec, Exec::AllShards { .. }))
}

impl Shard {
    /// An empty shard owning the slots `owned`, keeping statistics for `commands`
    /// command-table entries.
    pub fn new(id: usize, owned: std::ops::Range<usize>, commands: usize) -> Self {
        Shard {
            id,
            db: Keyspace::new(),
            owned,
            stats: vec![CmdStat::default(); commands],
            executed: 0,
            locks: HashMap::new(),
            held: HashMap::new(),
            all_holder: None,
            queued_all: 0,
            blocked_conns: HashMap::new(),
            blocked: VecDeque::new(),
        }
    }

    /// True when no lock is held or wanted: commands run without looking anything up.
    pub fn quiet(&self) -> bool {
        self.locks.is_empty() && self.held.is_empty() && self.blocked.is_empty()
    }

    fn compatible(&self, needs: &Needs, holder: Option<TxRef>) -> bool {
        if self.all_holder.is_some() && self.all_holder != holder {
            return false;
        }
        if needs.all && self.held.keys().any(|t| Some(*t) != holder) {
            return false;
        }
        needs.keys.iter().all(|(k, mode)| match self.locks.get(k) {
            None => true,
            Some(l) => match mode {
                LockMode::Shared => !l.writer,
                LockMode::Exclusive => !l.writer && l.readers == 0,
            },
        })
    }

    /// Whether a newcomer must queue behind waiting items.
    fn queued_ahead(&self, needs: &Needs, from: Option<ConnRef>) -> bool {
        if self.queued_all > 0 {
            return true;
        }
        if needs.all && !self.blocked.is_empty() {
            return true;
        }
        if from.is_some_and(|c| self.blocked_conns.contains_key(&c)) {
            return true;
        }
        needs
            .keys
            .iter()
            .any(|(k, _)| self.locks.get(k).is_some_and(|l| l.queued > 0))
    }

    fn register(&mut self, needs: &Needs, from: Option<ConnRef>) {
        for (k, _) in &needs.keys {
            self.locks.entry(k.clone()).or_default().queued += 1;
        }
        if needs.all {
            self.queued_all += 1;
        }
        if let Some(c) = from {
            *self.blocked_conns.entry(c).or_default() += 1;
        }
    }

    fn unregister(&mut self, needs: &Needs, from: Option<ConnRef>) {
        for (k, _) in &needs.keys {
            if let Some(l) = self.locks.get_mut(k) {
                l.queued = l.queued.saturating_sub(1);
                if l.queued == 0 && l.readers == 0 && !l.writer {
                    self.locks.remove(k);
                }
            }
        }
        if needs.all {
            self.queued_all = self.queued_all.saturating_sub(1);
        }
        if let Some(c) = from
            && let Some(n) = self.blocked_conns.get_mut(&c)
        {
            *n -= 1;
            if *n == 0 {
                self.blocked_conns.remove(&c);
            }
        }
    }

    fn acquire(&mut self, tx: TxRef, needs: &Needs) {
        for (k, mode) in &needs.keys {
            let l = self.locks.entry(k.clone()).or_default();
            match mode {
                LockMode::Shared => l.readers += 1,
                LockMode::Exclusive => l.writer = true,
            }
        }
        if needs.all {
            self.all_holder = Some(tx);
        }
        let held = self.held.entry(tx).or_default();
        held.keys.extend(needs.keys.iter().cloned());
        held.all |= needs.all;
    }

    fn release(&mut self, tx: TxRef) {
        let Some(held) = self.held.remove(&tx) else {
            return;
        };
        for (k, mode) in held.keys {
            if let Some(l) = self.locks.get_mut(&k) {
                match mode {
                    LockMode::Shared => l.readers = l.readers.saturating_sub(1),
                    LockMode::Exclusive => l.writer = false,
                }
                if l.queued == 0 && l.readers == 0 && !l.writer {
                    self.locks.remove(&k);
                }
            }
        }
        if self.all_holder == Some(tx) {
            self.all_holder = None;
        }
    }

    /// Runs a batch of plain commands that arrived from connection `from` (a part of a
    /// keyspace-wide command when `part` is set). Its replies go back to the connection's
    /// worker, or it waits here for a lock.
    pub fn run_batch(
        &mut self,
        shared: &Shared,
        from: ConnRef,
        mut batch: Box<Batch>,
        out: &mut Vec<Outgoing>,
    ) {
        let table = &shared.commands;
        if !self.quiet()
            && let Some(needs) = self.next_needs(table, &batch)
            && (self.queued_ahead(&needs, Some(from)) || !self.compatible(&needs, None))
        {
            self.register(&needs, Some(from));
            self.blocked
                .push_back(Blocked::Batch { from, batch, needs });
            return;
        }
        match self.continue_batch(shared, &mut batch) {
            Some(needs) => {
                self.register(&needs, Some(from));
                self.blocked
                    .push_back(Blocked::Batch { from, batch, needs });
            }
            None => out.push(finished(from, batch)),
        }
    }

    /// What the next command of `batch` needs.
    fn next_needs(&self, table: &CommandTable, batch: &Batch) -> Option<Needs> {
        let cmd = batch.cmds.get(batch.next)?;
        let spec = table.get(cmd.spec)?;
        let (keys, all) = command_needs(spec, &batch.args(batch.next));
        Some(Needs { keys, all })
    }

    /// Runs the batch's commands from `batch.next` until it ends (None) or a command
    /// needs a lock it cannot have (its needs).
    fn continue_batch(&mut self, shared: &Shared, batch: &mut Batch) -> Option<Needs> {
        while !batch.finished() {
            if !self.quiet()
                && let Some(needs) = self.next_needs(&shared.commands, batch)
                && !self.compatible(&needs, None)
            {
                return Some(needs);
            }
            self.run_one(shared, batch);
        }
        None
    }

    /// Runs command `batch.next` with no lock checks.
    fn run_one(&mut self, shared: &Shared, batch: &mut Batch) {
        let Batch {
            data,
            spans,
            cmds,
            next,
            replies,
            resp,
            now,
        } = batch;
        let Some(cmd) = cmds.get(*next) else { return };
        *next += 1;
        let args = Args::new(data, spans.get(cmd.args.clone()).unwrap_or(&[]));
        let Some(spec) = shared.commands.get(cmd.spec) else {
            return;
        };
        self.execute(shared, spec, &args, *now, replies, *resp);
    }

    /// Runs a shard handler (or a keyspace-wide command's part) on this shard, writing
    /// its reply to `out`, and accounts for it in the command statistics.
    pub fn execute(
        &mut self,
        shared: &Shared,
        spec: &CommandSpec,
        args: &Args<'_>,
        now: Millis,
        out: &mut Vec<u8>,
        resp: Version,
    ) {
        // Time one run in TIMING_SAMPLE of each command (reading the clock twice costs
        // about as much as a GET's own work) and count it TIMING_SAMPLE times.
        self.executed = self.executed.wrapping_add(1);
        let timed = self.executed.is_multiple_of(TIMING_SAMPLE);
        let started = timed.then(Instant::now);
        let reply_at = out.len();
        let mut ctx = ShardCtx {
            db: &mut self.db,
            now,
            out: Encoder::new(out, resp),
            shard: self.id,
            owned: self.owned.clone(),
            slots: &shared.slots,
            max_string: shared.config.limits.max_bulk_len,
            stats: &self.stats,
        };
        match spec.exec {
            Exec::Shard(f) | Exec::Cursor(f) => f(&mut ctx, args),
            Exec::AllShards { part, .. } => part(&mut ctx, args),
            Exec::Conn(_) | Exec::Container | Exec::Transaction => {}
        }
        if let Some(stat) = self.stats.get_mut(spec.id) {
            if let Some(started) = started {
                stat.usec += started.elapsed().as_micros() as u64 * TIMING_SAMPLE;
            }
            if out.get(reply_at) == Some(&b'-') {
                stat.failed += 1;
            }
        }
    }

    /// Counts a call of command `id` (on the connection's worker, where it is dispatched).
    pub fn count_call(&mut self, id: usize) {
        if let Some(stat) = self.stats.get_mut(id) {
            stat.calls += 1;
        }
    }

    /// Handles a transaction step: lock (or wait), run, release.
    pub fn step(&mut self, shared: &Shared, step: TxStep, out: &mut Vec<Outgoing>) {
        let needs = Needs {
            keys: step.lock.clone(),
            all: step.lock_all,
        };
        let wants_locks = !needs.keys.is_empty() || needs.all;
        if wants_locks
            && (self.queued_ahead(&needs, None) || !self.compatible(&needs, Some(step.tx)))
        {
            self.register(&needs, None);
            self.blocked.push_back(Blocked::Step { step, needs });
            return;
        }
        self.run_step(shared, step, &needs, out, true);
    }

    /// Runs a step whose locks are available: acquire, run, release if asked (then, with
    /// `retry`, let waiting items move), and report.
    fn run_step(
        &mut self,
        shared: &Shared,
        mut step: TxStep,
        needs: &Needs,
        out: &mut Vec<Outgoing>,
        retry: bool,
    ) {
        if !needs.keys.is_empty() || needs.all {
            self.acquire(step.tx, needs);
        }
        if let Some(batch) = step.batch.as_mut() {
            batch.now = step.now;
            while !batch.finished() {
                self.run_one(shared, batch);
            }
        }
        let mut claimed = None;
        let taken = match step.special.take() {
            Some(Special::Take(key)) => self.db.remove(&key, step.now).map(|e| Moved {
                expire_at: e.expire_at,
                value: e.value,
                flags: e.flags,
            }),
            Some(Special::Clone(key)) => self.db.get(&key, step.now).map(|e| Moved {
                expire_at: e.expire_at(),
                value: e.value().to_value(),
                // A copy is a new object: never one of Redis's shared integers.
                flags: e.flags() | goblin_store::UNSHARED,
            }),
            Some(Special::Put(key, moved)) => {
                self.db.insert(&key, moved.value, moved.expire_at, step.now);
                if moved.flags != 0 {
                    self.db.add_flags(&key, moved.flags, step.now);
                }
                None
            }
            Some(Special::TryClaim {
                key,
                token,
                deadline,
                release_if_won,
                release_if_held,
            }) => {
                let won = crate::families::goblin::try_claim(
                    &mut self.db,
                    &key,
                    &token,
                    deadline,
                    step.now,
                );
                claimed = Some(won);
                step.release |= if won { release_if_won } else { release_if_held };
                None
            }
            None => None,
        };
        if step.release {
            self.release(step.tx);
            if retry {
                self.retry(shared, out);
            }
        }
        let done = TxStepDone {
            tx: step.tx,
            shard: self.id,
            batch: step.batch,
            taken,
            claimed,
            holds_locks: self.held.contains_key(&step.tx),
        };
        out.push((step.tx.worker, Msg::StepDone(done)));
    }

    /// Retries waiting items in order after locks were released, until nothing moves.
    fn retry(&mut self, shared: &Shared, out: &mut Vec<Outgoing>) {
        loop {
            let mut progressed = false;
            let mut claimed: HashSet<Vec<u8>> = HashSet::new();
            let mut claimed_all = false;
            let mut claimed_conns: HashSet<ConnRef> = HashSet::new();
            let items = std::mem::take(&mut self.blocked);
            for item in items {
                let (needs, from, tx) = match &item {
                    Blocked::Batch { needs, from, .. } => (needs.clone(), Some(*from), None),
                    Blocked::Step { needs, step } => (needs.clone(), None, Some(step.tx)),
                };
                let overtakes = claimed_all
                    || (needs.all && (!claimed.is_empty() || !claimed_conns.is_empty()))
                    || needs.keys.iter().any(|(k, _)| claimed.contains(k))
                    || from.is_some_and(|c| claimed_conns.contains(&c));
                if overtakes || !self.compatible(&needs, tx) {
                    claimed.extend(needs.keys.iter().map(|(k, _)| k.clone()));
                    claimed_all |= needs.all;
                    if let Some(c) = from {
                        claimed_conns.insert(c);
                    }
                    self.blocked.push_back(item);
                    continue;
                }
                progressed = true;
                self.unregister(&needs, from);
                match item {
                    Blocked::Step { step, needs } => {
                        // A releasing step retries by itself; keep this pass simple.
                        self.run_step(shared, step, &needs, out, false);
                    }
                    Blocked::Batch {
                        from, mut batch, ..
                    } => match self.continue_batch(shared, &mut batch) {
                        Some(needs) => {
                            self.register(&needs, Some(from));
                            claimed.extend(needs.keys.iter().map(|(k, _)| k.clone()));
                            claimed_all |= needs.all;
                            claimed_conns.insert(from);
                            self.blocked
                                .push_back(Blocked::Batch { from, batch, needs });
                        }
                        None => out.push(finished(from, batch)),
                    },
                }
            }
            if !progressed {
                return;
            }
        }
    }
}

/// The message that returns a finished batch.
fn finished(from: ConnRef, batch: Box<Batch>) -> Outgoing {
    (from.worker, Msg::Done(from, batch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        Shared::build(
            crate::config::Config {
                threads: 1,
                ..Default::default()
            },
            addr,
        )
        .map(|(s, _)| s)
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn batch(table: &CommandTable, cmds: &[&[&[u8]]]) -> Box<Batch> {
        let mut b = Box::<Batch>::default();
        for args in cmds {
            let spans: Vec<_> = {
                let mut pos = 0;
                args.iter()
                    .map(|a| {
                        let r = pos..pos + a.len();
                        pos += a.len();
                        r
                    })
                    .collect()
            };
            let data: Vec<u8> = args.concat();
            let a = Args::new(&data, &spans);
            let spec = table.resolve(&a).map(|s| s.id).unwrap_or(0);
            b.push(spec, &a);
        }
        b
    }

    const C1: ConnRef = ConnRef {
        worker: 1,
        key: 1,
        generation: 1,
    };
    const C2: ConnRef = ConnRef {
        worker: 1,
        key: 2,
        generation: 1,
    };
    const T1: TxRef = TxRef { worker: 2, seq: 1 };

    fn lock_step(keys: &[&[u8]], mode: LockMode) -> TxStep {
        TxStep {
            tx: T1,
            lock: keys.iter().map(|k| (k.to_vec(), mode)).collect(),
            lock_all: false,
            batch: None,
            special: None,
            release: false,
            now: 0,
        }
    }

    fn release_step() -> TxStep {
        TxStep {
            tx: T1,
            lock: vec![],
            lock_all: false,
            batch: None,
            special: None,
            release: true,
            now: 0,
        }
    }

    #[test]
    fn commands_on_locked_keys_wait_and_others_do_not() {
        let shared = shared();
        let t = &shared.commands;
        let mut shard = Shard::new(0, 0..16384, t.all().len());
        let mut out = Vec::new();
        shard.step(&shared, lock_step(&[b"a"], LockMode::Exclusive), &mut out);
        assert_eq!(out.len(), 1, "lock granted at once");
        out.clear();
        shard.run_batch(&shared, C1, batch(t, &[&[b"GET", b"a"]]), &mut out);
        assert!(out.is_empty(), "GET a waits for the transaction");
        shard.run_batch(&shared, C2, batch(t, &[&[b"GET", b"b"]]), &mut out);
        assert_eq!(out.len(), 1, "GET b runs");
        out.clear();
        shard.step(&shared, release_step(), &mut out);
        assert_eq!(out.len(), 2, "release runs the waiting GET, then reports");
        assert!(shard.quiet());
    }

    #[test]
    fn a_connections_later_batch_waits_behind_its_earlier_one() {
        let shared = shared();
        let t = &shared.commands;
        let mut shard = Shard::new(0, 0..16384, t.all().len());
        let mut out = Vec::new();
        shard.step(&shared, lock_step(&[b"a"], LockMode::Exclusive), &mut out);
        out.clear();
        shard.run_batch(&shared, C1, batch(t, &[&[b"SET", b"a", b"1"]]), &mut out);
        shard.run_batch(&shared, C1, batch(t, &[&[b"SET", b"b", b"1"]]), &mut out);
        assert!(
            out.is_empty(),
            "the SET b of the same connection must not overtake"
        );
        shard.step(&shared, release_step(), &mut out);
        let done: Vec<_> = out
            .iter()
            .filter(|(_, m)| matches!(m, Msg::Done(..)))
            .collect();
        assert_eq!(done.len(), 2);
    }

    #[test]
    fn shared_locks_admit_readers_and_hold_writers() {
        let shared = shared();
        let t = &shared.commands;
        let mut shard = Shard::new(0, 0..16384, t.all().len());
        let mut out = Vec::new();
        shard.step(&shared, lock_step(&[b"a"], LockMode::Shared), &mut out);
        out.clear();
        shard.run_batch(&shared, C1, batch(t, &[&[b"GET", b"a"]]), &mut out);
        assert_eq!(out.len(), 1);
        out.clear();
        shard.run_batch(&shared, C2, batch(t, &[&[b"SET", b"a", b"x"]]), &mut out);
        assert!(out.is_empty());
        // A reader arriving after a waiting writer queues behind it.
        shard.run_batch(&shared, C1, batch(t, &[&[b"GET", b"a"]]), &mut out);
        assert!(out.is_empty());
        shard.step(&shared, release_step(), &mut out);
        assert_eq!(out.len(), 3);
    }
}
