//! String commands: GET, SET, SETNX, SETEX, PSETEX, GETSET, GETDEL, GETEX, MGET, MSET,
//! MSETNX, APPEND, STRLEN, INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT, GETRANGE, SUBSTR,
//! SETRANGE, LCS — with redis-server 7.0's parsing, replies and errors.

use goblin_protocol::{Encoder, parse_i64};
use goblin_store::{Keyspace, Millis, NOT_INT, RAW, Value, ValueMut};

use crate::errors::{self, ErrorReply};
use crate::longdouble::LongDouble;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::keys::InvalidKeys;
use crate::table::{CommandTable, KeyFlags, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Plan, PlanCx, PlanStart};
use crate::txn::shapes::{Decision, ReadThenWrite, Split, merge_ok, merge_values_in_order, sum};

use super::{ExpireUnit, decimal, parse_expire};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::GET, Exec::Shard(get));
    table
        .add(&meta::SET, Exec::Shard(set))
        .custom_keys(set_keys);
    table.add(&meta::SETNX, Exec::Shard(setnx));
    table.add(&meta::SETEX, Exec::Shard(setex));
    table.add(&meta::PSETEX, Exec::Shard(psetex));
    table.add(&meta::GETSET, Exec::Shard(getset));
    table.add(&meta::GETDEL, Exec::Shard(getdel));
    table.add(&meta::GETEX, Exec::Shard(getex));
    table
        .add(&meta::MGET, Exec::Shard(mget))
        .cross_shard(mget_plan, Locking::Keys);
    table
        .add(&meta::MSET, Exec::Shard(mset))
        .cross_shard(mset_plan, Locking::Keys);
    table
        .add(&meta::MSETNX, Exec::Shard(msetnx))
        .cross_shard(msetnx_plan, Locking::Keys);
    table.add(&meta::APPEND, Exec::Shard(append));
    table.add(&meta::STRLEN, Exec::Shard(strlen));
    table.add(&meta::INCR, Exec::Shard(incr));
    table.add(&meta::DECR, Exec::Shard(decr));
    table.add(&meta::INCRBY, Exec::Shard(incrby));
    table.add(&meta::DECRBY, Exec::Shard(decrby));
    table.add(&meta::INCRBYFLOAT, Exec::Shard(incrbyfloat));
    table.add(&meta::GETRANGE, Exec::Shard(getrange));
    table.add(&meta::SUBSTR, Exec::Shard(getrange));
    table.add(&meta::SETRANGE, Exec::Shard(setrange));
    table
        .add(&meta::LCS, Exec::Shard(lcs))
        .cross_shard(lcs_plan, Locking::Keys);
}

/// What a key holds, for string commands: its string value, nothing, or another type.
pub(crate) enum Str<'a> {
    Value(&'a [u8]),
    Absent,
    WrongType,
}

/// What `key` holds at `now`, and its expiry.
pub(crate) fn lookup<'a>(
    db: &'a mut Keyspace,
    key: &[u8],
    now: Millis,
) -> (Str<'a>, Option<Millis>) {
    match db.get(key, now) {
        None => (Str::Absent, None),
        Some(entry) => {
            let expire = entry.expire_at();
            match entry.value().as_str() {
                Some(s) => (Str::Value(s), expire),
                None => (Str::WrongType, expire),
            }
        }
    }
}

/// What a string read found, owned (a plan's hop sends it to the coordinator).
#[derive(Debug)]
pub(crate) enum StrRead {
    Value(Vec<u8>),
    Absent,
    WrongType,
}

impl StrRead {
    /// Reads `key` as GET does.
    pub(crate) fn of(db: &mut Keyspace, key: &[u8], now: Millis) -> StrRead {
        match lookup(db, key, now).0 {
            Str::Value(v) => StrRead::Value(v.to_vec()),
            Str::Absent => StrRead::Absent,
            Str::WrongType => StrRead::WrongType,
        }
    }

    /// Replies as GET does.
    pub(crate) fn reply(&self, e: &mut Encoder<'_>) {
        match self {
            StrRead::Value(v) => e.bulk(v),
            StrRead::Absent => e.null(),
            StrRead::WrongType => e.error(errors::WRONGTYPE),
        }
    }
}

