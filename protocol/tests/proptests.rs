//! Property tests for the codec: the fast paths are checked against naive oracles.
//!
//! - Request decoding against `reference` (redis-server 7's rules, written naively), on
//!   valid pipelines, on every way of splitting them into reads, and on arbitrary bytes.
//! - Reply encoding against `parse_reply`/`reply_len`, in RESP2 and RESP3.
//! - `parse_i64` against Rust's integer parser, `format_double` against Rust's float parser.
//!
//! Case counts keep the whole file under ~20 s in a debug build; raise them with
//! `PROPTEST_CASES=...` for a longer soak.
#![allow(clippy::unwrap_used, missing_docs)]

mod reference;

use std::iter;

use goblin_protocol::{
    Decoded, Encoder, Frame, Limits, ProtocolError, RequestDecoder, Version, format_double,
    parse_i64, parse_reply, reply_len,
};
use proptest::prelude::*;
use proptest::sample::Index;
use reference::{Escaped, Event};

// ---------------------------------------------------------------------------------------
// Driving the fast decoder the way a server does.

/// Checks what must hold of every frame the decoder reports.
fn check_frame(dec: &RequestDecoder, buf: &[u8], n: usize) {
    assert!(n > 0, "zero-length frame");
    assert!(
        n <= buf.len(),
        "frame of {n} bytes in a buffer of {}",
        buf.len()
    );
    assert!(
        !dec.in_frame(),
        "decoder still in a frame after reporting one"
    );
}

/// Checks a reported command and returns its arguments.
fn take_command(dec: &RequestDecoder, buf: &[u8], n: usize) -> Vec<Vec<u8>> {
    check_frame(dec, buf, n);
    assert!(!dec.args().is_empty(), "command without arguments");
    dec.args()
        .iter()
        .map(|r| {
            assert!(
                r.start <= r.end && r.end <= n,
                "argument {r:?} outside a {n}-byte frame"
            );
            buf[r.clone()].to_vec()
        })
        .collect()
}

/// Decodes `stream` delivered whole, with the default limits.
fn fast_whole(stream: &[u8]) -> Vec<Event> {
    fast_chunked(stream, &[], &[], Limits::default())
}

/// Decodes `stream` delivered in reads that end at `cuts` (sorted offsets), as a server
/// does: append each read to a buffer, decode and consume frames until the decoder needs
/// more, and after read `i`, when `compact[i]`, drop the consumed prefix of the buffer
/// (even in the middle of a frame: the decoder's state is relative to the frame start).
fn fast_chunked(stream: &[u8], cuts: &[usize], compact: &[bool], limits: Limits) -> Vec<Event> {
    let mut dec = RequestDecoder::new(limits);
    let mut buf = Vec::new();
    let mut start = 0;
    let mut events = Vec::new();
    let mut prev = 0;
    for (i, &cut) in cuts.iter().chain(iter::once(&stream.len())).enumerate() {
        buf.extend_from_slice(&stream[prev..cut]);
        prev = cut;
        if compact.get(i).copied().unwrap_or(false) {
            buf.drain(..start);
            start = 0;
        }
        loop {
            let avail = buf.len() - start;
            match dec.decode(&mut buf[start..]) {
                Ok(Decoded::Command(n)) => {
                    let args = take_command(&dec, &buf[start..], n);
                    events.push(Event::Command(args, n));
                    start += n;
                }
                Ok(Decoded::Empty(n)) => {
                    check_frame(&dec, &buf[start..], n);
                    events.push(Event::Empty(n));
                    start += n;
                }
                Ok(Decoded::Incomplete) => {
                    if let Some(needed) = dec.needed() {
                        assert!(needed > avail, "needs {needed} bytes but has {avail}");
                    }
                    break;
                }
                Err(e) => {
                    assert!(!dec.in_frame(), "decoder not reset after an error");
                    events.push(Event::Error(e));
                    return events;
                }
            }
        }
    }
    events
}

/// Sorted read boundaries inside a stream of `len` bytes.
fn cuts_from(indices: &[Index], len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = indices.iter().map(|i| i.index(len + 1)).collect();
    cuts.sort_unstable();
    cuts
}

