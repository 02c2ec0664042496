//! The coordinator: runs one cross-shard command's plan on the connection's worker.
//!
//! A [`TxJob`]:
//! 1. locks, shard by shard in ascending shard order, the keys the plan's locking asks
//!    for (shared for reads, exclusive for writes, or every shard whole), waiting for
//!    each shard's grant before asking the next — no cycle of waits can form;
//! 2. picks one timestamp, then runs the plan: each step sends hops to shards and waits
//!    for all their results, which go back to the plan in the order of its hops; a plan
//!    may also park until a key changes or a timeout passes;
//! 3. answers the client and releases every lock (strict two-phase locking: nothing is
//!    released before everything is locked and done, so every observer sees all of the
//!    transaction or none of it).
//!
//! A shard that refuses a step (a key it does not own) fails the transaction: the
//! coordinator waits for the rest of the step, releases everything, and replies the
//! refusal. Release messages need no answer: they travel on the same FIFO channels as the
//! connection's later commands, so those find the locks already gone (their
//! acknowledgements, marked [`RELEASE`], only update which shards hold locks).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use goblin_protocol::Version;
use goblin_store::Millis;

use crate::repl::master::{Gathered, Part};
use crate::runtime::msg::{Batch, LockMode, Msg, ParkReq, TxRef, TxStep, TxStepDone};
use crate::runtime::server::Shared;
use crate::runtime::slowlog::SlowCmd;
use crate::shard::Outgoing;
use crate::shard::slots::SlotMap;
use crate::txn::plan::{Hop, HopOut, Outcome, Park, Plan, PlanCx, Step, Tally, Watch, encoded};

/// The `index` of a step that only releases locks: its acknowledgement carries no result.
pub const RELEASE: usize = usize::MAX;
/// The `index` of the step a shard runs for a parked plan served with a lock: it reports
/// `HopOut::Woken` once the transaction holds the key's lock.
pub const WOKEN: usize = usize::MAX - 1;

/// What a job needs from its worker to go on.
pub struct Env<'a> {
    /// The shared state.
    pub shared: &'a Shared,
    /// The worker's slot map.
    pub slots: &'a SlotMap,
    /// The worker's clock.
    pub now: Millis,
}

/// Where a transaction is.
#[derive(Debug)]
enum Phase {
    /// Waiting for the grant of `shards[i]`.
    Locking(usize),
    /// Waiting for this many results of a step.
    Running(usize),
    /// Waiting for wait `id` to be served, on these shards, until `deadline`; `claim` is
    /// set by whoever serves it or gives it up first.
    Parked {
        id: u64,
        shards: Vec<usize>,
        deadline: Option<Instant>,
        /// [`Park::internal`]: not a client's wait.
        internal: bool,
        claim: Arc<AtomicBool>,
        /// The hash slots of the keys it waits on (cluster mode redirects it when one
        /// leaves the node).
        slots: Vec<u16>,
    },
    /// The connection is gone while a shard was serving the wait: the grant it sends
    /// is given back, and the job ends without a reply.
    Abandoned,
    /// Its plan handed the connection a command to run ([`Step::Conn`]): the worker
    /// runs it and feeds its reply back ([`TxJob::on_conn_reply`]).
    OnConn(Box<Batch>),
    /// Finished.
    Done,
}

