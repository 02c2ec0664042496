//! What workers send each other.
//!
//! Messages to one destination from one loop iteration travel together, as one
//! `Vec<Msg>` with one wake-up. A command that runs on another shard travels in a
//! [`Batch`]: its arguments copied into one buffer, its replies written by the owner into
//! another, and the same box comes back. Batches are recycled with their buffers, so a
//! batch allocates nothing in steady traffic.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use goblin_protocol::Version;
use goblin_store::Millis;

use crate::shard::slots::SlotMap;
use crate::table::handler::Args;
use crate::txn::plan::{HopOut, Watch, Work};

/// A connection, named across threads: its worker, its slab key, and a generation that
/// tells a reused slab key apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnRef {
    /// The worker that owns the connection.
    pub worker: usize,
    /// Its key in that worker's slab.
    pub key: usize,
    /// Its generation.
    pub generation: u64,
}

/// A transaction, named across threads: its coordinator worker and sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxRef {
    /// The coordinating worker.
    pub worker: usize,
    /// Unique on that worker.
    pub seq: u64,
}

/// How a transaction holds a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Readers share.
    Shared,
    /// One writer, alone.
    Exclusive,
}

/// One command inside a batch: its table id and its arguments' range in `Batch::spans`.
#[derive(Clone, Debug)]
pub struct Cmd {
    /// Command table id.
    pub spec: usize,
    /// Range of `Batch::spans` holding its arguments.
    pub args: Range<usize>,
    /// Whether it runs for a tracking client (CLIENT TRACKING: the batch's `tracker`),
    /// and whether its keys are remembered.
    pub track: Track,
}

/// A batched command's part in CLIENT TRACKING (the client is the batch's `tracker`: a
/// batch holds one connection's commands).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Track {
    /// Its client does not track.
    #[default]
    No,
    /// Its client tracks; its keys are not remembered.
    Client,
    /// Its client tracks and its keys are remembered (if it only reads).
    Read,
}

/// Commands to run on one shard, and their replies.
#[derive(Debug)]
pub struct Batch {
    /// Argument bytes of every command.
    pub data: Vec<u8>,
    /// Argument ranges into `data`.
    pub spans: Vec<Range<usize>>,
    /// The commands, in order.
    pub cmds: Vec<Cmd>,
    /// Index of the first command not yet run (a batch waiting on a lock resumes there).
    pub next: usize,
    /// Replies of the commands run so far, in the connection's protocol version.
    pub replies: Vec<u8>,
    /// The protocol version of the replies.
    pub resp: Version,
    /// The timestamp the commands use (the origin's clock for this iteration).
    pub now: Millis,
    /// At most this many reply bytes: the owner stops after the command that reaches it,
    /// sends those replies back and keeps the rest until the connection's output drains
    /// (a connection's unsent replies are bounded wherever they are held).
    pub reply_budget: usize,
    /// The version of the slot map the batch was routed with.
    pub slots_version: u64,
    /// The database its commands run against (the client's, as it was when they were
    /// sent: a SELECT waits for what is in flight).
    pub db: usize,
    /// Its commands that were slow (SLOWLOG), for the connection's worker to log.
    pub slow: Vec<crate::runtime::slowlog::SlowCmd>,
    /// The tracking client its commands marked [`Track::Client`] or [`Track::Read`] run
    /// for.
    pub tracker: Option<crate::runtime::tracking::Reader>,
    /// It holds a command that may run a script (the shard that runs it lends its
    /// worker's connections to the stand-in meanwhile: `runtime/standin.rs`).
    pub scripts: bool,
    /// Its commands are a script's calls (a script run under its plan): SORT then orders
    /// a set it would leave unsorted ([`crate::table::handler::ShardCtx::called_by_script`]).
    pub by_script: bool,
    /// Where the effects of a script's calls go (`redis.set_repl`:
    /// `crate::scripting::engine::REPL_ALL` unless it said otherwise).
    pub script_repl: u8,
    /// Who runs its scripts, when that user's permissions are restricted (the commands
    /// a script calls are checked against them).
    pub caller: Option<Arc<crate::acl::Caller>>,
    /// Where each command's reply ends in `replies`, recorded when `record_ends` (the
    /// connection ran commands early between them and puts their replies in between:
    /// `Worker::run_early`).
    pub ends: Vec<usize>,
    /// Record `ends`.
    pub record_ends: bool,
    /// It never waits for keys nor for its connection's output: where it would, it
    /// comes back unfinished (its connection holds keys of its own shard meanwhile, for
    /// commands held back: `Worker::hold_back`).
    pub no_wait: bool,
    /// Its commands before this one have had their keys prefetched on the shard that
    /// runs them (`Shard::prefetch_runs`, `Shard::continue_batch`).
    pub prefetched: usize,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            data: Vec::new(),
            spans: Vec::new(),
            cmds: Vec::new(),
            next: 0,
            replies: Vec::new(),
            resp: Version::Resp2,
            now: 0,
            reply_budget: usize::MAX,
            slots_version: 0,
            db: 0,
            slow: Vec::new(),
            tracker: None,
            scripts: false,
            by_script: false,
            script_repl: crate::scripting::engine::REPL_ALL,
            caller: None,
            ends: Vec::new(),
            record_ends: false,
            no_wait: false,
            prefetched: 0,
        }
    }
}

