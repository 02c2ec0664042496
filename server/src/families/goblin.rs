//! Goblin's native commands: GOBLIN.CLAIM and GOBLIN.CAD, with DELEX (Redis 8.4) and
//! DELIFEQ (Valkey 9) as spellings of compare-and-delete.
//!
//! Each is the atomic form of a Lua idiom (see `shared/spec/goblin-commands.md`), and
//! replies exactly what redis-server replies to that script.
//!
//! GOBLIN.CLAIM with both keys on one shard runs here, as one shard command costing what
//! `SET … NX EX` costs. With its keys on two shards it is a transaction, [`ClaimPlan`],
//! which takes only the locks it needs; both paths share [`try_claim`] and GET's reply.

use goblin_store::Millis;

use crate::errors::{self, ErrorReply};
use crate::runtime::msg::LockMode;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::keys::InvalidKeys;
use crate::table::{CommandTable, KeyFlags, Meta, Node};
use crate::txn::plan::{Hop, HopOut, Locking, Plan, PlanCx, PlanStart, Step};

use super::strings::{Str, StrRead, log_set_pxat, lookup, reply_get};
use super::{ExpireUnit, parse_expire};

/// The reply to a won claim.
pub const CLAIMED: &[u8] = b"CLAIMED";

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table
        .add(&CLAIM_META, Exec::Shard(claim))
        .cross_shard(claim_plan, Locking::InHops);
    table.add(&CAD_META, Exec::Shard(cad));
    table.add(&DELIFEQ_META, Exec::Shard(cad));
    table
        .add(&DELEX_META, Exec::Shard(delex))
        .custom_keys(delex_keys);
}

/// Parses GOBLIN.CLAIM's `seconds` (argument 4) into the lease's deadline, with SET EX's
/// rules and errors; done before anything else, so an invalid lease errors even when the
/// claim is held.
///
/// # Errors
/// The error reply.
pub fn claim_deadline(args: &Args<'_>, now: Millis) -> Result<Millis, ErrorReply> {
    parse_expire(args.get(4), ExpireUnit::Seconds, now, "goblin.claim")
}

/// The claim attempt: `SET claim_key token NX PXAT deadline`. True when it won. A key of
/// any type holds the claim (NX tests existence only). A won claim's effect is that SET:
/// replayed, the lease keeps its deadline.
pub fn try_claim(ctx: &mut ShardCtx<'_>, key: &[u8], token: &[u8], deadline: Millis) -> bool {
    if ctx.db.contains(key, ctx.now) {
        return false;
    }
    ctx.db.set_str(key, token, Some(deadline), ctx.now);
    log_set_pxat(ctx, key, token, deadline);
    true
}

/// `GOBLIN.CLAIM claim_key result_key token seconds`, both keys on this shard.
fn claim(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let deadline = match claim_deadline(args, ctx.now) {
        Ok(d) => d,
        Err(e) => return e.send(&mut ctx.out),
    };
    if try_claim(ctx, args.get(1), args.get(3), deadline) {
        ctx.out.bulk(CLAIMED);
    } else {
        reply_get(ctx, args.get(2));
    }
}

/// GOBLIN.CLAIM with its claim key and result key on different shards.
///
/// The protocol takes only the locks it needs, in ascending shard order:
/// 1. At the claim shard C, lock the claim key (exclusive) and try the claim. Won: the
///    reply is CLAIMED, the lock is dropped in the same step — one visit to one shard,
///    the result shard is never touched. The linearization point is the claim's write.
/// 2. Held, and C comes before the result shard R: keep C's lock (so the claim stays
///    held), then at R lock the result key (shared), read it, unlock; reply what was read,
///    unlock C. While C is locked no one can release, expire or re-take the claim, so at
///    the instant of the read the claim is held: that instant is the linearization point.
/// 3. Held, and R comes before C: C's lock is dropped at once (holding it while asking R
///    would break the ascending order). Then lock the result key at R (shared) and read
///    it, keeping the lock, and only then try the claim again at C: won → CLAIMED; held →
///    the value read, which cannot have changed since R is still locked. The second
///    attempt is the linearization point.
///
/// Inside EXEC every key is already locked, so no hop takes or drops a lock.
#[derive(Debug)]
pub struct ClaimPlan {
    claim_key: Vec<u8>,
    result_key: Vec<u8>,
    token: Vec<u8>,
    deadline: Millis,
    claim_shard: usize,
    result_shard: usize,
    locked: bool,
    stage: u8,
    result: Option<StrRead>,
}

