//! What a command handler sees: its arguments, and the context of the thread it runs on.
//!
//! Handlers come in three kinds, by where they run (see [`Exec`]):
//! - connection handlers (`Conn`) run on the connection's thread with its client state
//!   (PING, HELLO, CLIENT …);
//! - shard handlers (`Shard`) run on the thread that owns the command's keys, against that
//!   shard's keyspace (GET, SET …);
//! - keyspace-wide commands (`AllShards`) run a part on every shard and merge the parts'
//!   replies on the connection's thread (DBSIZE, FLUSHALL …).
//!
//! Every handler writes its reply (or error) with the [`Encoder`] it is given; nothing it
//! does panics on client input.

use std::ops::Range;

use goblin_protocol::{Encoder, Version};
use goblin_store::{Keyspace, Millis};

use crate::runtime::client::Client;
use crate::runtime::route::SlotTable;
use crate::runtime::server::Shared;

/// A command's arguments (the name is argument 0): byte ranges into a buffer the command
/// does not own — the connection's read buffer, or the payload of a cross-shard message.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a> {
    buf: &'a [u8],
    spans: &'a [Range<usize>],
}

impl<'a> Args<'a> {
    /// Arguments `spans` within `buf`.
    pub fn new(buf: &'a [u8], spans: &'a [Range<usize>]) -> Self {
        Args { buf, spans }
    }

    /// Number of arguments, the name included.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when there are no arguments (never, for a dispatched command).
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i`, or the empty string past the end (arity is checked before handlers
    /// run, so a handler reading within its arity always gets the real argument).
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.spans
            .get(i)
            .and_then(|r| self.buf.get(r.clone()))
            .unwrap_or(b"")
    }

    /// Arguments from `from` on.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        let buf = self.buf;
        self.spans
            .get(from..)
            .unwrap_or(&[])
            .iter()
            .map(move |r| buf.get(r.clone()).unwrap_or(b""))
    }

    /// The arguments from `from` on, as the arguments of a command of their own (COMMAND
    /// GETKEYS looks at the command it is given this way).
    pub fn skip(&self, from: usize) -> Args<'a> {
        Args {
            buf: self.buf,
            spans: self.spans.get(from..).unwrap_or(&[]),
        }
    }

    /// Whether argument `i` equals `word`, ignoring ASCII case and C-string tails: Redis
    /// compares option keywords with `strcasecmp`, which stops at a NUL byte.
    pub fn is(&self, i: usize, word: &str) -> bool {
        crate::errors::c_str(self.get(i)).eq_ignore_ascii_case(word.as_bytes())
    }
}

/// The context of a shard handler: the shard's keyspace, the command's timestamp, the
/// reply sink.
pub struct ShardCtx<'a> {
    /// The owning shard's keyspace.
    pub db: &'a mut Keyspace,
    /// The one timestamp this command uses for every key it touches.
    pub now: Millis,
    /// Where the reply goes.
    pub out: Encoder<'a>,
    /// The index of the shard (and worker) running the command.
    pub shard: usize,
    /// The hash slots this shard owns.
    pub owned: Range<usize>,
    /// Which shard owns which slot.
    pub slots: &'a SlotTable,
    /// Longest string a command may make (`proto-max-bulk-len`).
    pub max_string: usize,
    /// This worker's per-command statistics (for INFO's part).
    pub stats: &'a [crate::shard::CmdStat],
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

/// A handler that runs on the connection's thread.
pub type ConnFn = fn(&mut ConnCtx<'_>, &Args<'_>);
/// A handler that runs on the shard owning the command's keys.
pub type ShardFn = fn(&mut ShardCtx<'_>, &Args<'_>);
/// Merges the replies of a keyspace-wide command's parts, one per shard.
pub type MergeFn = fn(&mut ConnCtx<'_>, &Args<'_>, &[&[u8]]);

/// How and where a command runs.
#[derive(Clone, Copy, Debug)]
pub enum Exec {
    /// Keyless; runs where the connection lives.
    Conn(ConnFn),
    /// Runs on the shard that owns its keys.
    Shard(ShardFn),
    /// Keyless, runs on the shard that owns the slot its cursor (argument 1) names
    /// (SCAN).
    Cursor(ShardFn),
    /// Runs `part` on every shard and `merge`s their replies.
    AllShards {
        /// The per-shard part.
        part: ShardFn,
        /// Combines the parts' replies into the command's reply.
        merge: MergeFn,
    },
    /// A container of subcommands; never runs itself.
    Container,
    /// MULTI, EXEC, DISCARD: handled by the worker, which owns transactions.
    Transaction,
}
