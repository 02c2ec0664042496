//! HyperLogLog on the string type: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST, with
//! redis-server 7.0's representation (`repr`), replies, errors and side effects.
//!
//! Side effects follow `hyperloglog.c`:
//! - a command that may change a HyperLogLog unshares its string first, so the key is
//!   `raw` from then on, even when nothing changes (PFADD adding nothing new, PFCOUNT,
//!   PFDEBUG);
//! - PFADD writes (and notifies `pfadd`) only when a register rose or the key was created;
//!   PFMERGE always writes its destination, and notifies `pfadd`;
//! - PFCOUNT of one key writes the cardinality it computed into the cache: a write WATCH
//!   sees, without a notification;
//! - PFDEBUG GETREG and TODENSE make a sparse value dense: a write WATCH does not see
//!   (Redis does not signal it), as does the part of a PFADD that changed registers
//!   before it found its value corrupted.
//!
//! PFCOUNT of several keys and PFMERGE may span shards: each shard merges its keys into
//! one register per byte (or reports its first key that is not a HyperLogLog), the
//! coordinator takes the maximum of the parts — the error of the first key in argument
//! order wins — and PFMERGE's destination shard applies the registers to its value.

mod repr;

use goblin_store::{Keyspace, Millis, RAW, Value, ValueMut};

use crate::errors;
use crate::shard::slots::SlotMap;
use crate::table::handler::{Args, ConnCtx, Exec, ShardCtx};
use crate::table::keys::InvalidKeys;
use crate::table::{CommandTable, KeyFlags, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Plan, PlanCx, PlanStart};
use crate::txn::shapes::{Decision, ReadThenWrite};

use super::strings::{Str, lookup};
use repr::{Corrupt, DENSE, Hll, REGISTERS, SPARSE};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::PFADD, Exec::Shard(pfadd));
    table
        .add(&meta::PFCOUNT, Exec::Shard(pfcount))
        .cross_shard(pfcount_plan, Locking::Keys);
    table
        .add(&meta::PFMERGE, Exec::Shard(pfmerge))
        .cross_shard(pfmerge_plan, Locking::Keys)
        .route_keys(pfmerge_dest_alone);
    table.add(&meta::PFDEBUG, Exec::Shard(pfdebug));
    table.add(&meta::PFSELFTEST, Exec::Conn(pfselftest));
}

/// A key read as a HyperLogLog: absent, or its value and expiry.
enum Read<'a> {
    Absent,
    Hll(&'a [u8], Option<Millis>),
}

/// What `key` holds, as `isHLLObjectOrReply` sees it: the error for another type or a
/// string that is not a HyperLogLog.
fn read<'a>(db: &'a mut Keyspace, key: &[u8], now: Millis) -> Result<Read<'a>, &'static [u8]> {
    match lookup(db, key, now) {
        (Str::Absent, _) => Ok(Read::Absent),
        (Str::WrongType, _) => Err(errors::WRONGTYPE),
        (Str::Value(s), expire) if repr::is_hll(s) => Ok(Read::Hll(s, expire)),
        (Str::Value(_), _) => Err(errors::HLL_WRONGTYPE),
    }
}

/// How a change to a stored HyperLogLog is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wrote {
    /// Nothing changed.
    Nothing,
    /// A write like any other: WATCH sees it.
    Loudly,
    /// A write Redis makes without `signalModifiedKey`: WATCH does not see it.
    Quietly,
}

