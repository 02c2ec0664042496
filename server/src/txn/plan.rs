//! The interface between the coordinator and the command families: a [`Plan`] says what
//! a cross-shard command does, hop by hop; the coordinator (`coordinator.rs`) takes the
//! locks, runs each hop on its shard, hands the typed results back, and replies.
//!
//! A family writes a plan next to its commands and registers it with the command
//! ([`CrossShard`]); reusable shapes (split by shard and merge, fan out to every shard,
//! read then write) are in `shapes.rs`. Nothing here knows any command.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use goblin_protocol::{Encoder, Version};
use goblin_store::{Keyspace, Millis, Value};

use crate::runtime::msg::{Batch, LockMode};
use crate::runtime::server::Shared;
use crate::shard::slots::SlotMap;
use crate::table::CommandSpec;
use crate::table::handler::{Args, ShardCtx};

/// Work a hop does on its shard: a closure over the shard's context, returning a typed
/// result. It runs on the shard's thread, with the shard's keyspace, under the locks the
/// transaction holds there.
pub type HopFn = Box<dyn FnOnce(&mut ShardCtx<'_>) -> HopOut + Send>;

/// What a hop runs on its shard.
pub enum Work {
    /// Whole commands, run as they would run alone (their replies come back as
    /// [`HopOut::Reply`]): what EXEC sends a shard.
    Commands(Box<Batch>),
    /// A closure.
    Run(HopFn),
    /// Remember, for the transaction's tracking client (CLIENT TRACKING), that it read
    /// these keys: what a cross-shard read-only command inside EXEC read on the shard.
    Remember(Vec<Vec<u8>>),
    /// `PUBLISH`/`SPUBLISH channel message` (its arguments), called by a script run as a
    /// plan: published from the shard, sent to replicas among the script's writes
    /// unless `redis.set_repl` said otherwise (the flags); its reply comes back as
    /// [`HopOut::Reply`].
    Publish(Vec<Vec<u8>>, u8),
}

impl fmt::Debug for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Work::Commands(b) => write!(f, "Commands({} commands)", b.cmds.len()),
            Work::Run(_) => f.write_str("Run(..)"),
            Work::Remember(keys) => write!(f, "Remember({} keys)", keys.len()),
            Work::Publish(..) => f.write_str("Publish(..)"),
        }
    }
}

/// One visit to one shard.
#[derive(Debug)]
pub struct Hop {
    /// The shard.
    pub shard: usize,
    /// Keys to lock first (plans that take their locks in their hops; empty otherwise).
    pub lock: Vec<(Vec<u8>, LockMode)>,
    /// Take the locks only if they are free now: otherwise the hop does nothing and
    /// answers [`HopOut::Busy`] (a plan that already holds a lock out of the ascending
    /// order must not wait for another).
    pub try_lock: bool,
    /// Release every lock the transaction holds on the shard afterwards.
    pub release: bool,
    /// What to run once the locks are held; `None`: only lock or release.
    pub work: Option<Work>,
    /// Where its commands come among those of its step, when the step's hops interleave
    /// commands (EXEC's: [`Hop::interleaved`]); empty otherwise. What they write reaches
    /// replicas in that order.
    pub order: Vec<usize>,
}

impl Hop {
    /// A hop that runs `work` on `shard` (nothing: `None`).
    fn doing(shard: usize, work: Option<Work>) -> Hop {
        Hop {
            shard,
            lock: Vec::new(),
            try_lock: false,
            release: false,
            work,
            order: Vec::new(),
        }
    }