/// A transaction coordinated by this worker for one of its connections.
#[derive(Debug)]
pub struct TxJob {
    /// Its name on every shard.
    pub tx: TxRef,
    /// The connection it answers (its slab key on this worker).
    pub conn: usize,
    shards: Vec<usize>,
    locks: Vec<Vec<(Vec<u8>, LockMode)>>,
    lock_all: Vec<bool>,
    phase: Phase,
    results: Vec<Option<HopOut>>,
    failed: Option<Vec<u8>>,
    plan: Box<dyn Plan>,
    now: Millis,
    resp: Version,
    slots_version: u64,
    /// The database its steps work on (the client's; EXEC moves it along the SELECTs
    /// it runs).
    db: usize,
    /// Shards where the transaction holds locks now, released when it ends.
    locked_on: Vec<usize>,
    waits: u64,
    /// When its command came, ns since the epoch, for the order of its waits
    /// (`shard/park.rs`): set by the connection's thread, or at its first wait.
    turn: Option<u64>,
    /// What its steps done wrote, and the commands it sent itself, for replicas:
    /// appended to the stream before any of its locks goes.
    repl: Gathered,
    /// What each hop of the step in flight wrote, for replicas (by hop).
    parts: Vec<Option<Box<Part>>>,
    /// Where the commands of each hop of the step in flight come among the step's, when
    /// its hops interleave commands ([`Hop::order`]; empty otherwise).
    order: Vec<Vec<usize>>,
    /// The command it runs, for the shards to name its key events (keyspace
    /// notifications on).
    command: Option<Arc<Batch>>,
    /// The tracking client it runs for.
    tracked: Option<crate::runtime::tracking::Tracked>,
    /// It runs a read-only command (INFO's hits and misses).
    reads: bool,
    /// Since when it has been parked, if it is, with an entry (its wait is not timed).
    parked_since: Option<Instant>,
    /// How long it has waited parked (an entry's time leaves that out).
    waited: Duration,
    /// The slow commands its steps ran (EXEC's), for SLOWLOG.
    slow: Vec<SlowCmd>,
    /// The commands it called (a script's) or had refused, for INFO commandstats.
    calls: Vec<Tally>,
    /// The command it runs (a command run as a plan), whose error reply INFO
    /// commandstats counts as a failed call.
    counted: Option<usize>,
    /// Its own SLOWLOG entry, if it is one (a command run as a plan): the command (its
    /// arguments in a batch of the worker's pool, made into an entry only if slow).
    entry: Option<Entry>,
    /// Its wait timed out: a blocking command is an entry only when served, as in
    /// Redis.
    unserved: bool,
    /// CLIENT UNBLOCK ended its wait: as in Redis, it is an entry and a failed call
    /// whatever its reply (`updateStatsOnUnblock` with errors).
    unblocked: bool,
}

/// A command run as a plan, for its latency histogram, SLOWLOG and LATENCY.
#[derive(Debug)]
pub struct Entry {
    /// The command's id.
    pub id: usize,
    /// It may be a SLOWLOG entry (it is not `skip_slowlog`). Every command is a LATENCY
    /// sample.
    pub slowlog: bool,
    /// The command's arguments.
    pub command: Box<Batch>,
    /// The command is `fast`.
    pub fast: bool,
    /// When it started (its parsing counts).
    pub started: Instant,
    /// How long it ran, microseconds: from its start to the job's end, less its waits.
    pub micros: u64,
}

/// What a finished job leaves for SLOWLOG, LATENCY and INFO commandstats.
#[derive(Debug)]
pub struct JobTiming {
    /// The slow commands its steps ran.
    pub slow: Vec<SlowCmd>,
    /// Its own entry, when it has one.
    pub entry: Option<Entry>,
    /// Its command's id and how long it ran in ns, less its waits, for INFO
    /// commandstats and the command's latency histogram (not a blocking command that
    /// timed out: redis-server 7.0 records it only when served).
    pub latency: Option<(usize, u64)>,
    /// The commands it called (a script's).
    pub calls: Vec<Tally>,
    /// The command it ran, failed when the job answers an error.
    pub counted: Option<usize>,
    /// CLIENT UNBLOCK ended its wait: its command failed, whatever the reply.
    pub unblocked: bool,
}