/// Replies as GET does; false after a WRONGTYPE error (Redis's `getGenericCommand`).
pub(crate) fn reply_get(ctx: &mut ShardCtx<'_>, key: &[u8]) -> bool {
    match ctx.db.get(key, ctx.now) {
        None => ctx.out.null(),
        Some(entry) => match entry.value().as_str() {
            Some(s) => ctx.out.bulk(s),
            None => {
                ctx.out.error(errors::WRONGTYPE);
                return false;
            }
        },
    }
    true
}

/// SET's keys (`setGetKeys`): the key is read as well as overwritten when an argument
/// after the value is GET (compared as C compares it: up to a NUL byte). SET's key spec
/// has `variable_flags`: its flags depend on the arguments.
fn set_keys(args: &Args<'_>, found: &mut dyn FnMut(usize, KeyFlags)) -> Result<(), InvalidKeys> {
    let get = args
        .iter_from(3)
        .any(|a| is_keyword(a, "get") || is_keyword(a, "ifeq") || is_keyword(a, "ifne"));
    let flags = if get {
        KeyFlags::RW | KeyFlags::ACCESS | KeyFlags::UPDATE
    } else {
        KeyFlags::OW | KeyFlags::UPDATE
    };
    found(1, flags);
    Ok(())
}

/// `GET key`
fn get(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    reply_get(ctx, args.get(1));
}

/// SET's condition: on the key's existence (NX, XX), or on its value (Redis 8.4's IFEQ
/// and IFNE: compare-and-set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Condition<'a> {
    Always,
    IfAbsent,
    IfPresent,
    /// IFEQ: only a string equal to this is replaced; a missing key is not created.
    IfEqual(&'a [u8]),
    /// IFNE: anything but a string equal to this is replaced; a missing key is created.
    IfNotEqual(&'a [u8]),
}

/// The options of SET and GETEX, as Redis's `parseExtendedStringArgumentsOrReply` reads
/// them: in any order, conflicting ones a syntax error, the expiry value kept unparsed
/// until every option has been read.
struct Extended<'a> {
    condition: Condition<'a>,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    expire: Option<(&'a [u8], ExpireUnit)>,
}

/// Which command the options are for: SET takes NX, XX, GET and KEEPTTL; GETEX takes
/// PERSIST.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExtendedFor {
    Set,
    GetEx,
}

