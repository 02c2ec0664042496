//! Sorted-set commands, with redis-server 7.0's parsing, replies, errors and encodings:
//! ZADD (NX, XX, GT, LT, CH, INCR), ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZCOUNT,
//! ZLEXCOUNT, ZRANK, ZREVRANK, ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES) and its
//! older forms, ZRANGESTORE, ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX, ZPOPMIN,
//! ZPOPMAX, ZMPOP, ZRANDMEMBER, ZUNION, ZINTER, ZDIFF and their STORE forms, ZINTERCARD,
//! ZSCAN, and the blocking pops BZPOPMIN, BZPOPMAX and BZMPOP.
//!
//! Scores are read as Redis reads them (`strtod`: decimal or hexadecimal, `inf`, never
//! NaN; a range bound may be `(`-exclusive and, like Redis's, tolerates leading blanks and
//! stops at a NUL) and printed with `%.17g`.
//!
//! **Across shards.** ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD run the same
//! stages whether their keys are on one shard (the handler runs them in a row) or on
//! several (their plan sends each stage as hops): the sources' types and sizes
//! ([`meta_part`]); then, as Redis's algorithms would read them, whole sources
//! ([`read_part`]) and lookups of the smallest source's members in the others
//! ([`probe_part`]); then one computation ([`Algebra::compute`]) and, for a STORE, the
//! destination written ([`store_part`]). ZRANGESTORE reads its range at the source and
//! stores it at the destination; ZMPOP finds the first non-empty key in argument order and
//! pops it. Under the plan's locks each is atomic, and a source of the wrong type answers
//! WRONGTYPE before anything is written. The blocking pops take the lists' blocking-pop
//! shape ([`BlockingPop`]): served at once when a key has members, else parked on every
//! key's shard until a write makes one non-empty.
//!
//! **One deliberate difference.** ZRANDMEMBER with a negative count asks for that many
//! picks; redis-server streams them however many there are (2^63 picks never end). Goblin
//! answers `ERR value is out of range` past [`RANDOM_PICKS_MAX`] picks rather than build
//! such a reply.

use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::sync::Arc;

use goblin_protocol::{Encoder, Version, format_double, parse_i64};
use goblin_store::types::zset::{AddFlags, Added, LexBound, LexRange, Pos, ScoreRange};
use goblin_store::{Keyspace, Millis, SortedSet, Value, ValueMut, ValueRef};

use crate::errors::{self, ErrorReply};
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{CrossShard, Hop, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step};
use crate::txn::shapes::{BlockingOps, BlockingPop, Holds};
use crate::util::{glob_match, random_u64};

use super::keys::parse_cursor;
use super::{RANDOM_PICKS_MAX, decimal, parse_timeout};

/// ZRANDMEMBER with a count: below this many times the count, the set is sampled by
/// picking random members; above, by dropping random members from a copy (Redis's
/// `ZRANDMEMBER_SUB_STRATEGY_MUL`).
const SUB_STRATEGY_MUL: u64 = 3;
/// ZADD reads this many scores into a stack array (more go to the heap).
const FEW_PAIRS: usize = 8;
/// ZSCAN's default COUNT.
const SCAN_COUNT: i64 = 10;
/// ZSCAN visits at most this many buckets per element asked for (Redis's
/// `maxiterations`, ten times COUNT), so that a sparse index cannot stall a call.
const SCAN_VISITS_PER_ELEMENT: i64 = 10;
/// Largest `long long` half, the bound of Redis's `double2ll` (integral scores within it
/// are stored, and printed by ZSCAN of a listpack, as integers).
const DOUBLE2LL_BOUND: f64 = (i64::MAX / 2) as f64;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::ZADD, Exec::Shard(zadd));
    table.add(&meta::ZINCRBY, Exec::Shard(zincrby));
    table.add(&meta::ZREM, Exec::Shard(zrem));
    table.add(&meta::ZSCORE, Exec::Shard(zscore));
    table.add(&meta::ZMSCORE, Exec::Shard(zmscore));
    table.add(&meta::ZCARD, Exec::Shard(zcard));
    table.add(&meta::ZCOUNT, Exec::Shard(zcount));
    table.add(&meta::ZLEXCOUNT, Exec::Shard(zlexcount));
    table.add(&meta::ZRANK, Exec::Shard(zrank));
    table.add(&meta::ZREVRANK, Exec::Shard(zrevrank));
    table.add(&meta::ZRANGE, Exec::Shard(zrange));
    table.add(&meta::ZRANGEBYSCORE, Exec::Shard(zrangebyscore));
    table.add(&meta::ZREVRANGEBYSCORE, Exec::Shard(zrevrangebyscore));
    table.add(&meta::ZRANGEBYLEX, Exec::Shard(zrangebylex));
    table.add(&meta::ZREVRANGEBYLEX, Exec::Shard(zrevrangebylex));
    table.add(&meta::ZREVRANGE, Exec::Shard(zrevrange));
    table
        .add(&meta::ZRANGESTORE, Exec::Shard(zrangestore))
        .cross_shard(zrangestore_plan, Locking::Keys);
    table.add(&meta::ZREMRANGEBYRANK, Exec::Shard(zremrangebyrank));
    table.add(&meta::ZREMRANGEBYSCORE, Exec::Shard(zremrangebyscore));
    table.add(&meta::ZREMRANGEBYLEX, Exec::Shard(zremrangebylex));
    table.add(&meta::ZPOPMIN, Exec::Shard(zpopmin));
    table.add(&meta::ZPOPMAX, Exec::Shard(zpopmax));
    table
        .add(&meta::ZMPOP, Exec::Shard(zmpop))
        .cross_shard(zmpop_plan, Locking::Keys);
    table.add(&meta::ZRANDMEMBER, Exec::Shard(zrandmember));
    table
        .add(&meta::ZUNION, Exec::Shard(zunion))
        .cross_shard(zunion_plan, Locking::Keys);
    table
        .add(&meta::ZINTER, Exec::Shard(zinter))
        .cross_shard(zinter_plan, Locking::Keys);
    table
        .add(&meta::ZDIFF, Exec::Shard(zdiff))
        .cross_shard(zdiff_plan, Locking::Keys);
    table
        .add(&meta::ZUNIONSTORE, Exec::Shard(zunionstore))
        .cross_shard(zunionstore_plan, Locking::Keys);
    table
        .add(&meta::ZINTERSTORE, Exec::Shard(zinterstore))
        .cross_shard(zinterstore_plan, Locking::Keys);
    table
        .add(&meta::ZDIFFSTORE, Exec::Shard(zdiffstore))
        .cross_shard(zdiffstore_plan, Locking::Keys);
    table
        .add(&meta::ZINTERCARD, Exec::Shard(zintercard))
        .cross_shard(zintercard_plan, Locking::Keys);
    table.add(&meta::ZSCAN, Exec::Shard(zscan));
    // Blocking commands always run as plans: they may wait.
    let blocking = |plan| {
        Exec::Plan(CrossShard {
            plan,
            locking: Locking::Keys,
        })
    };
    table.add(&meta::BZPOPMIN, blocking(bzpopmin_plan));
    table.add(&meta::BZPOPMAX, blocking(bzpopmax_plan));
    table.add(&meta::BZMPOP, blocking(bzmpop_plan));
}

