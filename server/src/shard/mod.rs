//! A shard: the keys of the hash slots one worker owns, the one way work reaches them,
//! and the participant side of the lock protocol.
//!
//! # The write path
//!
//! Every unit of work on the keys — a command, a step of a cross-shard plan, a round of
//! active expiry (lazy expiry happens inside the others) — goes through
//! [`Shard::unit`]: it gives the work a [`ShardCtx`], then hands the key events the work
//! caused, with its effect, to the shard's observers, wakes the plans parked on those
//! keys and touches the keys clients watch (`events.rs`, `park.rs`, `watch.rs`). Nothing
//! else holds the keyspace mutably.
//!
//! # Ownership
//!
//! The shard owns the slots its worker's slot map gives it (`slots.rs`). Work routed with
//! another version of the map is checked key by key, and a key of a slot the shard does
//! not own is refused with an error reply and a log line, never run.
//!
//! # The lock protocol
//!
//! A command whose keys span shards runs as a transaction coordinated by the
//! connection's worker (`txn/`). On each shard it visits, in ascending shard order, it
//! first locks its keys — shared for reads, exclusive for writes, or the whole shard for
//! keyspace-wide commands — then runs its hops with one timestamp, then releases. Locks
//! are taken on one shard at a time and only in ascending shard order, so the waits-for
//! graph has no cycle: no deadlock.
//!
//! Everything that cannot proceed waits here, in one FIFO list: a transaction's lock
//! request whose keys are taken, and a plain command (with the rest of its batch) that
//! touches a locked key. A waiting item holds no lock on this shard. Fairness: a
//! newcomer that needs a key some waiting item needs queues behind it; when locks are
//! released the list is retried in order, and an item never overtakes an earlier one that
//! wants the same key, nor an earlier batch of the same connection.
//!
//! Single-shard commands pay one branch for all this: while no lock is held or wanted
//! (`Shard::quiet`), nothing is looked up.

pub mod dbs;
pub mod events;
pub mod notify;
pub mod park;
pub mod slots;
pub mod tracking;
pub mod watch;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use goblin_protocol::{Encoder, Version};
use std::sync::atomic::Ordering;

use goblin_store::{Event, Keyspace, Millis, ReadMode, Value, key_slot};

use crate::errors;
use crate::runtime::msg::{Batch, Cmd, ConnRef, LockMode, Msg, ParkReq, TxRef, TxStep, TxStepDone};
use crate::runtime::server::Shared;
use crate::table::CommandSpec;
use crate::table::handler::{Args, CmdStat, Exec, ShardCtx};
use crate::txn::coordinator::WOKEN;
use crate::txn::locks::{LockKey, LockTable, Needs, lock_key};
use crate::txn::plan::{HopOut, Tally, Work};
use dbs::{Dbs, Recording};
use events::{Effect, Observer, Origin, Write};
use park::{Serve, Waiters};
use slots::SlotMap;
use watch::WatchTable;

/// Commands are timed one run in this many, for INFO commandstats' `usec` (an estimate).
const TIMING_SAMPLE: u64 = 16;

/// Slow commands kept for the connection's worker to take (more are not logged: a
/// loader replaying a log has no client to take them).
const SLOW_KEPT: usize = 128;

/// How many commands ahead a pipeline's keys are prefetched (`Shard::prefetch_batch`,
/// `Worker::prefetch_keys`).
pub(crate) const PREFETCH_AHEAD: usize = 32;

/// A message this shard produced for a worker (possibly its own).
pub type Outgoing = (usize, Msg);

/// A lock wait served, to grant its lock: the transaction, the key's database, the key,
/// and the key granted with it (`Watch::with`).
type Grant = (TxRef, usize, Vec<u8>, Option<Vec<u8>>);

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

/// How far a batch got.
enum Ran {
    /// Every command ran.
    Finished,
    /// The replies reached the batch's budget: the rest goes back unrun.
    OverBudget,
    /// The next command needs locks it cannot have now.
    Blocked(Needs),
}

/// One worker's shard.
#[derive(Debug)]
pub struct Shard {
    /// Index of the shard (and of its worker).
    pub id: usize,
    dbs: Dbs,
    slots: Arc<SlotMap>,
    stats: Vec<CmdStat>,
    /// Commands' latencies (LATENCY HISTOGRAM, INFO latencystats).
    latencies: crate::runtime::histogram::Latencies,
    /// Commands run here, for sampling their timing.
    executed: u64,
    /// A script runs on this shard: see [`Shard::set_in_script`].
    in_script: bool,
    /// The script running for a tracking client called a read-only command: its
    /// declared keys are remembered when it ends (Redis 7.0's rule).
    script_read: bool,
    /// The commands running are a script's calls sent here by its plan (a hop).
    script_hop: bool,
    /// The script running here may grow memory over `maxmemory` (it is `allow-oom`, or
    /// has written already): its calls are not refused for it.
    pub(crate) script_oom_free: bool,
    /// Inside a script or a transaction's commands here: the keys that became ready for
    /// waiters are kept, in that order, and served when it ends (`end_deferred_serving`),
    /// as redis-server serves blocked clients after the whole EXEC or script.
    serving_deferred: u32,
    /// Those keys, by database.
    deferred_ready: Vec<(usize, Vec<u8>)>,
    /// Keys waited for that serving found past their deadline, by database: deleted
    /// once the unit of work that readied them is done, their DELs after it in the
    /// replication stream ([`Shard::expire_waited`]), as redis-server's serving of its
    /// blocked clients looks them up for writing after the command.
    expired_waited: Vec<(usize, Vec<u8>)>,
    /// Cluster mode: this thread's copy of the node's routes (renewed when the
    /// cluster's version moves on; its worker routes with it too).
    pub(crate) routes: Option<Arc<crate::cluster::Routes>>,
    /// Cluster mode: the node's cluster (for the routes, where no `Shared` is at hand).
    pub(crate) cluster: Option<Arc<crate::cluster::Cluster>>,
    locks: LockTable,
    blocked: VecDeque<Blocked>,
    waiters: Waiters,
    /// The keys clients WATCH here.
    watches: WatchTable,
    observers: Vec<Box<dyn Observer>>,
    /// The feed of this shard's writes to replicas, while there are some.
    repl: Option<crate::repl::master::Feed>,
    /// The effect of the unit of work in progress, when observers want effects.
    effects: Vec<Vec<Vec<u8>>>,
    /// The events of the unit of work being published.
    events: Vec<Event>,
    /// Messages produced, for the worker to route.
    out: Vec<Outgoing>,
    /// Lock waits served, whose locks are still to be granted (`serve_wakes`).
    wakes: Vec<Grant>,
    /// Lock waits served whose commands have not yet released the key they were served
    /// for: the key's readiness counts less by as many, and when one releases without
    /// taking what it was served for (its command failed: a destination of the wrong
    /// type), the key is served again.
    woken: Vec<(TxRef, usize, Vec<u8>)>,
    /// The time of the last unit of work, for readiness checks made after it.
    clock_hint: Millis,
    /// Batches that reached their reply budget, by connection, with the connection's
    /// later batches behind them: they wait for its client to read (`Msg::Resume`).
    stalled: HashMap<ConnRef, VecDeque<Box<Batch>>, foldhash::fast::RandomState>,
    /// The keys of the command [`Shard::hold_early`] looks at, kept between calls.
    scratch_keys: Vec<(LockKey, LockMode)>,
    /// Keys written or deleted (and keyless writes) since [`Shard::take_writes`]: what
    /// the `save` rules count, as Redis's `dirty`.
    writes: u64,
    /// How the lookups of the next unit of work behave, when it reads (a read-only
    /// command's: counted, untouched …); each unit takes it, and without it a unit's
    /// lookups are a write's ([`writing`]).
    next_read_mode: Option<ReadMode>,
    /// It replays a log at start-up (or for DEBUG LOADAOF): nothing expires, and a
    /// deadline already past is kept, as redis-server loads its log — a key the log
    /// wrote to before its deadline keeps its deadline, and expires once loaded.
    replaying: bool,
    /// Some observer needs the keys of written values ([`Observer::wants_written_keys`]).
    observers_want_keys: bool,
    /// Slow commands run here, for the connection's worker to log (SLOWLOG).
    slow: Vec<crate::runtime::slowlog::SlowCmd>,
    /// Error replies of this worker's commands and connections, by code.
    errors: crate::table::handler::ErrorCounts,
    /// What this worker publishes, for the end of its iteration: its connections'
    /// PUBLISHes and this shard's keyspace notifications, in the order they were made.
    pub pubsub: crate::runtime::pubsub::Outbound,
    /// This loop iteration's MONITOR lines, in the order the commands ran (its worker
    /// sends them at the iteration's end): its connections' commands, and the commands
    /// the scripts it runs call.
    pub monitor_feed: Vec<u8>,
    /// `notify-keyspace-events` as this shard last read it (0: off).
    notify_flags: u32,
    /// The command of the transaction step being run, which names its key events for
    /// keyspace notifications.
    step_command: Option<Arc<Batch>>,
    /// The keys tracking clients read here; BCAST keys to send.
    tracking: tracking::TrackTable,
    /// Some client tracks (as this shard last read it): key events are recorded.
    tracking_on: bool,
    /// The tracking client the command being run is for.
    pub tracked: Option<crate::runtime::tracking::Tracked>,
    /// Who runs the script being run here, when that user's permissions are restricted
    /// (the commands it calls are checked against them).
    pub script_caller: Option<Arc<crate::acl::Caller>>,
    /// The errors the reply of the script just run holds, for its command's statistics
    /// (set by the script's run when it noted some).
    pub script_errors: Option<crate::scripting::convert::ReplyErrors>,
    /// Where the effects of the script's call being run go (`redis.set_repl`: the log,
    /// the replicas, both or neither; `scripting::engine::REPL_ALL` outside scripts).
    pub script_repl: u8,
    /// The unit of work being published is not logged (`ShardCtx::unlogged`).
    unlogged_unit: bool,
    /// The command of the unit being published is not its own effect
    /// (`ShardCtx::effects_only`).
    effects_only_unit: bool,
    /// The unit being published goes to replicas from its coordinator
    /// (`ShardCtx::replicated_once`).
    once_unit: bool,
}