impl ClaimPlan {
    /// The claim attempt at the claim shard.
    fn attempt(&self, release_if_held: bool) -> Hop {
        let (key, token, deadline) = (self.claim_key.clone(), self.token.clone(), self.deadline);
        let locked = self.locked;
        let hop = Hop::run(self.claim_shard, move |ctx| {
            let won = try_claim(ctx, &key, &token, deadline);
            if !locked && (won || release_if_held) {
                ctx.release_locks_after();
            }
            HopOut::Flag(won)
        });
        if locked {
            hop
        } else {
            hop.locking(&self.claim_key, LockMode::Exclusive)
        }
    }

    /// GET result_key at the result shard.
    fn read(&self, release: bool) -> Hop {
        let key = self.result_key.clone();
        let hop = Hop::run(self.result_shard, move |ctx| {
            HopOut::Other(Box::new(StrRead::of(ctx.db, &key, ctx.now)))
        });
        match (self.locked, release) {
            (true, _) => hop,
            (false, false) => hop.locking(&self.result_key, LockMode::Shared),
            (false, true) => hop.locking(&self.result_key, LockMode::Shared).releasing(),
        }
    }
}

fn won(results: &[HopOut]) -> bool {
    matches!(results.first(), Some(HopOut::Flag(true)))
}

fn read_of(results: Vec<HopOut>) -> StrRead {
    match results.into_iter().next() {
        Some(HopOut::Other(any)) => any.downcast::<StrRead>().map_or(StrRead::Absent, |r| *r),
        _ => StrRead::Absent,
    }
}

impl Plan for ClaimPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        // Inside EXEC the order of the keys' shards does not matter: all are locked.
        let claim_first = self.locked || self.claim_shard < self.result_shard;
        self.stage += 1;
        match self.stage {
            1 => Step::Hops(vec![self.attempt(!claim_first)]),
            2 => {
                if won(&results) {
                    return cx.done(|e| e.bulk(CLAIMED));
                }
                Step::Hops(vec![self.read(claim_first)])
            }
            3 => {
                let read = read_of(results);
                if claim_first {
                    return cx.done(|e| read.reply(e));
                }
                self.result = Some(read);
                Step::Hops(vec![self.attempt(true)])
            }
            _ => {
                if won(&results) {
                    return cx.done(|e| e.bulk(CLAIMED));
                }
                let read = self.result.take().unwrap_or(StrRead::Absent);
                cx.done(|e| read.reply(e))
            }
        }
    }
}

/// GOBLIN.CLAIM with its keys on two shards; its lease is checked first (an invalid one
/// errors even when the claim is held).
fn claim_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let deadline = claim_deadline(args, start.now)?;
    Ok(Box::new(ClaimPlan {
        claim_key: args.get(1).to_vec(),
        result_key: args.get(2).to_vec(),
        token: args.get(3).to_vec(),
        deadline,
        claim_shard: start.slots.shard_of_key(args.get(1)),
        result_shard: start.slots.shard_of_key(args.get(2)),
        locked: start.locked,
        stage: 0,
        result: None,
    }))
}