/// Changes the HyperLogLog at the live string key `key` (expiring at `expire`) with `f`:
/// in place when it is boxed, else on a copy stored back; the write is recorded as `f`
/// says. The key is `raw` afterwards, as Redis unshares a string before changing it.
fn change<R>(
    db: &mut Keyspace,
    key: &[u8],
    now: Millis,
    expire: Option<Millis>,
    f: impl FnOnce(&mut Vec<u8>) -> (R, Wrote),
) -> Option<R> {
    enum Done<R> {
        InPlace(R, Wrote),
        Copied(R, Wrote, Vec<u8>),
    }
    let done = db.modify(key, now, |v| match v {
        ValueMut::Boxed(Value::Str(s)) => {
            let (r, wrote) = f(s);
            (Some(Done::InPlace(r, wrote)), wrote == Wrote::Loudly)
        }
        ValueMut::InlineStr(s) => {
            let mut copy = s.to_vec();
            let (r, wrote) = f(&mut copy);
            (Some(Done::Copied(r, wrote, copy)), false)
        }
        ValueMut::Boxed(_) => (None, false),
    })??;
    let r = match done {
        Done::InPlace(r, Wrote::Quietly) => {
            db.quietly(|db| db.modify(key, now, |_| ((), true)));
            r
        }
        Done::InPlace(r, _) | Done::Copied(r, Wrote::Nothing, _) => r,
        Done::Copied(r, Wrote::Loudly, copy) => {
            db.set_str(key, &copy, expire, now);
            r
        }
        Done::Copied(r, Wrote::Quietly, copy) => {
            db.quietly(|db| db.set_str(key, &copy, expire, now));
            r
        }
    };
    db.add_flags(key, RAW, now);
    Some(r)
}

/// Stores a new HyperLogLog at `key` (a created key, without expiry, `raw`).
fn create(db: &mut Keyspace, key: &[u8], now: Millis, value: &[u8]) {
    db.set_str(key, value, None, now);
    db.add_flags(key, RAW, now);
}

/// `PFADD key [element ...]`: 1 when a register rose (or the key was created), else 0.
fn pfadd(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (key, max_bytes) = (args.get(1), ctx.hll_sparse_max_bytes);
    let expire = match read(ctx.db, key, ctx.now) {
        Err(e) => return ctx.out.error(e),
        Ok(Read::Absent) => {
            let mut v = repr::new_sparse();
            let mut hll = Hll::new(&mut v, max_bytes);
            for ele in args.iter_from(2) {
                // A new HyperLogLog is never corrupt.
                let _ = hll.add(ele);
            }
            repr::invalidate(&mut v);
            create(ctx.db, key, ctx.now, &v);
            return ctx.out.integer(1);
        }
        Ok(Read::Hll(_, expire)) => expire,
    };
    let outcome = change(ctx.db, key, ctx.now, expire, |v| {
        let mut hll = Hll::new(v, max_bytes);
        let mut updated = false;
        for ele in args.iter_from(2) {
            match hll.add(ele) {
                Ok(rose) => updated |= rose,
                // What rose before stays risen, unsignalled, as in Redis.
                Err(Corrupt) => {
                    let wrote = if updated {
                        Wrote::Quietly
                    } else {
                        Wrote::Nothing
                    };
                    return (Err(Corrupt), wrote);
                }
            }
        }
        if updated {
            repr::invalidate(v);
            (Ok(true), Wrote::Loudly)
        } else {
            (Ok(false), Wrote::Nothing)
        }
    });
    match outcome {
        Some(Ok(updated)) => ctx.out.integer(i64::from(updated)),
        Some(Err(Corrupt)) => ctx.out.error(errors::HLL_INVALID),
        None => ctx.out.error(errors::HLL_WRONGTYPE),
    }
}

/// Keys merged into one register per byte, and whether any was dense; or the index among
/// the keys of the first that failed, with the error (one shard's part of a multi-key
/// read travels as this).
type Merged = Result<(Vec<u8>, bool), (usize, &'static [u8])>;

/// The HyperLogLogs at `keys`, in order, merged into one register per byte (a missing key
/// is empty), and whether any was dense; or the index among `keys` of the first key that
/// is not a readable HyperLogLog, with its error.
fn merge_keys<'k>(db: &mut Keyspace, now: Millis, keys: impl Iterator<Item = &'k [u8]>) -> Merged {
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    for (i, key) in keys.enumerate() {
        if let Read::Hll(s, _) = read(db, key, now).map_err(|e| (i, e))? {
            dense |= repr::encoding(s) == DENSE;
            repr::merge(&mut max, s).map_err(|Corrupt| (i, errors::HLL_INVALID))?;
        }
    }
    Ok((max, dense))
}

