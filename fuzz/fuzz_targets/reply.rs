//! Checks `reply_len` against `parse_reply` on arbitrary bytes, and that every reply
//! `parse_reply` accepts is written back by `Encoder` (in RESP3) as bytes that parse to
//! the same frame.
//!
//! `reply_len` is the parser without the frame: where `parse_reply` reads a reply or needs
//! more bytes, it must say the same. It may accept what the parser rejects (it does not
//! validate `:` and `#` lines), so a parser error only requires that it not panic.
#![no_main]

use goblin_protocol::{Encoder, Frame, Version, parse_reply, reply_len};
use libfuzzer_sys::fuzz_target;

fn write(frame: &Frame<'_>, e: &mut Encoder<'_>) {
    let line = |e: &mut Encoder<'_>, prefix: &[u8], s: &[u8]| {
        e.raw(prefix);
        e.raw(s);
        e.raw(b"\r\n");
    };
    let all = |e: &mut Encoder<'_>, items: &[Frame<'_>]| items.iter().for_each(|f| write(f, e));
    match frame {
        Frame::Simple(s) => e.simple(s),
        Frame::Error(s) => e.error(s),
        Frame::Integer(n) => e.integer(*n),
        Frame::Bulk(s) => e.bulk(s),
        Frame::Null => e.null(),
        Frame::Array(v) => {
            e.array(v.len());
            all(e, v);
        }
        Frame::Map(v) => {
            e.map(v.len() / 2);
            all(e, v);
        }
        Frame::Set(v) => {
            e.set(v.len());
            all(e, v);
        }
        Frame::Push(v) => {
            e.push(v.len());
            all(e, v);
        }
        Frame::Double(s) => line(e, b",", s),
        Frame::Boolean(b) => e.boolean(*b),
        Frame::Verbatim(s) => e.verbatim(b"txt", s),
        Frame::BigNumber(s) => e.big_number(s),
        Frame::BlobError(s) => {
            line(e, b"!", s.len().to_string().as_bytes());
            line(e, b"", s);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let len = reply_len(data);
    match parse_reply(data) {
        Ok(Some((frame, n))) => {
            assert!(n > 0 && n <= data.len());
            let is_error = matches!(data[0], b'-' | b'!');
            assert_eq!(len, Ok(Some((n, is_error))));

            let mut out = Vec::new();
            write(&frame, &mut Encoder::new(&mut out, Version::Resp3));
            let again = parse_reply(&out);
            assert_eq!(
                again,
                Ok(Some((frame, out.len()))),
                "re-encoded as {:?}",
                out.escape_ascii().to_string()
            );
        }
        Ok(None) => assert_eq!(len, Ok(None)),
        Err(_) => {}
    }
    if len.is_err() {
        assert!(parse_reply(data).is_err());
    }
});