// ---------------------------------------------------------------------------------------
// Valid request streams, with the commands they carry.

/// Bytes of an argument: any byte, with the protocol's own bytes made likely.
fn arg_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => any::<u8>(),
        4 => b'a'..=b'z',
        1 => prop::sample::select(&b"\r\n\0 \t\"'\\*$:x0123456789"[..]),
    ]
}

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::collection::vec(arg_byte(), 0..24),
        // Long enough to arrive over several reads; a run of one byte keeps generation cheap.
        1 => (prop::collection::vec(arg_byte(), 0..8), 0usize..3000, arg_byte())
            .prop_map(|(mut v, n, b)| {
                v.resize(v.len() + n, b);
                v
            }),
    ]
}

/// How an inline token is written.
#[derive(Clone, Copy, Debug)]
enum Quoting {
    Bare,
    Double,
    Single,
}

/// One request of a valid stream.
#[derive(Clone, Debug)]
enum Request {
    /// A multibulk command; `trailers` are the two bytes after each payload, which Redis
    /// skips unchecked (normally `\r\n`).
    Multibulk {
        args: Vec<Vec<u8>>,
        trailers: Vec<[u8; 2]>,
    },
    /// `*0`, `*-1`, `*-7`...: no command.
    EmptyMultibulk(i64),
    /// An inline command; `ws` supplies the blanks around tokens, `choices` the escapes.
    Inline {
        tokens: Vec<(Quoting, Vec<u8>)>,
        ws: Vec<u8>,
        choices: Vec<u8>,
        crlf: bool,
    },
    /// A line of blanks only: no command.
    Blank { ws: Vec<u8>, crlf: bool },
}

fn trailer() -> impl Strategy<Value = [u8; 2]> {
    prop_oneof![9 => Just(*b"\r\n"), 1 => any::<[u8; 2]>()]
}

fn request() -> impl Strategy<Value = Request> {
    let quoting = prop_oneof![
        Just(Quoting::Bare),
        Just(Quoting::Double),
        Just(Quoting::Single)
    ];
    let blank = prop::sample::select(&b"  \t\r\x0b\x0c"[..]);
    prop_oneof![
        6 => prop::collection::vec((arg(), trailer()), 1..6).prop_map(|v| {
            let (args, trailers) = v.into_iter().unzip();
            Request::Multibulk { args, trailers }
        }),
        1 => (-1000i64..=0).prop_map(Request::EmptyMultibulk),
        4 => (
            prop::collection::vec((quoting, prop::collection::vec(arg_byte(), 0..12)), 1..6),
            prop::collection::vec(blank.clone(), 0..16),
            prop::collection::vec(any::<u8>(), 64),
            any::<bool>(),
        )
            .prop_map(|(tokens, ws, choices, crlf)| Request::Inline { tokens, ws, choices, crlf }),
        1 => (prop::collection::vec(blank, 0..4), any::<bool>())
            .prop_map(|(ws, crlf)| Request::Blank { ws, crlf }),
    ]
}

/// Appends a request to `out` and returns what decoding it must give.
fn render(req: &Request, out: &mut Vec<u8>) -> Event {
    let start = out.len();
    match req {
        Request::Multibulk { args, trailers } => {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for (a, t) in args.iter().zip(trailers) {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(t);
            }
            Event::Command(args.clone(), out.len() - start)
        }
        Request::EmptyMultibulk(n) => {
            out.extend_from_slice(format!("*{n}\r\n").as_bytes());
            Event::Empty(out.len() - start)
        }
        Request::Inline {
            tokens,
            ws,
            choices,
            crlf,
        } => {
            let mut ws = ws.iter().copied().cycle();
            let mut choices = choices.iter().copied().cycle();
            let mut choice = move || choices.next().unwrap_or(0);
            // Leading blanks: any mix, as `sdssplitargs` skips every `isspace` byte.
            for _ in 0..choice() % 3 {
                out.push(ws.next().unwrap_or(b' '));
            }
            for (i, (quoting, content)) in tokens.iter().enumerate() {
                if i > 0 || choice() % 4 == 0 {
                    // A token ends at space, tab or CR (not at VT or FF, which only
                    // count as blanks between tokens), so lead with one of those.
                    out.push(*b" \t\r".get(usize::from(choice() % 3)).unwrap_or(&b' '));
                    for _ in 0..choice() % 3 {
                        out.push(ws.next().unwrap_or(b' '));
                    }
                }
                let line_start = out.len() == start;
                write_token(*quoting, content, line_start, &mut choice, out);
            }
            out.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            let args = tokens.iter().map(|(_, c)| c.clone()).collect();
            Event::Command(args, out.len() - start)
        }
        Request::Blank { ws, crlf } => {
            out.extend_from_slice(ws);
            out.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            Event::Empty(out.len() - start)
        }
    }
}

