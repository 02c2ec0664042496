//! The command families, one module each; each exposes `register(&mut CommandTable)`,
//! with its commands' handlers and, for commands whose keys can span shards, their
//! cross-shard plans.
//!
//! Also here: what several families share — expiry-argument parsing with Redis's rules.

pub mod acl;
pub mod bitmaps;
pub mod cluster;
pub mod connection;
pub mod debug;
pub mod diagnostics;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod goblin;
pub mod hashes;
pub mod hyperloglog;
pub mod keys;
pub mod lists;
pub mod lolwut;
pub mod migrate;
pub mod multi;
pub mod notify;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod sorted_sets;
pub mod standalone;
pub mod streams;
pub mod strings;

use std::time::Duration;

use goblin_protocol::parse_i64;
use goblin_store::Millis;

use crate::errors::{self, ErrorReply};
use crate::longdouble::LongDouble;
use crate::table::CommandTable;

/// The command table with every family registered.
///
/// # Errors
/// A command whose keys can span shards has no plan (see [`CommandTable::build`]).
pub fn table() -> Result<CommandTable, String> {
    CommandTable::build(register_all)
}

/// Registers every family.
pub fn register_all(table: &mut CommandTable) {
    connection::register(table);
    server::register(table);
    replication::register(table);
    strings::register(table);
    keys::register(table);
    multi::register(table);
    goblin::register(table);
    hashes::register(table);
    lists::register(table);
    sets::register(table);
    sorted_sets::register(table);
    persistence::register(table);
    diagnostics::register(table);
    pubsub::register(table);
    streams::register(table);
    dump::register(table);
    bitmaps::register(table);
    sort::register(table);
    lolwut::register(table);
    debug::register(table);
    acl::register(table);
    geo::register(table);
    hyperloglog::register(table);
    scripting::register(table);
    functions::register(table);
    standalone::register(table);
    cluster::register(table);
    migrate::register(table);
}

/// A HELP subcommand's reply: its lines as simple strings, as redis-server sends them.
pub(crate) fn reply_help(ctx: &mut crate::table::handler::ConnCtx<'_>, lines: &[&str]) {
    let mut out = ctx.reply();
    out.array(lines.len());
    for line in lines {
        out.simple(line.as_bytes());
    }
}

/// The unit and base of an expiry argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireUnit {
    /// Seconds from now (`EX`).
    Seconds,
    /// Milliseconds from now (`PX`).
    Millis,
    /// A Unix time in seconds (`EXAT`).
    UnixSeconds,
    /// A Unix time in milliseconds (`PXAT`).
    UnixMillis,
}

/// Parses a positive expiry argument into an absolute deadline, with redis-server 7's
/// checks and errors (`getExpireMillisecondsOrReply`): not an integer → "value is not an
/// integer or out of range"; zero, negative, or overflowing once converted to an
/// absolute millisecond time → "invalid expire time in '<command>' command".
///
/// # Errors
/// The error reply.
pub fn parse_expire(
    value: &[u8],
    unit: ExpireUnit,
    now: Millis,
    command: &str,
) -> Result<Millis, ErrorReply> {
    let n = parse_i64(value).ok_or(ErrorReply::Fixed(errors::NOT_INTEGER))?;
    let invalid = || errors::invalid_expire(command);
    let seconds = matches!(unit, ExpireUnit::Seconds | ExpireUnit::UnixSeconds);
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(invalid());
    }
    let ms = if seconds { n * 1000 } else { n };
    let at = match unit {
        ExpireUnit::Seconds | ExpireUnit::Millis => {
            ms.checked_add(now as i64).ok_or_else(invalid)?
        }
        ExpireUnit::UnixSeconds | ExpireUnit::UnixMillis => ms,
    };
    Ok(at as Millis)
}

/// Database `db` (SELECT, MOVE, COPY's DB option), one of `databases`.
///
/// # Errors
/// `ERR DB index is out of range` for any other.
pub fn select_db(db: i64, databases: usize) -> Result<usize, ErrorReply> {
    usize::try_from(db)
        .ok()
        .filter(|&db| db < databases)
        .ok_or_else(|| errors::DB_INDEX_OUT_OF_RANGE.into())
}

/// A database argument as MOVE and COPY read it (`getIntFromObjectOrReply`, then the
/// range).
///
/// # Errors
/// `getIntFromObjectOrReply`'s errors for anything but an `int`, else `ERR DB index is
/// out of range` for a number that is no database.
pub fn db_argument(arg: &[u8], databases: usize) -> Result<usize, ErrorReply> {
    match parse_i64(arg) {
        None => Err(errors::NOT_INTEGER.into()),
        Some(n) if i32::try_from(n).is_err() => Err(errors::INT_OUT_OF_RANGE.into()),
        Some(n) => select_db(n, databases),
    }
}

