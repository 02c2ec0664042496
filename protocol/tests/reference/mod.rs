//! A naive reference for request decoding: redis-server 7's `processInputBuffer` rules
//! applied to a stream that has arrived whole, written for obviousness, not speed.
//!
//! It shares no code with `RequestDecoder`: it re-reads the stream from each request's
//! start, copies every argument, and transliterates `sdssplitargs` from `sds.c`. Only the
//! integer rule, `parse_i64` (Redis's `string2ll`), is taken from the crate, as the brief
//! for these tests asks; `proptests.rs` checks it separately against Rust's own parser.
//!
//! Line limits are judged as if bytes arrived one at a time, which is what makes the
//! outcome independent of how a stream is split: redis-server checks the 64 KiB limit after
//! every read, so a header or inline line whose terminator is not within the first
//! 64 KiB + 1 bytes is rejected once that many bytes are buffered.
//!
//! This module is also compiled into the `decode` fuzz target (`fuzz/fuzz_targets/decode.rs`
//! includes it by path), so it must only depend on `goblin_protocol` and `std`.

use goblin_protocol::{Limits, ProtocolError, parse_i64};

/// `PROTO_INLINE_MAX_SIZE`: longest inline request and longest `*`/`$` header line.
pub const INLINE_MAX: usize = 64 * 1024;
/// Most arguments a multibulk request may declare. The brief for these tests fixes it at
/// 1 MiB (redis-server 6's limit, and Goblin's `DEFAULT_MAX_MULTIBULK_LEN`); note that
/// redis-server 7.0 itself only rejects counts above `INT_MAX`.
pub const MULTIBULK_MAX: usize = 1024 * 1024;
/// `proto-max-bulk-len` default: largest bulk argument.
pub const BULK_MAX: usize = 512 * 1024 * 1024;

/// redis-server's limits, written out here rather than taken from the crate.
pub fn redis_limits() -> Limits {
    Limits {
        max_bulk_len: BULK_MAX,
        max_multibulk_len: MULTIBULK_MAX,
        max_inline_len: INLINE_MAX,
        unauthenticated: false,
    }
}

/// What one request at the head of the stream turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A request carrying a command: its arguments and its length in bytes.
    Command(Vec<Vec<u8>>, usize),
    /// A request carrying no command (`*0`, `*-1`, a blank line), and its length.
    Empty(usize),
    /// A protocol error; nothing after it is decoded.
    Error(ProtocolError),
    /// redis-server is stuck here: it looks for the end of a header or inline line with
    /// `strchr`, which stops at a NUL byte, so a NUL before the line's end hides the end.
    /// It waits for more bytes forever, or, once more than 64 KiB are buffered, fails with
    /// the line's too-big error. Goblin's decoder does not model this; see `assert_agree`.
    Stall,
}

/// Decodes a whole stream with redis-server's limits.
pub fn decode(stream: &[u8]) -> Vec<Event> {
    decode_with(stream, redis_limits())
}

/// Decodes a whole stream: every request in order, ending at the first error, at a stall,
/// or where the remaining bytes are an incomplete request (that tail produces no event).
/// `limits` stand for `PROTO_INLINE_MAX_SIZE`, the multibulk limit and `proto-max-bulk-len`.
pub fn decode_with(stream: &[u8], limits: Limits) -> Vec<Event> {
    let mut events = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let rest = &stream[at..];
        let step = if rest[0] == b'*' {
            multibulk(rest, limits)
        } else {
            inline(rest, limits)
        };
        match step {
            Step::Frame(event) => {
                at += match &event {
                    Event::Command(_, len) | Event::Empty(len) => *len,
                    Event::Error(_) | Event::Stall => unreachable!("frames carry a length"),
                };
                events.push(event);
            }
            Step::Wait => break,
            Step::Stop(event) => {
                events.push(event);
                break;
            }
        }
    }
    events
}

/// Checks that `fast` (what `RequestDecoder` produced for a stream) is what redis-server
/// does with it, as computed by [`decode`]. Where redis-server stalls on a NUL byte,
/// only the events before the stall are compared: Goblin's decoder deliberately parses
/// such a line instead (a known divergence, reported with these tests).
///
/// # Panics
/// With both event lists when they disagree.
pub fn assert_agree(stream: &[u8], fast: &[Event], reference: &[Event]) {
    let ok = match reference.split_last() {
        Some((Event::Stall, before)) => fast.get(..before.len()) == Some(before),
        _ => fast == reference,
    };
    assert!(
        ok,
        "decoders disagree on {:?}\n  fast:      {:?}\n  reference: {:?}",
        Escaped(stream),
        fast,
        reference
    );
}

/// Bytes shown as an escaped string, for failure messages.
pub struct Escaped<'a>(pub &'a [u8]);

impl std::fmt::Debug for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

enum Step {
    /// A whole request.
    Frame(Event),
    /// The request is incomplete; redis-server waits for more bytes.
    Wait,
    /// An error or a stall: decoding stops here.
    Stop(Event),
}

/// Where a line ends, as redis-server finds it.
enum Line {
    /// The terminator is at this offset (and, for headers, the byte after it has arrived).
    End(usize),
    /// More bytes could still complete the line.
    Wait,
    /// A NUL byte hides the terminator from `strchr`: more bytes never help.
    Stall,
    /// More than the line limit is buffered and no terminator was seen.
    TooBig,
}

