//! Keyspace commands: DEL, UNLINK, EXISTS, TOUCH, TYPE, TTL, PTTL, EXPIRE, PEXPIRE,
//! EXPIREAT, PEXPIREAT, PERSIST, EXPIRETIME, PEXPIRETIME, RENAME, RENAMENX, KEYS, SCAN,
//! RANDOMKEY.

use goblin_store::{Millis, SLOTS, UNSHARED, ValueRef, types};

use crate::errors::{self, ErrorReply};
use crate::table::args::is_keyword;
use crate::table::handler::{Args, ConnCtx, Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{
    CrossShard, Hop, HopOut, Locking, Moved, Outcome, Plan, PlanCx, PlanStart, Step,
};
use crate::txn::shapes::{FanOut, Split, merge_sum};
use crate::util::{glob_match, random_u64};

use super::{db_argument, decimal};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table
        .add(&meta::DEL, Exec::Shard(del))
        .cross_shard(del_plan, Locking::Keys);
    table
        .add(&meta::UNLINK, Exec::Shard(del))
        .cross_shard(del_plan, Locking::Keys);
    table
        .add(&meta::EXISTS, Exec::Shard(exists))
        .cross_shard(exists_plan, Locking::Keys);
    table
        .add(&meta::TOUCH, Exec::Shard(exists))
        .cross_shard(exists_plan, Locking::Keys);
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
    table
        .add(&meta::RENAME, Exec::Shard(rename))
        .cross_shard(rename_plan, Locking::Keys);
    table
        .add(&meta::COPY, Exec::Shard(copy))
        .cross_shard(copy_plan, Locking::Keys);
    table.add(&meta::MOVE, Exec::Shard(move_key));
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
    table
        .add(&meta::RENAMENX, Exec::Shard(renamenx))
        .cross_shard(renamenx_plan, Locking::Keys);
    table.add(
        &meta::KEYS,
        Exec::Plan(CrossShard {
            plan: keys_plan,
            locking: Locking::WholeShards,
        }),
    );
    table.add(
        &meta::SCAN,
        Exec::Plan(CrossShard {
            plan: scan_plan,
            locking: Locking::InHops,
        }),
    );
    table.add(
        &meta::RANDOMKEY,
        Exec::Plan(CrossShard {
            plan: randomkey_plan,
            locking: Locking::WholeShards,
        }),
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

/// DEL's part on one shard: how many of its keys it removed.
fn del_part(ctx: &mut ShardCtx<'_>, keys: &[Vec<u8>]) -> HopOut {
    let removed = keys.iter().filter(|k| ctx.db.delete(k, ctx.now)).count();
    if ctx.logging() && removed > 0 {
        let mut argv: Vec<&[u8]> = vec![b"DEL"];
        argv.extend(keys.iter().map(Vec::as_slice));
        ctx.log(&argv);
    }
    HopOut::Int(removed as i64)
}

/// EXISTS's part on one shard: how many of its keys exist, counting repeats.
fn exists_part(ctx: &mut ShardCtx<'_>, keys: &[Vec<u8>]) -> HopOut {
    HopOut::Int(keys.iter().filter(|k| ctx.db.contains(k, ctx.now)).count() as i64)
}

/// DEL and UNLINK across shards: each shard removes its keys; the counts add up.
fn del_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(Split::new(
        start.args,
        1,
        1,
        start.slots,
        del_part,
        merge_sum,
    )))
}

/// EXISTS and TOUCH across shards: each shard counts its keys; the counts add up.
fn exists_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(Split::new(
        start.args,
        1,
        1,
        start.slots,
        exists_part,
        merge_sum,
    )))
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
        return ctx.out.error(errors::NO_SUCH_KEY);
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

/// How a [`MoveValue`] answers, by command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveReply {
    /// RENAME: `no such key` without a source, OK when done.
    Rename,
    /// RENAMENX: like RENAME, but 0 when the destination exists and 1 when done.
    RenameNx,
    /// COPY: 0 without a source (or with a destination, unless REPLACE), 1 when done.
    Copy {
        /// REPLACE: an existing destination is overwritten.
        replace: bool,
    },
}

