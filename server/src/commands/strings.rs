//! String commands: GET, SET, SETNX, SETEX, PSETEX, MGET, MSET, MSETNX.

use goblin_store::{Millis, Value};

use crate::command::meta;
use crate::command::{CommandTable, MultiKey};
use crate::errors;
use crate::exec::{Args, Exec, ShardCtx};

use super::{ExpireUnit, parse_expire};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::GET, Exec::Shard(get));
    table.add(&meta::SET, Exec::Shard(set));
    table.add(&meta::SETNX, Exec::Shard(setnx));
    table.add(&meta::SETEX, Exec::Shard(setex));
    table.add(&meta::PSETEX, Exec::Shard(psetex));
    table.add_multi(&meta::MGET, Exec::Shard(mget), MultiKey::Mget);
    table.add_multi(&meta::MSET, Exec::Shard(mset), MultiKey::AllOk);
    table.add_multi(&meta::MSETNX, Exec::Shard(msetnx), MultiKey::MsetNx);
}

/// `GET key`
fn get(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match ctx.db.get(args.get(1), ctx.now) {
        None => ctx.out.null(),
        Some(entry) => match entry.value.as_str() {
            Some(s) => ctx.out.bulk(s),
            None => ctx.out.error(errors::WRONGTYPE),
        },
    }
}

/// SET's condition on the key's existence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Condition {
    Always,
    IfAbsent,
    IfPresent,
}

/// What SET does with the expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetExpire {
    /// Remove any expiry.
    Clear,
    /// `KEEPTTL`.
    Keep,
    /// Expire at this time.
    At(Millis),
}

/// SET's parsed options.
#[derive(Debug)]
struct SetOptions {
    condition: Condition,
    get: bool,
    expire: SetExpire,
}

/// Parses `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]` the way
/// redis-server 7 does (`parseExtendedStringArgumentsOrReply`): options in any order,
/// conflicting ones a syntax error, the expiry value checked only after every option
/// parsed.
fn parse_set(args: &Args<'_>, now: Millis) -> Result<SetOptions, Vec<u8>> {
    let mut opts = SetOptions {
        condition: Condition::Always,
        get: false,
        expire: SetExpire::Clear,
    };
    let mut expire: Option<(&[u8], ExpireUnit)> = None;
    let mut keep_ttl = false;
    let mut j = 3;
    while j < args.len() {
        let has_next = j + 1 < args.len();
        let unit = [
            ("EX", ExpireUnit::Seconds),
            ("PX", ExpireUnit::Millis),
            ("EXAT", ExpireUnit::UnixSeconds),
            ("PXAT", ExpireUnit::UnixMillis),
        ]
        .into_iter()
        .find(|(word, _)| args.is(j, word))
        .map(|(_, unit)| unit);
        if args.is(j, "NX") && opts.condition != Condition::IfPresent {
            opts.condition = Condition::IfAbsent;
        } else if args.is(j, "XX") && opts.condition != Condition::IfAbsent {
            opts.condition = Condition::IfPresent;
        } else if args.is(j, "GET") {
            opts.get = true;
        } else if args.is(j, "KEEPTTL") && expire.is_none() {
            keep_ttl = true;
        } else if let Some(unit) =
            unit.filter(|&u| !keep_ttl && has_next && expire.is_none_or(|(_, prev)| prev == u))
        {
            expire = Some((args.get(j + 1), unit));
            j += 1;
        } else {
            return Err(errors::SYNTAX.to_vec());
        }
        j += 1;
    }
    if let Some((value, unit)) = expire {
        opts.expire = SetExpire::At(parse_expire(value, unit, now, "set")?);
    } else if keep_ttl {
        opts.expire = SetExpire::Keep;
    }
    Ok(opts)
}

/// `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT time|KEEPTTL]`
fn set(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let opts = match parse_set(args, ctx.now) {
        Ok(opts) => opts,
        Err(e) => return ctx.out.error(&e),
    };
    let (key, value) = (args.get(1), args.get(2));
    let existing = ctx.db.get(key, ctx.now);
    let found = existing.is_some();
    let old_expire = existing.and_then(|e| e.expire_at());
    if opts.get {
        match existing.map(|e| e.value.as_str()) {
            None => ctx.out.null(),
            Some(Some(old)) => ctx.out.bulk(old),
            Some(None) => return ctx.out.error(errors::WRONGTYPE),
        }
    }
    let blocked = match opts.condition {
        Condition::Always => false,
        Condition::IfAbsent => found,
        Condition::IfPresent => !found,
    };
    if blocked {
        if !opts.get {
            ctx.out.null();
        }
        return;
    }
    let expire_at = match opts.expire {
        SetExpire::Clear => None,
        SetExpire::Keep => old_expire,
        SetExpire::At(at) => Some(at),
    };
    ctx.db
        .insert(key, Value::Str(value.to_vec()), expire_at, ctx.now);
    if !opts.get {
        ctx.out.ok();
    }
}

/// `SETNX key value`: 1 when it set the key, 0 when the key existed.
fn setnx(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if ctx.db.contains(args.get(1), ctx.now) {
        return ctx.out.integer(0);
    }
    ctx.db
        .insert(args.get(1), Value::Str(args.get(2).to_vec()), None, ctx.now);
    ctx.out.integer(1);
}

/// `SETEX key seconds value` and `PSETEX key milliseconds value`.
fn set_with_expire(ctx: &mut ShardCtx<'_>, args: &Args<'_>, unit: ExpireUnit, name: &str) {
    let at = match parse_expire(args.get(2), unit, ctx.now, name) {
        Ok(at) => at,
        Err(e) => return ctx.out.error(&e),
    };
    ctx.db.insert(
        args.get(1),
        Value::Str(args.get(3).to_vec()),
        Some(at),
        ctx.now,
    );
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

/// `MGET key [key ...]`: values, nil for absent keys and non-strings.
fn mget(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    ctx.out.array(args.len() - 1);
    for key in args.iter_from(1) {
        match ctx.db.get(key, ctx.now).and_then(|e| e.value.as_str()) {
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
    let mut i = 1;
    while i + 1 < args.len() {
        ctx.db.insert(
            args.get(i),
            Value::Str(args.get(i + 1).to_vec()),
            None,
            ctx.now,
        );
        i += 2;
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
