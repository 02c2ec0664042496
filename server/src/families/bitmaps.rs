//! Bitmaps on the string type: SETBIT, GETBIT, BITCOUNT, BITPOS and BITOP, with
//! redis-server 7.0's parsing (bitops.c), replies and errors. BITOP's keys may live on
//! several shards: its plan reads the sources under their locks, computes on the
//! coordinator and writes the destination ([`ReadThenWrite`]). Bit 0 is the most significant bit of the
//! first byte. A string grows, zero-padded, to hold the bit SETBIT sets (up to
//! `proto-max-bulk-len` bytes); a missing key is an empty string for reads.

use goblin_protocol::parse_i64;
use goblin_store::{RAW, Value, ValueMut};

use crate::errors;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Plan, PlanCx, PlanStart};
use crate::txn::shapes::{Decision, ReadThenWrite};

use super::strings::{Str, lookup};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::SETBIT, Exec::Shard(setbit));
    table.add(&meta::GETBIT, Exec::Shard(getbit));
    table.add(&meta::BITCOUNT, Exec::Shard(bitcount));
    table.add(&meta::BITPOS, Exec::Shard(bitpos));
    table
        .add(&meta::BITOP, Exec::Shard(bitop))
        .cross_shard(bitop_plan, Locking::Keys);
}

const BAD_OFFSET: &[u8] = b"ERR bit offset is not an integer or out of range";
const BAD_BIT: &[u8] = b"ERR bit is not an integer or out of range";
const BAD_BITPOS_BIT: &[u8] = b"ERR The bit argument must be 1 or 0.";

/// A bit offset (`getBitOffsetFromArgument`): a non-negative integer whose byte lies
/// within `max_bytes`.
fn bit_offset(arg: &[u8], max_bytes: usize) -> Option<u64> {
    let n = parse_i64(arg)?;
    (n >= 0 && ((n >> 3) as u64) < max_bytes as u64).then_some(n as u64)
}

/// Whether bit `i` of `s` is set (bits past the end are clear).
fn bit(s: &[u8], i: u64) -> bool {
    s.get((i >> 3) as usize)
        .is_some_and(|b| b & (0x80 >> (i & 7)) != 0)
}

/// `SETBIT key offset value`: the bit's previous value.
fn setbit(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(offset) = bit_offset(args.get(2), ctx.max_string) else {
        return ctx.out.error(BAD_OFFSET);
    };
    let on = match parse_i64(args.get(3)) {
        Some(0) => false,
        Some(1) => true,
        _ => return ctx.out.error(BAD_BIT),
    };
    let key = args.get(1);
    let (byte, mask) = ((offset >> 3) as usize, 0x80u8 >> (offset & 7));
    let set = |s: &mut Vec<u8>| {
        if s.len() <= byte {
            s.resize(byte + 1, 0);
        }
        if on {
            s[byte] |= mask;
        } else {
            s[byte] &= !mask;
        }
    };
    let (current, expire) = lookup(ctx.db, key, ctx.now);
    let (old, changes) = match current {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => (false, true),
        Str::Value(s) => (bit(s, offset), s.len() <= byte || bit(s, offset) != on),
    };
    // A string created, grown, or whose bit flips is written (and signalled); otherwise
    // nothing happens, as in Redis.
    if !changes {
        return ctx.out.integer(i64::from(old));
    }
    // A long string is boxed: change it in place.
    let done = ctx.db.modify(key, ctx.now, |v| match v {
        ValueMut::Boxed(Value::Str(s)) => {
            set(s);
            (true, true)
        }
        _ => (false, false),
    });
    if done != Some(true) {
        let mut new = match lookup(ctx.db, key, ctx.now).0 {
            Str::Value(s) => s.to_vec(),
            _ => Vec::new(),
        };
        set(&mut new);
        ctx.db.set_str(key, &new, expire, ctx.now);
    }
    ctx.db.add_flags(key, RAW, ctx.now);
    ctx.out.integer(i64::from(old));
}

