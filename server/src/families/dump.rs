//! DUMP and RESTORE: a value in Redis 7.0's serialization format (its RDB type and body,
//! the RDB version, a CRC-64), so that what redis-server DUMPs RESTOREs here and the
//! other way round (`goblin_store::rdb::dump`, `goblin_store::rdb::undump`; Goblin
//! writes the plain forms redis-server re-encodes as it loads, and reads every encoding
//! redis-server writes).
//!
//! RESTORE's effect is itself with a relative TTL made absolute (`RESTORE key <unix ms>
//! payload [its options] ABSTTL`), as redis-server propagates it; a RESTORE whose
//! absolute TTL has passed creates nothing, and logs the DEL of the key it replaced.
//!
//! IDLETIME and FREQ set the key's last access or its counter, as the eviction policy
//! keeps one or the other (OBJECT IDLETIME and FREQ read them).

use goblin_protocol::parse_i64;
use goblin_store::rdb::{self, PayloadError};

use crate::errors::{self, ErrorReply};
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};

use super::decimal;

/// Registers DUMP and RESTORE.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::DUMP, Exec::Shard(dump));
    table.add(&meta::RESTORE, Exec::Shard(restore));
}

const BUSYKEY: &[u8] = b"BUSYKEY Target key name already exists.";
const BAD_TTL: &[u8] = b"ERR Invalid TTL value, must be >= 0";
const BAD_IDLETIME: &[u8] = b"ERR Invalid IDLETIME value, must be >= 0";
const BAD_FREQ: &[u8] = b"ERR Invalid FREQ value, must be >= 0 and <= 255";
const BAD_PAYLOAD: &[u8] = b"ERR DUMP payload version or checksum are wrong";
const BAD_DATA: &[u8] = b"ERR Bad data format";

/// `DUMP key`: the serialized value, or nil.
fn dump(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match ctx.db.get(args.get(1), ctx.now) {
        Some(entry) => {
            let payload = rdb::dump(entry.value());
            ctx.out.bulk(&payload);
        }
        None => ctx.out.null(),
    }
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ
/// frequency]`
pub(crate) fn restore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if let Err(e) = restore_checked(ctx, args) {
        e.send(&mut ctx.out);
    }
}

fn restore_checked(ctx: &mut ShardCtx<'_>, args: &Args<'_>) -> Result<(), ErrorReply> {
    let integer = |arg: &[u8]| parse_i64(arg).ok_or(ErrorReply::Fixed(errors::NOT_INTEGER));
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (None, None);
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        let opt = args.get(j);
        if is_keyword(opt, "REPLACE") {
            replace = true;
        } else if is_keyword(opt, "ABSTTL") {
            absttl = true;
        } else if is_keyword(opt, "IDLETIME") && more >= 1 && freq.is_none() {
            let n = integer(args.get(j + 1))?;
            if n < 0 {
                return Err(ErrorReply::Fixed(BAD_IDLETIME));
            }
            idle = Some(n);
            j += 1;
        } else if is_keyword(opt, "FREQ") && more >= 1 && idle.is_none() {
            let n = integer(args.get(j + 1))?;
            if !(0..=255).contains(&n) {
                return Err(ErrorReply::Fixed(BAD_FREQ));
            }
            freq = Some(n);
            j += 1;
        } else {
            return Err(ErrorReply::Fixed(errors::SYNTAX));
        }
        j += 1;
    }
    let key = args.get(1);
    let now = ctx.now;
    if !replace && ctx.db.contains(key, now) {
        return Err(ErrorReply::Fixed(BUSYKEY));
    }
    let ttl = integer(args.get(2))?;
    if ttl < 0 {
        return Err(ErrorReply::Fixed(BAD_TTL));
    }
    let value = rdb::undump(args.get(3)).map_err(|e| match e {
        PayloadError::VersionOrChecksum => ErrorReply::Fixed(BAD_PAYLOAD),
        PayloadError::BadData(why) => {
            // As redis-server logs a payload it refuses (at verbose level).
            crate::log!(Verbose, "Internal error in RDB reading offset 0 -> {why}");
            ErrorReply::Fixed(BAD_DATA)
        }
    })?;
    let deleted = replace && ctx.db.delete(key, now);
    let expire_at = if ttl == 0 {
        None
    } else if absttl {
        Some(ttl as u64)
    } else {
        // A relative TTL counts from the clock as the key arrives, not from the command's
        // timestamp (the iteration's, possibly older): a key MIGRATE moves — a claim's
        // lease — never ends earlier here than it would have where it came from.
        Some(now.max(crate::clock::now_ms()).saturating_add(ttl as u64))
    };
    if expire_at.is_some_and(|at| at < now) && ctx.db.expires() {
        // Already expired: nothing is created (the key it replaced is gone). (On a
        // replica it is: its master's DEL removes it.)
        if deleted {
            ctx.log(&[b"DEL", key]);
        }
        ctx.out.ok();
        return Ok(());
    }
    ctx.db.insert(key, value, expire_at, now);
    ctx.db
        .set_access_of(key, idle.map(|n| n as u64), freq.map(|n| n as u8), now);
    if ctx.logging() {
        // Its own arguments, the TTL made absolute when it was relative.
        let at = decimal(expire_at.map_or(0, |at| at as i64));
        let mut effect = vec![b"RESTORE".as_slice(), key, &at, args.get(3)];
        effect.extend((4..args.len()).map(|i| args.get(i)));
        if ttl != 0 && !absttl {
            effect.push(b"ABSTTL");
        }
        ctx.log(&effect);
    }
    ctx.out.ok();
    Ok(())
}
