//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET,
//! LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP — with redis-server 7.0's parsing,
//! replies and errors, in its order of checks.
//!
//! LMOVE, RPOPLPUSH and LMPOP take several keys. With all of them on one shard they run
//! their handlers there; across shards they run as plans under the locks of every key
//! ([`MoveAcross`]: check both keys, then pop at the source and push at the destination;
//! [`MpopAcross`]: look at every key, then pop from the first non-empty one). Both paths
//! share the pieces below, which the blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH,
//! BLMPOP) reuse: [`state`], [`is_ready`], [`pop`], [`push`], [`lmove_local`],
//! [`mpop_local`], [`parse_mpop`], the reply helpers, and the plans' pieces.
//!
//! Effects: list commands are deterministic, so handlers log nothing (a command is its
//! own effect) but LMPOP, which logs `LPOP key count` / `RPOP key count` as redis-server
//! propagates it. A plan's hop logs what it wrote on its shard: `LPOP src` / `RPOP src`,
//! `LPUSH dst element` / `RPUSH dst element`, `LPOP key count` / `RPOP key count`.

use goblin_protocol::{Encoder, parse_i64};
use goblin_store::{Keyspace, List, Millis, Value, ValueMut, ValueRef};

use crate::errors::{self, ErrorReply};
use crate::runtime::msg::LockMode;
use crate::shard::slots::SlotMap;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{
    CrossShard, Hop, HopOut, Locking, Outcome, Park, Plan, PlanCx, PlanStart, Serve, Step,
};
use crate::txn::shapes::{BlockingOps, BlockingPop, Holds};

use super::{decimal, parse_timeout};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::LPUSH, Exec::Shard(lpush));
    table.add(&meta::RPUSH, Exec::Shard(rpush));
    table.add(&meta::LPUSHX, Exec::Shard(lpushx));
    table.add(&meta::RPUSHX, Exec::Shard(rpushx));
    table.add(&meta::LPOP, Exec::Shard(lpop));
    table.add(&meta::RPOP, Exec::Shard(rpop));
    table.add(&meta::LLEN, Exec::Shard(llen));
    table.add(&meta::LRANGE, Exec::Shard(lrange));
    table.add(&meta::LINDEX, Exec::Shard(lindex));
    table.add(&meta::LSET, Exec::Shard(lset));
    table.add(&meta::LINSERT, Exec::Shard(linsert));
    table.add(&meta::LREM, Exec::Shard(lrem));
    table.add(&meta::LTRIM, Exec::Shard(ltrim));
    table.add(&meta::LPOS, Exec::Shard(lpos));
    table
        .add(&meta::LMOVE, Exec::Shard(lmove))
        .cross_shard(lmove_plan, Locking::Keys);
    table
        .add(&meta::RPOPLPUSH, Exec::Shard(rpoplpush))
        .cross_shard(rpoplpush_plan, Locking::Keys);
    table
        .add(&meta::LMPOP, Exec::Shard(lmpop))
        .cross_shard(lmpop_plan, Locking::Keys);
    // Blocking commands always run as plans: they may wait.
    let blocking = |plan| {
        Exec::Plan(CrossShard {
            plan,
            locking: Locking::Keys,
        })
    };
    table.add(&meta::BLPOP, blocking(blpop_plan));
    table.add(&meta::BRPOP, blocking(brpop_plan));
    table.add(&meta::BLMPOP, blocking(blmpop_plan));
    table.add(&meta::BLMOVE, blocking(blmove_plan));
    table.add(&meta::BRPOPLPUSH, blocking(brpoplpush_plan));
}

/// An end of a list: LEFT is the head, RIGHT the tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The head (LPUSH, LPOP, LEFT).
    Left,
    /// The tail (RPUSH, RPOP, RIGHT).
    Right,
}

impl End {
    /// `LEFT` or `RIGHT`, in any case (Redis's `getListPositionFromObjectOrReply`).
    ///
    /// # Errors
    /// `ERR syntax error` for anything else.
    pub fn parse(arg: &[u8]) -> Result<End, ErrorReply> {
        if is_keyword(arg, "left") {
            Ok(End::Left)
        } else if is_keyword(arg, "right") {
            Ok(End::Right)
        } else {
            Err(errors::SYNTAX.into())
        }
    }

    /// The command that pops at this end.
    pub fn pop_command(self) -> &'static [u8] {
        match self {
            End::Left => b"LPOP",
            End::Right => b"RPOP",
        }
    }

    /// The command that pushes at this end.
    pub fn push_command(self) -> &'static [u8] {
        match self {
            End::Left => b"LPUSH",
            End::Right => b"RPUSH",
        }
    }
}

/// A key holds a value of another type than a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongType;

impl From<WrongType> for ErrorReply {
    fn from(_: WrongType) -> Self {
        ErrorReply::Fixed(errors::WRONGTYPE)
    }
}

/// What a key holds, for list commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListState {
    /// Nothing.
    Absent,
    /// A value of another type.
    WrongType,
    /// A list of this many elements (never 0: an emptied list is deleted).
    Len(usize),
}

/// What `key` holds at `now`.
pub fn state(db: &mut Keyspace, key: &[u8], now: Millis) -> ListState {
    match db.get(key, now).map(|e| e.value()) {
        None => ListState::Absent,
        Some(ValueRef::List(l)) => ListState::Len(l.len()),
        Some(_) => ListState::WrongType,
    }
}

/// Whether `key` holds a list, which a blocked pop could take from (a
/// [`crate::txn::plan::ReadyFn`]: a key of another type does not serve a waiting client).
pub fn is_ready(db: &mut Keyspace, key: &[u8], now: Millis, _arg: &[u8]) -> usize {
    match state(db, key, now) {
        ListState::Len(n) => n,
        _ => 0,
    }
}

/// The list at `key`: `None` when the key is absent.
fn read<'a>(db: &'a mut Keyspace, key: &[u8], now: Millis) -> Result<Option<&'a List>, WrongType> {
    match db.get(key, now).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::List(l)) => Ok(Some(l)),
        Some(_) => Err(WrongType),
    }
}

/// Runs `f` on the list at `key` in place (`f` says whether it changed it); `None` when
/// the key is absent. A list left empty is deleted.
fn modify_list<R>(
    db: &mut Keyspace,
    key: &[u8],
    now: Millis,
    f: impl FnOnce(&mut List) -> (R, bool),
) -> Result<Option<R>, WrongType> {
    let found = db.modify(key, now, |v| match v {
        ValueMut::Boxed(Value::List(l)) => {
            let (r, changed) = f(l);
            (Ok(r), changed)
        }
        _ => (Err(WrongType), false),
    });
    found.transpose()
}

fn push_at(list: &mut List, end: End, element: &[u8]) {
    match end {
        End::Left => list.push_front(element),
        End::Right => list.push_back(element),
    }
}