// --- numbers as Redis reads them ---

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ignore_case(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// C's `strtod` (glibc) over the bytes of a C string: the value, how many bytes it read
/// (0 when it read no number), and whether the value is out of range — a finite number
/// that overflowed to infinity, or a non-zero one that underflowed to zero (the `ERANGE`
/// cases Redis's `string2d` refuses). Reads leading blanks, a sign, `inf`, `infinity`,
/// `nan`, `nan(…)`, decimal and hexadecimal (`0x1.8p3`) notation.
pub(crate) fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let start = i;
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let signed = |v: f64| if negative { -v } else { v };
    let rest = &s[i..];
    if starts_with_ignore_case(rest, b"inf") {
        let n = if starts_with_ignore_case(rest, b"infinity") {
            8
        } else {
            3
        };
        return (signed(f64::INFINITY), i + n, false);
    }
    if starts_with_ignore_case(rest, b"nan") {
        let mut n = 3;
        if rest.get(3) == Some(&b'(') {
            let chars = rest[4..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            if rest.get(4 + chars) == Some(&b')') {
                n = 5 + chars;
            }
        }
        return (f64::NAN, i + n, false);
    }
    let is_hex = rest.len() > 2
        && rest[0] == b'0'
        && (rest[1] | 0x20) == b'x'
        && (rest[2].is_ascii_hexdigit()
            || (rest[2] == b'.' && rest.get(3).is_some_and(u8::is_ascii_hexdigit)));
    if is_hex {
        let (v, n, range) = strtod_hex(&rest[2..]);
        return (signed(v), i + 2 + n, range);
    }
    if let Some((v, n)) = decimal_fast(&s[i..]) {
        return (signed(v), i + n, false);
    }
    // Decimal: digits, a point, digits (at least one digit), then an exponent if it has
    // digits.
    let mut j = i;
    let mut digits = 0;
    let mut nonzero = false;
    while j < s.len() && s[j].is_ascii_digit() {
        nonzero |= s[j] != b'0';
        digits += 1;
        j += 1;
    }
    if s.get(j) == Some(&b'.') {
        j += 1;
        while j < s.len() && s[j].is_ascii_digit() {
            nonzero |= s[j] != b'0';
            digits += 1;
            j += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0, false);
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if s.get(k).is_some_and(u8::is_ascii_digit) {
            while k < s.len() && s[k].is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    let v = std::str::from_utf8(&s[start..j])
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or(0.0);
    let range = v.is_infinite() || (v == 0.0 && nonzero);
    (v, j, range)
}

/// Most significant digits a decimal may have for [`decimal_fast`]: below 2^53, so that
/// the digits are an exact double.
const FAST_DIGITS: usize = 15;
/// Powers of ten that are exact doubles.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Clinger's fast path for the common scores: a whole unsigned decimal `digits[.digits]`
/// with at most [`FAST_DIGITS`] digits and nothing after it is exactly its digits (an
/// exact double) divided by an exact power of ten, which IEEE division rounds correctly.
/// `None` for anything else (the general path reads it).
fn decimal_fast(s: &[u8]) -> Option<(f64, usize)> {
    if s.len() > FAST_DIGITS + 1 {
        return None;
    }
    let mut m: u64 = 0;
    let mut digits = 0;
    let mut fraction = None;
    for (i, &c) in s.iter().enumerate() {
        match c {
            b'0'..=b'9' => {
                m = m * 10 + u64::from(c - b'0');
                digits += 1;
            }
            b'.' if fraction.is_none() => fraction = Some(i),
            _ => return None,
        }
    }
    if digits == 0 || digits > FAST_DIGITS {
        return None;
    }
    let scale = fraction.map_or(0, |at| s.len() - at - 1);
    Some((m as f64 / POW10[scale], s.len()))
}

/// The hexadecimal part of `strtod` after `0x`: its value (correctly rounded, to nearest
/// even), the bytes read, and whether it is out of range.
fn strtod_hex(s: &[u8]) -> (f64, usize, bool) {
    let mut m: u64 = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let mut j = 0;
    let mut digit = |d: u64, fraction: bool, m: &mut u64, exp: &mut i64| {
        if *m >> 60 == 0 {
            *m = *m << 4 | d;
            if fraction {
                *exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !fraction {
                *exp += 4;
            }
        }
    };
    while j < s.len() && s[j].is_ascii_hexdigit() {
        digit(u64::from(hex_value(s[j])), false, &mut m, &mut exp);
        j += 1;
    }
    if s.get(j) == Some(&b'.') {
        j += 1;
        while j < s.len() && s[j].is_ascii_hexdigit() {
            digit(u64::from(hex_value(s[j])), true, &mut m, &mut exp);
            j += 1;
        }
    }
    if matches!(s.get(j), Some(b'p' | b'P')) {
        let mut k = j + 1;
        let negative = match s.get(k) {
            Some(b'-') => {
                k += 1;
                true
            }
            Some(b'+') => {
                k += 1;
                false
            }
            _ => false,
        };
        if s.get(k).is_some_and(u8::is_ascii_digit) {
            let mut e: i64 = 0;
            while k < s.len() && s[k].is_ascii_digit() {
                e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 20);
                k += 1;
            }
            exp += if negative { -e } else { e };
            j = k;
        }
    }
    let nonzero = m != 0 || sticky;
    let v = binary_to_f64(m, exp, sticky);
    (v, j, v.is_infinite() || (v == 0.0 && nonzero))
}

fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        _ => (c | 0x20) - b'a' + 10,
    }
}

/// `m × 2^exp` (plus a little more when `sticky`) rounded to the nearest double, ties to
/// even.
fn binary_to_f64(m: u64, exp: i64, sticky: bool) -> f64 {
    if m == 0 {
        return 0.0;
    }
    let bits = 64 - i64::from(m.leading_zeros());
    let top = exp + bits - 1;
    let ulp = (top - 52).max(-1074);
    let drop = ulp - exp;
    let (mut mant, mut e) = if drop <= 0 {
        (m << (-drop).min(63), ulp)
    } else if drop >= 64 {
        let half_or_more = drop == 64 && m >> 63 == 1;
        let above_half = half_or_more && (m << 1 != 0 || sticky);
        (u64::from(above_half), ulp)
    } else {
        let q = m >> drop;
        let r = m & ((1u64 << drop) - 1);
        let half = 1u64 << (drop - 1);
        let up = r > half || (r == half && (sticky || q & 1 == 1));
        (q + u64::from(up), ulp)
    };
    if mant == 1 << 53 {
        mant >>= 1;
        e += 1;
    }
    if mant == 0 {
        return 0.0;
    }
    if mant >= 1 << 52 {
        let biased = e + 52 + 1023;
        if biased >= 2047 {
            return f64::INFINITY;
        }
        f64::from_bits((biased as u64) << 52 | (mant & ((1 << 52) - 1)))
    } else {
        f64::from_bits(mant)
    }
}

/// A score as Redis's `string2d` reads one (ZADD, ZINCRBY, WEIGHTS): all of the argument
/// a number, no leading blank, not out of range, not NaN.
pub(crate) fn parse_score(s: &[u8]) -> Option<f64> {
    if s.first().is_none_or(|&c| is_c_space(c)) {
        return None;
    }
    let (v, n, range) = strtod(s);
    (n == s.len() && !range && !v.is_nan()).then_some(v)
}

/// A score range bound as `zslParseRange` reads one: `(` for an exclusive bound, then
/// `strtod` up to the end of the C string (leading blanks allowed, an empty number is 0,
/// any value but NaN).
fn parse_bound(s: &[u8]) -> Option<(f64, bool)> {
    let (body, exclusive) = match s.split_first() {
        Some((b'(', rest)) => (rest, true),
        _ => (s, false),
    };
    let (v, n, _) = strtod(body);
    let ends = body.get(n).is_none_or(|&c| c == 0);
    (ends && !v.is_nan()).then_some((v, exclusive))
}

/// A score range, as `zslParseRange` reads its two bounds.
fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, ErrorReply> {
    match (parse_bound(min), parse_bound(max)) {
        (Some((min, min_ex)), Some((max, max_ex))) => Ok(ScoreRange {
            min,
            max,
            min_ex,
            max_ex,
        }),
        _ => Err(errors::ZSET_MIN_MAX_NOT_FLOAT.into()),
    }
}

/// A lex range bound (`zslParseLexRangeItem`): `-` or `+` alone (up to a NUL), or `(`
/// or `[` and a member.
fn parse_lex_bound(s: &[u8]) -> Option<(LexBound, bool)> {
    let alone = s.get(1).is_none_or(|&c| c == 0);
    match s.first()? {
        b'+' if alone => Some((LexBound::Max, true)),
        b'-' if alone => Some((LexBound::Min, true)),
        b'(' => Some((LexBound::Value(s[1..].to_vec()), true)),
        b'[' => Some((LexBound::Value(s[1..].to_vec()), false)),
        _ => None,
    }
}

/// A lex range (`zslParseLexRange`).
fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, ErrorReply> {
    match (parse_lex_bound(min), parse_lex_bound(max)) {
        (Some((min, min_ex)), Some((max, max_ex))) => Ok(LexRange {
            min,
            max,
            min_ex,
            max_ex,
        }),
        _ => Err(errors::ZSET_MIN_MAX_NOT_LEX.into()),
    }
}

/// An integer in `min..` as `getRangeLongFromObjectOrReply` reads it with a message: the
/// message when it is not an integer or is below `min`.
fn int_at_least(s: &[u8], min: i64, err: &'static [u8]) -> Result<i64, ErrorReply> {
    parse_i64(s)
        .filter(|&n| n >= min)
        .ok_or(ErrorReply::Fixed(err))
}

// --- lookups and replies ---

/// What a key holds, for sorted-set commands.
enum Found<'a> {
    ZSet(&'a SortedSet),
    Absent,
    WrongType,
}

fn find<'a>(db: &'a mut Keyspace, key: &[u8], now: Millis) -> Found<'a> {
    match db.get(key, now).map(|e| e.value()) {
        None => Found::Absent,
        Some(ValueRef::ZSet(z)) => Found::ZSet(z),
        Some(_) => Found::WrongType,
    }
}

/// The key holds a value of another type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WrongType;

/// Changes the sorted set at `key` in place: `f` returns its result and whether it
/// changed the set (an emptied set is deleted). `None` when the key is absent.
fn modify<R>(
    ctx: &mut ShardCtx<'_>,
    key: &[u8],
    f: impl FnOnce(&mut SortedSet) -> (R, bool),
) -> Option<Result<R, WrongType>> {
    ctx.db.modify(key, ctx.now, |v| match v {
        ValueMut::Boxed(Value::ZSet(z)) => {
            let (r, changed) = f(z);
            (Ok(r), changed)
        }
        _ => (Err(WrongType), false),
    })
}

/// Replies elements, with their scores when `withscores`: a flat array in RESP2, pairs
/// in RESP3.
fn reply_elements<M: AsRef<[u8]>>(out: &mut Encoder<'_>, elements: &[(M, f64)], withscores: bool) {
    reply_header(out, elements.len(), withscores);
    for (m, s) in elements {
        reply_element(out, m.as_ref(), *s, withscores);
    }
}

/// The array header of `n` elements (see [`reply_elements`]).
fn reply_header(out: &mut Encoder<'_>, n: usize, withscores: bool) {
    let resp3 = out.version() == Version::Resp3;
    out.array(if withscores && !resp3 { 2 * n } else { n });
}

/// One element (see [`reply_elements`]).
fn reply_element(out: &mut Encoder<'_>, member: &[u8], score: f64, withscores: bool) {
    if withscores && out.version() == Version::Resp3 {
        out.array(2);
    }
    out.bulk(member);
    if withscores {
        out.double(score);
    }
}

/// The elements of a set from `from` on, forward or backward, while `keep` holds and
/// `limit` is not reached (a negative limit is none).
fn collect(
    z: &SortedSet,
    from: Option<Pos>,
    reverse: bool,
    mut limit: i64,
    keep: impl Fn(&[u8], f64) -> bool,
) -> Vec<(&[u8], f64)> {
    let mut out = Vec::new();
    let mut p = from;
    while let Some(pos) = p {
        if limit == 0 {
            break;
        }
        let (m, s) = z.entry(pos);
        if !keep(m, s) {
            break;
        }
        out.push((m, s));
        limit -= 1;
        p = if reverse { z.prev(pos) } else { z.next(pos) };
    }
    out
}