/// Moves (or copies) a value, with its expiry and encoding, from a key of one shard to
/// a key of another: check the source (and the destination, unless it may be replaced),
/// take or copy the value out of the source shard, put it into the destination shard.
/// The transaction holds both keys' locks throughout.
#[derive(Debug)]
pub struct MoveValue {
    src: Vec<u8>,
    dst: Vec<u8>,
    src_shard: usize,
    dst_shard: usize,
    /// The destination's database, when not the client's (COPY … DB).
    dst_db: Option<usize>,
    reply: MoveReply,
    stage: u8,
}

impl MoveValue {
    /// A move from `src` to `dst` (argument 1 to argument 2 of the command).
    pub fn new(start: &PlanStart<'_>, reply: MoveReply) -> MoveValue {
        let (src, dst) = (start.args.get(1), start.args.get(2));
        MoveValue {
            src: src.to_vec(),
            dst: dst.to_vec(),
            src_shard: start.slots.shard_of_key(src),
            dst_shard: start.slots.shard_of_key(dst),
            dst_db: None,
            reply,
            stage: 0,
        }
    }

    /// Whether an existing destination stops the move.
    fn guard_dst(&self) -> bool {
        match self.reply {
            MoveReply::Rename => false,
            MoveReply::RenameNx => true,
            MoveReply::Copy { replace } => !replace,
        }
    }

    fn missing_source(&self, cx: &PlanCx<'_>) -> Step {
        match self.reply {
            MoveReply::Copy { .. } => cx.done(|e| e.integer(0)),
            _ => cx.done(|e| e.error(errors::NO_SUCH_KEY)),
        }
    }
}

fn exists_hop(shard: usize, db: Option<usize>, key: &[u8]) -> Hop {
    let key = key.to_vec();
    Hop::run(shard, move |ctx| {
        let now = ctx.now;
        HopOut::Flag(keyspace(ctx, db).is_some_and(|k| k.contains(&key, now)))
    })
}

/// Database `db` of the hop's shard (the client's when `None`).
fn keyspace<'c>(
    ctx: &'c mut ShardCtx<'_>,
    db: Option<usize>,
) -> Option<&'c mut goblin_store::Keyspace> {
    match db {
        Some(db) if db != ctx.db_index() => ctx.other_db(db),
        _ => Some(&mut *ctx.db),
    }
}

impl Plan for MoveValue {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        self.stage += 1;
        match self.stage {
            1 => {
                let mut hops = vec![exists_hop(self.src_shard, None, &self.src)];
                if self.guard_dst() {
                    hops.push(exists_hop(self.dst_shard, self.dst_db, &self.dst));
                }
                Step::Hops(hops)
            }
            2 => {
                let found = |i: usize| matches!(results.get(i), Some(HopOut::Flag(true)));
                if !found(0) {
                    return self.missing_source(cx);
                }
                if self.guard_dst() && found(1) {
                    return cx.done(|e| e.integer(0));
                }
                let key = self.src.clone();
                let copy = matches!(self.reply, MoveReply::Copy { .. });
                Step::Hops(vec![Hop::run(self.src_shard, move |ctx| {
                    HopOut::Moved(if copy {
                        clone_out(ctx, &key)
                    } else {
                        take_out(ctx, &key)
                    })
                })])
            }
            3 => match results.into_iter().next() {
                Some(HopOut::Moved(Some(moved))) => {
                    let key = self.dst.clone();
                    let db = self.dst_db;
                    Step::Hops(vec![Hop::run(self.dst_shard, move |ctx| {
                        put_in(ctx, db, &key, moved);
                        HopOut::Done
                    })])
                }
                _ => self.missing_source(cx),
            },
            _ => match self.reply {
                MoveReply::Rename => cx.done(|e| e.ok()),
                MoveReply::RenameNx | MoveReply::Copy { .. } => cx.done(|e| e.integer(1)),
            },
        }
    }
}

