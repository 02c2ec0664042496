//! SORT and SORT_RO (sort.c): the elements of a list, set or sorted set, sorted as
//! numbers or (ALPHA) as strings, by themselves or by keys their pattern names (BY
//! `w_*`, `h_*->field`), LIMIT, GET of other keys (`#` for the element), STORE into a
//! list — with redis-server 7.0's parsing, order of checks and replies.
//!
//! A SORT whose keys (the sorted key, the STORE destination) and pattern keys are all on
//! the sorted key's shard runs there as a plain command: always with one thread, and with
//! more when the patterns name keys in the sorted key's slot (its hash tag, `SORT {u}ids
//! BY {u}w_*`) or no key at all (`#`, a pattern without `*`). Otherwise it runs as a plan
//! holding every shard (the keys a pattern names are known only once the elements are
//! read): the elements are read on their shard, the pattern keys each step needs are
//! fetched from theirs (the BY values, then the GETs of the elements LIMIT keeps), the sort
//! runs on the coordinator, and the list is stored on the destination's shard. Inside
//! MULTI, with more than one thread, patterns must name keys in the sorted key's slot
//! (others are refused, as Redis Cluster refuses them).
//!
//! Known differences: a small sorted set keeps its `listpack` encoding (Redis converts
//! it to a skiplist for good); elements that tie under ALPHA BY come in the order the
//! source gives them, which for sets and sorted sets is not redis-server's.

use std::cmp::Ordering;
use std::collections::HashMap;

use goblin_protocol::{Encoder, parse_i64};
use goblin_store::{List, Value, ValueRef, key_slot};

use crate::errors;
use crate::runtime::server::Shared;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::keys::{InvalidKeys, KeyFlags};
use crate::table::{CommandSpec, CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step};

use super::sorted_sets::strtod;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table
        .add(&meta::SORT, Exec::Shard(sort))
        .custom_keys(sort_keys)
        .plan_if(patterns_elsewhere)
        .cross_shard(sort_plan, Locking::Keys);
    table
        .add(&meta::SORT_RO, Exec::Shard(sort_ro))
        .custom_keys(sort_ro_keys)
        .one_key()
        .plan_if(patterns_elsewhere)
        .cross_shard(sort_ro_plan, Locking::Keys);
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
#[derive(Debug, Default, Clone)]
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
    /// Its plan runs for a script (on a shard, `ShardCtx::called_by_script` tells).
    by_script: bool,
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

impl SortSpec {
    /// Why its patterns need other shards than `key`'s, if they may: a BY or GET pattern
    /// that names keys outside `key`'s slot (its refusal inside MULTI).
    fn elsewhere(&self, key: &[u8]) -> Option<&'static [u8]> {
        if self.by.as_deref().is_some_and(|p| !beside(p, key)) {
            return Some(BY_ELSEWHERE);
        }
        self.gets
            .iter()
            .any(|p| names_keys(p) && !beside(p, key))
            .then_some(GET_ELSEWHERE)
    }
}

/// Whether a SORT or SORT_RO runs as its plan whatever shard its keys are on: with more
/// than one thread, when its patterns may name keys on other shards.
fn patterns_elsewhere(shared: &Shared, args: &Args<'_>) -> bool {
    let read_only = args.get(0).eq_ignore_ascii_case(b"sort_ro");
    shared.threads > 1
        && parse(args, read_only).is_ok_and(|spec| spec.elsewhere(args.get(1)).is_some())
}

/// Whether a command whose keys are on one shard runs as its plan all the same, inside
/// EXEC or called by a script that holds every shard: a SORT (or SORT_RO) whose patterns
/// may name keys on other shards. (Other commands' `plan_if` is not asked there: a
/// blocking command's plan only blocks, which it does not there.)
pub(crate) fn sorts_elsewhere(shared: &Shared, spec: &CommandSpec, args: &Args<'_>) -> bool {
    matches!(spec.name, "sort" | "sort_ro") && patterns_elsewhere(shared, args)
}