impl Batch {
    /// The second word of command `cmd`, where most commands have their key (what a
    /// shard prefetches); `None` for a command of one word.
    pub fn second_word(&self, cmd: &Cmd) -> Option<&[u8]> {
        self.spans
            .get(cmd.args.start + 1)
            .filter(|_| cmd.args.len() > 1)
            .and_then(|span| self.data.get(span.clone()))
    }

    /// Appends a command with its arguments.
    pub fn push(&mut self, spec: usize, args: &Args<'_>) {
        let first = self.spans.len();
        for arg in args.iter_from(0) {
            let start = self.data.len();
            self.data.extend_from_slice(arg);
            self.spans.push(start..self.data.len());
        }
        self.cmds.push(Cmd {
            spec,
            args: first..self.spans.len(),
            track: Track::No,
        });
    }

    /// Appends a command of a tracking client (`tracked`), with its arguments.
    pub fn push_tracked(
        &mut self,
        spec: usize,
        args: &Args<'_>,
        tracked: Option<crate::runtime::tracking::Tracked>,
    ) {
        self.push(spec, args);
        if let Some(t) = tracked
            && let Some(cmd) = self.cmds.last_mut()
        {
            cmd.track = if t.read { Track::Read } else { Track::Client };
            self.tracker = Some(t.reader);
        }
    }

    /// The tracking client command `i` runs for, if it tracks.
    pub fn tracked(&self, i: usize) -> Option<crate::runtime::tracking::Tracked> {
        let track = self.cmds.get(i)?.track;
        let reader = self.tracker.filter(|_| track != Track::No)?;
        Some(crate::runtime::tracking::Tracked {
            reader,
            read: track == Track::Read,
            own_flush: false,
        })
    }

    /// The arguments of command `i`.
    pub fn args(&self, i: usize) -> Args<'_> {
        let range = self.cmds.get(i).map_or(0..0, |c| c.args.clone());
        Args::new(&self.data, self.spans.get(range).unwrap_or(&[]))
    }

    /// Empties the batch for reuse, keeping its buffers.
    pub fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
        self.cmds.clear();
        self.next = 0;
        self.replies.clear();
        self.reply_budget = usize::MAX;
        self.slow.clear();
        self.tracker = None;
        self.scripts = false;
        self.by_script = false;
        self.script_repl = crate::scripting::engine::REPL_ALL;
        self.caller = None;
        self.ends.clear();
        self.record_ends = false;
        self.no_wait = false;
        self.prefetched = 0;
    }

    /// Drops the commands from `n` on.
    pub fn truncate(&mut self, n: usize) {
        if let Some(cmd) = self.cmds.get(n) {
            let first = cmd.args.start;
            if let Some(span) = self.spans.get(first) {
                self.data.truncate(span.start);
            }
            self.spans.truncate(first);
            self.cmds.truncate(n);
        }
    }

    /// True when every command has run.
    pub fn finished(&self) -> bool {
        self.next >= self.cmds.len()
    }

    /// True when the replies reached the budget: the rest waits (at least one command
    /// runs per visit, so a batch always makes progress).
    pub fn over_budget(&self) -> bool {
        self.replies.len() >= self.reply_budget
    }
}

/// One visit of a transaction to one shard: take locks (waiting if needed), run work
/// under them, release them.
#[derive(Debug)]
pub struct TxStep {
    /// The transaction.
    pub tx: TxRef,
    /// Which hop of its stage this is (the result goes back in that place).
    pub index: usize,
    /// Keys to lock before anything else (empty when already held).
    pub lock: Vec<(Vec<u8>, LockMode)>,
    /// Lock the whole shard (keyspace-wide commands).
    pub lock_all: bool,
    /// Take the locks only if they are free now; else answer `HopOut::Busy`.
    pub try_lock: bool,
    /// The work to run once the locks are held.
    pub work: Option<Work>,
    /// Release every lock the transaction holds on this shard afterwards.
    pub release: bool,
    /// The transaction's one timestamp.
    pub now: Millis,
    /// The version of the slot map the transaction was routed with.
    pub slots_version: u64,
    /// The database the transaction works on (its client's).
    pub db: usize,
    /// The command the transaction runs, when keyspace notifications must name the
    /// events its work makes.
    pub command: Option<Arc<Batch>>,
    /// The tracking client the transaction runs for, if it tracks.
    pub tracked: Option<crate::runtime::tracking::Tracked>,
    /// It runs a read-only command: its lookups count as INFO's hits and misses.
    pub reads: bool,
    /// Its step's hops interleave commands (EXEC's): where each of its commands begins
    /// in what it writes for replicas is recorded (`Feed::cut`).
    pub cuts: bool,
}

