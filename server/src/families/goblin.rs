//! Goblin's native commands: GOBLIN.CLAIM and GOBLIN.CAD, with DELEX (Redis 8.4) and
//! DELIFEQ (Valkey 9) as spellings of compare-and-delete.
//!
//! Each is the atomic form of a Lua idiom (see `shared/spec/goblin-commands.md`), and
//! replies exactly what redis-server replies to that script.
//!
//! GOBLIN.CLAIM with both keys on one shard runs here, as one shard command costing what
//! `SET … NX EX` costs. With its keys on two shards it is a transaction whose steps are
//! in `tx.rs` (`Plan::Claim`); both paths share [`try_claim`] and GET's reply.

use goblin_store::{Keyspace, Millis};

use crate::errors;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, Meta, MultiKey, Node};

use super::strings::{Str, lookup, reply_get};
use super::{ExpireUnit, parse_expire};

/// The reply to a won claim.
pub const CLAIMED: &[u8] = b"CLAIMED";

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add_multi(&CLAIM_META, Exec::Shard(claim), MultiKey::Claim);
    table.add(&CAD_META, Exec::Shard(cad));
    table.add(&DELIFEQ_META, Exec::Shard(cad));
    table.add(&DELEX_META, Exec::Shard(delex));
}

/// Parses GOBLIN.CLAIM's `seconds` (argument 4) into the lease's deadline, with SET EX's
/// rules and errors; done before anything else, so an invalid lease errors even when the
/// claim is held.
///
/// # Errors
/// The error reply.
pub fn claim_deadline(args: &Args<'_>, now: Millis) -> Result<Millis, Vec<u8>> {
    parse_expire(args.get(4), ExpireUnit::Seconds, now, "goblin.claim")
}

/// The claim attempt: `SET claim_key token NX PXAT deadline`. True when it won. A key of
/// any type holds the claim (NX tests existence only).
pub fn try_claim(
    db: &mut Keyspace,
    key: &[u8],
    token: &[u8],
    deadline: Millis,
    now: Millis,
) -> bool {
    if db.contains(key, now) {
        return false;
    }
    db.set_str(key, token, Some(deadline), now);
    true
}

/// `GOBLIN.CLAIM claim_key result_key token seconds`, both keys on this shard.
fn claim(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let deadline = match claim_deadline(args, ctx.now) {
        Ok(d) => d,
        Err(e) => return ctx.out.error(&e),
    };
    if try_claim(ctx.db, args.get(1), args.get(3), deadline, ctx.now) {
        ctx.out.bulk(CLAIMED);
    } else {
        reply_get(ctx, args.get(2));
    }
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
    }
    ctx.out.integer(i64::from(matches));
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
    match args.len() {
        2 => {
            let removed = ctx.db.delete(key, ctx.now);
            ctx.out.integer(i64::from(removed));
        }
        4 if args.is(2, "IFEQ") => delete_if(ctx, key, args.get(3), true),
        4 if args.is(2, "IFNE") => delete_if(ctx, key, args.get(3), false),
        _ => ctx.out.error(errors::SYNTAX),
    }
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