/// The lookups of a read-only command's unit at `now`: counted as INFO's hits and
/// misses; during CLIENT PAUSE, and on a replica (where its master's DELs remove them),
/// they leave the expired keys they find; `untouched`, they leave access times alone
/// (Redis's `LOOKUP_NOTOUCH`).
fn reading(shared: &Shared, now: Millis, untouched: bool) -> ReadMode {
    ReadMode {
        count: true,
        keep_expired: (shared.pause.maybe() && shared.pause.until(now).is_some())
            || shared.follow.active.load(Ordering::Relaxed),
        untouched,
        replica: false,
    }
}

/// The lookups of any other unit: on a read-only replica, where every write is its
/// master's, a key past its deadline is live and a deadline already past is kept (the
/// master's DEL removes the key, as in redis-server); elsewhere, such a key expires.
fn writing(shared: &Shared) -> ReadMode {
    ReadMode {
        replica: shared.only_master_writes(),
        ..ReadMode::default()
    }
}

impl Shard {
    /// An empty shard of `databases` databases owning what `slots` gives shard `id`,
    /// keeping statistics for `commands` command-table entries.
    pub fn new(id: usize, slots: Arc<SlotMap>, commands: usize, databases: usize) -> Self {
        Shard {
            id,
            dbs: Dbs::new(databases),
            slots,
            stats: vec![CmdStat::default(); commands],
            latencies: Default::default(),
            executed: 0,
            in_script: false,
            script_read: false,
            script_hop: false,
            script_oom_free: false,
            serving_deferred: 0,
            deferred_ready: Vec::new(),
            expired_waited: Vec::new(),
            routes: None,
            cluster: None,
            locks: LockTable::default(),
            blocked: VecDeque::new(),
            waiters: Waiters::default(),
            watches: WatchTable::default(),
            observers: Vec::new(),
            repl: None,
            effects: Vec::new(),
            events: Vec::new(),
            out: Vec::new(),
            wakes: Vec::new(),
            woken: Vec::new(),
            clock_hint: 0,
            stalled: HashMap::default(),
            scratch_keys: Vec::new(),
            writes: 0,
            next_read_mode: None,
            replaying: false,
            observers_want_keys: false,
            slow: Vec::new(),
            errors: Default::default(),
            pubsub: Default::default(),
            monitor_feed: Vec::new(),
            notify_flags: 0,
            step_command: None,
            tracking: Default::default(),
            tracking_on: false,
            tracked: None,
            script_caller: None,
            script_errors: None,
            script_repl: crate::scripting::engine::REPL_ALL,
            unlogged_unit: false,
            effects_only_unit: false,
            once_unit: false,
        }
    }

    /// Stores loaded keys (start-up). Not a unit of work: nothing observes them, and
    /// nothing can wait on them yet.
    pub fn load(&mut self, keys: Vec<crate::persist::load::Loaded>, now: Millis) {
        for (db, key, value, expire_at) in keys {
            self.load_one(db, key, value, expire_at, now);
        }
    }

    /// The shard replays a log ([`Shard::replaying`]).
    pub(crate) fn set_replaying(&mut self) {
        self.replaying = true;
    }

    /// Whether the shard replays a log: its scripts' writes are obeyed, as redis-server
    /// obeys its log's client (a read-only replica's too).
    pub(crate) fn replaying(&self) -> bool {
        self.replaying
    }

    /// Stores one loaded key in database `db` (the loader's own keyspaces; a database
    /// past the last is the caller's to refuse).
    pub fn load_one(
        &mut self,
        db: usize,
        key: Vec<u8>,
        value: Value,
        expire_at: Option<Millis>,
        now: Millis,
    ) {
        if let Some(keyspace) = self.dbs.get_mut(db) {
            keyspace.insert(&key, value, expire_at, now);
            keyspace.take_events().for_each(drop);
        }
    }

    /// Moves database `db`'s live keys of `slot` out (the loader's keyspaces, to the
    /// shards that own them; a replayed flush of one shard's slots).
    pub fn drain_slot_for_load(
        &mut self,
        db: usize,
        slot: u16,
        now: Millis,
        f: impl FnMut(Vec<u8>, Value, Option<Millis>),
    ) {
        if let Some(keyspace) = self.dbs.get_mut(db) {
            keyspace.drain_slot(slot, now, f);
        }
    }

    /// Makes what the units so far wrote durable in the append-only log, before
    /// anything they caused leaves the thread (replies written to clients, messages sent
    /// to other workers): what this shard fed is appended (to the replication stream
    /// too), and the log writes, and with `appendfsync always` syncs, every shard's
    /// records so far (group commit).
    pub fn sync_log(&mut self, shared: &Shared) {
        if !shared.persist.log.fed() {
            return;
        }
        if let Some(feed) = self.repl.as_mut() {
            feed.flush(&shared.repl);
        }
        shared.persist.log.sync(&shared.persist);
    }

    /// Whether keys changed since the last [`Shard::take_writes`].
    pub fn wrote(&self) -> bool {
        self.writes > 0
    }

    /// Changes since the last call (what a save covers).
    pub fn take_writes(&mut self) -> u64 {
        std::mem::take(&mut self.writes)
    }

    /// The databases, to read (their counts, the next expiry).
    pub fn dbs(&self) -> &Dbs {
        &self.dbs
    }

    /// Whether a point-in-time image of some database is being written.
    pub fn snapshot_active(&self) -> bool {
        self.dbs.iter().any(Keyspace::snapshot_active)
    }

    /// Drops the image in progress, unwritten (its save was killed).
    pub fn drop_snapshot(&mut self) {
        for keyspace in self.dbs.iter_mut() {
            keyspace.end_snapshot();
        }
    }

    /// The next piece of the image in progress (database after database): its
    /// database, its bytes, and whether the image is now whole.
    pub fn snapshot_step(&mut self, max_keys: usize, max_bytes: usize) -> (u16, Vec<u8>, bool) {
        let Some(keyspace) = self.dbs.iter_mut().find(|k| k.snapshot_active()) else {
            return (0, Vec::new(), true);
        };
        let db = keyspace.snapshot_db().unwrap_or_default();
        let piece = if keyspace.snapshot_step(max_keys, max_bytes) {
            keyspace.end_snapshot().0
        } else {
            keyspace.snapshot_take()
        };
        (db, piece, !self.snapshot_active())
    }

    /// When the next key of any database may expire.
    pub fn next_expiry(&self) -> Option<Millis> {
        self.dbs.iter().filter_map(Keyspace::next_expiry).min()
    }

    /// The slot map the shard owns its slots by.
    pub fn slots(&self) -> &Arc<SlotMap> {
        &self.slots
    }

    /// Takes a newer slot map (an older one is ignored).
    pub fn set_slots(&mut self, slots: Arc<SlotMap>) {
        if slots.version() > self.slots.version() {
            self.slots = slots;
        }
    }

    /// Per-command statistics of this worker.
    pub fn stats(&self) -> &[CmdStat] {
        &self.stats
    }

    /// True when no lock is held or wanted: commands run without looking anything up.
    pub fn quiet(&self) -> bool {
        self.locks.quiet() && self.blocked.is_empty()
    }

    /// Whether a transaction coordinated by another worker than `me` holds locks here.
    pub fn held_for_others(&self, me: usize) -> bool {
        self.locks.held_for_others(me)
    }

    /// While locks are held or wanted here: whether a command of connection `from` with
    /// keys may run at once, as a batch's command would (`run_batch`) — nobody holds its
    /// keys against it, nothing waiting needs them, and the connection has nothing
    /// waiting here.
    pub fn may_run_now(&mut self, spec: &CommandSpec, args: &Args<'_>, from: ConnRef) -> bool {
        let needs = self.scratch_needs(spec, args);
        let may = !needs.keys.is_empty() && self.free_for(&needs, from, None);
        self.scratch_keys = needs.keys;
        may
    }

    /// The keys of the command `args` as the lock table knows them, in the shard's
    /// scratch list (give it back to `scratch_keys`: no allocation per command).
    fn scratch_needs(&mut self, spec: &CommandSpec, args: &Args<'_>) -> Needs {
        let mut keys = std::mem::take(&mut self.scratch_keys);
        keys.clear();
        spec.for_each_key(args, |i, mode| keys.push((lock_key(args.get(i)), mode)));
        Needs { keys, all: false }
    }

    /// Whether `needs` may be had now by a command of connection `from`: nobody holds
    /// them against it (but `holder`, alone), nothing waiting needs them, and the
    /// connection has nothing waiting here.
    fn free_for(&self, needs: &Needs, from: ConnRef, holder: Option<TxRef>) -> bool {
        !self
            .locks
            .queued_ahead(needs, Some(from), !self.blocked.is_empty())
            && match holder {
                None => self.locks.compatible(needs, None),
                Some(tx) => self.locks.compatible_beside_own(needs, tx),
            }
    }

    /// A command of connection `from` that runs ahead of its connection's commands in
    /// flight to a later shard (`Worker::run_early`): when it may run now (as
    /// [`Shard::may_run_now`]), its keys are locked for `tx` until
    /// [`Shard::release_early`], and how many keys that is; `None` when it must wait —
    /// also when one of its keys was wanted while locked in the last second, or keys
    /// locked early here made others wait too often lately (`LockTable::contended`: a
    /// hot key locked for a round trip would hold the others back each time).
    pub fn hold_early(
        &mut self,
        spec: &CommandSpec,
        args: &Args<'_>,
        from: ConnRef,
        tx: TxRef,
    ) -> Option<usize> {
        let needs = self.scratch_needs(spec, args);
        let held = if needs.keys.is_empty() || self.locks.contended(&needs.keys, self.clock_hint) {
            None
        } else if !self.free_for(&needs, from, Some(tx)) {
            // (Its command waits as before.)
            self.locks.contend(&needs.keys);
            None
        } else {
            // (Keys the connection's earlier commands locked already count once.)
            Some(self.locks.acquire_more(tx, &needs))
        };
        self.scratch_keys = needs.keys;
        held
    }

    /// Records that keys [`Shard::hold_early`] locked were unlocked before all their
    /// commands ran (`LockTable::early_given_up`).
    pub fn early_given_up(&mut self) {
        self.locks.early_given_up();
    }