/// Writes one inline token holding `content`, quoted as asked when that can hold it,
/// in double quotes otherwise (they can hold any byte).
fn write_token(
    quoting: Quoting,
    content: &[u8],
    line_start: bool,
    choice: &mut impl FnMut() -> u8,
    out: &mut Vec<u8>,
) {
    // A bare token holds no blank, quote or NUL, does not start with VT or FF (skipped as
    // blanks), and does not start the line with `*` (that would make it multibulk).
    let bare_ok = match content.first() {
        None => false,
        Some(&first) => {
            !content.iter().any(|b| b" \t\r\n\0\"'".contains(b))
                && !matches!(first, b'\x0b' | b'\x0c')
                && (!line_start || first != b'*')
        }
    };
    // A single-quoted token holds no LF or NUL, and cannot end with a backslash (it would
    // escape the closing quote).
    let single_ok = !content.iter().any(|b| b"\n\0".contains(b)) && content.last() != Some(&b'\\');
    match quoting {
        Quoting::Bare if bare_ok => out.extend_from_slice(content),
        Quoting::Single if single_ok => {
            out.push(b'\'');
            for &b in content {
                if b == b'\'' {
                    out.extend_from_slice(b"\\'");
                } else {
                    out.push(b);
                }
            }
            out.push(b'\'');
        }
        _ => {
            out.push(b'"');
            for &b in content {
                write_double_quoted(b, choice(), out);
            }
            out.push(b'"');
        }
    }
}

/// Writes one byte inside double quotes, in one of the forms `sdssplitargs` reads back.
fn write_double_quoted(b: u8, choice: u8, out: &mut Vec<u8>) {
    let hex = |out: &mut Vec<u8>| {
        let s = if choice & 8 == 0 {
            format!("\\x{b:02x}")
        } else {
            format!("\\x{b:02X}")
        };
        out.extend_from_slice(s.as_bytes());
    };
    let named = match b {
        b'\n' => Some(b'n'),
        b'\r' => Some(b'r'),
        b'\t' => Some(b't'),
        0x08 => Some(b'b'),
        0x07 => Some(b'a'),
        _ => None,
    };
    match (b, choice % 4) {
        // Must be escaped: quote, backslash, NUL (ends the C string) and LF (ends the line).
        (b'"' | b'\\', 0) => hex(out),
        (b'"' | b'\\', _) => out.extend_from_slice(&[b'\\', b]),
        (0, _) => hex(out),
        (b'\n', 0) => hex(out),
        (b'\n', _) => out.extend_from_slice(b"\\n"),
        (_, 0) => hex(out),
        (_, 1) if named.is_some() => out.extend_from_slice(&[b'\\', named.unwrap_or(b)]),
        // `\c` for any other c is c itself, except the letters that name an escape.
        (_, 2) if !b"nrtbax".contains(&b) => out.extend_from_slice(&[b'\\', b]),
        _ => out.push(b),
    }
}

fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<Event>)> {
    prop::collection::vec(request(), 0..12).prop_map(|reqs| {
        let mut out = Vec::new();
        let events = reqs.iter().map(|r| render(r, &mut out)).collect();
        (out, events)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Valid pipelines decode, whole, to the commands they were built from, both with
    /// the fast decoder and with the reference (which checks the generator too).
    #[test]
    fn valid_streams_match_reference((stream, expected) in stream()) {
        let reference = reference::decode(&stream);
        prop_assert_eq!(&reference, &expected, "reference on {:?}", Escaped(&stream));
        let fast = fast_whole(&stream);
        prop_assert_eq!(&fast, &expected, "fast decoder on {:?}", Escaped(&stream));
    }

    /// Any split of a valid pipeline into reads decodes to the same commands as the whole.
    #[test]
    fn any_split_decodes_the_same(
        (stream, expected) in stream(),
        cuts in prop::collection::vec(any::<Index>(), 0..24),
        compact in prop::collection::vec(any::<bool>(), 25),
        byte_by_byte in prop::bool::weighted(0.1),
    ) {
        let cuts = if byte_by_byte {
            (1..stream.len()).collect()
        } else {
            cuts_from(&cuts, stream.len())
        };
        let fast = fast_chunked(&stream, &cuts, &compact, Limits::default());
        prop_assert_eq!(&fast, &expected, "cuts {:?} of {:?}", cuts, Escaped(&stream));
    }
}

// ---------------------------------------------------------------------------------------
// Arbitrary bytes.

/// Bytes that are mostly the protocol's own, so that random input reaches deep states.
fn noise() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        3 => prop::sample::select(&b"*$\r\n-0123456789"[..]),
        // No NUL here: redis-server stalls on a NUL in a line (see `reference::Event::Stall`),
        // which ends the comparison, so NULs come only from `any::<u8>()`.
        1 => prop::sample::select(&b" \t\x0b\x0c\"'\\xaF"[..]),
        1 => any::<u8>(),
    ];
    prop::collection::vec(byte, 0..200)
}

#[derive(Clone, Debug)]
enum Mutation {
    Set(Index, u8),
    Insert(Index, u8),
    Remove(Index),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![
        prop::sample::select(&b"*$\r\n-0123456789 \"'\\"[..]),
        any::<u8>(),
    ];
    prop_oneof![
        4 => (any::<Index>(), byte.clone()).prop_map(|(i, b)| Mutation::Set(i, b)),
        2 => (any::<Index>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        2 => any::<Index>().prop_map(Mutation::Remove),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len();
        match *m {
            Mutation::Set(i, b) if len > 0 => bytes[i.index(len)] = b,
            Mutation::Insert(i, b) => bytes.insert(i.index(len + 1), b),
            Mutation::Remove(i) if len > 0 => {
                bytes.remove(i.index(len));
            }
            Mutation::Truncate(i) => bytes.truncate(i.index(len + 1)),
            _ => {}
        }
    }
    bytes
}

/// Redis's limits mostly; sometimes tiny ones.
fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        3 => Just(reference::redis_limits()),
        1 => (0usize..40, 0usize..6, 0usize..40).prop_map(|(bulk, multibulk, inline)| Limits {
            max_bulk_len: bulk,
            max_multibulk_len: multibulk,
            max_inline_len: inline,
            unauthenticated: false,
        }),
        // A client that must authenticate: 10 arguments of 16384 bytes at most.
        1 => Just(Limits {
            unauthenticated: true,
            ..reference::redis_limits()
        }),
    ]
}

fn arbitrary_stream() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        noise(),
        (stream(), prop::collection::vec(mutation(), 1..4))
            .prop_map(|((bytes, _), muts)| mutate(bytes, &muts)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// On any bytes, the fast decoder and the reference agree on the commands and on the
    /// first error, and how the bytes are split into reads changes nothing. Tiny limits,
    /// now and then, bring the too-big and too-many errors within reach of short inputs.
    #[test]
    fn arbitrary_bytes_match_reference(
        stream in arbitrary_stream(),
        limits in limits(),
        cuts in prop::collection::vec(any::<Index>(), 0..12),
        compact in prop::collection::vec(any::<bool>(), 13),
    ) {
        let fast = fast_chunked(&stream, &[], &[], limits);
        reference::assert_agree(&stream, &fast, &reference::decode_with(&stream, limits));
        let cuts = cuts_from(&cuts, stream.len());
        let chunked = fast_chunked(&stream, &cuts, &compact, limits);
        prop_assert_eq!(&chunked, &fast, "cuts {:?} of {:?}", cuts, Escaped(&stream));
    }
}

