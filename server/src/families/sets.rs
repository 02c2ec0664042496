//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER,
//! SMOVE, SINTER, SUNION, SDIFF, SINTERCARD, SINTERSTORE, SUNIONSTORE, SDIFFSTORE, SSCAN —
//! with redis-server 7.0's parsing, replies, errors and encodings (`intset` and
//! `hashtable`, chosen as `t_set.c` chooses them, STORE destinations and SPOP's rebuilt
//! sets included).
//!
//! The set algebra is one piece of logic for both paths. Its sources are first *probed*
//! (absent, another type, or a set of some size); [`outline`] decides from the probes
//! alone what the operation does: WRONGTYPE, an empty result, or a [`Fold`] that starts
//! from a copy of one source (the smallest for an intersection, the first for a
//! difference, the largest for a union) and folds the others into it one by one. On one
//! shard the handler does that against its keyspace. Across shards, the plan
//! ([`AlgebraPlan`]) probes each shard's sources in a hop, fetches the starting set from
//! its shard, then has every other shard fold its sources *restricted to that set's
//! members* (for an intersection or a difference nothing else matters, so only what can
//! be in the result travels), folds those on the coordinator with the same [`Fold`], and
//! writes a STORE destination in a last hop. Under the plan's locks the whole command is
//! atomic, and a source of the wrong type stops it before anything is written.
//!
//! SMOVE across shards ([`SmovePlan`]) checks both keys, then removes the member at the
//! source and adds it at the destination in one step.

use std::collections::HashSet;
use std::sync::Arc;

use goblin_protocol::{Encoder, parse_i64};
use goblin_store::types::set::{Member, Set};
use goblin_store::{Keyspace, Millis, Value, ValueMut, ValueRef};

use crate::errors::{self, ErrorReply};
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Plan, PlanCx, PlanStart, Step};
use crate::util::{glob_match, random_u64};

use super::RANDOM_PICKS_MAX;
use super::keys::{parse_cursor, restore_commands};

/// SPOP with a count answers it by removing random members while more than a fifth as
/// many would remain as are popped; otherwise it rebuilds the set from the members that
/// stay (Redis's `SPOP_MOVE_STRATEGY_MUL`; the rebuilt set gets the encoding its size
/// calls for, which OBJECT ENCODING shows).
const SPOP_MOVE_STRATEGY_MUL: u64 = 5;
/// SRANDMEMBER with a positive count picks distinct members at random while the set has
/// at least this many times as many members; otherwise it shuffles them all (Redis's
/// `SRANDMEMBER_SUB_STRATEGY_MUL`).
const SRANDMEMBER_SUB_STRATEGY_MUL: u64 = 3;
/// SSCAN's COUNT when none is given.
const SCAN_COUNT: usize = 10;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::SADD, Exec::Shard(sadd));
    table.add(&meta::SREM, Exec::Shard(srem));
    table.add(&meta::SMEMBERS, Exec::Shard(smembers));
    table.add(&meta::SISMEMBER, Exec::Shard(sismember));
    table.add(&meta::SMISMEMBER, Exec::Shard(smismember));
    table.add(&meta::SCARD, Exec::Shard(scard));
    table.add(&meta::SPOP, Exec::Shard(spop));
    table.add(&meta::SRANDMEMBER, Exec::Shard(srandmember));
    table.add(&meta::SSCAN, Exec::Shard(sscan));
    table
        .add(&meta::SMOVE, Exec::Shard(smove))
        .cross_shard(smove_plan, Locking::Keys);
    table
        .add(&meta::SINTER, Exec::Shard(sinter))
        .cross_shard(sinter_plan, Locking::Keys);
    table
        .add(&meta::SUNION, Exec::Shard(sunion))
        .cross_shard(sunion_plan, Locking::Keys);
    table
        .add(&meta::SDIFF, Exec::Shard(sdiff))
        .cross_shard(sdiff_plan, Locking::Keys);
    table
        .add(&meta::SINTERCARD, Exec::Shard(sintercard))
        .cross_shard(sintercard_plan, Locking::Keys);
    table
        .add(&meta::SINTERSTORE, Exec::Shard(sinterstore))
        .cross_shard(sinterstore_plan, Locking::Keys);
    table
        .add(&meta::SUNIONSTORE, Exec::Shard(sunionstore))
        .cross_shard(sunionstore_plan, Locking::Keys);
    table
        .add(&meta::SDIFFSTORE, Exec::Shard(sdiffstore))
        .cross_shard(sdiffstore_plan, Locking::Keys);
}

/// A key holds a value of another type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WrongType;

/// `key` read as a set: `Ok(None)` when absent.
fn read<'a>(db: &'a mut Keyspace, key: &[u8], now: Millis) -> Result<Option<&'a Set>, WrongType> {
    match db.get(key, now).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::Set(s)) => Ok(Some(s)),
        Some(_) => Err(WrongType),
    }
}

/// Changes the set at `key` in place with `f` (a set left empty is deleted): `None` when
/// the key is absent. `f` returns its result and whether it changed the set.
fn modify<R>(
    db: &mut Keyspace,
    key: &[u8],
    now: Millis,
    f: impl FnOnce(&mut Set) -> (R, bool),
) -> Option<Result<R, WrongType>> {
    db.modify(key, now, |v| match v {
        ValueMut::Boxed(Value::Set(set)) => {
            let (r, changed) = f(set);
            (Ok(r), changed)
        }
        _ => (Err(WrongType), false),
    })
}

/// Replies one member as a bulk string.
fn emit(out: &mut Encoder<'_>, m: Member<'_>) {
    match m {
        Member::Int(x) => out.bulk_int(x),
        Member::Bytes(b) => out.bulk(b),
    }
}

/// Replies a whole set as Redis replies a set of members (a RESP3 set).
fn reply_set(out: &mut Encoder<'_>, set: &Set) {
    out.set(set.len());
    set.iter().for_each(|m| emit(out, m));
}