/// Takes `key`'s value out of this shard.
fn take_out(ctx: &mut ShardCtx<'_>, key: &[u8]) -> Option<Moved> {
    let removed = ctx.db.remove(key, ctx.now)?;
    ctx.log(&[b"DEL", key]);
    Some(Moved {
        value: removed.value,
        expire_at: removed.expire_at,
        flags: removed.flags,
    })
}

/// Copies `key`'s value out of this shard.
fn clone_out(ctx: &mut ShardCtx<'_>, key: &[u8]) -> Option<Moved> {
    let entry = ctx.db.get(key, ctx.now)?;
    Some(Moved {
        value: entry.value().to_value(),
        expire_at: entry.expire_at(),
        // A copy is a new object: never one of Redis's shared integers.
        flags: entry.flags() | UNSHARED,
    })
}

/// Stores a moved value at `key` of this shard, replacing what was there.
fn put_in(ctx: &mut ShardCtx<'_>, db: Option<usize>, key: &[u8], moved: Moved) {
    let other = db.filter(|&db| db != ctx.db_index());
    if ctx.logging() {
        // A log's records are in the unit's database: another one is selected around
        // them.
        let (there, back) = (other.map(|db| db.to_string()), ctx.db_index().to_string());
        if let Some(there) = &there {
            ctx.log(&[b"SELECT", there.as_bytes()]);
        }
        for argv in restore_commands(key, moved.value.as_ref(), moved.expire_at) {
            let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            ctx.log(&argv);
        }
        if there.is_some() {
            ctx.log(&[b"SELECT", back.as_bytes()]);
        }
    }
    let now = ctx.now;
    let Some(target) = keyspace(ctx, other) else {
        return;
    };
    target.insert(key, moved.value, moved.expire_at, now);
    if moved.flags != 0 {
        target.add_flags(key, moved.flags, now);
    }
}

/// The commands that rebuild `value` at `key` (as an append-only log rewrites a key).
pub fn restore_commands(
    key: &[u8],
    value: ValueRef<'_>,
    expire: Option<Millis>,
) -> Vec<Vec<Vec<u8>>> {
    let mut out = vec![vec![b"DEL".to_vec(), key.to_vec()]];
    let argv = |name: &[u8]| vec![name.to_vec(), key.to_vec()];
    let rebuild = match value {
        ValueRef::Str(s) => {
            let mut set = argv(b"SET");
            set.push(s.to_vec());
            set
        }
        ValueRef::Hash(h) => {
            let mut hset = argv(b"HSET");
            h.for_each(|f, v| {
                hset.push(f.to_vec());
                hset.push(v.to_vec());
            });
            hset
        }
        ValueRef::List(l) => {
            let mut rpush = argv(b"RPUSH");
            l.for_each(|element| rpush.push(element.to_vec()));
            rpush
        }
        ValueRef::Set(m) => {
            let mut sadd = argv(b"SADD");
            m.for_each(|member| sadd.push(member.to_vec()));
            sadd
        }
        ValueRef::ZSet(z) => {
            let mut zadd = argv(b"ZADD");
            z.for_each(|member, score| {
                let mut buf = [0u8; 32];
                zadd.push(goblin_protocol::format_double(score, &mut buf).to_vec());
                zadd.push(member.to_vec());
            });
            zadd
        }
        ValueRef::Stream(s) => {
            out.extend(super::streams::rebuild_commands(key, s));
            if let Some(at) = expire {
                out.push(vec![
                    b"PEXPIREAT".to_vec(),
                    key.to_vec(),
                    decimal(at as i64),
                ]);
            }
            return out;
        }
    };
    out.push(rebuild);
    if let Some(at) = expire {
        out.push(vec![
            b"PEXPIREAT".to_vec(),
            key.to_vec(),
            decimal(at as i64),
        ]);
    }
    out
}

/// RENAME across shards.
fn rename_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(MoveValue::new(start, MoveReply::Rename)))
}

/// RENAMENX across shards.
fn renamenx_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(MoveValue::new(start, MoveReply::RenameNx)))
}

