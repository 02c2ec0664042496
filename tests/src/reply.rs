//! Replies: the bytes a test expects, built; and integers, arrays, bulk strings and
//! fields read out of the raw bytes a server sent.

use goblin_protocol::{Frame, parse_reply, reply_len};

use crate::show;

/// The reply `+OK`.
pub fn ok() -> Vec<u8> {
    b"+OK\r\n".to_vec()
}

/// A simple string reply.
pub fn simple(s: &str) -> Vec<u8> {
    format!("+{s}\r\n").into_bytes()
}

/// An integer reply.
pub fn int(n: i64) -> Vec<u8> {
    format!(":{n}\r\n").into_bytes()
}

/// An error reply (`text` without the dash).
pub fn err(text: &str) -> Vec<u8> {
    format!("-{text}\r\n").into_bytes()
}

/// A bulk string reply.
pub fn bulk(v: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", v.len()).into_bytes();
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
    out
}

/// The RESP2 reply for a bulk string, or the null bulk for `None`.
pub fn bulk_or_nil(v: Option<&[u8]>) -> Vec<u8> {
    v.map_or_else(|| b"$-1\r\n".to_vec(), bulk)
}

/// The null reply of a protocol version: `_` in RESP3, the null bulk in RESP2.
pub fn nil(resp3: bool) -> &'static [u8] {
    if resp3 { b"_\r\n" } else { b"$-1\r\n" }
}

/// An array reply of already encoded elements.
pub fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    items.iter().for_each(|i| out.extend_from_slice(i));
    out
}

/// The integer of a reply that is exactly one integer reply; `None` for anything else.
pub fn try_integer(reply: &[u8]) -> Option<i64> {
    let digits = reply.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The integer of an integer reply.
///
/// # Panics
/// When the reply is anything else.
pub fn integer(reply: &[u8]) -> i64 {
    try_integer(reply).unwrap_or_else(|| panic!("expected an integer reply, got {}", show(reply)))
}

/// The elements of an array of bulk strings (MGET, KEYS), `None` for nulls.
///
/// # Panics
/// When the reply is anything else.
pub fn bulks(reply: &[u8]) -> Vec<Option<Vec<u8>>> {
    match parse_reply(reply) {
        Ok(Some((Frame::Array(items), _))) => items
            .into_iter()
            .map(|f| match f {
                Frame::Bulk(b) => Some(b.to_vec()),
                Frame::Null => None,
                other => panic!("expected a bulk string, got {other:?} in {}", show(reply)),
            })
            .collect(),
        _ => panic!("expected an array reply, got {}", show(reply)),
    }
}

/// The elements of an array reply (EXEC's), each as its raw bytes.
///
/// # Panics
/// When the reply is not a complete array.
pub fn elements(reply: &[u8]) -> Vec<Vec<u8>> {
    let header = reply
        .iter()
        .position(|&b| b == b'\n')
        .filter(|_| reply.first() == Some(&b'*'))
        .unwrap_or_else(|| panic!("expected an array reply, got {}", show(reply)));
    let count: usize = String::from_utf8_lossy(&reply[1..header - 1])
        .parse()
        .unwrap_or_else(|_| panic!("expected an array reply, got {}", show(reply)));
    let (items, rest) = split(&reply[header + 1..]);
    assert!(items.len() >= count, "a truncated array: {}", show(reply));
    assert!(
        items.len() == count && rest.is_empty(),
        "bytes after the array: {}",
        show(reply)
    );
    items
}

/// The elements of an array reply, sorted; `None` for anything else (the null array too).
pub fn sorted_elements(reply: &[u8]) -> Option<Vec<Vec<u8>>> {
    if !reply.starts_with(b"*") || reply.starts_with(b"*-1") {
        return None;
    }
    let mut items = elements(reply);
    items.sort();
    Some(items)
}

/// A SCAN reply: the next cursor and the keys.
///
/// # Panics
/// When the reply is not a SCAN reply.
pub fn scan_reply(reply: &[u8]) -> (u64, Vec<Vec<u8>>) {
    match parse_reply(reply) {
        Ok(Some((Frame::Array(items), _))) => match items.as_slice() {
            [Frame::Bulk(cursor), Frame::Array(keys)] => {
                let cursor = std::str::from_utf8(cursor)
                    .ok()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or_else(|| panic!("bad cursor in {}", show(reply)));
                let keys = keys
                    .iter()
                    .map(|k| match k {
                        Frame::Bulk(k) => k.to_vec(),
                        other => panic!("expected a key, got {other:?}"),
                    })
                    .collect();
                (cursor, keys)
            }
            _ => panic!("not a SCAN reply: {}", show(reply)),
        },
        _ => panic!("not a SCAN reply: {}", show(reply)),
    }
}

/// Splits bytes a server sent into its complete replies, and what is left after the
/// last complete one (an incomplete reply, or bytes that are no reply at all).
pub fn split(bytes: &[u8]) -> (Vec<Vec<u8>>, &[u8]) {
    let mut replies = Vec::new();
    let mut rest = bytes;
    while let Ok(Some((n, _))) = reply_len(rest) {
        replies.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    (replies, rest)
}

/// The value of `field` in the text of an INFO reply (`field:value` lines).
pub fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_and_parsers_agree() {
        assert_eq!(integer(&int(-42)), -42);
        assert_eq!(try_integer(b":1\r\n:2\r\n"), None);
        assert_eq!(try_integer(b"$1\r\n1\r\n"), None);
        let mget = array(&[bulk(b"a"), bulk_or_nil(None), bulk(b"\xfe")]);
        assert_eq!(
            bulks(&mget),
            vec![Some(b"a".to_vec()), None, Some(b"\xfe".to_vec())]
        );
        assert_eq!(
            elements(&mget),
            vec![bulk(b"a"), b"$-1\r\n".to_vec(), bulk(b"\xfe")]
        );
        assert_eq!(
            sorted_elements(&array(&[int(2), int(1)])),
            Some(vec![int(1), int(2)])
        );
        assert_eq!(sorted_elements(b"*-1\r\n"), None);
        let (replies, rest) = split(b"+OK\r\n:1\r\n$3\r\nab");
        assert_eq!(replies, vec![ok(), int(1)]);
        assert_eq!(rest, b"$3\r\nab");
        assert_eq!(
            info_field(
                "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n",
                "redis_version"
            ),
            Some("7.0.15")
        );
        assert_eq!(info_field("redis_version_x:1\r\n", "redis_version"), None);
    }

    #[test]
    #[should_panic(expected = "bytes after the array")]
    fn elements_refuses_trailing_bytes() {
        elements(b"*1\r\n:1\r\n:2\r\n");
    }

    #[test]
    #[should_panic(expected = "a truncated array")]
    fn elements_refuses_a_truncated_array() {
        elements(b"*2\r\n:1\r\n");
    }
}