// ---------------------------------------------------------------------------------------
// Limits, at their exact boundaries (too costly to reach by chance).

/// Streams whose first line is `prefix` followed by `len - prefix.len()` filler bytes,
/// then `tail`, for `len` around 64 KiB.
fn long_lines() -> Vec<Vec<u8>> {
    let max = reference::INLINE_MAX;
    let mut out = Vec::new();
    let prefixes: [&[u8]; 5] = [b"", b"*", b"*1\r\n$", b"*2\r\n$1\r\na\r\n$", b"  "];
    let tails: [&[u8]; 6] = [b"", b"\r", b"\r\n", b"\n", b"\r\nPING\r\n", b"\0\r\n"];
    for prefix in prefixes {
        let header_start = prefix
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        for line_len in max - 3..=max + 3 {
            for filler in [b'1', b'a'] {
                for tail in tails {
                    let mut s = prefix.to_vec();
                    s.resize(header_start + line_len, filler);
                    s.extend_from_slice(tail);
                    out.push(s);
                }
            }
        }
    }
    out
}

#[test]
fn line_limits_match_reference_at_the_boundary() {
    for stream in long_lines() {
        let fast = fast_whole(&stream);
        reference::assert_agree(&stream, &fast, &reference::decode(&stream));
        // Reads of 16 KiB, as redis-server does them, then a byte at a time at the end.
        let mut cuts: Vec<usize> = (16384..stream.len()).step_by(16384).collect();
        cuts.extend(stream.len().saturating_sub(8)..stream.len());
        cuts.sort_unstable();
        cuts.dedup();
        assert_eq!(
            fast_chunked(&stream, &cuts, &[], Limits::default()),
            fast,
            "{} bytes",
            stream.len()
        );
    }
}

#[test]
fn default_limits_are_redis_limits() {
    assert_eq!(Limits::default(), reference::redis_limits());
}

#[test]
fn length_limits_match_reference_at_the_boundary() {
    let cases: &[&[u8]] = &[
        b"*1048576\r\n",
        b"*1048577\r\n",
        b"*9223372036854775807\r\n",
        b"*1\r\n$536870912\r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\n$-0\r\n",
        b"*-0\r\n",
        b"*1\r\n$01\r\na\r\n",
        b"*01\r\n$1\r\na\r\n",
    ];
    for stream in cases {
        let fast = fast_whole(stream);
        reference::assert_agree(stream, &fast, &reference::decode(stream));
    }
    assert_eq!(
        fast_whole(b"*1048577\r\n"),
        [Event::Error(ProtocolError::InvalidMultibulkLength)]
    );
    assert_eq!(fast_whole(b"*1\r\n$536870912\r\n"), []);
}

// ---------------------------------------------------------------------------------------
// Replies: the encoder's output read back.

