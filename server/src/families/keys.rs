//! Keyspace commands: DEL, UNLINK, EXISTS, TOUCH, TYPE, TTL, PTTL, EXPIRE, PEXPIRE,
//! EXPIREAT, PEXPIREAT, PERSIST, EXPIRETIME, PEXPIRETIME, RENAME, RENAMENX, KEYS, SCAN,
//! RANDOMKEY.

use goblin_protocol::{Frame, parse_reply};
use goblin_store::{NOT_INT, RAW, SLOTS, UNSHARED, ValueRef};

use crate::errors;
use crate::table::handler::{Args, ConnCtx, Exec, ShardCtx};
use crate::table::meta;
use crate::table::{CommandTable, MultiKey};
use crate::util::{glob_match, random_u64};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add_multi(&meta::DEL, Exec::Shard(del), MultiKey::Sum);
    table.add_multi(&meta::UNLINK, Exec::Shard(del), MultiKey::Sum);
    table.add_multi(&meta::EXISTS, Exec::Shard(exists), MultiKey::Sum);
    table.add_multi(&meta::TOUCH, Exec::Shard(exists), MultiKey::Sum);
    table.add(&meta::TTL, Exec::Shard(ttl));
    table.add(&meta::PTTL, Exec::Shard(pttl));
    table.add(&meta::TYPE, Exec::Shard(type_cmd));
    table.add(&meta::EXPIRE, Exec::Shard(expire));
    table.add(&meta::PEXPIRE, Exec::Shard(pexpire));
    table.add(&meta::EXPIREAT, Exec::Shard(expireat));
    table.add(&meta::PEXPIREAT, Exec::Shard(pexpireat));
    table.add(&meta::PERSIST, Exec::Shard(persist));
    table.add(&meta::EXPIRETIME, Exec::Shard(expiretime));
    table.add(&meta::PEXPIRETIME, Exec::Shard(pexpiretime));
    table.add_multi(
        &meta::RENAME,
        Exec::Shard(rename),
        MultiKey::Rename { nx: false },
    );
    table.add_multi(&meta::COPY, Exec::Shard(copy), MultiKey::Copy);
    table.add_container(
        &meta::OBJECT,
        Exec::Container,
        &[
            ("encoding", None, Exec::Shard(object_encoding)),
            ("freq", None, Exec::Shard(object_freq)),
            ("idletime", None, Exec::Shard(object_idletime)),
            ("refcount", None, Exec::Shard(object_refcount)),
            ("help", None, Exec::Conn(object_help)),
        ],
    );
    table.add_multi(
        &meta::RENAMENX,
        Exec::Shard(renamenx),
        MultiKey::Rename { nx: true },
    );
    table.add(
        &meta::KEYS,
        Exec::AllShards {
            part: keys_part,
            merge: merge_arrays,
        },
    );
    table.add(&meta::SCAN, Exec::Cursor(scan));
    table.add(
        &meta::RANDOMKEY,
        Exec::AllShards {
            part: randomkey_part,
            merge: randomkey_merge,
        },
    );
}

/// `DEL key [key ...]` and `UNLINK key [key ...]`: how many of the keys existed and were removed.
fn del(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let removed = args
        .iter_from(1)
        .filter(|key| ctx.db.delete(key, ctx.now))
        .count();
    ctx.out.integer(removed as i64);
}

/// `EXISTS key [key ...]` and `TOUCH key [key ...]`: how many of the keys exist,
/// counting repeats.
fn exists(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let found = args
        .iter_from(1)
        .filter(|key| ctx.db.contains(key, ctx.now))
        .count();
    ctx.out.integer(found as i64);
}

/// Remaining time to live in milliseconds: -2 no key, -1 no expiry.
fn remaining_ms(ctx: &mut ShardCtx<'_>, key: &[u8]) -> i64 {
    match ctx.db.get(key, ctx.now) {
        None => -2,
        Some(entry) => match entry.expire_at() {
            None => -1,
            Some(at) => at.saturating_sub(ctx.now) as i64,
        },
    }
}

/// `TTL key`, rounded to the nearest second as Redis rounds it.
fn ttl(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let ms = remaining_ms(ctx, args.get(1));
    ctx.out.integer(if ms < 0 { ms } else { (ms + 500) / 1000 });
}

