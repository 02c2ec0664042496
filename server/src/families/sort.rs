//! SORT and SORT_RO (sort.c): the elements of a list, set or sorted set, sorted as
//! numbers or (ALPHA) as strings, by themselves or by keys their pattern names (BY
//! `w_*`, `h_*->field`), LIMIT, GET of other keys (`#` for the element), STORE into a
//! list — with redis-server 7.0's parsing, order of checks and replies.
//!
//! Keys named by patterns are looked up on the sorted key's shard, so a pattern that
//! names keys must name them in the sorted key's slot (its hash tag, as Redis Cluster
//! since 7.2 requires: `SORT {u}ids BY {u}w_*`); another is refused. A pattern without
//! `*` names no key (BY skips the sort, GET answers nil) and `#` is the element itself:
//! both are always allowed. The STORE destination may live on another shard: the sort
//! runs on the source's shard and the list is written on the destination's.
//!
//! Known differences: a small sorted set keeps its `listpack` encoding (Redis converts
//! it to a skiplist for good); elements that tie under ALPHA BY come in the order the
//! source gives them, which for sets and sorted sets is not redis-server's.

use std::cmp::Ordering;

use goblin_protocol::{Encoder, parse_i64};
use goblin_store::{List, Value, ValueRef, key_slot};

use crate::errors;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::keys::{InvalidKeys, KeyFlags};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Plan, PlanCx, PlanStart};
use crate::txn::shapes::{Decision, ReadThenWrite};

use super::sorted_sets::strtod;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table
        .add(&meta::SORT, Exec::Shard(sort))
        .custom_keys(sort_keys)
        .cross_shard(sort_plan, Locking::Keys);
    table
        .add(&meta::SORT_RO, Exec::Shard(sort_ro))
        .custom_keys(sort_ro_keys)
        .one_key();
}

const NOT_DOUBLE: &[u8] = b"ERR One or more scores can't be converted into double";
const BY_ELSEWHERE: &[u8] = b"ERR BY option of SORT denied when keys formed by the pattern \
may be in different slots: give the pattern the sorted key's hash tag";
const GET_ELSEWHERE: &[u8] = b"ERR GET option of SORT denied when keys formed by the pattern \
may be in different slots: give the pattern the sorted key's hash tag";

/// SORT's keys (`sortGetKeys`): the sorted key, and the last STORE's destination.
fn sort_keys(args: &Args<'_>, found: &mut dyn FnMut(usize, KeyFlags)) -> Result<(), InvalidKeys> {
    if args.len() < 2 {
        return Err(InvalidKeys);
    }
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let word = args.get(i);
        if is_keyword(word, "LIMIT") {
            i += 2;
        } else if is_keyword(word, "STORE") && i + 1 < args.len() {
            store = Some(i + 1);
        } else if is_keyword(word, "GET") || is_keyword(word, "BY") {
            i += 1;
        }
        i += 1;
    }
    found(1, KeyFlags::RO | KeyFlags::ACCESS);
    if let Some(at) = store {
        found(at, KeyFlags::OW | KeyFlags::UPDATE);
    }
    Ok(())
}

/// SORT_RO's key: the sorted key (its patterns' keys are not declared, as in Redis).
fn sort_ro_keys(
    args: &Args<'_>,
    found: &mut dyn FnMut(usize, KeyFlags),
) -> Result<(), InvalidKeys> {
    if args.len() < 2 {
        return Err(InvalidKeys);
    }
    found(1, KeyFlags::RO | KeyFlags::ACCESS);
    Ok(())
}

/// A parsed SORT.
#[derive(Debug, Default)]
struct SortSpec {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<Vec<u8>>,
    /// The BY pattern, when it has a `*`.
    by: Option<Vec<u8>>,
    /// BY without `*`: nothing to sort.
    dont_sort: bool,
    gets: Vec<Vec<u8>>,
}

/// Whether a pattern names keys: it has a `*` (as C's `strchr` sees it, up to a NUL)
/// and is not `#`.
fn names_keys(pattern: &[u8]) -> bool {
    c_str(pattern) != b"#" && c_str(pattern).contains(&b'*')
}

/// The bytes of `s` up to its first NUL (what C's string functions see).
fn c_str(s: &[u8]) -> &[u8] {
    s.split(|&b| b == 0).next().unwrap_or_default()
}