    /// Releases what `tx` holds here ([`Shard::hold_early`]'s locks, or a parked plan's);
    /// what waited for it goes on.
    pub fn release_early(&mut self, shared: &Shared, tx: TxRef) {
        // (What it was served for first: what the retry runs may serve `tx` again.)
        self.woken_released(tx);
        if self.locks.release(tx) {
            self.retry(shared);
        }
    }

    /// A served lock wait's transaction `tx` released its locks here: the key it was
    /// served for is served again, for what it left (nothing, unless its command failed).
    fn woken_released(&mut self, tx: TxRef) {
        if let Some(i) = self.woken.iter().position(|(t, _, _)| *t == tx) {
            let (_, db, key) = self.woken.swap_remove(i);
            self.serve_key(db, &key);
        }
    }

    /// Whether keyspace notifications are published.
    pub fn notifying(&self) -> bool {
        notify::active(self.notify_flags)
    }

    /// A script runs on this shard from now on (`true`) or no longer: the slow commands
    /// it calls are SLOWLOG entries of the script's client, as in Redis.
    pub fn set_in_script(&mut self, on: bool) {
        if on != self.in_script {
            if on {
                self.script_read = false;
                self.begin_deferred_serving();
            } else {
                self.end_deferred_serving();
                // What the script wrote here goes to replicas as one transaction.
                if let Some(feed) = self.repl.as_mut() {
                    feed.end_call();
                }
            }
        }
        self.in_script = on;
    }

    /// From now until [`Shard::end_deferred_serving`], keys that become ready for waiters
    /// are served at the end (nested: the outermost end serves them).
    fn begin_deferred_serving(&mut self) {
        self.serving_deferred += 1;
    }

    /// Serves the keys that became ready since the outermost
    /// [`Shard::begin_deferred_serving`], in the order they became ready.
    fn end_deferred_serving(&mut self) {
        self.serving_deferred = self.serving_deferred.saturating_sub(1);
        if self.serving_deferred == 0 && !self.deferred_ready.is_empty() {
            for (db, key) in std::mem::take(&mut self.deferred_ready) {
                self.serve_key(db, &key);
            }
        }
    }

    /// Whether a script running here (in transaction `tx`, if any) may touch `key`,
    /// which it did not declare: this shard owns it, and no other transaction holds or
    /// wants it — or `tx` holds it alone (EXEC's own keys).
    pub fn may_touch_undeclared(&self, key: &[u8], tx: Option<TxRef>) -> bool {
        self.slots.owns(self.id, usize::from(key_slot(key)))
            && (self.locks.quiet()
                || !self.locks.locked(key)
                || tx.is_some_and(|t| {
                    self.locks.whole_shard_holder() == Some(t) || self.locks.holds_alone(t, key)
                }))
    }

