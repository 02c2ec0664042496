//! Hash commands: HSET, HSETNX, HMSET, HGET, HMGET, HDEL, HLEN, HEXISTS, HSTRLEN,
//! HGETALL, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN — with redis-server
//! 7.0's parsing, replies, errors and the order it checks them in. Every command takes one
//! key, so none needs a cross-shard plan.
//!
//! The encodings and their conversions (`listpack` → `hashtable`) are the store's
//! ([`goblin_store::Hash`]); a write goes through [`Keyspace::upsert`] or
//! [`Keyspace::modify`], which record the key's event and delete a hash left empty.

use goblin_protocol::{Encoder, Version, parse_i64};
use goblin_store::{Hash, Keyspace, Millis, Value, ValueMut, ValueRef};

use crate::errors::{self, ErrorReply};
use crate::longdouble::LongDouble;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::util::{glob_match, random_u64};

use super::keys::parse_cursor;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::HSET, Exec::Shard(hset));
    table.add(&meta::HMSET, Exec::Shard(hmset));
    table.add(&meta::HSETNX, Exec::Shard(hsetnx));
    table.add(&meta::HGET, Exec::Shard(hget));
    table.add(&meta::HMGET, Exec::Shard(hmget));
    table.add(&meta::HDEL, Exec::Shard(hdel));
    table.add(&meta::HLEN, Exec::Shard(hlen));
    table.add(&meta::HEXISTS, Exec::Shard(hexists));
    table.add(&meta::HSTRLEN, Exec::Shard(hstrlen));
    table.add(&meta::HGETALL, Exec::Shard(hgetall));
    table.add(&meta::HKEYS, Exec::Shard(hkeys));
    table.add(&meta::HVALS, Exec::Shard(hvals));
    table.add(&meta::HINCRBY, Exec::Shard(hincrby));
    table.add(&meta::HINCRBYFLOAT, Exec::Shard(hincrbyfloat));
    table.add(&meta::HRANDFIELD, Exec::Shard(hrandfield));
    table.add(&meta::HSCAN, Exec::Shard(hscan));
}

/// What a key holds, for hash commands.
enum Found<'a> {
    Hash(&'a Hash),
    Absent,
    WrongType,
}

/// What `key` holds at `now`.
fn lookup<'a>(db: &'a mut Keyspace, key: &[u8], now: Millis) -> Found<'a> {
    match db.get(key, now).map(|e| e.value()) {
        None => Found::Absent,
        Some(ValueRef::Hash(h)) => Found::Hash(h),
        Some(_) => Found::WrongType,
    }
}

/// Runs `f` on the hash at `key`, creating an empty one when the key is absent (Redis's
/// `hashTypeLookupWriteOrCreate`); `f` returns its result and whether it changed the hash.
/// `Err(WRONGTYPE)` when the key holds another type. A hash created and left empty (an
/// error before anything was set) is removed again, recording nothing.
fn write_or_create<R>(
    ctx: &mut ShardCtx<'_>,
    key: &[u8],
    f: impl FnOnce(&mut Hash) -> (R, bool),
) -> Result<R, ErrorReply> {
    ctx.db
        .upsert(
            key,
            ctx.now,
            || Value::Hash(Box::default()),
            |value| match value {
                ValueMut::Boxed(Value::Hash(hash)) => {
                    let (r, changed) = f(hash);
                    (Some(r), changed)
                }
                _ => (None, false),
            },
        )
        .flatten()
        .ok_or(ErrorReply::Fixed(errors::WRONGTYPE))
}

/// Sets the pairs of arguments `from..`, counting the new fields.
fn set_pairs(hash: &mut Hash, args: &Args<'_>, from: usize) -> usize {
    (from..args.len().saturating_sub(1))
        .step_by(2)
        .filter(|&i| hash.insert(args.get(i), args.get(i + 1)))
        .count()
}

/// HSET and HMSET: the pairs set, or their errors (an odd pair count is an arity error,
/// checked before the key's type).
fn set_command(ctx: &mut ShardCtx<'_>, args: &Args<'_>, name: &str) -> Option<usize> {
    if args.len() % 2 == 1 {
        ctx.out.error(&errors::wrong_arity(name));
        return None;
    }
    match write_or_create(ctx, args.get(1), |hash| {
        let added = set_pairs(hash, args, 2);
        (added, true)
    }) {
        Ok(added) => Some(added),
        Err(e) => {
            e.send(&mut ctx.out);
            None
        }
    }
}