/// The longest wait a timeout asks for that Goblin keeps as a deadline; longer ones wait
/// forever (redis-server 7.0 adds any timeout to its clock, and one past the end of time
/// never comes).
/// The most repeated random picks SRANDMEMBER and ZRANDMEMBER answer (a negative
/// count): each is at least six bytes of reply, so this many already make 100 MB.
/// redis-server streams any count until its memory runs out; a count past this is refused
/// instead, and nothing is allocated for it.
pub const RANDOM_PICKS_MAX: u64 = 1 << 24;

pub(crate) const LONGEST_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A blocking command's timeout, in seconds as a float, read as redis-server 7.0.15's
/// `getTimeoutFromObjectOrReply` reads it: `strtold`, times 1000 and rounded up in `long
/// double`, then cast to a 64-bit integer — which turns an out-of-range product into the
/// most negative one. 0 (or anything that rounds up to it, like -0.0001) waits forever
/// (`None`).
///
/// # Errors
/// "timeout is not a float or out of range", "timeout is negative" (also for ±∞ and
/// products past the 64-bit range, as the cast makes them).
pub fn parse_timeout(arg: &[u8]) -> Result<Option<Duration>, ErrorReply> {
    let seconds = LongDouble::parse(arg).ok_or(ErrorReply::Fixed(errors::TIMEOUT_NOT_FLOAT))?;
    let ms = seconds
        .times_1000_ceil()
        .ok_or(ErrorReply::Fixed(errors::TIMEOUT_NEGATIVE))?;
    if ms < 0 {
        return Err(ErrorReply::Fixed(errors::TIMEOUT_NEGATIVE));
    }
    let wait = Duration::from_millis(ms as u64);
    Ok((ms > 0 && wait <= LONGEST_TIMEOUT).then_some(wait))
}

/// The decimal form of `n`, for logging effects.
pub fn decimal(n: i64) -> Vec<u8> {
    itoa::Buffer::new().format(n).as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What redis-server 7.0.15 answers to `BLPOP k <timeout>` (checked against it).
    #[test]
    fn timeouts_as_redis_reads_them() {
        let ms = |n| Ok(Some(Duration::from_millis(n)));
        assert_eq!(parse_timeout(b"0"), Ok(None));
        assert_eq!(parse_timeout(b"0.1"), ms(100));
        assert_eq!(parse_timeout(b".5"), ms(500));
        assert_eq!(parse_timeout(b"+1"), ms(1000));
        assert_eq!(parse_timeout(b"0x10"), ms(16_000));
        assert_eq!(parse_timeout(b"0.0001"), ms(1), "rounded up");
        assert_eq!(parse_timeout(b"1e-3"), ms(1));
        assert_eq!(
            parse_timeout(b"-0.0001"),
            Ok(None),
            "rounds up to -0: forever"
        );
        assert_eq!(
            parse_timeout(b"-0.001"),
            Ok(None),
            "-1 ms in long double is -0.99…"
        );
        assert_eq!(
            parse_timeout(b"9.2e15"),
            Ok(None),
            "past the end of time: forever"
        );
        let fixed = |t: &'static [u8]| Err(ErrorReply::Fixed(t));
        assert_eq!(parse_timeout(b"x"), fixed(errors::TIMEOUT_NOT_FLOAT));
        assert_eq!(parse_timeout(b"1 "), fixed(errors::TIMEOUT_NOT_FLOAT));
        assert_eq!(parse_timeout(b"nan"), fixed(errors::TIMEOUT_NOT_FLOAT));
        assert_eq!(parse_timeout(b"-1"), fixed(errors::TIMEOUT_NEGATIVE));
        assert_eq!(parse_timeout(b"inf"), fixed(errors::TIMEOUT_NEGATIVE));
        assert_eq!(parse_timeout(b"1e16"), fixed(errors::TIMEOUT_NEGATIVE));
    }

    #[test]
    fn expire_rules() {
        let now = 1_700_000_000_000;
        assert_eq!(
            parse_expire(b"10", ExpireUnit::Seconds, now, "set"),
            Ok(now + 10_000)
        );
        assert_eq!(
            parse_expire(b"10", ExpireUnit::Millis, now, "set"),
            Ok(now + 10)
        );
        assert_eq!(
            parse_expire(b"5", ExpireUnit::UnixSeconds, now, "set"),
            Ok(5000)
        );
        assert_eq!(
            parse_expire(b"x", ExpireUnit::Seconds, now, "set"),
            Err(ErrorReply::Fixed(errors::NOT_INTEGER))
        );
        let invalid = Err(errors::invalid_expire("set"));
        assert_eq!(parse_expire(b"0", ExpireUnit::Seconds, now, "set"), invalid);
        assert_eq!(parse_expire(b"-1", ExpireUnit::Millis, now, "set"), invalid);
        assert_eq!(
            parse_expire(b"9223372036854775807", ExpireUnit::Millis, now, "set"),
            invalid
        );
        assert_eq!(
            parse_expire(b"9223372036854775807", ExpireUnit::Seconds, now, "set"),
            invalid
        );
        assert!(parse_expire(b"9999999999999", ExpireUnit::Seconds, now, "set").is_ok());
        assert!(parse_expire(b"9223372036854775807", ExpireUnit::UnixMillis, now, "set").is_ok());
    }
}
