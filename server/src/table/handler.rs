//! What a command handler sees: its arguments ([`Args`], read in order with an
//! [`ArgCursor`]; both live in [`crate::table::args`]), and the context of the thread it
//! runs on.
//!
//! Handlers come in kinds, by where they run (see [`Exec`]):
//! - connection handlers (`Conn`) run on the connection's thread with its client state
//!   (PING, HELLO, CLIENT …);
//! - shard handlers (`Shard`) run on the thread that owns the command's keys, against that
//!   shard's keyspace (GET, SET …); when its keys span shards, the command runs as its
//!   family's plan ([`CrossShard`]);
//! - plan commands (`Plan`) always run as a plan: keyspace-wide commands (DBSIZE,
//!   FLUSHALL …) and SCAN;
//! - transaction commands (`Multi`: MULTI, EXEC, DISCARD) act on the connection's
//!   MULTI state and may start a transaction.
//!
//! Every handler writes its reply (or error) with the [`Encoder`] it is given; nothing it
//! does panics on client input.

use goblin_protocol::{Encoder, Version};
use goblin_store::{Keyspace, Millis};

use crate::runtime::ask::WorkerView;
use crate::runtime::client::Client;
use crate::runtime::msg::{Batch, LockMode};
use crate::runtime::server::Shared;
use crate::shard::dbs::Others;
use crate::shard::slots::SlotMap;
use crate::shard::watch::{WatchState, WatchTable};
use crate::txn::plan::{CrossShard, Plan};

pub use crate::runtime::pubsub::Hub;
pub use crate::table::args::{ArgCursor, Args};

/// One command's statistics on one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmdStat {
    /// Times dispatched.
    pub calls: u64,
    /// Nanoseconds spent running it here (every run timed with `latency-tracking yes`;
    /// otherwise, on a shard, one run in 16 counted 16 times).
    pub nanos: u64,
    /// Times it replied an error here.
    pub failed: u64,
    /// Times it was refused before running (arity, OOM, NOAUTH …).
    pub rejected: u64,
}

/// Error replies by their code (the error's first word: `ERR`, `WRONGTYPE` …), for INFO
/// errorstats, as redis-server counts them: at most [`ErrorCounts::MAX_CODES`] codes.
#[derive(Clone, Debug, Default)]
pub struct ErrorCounts {
    /// Count per code.
    pub by_code: std::collections::BTreeMap<Vec<u8>, u64>,
    /// Every error reply.
    pub total: u64,
}

/// An error's code as redis-server's `afterErrorReply` reads it: the first word of
/// `-CODE message` when a space ends it within the first 32 bytes, else `ERR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCode {
    bytes: [u8; 31],
    len: u8,
}

impl ErrorCode {
    /// The code of the error reply (`-CODE message\r\n`) that starts `reply`.
    pub fn of(reply: &[u8]) -> ErrorCode {
        ErrorCode::of_message(reply.strip_prefix(b"-").unwrap_or(reply))
    }

    /// The code of the error whose message (what follows the reply's dash) starts
    /// `text`.
    pub fn of_message(text: &[u8]) -> ErrorCode {
        let line = &text[..memchr::memchr(b'\r', text).unwrap_or(text.len())];
        let window = &line[..line.len().min(31)];
        let code = match memchr::memchr(b' ', window) {
            Some(end) => &window[..end],
            None => b"ERR".as_slice(),
        };
        let mut bytes = [0u8; 31];
        bytes[..code.len()].copy_from_slice(code);
        ErrorCode {
            bytes,
            len: code.len() as u8,
        }
    }

    /// The code.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl ErrorCounts {
    /// Distinct codes kept (Redis's `ERROR_STATS_NUMBER`); errors of further codes are
    /// counted in `total` only.
    pub const MAX_CODES: usize = 128;

    /// Counts the error reply that starts `reply` (a RESP error: `-CODE message\r\n`),
    /// if it is one.
    pub fn count(&mut self, reply: &[u8]) {
        if reply.first() == Some(&b'-') {
            self.add(ErrorCode::of(reply));
        }
    }

    /// Counts an error of code `code`.
    pub fn add(&mut self, code: ErrorCode) {
        self.total += 1;
        let code = code.as_bytes();
        if let Some(n) = self.by_code.get_mut(code) {
            *n += 1;
        } else if self.by_code.len() < Self::MAX_CODES {
            self.by_code.insert(code.to_vec(), 1);
        }
    }

