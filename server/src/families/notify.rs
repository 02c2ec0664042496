//! The names of keyspace notifications, per command, as Redis 7.0's commands send them
//! (`notifyKeyspaceEvent` calls in t_string.c, db.c, expire.c, t_hash.c, t_list.c,
//! t_set.c, t_zset.c, geo.c): the shard's write path gives the key events a command made, and
//! this names them (`shard/notify.rs` publishes them).
//!
//! A written key gets the command's event; a collection the command emptied (a deleted
//! key) gets the command's event, then `del`. A created key's `new` is sent before its
//! first event by the shard, or named here where Redis sends it otherwise (RENAME, MOVE
//! and COPY add their destination anew, even over a key they replace). The GOBLIN commands name theirs as the Lua
//! scripts they replace would: a won claim is a `set` and an `expire`.

use goblin_store::{Change, KeyEvent};

use crate::shard::notify::{Emit, GENERIC, HASH, LIST, NEW, SET, STREAM, STRING, ZSET};
use crate::table::args::is_keyword;
use crate::table::handler::Args;

/// Whether any argument from `from` on is one of `words` (case-insensitive).
fn has_word(args: &Args<'_>, from: usize, words: &[&str]) -> bool {
    (from..args.len()).any(|i| words.iter().any(|w| is_keyword(args.get(i), w)))
}

/// Each written key gets `event`; an emptied one `event` then `del`.
fn each(events: &[&KeyEvent], class: u32, event: &str, emit: &mut Emit<'_>) {
    for k in events {
        emit(class, event, k);
        if k.change == Change::Deleted {
            emit(GENERIC, "del", k);
        }
    }
}

/// Written keys get `event` (class `class`), deleted ones `del` (a STORE whose result
/// was empty).
fn stored(events: &[&KeyEvent], class: u32, event: &str, emit: &mut Emit<'_>) {
    for k in events {
        match k.change {
            Change::Deleted => emit(GENERIC, "del", k),
            _ => emit(class, event, k),
        }
    }
}

/// Deleted keys get `del`; written ones nothing.
fn deletions(events: &[&KeyEvent], emit: &mut Emit<'_>) {
    for k in events.iter().filter(|k| k.change == Change::Deleted) {
        emit(GENERIC, "del", k);
    }
}

/// The events of the key `key` among `events`.
fn of<'a>(events: &'a [&'a KeyEvent], key: &'a [u8]) -> impl Iterator<Item = &'a KeyEvent> {
    events.iter().copied().filter(move |k| *k.key == *key)
}

/// A move between two keys (LMOVE, RPOPLPUSH, SMOVE): the destination's event first for
/// lists (Redis pushes, then reports the pop), the source's first for sets.
fn moved(
    events: &[&KeyEvent],
    args: &Args<'_>,
    class: u32,
    (pop, push): (&str, &str),
    push_first: bool,
    emit: &mut Emit<'_>,
) {
    let (src, dst) = (args.get(1), args.get(2));
    let pushes = |emit: &mut Emit<'_>| {
        for k in of(events, dst).filter(|k| k.change == Change::Written) {
            emit(class, push, k);
        }
    };
    let pops = |emit: &mut Emit<'_>| {
        // A rotation (the same list) changed one key: it was pushed and popped.
        for k in of(events, src) {
            emit(class, pop, k);
            if k.change == Change::Deleted {
                emit(GENERIC, "del", k);
            }
        }
    };
    if push_first {
        pushes(emit);
        pops(emit);
    } else {
        pops(emit);
        if src != dst {
            pushes(emit);
        }
    }
}

