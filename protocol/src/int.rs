//! Integer parsing and formatting with Redis's exact rules.

/// Parses a signed 64-bit integer exactly as Redis's `string2ll` does.
///
/// Accepted: an optional `-`, then decimal digits with no leading zero (the single
/// string `0` aside), fitting in an `i64`. Rejected: the empty string, `+5`, `05`, `-0`,
/// ` 5`, `5 `, anything out of range. Redis uses these rules for protocol lengths and for
/// every integer argument (`EX`, `INCRBY`, …), so one function serves both.
///
/// # Examples
/// ```
/// use goblin_protocol::parse_i64;
/// assert_eq!(parse_i64(b"-42"), Some(-42));
/// assert_eq!(parse_i64(b"+42"), None);
/// assert_eq!(parse_i64(b"042"), None);
/// assert_eq!(parse_i64(b"9223372036854775808"), None);
/// ```
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    // Same bound as Redis: 20 digits plus a sign is the longest possible i64.
    if s.is_empty() || s.len() > 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    // Accumulate as a negative number so that i64::MIN fits.
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(b - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// Appends the decimal form of `v` to `out`.
#[inline]
pub fn push_int(out: &mut Vec<u8>, v: i64) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(v).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_redis_integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"7"), Some(7));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn rejects_what_string2ll_rejects() {
        for s in [
            &b""[..],
            b"-",
            b"+1",
            b"01",
            b"-0",
            b"-01",
            b" 1",
            b"1 ",
            b"1.5",
            b"abc",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999999",
        ] {
            assert_eq!(parse_i64(s), None, "{:?}", String::from_utf8_lossy(s));
        }
    }
}