/// SORT's options, in Redis's order of checks (`sortCommandGeneric`).
fn parse(args: &Args<'_>, read_only: bool) -> Result<SortSpec, &'static [u8]> {
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
                spec.by = Some(pattern.to_vec());
                spec.dont_sort = false;
            } else {
                spec.by = None;
                spec.dont_sort = true;
            }
            j += 1;
        } else if is_keyword(word, "GET") && left >= 1 {
            spec.gets.push(args.get(j + 1).to_vec());
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    Ok(spec)
}

/// What a pattern names for an element (`lookupKeyByPattern`).
enum Named {
    /// `#`: the element itself.
    Element,
    /// Nothing: no `*` in the pattern.
    Nothing,
    /// `prefix*suffix`: the string at this key; `prefix*suffix->field`: that field of the
    /// hash there.
    Key(Vec<u8>, Option<Vec<u8>>),
}

fn named(pattern: &[u8], element: &[u8]) -> Named {
    if c_str(pattern) == b"#" {
        return Named::Element;
    }
    let Some(star) = c_str(pattern).iter().position(|&b| b == b'*') else {
        return Named::Nothing;
    };
    // A `->` after the `*` with something after it names a hash field.
    let arrow = c_str(&pattern[star + 1..])
        .windows(2)
        .position(|w| w == b"->")
        .map(|p| star + 1 + p)
        .filter(|&p| p + 2 < c_str(pattern).len());
    let (suffix_end, field) = match arrow {
        Some(p) => (p, Some(pattern[p + 2..].to_vec())),
        None => (pattern.len(), None),
    };
    let mut key = Vec::with_capacity(star + element.len() + (suffix_end - star));
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..suffix_end]);
    Named::Key(key, field)
}

/// The string at `key`, or `field` of the hash there; `None` for a missing key or field,
/// or a key of another type.
fn value_at(ctx: &mut ShardCtx<'_>, key: &[u8], field: Option<&[u8]>) -> Option<Vec<u8>> {
    let entry = ctx.db.get(key, ctx.now)?;
    match (entry.value(), field) {
        (ValueRef::Str(s), None) => Some(s.to_vec()),
        (ValueRef::Hash(h), Some(field)) => h.get(field).map(<[u8]>::to_vec),
        _ => None,
    }
}