/// `PTTL key`
fn pttl(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let ms = remaining_ms(ctx, args.get(1));
    ctx.out.integer(ms);
}

/// RENAME and RENAMENX on one shard.
fn rename_generic(ctx: &mut ShardCtx<'_>, args: &Args<'_>, nx: bool) {
    let (src, dst) = (args.get(1), args.get(2));
    if !ctx.db.contains(src, ctx.now) {
        return ctx.out.error(b"ERR no such key");
    }
    if src == dst {
        return if nx { ctx.out.integer(0) } else { ctx.out.ok() };
    }
    if nx && ctx.db.contains(dst, ctx.now) {
        return ctx.out.integer(0);
    }
    if let Some(entry) = ctx.db.remove(src, ctx.now) {
        ctx.db.insert(dst, entry.value, entry.expire_at, ctx.now);
        ctx.db.add_flags(dst, entry.flags, ctx.now);
    }
    if nx { ctx.out.integer(1) } else { ctx.out.ok() }
}

/// `RENAME key newkey`
fn rename(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    rename_generic(ctx, args, false);
}

/// `RENAMENX key newkey`
fn renamenx(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    rename_generic(ctx, args, true);
}

/// KEYS' part: this shard's keys matching the pattern.
fn keys_part(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let pattern = args.get(1);
    let all = pattern == b"*";
    let mut found = Vec::new();
    for slot in ctx.owned.clone() {
        ctx.db.for_each_in_slot(slot as u16, ctx.now, |e| {
            if all || glob_match(pattern, e.key(), false) {
                found.push(e.key().to_vec());
            }
        });
    }
    ctx.out.array(found.len());
    found.iter().for_each(|k| ctx.out.bulk(k));
}

/// Merges parts that each reply an array into one array; the first error wins.
pub fn merge_arrays(ctx: &mut ConnCtx<'_>, _args: &Args<'_>, parts: &[&[u8]]) {
    let mut total = 0usize;
    let mut bodies = Vec::with_capacity(parts.len());
    for part in parts {
        if part.first() != Some(&b'*') {
            return ctx.reply().raw(part);
        }
        let Some(nl) = part.iter().position(|&b| b == b'\n') else {
            continue;
        };
        let count = std::str::from_utf8(&part[1..nl.saturating_sub(1)])
            .ok()
            .and_then(|t| t.parse::<usize>().ok());
        total += count.unwrap_or(0);
        bodies.push(&part[nl + 1..]);
    }
    let mut out = ctx.reply();
    out.array(total);
    bodies.iter().for_each(|b| out.raw(b));
}

/// SCAN's options.
struct ScanOptions<'a> {
    count: usize,
    pattern: Option<&'a [u8]>,
    type_name: Option<&'a [u8]>,
}

fn parse_scan<'a>(args: &Args<'a>) -> Result<ScanOptions<'a>, &'static [u8]> {
    let mut opts = ScanOptions {
        count: 10,
        pattern: None,
        type_name: None,
    };
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i >= 2;
        if args.is(i, "count") && more {
            let n = goblin_protocol::parse_i64(args.get(i + 1)).ok_or(errors::NOT_INTEGER)?;
            if n < 1 {
                return Err(errors::SYNTAX);
            }
            opts.count = n as usize;
        } else if args.is(i, "match") && more {
            let p = args.get(i + 1);
            opts.pattern = (p != b"*").then_some(p);
        } else if args.is(i, "type") && more {
            opts.type_name = Some(args.get(i + 1));
        } else {
            return Err(errors::SYNTAX);
        }
        i += 2;
    }
    Ok(opts)
}