/// The slot every key a pattern names is in (`patternHashSlot`), `None` when they may
/// be in any slot: a wildcard or an escape before a hash tag closes.
fn pattern_slot(pattern: &[u8]) -> Option<u16> {
    let mut open: Option<usize> = None;
    let mut empty_tag = false;
    for (i, &b) in pattern.iter().enumerate() {
        match b {
            b'*' | b'?' | b'[' | b'\\' => return None,
            b'{' if open.is_none() && !empty_tag => open = Some(i),
            b'}' if !empty_tag => {
                if let Some(s) = open {
                    if i == s + 1 {
                        empty_tag = true;
                    } else {
                        return Some(key_slot(&pattern[s..=i]));
                    }
                }
            }
            _ => {}
        }
    }
    Some(key_slot(pattern))
}

/// Whether the keys `pattern` names share `key`'s slot (and so its shard).
fn beside(pattern: &[u8], key: &[u8]) -> bool {
    pattern_slot(pattern) == Some(key_slot(key))
}

/// SORT's options, in Redis's order of checks (`sortCommandGeneric`).
fn parse(args: &Args<'_>, read_only: bool) -> Result<SortSpec, &'static [u8]> {
    let key = args.get(1);
    let mut spec = SortSpec {
        limit_count: -1,
        ..SortSpec::default()
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let word = args.get(j);
        if is_keyword(word, "ASC") {
            spec.desc = false;
        } else if is_keyword(word, "DESC") {
            spec.desc = true;
        } else if is_keyword(word, "ALPHA") {
            spec.alpha = true;
        } else if is_keyword(word, "LIMIT") && left >= 2 {
            spec.limit_start = parse_i64(args.get(j + 1)).ok_or(errors::NOT_INTEGER)?;
            spec.limit_count = parse_i64(args.get(j + 2)).ok_or(errors::NOT_INTEGER)?;
            j += 2;
        } else if !read_only && is_keyword(word, "STORE") && left >= 1 {
            spec.store = Some(args.get(j + 1).to_vec());
            j += 1;
        } else if is_keyword(word, "BY") && left >= 1 {
            let pattern = args.get(j + 1);
            if c_str(pattern).contains(&b'*') {
                if !beside(pattern, key) {
                    return Err(BY_ELSEWHERE);
                }
                spec.by = Some(pattern.to_vec());
                spec.dont_sort = false;
            } else {
                spec.by = None;
                spec.dont_sort = true;
            }
            j += 1;
        } else if is_keyword(word, "GET") && left >= 1 {
            let pattern = args.get(j + 1);
            if names_keys(pattern) && !beside(pattern, key) {
                return Err(GET_ELSEWHERE);
            }
            spec.gets.push(pattern.to_vec());
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    Ok(spec)
}

/// The value a pattern names for `element` (`lookupKeyByPattern`): `#` is the element;
/// `prefix*suffix` the string at the key with `*` replaced by the element;
/// `prefix*suffix->field` that field of the hash there. `None`: no such key, field or
/// `*`, or a key of another type.
fn by_pattern(ctx: &mut ShardCtx<'_>, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    if c_str(pattern) == b"#" {
        return Some(element.to_vec());
    }
    let star = c_str(pattern).iter().position(|&b| b == b'*')?;
    // A `->` after the `*` with something after it names a hash field.
    let arrow = c_str(&pattern[star + 1..])
        .windows(2)
        .position(|w| w == b"->")
        .map(|p| star + 1 + p)
        .filter(|&p| p + 2 < c_str(pattern).len());
    let (suffix_end, field) = match arrow {
        Some(p) => (p, Some(&pattern[p + 2..])),
        None => (pattern.len(), None),
    };
    let mut key = Vec::with_capacity(star + element.len() + (suffix_end - star));
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..suffix_end]);
    let entry = ctx.db.get(&key, ctx.now)?;
    match (entry.value(), field) {
        (ValueRef::Str(s), None) => Some(s.to_vec()),
        (ValueRef::Hash(h), Some(field)) => h.get(field).map(<[u8]>::to_vec),
        _ => None,
    }
}

/// One element to sort, with what it sorts by.
struct Item {
    element: Vec<u8>,
    score: f64,
    by: Option<Vec<u8>>,
}