/// Pushes `elements` in order at `end` of the list at `key`, creating it when absent
/// (LPUSH, RPUSH); the list's new length.
///
/// # Errors
/// [`WrongType`] when the key holds another type (nothing is pushed).
pub fn push<'e>(
    db: &mut Keyspace,
    key: &[u8],
    now: Millis,
    end: End,
    elements: impl Iterator<Item = &'e [u8]> + Clone,
) -> Result<usize, WrongType> {
    let again = elements.clone();
    let pushed = modify_list(db, key, now, |l| {
        for e in elements {
            push_at(l, end, e);
        }
        (l.len(), true)
    })?;
    if let Some(len) = pushed {
        return Ok(len);
    }
    let mut list = List::default();
    for e in again {
        push_at(&mut list, end, e);
    }
    let len = list.len();
    if len > 0 {
        db.insert(key, Value::List(Box::new(list)), None, now);
    }
    Ok(len)
}

/// Pops up to `count` elements from `end` of the list at `key`, in the order they were
/// popped; none when the key is absent. A list left empty is deleted. Logs nothing.
///
/// # Errors
/// [`WrongType`] when the key holds another type.
pub fn pop(
    db: &mut Keyspace,
    key: &[u8],
    now: Millis,
    end: End,
    count: usize,
) -> Result<Vec<Vec<u8>>, WrongType> {
    let popped = modify_list(db, key, now, |l| {
        let n = count.min(l.len());
        let out: Vec<Vec<u8>> = match end {
            End::Left => l.iter().take(n).map(<[u8]>::to_vec).collect(),
            End::Right => l.iter().rev().take(n).map(<[u8]>::to_vec).collect(),
        };
        trim_at(l, end, n);
        (out, n > 0)
    })?;
    Ok(popped.unwrap_or_default())
}

/// Removes `n` elements at `end`.
fn trim_at(list: &mut List, end: End, n: usize) {
    match end {
        End::Left => list.trim_front(n),
        End::Right => list.trim_back(n),
    }
}

/// LMOVE with both keys on this shard (`src` may be `dst`: a rotation): the element
/// moved, `None` when the source is absent. Redis's order: an absent source answers nil
/// whatever the destination holds; then the source's type, then the destination's.
/// Logs nothing.
///
/// # Errors
/// [`WrongType`] when either key holds another type (nothing moves).
pub fn lmove_local(
    db: &mut Keyspace,
    now: Millis,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> Result<Option<Vec<u8>>, WrongType> {
    match state(db, src, now) {
        ListState::Absent => return Ok(None),
        ListState::WrongType => return Err(WrongType),
        ListState::Len(_) => {}
    }
    if src == dst {
        let moved = modify_list(db, src, now, |l| {
            let element = match from {
                End::Left => l.pop_front(),
                End::Right => l.pop_back(),
            };
            if let Some(e) = &element {
                push_at(l, to, e);
            }
            let changed = element.is_some();
            (element, changed)
        })?;
        return Ok(moved.flatten());
    }
    if state(db, dst, now) == ListState::WrongType {
        return Err(WrongType);
    }
    let Some(element) = pop(db, src, now, from, 1)?.pop() else {
        return Ok(None);
    };
    push(db, dst, now, to, std::iter::once(element.as_slice()))?;
    Ok(Some(element))
}

/// What a pop from one of several keys took: the key, and its elements in pop order.
pub type Popped<'k> = (&'k [u8], Vec<Vec<u8>>);

/// LMPOP on this shard: pops up to `count` elements at `end` of the first of `keys` that
/// holds a list; that key and the elements, `None` when every key is absent. Logs
/// nothing.
///
/// # Errors
/// [`WrongType`] when a key before that one holds another type (nothing is popped).
pub fn mpop_local<'k>(
    db: &mut Keyspace,
    now: Millis,
    keys: impl Iterator<Item = &'k [u8]>,
    end: End,
    count: usize,
) -> Result<Option<Popped<'k>>, WrongType> {
    for key in keys {
        match state(db, key, now) {
            ListState::Absent | ListState::Len(0) => continue,
            ListState::WrongType => return Err(WrongType),
            ListState::Len(_) => return Ok(Some((key, pop(db, key, now, end, count)?))),
        }
    }
    Ok(None)
}

/// Replies `[key, [element, ...]]`, as LMPOP and BLMPOP do.
pub fn reply_key_elements(out: &mut Encoder<'_>, key: &[u8], elements: &[Vec<u8>]) {
    out.array(2);
    out.bulk(key);
    out.array(elements.len());
    for e in elements {
        out.bulk(e);
    }
}

/// LMPOP's (and BLMPOP's) arguments after numkeys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpopArgs {
    /// The index of the first key.
    pub first_key: usize,
    /// How many keys.
    pub numkeys: usize,
    /// Where to pop.
    pub end: End,
    /// How many elements at most (1 without COUNT).
    pub count: usize,
}

impl MpopArgs {
    /// The keys, in argument order.
    pub fn keys<'a>(&self, args: &Args<'a>) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        args.iter_from(self.first_key).take(self.numkeys)
    }
}

/// Parses `numkeys key [key ...] LEFT|RIGHT [COUNT count]` with numkeys at argument
/// `numkeys_at` (1 for LMPOP, 2 for BLMPOP), as Redis's `lmpopGenericCommand`: numkeys a
/// positive integer, then the direction, then COUNT at most once, positive.
///
/// # Errors
/// `ERR numkeys should be greater than 0`, `ERR syntax error` (no direction after the
/// keys, a wrong one, an unknown or repeated option), `ERR count should be greater than
/// 0`.
pub fn parse_mpop(args: &Args<'_>, numkeys_at: usize) -> Result<MpopArgs, ErrorReply> {
    let numkeys = parse_i64(args.get(numkeys_at))
        .filter(|&n| n >= 1)
        .ok_or(ErrorReply::Fixed(errors::LMPOP_NUMKEYS))?;
    let where_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_at + 1))
        .filter(|&w| w < args.len())
        .ok_or(ErrorReply::Fixed(errors::SYNTAX))?;
    let end = End::parse(args.get(where_at))?;
    let mut count = None;
    let mut c = args.cursor(where_at + 1);
    while let Some(opt) = c.next() {
        if count.is_none() && is_keyword(opt, "count") && !c.is_empty() {
            count = Some(c.next_parsed(|a| parse_i64(a).filter(|&n| n >= 1), errors::LMPOP_COUNT)?);
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok(MpopArgs {
        first_key: numkeys_at + 1,
        numkeys: where_at - numkeys_at - 1,
        end,
        count: count.unwrap_or(1) as usize,
    })
}

/// Redis's rules for a range of LRANGE and LTRIM: negative indexes count from the tail,
/// the start is clamped to 0 and the end to the last element. The first index and the
/// number of elements; `None` when the range is empty.
fn range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let llen = len as i64;
    let start = if start < 0 { llen + start } else { start }.max(0);
    let end = if end < 0 { llen + end } else { end };
    if start > end || start >= llen {
        return None;
    }
    let end = end.min(llen - 1);
    Some((start as usize, (end - start + 1) as usize))
}

/// The position of index `index` (negative: from the tail) in a list of `len` elements.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    if index >= 0 {
        usize::try_from(index).ok().filter(|&i| i < len)
    } else {
        // -1 is the last element; -(i64::MIN + 1) cannot overflow.
        let from_tail = usize::try_from(-(index + 1)).ok()?;
        len.checked_sub(from_tail + 1)
    }
}

