//! Feeds arbitrary bytes to `RequestDecoder` the way a server does, and checks it against
//! itself (any split of the input into reads decodes the same) and against the naive
//! reference decoder of the property tests.
//!
//! Input layout: byte 0 chooses the limits (bits 0-1), whether consumed bytes are dropped
//! from the buffer after each read (bit 2) and how many read sizes follow (bits 3-5, 0 to
//! 7); each of those bytes gives a read size of 1 to 256 bytes, used in turn. The rest is
//! the stream. With no read sizes, the stream arrives in one read.
#![no_main]

use goblin_protocol::{Decoded, Limits, RequestDecoder};
use libfuzzer_sys::fuzz_target;

#[path = "../../protocol/tests/reference/mod.rs"]
#[allow(dead_code)]
mod reference;

use reference::Event;

/// Small limits make the too-big and too-many errors reachable by short inputs.
fn limits(selector: u8) -> Limits {
    match selector & 3 {
        2 => Limits {
            max_bulk_len: 16,
            max_multibulk_len: 4,
            max_inline_len: 32,
            unauthenticated: true,
        },
        3 => Limits {
            max_bulk_len: 1,
            max_multibulk_len: 1,
            max_inline_len: 3,
            unauthenticated: false,
        },
        _ => Limits::default(),
    }
}

/// Decodes `stream` arriving in reads of `sizes` bytes (in turn; all at once when empty),
/// checking every frame, until the input is exhausted or the first error.
fn decode(stream: &[u8], sizes: &[usize], compact: bool, limits: Limits) -> Vec<Event> {
    let mut dec = RequestDecoder::new(limits);
    let mut buf: Vec<u8> = Vec::new();
    let mut start = 0;
    let mut fed = 0;
    let mut events = Vec::new();
    let mut read = 0;
    while fed < stream.len() {
        let size = sizes
            .get(read % sizes.len().max(1))
            .copied()
            .unwrap_or(stream.len());
        read += 1;
        let end = (fed + size).min(stream.len());
        buf.extend_from_slice(&stream[fed..end]);
        fed = end;
        if compact || start == buf.len() {
            buf.drain(..start);
            start = 0;
        }
        loop {
            let avail = buf.len() - start;
            // Read before decoding: inline arguments are unescaped in place.
            let multibulk = buf.get(start) == Some(&b'*');
            match dec.decode(&mut buf[start..]) {
                Ok(Decoded::Command(n)) => {
                    assert!(n > 0 && n <= avail, "Command({n}) with {avail} bytes");
                    assert!(!dec.args().is_empty(), "Command without arguments");
                    let args = dec
                        .args()
                        .iter()
                        .map(|r| {
                            assert!(r.start <= r.end && r.end <= n, "arg {r:?} outside {n}");
                            buf[start..][r.clone()].to_vec()
                        })
                        .collect::<Vec<_>>();
                    if multibulk {
                        assert!(args.len() <= limits.max_multibulk_len);
                        assert!(args.iter().all(|a| a.len() <= limits.max_bulk_len));
                    } else {
                        assert!(n <= limits.max_inline_len + 1, "inline line of {n} bytes");
                    }
                    events.push(Event::Command(args, n));
                    start += n;
                }
                Ok(Decoded::Empty(n)) => {
                    assert!(n > 0 && n <= avail, "Empty({n}) with {avail} bytes");
                    events.push(Event::Empty(n));
                    start += n;
                }
                Ok(Decoded::Incomplete) => {
                    if let Some(needed) = dec.needed() {
                        assert!(needed > avail, "needs {needed} with {avail} bytes");
                    }
                    break;
                }
                Err(e) => {
                    assert!(!dec.in_frame(), "not reset after {e:?}");
                    events.push(Event::Error(e));
                    return events;
                }
            }
        }
    }
    events
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let n_sizes = usize::from((control >> 3) & 7).min(rest.len());
    let (size_bytes, stream) = rest.split_at(n_sizes);
    let sizes: Vec<usize> = size_bytes.iter().map(|&b| usize::from(b) + 1).collect();
    let limits = limits(control);

    let chunked = decode(stream, &sizes, control & 4 != 0, limits);
    let whole = decode(stream, &[], false, limits);
    assert_eq!(chunked, whole, "split into reads of {sizes:?}");
    reference::assert_agree(stream, &whole, &reference::decode_with(stream, limits));
});