    /// Adds another worker's counts.
    pub fn merge(&mut self, other: &ErrorCounts) {
        self.total += other.total;
        for (code, n) in &other.by_code {
            *self.by_code.entry(code.clone()).or_default() += n;
        }
    }
}

/// The context of a shard handler (and of a plan's hop): the shard's keyspace of the
/// client's database, the command's timestamp, the reply sink.
pub struct ShardCtx<'a> {
    /// The owning shard's keyspace of the database the client selected. Every change
    /// made through it records its key event.
    pub db: &'a mut Keyspace,
    /// The shard's other databases (MOVE, SWAPDB, FLUSHALL …).
    others: Others<'a>,
    /// The one timestamp this command uses for every key it touches.
    pub now: Millis,
    /// Where the reply goes.
    pub out: Encoder<'a>,
    /// The index of the shard (and worker) running the command.
    pub shard: usize,
    /// The shard's slot map: which slots it owns.
    pub slots: &'a SlotMap,
    /// Longest string a command may make (`proto-max-bulk-len`).
    pub max_string: usize,
    /// Longest sparse HyperLogLog before it turns dense (`hll-sparse-max-bytes`).
    pub hll_sparse_max_bytes: usize,
    /// This worker's per-command statistics (for INFO's part).
    pub stats: &'a [CmdStat],
    /// This worker's error replies by code (for INFO's part).
    pub errors: &'a ErrorCounts,
    /// This worker's latency histograms (for INFO's and LATENCY HISTOGRAM's parts).
    pub latencies: &'a crate::runtime::histogram::Latencies,
    effects: Option<&'a mut Vec<Vec<Vec<u8>>>>,
    watches: &'a mut WatchTable,
    release: bool,
    may_wait: bool,
    waits: bool,
    abandoned_save: bool,
    /// Keys changed that the keyspace's own count leaves out (FLUSHALL's, FLUSHDB's).
    changed: u64,
    repl_marks: u8,
    reset_stats: bool,
    flushed: bool,
    unlogged: bool,
    /// The command is not its own effect ([`ShardCtx::effects_only`]).
    effects_only: bool,
    sync_log: bool,
    in_script: bool,
}

/// [`ShardCtx::repl_marks`]: the shard starts feeding replicas (a sync's instant).
pub(crate) const FEED_REPLICAS: u8 = 1;
/// [`ShardCtx::repl_marks`]: the unit goes to replicas from its coordinator.
pub(crate) const REPLICATED_ONCE: u8 = 2;

