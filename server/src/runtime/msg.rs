//! What workers send each other.
//!
//! Messages to one destination from one loop iteration travel together, as one
//! `Vec<Msg>` with one wake-up. A command that runs on another shard travels in a
//! [`Batch`]: its arguments copied into one buffer, its replies written by the owner into
//! another, and the same box comes back. Batches are recycled with their buffers, so a
//! batch allocates nothing in steady traffic.

use std::ops::Range;

use goblin_protocol::Version;
use goblin_store::{Millis, Value};

use crate::table::handler::Args;

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
}

/// Commands to run on one shard, and their replies.
#[derive(Debug, Default)]
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
}

impl Batch {
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
        });
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
    }

    /// True when every command has run.
    pub fn finished(&self) -> bool {
        self.next >= self.cmds.len()
    }
}

/// A value moved out of one shard and into another (RENAME across shards).
#[derive(Debug)]
pub struct Moved {
    /// The value.
    pub value: Value,
    /// Its absolute expiry.
    pub expire_at: Option<Millis>,
    /// Its encoding flags (see `goblin_store::ENCODING_FLAGS`).
    pub flags: u8,
}

/// Work other than commands that a transaction step can carry.
#[derive(Debug)]
pub enum Special {
    /// Remove a key and send its value back.
    Take(Vec<u8>),
    /// Send a copy of a key's value back (COPY).
    Clone(Vec<u8>),
    /// Store a moved value at a key (replacing it).
    Put(Vec<u8>, Moved),
    /// GOBLIN.CLAIM's attempt: `SET key token NX PXAT deadline`. Afterwards the step
    /// releases the transaction's locks here if the claim was won and `release_if_won`,
    /// or if it was held and `release_if_held`.
    TryClaim {
        /// The claim key.
        key: Vec<u8>,
        /// The token stored when the claim is won.
        token: Vec<u8>,
        /// The lease's end.
        deadline: Millis,
        /// Release after winning.
        release_if_won: bool,
        /// Release after finding the claim held.
        release_if_held: bool,
    },
}

/// One step of a transaction on one shard: acquire locks (waiting if needed), run
/// commands and special work under them, release them.
#[derive(Debug)]
pub struct TxStep {
    /// The transaction.
    pub tx: TxRef,
    /// Keys to lock before anything else (empty when already held).
    pub lock: Vec<(Vec<u8>, LockMode)>,
    /// Lock the whole shard (keyspace-wide commands inside a transaction).
    pub lock_all: bool,
    /// Commands to run once the locks are held.
    pub batch: Option<Box<Batch>>,
    /// Special work to do once the locks are held.
    pub special: Option<Special>,
    /// Release every lock the transaction holds on this shard afterwards.
    pub release: bool,
    /// The transaction's one timestamp.
    pub now: Millis,
}

/// What a transaction step gives back.
#[derive(Debug)]
pub struct TxStepDone {
    /// The transaction.
    pub tx: TxRef,
    /// The shard that ran the step.
    pub shard: usize,
    /// The batch, with its replies.
    pub batch: Option<Box<Batch>>,
    /// A value taken by `Special::Take` (None: the key was absent).
    pub taken: Option<Moved>,
    /// The outcome of `Special::TryClaim`: whether the claim was won.
    pub claimed: Option<bool>,
    /// Whether the transaction still holds locks on this shard after the step.
    pub holds_locks: bool,
}

/// A message between workers.
#[derive(Debug)]
pub enum Msg {
    /// A new connection for this worker to serve.
    Adopt(mio::net::TcpStream, std::net::SocketAddr),
    /// Commands for this shard, from a connection on another worker.
    Run(ConnRef, Box<Batch>),
    /// A batch coming back with its replies.
    Done(ConnRef, Box<Batch>),
    /// A transaction step for this shard.
    Step(TxStep),
    /// A transaction step's result.
    StepDone(TxStepDone),
}