impl TxJob {
    /// A transaction running `plan` on database `db` after locking the keys `needs`
    /// (and, with `whole_shards`, every shard whole), answering in `resp`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        tx: TxRef,
        conn: usize,
        slots: &SlotMap,
        needs: Vec<(Vec<u8>, LockMode)>,
        whole_shards: bool,
        plan: Box<dyn Plan>,
        resp: Version,
        db: usize,
    ) -> TxJob {
        // (shard, keys to lock there, whole shard)
        type ShardLocks = (usize, Vec<(Vec<u8>, LockMode)>, bool);
        let mut by_shard: Vec<ShardLocks> = Vec::new();
        if whole_shards {
            by_shard.extend((0..slots.shards()).map(|s| (s, Vec::new(), true)));
        }
        for (key, mode) in needs {
            let shard = slots.shard_of_key(&key);
            let at = match by_shard.iter().position(|(s, _, _)| *s == shard) {
                Some(at) => at,
                None => {
                    by_shard.push((shard, Vec::new(), false));
                    by_shard.len() - 1
                }
            };
            by_shard[at].1.push((key, mode));
        }
        // One lock per key, exclusive winning over shared (sorting first: a request may
        // name a million keys, and comparing each with the others would stall the loop).
        for (_, keys, _) in &mut by_shard {
            keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            keys.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same && later.1 == LockMode::Exclusive {
                    kept.1 = LockMode::Exclusive;
                }
                same
            });
        }
        by_shard.sort_by_key(|(s, _, _)| *s);
        TxJob {
            tx,
            conn,
            shards: by_shard.iter().map(|(s, _, _)| *s).collect(),
            lock_all: by_shard.iter().map(|(_, _, a)| *a).collect(),
            locks: by_shard.into_iter().map(|(_, k, _)| k).collect(),
            phase: Phase::Locking(0),
            results: Vec::new(),
            failed: None,
            plan,
            now: 0,
            resp,
            slots_version: slots.version(),
            db,
            locked_on: Vec::new(),
            waits: 0,
            turn: None,
            repl: Gathered::default(),
            parts: Vec::new(),
            order: Vec::new(),
            command: None,
            tracked: None,
            reads: false,
            parked_since: None,
            waited: Duration::ZERO,
            slow: Vec::new(),
            calls: Vec::new(),
            counted: None,
            entry: None,
            unserved: false,
            unblocked: false,
        }
    }

    /// The SLOWLOG entry of the command it runs (the client's command: a plan's, not
    /// EXEC's), timed from its start until the job ends, less the time it waits parked
    /// for keys (a blocking command's wait, as Redis leaves it out).
    pub fn set_entry(&mut self, entry: Entry) {
        self.entry = Some(entry);
    }

    /// When its command came: its waits are in line from then (`shard/park.rs`).
    pub fn set_turn(&mut self, turn: u64) {
        self.turn = Some(turn);
    }

    /// The tracking client the transaction runs for (CLIENT TRACKING): its steps
    /// remember the keys they lock for it when `tracked.read`.
    pub fn set_tracked(&mut self, tracked: crate::runtime::tracking::Tracked) {
        self.tracked = Some(tracked);
    }

    /// It runs a read-only command: its lookups are INFO's hits and misses.
    pub fn set_reads(&mut self, reads: bool) {
        self.reads = reads;
    }

    /// The command the transaction runs, given to its steps (for keyspace notifications).
    pub fn set_command(&mut self, command: Arc<Batch>) {
        self.command = Some(command);
    }

    /// What the job sends replicas is not wrapped in MULTI/EXEC: its command, run
    /// directly, touches keys it does not name (SCAN, RANDOMKEY), whose lazy expiry's
    /// DELs redis-server sends one by one.
    pub fn set_unwrapped(&mut self, unwrapped: bool) {
        self.repl.unwrapped = unwrapped;
    }

    /// Names the command the job runs, for INFO commandstats (`Worker::log_job`).
    pub fn set_counted(&mut self, id: usize) {
        self.counted = Some(id);
    }

    /// Takes what the finished job leaves for SLOWLOG and LATENCY.
    pub fn take_timing(&mut self) -> JobTiming {
        let waited = self.waited;
        let ran = self
            .entry
            .as_ref()
            .map(|e| (e.id, e.started.elapsed().saturating_sub(waited)));
        let entry = self.entry.take().filter(|_| !self.unserved).map(|mut e| {
            e.micros = ran.map_or(0, |(_, d)| d.as_micros() as u64);
            e
        });
        JobTiming {
            slow: std::mem::take(&mut self.slow),
            entry,
            latency: ran
                .filter(|_| !self.unserved)
                .map(|(id, d)| (id, d.as_nanos() as u64)),
            calls: std::mem::take(&mut self.calls),
            counted: self.counted,
            unblocked: self.unblocked,
        }
    }

    fn step(&self, index: usize) -> TxStep {
        TxStep {
            tx: self.tx,
            index,
            lock: Vec::new(),
            lock_all: false,
            try_lock: false,
            work: None,
            release: false,
            now: self.now,
            slots_version: self.slots_version,
            db: self.db,
            command: self.command.clone(),
            tracked: self.tracked,
            reads: self.reads,
            cuts: false,
        }
    }

    /// Starts: asks for the first lock, or runs the plan at once when there is none.
    /// The outcome when it finished at once.
    pub fn start(&mut self, env: &Env<'_>, out: &mut Vec<Outgoing>) -> Option<Outcome> {
        self.now = env.now;
        if self.shards.is_empty() {
            return self.advance(env, Vec::new(), out);
        }
        self.request_lock(0, out);
        None
    }

    fn request_lock(&mut self, i: usize, out: &mut Vec<Outgoing>) {
        let mut step = self.step(0);
        step.lock = std::mem::take(&mut self.locks[i]);
        step.lock_all = self.lock_all[i];
        self.phase = Phase::Locking(i);
        out.push((self.shards[i], Msg::Step(step)));
    }

    /// Handles a step's result; the outcome once the transaction is done (its release
    /// messages are then in `out`).
    pub fn on_done(
        &mut self,
        mut done: TxStepDone,
        env: &Env<'_>,
        out: &mut Vec<Outgoing>,
    ) -> Option<Outcome> {
        if let Some(part) = done.repl.take() {
            match self.parts.get_mut(done.index) {
                Some(slot) if matches!(self.phase, Phase::Running(_)) => *slot = Some(part),
                _ => self.repl.add(*part),
            }
        }
        if !done.slow.is_empty() {
            self.slow.append(&mut done.slow);
        }
        let at = self.locked_on.iter().position(|&s| s == done.shard);
        match (done.holds_locks, at) {
            (true, None) => self.locked_on.push(done.shard),
            (false, Some(i)) => {
                self.locked_on.swap_remove(i);
            }
            _ => {}
        }
        if done.index == RELEASE {
            return None;
        }
        if done.index == WOKEN {
            return self.on_served(done, env, out);
        }
        let result = match done.out {
            Ok(result) => Some(result),
            Err(refusal) => {
                self.failed.get_or_insert(refusal);
                None
            }
        };
        match self.phase {
            Phase::Locking(i) => {
                if self.failed.is_some() {
                    return self.fail(env.shared, out);
                }
                if i + 1 < self.shards.len() {
                    self.request_lock(i + 1, out);
                    return None;
                }
                // Every lock is held: one timestamp for the whole transaction.
                self.now = env.now;
                self.advance(env, Vec::new(), out)
            }
            Phase::Running(waiting) => {
                if let Some(slot) = self.results.get_mut(done.index) {
                    *slot = result;
                }
                if waiting > 1 {
                    self.phase = Phase::Running(waiting - 1);
                    return None;
                }
                let parts = std::mem::take(&mut self.parts);
                if self.order.is_empty() {
                    for part in parts.into_iter().flatten() {
                        self.repl.add(*part);
                    }
                } else {
                    self.repl
                        .add_interleaved(parts, &std::mem::take(&mut self.order));
                }
                if self.failed.is_some() {
                    return self.fail(env.shared, out);
                }
                let results = std::mem::take(&mut self.results)
                    .into_iter()
                    .map(|r| r.unwrap_or(HopOut::Done))
                    .collect();
                self.advance(env, results, out)
            }
            Phase::Parked { .. } | Phase::OnConn(_) | Phase::Abandoned | Phase::Done => None,
        }
    }

    /// A shard served the wait with a lock: the plan goes on holding it.
    fn on_served(
        &mut self,
        done: TxStepDone,
        env: &Env<'_>,
        out: &mut Vec<Outgoing>,
    ) -> Option<Outcome> {
        if matches!(self.phase, Phase::Abandoned) {
            self.release_all(env.shared, out);
            // What made the key ready is still there: the next waiter's (the release
            // travels first on the same channel).
            if let Ok(HopOut::Woken(key)) = done.out {
                out.push((done.shard, Msg::Reserve(self.db, key)));
            }
            self.phase = Phase::Done;
            return Some(Outcome::Reply(Vec::new()));
        }
        if !matches!(self.phase, Phase::Parked { .. }) {
            return None;
        }
        self.unpark(out);
        self.now = resumed_at(env);
        let woken = match done.out {
            Ok(woken @ HopOut::Woken(_)) => woken,
            Ok(_) | Err(_) => HopOut::TimedOut,
        };
        self.advance(env, vec![woken], out)
    }

    /// Wait `id` was woken by a change of `key`.
    pub fn on_woken(
        &mut self,
        id: u64,
        key: Vec<u8>,
        env: &Env<'_>,
        out: &mut Vec<Outgoing>,
    ) -> Option<Outcome> {
        if !matches!(&self.phase, Phase::Parked { id: parked, .. } if *parked == id) {
            return None;
        }
        self.unpark(out);
        self.now = resumed_at(env);
        self.advance(env, vec![HopOut::Woken(key)], out)
    }

    /// The command its plan handed the connection to run now, if it did ([`Step::Conn`]).
    pub fn take_conn_command(&mut self) -> Option<Box<Batch>> {
        match std::mem::replace(&mut self.phase, Phase::Running(0)) {
            Phase::OnConn(command) => Some(command),
            phase => {
                self.phase = phase;
                None
            }
        }
    }

    /// SLOWLOG entries of the connection commands its plan had run, in their order
    /// among its steps'.
    pub fn note_slow(&mut self, mut slow: Vec<SlowCmd>) {
        self.slow.append(&mut slow);
    }

    /// The connection ran the command of [`TxJob::take_conn_command`]: the plan goes on
    /// with its reply, still holding its locks.
    pub fn on_conn_reply(
        &mut self,
        reply: Vec<u8>,
        env: &Env<'_>,
        out: &mut Vec<Outgoing>,
    ) -> Option<Outcome> {
        self.advance(env, vec![HopOut::Reply(reply)], out)
    }

    /// When the current wait times out, if the job is parked with a timeout.
    pub fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Parked { deadline, .. } => deadline,
            _ => None,
        }
    }

    /// Claims the wait for the coordinator (a timeout, a cancel): false when a shard
    /// served it first — its grant is on the way, and wins.
    fn claim(&self) -> bool {
        match &self.phase {
            Phase::Parked { claim, .. } => claim
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok(),
            _ => false,
        }
    }

    /// The wait's timeout passed (the caller checked [`TxJob::deadline`]). Nothing
    /// happens when a shard served the wait first: the client is served.
    pub fn on_timeout(&mut self, env: &Env<'_>, out: &mut Vec<Outgoing>) -> Option<Outcome> {
        if !self.claim() {
            // Served first: no timeout any more; the grant decides.
            if let Phase::Parked { deadline, .. } = &mut self.phase {
                *deadline = None;
            }
            return None;
        }
        self.unpark(out);
        self.unserved = true;
        self.now = env.now;
        self.advance(env, vec![HopOut::TimedOut], out)
    }

    /// The hash slots of the keys the job waits on (none when it is not parked).
    pub fn parked_slots(&self) -> &[u16] {
        match &self.phase {
            Phase::Parked { slots, .. } => slots,
            _ => &[],
        }
    }

    /// Whether the job waits for a key event, and whether with a timeout (a wait that
    /// is the command's own work, [`Park::internal`], is none: the job is busy).
    pub fn parked_state(&self) -> (bool, bool) {
        match &self.phase {
            Phase::Parked {
                deadline,
                internal: false,
                ..
            } => (true, deadline.is_some()),
            _ => (false, false),
        }
    }

    /// Unblocks a parked job as if its wait had timed out (`CLIENT UNBLOCK … TIMEOUT`),
    /// or with `error` as its reply. False when it was not parked, or a shard served it
    /// first.
    pub fn unblock(
        &mut self,
        error: Option<&[u8]>,
        env: &Env<'_>,
        out: &mut Vec<Outgoing>,
    ) -> Option<Option<Outcome>> {
        if !self.claim() {
            return None;
        }
        self.unpark(out);
        self.release_all(env.shared, out);
        self.unblocked = true;
        if let Some(text) = error {
            self.phase = Phase::Done;
            let resp = self.resp;
            return Some(Some(Outcome::Reply(encoded(resp, |e| e.error(text)))));
        }
        self.now = env.now;
        Some(self.advance(env, vec![HopOut::TimedOut], out))
    }

    /// Gives up a parked job whose connection is gone: cancels its wait. False when the
    /// job must finish first: it has steps in flight (it finishes to release its locks),
    /// or a shard served its wait (its grant is given back when it arrives).
    pub fn cancel(&mut self, shared: &Shared, out: &mut Vec<Outgoing>) -> bool {
        if !matches!(self.phase, Phase::Parked { .. }) {
            return false;
        }
        if !self.claim() {
            self.phase = Phase::Abandoned;
            return false;
        }
        self.unpark(out);
        self.release_all(shared, out);
        self.phase = Phase::Done;
        true
    }

    fn unpark(&mut self, out: &mut Vec<Outgoing>) {
        if let Some(since) = self.parked_since.take() {
            self.waited += since.elapsed();
        }
        if let Phase::Parked { id, shards, .. } = std::mem::replace(&mut self.phase, Phase::Done) {
            for shard in shards {
                out.push((shard, Msg::Unpark(self.tx, id)));
            }
        }
    }

    /// Lets go of every lock the transaction holds — what it wrote in the replication
    /// stream first.
    fn release_all(&mut self, shared: &Shared, out: &mut Vec<Outgoing>) {
        self.repl.flush(&shared.repl);
        for shard in std::mem::take(&mut self.locked_on) {
            let mut step = self.step(RELEASE);
            step.release = true;
            out.push((shard, Msg::Step(step)));
        }
    }

    fn fail(&mut self, shared: &Shared, out: &mut Vec<Outgoing>) -> Option<Outcome> {
        self.release_all(shared, out);
        self.phase = Phase::Done;
        let resp = self.resp;
        self.failed
            .take()
            .map(|text| Outcome::Reply(encoded(resp, |e| e.error_sanitized(&text))))
    }

    fn park(&mut self, park: Park, env: &Env<'_>, out: &mut Vec<Outgoing>) {
        if self.entry.is_some() {
            self.parked_since = Some(Instant::now());
        }
        self.waits += 1;
        let id = self.waits;
        // (Shards of the wait let go of their locks once it is in line there.)
        self.repl.flush(&env.shared.repl);
        let mut by_shard: Vec<(usize, Vec<Watch>)> = Vec::new();
        for watch in park.keys {
            let shard = env.slots.shard_of_key(&watch.key);
            match by_shard.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, keys)) => keys.push(watch),
                None => by_shard.push((shard, vec![watch])),
            }
        }
        let shards = by_shard.iter().map(|(s, _)| *s).collect();
        let mut slots: Vec<u16> = by_shard
            .iter()
            .flat_map(|(_, keys)| keys.iter().map(|w| goblin_store::key_slot(&w.key)))
            .collect();
        slots.sort_unstable();
        slots.dedup();
        let claim = Arc::new(AtomicBool::new(false));
        let turn = *self.turn.get_or_insert_with(crate::clock::now_ns);
        // A parked plan holds no lock: others must be able to make it ready. A shard of
        // the wait lets go of its locks once the wait is in line there (what waits for
        // them may be what makes it ready); the others are released now.
        for (shard, keys) in by_shard {
            let release = match self.locked_on.iter().position(|&s| s == shard) {
                Some(i) => {
                    self.locked_on.swap_remove(i);
                    true
                }
                None => false,
            };
            let req = ParkReq {
                tx: self.tx,
                id,
                keys,
                claim: Arc::clone(&claim),
                turn,
                release,
                now: self.now,
                db: self.db,
            };
            out.push((shard, Msg::Park(req)));
        }
        self.release_all(env.shared, out);
        self.phase = Phase::Parked {
            id,
            shards,
            deadline: park.timeout.map(|t| Instant::now() + t),
            internal: park.internal,
            claim,
            slots,
        };
    }

    /// Feeds the plan until it sends hops, parks or finishes.
    fn advance(
        &mut self,
        env: &Env<'_>,
        mut results: Vec<HopOut>,
        out: &mut Vec<Outgoing>,
    ) -> Option<Outcome> {
        loop {
            let cx = PlanCx {
                shared: env.shared,
                slots: env.slots,
                resp: self.resp,
                now: self.now,
                db: std::cell::Cell::new(self.db),
                command: std::cell::RefCell::new(None),
                slow: std::cell::RefCell::new(Vec::new()),
                calls: std::cell::RefCell::new(Vec::new()),
                unblocked: self.unblocked,
                propagated: std::cell::RefCell::new(Vec::new()),
            };
            let step = self.plan.next(&cx, results);
            for part in cx.propagated.take() {
                self.repl.add(part);
            }
            self.slow.append(&mut cx.slow.take());
            self.calls.append(&mut cx.calls.take());
            self.db = cx.db.get();
            if let Some(command) = cx.command.take() {
                self.command = Some(command);
            }
            match step {
                Step::Hops(hops) if hops.is_empty() => results = Vec::new(),
                Step::Hops(hops) => {
                    self.send(env.shared, hops, out);
                    return None;
                }
                Step::Park(park) => {
                    self.park(park, env, out);
                    return None;
                }
                Step::Done(outcome) => {
                    self.release_all(env.shared, out);
                    self.phase = Phase::Done;
                    return Some(outcome);
                }
                Step::Conn(command) => {
                    self.phase = Phase::OnConn(command);
                    return None;
                }
            }
        }
    }

    fn send(&mut self, shared: &Shared, mut hops: Vec<Hop>, out: &mut Vec<Outgoing>) {
        if hops.iter().any(|h| h.release) {
            // A shard lets go of locks before the end: what was written goes first.
            self.repl.flush(&shared.repl);
        }
        self.phase = Phase::Running(hops.len());
        self.results = hops.iter().map(|_| None).collect();
        self.parts.clear();
        self.parts.resize_with(hops.len(), || None);
        self.order.clear();
        if hops.iter().any(|h| !h.order.is_empty()) {
            self.order = hops
                .iter_mut()
                .map(|h| std::mem::take(&mut h.order))
                .collect();
        }
        let cuts = !self.order.is_empty();
        for (index, hop) in hops.into_iter().enumerate() {
            let mut step = self.step(index);
            step.cuts = cuts;
            step.lock = hop.lock;
            step.try_lock = hop.try_lock;
            step.release = hop.release;
            step.work = hop.work;
            out.push((hop.shard, Msg::Step(step)));
        }
    }
}

/// The clock a woken job goes on with: read now, for the worker's may date from before a
/// long command of the same iteration (a transaction's DEBUG SLEEP) — Redis serves its
/// blocked clients with the time after the command, so a key whose deadline passed
/// meanwhile serves nobody.
fn resumed_at(env: &Env<'_>) -> Millis {
    crate::clock::now_ms().max(env.now)
}