/// COPY across shards (its options are checked first).
fn copy_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let (replace, db) = parse_copy(start.args, start.db, start.databases)?;
    let mut plan = MoveValue::new(start, MoveReply::Copy { replace });
    plan.dst_db = db.filter(|&db| db != start.db);
    Ok(Box::new(plan))
}

/// KEYS' part: this shard's keys matching the pattern.
fn keys_part(ctx: &mut ShardCtx<'_>, args: &[Vec<u8>]) -> HopOut {
    let pattern = args.get(1).map_or(&b"*"[..], Vec::as_slice);
    let all = pattern == b"*";
    let mut found = Vec::new();
    let owned: Vec<usize> = ctx.owned_slots().collect();
    for slot in owned {
        ctx.db.for_each_in_slot(slot as u16, ctx.now, |e| {
            if all || glob_match(pattern, e.key(), false) {
                found.push(e.key().to_vec());
            }
        });
    }
    HopOut::Keys(found)
}

/// KEYS: every shard's matching keys, together.
fn keys_merge(cx: &PlanCx<'_>, _args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let keys: Vec<Vec<u8>> = parts
        .into_iter()
        .flat_map(|p| match p {
            HopOut::Keys(k) => k,
            _ => Vec::new(),
        })
        .collect();
    cx.reply(|e| {
        e.array(keys.len());
        keys.iter().for_each(|k| e.bulk(k));
    })
}

/// `KEYS pattern`: every shard, seen whole.
fn keys_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(FanOut::new(start.args, keys_part, keys_merge)))
}

/// SCAN's cursor and options.
struct ScanOptions<'a> {
    cursor: u64,
    count: usize,
    pattern: Option<&'a [u8]>,
    type_name: Option<&'a [u8]>,
}