/// A SCAN cursor as Redis reads it (`strtoul`): digits with an optional sign; anything
/// else, or a leading blank, is an invalid cursor.
fn parse_cursor(s: &[u8]) -> Option<u64> {
    // strtoul reads nothing from an empty string: cursor 0.
    if s.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match s.split_first() {
        Some((b'+', rest)) => (false, rest),
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = std::str::from_utf8(digits).ok()?.parse::<u64>().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`.
///
/// The cursor is a hash slot. On one shard, a call returns whole slots — every key the
/// slot holds at that moment — starting at the cursor, until COUNT keys were looked at or
/// the shard's slots end; the next cursor is the next slot (0 after the last slot). The
/// connection's worker carries a call on to the next shards while too few keys were
/// found (`Plan::Scan`), so an empty keyspace answers cursor 0 at once, as Redis does.
/// A key present for the whole iteration is therefore always returned, whatever is added
/// or removed meanwhile, and no key is returned twice unless it is re-added.
fn scan(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(cursor) = parse_cursor(args.get(1)) else {
        return ctx.out.error(b"ERR invalid cursor");
    };
    let opts = match parse_scan(args) {
        Ok(o) => o,
        Err(e) => return ctx.out.error(e),
    };
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut slot = cursor as usize;
    // COUNT bounds the keys looked at (as in Redis), not the keys returned; empty slots
    // cost a length check each.
    let mut visited = 0;
    if slot < SLOTS {
        while slot < ctx.owned.end && visited < opts.count {
            if ctx.db.slot_len(slot as u16) > 0 {
                ctx.db.for_each_in_slot(slot as u16, ctx.now, |e| {
                    visited += 1;
                    let type_ok = opts
                        .type_name
                        .is_none_or(|t| t.eq_ignore_ascii_case(e.value().type_name().as_bytes()));
                    let match_ok = opts.pattern.is_none_or(|p| glob_match(p, e.key(), false));
                    if type_ok && match_ok {
                        keys.push(e.key().to_vec());
                    }
                });
            }
            slot += 1;
        }
    }
    let next = if slot >= SLOTS { 0 } else { slot };
    ctx.out.array(2);
    ctx.out.bulk_int(next as i64);
    ctx.out.array(keys.len());
    keys.iter().for_each(|k| ctx.out.bulk(k));
}

/// RANDOMKEY's part: this shard's key count and one of its keys.
fn randomkey_part(ctx: &mut ShardCtx<'_>, _args: &Args<'_>) {
    let key = ctx.db.random_key(random_u64(), ctx.now);
    ctx.out.array(2);
    ctx.out.integer(ctx.db.len() as i64);
    match key {
        Some(k) => ctx.out.bulk(&k),
        None => ctx.out.null(),
    }
}

/// RANDOMKEY: a shard chosen with odds proportional to its key count, then its key.
fn randomkey_merge(ctx: &mut ConnCtx<'_>, _args: &Args<'_>, parts: &[&[u8]]) {
    let mut candidates: Vec<(u64, Vec<u8>)> = Vec::new();
    for part in parts {
        if let Ok(Some((Frame::Array(items), _))) = parse_reply(part)
            && let [Frame::Integer(n), Frame::Bulk(k)] = items.as_slice()
        {
            candidates.push(((*n).max(1) as u64, k.to_vec()));
        }
    }
    let total: u64 = candidates.iter().map(|(n, _)| n).sum();
    if total == 0 {
        return ctx.reply().null();
    }
    let mut pick = random_u64() % total;
    for (n, key) in &candidates {
        if pick < *n {
            return ctx.reply().bulk(key);
        }
        pick -= n;
    }
    ctx.reply().null();
}

/// `TYPE key`
fn type_cmd(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let name = ctx
        .db
        .get(args.get(1), ctx.now)
        .map_or("none", |e| e.value().type_name());
    ctx.out.simple(name.as_bytes());
}

/// EXPIRE's NX|XX|GT|LT options.
#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_expire_flags(args: &Args<'_>) -> Result<ExpireFlags, Vec<u8>> {
    let mut f = ExpireFlags::default();
    for i in 3..args.len() {
        if args.is(i, "nx") {
            f.nx = true;
        } else if args.is(i, "xx") {
            f.xx = true;
        } else if args.is(i, "gt") {
            f.gt = true;
        } else if args.is(i, "lt") {
            f.lt = true;
        } else {
            let mut msg = b"ERR Unsupported option ".to_vec();
            msg.extend_from_slice(errors::c_str(args.get(i)));
            return Err(msg);
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(
            b"ERR NX and XX, GT or LT options at the same time are not compatible".to_vec(),
        );
    }
    if f.gt && f.lt {
        return Err(b"ERR GT and LT options at the same time are not compatible".to_vec());
    }
    Ok(f)
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (`expireGenericCommand`): `seconds` says the unit,
/// `relative` whether the time counts from now. A time at or before now deletes the key.
fn expire_generic(
    ctx: &mut ShardCtx<'_>,
    args: &Args<'_>,
    seconds: bool,
    relative: bool,
    name: &str,
) {
    let flags = match parse_expire_flags(args) {
        Ok(f) => f,
        Err(e) => return ctx.out.error_sanitized(&e),
    };
    let Some(mut when) = goblin_protocol::parse_i64(args.get(2)) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    if seconds {
        match when.checked_mul(1000) {
            Some(ms) => when = ms,
            None => return ctx.out.error(&errors::invalid_expire(name)),
        }
    }
    let base = if relative { ctx.now as i64 } else { 0 };
    let Some(when) = when.checked_add(base) else {
        return ctx.out.error(&errors::invalid_expire(name));
    };
    let key = args.get(1);
    let Some(entry) = ctx.db.get(key, ctx.now) else {
        return ctx.out.integer(0);
    };
    let current = entry.expire_at().map(|at| at as i64);
    let refused = (flags.nx && current.is_some())
        || (flags.xx && current.is_none())
        || (flags.gt && current.is_none_or(|c| when <= c))
        || (flags.lt && current.is_some_and(|c| when >= c));
    if refused {
        return ctx.out.integer(0);
    }
    if when <= ctx.now as i64 {
        ctx.db.delete(key, ctx.now);
    } else {
        ctx.db.set_expire(key, Some(when as u64), ctx.now);
    }
    ctx.out.integer(1);
}

/// `EXPIRE key seconds [NX|XX|GT|LT]`
fn expire(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    expire_generic(ctx, args, true, true, "expire");
}

/// `PEXPIRE key milliseconds [NX|XX|GT|LT]`
fn pexpire(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    expire_generic(ctx, args, false, true, "pexpire");
}

/// `EXPIREAT key unix-time-seconds [NX|XX|GT|LT]`
fn expireat(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    expire_generic(ctx, args, true, false, "expireat");
}

/// `PEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT]`
fn pexpireat(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    expire_generic(ctx, args, false, false, "pexpireat");
}

/// `PERSIST key`: 1 when an expiry was removed.
fn persist(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let key = args.get(1);
    let had = ctx
        .db
        .get(key, ctx.now)
        .and_then(|e| e.expire_at())
        .is_some();
    if had {
        ctx.db.set_expire(key, None, ctx.now);
    }
    ctx.out.integer(i64::from(had));
}

/// EXPIRETIME and PEXPIRETIME: the absolute expiry, -1 without one, -2 without the key.
fn expiretime_generic(ctx: &mut ShardCtx<'_>, args: &Args<'_>, seconds: bool) {
    let reply = match ctx.db.get(args.get(1), ctx.now) {
        None => -2,
        Some(e) => match e.expire_at() {
            None => -1,
            Some(at) if seconds => ((at + 500) / 1000) as i64,
            Some(at) => at as i64,
        },
    };
    ctx.out.integer(reply);
}

/// `EXPIRETIME key`
fn expiretime(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    expiretime_generic(ctx, args, true);
}

/// `PEXPIRETIME key`
fn pexpiretime(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    expiretime_generic(ctx, args, false);
}

/// COPY's options: `[DB destination-db] [REPLACE]`; only database 0 exists.
///
/// # Errors
/// The error reply: a syntax error, a non-integer or other database, the same key twice.
pub fn parse_copy(args: &Args<'_>) -> Result<bool, Vec<u8>> {
    let mut replace = false;
    let mut j = 3;
    while j < args.len() {
        if args.is(j, "replace") {
            replace = true;
        } else if args.is(j, "db") && j + 1 < args.len() {
            match goblin_protocol::parse_i64(args.get(j + 1)) {
                None => return Err(errors::NOT_INTEGER.to_vec()),
                Some(n) if i32::try_from(n).is_err() => {
                    return Err(errors::INT_OUT_OF_RANGE.to_vec());
                }
                Some(0) => {}
                Some(_) => return Err(errors::DB_INDEX_OUT_OF_RANGE.to_vec()),
            }
            j += 1;
        } else {
            return Err(errors::SYNTAX.to_vec());
        }
        j += 1;
    }
    if args.get(1) == args.get(2) {
        return Err(b"ERR source and destination objects are the same".to_vec());
    }
    Ok(replace)
}

/// `COPY source destination [DB destination-db] [REPLACE]`: 1 when copied.
fn copy(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let replace = match parse_copy(args) {
        Ok(r) => r,
        Err(e) => return ctx.out.error(&e),
    };
    let (src, dst) = (args.get(1), args.get(2));
    let Some(entry) = ctx.db.get(src, ctx.now) else {
        return ctx.out.integer(0);
    };
    let (value, expire, flags) = (entry.value().to_value(), entry.expire_at(), entry.flags());
    if !replace && ctx.db.contains(dst, ctx.now) {
        return ctx.out.integer(0);
    }
    ctx.db.insert(dst, value, expire, ctx.now);
    // A copy is a new object: never one of Redis's shared integers.
    ctx.db.add_flags(dst, flags | UNSHARED, ctx.now);
    ctx.out.integer(1);
}

/// Whether Redis would keep this string integer-encoded.
fn int_encoded(entry: &goblin_store::Entry<'_>, s: &[u8]) -> bool {
    entry.flags() & (RAW | NOT_INT) == 0 && s.len() <= 20 && goblin_protocol::parse_i64(s).is_some()
}

/// The encoding OBJECT ENCODING reports, as redis-server 7.0 would have chosen it.
fn encoding(entry: &goblin_store::Entry<'_>) -> &'static str {
    /// Redis 7.0's defaults: `hash-max-listpack-entries 512`, `zset-max-listpack-entries
    /// 128`, and 64-byte values for both.
    const HASH_LISTPACK_ENTRIES: usize = 512;
    const ZSET_LISTPACK_ENTRIES: usize = 128;
    const LISTPACK_VALUE: usize = 64;
    match entry.value() {
        ValueRef::Str(_) if entry.flags() & RAW != 0 => "raw",
        ValueRef::Str(s) if int_encoded(entry, s) => "int",
        ValueRef::Str(s) if s.len() <= 44 => "embstr",
        ValueRef::Str(_) => "raw",
        ValueRef::Hash(h) => {
            let small = h.len() <= HASH_LISTPACK_ENTRIES
                && h.iter()
                    .all(|(k, v)| k.len() <= LISTPACK_VALUE && v.len() <= LISTPACK_VALUE);
            if small { "listpack" } else { "hashtable" }
        }
        ValueRef::ZSet(z) => {
            let small =
                z.len() <= ZSET_LISTPACK_ENTRIES && z.keys().all(|k| k.len() <= LISTPACK_VALUE);
            if small { "listpack" } else { "skiplist" }
        }
    }
}

