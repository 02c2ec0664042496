//! Request decoding: RESP multibulk arrays and inline commands, resumable and zero-copy.
//!
//! The decoder is handed the unconsumed part of a connection's read buffer, starting at the
//! first byte of the next request. It either reports a whole request (its arguments as
//! ranges into that buffer), a frame that carries no command, a need for more bytes, or a
//! protocol error. Progress inside a frame is kept between calls, so a large bulk argument
//! that arrives in many reads is not rescanned: each call resumes where the last one
//! stopped, and a call that cannot progress returns in constant time.
//!
//! The rules and error texts are redis-server 7's (`processMultibulkBuffer` and
//! `processInlineBuffer` in `networking.c`), including its leniencies: the two bytes after
//! a bulk payload are skipped without being checked, `*0` and `*-1` are silently ignored,
//! and so is an empty inline line.

use std::fmt;
use std::ops::Range;

use memchr::{memchr, memchr2};

use crate::int::parse_i64;

/// Largest bulk argument accepted by default (`proto-max-bulk-len`).
pub const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Most arguments one multibulk request may declare by default.
pub const DEFAULT_MAX_MULTIBULK_LEN: usize = 1024 * 1024;
/// Longest inline request, and longest `*`/`$` header line (`PROTO_INLINE_MAX_SIZE`).
pub const DEFAULT_MAX_INLINE_LEN: usize = 64 * 1024;
/// Argument slots reserved up front for a multibulk request: enough for nearly every
/// command, small enough that a declared-but-unsent huge count allocates nothing large.
const INITIAL_ARGS_RESERVE: usize = 16;
/// Room for arguments' ranges a decoder keeps between requests ([`RequestDecoder::shrink`]).
const ARGS_KEEP: usize = 1024;

/// Limits applied while decoding. The defaults are redis-server 7's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk argument accepted, in bytes.
    pub max_bulk_len: usize,
    /// Most arguments one multibulk request may declare.
    pub max_multibulk_len: usize,
    /// Longest inline request line and longest length-header line, in bytes.
    pub max_inline_len: usize,
    /// The client has not authenticated and must: as redis-server, a request may then
    /// declare at most [`UNAUTHENTICATED_MULTIBULK_LEN`] arguments of at most
    /// [`UNAUTHENTICATED_BULK_LEN`] bytes each.
    pub unauthenticated: bool,
}

/// Most arguments a request of a client that must authenticate may declare.
pub const UNAUTHENTICATED_MULTIBULK_LEN: i64 = 10;
/// Longest argument of a client that must authenticate, in bytes.
pub const UNAUTHENTICATED_BULK_LEN: i64 = 16384;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_multibulk_len: DEFAULT_MAX_MULTIBULK_LEN,
            max_inline_len: DEFAULT_MAX_INLINE_LEN,
            unauthenticated: false,
        }
    }
}

/// A malformed request. After one, the connection is answered with the error and closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*` header is not an integer, or declares too many arguments.
    InvalidMultibulkLength,
    /// `$` header is not an integer, is negative, or exceeds the bulk limit.
    InvalidBulkLength,
    /// `*` header declares more arguments than a client that must authenticate may send.
    UnauthenticatedMultibulkLength,
    /// `$` header declares more bytes than a client that must authenticate may send.
    UnauthenticatedBulkLength,
    /// An array element did not start with `$`; carries the byte found instead.
    ExpectedDollar(u8),
    /// No end of line within the limit while reading a `*` header.
    TooBigMbulkCountString,
    /// No end of line within the limit while reading a `$` header.
    TooBigBulkCountString,
    /// An inline request longer than the limit.
    TooBigInlineRequest,
    /// An inline request with an unterminated quote, or a closing quote not followed by a space.
    UnbalancedQuotes,
}