impl<'a> ShardCtx<'a> {
    /// A context; `effects` is where effects go when the shard's observers want them;
    /// `watches` are the keys clients watch on the shard.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        (db, others): (&'a mut Keyspace, Others<'a>),
        now: Millis,
        out: Encoder<'a>,
        shard: usize,
        slots: &'a SlotMap,
        (max_string, hll_sparse_max_bytes): (usize, usize),
        (stats, errors, latencies): (
            &'a [CmdStat],
            &'a ErrorCounts,
            &'a crate::runtime::histogram::Latencies,
        ),
        effects: Option<&'a mut Vec<Vec<Vec<u8>>>>,
        watches: &'a mut WatchTable,
    ) -> Self {
        ShardCtx {
            db,
            others,
            now,
            out,
            shard,
            slots,
            max_string,
            hll_sparse_max_bytes,
            stats,
            errors,
            latencies,
            effects,
            watches,
            release: false,
            flushed: false,
            may_wait: false,
            waits: false,
            abandoned_save: false,
            changed: 0,
            repl_marks: 0,
            reset_stats: false,
            unlogged: false,
            effects_only: false,
            sync_log: false,
            in_script: false,
        }
    }

    /// Marks the command as called by a script (running on this shard, or under its
    /// plan).
    pub(crate) fn set_in_script(&mut self, on: bool) {
        self.in_script = on;
    }

    /// Whether a script called the command (SORT then orders a set it would leave
    /// unsorted, as redis-server does for a script's determinism).
    pub fn called_by_script(&self) -> bool {
        self.in_script
    }

    /// The number of the database the command runs against.
    pub fn db_index(&self) -> usize {
        self.others.selected()
    }

    /// How many databases there are (`databases`).
    pub fn databases(&self) -> usize {
        self.others.count()
    }

    /// Database `db` of this shard, beside the selected one ([`ShardCtx::db`]): `None`
    /// when it is the selected one or does not exist.
    pub fn other_db(&mut self, db: usize) -> Option<&mut Keyspace> {
        self.others.get(db)
    }

    /// The selected database and database `db`, both to change (MOVE); `None` when `db`
    /// is the selected one or does not exist.
    pub fn db_and(&mut self, db: usize) -> Option<(&mut Keyspace, &mut Keyspace)> {
        let other = self.others.get(db)?;
        Some((&mut *self.db, other))
    }

    /// Calls `f` with each database of this shard that has a keyspace (the selected one
    /// always does), in order, with its number.
    pub fn for_each_db(&mut self, f: impl FnMut(usize, &mut Keyspace)) {
        self.others.each_around(&mut *self.db, f);
    }

    /// Exchanges databases `a` and `b` of this shard; each number stays with its place
    /// (SWAPDB), and every key of both counts as changed. Out-of-range numbers do
    /// nothing: the command checked them.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        let selected = self.others.selected();
        if a == b || a >= self.databases() || b >= self.databases() {
            return;
        }
        if a != selected && b != selected {
            self.others.swap(a, b);
        } else {
            let other = if a == selected { b } else { a };
            if let Some(k) = self.others.get(other) {
                std::mem::swap(&mut *self.db, k);
                k.set_db(other as u16);
                self.db.set_db(selected as u16);
            }
        }
        for db in [a, b] {
            if db == selected {
                self.db.touch_all();
            } else if let Some(k) = self.others.get(db) {
                k.touch_all();
            }
        }
    }

    /// WATCH: `state` watches `key` of the selected database from now on, as it is
    /// stored now — a key stored but expired is watched as stale, and is not removed.
    pub fn watch(&mut self, state: &std::sync::Arc<WatchState>, key: &[u8]) {
        let stored = self.db.peek_expiry(key);
        let db = self.db_index();
        self.watches.watch(state, db, key, stored, self.now);
    }

    /// Whether the unit reached a database other than the selected one.
    pub(crate) fn touched_others(&self) -> bool {
        self.others.touched()
    }

    /// Whether this shard owns `slot`.
    pub fn owns(&self, slot: usize) -> bool {
        self.slots.owns(self.shard, slot)
    }

    /// The slots this shard owns, ascending.
    pub fn owned_slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots.slots_of(self.shard)
    }

    /// Whether anyone records this command's effect: only then is it worth building a
    /// rewritten form ([`ShardCtx::log`]).
    pub fn logging(&self) -> bool {
        self.effects.is_some()
    }

    /// Records `argv` as (part of) the effect of this command: what replaying it must
    /// do. A command whose replay would differ from what it did (a relative expiry, a
    /// float increment, a lease, a random pick) logs its deterministic form, as Redis
    /// rewrites `SET k v EX 10` into `SET k v PXAT <ms>`; a command that logs nothing is
    /// its own effect. Does nothing unless [`ShardCtx::logging`].
    pub fn log(&mut self, argv: &[&[u8]]) {
        if let Some(effects) = self.effects.as_deref_mut() {
            effects.push(argv.iter().map(|a| a.to_vec()).collect());
        }
    }

    /// The command is never its own effect, as Redis's `preventCommandPropagation`:
    /// what it logged is, or nothing (XREADGROUP, XCLAIM, XAUTOCLAIM, whose creation of
    /// a consumer alone is not propagated). Called once it logged everything.
    pub fn effects_only(&mut self) {
        self.effects_only = true;
    }

    /// Whether [`ShardCtx::effects_only`] was called.
    pub(crate) fn is_effects_only(&self) -> bool {
        self.effects_only
    }

    /// This unit of work changed something besides keys (the function libraries): its
    /// effect ([`ShardCtx::log`]) reaches the observers though no key changed.
    pub fn keyless_write(&mut self) {
        self.db.note_keyless_write();
    }

    /// A plan's hop: release the transaction's locks on this shard once the hop is done
    /// (a hop that decides on the spot whether it still needs them).
    pub fn release_locks_after(&mut self) {
        self.release = true;
    }

    /// `n` keys were removed or written besides what the keyspace counts (a flush's):
    /// they count for the `save` rules (`rdb_changes_since_last_save`).
    pub fn count_changes(&mut self, n: u64) {
        self.changed += n;
    }

    /// What [`ShardCtx::count_changes`] counted.
    pub(crate) fn counted_changes(&self) -> u64 {
        self.changed
    }

    /// The shard's images of an abandoned background save were dropped (FLUSHALL): its
    /// part of the save is over.
    pub fn abandon_save_part(&mut self) {
        self.abandoned_save = true;
    }

    /// Whether [`ShardCtx::abandon_save_part`] was called.
    pub(crate) fn abandons_save_part(&self) -> bool {
        self.abandoned_save
    }

    /// Every key of the shard was flushed (FLUSHALL, FLUSHDB): tracking clients are
    /// told that every key changed.
    pub fn flushed_every_key(&mut self) {
        self.flushed = true;
    }

    /// Whether [`ShardCtx::flushed_every_key`] was called.
    pub(crate) fn wants_flush_notice(&self) -> bool {
        self.flushed
    }

    /// What this unit of work changes is not written to the append-only log (DEBUG
    /// RELOAD and LOADAOF put back what the files hold, as redis-server's do not
    /// propagate); watches, tracking and notifications see it all the same.
    pub fn unlogged(&mut self) {
        self.unlogged = true;
    }

    /// A keyspace-wide command's part (FLUSHALL, FLUSHDB, SWAPDB): its coordinator sends
    /// the command to replicas once, for every shard, when all parts are done; this part
    /// is not sent, and what the shard wrote before is in the stream first.
    pub fn replicated_once(&mut self) {
        self.repl_marks |= REPLICATED_ONCE;
    }

    /// Whether [`ShardCtx::unlogged`] was called.
    pub(crate) fn is_unlogged(&self) -> bool {
        self.unlogged
    }

    /// What the shard fed the log, and what the log holds, is written to its file once
    /// this unit is done (DEBUG LOADAOF reads the files next, as redis-server flushes
    /// its log first).
    pub fn sync_log(&mut self) {
        self.sync_log = true;
    }

    /// Whether [`ShardCtx::sync_log`] was called.
    pub(crate) fn wants_log_sync(&self) -> bool {
        self.sync_log
    }

    /// Whether [`ShardCtx::release_locks_after`] was called.
    pub(crate) fn wants_release(&self) -> bool {
        self.release
    }

    /// A replica's sync's instant: what the shard wrote before is in the master's
    /// stream once this unit of work ends (and in the replica's snapshot); from then on
    /// the shard feeds its writes to the stream.
    pub fn feed_replicas(&mut self) {
        self.repl_marks |= FEED_REPLICAS;
    }

    /// What [`ShardCtx::feed_replicas`] and [`ShardCtx::replicated_once`] asked for
    /// ([`FEED_REPLICAS`], [`REPLICATED_ONCE`]; 0 for nearly every unit).
    pub(crate) fn repl_marks(&self) -> u8 {
        self.repl_marks
    }

    /// CONFIG RESETSTAT: this worker's command statistics start again from zero once the
    /// unit of work is done.
    pub fn reset_stats(&mut self) {
        self.reset_stats = true;
    }

    /// Whether [`ShardCtx::reset_stats`] was called.
    pub(crate) fn wants_stats_reset(&self) -> bool {
        self.reset_stats
    }

    /// Lets the command ask to wait (the shard sets it for a command run alone).
    pub(crate) fn set_may_wait(&mut self, may: bool) {
        self.may_wait = may;
    }

    /// Whether the command asked to wait.
    pub(crate) fn waits(&self) -> bool {
        self.waits
    }

    /// Whether the command may ask to wait ([`ShardCtx::wait`]): it runs alone, on its
    /// connection's own shard, where its plan can take over.
    pub fn may_wait(&self) -> bool {
        self.may_wait
    }

    /// The command would wait (its answer now would be nil, and it was asked to block):
    /// it answers nothing and changes nothing; its plan runs instead and parks. Only when
    /// [`ShardCtx::may_wait`].
    pub fn wait(&mut self) {
        self.waits = self.may_wait;
    }
}