/// Reads the options from argument `from` on. A word is taken as the first option it
/// names whose conflicts allow it, else it is a syntax error; an expiry unit needs its
/// value after it, and may repeat (the last value counts) but not change. The conditions
/// (NX, XX, IFEQ, IFNE) exclude each other; IFEQ and IFNE need their value, and may
/// repeat (the last value counts).
fn parse_extended<'a>(
    args: &Args<'a>,
    from: usize,
    cmd: ExtendedFor,
) -> Result<Extended<'a>, ErrorReply> {
    let mut o = Extended {
        condition: Condition::Always,
        get: false,
        keep_ttl: false,
        persist: false,
        expire: None,
    };
    let set = cmd == ExtendedFor::Set;
    let mut c = args.cursor(from);
    while let Some(opt) = c.next() {
        let is = |word: &str| is_keyword(opt, word);
        let unit = [
            ("EX", ExpireUnit::Seconds),
            ("PX", ExpireUnit::Millis),
            ("EXAT", ExpireUnit::UnixSeconds),
            ("PXAT", ExpireUnit::UnixMillis),
        ]
        .into_iter()
        .find(|(word, _)| is(word))
        .map(|(_, unit)| unit);
        let condition_free = |allowed: fn(&Condition<'_>) -> bool| {
            o.condition == Condition::Always || allowed(&o.condition)
        };
        if set && is("NX") && condition_free(|c| *c == Condition::IfAbsent) {
            o.condition = Condition::IfAbsent;
        } else if set && is("XX") && condition_free(|c| *c == Condition::IfPresent) {
            o.condition = Condition::IfPresent;
        } else if set
            && is("IFEQ")
            && !c.is_empty()
            && condition_free(|c| matches!(c, Condition::IfEqual(_)))
        {
            o.condition = Condition::IfEqual(c.next_arg()?);
        } else if set
            && is("IFNE")
            && !c.is_empty()
            && condition_free(|c| matches!(c, Condition::IfNotEqual(_)))
        {
            o.condition = Condition::IfNotEqual(c.next_arg()?);
        } else if set && is("GET") {
            o.get = true;
        } else if set && is("KEEPTTL") && !o.persist && o.expire.is_none() {
            o.keep_ttl = true;
        } else if !set && is("PERSIST") && !o.keep_ttl && o.expire.is_none() {
            o.persist = true;
        } else if let Some(unit) = unit.filter(|&u| {
            !o.keep_ttl && !o.persist && !c.is_empty() && o.expire.is_none_or(|(_, p)| p == u)
        }) {
            o.expire = Some((c.next_arg()?, unit));
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok(o)
}

/// `SET key value [NX|XX|IFEQ v|IFNE v] [GET] [EX|PX|EXAT|PXAT time|KEEPTTL]`
fn set(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let opts = match parse_extended(args, 3, ExtendedFor::Set) {
        Ok(opts) => opts,
        Err(e) => return e.send(&mut ctx.out),
    };
    let deadline = match opts.expire {
        None => None,
        Some((value, unit)) => match parse_expire(value, unit, ctx.now, "set") {
            Ok(at) => Some(at),
            Err(e) => return e.send(&mut ctx.out),
        },
    };
    let (key, value) = (args.get(1), args.get(2));
    let compares = matches!(
        opts.condition,
        Condition::IfEqual(_) | Condition::IfNotEqual(_)
    );
    let (blocked, old_expire) = {
        let (current, expire) = lookup(ctx.db, key, ctx.now);
        if matches!(current, Str::WrongType) && (opts.get || compares) {
            return ctx.out.error(errors::WRONGTYPE);
        }
        if opts.get {
            match current {
                Str::Value(old) => ctx.out.bulk(old),
                Str::Absent | Str::WrongType => ctx.out.null(),
            }
        }
        let found = !matches!(current, Str::Absent);
        let blocked = match (opts.condition, current) {
            (Condition::Always, _) => false,
            (Condition::IfAbsent, _) => found,
            (Condition::IfPresent, _) => !found,
            (Condition::IfEqual(want), Str::Value(v)) => v != want,
            (Condition::IfEqual(_), _) => true,
            (Condition::IfNotEqual(want), Str::Value(v)) => v == want,
            (Condition::IfNotEqual(_), _) => false,
        };
        (blocked, expire)
    };
    if blocked {
        if !opts.get {
            ctx.out.null();
        }
        return;
    }
    let expire_at = if opts.keep_ttl { old_expire } else { deadline };
    ctx.db.set_str(key, value, expire_at, ctx.now);
    if let Some(at) = deadline {
        // Replayed later, a relative expiry would count from then.
        log_set_pxat(ctx, key, value, at);
    } else if compares && opts.keep_ttl {
        // The condition held: what it did is a plain SET.
        ctx.log(&[b"SET", key, value, b"KEEPTTL"]);
    } else if compares {
        ctx.log(&[b"SET", key, value]);
    }
    if !opts.get {
        ctx.out.ok();
    }
}

/// Logs `SET key value PXAT at`: the deterministic form of a SET with an expiry.
pub(crate) fn log_set_pxat(ctx: &mut ShardCtx<'_>, key: &[u8], value: &[u8], at: Millis) {
    if ctx.logging() {
        ctx.log(&[b"SET", key, value, b"PXAT", &decimal(at as i64)]);
    }
}

/// `SETNX key value`: 1 when it set the key, 0 when the key existed.
fn setnx(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if ctx.db.contains(args.get(1), ctx.now) {
        return ctx.out.integer(0);
    }
    ctx.db.set_str(args.get(1), args.get(2), None, ctx.now);
    ctx.out.integer(1);
}

/// `SETEX key seconds value` and `PSETEX key milliseconds value`.
fn set_with_expire(ctx: &mut ShardCtx<'_>, args: &Args<'_>, unit: ExpireUnit, name: &str) {
    let at = match parse_expire(args.get(2), unit, ctx.now, name) {
        Ok(at) => at,
        Err(e) => return e.send(&mut ctx.out),
    };
    ctx.db.set_str(args.get(1), args.get(3), Some(at), ctx.now);
    log_set_pxat(ctx, args.get(1), args.get(3), at);
    ctx.out.ok();
}

/// `SETEX key seconds value`
fn setex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    set_with_expire(ctx, args, ExpireUnit::Seconds, "setex");
}