impl ProtocolError {
    /// The error text redis-server sends for this fault, without the leading `-` and the
    /// trailing CRLF; it may hold arbitrary bytes (the unexpected byte of `ExpectedDollar`),
    /// so it goes through the encoder's sanitising error writer.
    pub fn message(&self) -> Vec<u8> {
        let mut m = b"ERR Protocol error: ".to_vec();
        match *self {
            ProtocolError::InvalidMultibulkLength => {
                m.extend_from_slice(b"invalid multibulk length")
            }
            ProtocolError::InvalidBulkLength => m.extend_from_slice(b"invalid bulk length"),
            ProtocolError::UnauthenticatedMultibulkLength => {
                m.extend_from_slice(b"unauthenticated multibulk length")
            }
            ProtocolError::UnauthenticatedBulkLength => {
                m.extend_from_slice(b"unauthenticated bulk length")
            }
            ProtocolError::ExpectedDollar(b) => {
                m.extend_from_slice(b"expected '$', got '");
                m.push(b);
                m.push(b'\'');
            }
            ProtocolError::TooBigMbulkCountString => {
                m.extend_from_slice(b"too big mbulk count string")
            }
            ProtocolError::TooBigBulkCountString => {
                m.extend_from_slice(b"too big bulk count string")
            }
            ProtocolError::TooBigInlineRequest => m.extend_from_slice(b"too big inline request"),
            ProtocolError::UnbalancedQuotes => m.extend_from_slice(b"unbalanced quotes in request"),
        }
        m
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.message()))
    }
}

impl std::error::Error for ProtocolError {}

/// What one call to [`RequestDecoder::decode`] found at the start of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole request of this many bytes; its arguments are [`RequestDecoder::args`].
    Command(usize),
    /// A frame of this many bytes that carries no command (`*0`, `*-1`, an empty line).
    Empty(usize),
    /// The request is not complete yet; call again with the same buffer start once more
    /// bytes have arrived. [`RequestDecoder::needed`] says how many bytes would help.
    Incomplete,
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Between requests. `scanned`: bytes already searched for the end of the first line.
    Idle { scanned: usize },
    /// Inside a multibulk request. `pos`: offset of the next unparsed byte; `bulk`: length
    /// of the bulk whose `$` header was parsed and whose payload starts at `pos`.
    Multibulk {
        remaining: usize,
        pos: usize,
        bulk: Option<usize>,
        scanned: usize,
    },
    /// The request was malformed: every call reports the same error until [`RequestDecoder::reset`].
    /// (An inline request is unescaped in place as it is split, so its bytes may no longer
    /// be the ones that failed: decoding them again could find a different request.)
    Failed(ProtocolError),
}

/// Where a header line ends, or how far it was searched.
enum LineEnd {
    Found(usize),
    Pending(usize),
}

/// A resumable, zero-copy request decoder; one per connection.
///
/// # Examples
/// ```
/// use goblin_protocol::{Decoded, RequestDecoder};
/// let mut dec = RequestDecoder::default();
/// let mut buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n".to_vec();
/// assert_eq!(dec.decode(&mut buf).unwrap(), Decoded::Command(20));
/// let args: Vec<&[u8]> = dec.args().iter().map(|r| &buf[r.clone()]).collect();
/// assert_eq!(args, [&b"GET"[..], b"k"]);
/// assert_eq!(dec.decode(&mut buf[20..]).unwrap(), Decoded::Command(6));
/// ```
#[derive(Debug)]
pub struct RequestDecoder {
    limits: Limits,
    state: State,
    args: Vec<Range<usize>>,
}

impl Default for RequestDecoder {
    fn default() -> Self {
        RequestDecoder::new(Limits::default())
    }
}