// --- ZADD, ZINCRBY, ZREM ---

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`
fn zadd(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    zadd_generic(ctx, args, false);
}

/// `ZINCRBY key increment member`: ZADD INCR, parsed as ZADD parses.
fn zincrby(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    zadd_generic(ctx, args, true);
}

/// What a ZADD did.
#[derive(Default)]
struct AddCounts {
    added: i64,
    updated: i64,
    processed: i64,
    score: f64,
    nan: bool,
}

/// Redis's `zaddGenericCommand`: the options (in any order, until the first word that is
/// none), the checks in Redis's order, every score parsed before the key is looked at.
pub(crate) fn zadd_generic(ctx: &mut ShardCtx<'_>, args: &Args<'_>, incr: bool) {
    let mut flags = AddFlags {
        incr,
        ..AddFlags::default()
    };
    let mut ch = false;
    let mut c = args.cursor(2);
    while let Some(opt) = c.peek() {
        // A score (the usual first word) is no option: no compare needed.
        if opt
            .first()
            .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.'))
        {
            break;
        }
        let is = |w: &str| is_keyword(opt, w);
        if is("nx") {
            flags.nx = true;
        } else if is("xx") {
            flags.xx = true;
        } else if is("ch") {
            ch = true;
        } else if is("incr") {
            flags.incr = true;
        } else if is("gt") {
            flags.gt = true;
        } else if is("lt") {
            flags.lt = true;
        } else {
            break;
        }
        c.next();
    }
    let rest = c.rest();
    if rest.is_empty() || rest.len() % 2 == 1 {
        return ctx.out.error(errors::SYNTAX);
    }
    if flags.nx && flags.xx {
        return ctx.out.error(errors::ZADD_NX_AND_XX);
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        return ctx.out.error(errors::ZADD_GT_LT_NX);
    }
    if flags.incr && rest.len() > 2 {
        return ctx.out.error(errors::ZADD_INCR_PAIRS);
    }
    // Every score is read before the key is looked at; a few fit on the stack.
    let pairs = rest.len() / 2;
    let mut few = [0.0; FEW_PAIRS];
    let mut many = Vec::new();
    let scores: &mut [f64] = if pairs <= FEW_PAIRS {
        &mut few[..pairs]
    } else {
        many.resize(pairs, 0.0);
        &mut many
    };
    for (i, slot) in scores.iter_mut().enumerate() {
        match parse_score(rest.get(2 * i)) {
            Some(s) => *slot = s,
            None => return ctx.out.error(errors::NOT_FLOAT),
        }
    }
    let scores: &[f64] = scores;
    let apply = |value: ValueMut<'_>| match value {
        ValueMut::Boxed(Value::ZSet(z)) => {
            let mut n = AddCounts::default();
            for (i, &score) in scores.iter().enumerate() {
                match z.add(rest.get(2 * i + 1), score, flags) {
                    Ok(Added::Added(s)) => {
                        n.added += 1;
                        n.processed += 1;
                        n.score = s;
                    }
                    Ok(Added::Updated(s)) => {
                        n.updated += 1;
                        n.processed += 1;
                        n.score = s;
                    }
                    Ok(Added::Unchanged(s)) => {
                        n.processed += 1;
                        n.score = s;
                    }
                    Ok(Added::Skipped) => {}
                    Err(_) => {
                        n.nan = true;
                        break;
                    }
                }
            }
            let changed = n.added + n.updated > 0;
            (Ok(n), changed)
        }
        _ => (Err(WrongType), false),
    };
    let key = args.get(1);
    // The key usually exists: one lookup. XX never creates it.
    let done = match ctx.db.modify(key, ctx.now, apply) {
        None if !flags.xx => ctx
            .db
            .upsert(key, ctx.now, || Value::ZSet(Box::default()), apply),
        done => done,
    };
    let n = match done {
        None => AddCounts::default(),
        Some(Err(WrongType)) => return ctx.out.error(errors::WRONGTYPE),
        Some(Ok(n)) => n,
    };
    if n.nan {
        ctx.out.error(errors::ZSET_SCORE_NAN);
    } else if flags.incr {
        if n.processed > 0 {
            ctx.out.double(n.score);
        } else {
            ctx.out.null();
        }
    } else {
        ctx.out
            .integer(if ch { n.added + n.updated } else { n.added });
    }
}

/// `ZREM key member [member ...]`: how many were removed; the key goes with its last
/// member.
fn zrem(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let removed = modify(ctx, args.get(1), |z| {
        let n = args.iter_from(2).filter(|m| z.remove(m).is_some()).count();
        (n, n > 0)
    });
    match removed {
        None => ctx.out.integer(0),
        Some(Ok(n)) => ctx.out.integer(n as i64),
        Some(Err(WrongType)) => ctx.out.error(errors::WRONGTYPE),
    }
}

// --- reads of one key ---

/// `ZSCORE key member`
fn zscore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match find(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.null(),
        Found::ZSet(z) => match z.score(args.get(2)) {
            Some(score) => ctx.out.double(score),
            None => ctx.out.null(),
        },
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `ZMSCORE key member [member ...]`: a score or nil for each.
fn zmscore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let z = match find(ctx.db, args.get(1), ctx.now) {
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::Absent => None,
        Found::ZSet(z) => Some(z),
    };
    ctx.out.array(args.len() - 2);
    for m in args.iter_from(2) {
        match z.and_then(|z| z.score(m)) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
}

/// `ZCARD key`
fn zcard(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match find(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.integer(0),
        Found::ZSet(z) => ctx.out.integer(z.len() as i64),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `ZCOUNT key min max`
fn zcount(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let range = match parse_score_range(args.get(2), args.get(3)) {
        Ok(r) => r,
        Err(e) => return e.send(&mut ctx.out),
    };
    match find(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.integer(0),
        Found::ZSet(z) => ctx.out.integer(z.count_in_score_range(&range) as i64),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `ZLEXCOUNT key min max`
fn zlexcount(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let range = match parse_lex_range(args.get(2), args.get(3)) {
        Ok(r) => r,
        Err(e) => return e.send(&mut ctx.out),
    };
    match find(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.integer(0),
        Found::ZSet(z) => ctx.out.integer(z.count_in_lex_range(&range) as i64),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
    }
}

/// ZRANK and ZREVRANK.
fn rank_generic(ctx: &mut ShardCtx<'_>, args: &Args<'_>, reverse: bool) {
    match find(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.null(),
        Found::ZSet(z) => match z.rank(args.get(2)) {
            Some(r) if reverse => ctx.out.integer((z.len() - 1 - r) as i64),
            Some(r) => ctx.out.integer(r as i64),
            None => ctx.out.null(),
        },
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `ZRANK key member`
fn zrank(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    rank_generic(ctx, args, false);
}

/// `ZREVRANK key member`
fn zrevrank(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    rank_generic(ctx, args, true);
}

// --- ZRANGE and its forms ---

/// What a range is by: fixed by the command, or chosen by ZRANGE's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RangeBy {
    Auto,
    Rank,
    Score,
    Lex,
}

/// A range's direction: fixed by the command, or chosen by ZRANGE's REV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

/// A parsed range.
#[derive(Clone, Debug)]
enum RangeKind {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// A parsed ZRANGE (or one of its forms): what to read, and how to answer.
#[derive(Clone, Debug)]
struct RangeQuery {
    kind: RangeKind,
    reverse: bool,
    offset: i64,
    limit: i64,
    withscores: bool,
}

/// Redis's `zrangeGenericCommand` up to the key lookup: the options from `src + 3` on,
/// their conflicts, then the range itself, in Redis's order of checks.
fn parse_range(
    args: &Args<'_>,
    src: usize,
    store: bool,
    mut by: RangeBy,
    mut direction: Direction,
) -> Result<RangeQuery, ErrorReply> {
    let mut withscores = false;
    let (mut offset, mut limit) = (0, -1);
    let mut c = args.cursor(src + 3);
    while let Some(opt) = c.next() {
        if !store && is_keyword(opt, "withscores") {
            withscores = true;
        } else if is_keyword(opt, "limit") && c.remaining() >= 2 {
            offset = c.next_i64()?;
            limit = c.next_i64()?;
        } else if direction == Direction::Auto && is_keyword(opt, "rev") {
            direction = Direction::Reverse;
        } else if by == RangeBy::Auto && is_keyword(opt, "bylex") {
            by = RangeBy::Lex;
        } else if by == RangeBy::Auto && is_keyword(opt, "byscore") {
            by = RangeBy::Score;
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    let reverse = direction == Direction::Reverse;
    if by == RangeBy::Auto {
        by = RangeBy::Rank;
    }
    if limit != -1 && by == RangeBy::Rank {
        return Err(errors::ZRANGE_LIMIT_BY_RANK.into());
    }
    if withscores && by == RangeBy::Lex {
        return Err(errors::ZRANGE_WITHSCORES_BYLEX.into());
    }
    let (mut lo, mut hi) = (args.get(src + 1), args.get(src + 2));
    if reverse && by != RangeBy::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let kind = match by {
        RangeBy::Score => RangeKind::Score(parse_score_range(lo, hi)?),
        RangeBy::Lex => RangeKind::Lex(parse_lex_range(lo, hi)?),
        _ => {
            let start = parse_i64(lo).ok_or(ErrorReply::Fixed(errors::NOT_INTEGER))?;
            let end = parse_i64(hi).ok_or(ErrorReply::Fixed(errors::NOT_INTEGER))?;
            RangeKind::Rank(start, end)
        }
    };
    Ok(RangeQuery {
        kind,
        reverse,
        offset,
        limit,
        withscores,
    })
}

/// The elements of `z` a range query selects, in reply order (Redis's
/// `genericZrangebyrankCommand`, `genericZrangebyscoreCommand`,
/// `genericZrangebylexCommand`).
fn range_of<'a>(z: &'a SortedSet, q: &RangeQuery) -> Vec<(&'a [u8], f64)> {
    let len = z.len() as i64;
    match &q.kind {
        RangeKind::Rank(start, end) => {
            let (mut start, mut end) = (*start, *end);
            if start < 0 {
                start = start.saturating_add(len);
            }
            if end < 0 {
                end = end.saturating_add(len);
            }
            start = start.max(0);
            if start > end || start >= len {
                return Vec::new();
            }
            end = end.min(len - 1);
            let n = end - start + 1;
            let first = if q.reverse {
                z.at_rank((len - 1 - start) as usize)
            } else {
                z.at_rank(start as usize)
            };
            collect(z, first, q.reverse, n, |_, _| true)
        }
        RangeKind::Score(range) => {
            if q.offset > 0 && q.offset >= len {
                return Vec::new();
            }
            let first = if q.reverse {
                z.last_in_score_range(range)
            } else {
                z.first_in_score_range(range)
            };
            let from = skip(z, first, q.offset, q.reverse);
            if q.reverse {
                collect(z, from, true, q.limit, |_, s| range.gte_min(s))
            } else {
                collect(z, from, false, q.limit, |_, s| range.lte_max(s))
            }
        }
        RangeKind::Lex(range) => {
            let first = if q.reverse {
                z.last_in_lex_range(range)
            } else {
                z.first_in_lex_range(range)
            };
            let from = skip(z, first, q.offset, q.reverse);
            if q.reverse {
                collect(z, from, true, q.limit, |m, _| range.gte_min(m))
            } else {
                collect(z, from, false, q.limit, |m, _| range.lte_max(m))
            }
        }
    }
}

/// The position `offset` elements past `from` in the direction of the range. Redis
/// steps there one by one, and a negative offset steps until it falls off the end.
fn skip(z: &SortedSet, from: Option<Pos>, offset: i64, reverse: bool) -> Option<Pos> {
    let from = from?;
    if offset < 0 {
        return None;
    }
    let offset = usize::try_from(offset).ok()?;
    let rank = if reverse {
        from.rank().checked_sub(offset)?
    } else {
        from.rank().checked_add(offset)?
    };
    z.at_rank(rank)
}

/// ZRANGE and its forms, answering the client.
fn zrange_generic(ctx: &mut ShardCtx<'_>, args: &Args<'_>, by: RangeBy, direction: Direction) {
    let q = match parse_range(args, 1, false, by, direction) {
        Ok(q) => q,
        Err(e) => return e.send(&mut ctx.out),
    };
    match find(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.array(0),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
        Found::ZSet(z) => {
            let found = range_of(z, &q);
            reply_elements(&mut ctx.out, &found, q.withscores);
        }
    }
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`
fn zrange(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    zrange_generic(ctx, args, RangeBy::Auto, Direction::Auto);
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`
fn zrangebyscore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    zrange_generic(ctx, args, RangeBy::Score, Direction::Forward);
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`
fn zrevrangebyscore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    zrange_generic(ctx, args, RangeBy::Score, Direction::Reverse);
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`
fn zrangebylex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    zrange_generic(ctx, args, RangeBy::Lex, Direction::Forward);
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`
fn zrevrangebylex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    zrange_generic(ctx, args, RangeBy::Lex, Direction::Reverse);
}

/// `ZREVRANGE key start stop [WITHSCORES]`
fn zrevrange(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    zrange_generic(ctx, args, RangeBy::Rank, Direction::Reverse);
}

/// Elements as owned data, in a stated order.
type Elements = Vec<(Vec<u8>, f64)>;

/// ZRANGESTORE's read at its source: the range's elements, in range order.
fn range_part(ctx: &mut ShardCtx<'_>, key: &[u8], q: &RangeQuery) -> Result<Elements, WrongType> {
    match find(ctx.db, key, ctx.now) {
        Found::Absent => Ok(Vec::new()),
        Found::WrongType => Err(WrongType),
        Found::ZSet(z) => Ok(range_of(z, q)
            .into_iter()
            .map(|(m, s)| (m.to_vec(), s))
            .collect()),
    }
}

/// ZRANGESTORE's destination, built as Redis builds it: begun large when a range by rank
/// is past the small limit, else small, and each element added in range order.
fn range_destination(q: &RangeQuery, found: &Elements) -> SortedSet {
    let hint = match q.kind {
        RangeKind::Rank(..) => found.len(),
        _ => 0,
    };
    let mut z = SortedSet::for_size(hint);
    for (m, s) in found {
        let _ = z.add(m, *s, AddFlags::default());
    }
    z
}