/// `strchr(rest, terminator)` plus redis-server's size check, bytes arriving one by one.
/// Headers (`*`, `$`) also need the byte after their `\r` before they count as whole.
fn find_line(rest: &[u8], terminator: u8, needs_next_byte: bool, max: usize) -> Line {
    for (i, &b) in rest.iter().enumerate() {
        if i > max {
            // With i + 1 > max bytes buffered and no terminator, the server gave up.
            break;
        }
        if b == terminator {
            if needs_next_byte && i + 1 == rest.len() {
                return Line::Wait;
            }
            return Line::End(i);
        }
        if b == 0 {
            return Line::Stall;
        }
    }
    if rest.len() > max {
        Line::TooBig
    } else {
        Line::Wait
    }
}

/// `processMultibulkBuffer`, for a `rest` starting with `*`.
fn multibulk(rest: &[u8], limits: Limits) -> Step {
    let cr = match find_line(rest, b'\r', true, limits.max_inline_len) {
        Line::End(cr) => cr,
        Line::Wait => return Step::Wait,
        Line::Stall => return Step::Stop(Event::Stall),
        Line::TooBig => return Step::Stop(Event::Error(ProtocolError::TooBigMbulkCountString)),
    };
    let count = match parse_i64(&rest[1..cr]) {
        Some(n) if i128::from(n) <= limits.max_multibulk_len as i128 => n,
        _ => return Step::Stop(Event::Error(ProtocolError::InvalidMultibulkLength)),
    };
    // networking.c: `ll > 10 && authRequired(c)`.
    if limits.unauthenticated && count > 10 {
        return Step::Stop(Event::Error(ProtocolError::UnauthenticatedMultibulkLength));
    }
    let mut pos = cr + 2;
    if count <= 0 {
        return Step::Frame(Event::Empty(pos));
    }
    let mut args = Vec::new();
    for _ in 0..count {
        let cr = match find_line(&rest[pos..], b'\r', true, limits.max_inline_len) {
            Line::End(i) => pos + i,
            Line::Wait => return Step::Wait,
            Line::Stall => return Step::Stop(Event::Stall),
            Line::TooBig => {
                return Step::Stop(Event::Error(ProtocolError::TooBigBulkCountString));
            }
        };
        if rest[pos] != b'$' {
            return Step::Stop(Event::Error(ProtocolError::ExpectedDollar(rest[pos])));
        }
        let len = match parse_i64(&rest[pos + 1..cr]) {
            Some(n) if n >= 0 && n as u128 <= limits.max_bulk_len as u128 => n as usize,
            _ => return Step::Stop(Event::Error(ProtocolError::InvalidBulkLength)),
        };
        // networking.c: `ll > 16384 && authRequired(c)`.
        if limits.unauthenticated && len > 16384 {
            return Step::Stop(Event::Error(ProtocolError::UnauthenticatedBulkLength));
        }
        let payload = cr + 2;
        // The two bytes after the payload are skipped without being looked at.
        if rest.len() < payload + len + 2 {
            return Step::Wait;
        }
        args.push(rest[payload..payload + len].to_vec());
        pos = payload + len + 2;
    }
    Step::Frame(Event::Command(args, pos))
}

/// `processInlineBuffer`, for a `rest` not starting with `*`.
fn inline(rest: &[u8], limits: Limits) -> Step {
    let nl = match find_line(rest, b'\n', false, limits.max_inline_len) {
        Line::End(nl) => nl,
        Line::Wait => return Step::Wait,
        Line::Stall => return Step::Stop(Event::Stall),
        Line::TooBig => return Step::Stop(Event::Error(ProtocolError::TooBigInlineRequest)),
    };
    let end = if nl > 0 && rest[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    match sdssplitargs(&rest[..end]) {
        None => Step::Stop(Event::Error(ProtocolError::UnbalancedQuotes)),
        Some(args) if args.is_empty() => Step::Frame(Event::Empty(nl + 1)),
        Some(args) => Step::Frame(Event::Command(args, nl + 1)),
    }
}

/// `isspace` in the C locale.
fn isspace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn is_hex_digit(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex_digit_to_int(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// `sdssplitargs` from `sds.c`, line by line. `line` is read as the C string it becomes
/// (bytes past a NUL, or past the end, read as 0). `None` is its `NULL`: unbalanced quotes.
pub fn sdssplitargs(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let c_len = line.iter().position(|&b| b == 0).unwrap_or(line.len());
    let at = |i: usize| -> u8 { if i < c_len { line[i] } else { 0 } };
    let mut p = 0;
    let mut vector = Vec::new();
    loop {
        // skip blanks
        while at(p) != 0 && isspace(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(vector);
        }
        // get a token
        let mut inq = false; // set to true if we are in "quotes"
        let mut insq = false; // set to true if we are in 'single quotes'
        let mut done = false;
        let mut current = Vec::new();
        while !done {
            if inq {
                if at(p) == b'\\'
                    && at(p + 1) == b'x'
                    && is_hex_digit(at(p + 2))
                    && is_hex_digit(at(p + 3))
                {
                    current.push(hex_digit_to_int(at(p + 2)) * 16 + hex_digit_to_int(at(p + 3)));
                    p += 3;
                } else if at(p) == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    current.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        c => c,
                    });
                } else if at(p) == b'"' {
                    // closing quote must be followed by a space or nothing at all.
                    if at(p + 1) != 0 && !isspace(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if at(p) == 0 {
                    // unterminated quotes
                    return None;
                } else {
                    current.push(at(p));
                }
            } else if insq {
                if at(p) == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    current.push(b'\'');
                } else if at(p) == b'\'' {
                    // closing quote must be followed by a space or nothing at all.
                    if at(p + 1) != 0 && !isspace(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if at(p) == 0 {
                    // unterminated quotes
                    return None;
                } else {
                    current.push(at(p));
                }
            } else {
                match at(p) {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => current.push(c),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        // add the token to the vector
        vector.push(current);
    }
}