/// SCAN's arguments as redis-server 7.0 checks them: the cursor (`scanCommand`), then the
/// options in order (`scanGenericCommand`), each needing its value; a later option of a
/// kind replaces an earlier one.
fn parse_scan<'a>(args: &Args<'a>) -> Result<ScanOptions<'a>, ErrorReply> {
    let mut c = args.cursor(1);
    let mut opts = ScanOptions {
        cursor: c.next_parsed(parse_cursor, errors::INVALID_CURSOR)?,
        count: 10,
        pattern: None,
        type_name: None,
    };
    while let Some(opt) = c.next() {
        let more = !c.is_empty();
        if is_keyword(opt, "count") && more {
            let n = c.next_i64()?;
            if n < 1 {
                return Err(errors::SYNTAX.into());
            }
            opts.count = n as usize;
        } else if is_keyword(opt, "match") && more {
            let p = c.next_arg()?;
            opts.pattern = (p != b"*").then_some(p);
        } else if is_keyword(opt, "type") && more {
            opts.type_name = Some(c.next_arg()?);
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok(opts)
}

/// A SCAN cursor as Redis reads it (`strtoul`): digits with an optional sign; anything
/// else, or a leading blank, is an invalid cursor.
pub(crate) fn parse_cursor(s: &[u8]) -> Option<u64> {
    // strtoul reads a C string: up to the first NUL.
    let s = errors::c_str(s);
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

/// What one shard's SCAN found: the next cursor and the keys.
#[derive(Debug)]
struct ScanPart {
    next: usize,
    keys: Vec<Vec<u8>>,
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`.
///
/// The cursor is a hash slot. On one shard, a call returns whole slots — every key the
/// slot holds at that moment — starting at the cursor, until COUNT keys were looked at or
/// the next slot belongs to another shard; the next cursor is the next slot (0 after the
/// last slot). The plan carries the call on to the shard of the next slot while too few
/// keys were found, so an empty keyspace answers cursor 0 at once, as Redis does. A key
/// present for the whole iteration is therefore always returned, whatever is added or
/// removed meanwhile, and no key is returned twice unless it is re-added. Nothing assumes
/// a shard's slots are contiguous.
#[derive(Debug)]
struct ScanPlan {
    cursor: usize,
    count: usize,
    pattern: Option<Vec<u8>>,
    type_name: Option<Vec<u8>>,
    found: Vec<Vec<u8>>,
}

impl ScanPlan {
    fn hop(&self, cx: &PlanCx<'_>) -> Step {
        let (cursor, count) = (self.cursor, self.count);
        let pattern = self.pattern.clone();
        let type_name = self.type_name.clone();
        Step::Hops(vec![Hop::run(cx.slots.shard_of_slot(cursor), move |ctx| {
            HopOut::Other(Box::new(scan_part(
                ctx,
                cursor,
                count,
                pattern.as_deref(),
                type_name.as_deref(),
            )))
        })])
    }
}

impl Plan for ScanPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if let Some(HopOut::Other(part)) = results.into_iter().next()
            && let Ok(part) = part.downcast::<ScanPart>()
        {
            let stuck = part.next == self.cursor && part.keys.is_empty();
            self.found.extend(part.keys);
            self.cursor = part.next;
            if self.cursor != 0 && self.found.len() < self.count && !stuck {
                return self.hop(cx);
            }
            let next = decimal(self.cursor as i64);
            let found = std::mem::take(&mut self.found);
            return cx.done(|e| {
                e.array(2);
                e.bulk(&next);
                e.array(found.len());
                found.iter().for_each(|k| e.bulk(k));
            });
        }
        if self.cursor >= SLOTS {
            // Past the last slot: nothing to look at.
            return cx.done(|e| {
                e.array(2);
                e.bulk(b"0");
                e.array(0);
            });
        }
        self.hop(cx)
    }
}

/// One shard's SCAN: whole slots from `cursor` on, while this shard owns them and fewer
/// than `count` keys were looked at.
fn scan_part(
    ctx: &mut ShardCtx<'_>,
    cursor: usize,
    count: usize,
    pattern: Option<&[u8]>,
    type_name: Option<&[u8]>,
) -> ScanPart {
    let mut keys = Vec::new();
    let mut slot = cursor;
    // COUNT bounds the keys looked at (as in Redis), not the keys returned; empty slots
    // cost a length check each.
    let mut visited = 0;
    while slot < SLOTS && ctx.owns(slot) && visited < count {
        if ctx.db.slot_len(slot as u16) > 0 {
            ctx.db.for_each_in_slot(slot as u16, ctx.now, |e| {
                visited += 1;
                let type_ok = type_name
                    .is_none_or(|t| t.eq_ignore_ascii_case(e.value().type_name().as_bytes()));
                let match_ok = pattern.is_none_or(|p| glob_match(p, e.key(), false));
                if type_ok && match_ok {
                    keys.push(e.key().to_vec());
                }
            });
        }
        slot += 1;
    }
    ScanPart {
        next: if slot >= SLOTS { 0 } else { slot },
        keys,
    }
}

/// SCAN: its cursor and options checked, then shard after shard in slot order.
fn scan_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let opts = parse_scan(start.args)?;
    Ok(Box::new(ScanPlan {
        cursor: usize::try_from(opts.cursor).unwrap_or(usize::MAX),
        count: opts.count,
        pattern: opts.pattern.map(<[u8]>::to_vec),
        type_name: opts.type_name.map(<[u8]>::to_vec),
        found: Vec::new(),
    }))
}

/// RANDOMKEY's part: this shard's key count and one of its keys.
fn randomkey_part(ctx: &mut ShardCtx<'_>, _args: &[Vec<u8>]) -> HopOut {
    let key = ctx.db.random_key(random_u64(), ctx.now);
    HopOut::Other(Box::new((ctx.db.len() as u64, key)))
}

/// RANDOMKEY: a shard chosen with odds proportional to its key count, then its key.
fn randomkey_merge(cx: &PlanCx<'_>, _args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let mut candidates: Vec<(u64, Vec<u8>)> = Vec::new();
    for part in parts {
        if let HopOut::Other(any) = part
            && let Ok(found) = any.downcast::<(u64, Option<Vec<u8>>)>()
            && let (n, Some(key)) = *found
        {
            candidates.push((n.max(1), key));
        }
    }
    let total: u64 = candidates.iter().map(|(n, _)| n).sum();
    if total == 0 {
        return cx.reply(|e| e.null());
    }
    let mut pick = random_u64() % total;
    for (n, key) in &candidates {
        if pick < *n {
            return cx.reply(|e| e.bulk(key));
        }
        pick -= n;
    }
    cx.reply(|e| e.null())
}

/// `RANDOMKEY`: every shard, seen whole.
fn randomkey_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(FanOut::new(
        start.args,
        randomkey_part,
        randomkey_merge,
    )))
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

/// EXPIRE's options as `parseExtendedExpireArgumentsOrReply` reads them: every word an
/// option (repeats allowed), then the conflicts checked.
fn parse_expire_flags(args: &Args<'_>) -> Result<ExpireFlags, ErrorReply> {
    let mut f = ExpireFlags::default();
    for opt in args.cursor(3) {
        let flag = if is_keyword(opt, "nx") {
            &mut f.nx
        } else if is_keyword(opt, "xx") {
            &mut f.xx
        } else if is_keyword(opt, "gt") {
            &mut f.gt
        } else if is_keyword(opt, "lt") {
            &mut f.lt
        } else {
            return Err(errors::unsupported_option(opt));
        };
        *flag = true;
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(errors::EXPIRE_NX_AND_OTHERS.into());
    }
    if f.gt && f.lt {
        return Err(errors::EXPIRE_GT_AND_LT.into());
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
        Err(e) => return e.send(&mut ctx.out),
    };
    let Some(mut when) = goblin_protocol::parse_i64(args.get(2)) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    if seconds {
        match when.checked_mul(1000) {
            Some(ms) => when = ms,
            None => return errors::invalid_expire(name).send(&mut ctx.out),
        }
    }
    let base = if relative { ctx.now as i64 } else { 0 };
    let Some(when) = when.checked_add(base) else {
        return errors::invalid_expire(name).send(&mut ctx.out);
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
    // (On a replica the deadline is kept: its master's DEL removes the key.)
    if when <= ctx.now as i64 && ctx.db.expires() {
        ctx.db.delete(key, ctx.now);
        ctx.log(&[b"DEL", key]);
    } else {
        ctx.db.set_expire(key, Some(when as u64), ctx.now);
        // Replayed later, a relative time would count from then.
        if ctx.logging() {
            ctx.log(&[b"PEXPIREAT", key, &decimal(when)]);
        }
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

/// COPY's options, `[DB destination-db] [REPLACE]`, for a client in database `db`:
/// REPLACE, and the destination's database when one is named.
///
/// # Errors
/// The error reply: a syntax error, a database that is not one, the same key twice in
/// the same database.
pub fn parse_copy(
    args: &Args<'_>,
    db: usize,
    databases: usize,
) -> Result<(bool, Option<usize>), ErrorReply> {
    let mut replace = false;
    let mut dst_db = None;
    let mut c = args.cursor(3);
    while let Some(opt) = c.next() {
        if is_keyword(opt, "replace") {
            replace = true;
        } else if is_keyword(opt, "db") && !c.is_empty() {
            dst_db = Some(db_argument(c.next().unwrap_or_default(), databases)?);
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    if crate::cluster::enabled() && (db != 0 || dst_db.is_some_and(|d| d != 0)) {
        return Err(ErrorReply::Fixed(
            b"ERR Copying to another database is not allowed in cluster mode",
        ));
    }
    if args.get(1) == args.get(2) && dst_db.is_none_or(|d| d == db) {
        return Err(errors::SAME_OBJECT.into());
    }
    Ok((replace, dst_db))
}

/// `COPY source destination [DB destination-db] [REPLACE]`: 1 when copied.
fn copy(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (replace, dst_db) = match parse_copy(args, ctx.db_index(), ctx.databases()) {
        Ok(r) => r,
        Err(e) => return e.send(&mut ctx.out),
    };
    let (src, dst, now) = (args.get(1), args.get(2), ctx.now);
    let Some(entry) = ctx.db.get(src, now) else {
        return ctx.out.integer(0);
    };
    let (value, expire, flags) = (entry.value().to_value(), entry.expire_at(), entry.flags());
    let Some(target) = keyspace(ctx, dst_db) else {
        return ctx.out.integer(0);
    };
    if !replace && target.contains(dst, now) {
        return ctx.out.integer(0);
    }
    target.insert(dst, value, expire, now);
    // A copy is a new object: never one of Redis's shared integers.
    target.add_flags(dst, flags | UNSHARED, now);
    ctx.out.integer(1);
}

/// `MOVE key db`: 1 when the key moved to database `db`, 0 when it is not here or is
/// there already.
fn move_key(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if crate::cluster::enabled() {
        return ctx.out.error(b"ERR MOVE is not allowed in cluster mode");
    }
    let (key, now) = (args.get(1), ctx.now);
    let target = match db_argument(args.get(2), ctx.databases()) {
        Ok(db) => db,
        Err(e) => return e.send(&mut ctx.out),
    };
    let Some((here, there)) = ctx.db_and(target) else {
        return ctx.out.error(errors::SAME_OBJECT);
    };
    if !here.contains(key, now) || there.contains(key, now) {
        return ctx.out.integer(0);
    }
    let Some(moved) = here.remove(key, now) else {
        return ctx.out.integer(0);
    };
    there.insert(key, moved.value, moved.expire_at, now);
    if moved.flags != 0 {
        there.add_flags(key, moved.flags, now);
    }
    ctx.out.integer(1);
}

/// `OBJECT ENCODING key`
fn object_encoding(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match ctx.db.get(args.get(2), ctx.now).map(|e| e.encoding()) {
        Some(name) => ctx.out.bulk(name.as_bytes()),
        None => ctx.out.null(),
    }
}

/// `OBJECT FREQ key`: the key's access frequency counter, kept only under an LFU
/// eviction policy.
fn object_freq(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let lfu = matches!(ctx.db.access_mode(), goblin_store::AccessMode::Lfu { .. });
    match ctx.db.frequency(args.get(2), ctx.now) {
        None => ctx.out.null(),
        Some(_) if !lfu => ctx.out.error(errors::NO_LFU_POLICY),
        Some(n) => ctx.out.integer(i64::from(n)),
    }
}

/// `OBJECT IDLETIME key`: seconds since the key was last read or written, kept unless
/// an LFU eviction policy keeps frequencies instead.
fn object_idletime(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let lfu = matches!(ctx.db.access_mode(), goblin_store::AccessMode::Lfu { .. });
    match ctx.db.idle_secs(args.get(2), ctx.now) {
        None => ctx.out.null(),
        Some(_) if lfu => ctx.out.error(errors::LFU_NO_IDLETIME),
        Some(secs) => ctx.out.integer(secs as i64),
    }
}

/// `OBJECT REFCOUNT key`
fn object_refcount(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match ctx.db.get(args.get(2), ctx.now).map(|e| refcount(&e)) {
        Some(n) => ctx.out.integer(n),
        None => ctx.out.null(),
    }
}

/// The references Redis reports for a key's value (OBJECT REFCOUNT, DEBUG OBJECT): it
/// shares the objects of the integers 0 to 9999, reporting them with `INT_MAX`
/// references, unless an LRU or LFU `maxmemory` policy is in force (as the policy is
/// now, where Redis looks when the value is made); every other value has one.
pub(crate) fn refcount(e: &goblin_store::Entry<'_>) -> i64 {
    match e.value() {
        ValueRef::Str(s)
            if e.flags() & UNSHARED == 0
                && crate::memory::integers_shared()
                && types::string::int_encoded(s, e.flags())
                && goblin_protocol::parse_i64(s).is_some_and(|n| (0..10_000).contains(&n)) =>
        {
            i64::from(i32::MAX)
        }
        _ => 1,
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
    super::reply_help(ctx, LINES);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_like_strtoul() {
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"12\0x"), Some(12));
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1x"), None);
        assert_eq!(parse_cursor(b"+"), None);
    }
}