    /// A hop that runs `f` on `shard`.
    pub fn run(shard: usize, f: impl FnOnce(&mut ShardCtx<'_>) -> HopOut + Send + 'static) -> Hop {
        Hop::doing(shard, Some(Work::Run(Box::new(f))))
    }

    /// A hop that runs whole commands on `shard`.
    pub fn commands(shard: usize, batch: Box<Batch>) -> Hop {
        Hop::doing(shard, Some(Work::Commands(batch)))
    }

    /// A hop that runs whole commands on `shard`, the commands at `order` among those
    /// of its step, whose hops run at once.
    pub fn interleaved(shard: usize, batch: Box<Batch>, order: Vec<usize>) -> Hop {
        Hop {
            order,
            ..Hop::commands(shard, batch)
        }
    }

    /// A hop that publishes (a script's PUBLISH) from `shard` ([`Work::Publish`]).
    pub fn publish(shard: usize, argv: Vec<Vec<u8>>, repl: u8) -> Hop {
        Hop::doing(shard, Some(Work::Publish(argv, repl)))
    }

    /// A hop that remembers, for the transaction's tracking client, that it read `keys`
    /// on `shard` ([`Work::Remember`]).
    pub fn remember(shard: usize, keys: Vec<Vec<u8>>) -> Hop {
        Hop::doing(shard, Some(Work::Remember(keys)))
    }

    /// Locks `key` in `mode` before the work.
    pub fn locking(mut self, key: &[u8], mode: LockMode) -> Hop {
        self.lock.push((key.to_vec(), mode));
        self
    }

    /// Locks `key` in `mode` before the work if it is free now; else the hop runs
    /// nothing and answers [`HopOut::Busy`].
    pub fn try_locking(mut self, key: &[u8], mode: LockMode) -> Hop {
        self.lock.push((key.to_vec(), mode));
        self.try_lock = true;
        self
    }

    /// Only releases the transaction's locks on `shard`.
    pub fn release(shard: usize) -> Hop {
        Hop {
            release: true,
            ..Hop::doing(shard, None)
        }
    }

    /// Releases the transaction's locks on the shard after the work.
    pub fn releasing(mut self) -> Hop {
        self.release = true;
        self
    }
}

/// A value moved (or copied) between shards, with what makes it the same value.
#[derive(Debug)]
pub struct Moved {
    /// The value.
    pub value: Value,
    /// Its absolute expiry.
    pub expire_at: Option<Millis>,
    /// Its encoding flags (see `goblin_store::ENCODING_FLAGS`).
    pub flags: u8,
}

/// What a hop gives back: typed, never RESP to be parsed again (but for whole commands,
/// whose replies are what the client gets).
#[derive(Debug)]
pub enum HopOut {
    /// Nothing to report.
    Done,
    /// A count.
    Int(i64),
    /// A yes or no.
    Flag(bool),
    /// Values in the order asked for (absent: `None`).
    Bulks(Vec<Option<Vec<u8>>>),
    /// Keys or members.
    Keys(Vec<Vec<u8>>),
    /// A value taken or copied out of a key (`None`: the key was absent).
    Moved(Option<Moved>),
    /// Encoded replies of whole commands ([`Work::Commands`]).
    Reply(Vec<u8>),
    /// A family's own type, for the family's plan to downcast.
    Other(Box<dyn Any + Send>),
    /// A parked plan woke: this key changed.
    Woken(Vec<u8>),
    /// A parked plan's timeout passed first.
    TimedOut,
    /// A hop that tried a lock found it taken, and ran nothing.
    Busy,
    /// The plan would wait, but it runs where nothing waits (inside EXEC): it answers as
    /// a blocking command that must not block answers in Redis.
    WouldBlock,
}

/// Tells shards which keys ready a parked plan, to skip a wait that is not needed, and
/// how many plans a key can serve.
/// How many waiting plans a key can serve now (0: it is not ready): a list's length for
/// blocked pops, so that a push of several elements serves as many clients at once.
/// Its last argument is the wait's own context ([`Watch::arg`]: a stream ID, a group name).
pub type ReadyFn = fn(&mut Keyspace, &[u8], Millis, &[u8]) -> usize;

pub use crate::shard::park::Serve;

/// A wait for a key event: the plan sleeps until one of its watched keys changes (on
/// whichever shards own them) and is ready, or `timeout` passes, then goes on with
/// [`HopOut::Woken`] or [`HopOut::TimedOut`]. Parking releases every lock the transaction
/// holds. Waits on a key are served in the order they came, and a wait at most once,
/// whatever the number of shards it spans.
#[derive(Debug)]
pub struct Park {
    /// The keys to watch, each with its readiness test and how it serves the wait.
    pub keys: Vec<Watch>,
    /// How long at most; `None`: forever.
    pub timeout: Option<Duration>,
    /// A wait that is part of the command's own work (SHUTDOWN's or REPLICAOF's for the
    /// replica's link to hold), not a client's wait: the client is not blocked (CLIENT
    /// LIST, INFO), and its disconnect does not end the wait — the command goes on, as
    /// redis-server's SHUTDOWN does when its client goes.
    pub internal: bool,
}

impl Park {
    /// A wait on the clock alone: the plan goes on after `timeout`.
    pub fn clock(timeout: Duration) -> Park {
        Park {
            keys: Vec::new(),
            timeout: Some(timeout),
            internal: false,
        }
    }

    /// A wait on the clock that is part of the command's own work (see
    /// [`Park::internal`]).
    pub fn internal(timeout: Duration) -> Park {
        Park {
            internal: true,
            ..Park::clock(timeout)
        }
    }