/// `PSETEX key milliseconds value`
fn psetex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    set_with_expire(ctx, args, ExpireUnit::Millis, "psetex");
}

/// `GETSET key value`: the old value, and the key set without expiry.
fn getset(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if reply_get(ctx, args.get(1)) {
        ctx.db.set_str(args.get(1), args.get(2), None, ctx.now);
        // Logged (and sent to replicas) as SET, as redis-server propagates it.
        ctx.log(&[b"SET", args.get(1), args.get(2)]);
    }
}

/// `GETDEL key`: the value, and the key deleted.
fn getdel(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if reply_get(ctx, args.get(1)) && ctx.db.delete(args.get(1), ctx.now) {
        ctx.log(&[b"DEL", args.get(1)]);
    }
}

/// `GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]`: the value, and its expiry changed.
fn getex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let opts = match parse_extended(args, 2, ExtendedFor::GetEx) {
        Ok(opts) => opts,
        Err(e) => return e.send(&mut ctx.out),
    };
    let key = args.get(1);
    match lookup(ctx.db, key, ctx.now).0 {
        Str::Absent => return ctx.out.null(),
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Value(_) => {}
    }
    let deadline = match opts.expire {
        None => None,
        Some((value, unit)) => match parse_expire(value, unit, ctx.now, "getex") {
            Ok(at) => Some((at, unit)),
            Err(e) => return e.send(&mut ctx.out),
        },
    };
    reply_get(ctx, key);
    match deadline {
        // An absolute time already past deletes the key.
        // (On a replica the deadline is kept: its master's DEL removes the key.)
        Some((at, ExpireUnit::UnixSeconds | ExpireUnit::UnixMillis))
            if at <= ctx.now && ctx.db.expires() =>
        {
            ctx.db.delete(key, ctx.now);
            ctx.log(&[b"DEL", key]);
        }
        Some((at, _)) => {
            ctx.db.set_expire(key, Some(at), ctx.now);
            if ctx.logging() {
                ctx.log(&[b"PEXPIREAT", key, &decimal(at as i64)]);
            }
        }
        None if opts.persist => {
            ctx.db.set_expire(key, None, ctx.now);
            ctx.log(&[b"PERSIST", key]);
        }
        None => {}
    }
}

/// `MGET key [key ...]`: values, nil for absent keys and non-strings.
fn mget(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    ctx.out.array(args.len() - 1);
    for key in args.iter_from(1) {
        match ctx.db.get(key, ctx.now).and_then(|e| e.value().as_str()) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        }
    }
}

/// MSET and MSETNX take key/value pairs: an odd pair count is an arity error.
fn pairs_ok(ctx: &mut ShardCtx<'_>, args: &Args<'_>, name: &str) -> bool {
    if args.len().is_multiple_of(2) {
        ctx.out.error(&errors::wrong_arity(name));
        return false;
    }
    true
}

fn set_pairs(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    for i in (1..args.len().saturating_sub(1)).step_by(2) {
        ctx.db.set_str(args.get(i), args.get(i + 1), None, ctx.now);
    }
}

/// `MSET key value [key value ...]`
fn mset(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if pairs_ok(ctx, args, "mset") {
        set_pairs(ctx, args);
        ctx.out.ok();
    }
}

/// `MSETNX key value [key value ...]`: sets all the keys only if none exists.
fn msetnx(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if !pairs_ok(ctx, args, "msetnx") {
        return;
    }
    let any = (1..args.len())
        .step_by(2)
        .any(|i| ctx.db.contains(args.get(i), ctx.now));
    if any {
        return ctx.out.integer(0);
    }
    set_pairs(ctx, args);
    ctx.out.integer(1);
}