impl RequestDecoder {
    /// A decoder enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        RequestDecoder {
            limits,
            state: State::Idle { scanned: 0 },
            args: Vec::new(),
        }
    }

    /// Changes the limits it enforces from the next check on (CONFIG SET
    /// proto-max-bulk-len).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits this decoder enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Arguments of the request last reported by [`Decoded::Command`], as byte ranges into
    /// the buffer that was passed in.
    pub fn args(&self) -> &[Range<usize>] {
        &self.args
    }

    /// True while a request is partly decoded.
    pub fn in_frame(&self) -> bool {
        matches!(self.state, State::Multibulk { .. })
    }

    /// After [`Decoded::Incomplete`]: the buffer length (from the request start) at which
    /// the decoder can make progress, when it knows it (a bulk payload is awaited).
    /// Callers use it to grow their buffer in one step to what was declared and is
    /// arriving, never to reserve a declared length up front.
    pub fn needed(&self) -> Option<usize> {
        self.awaited_bulk().map(|(pos, len)| pos + len + 2)
    }

    /// After [`Decoded::Incomplete`]: the bulk argument being received, as where its
    /// payload starts (from the request start) and its declared length.
    pub fn awaited_bulk(&self) -> Option<(usize, usize)> {
        match self.state {
            State::Multibulk {
                pos,
                bulk: Some(len),
                ..
            } => Some((pos, len)),
            _ => None,
        }
    }

    /// Gives back the room of the ranges of a request with many arguments, once no
    /// request is partly decoded (room for up to 1,024 is kept).
    pub fn shrink(&mut self) {
        if !self.in_frame() {
            self.release_args();
        }
    }

    /// Drops the ranges' room past [`ARGS_KEEP`].
    fn release_args(&mut self) {
        if self.args.capacity() > ARGS_KEEP {
            self.args = Vec::new();
        }
    }

    /// Forgets any partly decoded request.
    pub fn reset(&mut self) {
        self.state = State::Idle { scanned: 0 };
        self.args.clear();
    }

    /// Decodes the request at the start of `buf`.
    ///
    /// `buf` must start at the first byte of the request being decoded, and keep its bytes
    /// between calls that return [`Decoded::Incomplete`] (it may grow at the end). Inline
    /// requests are unescaped in place, which is why the buffer is mutable.
    ///
    /// # Errors
    /// A [`ProtocolError`] when the bytes cannot be a valid request; the decoder then
    /// reports that error on every call until [`RequestDecoder::reset`], and the connection
    /// should reply with the error and close.
    pub fn decode(&mut self, buf: &mut [u8]) -> Result<Decoded, ProtocolError> {
        self.decode_here(buf)
    }

    /// [`RequestDecoder::decode`] for a caller off the hot path (a server's second
    /// caller: a second call site of `decode` makes the compiler stop inlining it into
    /// the loop that calls it per request, 2–3 % more instructions per GET). Both are
    /// `decode_here` and its RESP helpers, inlined whole (`inline(always)`), so that each
    /// is a copy of its own.
    ///
    /// # Errors
    /// As [`RequestDecoder::decode`].
    #[inline(never)]
    pub fn decode_cold(&mut self, buf: &mut [u8]) -> Result<Decoded, ProtocolError> {
        self.decode_here(buf)
    }

    #[inline(always)]
    fn decode_here(&mut self, buf: &mut [u8]) -> Result<Decoded, ProtocolError> {
        let result = match self.state {
            State::Failed(e) => return Err(e),
            State::Idle { scanned } => match buf.first() {
                None => Ok(Decoded::Incomplete),
                Some(b'*') => self.multibulk_header(buf, scanned),
                Some(_) => self.inline(buf, scanned),
            },
            State::Multibulk { .. } => self.multibulk_args(buf),
        };
        if let Err(e) = result {
            self.args.clear();
            self.state = State::Failed(e);
        }
        result
    }

    #[inline(always)]
    fn multibulk_header(&mut self, buf: &[u8], scanned: usize) -> Result<Decoded, ProtocolError> {
        let cr = match self.line_end(buf, 0, scanned, ProtocolError::TooBigMbulkCountString)? {
            LineEnd::Found(cr) => cr,
            LineEnd::Pending(scanned) => {
                self.state = State::Idle { scanned };
                return Ok(Decoded::Incomplete);
            }
        };
        let count = parse_i64(&buf[1..cr]).ok_or(ProtocolError::InvalidMultibulkLength)?;
        if count > 0 && count as u64 > self.limits.max_multibulk_len as u64 {
            return Err(ProtocolError::InvalidMultibulkLength);
        }
        if self.limits.unauthenticated && count > UNAUTHENTICATED_MULTIBULK_LEN {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        let pos = cr + 2;
        if count <= 0 {
            self.state = State::Idle { scanned: 0 };
            return Ok(Decoded::Empty(pos));
        }
        // The room a request with many arguments left is given back at the next one.
        self.release_args();
        self.args.clear();
        self.args.reserve(INITIAL_ARGS_RESERVE);
        self.state = State::Multibulk {
            remaining: count as usize,
            pos,
            bulk: None,
            scanned: pos,
        };
        self.multibulk_args(buf)
    }

    #[inline(always)]
    fn multibulk_args(&mut self, buf: &[u8]) -> Result<Decoded, ProtocolError> {
        let State::Multibulk {
            mut remaining,
            mut pos,
            mut bulk,
            mut scanned,
        } = self.state
        else {
            return Ok(Decoded::Incomplete);
        };
        while remaining > 0 {
            let len = match bulk {
                Some(len) => len,
                None => {
                    let cr = match self.line_end(
                        buf,
                        pos,
                        scanned,
                        ProtocolError::TooBigBulkCountString,
                    )? {
                        LineEnd::Found(cr) => cr,
                        LineEnd::Pending(upto) => {
                            scanned = upto;
                            break;
                        }
                    };
                    if buf[pos] != b'$' {
                        return Err(ProtocolError::ExpectedDollar(buf[pos]));
                    }
                    let len = parse_i64(&buf[pos + 1..cr])
                        .filter(|&l| l >= 0 && l as u64 <= self.limits.max_bulk_len as u64)
                        .ok_or(ProtocolError::InvalidBulkLength)?;
                    if self.limits.unauthenticated && len > UNAUTHENTICATED_BULK_LEN {
                        return Err(ProtocolError::UnauthenticatedBulkLength);
                    }
                    let len = len as usize;
                    pos = cr + 2;
                    scanned = pos;
                    bulk = Some(len);
                    len
                }
            };
            // Redis skips the two bytes after the payload without checking them.
            if buf.len() < pos + len + 2 {
                break;
            }
            self.args.push(pos..pos + len);
            pos += len + 2;
            scanned = pos;
            bulk = None;
            remaining -= 1;
        }
        if remaining == 0 {
            self.state = State::Idle { scanned: 0 };
            Ok(Decoded::Command(pos))
        } else {
            self.state = State::Multibulk {
                remaining,
                pos,
                bulk,
                scanned,
            };
            Ok(Decoded::Incomplete)
        }
    }

    /// Looks for the `\r` ending the header line that starts at `start`, searching from
    /// `scanned` (bytes before it were searched already). The line is usable once the byte
    /// after `\r` has arrived too (Redis's rule).
    #[inline(always)]
    fn line_end(
        &self,
        buf: &[u8],
        start: usize,
        scanned: usize,
        too_big: ProtocolError,
    ) -> Result<LineEnd, ProtocolError> {
        let window_end = buf.len().min(
            start
                .saturating_add(self.limits.max_inline_len)
                .saturating_add(1),
        );
        let from = scanned.max(start);
        // redis-server finds line ends with `strchr`, which stops at a NUL byte: a NUL
        // before the `\r` means "no line end yet", however much follows.
        let hit = if from < window_end {
            memchr2(b'\r', 0, &buf[from..window_end])
        } else {
            None
        };
        match hit {
            Some(i) if buf[from + i] == 0 => {
                if buf.len() - start > self.limits.max_inline_len {
                    return Err(too_big);
                }
                Ok(LineEnd::Pending(from + i))
            }
            Some(i) if from + i + 1 < buf.len() => Ok(LineEnd::Found(from + i)),
            Some(i) => Ok(LineEnd::Pending(from + i)),
            None if buf.len() - start > self.limits.max_inline_len => Err(too_big),
            None => Ok(LineEnd::Pending(window_end)),
        }
    }

    fn inline(&mut self, buf: &mut [u8], scanned: usize) -> Result<Decoded, ProtocolError> {
        let window_end = buf.len().min(self.limits.max_inline_len.saturating_add(1));
        let from = scanned.min(window_end);
        // As for header lines, a NUL before the `\n` hides it (Redis's `strchr`).
        let nl = match memchr2(b'\n', 0, &buf[from..window_end]) {
            Some(i) if buf[from + i] == 0 => {
                if buf.len() > self.limits.max_inline_len {
                    return Err(ProtocolError::TooBigInlineRequest);
                }
                self.state = State::Idle { scanned: from + i };
                return Ok(Decoded::Incomplete);
            }
            Some(i) => from + i,
            None if buf.len() > self.limits.max_inline_len => {
                return Err(ProtocolError::TooBigInlineRequest);
            }
            None => {
                self.state = State::Idle {
                    scanned: window_end,
                };
                return Ok(Decoded::Incomplete);
            }
        };
        let end = if nl > 0 && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        self.state = State::Idle { scanned: 0 };
        self.args.clear();
        split_inline(&mut buf[..end], &mut self.args)?;
        if self.args.is_empty() {
            Ok(Decoded::Empty(nl + 1))
        } else {
            Ok(Decoded::Command(nl + 1))
        }
    }
}