/// `HSET key field value [field value ...]`: how many fields were new.
fn hset(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if let Some(added) = set_command(ctx, args, "hset") {
        ctx.out.integer(added as i64);
    }
}

/// `HMSET key field value [field value ...]`: OK.
fn hmset(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if set_command(ctx, args, "hmset").is_some() {
        ctx.out.ok();
    }
}

/// `HSETNX key field value`: 1 when the field was set, 0 when it existed (the hash is
/// then unchanged, its encoding too).
fn hsetnx(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (field, value) = (args.get(2), args.get(3));
    let set = write_or_create(ctx, args.get(1), |hash| {
        if hash.contains(field) {
            (false, false)
        } else {
            (hash.insert(field, value), true)
        }
    });
    match set {
        Ok(set) => ctx.out.integer(i64::from(set)),
        Err(e) => e.send(&mut ctx.out),
    }
}

/// `HGET key field`
fn hget(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match lookup(ctx.db, args.get(1), ctx.now) {
        Found::Hash(h) => match h.get(args.get(2)) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        },
        Found::Absent => ctx.out.null(),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `HMGET key field [field ...]`: a value or nil per field (all nil for an absent key).
fn hmget(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let hash = match lookup(ctx.db, args.get(1), ctx.now) {
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::Absent => None,
        Found::Hash(h) => Some(h),
    };
    ctx.out.array(args.len() - 2);
    for field in args.iter_from(2) {
        match hash.and_then(|h| h.get(field)) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        }
    }
}