/// MGET's part on one shard: each key's string value, or nothing.
fn mget_part(ctx: &mut ShardCtx<'_>, keys: &[Vec<u8>]) -> HopOut {
    HopOut::Bulks(
        keys.iter()
            .map(|k| {
                ctx.db
                    .get(k, ctx.now)
                    .and_then(|e| e.value().as_str().map(<[u8]>::to_vec))
            })
            .collect(),
    )
}

/// MSET's part on one shard: its key/value pairs.
fn mset_part(ctx: &mut ShardCtx<'_>, pairs: &[Vec<u8>]) -> HopOut {
    for kv in pairs.chunks_exact(2) {
        ctx.db.set_str(&kv[0], &kv[1], None, ctx.now);
    }
    if ctx.logging() {
        let mut argv: Vec<&[u8]> = vec![b"MSET"];
        argv.extend(pairs.iter().map(Vec::as_slice));
        ctx.log(&argv);
    }
    HopOut::Done
}

/// How many of its keys exist on one shard (MSETNX's check).
fn exists_part(ctx: &mut ShardCtx<'_>, pairs: &[Vec<u8>]) -> HopOut {
    let found = pairs
        .chunks_exact(2)
        .filter(|kv| ctx.db.contains(&kv[0], ctx.now))
        .count();
    HopOut::Int(found as i64)
}

/// MGET across shards: each shard reads its keys, the values go back in argument order.
fn mget_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(Split::new(
        start.args,
        1,
        1,
        start.slots,
        mget_part,
        merge_values_in_order,
    )))
}

/// MSET across shards: each shard sets its pairs.
fn mset_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    if start.args.len().is_multiple_of(2) {
        return Err(errors::wrong_arity("mset"));
    }
    Ok(Box::new(Split::new(
        start.args,
        1,
        2,
        start.slots,
        mset_part,
        merge_ok,
    )))
}

/// MSETNX across shards: every shard counts its existing keys; if none exists, each sets
/// its pairs.
fn msetnx_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    if start.args.len().is_multiple_of(2) {
        return Err(errors::wrong_arity("msetnx"));
    }
    let mut check = Split::new(start.args, 1, 2, start.slots, exists_part, merge_ok);
    let sets = Split::new(start.args, 1, 2, start.slots, mset_part, merge_ok);
    let reads = check.hops();
    Ok(Box::new(ReadThenWrite::new(sets, reads, decide_msetnx)))
}

fn decide_msetnx(sets: &mut Split, cx: &PlanCx<'_>, existing: Vec<HopOut>) -> Decision {
    if sum(&existing) > 0 {
        return Decision::Reply(cx.reply(|e| e.integer(0)));
    }
    Decision::Write(sets.hops(), cx.reply(|e| e.integer(1)))
}

/// Replaces a string's value keeping its expiry, marking it `raw` (APPEND and SETRANGE
/// leave Redis's strings raw-encoded, which OBJECT ENCODING shows).
fn store_raw(ctx: &mut ShardCtx<'_>, key: &[u8], value: &[u8], expire: Option<Millis>) {
    ctx.db.set_str(key, value, expire, ctx.now);
    ctx.db.add_flags(key, RAW, ctx.now);
}

/// `APPEND key value`: the new length.
fn append(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (key, tail) = (args.get(1), args.get(2));
    let max = ctx.max_string;
    let (current, expire) = lookup(ctx.db, key, ctx.now);
    let new = match current {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => {
            ctx.db.set_str(key, tail, None, ctx.now);
            return ctx.out.integer(tail.len() as i64);
        }
        Str::Value(old) if old.len() + tail.len() > max => {
            return ctx.out.error(errors::STRING_TOO_BIG);
        }
        Str::Value(old) => old.len() + tail.len(),
    };
    // A long string is boxed: grow it in place, amortized.
    let grown = ctx.db.modify(key, ctx.now, |v| match v {
        ValueMut::Boxed(Value::Str(s)) => {
            s.extend_from_slice(tail);
            (true, true)
        }
        _ => (false, false),
    });
    if grown == Some(true) {
        ctx.db.add_flags(key, RAW, ctx.now);
        return ctx.out.integer(new as i64);
    }
    let mut joined = match lookup(ctx.db, key, ctx.now).0 {
        Str::Value(old) => old.to_vec(),
        _ => Vec::new(),
    };
    joined.extend_from_slice(tail);
    store_raw(ctx, key, &joined, expire);
    ctx.out.integer(joined.len() as i64);
}