/// `GETBIT key offset`
fn getbit(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(offset) = bit_offset(args.get(2), ctx.max_string) else {
        return ctx.out.error(BAD_OFFSET);
    };
    match lookup(ctx.db, args.get(1), ctx.now).0 {
        Str::WrongType => ctx.out.error(errors::WRONGTYPE),
        Str::Absent => ctx.out.integer(0),
        Str::Value(s) => ctx.out.integer(i64::from(bit(s, offset))),
    }
}

/// Redis's range arithmetic over `total` units: negative indexes from the end, clamped;
/// `None` when the range is empty.
fn clamp(mut start: i64, mut end: i64, total: i64) -> Option<(i64, i64)> {
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    (start <= end).then_some((start, end))
}

/// Whether a range's unit, argument `at` when given, is BIT (else BYTE); `None` for
/// another word.
fn in_bits(args: &Args<'_>, at: usize) -> Option<bool> {
    if at >= args.len() || is_keyword(args.get(at), "BYTE") {
        Some(false)
    } else {
        is_keyword(args.get(at), "BIT").then_some(true)
    }
}

/// The set bits of `s` among bits `start..=end`.
fn count_bits(s: &[u8], start: u64, end: u64) -> u64 {
    let (first, last) = ((start >> 3) as usize, (end >> 3) as usize);
    let mut n: u64 = s[first..=last]
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    // Take away the bits of the edge bytes outside the range.
    let head = s[first] & !(0xFFu8 >> (start & 7));
    n -= u64::from(head.count_ones());
    if end & 7 != 7 {
        let tail = s[last] & (0xFFu8 >> ((end & 7) + 1));
        n -= u64::from(tail.count_ones());
    }
    n
}

/// `BITCOUNT key [start end [BYTE|BIT]]`
fn bitcount(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let s = match lookup(ctx.db, args.get(1), ctx.now).0 {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => return ctx.out.integer(0),
        Str::Value(s) => s,
    };
    let len = s.len() as i64;
    let range = match args.len() {
        2 => clamp(0, len - 1, len).map(|(a, b)| (a * 8, b * 8 + 7)),
        4 | 5 => {
            let (Some(start), Some(end)) = (parse_i64(args.get(2)), parse_i64(args.get(3))) else {
                return ctx.out.error(errors::NOT_INTEGER);
            };
            let Some(in_bits) = in_bits(args, 4) else {
                return ctx.out.error(errors::SYNTAX);
            };
            if start < 0 && end < 0 && start > end {
                return ctx.out.integer(0);
            }
            if in_bits {
                clamp(start, end, len * 8)
            } else {
                clamp(start, end, len).map(|(a, b)| (a * 8, b * 8 + 7))
            }
        }
        _ => return ctx.out.error(errors::SYNTAX),
    };
    let n = range.map_or(0, |(a, b)| count_bits(s, a as u64, b as u64));
    ctx.out.integer(n as i64);
}