/// Writes a STORE command's destination on its shard: the set, or (when empty) the key
/// deleted. With `log`, records the deterministic effect: `DEL dst` and the ZADD that
/// rebuilds it. Returns the destination's size.
pub(crate) fn store_part(ctx: &mut ShardCtx<'_>, dst: &[u8], z: SortedSet, log: bool) -> usize {
    let n = z.len();
    if n == 0 {
        if ctx.db.delete(dst, ctx.now) && log {
            ctx.log(&[b"DEL", dst]);
        }
        return 0;
    }
    if log && ctx.logging() {
        ctx.log(&[b"DEL", dst]);
        let mut argv: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), dst.to_vec()];
        z.for_each(|m, s| {
            let mut buf = [0u8; 32];
            argv.push(format_double(s, &mut buf).to_vec());
            argv.push(m.to_vec());
        });
        let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        ctx.log(&argv);
    }
    ctx.db.insert(dst, Value::ZSet(Box::new(z)), None, ctx.now);
    n
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`, both keys
/// on this shard.
fn zrangestore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let q = match parse_range(args, 2, true, RangeBy::Auto, Direction::Auto) {
        Ok(q) => q,
        Err(e) => return e.send(&mut ctx.out),
    };
    match range_part(ctx, args.get(2), &q) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(found) => {
            let z = range_destination(&q, &found);
            let n = store_part(ctx, args.get(1), z, false);
            ctx.out.integer(n as i64);
        }
    }
}

/// ZRANGESTORE with its keys on two shards: read the range at the source, store it at
/// the destination.
#[derive(Debug)]
struct RangeStorePlan {
    dst: Vec<u8>,
    src: Vec<u8>,
    dst_shard: usize,
    src_shard: usize,
    query: RangeQuery,
    stored: Option<usize>,
}

impl Plan for RangeStorePlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if let Some(n) = self.stored {
            return cx.done(|e| e.integer(n as i64));
        }
        let Some(result) = results.into_iter().next() else {
            let (src, q) = (self.src.clone(), self.query.clone());
            return Step::Hops(vec![Hop::run(self.src_shard, move |ctx| {
                HopOut::Other(Box::new(range_part(ctx, &src, &q)))
            })]);
        };
        match downcast::<Result<Elements, WrongType>>(result) {
            Some(Ok(found)) => {
                let z = range_destination(&self.query, &found);
                self.stored = Some(z.len());
                let dst = self.dst.clone();
                Step::Hops(vec![Hop::run(self.dst_shard, move |ctx| {
                    store_part(ctx, &dst, z, true);
                    HopOut::Done
                })])
            }
            _ => cx.done(|e| e.error(errors::WRONGTYPE)),
        }
    }
}

/// ZRANGESTORE across shards; its options are checked first.
fn zrangestore_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let query = parse_range(args, 2, true, RangeBy::Auto, Direction::Auto)?;
    Ok(Box::new(RangeStorePlan {
        dst: args.get(1).to_vec(),
        src: args.get(2).to_vec(),
        dst_shard: start.slots.shard_of_key(args.get(1)),
        src_shard: start.slots.shard_of_key(args.get(2)),
        query,
        stored: None,
    }))
}

/// A hop's typed result.
fn downcast<T: 'static>(out: HopOut) -> Option<T> {
    match out {
        HopOut::Other(any) => any.downcast::<T>().ok().map(|b| *b),
        _ => None,
    }
}

// --- removals by range ---

/// ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX after their range is parsed.
fn remove_range(ctx: &mut ShardCtx<'_>, key: &[u8], kind: &RangeKind) {
    let removed = modify(ctx, key, |z| {
        let n = match kind {
            RangeKind::Rank(start, end) => {
                let len = z.len() as i64;
                let (mut start, mut end) = (*start, *end);
                if start < 0 {
                    start = start.saturating_add(len);
                }
                if end < 0 {
                    end = end.saturating_add(len);
                }
                start = start.max(0);
                if start > end || start >= len {
                    0
                } else {
                    z.remove_ranks(start as usize, end.min(len - 1) as usize)
                }
            }
            RangeKind::Score(range) => z.remove_score_range(range),
            RangeKind::Lex(range) => z.remove_lex_range(range),
        };
        (n, n > 0)
    });
    match removed {
        None => ctx.out.integer(0),
        Some(Ok(n)) => ctx.out.integer(n as i64),
        Some(Err(WrongType)) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `ZREMRANGEBYRANK key start stop`
fn zremrangebyrank(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match (parse_i64(args.get(2)), parse_i64(args.get(3))) {
        (Some(start), Some(end)) => remove_range(ctx, args.get(1), &RangeKind::Rank(start, end)),
        _ => ctx.out.error(errors::NOT_INTEGER),
    }
}

/// `ZREMRANGEBYSCORE key min max`
fn zremrangebyscore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match parse_score_range(args.get(2), args.get(3)) {
        Ok(range) => remove_range(ctx, args.get(1), &RangeKind::Score(range)),
        Err(e) => e.send(&mut ctx.out),
    }
}

/// `ZREMRANGEBYLEX key min max`
fn zremrangebylex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match parse_lex_range(args.get(2), args.get(3)) {
        Ok(range) => remove_range(ctx, args.get(1), &RangeKind::Lex(range)),
        Err(e) => e.send(&mut ctx.out),
    }
}

// --- pops ---

/// Pops up to `count` elements from the low end (or the high end, `max`) of the sorted set
/// at `key`: `None` when the key is absent. A ZMPOP logs `ZPOPMIN|ZPOPMAX key n`, as Redis
/// propagates it.
fn pop_part(
    ctx: &mut ShardCtx<'_>,
    key: &[u8],
    max: bool,
    count: u64,
    log: bool,
) -> Option<Result<Elements, WrongType>> {
    let popped = modify(ctx, key, |z| {
        let n = usize::try_from(count).unwrap_or(usize::MAX).min(z.len());
        let from = if max { z.last() } else { z.first() };
        let popped: Elements = collect(z, from, max, n as i64, |_, _| true)
            .into_iter()
            .map(|(m, s)| (m.to_vec(), s))
            .collect();
        if n > 0 {
            let len = z.len();
            if max {
                z.remove_ranks(len - n, len - 1);
            } else {
                z.remove_ranks(0, n - 1);
            }
        }
        (popped, n > 0)
    });
    if log
        && ctx.logging()
        && let Some(Ok(popped)) = &popped
        && !popped.is_empty()
    {
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        ctx.log(&[name, key, &decimal(popped.len() as i64)]);
    }
    popped
}

/// ZPOPMIN and ZPOPMAX (`zpopMinMaxCommand`).
fn pop_generic(ctx: &mut ShardCtx<'_>, args: &Args<'_>, max: bool) {
    if args.len() > 3 {
        return ctx.out.error(errors::SYNTAX);
    }
    let count = if args.len() == 3 {
        match int_at_least(args.get(2), 0, errors::ZSET_MUST_BE_POSITIVE) {
            Ok(n) => Some(n as u64),
            Err(e) => return e.send(&mut ctx.out),
        }
    } else {
        None
    };
    let nested = ctx.out.version() == Version::Resp3 && count.is_some();
    match pop_part(ctx, args.get(1), max, count.unwrap_or(1), false) {
        None => ctx.out.array(0),
        Some(Err(WrongType)) => ctx.out.error(errors::WRONGTYPE),
        Some(Ok(popped)) => {
            if nested {
                ctx.out.array(popped.len());
                for (m, s) in &popped {
                    ctx.out.array(2);
                    ctx.out.bulk(m);
                    ctx.out.double(*s);
                }
            } else {
                ctx.out.array(2 * popped.len());
                for (m, s) in &popped {
                    ctx.out.bulk(m);
                    ctx.out.double(*s);
                }
            }
        }
    }
}

/// `ZPOPMIN key [count]`
fn zpopmin(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    pop_generic(ctx, args, false);
}

/// `ZPOPMAX key [count]`
fn zpopmax(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    pop_generic(ctx, args, true);
}

/// A parsed ZMPOP.
#[derive(Clone, Debug)]
struct Zmpop {
    keys: Vec<Vec<u8>>,
    max: bool,
    count: u64,
}

/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]` (numkeys at `at`: 1, or 2 for
/// BZMPOP), checked as `zmpopGenericCommand` checks it, before any key is looked at.
fn parse_zmpop(args: &Args<'_>, at: usize) -> Result<Zmpop, ErrorReply> {
    let numkeys = int_at_least(args.get(at), 1, errors::ZSET_NUMKEYS_POSITIVE)? as u64;
    let where_at = numkeys
        .checked_add(at as u64 + 1)
        .and_then(|w| usize::try_from(w).ok())
        .filter(|&w| w < args.len())
        .ok_or(ErrorReply::Fixed(errors::SYNTAX))?;
    let max = if args.is(where_at, "max") {
        true
    } else if args.is(where_at, "min") {
        false
    } else {
        return Err(errors::SYNTAX.into());
    };
    let mut count = None;
    let mut c = args.cursor(where_at + 1);
    while let Some(opt) = c.next() {
        if count.is_none() && is_keyword(opt, "count") && !c.is_empty() {
            count = Some(int_at_least(c.next_arg()?, 1, errors::ZSET_COUNT_POSITIVE)? as u64);
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok(Zmpop {
        keys: (at + 1..where_at).map(|i| args.get(i).to_vec()).collect(),
        max,
        count: count.unwrap_or(1),
    })
}

/// ZMPOP's reply: the key and its popped elements as pairs, in either protocol.
fn reply_zmpop(out: &mut Encoder<'_>, key: &[u8], popped: &Elements) {
    out.array(2);
    out.bulk(key);
    out.array(popped.len());
    for (m, s) in popped {
        out.array(2);
        out.bulk(m);
        out.double(*s);
    }
}

/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]`, every key on this shard: pops from
/// the first key that exists.
fn zmpop(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let z = match parse_zmpop(args, 1) {
        Ok(z) => z,
        Err(e) => return e.send(&mut ctx.out),
    };
    for key in &z.keys {
        match pop_part(ctx, key, z.max, z.count, true) {
            None => continue,
            Some(Err(WrongType)) => return ctx.out.error(errors::WRONGTYPE),
            Some(Ok(popped)) => return reply_zmpop(&mut ctx.out, key, &popped),
        }
    }
    ctx.out.null_array();
}

/// ZMPOP across shards: every key's type, then a pop of the first that exists, under the
/// locks of all of them.
#[derive(Debug)]
struct ZmpopPlan {
    z: Zmpop,
    shards: Vec<usize>,
    stage: u8,
    chosen: usize,
}

impl Plan for ZmpopPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        self.stage += 1;
        match self.stage {
            1 => Step::Hops(gather(
                &self.shards,
                &self.z.keys,
                &all(self.z.keys.len()),
                meta_part,
            )),
            2 => {
                let metas: Vec<Meta> = scatter(&self.shards, &all(self.z.keys.len()), results);
                let Some(i) = metas.iter().position(|m| !matches!(m, Meta::Absent)) else {
                    return cx.done(|e| e.null_array());
                };
                if !matches!(metas[i], Meta::ZSet(_)) {
                    return cx.done(|e| e.error(errors::WRONGTYPE));
                }
                self.chosen = i;
                let (key, max, count) = (self.z.keys[i].clone(), self.z.max, self.z.count);
                Step::Hops(vec![Hop::run(self.shards[i], move |ctx| {
                    HopOut::Other(Box::new(pop_part(ctx, &key, max, count, true)))
                })])
            }
            _ => {
                let popped = results
                    .into_iter()
                    .next()
                    .and_then(downcast::<Option<Result<Elements, WrongType>>>);
                let key = &self.z.keys[self.chosen];
                match popped {
                    Some(Some(Ok(popped))) => cx.done(|e| reply_zmpop(e, key, &popped)),
                    Some(Some(Err(WrongType))) => cx.done(|e| e.error(errors::WRONGTYPE)),
                    _ => cx.done(|e| e.null_array()),
                }
            }
        }
    }
}

/// ZMPOP across shards; its arguments are checked first.
fn zmpop_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let z = parse_zmpop(start.args, 1)?;
    let shards = z.keys.iter().map(|k| start.slots.shard_of_key(k)).collect();
    Ok(Box::new(ZmpopPlan {
        z,
        shards,
        stage: 0,
        chosen: 0,
    }))
}

// --- blocking pops: BZPOPMIN, BZPOPMAX, BZMPOP ---

/// What a key holds for a blocked pop (a sorted set is never empty: an emptied one is
/// deleted).
fn zset_holds(db: &mut Keyspace, key: &[u8], now: Millis) -> Holds {
    match find(db, key, now) {
        Found::ZSet(_) => Holds::Ready,
        Found::Absent => Holds::Empty,
        Found::WrongType => Holds::WrongType,
    }
}

/// How many members a blocked pop could take from `key` (a
/// [`crate::txn::plan::ReadyFn`]: a key of another type serves no waiting client).
fn zset_ready(db: &mut Keyspace, key: &[u8], now: Millis, _arg: &[u8]) -> usize {
    match find(db, key, now) {
        Found::ZSet(z) => z.len(),
        _ => 0,
    }
}

/// Pops `count` members at the low end (or the high end, `max`) of a ready sorted set,
/// logged as ZPOPMIN or ZPOPMAX.
fn take_members(ctx: &mut ShardCtx<'_>, key: &[u8], max: bool, count: u64) -> Option<HopOut> {
    match pop_part(ctx, key, max, count, true)? {
        Ok(popped) if !popped.is_empty() => Some(HopOut::Other(Box::new(popped))),
        _ => None,
    }
}

fn take_min(ctx: &mut ShardCtx<'_>, key: &[u8], _args: &[Vec<u8>]) -> Option<HopOut> {
    take_members(ctx, key, false, 1)
}

fn take_max(ctx: &mut ShardCtx<'_>, key: &[u8], _args: &[Vec<u8>]) -> Option<HopOut> {
    take_members(ctx, key, true, 1)
}

/// BZMPOP's pop: COUNT members at its end (its arguments say which).
fn take_zmpop(ctx: &mut ShardCtx<'_>, key: &[u8], args: &[Vec<u8>]) -> Option<HopOut> {
    let z = Args::with_owned(args, |args| parse_zmpop(args, 2)).ok()?;
    take_members(ctx, key, z.max, z.count)
}

fn taken(out: HopOut) -> Elements {
    downcast::<Elements>(out).unwrap_or_default()
}

/// BZPOPMIN's and BZPOPMAX's reply: `[key, member, score]`.
fn answer_key_member_score(cx: &PlanCx<'_>, key: &[u8], out: HopOut) -> Outcome {
    let popped = taken(out);
    cx.reply(|e| {
        e.array(1 + 2 * popped.len());
        e.bulk(key);
        for (m, s) in &popped {
            e.bulk(m);
            e.double(*s);
        }
    })
}

/// BZMPOP's reply, ZMPOP's.
fn answer_zmpop(cx: &PlanCx<'_>, key: &[u8], out: HopOut) -> Outcome {
    let popped = taken(out);
    cx.reply(|e| reply_zmpop(e, key, &popped))
}

/// The reply when the timeout passes (and, in MULTI, when there is nothing to pop).
fn timed_out_null_array(cx: &PlanCx<'_>) -> Outcome {
    cx.reply(|e| e.null_array())
}

/// BZPOPMIN: the lowest score.
const BZPOPMIN_OPS: BlockingOps = BlockingOps {
    holds: zset_holds,
    ready: zset_ready,
    take: take_min,
    answer: answer_key_member_score,
    timed_out: timed_out_null_array,
};

/// `BZPOPMIN key [key ...] timeout` and BZPOPMAX: the timeout is checked first.
fn bzpop_plan(start: &PlanStart<'_>, ops: BlockingOps) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let timeout = parse_timeout(args.get(args.len() - 1))?;
    let keys = (1..args.len() - 1).map(|i| args.get(i).to_vec()).collect();
    Ok(Box::new(BlockingPop::new(args, keys, timeout, ops)))
}

fn bzpopmin_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    bzpop_plan(start, BZPOPMIN_OPS)
}

fn bzpopmax_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let ops = BlockingOps {
        take: take_max,
        ..BZPOPMIN_OPS
    };
    bzpop_plan(start, ops)
}

/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`: the timeout is checked
/// first, then the rest as ZMPOP checks it.
fn bzmpop_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let timeout = parse_timeout(args.get(1))?;
    let z = parse_zmpop(args, 2)?;
    let ops = BlockingOps {
        take: take_zmpop,
        answer: answer_zmpop,
        ..BZPOPMIN_OPS
    };
    Ok(Box::new(BlockingPop::new(args, z.keys, timeout, ops)))
}

// --- ZRANDMEMBER ---

/// A random number below `n` (`n > 0`).
fn below(n: usize) -> usize {
    (random_u64() % n as u64) as usize
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`
fn zrandmember(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if args.len() >= 3 {
        let Some(l) = parse_i64(args.get(2)) else {
            return ctx.out.error(errors::NOT_INTEGER);
        };
        if l == i64::MIN {
            return ctx.out.error(errors::COUNT_OUT_OF_RANGE);
        }
        if args.len() > 4 || (args.len() == 4 && !args.is(3, "withscores")) {
            return ctx.out.error(errors::SYNTAX);
        }
        let withscores = args.len() == 4;
        if withscores && !(-i64::MAX / 2..=i64::MAX / 2).contains(&l) {
            return ctx.out.error(errors::VALUE_OUT_OF_RANGE);
        }
        return zrandmember_count(ctx, args.get(1), l, withscores);
    }
    match find(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.null(),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
        Found::ZSet(z) => match z.at_rank(below(z.len())) {
            Some(p) => ctx.out.bulk(z.entry(p).0),
            None => ctx.out.null(),
        },
    }
}

/// ZRANDMEMBER with a count (`zrandmemberWithCountCommand`): with repeats for a negative
/// count, else distinct members — all of them, highest first, when the count covers the
/// set.
fn zrandmember_count(ctx: &mut ShardCtx<'_>, key: &[u8], l: i64, withscores: bool) {
    let z = match find(ctx.db, key, ctx.now) {
        Found::Absent => return ctx.out.array(0),
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::ZSet(z) => z,
    };
    let size = z.len();
    let (count, unique) = (l.unsigned_abs(), l >= 0);
    if count == 0 {
        return ctx.out.array(0);
    }
    let pick = |r: usize| z.at_rank(r).map(|p| z.entry(p));
    if !unique || count == 1 {
        if count > RANDOM_PICKS_MAX {
            return ctx.out.error(errors::VALUE_OUT_OF_RANGE);
        }
        // Streamed: nothing is allocated for the count.
        reply_header(&mut ctx.out, count as usize, withscores);
        for _ in 0..count {
            let (m, s) = pick(below(size)).unwrap_or((b"", 0.0));
            reply_element(&mut ctx.out, m, s, withscores);
        }
        return;
    }
    if count >= size as u64 {
        let mut all = Vec::with_capacity(size);
        let mut p = z.last();
        while let Some(pos) = p {
            all.push(z.entry(pos));
            p = z.prev(pos);
        }
        return reply_elements(&mut ctx.out, &all, withscores);
    }
    let count = count as usize;
    let ranks: Vec<usize> = if count as u64 * SUB_STRATEGY_MUL > size as u64 {
        // Most of the set: a random selection of `count` ranks (a partial shuffle).
        let mut ranks: Vec<usize> = (0..size).collect();
        for i in 0..count {
            let j = i + below(size - i);
            ranks.swap(i, j);
        }
        ranks.truncate(count);
        ranks
    } else {
        // A small part: random picks, repeats dropped.
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut ranks = Vec::with_capacity(count);
        while ranks.len() < count {
            let r = below(size);
            if seen.insert(r) {
                ranks.push(r);
            }
        }
        ranks
    };
    let picks: Vec<(&[u8], f64)> = ranks.into_iter().filter_map(pick).collect();
    reply_elements(&mut ctx.out, &picks, withscores);
}

// --- ZSCAN ---

/// A listpack's text of a score, as ZSCAN of a small set shows it: an integral score
/// within `double2ll`'s bounds was stored as an integer, anything else as `%.17g`.
fn listpack_score_text(score: f64, buf: &mut [u8; 32]) -> &[u8] {
    if (-DOUBLE2LL_BOUND..=DOUBLE2LL_BOUND).contains(&score) && score == (score as i64) as f64 {
        let mut ib = itoa::Buffer::new();
        let text = ib.format(score as i64).as_bytes();
        buf[..text.len()].copy_from_slice(text);
        return &buf[..text.len()];
    }
    format_double(score, buf)
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`: a small set in one call (cursor 0),
/// a large one bucket by bucket (see `SortedSet::scan_step`).
fn zscan(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(mut cursor) = parse_cursor(args.get(2)) else {
        return ctx.out.error(errors::INVALID_CURSOR);
    };
    let z = match find(ctx.db, args.get(1), ctx.now) {
        Found::Absent => {
            ctx.out.array(2);
            ctx.out.bulk(b"0");
            return ctx.out.array(0);
        }
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::ZSet(z) => z,
    };
    let mut count = SCAN_COUNT;
    let mut pattern = None;
    let mut c = args.cursor(3);
    while let Some(opt) = c.next() {
        if is_keyword(opt, "count") && !c.is_empty() {
            match c.next_i64() {
                Ok(n) if n >= 1 => count = n,
                Ok(_) => return ctx.out.error(errors::SYNTAX),
                Err(e) => return e.send(&mut ctx.out),
            }
        } else if is_keyword(opt, "match") && !c.is_empty() {
            let p = c.next().unwrap_or(b"*");
            pattern = (p != b"*").then_some(p);
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
    }
    let mut found: Vec<(&[u8], f64)> = Vec::new();
    if z.is_small() {
        cursor = z.scan_step(cursor, |m, s| found.push((m, s)));
    } else {
        // Members and scores both count, as in Redis.
        let wanted = count.saturating_mul(2);
        let mut visits = wanted.saturating_mul(SCAN_VISITS_PER_ELEMENT);
        loop {
            cursor = z.scan_step(cursor, |m, s| found.push((m, s)));
            visits -= 1;
            if cursor == 0 || visits < 0 || found.len() as i64 * 2 >= wanted {
                break;
            }
        }
    }
    if let Some(p) = pattern {
        found.retain(|(m, _)| glob_match(p, m, false));
    }
    let small = z.is_small();
    ctx.out.array(2);
    ctx.out.bulk(&decimal(cursor as i64));
    ctx.out.array(2 * found.len());
    for (m, s) in &found {
        ctx.out.bulk(m);
        let mut buf = [0u8; 32];
        let text = if small {
            listpack_score_text(*s, &mut buf)
        } else {
            format_double(*s, &mut buf)
        };
        ctx.out.bulk(text);
    }
}

// --- ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD ---

/// The set operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

/// How scores of a member in several sources combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate`: a sum that is not a number is 0.
fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += value;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if value < *target {
                *target = value;
            }
        }
        Aggregate::Max => {
            if value > *target {
                *target = value;
            }
        }
    }
}