    /// A wait on `keys` that are all alike: the same readiness test, served the same way.
    pub fn on(
        keys: Vec<Vec<u8>>,
        ready: Option<ReadyFn>,
        serve: Serve,
        timeout: Option<Duration>,
    ) -> Park {
        Park {
            keys: keys
                .into_iter()
                .map(|key| Watch {
                    key,
                    ready,
                    ready_first: None,
                    serve,
                    arg: Vec::new(),
                    with: None,
                })
                .collect(),
            timeout,
            internal: false,
        }
    }
}

/// One key a parked plan watches.
#[derive(Clone, Debug)]
pub struct Watch {
    /// The key.
    pub key: Vec<u8>,
    /// Whether the key is ready for the plan. Checked as the wait registers (a key already
    /// ready serves it at once: nothing can change between the check and the
    /// registration, both run on the key's shard in one step) and after every change of
    /// the key (a write, a delete, an expiry). `None`: any change serves it.
    pub ready: Option<ReadyFn>,
    /// Checked instead of `ready` as the wait registers, when it is another test: a
    /// blocking stream read registers unless an entry past its ID is there (what it
    /// checked before waiting), and is then served by any change that moves the stream's
    /// last ID past it, as in Redis.
    pub ready_first: Option<ReadyFn>,
    /// How the wait is served through this key: `Serve::Lock` grants the plan an
    /// exclusive lock on the key in the very step that made it ready, so that what made
    /// it ready is the plan's (a blocked pop gets the element pushed, a freed claim goes
    /// to the waiter first in line); the plan then runs with that lock held.
    /// `Serve::Notify` tells every ready waiter.
    pub serve: Serve,
    /// What the readiness test needs besides the key (empty for most waits).
    pub arg: Vec<u8>,
    /// Another key of the same shard that a lock wait is granted with: a blocking move's
    /// destination, so that the element is the plan's to push before anything that came
    /// after the write that served it (as in Redis, where a move's push serves the next
    /// blocked client at once: circular moves end before the pusher's next command).
    pub with: Option<Vec<u8>>,
}

/// What a plan wants next.
#[derive(Debug)]
pub enum Step {
    /// Run these hops (at most one per shard), then call the plan again with their results
    /// in the same order.
    Hops(Vec<Hop>),
    /// Wait for a key event or a timeout.
    Park(Park),
    /// Finished: the answer.
    Done(Outcome),
    /// Run this command on the plan's connection (a connection command queued in MULTI:
    /// CLIENT SETNAME, SCRIPT LOAD, CONFIG SET …, in its place inside EXEC), holding the
    /// plan's locks, then call the plan again with its reply (`HopOut::Reply`).
    Conn(Box<Batch>),
}

/// A finished plan's answer.
#[derive(Debug)]
pub enum Outcome {
    /// Reply bytes, in the connection's protocol.
    Reply(Vec<u8>),
    /// A connection command to run on the connection as EXEC's reply is written (a
    /// queued one that asks every worker: CLIENT KILL, LIST …).
    Conn(Box<Batch>),
    /// EXEC's answer: one outcome per queued command.
    Exec(Vec<Outcome>),
}

/// What a plan sees on the coordinating thread.
pub struct PlanCx<'a> {
    /// The shared state (configuration, command table, counters).
    pub shared: &'a Shared,
    /// The coordinator's slot map.
    pub slots: &'a SlotMap,
    /// The connection's protocol version.
    pub resp: Version,
    /// The transaction's timestamp.
    pub now: Millis,
    /// The database the transaction's next hops work on.
    pub db: std::cell::Cell<usize>,
    /// The command the next hops' key events are named after, when a plan changes it
    /// (EXEC, running a queued cross-shard command; keyspace notifications).
    pub command: std::cell::RefCell<Option<std::sync::Arc<Batch>>>,
    /// SLOWLOG entries the plan adds for its client (EXEC's cross-shard commands).
    pub slow: std::cell::RefCell<Vec<crate::runtime::slowlog::SlowCmd>>,
    /// The commands a script run as a plan called or had refused, by id: INFO
    /// commandstats counts them on the connection's worker when the job ends.
    pub calls: std::cell::RefCell<Vec<Tally>>,
    /// CLIENT UNBLOCK ended the plan's wait (it is told `TimedOut`, as by its timeout).
    pub unblocked: bool,
    /// Commands the plan sends replicas itself ([`PlanCx::propagate`]), in order.
    pub propagated: std::cell::RefCell<Vec<crate::repl::master::Part>>,
}

/// A command counted in INFO commandstats by id: called, or refused before it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tally {
    /// A call of the command.
    Call(usize),
    /// A call refused before it ran.
    Rejected(usize),
    /// An error counted in errorstats (a script's call refused, or one its reply
    /// holds).
    Error(crate::table::handler::ErrorCode),
    /// The failed calls a script's reply makes of its command (the id), by the errors
    /// it holds (`ScriptPlan`); without it, the job's reply decides.
    ReplyErrors(usize, u64),
    /// A run of the command that took so many ns (a plan of a command queued in EXEC),
    /// for INFO commandstats and its latency histogram.
    Latency(usize, u64),
}