/// The first bit equal to `want` among bits `start..=end` of `s`.
fn find_bit(s: &[u8], want: bool, start: u64, end: u64) -> Option<u64> {
    let skip = if want { 0x00 } else { 0xFF };
    let mut i = start;
    while i <= end {
        if i & 7 == 0 && i + 7 <= end && s[(i >> 3) as usize] == skip {
            i += 8;
            continue;
        }
        if bit(s, i) == want {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`: the first bit set (or clear) in the range,
/// -1 when there is none. Without an end, a string is followed by clear bits: looking
/// for a clear bit in a string of set bits answers the bit after it.
fn bitpos(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let want = match parse_i64(args.get(2)) {
        Some(0) => false,
        Some(1) => true,
        Some(_) => return ctx.out.error(BAD_BITPOS_BIT),
        None => return ctx.out.error(errors::NOT_INTEGER),
    };
    let s = match lookup(ctx.db, args.get(1), ctx.now).0 {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => return ctx.out.integer(if want { -1 } else { 0 }),
        Str::Value(s) => s,
    };
    let len = s.len() as i64;
    let (range, end_given) = match args.len() {
        3 => (
            clamp(0, len - 1, len).map(|(a, b)| (a * 8, b * 8 + 7)),
            false,
        ),
        4..=6 => {
            let Some(start) = parse_i64(args.get(3)) else {
                return ctx.out.error(errors::NOT_INTEGER);
            };
            let Some(in_bits) = in_bits(args, 5) else {
                return ctx.out.error(errors::SYNTAX);
            };
            let end = if args.len() >= 5 {
                match parse_i64(args.get(4)) {
                    Some(end) => end,
                    None => return ctx.out.error(errors::NOT_INTEGER),
                }
            } else {
                len - 1
            };
            let range = if in_bits {
                clamp(start, end, len * 8)
            } else {
                clamp(start, end, len).map(|(a, b)| (a * 8, b * 8 + 7))
            };
            (range, args.len() >= 5)
        }
        _ => return ctx.out.error(errors::SYNTAX),
    };
    let Some((start, end)) = range else {
        return ctx.out.integer(-1);
    };
    let (start, end) = (start as u64, end as u64);
    let pos = match find_bit(s, want, start, end) {
        Some(i) => i as i64,
        None if !want && !end_given => end as i64 + 1,
        None => -1,
    };
    ctx.out.integer(pos);
}

const BITOP_NOT_ONE: &[u8] = b"ERR BITOP NOT must be called with a single source key.";

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    And,
    Or,
    Xor,
    Not,
}

/// BITOP's operation, checked as Redis checks it (the operation, then NOT's one source).
fn parse_op(args: &Args<'_>) -> Result<Op, &'static [u8]> {
    let word = args.get(1);
    let op = if is_keyword(word, "AND") {
        Op::And
    } else if is_keyword(word, "OR") {
        Op::Or
    } else if is_keyword(word, "XOR") {
        Op::Xor
    } else if is_keyword(word, "NOT") {
        Op::Not
    } else {
        return Err(errors::SYNTAX);
    };
    if op == Op::Not && args.len() != 4 {
        return Err(BITOP_NOT_ONE);
    }
    Ok(op)
}

/// The result of `op` over the sources (missing keys are empty strings; a shorter string
/// is padded with zero bytes).
fn compute(op: Op, sources: &[Vec<u8>]) -> Vec<u8> {
    let len = sources.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |s: &Vec<u8>, i: usize| s.get(i).copied().unwrap_or(0);
    (0..len)
        .map(|i| match op {
            Op::Not => !byte(&sources[0], i),
            Op::And => sources.iter().fold(0xFF, |acc, s| acc & byte(s, i)),
            Op::Or => sources.iter().fold(0, |acc, s| acc | byte(s, i)),
            Op::Xor => sources.iter().fold(0, |acc, s| acc ^ byte(s, i)),
        })
        .collect()
}

/// A BITOP source: its bytes (a missing key is empty); `None` for another type.
fn source(ctx: &mut ShardCtx<'_>, key: &[u8]) -> Option<Vec<u8>> {
    match lookup(ctx.db, key, ctx.now).0 {
        Str::WrongType => None,
        Str::Absent => Some(Vec::new()),
        Str::Value(s) => Some(s.to_vec()),
    }
}

/// Stores BITOP's result at `dest` (without expiry, `raw`), or deletes `dest` when the
/// result is empty; the result's length.
fn store_result(ctx: &mut ShardCtx<'_>, dest: &[u8], result: &[u8]) -> i64 {
    if result.is_empty() {
        ctx.db.delete(dest, ctx.now);
    } else {
        // Whatever `dest` held (any type, any expiry) is replaced.
        ctx.db.set_str(dest, result, None, ctx.now);
        ctx.db.add_flags(dest, RAW, ctx.now);
    }
    result.len() as i64
}

/// `BITOP AND|OR|XOR|NOT destkey key [key ...]`: the length of the string stored.
fn bitop(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let op = match parse_op(args) {
        Ok(op) => op,
        Err(e) => return ctx.out.error(e),
    };
    let sources: Option<Vec<Vec<u8>>> = (3..args.len()).map(|i| source(ctx, args.get(i))).collect();
    let Some(sources) = sources else {
        return ctx.out.error(errors::WRONGTYPE);
    };
    let result = compute(op, &sources);
    let n = store_result(ctx, args.get(2), &result);
    ctx.out.integer(n);
}

/// What BITOP's plan knows between its reads and its write.
#[derive(Debug)]
struct BitopState {
    op: Op,
    dest: Vec<u8>,
    /// The sources, in argument order.
    keys: Vec<Vec<u8>>,
    /// The shards read, in the order of the read hops, with their keys' indexes.
    shards: Vec<(usize, Vec<usize>)>,
}

/// BITOP across shards: each shard reads its sources (`None`: another type), the
/// coordinator computes, and the destination's shard stores the result.
fn bitop_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let op = parse_op(args).map_err(<[u8]>::to_vec)?;
    let keys: Vec<Vec<u8>> = args.iter_from(3).map(<[u8]>::to_vec).collect();
    let mut shards: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let shard = start.slots.shard_of_key(key);
        match shards.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, idx)) => idx.push(i),
            None => shards.push((shard, vec![i])),
        }
    }
    let reads = shards
        .iter()
        .map(|(shard, idx)| {
            let mine: Vec<Vec<u8>> = idx.iter().map(|&i| keys[i].clone()).collect();
            Hop::run(*shard, move |ctx| {
                let values: Vec<Option<Vec<u8>>> = mine.iter().map(|k| source(ctx, k)).collect();
                HopOut::Bulks(values)
            })
        })
        .collect();
    let state = BitopState {
        op,
        dest: args.get(2).to_vec(),
        keys,
        shards,
    };
    Ok(Box::new(ReadThenWrite::new(state, reads, decide_bitop)))
}

fn decide_bitop(state: &mut BitopState, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Decision {
    let mut sources: Vec<Option<Vec<u8>>> = vec![Some(Vec::new()); state.keys.len()];
    for ((_, idx), out) in state.shards.iter().zip(results) {
        if let HopOut::Bulks(values) = out {
            for (&i, v) in idx.iter().zip(values) {
                sources[i] = v;
            }
        }
    }
    // A source of another type, wherever it is, answers WRONGTYPE and writes nothing.
    let Some(sources) = sources.into_iter().collect::<Option<Vec<Vec<u8>>>>() else {
        return Decision::Reply(cx.reply(|e| e.error(errors::WRONGTYPE)));
    };
    let result = compute(state.op, &sources);
    let n = result.len() as i64;
    let dest = std::mem::take(&mut state.dest);
    let write = Hop::run(cx.slots.shard_of_key(&dest), move |ctx| {
        store_result(ctx, &dest, &result);
        if ctx.logging() {
            if result.is_empty() {
                ctx.log(&[b"DEL", &dest]);
            } else {
                ctx.log(&[b"SET", &dest, &result]);
            }
        }
        HopOut::Done
    });
    Decision::Write(vec![write], cx.reply(|e| e.integer(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_and_finding_bits_in_ranges() {
        let s = [0b1010_0000u8, 0xFF, 0x00, 0b0000_0001];
        assert_eq!(count_bits(&s, 0, 31), 11);
        assert_eq!(count_bits(&s, 1, 1), 0);
        assert_eq!(count_bits(&s, 2, 2), 1);
        assert_eq!(count_bits(&s, 3, 9), 2);
        assert_eq!(count_bits(&s, 31, 31), 1);
        assert_eq!(find_bit(&s, true, 1, 31), Some(2));
        assert_eq!(find_bit(&s, false, 8, 15), None);
        assert_eq!(find_bit(&s, false, 8, 31), Some(16));
        assert_eq!(find_bit(&s, true, 16, 30), None);
        assert_eq!(clamp(-2, -1, 4), Some((2, 3)));
        assert_eq!(clamp(3, 1, 4), None);
        assert_eq!(clamp(0, 100, 0), None);
    }
}
