//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID, XREAD,
//! XREADGROUP, XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP), XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM, XINFO (STREAM, GROUPS, CONSUMERS, HELP) — with
//! redis-server 7.0's parsing (`streamGenericParseIDOrReply`, `string2ull`'s leniency
//! included), replies, errors and their order.
//!
//! The stream itself (nodes of listpacks, trimming, IDs, groups and their lag) is the
//! store's ([`goblin_store::Stream`]). Writes go through [`Keyspace::upsert`] and
//! [`Keyspace::modify`]; an XADD that also trims records two writes, so that
//! notifications name them `xadd` then `xtrim`.
//!
//! XREAD and XREADGROUP take several keys: on the connection's shard they run here; across
//! shards, or to wait (BLOCK), they run as [`StreamRead`], a plan that checks every key
//! first (types, groups, `$` resolved), then serves the keys that have entries, then —
//! with BLOCK and nothing served — parks on every key: XREAD waits are told of any new
//! entry past their ID (every waiter is served, as in Redis); XREADGROUP waits are served
//! one at a time, in the order they came, with the key locked, so that one new entry goes
//! to the first consumer waiting for it.
//!
//! Effects: XADD logs its ID (and an approximate trim as the exact one it amounted to:
//! `XTRIM key MAXLEN <length>`); commands that change a group log what replays them —
//! `XCLAIM … TIME … RETRYCOUNT … FORCE JUSTID` per delivered entry, `XGROUP SETID … ENTRIESREAD`
//! for the group's position, `XGROUP CREATECONSUMER` (of a consumer XREADGROUP with NOACK
//! created) — as Redis 7.0 propagates them.

use std::sync::Arc;
use std::time::Duration;

use goblin_protocol::{Encoder, parse_i64};
use goblin_store::types::stream::{ENTRIES_READ_UNKNOWN, Group, NodeLimits, StreamEntry, Trim};
use goblin_store::{Keyspace, Millis, Stream, StreamId, Value, ValueMut, ValueRef};

use crate::errors::{self, ErrorReply};
use crate::table::args::is_keyword;
use crate::table::handler::{Args, ConnCtx, Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Park, Plan, PlanCx, PlanStart, Serve, Step, Watch};

use super::decimal;

/// A table handler that runs `$f` (a handler that returns its error) and sends the
/// error it returns.
macro_rules! sends_errors {
    ($f:path) => {
        Exec::Shard(|ctx, args| {
            if let Err(e) = $f(ctx, args) {
                e.send(&mut ctx.out);
            }
        })
    };
}

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::XADD, sends_errors!(xadd));
    table.add(&meta::XLEN, Exec::Shard(xlen));
    table.add(&meta::XRANGE, Exec::Shard(xrange));
    table.add(&meta::XREVRANGE, Exec::Shard(xrevrange));
    table.add(&meta::XDEL, Exec::Shard(xdel));
    table.add(&meta::XTRIM, Exec::Shard(xtrim));
    table.add(&meta::XSETID, sends_errors!(xsetid));
    table.add(&meta::XACK, Exec::Shard(xack));
    table.add(&meta::XPENDING, sends_errors!(xpending));
    table.add(&meta::XCLAIM, sends_errors!(xclaim));
    table.add(&meta::XAUTOCLAIM, sends_errors!(xautoclaim));
    table
        .add(&meta::XREAD, sends_errors!(xread))
        .cross_shard(read_plan, Locking::Keys)
        .plan_if(blocks);
    table
        .add(&meta::XREADGROUP, sends_errors!(xread))
        .cross_shard(read_plan, Locking::Keys)
        .plan_if(blocks);
    table.add_container(
        &meta::XGROUP,
        Exec::Container,
        &[
            ("create", None, sends_errors!(xgroup)),
            ("setid", None, sends_errors!(xgroup)),
            ("destroy", None, sends_errors!(xgroup)),
            ("createconsumer", None, sends_errors!(xgroup)),
            ("delconsumer", None, sends_errors!(xgroup)),
            ("help", None, Exec::Conn(xgroup_help)),
        ],
    );
    table.add_container(
        &meta::XINFO,
        Exec::Container,
        &[
            ("stream", None, sends_errors!(xinfo)),
            ("groups", None, sends_errors!(xinfo)),
            ("consumers", None, sends_errors!(xinfo)),
            ("help", None, Exec::Conn(xinfo_help)),
        ],
    );
}

/// `stream-node-max-bytes`: process-wide (CONFIG SET changes it for every shard),
/// read as entries are added.
pub static NODE_MAX_BYTES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(4096);
/// `stream-node-max-entries`, as [`NODE_MAX_BYTES`].
pub static NODE_MAX_ENTRIES: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(100);

/// How stream nodes are closed now (redis-server's defaults until configured).
pub fn limits() -> NodeLimits {
    use std::sync::atomic::Ordering::Relaxed;
    NodeLimits {
        max_bytes: NODE_MAX_BYTES.load(Relaxed),
        max_entries: NODE_MAX_ENTRIES.load(Relaxed),
    }
}

/// `COUNT` of a blocked XREAD without one (`XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: usize = 1000;

// --- Errors ---------------------------------------------------------------------------

const INVALID_ID: &[u8] = b"ERR Invalid stream ID specified as stream command argument";
const XADD_ZERO: &[u8] = b"ERR The ID specified in XADD must be greater than 0-0";
const XADD_SMALLER: &[u8] =
    b"ERR The ID specified in XADD is equal or smaller than the target stream top item";
const EXHAUSTED: &[u8] =
    b"ERR The stream has exhausted the last possible ID, unable to add more items";
const TOO_LARGE: &[u8] = b"ERR Elements are too large to be stored";
const MAXLEN_NEGATIVE: &[u8] = b"ERR The MAXLEN argument must be >= 0.";
const LIMIT_NEGATIVE: &[u8] = b"ERR The LIMIT argument must be >= 0.";
const BOTH_STRATEGIES: &[u8] =
    b"ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
const LIMIT_NO_STRATEGY: &[u8] =
    b"ERR syntax error, LIMIT cannot be used without specifying a trimming strategy";
const XTRIM_NO_STRATEGY: &[u8] = b"ERR syntax error, XTRIM must be called with a trimming strategy";
const LIMIT_NOT_APPROX: &[u8] =
    b"ERR syntax error, LIMIT cannot be used without the special ~ option";
const INVALID_START: &[u8] = b"ERR invalid start ID for the interval";
const INVALID_END: &[u8] = b"ERR invalid end ID for the interval";
const GROUP_ONLY_XREADGROUP: &[u8] =
    b"ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.";
const NOACK_ONLY_XREADGROUP: &[u8] =
    b"ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.";
const MISSING_GROUP: &[u8] = b"ERR Missing GROUP option for XREADGROUP";
const DOLLAR_IN_GROUP: &[u8] = b"ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.";
const GREATER_IN_XREAD: &[u8] = b"ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.";
const TIMEOUT_NEGATIVE: &[u8] = b"ERR timeout is negative";
const KEY_REQUIRED: &[u8] = b"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";
const BUSYGROUP: &[u8] = b"BUSYGROUP Consumer Group name already exists";
const ENTRIESREAD_RANGE: &[u8] = b"ERR value for ENTRIESREAD must be positive or -1";
const GROUP_GONE: &[u8] = b"NOGROUP the consumer group this client was blocked on no longer exists";
const UNBALANCED: &[u8] =
    b"ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.";
const STREAM_GONE: &[u8] = b"UNBLOCKED the stream key no longer exists";
const XSETID_SMALLER_THAN_DELETED: &[u8] =
    b"ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id";
const XSETID_ENTRIES_ADDED: &[u8] = b"ERR entries_added must be positive";
const XSETID_BELOW_TOP: &[u8] =
    b"ERR The ID specified in XSETID is smaller than the target stream top item";
const XSETID_BELOW_LENGTH: &[u8] =
    b"ERR The entries_added specified in XSETID is smaller than the target stream length";
const COUNT_POSITIVE: &[u8] = b"ERR COUNT must be > 0";

/// `-NOGROUP No such key '<key>' or consumer group '<group>'<suffix>`.
fn no_group(key: &[u8], group: &[u8], suffix: &str) -> ErrorReply {
    let mut msg = b"NOGROUP No such key '".to_vec();
    msg.extend_from_slice(errors::c_str(key));
    msg.extend_from_slice(b"' or consumer group '");
    msg.extend_from_slice(errors::c_str(group));
    msg.push(b'\'');
    msg.extend_from_slice(suffix.as_bytes());
    ErrorReply::Formatted(msg)
}

/// `-NOGROUP No such consumer group '<group>' for key name '<key>'`.
fn no_group_for_key(group: &[u8], key: &[u8]) -> ErrorReply {
    let mut msg = b"NOGROUP No such consumer group '".to_vec();
    msg.extend_from_slice(errors::c_str(group));
    msg.extend_from_slice(b"' for key name '");
    msg.extend_from_slice(errors::c_str(key));
    msg.push(b'\'');
    ErrorReply::Formatted(msg)
}

/// `ERR <text>` with a client's argument in it (`addReplyErrorFormat`).
fn formatted(prefix: &str, arg: &[u8], suffix: &str) -> ErrorReply {
    let mut msg = prefix.as_bytes().to_vec();
    msg.extend_from_slice(errors::c_str(arg));
    msg.extend_from_slice(suffix.as_bytes());
    ErrorReply::Formatted(msg)
}

// --- IDs --------------------------------------------------------------------------------