/// `SADD key member [member ...]`: how many members were new.
fn sadd(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let key = args.get(1);
    let added = modify(ctx.db, key, ctx.now, |set| {
        let n = args.iter_from(2).filter(|m| set.insert(m)).count();
        (n, n > 0)
    });
    match added {
        Some(Ok(n)) => ctx.out.integer(n as i64),
        Some(Err(WrongType)) => ctx.out.error(errors::WRONGTYPE),
        None => {
            // A new set: an intset until a member says otherwise (`setTypeCreate`).
            let mut set = Set::default();
            let n = args.iter_from(2).filter(|m| set.insert(m)).count();
            ctx.db.insert(key, Value::Set(Box::new(set)), None, ctx.now);
            ctx.out.integer(n as i64);
        }
    }
}

/// `SREM key member [member ...]`: how many members were removed.
fn srem(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let removed = modify(ctx.db, args.get(1), ctx.now, |set| {
        let n = args.iter_from(2).filter(|m| set.remove(m)).count();
        (n, n > 0)
    });
    match removed {
        None => ctx.out.integer(0),
        Some(Ok(n)) => ctx.out.integer(n as i64),
        Some(Err(WrongType)) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `SMEMBERS key`
fn smembers(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match read(ctx.db, args.get(1), ctx.now) {
        Ok(Some(set)) => reply_set(&mut ctx.out, set),
        Ok(None) => ctx.out.set(0),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `SISMEMBER key member`
fn sismember(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match read(ctx.db, args.get(1), ctx.now) {
        Ok(set) => {
            let found = set.is_some_and(|s| s.contains(args.get(2)));
            ctx.out.integer(i64::from(found));
        }
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `SMISMEMBER key member [member ...]`: 1 or 0 for each member.
fn smismember(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match read(ctx.db, args.get(1), ctx.now) {
        Ok(set) => {
            ctx.out.array(args.len() - 2);
            for m in args.iter_from(2) {
                ctx.out
                    .integer(i64::from(set.is_some_and(|s| s.contains(m))));
            }
        }
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `SCARD key`
fn scard(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match read(ctx.db, args.get(1), ctx.now) {
        Ok(set) => ctx.out.integer(set.map_or(0, Set::len) as i64),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// Logs `SREM key members...`: what a pop did, replayably.
fn log_srem(ctx: &mut ShardCtx<'_>, key: &[u8], members: &[Vec<u8>]) {
    if ctx.logging() {
        let mut argv: Vec<&[u8]> = vec![b"SREM", key];
        argv.extend(members.iter().map(Vec::as_slice));
        ctx.log(&argv);
    }
}

/// `SPOP key [count]`: random members removed; logged as `SREM key <the members>`.
fn spop(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match args.len() {
        3 => return spop_count(ctx, args),
        n if n > 3 => return ctx.out.error(errors::SYNTAX),
        _ => {}
    }
    let key = args.get(1);
    let popped = modify(ctx.db, key, ctx.now, |set| {
        (set.pop_random(&mut random_u64), true)
    });
    match popped {
        None | Some(Ok(None)) => ctx.out.null(),
        Some(Err(WrongType)) => ctx.out.error(errors::WRONGTYPE),
        Some(Ok(Some(m))) => {
            log_srem(ctx, key, std::slice::from_ref(&m));
            ctx.out.bulk(&m);
        }
    }
}

/// `SPOP key count` (`spopWithCountCommand`).
fn spop_count(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(count) = parse_i64(args.get(2)).and_then(|n| u64::try_from(n).ok()) else {
        return ctx.out.error(errors::NOT_POSITIVE);
    };
    let key = args.get(1);
    let size = match read(ctx.db, key, ctx.now) {
        Ok(None) => return ctx.out.set(0),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(Some(set)) if count > 0 && count >= set.len() as u64 => {
            // The whole set goes: reply it, delete the key, log a DEL.
            reply_set(&mut ctx.out, set);
            ctx.db.delete(key, ctx.now);
            ctx.log(&[b"DEL", key]);
            return;
        }
        Ok(Some(set)) => set.len() as u64,
    };
    if count == 0 {
        return ctx.out.set(0);
    }
    let remaining = size - count;
    let popped = modify(ctx.db, key, ctx.now, |set| {
        let rng = &mut random_u64;
        if remaining * SPOP_MOVE_STRATEGY_MUL > count {
            // Few to pop: pop them one by one.
            let popped: Vec<Vec<u8>> = (0..count).filter_map(|_| set.pop_random(rng)).collect();
            (popped, true)
        } else {
            // Most of the set goes: the members that stay make a new set, with the
            // encoding a new set of them gets, and the rest is the answer.
            let mut kept = Set::default();
            for _ in 0..remaining {
                if let Some(m) = set.pop_random(rng) {
                    kept.insert(&m);
                }
            }
            let gone = std::mem::replace(set, kept);
            (gone.iter().map(Member::to_vec).collect(), true)
        }
    });
    let Some(Ok(popped)) = popped else {
        return ctx.out.error(errors::WRONGTYPE);
    };
    ctx.out.set(popped.len());
    popped.iter().for_each(|m| ctx.out.bulk(m));
    log_srem(ctx, key, &popped);
}

/// `SRANDMEMBER key [count]`: random members, distinct for a positive count, repeated
/// for a negative one.
fn srandmember(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match args.len() {
        3 => return srandmember_count(ctx, args),
        n if n > 3 => return ctx.out.error(errors::SYNTAX),
        _ => {}
    }
    match read(ctx.db, args.get(1), ctx.now) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(set) => match set.and_then(|s| s.random(&mut random_u64)) {
            Some(m) => emit(&mut ctx.out, m),
            None => ctx.out.null(),
        },
    }
}

/// `SRANDMEMBER key count` (`srandmemberWithCountCommand`).
fn srandmember_count(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let l = match parse_i64(args.get(2)) {
        None => return ctx.out.error(errors::NOT_INTEGER),
        Some(i64::MIN) => return ctx.out.error(errors::SRANDMEMBER_COUNT_RANGE),
        Some(l) => l,
    };
    let (count, distinct) = (l.unsigned_abs(), l >= 0);
    let set = match read(ctx.db, args.get(1), ctx.now) {
        Ok(None) => return ctx.out.array(0),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(Some(set)) => set,
    };
    if count == 0 {
        return ctx.out.array(0);
    }
    let size = set.len() as u64;
    let rng = &mut random_u64;
    let out = &mut ctx.out;
    if !distinct || count == 1 {
        // Repeated picks, streamed: nothing is allocated for the count.
        if count > RANDOM_PICKS_MAX {
            return out.error(errors::SRANDMEMBER_TOO_MANY);
        }
        out.array(count as usize);
        for _ in 0..count {
            if let Some(m) = set.random(rng) {
                emit(out, m);
            }
        }
    } else if count >= size {
        out.array(set.len());
        set.iter().for_each(|m| emit(out, m));
    } else if count * SRANDMEMBER_SUB_STRATEGY_MUL > size {
        // Most of the set: a partial shuffle of all its members.
        let mut all: Vec<Member<'_>> = set.iter().collect();
        let n = count as usize;
        for i in 0..n {
            let j = i + (rng() % (all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        out.array(n);
        all[..n].iter().for_each(|&m| emit(out, m));
    } else {
        // A few of many: random picks until enough are distinct.
        let n = count as usize;
        let mut picked: HashSet<Member<'_>> = HashSet::with_capacity(n);
        let mut order = Vec::with_capacity(n);
        while order.len() < n {
            match set.random(rng) {
                Some(m) if picked.insert(m) => order.push(m),
                Some(_) => {}
                None => break,
            }
        }
        out.array(order.len());
        order.into_iter().for_each(|m| emit(out, m));
    }
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`: the cursor is checked first, then
/// the key, then the options (as `sscanCommand` and `scanGenericCommand` order them).
fn sscan(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(cursor) = parse_cursor(args.get(2)) else {
        return ctx.out.error(errors::INVALID_CURSOR);
    };
    let set = match read(ctx.db, args.get(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => {
            ctx.out.array(2);
            ctx.out.bulk(b"0");
            return ctx.out.array(0);
        }
        Ok(Some(set)) => set,
    };
    let (count, pattern) = match parse_sscan(args) {
        Ok(opts) => opts,
        Err(e) => return e.send(&mut ctx.out),
    };
    let mut found = Vec::new();
    let next = set.scan(cursor, count, |m| {
        if pattern.is_none_or(|p| m.with_bytes(|b| glob_match(p, b, false))) {
            found.push(m);
        }
    });
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.out.array(found.len());
    found.into_iter().for_each(|m| emit(&mut ctx.out, m));
}

/// SSCAN's options: COUNT (at least 1) and MATCH (`*` matches everything), each needing
/// its value; a later one replaces an earlier one.
fn parse_sscan<'a>(args: &Args<'a>) -> Result<(usize, Option<&'a [u8]>), ErrorReply> {
    let (mut count, mut pattern) = (SCAN_COUNT, None);
    let mut c = args.cursor(3);
    while let Some(opt) = c.next() {
        let more = !c.is_empty();
        if is_keyword(opt, "count") && more {
            let n = c.next_i64()?;
            if n < 1 {
                return Err(errors::SYNTAX.into());
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is_keyword(opt, "match") && more {
            let p = c.next_arg()?;
            pattern = (p != b"*").then_some(p);
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok((count, pattern))
}

/// SMOVE's check of the source, on its shard: whether it exists, is a set, holds the
/// member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SmoveSource {
    Missing,
    WrongType,
    Set { holds: bool },
}

fn smove_source(db: &mut Keyspace, src: &[u8], member: &[u8], now: Millis) -> SmoveSource {
    match read(db, src, now) {
        Ok(None) => SmoveSource::Missing,
        Err(WrongType) => SmoveSource::WrongType,
        Ok(Some(set)) => SmoveSource::Set {
            holds: set.contains(member),
        },
    }
}

/// Removes `member` from the set at `src` (deleting it when emptied); true when it was
/// there.
fn smove_take(ctx: &mut ShardCtx<'_>, src: &[u8], member: &[u8]) -> bool {
    matches!(
        modify(ctx.db, src, ctx.now, |set| {
            let removed = set.remove(member);
            (removed, removed)
        }),
        Some(Ok(true))
    )
}

/// Adds `member` to the set at `dst`, creating it (`setTypeCreate`) when absent.
fn smove_put(ctx: &mut ShardCtx<'_>, dst: &[u8], member: &[u8]) {
    let added = modify(ctx.db, dst, ctx.now, |set| {
        let added = set.insert(member);
        (added, added)
    });
    if added.is_none() {
        let mut set = Set::default();
        set.insert(member);
        ctx.db.insert(dst, Value::Set(Box::new(set)), None, ctx.now);
    }
}

/// What SMOVE does once both keys are checked, in `smoveCommand`'s order: an absent
/// source answers 0 (whatever the destination holds), then either key of another type is
/// WRONGTYPE, then one key for both answers whether the member is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SmoveDecision {
    Answer(i64),
    WrongType,
    Move,
}

fn smove_decide(source: SmoveSource, dst_wrong: bool, same_key: bool) -> SmoveDecision {
    match source {
        SmoveSource::Missing => SmoveDecision::Answer(0),
        SmoveSource::WrongType => SmoveDecision::WrongType,
        SmoveSource::Set { .. } if dst_wrong => SmoveDecision::WrongType,
        SmoveSource::Set { holds } if same_key => SmoveDecision::Answer(i64::from(holds)),
        SmoveSource::Set { holds: false } => SmoveDecision::Answer(0),
        SmoveSource::Set { holds: true } => SmoveDecision::Move,
    }
}

/// `SMOVE source destination member`: 1 when the member moved (or, with one key for
/// both, is there).
fn smove(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (src, dst, member) = (args.get(1), args.get(2), args.get(3));
    let source = smove_source(ctx.db, src, member, ctx.now);
    let dst_wrong = read(ctx.db, dst, ctx.now).is_err();
    match smove_decide(source, dst_wrong, src == dst) {
        SmoveDecision::Answer(n) => ctx.out.integer(n),
        SmoveDecision::WrongType => ctx.out.error(errors::WRONGTYPE),
        SmoveDecision::Move => {
            smove_take(ctx, src, member);
            smove_put(ctx, dst, member);
            ctx.out.integer(1);
        }
    }
}

/// SMOVE with its keys on two shards: both checked, then the member taken out of the
/// source and put into the destination in one step, each shard logging what it did.
#[derive(Debug)]
struct SmovePlan {
    src: Vec<u8>,
    dst: Vec<u8>,
    member: Vec<u8>,
    src_shard: usize,
    dst_shard: usize,
    stage: u8,
}

fn smove_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let (src, dst) = (start.args.get(1), start.args.get(2));
    Ok(Box::new(SmovePlan {
        src: src.to_vec(),
        dst: dst.to_vec(),
        member: start.args.get(3).to_vec(),
        src_shard: start.slots.shard_of_key(src),
        dst_shard: start.slots.shard_of_key(dst),
        stage: 0,
    }))
}

impl SmovePlan {
    fn checks(&self) -> Step {
        let (src, member, dst) = (self.src.clone(), self.member.clone(), self.dst.clone());
        Step::Hops(vec![
            Hop::run(self.src_shard, move |ctx| {
                HopOut::Other(Box::new(smove_source(ctx.db, &src, &member, ctx.now)))
            }),
            Hop::run(self.dst_shard, move |ctx| {
                HopOut::Flag(read(ctx.db, &dst, ctx.now).is_err())
            }),
        ])
    }

    fn moves(&self) -> Step {
        let (src, dst) = (self.src.clone(), self.dst.clone());
        let (taken, put) = (self.member.clone(), self.member.clone());
        Step::Hops(vec![
            Hop::run(self.src_shard, move |ctx| {
                if smove_take(ctx, &src, &taken) {
                    ctx.log(&[b"SREM", &src, &taken]);
                }
                HopOut::Done
            }),
            Hop::run(self.dst_shard, move |ctx| {
                smove_put(ctx, &dst, &put);
                ctx.log(&[b"SADD", &dst, &put]);
                HopOut::Done
            }),
        ])
    }
}

impl Plan for SmovePlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        self.stage += 1;
        match self.stage {
            1 => self.checks(),
            2 => {
                let mut results = results.into_iter();
                let source = match results.next() {
                    Some(HopOut::Other(any)) => any
                        .downcast::<SmoveSource>()
                        .map_or(SmoveSource::Missing, |s| *s),
                    _ => SmoveSource::Missing,
                };
                let dst_wrong = matches!(results.next(), Some(HopOut::Flag(true)));
                match smove_decide(source, dst_wrong, self.src == self.dst) {
                    SmoveDecision::Answer(n) => cx.done(|e| e.integer(n)),
                    SmoveDecision::WrongType => cx.done(|e| e.error(errors::WRONGTYPE)),
                    SmoveDecision::Move => self.moves(),
                }
            }
            _ => cx.done(|e| e.integer(1)),
        }
    }
}

/// A set operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// What a source key held when probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    Missing,
    WrongType,
    Len(usize),
}

fn probe(db: &mut Keyspace, key: &[u8], now: Millis) -> Probe {
    match read(db, key, now) {
        Ok(None) => Probe::Missing,
        Err(WrongType) => Probe::WrongType,
        Ok(Some(set)) => Probe::Len(set.len()),
    }
}

/// What a set operation does, decided from its sources' probes alone.
#[derive(Debug, PartialEq, Eq)]
enum Outline {
    /// A source holds another type: WRONGTYPE, nothing written.
    WrongType,
    /// The result is empty whatever the sources hold.
    Empty,
    /// Start from a copy of source `start`, fold the sources of `rest` into it in order.
    Fold {
        start: usize,
        rest: Vec<usize>,
        /// A difference computed as Redis's second algorithm computes it (the first set
        /// copied whole, then the others removed), which decides a STORE destination's
        /// encoding.
        whole_first: bool,
    },
}

/// How `op` proceeds over the sources `keys`, given their probes (as `t_set.c` decides:
/// any source of another type is an error; an absent source empties an intersection; an
/// absent first set, or the first set named again later, empties a difference).
fn outline(op: Op, keys: &[&[u8]], probes: &[Probe]) -> Outline {
    if probes.contains(&Probe::WrongType) {
        return Outline::WrongType;
    }
    let len = |i: usize| match probes.get(i) {
        Some(Probe::Len(n)) => Some(*n),
        _ => None,
    };
    let present: Vec<usize> = (0..probes.len()).filter(|&i| len(i).is_some()).collect();
    // The other present sources; a key named again is folded once.
    let others = |start: usize| -> Vec<usize> {
        let mut seen: Vec<&[u8]> = vec![keys.get(start).copied().unwrap_or_default()];
        let mut rest = Vec::new();
        for &i in &present {
            let key = keys.get(i).copied().unwrap_or_default();
            if !seen.contains(&key) {
                seen.push(key);
                rest.push(i);
            }
        }
        rest
    };
    match op {
        Op::Inter => {
            if present.len() < probes.len() {
                return Outline::Empty;
            }
            // Smallest first: each fold can only shrink it.
            let Some(&start) = present.iter().min_by_key(|&&i| len(i)) else {
                return Outline::Empty;
            };
            let mut rest = others(start);
            rest.sort_by_key(|&i| len(i));
            Outline::Fold {
                start,
                rest,
                whole_first: false,
            }
        }
        Op::Union => match present.iter().max_by_key(|&&i| len(i)) {
            None => Outline::Empty,
            Some(&start) => Outline::Fold {
                start,
                rest: others(start),
                whole_first: false,
            },
        },
        Op::Diff => {
            let Some(first) = len(0) else {
                return Outline::Empty;
            };
            if keys.iter().skip(1).any(|k| Some(k) == keys.first()) {
                return Outline::Empty;
            }
            // `sunionDiffGenericCommand`'s choice of algorithm.
            let one = (first * present.len()) / 2;
            let two: usize = present.iter().filter_map(|&i| len(i)).sum();
            Outline::Fold {
                start: 0,
                rest: others(0),
                whole_first: one > two,
            }
        }
    }
}

/// A set operation's result being built, source after source.
#[derive(Debug)]
struct Fold {
    op: Op,
    acc: Set,
    /// A STORE destination must be a hashtable (Redis's second difference algorithm
    /// held a first set that no intset could, and its destination never converts back).
    hashtable: bool,
}

impl Fold {
    /// Starts from (a copy of) the outline's first source.
    fn start(op: Op, first: Set, whole_first: bool) -> Fold {
        let hashtable = op == Op::Diff && whole_first && !first.fits_intset();
        Fold {
            op,
            acc: first,
            hashtable,
        }
    }

    /// Folds `source` in; each direction costs the smaller of the two sets.
    fn add(&mut self, source: &Set) {
        let acc = &mut self.acc;
        match self.op {
            Op::Union => source.iter().for_each(|m| {
                acc.insert_member(m);
            }),
            Op::Inter if source.len() < acc.len() => {
                let mut kept = Set::default();
                for m in source.iter().filter(|&m| acc.contains_member(m)) {
                    kept.insert_member(m);
                }
                *acc = kept;
            }
            Op::Inter => acc.retain(|m| source.contains_member(m)),
            Op::Diff if source.len() < acc.len() => source.iter().for_each(|m| {
                acc.remove_member(m);
            }),
            Op::Diff => acc.retain(|m| !source.contains_member(m)),
        }
    }

    /// The result; a STORE destination gets the encoding Redis would have built.
    fn finish(self, store: bool) -> Set {
        let mut acc = self.acc;
        if store {
            if self.hashtable {
                acc.to_hashtable();
            } else {
                acc.shrink_encoding();
            }
        }
        acc
    }
}

/// The members of `source` that are in `first`: all that matters of `source` to an
/// intersection or a difference starting from `first`.
fn restrict(source: &Set, first: &Set) -> Set {
    let mut out = Set::default();
    if source.len() <= first.len() {
        for m in source.iter().filter(|&m| first.contains_member(m)) {
            out.insert_member(m);
        }
    } else {
        for m in first.iter().filter(|&m| source.contains_member(m)) {
            out.insert_member(m);
        }
    }
    out
}

/// `op` over `keys` on this shard: the result, or WRONGTYPE.
fn compute(ctx: &mut ShardCtx<'_>, op: Op, keys: &[&[u8]], store: bool) -> Result<Set, WrongType> {
    let probes: Vec<Probe> = keys.iter().map(|k| probe(ctx.db, k, ctx.now)).collect();
    let (start, rest, whole_first) = match outline(op, keys, &probes) {
        Outline::WrongType => return Err(WrongType),
        Outline::Empty => return Ok(Set::default()),
        Outline::Fold {
            start,
            rest,
            whole_first,
        } => (start, rest, whole_first),
    };
    let first = read(ctx.db, keys[start], ctx.now)?
        .cloned()
        .unwrap_or_default();
    let mut fold = Fold::start(op, first, whole_first);
    for i in rest {
        if let Some(source) = read(ctx.db, keys[i], ctx.now)? {
            fold.add(source);
        }
    }
    Ok(fold.finish(store))
}

/// Stores a STORE command's result at `dst` (deleting `dst` when it is empty, as Redis
/// does, and dropping any expiry); its size. `log`: a plan's hop logs what it wrote.
fn store(ctx: &mut ShardCtx<'_>, dst: &[u8], result: Set, log: bool) -> i64 {
    let n = result.len() as i64;
    if result.is_empty() {
        if ctx.db.delete(dst, ctx.now) && log {
            ctx.log(&[b"DEL", dst]);
        }
        return n;
    }
    if log && ctx.logging() {
        for argv in restore_commands(dst, ValueRef::Set(&result), None) {
            let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            ctx.log(&argv);
        }
    }
    ctx.db
        .insert(dst, Value::Set(Box::new(result)), None, ctx.now);
    n
}

/// The sources from argument `from` on.
fn sources<'a>(args: &Args<'a>, from: usize) -> Vec<&'a [u8]> {
    args.iter_from(from).collect()
}

/// SINTER, SUNION, SDIFF on one shard.
fn reply_op(ctx: &mut ShardCtx<'_>, args: &Args<'_>, op: Op) {
    match compute(ctx, op, &sources(args, 1), false) {
        Ok(result) => reply_set(&mut ctx.out, &result),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// SINTERSTORE, SUNIONSTORE, SDIFFSTORE on one shard.
fn store_op(ctx: &mut ShardCtx<'_>, args: &Args<'_>, op: Op) {
    match compute(ctx, op, &sources(args, 2), true) {
        Ok(result) => {
            let n = store(ctx, args.get(1), result, false);
            ctx.out.integer(n);
        }
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `SINTER key [key ...]`
fn sinter(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    reply_op(ctx, args, Op::Inter);
}

/// `SUNION key [key ...]`
fn sunion(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    reply_op(ctx, args, Op::Union);
}

/// `SDIFF key [key ...]`
fn sdiff(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    reply_op(ctx, args, Op::Diff);
}

/// `SINTERSTORE destination key [key ...]`
fn sinterstore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    store_op(ctx, args, Op::Inter);
}

/// `SUNIONSTORE destination key [key ...]`
fn sunionstore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    store_op(ctx, args, Op::Union);
}

/// `SDIFFSTORE destination key [key ...]`
fn sdiffstore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    store_op(ctx, args, Op::Diff);
}

/// SINTERCARD's numkeys and LIMIT (0: none), checked as `sinterCardCommand` checks them.
fn parse_sintercard(args: &Args<'_>) -> Result<(usize, usize), ErrorReply> {
    let numkeys = parse_i64(args.get(1))
        .filter(|&n| n >= 1)
        .ok_or(ErrorReply::Fixed(errors::NUMKEYS_NOT_POSITIVE))?;
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > args.len().saturating_sub(2) {
        return Err(errors::NUMKEYS_TOO_MANY.into());
    }
    let mut limit = 0;
    let mut c = args.cursor(2 + numkeys);
    while let Some(opt) = c.next() {
        if is_keyword(opt, "limit") && !c.is_empty() {
            let n = c.next_parsed(|s| parse_i64(s).filter(|&n| n >= 0), errors::LIMIT_NEGATIVE)?;
            limit = usize::try_from(n).unwrap_or(usize::MAX);
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok((numkeys, limit))
}

/// The size of an intersection as SINTERCARD counts it: at most `limit` (0: no limit).
fn cardinality(result: &Set, limit: usize) -> i64 {
    let n = result.len();
    (if limit > 0 { n.min(limit) } else { n }) as i64
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`
fn sintercard(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (numkeys, limit) = match parse_sintercard(args) {
        Ok(parsed) => parsed,
        Err(e) => return e.send(&mut ctx.out),
    };
    let keys: Vec<&[u8]> = args.iter_from(2).take(numkeys).collect();
    match compute(ctx, Op::Inter, &keys, false) {
        Ok(result) => ctx.out.integer(cardinality(&result, limit)),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// What a cross-shard set operation answers.
#[derive(Debug)]
enum Output {
    /// The members (SINTER, SUNION, SDIFF).
    Members,
    /// How many, at most a limit (SINTERCARD).
    Card(usize),
    /// How many, stored at this key (the STORE forms).
    Store(Vec<u8>),
}

/// A set operation whose keys span shards: probe, fetch the first set, fold the others
/// (restricted to the first set's members unless it is a union) shard by shard, compute on
/// the coordinator, store.
#[derive(Debug)]
struct AlgebraPlan {
    op: Op,
    output: Output,
    keys: Vec<Vec<u8>>,
    shards: Vec<usize>,
    stage: Stage,
    /// After the probes: the sources still to fold, in order.
    rest: Vec<usize>,
    whole_first: bool,
    /// The first set, shared with the hops that restrict other sources to it.
    first: Option<Arc<Set>>,
    stored: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Probed,
    Fetched,
    Folded,
    Stored,
}

/// The sources of `indices`, grouped by shard (shards in order of first appearance).
fn by_shard(
    shards: &[usize],
    indices: impl IntoIterator<Item = usize>,
) -> Vec<(usize, Vec<usize>)> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for i in indices {
        let shard = shards[i];
        match groups.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, g)) => g.push(i),
            None => groups.push((shard, vec![i])),
        }
    }
    groups
}

impl AlgebraPlan {
    fn new(start: &PlanStart<'_>, op: Op, output: Output, keys: Vec<Vec<u8>>) -> AlgebraPlan {
        let shards = keys.iter().map(|k| start.slots.shard_of_key(k)).collect();
        AlgebraPlan {
            op,
            output,
            keys,
            shards,
            stage: Stage::Start,
            rest: Vec::new(),
            whole_first: false,
            first: None,
            stored: 0,
        }
    }

    fn probe_hops(&self) -> Vec<Hop> {
        by_shard(&self.shards, 0..self.keys.len())
            .into_iter()
            .map(|(shard, indices)| {
                let keys: Vec<(usize, Vec<u8>)> =
                    indices.iter().map(|&i| (i, self.keys[i].clone())).collect();
                Hop::run(shard, move |ctx| {
                    let probes: Vec<(usize, Probe)> = keys
                        .iter()
                        .map(|(i, k)| (*i, probe(ctx.db, k, ctx.now)))
                        .collect();
                    HopOut::Other(Box::new(probes))
                })
            })
            .collect()
    }

    /// The reply, or the write of the destination, once the result is known.
    fn finish(&mut self, cx: &PlanCx<'_>, result: Set) -> Step {
        match &self.output {
            Output::Members => cx.done(|e| reply_set(e, &result)),
            Output::Card(limit) => {
                let n = cardinality(&result, *limit);
                cx.done(|e| e.integer(n))
            }
            Output::Store(dst) => {
                let dst = dst.clone();
                self.stage = Stage::Stored;
                self.stored = result.len() as i64;
                Step::Hops(vec![Hop::run(cx.slots.shard_of_key(&dst), move |ctx| {
                    store(ctx, &dst, result, true);
                    HopOut::Done
                })])
            }
        }
    }

    fn after_probes(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        let mut probes = vec![Probe::Missing; self.keys.len()];
        for r in results {
            if let HopOut::Other(any) = r
                && let Ok(found) = any.downcast::<Vec<(usize, Probe)>>()
            {
                for (i, p) in *found {
                    probes[i] = p;
                }
            }
        }
        let keys: Vec<&[u8]> = self.keys.iter().map(Vec::as_slice).collect();
        match outline(self.op, &keys, &probes) {
            Outline::WrongType => cx.done(|e| e.error(errors::WRONGTYPE)),
            Outline::Empty => self.finish(cx, Set::default()),
            Outline::Fold {
                start,
                rest,
                whole_first,
            } => {
                self.rest = rest;
                self.whole_first = whole_first;
                self.stage = Stage::Fetched;
                let key = self.keys[start].clone();
                Step::Hops(vec![Hop::run(self.shards[start], move |ctx| {
                    let set = read(ctx.db, &key, ctx.now).ok().flatten().cloned();
                    HopOut::Other(Box::new(set.unwrap_or_default()))
                })])
            }
        }
    }

    fn after_first(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        let first = match results.into_iter().next() {
            Some(HopOut::Other(any)) => any.downcast::<Set>().map(|s| *s).unwrap_or_default(),
            _ => Set::default(),
        };
        if self.rest.is_empty() {
            let fold = Fold::start(self.op, first, self.whole_first);
            let store = matches!(self.output, Output::Store(_));
            return self.finish(cx, fold.finish(store));
        }
        // A union needs the other sources whole; an intersection or a difference only
        // their members that are in the first set.
        let first = Arc::new(first);
        let against = (self.op != Op::Union).then(|| Arc::clone(&first));
        self.first = Some(first);
        self.stage = Stage::Folded;
        let hops = by_shard(&self.shards, self.rest.iter().copied())
            .into_iter()
            .map(|(shard, indices)| {
                let keys: Vec<(usize, Vec<u8>)> =
                    indices.iter().map(|&i| (i, self.keys[i].clone())).collect();
                let against = against.clone();
                Hop::run(shard, move |ctx| {
                    let mut sets: Vec<(usize, Set)> = Vec::with_capacity(keys.len());
                    for (i, k) in &keys {
                        if let Ok(Some(source)) = read(ctx.db, k, ctx.now) {
                            let part = match &against {
                                Some(first) => restrict(source, first),
                                None => source.clone(),
                            };
                            sets.push((*i, part));
                        }
                    }
                    HopOut::Other(Box::new(sets))
                })
            })
            .collect();
        Step::Hops(hops)
    }

    fn after_sources(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        let mut sets: Vec<Option<Set>> = (0..self.keys.len()).map(|_| None).collect();
        for r in results {
            if let HopOut::Other(any) = r
                && let Ok(found) = any.downcast::<Vec<(usize, Set)>>()
            {
                for (i, s) in *found {
                    sets[i] = Some(s);
                }
            }
        }
        let first = self
            .first
            .take()
            .map(Arc::unwrap_or_clone)
            .unwrap_or_default();
        let mut fold = Fold::start(self.op, first, self.whole_first);
        for &i in &self.rest {
            if let Some(source) = &sets[i] {
                fold.add(source);
            }
        }
        let store = matches!(self.output, Output::Store(_));
        self.finish(cx, fold.finish(store))
    }
}

impl Plan for AlgebraPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match self.stage {
            Stage::Start => {
                self.stage = Stage::Probed;
                Step::Hops(self.probe_hops())
            }
            Stage::Probed => self.after_probes(cx, results),
            Stage::Fetched => self.after_first(cx, results),
            Stage::Folded => self.after_sources(cx, results),
            Stage::Stored => {
                let n = self.stored;
                cx.done(|e| e.integer(n))
            }
        }
    }
}

fn algebra_plan(
    start: &PlanStart<'_>,
    op: Op,
    output: Output,
    from: usize,
    n: usize,
) -> Box<dyn Plan> {
    let keys = start
        .args
        .iter_from(from)
        .take(n)
        .map(<[u8]>::to_vec)
        .collect();
    Box::new(AlgebraPlan::new(start, op, output, keys))
}

fn sinter_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(algebra_plan(
        start,
        Op::Inter,
        Output::Members,
        1,
        usize::MAX,
    ))
}

fn sunion_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(algebra_plan(
        start,
        Op::Union,
        Output::Members,
        1,
        usize::MAX,
    ))
}

fn sdiff_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(algebra_plan(
        start,
        Op::Diff,
        Output::Members,
        1,
        usize::MAX,
    ))
}

fn sintercard_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let (numkeys, limit) = parse_sintercard(start.args)?;
    Ok(algebra_plan(
        start,
        Op::Inter,
        Output::Card(limit),
        2,
        numkeys,
    ))
}

fn store_plan(start: &PlanStart<'_>, op: Op) -> Box<dyn Plan> {
    let dst = start.args.get(1).to_vec();
    algebra_plan(start, op, Output::Store(dst), 2, usize::MAX)
}

fn sinterstore_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(store_plan(start, Op::Inter))
}

fn sunionstore_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(store_plan(start, Op::Union))
}

fn sdiffstore_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(store_plan(start, Op::Diff))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeSet;
    use std::rc::Rc;

    use super::*;
    use crate::shard::events::{Effect, Observer, Write};
    use crate::testkit::Loopback;

    /// A write's effect: `None` for a command that is its own effect.
    type Logged = Option<Vec<Vec<Vec<u8>>>>;

    /// Each write's shard and effect, in order.
    type Seen = Rc<RefCell<Vec<(usize, Logged)>>>;

    /// Records each write's effect, per shard.
    #[derive(Debug)]
    struct Effects(usize, Seen);

    impl Observer for Effects {
        fn on_write(&mut self, write: &Write<'_>) {
            let effect = match write.effect {
                Effect::AsSent => None,
                Effect::Commands(c) => Some(c.to_vec()),
                Effect::Events => Some(Vec::new()),
            };
            self.1.borrow_mut().push((self.0, effect));
        }
    }

    fn observed(threads: usize) -> (Loopback, Seen) {
        let mut lb = Loopback::new(threads);
        let seen = Rc::new(RefCell::new(Vec::new()));
        for (i, shard) in lb.shards.iter_mut().enumerate() {
            shard.add_observer(Box::new(Effects(i, Rc::clone(&seen))));
        }
        (lb, seen)
    }

    /// The bulk strings of a RESP2 reply (a bulk, or an array of bulks).
    fn bulks(reply: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut rest = reply;
        while let Some(at) = rest.iter().position(|&b| b == b'$') {
            let line_end = rest[at..].iter().position(|&b| b == b'\r').unwrap() + at;
            let n: usize = std::str::from_utf8(&rest[at + 1..line_end])
                .unwrap()
                .parse()
                .unwrap();
            out.push(rest[line_end + 2..line_end + 2 + n].to_vec());
            rest = &rest[line_end + 4 + n..];
        }
        out
    }

    fn argv(parts: &[&[u8]]) -> Vec<Vec<u8>> {
        parts.iter().map(|p| p.to_vec()).collect()
    }

    #[test]
    fn spop_logs_the_members_it_popped_as_srem() {
        let (mut lb, seen) = observed(1);
        lb.exec(&[
            b"SADD", b"s", b"a", b"b", b"c", b"1", b"2", b"3", b"4", b"5",
        ]);
        assert_eq!(
            seen.borrow().last().cloned(),
            Some((0, None)),
            "SADD as sent"
        );
        let one = bulks(&lb.exec(&[b"SPOP", b"s"]));
        let mut want = argv(&[b"SREM", b"s"]);
        want.extend(one);
        assert_eq!(seen.borrow().last().cloned(), Some((0, Some(vec![want]))));
        // A few of many, most of the rest (the set rebuilt), then all that is left.
        for count in [&b"2"[..], b"4", b"9"] {
            let popped = bulks(&lb.exec(&[b"SPOP", b"s", count]));
            let logged = seen.borrow().last().cloned().unwrap().1.unwrap();
            let want = if count == b"9" {
                vec![argv(&[b"DEL", b"s"])]
            } else {
                let mut srem = argv(&[b"SREM", b"s"]);
                srem.extend(popped.clone());
                vec![srem]
            };
            assert_eq!(logged, want, "SPOP s {}", String::from_utf8_lossy(count));
        }
        assert_eq!(lb.exec(&[b"EXISTS", b"s"]), b":0\r\n");
        // Reads log nothing.
        let before = seen.borrow().len();
        lb.exec(&[b"SRANDMEMBER", b"s", b"-5"]);
        lb.exec(&[b"SPOP", b"s", b"3"]);
        assert_eq!(seen.borrow().len(), before);
    }

    #[test]
    fn cross_shard_stores_and_smove_log_what_each_shard_wrote() {
        let (mut lb, seen) = observed(2);
        let (a, b) = lb.keys_on_two_shards();
        lb.exec(&[b"SADD", &a, b"x", b"1"]);
        lb.exec(&[b"SADD", &b, b"y", b"1"]);
        seen.borrow_mut().clear();
        // The destination on b's shard: DEL, then the SADD that rebuilds it.
        assert_eq!(
            lb.plan(&[b"SUNIONSTORE", &b, &a, &b]),
            Some(b":3\r\n".to_vec())
        );
        let logged = seen.borrow().clone();
        assert_eq!(
            logged.len(),
            1,
            "only the destination's shard wrote: {logged:?}"
        );
        let (shard, effect) = logged[0].clone();
        assert_eq!(shard, 1);
        let effect = effect.unwrap();
        assert_eq!(effect[0], argv(&[b"DEL", &b]));
        assert_eq!(&effect[1][..2], &argv(&[b"SADD", &b])[..]);
        let members: BTreeSet<Vec<u8>> = effect[1][2..].iter().cloned().collect();
        assert_eq!(
            members,
            BTreeSet::from([b"x".to_vec(), b"y".to_vec(), b"1".to_vec()])
        );
        // An empty result deletes the destination.
        seen.borrow_mut().clear();
        assert_eq!(
            lb.plan(&[b"SDIFFSTORE", &b, &a, &b]),
            Some(b":0\r\n".to_vec())
        );
        assert_eq!(
            seen.borrow().clone(),
            vec![(1, Some(vec![argv(&[b"DEL", &b])]))]
        );
        // SMOVE: each shard logs its half.
        lb.exec(&[b"SADD", &b, b"z"]);
        seen.borrow_mut().clear();
        assert_eq!(lb.plan(&[b"SMOVE", &a, &b, b"x"]), Some(b":1\r\n".to_vec()));
        let mut logged = seen.borrow().clone();
        logged.sort();
        assert_eq!(
            logged,
            vec![
                (0, Some(vec![argv(&[b"SREM", &a, b"x"])])),
                (1, Some(vec![argv(&[b"SADD", &b, b"x"])])),
            ]
        );
        // A source of the wrong type: nothing written anywhere.
        lb.exec(&[b"SET", &a, b"v"]);
        seen.borrow_mut().clear();
        let wrongtype = format!("-{}\r\n", String::from_utf8_lossy(errors::WRONGTYPE));
        for cmd in [&b"SINTERSTORE"[..], b"SUNIONSTORE", b"SDIFFSTORE"] {
            assert_eq!(
                lb.plan(&[cmd, &b, &b, &a]),
                Some(wrongtype.clone().into_bytes())
            );
        }
        assert_eq!(
            lb.plan(&[b"SMOVE", &b, &a, b"z"]),
            Some(wrongtype.into_bytes())
        );
        assert!(seen.borrow().is_empty());
        assert_eq!(lb.exec(&[b"SCARD", &b]), b":2\r\n", "z and x");
    }

    fn outline_of(op: Op, keys: &[&str], probes: &[Probe]) -> Outline {
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        outline(op, &keys, probes)
    }

    #[test]
    fn outlines_follow_redis() {
        use Probe::{Len, Missing, WrongType as Wrong};
        let fold = |start, rest: &[usize], whole_first| Outline::Fold {
            start,
            rest: rest.to_vec(),
            whole_first,
        };
        // Any wrong type is an error, even after an absent key.
        assert_eq!(
            outline_of(Op::Inter, &["a", "b"], &[Missing, Wrong]),
            Outline::WrongType
        );
        // Intersections: an absent key empties them; smallest first, then by size; a key
        // named twice is folded once.
        assert_eq!(
            outline_of(Op::Inter, &["a", "b"], &[Len(3), Missing]),
            Outline::Empty
        );
        assert_eq!(
            outline_of(
                Op::Inter,
                &["a", "b", "c", "b"],
                &[Len(5), Len(9), Len(2), Len(9)]
            ),
            fold(2, &[0, 1], false)
        );
        // Unions: the largest first; absent keys skipped.
        assert_eq!(
            outline_of(Op::Union, &["a", "b", "c"], &[Len(2), Missing, Len(7)]),
            fold(2, &[0], false)
        );
        assert_eq!(
            outline_of(Op::Union, &["a", "b"], &[Missing, Missing]),
            Outline::Empty
        );
        // Differences: from the first set; empty without it or with it named again.
        assert_eq!(
            outline_of(Op::Diff, &["a", "b"], &[Missing, Len(3)]),
            Outline::Empty
        );
        assert_eq!(
            outline_of(Op::Diff, &["a", "b", "a"], &[Len(3), Len(3), Len(3)]),
            Outline::Empty
        );
        // Redis's second algorithm when (first × sets) / 2 exceeds all the members.
        assert_eq!(
            outline_of(Op::Diff, &["a", "b"], &[Len(600), Len(10)]),
            fold(0, &[1], false)
        );
        assert_eq!(
            outline_of(Op::Diff, &["a", "b", "c"], &[Len(600), Len(10), Len(10)]),
            fold(0, &[1, 2], true)
        );
    }
}