/// Names the key events of one run of command `name` (see `shard::notify::EventsFn`).
pub fn events(name: &str, args: &Args<'_>, events: &[&KeyEvent], emit: &mut Emit<'_>) {
    let expiry_words: &[&str] = &["EX", "PX", "EXAT", "PXAT"];
    match name {
        // Strings.
        "set" | "setnx" | "setex" | "psetex" | "getset" | "mset" | "msetnx" => {
            let expires = matches!(name, "setex" | "psetex")
                || (name == "set" && has_word(args, 3, expiry_words));
            for k in events.iter().filter(|k| k.change == Change::Written) {
                emit(STRING, "set", k);
                if expires {
                    emit(GENERIC, "expire", k);
                }
            }
            deletions(events, emit);
        }
        "getex" => {
            let event = if has_word(args, 2, &["PERSIST"]) {
                "persist"
            } else {
                "expire"
            };
            stored(events, GENERIC, event, emit);
        }
        "append" | "setrange" | "incrbyfloat" | "setbit" => each(events, STRING, name, emit),
        // BITOP stores its result (`set`), or deletes its destination when it is empty.
        "bitop" => stored(events, STRING, "set", emit),
        // BITFIELD signals `setbit` when a field changed; a string that only grew (every
        // write failed) is written quietly and signals nothing, as in Redis.
        "bitfield" => {
            for k in events.iter().filter(|k| !k.quiet) {
                emit(STRING, "setbit", k);
            }
        }
        // HyperLogLog (hyperloglog.c): PFMERGE is "a mass-add of elements". The registers
        // a corrupted PFADD raised before its error, PFCOUNT's cache and PFDEBUG's
        // conversions notify nothing.
        "pfadd" | "pfmerge" => {
            for k in events
                .iter()
                .filter(|k| k.change == Change::Written && !k.quiet)
            {
                emit(STRING, "pfadd", k);
            }
        }
        // (DECR and DECRBY too: Redis names all four `incrby`.)
        "incr" | "incrby" | "decr" | "decrby" => each(events, STRING, "incrby", emit),
        // Keys.
        "expire" | "pexpire" | "expireat" | "pexpireat" => stored(events, GENERIC, "expire", emit),
        "persist" => stored(events, GENERIC, "persist", emit),
        "rename" | "renamenx" => {
            let (src, dst) = (args.get(1), args.get(2));
            // The destination is added (`new`, even over a key it replaces) before the
            // source goes.
            for k in of(events, dst).filter(|k| k.change == Change::Written) {
                emit(NEW, "new", k);
            }
            for k in of(events, src).filter(|k| k.change == Change::Deleted) {
                emit(GENERIC, "rename_from", k);
            }
            for k in of(events, dst).filter(|k| k.change == Change::Written) {
                emit(GENERIC, "rename_to", k);
            }
        }
        "move" => {
            for k in events.iter().filter(|k| k.created) {
                emit(NEW, "new", k);
            }
            for k in events.iter().filter(|k| k.change == Change::Deleted) {
                emit(GENERIC, "move_from", k);
            }
            for k in events.iter().filter(|k| k.change == Change::Written) {
                emit(GENERIC, "move_to", k);
            }
        }
        // RESTORE: the restored key (REPLACE's deletion of the old one says nothing); a
        // RESTORE whose TTL has passed only deletes what it replaced.
        "restore" => {
            let restored = events.iter().any(|k| k.change == Change::Written);
            for k in events {
                match k.change {
                    Change::Written => emit(GENERIC, "restore", k),
                    Change::Deleted if !restored => emit(GENERIC, "del", k),
                    _ => {}
                }
            }
        }
        "copy" => {
            // Added anew, even over a key it replaces (REPLACE).
            for k in events.iter().filter(|k| k.change == Change::Written) {
                emit(NEW, "new", k);
                emit(GENERIC, "copy_to", k);
            }
        }
        // Hashes.
        "hset" | "hsetnx" | "hmset" => each(events, HASH, "hset", emit),
        "hdel" | "hincrby" | "hincrbyfloat" => each(events, HASH, name, emit),
        // Lists.
        "lpush" | "lpushx" => each(events, LIST, "lpush", emit),
        "rpush" | "rpushx" => each(events, LIST, "rpush", emit),
        "linsert" | "lset" | "lrem" | "ltrim" => each(events, LIST, name, emit),
        "lpop" | "blpop" => each(events, LIST, "lpop", emit),
        "rpop" | "brpop" => each(events, LIST, "rpop", emit),
        "lmpop" | "blmpop" => {
            let event = if has_word(args, 2, &["LEFT"]) {
                "lpop"
            } else {
                "rpop"
            };
            each(events, LIST, event, emit);
        }
        "rpoplpush" | "brpoplpush" => moved(events, args, LIST, ("rpop", "lpush"), true, emit),
        "lmove" | "blmove" => {
            let side = |i: usize, left: &'static str, right: &'static str| {
                if is_keyword(args.get(i), "LEFT") {
                    left
                } else {
                    right
                }
            };
            let events_names = (side(3, "lpop", "rpop"), side(4, "lpush", "rpush"));
            moved(events, args, LIST, events_names, true, emit);
        }
        // Sets.
        "sadd" | "srem" | "spop" => each(events, SET, name, emit),
        "smove" => moved(events, args, SET, ("srem", "sadd"), false, emit),
        "sinterstore" | "sunionstore" | "sdiffstore" => stored(events, SET, name, emit),
        // Sorted sets.
        "zadd" => {
            let event = if has_word(args, 2, &["INCR"]) {
                "zincr"
            } else {
                "zadd"
            };
            each(events, ZSET, event, emit);
        }
        "zincrby" => each(events, ZSET, "zincr", emit),
        "zrem" | "zremrangebyrank" | "zremrangebyscore" | "zremrangebylex" => {
            each(events, ZSET, name, emit);
        }
        "zpopmin" | "bzpopmin" => each(events, ZSET, "zpopmin", emit),
        "zpopmax" | "bzpopmax" => each(events, ZSET, "zpopmax", emit),
        "zmpop" | "bzmpop" => {
            let event = if has_word(args, 2, &["MIN"]) {
                "zpopmin"
            } else {
                "zpopmax"
            };
            each(events, ZSET, event, emit);
        }
        // SORT … STORE writes a list (`sortstore`), or deletes an emptied destination.
        "sort" => stored(events, LIST, "sortstore", emit),
        "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" => {
            stored(events, ZSET, name, emit);
        }
        // Geo (geo.c): GEOADD runs as ZADD; a search that stores names its write after
        // itself, or deletes an empty destination.
        "geoadd" => each(events, ZSET, "zadd", emit),
        "geosearchstore" => stored(events, ZSET, "geosearchstore", emit),
        "georadius" | "georadiusbymember" => stored(events, ZSET, "georadiusstore", emit),
        // Streams (t_stream.c). An XADD that trims writes twice: `xadd`, then `xtrim`.
        "xadd" => {
            for (i, k) in events.iter().enumerate() {
                let first = !events[..i].iter().any(|e| e.key == k.key);
                emit(STREAM, if first { "xadd" } else { "xtrim" }, k);
            }
        }
        "xtrim" | "xdel" | "xsetid" => each(events, STREAM, name, emit),
        "xgroup|create" => each(events, STREAM, "xgroup-create", emit),
        "xgroup|setid" => each(events, STREAM, "xgroup-setid", emit),
        "xgroup|destroy" => each(events, STREAM, "xgroup-destroy", emit),
        "xgroup|createconsumer" => each(events, STREAM, "xgroup-createconsumer", emit),
        "xgroup|delconsumer" => each(events, STREAM, "xgroup-delconsumer", emit),
        // A read, claim or acknowledgement sends nothing of its own; one that created its
        // consumer wrote the key a second time, for `xgroup-createconsumer`.
        "xreadgroup" | "xclaim" | "xautoclaim" => {
            for (i, k) in events.iter().enumerate() {
                if events[..i].iter().any(|e| e.key == k.key) {
                    emit(STREAM, "xgroup-createconsumer", k);
                }
            }
        }
        // The claim's life, named as its Lua oracles would be.
        "goblin.claim" => {
            for k in events.iter().filter(|k| k.change == Change::Written) {
                emit(STRING, "set", k);
                emit(GENERIC, "expire", k);
            }
            deletions(events, emit);
        }
        "goblin.publish" => {
            let (claim, result) = (args.get(1), args.get(2));
            for k in of(events, result).filter(|k| k.change == Change::Written) {
                emit(STRING, "set", k);
                emit(GENERIC, "expire", k);
            }
            for k in of(events, claim).filter(|k| k.change == Change::Written) {
                emit(GENERIC, "expire", k);
            }
        }
        "goblin.renew" => stored(events, GENERIC, "expire", emit),
        // DEL, UNLINK, GETDEL, GOBLIN.CAD, DELEX … and any other command: what it
        // deleted.
        _ => deletions(events, emit),
    }
}