/// `OBJECT ENCODING key`
fn object_encoding(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match ctx.db.get(args.get(2), ctx.now).map(|e| encoding(&e)) {
        Some(name) => ctx.out.bulk(name.as_bytes()),
        None => ctx.out.null(),
    }
}

/// `OBJECT FREQ key`: access frequencies are kept only under an LFU eviction policy,
/// which Goblin does not have.
fn object_freq(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if ctx.db.contains(args.get(2), ctx.now) {
        ctx.out.error(b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
    } else {
        ctx.out.null();
    }
}

/// `OBJECT IDLETIME key`: Goblin does not track access times, so every key reads as
/// just used (0 seconds).
fn object_idletime(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if ctx.db.contains(args.get(2), ctx.now) {
        ctx.out.integer(0);
    } else {
        ctx.out.null();
    }
}

/// `OBJECT REFCOUNT key`: Redis shares the objects of the integers 0 to 9999, reporting
/// them with `INT_MAX` references; every other value has one.
fn object_refcount(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let reply = ctx.db.get(args.get(2), ctx.now).map(|e| match e.value() {
        ValueRef::Str(s)
            if e.flags() & UNSHARED == 0
                && int_encoded(&e, s)
                && goblin_protocol::parse_i64(s).is_some_and(|n| (0..10_000).contains(&n)) =>
        {
            i64::from(i32::MAX)
        }
        _ => 1,
    });
    match reply {
        Some(n) => ctx.out.integer(n),
        None => ctx.out.null(),
    }
}

/// `OBJECT HELP`
fn object_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ];
    let mut out = ctx.reply();
    out.array(LINES.len());
    LINES.iter().for_each(|l| out.simple(l.as_bytes()));
}
