//! Bitmaps on the string type: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP and BITFIELD(_RO), with
//! redis-server 7.0's parsing (bitops.c), replies and errors. BITOP's keys may live on
//! several shards: its plan reads the sources under their locks, computes on the
//! coordinator and writes the destination ([`ReadThenWrite`]). Bit 0 is the most significant bit of the
//! first byte. A string grows, zero-padded, to hold the bit SETBIT sets (up to
//! `proto-max-bulk-len` bytes); a missing key is an empty string for reads.

use goblin_protocol::Encoder;
use goblin_protocol::parse_i64;
use goblin_store::{Keyspace, RAW, Value, ValueMut};

use crate::errors;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::keys::{InvalidKeys, KeyFlags};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Plan, PlanCx, PlanStart};
use crate::txn::shapes::{Decision, ReadThenWrite};

use super::strings::{Str, lookup, string_or_empty};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::SETBIT, Exec::Shard(setbit));
    table.add(&meta::GETBIT, Exec::Shard(getbit));
    table.add(&meta::BITCOUNT, Exec::Shard(bitcount));
    table.add(&meta::BITPOS, Exec::Shard(bitpos));
    table
        .add(&meta::BITOP, Exec::Shard(bitop))
        .cross_shard(bitop_plan, Locking::Keys);
    table
        .add(&meta::BITFIELD, Exec::Shard(bitfield))
        .custom_keys(bitfield_keys);
    table.add(&meta::BITFIELD_RO, Exec::Shard(bitfield_ro));
}

const BAD_OFFSET: &[u8] = b"ERR bit offset is not an integer or out of range";
const BAD_BIT: &[u8] = b"ERR bit is not an integer or out of range";
const BAD_BITPOS_BIT: &[u8] = b"ERR The bit argument must be 1 or 0.";

/// A bit offset (`getBitOffsetFromArgument`): a non-negative integer whose byte lies
/// within `max_bytes`.
fn bit_offset(arg: &[u8], max_bytes: usize) -> Option<u64> {
    field_offset(arg, None, max_bytes)
}

