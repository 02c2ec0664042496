//! The command families, one module each; each exposes `register(&mut CommandTable)`,
//! with its commands' handlers and, for commands whose keys can span shards, their
//! cross-shard plans.
//!
//! Also here: what several families share — expiry-argument parsing with Redis's rules.

pub mod connection;
pub mod goblin;
pub mod hashes;
pub mod keys;
pub mod lists;
pub mod multi;
pub mod server;
pub mod sets;
pub mod sorted_sets;
pub mod strings;

use goblin_protocol::parse_i64;
use goblin_store::Millis;

use crate::errors::{self, ErrorReply};
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
    strings::register(table);
    keys::register(table);
    multi::register(table);
    goblin::register(table);
    hashes::register(table);
    lists::register(table);
    sets::register(table);
    sorted_sets::register(table);
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

/// Selects database `db` (SELECT, COPY's DB option): only database 0 exists.
///
/// # Errors
/// `ERR DB index is out of range` for any other.
pub fn select_db(db: i32) -> Result<(), ErrorReply> {
    if db == 0 {
        Ok(())
    } else {
        Err(errors::DB_INDEX_OUT_OF_RANGE.into())
    }
}

/// The decimal form of `n`, for logging effects.
pub fn decimal(n: i64) -> Vec<u8> {
    itoa::Buffer::new().format(n).as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

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