/// What a source key holds: its type and size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Meta {
    #[default]
    Absent,
    ZSet(usize),
    Set(usize),
    WrongType,
}

impl Meta {
    fn len(self) -> usize {
        match self {
            Meta::ZSet(n) | Meta::Set(n) => n,
            _ => 0,
        }
    }
}

/// Each key's type and size.
fn meta_part<K: AsRef<[u8]>>(ctx: &mut ShardCtx<'_>, keys: &[K], _: &()) -> Vec<Meta> {
    keys.iter()
        .map(
            |k| match ctx.db.get(k.as_ref(), ctx.now).map(|e| e.value()) {
                None => Meta::Absent,
                Some(ValueRef::ZSet(z)) => Meta::ZSet(z.len()),
                Some(ValueRef::Set(s)) => Meta::Set(s.len()),
                Some(_) => Meta::WrongType,
            },
        )
        .collect()
}

/// Each key's elements: a sorted set's with their scores, a set's members with score 1.
fn read_part<K: AsRef<[u8]>>(ctx: &mut ShardCtx<'_>, keys: &[K], _: &()) -> Vec<Elements> {
    keys.iter()
        .map(|k| {
            let mut out = Vec::new();
            match ctx.db.get(k.as_ref(), ctx.now).map(|e| e.value()) {
                Some(ValueRef::ZSet(z)) => {
                    out.reserve(z.len());
                    z.for_each(|m, s| out.push((m.to_vec(), s)));
                }
                Some(ValueRef::Set(set)) => {
                    out.reserve(set.len());
                    set.for_each(|m| out.push((m.to_vec(), 1.0)));
                }
                _ => {}
            }
            out
        })
        .collect()
}