/// The value a pattern names for `element`, read on this shard.
fn by_pattern(ctx: &mut ShardCtx<'_>, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    match named(pattern, element) {
        Named::Element => Some(element.to_vec()),
        Named::Nothing => None,
        Named::Key(key, field) => value_at(ctx, &key, field.as_deref()),
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
fn run(ctx: &mut ShardCtx<'_>, key: &[u8], spec: &SortSpec) -> Result<Items, &'static [u8]> {
    let source = read_source(ctx, key, spec)?;
    finish(source, spec, &mut |pattern, element| {
        by_pattern(ctx, pattern, element)
    })
}

/// What SORT replies or stores (`None`: a GET that found nothing).
type Items = Vec<Option<Vec<u8>>>;

/// What a pattern names for an element (`None`: nothing), however it is found.
type Lookup<'a> = dyn FnMut(&[u8], &[u8]) -> Option<Vec<u8>> + 'a;

/// The elements SORT works on, read from the sorted key, with what it does with them.
#[derive(Debug, Clone, Default)]
struct Source {
    elements: Vec<Vec<u8>>,
    /// The LIMIT's range in `elements` (inclusive; empty when `end < start`).
    start: i64,
    end: i64,
    dont_sort: bool,
    alpha: bool,
    by: Option<Vec<u8>>,
}

/// The elements of the sorted key (only LIMIT's range of a list or sorted set that is
/// not sorted); an error for a key of another type. A missing key has none.
fn read_source(
    ctx: &mut ShardCtx<'_>,
    key: &[u8],
    spec: &SortSpec,
) -> Result<Source, &'static [u8]> {
    let mut dont_sort = spec.dont_sort;
    let mut alpha = spec.alpha;
    let mut by = spec.by.as_deref();
    let desc = spec.desc;
    let by_script = ctx.called_by_script() || spec.by_script;
    // A missing key is an empty list: nothing to sort, reply or store.
    let Some(entry) = ctx.db.get(key, ctx.now) else {
        return Ok(Source {
            end: -1,
            ..Source::default()
        });
    };
    let value = entry.value();
    let (is_set, n) = match value {
        ValueRef::List(l) => (false, l.len()),
        ValueRef::Set(s) => (true, s.len()),
        ValueRef::ZSet(z) => (false, z.len()),
        _ => return Err(errors::WRONGTYPE),
    };
    // A set has no order of its own: stored, or answered to a script, it is sorted as
    // strings (so that the result does not depend on how the set is laid out).
    if dont_sort && is_set && (spec.store.is_some() || by_script) {
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
    Ok(Source {
        elements,
        start,
        end,
        dont_sort,
        alpha,
        by: by.map(<[u8]>::to_vec),
    })
}

/// Sorts `source`'s elements, cuts them to the LIMIT and takes the GETs of each, with
/// `lookup` answering what a pattern names for an element.
fn finish(
    source: Source,
    spec: &SortSpec,
    lookup: &mut Lookup<'_>,
) -> Result<Items, &'static [u8]> {
    let Source {
        elements,
        start,
        end,
        dont_sort,
        alpha,
        by,
    } = source;
    let by = by.as_deref();
    let desc = spec.desc;
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
                Some(pattern) => match lookup(pattern, &item.element) {
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
            out.push(lookup(pattern, &item.element));
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
    if ctx.slots.shards() > 1
        && let Some(refusal) = spec.elsewhere(args.get(1))
    {
        // Its patterns may name keys on other shards: its plan runs (inside MULTI,
        // which cannot run it, it is refused).
        if ctx.may_wait() {
            return ctx.wait();
        }
        return ctx.out.error(refusal);
    }
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

/// SORT as a plan: when the STORE destination is on another shard than the sorted key
/// (under both keys' locks), or when its patterns may name keys on other shards (holding
/// every shard: those keys are known only once the elements are read).
fn sort_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    plan_of(start, false)
}

/// SORT_RO as a plan: its patterns may name keys on other shards.
fn sort_ro_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    plan_of(start, true)
}

fn plan_of(start: &PlanStart<'_>, read_only: bool) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let mut spec = parse(args, read_only).map_err(<[u8]>::to_vec)?;
    spec.by_script = start.by_script;
    let key = args.get(1).to_vec();
    Ok(Box::new(SortPlan {
        whole: start.slots.shards() > 1 && spec.elsewhere(&key).is_some(),
        spec,
        key,
        state: State::Start,
    }))
}

/// A pattern's key and hash field, as [`Named::Key`] names them.
type KeyField = (Vec<u8>, Option<Vec<u8>>);

#[derive(Debug)]
struct SortPlan {
    spec: SortSpec,
    key: Vec<u8>,
    /// Its patterns may name keys on other shards: it holds every shard, and looks them
    /// up where they are.
    whole: bool,
    state: State,
}

#[derive(Debug)]
enum State {
    Start,
    /// The sorted key's shard reads the elements (and, with patterns beside it, sorts).
    Reading,
    /// The pattern keys in `asked` (one list per hop) are being read.
    LookingUp {
        source: Source,
        found: HashMap<KeyField, Option<Vec<u8>>>,
        asked: Vec<Vec<KeyField>>,
    },
    /// The destination's shard stores the list of `n` elements.
    Storing(i64),
}

/// What the sorted key's shard gives back: the result, or (patterns elsewhere) the
/// elements to sort.
enum Read {
    Sorted(Items),
    Source(Source),
}

type ReadResult = Result<Read, &'static [u8]>;

impl Plan for SortPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match std::mem::replace(&mut self.state, State::Start) {
            State::Start => {
                let (key, spec, whole) = (self.key.clone(), self.spec.clone(), self.whole);
                self.state = State::Reading;
                Step::Hops(vec![Hop::run(cx.slots.shard_of_key(&key), move |ctx| {
                    let read = read_source(ctx, &key, &spec).and_then(|source| {
                        if whole {
                            return Ok(Read::Source(source));
                        }
                        let sorted = finish(source, &spec, &mut |pattern, element| {
                            by_pattern(ctx, pattern, element)
                        });
                        sorted.map(Read::Sorted)
                    });
                    HopOut::Other(Box::new(read))
                })])
            }
            State::Reading => {
                let read = match results.into_iter().next() {
                    Some(HopOut::Other(any)) => match any.downcast::<ReadResult>() {
                        Ok(read) => *read,
                        Err(_) => Err(errors::SYNTAX),
                    },
                    _ => Err(errors::SYNTAX),
                };
                match read {
                    Err(e) => cx.done(|out| out.error(e)),
                    Ok(Read::Sorted(items)) => self.conclude(cx, items),
                    Ok(Read::Source(source)) => self.look_up(cx, source, HashMap::new()),
                }
            }
            State::LookingUp {
                source,
                mut found,
                asked,
            } => {
                for (keys, result) in asked.into_iter().zip(results) {
                    let HopOut::Bulks(values) = result else {
                        continue;
                    };
                    found.extend(keys.into_iter().zip(values));
                }
                self.look_up(cx, source, found)
            }
            State::Storing(n) => cx.done(|e| e.integer(n)),
        }
    }

    fn whole_shards(&self) -> bool {
        self.whole
    }
}