/// `HDEL key field [field ...]`: how many fields were removed; the key goes with its last
/// field.
fn hdel(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let removed = ctx.db.modify(args.get(1), ctx.now, |value| match value {
        ValueMut::Boxed(Value::Hash(hash)) => {
            let n = args.iter_from(2).filter(|f| hash.remove(f)).count();
            (Some(n), n > 0)
        }
        _ => (None, false),
    });
    match removed {
        None => ctx.out.integer(0),
        Some(Some(n)) => ctx.out.integer(n as i64),
        Some(None) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// Replies an integer computed from the hash at argument 1: 0 for an absent key.
fn reply_count(ctx: &mut ShardCtx<'_>, args: &Args<'_>, f: impl FnOnce(&Hash) -> usize) {
    match lookup(ctx.db, args.get(1), ctx.now) {
        Found::Hash(h) => {
            let n = f(h);
            ctx.out.integer(n as i64);
        }
        Found::Absent => ctx.out.integer(0),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `HLEN key`
fn hlen(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    reply_count(ctx, args, Hash::len);
}

/// `HEXISTS key field`
fn hexists(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let field = args.get(2);
    reply_count(ctx, args, |h| usize::from(h.contains(field)));
}

/// `HSTRLEN key field`: the value's length, 0 when absent.
fn hstrlen(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let field = args.get(2);
    reply_count(ctx, args, |h| h.get(field).map_or(0, <[u8]>::len));
}

/// What HGETALL, HKEYS and HVALS reply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Fields,
    Values,
    Both,
}

/// HGETALL (a map), HKEYS and HVALS (arrays), in the hash's order; empty for an absent
/// key.
fn get_all(ctx: &mut ShardCtx<'_>, args: &Args<'_>, parts: Parts) {
    let hash = match lookup(ctx.db, args.get(1), ctx.now) {
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::Absent => None,
        Found::Hash(h) => Some(h),
    };
    let n = hash.map_or(0, Hash::len);
    if parts == Parts::Both {
        ctx.out.map(n);
    } else {
        ctx.out.array(n);
    }
    if let Some(h) = hash {
        for (field, value) in h.iter() {
            if parts != Parts::Values {
                ctx.out.bulk(field);
            }
            if parts != Parts::Fields {
                ctx.out.bulk(value);
            }
        }
    }
}

/// `HGETALL key`
fn hgetall(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    get_all(ctx, args, Parts::Both);
}

/// `HKEYS key`
fn hkeys(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    get_all(ctx, args, Parts::Fields);
}

/// `HVALS key`
fn hvals(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    get_all(ctx, args, Parts::Values);
}

/// `HINCRBY key field increment`: the new value. The increment is checked first, then
/// the key's type, then the stored value, then overflow.
fn hincrby(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(delta) = parse_i64(args.get(3)) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    let field = args.get(2);
    let result = write_or_create(ctx, args.get(1), |hash| {
        let old = match hash.get(field) {
            None => 0,
            Some(v) => match parse_i64(v) {
                Some(n) => n,
                None => return (Err(errors::HASH_VALUE_NOT_INTEGER), false),
            },
        };
        let Some(new) = old.checked_add(delta) else {
            return (Err(errors::INCR_OVERFLOW), false);
        };
        hash.insert(field, itoa::Buffer::new().format(new).as_bytes());
        (Ok(new), true)
    });
    match result {
        Ok(Ok(n)) => ctx.out.integer(n),
        Ok(Err(text)) => ctx.out.error(text),
        Err(e) => e.send(&mut ctx.out),
    }
}

/// `HINCRBYFLOAT key field increment`, in `long double` as Redis computes it: the new
/// value, printed as INCRBYFLOAT prints it. Logged as `HSET key field <result>`, since
/// replaying the increment could round differently.
fn hincrbyfloat(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(delta) = LongDouble::parse(args.get(3)) else {
        return ctx.out.error(errors::NOT_FLOAT);
    };
    if delta.is_infinite() {
        return ctx.out.error(errors::VALUE_NAN_OR_INFINITY);
    }
    let (key, field) = (args.get(1), args.get(2));
    let result = write_or_create(ctx, key, |hash| {
        let old = match hash.get(field) {
            None => LongDouble::parse(b"0"),
            Some(v) => LongDouble::parse(v),
        };
        let Some(old) = old else {
            return (Err(errors::HASH_VALUE_NOT_FLOAT), false);
        };
        let sum = old + delta;
        if sum.is_infinite() {
            return (Err(errors::INCR_NAN_OR_INFINITY), false);
        }
        let text = sum.to_human();
        hash.insert(field, text.as_bytes());
        (Ok(text), true)
    });
    match result {
        Ok(Ok(text)) => {
            if ctx.logging() {
                ctx.log(&[b"HSET", key, field, text.as_bytes()]);
            }
            ctx.out.bulk(text.as_bytes());
        }
        Ok(Err(text)) => ctx.out.error(text),
        Err(e) => e.send(&mut ctx.out),
    }
}

/// Bytes the smallest field costs in a reply (`$0\r\n\r\n`): with the reply bound, how
/// many repeated picks HRANDFIELD may make at most.
const MIN_PICK_BYTES: usize = 6;

/// `HRANDFIELD key [count [WITHVALUES]]`, as Redis 7.0 answers it: without a count, one
/// random field (nil for an absent key); with a positive count, that many distinct fields
/// (the whole hash when it has no more); with a negative one, that many picks, repeats
/// allowed. WITHVALUES pairs each field with its value (a two-element array in RESP3).
///
/// Redis answers any negative count, however large, by trying to send it; here the
/// reply of repeated picks is bounded by `proto-max-bulk-len` (512 MB by default), past
/// which the count is refused as out of range, rather than exhaust the server's memory.
fn hrandfield(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if args.len() == 2 {
        return match lookup(ctx.db, args.get(1), ctx.now) {
            Found::Absent => ctx.out.null(),
            Found::WrongType => ctx.out.error(errors::WRONGTYPE),
            Found::Hash(h) => match h.random_pair(&mut random_u64) {
                Some((field, _)) => ctx.out.bulk(field),
                None => ctx.out.null(),
            },
        };
    }
    let (count, with_values) = match parse_hrandfield(args) {
        Ok(parsed) => parsed,
        Err(e) => return e.send(&mut ctx.out),
    };
    let budget = ctx.max_string;
    let hash = match lookup(ctx.db, args.get(1), ctx.now) {
        Found::Absent => return ctx.out.array(0),
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::Hash(h) => h,
    };
    let out = &mut ctx.out;
    let resp3 = out.version() == Version::Resp3;
    let n = count.unsigned_abs() as usize;
    if n == 0 {
        return out.array(0);
    }
    let header = |out: &mut Encoder<'_>, n: usize| {
        out.array(if with_values && !resp3 { n * 2 } else { n });
    };
    let pair = |out: &mut Encoder<'_>, field: &[u8], value: &[u8]| {
        if with_values && resp3 {
            out.array(2);
        }
        out.bulk(field);
        if with_values {
            out.bulk(value);
        }
    };
    if count < 0 || n == 1 {
        // Picks with replacement, each its own draw.
        if n > budget / MIN_PICK_BYTES {
            return out.error(errors::VALUE_OUT_OF_RANGE);
        }
        let start = out.len();
        header(out, n);
        let sampler = hash.sampler();
        for _ in 0..n {
            if let Some((field, value)) = sampler.pick(&mut random_u64) {
                pair(out, field, value);
            }
            if out.len() - start > budget {
                out.truncate(start);
                return out.error(errors::VALUE_OUT_OF_RANGE);
            }
        }
        return;
    }
    header(out, n.min(hash.len()));
    hash.distinct_sample(n, &mut random_u64, |field, value| pair(out, field, value));
}

/// HRANDFIELD's count and WITHVALUES, checked as Redis checks them: the count (a `long`
/// but for its smallest value), then the arguments after it, then the count's range with
/// WITHVALUES (its reply would have twice as many elements).
fn parse_hrandfield(args: &Args<'_>) -> Result<(i64, bool), ErrorReply> {
    let mut c = args.cursor(2);
    let count = c.next_i64()?;
    if count == i64::MIN {
        return Err(errors::COUNT_OUT_OF_RANGE.into());
    }
    let with_values = match c.next() {
        None => false,
        Some(word) if is_keyword(word, "withvalues") => true,
        Some(_) => return Err(errors::SYNTAX.into()),
    };
    c.finish()?;
    if with_values && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return Err(errors::VALUE_OUT_OF_RANGE.into());
    }
    Ok((count, with_values))
}