/// For each key, the score of each of `members` in it (1 in a set), or `None`.
fn probe_part<K: AsRef<[u8]>>(
    ctx: &mut ShardCtx<'_>,
    keys: &[K],
    members: &Arc<Vec<Vec<u8>>>,
) -> Vec<Vec<Option<f64>>> {
    keys.iter()
        .map(
            |k| match ctx.db.get(k.as_ref(), ctx.now).map(|e| e.value()) {
                Some(ValueRef::ZSet(z)) => members.iter().map(|m| z.score(m)).collect(),
                Some(ValueRef::Set(set)) => members
                    .iter()
                    .map(|m| set.contains(m).then_some(1.0))
                    .collect(),
                _ => vec![None; members.len()],
            },
        )
        .collect()
}

/// A ZUNION, ZINTER, ZDIFF (or STORE form) or ZINTERCARD, parsed.
#[derive(Clone, Debug)]
struct Algebra {
    op: SetOp,
    dst: Option<Vec<u8>>,
    keys: Vec<Vec<u8>>,
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    /// ZINTERCARD: count only.
    card: bool,
    /// ZINTERCARD's LIMIT (0: none).
    limit: usize,
    /// The options' error: answered once no source is of the wrong type (Redis looks the
    /// sources up before it reads the options).
    invalid: Option<ErrorReply>,
}

/// Which sources to read whole, and which to look the first source's members up in.
#[derive(Clone, Debug, Default)]
struct Reads {
    /// The sources in the order Redis combines them: by size (but for ZDIFF), ties in
    /// argument order.
    order: Vec<usize>,
    whole: Vec<usize>,
    probe: Vec<usize>,
    /// The result is empty whatever the sources hold.
    empty: bool,
    /// ZDIFF removes whole sources' members from the first (Redis's second algorithm)
    /// rather than looking the first's members up in the others.
    subtract: bool,
}

/// What a computation gives.
enum Computed {
    Elements(Elements),
    Count(usize),
}

/// Parses `<numkeys> key [key ...] [options]` from `numkeys_at` on (Redis's
/// `zunionInterDiffGenericCommand`): the errors before the keys are looked at are
/// returned; the options' errors are kept for later.
fn parse_algebra(
    args: &Args<'_>,
    numkeys_at: usize,
    op: SetOp,
    store: bool,
    card: bool,
    name: &str,
) -> Result<Algebra, ErrorReply> {
    let setnum = parse_i64(args.get(numkeys_at)).ok_or(ErrorReply::Fixed(errors::NOT_INTEGER))?;
    if setnum < 1 {
        return Err(errors::zset_no_input_key(name));
    }
    let first = numkeys_at + 1;
    let n = usize::try_from(setnum)
        .ok()
        .filter(|&n| n <= args.len() - first)
        .ok_or(ErrorReply::Fixed(errors::SYNTAX))?;
    let mut job = Algebra {
        op,
        dst: store.then(|| args.get(1).to_vec()),
        keys: (first..first + n).map(|i| args.get(i).to_vec()).collect(),
        weights: vec![1.0; n],
        aggregate: Aggregate::Sum,
        withscores: false,
        card,
        limit: 0,
        invalid: None,
    };
    if let Err(e) = parse_algebra_options(args, first + n, &mut job) {
        job.invalid = Some(e);
    }
    Ok(job)
}

/// The options after the keys.
fn parse_algebra_options(
    args: &Args<'_>,
    from: usize,
    job: &mut Algebra,
) -> Result<(), ErrorReply> {
    let n = job.keys.len();
    let weighted = job.op != SetOp::Diff && !job.card;
    let mut c = args.cursor(from);
    while let Some(opt) = c.next() {
        let remaining = c.remaining() + 1;
        if weighted && remaining > n && is_keyword(opt, "weights") {
            for w in &mut job.weights {
                *w = c.next_parsed(parse_score, errors::ZSET_WEIGHT_NOT_FLOAT)?;
            }
        } else if weighted && remaining >= 2 && is_keyword(opt, "aggregate") {
            let how = c.next_arg()?;
            job.aggregate = if is_keyword(how, "sum") {
                Aggregate::Sum
            } else if is_keyword(how, "min") {
                Aggregate::Min
            } else if is_keyword(how, "max") {
                Aggregate::Max
            } else {
                return Err(errors::SYNTAX.into());
            };
        } else if job.dst.is_none() && !job.card && is_keyword(opt, "withscores") {
            job.withscores = true;
        } else if job.card && remaining >= 2 && is_keyword(opt, "limit") {
            let limit = int_at_least(c.next_arg()?, 0, errors::ZSET_LIMIT_NEGATIVE)?;
            job.limit = usize::try_from(limit).unwrap_or(usize::MAX);
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok(())
}

impl Algebra {
    /// Given the sources' types and sizes: the error to answer, or what to read.
    fn decide(&self, metas: &[Meta]) -> Result<Reads, ErrorReply> {
        if metas.contains(&Meta::WrongType) {
            return Err(errors::WRONGTYPE.into());
        }
        if let Some(e) = &self.invalid {
            return Err(e.clone());
        }
        let mut order: Vec<usize> = (0..metas.len()).collect();
        if self.op != SetOp::Diff {
            order.sort_by_key(|&i| metas[i].len());
        }
        let mut reads = Reads {
            order,
            ..Reads::default()
        };
        let first = reads.order[0];
        let nonempty = |i: &usize| metas[*i].len() > 0;
        match self.op {
            SetOp::Union => reads.whole = reads.order.iter().copied().filter(nonempty).collect(),
            SetOp::Inter => {
                if metas[first].len() == 0 {
                    reads.empty = true;
                } else {
                    reads.whole = vec![first];
                    reads.probe = reads.order[1..].to_vec();
                }
            }
            SetOp::Diff => {
                let n0 = metas[0].len();
                if n0 == 0 || self.keys[1..].contains(&self.keys[0]) {
                    reads.empty = true;
                } else {
                    // Redis's zsetChooseDiffAlgorithm: the first algorithm looks each of
                    // the first set's members up in the others, the second walks them all.
                    let one = (n0 as u128 * metas.len() as u128) / 2;
                    let two: u128 = metas.iter().map(|m| m.len() as u128).sum();
                    if one <= two {
                        reads.whole = vec![0];
                        reads.probe = (1..metas.len()).filter(nonempty).collect();
                    } else {
                        reads.subtract = true;
                        reads.whole = (0..metas.len()).filter(nonempty).collect();
                    }
                }
            }
        }
        Ok(reads)
    }

    /// The members of the first source to look up in the others.
    fn probe_members(&self, reads: &Reads, whole: &[Option<Elements>]) -> Arc<Vec<Vec<u8>>> {
        let first = whole
            .get(reads.order.first().copied().unwrap_or(0))
            .and_then(Option::as_ref);
        Arc::new(first.map_or_else(Vec::new, |e| e.iter().map(|(m, _)| m.clone()).collect()))
    }

    /// The result, from what was read: `whole[i]` the elements of source `i` when it was
    /// read whole, `probes[i]` the scores in source `i` of the first source's members.
    fn compute(
        &self,
        reads: &Reads,
        mut whole: Vec<Option<Elements>>,
        probes: &[Option<Vec<Option<f64>>>],
    ) -> Computed {
        let mut out: Elements = Vec::new();
        let mut count = 0usize;
        if !reads.empty {
            match self.op {
                SetOp::Union => {
                    let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
                    for &i in &reads.order {
                        let w = self.weights[i];
                        for (m, s) in whole[i].take().unwrap_or_default() {
                            let mut score = w * s;
                            if score.is_nan() {
                                score = 0.0;
                            }
                            match acc.entry(m) {
                                MapEntry::Vacant(v) => {
                                    v.insert(score);
                                }
                                MapEntry::Occupied(mut o) => {
                                    aggregate(o.get_mut(), score, self.aggregate)
                                }
                            }
                        }
                    }
                    out = acc.into_iter().collect();
                }
                SetOp::Inter => {
                    let first = reads.order[0];
                    let w0 = self.weights[first];
                    'members: for (k, (m, s)) in whole[first]
                        .take()
                        .unwrap_or_default()
                        .into_iter()
                        .enumerate()
                    {
                        let mut score = w0 * s;
                        if score.is_nan() {
                            score = 0.0;
                        }
                        for &j in &reads.order[1..] {
                            let found =
                                probes[j].as_ref().and_then(|p| p.get(k).copied().flatten());
                            match found {
                                Some(v) => {
                                    aggregate(&mut score, v * self.weights[j], self.aggregate)
                                }
                                None => continue 'members,
                            }
                        }
                        if self.card {
                            count += 1;
                            if self.limit > 0 && count >= self.limit {
                                break;
                            }
                        } else {
                            out.push((m, score));
                        }
                    }
                }
                SetOp::Diff if reads.subtract => {
                    let mut left: HashMap<Vec<u8>, f64> =
                        whole[0].take().unwrap_or_default().into_iter().collect();
                    for &j in &reads.whole[1..] {
                        for (m, _) in whole[j].take().unwrap_or_default() {
                            left.remove(&m);
                        }
                        if left.is_empty() {
                            break;
                        }
                    }
                    out = left.into_iter().collect();
                }
                SetOp::Diff => {
                    for (k, (m, s)) in whole[0].take().unwrap_or_default().into_iter().enumerate() {
                        let elsewhere = reads.probe.iter().any(|&j| {
                            probes[j]
                                .as_ref()
                                .and_then(|p| p.get(k).copied().flatten())
                                .is_some()
                        });
                        if !elsewhere {
                            out.push((m, s));
                        }
                    }
                }
            }
        }
        if self.card {
            return Computed::Count(count);
        }
        out.sort_by(|a, b| {
            a.1.partial_cmp(&b.1)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.0.cmp(&b.0))
        });
        Computed::Elements(out)
    }

    /// Answers a computation that stores nothing.
    fn reply(&self, out: &mut Encoder<'_>, computed: &Computed) {
        match computed {
            Computed::Count(n) => out.integer(*n as i64),
            Computed::Elements(e) => reply_elements(out, e, self.withscores),
        }
    }
}

/// Runs an algebra command whose keys are all on this shard: the same stages as its plan,
/// in a row.
fn algebra_local(ctx: &mut ShardCtx<'_>, args: &Args<'_>, op: SetOp, store: bool, card: bool) {
    let name = match (op, store, card) {
        (_, _, true) => "zintercard",
        (SetOp::Union, false, _) => "zunion",
        (SetOp::Inter, false, _) => "zinter",
        (SetOp::Diff, false, _) => "zdiff",
        (SetOp::Union, true, _) => "zunionstore",
        (SetOp::Inter, true, _) => "zinterstore",
        (SetOp::Diff, true, _) => "zdiffstore",
    };
    let numkeys_at = if store { 2 } else { 1 };
    let job = match parse_algebra(args, numkeys_at, op, store, card, name) {
        Ok(job) => job,
        Err(e) => return e.send(&mut ctx.out),
    };
    let metas = meta_part(ctx, &job.keys, &());
    let reads = match job.decide(&metas) {
        Ok(r) => r,
        Err(e) => return e.send(&mut ctx.out),
    };
    let n = job.keys.len();
    let mut whole: Vec<Option<Elements>> = vec![None; n];
    let keys: Vec<&[u8]> = reads
        .whole
        .iter()
        .map(|&i| job.keys[i].as_slice())
        .collect();
    for (&i, e) in reads.whole.iter().zip(read_part(ctx, &keys, &())) {
        whole[i] = Some(e);
    }
    let mut probes: Vec<Option<Vec<Option<f64>>>> = vec![None; n];
    if !reads.probe.is_empty() {
        let members = job.probe_members(&reads, &whole);
        let keys: Vec<&[u8]> = reads
            .probe
            .iter()
            .map(|&i| job.keys[i].as_slice())
            .collect();
        for (&i, p) in reads.probe.iter().zip(probe_part(ctx, &keys, &members)) {
            probes[i] = Some(p);
        }
    }
    let computed = job.compute(&reads, whole, &probes);
    match (&job.dst, computed) {
        (Some(dst), Computed::Elements(e)) => {
            let n = store_part(ctx, dst, SortedSet::from_entries(e), false);
            ctx.out.integer(n as i64);
        }
        (_, computed) => job.reply(&mut ctx.out, &computed),
    }
}

/// The indexes `0..n`.
fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// One hop per shard for the keys at `indexes`, each running `part` on its keys with
/// `extra`; their results come back, in the order of the hops, as `Vec<T>`s.
fn gather<T, X>(
    shards: &[usize],
    keys: &[Vec<u8>],
    indexes: &[usize],
    part: fn(&mut ShardCtx<'_>, &[Vec<u8>], &X) -> Vec<T>,
) -> Vec<Hop>
where
    T: Send + 'static,
    X: Default + Send + 'static,
{
    gather_with(shards, keys, indexes, part, || X::default())
}

/// [`gather`] with the extra argument of each hop made by `extra`.
fn gather_with<T, X>(
    shards: &[usize],
    keys: &[Vec<u8>],
    indexes: &[usize],
    part: fn(&mut ShardCtx<'_>, &[Vec<u8>], &X) -> Vec<T>,
    extra: impl Fn() -> X,
) -> Vec<Hop>
where
    T: Send + 'static,
    X: Send + 'static,
{
    by_shard(shards, indexes)
        .into_iter()
        .map(|(shard, idx)| {
            let keys: Vec<Vec<u8>> = idx.iter().map(|&i| keys[i].clone()).collect();
            let x = extra();
            Hop::run(shard, move |ctx| {
                HopOut::Other(Box::new(part(ctx, &keys, &x)))
            })
        })
        .collect()
}

/// The indexes grouped by the shard of their key, shards in order of first appearance.
fn by_shard(shards: &[usize], indexes: &[usize]) -> Vec<(usize, Vec<usize>)> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for &i in indexes {
        let s = shards[i];
        match groups.iter_mut().find(|(g, _)| *g == s) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((s, vec![i])),
        }
    }
    groups
}

/// Puts the hops' results (from [`gather`]) back in the order of `indexes`.
fn scatter<T: Default + Clone + 'static>(
    shards: &[usize],
    indexes: &[usize],
    results: Vec<HopOut>,
) -> Vec<T> {
    let mut out = vec![T::default(); shards.len()];
    for ((_, idx), result) in by_shard(shards, indexes).into_iter().zip(results) {
        if let Some(values) = downcast::<Vec<T>>(result) {
            for (i, v) in idx.into_iter().zip(values) {
                out[i] = v;
            }
        }
    }
    out
}