/// The elements of the sorted key, sorted and cut to the LIMIT, then the GETs of each:
/// the list SORT replies or stores (`None`: a GET that found nothing). Errors:
/// WRONGTYPE, or a score that is not a number.
fn run(
    ctx: &mut ShardCtx<'_>,
    key: &[u8],
    spec: &SortSpec,
) -> Result<Vec<Option<Vec<u8>>>, &'static [u8]> {
    let mut dont_sort = spec.dont_sort;
    let mut alpha = spec.alpha;
    let mut by = spec.by.as_deref();
    let desc = spec.desc;
    // A missing key is an empty list: nothing to sort, reply or store.
    let Some(entry) = ctx.db.get(key, ctx.now) else {
        return Ok(Vec::new());
    };
    let value = entry.value();
    let (is_set, n) = match value {
        ValueRef::List(l) => (false, l.len()),
        ValueRef::Set(s) => (true, s.len()),
        ValueRef::ZSet(z) => (false, z.len()),
        _ => return Err(errors::WRONGTYPE),
    };
    // A set has no order of its own: stored, it is sorted as strings.
    if dont_sort && is_set && spec.store.is_some() {
        dont_sort = false;
        alpha = true;
        by = None;
    }
    let n = n as i64;
    let mut start = spec.limit_start.clamp(0, n);
    let count = spec.limit_count.clamp(-1, n);
    let mut end = if count < 0 { n - 1 } else { start + count - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    if end >= n {
        end = n - 1;
    }
    // Loaded in order, a list or sorted set that is not sorted loads only the range.
    let ranged = dont_sort && !is_set;
    let mut elements: Vec<Vec<u8>> = Vec::new();
    match value {
        ValueRef::List(l) if ranged => {
            let (skip, take) = (start.max(0) as usize, (end - start + 1).max(0) as usize);
            if desc {
                elements.extend(l.iter().rev().skip(skip).take(take).map(<[u8]>::to_vec));
            } else {
                elements.extend(l.iter_from(skip).take(take).map(<[u8]>::to_vec));
            }
        }
        ValueRef::List(l) => elements.extend(l.iter().map(<[u8]>::to_vec)),
        ValueRef::Set(s) => s.for_each(|m| elements.push(m.to_vec())),
        ValueRef::ZSet(z) if ranged => {
            let take = (end - start + 1).max(0) as usize;
            let mut pos = if desc {
                z.at_rank((n - 1 - start) as usize)
            } else {
                z.at_rank(start as usize)
            };
            while let Some(p) = pos.filter(|_| elements.len() < take) {
                elements.push(z.entry(p).0.to_vec());
                pos = if desc { z.prev(p) } else { z.next(p) };
            }
        }
        ValueRef::ZSet(z) => z.for_each(|m, _| elements.push(m.to_vec())),
        _ => {}
    }
    if ranged && end >= start {
        end -= start;
        start = 0;
    }
    let mut items: Vec<Item> = elements
        .into_iter()
        .map(|element| Item {
            element,
            score: 0.0,
            by: None,
        })
        .collect();
    if !dont_sort {
        let mut not_double = false;
        for item in &mut items {
            // Sorting by the elements themselves, ALPHA needs nothing more.
            if alpha && by.is_none() {
                continue;
            }
            let looked_up = match by {
                Some(pattern) => match by_pattern(ctx, pattern, &item.element) {
                    Some(v) => Some(v),
                    None => continue,
                },
                None => None,
            };
            if alpha {
                item.by = looked_up;
            } else {
                let value = looked_up.as_deref().unwrap_or(&item.element);
                // `strtod` must read it all (up to a NUL, as C sees the string).
                let (score, read, out_of_range) = strtod(value);
                let rest = value.get(read).copied().unwrap_or(0);
                if rest != 0 || out_of_range || score.is_nan() {
                    not_double = true;
                }
                item.score = score;
            }
        }
        let stored = spec.store.is_some();
        let by_pattern = by.is_some();
        items.sort_by(|a, b| {
            let cmp = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.element.cmp(&b.element))
            } else if by_pattern {
                match (&a.by, &b.by) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) if stored => x.cmp(y),
                    (Some(x), Some(y)) => c_str(x).cmp(c_str(y)),
                }
            } else if stored {
                a.element.cmp(&b.element)
            } else {
                c_str(&a.element).cmp(c_str(&b.element))
            };
            if desc { cmp.reverse() } else { cmp }
        });
        if not_double {
            return Err(NOT_DOUBLE);
        }
    }
    let mut out = Vec::new();
    if end < start {
        return Ok(out);
    }
    for item in items.iter().take(end as usize + 1).skip(start as usize) {
        if spec.gets.is_empty() {
            out.push(Some(item.element.clone()));
        }
        for pattern in &spec.gets {
            out.push(by_pattern(ctx, pattern, &item.element));
        }
    }
    Ok(out)
}

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern …] [ASC|DESC] [ALPHA]
/// [STORE destination]`, its keys on this shard.
fn sort(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    sort_generic(ctx, args, false);
}