impl SortPlan {
    /// Sorts with the pattern values `found` so far; reads those it still needs from
    /// their shards (the BY values first, then the GETs of the elements LIMIT keeps), or
    /// concludes.
    fn look_up(
        &mut self,
        cx: &PlanCx<'_>,
        source: Source,
        found: HashMap<KeyField, Option<Vec<u8>>>,
    ) -> Step {
        let mut missing: Vec<KeyField> = Vec::new();
        let sorted = finish(
            source.clone(),
            &self.spec,
            &mut |pattern, element| match named(pattern, element) {
                Named::Element => Some(element.to_vec()),
                Named::Nothing => None,
                Named::Key(key, field) => {
                    let wanted = (key, field);
                    match found.get(&wanted) {
                        Some(value) => value.clone(),
                        None => {
                            missing.push(wanted);
                            None
                        }
                    }
                }
            },
        );
        if missing.is_empty() {
            return match sorted {
                Ok(items) => self.conclude(cx, items),
                Err(e) => cx.done(|out| out.error(e)),
            };
        }
        missing.sort_unstable();
        missing.dedup();
        let mut by_shard: Vec<(usize, Vec<KeyField>)> = Vec::new();
        for wanted in missing {
            let shard = cx.slots.shard_of_key(&wanted.0);
            match by_shard.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, keys)) => keys.push(wanted),
                None => by_shard.push((shard, vec![wanted])),
            }
        }
        let mut hops = Vec::with_capacity(by_shard.len());
        let mut asked = Vec::with_capacity(by_shard.len());
        for (shard, keys) in by_shard {
            let wanted = keys.clone();
            hops.push(Hop::run(shard, move |ctx| {
                let values = wanted
                    .iter()
                    .map(|(key, field)| value_at(ctx, key, field.as_deref()))
                    .collect();
                HopOut::Bulks(values)
            }));
            asked.push(keys);
        }
        self.state = State::LookingUp {
            source,
            found,
            asked,
        };
        Step::Hops(hops)
    }

    /// Replies with the sorted items, or stores them on the destination's shard.
    fn conclude(&mut self, cx: &PlanCx<'_>, items: Items) -> Step {
        let Some(dest) = self.spec.store.clone() else {
            return Step::Done(reply(cx, &items));
        };
        let n = items.len() as i64;
        self.state = State::Storing(n);
        Step::Hops(vec![Hop::run(cx.slots.shard_of_key(&dest), move |ctx| {
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
        })])
    }
}

fn reply(cx: &PlanCx<'_>, items: &[Option<Vec<u8>>]) -> Outcome {
    cx.reply(|e| reply_items(e, items))
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