/// What a transaction step gives back.
#[derive(Debug)]
pub struct TxStepDone {
    /// The transaction.
    pub tx: TxRef,
    /// The hop's place in its stage.
    pub index: usize,
    /// The shard that ran the step.
    pub shard: usize,
    /// The work's result; `Err` when the shard refused the step (a key it does not own):
    /// the error reply.
    pub out: Result<HopOut, Vec<u8>>,
    /// Whether the transaction still holds locks on this shard after the step.
    pub holds_locks: bool,
    /// What it wrote, for replicas and the log: its coordinator appends it with the rest of the
    /// transaction.
    pub repl: Option<Box<crate::repl::master::Part>>,
    /// The slow commands it ran (EXEC's, a script's), for SLOWLOG.
    pub slow: Vec<crate::runtime::slowlog::SlowCmd>,
}

/// A parked plan's wait, registered on one shard.
#[derive(Debug)]
pub struct ParkReq {
    /// The transaction.
    pub tx: TxRef,
    /// Which wait of the transaction this is (a later one makes earlier wake-ups stale).
    pub id: u64,
    /// The keys of this shard to watch (a key already ready wakes the plan at once).
    pub keys: Vec<Watch>,
    /// Set by whichever serves the wait, or gives it up, first: every shard of the wait
    /// and its coordinator share it.
    pub claim: Arc<AtomicBool>,
    /// When its command came, ns since the epoch: waits are served in that order
    /// (`park.rs`).
    pub turn: u64,
    /// The transaction holds locks on this shard, let go once the wait is registered:
    /// what waits for those locks (a push, say) then finds it in line.
    pub release: bool,
    /// The time the readiness check uses.
    pub now: Millis,
    /// The database of the keys.
    pub db: usize,
}

/// A message between workers.
#[derive(Debug)]
pub enum Msg {
    /// A new connection for this worker to serve.
    Adopt(crate::runtime::net::Stream, crate::runtime::net::Origin),
    /// MONITOR lines for a MONITOR client of this worker.
    Monitor(ConnRef, Arc<[u8]>),
    /// Commands for this shard, from a connection on another worker.
    Run(ConnRef, Box<Batch>),
    /// A batch coming back with its replies.
    Done(ConnRef, Box<Batch>),
    /// The replies of a batch that reached its reply budget, from this shard, and where
    /// each ends (when the batch records it): the rest of it waits there until
    /// [`Msg::Resume`].
    Replies(ConnRef, usize, Vec<u8>, Vec<usize>),
    /// The connection's output has room again: go on with its stalled batch, with this
    /// reply budget (`None`: the connection is gone; send the batch back unrun).
    Resume(ConnRef, Option<usize>),
    /// A transaction step for this shard.
    Step(TxStep),
    /// A transaction step's result.
    StepDone(TxStepDone),
    /// Watch keys of this shard for a parked plan.
    Park(ParkReq),
    /// Stop watching for a parked plan's wait.
    Unpark(TxRef, u64),
    /// A wait this key served with its lock was given up (its client left) before using
    /// what made the key ready: serve the key's next waits.
    Reserve(usize, Vec<u8>),
    /// A watched key changed: the wait `id` of the transaction can go on.
    Woken(TxRef, u64, Vec<u8>),
    /// A new slot map.
    Slots(Arc<SlotMap>),
    /// A connection's question to every worker: the command (its batch) asks.
    Ask(ConnRef, Arc<Batch>),
    /// A worker's answer to a connection's question, and how long it took to answer
    /// (microseconds, for SLOWLOG).
    Answer(ConnRef, Vec<u8>, u64),
    /// Keys loaded at start-up, for this worker's shard.
    Load(Vec<crate::persist::load::Loaded>),
    /// Loading is over for this worker.
    Loaded,
    /// SIGTERM or SIGINT (to worker 0): shut down as SHUTDOWN does.
    Shutdown,
    /// DEBUG SLEEP: stop until then (no client answered meanwhile).
    Sleep(std::time::Instant),
    /// The connection of this replica's link to its master (`repl::replica`).
    AdoptMaster(crate::runtime::net::Stream, crate::runtime::net::Origin),
    /// The replication stream grew: send the replicas of this worker what it gained.
    ReplWake,
    /// This server's replicas must sync again (it synced with its master in full, or
    /// follows another): close their connections — but the one named (a failover's
    /// PSYNC, from the master handing over).
    DropReplicas(Option<ConnRef>),
    /// Publications for this worker's subscribers, in the order they were made
    /// (`runtime/pubsub.rs`).
    Publish(Vec<u8>),
}