/// Deletes `key` when its string value equals (`want_equal`) or differs from `value`.
fn delete_if(ctx: &mut ShardCtx<'_>, key: &[u8], value: &[u8], want_equal: bool) {
    let matches = match lookup(ctx.db, key, ctx.now).0 {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => false,
        Str::Value(v) => (v == value) == want_equal,
    };
    if matches {
        ctx.db.delete(key, ctx.now);
        ctx.log(&[b"DEL", key]);
    }
    ctx.out.integer(i64::from(matches));
}

/// DELEX's keys (Redis 8.4, whose key spec has `variable_flags`): a plain delete (RM)
/// without a condition; with one (IFEQ, IFNE, IFDEQ, IFDNE) the value is read before it
/// is deleted (RW).
fn delex_keys(args: &Args<'_>, found: &mut dyn FnMut(usize, KeyFlags)) -> Result<(), InvalidKeys> {
    let conditional = args.iter_from(2).any(|a| {
        ["ifeq", "ifne", "ifdeq", "ifdne"]
            .iter()
            .any(|c| is_keyword(a, c))
    });
    let access = if conditional {
        KeyFlags::RW
    } else {
        KeyFlags::RM
    };
    found(1, access | KeyFlags::DELETE);
    Ok(())
}

/// `GOBLIN.CAD key value`, and `DELIFEQ key value` (Valkey 9): delete the key if it
/// holds exactly this string.
fn cad(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    delete_if(ctx, args.get(1), args.get(2), true);
}

/// `DELEX key [IFEQ value | IFNE value]` (Redis 8.4): without a condition, DEL of one key;
/// with IFEQ, GOBLIN.CAD; with IFNE, delete unless equal. The digest conditions (IFDEQ,
/// IFDNE) are not supported and are a syntax error.
fn delex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let key = args.get(1);
    match delex_condition(args) {
        Ok(None) => {
            let removed = ctx.db.delete(key, ctx.now);
            ctx.out.integer(i64::from(removed));
        }
        Ok(Some((value, want_equal))) => delete_if(ctx, key, value, want_equal),
        Err(e) => e.send(&mut ctx.out),
    }
}

/// DELEX's condition: none, or the value and whether it must be equal (IFEQ) or differ
/// (IFNE). Anything else, or anything after the value, is a syntax error.
fn delex_condition<'a>(args: &Args<'a>) -> Result<Option<(&'a [u8], bool)>, ErrorReply> {
    let mut c = args.cursor(2);
    if c.is_empty() {
        return Ok(None);
    }
    let want_equal = if c.next_is("IFEQ") {
        true
    } else if c.next_is("IFNE") {
        false
    } else {
        return Err(errors::SYNTAX.into());
    };
    let value = c.next_arg()?;
    c.finish()?;
    Ok(Some((value, want_equal)))
}

/// A key spec entry in COMMAND INFO's form: `flags`, `begin_search` at `index`, one key.
macro_rules! key_spec {
    ($index:expr, [$($flag:expr),*]) => {
        Node::Map(&[
            Node::Bulk("flags"),
            Node::Set(&[$(Node::Simple($flag)),*]),
            Node::Bulk("begin_search"),
            Node::Map(&[
                Node::Bulk("type"),
                Node::Bulk("index"),
                Node::Bulk("spec"),
                Node::Map(&[Node::Bulk("index"), Node::Int($index)]),
            ]),
            Node::Bulk("find_keys"),
            Node::Map(&[
                Node::Bulk("type"),
                Node::Bulk("range"),
                Node::Bulk("spec"),
                Node::Map(&[
                    Node::Bulk("lastkey"),
                    Node::Int(0),
                    Node::Bulk("keystep"),
                    Node::Int(1),
                    Node::Bulk("limit"),
                    Node::Int(0),
                ]),
            ]),
        ])
    };
}