/// The context of a connection handler.
pub struct ConnCtx<'a> {
    /// The connection's client state.
    pub client: &'a mut Client,
    /// State shared by every thread.
    pub shared: &'a Shared,
    /// The connection's output buffer.
    pub out: &'a mut Vec<u8>,
    /// The command's timestamp.
    pub now: Millis,
    /// Pub/Sub: the worker's subscriptions and outgoing publications.
    pub hub: Hub<'a>,
}

impl ConnCtx<'_> {
    /// An encoder in the connection's current protocol version.
    pub fn reply(&mut self) -> Encoder<'_> {
        Encoder::new(self.out, self.client.resp)
    }

    /// An encoder in a given version (HELLO answers in the version it switches to).
    pub fn reply_in(&mut self, version: Version) -> Encoder<'_> {
        Encoder::new(self.out, version)
    }
}

/// A MULTI block being queued.
#[derive(Debug, Default)]
pub struct MultiState {
    /// The queued commands, one per batch.
    pub queued: Vec<Box<Batch>>,
    /// A command was rejected while queueing: EXEC answers EXECABORT.
    pub dirty: bool,
    /// A queued command may grow memory (`denyoom`): over `maxmemory`, EXEC is refused
    /// with OOM (EXECABORT), as in Redis.
    pub deny_oom: bool,
    /// What the queued commands hold: their arguments' bytes and ranges (client
    /// eviction weighs it).
    pub bytes: usize,
}