/// LPUSH and RPUSH: the new length.
fn push_command(ctx: &mut ShardCtx<'_>, args: &Args<'_>, end: End) {
    match push(ctx.db, args.get(1), ctx.now, end, args.cursor(2)) {
        Ok(len) => ctx.out.integer(len as i64),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `LPUSH key element [element ...]`
fn lpush(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    push_command(ctx, args, End::Left);
}

/// `RPUSH key element [element ...]`
fn rpush(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    push_command(ctx, args, End::Right);
}

/// LPUSHX and RPUSHX: push only onto an existing list; 0 when the key is absent.
fn pushx_command(ctx: &mut ShardCtx<'_>, args: &Args<'_>, end: End) {
    let pushed = modify_list(ctx.db, args.get(1), ctx.now, |l| {
        for e in args.iter_from(2) {
            push_at(l, end, e);
        }
        (l.len(), true)
    });
    match pushed {
        Ok(len) => ctx.out.integer(len.unwrap_or(0) as i64),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `LPUSHX key element [element ...]`
fn lpushx(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    pushx_command(ctx, args, End::Left);
}

/// `RPUSHX key element [element ...]`
fn rpushx(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    pushx_command(ctx, args, End::Right);
}

/// LPOP and RPOP (Redis's `popGenericCommand`): without a count, the element or nil;
/// with one, an array (empty for a count of 0), or a nil array when the key is absent.
/// The count is checked before the key.
fn pop_command(ctx: &mut ShardCtx<'_>, args: &Args<'_>, end: End, name: &str) {
    if args.len() > 3 {
        return ctx.out.error(&errors::wrong_arity(name));
    }
    let count = if args.len() == 3 {
        match parse_i64(args.get(2)).filter(|&n| n >= 0) {
            Some(n) => Some(n as usize),
            None => return ctx.out.error(errors::POP_COUNT_NOT_POSITIVE),
        }
    } else {
        None
    };
    let out = &mut ctx.out;
    let popped = modify_list(ctx.db, args.get(1), ctx.now, |l| match count {
        None => {
            let popped = match end {
                End::Left => l.pop_front_with(|e| out.bulk(e)),
                End::Right => l.pop_back_with(|e| out.bulk(e)),
            };
            ((), popped.is_some())
        }
        Some(n) => {
            let n = n.min(l.len());
            out.array(n);
            match end {
                End::Left => l.iter().take(n).for_each(|e| out.bulk(e)),
                End::Right => l.iter().rev().take(n).for_each(|e| out.bulk(e)),
            }
            trim_at(l, end, n);
            ((), n > 0)
        }
    });
    match popped {
        Ok(Some(())) => {}
        Ok(None) if count.is_some() => ctx.out.null_array(),
        Ok(None) => ctx.out.null(),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `LPOP key [count]`
fn lpop(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    pop_command(ctx, args, End::Left, "lpop");
}

/// `RPOP key [count]`
fn rpop(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    pop_command(ctx, args, End::Right, "rpop");
}

/// `LLEN key`
fn llen(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match read(ctx.db, args.get(1), ctx.now) {
        Ok(l) => {
            let n = l.map_or(0, List::len);
            ctx.out.integer(n as i64);
        }
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `LRANGE key start stop`: the indexes are checked before the key.
fn lrange(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (Some(start), Some(stop)) = (parse_i64(args.get(2)), parse_i64(args.get(3))) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    let list = match read(ctx.db, args.get(1), ctx.now) {
        Ok(Some(l)) => l,
        Ok(None) => return ctx.out.array(0),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    match range(start, stop, list.len()) {
        None => ctx.out.array(0),
        Some((first, n)) => {
            ctx.out.array(n);
            for e in list.iter_from(first).take(n) {
                ctx.out.bulk(e);
            }
        }
    }
}

/// `LINDEX key index`: the key is checked before the index.
fn lindex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let list = match read(ctx.db, args.get(1), ctx.now) {
        Ok(Some(l)) => l,
        Ok(None) => return ctx.out.null(),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    let Some(index) = parse_i64(args.get(2)) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    match resolve_index(index, list.len()).and_then(|i| list.get(i)) {
        Some(e) => ctx.out.bulk(e),
        None => ctx.out.null(),
    }
}

/// `LSET key index element`: `no such key` first, then the type, then the index.
fn lset(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let index = parse_i64(args.get(2));
    let done = modify_list(ctx.db, args.get(1), ctx.now, |l| {
        let Some(index) = index else {
            return (Err(errors::NOT_INTEGER), false);
        };
        match resolve_index(index, l.len()) {
            Some(i) if l.set(i, args.get(3)) => (Ok(()), true),
            _ => (Err(errors::INDEX_OUT_OF_RANGE), false),
        }
    });
    match done {
        Ok(Some(Ok(()))) => ctx.out.ok(),
        Ok(Some(Err(e))) => ctx.out.error(e),
        Ok(None) => ctx.out.error(errors::NO_SUCH_KEY),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `LINSERT key BEFORE|AFTER pivot element`: the new length, -1 without the pivot, 0
/// without the key; the direction is checked first.
fn linsert(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let after = if args.is(2, "after") {
        true
    } else if args.is(2, "before") {
        false
    } else {
        return ctx.out.error(errors::SYNTAX);
    };
    let (pivot, element) = (args.get(3), args.get(4));
    let inserted = modify_list(ctx.db, args.get(1), ctx.now, |l| {
        match l.iter().position(|e| e == pivot) {
            None => (-1, false),
            Some(i) => {
                l.insert(i + usize::from(after), element);
                (l.len() as i64, true)
            }
        }
    });
    match inserted {
        Ok(n) => ctx.out.integer(n.unwrap_or(0)),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `LREM key count element`: how many were removed — the first `count` from the head,
/// the last `-count` from the tail, or all for 0. The count is checked first.
fn lrem(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let Some(count) = parse_i64(args.get(2)) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    // Redis negates a negative count in a C long: -LONG_MIN stays negative and never
    // equals a count of removals, which removes them all; so does this limit.
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let removed = modify_list(ctx.db, args.get(1), ctx.now, |l| {
        let n = l.remove(args.get(3), limit, count < 0);
        (n, n > 0)
    });
    match removed {
        Ok(n) => ctx.out.integer(n.unwrap_or(0) as i64),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `LTRIM key start stop`: OK, even without the key; the indexes are checked first.
fn ltrim(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (Some(start), Some(stop)) = (parse_i64(args.get(2)), parse_i64(args.get(3))) else {
        return ctx.out.error(errors::NOT_INTEGER);
    };
    let trimmed = modify_list(ctx.db, args.get(1), ctx.now, |l| {
        let len = l.len();
        match range(start, stop, len) {
            None => l.trim_back(len),
            Some((first, n)) => {
                l.trim_back(len - first - n);
                l.trim_front(first);
            }
        }
        // Redis signals the key as modified even when nothing was trimmed.
        ((), true)
    });
    match trimmed {
        Ok(_) => ctx.out.ok(),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// LPOS's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LposOptions {
    rank: i64,
    count: Option<i64>,
    maxlen: i64,
}

/// Reads LPOS's options in any order (each may repeat: the last counts), as Redis's
/// `lposCommand`: RANK an integer other than 0, COUNT and MAXLEN non-negative integers.
fn parse_lpos(args: &Args<'_>) -> Result<LposOptions, ErrorReply> {
    let mut o = LposOptions {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let non_negative = |a: &[u8]| parse_i64(a).filter(|&n| n >= 0);
    let mut c = args.cursor(3);
    while let Some(opt) = c.next() {
        if is_keyword(opt, "rank") && !c.is_empty() {
            o.rank = c.next_i64()?;
            if o.rank == 0 {
                return Err(errors::LPOS_RANK_ZERO.into());
            }
        } else if is_keyword(opt, "count") && !c.is_empty() {
            o.count = Some(c.next_parsed(non_negative, errors::LPOS_COUNT_NEGATIVE)?);
        } else if is_keyword(opt, "maxlen") && !c.is_empty() {
            o.maxlen = c.next_parsed(non_negative, errors::LPOS_MAXLEN_NEGATIVE)?;
        } else {
            return Err(errors::SYNTAX.into());
        }
    }
    Ok(o)
}

/// The indexes LPOS finds in `list`: the matches of `element` from the `rank`-th on
/// (negative: counting from the tail), `count` of them (0: all; `None`: the first
/// only), among the first `maxlen` elements looked at (0: all). Redis's arithmetic is
/// kept: it negates RANK in a C long, so `RANK -9223372036854775808` stays negative and
/// every match qualifies.
fn lpos_search(list: &List, element: &[u8], o: LposOptions) -> Vec<i64> {
    let from_tail = o.rank < 0;
    let rank = if from_tail {
        o.rank.wrapping_neg()
    } else {
        o.rank
    };
    let len = list.len() as i64;
    let elements: Box<dyn Iterator<Item = &[u8]> + '_> = if from_tail {
        Box::new(list.iter().rev())
    } else {
        Box::new(list.iter())
    };
    let mut found = Vec::new();
    let mut matches: i64 = 0;
    for (index, e) in (0i64..).zip(elements) {
        if o.maxlen != 0 && index >= o.maxlen {
            break;
        }
        if e != element {
            continue;
        }
        matches += 1;
        if matches < rank {
            continue;
        }
        found.push(if from_tail { len - index - 1 } else { index });
        match o.count {
            None => break,
            Some(count) if count != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= count => {
                break;
            }
            Some(_) => {}
        }
    }
    found
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`: the options are
/// checked first; without the key, nil (an empty array with COUNT).
fn lpos(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let o = match parse_lpos(args) {
        Ok(o) => o,
        Err(e) => return e.send(&mut ctx.out),
    };
    let found = match read(ctx.db, args.get(1), ctx.now) {
        Ok(Some(l)) => lpos_search(l, args.get(2), o),
        Ok(None) => Vec::new(),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    if o.count.is_some() {
        ctx.out.array(found.len());
        for i in found {
            ctx.out.integer(i);
        }
    } else {
        match found.first() {
            Some(&i) => ctx.out.integer(i),
            None => ctx.out.null(),
        }
    }
}

/// Replies what a move did: the element, nil, or WRONGTYPE.
fn reply_moved(out: &mut Encoder<'_>, moved: Result<Option<Vec<u8>>, WrongType>) {
    match moved {
        Ok(Some(e)) => out.bulk(&e),
        Ok(None) => out.null(),
        Err(WrongType) => out.error(errors::WRONGTYPE),
    }
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`, both keys on this shard: the
/// directions are checked first.
fn lmove(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let ends = End::parse(args.get(3)).and_then(|from| Ok((from, End::parse(args.get(4))?)));
    let (from, to) = match ends {
        Ok(ends) => ends,
        Err(e) => return e.send(&mut ctx.out),
    };
    let moved = lmove_local(ctx.db, ctx.now, args.get(1), args.get(2), from, to);
    reply_moved(&mut ctx.out, moved);
}

/// `RPOPLPUSH source destination`: `LMOVE source destination RIGHT LEFT`.
fn rpoplpush(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let moved = lmove_local(
        ctx.db,
        ctx.now,
        args.get(1),
        args.get(2),
        End::Right,
        End::Left,
    );
    reply_moved(&mut ctx.out, moved);
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`, every key on this shard.
fn lmpop(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let m = match parse_mpop(args, 1) {
        Ok(m) => m,
        Err(e) => return e.send(&mut ctx.out),
    };
    match mpop_local(ctx.db, ctx.now, m.keys(args), m.end, m.count) {
        Ok(Some((key, elements))) => {
            // Replicas and the log get LPOP or RPOP with the count popped, as from
            // redis-server.
            if ctx.logging() {
                ctx.log(&[m.end.pop_command(), key, &decimal(elements.len() as i64)]);
            }
            reply_key_elements(&mut ctx.out, key, &elements)
        }
        Ok(None) => ctx.out.null_array(),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// What the check of a move found at the source: the element a move would take (a copy:
/// under the plan's locks it is the one then taken).
#[derive(Debug)]
enum SourceCheck {
    Absent,
    WrongType,
    Next(Vec<u8>),
}

/// Looks at the element `end` of the list at `key` would give.
fn peek(db: &mut Keyspace, key: &[u8], now: Millis, end: End) -> SourceCheck {
    match read(db, key, now) {
        Ok(None) => SourceCheck::Absent,
        Err(WrongType) => SourceCheck::WrongType,
        Ok(Some(l)) => {
            let e = match end {
                End::Left => l.front(),
                End::Right => l.back(),
            };
            e.map_or(SourceCheck::Absent, |e| SourceCheck::Next(e.to_vec()))
        }
    }
}

/// LMOVE (and RPOPLPUSH, BLMOVE, BRPOPLPUSH) between keys of two shards, piece by piece:
/// [`MoveAcross::check_hops`] looks at both keys (the source's next element, the
/// destination's type), [`MoveAcross::decide`] reads what they found with Redis's order
/// of checks, and [`MoveAcross::apply_hops`] pops at the source and pushes at the
/// destination, each hop logging what it wrote. Both keys must stay locked from the check
/// to the move (Locking::Keys does it): then the element checked is the element moved,
/// and no observer sees it in both lists or in neither. (Keys of one shard take one hop
/// per step.)
#[derive(Clone, Debug)]
pub struct MoveAcross {
    pub(crate) src: Vec<u8>,
    pub(crate) dst: Vec<u8>,
    pub(crate) src_shard: usize,
    pub(crate) dst_shard: usize,
    from: End,
    to: End,
    /// RPOPLPUSH or BRPOPLPUSH: what a move on one shard logs (and replicas are sent)
    /// is `RPOPLPUSH`, as redis-server propagates them, not `LMOVE`.
    rpoplpush: bool,
}

impl MoveAcross {
    /// A move from `src`'s `from` end to `dst`'s `to` end.
    pub fn new(src: &[u8], dst: &[u8], from: End, to: End, slots: &SlotMap) -> MoveAcross {
        MoveAcross {
            src: src.to_vec(),
            dst: dst.to_vec(),
            src_shard: slots.shard_of_key(src),
            dst_shard: slots.shard_of_key(dst),
            from,
            to,
            rpoplpush: false,
        }
    }

    /// RPOPLPUSH's move (see `rpoplpush`).
    pub fn rpoplpush(src: &[u8], dst: &[u8], slots: &SlotMap) -> MoveAcross {
        MoveAcross {
            rpoplpush: true,
            ..MoveAcross::new(src, dst, End::Right, End::Left, slots)
        }
    }

    /// The checks: the source's next element at its shard, the destination's type at its
    /// shard.
    pub fn check_hops(&self) -> Vec<Hop> {
        let (src, dst, from) = (self.src.clone(), self.dst.clone(), self.from);
        if self.src_shard == self.dst_shard {
            return vec![Hop::run(self.src_shard, move |ctx| {
                let found = peek(ctx.db, &src, ctx.now, from);
                let dst_ok = state(ctx.db, &dst, ctx.now) != ListState::WrongType;
                HopOut::Other(Box::new((found, dst_ok)))
            })];
        }
        vec![
            Hop::run(self.src_shard, move |ctx| {
                HopOut::Other(Box::new(peek(ctx.db, &src, ctx.now, from)))
            }),
            Hop::run(self.dst_shard, move |ctx| {
                HopOut::Flag(state(ctx.db, &dst, ctx.now) != ListState::WrongType)
            }),
        ]
    }

    /// What the checks found, in Redis's order: `None` when the source is absent
    /// (whatever the destination holds), else the element to move.
    ///
    /// # Errors
    /// [`WrongType`] when the source, or the destination, holds another type.
    pub fn decide(results: Vec<HopOut>) -> Result<Option<Vec<u8>>, WrongType> {
        let mut results = results.into_iter();
        let (found, dst_ok) = match (results.next(), results.next()) {
            (Some(HopOut::Other(any)), Some(HopOut::Flag(dst_ok))) => {
                match any.downcast::<SourceCheck>() {
                    Ok(found) => (*found, dst_ok),
                    Err(_) => (SourceCheck::Absent, dst_ok),
                }
            }
            (Some(HopOut::Other(any)), None) => match any.downcast::<(SourceCheck, bool)>() {
                Ok(both) => *both,
                Err(_) => (SourceCheck::Absent, true),
            },
            _ => (SourceCheck::Absent, true),
        };
        match found {
            SourceCheck::Absent => Ok(None),
            SourceCheck::WrongType => Err(WrongType),
            SourceCheck::Next(_) if !dst_ok => Err(WrongType),
            SourceCheck::Next(e) => Ok(Some(e)),
        }
    }

    /// The move of `element` (what [`MoveAcross::decide`] gave): popped at the source,
    /// pushed at the destination.
    pub fn apply_hops(&self, element: Vec<u8>) -> Vec<Hop> {
        let (src, dst, from, to) = (self.src.clone(), self.dst.clone(), self.from, self.to);
        let rpoplpush = self.rpoplpush;
        if self.src_shard == self.dst_shard {
            return vec![Hop::run(self.src_shard, move |ctx| {
                let _ = lmove_local(ctx.db, ctx.now, &src, &dst, from, to);
                if rpoplpush {
                    ctx.log(&[b"RPOPLPUSH", &src, &dst]);
                } else {
                    let (f, t) = (end_word(from), end_word(to));
                    ctx.log(&[b"LMOVE", &src, &dst, f, t]);
                }
                HopOut::Done
            })];
        }
        // (Replicas are sent the move itself, once, by the coordinator: `propagate`.)
        vec![
            Hop::run(self.src_shard, move |ctx| {
                let _ = pop(ctx.db, &src, ctx.now, from, 1);
                ctx.log(&[from.pop_command(), &src]);
                ctx.replicated_once();
                HopOut::Done
            }),
            Hop::run(self.dst_shard, move |ctx| {
                let _ = push(
                    ctx.db,
                    &dst,
                    ctx.now,
                    to,
                    std::iter::once(element.as_slice()),
                );
                ctx.log(&[to.push_command(), &dst, &element]);
                ctx.replicated_once();
                HopOut::Done
            }),
        ]
    }

    /// A move across shards, done: replicas are sent it as redis-server sends it
    /// (RPOPLPUSH, or LMOVE), once, after what both shards wrote before.
    pub fn propagate(&self, cx: &PlanCx<'_>) {
        if self.src_shard == self.dst_shard {
            return;
        }
        if self.rpoplpush {
            cx.propagate(&[b"RPOPLPUSH", &self.src, &self.dst]);
        } else {
            let (f, t) = (end_word(self.from), end_word(self.to));
            cx.propagate(&[b"LMOVE", &self.src, &self.dst, f, t]);
        }
    }
}

/// `LEFT` or `RIGHT`.
fn end_word(end: End) -> &'static [u8] {
    match end {
        End::Left => b"LEFT",
        End::Right => b"RIGHT",
    }
}

/// LMOVE and RPOPLPUSH across shards: check, then move, then reply the element.
#[derive(Debug)]
struct LMovePlan {
    across: MoveAcross,
    stage: u8,
    element: Option<Vec<u8>>,
}

impl Plan for LMovePlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        self.stage += 1;
        match self.stage {
            1 => Step::Hops(self.across.check_hops()),
            2 => match MoveAcross::decide(results) {
                Ok(Some(e)) => {
                    self.element = Some(e.clone());
                    Step::Hops(self.across.apply_hops(e))
                }
                Ok(None) => cx.done(|e| e.null()),
                Err(WrongType) => cx.done(|e| e.error(errors::WRONGTYPE)),
            },
            _ => {
                self.across.propagate(cx);
                let element = self.element.take().unwrap_or_default();
                cx.done(|e| e.bulk(&element))
            }
        }
    }
}

/// LMOVE across shards (the directions are checked first).
fn lmove_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let from = End::parse(args.get(3))?;
    let to = End::parse(args.get(4))?;
    Ok(Box::new(LMovePlan {
        across: MoveAcross::new(args.get(1), args.get(2), from, to, start.slots),
        stage: 0,
        element: None,
    }))
}

/// RPOPLPUSH across shards.
fn rpoplpush_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    Ok(Box::new(LMovePlan {
        across: MoveAcross::rpoplpush(args.get(1), args.get(2), start.slots),
        stage: 0,
        element: None,
    }))
}

/// LMPOP (and BLMPOP) over keys of several shards, piece by piece:
/// [`MpopAcross::probe_hops`] looks at every key on its shard, [`MpopAcross::choose`]
/// finds the first key in argument order that holds a list (WRONGTYPE when a key of
/// another type comes first), [`MpopAcross::pop_hop`] pops from it, logging `LPOP key n`
/// or `RPOP key n`. The keys must stay locked from the probe to the pop.
#[derive(Clone, Debug)]
pub struct MpopAcross {
    keys: Vec<Vec<u8>>,
    /// Each shard with the indexes of its keys, in argument order.
    groups: Vec<(usize, Vec<usize>)>,
    end: End,
    count: usize,
}

impl MpopAcross {
    /// A pop of up to `count` elements at `end` of the first of `keys` holding a list.
    pub fn new<'k>(
        keys: impl Iterator<Item = &'k [u8]>,
        end: End,
        count: usize,
        slots: &SlotMap,
    ) -> MpopAcross {
        let keys: Vec<Vec<u8>> = keys.map(<[u8]>::to_vec).collect();
        let groups = slots.group_by_shard(keys.iter().map(Vec::as_slice).enumerate());
        MpopAcross {
            keys,
            groups,
            end,
            count,
        }
    }

    /// Key `i`, in argument order.
    pub fn key(&self, i: usize) -> &[u8] {
        self.keys.get(i).map_or(&[], Vec::as_slice)
    }

    /// One hop per shard: the state of each of its keys.
    pub fn probe_hops(&self) -> Vec<Hop> {
        self.groups
            .iter()
            .map(|(shard, idx)| {
                let keys: Vec<Vec<u8>> = idx.iter().map(|&i| self.keys[i].clone()).collect();
                Hop::run(*shard, move |ctx| {
                    let states: Vec<ListState> =
                        keys.iter().map(|k| state(ctx.db, k, ctx.now)).collect();
                    HopOut::Other(Box::new(states))
                })
            })
            .collect()
    }

    /// The index of the key to pop from (the first holding a list), `None` when no key
    /// holds one.
    ///
    /// # Errors
    /// [`WrongType`] when a key of another type comes before it.
    pub fn choose(&self, results: Vec<HopOut>) -> Result<Option<usize>, WrongType> {
        let mut states = vec![ListState::Absent; self.keys.len()];
        for ((_, idx), result) in self.groups.iter().zip(results) {
            let HopOut::Other(any) = result else {
                continue;
            };
            if let Ok(found) = any.downcast::<Vec<ListState>>() {
                for (&i, s) in idx.iter().zip(found.iter()) {
                    states[i] = *s;
                }
            }
        }
        for (i, s) in states.iter().enumerate() {
            match s {
                ListState::Absent | ListState::Len(0) => {}
                ListState::WrongType => return Err(WrongType),
                ListState::Len(_) => return Ok(Some(i)),
            }
        }
        Ok(None)
    }

    /// The pop from key `i`: its elements come back as [`HopOut::Keys`], in pop order.
    pub fn pop_hop(&self, i: usize) -> Hop {
        let key = self.key(i).to_vec();
        let shard = self
            .groups
            .iter()
            .find(|(_, idx)| idx.contains(&i))
            .map_or(0, |(s, _)| *s);
        let (end, count) = (self.end, self.count);
        Hop::run(shard, move |ctx| {
            let popped = pop(ctx.db, &key, ctx.now, end, count).unwrap_or_default();
            if ctx.logging() && !popped.is_empty() {
                ctx.log(&[end.pop_command(), &key, &decimal(popped.len() as i64)]);
            }
            HopOut::Keys(popped)
        })
    }
}

/// LMPOP across shards: probe, choose, pop, reply.
#[derive(Debug)]
struct LmpopPlan {
    across: MpopAcross,
    stage: u8,
    chosen: usize,
}

impl Plan for LmpopPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        self.stage += 1;
        match self.stage {
            1 => Step::Hops(self.across.probe_hops()),
            2 => match self.across.choose(results) {
                Ok(Some(i)) => {
                    self.chosen = i;
                    Step::Hops(vec![self.across.pop_hop(i)])
                }
                Ok(None) => cx.done(|e| e.null_array()),
                Err(WrongType) => cx.done(|e| e.error(errors::WRONGTYPE)),
            },
            _ => match results.into_iter().next() {
                Some(HopOut::Keys(elements)) if !elements.is_empty() => {
                    let key = self.across.key(self.chosen);
                    cx.done(|e| reply_key_elements(e, key, &elements))
                }
                _ => cx.done(|e| e.null_array()),
            },
        }
    }
}

/// LMPOP across shards (its arguments are checked first).
fn lmpop_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let m = parse_mpop(start.args, 1)?;
    Ok(Box::new(LmpopPlan {
        across: MpopAcross::new(m.keys(start.args), m.end, m.count, start.slots),
        stage: 0,
        chosen: 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_redis() {
        assert_eq!(range(0, -1, 5), Some((0, 5)));
        assert_eq!(range(-100, 100, 5), Some((0, 5)));
        assert_eq!(range(2, 1, 5), None);
        assert_eq!(range(5, 10, 5), None);
        assert_eq!(range(-2, -1, 5), Some((3, 2)));
        assert_eq!(range(i64::MIN, i64::MAX, 5), Some((0, 5)));
        assert_eq!(range(0, i64::MIN, 5), None);
        assert_eq!(range(0, 0, 0), None);
    }

    #[test]
    fn indexes_follow_redis() {
        assert_eq!(resolve_index(0, 3), Some(0));
        assert_eq!(resolve_index(2, 3), Some(2));
        assert_eq!(resolve_index(3, 3), None);
        assert_eq!(resolve_index(-1, 3), Some(2));
        assert_eq!(resolve_index(-3, 3), Some(0));
        assert_eq!(resolve_index(-4, 3), None);
        assert_eq!(resolve_index(i64::MIN, 3), None);
        assert_eq!(resolve_index(i64::MAX, 3), None);
    }

    use std::cell::RefCell;
    use std::rc::Rc;

    use crate::shard::events::{Effect, Observer, Write};
    use crate::testkit::Loopback;

    /// The effects a shard's observer saw, one list of commands per unit of work.
    #[derive(Debug, Default)]
    struct Effects(Rc<RefCell<Vec<Vec<String>>>>);

    impl Observer for Effects {
        fn on_write(&mut self, write: &Write<'_>) {
            let logged = match write.effect {
                Effect::Commands(cmds) => cmds
                    .iter()
                    .map(|c| {
                        let words: Vec<String> = c
                            .iter()
                            .map(|w| String::from_utf8_lossy(w).into())
                            .collect();
                        words.join(" ")
                    })
                    .collect(),
                Effect::AsSent => vec!["(as sent)".to_string()],
                Effect::Events => vec!["(events)".to_string()],
            };
            self.0.borrow_mut().push(logged);
        }
    }

    /// Plans' hops log what they wrote on their shards: the pop at the source and the
    /// push at the destination, the pop of LMPOP with its count.
    #[test]
    fn cross_shard_hops_log_what_they_wrote() {
        let mut lb = Loopback::new(2);
        let seen: Vec<Rc<RefCell<Vec<Vec<String>>>>> = (0..2)
            .map(|i| {
                let seen = Rc::new(RefCell::new(Vec::new()));
                lb.shards[i].add_observer(Box::new(Effects(Rc::clone(&seen))));
                seen
            })
            .collect();
        let (a, b) = lb.keys_on_two_shards();
        let (sa, sb) = (String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
        lb.exec(&[b"RPUSH", &a, b"x", b"y", b"z"]);
        assert_eq!(
            seen[0].borrow_mut().drain(..).collect::<Vec<_>>(),
            [["(as sent)"]]
        );
        let moved = lb.plan(&[b"LMOVE", &a, &b, b"RIGHT", b"LEFT"]);
        assert_eq!(moved.as_deref(), Some(&b"$1\r\nz\r\n"[..]));
        assert_eq!(
            seen[0].borrow_mut().drain(..).collect::<Vec<_>>(),
            [[format!("RPOP {sa}")]]
        );
        assert_eq!(
            seen[1].borrow_mut().drain(..).collect::<Vec<_>>(),
            [[format!("LPUSH {sb} z")]]
        );
        let popped = lb.plan(&[b"LMPOP", b"2", &b, &a, b"LEFT", b"COUNT", b"5"]);
        assert_eq!(
            popped.as_deref(),
            Some(format!("*2\r\n${}\r\n{sb}\r\n*1\r\n$1\r\nz\r\n", b.len()).as_bytes())
        );
        assert_eq!(
            seen[1].borrow_mut().drain(..).collect::<Vec<_>>(),
            [[format!("LPOP {sb} 1")]]
        );
        assert!(seen[0].borrow().is_empty());
        // A source of another type: nothing moves, nothing is written.
        lb.exec(&[b"SET", &b, b"s"]);
        seen[1].borrow_mut().clear();
        let refused = lb.plan(&[b"LMOVE", &a, &b, b"LEFT", b"LEFT"]);
        assert_eq!(
            refused.as_deref(),
            Some(&b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"[..])
        );
        assert!(seen[0].borrow().is_empty() && seen[1].borrow().is_empty());
        assert_eq!(lb.exec(&[b"LLEN", &a]), b":2\r\n");
    }

    /// `Args` of space-separated words.
    fn with_args<R>(line: &str, f: impl FnOnce(&Args<'_>) -> R) -> R {
        let mut spans = Vec::new();
        let mut at = 0;
        for w in line.split(' ') {
            spans.push(at..at + w.len());
            at += w.len() + 1;
        }
        f(&Args::new(line.as_bytes(), &spans))
    }

    #[test]
    fn mpop_arguments_parse_as_redis_does() {
        let parse = |line: &str| with_args(line, |a| parse_mpop(a, 1));
        assert_eq!(
            parse("LMPOP 2 a b left COUNT 3"),
            Ok(MpopArgs {
                first_key: 2,
                numkeys: 2,
                end: End::Left,
                count: 3
            })
        );
        assert_eq!(
            parse("LMPOP 1 a RIGHT").map(|m| (m.end, m.count)),
            Ok((End::Right, 1))
        );
        let numkeys = Err(ErrorReply::Fixed(errors::LMPOP_NUMKEYS));
        assert_eq!(parse("LMPOP 0 a LEFT"), numkeys);
        assert_eq!(parse("LMPOP x a LEFT"), numkeys);
        let syntax = Err(ErrorReply::Fixed(errors::SYNTAX));
        assert_eq!(parse("LMPOP 2 a LEFT"), syntax);
        assert_eq!(parse("LMPOP 9223372036854775807 a LEFT"), syntax);
        assert_eq!(parse("LMPOP 1 a UP"), syntax);
        assert_eq!(parse("LMPOP 1 a LEFT COUNT 1 COUNT 1"), syntax);
        assert_eq!(parse("LMPOP 1 a LEFT COUNT"), syntax);
        let count = Err(ErrorReply::Fixed(errors::LMPOP_COUNT));
        assert_eq!(parse("LMPOP 1 a LEFT COUNT 0"), count);
        assert_eq!(parse("LMPOP 1 a LEFT COUNT -1"), count);
        // BLMPOP's numkeys comes after its timeout.
        let blocking = with_args("BLMPOP 0 1 a LEFT", |a| parse_mpop(a, 2));
        assert_eq!(blocking.map(|m| (m.first_key, m.numkeys)), Ok((3, 1)));
    }

    #[test]
    fn lpos_keeps_redis_arithmetic() {
        let l: List = [b"a", b"b", b"a", b"c", b"a"]
            .iter()
            .map(|e| &e[..])
            .collect();
        let o = |rank, count, maxlen| LposOptions {
            rank,
            count,
            maxlen,
        };
        assert_eq!(lpos_search(&l, b"a", o(1, None, 0)), [0]);
        assert_eq!(lpos_search(&l, b"a", o(2, None, 0)), [2]);
        assert_eq!(lpos_search(&l, b"a", o(-1, None, 0)), [4]);
        assert_eq!(lpos_search(&l, b"a", o(-1, Some(0), 0)), [4, 2, 0]);
        assert_eq!(lpos_search(&l, b"a", o(1, Some(2), 0)), [0, 2]);
        assert_eq!(lpos_search(&l, b"a", o(1, Some(0), 3)), [0, 2]);
        assert_eq!(lpos_search(&l, b"a", o(i64::MIN, None, 0)), [4]);
        assert_eq!(lpos_search(&l, b"a", o(i64::MIN, Some(1), 0)), [4, 2, 0]);
        assert_eq!(
            lpos_search(&l, b"a", o(i64::MAX, None, 0)),
            Vec::<i64>::new()
        );
    }
}

// --- Blocking commands: BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH --------------------------

/// What a key holds for a blocked pop.
fn list_holds(db: &mut Keyspace, key: &[u8], now: Millis) -> Holds {
    match state(db, key, now) {
        ListState::Len(n) if n > 0 => Holds::Ready,
        ListState::WrongType => Holds::WrongType,
        _ => Holds::Empty,
    }
}

/// Pops one element at `end` of a ready list, logging the pop.
fn take_one(ctx: &mut ShardCtx<'_>, key: &[u8], end: End) -> Option<HopOut> {
    let element = pop(ctx.db, key, ctx.now, end, 1).ok()?.pop()?;
    ctx.log(&[end.pop_command(), key]);
    Some(HopOut::Bulks(vec![Some(element)]))
}

fn take_left(ctx: &mut ShardCtx<'_>, key: &[u8], _args: &[Vec<u8>]) -> Option<HopOut> {
    take_one(ctx, key, End::Left)
}

fn take_right(ctx: &mut ShardCtx<'_>, key: &[u8], _args: &[Vec<u8>]) -> Option<HopOut> {
    take_one(ctx, key, End::Right)
}

/// BLPOP's and BRPOP's reply: `[key, element]`.
fn answer_key_element(cx: &PlanCx<'_>, key: &[u8], taken: HopOut) -> Outcome {
    let element = match taken {
        HopOut::Bulks(mut v) => v.pop().flatten().unwrap_or_default(),
        _ => Vec::new(),
    };
    cx.reply(|e| {
        e.array(2);
        e.bulk(key);
        e.bulk(&element);
    })
}

/// The reply of BLPOP, BRPOP and BLMPOP when their timeout passes.
fn timed_out_null_array(cx: &PlanCx<'_>) -> Outcome {
    cx.reply(|e| e.null_array())
}

/// BLPOP: pops at the head.
const BLPOP_OPS: BlockingOps = BlockingOps {
    holds: list_holds,
    ready: is_ready,
    take: take_left,
    answer: answer_key_element,
    timed_out: timed_out_null_array,
};

/// BRPOP: pops at the tail.
const BRPOP_OPS: BlockingOps = BlockingOps {
    take: take_right,
    ..BLPOP_OPS
};

/// `BLPOP key [key ...] timeout` and BRPOP: the timeout is checked first.
fn blocking_pop_plan(start: &PlanStart<'_>, ops: BlockingOps) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let timeout = parse_timeout(args.get(args.len() - 1))?;
    let keys = args
        .iter_from(1)
        .take(args.len() - 2)
        .map(<[u8]>::to_vec)
        .collect();
    Ok(Box::new(BlockingPop::new(args, keys, timeout, ops)))
}

fn blpop_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    blocking_pop_plan(start, BLPOP_OPS)
}

fn brpop_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    blocking_pop_plan(start, BRPOP_OPS)
}

/// BLMPOP's pop: COUNT elements at its end (its arguments say which), logged.
fn take_mpop(ctx: &mut ShardCtx<'_>, key: &[u8], args: &[Vec<u8>]) -> Option<HopOut> {
    let m = Args::with_owned(args, |args| parse_mpop(args, 2)).ok()?;
    let elements = pop(ctx.db, key, ctx.now, m.end, m.count).ok()?;
    if elements.is_empty() {
        return None;
    }
    if ctx.logging() {
        ctx.log(&[m.end.pop_command(), key, &decimal(elements.len() as i64)]);
    }
    Some(HopOut::Keys(elements))
}

/// BLMPOP's reply: `[key, [element, ...]]`.
fn answer_mpop(cx: &PlanCx<'_>, key: &[u8], taken: HopOut) -> Outcome {
    let elements = match taken {
        HopOut::Keys(v) => v,
        _ => Vec::new(),
    };
    cx.reply(|e| reply_key_elements(e, key, &elements))
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`: the timeout is
/// checked first, then the rest as LMPOP checks it.
fn blmpop_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let timeout = parse_timeout(args.get(1))?;
    let m = parse_mpop(args, 2)?;
    let keys = m.keys(args).map(<[u8]>::to_vec).collect();
    let ops = BlockingOps {
        take: take_mpop,
        answer: answer_mpop,
        ..BLPOP_OPS
    };
    Ok(Box::new(BlockingPop::new(args, keys, timeout, ops)))
}

/// Where a blocking move is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MoveState {
    /// Both keys locked: looking at them.
    Checking,
    /// Moving the element.
    Moving,
    /// Waiting for the source.
    Parked,
    /// Served with the source locked: trying the destination's lock.
    TryingDst,
    /// The destination was busy: the source's lock given back.
    Releasing,
    /// Locking both keys again, in ascending shard order: the first, then the second.
    Relocking(u8),
}

/// BLMOVE and BRPOPLPUSH: the move of LMOVE when the source has an element; else a wait
/// for the source, served with its lock (so the element pushed is this client's, in the
/// order clients waited); then the destination's lock is taken if it is free — if not
/// (another client holds it, maybe waiting for this source), the source's lock is given
/// back and both are locked again in ascending order, and a source emptied meanwhile
/// means waiting again, first in line.
#[derive(Debug)]
struct BlockingMove {
    across: MoveAcross,
    timeout: Option<std::time::Duration>,
    state: MoveState,
    element: Option<Vec<u8>>,
}

impl BlockingMove {
    fn check(&mut self) -> Step {
        self.state = MoveState::Checking;
        Step::Hops(self.across.check_hops())
    }

    fn park(&mut self) -> Step {
        self.state = MoveState::Parked;
        let mut park = Park::on(
            vec![self.across.src.clone()],
            Some(is_ready),
            Serve::Lock,
            self.timeout,
        );
        let a = &self.across;
        if a.src_shard == a.dst_shard && a.src != a.dst {
            // Served with the destination locked too: the move then goes through
            // before anything that came after the push that served it.
            for watch in &mut park.keys {
                watch.with = Some(a.dst.clone());
            }
        }
        Step::Park(park)
    }

    /// The lock-only hops that lock the keys again, in ascending shard order.
    fn relock(&mut self, which: u8) -> Step {
        let a = &self.across;
        let mut keys = [(a.src_shard, a.src.clone()), (a.dst_shard, a.dst.clone())];
        keys.sort_by_key(|(s, _)| *s);
        self.state = MoveState::Relocking(which);
        if keys[0].0 == keys[1].0 {
            let hop = Hop::run(keys[0].0, |_| HopOut::Done)
                .locking(&keys[0].1, LockMode::Exclusive)
                .locking(&keys[1].1, LockMode::Exclusive);
            self.state = MoveState::Relocking(1);
            return Step::Hops(vec![hop]);
        }
        let (shard, key) = &keys[usize::from(which)];
        Step::Hops(vec![
            Hop::run(*shard, |_| HopOut::Done).locking(key, LockMode::Exclusive),
        ])
    }
}

impl Plan for BlockingMove {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match self.state {
            MoveState::Checking if results.is_empty() => self.check(),
            MoveState::Checking => match MoveAcross::decide(results) {
                Ok(Some(e)) => {
                    self.element = Some(e.clone());
                    self.state = MoveState::Moving;
                    Step::Hops(self.across.apply_hops(e))
                }
                Ok(None) => self.park(),
                Err(WrongType) => cx.done(|e| e.error(errors::WRONGTYPE)),
            },
            MoveState::Moving => {
                self.across.propagate(cx);
                let element = self.element.take().unwrap_or_default();
                cx.done(|e| e.bulk(&element))
            }
            MoveState::Parked => match results.into_iter().next() {
                // Served with both keys locked (one shard): on with the move.
                Some(HopOut::Woken(_)) if self.across.src_shard == self.across.dst_shard => {
                    self.check()
                }
                Some(HopOut::Woken(_)) => {
                    self.state = MoveState::TryingDst;
                    let a = &self.across;
                    Step::Hops(vec![
                        Hop::run(a.dst_shard, |_| HopOut::Done)
                            .try_locking(&a.dst, LockMode::Exclusive),
                    ])
                }
                // Inside MULTI, Redis answers a null string at once; after a timeout (or
                // CLIENT UNBLOCK), the null array of every blocked list command.
                Some(HopOut::WouldBlock) => cx.done(|e| e.null()),
                _ => cx.done(|e| e.null_array()),
            },
            MoveState::TryingDst => match results.into_iter().next() {
                Some(HopOut::Busy) => {
                    self.state = MoveState::Releasing;
                    Step::Hops(vec![Hop::release(self.across.src_shard)])
                }
                _ => self.check(),
            },
            MoveState::Releasing => self.relock(0),
            MoveState::Relocking(0) => self.relock(1),
            MoveState::Relocking(_) => self.check(),
        }
    }
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`: the directions, then the
/// timeout, are checked first.
fn blmove_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let from = End::parse(args.get(3))?;
    let to = End::parse(args.get(4))?;
    let timeout = parse_timeout(args.get(5))?;
    Ok(Box::new(BlockingMove {
        across: MoveAcross::new(args.get(1), args.get(2), from, to, start.slots),
        timeout,
        state: MoveState::Checking,
        element: None,
    }))
}

/// `BRPOPLPUSH source destination timeout`.
fn brpoplpush_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let timeout = parse_timeout(args.get(3))?;
    Ok(Box::new(BlockingMove {
        across: MoveAcross::rpoplpush(args.get(1), args.get(2), start.slots),
        timeout,
        state: MoveState::Checking,
        element: None,
    }))
}