/// An argument entry of COMMAND DOCS.
macro_rules! arg {
    (key $name:expr, $spec:expr) => {
        Node::Map(&[
            Node::Bulk("name"),
            Node::Bulk($name),
            Node::Bulk("type"),
            Node::Bulk("key"),
            Node::Bulk("key_spec_index"),
            Node::Int($spec),
        ])
    };
    ($type:expr, $name:expr) => {
        Node::Map(&[
            Node::Bulk("name"),
            Node::Bulk($name),
            Node::Bulk("type"),
            Node::Bulk($type),
        ])
    };
}

/// A COMMAND INFO/DOCS entry for one of this family's commands: string commands of O(1),
/// with no tips and no subcommands.
macro_rules! string_command_meta {
    (
        $name:expr, arity $arity:expr,
        flags [$($flag:expr),*], keys ($first:expr, $last:expr, $step:expr),
        acl [$($acl:expr),*], key_specs [$($spec:expr),*],
        summary $summary:expr, since $since:expr, arguments [$($arg:expr),*] $(,)?
    ) => {
        Meta {
            info: Node::Array(&[
                Node::Bulk($name),
                Node::Int($arity),
                Node::Set(&[$(Node::Simple($flag)),*]),
                Node::Int($first),
                Node::Int($last),
                Node::Int($step),
                Node::Set(&[$(Node::Simple($acl)),*]),
                Node::Set(&[]),
                Node::Set(&[$($spec),*]),
                Node::Set(&[]),
            ]),
            docs: Node::Map(&[
                Node::Bulk("summary"),
                Node::Bulk($summary),
                Node::Bulk("since"),
                Node::Bulk($since),
                Node::Bulk("group"),
                Node::Bulk("string"),
                Node::Bulk("complexity"),
                Node::Bulk("O(1)"),
                Node::Bulk("arguments"),
                Node::Array(&[$($arg),*]),
            ]),
        }
    };
}

/// GOBLIN.CLAIM's COMMAND INFO/DOCS: keys 1 and 2 (first 1, last 2, step 1), so that
/// cluster-aware clients route it like any two-key command.
pub static CLAIM_META: Meta = string_command_meta!(
    "goblin.claim", arity 5,
    flags ["write", "denyoom", "fast"], keys (1, 2, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [
        key_spec!(1, ["RW", "access", "insert"]),
        key_spec!(2, ["RO", "access"])
    ],
    summary "Claims a piece of work exactly once (SET claim_key token NX EX seconds), or \
             returns the result the winner published at result_key.",
    since "0.1.0",
    arguments [
        arg!(key "claim_key", 0),
        arg!(key "result_key", 1),
        arg!("string", "token"),
        arg!("integer", "seconds")
    ],
);

/// GOBLIN.CAD's COMMAND INFO/DOCS.
pub static CAD_META: Meta = string_command_meta!(
    "goblin.cad", arity 3,
    flags ["write", "fast"], keys (1, 1, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [key_spec!(1, ["RW", "access", "delete"])],
    summary "Deletes a key if it holds exactly the given string (compare-and-delete).",
    since "0.1.0",
    arguments [arg!(key "key", 0), arg!("string", "value")],
);

/// DELIFEQ's COMMAND INFO/DOCS, as Valkey 9 describes the command.
pub static DELIFEQ_META: Meta = string_command_meta!(
    "delifeq", arity 3,
    flags ["write", "fast"], keys (1, 1, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [key_spec!(1, ["RW", "access", "delete"])],
    summary "Delete key if value matches string.",
    since "9.0.0",
    arguments [arg!(key "key", 0), arg!("string", "value")],
);

/// DELEX's COMMAND INFO/DOCS, as Redis 8.4 describes the command.
pub static DELEX_META: Meta = string_command_meta!(
    "delex", arity -2,
    flags ["write", "fast"], keys (1, 1, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [key_spec!(1, ["RW", "delete", "variable_flags"])],
    summary "Conditionally removes the specified key based on value comparison.",
    since "8.4.0",
    arguments [arg!(key "key", 0), arg!("string", "condition")],
);