/// The cardinality of registers held one per byte.
fn count_of(max: &[u8]) -> i64 {
    let card = repr::estimate(&repr::raw_histogram(max));
    i64::try_from(card).unwrap_or(i64::MAX)
}

/// `PFCOUNT key [key ...]`: one key's cardinality (cached in its value), or the
/// cardinality of the union of several.
fn pfcount(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if args.len() > 2 {
        return match merge_keys(ctx.db, ctx.now, args.iter_from(1)) {
            Ok((max, _)) => ctx.out.integer(count_of(&max)),
            Err((_, e)) => ctx.out.error(e),
        };
    }
    let key = args.get(1);
    /// What the value says of its cardinality.
    enum Card {
        Cached(u64),
        Computed(u64),
        Corrupt,
    }
    let (card, expire) = match read(ctx.db, key, ctx.now) {
        Err(e) => return ctx.out.error(e),
        Ok(Read::Absent) => return ctx.out.integer(0),
        Ok(Read::Hll(s, expire)) => {
            let card = match repr::cached(s) {
                Some(card) => Card::Cached(card),
                None => match repr::histogram(s) {
                    Ok(h) => Card::Computed(repr::estimate(&h)),
                    Err(Corrupt) => Card::Corrupt,
                },
            };
            (card, expire)
        }
    };
    let card = match card {
        Card::Cached(card) => {
            ctx.db.add_flags(key, RAW, ctx.now);
            card
        }
        Card::Corrupt => {
            ctx.db.add_flags(key, RAW, ctx.now);
            return ctx.out.error(errors::HLL_INVALID);
        }
        Card::Computed(card) => {
            change(ctx.db, key, ctx.now, expire, |v| {
                repr::set_cached(v, card);
                ((), Wrote::Loudly)
            });
            card
        }
    };
    ctx.out.integer(i64::try_from(card).unwrap_or(i64::MAX));
}

/// Applies merged registers to the HyperLogLog at `dest` (checked, or absent: created
/// sparse), as PFMERGE does: dense first if any input was, then each register raised in
/// order — a sparse value may be promoted on the way — and the cache marked stale.
fn store_merge(
    ctx: &mut ShardCtx<'_>,
    dest: &[u8],
    max: &[u8],
    dense: bool,
) -> Result<(), &'static [u8]> {
    let (now, max_bytes) = (ctx.now, ctx.hll_sparse_max_bytes);
    let db = &mut *ctx.db;
    let apply = |v: &mut Vec<u8>| -> Result<(), Corrupt> {
        let mut hll = Hll::new(v, max_bytes);
        if dense {
            hll.make_dense()?;
        }
        for (j, &m) in max.iter().enumerate() {
            if m > 0 {
                // Redis ignores a register it cannot raise: the value was checked.
                let _ = hll.raise(j, m);
            }
        }
        repr::invalidate(v);
        Ok(())
    };
    match read(db, dest, now)? {
        Read::Absent => {
            let mut v = repr::new_sparse();
            apply(&mut v).map_err(|Corrupt| errors::HLL_INVALID)?;
            create(db, dest, now, &v);
            Ok(())
        }
        Read::Hll(_, expire) => {
            let done = change(db, dest, now, expire, |v| match apply(v) {
                Ok(()) => (Ok(()), Wrote::Loudly),
                Err(Corrupt) => (Err(errors::HLL_INVALID), Wrote::Nothing),
            });
            done.unwrap_or(Err(errors::HLL_WRONGTYPE))
        }
    }
}