/// An algebra command across shards: the sources' types and sizes, the reads Redis's
/// algorithm needs (whole sources, then lookups of the first one's members), the
/// computation here, and for a STORE the destination written on its shard.
#[derive(Debug)]
struct AlgebraPlan {
    job: Algebra,
    shards: Vec<usize>,
    dst_shard: usize,
    stage: Stage,
    reads: Reads,
    whole: Vec<Option<Elements>>,
    probes: Vec<Option<Vec<Option<f64>>>>,
    stored: usize,
}

/// Where an [`AlgebraPlan`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Metas,
    Whole,
    Probes,
    Stored,
}

impl AlgebraPlan {
    /// The step after the reads: probes if any, else the result.
    fn after_whole(&mut self, cx: &PlanCx<'_>) -> Step {
        if self.reads.probe.is_empty() {
            return self.finish(cx);
        }
        self.stage = Stage::Probes;
        let members = self.job.probe_members(&self.reads, &self.whole);
        Step::Hops(gather_with(
            &self.shards,
            &self.job.keys,
            &self.reads.probe,
            probe_part,
            move || Arc::clone(&members),
        ))
    }

    /// Computes; replies, or sends the destination to its shard.
    fn finish(&mut self, cx: &PlanCx<'_>) -> Step {
        let whole = std::mem::take(&mut self.whole);
        let computed = self.job.compute(&self.reads, whole, &self.probes);
        match (&self.job.dst, computed) {
            (Some(dst), Computed::Elements(e)) => {
                let z = SortedSet::from_entries(e);
                self.stored = z.len();
                self.stage = Stage::Stored;
                let dst = dst.clone();
                Step::Hops(vec![Hop::run(self.dst_shard, move |ctx| {
                    store_part(ctx, &dst, z, true);
                    HopOut::Done
                })])
            }
            (_, computed) => cx.done(|e| self.job.reply(e, &computed)),
        }
    }
}

impl Plan for AlgebraPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        let n = self.job.keys.len();
        match self.stage {
            Stage::Start => {
                self.stage = Stage::Metas;
                Step::Hops(gather(&self.shards, &self.job.keys, &all(n), meta_part))
            }
            Stage::Metas => {
                let metas: Vec<Meta> = scatter(&self.shards, &all(n), results);
                match self.job.decide(&metas) {
                    Err(e) => cx.done(|out| e.send(out)),
                    Ok(reads) => {
                        self.reads = reads;
                        self.whole = vec![None; n];
                        self.probes = vec![None; n];
                        if self.reads.whole.is_empty() {
                            return self.after_whole(cx);
                        }
                        self.stage = Stage::Whole;
                        Step::Hops(gather(
                            &self.shards,
                            &self.job.keys,
                            &self.reads.whole,
                            read_part,
                        ))
                    }
                }
            }
            Stage::Whole => {
                let mut read: Vec<Elements> = scatter(&self.shards, &self.reads.whole, results);
                for &i in &self.reads.whole {
                    self.whole[i] = Some(std::mem::take(&mut read[i]));
                }
                self.after_whole(cx)
            }
            Stage::Probes => {
                let mut found: Vec<Vec<Option<f64>>> =
                    scatter(&self.shards, &self.reads.probe, results);
                for &i in &self.reads.probe {
                    self.probes[i] = Some(std::mem::take(&mut found[i]));
                }
                self.finish(cx)
            }
            Stage::Stored => {
                let n = self.stored;
                cx.done(|e| e.integer(n as i64))
            }
        }
    }
}

/// Makes an algebra command's plan; the errors before its keys are looked at come first.
fn algebra_plan(
    start: &PlanStart<'_>,
    op: SetOp,
    store: bool,
    card: bool,
    name: &str,
) -> Result<Box<dyn Plan>, Vec<u8>> {
    let numkeys_at = if store { 2 } else { 1 };
    let job = parse_algebra(start.args, numkeys_at, op, store, card, name)?;
    let shards = job
        .keys
        .iter()
        .map(|k| start.slots.shard_of_key(k))
        .collect();
    let dst_shard = start.slots.shard_of_key(start.args.get(1));
    Ok(Box::new(AlgebraPlan {
        job,
        shards,
        dst_shard,
        stage: Stage::Start,
        reads: Reads::default(),
        whole: Vec::new(),
        probes: Vec::new(),
        stored: 0,
    }))
}

/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`
fn zunion(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    algebra_local(ctx, args, SetOp::Union, false, false);
}

/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`
fn zinter(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    algebra_local(ctx, args, SetOp::Inter, false, false);
}

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`
fn zdiff(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    algebra_local(ctx, args, SetOp::Diff, false, false);
}

/// `ZUNIONSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]`
fn zunionstore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    algebra_local(ctx, args, SetOp::Union, true, false);
}

/// `ZINTERSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]`
fn zinterstore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    algebra_local(ctx, args, SetOp::Inter, true, false);
}

/// `ZDIFFSTORE dst numkeys key [key ...]`
fn zdiffstore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    algebra_local(ctx, args, SetOp::Diff, true, false);
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`
fn zintercard(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    algebra_local(ctx, args, SetOp::Inter, false, true);
}

fn zunion_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    algebra_plan(start, SetOp::Union, false, false, "zunion")
}

fn zinter_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    algebra_plan(start, SetOp::Inter, false, false, "zinter")
}

fn zdiff_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    algebra_plan(start, SetOp::Diff, false, false, "zdiff")
}

fn zunionstore_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    algebra_plan(start, SetOp::Union, true, false, "zunionstore")
}

fn zinterstore_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    algebra_plan(start, SetOp::Inter, true, false, "zinterstore")
}

fn zdiffstore_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    algebra_plan(start, SetOp::Diff, true, false, "zdiffstore")
}