/// `SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern …] [ASC|DESC] [ALPHA]`
fn sort_ro(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    sort_generic(ctx, args, true);
}

fn sort_generic(ctx: &mut ShardCtx<'_>, args: &Args<'_>, read_only: bool) {
    let spec = match parse(args, read_only) {
        Ok(spec) => spec,
        Err(e) => return ctx.out.error(e),
    };
    let result = match run(ctx, args.get(1), &spec) {
        Ok(result) => result,
        Err(e) => return ctx.out.error(e),
    };
    match &spec.store {
        None => reply_items(&mut ctx.out, &result),
        Some(dest) => {
            let n = store(ctx, dest, result);
            ctx.out.integer(n);
        }
    }
}

fn reply_items(out: &mut Encoder<'_>, items: &[Option<Vec<u8>>]) {
    out.array(items.len());
    for item in items {
        match item {
            Some(v) => out.bulk(v),
            None => out.null(),
        }
    }
}

/// Stores SORT's result at `dest` as a list (a GET that found nothing stores an empty
/// string), or deletes `dest` when there is none; the number of elements.
fn store(ctx: &mut ShardCtx<'_>, dest: &[u8], items: Vec<Option<Vec<u8>>>) -> i64 {
    let n = items.len() as i64;
    if items.is_empty() {
        ctx.db.delete(dest, ctx.now);
        return 0;
    }
    let mut list = List::default();
    for item in &items {
        list.push_back(item.as_deref().unwrap_or_default());
    }
    // Whatever `dest` held (any type, any expiry) is replaced.
    ctx.db
        .insert(dest, Value::List(Box::new(list)), None, ctx.now);
    n
}

/// SORT … STORE with the destination on another shard: the sort runs on the source's
/// shard (its pattern keys are there too), under both keys' locks; the list is written
/// on the destination's.
fn sort_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let spec = parse(args, false).map_err(<[u8]>::to_vec)?;
    let key = args.get(1).to_vec();
    let read = Hop::run(start.slots.shard_of_key(&key), move |ctx| {
        let result = run(ctx, &key, &spec).map(|items| (spec.store, items));
        HopOut::Other(Box::new(result))
    });
    Ok(Box::new(ReadThenWrite::new((), vec![read], decide_sort)))
}

type SortResult = Result<(Option<Vec<u8>>, Vec<Option<Vec<u8>>>), &'static [u8]>;

fn decide_sort(_: &mut (), cx: &PlanCx<'_>, results: Vec<HopOut>) -> Decision {
    let result = match results.into_iter().next() {
        Some(HopOut::Other(any)) => match any.downcast::<SortResult>() {
            Ok(result) => *result,
            Err(_) => Err(errors::SYNTAX),
        },
        _ => Err(errors::SYNTAX),
    };
    let (dest, items) = match result {
        Ok((Some(dest), items)) => (dest, items),
        Ok((None, items)) => return Decision::Reply(cx.reply(|e| reply_items(e, &items))),
        Err(e) => return Decision::Reply(cx.reply(|out| out.error(e))),
    };
    let n = items.len() as i64;
    let write = Hop::run(cx.slots.shard_of_key(&dest), move |ctx| {
        if ctx.logging() {
            ctx.log(&[b"DEL", &dest]);
            for chunk in items.chunks(512) {
                let mut argv: Vec<&[u8]> = vec![b"RPUSH", &dest];
                argv.extend(chunk.iter().map(|i| i.as_deref().unwrap_or_default()));
                ctx.log(&argv);
            }
        }
        store(ctx, &dest, items);
        HopOut::Done
    });
    Decision::Write(vec![write], cx.reply(|e| e.integer(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_slots_follow_redis() {
        assert_eq!(pattern_slot(b"w_*"), None);
        assert_eq!(pattern_slot(b"{u}w_*"), Some(key_slot(b"u")));
        assert_eq!(pattern_slot(b"{u}w_*->f"), Some(key_slot(b"u")));
        assert_eq!(pattern_slot(b"w_?{u}"), None);
        assert_eq!(pattern_slot(b"{}w_*"), None);
        assert_eq!(pattern_slot(b"{}x{u}"), Some(key_slot(b"{}x{u}")));
        assert_eq!(pattern_slot(b"x\\{u}"), None);
        assert_eq!(pattern_slot(b"plain"), Some(key_slot(b"plain")));
        assert!(names_keys(b"a*") && !names_keys(b"#") && !names_keys(b"abc"));
    }
}