/// The context of a transaction command (MULTI, EXEC, DISCARD).
pub struct MultiCtx<'a> {
    /// The connection.
    pub conn: ConnCtx<'a>,
    /// Its MULTI state: `Some` between MULTI and EXEC or DISCARD.
    pub multi: &'a mut Option<MultiState>,
    /// The connection's worker's slot map.
    pub slots: &'a SlotMap,
}

/// Why a transaction command is called.
#[derive(Clone, Copy, Debug)]
pub enum MultiCall<'a, 'b> {
    /// To run, with these arguments.
    Run(&'b Args<'a>),
    /// It was rejected before running (a wrong argument count), with this error: some
    /// abort the transaction (EXEC), others only answer it.
    Rejected(&'b [u8]),
}

/// A transaction a transaction command starts (EXEC).
#[derive(Debug)]
pub struct Started {
    /// What it runs.
    pub plan: Box<dyn Plan>,
    /// Every key it locks, and how.
    pub locks: Vec<(Vec<u8>, LockMode)>,
    /// Whether it locks every shard whole.
    pub whole_shards: bool,
    /// The table ids of the commands it runs, for INFO commandstats' calls.
    pub calls: Vec<crate::txn::plan::Tally>,
}

/// A command that runs with its whole shard ([`crate::table::CommandSpec::on_shard`]):
/// what it is given, and it answers into `out`; true when it would wait (only if
/// `may_wait`: it then answered nothing, and its plan runs).
pub struct OnShard<'a, 'b> {
    /// The command.
    pub spec: &'a crate::table::CommandSpec,
    /// Its arguments.
    pub args: &'a Args<'b>,
    /// The client's database.
    pub db: usize,
    /// The command's timestamp.
    pub now: Millis,
    /// The client's protocol.
    pub resp: Version,
    /// The transaction it runs in.
    pub tx: Option<crate::runtime::msg::TxRef>,
    /// It may ask to wait (see [`ShardCtx::may_wait`]).
    pub may_wait: bool,
}

/// Runs a command with its whole shard.
pub type OnShardFn = fn(&mut crate::shard::Shard, &Shared, &OnShard<'_, '_>, &mut Vec<u8>) -> bool;

/// A handler that runs on the connection's thread.
pub type ConnFn = fn(&mut ConnCtx<'_>, &Args<'_>);
/// A handler that runs on the shard owning the command's keys.
pub type ShardFn = fn(&mut ShardCtx<'_>, &Args<'_>);
/// A transaction command.
pub type MultiFn = fn(&mut MultiCtx<'_>, MultiCall<'_, '_>) -> Option<Started>;
/// A question a connection command asks every worker, with the command's arguments.
pub type AskFn = fn(&mut WorkerView<'_>, &Args<'_>) -> Vec<u8>;
/// Replies, on the asking connection, from every worker's answer.
pub type GatherFn = fn(&mut ConnCtx<'_>, &Args<'_>, Vec<Vec<u8>>);

/// How and where a command runs.
#[derive(Clone, Copy, Debug)]
pub enum Exec {
    /// Keyless; runs where the connection lives.
    Conn(ConnFn),
    /// Runs on the shard that owns its keys (its family's plan, when they span shards).
    Shard(ShardFn),
    /// Always a plan: keyspace-wide commands, and SCAN.
    Plan(CrossShard),
    /// MULTI, EXEC, DISCARD: acts on the connection's MULTI state.
    Multi(MultiFn),
    /// Keyless, about connections on every worker: `ask` runs on each worker, `gather`
    /// replies on the connection once all have answered (CLIENT UNBLOCK).
    AskWorkers {
        /// The question.
        ask: AskFn,
        /// The reply from the answers.
        gather: GatherFn,
    },
    /// A container of subcommands; never runs itself.
    Container,
}