/// `STRLEN key`
fn strlen(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match lookup(ctx.db, args.get(1), ctx.now).0 {
        Str::Value(s) => {
            let n = s.len() as i64;
            ctx.out.integer(n);
        }
        Str::Absent => ctx.out.integer(0),
        Str::WrongType => ctx.out.error(errors::WRONGTYPE),
    }
}

/// INCR, DECR, INCRBY, DECRBY: add `delta` to the integer the key holds (0 when absent),
/// keeping its expiry.
fn incr_by(ctx: &mut ShardCtx<'_>, key: &[u8], delta: i64) {
    let (current, expire) = lookup(ctx.db, key, ctx.now);
    let old = match current {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => 0,
        Str::Value(s) => match parse_i64(s) {
            Some(n) => n,
            None => return ctx.out.error(errors::NOT_INTEGER),
        },
    };
    let Some(new) = old.checked_add(delta) else {
        return ctx.out.error(errors::INCR_OVERFLOW);
    };
    let mut buf = itoa::Buffer::new();
    ctx.db
        .set_str(key, buf.format(new).as_bytes(), expire, ctx.now);
    ctx.out.integer(new);
}

/// `INCR key`
fn incr(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    incr_by(ctx, args.get(1), 1);
}

/// `DECR key`
fn decr(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    incr_by(ctx, args.get(1), -1);
}

/// `INCRBY key increment`
fn incrby(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match parse_i64(args.get(2)) {
        Some(delta) => incr_by(ctx, args.get(1), delta),
        None => ctx.out.error(errors::NOT_INTEGER),
    }
}

/// `DECRBY key decrement`
fn decrby(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match parse_i64(args.get(2)) {
        Some(i64::MIN) => ctx.out.error(errors::DECR_OVERFLOW),
        Some(delta) => incr_by(ctx, args.get(1), -delta),
        None => ctx.out.error(errors::NOT_INTEGER),
    }
}

/// `INCRBYFLOAT key increment`, in `long double` as Redis computes it.
fn incrbyfloat(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let key = args.get(1);
    let (current, expire) = lookup(ctx.db, key, ctx.now);
    let old = match current {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => LongDouble::parse(b"0"),
        Str::Value(s) => LongDouble::parse(s),
    };
    let (Some(old), Some(delta)) = (old, LongDouble::parse(args.get(2))) else {
        return ctx.out.error(errors::NOT_FLOAT);
    };
    let sum = old + delta;
    if sum.is_infinite() {
        return ctx.out.error(errors::INCR_NAN_OR_INFINITY);
    }
    let text = sum.to_human();
    ctx.db.set_str(key, text.as_bytes(), expire, ctx.now);
    // Redis stores the result as a plain string, never integer-encoded.
    ctx.db.add_flags(key, NOT_INT, ctx.now);
    // Replayed, the float arithmetic could round differently: log the result.
    ctx.log(&[b"SET", key, text.as_bytes(), b"KEEPTTL"]);
    ctx.out.bulk(text.as_bytes());
}

/// `GETRANGE key start end` (and its old name SUBSTR): Redis's index rules, an empty
/// string when the range is empty or the key absent.
fn getrange(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (Some(mut start), Some(mut end)) = (parse_i64(args.get(2)), parse_i64(args.get(3))) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    let s = match lookup(ctx.db, args.get(1), ctx.now).0 {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => return ctx.out.bulk(b""),
        Str::Value(s) => s,
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return ctx.out.bulk(b"");
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return ctx.out.bulk(b"");
    }
    let piece = s.get(start as usize..=end as usize).unwrap_or(b"").to_vec();
    ctx.out.bulk(&piece);
}