impl PlanCx<'_> {
    /// The database the next hops work on.
    pub fn db(&self) -> usize {
        self.db.get()
    }

    /// Moves the next hops to database `db` (EXEC, along the SELECTs it runs).
    pub fn select(&self, db: usize) {
        self.db.set(db);
    }

    /// Sends replicas `argv` once, in the transaction's database, for parts its shards
    /// did not send (`ShardCtx::replicated_once`: FLUSHALL, SWAPDB, a move across
    /// shards), where it comes among what the transaction wrote.
    pub fn propagate(&self, argv: &[&[u8]]) {
        if self.shared.repl.shards_feed() {
            let part = crate::repl::master::Part::command(Some(self.db() as u16), argv);
            self.propagated.borrow_mut().push(part);
        }
    }

    /// Sends replicas `argv` once, in whatever database their stream has selected (DEBUG
    /// REPLICATE's, as redis-server feeds it in `slaveseldb`): no SELECT before it.
    pub fn propagate_as_is(&self, argv: &[&[u8]]) {
        if self.shared.repl.shards_feed() {
            let part = crate::repl::master::Part::command(None, argv);
            self.propagated.borrow_mut().push(part);
        }
    }

    /// Names the key events of the next hops after `command` (EXEC, running a queued
    /// cross-shard command, while keyspace notifications are on).
    pub fn name_steps(&self, command: std::sync::Arc<Batch>) {
        *self.command.borrow_mut() = Some(command);
    }

    /// A reply encoded in the connection's protocol.
    pub fn reply(&self, f: impl FnOnce(&mut Encoder<'_>)) -> Outcome {
        Outcome::Reply(encoded(self.resp, f))
    }

    /// [`Step::Done`] with a reply.
    pub fn done(&self, f: impl FnOnce(&mut Encoder<'_>)) -> Step {
        Step::Done(self.reply(f))
    }
}

/// Bytes encoded in `resp`.
pub fn encoded(resp: Version, f: impl FnOnce(&mut Encoder<'_>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut Encoder::new(&mut out, resp));
    out
}

/// A cross-shard command, hop by hop: a state machine fed with the results of its hops.
pub trait Plan: Send + fmt::Debug {
    /// The next step, given the results of the last one (empty at the start; one
    /// [`HopOut`] per hop, in the order of the hops; one `Woken`/`TimedOut` after a park).
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step;

    /// Whether its transaction must lock every shard whole, whatever its command's
    /// locking says (a script that may touch keys it did not declare).
    fn whole_shards(&self) -> bool {
        false
    }
}

/// What a plan is made from.
pub struct PlanStart<'a> {
    /// The shared state.
    pub shared: &'a Shared,
    /// The command.
    pub spec: &'a CommandSpec,
    /// Its arguments.
    pub args: &'a Args<'a>,
    /// The coordinator's slot map.
    pub slots: &'a SlotMap,
    /// The command's timestamp.
    pub now: Millis,
    /// Every key is locked already (inside EXEC): hops take and release no lock.
    pub locked: bool,
    /// The client's database.
    pub db: usize,
    /// How many databases there are.
    pub databases: usize,
    /// The client connects from this machine (its peer is a loopback address): what
    /// `enable-debug-command local` allows.
    pub local_client: bool,
    /// Who runs it, when that user's permissions are restricted (a script's plan
    /// checks the commands the script calls against them).
    pub caller: Option<std::sync::Arc<crate::acl::Caller>>,
    /// The client's connection, when it runs as a command of its own (not in EXEC or
    /// a script): a replica's PSYNC names it.
    pub conn: Option<crate::runtime::msg::ConnRef>,
    /// The client is this replica's link to its master (whose DEBUG RELOAD loads the
    /// master's snapshot, whatever `enable-debug-command` says).
    pub master: bool,
    /// The client, when the plan is made on its connection's thread (not by a script):
    /// what a log line says of who asked.
    pub client: Option<&'a crate::runtime::client::Client>,
    /// A script called the command (SORT then sorts a set it would not: its answer to
    /// a script must not depend on how the set is laid out).
    pub by_script: bool,
}

/// Makes a command's plan, or the error reply its arguments deserve.
pub type PlanFn = fn(&PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>>;

/// How a plan's transaction takes its locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locking {
    /// The coordinator locks every key the command names, shard by shard in ascending
    /// order, before the first hop: shared for keys the command only reads, exclusive
    /// otherwise.
    Keys,
    /// Every shard, whole (keyspace-wide commands that must see one state: DBSIZE, KEYS).
    WholeShards,
    /// The plan locks in its own hops, or needs no lock.
    InHops,
}

/// How a command runs when its keys span shards (or, for keyspace-wide commands, always).
#[derive(Clone, Copy, Debug)]
pub struct CrossShard {
    /// Makes the plan.
    pub plan: PlanFn,
    /// How it locks.
    pub locking: Locking,
}