fn zintercard_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    algebra_plan(start, SetOp::Inter, false, true, "zintercard")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_string2d() {
        let ok = |s: &str, v: f64| assert_eq!(parse_score(s.as_bytes()), Some(v), "{s}");
        let bad = |s: &str| assert_eq!(parse_score(s.as_bytes()), None, "{s}");
        ok("1", 1.0);
        ok("-1.5", -1.5);
        ok("+.5e1", 5.0);
        ok("1.", 1.0);
        ok(".5", 0.5);
        ok("inf", f64::INFINITY);
        ok("-Infinity", f64::NEG_INFINITY);
        ok("+inf", f64::INFINITY);
        ok("0x10", 16.0);
        ok("0x1p3", 8.0);
        ok("0X1P-2", 0.25);
        ok("0x1.8p1", 3.0);
        ok("-0x.8", -0.5);
        ok("1e-310", 1e-310);
        for s in [
            "",
            " 1",
            "1 ",
            "1e400",
            "-1e400",
            "1e-400",
            "nan",
            "NaN",
            "0x",
            "1e+",
            "infx",
            "+-1",
            "1\0",
            ".",
            "e5",
            "0x1p99999",
        ] {
            bad(s);
        }
        assert!(parse_score(b"-0").unwrap().is_sign_negative());
    }

    /// The fast path reads what the general one reads, bit for bit.
    #[test]
    fn the_decimal_fast_path_agrees_with_the_general_one() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 16) as usize;
            let mut s: String = format!("{:016}", x >> 8)[..digits].to_string();
            if x & 1 == 0 && digits > 0 {
                s.insert((x as usize >> 20) % (digits + 1), '.');
            }
            let fast = decimal_fast(s.as_bytes());
            let general = s.parse::<f64>().ok();
            match fast {
                Some((v, n)) => {
                    assert_eq!(n, s.len(), "{s}");
                    assert_eq!(Some(v.to_bits()), general.map(f64::to_bits), "{s}");
                }
                None => assert!(digits == 0 || s == "." || s.len() > FAST_DIGITS + 1, "{s}"),
            }
        }
    }

    #[test]
    fn hex_floats_round_to_nearest_even() {
        // 2^53 + 1 rounds down to even, 2^53 + 3 up.
        assert_eq!(parse_score(b"0x20000000000001"), Some(9007199254740992.0));
        assert_eq!(parse_score(b"0x20000000000003"), Some(9007199254740996.0));
        // The smallest subnormal, and half of it with a little more.
        assert_eq!(parse_score(b"0x1p-1074"), Some(f64::from_bits(1)));
        assert_eq!(parse_score(b"0x1.0000001p-1075"), Some(f64::from_bits(1)));
        assert_eq!(parse_score(b"0x1p-1076"), None);
        assert_eq!(parse_score(b"0x1.fffffffffffffp1023"), Some(f64::MAX));
        assert_eq!(parse_score(b"0x1p1024"), None);
    }

    #[test]
    fn range_bounds_parse_as_zsl_parse_range() {
        assert_eq!(parse_bound(b""), Some((0.0, false)));
        assert_eq!(parse_bound(b"("), Some((0.0, true)));
        assert_eq!(parse_bound(b" 1"), Some((1.0, false)));
        assert_eq!(parse_bound(b"(\t2"), Some((2.0, true)));
        assert_eq!(parse_bound(b"1\0junk"), Some((1.0, false)));
        assert_eq!(parse_bound(b"1e400"), Some((f64::INFINITY, false)));
        assert_eq!(parse_bound(b"1 "), None);
        assert_eq!(parse_bound(b"nan"), None);
        assert_eq!(parse_bound(b" "), None);
        assert_eq!(parse_lex_bound(b"-"), Some((LexBound::Min, true)));
        assert_eq!(parse_lex_bound(b"+\0x"), Some((LexBound::Max, true)));
        assert_eq!(parse_lex_bound(b"+x"), None);
        assert_eq!(
            parse_lex_bound(b"(a"),
            Some((LexBound::Value(b"a".to_vec()), true))
        );
        assert_eq!(
            parse_lex_bound(b"["),
            Some((LexBound::Value(Vec::new()), false))
        );
        assert_eq!(parse_lex_bound(b""), None);
        assert_eq!(parse_lex_bound(b"a"), None);
    }

    /// A test plan that stores a set at `key` (no set command exists in this family).
    #[derive(Debug)]
    struct PutSet {
        key: Vec<u8>,
        members: Vec<Vec<u8>>,
        shard: usize,
        sent: bool,
    }

    impl Plan for PutSet {
        fn next(&mut self, cx: &PlanCx<'_>, _: Vec<HopOut>) -> Step {
            if self.sent {
                return cx.done(|e| e.ok());
            }
            self.sent = true;
            let (key, members) = (self.key.clone(), self.members.clone());
            Step::Hops(vec![Hop::run(self.shard, move |ctx| {
                let mut set = goblin_store::Set::default();
                for m in &members {
                    set.insert(m);
                }
                ctx.db
                    .insert(&key, Value::Set(Box::new(set)), None, ctx.now);
                HopOut::Done
            })])
        }
    }

    fn put_set(lb: &mut crate::testkit::Loopback, key: &[u8], members: &[&[u8]]) {
        let plan = PutSet {
            key: key.to_vec(),
            members: members.iter().map(|m| m.to_vec()).collect(),
            shard: lb.shared.slots.shard_of_key(key),
            sent: false,
        };
        assert_eq!(
            lb.start(Box::new(plan), Vec::new()),
            Some(b"+OK\r\n".to_vec())
        );
    }

    /// A RESP2 array of bulk strings.
    fn bulks(items: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", items.len()).into_bytes();
        for i in items {
            out.extend(format!("${}\r\n{i}\r\n", i.len()).into_bytes());
        }
        out
    }

    /// Sets are inputs with every member scored 1, alike on one shard (the handlers) and
    /// across shards (the plans); a set is the wrong type for ZMPOP and ZRANGESTORE.
    #[test]
    fn sets_are_inputs_on_both_paths() {
        let mut lb = crate::testkit::Loopback::new(4);
        let (ka, kb) = lb.keys_on_two_shards();
        let (ka, kb) = (
            String::from_utf8(ka).unwrap(),
            String::from_utf8(kb).unwrap(),
        );
        for (a, b, d, cross) in [
            (
                "{t}a".to_string(),
                "{t}b".to_string(),
                "{t}d".to_string(),
                false,
            ),
            (ka.clone(), kb.clone(), format!("{ka}:d"), true),
        ] {
            let run = |lb: &mut crate::testkit::Loopback, argv: &[&str]| {
                let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
                if cross {
                    lb.plan(&argv).unwrap()
                } else {
                    lb.exec(&argv)
                }
            };
            lb.exec(&[b"ZADD", a.as_bytes(), b"1", b"x", b"2", b"y"]);
            put_set(&mut lb, b.as_bytes(), &[b"y", b"z"]);
            let want = bulks(&["x", "1", "z", "1", "y", "3"]);
            assert_eq!(run(&mut lb, &["ZUNION", "2", &a, &b, "WITHSCORES"]), want);
            let want = bulks(&["y", "4"]);
            let got = run(
                &mut lb,
                &["ZINTER", "2", &b, &a, "WEIGHTS", "2", "1", "WITHSCORES"],
            );
            assert_eq!(got, want);
            assert_eq!(
                run(&mut lb, &["ZDIFF", "2", &b, &a, "WITHSCORES"]),
                bulks(&["z", "1"])
            );
            assert_eq!(run(&mut lb, &["ZINTERCARD", "2", &a, &b]), b":1\r\n");
            assert_eq!(run(&mut lb, &["ZUNIONSTORE", &d, "2", &b, &a]), b":3\r\n");
            let got = lb.exec(&[b"ZRANGE", d.as_bytes(), b"0", b"-1"]);
            assert_eq!(got, bulks(&["x", "z", "y"]));
            let wrong = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
            assert_eq!(run(&mut lb, &["ZMPOP", "2", &b, &a, "MIN"]), wrong);
            assert_eq!(run(&mut lb, &["ZRANGESTORE", &d, &b, "0", "-1"]), wrong);
            // The wrong type of a source comes before the options' errors.
            lb.exec(&[b"SET", a.as_bytes(), b"v"]);
            assert_eq!(run(&mut lb, &["ZUNION", "2", &a, &b, "FOO"]), wrong);
            lb.exec(&[b"DEL", a.as_bytes()]);
            let syntax = b"-ERR syntax error\r\n";
            assert_eq!(run(&mut lb, &["ZUNION", "2", &a, &b, "FOO"]), syntax);
        }
    }

    /// Collects the effects of the writes of the shards it observes.
    #[derive(Debug, Default)]
    struct Effects(std::rc::Rc<std::cell::RefCell<Vec<Vec<Vec<u8>>>>>);

    impl crate::shard::events::Observer for Effects {
        fn on_write(&mut self, write: &crate::shard::events::Write<'_>) {
            if let crate::shard::events::Effect::Commands(c) = write.effect {
                self.0.borrow_mut().extend(c.iter().cloned());
            }
        }
    }

    /// A cross-shard STORE's hop logs what it wrote at the destination (DEL, then the ZADD
    /// that rebuilds it, or DEL alone when the result is empty); ZMPOP logs the pop it made.
    #[test]
    fn cross_shard_writes_log_their_effects() {
        let mut lb = crate::testkit::Loopback::new(2);
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        for shard in &mut lb.shards {
            shard.add_observer(Box::new(Effects(std::rc::Rc::clone(&seen))));
        }
        let (a, d) = lb.keys_on_two_shards();
        lb.exec(&[b"ZADD", &a, b"1.5", b"x", b"2", b"y"]);
        seen.borrow_mut().clear();
        let reply = lb.plan(&[b"ZUNIONSTORE", &d, b"1", &a, b"WEIGHTS", b"2"]);
        assert_eq!(reply, Some(b":2\r\n".to_vec()));
        let argv = |words: &[&[u8]]| words.iter().map(|w| w.to_vec()).collect::<Vec<_>>();
        assert_eq!(
            *seen.borrow(),
            vec![
                argv(&[b"DEL", &d]),
                argv(&[b"ZADD", &d, b"3", b"x", b"4", b"y"])
            ]
        );
        seen.borrow_mut().clear();
        lb.plan(&[b"ZINTERSTORE", &d, b"2", &a, b"nope"]);
        assert_eq!(*seen.borrow(), vec![argv(&[b"DEL", &d])]);
        seen.borrow_mut().clear();
        let reply = lb.plan(&[b"ZMPOP", b"2", &d, &a, b"MAX", b"COUNT", b"5"]);
        assert!(reply.is_some_and(|r| r.starts_with(b"*2\r\n")));
        assert_eq!(*seen.borrow(), vec![argv(&[b"ZPOPMAX", &a, b"2"])]);
    }

    #[test]
    fn listpack_scores_print_as_integers_within_double2ll() {
        let text = |s: f64| {
            let mut buf = [0u8; 32];
            String::from_utf8(listpack_score_text(s, &mut buf).to_vec()).unwrap()
        };
        assert_eq!(text(1e17), "100000000000000000");
        assert_eq!(text(-1e17), "-100000000000000000");
        assert_eq!(text(4611686018427387904.0), "4611686018427387904");
        assert_eq!(text(9.3e18), "9.3e+18");
        assert_eq!(text(1.5), "1.5");
        assert_eq!(text(f64::INFINITY), "inf");
        assert_eq!(text(0.0), "0");
    }
}