/// A bit offset, or with `width` (BITFIELD's) also `#n`: the n-th field of that width.
fn field_offset(arg: &[u8], width: Option<u32>, max_bytes: usize) -> Option<u64> {
    let (n, width) = match (arg.split_first(), width) {
        (Some((b'#', digits)), Some(width)) => (parse_i64(digits)?, i64::from(width)),
        _ => (parse_i64(arg)?, 1),
    };
    // Redis multiplies in C's 64 bits: an overflow wraps (and is then refused as negative
    // or out of range, or taken as it wrapped, as there).
    let n = n.wrapping_mul(width);
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
    let sources: Option<Vec<Vec<u8>>> = (3..args.len())
        .map(|i| string_or_empty(ctx, args.get(i)))
        .collect();
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
    let shards = start
        .slots
        .group_by_shard(keys.iter().map(Vec::as_slice).enumerate());
    let reads = shards
        .iter()
        .map(|(shard, idx)| {
            let mine: Vec<Vec<u8>> = idx.iter().map(|&i| keys[i].clone()).collect();
            Hop::run(*shard, move |ctx| {
                let values: Vec<Option<Vec<u8>>> =
                    mine.iter().map(|k| string_or_empty(ctx, k)).collect();
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

const BAD_FIELD_TYPE: &[u8] = b"ERR Invalid bitfield type. Use something like i16 u8. \
Note that u64 is not supported but i64 is.";
const BAD_OVERFLOW: &[u8] = b"ERR Invalid OVERFLOW type specified";
const RO_ONLY_GET: &[u8] = b"ERR BITFIELD_RO only supports the GET subcommand";

/// What BITFIELD does when a SET or INCRBY leaves the field's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    /// Keep the low bits (two's complement for signed fields).
    Wrap,
    /// Stop at the field's minimum or maximum.
    Sat,
    /// Leave the field, reply nil.
    Fail,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD operation: on the field of `bits` bits (signed or not) at bit `offset`,
/// under the overflow policy in force where it was written.
#[derive(Clone, Copy, Debug)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

impl Field {
    /// The last bit the field covers.
    fn last_bit(&self) -> u64 {
        self.offset + u64::from(self.bits) - 1
    }
}

/// A field type (`getBitfieldTypeFromArgument`): `i1`…`i64` or `u1`…`u63`, in lower case
/// only. Redis reads the width as a C string: it ends at a NUL byte.
fn field_type(arg: &[u8]) -> Option<(bool, u32)> {
    let (first, rest) = arg.split_first()?;
    let signed = match first {
        b'i' => true,
        b'u' => false,
        _ => return None,
    };
    let digits = rest.split(|&b| b == 0).next().unwrap_or_default();
    let bits = parse_i64(digits)?;
    let max = if signed { 64 } else { 63 };
    (1..=max).contains(&bits).then_some((signed, bits as u32))
}

/// BITFIELD's operations, parsed all before any runs (`bitfieldGeneric`), with the
/// first error in Redis's order.
fn parse_fields(args: &Args<'_>, max_bytes: usize) -> Result<Vec<Field>, &'static [u8]> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let remaining = args.len() - j - 1;
        let word = args.get(j);
        let op = if is_keyword(word, "GET") && remaining >= 2 {
            FieldOp::Get
        } else if is_keyword(word, "SET") && remaining >= 3 {
            FieldOp::Set(0)
        } else if is_keyword(word, "INCRBY") && remaining >= 3 {
            FieldOp::IncrBy(0)
        } else if is_keyword(word, "OVERFLOW") && remaining >= 1 {
            let policy = args.get(j + 1);
            overflow = if is_keyword(policy, "WRAP") {
                Overflow::Wrap
            } else if is_keyword(policy, "SAT") {
                Overflow::Sat
            } else if is_keyword(policy, "FAIL") {
                Overflow::Fail
            } else {
                return Err(BAD_OVERFLOW);
            };
            j += 2;
            continue;
        } else {
            return Err(errors::SYNTAX);
        };
        let (signed, bits) = field_type(args.get(j + 1)).ok_or(BAD_FIELD_TYPE)?;
        let offset = field_offset(args.get(j + 2), Some(bits), max_bytes).ok_or(BAD_OFFSET)?;
        let op = match op {
            FieldOp::Get => op,
            FieldOp::Set(_) => FieldOp::Set(parse_i64(args.get(j + 3)).ok_or(errors::NOT_INTEGER)?),
            FieldOp::IncrBy(_) => {
                FieldOp::IncrBy(parse_i64(args.get(j + 3)).ok_or(errors::NOT_INTEGER)?)
            }
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok(fields)
}

/// BITFIELD's key is read-only when every operation is a GET (`bitfieldGetKeys`; a
/// syntax error counts as a write).
fn bitfield_keys(
    args: &Args<'_>,
    found: &mut dyn FnMut(usize, KeyFlags),
) -> Result<(), InvalidKeys> {
    let mut read_only = true;
    let mut i = 2;
    while i < args.len() {
        let (word, remaining) = (args.get(i), args.len() - i - 1);
        if is_keyword(word, "GET") && remaining >= 2 {
            i += 3;
        } else if is_keyword(word, "OVERFLOW") && remaining >= 1 {
            i += 2;
        } else {
            read_only = false;
            break;
        }
    }
    let flags = if read_only {
        KeyFlags::RO | KeyFlags::ACCESS
    } else {
        KeyFlags::RW | KeyFlags::ACCESS | KeyFlags::UPDATE
    };
    found(1, flags);
    Ok(())
}

/// The unsigned field of `bits` bits at bit `offset` of `s` (bits past the end are clear).
fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0, |v, i| (v << 1) | u64::from(bit(s, offset + i)))
}

/// The signed field of `bits` bits at bit `offset` of `s`, sign-extended.
fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(s, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Writes the low `bits` bits of `value` at bit `offset` of `s`, which holds them.
fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..u64::from(bits) {
        let at = offset + i;
        let (byte, mask) = ((at >> 3) as usize, 0x80u8 >> (at & 7));
        if let Some(b) = s.get_mut(byte) {
            if value & (1 << (u64::from(bits) - 1 - i)) != 0 {
                *b |= mask;
            } else {
                *b &= !mask;
            }
        }
    }
}

/// `checkUnsignedBitfieldOverflow`: `None` when `value + incr` fits in `bits` unsigned
/// bits, else what to store under `policy` (unused under FAIL).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, policy: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let wrapped = value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > max_incr) {
        Some(if policy == Overflow::Sat {
            max
        } else {
            wrapped
        })
    } else if incr < 0 && incr < min_incr {
        Some(if policy == Overflow::Sat { 0 } else { wrapped })
    } else {
        None
    }
}

/// `checkSignedBitfieldOverflow`: `None` when `value + incr` fits in `bits` signed bits,
/// else what to store under `policy` (unused under FAIL).
fn signed_overflow(value: i64, incr: i64, bits: u32, policy: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    // Redis computes these in C's 64 bits and uses them only where they did not wrap.
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = || {
        let c = (value as u64).wrapping_add(incr as u64);
        let c = if bits == 64 {
            c
        } else if c & (1 << (bits - 1)) != 0 {
            c | (u64::MAX << bits)
        } else {
            c & !(u64::MAX << bits)
        };
        c as i64
    };
    let short = bits != 64;
    if value > max || (short && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(if policy == Overflow::Sat {
            max
        } else {
            wrapped()
        })
    } else if value < min
        || (short && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(if policy == Overflow::Sat {
            min
        } else {
            wrapped()
        })
    } else {
        None
    }
}

/// Replies field `f` (a GET), which starts at bit `at` of `s`.
fn reply_get(out: &mut Encoder<'_>, s: &[u8], at: u64, f: &Field) {
    if f.signed {
        out.integer(get_signed(s, at, f.bits));
    } else {
        out.integer(get_unsigned(s, at, f.bits) as i64);
    }
}

/// Runs `fields` over `s`, a window of the string whose first bit is bit `base` of the
/// string (every field lies within it), replying to each. Returns how many fields were
/// written with a new value, or with any value when `grown` (the string grew): the
/// changes Redis counts.
fn run_fields(
    out: &mut Encoder<'_>,
    fields: &[Field],
    s: &mut [u8],
    base: u64,
    grown: bool,
) -> usize {
    let mut changes = 0;
    out.array(fields.len());
    for f in fields {
        let at = f.offset - base;
        // (the field's old value, whether it overflowed, what to reply, what to store)
        let (old, overflowed, answer, store) = match (f.op, f.signed) {
            (FieldOp::Get, _) => {
                reply_get(out, s, at, f);
                continue;
            }
            (FieldOp::Set(v), true) => {
                let old = get_signed(s, at, f.bits);
                let over = signed_overflow(v, 0, f.bits, f.overflow);
                (old as u64, over.is_some(), old, over.unwrap_or(v) as u64)
            }
            (FieldOp::IncrBy(incr), true) => {
                let old = get_signed(s, at, f.bits);
                let over = signed_overflow(old, incr, f.bits, f.overflow);
                let new = over.unwrap_or(old.wrapping_add(incr));
                (old as u64, over.is_some(), new, new as u64)
            }
            (FieldOp::Set(v), false) => {
                let old = get_unsigned(s, at, f.bits);
                let over = unsigned_overflow(v as u64, 0, f.bits, f.overflow);
                let new = over.unwrap_or(v as u64);
                (old, over.is_some(), old as i64, new)
            }
            (FieldOp::IncrBy(incr), false) => {
                let old = get_unsigned(s, at, f.bits);
                let over = unsigned_overflow(old, incr, f.bits, f.overflow);
                let new = over.unwrap_or(old.wrapping_add(incr as u64));
                (old, over.is_some(), new as i64, new)
            }
        };
        if overflowed && f.overflow == Overflow::Fail {
            out.null();
            continue;
        }
        out.integer(answer);
        set_field(s, at, f.bits, store);
        if grown || old != store {
            changes += 1;
        }
    }
    changes
}

/// `BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset incr]
/// [OVERFLOW WRAP|SAT|FAIL] …`
fn bitfield(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    bitfield_generic(ctx, args, false);
}

/// `BITFIELD_RO key [GET type offset] …`
fn bitfield_ro(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    bitfield_generic(ctx, args, true);
}

fn bitfield_generic(ctx: &mut ShardCtx<'_>, args: &Args<'_>, read_only: bool) {
    let fields = match parse_fields(args, ctx.max_string) {
        Ok(fields) => fields,
        Err(e) => return ctx.out.error(e),
    };
    let key = args.get(1);
    let highest_write = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(Field::last_bit)
        .max();
    let (current, expire) = lookup(ctx.db, key, ctx.now);
    let Some(highest_write) = highest_write else {
        // Only GETs: a read, of a missing key as of an empty string.
        let s = match current {
            Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
            Str::Absent => &[][..],
            Str::Value(s) => s,
        };
        ctx.out.array(fields.len());
        for f in &fields {
            reply_get(&mut ctx.out, s, f.offset, f);
        }
        return;
    };
    if read_only {
        return ctx.out.error(RO_ONLY_GET);
    }
    let (old, exists) = match current {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => (&[][..], false),
        Str::Value(s) => (s, true),
    };
    // The string grows to hold every written field; the fields run on a copy of the
    // bytes they span (zeros past the end), copied back if anything changed.
    let len = old.len().max((highest_write >> 3) as usize + 1);
    let grown = len > old.len();
    let first = fields.iter().map(|f| f.offset >> 3).min().unwrap_or(0) as usize;
    let last = fields.iter().map(|f| f.last_bit() >> 3).max().unwrap_or(0) as usize;
    let mut window = vec![0u8; last - first + 1];
    if let Some(have) = old.get(first..old.len().min(last + 1)) {
        window[..have.len()].copy_from_slice(have);
    }
    let changes = run_fields(
        &mut ctx.out,
        &fields,
        &mut window,
        (first as u64) * 8,
        grown,
    );
    if changes == 0 && exists && !grown {
        // Nothing changed; Redis still made the string raw (`dbUnshareStringValue`).
        ctx.db.add_flags(key, RAW, ctx.now);
        return;
    }
    // Only the string's own bytes are copied back (a GET may read past its end).
    let back = &window[..len.min(last + 1) - first];
    let write = |db: &mut Keyspace| {
        let done = db.modify(key, ctx.now, |v| match v {
            ValueMut::Boxed(Value::Str(s)) => {
                s.resize(len, 0);
                s[first..first + back.len()].copy_from_slice(back);
                (true, true)
            }
            _ => (false, false),
        });
        if done != Some(true) {
            let mut new = match lookup(db, key, ctx.now).0 {
                Str::Value(s) => s.to_vec(),
                _ => Vec::new(),
            };
            new.resize(len, 0);
            new[first..first + back.len()].copy_from_slice(back);
            db.set_str(key, &new, expire, ctx.now);
        }
        db.add_flags(key, RAW, ctx.now);
    };
    // A string that only grew (every write failed) changed without Redis saying so.
    if changes == 0 {
        ctx.db.quietly(write);
    } else {
        write(ctx.db);
    }
}