/// C's `strtoull` over the whole of `s` (leading spaces, a sign — a minus negates —,
/// digits), as `string2ull` falls back to it.
fn strtoull(s: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis's `string2ull`: a strict integer, else `strtoull`'s reading.
fn string2ull(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    if let Some(v) = parse_i64(s) {
        return u64::try_from(v).ok();
    }
    strtoull(s)
}

/// An ID as an argument: `-`, `+` (unless `strict`), `<ms>`, `<ms>-<seq>`, and with
/// `star` `<ms>-*`; a missing sequence is `missing_seq`. The second value says whether
/// the sequence was given (false for `<ms>-*`).
fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    star: bool,
) -> Result<(StreamId, bool), ErrorReply> {
    let invalid = ErrorReply::Fixed(INVALID_ID);
    if arg.len() > 127 {
        return Err(invalid);
    }
    // The text is read as a C string.
    let arg = errors::c_str(arg);
    if strict && (arg == b"-" || arg == b"+") {
        return Err(invalid);
    }
    if arg == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if arg == b"+" {
        return Ok((StreamId::MAX, true));
    }
    let (ms, seq) = match arg.iter().position(|&c| c == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = string2ull(ms).ok_or(invalid.clone())?;
    match seq {
        Some(b"*") if star => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => Ok((StreamId::new(ms, string2ull(seq).ok_or(invalid)?), true)),
        None => Ok((StreamId::new(ms, missing_seq), true)),
    }
}

/// `streamParseStrictIDOrReply`: no `-` or `+`.
fn strict_id(arg: &[u8]) -> Result<StreamId, ErrorReply> {
    parse_id_full(arg, 0, true, false).map(|(id, _)| id)
}

/// The IDs of the arguments from `from` on, strictly parsed (XDEL, XACK: all or none).
fn strict_ids(args: &Args<'_>, from: usize) -> Result<Vec<StreamId>, ErrorReply> {
    (from..args.len()).map(|i| strict_id(args.get(i))).collect()
}

/// `streamParseIntervalIDOrReply`: an ID or `-`/`+`, or `(ID` for an exclusive bound;
/// with whether it was exclusive.
fn interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), ErrorReply> {
    if arg.len() > 1 && arg[0] == b'(' {
        let (id, _) = parse_id_full(&arg[1..], missing_seq, true, false)?;
        Ok((id, true))
    } else {
        let (id, _) = parse_id_full(arg, missing_seq, false, false)?;
        Ok((id, false))
    }
}

/// A start bound: inclusive, after `(` the next ID.
fn start_bound(arg: &[u8]) -> Result<StreamId, ErrorReply> {
    let (id, ex) = interval_id(arg, 0)?;
    if ex {
        id.incr().ok_or(ErrorReply::Fixed(INVALID_START))
    } else {
        Ok(id)
    }
}

/// An end bound: inclusive, after `(` the previous ID.
fn end_bound(arg: &[u8]) -> Result<StreamId, ErrorReply> {
    let (id, ex) = interval_id(arg, u64::MAX)?;
    if ex {
        id.decr().ok_or(ErrorReply::Fixed(INVALID_END))
    } else {
        Ok(id)
    }
}

/// An ID as a bulk string.
fn id_bytes(id: StreamId) -> Vec<u8> {
    id.to_string().into_bytes()
}

/// Replies an ID (formatted on the stack: replies carry many).
fn reply_id(out: &mut Encoder<'_>, id: StreamId) {
    let (mut ms, mut seq) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (ms, seq) = (ms.format(id.ms).as_bytes(), seq.format(id.seq).as_bytes());
    let mut buf = [0u8; 41];
    buf[..ms.len()].copy_from_slice(ms);
    buf[ms.len()] = b'-';
    buf[ms.len() + 1..ms.len() + 1 + seq.len()].copy_from_slice(seq);
    out.bulk(&buf[..ms.len() + 1 + seq.len()]);
}

/// Milliseconds from `then` to `now` (times read from a file or set by TIME may be
/// anything: no overflow).
fn elapsed(now: Millis, then: u64) -> i64 {
    (now as i64).saturating_sub(then as i64)
}

/// Entry `id` for a claim: `None` when it is not in the stream; with JUSTID, its fields
/// are not read.
fn claimable(s: &Stream, id: StreamId, justid: bool) -> Option<Option<StreamEntry>> {
    if justid {
        s.contains(id).then_some(None)
    } else {
        s.get(id).map(Some)
    }
}

/// An integer argument (`getLongLongFromObjectOrReply`).
fn integer(arg: &[u8]) -> Result<i64, ErrorReply> {
    parse_i64(arg).ok_or(ErrorReply::Fixed(errors::NOT_INTEGER))
}

/// An integer argument with its own error text.
fn integer_or(arg: &[u8], text: &'static [u8]) -> Result<i64, ErrorReply> {
    parse_i64(arg).ok_or(ErrorReply::Fixed(text))
}

// --- Reading the keyspace ------------------------------------------------------------------

/// What a key holds, for stream commands.
enum Found<'a> {
    Stream(&'a Stream),
    Absent,
    WrongType,
}

fn lookup<'a>(db: &'a mut Keyspace, key: &[u8], now: Millis) -> Found<'a> {
    match db.get(key, now).map(|e| e.value()) {
        None => Found::Absent,
        Some(ValueRef::Stream(s)) => Found::Stream(s),
        Some(_) => Found::WrongType,
    }
}

/// Runs `f` on the stream at `key` (which the caller saw is a stream); `f` says whether
/// it changed it.
fn modify<R>(
    db: &mut Keyspace,
    key: &[u8],
    now: Millis,
    f: impl FnOnce(&mut Stream) -> (R, bool),
) -> Option<R> {
    db.modify(key, now, |v| match v {
        ValueMut::Boxed(Value::Stream(s)) => {
            let (r, changed) = f(s);
            (Some(r), changed)
        }
        _ => (None, false),
    })
    .flatten()
}

/// An entry: `[id, [field, value, …]]`.
fn reply_entry(out: &mut Encoder<'_>, e: &StreamEntry) {
    out.array(2);
    reply_id(out, e.id);
    out.array(e.fields.len());
    for f in &e.fields {
        out.bulk(f);
    }
}

fn reply_entries(out: &mut Encoder<'_>, entries: &[StreamEntry]) {
    out.array(entries.len());
    for e in entries {
        reply_entry(out, e);
    }
}

// --- XADD, XTRIM ------------------------------------------------------------------------

/// The trimming options of XADD and XTRIM.
#[derive(Clone, Copy, Debug)]
struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: i64,
}

/// XADD's options and where its ID is.
struct AddArgs {
    trim: TrimArgs,
    nomkstream: bool,
    /// The ID given (`None`: `*`), with whether its sequence was given.
    id: Option<(StreamId, bool)>,
    /// The index of the ID argument.
    id_at: usize,
}