/// A reply as the encoder is asked to write it.
#[derive(Clone, Debug)]
enum Value {
    Ok,
    Simple(Vec<u8>),
    Error(Vec<u8>),
    ErrorSanitized(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    BulkInt(i64),
    Null,
    NullArray,
    Double(f64),
    Boolean(bool),
    Verbatim([u8; 3], Vec<u8>),
    BigNumber(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Push(Vec<Value>),
}

/// A reply as `parse_reply` reads it, owning its bytes.
#[derive(Clone, Debug, PartialEq)]
enum Owned {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<Owned>),
    Map(Vec<Owned>),
    Set(Vec<Owned>),
    Push(Vec<Owned>),
    Double(Vec<u8>),
    Boolean(bool),
    Verbatim(Vec<u8>),
    BigNumber(Vec<u8>),
    BlobError(Vec<u8>),
}

fn owned(frame: &Frame<'_>) -> Owned {
    let all = |items: &[Frame<'_>]| items.iter().map(owned).collect();
    match frame {
        Frame::Simple(s) => Owned::Simple(s.to_vec()),
        Frame::Error(s) => Owned::Error(s.to_vec()),
        Frame::Integer(n) => Owned::Integer(*n),
        Frame::Bulk(s) => Owned::Bulk(s.to_vec()),
        Frame::Null => Owned::Null,
        Frame::Array(v) => Owned::Array(all(v)),
        Frame::Map(v) => Owned::Map(all(v)),
        Frame::Set(v) => Owned::Set(all(v)),
        Frame::Push(v) => Owned::Push(all(v)),
        Frame::Double(s) => Owned::Double(s.to_vec()),
        Frame::Boolean(b) => Owned::Boolean(*b),
        Frame::Verbatim(s) => Owned::Verbatim(s.to_vec()),
        Frame::BigNumber(s) => Owned::BigNumber(s.to_vec()),
        Frame::BlobError(s) => Owned::BlobError(s.to_vec()),
    }
}

fn encode(value: &Value, e: &mut Encoder<'_>) {
    match value {
        Value::Ok => e.ok(),
        Value::Simple(s) => e.simple(s),
        Value::Error(s) => e.error(s),
        Value::ErrorSanitized(s) => e.error_sanitized(s),
        Value::Integer(n) => e.integer(*n),
        Value::Bulk(s) => e.bulk(s),
        Value::BulkInt(n) => e.bulk_int(*n),
        Value::Null => e.null(),
        Value::NullArray => e.null_array(),
        Value::Double(d) => e.double(*d),
        Value::Boolean(b) => e.boolean(*b),
        Value::Verbatim(f, s) => e.verbatim(f, s),
        Value::BigNumber(s) => e.big_number(s),
        Value::Array(v) => {
            e.array(v.len());
            v.iter().for_each(|x| encode(x, e));
        }
        Value::Map(pairs) => {
            e.map(pairs.len());
            for (k, v) in pairs {
                encode(k, e);
                encode(v, e);
            }
        }
        Value::Set(v) => {
            e.set(v.len());
            v.iter().for_each(|x| encode(x, e));
        }
        Value::Push(v) => {
            e.push(v.len());
            v.iter().for_each(|x| encode(x, e));
        }
    }
}

/// What `parse_reply` must read back, written independently of the encoder.
fn expected(value: &Value, version: Version) -> Owned {
    let resp3 = version == Version::Resp3;
    let all = |v: &[Value]| v.iter().map(|x| expected(x, version)).collect();
    match value {
        Value::Ok => Owned::Simple(b"OK".to_vec()),
        Value::Simple(s) => Owned::Simple(s.clone()),
        Value::Error(s) => Owned::Error(s.clone()),
        Value::ErrorSanitized(s) => {
            let nl = |b: &u8| *b == b'\r' || *b == b'\n';
            let first = s.iter().position(|b| !nl(b)).unwrap_or(s.len());
            let last = s.iter().rposition(|b| !nl(b)).map_or(first, |i| i + 1);
            Owned::Error(
                s[first..last]
                    .iter()
                    .map(|&b| if nl(&b) { b' ' } else { b })
                    .collect(),
            )
        }
        Value::Integer(n) => Owned::Integer(*n),
        Value::Bulk(s) => Owned::Bulk(s.clone()),
        Value::BulkInt(n) => Owned::Bulk(n.to_string().into_bytes()),
        Value::Null | Value::NullArray => Owned::Null,
        Value::Double(d) => {
            let mut buf = [0u8; 32];
            let text = format_double(*d, &mut buf).to_vec();
            if resp3 {
                Owned::Double(text)
            } else {
                Owned::Bulk(text)
            }
        }
        Value::Boolean(b) if resp3 => Owned::Boolean(*b),
        Value::Boolean(b) => Owned::Integer(i64::from(*b)),
        Value::Verbatim(_, s) if resp3 => Owned::Verbatim(s.clone()),
        Value::Verbatim(_, s) => Owned::Bulk(s.clone()),
        Value::BigNumber(s) if resp3 => Owned::BigNumber(s.clone()),
        Value::BigNumber(s) => Owned::Bulk(s.clone()),
        Value::Array(v) => Owned::Array(all(v)),
        Value::Map(pairs) => {
            let flat: Vec<Owned> = pairs
                .iter()
                .flat_map(|(k, v)| [expected(k, version), expected(v, version)])
                .collect();
            if resp3 {
                Owned::Map(flat)
            } else {
                Owned::Array(flat)
            }
        }
        Value::Set(v) if resp3 => Owned::Set(all(v)),
        Value::Push(v) if resp3 => Owned::Push(all(v)),
        Value::Set(v) | Value::Push(v) => Owned::Array(all(v)),
    }
}

fn is_error_reply(value: &Value) -> bool {
    matches!(value, Value::Error(_) | Value::ErrorSanitized(_))
}

fn value() -> impl Strategy<Value = Value> {
    let line = || {
        prop::collection::vec(
            any::<u8>().prop_filter("CR/LF", |b| !b"\r\n".contains(b)),
            0..16,
        )
    };
    let bytes = || prop::collection::vec(arg_byte(), 0..40);
    let leaf = prop_oneof![
        Just(Value::Ok),
        line().prop_map(Value::Simple),
        line().prop_map(Value::Error),
        bytes().prop_map(Value::ErrorSanitized),
        any::<i64>().prop_map(Value::Integer),
        bytes().prop_map(Value::Bulk),
        any::<i64>().prop_map(Value::BulkInt),
        Just(Value::Null),
        Just(Value::NullArray),
        any::<f64>().prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        (prop::sample::select(vec![*b"txt", *b"mkd"]), bytes())
            .prop_map(|(f, s)| Value::Verbatim(f, s)),
        "-?[1-9][0-9]{0,40}".prop_map(|s| Value::BigNumber(s.into_bytes())),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((inner.clone(), inner.clone()), 0..3).prop_map(Value::Map),
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Set),
            prop::collection::vec(inner, 0..5).prop_map(Value::Push),
        ]
    })
}