/// `PFMERGE destkey [sourcekey ...]`: the union of the sources and of the destination
/// itself, stored at the destination.
fn pfmerge(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (max, dense) = match merge_keys(ctx.db, ctx.now, args.iter_from(1)) {
        Ok(merged) => merged,
        Err((_, e)) => return ctx.out.error(e),
    };
    match store_merge(ctx, args.get(1), &max, dense) {
        Ok(()) => ctx.out.ok(),
        Err(e) => ctx.out.error(e),
    }
}

/// Whether `word` names a PFDEBUG subcommand (compared as C's `strcasecmp` compares: up
/// to a NUL).
fn is_sub(word: &[u8], name: &str) -> bool {
    errors::c_str(word).eq_ignore_ascii_case(name.as_bytes())
}

/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`
fn pfdebug(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (sub, key) = (args.get(1), args.get(2));
    let (s, expire) = match read(ctx.db, key, ctx.now) {
        Err(e) => return ctx.out.error(e),
        Ok(Read::Absent) => return ctx.out.error(errors::PFDEBUG_NO_KEY),
        Ok(Read::Hll(s, expire)) => (s, expire),
    };
    let sparse = repr::encoding(s) == SPARSE;
    // GETREG and TODENSE make a sparse value dense (unsignalled, as Redis does).
    let mut dense_now = None;
    if is_sub(sub, "getreg") || is_sub(sub, "todense") {
        if sparse {
            match repr::to_dense(s) {
                Ok(d) => dense_now = Some(d),
                Err(Corrupt) => {
                    ctx.db.add_flags(key, RAW, ctx.now);
                    return ctx.out.error(errors::HLL_INVALID);
                }
            }
        }
        if is_sub(sub, "getreg") {
            let regs = dense_now.as_deref().unwrap_or(s);
            ctx.out.array(REGISTERS);
            for r in repr::dense_registers(regs) {
                ctx.out.integer(i64::from(r));
            }
        } else {
            ctx.out.integer(i64::from(sparse));
        }
    } else if is_sub(sub, "decode") {
        if sparse {
            ctx.out.bulk(repr::decode(s).as_bytes());
        } else {
            ctx.out.error(errors::PFDEBUG_NOT_SPARSE);
        }
    } else if is_sub(sub, "encoding") {
        ctx.out.simple(if sparse { b"sparse" } else { b"dense" });
    } else {
        errors::pfdebug_unknown(sub).send(&mut ctx.out);
    }
    if let Some(d) = dense_now {
        ctx.db.quietly(|db| db.set_str(key, &d, expire, ctx.now));
    }
    ctx.db.add_flags(key, RAW, ctx.now);
}

/// `PFSELFTEST`: checks the registers' packing and the estimator (see
/// [`repr::selftest`]).
fn pfselftest(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let max_bytes = ctx.shared.hll_sparse_max_bytes();
    match repr::selftest(ctx.now ^ 0x9e37_79b9_7f4a_7c15, max_bytes) {
        Ok(()) => ctx.reply().ok(),
        Err(e) => ctx.reply().error(e.as_bytes()),
    }
}

/// The keys from argument `from` on, grouped by shard: each shard's argument indexes, and
/// a hop per shard merging its keys ([`Merged`]).
fn read_hops(args: &Args<'_>, from: usize, slots: &SlotMap) -> (Vec<Vec<usize>>, Vec<Hop>) {
    let shards = slots.group_by_shard((from..args.len()).map(|i| (i, args.get(i))));
    let hops = shards
        .iter()
        .map(|(shard, idx)| {
            let keys: Vec<Vec<u8>> = idx.iter().map(|&i| args.get(i).to_vec()).collect();
            Hop::run(*shard, move |ctx| {
                let out: Merged = merge_keys(ctx.db, ctx.now, keys.iter().map(Vec::as_slice));
                HopOut::Other(Box::new(out))
            })
        })
        .collect();
    (shards.into_iter().map(|(_, idx)| idx).collect(), hops)
}

/// The parts' registers merged, and whether any input was dense; or the error of the
/// first failing key in argument order.
fn gather(positions: &[Vec<usize>], results: Vec<HopOut>) -> Result<(Vec<u8>, bool), Vec<u8>> {
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    let mut first_error: Option<(usize, &'static [u8])> = None;
    for (idx, out) in positions.iter().zip(results) {
        let part = match out {
            HopOut::Other(any) => any.downcast::<Merged>().ok().map(|p| *p),
            _ => None,
        };
        match part {
            Some(Ok((registers, d))) => {
                for (m, r) in max.iter_mut().zip(registers) {
                    *m = (*m).max(r);
                }
                dense |= d;
            }
            Some(Err((i, e))) => {
                let at = idx.get(i).copied().unwrap_or(usize::MAX);
                if first_error.is_none_or(|(first, _)| at < first) {
                    first_error = Some((at, e));
                }
            }
            None => return Err(errors::NOT_RUN.to_vec()),
        }
    }
    match first_error {
        Some((_, e)) => Err(e.to_vec()),
        None => Ok((max, dense)),
    }
}

/// `PFMERGE dest` (no source) merges the destination into itself: its key specs find no
/// key there (the sources' spec is empty, which makes the search invalid), but the
/// command writes `dest`, which must run on its shard.
fn pfmerge_dest_alone(
    args: &Args<'_>,
    found: &mut dyn FnMut(usize, KeyFlags),
) -> Result<(), InvalidKeys> {
    if args.len() != 2 {
        return Err(InvalidKeys);
    }
    found(1, KeyFlags::RW | KeyFlags::ACCESS | KeyFlags::INSERT);
    Ok(())
}

/// What PFCOUNT's and PFMERGE's plans know between their reads and their decision.
#[derive(Debug)]
struct MergeState {
    /// Each read hop's argument indexes, in the order of the hops.
    positions: Vec<Vec<usize>>,
    /// PFMERGE's destination (`None` for PFCOUNT).
    dest: Option<Vec<u8>>,
}

/// PFCOUNT of keys on several shards: each shard merges its keys, the coordinator counts
/// the union (nothing is written: the cache is for one key).
fn pfcount_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let (positions, reads) = read_hops(start.args, 1, start.slots);
    let state = MergeState {
        positions,
        dest: None,
    };
    Ok(Box::new(ReadThenWrite::new(state, reads, decide_count)))
}

fn decide_count(state: &mut MergeState, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Decision {
    let reply = match gather(&state.positions, results) {
        Ok((max, _)) => cx.reply(|e| e.integer(count_of(&max))),
        Err(e) => cx.reply(|out| out.error(&e)),
    };
    Decision::Reply(reply)
}

/// PFMERGE with keys on several shards: each shard merges its keys (the destination's
/// among them), the coordinator takes the union, and the destination's shard applies it.
fn pfmerge_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let (positions, reads) = read_hops(start.args, 1, start.slots);
    let state = MergeState {
        positions,
        dest: Some(start.args.get(1).to_vec()),
    };
    Ok(Box::new(ReadThenWrite::new(state, reads, decide_merge)))
}

fn decide_merge(state: &mut MergeState, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Decision {
    let (max, dense) = match gather(&state.positions, results) {
        Ok(merged) => merged,
        Err(e) => return Decision::Reply(cx.reply(|out| out.error(&e))),
    };
    let dest = state.dest.take().unwrap_or_default();
    let write = Hop::run(cx.slots.shard_of_key(&dest), move |ctx| {
        // Checked under the same locks by the reads: it cannot fail here.
        let _ = store_merge(ctx, &dest, &max, dense);
        if ctx.logging()
            && let (Str::Value(v), _) = lookup(ctx.db, &dest, ctx.now)
        {
            let v = v.to_vec();
            ctx.log(&[b"SET", &dest, &v, b"KEEPTTL"]);
        }
        HopOut::Done
    });
    Decision::Write(vec![write], cx.reply(|e| e.ok()))
}
