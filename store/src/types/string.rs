//! Strings: binary-safe bytes. Up to [`crate::INLINE_MAX`] bytes they live inside their
//! entry; longer ones are boxed beside it.

use crate::blob::{NOT_INT, RAW};

/// Longest string redis-server 7.0 keeps `embstr`-encoded.
const EMBSTR_MAX: usize = 44;
/// Longest decimal integer (with its sign) that Redis may keep `int`-encoded.
const INT_MAX_DIGITS: usize = 20;

/// Whether Redis would keep this string integer-encoded, given the entry's encoding
/// flags: it reads as a 64-bit integer, and no in-place change or float increment made it
/// a plain string.
pub fn int_encoded(s: &[u8], flags: u8) -> bool {
    flags & (RAW | NOT_INT) == 0 && s.len() <= INT_MAX_DIGITS && parse_i64(s).is_some()
}

/// The encoding OBJECT ENCODING reports: `int`, `embstr` or `raw`.
pub fn encoding(s: &[u8], flags: u8) -> &'static str {
    if flags & RAW != 0 {
        "raw"
    } else if int_encoded(s, flags) {
        "int"
    } else if s.len() <= EMBSTR_MAX {
        "embstr"
    } else {
        "raw"
    }
}

/// A 64-bit integer as Redis's `string2ll` reads one: an optional `-`, digits, no
/// leading zeros (but `0` itself), no `+`, no spaces.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, s),
    };
    let first = *digits.first()?;
    if !first.is_ascii_digit() || (first == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(d - b'0');
        v = v.checked_mul(10).and_then(|v| {
            if neg {
                v.checked_sub(digit)
            } else {
                v.checked_add(digit)
            }
        })?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_as_redis_chooses_them() {
        assert_eq!(encoding(b"12345", 0), "int");
        assert_eq!(encoding(b"-9223372036854775808", 0), "int");
        assert_eq!(encoding(b"9223372036854775808", 0), "embstr");
        assert_eq!(encoding(b"012", 0), "embstr");
        assert_eq!(encoding(b"-0", 0), "embstr");
        assert_eq!(encoding(b"12", NOT_INT), "embstr");
        assert_eq!(encoding(b"12", RAW), "raw");
        assert_eq!(encoding(&[b'x'; 44], 0), "embstr");
        assert_eq!(encoding(&[b'x'; 45], 0), "raw");
    }
}