/// `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits a line into arguments as Redis's `sdssplitargs` does — what a configuration
/// file's lines and inline requests are made of; `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut buf = line.to_vec();
    let mut ranges = Vec::new();
    split_inline(&mut buf, &mut ranges).ok()?;
    Some(ranges.into_iter().map(|r| buf[r].to_vec()).collect())
}

/// Splits an inline request line into arguments with Redis's `sdssplitargs` rules,
/// unescaping in place: every argument is written at or before the position it was read
/// from, so the output never overtakes the input.
///
/// Rules: blanks separate arguments; `"…"` supports `\n \r \t \b \a \xHH` and `\<any>`;
/// `'…'` supports only `\'`; a closing quote must be followed by a blank or the end. (A
/// line never holds a NUL: the line search treats one as "no line end yet", as Redis's
/// `strchr` does; the NUL handling here only keeps the function total.)
fn split_inline(line: &mut [u8], args: &mut Vec<Range<usize>>) -> Result<(), ProtocolError> {
    let n = memchr(0, line).unwrap_or(line.len());
    let at = |line: &[u8], i: usize| if i < n { line[i] } else { 0 };
    let mut r = 0;
    let mut w = 0;
    loop {
        while r < n && is_c_space(line[r]) {
            r += 1;
        }
        if r >= n {
            return Ok(());
        }
        let start = w;
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = at(line, r);
            if in_double {
                let next = at(line, r + 1);
                if c == b'\\'
                    && next == b'x'
                    && let (Some(hi), Some(lo)) =
                        (hex_value(at(line, r + 2)), hex_value(at(line, r + 3)))
                {
                    line[w] = hi * 16 + lo;
                    w += 1;
                    r += 4;
                    continue;
                }
                if c == b'\\' && next != 0 {
                    line[w] = match next {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => b'\x08',
                        b'a' => b'\x07',
                        other => other,
                    };
                    w += 1;
                    r += 2;
                } else if c == b'"' {
                    if next != 0 && !is_c_space(next) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    r += 1;
                    break;
                } else if c == 0 {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    line[w] = c;
                    w += 1;
                    r += 1;
                }
            } else if in_single {
                let next = at(line, r + 1);
                if c == b'\\' && next == b'\'' {
                    line[w] = b'\'';
                    w += 1;
                    r += 2;
                } else if c == b'\'' {
                    if next != 0 && !is_c_space(next) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    r += 1;
                    break;
                } else if c == 0 {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    line[w] = c;
                    w += 1;
                    r += 1;
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        if c != 0 {
                            r += 1;
                        }
                        break;
                    }
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => {
                        line[w] = c;
                        w += 1;
                    }
                }
                r += 1;
            }
        }
        args.push(start..w);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::type_complexity)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut buf = input.to_vec();
        let mut dec = RequestDecoder::default();
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            match dec.decode(&mut buf[start..])? {
                Decoded::Command(n) => {
                    out.push(
                        dec.args()
                            .iter()
                            .map(|r| buf[start..][r.clone()].to_vec())
                            .collect(),
                    );
                    start += n;
                }
                Decoded::Empty(n) => start += n,
                Decoded::Incomplete => return Ok(out),
            }
        }
    }

    fn one(input: &[u8]) -> Vec<Vec<u8>> {
        let mut all = decode_all(input).expect("valid");
        assert_eq!(all.len(), 1, "{:?}", String::from_utf8_lossy(input));
        all.remove(0)
    }

    #[test]
    fn multibulk() {
        assert_eq!(
            one(b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n"),
            vec![b"GET".to_vec(), vec![]]
        );
    }

    #[test]
    fn bulk_terminator_is_not_checked() {
        let cmds = decode_all(b"*1\r\n$4\r\nPINGxxPING\r\n").expect("valid");
        assert_eq!(cmds, vec![vec![b"PING".to_vec()], vec![b"PING".to_vec()]]);
    }

    #[test]
    fn empty_frames_are_skipped() {
        let cmds = decode_all(b"*0\r\n*-1\r\n*-5\r\n\r\n\n   \r\nPING\r\n").expect("valid");
        assert_eq!(cmds, vec![vec![b"PING".to_vec()]]);
    }

    #[test]
    fn inline_quoting() {
        assert_eq!(
            one(b"SET \"a b\" 'c\\'d' \"\\x41\\n\\z\" \"\"\r\n"),
            vec![
                b"SET".to_vec(),
                b"a b".to_vec(),
                b"c'd".to_vec(),
                b"A\nz".to_vec(),
                vec![]
            ]
        );
        assert_eq!(one(b"a\"b c\" e\n"), vec![b"ab c".to_vec(), b"e".to_vec()]);
        assert_eq!(one(b"  GET\tk  \n"), vec![b"GET".to_vec(), b"k".to_vec()]);
        // A NUL hides the line end, as Redis's `strchr` does: nothing runs.
        assert_eq!(decode_all(b"GET k\0 more\n"), Ok(vec![]));
        assert_eq!(decode_all(b"*1\0\r\n"), Ok(vec![]));
        // Vertical tab and form feed are blanks before a token, not inside one.
        assert_eq!(
            one(b"\x0bGET a\x0cb\n"),
            vec![b"GET".to_vec(), b"a\x0cb".to_vec()]
        );
    }

    #[test]
    fn protocol_errors() {
        let cases: &[(&[u8], ProtocolError)] = &[
            (b"*abc\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*+1\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*1048577\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*1\r\n$-1\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n$536870913\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n$x\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n:4\r\n", ProtocolError::ExpectedDollar(b':')),
            (b"PING \"a\r\n", ProtocolError::UnbalancedQuotes),
            (b"PING 'a\r\n", ProtocolError::UnbalancedQuotes),
            (b"PING \"a\"b\r\n", ProtocolError::UnbalancedQuotes),
        ];
        for (input, err) in cases {
            assert_eq!(
                decode_all(input),
                Err(*err),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// An inline request is unescaped in place while it is split: after a quoting error its
    /// bytes are changed, and decoding them again must not find a request in them.
    #[test]
    fn a_protocol_error_stays_until_reset() {
        let mut dec = RequestDecoder::default();
        let mut buf = br#""\x22\x22\x20\x20"#.to_vec();
        buf.extend_from_slice(b"\r\n");
        assert_eq!(dec.decode(&mut buf), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(dec.decode(&mut buf), Err(ProtocolError::UnbalancedQuotes));
        assert!(dec.args().is_empty());
        dec.reset();
        let mut ping = b"PING\r\n".to_vec();
        assert_eq!(dec.decode(&mut ping), Ok(Decoded::Command(6)));
    }

    #[test]
    fn too_long_lines() {
        let mut inline = vec![b'a'; DEFAULT_MAX_INLINE_LEN + 1];
        assert_eq!(decode_all(&inline), Err(ProtocolError::TooBigInlineRequest));
        inline.truncate(DEFAULT_MAX_INLINE_LEN);
        assert_eq!(decode_all(&inline), Ok(vec![]));
        let mut header = b"*".to_vec();
        header.resize(DEFAULT_MAX_INLINE_LEN + 2, b'1');
        assert_eq!(
            decode_all(&header),
            Err(ProtocolError::TooBigMbulkCountString)
        );
        let mut bulk = b"*1\r\n$".to_vec();
        bulk.resize(DEFAULT_MAX_INLINE_LEN + 10, b'1');
        assert_eq!(decode_all(&bulk), Err(ProtocolError::TooBigBulkCountString));
    }

    #[test]
    fn resumes_without_rescanning_a_large_bulk() {
        let mut dec = RequestDecoder::default();
        let mut buf = b"*2\r\n$3\r\nSET\r\n$1000000\r\n".to_vec();
        assert_eq!(dec.decode(&mut buf), Ok(Decoded::Incomplete));
        assert_eq!(dec.needed(), Some(buf.len() + 1_000_002));
        buf.resize(buf.len() + 999_999, b'x');
        assert_eq!(dec.decode(&mut buf), Ok(Decoded::Incomplete));
        buf.extend_from_slice(b"x\r\n");
        let total = buf.len();
        assert_eq!(dec.decode(&mut buf), Ok(Decoded::Command(total)));
        assert_eq!(dec.args().len(), 2);
        assert_eq!(dec.args()[1].len(), 1_000_000);
    }

    #[test]
    fn huge_declared_sizes_allocate_nothing() {
        let mut dec = RequestDecoder::default();
        let mut buf = b"*1048576\r\n$536870912\r\nabc".to_vec();
        assert_eq!(dec.decode(&mut buf), Ok(Decoded::Incomplete));
        assert!(dec.args.capacity() <= INITIAL_ARGS_RESERVE);
    }

    #[test]
    fn the_room_of_many_arguments_is_given_back() {
        let mut dec = RequestDecoder::default();
        let mut many = format!("*5000\r\n{}", "$1\r\nx\r\n".repeat(5000)).into_bytes();
        assert_eq!(dec.decode(&mut many), Ok(Decoded::Command(many.len())));
        assert!(dec.args.capacity() >= 5000);
        // At the next request.
        let mut get = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec();
        assert_eq!(dec.decode(&mut get), Ok(Decoded::Command(get.len())));
        assert!(dec.args.capacity() <= ARGS_KEEP);
        assert_eq!(dec.args().len(), 2);
        // Or when asked, between requests.
        assert_eq!(dec.decode(&mut many), Ok(Decoded::Command(many.len())));
        dec.shrink();
        assert_eq!(dec.args.capacity(), 0);
    }

    #[test]
    fn header_needs_the_byte_after_cr() {
        let mut dec = RequestDecoder::default();
        let mut buf = b"*1\r".to_vec();
        assert_eq!(dec.decode(&mut buf), Ok(Decoded::Incomplete));
        buf.extend_from_slice(b"\n$4\r\nPING\r\n");
        assert_eq!(dec.decode(&mut buf), Ok(Decoded::Command(14)));
    }
}