    /// Whether plans wait on keys of this shard.
    pub fn has_parked(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// Appends what this shard wrote this iteration to the replication stream (a
    /// `REPLCONF GETACK *` first when WAIT asked for one); whether it appended anything.
    /// The feed ends with the backlog.
    pub fn flush_repl(&mut self, shared: &Shared) -> bool {
        let Some(feed) = self.repl.as_mut() else {
            return false;
        };
        if shared.repl.getack.swap(false, Ordering::SeqCst) {
            feed.push(&[b"REPLCONF", b"GETACK", b"*"]);
        }
        let appended = feed.flush(&shared.repl);
        if !shared.repl.shards_feed() {
            self.repl = None;
            self.update_observed();
        }
        appended
    }

    /// Feeds the replication stream from now on, when there is a backlog to feed (a
    /// sync's instant; the end of loading a file that recorded a history).
    pub fn feed_backlog(&mut self, shared: &Shared) {
        if self.repl.is_none() && shared.repl.shards_feed() {
            self.repl = Some(Default::default());
            self.update_observed();
        }
    }

    /// The shard's outgoing publications and its replication feed (PUBLISH's:
    /// `families::pubsub::publish_command`).
    pub fn publications_and_feed(
        &mut self,
    ) -> (
        &mut crate::runtime::pubsub::Outbound,
        Option<&mut crate::repl::master::Feed>,
    ) {
        (&mut self.pubsub, self.repl.as_mut())
    }

    /// Appends a command of the master's own to the replication stream (its PING).
    pub fn repl_push(&mut self, argv: &[&[u8]]) {
        if let Some(feed) = self.repl.as_mut() {
            feed.push(argv);
        }
    }

    /// Adds an observer of this shard's writes.
    pub fn add_observer(&mut self, observer: Box<dyn Observer>) {
        self.observers_want_keys |= observer.wants_written_keys();
        self.observers.push(observer);
        self.update_observed();
    }

    /// The messages produced since the last call, for the worker to route.
    pub fn take_out(&mut self) -> Vec<Outgoing> {
        std::mem::take(&mut self.out)
    }

    /// Gives back the vector [`Shard::take_out`] took, emptied, to be filled again (so
    /// that sending replies allocates nothing in steady traffic).
    pub fn return_out(&mut self, emptied: Vec<Outgoing>) {
        crate::util::reuse(&mut self.out, emptied);
    }

    /// Whether messages are waiting in [`Shard::take_out`].
    pub fn has_out(&self) -> bool {
        !self.out.is_empty()
    }

    fn update_observed(&mut self) {
        let notifying = notify::active(self.notify_flags);
        let watched = !self.watches.is_empty() || self.tracking_on;
        self.dbs.set_recording(Recording {
            observe: !self.observers.is_empty()
                || self.repl.is_some()
                || !self.waiters.is_empty()
                || notifying
                || watched,
            list_writes: !self.waiters.is_empty()
                || self.observers_want_keys
                || notifying
                || watched,
            access: self.dbs.recording().access,
        });
    }

    /// Over `maxmemory` before a command that may grow memory (run here, or started
    /// here as a transaction or queued in MULTI): evicts what the policy
    /// allows (keys no transaction holds); whether the command must be refused — memory
    /// still over and nothing could be evicted. (Eviction that made progress lets the
    /// command run, as Redis's does when its time budget ends: `EVICT_RUNNING`.)
    pub(crate) fn out_of_memory(&mut self, shared: &Shared, now: Millis) -> bool {
        let memory = shared.memory.get();
        if crate::memory::counted() <= memory.maxmemory {
            return false;
        }
        let (evicted, stuck) = self.evict(
            shared,
            &memory,
            memory.maxmemory,
            crate::runtime::worker::EVICT_PER_COMMAND,
            true,
            now,
        );
        // Refused only when there was nothing left to evict and memory is still over
        // (redis-server's EVICT_FAIL): not when memory came back under the limit
        // meanwhile (another shard evicted), which would make a race refuse it; nor
        // while another shard may still evict (a shard evicts its own keys: Redis's one
        // keyspace would have those to evict), which is woken to.
        if !(stuck && evicted == 0 && crate::memory::counted() > memory.maxmemory) {
            return false;
        }
        if memory.policy.evicts().is_none() {
            return true;
        }
        let mut others = false;
        for i in self.others_with_keys(shared) {
            others = true;
            // (An empty message: the worker runs an iteration, which evicts.)
            if let Some(peer) = shared.peers.get(i) {
                peer.send(Vec::new());
            }
        }
        !others
    }

    /// The other shards that have keys to evict (or have not counted them yet:
    /// `Traffic::evictable`).
    fn others_with_keys<'s>(&self, shared: &'s Shared) -> impl Iterator<Item = usize> + 's {
        let me = self.id;
        shared
            .traffic
            .iter()
            .enumerate()
            .filter(move |(i, t)| *i != me && t.evictable.load(Ordering::Relaxed) > 0)
            .map(|(i, _)| i)
    }

    /// Tells the other shards how many keys this one could evict under `memory`'s
    /// policy (`Traffic::evictable`).
    pub fn publish_evictable(&self, shared: &Shared, memory: &crate::memory::MemoryConfig) {
        let volatile = memory.policy.evicts().is_some_and(|(_, volatile)| volatile);
        let keys: usize = self
            .dbs
            .iter()
            .map(|k| if volatile { k.volatile_len() } else { k.len() })
            .sum();
        if let Some(t) = shared.traffic.get(self.id) {
            t.evictable.store(keys as u64, Ordering::Relaxed);
        }
    }

    /// Keeps keys' access fields as `mode` says from now on (the eviction policy's
    /// family changed).
    pub fn set_access_mode(&mut self, mode: goblin_store::AccessMode) {
        let mut recording = self.dbs.recording();
        if recording.access != mode {
            recording.access = mode;
            self.dbs.set_recording(recording);
        }
    }

    /// Eviction rounds in a row that find no key before a shard says it has nothing left
    /// to evict (and a write over `maxmemory` is refused).
    const EVICTION_MISSES: usize = 4;

    /// Evicts keys by `policy` until memory in use is at most `limit` or `budget` keys
    /// went, each eviction a unit of work of its own (so that observers see a DEL), for a
    /// command or writes (`for_command`) or in the background (see below); how many
    /// went, and whether it stopped for want of keys to evict (`EVICTION_MISSES` rounds
    /// in a row found none, or the policy evicts nothing). Databases take turns.
    pub fn evict(
        &mut self,
        shared: &Shared,
        memory: &crate::memory::MemoryConfig,
        limit: u64,
        budget: usize,
        for_command: bool,
        now: Millis,
    ) -> (usize, bool) {
        let Some((by, volatile)) = memory.policy.evicts() else {
            return (0, true);
        };
        if self.locks.whole_shard_held() {
            // A keyspace-wide command holds the shard for a moment: nothing is evicted
            // now, and nothing is refused for it either.
            return (0, false);
        }
        let mut stuck = false;
        // Rounds in a row that found no key to evict: sampling can miss (a pool of keys
        // already gone, a sparse table), so one such round is not yet "nothing left".
        let mut misses = 0;
        let samples = memory.samples as usize;
        let mut evicted = 0;
        let mut scratch = Vec::new();
        // What this shard is to free: for a command, until memory is under the limit
        // (as Redis's `performEvictions` before each command); in the background, its
        // share of what the round found over, with the shards that have keys to evict
        // (`Limits::eviction_share`), counting what each eviction freed as the key's own
        // bytes, as Redis measures the delete alone: not what the delete makes (the
        // invalidations sent to tracking clients, a notification) nor what other
        // threads allocate meanwhile.
        let to_free = if for_command {
            u64::MAX
        } else {
            let over = crate::memory::counted().saturating_sub(limit);
            let sharing = 1 + self.others_with_keys(shared).count();
            shared.memory.eviction_share(over, sharing as u64, now)
        };
        let mut freed = 0u64;
        while evicted < budget && freed < to_free && crate::memory::counted() > limit {
            let mut any = false;
            for db in 0..self.dbs.count() {
                if self.dbs.get(db).is_none_or(|k| k.is_empty()) {
                    continue;
                }
                let candidate = self
                    .dbs
                    .get_mut(db)
                    .and_then(|k| k.eviction_candidate(by, volatile, samples, now));
                // A key a transaction locked (or waits for) is its: passed by.
                let Some(key) = candidate.filter(|k| !self.locks.locked(k)) else {
                    continue;
                };
                let ((gone, delta), _) = self.unit(
                    shared,
                    Origin::Eviction,
                    db,
                    now,
                    &mut scratch,
                    Version::Resp2,
                    |ctx| {
                        let bytes = ctx
                            .db
                            .peek_stored(&key, now)
                            .map_or(0, |(e, _)| e.memory_usage());
                        (ctx.db.delete(&key, now), bytes as u64)
                    },
                );
                if gone {
                    any = true;
                    evicted += 1;
                    freed += delta;
                }
            }
            if !any {
                misses += 1;
                if misses == Self::EVICTION_MISSES {
                    stuck = true;
                    break;
                }
            } else {
                misses = 0;
            }
        }
        shared
            .memory
            .evicted_keys
            .fetch_add(evicted as u64, Ordering::Relaxed);
        if evicted > 0 {
            self.publish_evictable(shared, memory);
        }
        (evicted, stuck)
    }

    /// The one way work reaches the keys: runs `f` with this shard's context on database
    /// `db`, then publishes the key events it caused. Returns `f`'s result and whether
    /// the work asked for the transaction's locks to be released.
    #[allow(clippy::too_many_arguments)]
    fn unit<R>(
        &mut self,
        shared: &Shared,
        origin: Origin<'_>,
        db: usize,
        now: Millis,
        out: &mut Vec<u8>,
        resp: Version,
        f: impl FnOnce(&mut ShardCtx<'_>) -> R,
    ) -> (R, bool) {
        let flags = shared.notify.load(Ordering::Relaxed);
        if flags != self.notify_flags {
            // CONFIG SET notify-keyspace-events: recorded from this unit on.
            self.notify_flags = flags;
            self.update_observed();
        }
        let tracking = shared.tracking.active();
        if tracking != self.tracking_on {
            // The first client tracks, or the last stopped.
            self.tracking_on = tracking;
            self.update_observed();
        }
        if tracking {
            self.tracking.refresh(&shared.tracking);
        }
        let logging = !self.observers.is_empty() || self.repl.is_some();
        let unwatched_before = self.watches.is_empty();
        self.clock_hint = now;
        let (keyspace, others) = self.dbs.split(db);
        let mode = self.next_read_mode.take();
        let mode = mode.unwrap_or_else(|| writing(shared));
        keyspace.set_read_mode(ReadMode {
            replica: mode.replica || self.replaying,
            ..mode
        });
        let changes = keyspace.changes();
        let mut ctx = ShardCtx::new(
            (keyspace, others),
            now,
            Encoder::new(out, resp),
            self.id,
            &self.slots,
            (
                shared.client_limits.max_bulk_len(),
                shared.hll_sparse_max_bytes(),
            ),
            (&self.stats, &self.errors, &self.latencies),
            logging.then_some(&mut self.effects),
            &mut self.watches,
        );
        ctx.set_in_script(self.in_script || self.script_hop);
        let result = f(&mut ctx);
        ctx.db.set_read_mode(ReadMode::default());
        // The keys it wrote or deleted count for the `save` rules, as Redis's `dirty`
        // (not an eviction's).
        if !matches!(origin, Origin::Eviction) {
            self.writes += ctx.db.changes().saturating_sub(changes) + ctx.counted_changes();
        }
        let release = ctx.wants_release();
        let repl_marks = ctx.repl_marks();
        let all_dbs = ctx.touched_others();
        let flushed = ctx.wants_flush_notice();
        let abandoned_save = ctx.abandons_save_part();
        self.unlogged_unit = ctx.is_unlogged();
        self.effects_only_unit = ctx.is_effects_only();
        self.once_unit = repl_marks & crate::table::handler::REPLICATED_ONCE != 0;
        let sync_log = ctx.wants_log_sync();
        if ctx.wants_stats_reset() {
            self.stats.iter_mut().for_each(|s| *s = CmdStat::default());
            self.errors = Default::default();
            self.latencies.clear();
            self.dbs.iter_mut().for_each(Keyspace::reset_stats);
        }
        let events = if all_dbs {
            self.dbs.iter().any(Keyspace::has_events)
        } else {
            self.dbs.get(db).is_some_and(Keyspace::has_events)
        };
        if events {
            self.publish(shared, origin, db, all_dbs);
        } else if unwatched_before != self.watches.is_empty() {
            // The first key watched here (or the last gone): record events, or stop.
            self.update_observed();
        }

        self.unlogged_unit = false;
        self.effects_only_unit = false;
        if repl_marks != 0 {
            self.repl_marked(shared, repl_marks);
        }
        if sync_log {
            self.sync_log(shared);
        }
        if abandoned_save {
            // Its part of the abandoned save is over (the last part ends the save here,
            // before the FLUSHALL goes on: a save after it may start).
            let job = shared.persist.job.lock().ok().and_then(|j| j.clone());
            if let Some(job) = job {
                job.shard_done();
            }
        }
        // (A table is emptied even when no client tracks now: Redis frees it whole.)
        if flushed && (self.tracking_on || !self.tracking.is_empty()) {
            self.flush_tracking(shared);
        }
        self.effects.clear();
        (result, release)
    }

    /// What a unit marked for replication asks once it is done: what the shard wrote
    /// before it goes into the stream first (a keyspace-wide command's part, whose
    /// coordinator sends the command), or the shard starts feeding replicas (a sync's
    /// instant). Rare: out of the unit's way.
    #[cold]
    #[inline(never)]
    fn repl_marked(&mut self, shared: &Shared, marks: u8) {
        use crate::table::handler::FEED_REPLICAS;
        self.once_unit = false;
        if marks & FEED_REPLICAS != 0 {
            self.feed_backlog(shared);
        }
        if let Some(feed) = self.repl.as_mut() {
            feed.flush(&shared.repl);
        }
    }

    /// Hands the events of the unit of work just done on database `db` (and, with
    /// `all_dbs`, on others too) to the watch table, the parked plans, the observers and
    /// keyspace notifications.
    fn publish(&mut self, shared: &Shared, origin: Origin<'_>, db: usize, all_dbs: bool) {
        self.events.clear();
        let mut unlisted = 0;
        if all_dbs {
            for keyspace in self.dbs.iter_mut() {
                self.events.extend(keyspace.take_events());
                unlisted += keyspace.take_unlisted();
            }
        } else if let Some(keyspace) = self.dbs.get_mut(db) {
            self.events.extend(keyspace.take_events());
            unlisted = keyspace.take_unlisted();
        }
        if !self.watches.is_empty() {
            let dbs = &self.dbs;
            self.watches.on_events(
                &self.events,
                |db, key| dbs.get(db).and_then(|k| k.peek_expiry(key)),
                self.clock_hint,
            );
        }
        if !self.waiters.is_empty() {
            self.serve_waiters();
        }
        if !self.observers.is_empty() || self.repl.is_some() {
            let effect = if !self.effects.is_empty() {
                Effect::Commands(&self.effects)
            } else if matches!(origin, Origin::Command(..)) && !self.effects_only_unit {
                Effect::AsSent
            } else {
                Effect::Events
            };
            let write = Write {
                origin,
                db: db as u16,
                events: &self.events,
                unlisted,
                effect,
            };
            for observer in &mut self.observers {
                observer.on_write(&write);
            }
            let unfed = self.unlogged_unit || self.script_repl == 0;
            if let Some(feed) = self.repl.as_mut().filter(|_| !unfed && !self.once_unit) {
                feed.on_write(&write, self.in_script, self.script_repl);
            }
        }
        if notify::active(self.notify_flags) {
            self.notify(shared, origin);
        }
        if self.tracking_on {
            let writer = self.tracked.map_or(0, |t| t.reader.id);
            self.tracking
                .on_events(&self.events, writer, &shared.tracking, &mut self.pubsub);
        }
        self.update_observed();
    }

    /// Every key was flushed: the tracking table is emptied, and (once for the whole
    /// server: by shard 0, which every flush reaches) every tracking client is told,
    /// but the flushing client, which its worker tells after the flush's reply.
    fn flush_tracking(&mut self, shared: &Shared) {
        self.tracking.clear(&shared.tracking);
        if self.id == 0 {
            let except = self
                .tracked
                .filter(|t| t.own_flush)
                .map_or(0, |t| t.reader.id);
            tracking::send_flush(&shared.tracking, except, &mut self.pubsub);
        }
    }

    /// Remembers that `reader` (a tracking client) read `keys` here, within
    /// `tracking-table-max-keys`.
    fn remember_keys<'k>(
        &mut self,
        shared: &Shared,
        reader: crate::runtime::tracking::Reader,
        keys: impl Iterator<Item = &'k [u8]>,
    ) {
        self.tracking.refresh(&shared.tracking);
        for key in keys {
            self.tracking.remember(key, reader, &shared.tracking);
        }
        self.tracking.limit(&shared.tracking, &mut self.pubsub);
    }

    /// Past `tracking-table-max-keys` (lowered by CONFIG SET): forgets keys of this
    /// shard's table, telling their readers, until under it again — between commands,
    /// as Redis's cron does.
    pub fn limit_tracking(&mut self, shared: &Shared) {
        if shared.tracking.over_limit() {
            self.tracking.limit(&shared.tracking, &mut self.pubsub);
        }
    }

    /// Sends the BCAST invalidations gathered this iteration (the end of the worker's
    /// loop iteration).
    pub fn send_tracking(&mut self) {
        if self.tracking.has_pending() {
            self.tracking.send_bcast(&mut self.pubsub);
        }
    }

    /// Keyspace notifications of the unit of work just published.
    fn notify(&mut self, shared: &Shared, origin: Origin<'_>) {
        // A step is named after the command its transaction runs, when it carries one.
        let step = self.step_command.as_ref().and_then(|b| {
            let spec = b.cmds.first().and_then(|c| shared.commands.get(c.spec))?;
            Some((spec.name, b.args(0)))
        });
        let cause = match (origin, &step) {
            (Origin::Command(name, args, _), _) => notify::Cause::Command(name, args),
            (Origin::Step(_), Some((name, args))) => notify::Cause::Command(name, args),
            (Origin::Expiry, _) => notify::Cause::Expiry,
            (Origin::Eviction, _) => notify::Cause::Eviction,
            (Origin::Step(_), None) => notify::Cause::Unknown,
        };
        notify::notify(
            self.notify_flags,
            cause,
            &self.events,
            shared.keyspace_events,
            &shared.pubsub,
            &mut self.pubsub,
        );
    }

    /// After a unit of work: the waits its writes serve (`park.rs`). A notify wait is told
    /// at once; a lock wait is granted its lock by a step that goes ahead of whatever
    /// waits for the key (all of it came after the write), in [`Shard::serve_wakes`].
    fn serve_waiters(&mut self) {
        let mut keys: Vec<(usize, Vec<u8>)> = Vec::new();
        for event in &self.events {
            match event {
                // Any change: a write readies a pop, a delete or an expiry frees a claim.
                Event::Key(k) if self.waiters.waits_for(&k.key) => {
                    let db = usize::from(k.db);
                    if !keys.iter().any(|(d, done)| *d == db && **done == *k.key) {
                        keys.push((db, k.key.to_vec()));
                    }
                }
                Event::Flushed { db } => {
                    let db = usize::from(*db);
                    keys.retain(|(d, _)| *d != db);
                    keys.extend(self.waiters.keys(db).into_iter().map(|k| (db, k)));
                }
                Event::Key(_) => {}
            }
        }
        if self.serving_deferred > 0 {
            for (db, key) in keys {
                if !self
                    .deferred_ready
                    .iter()
                    .any(|(d, k)| *d == db && *k == key)
                {
                    self.deferred_ready.push((db, key));
                }
            }
            return;
        }
        for (db, key) in keys {
            self.serve_key(db, &key);
        }
    }

    /// Serves the waits `key` of database `db` is ready for, in order: a notify wait is
    /// told at once, a lock wait is queued for [`Shard::serve_wakes`].
    ///
    /// Cluster mode: no wait is served by a key of a slot that is leaving the node (or
    /// left): its keys go away as MIGRATE moves them, which frees nothing — a claim moved
    /// to another node is still held there. Its waiters are redirected once the slot is
    /// gone (`Worker::redirect_parked`).
    pub fn serve_key(&mut self, db: usize, key: &[u8]) {
        if let Some(cluster) = self.cluster.as_deref()
            && cluster.unstable()
            && crate::cluster::current(&mut self.routes, cluster)
                .leaving(usize::from(key_slot(key)))
        {
            return;
        }
        let now = self.clock_hint;
        let Some(keyspace) = self.dbs.get_mut(db) else {
            return;
        };
        let reserved = self
            .woken
            .iter()
            .filter(|(_, d, k)| *d == db && *k == key)
            .count();
        if keyspace
            .peek_expiry(key)
            .flatten()
            .is_some_and(|at| now > at)
            && !self
                .expired_waited
                .iter()
                .any(|(d, k)| *d == db && k == key)
        {
            self.expired_waited.push((db, key.to_vec()));
        }
        // The waits' tests read such a key as missing, and leave it for
        // `expire_waited`: serving runs between units of work, where no deletion may be
        // recorded.
        keyspace.set_read_mode(ReadMode {
            keep_expired: true,
            ..ReadMode::default()
        });
        let served = self.waiters.serve(key, db, keyspace, now, reserved);
        keyspace.set_read_mode(ReadMode::default());
        for (tx, id, key, serve, with) in served {
            match serve {
                Serve::Notify => self.out.push((tx.worker, Msg::Woken(tx, id, key))),
                Serve::Lock => self.wakes.push((tx, db, key, with)),
            }
        }
    }

    /// Whether lock waits were served and their locks are still to be granted, or keys
    /// waited for were found expired.
    pub fn has_wakes(&self) -> bool {
        !self.wakes.is_empty() || !self.expired_waited.is_empty()
    }

    /// Deletes the keys serving found past their deadline ([`Shard::serve_key`]), each
    /// an expiry of its own (a DEL to replicas and the log, an `expired` notification):
    /// after the command that readied them, or, in a transaction run as a plan, after the
    /// transaction (the step's part's `after`). Not on a replica, nor while writes are
    /// paused (a key past its deadline stays there, as in redis-server).
    fn expire_waited(&mut self, shared: &Shared) {
        let now = self.clock_hint;
        let mut scratch = Vec::new();
        for (db, key) in std::mem::take(&mut self.expired_waited) {
            let mut mode = writing(shared);
            mode.keep_expired = shared.pause.maybe() && shared.pause.until(now).is_some();
            self.next_read_mode = Some(mode);
            self.unit(
                shared,
                Origin::Expiry,
                db,
                now,
                &mut scratch,
                Version::Resp2,
                |ctx| ctx.db.contains(&key, now),
            );
        }
    }

    /// Grants served lock waits their locks: a step per wait that locks the key (and the
    /// key it is granted with) and reports `Woken` (index [`WOKEN`]) once it holds it,
    /// ahead of other waiting items (`Shard::step`). Called after each command of a
    /// batch, and by the worker after each message or command, never from inside a unit
    /// of work.
    pub fn serve_wakes(&mut self, shared: &Shared) {
        if !self.expired_waited.is_empty() {
            self.expire_waited(shared);
        }
        // In the order the waits were served (their lock requests queue in that order).
        let wakes = std::mem::take(&mut self.wakes);
        for (tx, db, key, with) in wakes {
            self.woken.push((tx, db, key.clone()));
            let woken = key.clone();
            let mut lock = vec![(key, LockMode::Exclusive)];
            lock.extend(with.map(|k| (k, LockMode::Exclusive)));
            let step = TxStep {
                tx,
                index: WOKEN,
                lock,
                lock_all: false,
                try_lock: false,
                work: Some(Work::Run(Box::new(move |_| HopOut::Woken(woken)))),
                release: false,
                now: self.clock_hint,
                slots_version: self.slots.version(),
                db,
                command: None,
                tracked: None,
                reads: false,
                cuts: false,
            };
            self.step(shared, step);
        }
    }

    /// Active expiry: removes keys whose expiry passed, at most `budget` timers' worth
    /// in each database; how many keys it removed.
    pub fn expire(&mut self, shared: &Shared, now: Millis, budget: usize) -> usize {
        let mut scratch = Vec::new();
        let mut removed = 0;
        for db in 0..self.dbs.count() {
            if self
                .dbs
                .get(db)
                .and_then(Keyspace::next_expiry)
                .is_some_and(|at| at <= now)
            {
                removed += self
                    .unit(
                        shared,
                        Origin::Expiry,
                        db,
                        now,
                        &mut scratch,
                        Version::Resp2,
                        |ctx| ctx.db.expire_due(now, budget),
                    )
                    .0;
            }
        }
        removed
    }

    /// The first slot among the command's keys that this shard does not own.
    fn foreign_slot(&self, spec: &CommandSpec, args: &Args<'_>) -> Option<usize> {
        let mut foreign = None;
        spec.for_each_key_position(args, |i| {
            let slot = usize::from(key_slot(args.get(i)));
            if foreign.is_none() && !self.slots.owns(self.id, slot) {
                foreign = Some(slot);
            }
        });
        foreign
    }

    /// The refusal of work on a key whose slot this shard does not own: logged, and the
    /// error reply.
    fn refusal(&self, slot: usize, routed_with: u64) -> Vec<u8> {
        crate::log!(
            Warning,
            "shard {} refused a key of hash slot {slot}, which it does not own \
             (routed with slot map version {routed_with}, this shard has {})",
            self.id,
            self.slots.version()
        );
        errors::not_owned(slot, self.id)
    }

    /// Cluster mode, while slots move: the redirection a command gets from the shard
    /// that holds its keys — what it lacks of them decides ([`Routes::on_shard`]).
    ///
    /// [`Routes::on_shard`]: crate::cluster::Routes::on_shard
    fn cluster_refusal(
        &mut self,
        cluster: &crate::cluster::Cluster,
        spec: &CommandSpec,
        args: &Args<'_>,
        db: usize,
        now: Millis,
    ) -> Option<Vec<u8>> {
        // MIGRATE moves what keys there are: never redirected (redis-server's rule).
        if spec.name == "migrate" {
            return None;
        }
        let mut slot = None;
        let mut keys = 0;
        spec.for_each_key_position(args, |i| {
            slot.get_or_insert(usize::from(key_slot(args.get(i))));
            keys += 1;
        });
        let slot = slot?;
        let routes = Arc::clone(crate::cluster::current(&mut self.routes, cluster));
        if !routes.needs_check(slot) {
            return None;
        }
        let keyspace = self.dbs.get_mut(db)?;
        let mut missing = 0;
        spec.for_each_key_position(args, |i| {
            // (Looked at, not touched: an expired key counts as missing.)
            let stored = keyspace.peek_expiry(args.get(i));
            if stored.is_none_or(|at| at.is_some_and(|at| at <= now)) {
                missing += 1;
            }
        });
        routes.on_shard(slot, keys, missing)
    }

    /// Runs a shard handler on this shard's database `db`, writing its reply to `out`,
    /// and accounts for it in the command statistics. `routed_with` is the version of
    /// the slot map the command was routed with: another version than this shard's makes
    /// it check that it owns the command's keys. `tx`: the transaction it is part of.
    #[allow(clippy::too_many_arguments)]
    pub fn execute(
        &mut self,
        shared: &Shared,
        spec: &CommandSpec,
        args: &Args<'_>,
        db: usize,
        now: Millis,
        out: &mut Vec<u8>,
        resp: Version,
        tx: Option<TxRef>,
        routed_with: u64,
    ) {
        self.run_command(
            shared,
            spec,
            args,
            db,
            now,
            out,
            resp,
            tx,
            routed_with,
            false,
        );
    }

    /// Runs a command from a connection of this shard's own worker, outside any
    /// transaction; one that `may_wait` may ask to (see [`ShardCtx::wait`]): true when it
    /// did — it answered nothing, and its plan must run.
    #[allow(clippy::too_many_arguments)]
    pub fn execute_here(
        &mut self,
        shared: &Shared,
        spec: &CommandSpec,
        args: &Args<'_>,
        db: usize,
        now: Millis,
        out: &mut Vec<u8>,
        resp: Version,
        may_wait: bool,
    ) -> bool {
        let version = self.slots.version();
        self.run_command(
            shared, spec, args, db, now, out, resp, None, version, may_wait,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn run_command(
        &mut self,
        shared: &Shared,
        spec: &CommandSpec,
        args: &Args<'_>,
        db: usize,
        now: Millis,
        out: &mut Vec<u8>,
        resp: Version,
        tx: Option<TxRef>,
        routed_with: u64,
        may_wait: bool,
    ) -> bool {
        let Exec::Shard(handler) = spec.exec else {
            // Only shard handlers are sent to shards; answered anyway, so that replies
            // cannot fall out of step.
            Encoder::new(out, resp).error(&errors::wrong_arity(spec.name));
            return false;
        };
        if routed_with != self.slots.version()
            && let Some(slot) = self.foreign_slot(spec, args)
        {
            let refusal = self.refusal(slot, routed_with);
            Encoder::new(out, resp).error(&refusal);
            return false;
        }
        // Cluster mode, while slots move: the keys' slot checked again here, where they
        // are (ASK for a key already migrated, TRYAGAIN, MOVED once the slot is gone).
        if let Some(cluster) = shared.cluster.as_deref()
            && cluster.unstable()
            && !self.in_script
            && let Some(refusal) = self.cluster_refusal(cluster, spec, args, db, now)
        {
            let at = out.len();
            Encoder::new(out, resp).error(&refusal);
            self.count_error(&out[at..], Some(spec.id));
            self.take_back_call(spec.id);
            return false;
        }
        // Time every run for the latency histograms (`latency-tracking yes`, the
        // default; not while a log or snapshot loads: its commands are no client's);
        // without them, one run in TIMING_SAMPLE of each command, counted TIMING_SAMPLE
        // times in INFO commandstats, and every run of a command that is not `fast` for
        // the slow log (and of every command when its threshold is low:
        // `SlowLog::times`).
        let tracking = crate::runtime::histogram::tracking() && !shared.persist.loading();
        self.executed = self.executed.wrapping_add(1);
        let sampled = self.executed.is_multiple_of(TIMING_SAMPLE);
        let fast = spec.flags.contains(crate::table::Flags::FAST);
        let timed = tracking || sampled || shared.latency.enabled() || shared.slowlog.times(fast);
        let started = timed.then(crate::runtime::histogram::Tick::now);
        let reply_at = out.len();
        if tx.is_none()
            && !self.script_oom_free
            && spec.flags.contains(crate::table::Flags::DENYOOM)
            && shared.memory.maxmemory() > 0
            && !shared.persist.loading()
            && self.out_of_memory(shared, now)
        {
            // Refused before it ran: a rejected call, as Redis counts it, and no call.
            let at = out.len();
            Encoder::new(out, resp).error(errors::OOM);
            self.count_error(&out[at..], Some(spec.id));
            self.take_back_call(spec.id);
            return false;
        }
        // How its unit's lookups behave: a read-only command's count as INFO's hits and
        // misses and, during CLIENT PAUSE, leave the expired keys they find (a script's
        // calls each for themselves).
        let readonly = spec.flags.contains(crate::table::Flags::READONLY);
        let write = spec.flags.contains(crate::table::Flags::WRITE);
        if readonly && spec.on_shard.is_none() {
            self.next_read_mode = Some(reading(
                shared,
                now,
                spec.flags.contains(crate::table::Flags::NO_TOUCH),
            ));
        }
        let waits = match spec.on_shard {
            Some(run) => {
                let call = crate::table::handler::OnShard {
                    spec,
                    args,
                    db,
                    now,
                    resp,
                    tx,
                    may_wait,
                };
                run(self, shared, &call, out)
            }
            None => {
                self.unit(
                    shared,
                    Origin::Command(spec.name, args, tx),
                    db,
                    now,
                    out,
                    resp,
                    |ctx| {
                        ctx.set_may_wait(may_wait);
                        handler(ctx, args);
                        ctx.waits()
                    },
                )
                .0
            }
        };
        // A write with no key counts once for the `save` rules (a unit counts the keys
        // others write or delete).
        if write && !spec.key_finder.has_keys() {
            self.writes += 1;
        }
        // A tracking client's keys: a read-only command's; not those of the commands a
        // script calls, but the script's declared keys once it called a read-only one
        // (as redis-server 7.0 remembers its caller's keys then).
        let remember = match self.tracked {
            Some(t) if t.read && self.in_script => {
                self.script_read |= readonly;
                false
            }
            Some(t) if t.read && spec.may_run_script() => std::mem::take(&mut self.script_read),
            Some(t) => t.read && readonly,
            None => false,
        };
        if remember && let Some(t) = self.tracked {
            let table = &mut self.tracking;
            spec.for_each_key_position(args, |i| {
                table.remember(args.get(i), t.reader, &shared.tracking);
            });
            self.tracking.limit(&shared.tracking, &mut self.pubsub);
        }
        let nanos = started.map(crate::runtime::histogram::Tick::elapsed_nanos);
        // (One that must wait is recorded by its plan, once done.)
        if tracking
            && !waits
            && let Some(nanos) = nanos
        {
            self.latencies.record(spec.id, nanos);
        }
        let micros = nanos.map(|n| n / 1000);
        if let Some(micros) = micros.filter(|_| shared.latency.enabled()) {
            shared.latency.add_command(fast, micros);
        }
        // (One that must wait is an entry of its plan's, once served.)
        if let Some(micros) = micros
            && !waits
            && shared.slowlog.is_slow(micros)
            && !spec.flags.contains(crate::table::Flags::SKIP_SLOWLOG)
            && self.slow.len() < SLOW_KEPT
        {
            let mut slow = crate::runtime::slowlog::SlowCmd::new(args, now / 1000, micros);
            slow.by_script = self.in_script;
            self.slow.push(slow);
        }
        if let Some(stat) = self.stats.get_mut(spec.id) {
            match nanos {
                // (One that must wait counts when its plan is done: `record_run`.)
                Some(_) if tracking && waits => {}
                Some(nanos) if tracking => stat.nanos += nanos,
                Some(nanos) if sampled => stat.nanos += nanos * TIMING_SAMPLE,
                _ => {}
            }
            if self.script_errors.is_some() {
                // A script's reply: the errors it holds, as Redis counts them.
                if let Some(errors) = self.script_errors.take() {
                    stat.failed += errors.failed_calls();
                    errors
                        .new
                        .into_iter()
                        .for_each(|code| self.errors.add(code));
                }
            } else if out.get(reply_at) == Some(&b'-') {
                stat.failed += 1;
                self.errors.count(&out[reply_at..]);
            }
        }
        waits
    }

    /// Counts an error reply sent by this worker (rejections, connection commands,
    /// transactions' answers); `rejected`: the command it refused, before running.
    pub fn count_error(&mut self, reply: &[u8], rejected: Option<usize>) {
        if reply.first() == Some(&b'-') {
            self.errors.count(reply);
            if let Some(id) = rejected {
                self.count_rejected(id);
            }
        }
    }

    /// Counts a failed run of command `id` that ran on the connection's worker (a
    /// connection command that answered an error).
    pub fn count_failed(&mut self, id: usize) {
        if let Some(stat) = self.stats.get_mut(id) {
            stat.failed += 1;
        }
    }

    /// The slow commands run since the last call, for SLOWLOG.
    pub fn take_slow(&mut self) -> Vec<crate::runtime::slowlog::SlowCmd> {
        std::mem::take(&mut self.slow)
    }

    /// Whether slow commands wait in [`Shard::take_slow`].
    pub fn has_slow(&self) -> bool {
        !self.slow.is_empty()
    }

    /// Records a run of command `id` that took `nanos` (one run on the connection's
    /// worker, or as a plan): in INFO commandstats, and in its latency histogram with
    /// `latency-tracking yes`.
    pub fn record_run(&mut self, id: usize, nanos: u64) {
        if let Some(stat) = self.stats.get_mut(id) {
            stat.nanos += nanos;
        }
        if crate::runtime::histogram::tracking() {
            self.latencies.record(id, nanos);
        }
    }

    /// Counts a call of command `id` (on the connection's worker, where it is dispatched).
    pub fn count_call(&mut self, id: usize) {
        if let Some(stat) = self.stats.get_mut(id) {
            stat.calls = stat.calls.wrapping_add(1);
        }
    }

    /// Takes back the call of command `id`, counted where it was dispatched (on this
    /// worker or on the connection's), that a check here refused before it ran. The
    /// shards' counts are summed with wrapping arithmetic, so this one may go below
    /// zero while the sum stays right.
    fn take_back_call(&mut self, id: usize) {
        if let Some(stat) = self.stats.get_mut(id) {
            stat.calls = stat.calls.wrapping_sub(1);
        }
    }

    /// Counts a command refused before it ran (a script's call, checked by the script).
    pub fn count_rejected(&mut self, id: usize) {
        if let Some(stat) = self.stats.get_mut(id) {
            stat.rejected += 1;
        }
    }

    /// Counts what [`Tally`] says.
    pub fn count(&mut self, tally: Tally) {
        match tally {
            Tally::Call(id) => self.count_call(id),
            Tally::Rejected(id) => self.count_rejected(id),
            Tally::Error(code) => self.errors.add(code),
            Tally::ReplyErrors(id, failed) => {
                if let Some(stat) = self.stats.get_mut(id) {
                    stat.failed += failed;
                }
            }
            Tally::Latency(id, nanos) => self.record_run(id, nanos),
        }
    }

    /// Counts an error in errorstats by its text (a script's call refused).
    pub fn count_error_text(&mut self, text: &[u8]) {
        self.errors
            .add(crate::table::handler::ErrorCode::of_message(text));
    }

    /// Takes back a call counted by [`Shard::count_call`] of a command that did not run
    /// and is dispatched again (`Worker::held_back_done`).
    pub fn uncount_call(&mut self, id: usize) {
        if let Some(stat) = self.stats.get_mut(id) {
            stat.calls = stat.calls.wrapping_sub(1);
        }
    }

    /// Runs a batch of plain commands that arrived from connection `from`. Its replies go
    /// back to the connection's worker — all of them, or those its reply budget allowed —
    /// or it waits here for a lock.
    pub fn run_batch(&mut self, shared: &Shared, from: ConnRef, mut batch: Box<Batch>) {
        if !self.stalled.is_empty()
            && let Some(queue) = self.stalled.get_mut(&from)
        {
            queue.push_back(batch);
            return;
        }
        if !self.quiet()
            && let Some(needs) = self.next_needs(shared, &batch)
            && (self
                .locks
                .queued_ahead(&needs, Some(from), !self.blocked.is_empty())
                || !self.locks.compatible(&needs, None))
        {
            if batch.no_wait {
                self.locks.contend(&needs.keys);
                self.out.push(finished(from, batch));
                return;
            }
            self.locks.wait(&needs, Some(from));
            self.blocked
                .push_back(Blocked::Batch { from, batch, needs });
            return;
        }
        match self.continue_batch(shared, &mut batch) {
            // (One that must not wait goes back where it stops.)
            Ran::Blocked(needs) if batch.no_wait => {
                self.locks.contend(&needs.keys);
                self.out.push(finished(from, batch));
            }
            Ran::OverBudget if batch.no_wait => self.out.push(finished(from, batch)),
            Ran::Blocked(needs) => {
                self.locks.wait(&needs, Some(from));
                self.blocked
                    .push_back(Blocked::Batch { from, batch, needs });
            }
            Ran::OverBudget => self.stall(from, batch),
            Ran::Finished => self.out.push(finished(from, batch)),
        }
    }

    /// A batch reached its reply budget: its replies go back now, the rest of it (and
    /// the connection's later batches) waits for [`Shard::resume`].
    fn stall(&mut self, from: ConnRef, mut batch: Box<Batch>) {
        let replies = std::mem::take(&mut batch.replies);
        let ends = std::mem::take(&mut batch.ends);
        self.out
            .push((from.worker, Msg::Replies(from, self.id, replies, ends)));
        self.stalled.entry(from).or_default().push_front(batch);
    }

    /// Goes on with a connection's stalled batch with a new reply budget, then with its
    /// later batches, in order; `None`: the connection is gone, the batches go back
    /// unrun.
    pub fn resume(&mut self, shared: &Shared, from: ConnRef, budget: Option<usize>) {
        let Some(mut queue) = self.stalled.remove(&from) else {
            return;
        };
        let Some(budget) = budget else {
            for batch in queue {
                self.out.push(finished(from, batch));
            }
            return;
        };
        if let Some(first) = queue.front_mut() {
            first.reply_budget = budget;
        }
        while let Some(batch) = queue.pop_front() {
            self.run_batch(shared, from, batch);
            if let Some(again) = self.stalled.get_mut(&from) {
                // Stalled again: the rest waits behind it.
                again.extend(queue.drain(..));
                return;
            }
        }
    }

    /// What the next command of `batch` needs.
    fn next_needs(&self, shared: &Shared, batch: &Batch) -> Option<Needs> {
        let cmd = batch.cmds.get(batch.next)?;
        let spec = shared.commands.get(cmd.spec)?;
        let args = batch.args(batch.next);
        Some(Needs {
            keys: spec.lock_keys(&args),
            all: false,
        })
    }

    /// Runs the batch's commands from `batch.next` until it ends, its replies reach its
    /// budget (at least one command runs), or a command needs a lock it cannot have.
    fn continue_batch(&mut self, shared: &Shared, batch: &mut Batch) -> Ran {
        let first = batch.next;
        while !batch.finished() {
            if batch.next > first && batch.over_budget() {
                return Ran::OverBudget;
            }
            if batch.next >= batch.prefetched {
                self.prefetch_batch(batch);
                batch.prefetched = batch.next + PREFETCH_AHEAD;
            }
            if !self.quiet()
                && let Some(needs) = self.next_needs(shared, batch)
                && !self.locks.compatible(&needs, None)
            {
                return Ran::Blocked(needs);
            }
            self.run_one(shared, batch, None, None);
            if self.has_wakes() {
                // Served before the batch's next command, which finds the keys locked
                // (as redis-server serves blocked clients after each command).
                self.serve_wakes(shared);
            }
        }
        Ran::Finished
    }

    /// Prefetches the keys of the batches among `msgs` (a message vector just taken from
    /// the inbox: everything one worker sent this one in an iteration), up to
    /// [`PREFETCH_AHEAD`] keys in all, before any of them runs. With keys spread over the
    /// shards most batches hold a command or two, too few to prefetch one by one; all
    /// the batches of a message vector together are many.
    pub fn prefetch_runs(&self, msgs: &mut [Msg]) {
        // (Marked first: the batches' own prefetches skip these commands.)
        let mut left = PREFETCH_AHEAD;
        for msg in msgs.iter_mut() {
            if left == 0 {
                break;
            }
            if let Msg::Run(_, batch) = msg {
                let these = batch.cmds.len().saturating_sub(batch.next).min(left);
                batch.prefetched = batch.next + these;
                left -= these;
            }
        }
        self.prefetch_commands(
            msgs.iter()
                .filter_map(|msg| match msg {
                    Msg::Run(_, batch) => Some(&**batch),
                    _ => None,
                })
                .flat_map(|batch| batch.cmds.iter().skip(batch.next).map(move |c| (batch, c))),
        );
    }

    /// Prefetches the keys of the next [`PREFETCH_AHEAD`] commands of `batch`, as the
    /// worker does for its own connections' pipelines (`Worker::prefetch_keys`).
    pub(crate) fn prefetch_batch(&self, batch: &Batch) {
        self.prefetch_commands(
            batch
                .cmds
                .iter()
                .skip(batch.next)
                .take(PREFETCH_AHEAD)
                .map(|c| (batch, c)),
        );
    }

    /// Prefetches the keys of `commands` (the second word of each, where most commands
    /// have their key; up to [`PREFETCH_AHEAD`] of them) when there are several: their
    /// positions first, then the lookups, in a loop small enough for the CPU to run many
    /// of them at once, so their cache misses overlap instead of adding up.
    fn prefetch_commands<'a>(&self, commands: impl Iterator<Item = (&'a Batch, &'a Cmd)>) {
        let mut found = [(0, (0, 0)); PREFETCH_AHEAD];
        let mut n = 0;
        for (batch, cmd) in commands {
            if n == PREFETCH_AHEAD {
                break;
            }
            if let Some(key) = batch.second_word(cmd)
                && let Some(keyspace) = self.dbs.get(batch.db)
            {
                found[n] = (batch.db, keyspace.position(key));
                n += 1;
            }
        }
        if n < 2 {
            return;
        }
        for &(db, position) in &found[..n] {
            if let Some(keyspace) = self.dbs.get(db) {
                keyspace.prefetch(position);
            }
        }
    }

    /// Runs command `batch.next` with no lock checks. `client`: the tracking client a
    /// step's commands run for when the batch does not name one (the commands a script
    /// run as a plan calls): its writes are its own (NOLOOP), its reads not remembered.
    fn run_one(
        &mut self,
        shared: &Shared,
        batch: &mut Batch,
        tx: Option<TxRef>,
        client: Option<crate::runtime::tracking::Tracked>,
    ) {
        let tracked = batch.tracked(batch.next).or(client);
        let caller = batch.caller.clone();
        let batch_scripts = caller.is_some();
        let Batch {
            data,
            spans,
            cmds,
            next,
            replies,
            resp,
            now,
            slots_version,
            db,
            ..
        } = batch;
        let Some(cmd) = cmds.get(*next) else { return };
        *next += 1;
        let args = Args::new(data, spans.get(cmd.args.clone()).unwrap_or(&[]));
        let Some(spec) = shared.commands.get(cmd.spec) else {
            return;
        };
        self.tracked = tracked;
        if batch_scripts {
            self.script_caller = caller;
        }
        self.execute(
            shared,
            spec,
            &args,
            *db,
            *now,
            replies,
            *resp,
            tx,
            *slots_version,
        );
        self.tracked = None;
        if batch_scripts {
            self.script_caller = None;
        }
        if batch.record_ends {
            batch.ends.push(batch.replies.len());
        }
        if !self.slow.is_empty() {
            batch.slow.append(&mut self.slow);
        }
    }

    /// Handles a transaction step: lock (or wait), run, release.
    pub fn step(&mut self, shared: &Shared, step: TxStep) {
        if step.slots_version != self.slots.version()
            && let Some(slot) = step
                .lock
                .iter()
                .map(|(k, _)| usize::from(key_slot(k)))
                .find(|&slot| !self.slots.owns(self.id, slot))
        {
            let refusal = self.refusal(slot, step.slots_version);
            self.report(&step, Err(refusal));
            return;
        }
        // Cluster mode: a transaction (a plan, EXEC) does not take keys of a slot that is
        // leaving the node, or has left: the keys may be on their way to the other node,
        // and a plan's hops are not commands the shard checks one by one. It answers
        // TRYAGAIN, which clients retry once the slot is settled.
        if let Some(cluster) = self.cluster.as_deref()
            && cluster.unstable()
            && !step.lock.is_empty()
        {
            let routes = crate::cluster::current(&mut self.routes, cluster);
            if step
                .lock
                .iter()
                .any(|(k, _)| routes.leaving(usize::from(key_slot(k))))
            {
                self.report(&step, Err(crate::cluster::routes::TRYAGAIN.to_vec()));
                return;
            }
        }
        let needs = Needs::of(&step.lock, step.lock_all);
        // A served wait's grant goes ahead of whatever waits for its keys: all of that
        // came after the write that served it, and in Redis runs after the blocked
        // clients that write served (and those they served in turn).
        let woken = step.index == WOKEN;
        if !needs.is_empty()
            && ((!woken
                && self
                    .locks
                    .queued_ahead(&needs, None, !self.blocked.is_empty()))
                || !self.locks.compatible(&needs, Some(step.tx)))
        {
            if step.try_lock {
                self.report(&step, Ok(HopOut::Busy));
                return;
            }
            self.locks.wait(&needs, None);
            let item = Blocked::Step { step, needs };
            if woken {
                let at = self
                    .blocked
                    .iter()
                    .position(|b| !matches!(b, Blocked::Step { step, .. } if step.index == WOKEN))
                    .unwrap_or(self.blocked.len());
                self.blocked.insert(at, item);
            } else {
                self.blocked.push_back(item);
            }
            return;
        }
        self.run_step(shared, step, &needs, true);
    }

    fn report(&mut self, step: &TxStep, out: Result<HopOut, Vec<u8>>) {
        self.report_ran(step, out, None);
    }

    /// [`Shard::report`] of a step that ran, with the slow commands it ran and its part
    /// of the replication stream (and the log).
    fn report_ran(
        &mut self,
        step: &TxStep,
        out: Result<HopOut, Vec<u8>>,
        repl: Option<Box<crate::repl::master::Part>>,
    ) {
        let done = TxStepDone {
            repl,
            tx: step.tx,
            index: step.index,
            shard: self.id,
            out,
            holds_locks: self.locks.holds(step.tx),
            slow: std::mem::take(&mut self.slow),
        };
        self.out.push((step.tx.worker, Msg::StepDone(done)));
    }

    /// Runs a step whose locks are available: acquire, run, release if asked (then, with
    /// `retry`, let waiting items move), and report.
    fn run_step(&mut self, shared: &Shared, mut step: TxStep, needs: &Needs, retry: bool) {
        if !needs.is_empty() {
            self.locks.acquire(step.tx, needs);
        }
        if let Some(t) = step.tracked.filter(|t| t.read) {
            // A read-only command of a tracking client: its keys here are remembered
            // while it holds them.
            self.remember_keys(shared, t.reader, step.lock.iter().map(|(k, _)| &k[..]));
        }
        // What the step writes reaches replicas from its coordinator, with the rest of
        // its transaction (`Gathered`).
        let gathering = matches!(
            step.work,
            Some(Work::Commands(_) | Work::Run(_) | Work::Publish(..))
        );
        if gathering && let Some(feed) = self.repl.as_mut() {
            feed.begin_part();
        }
        let out = match step.work.take() {
            None => HopOut::Done,
            Some(Work::Remember(keys)) => {
                // Keys a read-only command inside EXEC read here (it holds them still).
                if let Some(t) = step.tracked {
                    self.remember_keys(shared, t.reader, keys.iter().map(|k| &k[..]));
                }
                HopOut::Done
            }
            Some(Work::Publish(argv, repl)) => {
                let arg = |i: usize| argv.get(i).map_or(&b""[..], Vec::as_slice);
                let at = crate::families::pubsub::Publishing {
                    db: step.db as u16,
                    in_script: true,
                    repl,
                };
                let (out, feed) = self.publications_and_feed();
                let argv = [arg(0), arg(1), arg(2)];
                let n = crate::families::pubsub::publish_command(shared, out, feed, argv, at);
                HopOut::Reply(crate::txn::plan::encoded(Version::Resp2, |e| {
                    e.integer(n as i64)
                }))
            }
            Some(Work::Commands(mut batch)) => {
                batch.now = step.now;
                batch.slots_version = step.slots_version;
                batch.db = step.db;
                self.begin_deferred_serving();
                self.script_hop = batch.by_script;
                self.script_repl = batch.script_repl;
                let client = step
                    .tracked
                    .map(|t| crate::runtime::tracking::Tracked { read: false, ..t });
                while !batch.finished() {
                    if step.cuts
                        && let Some(feed) = self.repl.as_mut()
                    {
                        feed.cut();
                    }
                    self.run_one(shared, &mut batch, Some(step.tx), client);
                }
                self.script_hop = false;
                self.script_repl = crate::scripting::engine::REPL_ALL;
                self.end_deferred_serving();
                // Its slow commands go back with the step's report.
                self.slow.append(&mut batch.slow);
                HopOut::Reply(std::mem::take(&mut batch.replies))
            }
            Some(Work::Run(f)) => {
                let mut scratch = Vec::new();
                self.step_command = step.command.take();
                self.tracked = step.tracked;
                if step.reads {
                    self.next_read_mode = Some(reading(shared, step.now, false));
                }
                let (out, release) = self.unit(
                    shared,
                    Origin::Step(step.tx),
                    step.db,
                    step.now,
                    &mut scratch,
                    Version::Resp2,
                    f,
                );
                self.step_command = None;
                self.tracked = None;
                step.release |= release;
                out
            }
        };
        if !self.expired_waited.is_empty() {
            // (Their DELs follow the transaction.)
            if let Some(feed) = self.repl.as_mut() {
                feed.part_after(true);
            }
            self.expire_waited(shared);
            if let Some(feed) = self.repl.as_mut() {
                feed.part_after(false);
            }
        }
        let part = match self.repl.as_mut() {
            Some(feed) if gathering => feed.end_part(&shared.repl, !step.release),
            _ => None,
        };
        if step.release {
            self.locks.release(step.tx);
            if retry {
                self.retry(shared);
            }
            self.woken_released(step.tx);
        }
        self.report_ran(&step, Ok(out), part.map(Box::new));
    }

    /// Registers a parked plan's wait on keys of this shard, or wakes it at once when one
    /// of them is ready already; then lets go of the locks it holds here, if asked (what
    /// waited for them runs with the wait in line).
    pub fn park(&mut self, shared: &Shared, req: ParkReq) {
        let (tx, release) = (req.tx, req.release);
        self.wait_or_wake(shared, req);
        if release {
            self.release_early(shared, tx);
        }
    }

    fn wait_or_wake(&mut self, shared: &Shared, req: ParkReq) {
        if req.keys.iter().any(|w| w.ready.is_some()) {
            // (A wait's own first test, if it has one.)
            let keys = &req.keys;
            let mut scratch = Vec::new();
            let (found, _) = self.unit(
                shared,
                Origin::Step(req.tx),
                req.db,
                req.now,
                &mut scratch,
                Version::Resp2,
                |ctx| {
                    keys.iter()
                        .find(|w| {
                            w.ready_first
                                .or(w.ready)
                                .is_some_and(|ready| ready(ctx.db, &w.key, req.now, &w.arg) > 0)
                        })
                        .map(|w| (w.key.clone(), w.serve, w.with.clone()))
                },
            );
            if let Some((key, serve, with)) = found {
                if req
                    .claim
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    match serve {
                        Serve::Notify => self
                            .out
                            .push((req.tx.worker, Msg::Woken(req.tx, req.id, key))),
                        Serve::Lock => self.wakes.push((req.tx, req.db, key, with)),
                    }
                }
                return;
            }
        }
        self.waiters
            .register(req.tx, req.id, req.db, req.keys, req.claim, req.turn);
        self.update_observed();
    }

    /// Number of plans waiting on keys of this shard.
    pub fn parked(&self) -> usize {
        self.waiters.len()
    }

    /// Cancels a parked plan's wait here.
    pub fn unpark(&mut self, tx: TxRef, id: u64) {
        self.waiters.cancel(tx, id);
        self.update_observed();
    }

    /// Retries waiting items in order after locks were released, until nothing moves.
    fn retry(&mut self, shared: &Shared) {
        loop {
            let mut progressed = false;
            // Keys, the whole shard and connections that earlier waiting items still
            // want: a later item needing any of them must not overtake.
            let mut wanted: HashSet<LockKey> = HashSet::new();
            let mut wanted_all = false;
            let mut wanted_conns: HashSet<ConnRef> = HashSet::new();
            let items = std::mem::take(&mut self.blocked);
            for item in items {
                let (needs, from, tx) = match &item {
                    Blocked::Batch { needs, from, .. } => (needs, Some(*from), None),
                    Blocked::Step { needs, step } => (needs, None, Some(step.tx)),
                };
                let overtakes = wanted_all
                    || (needs.all && (!wanted.is_empty() || !wanted_conns.is_empty()))
                    || needs.keys.iter().any(|(k, _)| wanted.contains(k))
                    || from.is_some_and(|c| wanted_conns.contains(&c));
                if overtakes || !self.locks.compatible(needs, tx) {
                    wanted.extend(needs.keys.iter().map(|(k, _)| *k));
                    wanted_all |= needs.all;
                    if let Some(c) = from {
                        wanted_conns.insert(c);
                    }
                    self.blocked.push_back(item);
                    continue;
                }
                progressed = true;
                match item {
                    Blocked::Step { step, needs } => {
                        self.locks.unwait(&needs, None);
                        // A releasing step retries by itself; keep this pass simple.
                        self.run_step(shared, step, &needs, false);
                    }
                    Blocked::Batch {
                        from,
                        mut batch,
                        needs,
                    } => {
                        self.locks.unwait(&needs, Some(from));
                        if let Some(queue) = self.stalled.get_mut(&from) {
                            // An earlier batch of the connection stalled on its budget.
                            queue.push_back(batch);
                            continue;
                        }
                        match self.continue_batch(shared, &mut batch) {
                            Ran::Blocked(needs) => {
                                self.locks.wait(&needs, Some(from));
                                wanted.extend(needs.keys.iter().map(|(k, _)| *k));
                                wanted_all |= needs.all;
                                wanted_conns.insert(from);
                                self.blocked
                                    .push_back(Blocked::Batch { from, batch, needs });
                            }
                            Ran::OverBudget => self.stall(from, batch),
                            Ran::Finished => self.out.push(finished(from, batch)),
                        }
                    }
                }
            }
            if !progressed {
                return;
            }
        }
    }
}

/// The message that returns a batch.
fn finished(from: ConnRef, batch: Box<Batch>) -> Outgoing {
    (from.worker, Msg::Done(from, batch))
}
