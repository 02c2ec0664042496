//! Reply decoding, for clients: the load generator and the tests read server replies
//! with it. Frames borrow from the buffer.

use memchr::memchr;

use crate::int::parse_i64;

/// Deepest nesting of aggregate replies accepted; bounds recursion on hostile input.
const MAX_DEPTH: usize = 128;

/// A decoded reply. Aggregates own their elements; strings borrow from the input.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame<'a> {
    /// `+…`
    Simple(&'a [u8]),
    /// `-…`, without the dash.
    Error(&'a [u8]),
    /// `:…`
    Integer(i64),
    /// `$…`
    Bulk(&'a [u8]),
    /// `$-1`, `*-1` or RESP3 `_`.
    Null,
    /// `*…`
    Array(Vec<Frame<'a>>),
    /// RESP3 `%…`, as its keys and values in order.
    Map(Vec<Frame<'a>>),
    /// RESP3 `~…`
    Set(Vec<Frame<'a>>),
    /// RESP3 `>…`
    Push(Vec<Frame<'a>>),
    /// RESP3 `,…`, as its text.
    Double(&'a [u8]),
    /// RESP3 `#t` / `#f`
    Boolean(bool),
    /// RESP3 `=…`, the text after the format prefix.
    Verbatim(&'a [u8]),
    /// RESP3 `(…`
    BigNumber(&'a [u8]),
    /// RESP3 `!…`
    BlobError(&'a [u8]),
}

/// A reply stream that is not RESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyError {
    /// Offset of the offending byte.
    pub at: usize,
}

impl std::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed reply at byte {}", self.at)
    }
}

impl std::error::Error for ReplyError {}

/// Decodes the reply at the start of `buf`: `Ok(None)` when it is incomplete, otherwise
/// the frame and its length in bytes.
///
/// # Errors
/// [`ReplyError`] when the bytes are not a RESP2/RESP3 reply.
///
/// # Examples
/// ```
/// use goblin_protocol::{parse_reply, Frame};
/// let (frame, n) = parse_reply(b"*2\r\n:1\r\n$-1\r\n").unwrap().unwrap();
/// assert_eq!(frame, Frame::Array(vec![Frame::Integer(1), Frame::Null]));
/// assert_eq!(n, 13);
/// assert_eq!(parse_reply(b"$5\r\nab").unwrap(), None);
/// ```
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, ReplyError> {
    parse_at(buf, 0, 0)
}

/// The length of the reply at the start of `buf` without building it (`Ok(None)` when
/// incomplete), and whether it is an error reply.
///
/// # Errors
/// [`ReplyError`] when the bytes are not a RESP2/RESP3 reply.
pub fn reply_len(buf: &[u8]) -> Result<Option<(usize, bool)>, ReplyError> {
    let Some(first) = buf.first() else {
        return Ok(None);
    };
    let is_error = matches!(first, b'-' | b'!');
    Ok(skip_at(buf, 0, 0)?.map(|end| (end, is_error)))
}

fn line(buf: &[u8], start: usize) -> Option<(&[u8], usize)> {
    let rel = memchr(b'\r', buf.get(start..)?)?;
    let cr = start + rel;
    if cr + 1 >= buf.len() {
        return None;
    }
    Some((&buf[start..cr], cr + 2))
}

fn int_line(buf: &[u8], start: usize) -> Result<Option<(i64, usize)>, ReplyError> {
    match line(buf, start) {
        None => Ok(None),
        Some((text, next)) => match parse_i64(text) {
            Some(n) => Ok(Some((n, next))),
            None => Err(ReplyError { at: start }),
        },
    }
}

/// A blob's payload (`None` for a null) and the offset after it.
type Blob<'a> = (Option<&'a [u8]>, usize);

fn blob(buf: &[u8], start: usize) -> Result<Option<Blob<'_>>, ReplyError> {
    let Some((len, body)) = int_line(buf, start + 1)? else {
        return Ok(None);
    };
    if len < 0 {
        return Ok(Some((None, body)));
    }
    let end = body
        .checked_add(len as usize)
        .ok_or(ReplyError { at: start })?;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    Ok(Some((Some(&buf[body..end]), end + 2)))
}

fn parse_at<'a>(
    buf: &'a [u8],
    start: usize,
    depth: usize,
) -> Result<Option<(Frame<'a>, usize)>, ReplyError> {
    if depth > MAX_DEPTH {
        return Err(ReplyError { at: start });
    }
    let Some(&kind) = buf.get(start) else {
        return Ok(None);
    };
    let simple = |f: fn(&'a [u8]) -> Frame<'a>| Ok(line(buf, start + 1).map(|(t, n)| (f(t), n)));
    match kind {
        b'+' => simple(Frame::Simple),
        b'-' => simple(Frame::Error),
        b',' => simple(Frame::Double),
        b'(' => simple(Frame::BigNumber),
        b':' => Ok(int_line(buf, start + 1)?.map(|(n, next)| (Frame::Integer(n), next))),
        b'_' => Ok(line(buf, start + 1).map(|(_, n)| (Frame::Null, n))),
        b'#' => match line(buf, start + 1) {
            None => Ok(None),
            Some((b"t", n)) => Ok(Some((Frame::Boolean(true), n))),
            Some((b"f", n)) => Ok(Some((Frame::Boolean(false), n))),
            Some(_) => Err(ReplyError { at: start }),
        },
        b'$' | b'=' | b'!' => Ok(blob(buf, start)?.map(|(body, next)| {
            let frame = match (kind, body) {
                (_, None) => Frame::Null,
                (b'$', Some(b)) => Frame::Bulk(b),
                (b'!', Some(b)) => Frame::BlobError(b),
                (_, Some(b)) => Frame::Verbatim(b.get(4..).unwrap_or(b"")),
            };
            (frame, next)
        })),
        b'*' | b'%' | b'~' | b'>' => {
            let Some((n, mut next)) = int_line(buf, start + 1)? else {
                return Ok(None);
            };
            if n < 0 {
                return Ok(Some((Frame::Null, next)));
            }
            let count = if kind == b'%' {
                (n as usize).saturating_mul(2)
            } else {
                n as usize
            };
            // Never trust a declared count for allocation: grow with what was parsed.
            let mut items = Vec::with_capacity(count.min(64));
            for _ in 0..count {
                let Some((item, after)) = parse_at(buf, next, depth + 1)? else {
                    return Ok(None);
                };
                items.push(item);
                next = after;
            }
            let frame = match kind {
                b'*' => Frame::Array(items),
                b'%' => Frame::Map(items),
                b'~' => Frame::Set(items),
                _ => Frame::Push(items),
            };
            Ok(Some((frame, next)))
        }
        _ => Err(ReplyError { at: start }),
    }
}

fn skip_at(buf: &[u8], start: usize, depth: usize) -> Result<Option<usize>, ReplyError> {
    if depth > MAX_DEPTH {
        return Err(ReplyError { at: start });
    }
    let Some(&kind) = buf.get(start) else {
        return Ok(None);
    };
    match kind {
        b'+' | b'-' | b',' | b'(' | b'_' => Ok(line(buf, start + 1).map(|(_, n)| n)),
        // Checked like `parse_reply` checks them, so both reject the same streams.
        b':' => Ok(int_line(buf, start + 1)?.map(|(_, n)| n)),
        b'#' => match line(buf, start + 1) {
            None => Ok(None),
            Some((b"t" | b"f", n)) => Ok(Some(n)),
            Some(_) => Err(ReplyError { at: start }),
        },
        b'$' | b'=' | b'!' => Ok(blob(buf, start)?.map(|(_, n)| n)),
        b'*' | b'%' | b'~' | b'>' => {
            let Some((n, mut next)) = int_line(buf, start + 1)? else {
                return Ok(None);
            };
            let count = if n < 0 {
                0
            } else if kind == b'%' {
                n.saturating_mul(2)
            } else {
                n
            };
            for _ in 0..count {
                match skip_at(buf, next, depth + 1)? {
                    Some(after) => next = after,
                    None => return Ok(None),
                }
            }
            Ok(Some(next))
        }
        _ => Err(ReplyError { at: start }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::type_complexity)]
mod tests {
    use super::*;

    #[test]
    fn every_type() {
        let input: &[u8] =
            b"*9\r\n+OK\r\n-ERR x\r\n:7\r\n$2\r\nhi\r\n_\r\n,1.5\r\n#t\r\n=6\r\ntxt:yo\r\n(12\r\n";
        let (frame, n) = parse_reply(input).unwrap().unwrap();
        assert_eq!(n, input.len());
        assert_eq!(
            frame,
            Frame::Array(vec![
                Frame::Simple(b"OK"),
                Frame::Error(b"ERR x"),
                Frame::Integer(7),
                Frame::Bulk(b"hi"),
                Frame::Null,
                Frame::Double(b"1.5"),
                Frame::Boolean(true),
                Frame::Verbatim(b"yo"),
                Frame::BigNumber(b"12"),
            ])
        );
        assert_eq!(reply_len(input), Ok(Some((input.len(), false))));
        for cut in 0..input.len() {
            assert_eq!(parse_reply(&input[..cut]), Ok(None));
            assert_eq!(reply_len(&input[..cut]), Ok(None));
        }
    }

    #[test]
    fn maps_and_errors() {
        let (frame, _) = parse_reply(b"%1\r\n+a\r\n:1\r\n").unwrap().unwrap();
        assert_eq!(
            frame,
            Frame::Map(vec![Frame::Simple(b"a"), Frame::Integer(1)])
        );
        assert_eq!(reply_len(b"-ERR\r\n"), Ok(Some((6, true))));
        assert!(parse_reply(b"?x\r\n").is_err());
        assert!(parse_reply(b":abc\r\n").is_err());
    }
}