/// `SETRANGE key offset value`: the new length.
fn setrange(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(offset) = parse_i64(args.get(2)) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    if offset < 0 {
        return ctx.out.error(errors::OFFSET_OUT_OF_RANGE);
    }
    let (key, patch) = (args.get(1), args.get(3));
    let max = ctx.max_string;
    let (current, expire) = lookup(ctx.db, key, ctx.now);
    let len = match current {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent if patch.is_empty() => return ctx.out.integer(0),
        Str::Value(s) if patch.is_empty() => {
            let n = s.len() as i64;
            return ctx.out.integer(n);
        }
        Str::Absent => 0,
        Str::Value(s) => s.len(),
    };
    // The length is checked before anything is copied or grown.
    let Some(end) = (offset as usize)
        .checked_add(patch.len())
        .filter(|&e| e <= max)
    else {
        return ctx.out.error(errors::STRING_TOO_BIG);
    };
    let start = offset as usize;
    let new_len = len.max(end) as i64;
    // A long string is boxed: patch it in place, as APPEND grows it.
    let patched = ctx.db.modify(key, ctx.now, |v| match v {
        ValueMut::Boxed(Value::Str(s)) => {
            if s.len() < end {
                s.resize(end, 0);
            }
            s[start..end].copy_from_slice(patch);
            (true, true)
        }
        _ => (false, false),
    });
    if patched == Some(true) {
        ctx.db.add_flags(key, RAW, ctx.now);
        return ctx.out.integer(new_len);
    }
    let mut new = match lookup(ctx.db, key, ctx.now).0 {
        Str::Value(old) => old.to_vec(),
        _ => Vec::new(),
    };
    if new.len() < end {
        new.resize(end, 0);
    }
    new[start..end].copy_from_slice(patch);
    store_raw(ctx, key, &new, expire);
    ctx.out.integer(new_len);
}

/// A string command's operand: its bytes (a missing key is empty); `None` for another
/// type.
pub(crate) fn string_or_empty(ctx: &mut ShardCtx<'_>, key: &[u8]) -> Option<Vec<u8>> {
    match lookup(ctx.db, key, ctx.now).0 {
        Str::WrongType => None,
        Str::Absent => Some(Vec::new()),
        Str::Value(s) => Some(s.to_vec()),
    }
}

const LCS_NOT_STRINGS: &[u8] = b"ERR The specified keys must contain string values";
const LCS_LEN_AND_IDX: &[u8] = b"ERR If you want both the length and indexes, please just use IDX.";
const LCS_TOO_LONG: &[u8] = b"ERR String too long for LCS";
const LCS_OVER_LIMIT: &[u8] =
    b"ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