/// `streamParseAddOrTrimArgsOrReply`.
fn parse_add_or_trim(args: &Args<'_>, xadd: bool) -> Result<AddArgs, ErrorReply> {
    let argc = args.len();
    let mut trim = TrimArgs {
        how: None,
        approx: false,
        limit: 0,
    };
    let mut limit_given = false;
    let mut nomkstream = false;
    let mut id = None;
    let mut i = 2;
    while i < argc {
        let more = argc - 1 - i;
        let opt = args.get(i);
        if xadd && opt == b"*" {
            break;
        } else if more >= 1 && (is_keyword(opt, "MAXLEN") || is_keyword(opt, "MINID")) {
            let maxlen = is_keyword(opt, "MAXLEN");
            if trim.how.is_some() {
                return Err(ErrorReply::Fixed(BOTH_STRATEGIES));
            }
            let next = args.get(i + 1);
            trim.approx = false;
            if more >= 2 && next == b"~" {
                trim.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let value = args.get(i + 1);
            trim.how = Some(if maxlen {
                let n = integer(value)?;
                if n < 0 {
                    return Err(ErrorReply::Fixed(MAXLEN_NEGATIVE));
                }
                Trim::MaxLen(n as u64)
            } else {
                Trim::MinId(strict_id(value)?)
            });
            i += 1;
        } else if more >= 1 && is_keyword(opt, "LIMIT") {
            let n = integer(args.get(i + 1))?;
            if n < 0 {
                return Err(ErrorReply::Fixed(LIMIT_NEGATIVE));
            }
            trim.limit = n;
            limit_given = true;
            i += 1;
        } else if xadd && is_keyword(opt, "NOMKSTREAM") {
            nomkstream = true;
        } else if xadd {
            id = Some(parse_id_full(opt, 0, true, true)?);
            break;
        } else {
            return Err(ErrorReply::Fixed(errors::SYNTAX));
        }
        i += 1;
    }
    if trim.limit != 0 && trim.how.is_none() {
        return Err(ErrorReply::Fixed(LIMIT_NO_STRATEGY));
    }
    if !xadd && trim.how.is_none() {
        return Err(ErrorReply::Fixed(XTRIM_NO_STRATEGY));
    }
    if limit_given {
        if !trim.approx {
            return Err(ErrorReply::Fixed(LIMIT_NOT_APPROX));
        }
    } else if trim.approx {
        // At most 100 nodes' worth; 10,000 when nodes have no entry limit.
        trim.limit = match 100i64.saturating_mul(limits().max_entries) {
            n if n <= 0 => 10_000,
            n => n.min(1_000_000),
        };
    } else {
        trim.limit = 0;
    }
    Ok(AddArgs {
        trim,
        nomkstream,
        id,
        id_at: i,
    })
}

/// The ID XADD gives its entry, or its error.
fn next_id(
    s: &Stream,
    given: Option<(StreamId, bool)>,
    now: Millis,
) -> Result<StreamId, ErrorReply> {
    let last = s.last_id;
    let id = match given {
        None => {
            if now > last.ms {
                StreamId::new(now, 0)
            } else {
                last.incr().ok_or(ErrorReply::Fixed(EXHAUSTED))?
            }
        }
        Some((id, true)) => id,
        Some((id, false)) => {
            if last.ms == id.ms {
                if last.seq == u64::MAX {
                    return Err(ErrorReply::Fixed(TOO_LARGE));
                }
                StreamId::new(id.ms, last.seq + 1)
            } else {
                id
            }
        }
    };
    if id <= last {
        return Err(ErrorReply::Fixed(XADD_SMALLER));
    }
    Ok(id)
}

/// Trims `key` as `trim` says (a separate write, so that it is named `xtrim`); how many
/// entries went, and the stream's length after.
fn trim_key(ctx: &mut ShardCtx<'_>, key: &[u8], trim: TrimArgs) -> (u64, u64) {
    let Some(how) = trim.how else { return (0, 0) };
    modify(ctx.db, key, ctx.now, |s| {
        let n = s.trim(how, trim.approx, trim.limit);
        ((n, s.length), n > 0)
    })
    .unwrap_or((0, 0))
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value
/// [field value ...]`
fn xadd(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let a = parse_add_or_trim(args, true)?;
    let fields_at = a.id_at + 1;
    let argc = args.len();
    if fields_at >= argc || (argc - fields_at) % 2 == 1 {
        return Err(ErrorReply::Formatted(errors::wrong_arity("xadd")));
    }
    if let Some((id, true)) = a.id
        && id.is_zero()
    {
        return Err(ErrorReply::Fixed(XADD_ZERO));
    }
    let key = args.get(1);
    let now = ctx.now;
    match lookup(ctx.db, key, now) {
        Found::WrongType => return Err(ErrorReply::Fixed(errors::WRONGTYPE)),
        Found::Absent if a.nomkstream => {
            ctx.out.null();
            return Ok(());
        }
        Found::Stream(s) if s.last_id == StreamId::MAX => {
            return Err(ErrorReply::Fixed(EXHAUSTED));
        }
        _ => {}
    }
    let fields: Vec<&[u8]> = (fields_at..argc).map(|i| args.get(i)).collect();
    let added = ctx
        .db
        .upsert(
            key,
            now,
            || Value::Stream(Box::default()),
            |v| match v {
                ValueMut::Boxed(Value::Stream(s)) => match next_id(s, a.id, now) {
                    Ok(id) => match s.add(id, &fields, limits()) {
                        Ok(()) => (Some(Ok(id)), true),
                        Err(_) => (Some(Err(ErrorReply::Fixed(TOO_LARGE))), false),
                    },
                    Err(e) => (Some(Err(e)), false),
                },
                _ => (None, false),
            },
        )
        .flatten()
        .ok_or(ErrorReply::Fixed(errors::WRONGTYPE))??;
    reply_id(&mut ctx.out, added);
    let (trimmed, length) = trim_key(ctx, key, a.trim);
    if ctx.logging() {
        let id = id_bytes(added);
        let mut argv: Vec<&[u8]> = vec![b"XADD", key, &id];
        argv.extend_from_slice(&fields);
        ctx.log(&argv);
        if trimmed > 0 {
            ctx.log(&[b"XTRIM", key, b"MAXLEN", &decimal(length as i64)]);
        }
    }
    Ok(())
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`: how many entries went.
fn xtrim(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let a = match parse_add_or_trim(args, false) {
        Ok(a) => a,
        Err(e) => return e.send(&mut ctx.out),
    };
    let key = args.get(1);
    match lookup(ctx.db, key, ctx.now) {
        Found::Absent => return ctx.out.integer(0),
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::Stream(_) => {}
    }
    let (trimmed, length) = trim_key(ctx, key, a.trim);
    if trimmed > 0 && a.trim.approx && ctx.logging() {
        ctx.log(&[b"XTRIM", key, b"MAXLEN", &decimal(length as i64)]);
    }
    ctx.out.integer(trimmed as i64);
}

/// `XLEN key`
fn xlen(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match lookup(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.integer(0),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
        Found::Stream(s) => ctx.out.integer(s.length as i64),
    }
}

/// XRANGE and XREVRANGE.
fn range_command(ctx: &mut ShardCtx<'_>, args: &Args<'_>, rev: bool) {
    let parsed = (|| {
        let (start_arg, end_arg) = if rev {
            (args.get(3), args.get(2))
        } else {
            (args.get(2), args.get(3))
        };
        let start = start_bound(start_arg)?;
        let end = end_bound(end_arg)?;
        let mut count: i64 = -1;
        let mut j = 4;
        while j < args.len() {
            if is_keyword(args.get(j), "COUNT") && j + 1 < args.len() {
                count = integer(args.get(j + 1))?.max(0);
                j += 2;
            } else {
                return Err(ErrorReply::Fixed(errors::SYNTAX));
            }
        }
        Ok((start, end, count))
    })();
    let (start, end, count) = match parsed {
        Ok(p) => p,
        Err(e) => return e.send(&mut ctx.out),
    };
    match lookup(ctx.db, args.get(1), ctx.now) {
        Found::Absent => ctx.out.array(0),
        Found::WrongType => ctx.out.error(errors::WRONGTYPE),
        Found::Stream(_) if count == 0 => ctx.out.null_array(),
        Found::Stream(s) => {
            let entries = s.range(start, end, rev, count.max(0) as usize);
            reply_entries(&mut ctx.out, &entries);
        }
    }
}

/// `XRANGE key start end [COUNT count]`
fn xrange(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    range_command(ctx, args, false);
}

/// `XREVRANGE key end start [COUNT count]`
fn xrevrange(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    range_command(ctx, args, true);
}

/// `XDEL key id [id ...]`: how many entries were deleted.
fn xdel(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let key = args.get(1);
    match lookup(ctx.db, key, ctx.now) {
        Found::Absent => return ctx.out.integer(0),
        Found::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Found::Stream(_) => {}
    }
    let ids = match strict_ids(args, 2) {
        Ok(ids) => ids,
        Err(e) => return e.send(&mut ctx.out),
    };
    let n = modify(ctx.db, key, ctx.now, |s| {
        let n = s.delete(&ids);
        (n, n > 0)
    })
    .unwrap_or(0);
    ctx.out.integer(n as i64);
}

/// `XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]`
fn xsetid(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let id = strict_id(args.get(2))?;
    let mut entries_added: i64 = -1;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i);
        if is_keyword(opt, "ENTRIESADDED") && more > 0 {
            entries_added = integer(args.get(i + 1))?;
            if entries_added < 0 {
                return Err(ErrorReply::Fixed(XSETID_ENTRIES_ADDED));
            }
        } else if is_keyword(opt, "MAXDELETEDID") && more > 0 {
            max_deleted = strict_id(args.get(i + 1))?;
            if id < max_deleted {
                return Err(ErrorReply::Fixed(XSETID_SMALLER_THAN_DELETED));
            }
        } else {
            return Err(ErrorReply::Fixed(errors::SYNTAX));
        }
        i += 2;
    }
    let key = args.get(1);
    let s = match lookup(ctx.db, key, ctx.now) {
        Found::Absent => return Err(ErrorReply::Fixed(errors::NO_SUCH_KEY)),
        Found::WrongType => return Err(ErrorReply::Fixed(errors::WRONGTYPE)),
        Found::Stream(s) => s,
    };
    if s.length > 0 {
        let top = s.edge(false).unwrap_or(StreamId::MIN);
        if id < top {
            return Err(ErrorReply::Fixed(XSETID_BELOW_TOP));
        }
        if entries_added != -1 && s.length > entries_added as u64 {
            return Err(ErrorReply::Fixed(XSETID_BELOW_LENGTH));
        }
    }
    with_group(ctx, key, |s, _| {
        s.last_id = id;
        if entries_added != -1 {
            s.entries_added = entries_added as u64;
        }
        if !max_deleted.is_zero() {
            s.max_deleted = max_deleted;
        }
        ((), true)
    });
    ctx.out.ok();
    Ok(())
}

// --- Groups -----------------------------------------------------------------------------

/// Whether the stream at `key` has group `group` (`Err(WRONGTYPE)` for another type).
fn has_group(db: &mut Keyspace, key: &[u8], group: &[u8], now: Millis) -> Result<bool, ErrorReply> {
    match lookup(db, key, now) {
        Found::WrongType => Err(ErrorReply::Fixed(errors::WRONGTYPE)),
        Found::Absent => Ok(false),
        Found::Stream(s) => Ok(s.groups.contains_key(group)),
    }
}

/// Runs `f` on the stream at `key` (whose group the caller found), with the command's
/// timestamp; `f` says whether it changed the stream. The write is quiet: Redis changes a
/// stream's groups (and XSETID its last ID) without touching the clients that WATCH it.
fn with_group<R>(
    ctx: &mut ShardCtx<'_>,
    key: &[u8],
    f: impl FnOnce(&mut Stream, Millis) -> (R, bool),
) -> Option<R> {
    let now = ctx.now;
    ctx.db.quietly(|db| modify(db, key, now, |s| f(s, now)))
}

/// `XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER …`
fn xgroup(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let sub = args.get(1);
    let argc = args.len();
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_UNKNOWN;
    if is_keyword(sub, "CREATE") && argc >= 5 {
        let mut i = 5;
        while i < argc {
            if is_keyword(args.get(i), "MKSTREAM") {
                mkstream = true;
                i += 1;
            } else if is_keyword(args.get(i), "ENTRIESREAD") && i + 1 < argc {
                entries_read = integer(args.get(i + 1))?;
                if entries_read < 0 && entries_read != ENTRIES_READ_UNKNOWN {
                    return Err(ErrorReply::Fixed(ENTRIESREAD_RANGE));
                }
                i += 2;
            } else {
                return Err(ErrorReply::Formatted(errors::subcommand_syntax(
                    b"xgroup", sub,
                )));
            }
        }
    }
    let (key, group) = (args.get(2), args.get(3));
    let now = ctx.now;
    let (exists, group_exists, last_id) = match lookup(ctx.db, key, now) {
        Found::WrongType => return Err(ErrorReply::Fixed(errors::WRONGTYPE)),
        Found::Absent => (false, false, StreamId::MIN),
        Found::Stream(s) => (true, s.groups.contains_key(group), s.last_id),
    };
    if !mkstream {
        if !exists {
            return Err(ErrorReply::Fixed(KEY_REQUIRED));
        }
        if !group_exists
            && (is_keyword(sub, "SETID")
                || is_keyword(sub, "CREATECONSUMER")
                || is_keyword(sub, "DELCONSUMER"))
        {
            return Err(no_group_for_key(group, key));
        }
    }
    if is_keyword(sub, "CREATE") && (5..=8).contains(&argc) {
        let id = if args.get(4) == b"$" {
            last_id
        } else {
            strict_id(args.get(4))?
        };
        if group_exists {
            return Err(ErrorReply::Fixed(BUSYGROUP));
        }
        // (Quiet but for MKSTREAM's new key.)
        let created = ctx
            .db
            .quietly(|db| {
                db.upsert(
                    key,
                    now,
                    || Value::Stream(Box::default()),
                    |v| match v {
                        ValueMut::Boxed(Value::Stream(s)) => {
                            s.groups
                                .insert(group.to_vec(), Group::new(id, entries_read));
                            (true, true)
                        }
                        _ => (false, false),
                    },
                )
            })
            .unwrap_or(false);
        if created {
            ctx.out.ok();
        } else {
            ctx.out.error(errors::WRONGTYPE);
        }
    } else if is_keyword(sub, "SETID") && (argc == 5 || argc == 7) {
        let id = if args.get(4) == b"$" {
            last_id
        } else {
            parse_id_full(args.get(4), 0, false, false)?.0
        };
        if argc == 7 {
            if !is_keyword(args.get(5), "ENTRIESREAD") {
                return Err(ErrorReply::Formatted(errors::subcommand_syntax(
                    b"xgroup", sub,
                )));
            }
            entries_read = integer(args.get(6))?;
            if entries_read < 0 && entries_read != ENTRIES_READ_UNKNOWN {
                return Err(ErrorReply::Fixed(ENTRIESREAD_RANGE));
            }
        }
        with_group(ctx, key, |s, _| {
            if let Some(g) = s.groups.get_mut(group) {
                g.last_id = id;
                g.entries_read = entries_read;
            }
            ((), true)
        });
        ctx.out.ok();
    } else if is_keyword(sub, "DESTROY") && argc == 4 {
        if group_exists {
            with_group(ctx, key, |s, _| (s.groups.remove(group), true));
            ctx.out.integer(1);
        } else {
            ctx.out.integer(0);
        }
    } else if is_keyword(sub, "CREATECONSUMER") && argc == 5 {
        let consumer = args.get(4);
        let created = with_group(ctx, key, |s, now| {
            let created = s
                .groups
                .get_mut(group)
                .is_some_and(|g| g.consumer(consumer, now).1);
            (created, created)
        })
        .unwrap_or(false);
        ctx.out.integer(i64::from(created));
    } else if is_keyword(sub, "DELCONSUMER") && argc == 5 {
        let consumer = args.get(4);
        let pending = with_group(ctx, key, |s, _| {
            let pending = s
                .groups
                .get_mut(group)
                .and_then(|g| g.delete_consumer(consumer));
            (pending, pending.is_some())
        })
        .flatten();
        ctx.out.integer(pending.unwrap_or(0) as i64);
    } else {
        return Err(ErrorReply::Formatted(errors::subcommand_syntax(
            b"xgroup", sub,
        )));
    }
    Ok(())
}

fn xgroup_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
        "HELP",
        "    Prints this help.",
    ];
    super::reply_help(ctx, LINES);
}

/// `XACK key group id [id ...]`: how many were acknowledged.
fn xack(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (key, group) = (args.get(1), args.get(2));
    match has_group(ctx.db, key, group, ctx.now) {
        Ok(true) => {}
        // No key or group: nothing to acknowledge (the IDs are not even read).
        Ok(false) => return ctx.out.integer(0),
        Err(e) => return e.send(&mut ctx.out),
    }
    let ids = match strict_ids(args, 3) {
        Ok(ids) => ids,
        Err(e) => return e.send(&mut ctx.out),
    };
    let acked = with_group(ctx, key, |s, _| {
        let g = s.groups.get_mut(group);
        let n = g.map_or(0, |g| ids.iter().filter(|&&id| g.ack(id)).count());
        (n, n > 0)
    })
    .unwrap_or(0);
    ctx.out.integer(acked as i64);
}

/// `XPENDING key group [[IDLE min-idle-time] start end count [consumer]]`
fn xpending(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let argc = args.len();
    let summary = argc == 3;
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(ErrorReply::Fixed(errors::SYNTAX));
    }
    let (mut start, mut end, mut count, mut min_idle) = (StreamId::MIN, StreamId::MAX, 0i64, 0i64);
    let mut consumer = None;
    if argc >= 6 {
        let mut at = 3;
        if is_keyword(args.get(3), "IDLE") {
            min_idle = integer(args.get(4))?;
            if argc < 8 {
                return Err(ErrorReply::Fixed(errors::SYNTAX));
            }
            at += 2;
        }
        count = integer(args.get(at + 2))?.max(0);
        start = start_bound(args.get(at))?;
        end = end_bound(args.get(at + 1))?;
        if at + 3 < argc {
            consumer = Some(args.get(at + 3));
        }
    }
    let (key, group) = (args.get(1), args.get(2));
    let now = ctx.now;
    let s = match lookup(ctx.db, key, now) {
        Found::WrongType => return Err(ErrorReply::Fixed(errors::WRONGTYPE)),
        Found::Absent => return Err(no_group(key, group, "")),
        Found::Stream(s) => s,
    };
    let Some(g) = s.groups.get(group) else {
        return Err(no_group(key, group, ""));
    };
    let out = &mut ctx.out;
    if summary {
        out.array(4);
        out.integer(g.pel.len() as i64);
        match (g.pel.keys().next(), g.pel.keys().next_back()) {
            (Some(&first), Some(&last)) => {
                reply_id(out, first);
                reply_id(out, last);
                let with: Vec<(&Vec<u8>, usize)> = g
                    .consumers
                    .iter()
                    .filter(|(_, c)| !c.pel.is_empty())
                    .map(|(n, c)| (n, c.pel.len()))
                    .collect();
                out.array(with.len());
                for (name, n) in with {
                    out.array(2);
                    out.bulk(name);
                    out.bulk_int(n as i64);
                }
            }
            _ => {
                out.null();
                out.null();
                out.null_array();
            }
        }
        return Ok(());
    }
    let ids: Box<dyn Iterator<Item = StreamId> + '_> = match consumer {
        Some(name) => match g.consumers.get(name) {
            None => {
                out.array(0);
                return Ok(());
            }
            Some(c) => Box::new(c.pel.range(start..).copied()),
        },
        None => Box::new(g.pel.range(start..).map(|(id, _)| *id)),
    };
    let mut rows = Vec::new();
    for id in ids {
        if count == 0 || id > end {
            break;
        }
        let Some(nack) = g.pel.get(&id) else { continue };
        let idle = elapsed(now, nack.delivery_time);
        if min_idle != 0 && idle < min_idle {
            continue;
        }
        count -= 1;
        rows.push((id, nack.consumer.clone(), idle.max(0), nack.delivery_count));
    }
    out.array(rows.len());
    for (id, name, idle, deliveries) in rows {
        out.array(4);
        reply_id(out, id);
        out.bulk(&name);
        out.integer(idle);
        out.integer(deliveries as i64);
    }
    Ok(())
}

/// A command created its consumer on the way (XREADGROUP, XCLAIM, XAUTOCLAIM): the key
/// records a second write, which notifications name `xgroup-createconsumer`.
fn consumer_created(ctx: &mut ShardCtx<'_>, key: &[u8]) {
    with_group(ctx, key, |_, _| ((), true));
}

/// Logs an effect built as owned arguments.
fn log_owned(ctx: &mut ShardCtx<'_>, argv: Vec<Vec<u8>>) {
    let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    ctx.log(&argv);
}

/// Logs a pending entry's removal (an entry deleted from the stream): an XACK.
fn log_forget(ctx: &mut ShardCtx<'_>, key: &[u8], group: &[u8], id: StreamId) {
    if ctx.logging() {
        ctx.log(&[b"XACK", key, group, &id_bytes(id)]);
    }
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]`
fn xclaim(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    let now = ctx.now;
    if !has_group(ctx.db, key, group, now)? {
        return Err(no_group(key, group, ""));
    }
    let min_idle = integer_or(
        args.get(4),
        b"ERR Invalid min-idle-time argument for XCLAIM",
    )?
    .max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < args.len() {
        match strict_id(args.get(j)) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let (mut force, mut justid) = (false, false);
    let mut retrycount: i64 = -1;
    let mut delivery: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        if is_keyword(opt, "FORCE") {
            force = true;
        } else if is_keyword(opt, "JUSTID") {
            justid = true;
        } else if is_keyword(opt, "IDLE") && more > 0 {
            j += 1;
            delivery = (now as i64).saturating_sub(integer_or(
                args.get(j),
                b"ERR Invalid IDLE option argument for XCLAIM",
            )?);
        } else if is_keyword(opt, "TIME") && more > 0 {
            j += 1;
            delivery = integer_or(args.get(j), b"ERR Invalid TIME option argument for XCLAIM")?;
        } else if is_keyword(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            retrycount = integer_or(
                args.get(j),
                b"ERR Invalid RETRYCOUNT option argument for XCLAIM",
            )?;
        } else if is_keyword(opt, "LASTID") && more > 0 {
            j += 1;
            last_id = strict_id(args.get(j))?;
        } else {
            return Err(formatted("ERR Unrecognized XCLAIM option '", opt, "'"));
        }
        j += 1;
    }
    let delivery = if delivery < 0 || delivery > now as i64 {
        now
    } else {
        delivery as u64
    };
    // (claimed entries or IDs, forgotten IDs, consumer created, group's last ID moved)
    type Claimed = (
        Vec<(StreamId, Option<StreamEntry>, u64)>,
        Vec<StreamId>,
        bool,
        Option<StreamId>,
    );
    let outcome: Option<Claimed> = with_group(ctx, key, |s, now| {
        let mut claimed = Vec::new();
        let mut forgotten = Vec::new();
        let mut created = false;
        let mut moved = None;
        let entries: Vec<Option<Option<StreamEntry>>> =
            ids.iter().map(|&id| claimable(s, id, justid)).collect();
        let Some(g) = s.groups.get_mut(group) else {
            return ((claimed, forgotten, created, moved), false);
        };
        if last_id > g.last_id {
            g.last_id = last_id;
            moved = Some(last_id);
        }
        for (&id, entry) in ids.iter().zip(entries) {
            let Some(entry) = entry else {
                if g.ack(id) {
                    forgotten.push(id);
                }
                continue;
            };
            // A pending entry must have been idle long enough; FORCE makes one anew.
            match g.pel.get(&id).map(|n| n.delivery_time) {
                None if force => {}
                None => continue,
                Some(time) if min_idle > 0 && elapsed(now, time) < min_idle => continue,
                Some(_) => {}
            }
            // A pending entry FORCE makes starts delivered once (`streamCreateNACK`).
            let prior = g.pel.get(&id).map_or(1, |n| n.delivery_count);
            let count = if retrycount >= 0 {
                retrycount as u64
            } else if !justid {
                prior.saturating_add(1)
            } else {
                prior
            };
            created |= g.deliver(id, consumer, delivery, count);
            claimed.push((id, entry, count));
        }
        if let Some(c) = g.consumers.get_mut(consumer)
            && !claimed.is_empty()
        {
            c.seen_time = now;
        }
        let changed = !claimed.is_empty() || !forgotten.is_empty() || moved.is_some();
        ((claimed, forgotten, created, moved), changed)
    });
    let (claimed, forgotten, created, moved) = outcome.unwrap_or_default();
    if created {
        consumer_created(ctx, key);
    }
    ctx.out.array(claimed.len());
    for (id, entry, _) in &claimed {
        if justid {
            reply_id(&mut ctx.out, *id);
        } else {
            match entry {
                Some(e) => reply_entry(&mut ctx.out, e),
                None => ctx.out.null(),
            }
        }
    }
    // (The consumer it created is not logged, as in Redis 7.0: the XCLAIMs of what it
    // claimed create it.)
    if ctx.logging() {
        for id in forgotten {
            log_forget(ctx, key, group, id);
        }
        for (id, _, count) in claimed {
            log_owned(
                ctx,
                claim_effect(key, group, consumer, id, delivery, count, moved),
            );
        }
        if let Some(id) = moved {
            ctx.log(&[b"XGROUP", b"SETID", key, group, &id_bytes(id)]);
        }
    }
    ctx.effects_only();
    Ok(())
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]`:
/// `[next cursor, claimed, deleted IDs]`.
fn xautoclaim(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    let min_idle = integer_or(
        args.get(4),
        b"ERR Invalid min-idle-time argument for XAUTOCLAIM",
    )?
    .max(0);
    let start = start_bound(args.get(5))?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        if is_keyword(opt, "COUNT") && more > 0 {
            let max = i64::MAX / 16;
            count = match parse_i64(args.get(j + 1)) {
                Some(n) if (1..=max).contains(&n) => n,
                _ => return Err(ErrorReply::Fixed(COUNT_POSITIVE)),
            };
            j += 1;
        } else if is_keyword(opt, "JUSTID") {
            justid = true;
        } else {
            return Err(ErrorReply::Fixed(errors::SYNTAX));
        }
        j += 1;
    }
    let now = ctx.now;
    if !has_group(ctx.db, key, group, now)? {
        return Err(no_group(key, group, ""));
    }
    type Auto = (
        StreamId,
        Vec<(StreamId, Option<StreamEntry>, u64)>,
        Vec<StreamId>,
        bool,
    );
    let outcome: Option<Auto> = with_group(ctx, key, |s, now| {
        let mut claimed = Vec::new();
        let mut deleted = Vec::new();
        let mut created = false;
        let mut attempts = count * 10;
        let mut count = count;
        let mut next = StreamId::MIN;
        // The PEL is walked from `start` one ID at a time (it changes as the walk goes).
        let mut cursor = Some(start);
        loop {
            let pending = cursor.and_then(|c| {
                let g = s.groups.get(group)?;
                g.pel.range(c..).next().map(|(id, _)| *id)
            });
            if attempts == 0 || count == 0 {
                next = pending.unwrap_or(StreamId::MIN);
                break;
            }
            attempts -= 1;
            let Some(id) = pending else { break };
            cursor = id.incr();
            let entry = claimable(s, id, justid);
            let Some(g) = s.groups.get_mut(group) else {
                break;
            };
            let Some(entry) = entry else {
                g.ack(id);
                deleted.push(id);
                count -= 1;
                continue;
            };
            let Some(nack) = g.pel.get(&id) else { continue };
            if min_idle > 0 && elapsed(now, nack.delivery_time) < min_idle {
                continue;
            }
            let prior = nack.delivery_count;
            let deliveries = if justid {
                prior
            } else {
                prior.saturating_add(1)
            };
            created |= g.deliver(id, consumer, now, deliveries);
            claimed.push((id, entry, deliveries));
            count -= 1;
        }
        if !claimed.is_empty()
            && let Some(c) = s
                .groups
                .get_mut(group)
                .and_then(|g| g.consumers.get_mut(consumer))
        {
            c.seen_time = now;
        }
        let changed = !claimed.is_empty() || !deleted.is_empty();
        ((next, claimed, deleted, created), changed)
    });
    let (next, claimed, deleted, created) = outcome.unwrap_or_default();
    if created {
        consumer_created(ctx, key);
    }
    let out = &mut ctx.out;
    out.array(3);
    reply_id(out, next);
    out.array(claimed.len());
    for (id, entry, _) in &claimed {
        match entry {
            Some(e) => reply_entry(out, e),
            None => reply_id(out, *id),
        }
    }
    out.array(deleted.len());
    for id in &deleted {
        reply_id(out, *id);
    }
    if ctx.logging() {
        for id in deleted {
            log_forget(ctx, key, group, id);
        }
        for (id, _, deliveries) in claimed {
            log_owned(
                ctx,
                claim_effect(key, group, consumer, id, now, deliveries, None),
            );
        }
    }
    ctx.effects_only();
    Ok(())
}

// --- XINFO ------------------------------------------------------------------------------

fn reply_lag(out: &mut Encoder<'_>, s: &Stream, g: &Group) {
    match s.lag(g) {
        Some(lag) => out.integer(lag),
        None => out.null(),
    }
}

fn reply_entries_read(out: &mut Encoder<'_>, g: &Group) {
    if g.entries_read == ENTRIES_READ_UNKNOWN {
        out.null();
    } else {
        out.integer(g.entries_read);
    }
}

/// `XINFO STREAM key [FULL [COUNT count]]`, `XINFO GROUPS key`, `XINFO CONSUMERS key group`
fn xinfo(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let sub = args.get(1);
    let key = args.get(2);
    let now = ctx.now;
    let s = match lookup(ctx.db, key, now) {
        Found::Absent => return Err(ErrorReply::Fixed(errors::NO_SUCH_KEY)),
        Found::WrongType => return Err(ErrorReply::Fixed(errors::WRONGTYPE)),
        Found::Stream(s) => s,
    };
    let out = &mut ctx.out;
    if is_keyword(sub, "CONSUMERS") && args.len() == 4 {
        let group = args.get(3);
        let Some(g) = s.groups.get(group) else {
            return Err(no_group_for_key(group, key));
        };
        out.array(g.consumers.len());
        for (name, c) in &g.consumers {
            out.map(3);
            out.bulk(b"name");
            out.bulk(name);
            out.bulk(b"pending");
            out.integer(c.pel.len() as i64);
            out.bulk(b"idle");
            out.integer(elapsed(now, c.seen_time).max(0));
        }
    } else if is_keyword(sub, "GROUPS") && args.len() == 3 {
        out.array(s.groups.len());
        for (name, g) in &s.groups {
            out.map(6);
            out.bulk(b"name");
            out.bulk(name);
            out.bulk(b"consumers");
            out.integer(g.consumers.len() as i64);
            out.bulk(b"pending");
            out.integer(g.pel.len() as i64);
            out.bulk(b"last-delivered-id");
            reply_id(out, g.last_id);
            out.bulk(b"entries-read");
            reply_entries_read(out, g);
            out.bulk(b"lag");
            reply_lag(out, s, g);
        }
    } else if is_keyword(sub, "STREAM") {
        let rest = args.len() - 3;
        let mut full = false;
        let mut count: i64 = 10;
        if rest > 0 {
            let bad = (rest != 1 && rest != 3)
                || !is_keyword(args.get(3), "FULL")
                || (rest == 3 && !is_keyword(args.get(4), "COUNT"));
            if bad {
                return Err(ErrorReply::Formatted(errors::subcommand_syntax(
                    b"xinfo", sub,
                )));
            }
            full = true;
            if rest == 3 {
                count = integer(args.get(5))?;
                if count < 0 {
                    count = 10;
                }
            }
        }
        out.map(if full { 9 } else { 10 });
        out.bulk(b"length");
        out.integer(s.length as i64);
        out.bulk(b"radix-tree-keys");
        out.integer(s.node_count() as i64);
        out.bulk(b"radix-tree-nodes");
        out.integer(s.node_count() as i64 + 1);
        out.bulk(b"last-generated-id");
        reply_id(out, s.last_id);
        out.bulk(b"max-deleted-entry-id");
        reply_id(out, s.max_deleted);
        out.bulk(b"entries-added");
        out.integer(s.entries_added as i64);
        out.bulk(b"recorded-first-entry-id");
        reply_id(out, s.first_id);
        if !full {
            out.bulk(b"groups");
            out.integer(s.groups.len() as i64);
            for (name, first) in [(&b"first-entry"[..], true), (b"last-entry", false)] {
                out.bulk(name);
                match s.edge_entry(first) {
                    Some(e) => reply_entry(out, &e),
                    None => out.null(),
                }
            }
            return Ok(());
        }
        let limit = count as usize;
        let take = |n: usize| if limit == 0 { n } else { n.min(limit) };
        out.bulk(b"entries");
        reply_entries(out, &s.range(StreamId::MIN, StreamId::MAX, false, limit));
        out.bulk(b"groups");
        out.array(s.groups.len());
        for (name, g) in &s.groups {
            out.map(7);
            out.bulk(b"name");
            out.bulk(name);
            out.bulk(b"last-delivered-id");
            reply_id(out, g.last_id);
            out.bulk(b"entries-read");
            reply_entries_read(out, g);
            out.bulk(b"lag");
            reply_lag(out, s, g);
            out.bulk(b"pel-count");
            out.integer(g.pel.len() as i64);
            out.bulk(b"pending");
            out.array(take(g.pel.len()));
            for (id, nack) in g.pel.iter().take(take(g.pel.len())) {
                out.array(4);
                reply_id(out, *id);
                out.bulk(&nack.consumer);
                out.integer(nack.delivery_time as i64);
                out.integer(nack.delivery_count as i64);
            }
            out.bulk(b"consumers");
            out.array(g.consumers.len());
            for (cname, c) in &g.consumers {
                out.map(4);
                out.bulk(b"name");
                out.bulk(cname);
                out.bulk(b"seen-time");
                out.integer(c.seen_time as i64);
                out.bulk(b"pel-count");
                out.integer(c.pel.len() as i64);
                out.bulk(b"pending");
                out.array(take(c.pel.len()));
                for id in c.pel.iter().take(take(c.pel.len())) {
                    let nack = g.pel.get(id);
                    out.array(3);
                    reply_id(out, *id);
                    out.integer(nack.map_or(0, |n| n.delivery_time as i64));
                    out.integer(nack.map_or(0, |n| n.delivery_count as i64));
                }
            }
        }
    } else {
        return Err(ErrorReply::Formatted(errors::subcommand_syntax(
            b"xinfo", sub,
        )));
    }
    Ok(())
}

fn xinfo_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
        "HELP",
        "    Prints this help.",
    ];
    super::reply_help(ctx, LINES);
}

// --- XREAD, XREADGROUP ----------------------------------------------------------------------

/// The ID a read starts after, per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadFrom {
    /// After this ID (XREAD, or a consumer's history with XREADGROUP).
    After(StreamId),
    /// `>`: entries never delivered to the group.
    New,
}

/// XREAD's and XREADGROUP's arguments.
#[derive(Clone, Debug)]
struct ReadArgs {
    /// GROUP group consumer.
    group: Option<(Vec<u8>, Vec<u8>)>,
    noack: bool,
    /// COUNT (`0`: no limit).
    count: usize,
    /// BLOCK: `None` without it; `Some(None)` forever.
    block: Option<Option<Duration>>,
    keys: Vec<(Vec<u8>, ReadFrom)>,
}

/// Whether an XREAD or XREADGROUP invocation has BLOCK (and so may wait).
fn blocks(_: &crate::runtime::server::Shared, args: &Args<'_>) -> bool {
    let mut i = 1;
    while i < args.len() {
        let a = args.get(i);
        if is_keyword(a, "STREAMS") {
            return false;
        }
        if is_keyword(a, "BLOCK") {
            return true;
        }
        i += 1;
    }
    false
}

/// Parses XREAD or XREADGROUP (without looking at the keys).
fn parse_read(args: &Args<'_>) -> Result<ReadArgs, ErrorReply> {
    let xreadgroup = args.get(0).len() == 10;
    let argc = args.len();
    let mut r = ReadArgs {
        group: None,
        noack: false,
        count: 0,
        block: None,
        keys: Vec::new(),
    };
    let mut streams_at = 0;
    let mut i = 1;
    while i < argc {
        let more = argc - i - 1;
        let o = args.get(i);
        if is_keyword(o, "BLOCK") && more > 0 {
            i += 1;
            let ms =
                parse_i64(args.get(i)).ok_or(ErrorReply::Fixed(errors::TIMEOUT_NOT_INTEGER))?;
            if ms < 0 {
                return Err(ErrorReply::Fixed(TIMEOUT_NEGATIVE));
            }
            r.block = Some((ms > 0).then(|| Duration::from_millis(ms as u64)));
        } else if is_keyword(o, "COUNT") && more > 0 {
            i += 1;
            r.count = integer(args.get(i))?.max(0) as usize;
        } else if is_keyword(o, "STREAMS") && more > 0 {
            streams_at = i + 1;
            let n = argc - streams_at;
            if !n.is_multiple_of(2) {
                // (XREADGROUP's says XREAD and `$` too, in 7.0.)
                return Err(ErrorReply::Fixed(UNBALANCED));
            }
            break;
        } else if is_keyword(o, "GROUP") && more >= 2 {
            if !xreadgroup {
                return Err(ErrorReply::Fixed(GROUP_ONLY_XREADGROUP));
            }
            r.group = Some((args.get(i + 1).to_vec(), args.get(i + 2).to_vec()));
            i += 2;
        } else if is_keyword(o, "NOACK") {
            if !xreadgroup {
                return Err(ErrorReply::Fixed(NOACK_ONLY_XREADGROUP));
            }
            r.noack = true;
        } else {
            return Err(ErrorReply::Fixed(errors::SYNTAX));
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(ErrorReply::Fixed(errors::SYNTAX));
    }
    if xreadgroup && r.group.is_none() {
        return Err(ErrorReply::Fixed(MISSING_GROUP));
    }
    let n = (argc - streams_at) / 2;
    for k in 0..n {
        r.keys.push((
            args.get(streams_at + k).to_vec(),
            ReadFrom::After(StreamId::MIN),
        ));
    }
    Ok(r)
}

/// Checks key `k` of a read as `xreadCommand` does before serving anything: its type,
/// its group, its ID (`$` resolved now). `Err` is the command's error.
fn check_key(
    db: &mut Keyspace,
    r: &ReadArgs,
    key: &[u8],
    id_arg: &[u8],
    now: Millis,
) -> Result<ReadFrom, ErrorReply> {
    let stream = match lookup(db, key, now) {
        Found::WrongType => return Err(ErrorReply::Fixed(errors::WRONGTYPE)),
        Found::Absent => None,
        Found::Stream(s) => Some(s),
    };
    if let Some((group, _)) = &r.group
        && !stream.is_some_and(|s| s.groups.contains_key(group))
    {
        return Err(no_group(key, group, " in XREADGROUP with GROUP option"));
    }
    if id_arg == b"$" {
        if r.group.is_some() {
            return Err(ErrorReply::Fixed(DOLLAR_IN_GROUP));
        }
        return Ok(ReadFrom::After(stream.map_or(StreamId::MIN, |s| s.last_id)));
    }
    if id_arg == b">" {
        if r.group.is_none() {
            return Err(ErrorReply::Fixed(GREATER_IN_XREAD));
        }
        return Ok(ReadFrom::New);
    }
    Ok(ReadFrom::After(strict_id(id_arg)?))
}

/// What a read served from one key: its entries (a consumer's history may hold IDs of
/// deleted entries: `None`).
type Served = Vec<(StreamId, Option<Vec<Vec<u8>>>)>;

/// Serves key `key` of a read (its checks passed): `None` when it has nothing for the
/// reader. `blocked`: a waiting reader woken by a change of the key (Redis's
/// `serveClientsBlockedOnStreamKey`), whose group's position is read again.
fn serve_key(
    ctx: &mut ShardCtx<'_>,
    r: &ReadArgs,
    key: &[u8],
    from: ReadFrom,
    blocked: bool,
) -> Result<Option<Served>, ErrorReply> {
    let now = ctx.now;
    let Found::Stream(s) = lookup(ctx.db, key, now) else {
        // A consumer waits on a group of a stream that is no longer there.
        if blocked && r.group.is_some() {
            return Err(ErrorReply::Fixed(STREAM_GONE));
        }
        return Ok(None);
    };
    let Some((group, consumer)) = &r.group else {
        // XREAD.
        let ReadFrom::After(gt) = from else {
            return Ok(None);
        };
        let serve = if blocked {
            s.last_id > gt
        } else {
            has_entry_after(s, gt)
        };
        if !serve {
            return Ok(None);
        }
        let count = if blocked && r.count == 0 {
            BLOCKED_DEFAULT_COUNT
        } else {
            r.count
        };
        let start = gt.incr().unwrap_or(StreamId::MIN);
        let entries = s.range(start, StreamId::MAX, false, count);
        return Ok(Some(
            entries
                .into_iter()
                .map(|e| (e.id, Some(e.fields)))
                .collect(),
        ));
    };
    let Some(g) = s.groups.get(group) else {
        return Err(if blocked {
            ErrorReply::Fixed(GROUP_GONE)
        } else {
            no_group(key, group, " in XREADGROUP with GROUP option")
        });
    };
    let history = match from {
        ReadFrom::After(id) => Some(id),
        _ => None,
    };
    let gt = g.last_id;
    let serve = match history {
        Some(_) => true,
        None if blocked => s.last_id > gt,
        None => has_entry_after(s, gt),
    };
    let count = if blocked && r.count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        r.count
    };
    if !serve {
        return Ok(None);
    }
    let noack = r.noack;
    let (group, consumer) = (group.clone(), consumer.clone());
    let logging = ctx.logging();
    // (what was served, the consumer was created, the effects)
    let outcome = with_group(ctx, key, |s, now| {
        let mut effects: Vec<Vec<Vec<u8>>> = Vec::new();
        let created = match s.groups.get_mut(&group) {
            Some(g) => {
                let (c, created) = g.consumer(&consumer, now);
                c.seen_time = now;
                created
            }
            None => false,
        };
        // (Redis 7.0 propagates the new consumer only with NOACK: otherwise the
        // XCLAIMs of what it is served create it.)
        if created && logging && noack {
            effects.push(vec![
                b"XGROUP".to_vec(),
                b"CREATECONSUMER".to_vec(),
                key.to_vec(),
                group.clone(),
                consumer.clone(),
            ]);
        }
        let mut served: Served = Vec::new();
        if let Some(after) = history {
            let start = after.incr().unwrap_or(StreamId::MIN);
            let ids: Vec<StreamId> = s
                .groups
                .get(&group)
                .and_then(|g| g.consumers.get(&consumer))
                .map(|c| {
                    let limit = if count == 0 { usize::MAX } else { count };
                    c.pel.range(start..).copied().take(limit).collect()
                })
                .unwrap_or_default();
            for id in ids {
                if count != 0 && served.len() >= count {
                    break;
                }
                match s.get(id) {
                    Some(e) => {
                        if let Some(n) = s.groups.get_mut(&group).and_then(|g| g.pel.get_mut(&id)) {
                            n.delivery_time = now;
                            n.delivery_count = n.delivery_count.saturating_add(1);
                            if logging {
                                effects.push(claim_effect(
                                    key,
                                    &group,
                                    &consumer,
                                    id,
                                    now,
                                    n.delivery_count,
                                    None,
                                ));
                            }
                        }
                        served.push((id, Some(e.fields)));
                    }
                    None => served.push((id, None)),
                }
            }
        } else {
            let start = gt.incr().unwrap_or(StreamId::MIN);
            let entries = s.range(start, StreamId::MAX, false, count);
            for e in entries {
                s.advance_group(&group, e.id);
                if !noack && let Some(g) = s.groups.get_mut(&group) {
                    g.deliver(e.id, &consumer, now, 1);
                    if logging {
                        effects.push(claim_effect(
                            key,
                            &group,
                            &consumer,
                            e.id,
                            now,
                            1,
                            Some(e.id),
                        ));
                    }
                }
                served.push((e.id, Some(e.fields)));
            }
            // (Without NOACK, the XCLAIMs' LASTID carry the group's position, as in
            // Redis 7.0.)
            if logging
                && noack
                && !served.is_empty()
                && let Some(g) = s.groups.get(&group)
            {
                effects.push(vec![
                    b"XGROUP".to_vec(),
                    b"SETID".to_vec(),
                    key.to_vec(),
                    group.clone(),
                    id_bytes(g.last_id),
                    b"ENTRIESREAD".to_vec(),
                    decimal(g.entries_read),
                ]);
            }
        }
        ((served, effects, created), true)
    });
    let Some((served, effects, created)) = outcome else {
        return Ok(None);
    };
    if created {
        consumer_created(ctx, key);
    }
    for e in effects {
        log_owned(ctx, e);
    }
    Ok(Some(served))
}

/// The XCLAIM that replays a delivery.
fn claim_effect(
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    id: StreamId,
    time: u64,
    count: u64,
    last_id: Option<StreamId>,
) -> Vec<Vec<u8>> {
    let mut argv: Vec<Vec<u8>> = [
        b"XCLAIM".as_slice(),
        key,
        group,
        consumer,
        b"0",
        &id_bytes(id),
        b"TIME",
        &decimal(time as i64),
        b"RETRYCOUNT",
        &decimal(count as i64),
        b"FORCE",
        b"JUSTID",
    ]
    .iter()
    .map(|a| a.to_vec())
    .collect();
    if let Some(last) = last_id {
        argv.push(b"LASTID".to_vec());
        argv.push(id_bytes(last));
    }
    argv
}

/// One key's part of a read's reply: `[key, entries]` (in RESP3 a map's key and value).
fn reply_served(out: &mut Encoder<'_>, resp3: bool, key: &[u8], served: &Served) {
    if !resp3 {
        out.array(2);
    }
    out.bulk(key);
    out.array(served.len());
    for (id, fields) in served {
        out.array(2);
        reply_id(out, *id);
        match fields {
            Some(f) => {
                out.array(f.len());
                for x in f {
                    out.bulk(x);
                }
            }
            None => out.null_array(),
        }
    }
}

/// The reply of a read that served `parts`.
fn reply_read(out: &mut Encoder<'_>, parts: &[(Vec<u8>, Served)]) {
    let resp3 = out.version() == goblin_protocol::Version::Resp3;
    if resp3 {
        out.map(parts.len());
    } else {
        out.array(parts.len());
    }
    for (key, served) in parts {
        reply_served(out, resp3, key, served);
    }
}

/// XREAD and XREADGROUP on one shard.
fn xread(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let mut r = parse_read(args)?;
    let n = r.keys.len();
    let streams_at = args.len() - 2 * n;
    for k in 0..n {
        let from = check_key(
            ctx.db,
            &r,
            args.get(streams_at + k),
            args.get(streams_at + n + k),
            ctx.now,
        )?;
        r.keys[k].1 = from;
    }
    let mut parts = Vec::new();
    for k in 0..n {
        let (key, from) = r.keys[k].clone();
        if let Some(served) = serve_key(ctx, &r, &key, from, false)? {
            parts.push((key, served));
        }
    }
    if !parts.is_empty() {
        reply_read(&mut ctx.out, &parts);
    } else if r.block.is_some() && ctx.may_wait() {
        ctx.wait();
    } else {
        ctx.out.null_array();
    }
    ctx.effects_only();
    Ok(())
}

/// Whether the last ID of a stream at `key` is past the ID in `arg` (16 bytes): an XREAD
/// wait's readiness once it waits (every waiter can be served), as Redis serves its
/// blocked readers — an entry added and deleted in one transaction wakes them to nothing.
fn read_ready(db: &mut Keyspace, key: &[u8], now: Millis, arg: &[u8]) -> usize {
    let Ok(gt) = <[u8; 16]>::try_from(arg) else {
        return 0;
    };
    match lookup(db, key, now) {
        Found::Stream(s) if s.last_id > StreamId::from_be_bytes(gt) => usize::MAX,
        _ => 0,
    }
}

/// Whether a stream at `key` has an entry past the ID in `arg`: an XREAD wait's test as
/// it registers, the one it made before waiting (a stream whose entries past the ID were
/// deleted keeps its reader waiting, as in Redis).
fn read_ready_now(db: &mut Keyspace, key: &[u8], now: Millis, arg: &[u8]) -> usize {
    let Ok(gt) = <[u8; 16]>::try_from(arg) else {
        return 0;
    };
    match lookup(db, key, now) {
        Found::Stream(s) if has_entry_after(s, StreamId::from_be_bytes(gt)) => usize::MAX,
        _ => 0,
    }
}

/// Whether stream `s` holds an entry with an ID greater than `gt` (Redis's
/// `streamLastValidID` compared).
fn has_entry_after(s: &Stream, gt: StreamId) -> bool {
    s.length > 0 && s.edge(false).is_some_and(|top| top > gt)
}

/// Whether a stream at `key` has entries its group `arg` has not delivered — or the group
/// or the stream is gone, which the waiter is then told: an XREADGROUP wait's readiness,
/// one waiter at a time.
fn group_ready(db: &mut Keyspace, key: &[u8], now: Millis, arg: &[u8]) -> usize {
    match lookup(db, key, now) {
        Found::Stream(s) => match s.groups.get(arg) {
            None => 1,
            Some(g) => usize::from(s.last_id > g.last_id),
        },
        _ => 1,
    }
}

/// [`group_ready`] as the wait registers: an entry past the group's last ID, not only a
/// last ID past it.
fn group_ready_now(db: &mut Keyspace, key: &[u8], now: Millis, arg: &[u8]) -> usize {
    match lookup(db, key, now) {
        Found::Stream(s) => match s.groups.get(arg) {
            None => 1,
            Some(g) => usize::from(has_entry_after(s, g.last_id)),
        },
        _ => 1,
    }
}

/// XREAD and XREADGROUP across shards, or waiting.
#[derive(Debug)]
struct StreamRead {
    r: Arc<ReadArgs>,
    /// The IDs as given, per key.
    id_args: Arc<Vec<Vec<u8>>>,
    state: ReadState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadState {
    Start,
    Checked,
    Served,
    Parked,
    Woken,
}

/// What a shard's hop of a read found, per key, in the order of its keys.
#[derive(Debug)]
enum ReadOut {
    /// Each key checked (and, when the check settles it, served: `served` is then
    /// `Some`, with the keys the shard served — none if one of its keys failed).
    Checked(
        Vec<(usize, Result<ReadFrom, ErrorReply>)>,
        Option<Vec<(usize, Option<Served>)>>,
    ),
    Served(Vec<(usize, Result<Option<Served>, ErrorReply>)>),
}

impl StreamRead {
    /// Key indexes by shard, in ascending key order.
    fn by_shard(&self, cx: &PlanCx<'_>) -> Vec<(usize, Vec<usize>)> {
        cx.slots
            .group_by_shard(self.r.keys.iter().map(|(k, _)| k.as_slice()).enumerate())
    }

    /// Checks every key; where that settles it, serves too: an XREAD changes nothing, so
    /// each shard reads its keys at once (a failing key elsewhere only discards what was
    /// read); an XREADGROUP whose keys are all on one shard is checked whole there.
    /// Otherwise an XREADGROUP is served in a second step, once every key passed.
    fn check(&mut self, cx: &PlanCx<'_>) -> Step {
        let shards = self.by_shard(cx);
        let settles = self.r.group.is_none() || shards.len() == 1;
        let hops = shards
            .into_iter()
            .map(|(shard, idx)| {
                let (r, ids) = (Arc::clone(&self.r), Arc::clone(&self.id_args));
                Hop::run(shard, move |ctx| {
                    let checked: Vec<(usize, Result<ReadFrom, ErrorReply>)> = idx
                        .into_iter()
                        .map(|i| (i, check_key(ctx.db, &r, &r.keys[i].0, &ids[i], ctx.now)))
                        .collect();
                    let served = (settles && checked.iter().all(|(_, c)| c.is_ok())).then(|| {
                        checked
                            .iter()
                            .filter_map(|(i, c)| c.as_ref().ok().map(|from| (*i, *from)))
                            .map(|(i, from)| {
                                let served = serve_key(ctx, &r, &r.keys[i].0, from, false);
                                // (A check that passed leaves nothing to fail but a
                                // stream gone, which is not possible under the lock.)
                                (i, served.ok().flatten())
                            })
                            .collect()
                    });
                    HopOut::Other(Box::new(ReadOut::Checked(checked, served)))
                })
            })
            .collect();
        self.state = ReadState::Checked;
        Step::Hops(hops)
    }

    fn serve(&mut self, cx: &PlanCx<'_>) -> Step {
        let hops = self
            .by_shard(cx)
            .into_iter()
            .map(|(shard, idx)| {
                let r = Arc::clone(&self.r);
                Hop::run(shard, move |ctx| {
                    let out = idx
                        .into_iter()
                        .map(|i| {
                            let (key, from) = &r.keys[i];
                            (i, serve_key(ctx, &r, key, *from, false))
                        })
                        .collect();
                    HopOut::Other(Box::new(ReadOut::Served(out)))
                })
            })
            .collect();
        self.state = ReadState::Served;
        Step::Hops(hops)
    }

    /// Waits on every key (a read without BLOCK answers nil instead).
    fn park(&mut self, cx: &PlanCx<'_>) -> Step {
        let Some(timeout) = self.r.block else {
            return cx.done(|out| out.null_array());
        };
        self.state = ReadState::Parked;
        let keys = self
            .r
            .keys
            .iter()
            .map(|(key, from)| match &self.r.group {
                Some((group, _)) => Watch {
                    key: key.clone(),
                    ready: Some(group_ready),
                    ready_first: Some(group_ready_now),
                    serve: Serve::Lock,
                    arg: group.clone(),
                    with: None,
                },
                None => {
                    let gt = match from {
                        ReadFrom::After(id) => *id,
                        _ => StreamId::MAX,
                    };
                    Watch {
                        key: key.clone(),
                        ready: Some(read_ready),
                        ready_first: Some(read_ready_now),
                        serve: Serve::Notify,
                        arg: gt.to_be_bytes().to_vec(),
                        with: None,
                    }
                }
            })
            .collect();
        Step::Park(Park {
            keys,
            timeout,
            internal: false,
        })
    }
}

fn read_out(result: HopOut) -> Option<ReadOut> {
    match result {
        HopOut::Other(any) => any.downcast::<ReadOut>().ok().map(|b| *b),
        _ => None,
    }
}

impl Plan for StreamRead {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match self.state {
            ReadState::Start => self.check(cx),
            ReadState::Checked => {
                let mut checked: Vec<(usize, Result<ReadFrom, ErrorReply>)> = Vec::new();
                let mut served: Option<Vec<(usize, Option<Served>)>> = Some(Vec::new());
                for result in results {
                    if let Some(ReadOut::Checked(c, s)) = read_out(result) {
                        checked.extend(c);
                        match (s, served.as_mut()) {
                            (Some(s), Some(all)) => all.extend(s),
                            _ => served = None,
                        }
                    }
                }
                checked.sort_by_key(|(i, _)| *i);
                let mut r = (*self.r).clone();
                for (i, c) in checked {
                    match c {
                        Ok(from) => r.keys[i].1 = from,
                        Err(e) => return cx.done(|out| e.send(out)),
                    }
                }
                self.r = Arc::new(r);
                match served {
                    Some(mut served) => {
                        served.sort_by_key(|(i, _)| *i);
                        let parts: Vec<(Vec<u8>, Served)> = served
                            .into_iter()
                            .filter_map(|(i, s)| s.map(|s| (self.r.keys[i].0.clone(), s)))
                            .collect();
                        if parts.is_empty() {
                            self.park(cx)
                        } else {
                            cx.done(|out| reply_read(out, &parts))
                        }
                    }
                    None => self.serve(cx),
                }
            }
            ReadState::Served => {
                let mut served: Vec<(usize, Result<Option<Served>, ErrorReply>)> = Vec::new();
                for result in results {
                    if let Some(ReadOut::Served(v)) = read_out(result) {
                        served.extend(v);
                    }
                }
                served.sort_by_key(|(i, _)| *i);
                let mut parts = Vec::new();
                for (i, s) in served {
                    match s {
                        Ok(Some(s)) => parts.push((self.r.keys[i].0.clone(), s)),
                        Ok(None) => {}
                        Err(e) => return cx.done(|out| e.send(out)),
                    }
                }
                if !parts.is_empty() {
                    return cx.done(|out| reply_read(out, &parts));
                }
                self.park(cx)
            }
            ReadState::Parked => match results.into_iter().next() {
                Some(HopOut::Woken(key)) => {
                    let Some(i) = self.r.keys.iter().position(|(k, _)| *k == key) else {
                        return self.park(cx);
                    };
                    self.state = ReadState::Woken;
                    let r = Arc::clone(&self.r);
                    Step::Hops(vec![Hop::run(cx.slots.shard_of_key(&key), move |ctx| {
                        let (key, from) = &r.keys[i];
                        let out = serve_key(ctx, &r, key, *from, true);
                        HopOut::Other(Box::new(ReadOut::Served(vec![(i, out)])))
                    })])
                }
                _ => cx.done(|out| out.null_array()),
            },
            ReadState::Woken => {
                let served = results.into_iter().next().and_then(read_out);
                match served {
                    Some(ReadOut::Served(mut v)) => match v.pop() {
                        Some((i, Ok(Some(s)))) => {
                            let parts = vec![(self.r.keys[i].0.clone(), s)];
                            cx.done(|out| reply_read(out, &parts))
                        }
                        Some((_, Err(e))) => cx.done(|out| e.send(out)),
                        _ => self.park(cx),
                    },
                    _ => self.park(cx),
                }
            }
        }
    }
}

/// XREAD's and XREADGROUP's plan.
fn read_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let r = parse_read(args).map_err(Vec::from)?;
    let n = r.keys.len();
    let streams_at = args.len() - 2 * n;
    let id_args = (0..n)
        .map(|k| args.get(streams_at + n + k).to_vec())
        .collect();
    Ok(Box::new(StreamRead {
        r: Arc::new(r),
        id_args: Arc::new(id_args),
        state: ReadState::Start,
    }))
}

// --- Rewriting ------------------------------------------------------------------------------

/// The commands that rebuild stream `s` at `key` (Redis's `rewriteStreamObject`): its
/// entries by XADD (an empty stream by `XADD … MAXLEN 0`), its IDs and counters by
/// XSETID, its groups by XGROUP CREATE, their pending entries by XCLAIM, consumers with
/// none by XGROUP CREATECONSUMER.
pub fn rebuild_commands(key: &[u8], s: &Stream) -> Vec<Vec<Vec<u8>>> {
    let v = |parts: &[&[u8]]| parts.iter().map(|p| p.to_vec()).collect::<Vec<Vec<u8>>>();
    let mut out = Vec::new();
    let entries = s.range(StreamId::MIN, StreamId::MAX, false, 0);
    if entries.is_empty() {
        out.push(v(&[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]));
    }
    for e in entries {
        let mut argv = v(&[b"XADD", key, &id_bytes(e.id)]);
        argv.extend(e.fields);
        out.push(argv);
    }
    out.push(v(&[
        b"XSETID",
        key,
        &id_bytes(s.last_id),
        b"ENTRIESADDED",
        &decimal(s.entries_added as i64),
        b"MAXDELETEDID",
        &id_bytes(s.max_deleted),
    ]));
    for (name, g) in &s.groups {
        out.push(v(&[
            b"XGROUP",
            b"CREATE",
            key,
            name,
            &id_bytes(g.last_id),
            b"ENTRIESREAD",
            &decimal(g.entries_read),
        ]));
        for (id, nack) in &g.pel {
            out.push(claim_effect(
                key,
                name,
                &nack.consumer,
                *id,
                nack.delivery_time,
                nack.delivery_count,
                None,
            ));
        }
        for (cname, c) in &g.consumers {
            if c.pel.is_empty() {
                out.push(v(&[b"XGROUP", b"CREATECONSUMER", key, name, cname]));
            }
        }
    }
    out
}