fn version() -> impl Strategy<Value = Version> {
    prop_oneof![Just(Version::Resp2), Just(Version::Resp3)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Encoded replies read back as what was encoded; `reply_len` agrees on the length;
    /// every strict prefix reads as incomplete; a pipeline of replies reads back in order.
    #[test]
    fn encoded_replies_parse_back(values in prop::collection::vec(value(), 1..4), v in version()) {
        let mut pipeline = Vec::new();
        for value in &values {
            let mut out = Vec::new();
            encode(value, &mut Encoder::new(&mut out, v));
            let (frame, len) = parse_reply(&out).unwrap().unwrap();
            prop_assert_eq!(owned(&frame), expected(value, v));
            prop_assert_eq!(len, out.len());
            prop_assert_eq!(reply_len(&out), Ok(Some((out.len(), is_error_reply(value)))));
            for cut in 0..out.len() {
                prop_assert_eq!(parse_reply(&out[..cut]), Ok(None), "prefix {}", cut);
                prop_assert_eq!(reply_len(&out[..cut]), Ok(None), "prefix {}", cut);
            }
            pipeline.extend_from_slice(&out);
        }
        let mut at = 0;
        for value in &values {
            let (frame, len) = parse_reply(&pipeline[at..]).unwrap().unwrap();
            prop_assert_eq!(owned(&frame), expected(value, v));
            prop_assert_eq!(reply_len(&pipeline[at..]), Ok(Some((len, is_error_reply(value)))));
            at += len;
        }
        prop_assert_eq!(at, pipeline.len());
    }

    /// On any bytes, `reply_len` is `parse_reply` without the frame: where the parser
    /// reads a reply or needs more bytes, `reply_len` says the same. (It may accept what
    /// the parser rejects: it does not validate `:` and `#` lines.)
    #[test]
    fn reply_len_agrees_with_parse_reply(bytes in noise_replies()) {
        match parse_reply(&bytes) {
            Ok(Some((_, len))) => {
                prop_assert_eq!(reply_len(&bytes).map(|r| r.map(|(n, _)| n)), Ok(Some(len)));
            }
            Ok(None) => prop_assert_eq!(reply_len(&bytes), Ok(None)),
            Err(_) => {}
        }
    }
}

/// Reply-shaped noise: type bytes, digits and line ends.
fn noise_replies() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        3 => prop::sample::select(&b"*%~>$=!+-:_,#(\r\n-0123456789tf"[..]),
        1 => any::<u8>(),
    ];
    prop::collection::vec(byte, 0..80)
}

