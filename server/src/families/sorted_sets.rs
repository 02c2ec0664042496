//! Sorted-set commands — for now the minimum that creates and reads sorted sets: ZADD
//! (without options), ZSCORE.

use goblin_store::{Value, ValueMut, ValueRef};

use crate::errors;
use crate::longdouble::all_zero_digits;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::ZADD, Exec::Shard(zadd));
    table.add(&meta::ZSCORE, Exec::Shard(zscore));
}

/// A score as Redis's `string2d` reads one: a decimal or `inf`/`-inf`, never NaN, and
/// not a number out of range (strtod's ERANGE: overflow to infinity, underflow to zero).
/// (Hex notation, which strtod also reads, is not accepted.)
fn parse_score(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_whitespace()) {
        return None;
    }
    let v: f64 = text.parse().ok()?;
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let overflow = v.is_infinite()
        && !body.eq_ignore_ascii_case("inf")
        && !body.eq_ignore_ascii_case("infinity");
    let underflow = v == 0.0 && !all_zero_digits(body);
    (!v.is_nan() && !overflow && !underflow).then_some(v)
}

/// `ZADD key score member [score member ...]`: how many members were new.
fn zadd(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let pairs = args.len() - 2;
    if pairs == 0 || pairs % 2 == 1 {
        return ctx.out.error(errors::SYNTAX);
    }
    let mut scores = Vec::with_capacity(pairs / 2);
    for i in (2..args.len()).step_by(2) {
        match parse_score(args.get(i)) {
            Some(score) => scores.push((score, args.get(i + 1))),
            None => return ctx.out.error(errors::NOT_FLOAT),
        }
    }
    let added = ctx.db.upsert(
        args.get(1),
        ctx.now,
        || Value::ZSet(Box::default()),
        |value| match value {
            ValueMut::Boxed(Value::ZSet(zset)) => {
                let added = scores
                    .into_iter()
                    .filter(|(score, member)| zset.insert(member, *score).is_none())
                    .count();
                (Some(added as i64), true)
            }
            _ => (None, false),
        },
    );
    match added.flatten() {
        Some(n) => ctx.out.integer(n),
        None => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `ZSCORE key member`
fn zscore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match ctx.db.get(args.get(1), ctx.now).map(|e| e.value()) {
        None => ctx.out.null(),
        Some(ValueRef::ZSet(z)) => match z.score(args.get(2)) {
            Some(score) => ctx.out.double(score),
            None => ctx.out.null(),
        },
        Some(_) => ctx.out.error(errors::WRONGTYPE),
    }
}