const LCS_NO_MEMORY: &[u8] = b"ERR Insufficient memory, failed allocating transient memory for LCS";

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`, its keys on this shard.
fn lcs(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let a = string_or_empty(ctx, args.get(1));
    let b = string_or_empty(ctx, args.get(2));
    let max = ctx.max_string;
    reply_lcs(
        &mut ctx.out,
        lcs_options(args),
        a.as_deref(),
        b.as_deref(),
        max,
    );
}

/// LCS with its keys on two shards: each is read under its lock, the answer computed
/// on the coordinator.
fn lcs_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let reads = [args.get(1), args.get(2)]
        .into_iter()
        .map(|key| {
            let key = key.to_vec();
            Hop::run(start.slots.shard_of_key(&key), move |ctx| {
                HopOut::Bulks(vec![string_or_empty(ctx, &key)])
            })
        })
        .collect();
    let options = lcs_options(args);
    Ok(Box::new(ReadThenWrite::new(options, reads, decide_lcs)))
}

type LcsParsed = Result<LcsOptions, &'static [u8]>;

fn decide_lcs(options: &mut LcsParsed, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Decision {
    let mut values = results.into_iter().map(|out| match out {
        HopOut::Bulks(mut v) => v.pop().flatten(),
        _ => None,
    });
    let (a, b) = (values.next().flatten(), values.next().flatten());
    let options = std::mem::replace(options, Err(errors::SYNTAX));
    let max = cx.shared.client_limits.max_bulk_len();
    Decision::Reply(cx.reply(|out| reply_lcs(out, options, a.as_deref(), b.as_deref(), max)))
}

/// LCS's options, checked in Redis's order.
#[derive(Debug, Default)]
struct LcsOptions {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn lcs_options(args: &Args<'_>) -> Result<LcsOptions, &'static [u8]> {
    let mut o = LcsOptions::default();
    let mut j = 3;
    while j < args.len() {
        let word = args.get(j);
        if is_keyword(word, "IDX") {
            o.idx = true;
        } else if is_keyword(word, "LEN") {
            o.len = true;
        } else if is_keyword(word, "WITHMATCHLEN") {
            o.with_match_len = true;
        } else if is_keyword(word, "MINMATCHLEN") && j + 1 < args.len() {
            let n = parse_i64(args.get(j + 1)).ok_or(errors::NOT_INTEGER)?;
            o.min_match_len = n.max(0) as u64;
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    if o.idx && o.len {
        return Err(LCS_LEN_AND_IDX);
    }
    Ok(o)
}

/// Replies LCS of `a` and `b` (`None`: a key of another type) with its `options` (or
/// their error, replied after the keys' type is checked) as `lcsCommand` does: the
/// dynamic-programming table of prefix LCS lengths, walked back from its corner to
/// build the string and the matching ranges (from the end of the strings).
fn reply_lcs(
    out: &mut Encoder<'_>,
    options: LcsParsed,
    a: Option<&[u8]>,
    b: Option<&[u8]>,
    max: usize,
) {
    let (Some(a), Some(b)) = (a, b) else {
        return out.error(LCS_NOT_STRINGS);
    };
    let o = match options {
        Ok(o) => o,
        Err(e) => return out.error(e),
    };
    if a.len() as u64 >= u64::from(u32::MAX - 1) || b.len() as u64 >= u64::from(u32::MAX - 1) {
        return out.error(LCS_TOO_LONG);
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.saturating_mul(4) > max as u64 {
        return out.error(LCS_OVER_LIMIT);
    }
    let mut dp: Vec<u32> = Vec::new();
    if dp.try_reserve_exact(cells as usize).is_err() {
        return out.error(LCS_NO_MEMORY);
    }
    dp.resize(cells as usize, 0);
    let w = blen + 1;
    for i in 1..=alen {
        for j in 1..=blen {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[alen * w + blen];
    if o.len {
        return out.integer(i64::from(total));
    }
    // Walk back from the corner: the string (built from its end) and, for IDX, the
    // ranges in the order Redis emits them. `None`: no range open.
    let mut result = vec![0u8; total as usize];
    let mut ranges: Vec<[usize; 4]> = Vec::new();
    let mut open: Option<[usize; 4]> = None; // a_start, a_end, b_start, b_end
    let (mut i, mut j, mut k) = (alen, blen, total as usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[k - 1] = a[i - 1];
            match &mut open {
                None => open = Some([i - 1, i - 1, j - 1, j - 1]),
                // Contiguous with the open range: extend it backwards.
                Some(r) if r[0] == i && r[2] == j => {
                    r[0] -= 1;
                    r[2] -= 1;
                }
                // Redis emits the open range here and drops this match from the ranges.
                Some(_) => emit = true,
            }
            if open.is_some_and(|r| r[0] == 0 || r[2] == 0) {
                emit = true;
            }
            k -= 1;
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit |= open.is_some();
        }
        if emit && let Some(r) = open.take() {
            let len = (r[1] - r[0] + 1) as u64;
            if o.min_match_len == 0 || len >= o.min_match_len {
                ranges.push(r);
            }
        }
    }
    if !o.idx {
        return out.bulk(&result);
    }
    out.map(2);
    out.bulk(b"matches");
    out.array(ranges.len());
    for r in &ranges {
        out.array(if o.with_match_len { 3 } else { 2 });
        out.array(2);
        out.integer(r[0] as i64);
        out.integer(r[1] as i64);
        out.array(2);
        out.integer(r[2] as i64);
        out.integer(r[3] as i64);
        if o.with_match_len {
            out.integer((r[1] - r[0] + 1) as i64);
        }
    }
    out.bulk(b"len");
    out.integer(i64::from(total));
}