/// HSCAN's options.
struct ScanOptions<'a> {
    count: usize,
    pattern: Option<&'a [u8]>,
}

/// HSCAN's options in order (`scanGenericCommand`), each needing its value; a later
/// option of a kind replaces an earlier one; TYPE is SCAN's alone.
fn parse_scan_options<'a>(args: &Args<'a>) -> Result<ScanOptions<'a>, ErrorReply> {
    let mut opts = ScanOptions {
        count: 10,
        pattern: None,
    };
    let mut c = args.cursor(3);
    while let Some(opt) = c.next() {
        let more = !c.is_empty();
        if is_keyword(opt, "count") && more {
            let n = c.next_i64()?;
            if n < 1 {
                return Err(errors::SYNTAX.into());
            }
            opts.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is_keyword(opt, "match") && more {
            let p = c.next_arg()?;
            opts.pattern = (p != b"*").then_some(p);
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok(opts)
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`: the next cursor and fields with their
/// values. Checked in Redis's order: the cursor, the key (an absent one answers an empty
/// scan whatever the options), its type, then the options.
///
/// A listpack hash answers everything at once with cursor 0, as Redis does. A hashtable
/// answers about COUNT elements (fields and values, as Redis counts them) per call, with
/// a cursor in hash space (see [`Hash::scan`]): every field present for the whole
/// iteration is returned.
fn hscan(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(cursor) = parse_cursor(args.get(2)) else {
        return ctx.out.error(errors::INVALID_CURSOR);
    };
    let hash = match lookup(ctx.db, args.get(1), ctx.now) {
        Found::Absent => {
            ctx.out.array(2);
            ctx.out.bulk(b"0");
            return ctx.out.array(0);
        }
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::Hash(h) => h,
    };
    let opts = match parse_scan_options(args) {
        Ok(opts) => opts,
        Err(e) => return e.send(&mut ctx.out),
    };
    let mut found: Vec<(&[u8], &[u8])> = Vec::new();
    let next = hash.scan(cursor, opts.count.div_ceil(2), |field, value| {
        if opts.pattern.is_none_or(|p| glob_match(p, field, false)) {
            found.push((field, value));
        }
    });
    let out = &mut ctx.out;
    out.array(2);
    out.bulk(itoa::Buffer::new().format(next).as_bytes());
    out.array(found.len() * 2);
    for (field, value) in found {
        out.bulk(field);
        out.bulk(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    use goblin_store::{Change, Event};

    use crate::shard::events::{Effect, Observer, Write};
    use crate::testkit::Loopback;

    /// What an observer saw of one write: its key events and its effect (`None`: as sent).
    type Seen = (Vec<(Change, Vec<u8>)>, Option<Vec<Vec<Vec<u8>>>>);

    #[derive(Debug)]
    struct Recorder(Rc<RefCell<Vec<Seen>>>);

    impl Observer for Recorder {
        fn on_write(&mut self, write: &Write<'_>) {
            let events = write
                .events
                .iter()
                .filter_map(Event::key)
                .map(|k| (k.change, k.key.to_vec()))
                .collect();
            let effect = match write.effect {
                Effect::AsSent => None,
                Effect::Commands(c) => Some(c.to_vec()),
                Effect::Events => Some(Vec::new()),
            };
            self.0.borrow_mut().push((events, effect));
        }
    }

    fn observed() -> (Loopback, Rc<RefCell<Vec<Seen>>>) {
        let mut lb = Loopback::new(1);
        let seen = Rc::new(RefCell::new(Vec::new()));
        lb.shards[0].add_observer(Box::new(Recorder(Rc::clone(&seen))));
        (lb, seen)
    }

    fn owned(argv: &[&[u8]]) -> Vec<Vec<u8>> {
        argv.iter().map(|a| a.to_vec()).collect()
    }

    /// HINCRBYFLOAT logs the HSET of its result; the other writes are their own effect;
    /// the last field's HDEL deletes the key; reads and refused writes record nothing.
    #[test]
    fn writes_record_their_events_and_effects() {
        let (mut lb, seen) = observed();
        let last = |seen: &Rc<RefCell<Vec<Seen>>>| seen.borrow().last().cloned();
        assert_eq!(
            lb.exec(&[b"HINCRBYFLOAT", b"h", b"f", b"10.5"]),
            b"$4\r\n10.5\r\n"
        );
        assert_eq!(
            lb.exec(&[b"HINCRBYFLOAT", b"h", b"f", b"0.1"]),
            b"$4\r\n10.6\r\n"
        );
        assert_eq!(
            last(&seen),
            Some((
                vec![(Change::Written, b"h".to_vec())],
                Some(vec![owned(&[b"HSET", b"h", b"f", b"10.6"])])
            ))
        );
        lb.exec(&[b"HINCRBY", b"h", b"n", b"3"]);
        assert_eq!(last(&seen).map(|s| s.1), Some(None), "as sent");
        let before = seen.borrow().len();
        for refused in [
            &[&b"HINCRBY"[..], b"h", b"f", b"1"][..],
            &[b"HINCRBYFLOAT", b"h", b"f", b"inf"],
            &[b"HSETNX", b"h", b"f", b"x"],
            &[b"HDEL", b"h", b"nope"],
            &[b"HGETALL", b"h"],
            &[b"HRANDFIELD", b"h", b"-3"],
        ] {
            lb.exec(refused);
        }
        assert_eq!(seen.borrow().len(), before, "{:?}", seen.borrow());
        lb.exec(&[b"HDEL", b"h", b"f", b"n"]);
        assert_eq!(
            last(&seen),
            Some((vec![(Change::Deleted, b"h".to_vec())], None))
        );
        assert_eq!(lb.exec(&[b"EXISTS", b"h"]), b":0\r\n");
        // An error after the hash was created leaves no key behind.
        lb.exec(&[b"SET", b"s", b"v"]);
        assert_eq!(lb.exec(&[b"HSET", b"s", b"f", b"v"])[0], b'-');
        assert_eq!(lb.exec(&[b"TYPE", b"s"]), b"+string\r\n");
    }

    fn hrandfield_args(words: &[&[u8]]) -> Result<(i64, bool), ErrorReply> {
        let mut all: Vec<&[u8]> = vec![b"HRANDFIELD", b"k"];
        all.extend_from_slice(words);
        parse_hrandfield(&crate::testkit::Cmd::new(&all).args())
    }

    #[test]
    fn hrandfield_counts_are_checked_like_redis() {
        assert_eq!(hrandfield_args(&[b"5"]), Ok((5, false)));
        assert_eq!(hrandfield_args(&[b"-5", b"WithValues"]), Ok((-5, true)));
        assert_eq!(
            hrandfield_args(&[b"x"]),
            Err(ErrorReply::Fixed(errors::NOT_INTEGER))
        );
        assert_eq!(
            hrandfield_args(&[b"-9223372036854775808"]),
            Err(ErrorReply::Fixed(errors::COUNT_OUT_OF_RANGE))
        );
        assert_eq!(
            hrandfield_args(&[b"-9223372036854775807"]),
            Ok((-i64::MAX, false))
        );
        assert_eq!(
            hrandfield_args(&[b"1", b"x"]),
            Err(ErrorReply::Fixed(errors::SYNTAX))
        );
        assert_eq!(
            hrandfield_args(&[b"1", b"withvalues", b"x"]),
            Err(ErrorReply::Fixed(errors::SYNTAX))
        );
        assert_eq!(
            hrandfield_args(&[b"4611686018427387904", b"withvalues"]),
            Err(ErrorReply::Fixed(errors::VALUE_OUT_OF_RANGE))
        );
        assert_eq!(
            hrandfield_args(&[b"-4611686018427387903", b"withvalues"]),
            Ok((-4611686018427387903, true))
        );
    }
}