// ---------------------------------------------------------------------------------------
// Integers and doubles.

/// `string2ll` accepts exactly the canonical decimal forms of the `i64`s: the strings
/// that Rust's parser accepts and that print back unchanged.
fn string2ll_oracle(s: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(s).ok()?;
    let n: i64 = text.parse().ok()?;
    (n.to_string() == text).then_some(n)
}

fn integer_text() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        "[-+]?0*[0-9]{0,21}".prop_map(String::into_bytes),
        "-?(9223372036854775[0-9]{3})".prop_map(String::into_bytes),
        prop::collection::vec(prop::sample::select(&b"-+0123456789 \0\r"[..]), 0..24),
    ]
}

fn parse_c_double(text: &[u8]) -> f64 {
    match text {
        b"inf" => f64::INFINITY,
        b"-inf" => f64::NEG_INFINITY,
        b"nan" | b"-nan" => f64::NAN,
        _ => std::str::from_utf8(text).unwrap().parse().unwrap(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_i64_is_string2ll(s in integer_text()) {
        prop_assert_eq!(parse_i64(&s), string2ll_oracle(&s), "{:?}", Escaped(&s));
    }

    /// `%.17g` is exact: the text reads back as the same double, bit for bit.
    #[test]
    fn format_double_round_trips(d in any::<f64>()) {
        let mut buf = [0u8; 32];
        let text = format_double(d, &mut buf);
        let back = parse_c_double(text);
        if d.is_nan() {
            prop_assert!(back.is_nan());
        } else {
            prop_assert_eq!(back.to_bits(), d.to_bits(), "{} -> {:?}", d, Escaped(text));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Regression tests for bugs and divergences in `protocol/src`, found by the tests above or
// while writing them, and fixed. Each test states the correct behaviour.

/// `reply_len` computed a map's element count as `2 * n` in `i64`, which overflowed for
/// `n >= 2^62` (a panic in debug builds; in release a reply that had not arrived was
/// reported complete). Both parsers say incomplete.
#[test]
fn regression_reply_len_huge_map_count_overflows() {
    let input = b"%4611686018427387904\r\n";
    assert_eq!(parse_reply(input), Ok(None));
    assert_eq!(reply_len(input), Ok(None));
}

/// `Limits` with `usize::MAX` (meaning "no limit") overflowed `start + max_inline_len + 1`
/// in the line search (a panic in debug builds; in release no line was ever found).
#[test]
fn regression_unlimited_limits_overflow() {
    let unlimited = Limits {
        max_bulk_len: usize::MAX,
        max_multibulk_len: usize::MAX,
        max_inline_len: usize::MAX,
        unauthenticated: false,
    };
    let mut dec = RequestDecoder::new(unlimited);
    assert_eq!(
        dec.decode(&mut b"PING\r\n".to_vec()),
        Ok(Decoded::Command(6))
    );
    let mut dec = RequestDecoder::new(unlimited);
    assert_eq!(
        dec.decode(&mut b"*1\r\n$4\r\nPING\r\n".to_vec()),
        Ok(Decoded::Command(14))
    );
}

/// redis-server finds the end of header and inline lines with `strchr`, which stops at
/// a NUL: a NUL before the line's end leaves it waiting (until 64 KiB are buffered,
/// then the too-big error). Goblin once parsed such a line; it now waits as Redis does.
#[test]
fn regression_nul_before_line_end_stalls_like_redis() {
    let cases: [&[u8]; 4] = [
        b"SET k v\0junk\r\n",
        b"*1\0\r\n$4\r\nPING\r\n",
        b"*1\r\n$4\0\r\nPING\r\n",
        b"*1\r\n\0\r\n",
    ];
    for stream in cases {
        assert_eq!(reference::decode(stream), [Event::Stall]);
        assert_eq!(fast_whole(stream), [], "{:?}", Escaped(stream));
    }
    let mut big = b"GET k\0".to_vec();
    big.resize(reference::INLINE_MAX + 1, b'\n');
    assert_eq!(
        fast_whole(&big),
        [Event::Error(ProtocolError::TooBigInlineRequest)]
    );
}
