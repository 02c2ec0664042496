//! Reply encoding straight into an output buffer, in the protocol version the connection
//! speaks: RESP2 by default, RESP3 after `HELLO 3`. RESP3-only types degrade to their
//! RESP2 forms exactly as redis-server 7 sends them.

use crate::int::push_int;

/// The protocol version a connection speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Version {
    /// RESP2, every connection's starting version.
    #[default]
    Resp2,
    /// RESP3, chosen with `HELLO 3`.
    Resp3,
}

/// Writes replies into a byte buffer.
///
/// # Examples
/// ```
/// use goblin_protocol::{Encoder, Version};
/// let mut out = Vec::new();
/// let mut enc = Encoder::new(&mut out, Version::Resp2);
/// enc.array(2);
/// enc.bulk(b"a");
/// enc.null();
/// assert_eq!(out, b"*2\r\n$1\r\na\r\n$-1\r\n");
/// ```
#[derive(Debug)]
pub struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    version: Version,
}

impl<'a> Encoder<'a> {
    /// An encoder appending to `out` in `version`.
    pub fn new(out: &'a mut Vec<u8>, version: Version) -> Self {
        Encoder { out, version }
    }

    /// The version replies are encoded in.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Bytes written to the underlying buffer so far (all of it, not just by this encoder).
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// True when the underlying buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Drops everything written after `len` bytes (to take back a partial reply).
    pub fn truncate(&mut self, len: usize) {
        self.out.truncate(len);
    }

    /// Appends bytes that are already RESP.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    fn header(&mut self, prefix: u8, n: i64) {
        self.out.push(prefix);
        push_int(self.out, n);
        self.out.extend_from_slice(b"\r\n");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// One line: `prefix`, `s` (no CR or LF in it), CRLF.
    fn line(&mut self, prefix: u8, s: &[u8]) {
        self.out.push(prefix);
        self.out.extend_from_slice(s);
        self.out.extend_from_slice(b"\r\n");
    }

    /// A simple string; `s` must not contain CR or LF.
    pub fn simple(&mut self, s: &[u8]) {
        self.line(b'+', s);
    }

    /// An error (code included, e.g. `ERR syntax error`). A text holding CR or LF — client
    /// bytes formatted into it — is cleaned as [`Encoder::error_sanitized`] cleans it, as
    /// RESP's error line cannot hold them.
    pub fn error(&mut self, msg: &[u8]) {
        if msg.iter().any(|&b| b == b'\r' || b == b'\n') {
            self.error_sanitized(msg);
        } else {
            self.line(b'-', msg);
        }
    }

    /// An error whose text holds client bytes, cleaned the way Redis's
    /// `addReplyErrorFormat` cleans it: CR and LF trimmed from both ends, the rest turned
    /// into spaces.
    pub fn error_sanitized(&mut self, msg: &[u8]) {
        let is_nl = |b: &u8| *b == b'\r' || *b == b'\n';
        let start = msg.iter().position(|b| !is_nl(b)).unwrap_or(msg.len());
        let end = msg.iter().rposition(|b| !is_nl(b)).map_or(start, |i| i + 1);
        self.out.push(b'-');
        self.out.extend(
            msg[start..end]
                .iter()
                .map(|&b| if is_nl(&b) { b' ' } else { b }),
        );
        self.out.extend_from_slice(b"\r\n");
    }

    /// An integer.
    pub fn integer(&mut self, n: i64) {
        self.header(b':', n);
    }

    /// A bulk string.
    pub fn bulk(&mut self, s: &[u8]) {
        self.out.reserve(s.len() + 16);
        self.header(b'$', s.len() as i64);
        self.out.extend_from_slice(s);
        self.out.extend_from_slice(b"\r\n");
    }

    /// A bulk string holding the decimal form of `n`.
    pub fn bulk_int(&mut self, n: i64) {
        let mut buf = itoa::Buffer::new();
        self.bulk(buf.format(n).as_bytes());
    }

    /// The null bulk string: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        match self.version {
            Version::Resp2 => self.out.extend_from_slice(b"$-1\r\n"),
            Version::Resp3 => self.out.extend_from_slice(b"_\r\n"),
        }
    }

    /// The null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        match self.version {
            Version::Resp2 => self.out.extend_from_slice(b"*-1\r\n"),
            Version::Resp3 => self.out.extend_from_slice(b"_\r\n"),
        }
    }

    /// The header of an array of `n` elements.
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as i64);
    }

    /// The header of a map of `n` pairs (an array of 2n elements in RESP2).
    pub fn map(&mut self, n: usize) {
        match self.version {
            Version::Resp2 => self.header(b'*', 2 * n as i64),
            Version::Resp3 => self.header(b'%', n as i64),
        }
    }

    /// The header of a set of `n` elements (an array in RESP2).
    pub fn set(&mut self, n: usize) {
        match self.version {
            Version::Resp2 => self.header(b'*', n as i64),
            Version::Resp3 => self.header(b'~', n as i64),
        }
    }

    /// The header of a push message of `n` elements (an array in RESP2).
    pub fn push(&mut self, n: usize) {
        match self.version {
            Version::Resp2 => self.header(b'*', n as i64),
            Version::Resp3 => self.header(b'>', n as i64),
        }
    }

    /// A double, formatted like C's `%.17g` (as redis-server 7.0 does); a bulk string in
    /// RESP2.
    pub fn double(&mut self, d: f64) {
        let mut buf = [0u8; 32];
        let text = format_double(d, &mut buf);
        match self.version {
            Version::Resp2 => self.bulk(text),
            Version::Resp3 => self.line(b',', text),
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, the integers 1 and 0 in RESP2.
    pub fn boolean(&mut self, b: bool) {
        match self.version {
            Version::Resp2 => self
                .out
                .extend_from_slice(if b { b":1\r\n" } else { b":0\r\n" }),
            Version::Resp3 => self
                .out
                .extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" }),
        }
    }

    /// A verbatim string with a three-letter format (`txt`, `mkd`); a bulk string in RESP2.
    pub fn verbatim(&mut self, format: &[u8; 3], text: &[u8]) {
        match self.version {
            Version::Resp2 => self.bulk(text),
            Version::Resp3 => {
                self.header(b'=', text.len() as i64 + 4);
                self.out.extend_from_slice(format);
                self.out.push(b':');
                self.out.extend_from_slice(text);
                self.out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// A big number given as its decimal digits; a bulk string in RESP2.
    pub fn big_number(&mut self, digits: &[u8]) {
        match self.version {
            Version::Resp2 => self.bulk(digits),
            Version::Resp3 => self.line(b'(', digits),
        }
    }
}

/// Formats `d` like C's `printf("%.17g", d)` into `buf`, returning the bytes written;
/// infinities are `inf` and `-inf`, as Redis writes them.
pub fn format_double(d: f64, buf: &mut [u8; 32]) -> &[u8] {
    use std::io::Write;
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    // Every branch writes at most 24 bytes: sign, 17 digits, point, `e-308`.
    let _ = write_g17(&mut cur, d);
    let n = cur.position() as usize;
    let _ = cur.flush();
    &buf[..n]
}

fn write_g17(w: &mut impl std::io::Write, d: f64) -> std::io::Result<()> {
    use std::io::Write;
    const PRECISION: i32 = 17;
    if d.is_nan() {
        return w.write_all(if d.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
    }
    if d.is_infinite() {
        return w.write_all(if d > 0.0 { b"inf" } else { b"-inf" });
    }
    if d == 0.0 {
        return w.write_all(if d.is_sign_negative() { b"-0" } else { b"0" });
    }
    // `{:.16e}` gives the 17 significant digits %g starts from, correctly rounded, and
    // the decimal exponent that decides between fixed and exponent notation.
    let mut sci = [0u8; 40];
    let mut cur = std::io::Cursor::new(&mut sci[..]);
    write!(cur, "{:.16e}", d)?;
    let len = cur.position() as usize;
    let sci = &sci[..len];
    let e_pos = sci.iter().position(|&b| b == b'e').unwrap_or(len);
    let exp: i32 = std::str::from_utf8(&sci[e_pos + 1..])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if (-4..PRECISION).contains(&exp) {
        let mut fixed = [0u8; 48];
        let mut cur = std::io::Cursor::new(&mut fixed[..]);
        write!(cur, "{:.*}", (PRECISION - 1 - exp) as usize, d)?;
        let len = cur.position() as usize;
        w.write_all(trim_fraction(&fixed[..len]))
    } else {
        w.write_all(trim_fraction(&sci[..e_pos]))?;
        let sign = if exp < 0 { b'-' } else { b'+' };
        write!(w, "e{}{:02}", sign as char, exp.unsigned_abs())
    }
}

/// Drops trailing zeros of a fraction, and the point when nothing is left after it.
fn trim_fraction(s: &[u8]) -> &[u8] {
    if !s.contains(&b'.') {
        return s;
    }
    let mut end = s.len();
    while end > 0 && s[end - 1] == b'0' {
        end -= 1;
    }
    if end > 0 && s[end - 1] == b'.' {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::type_complexity)]
mod tests {
    use super::*;

    fn enc(version: Version, f: impl FnOnce(&mut Encoder<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut Encoder::new(&mut out, version));
        out
    }

    #[test]
    fn resp2_and_resp3_forms() {
        use Version::*;
        let cases: Vec<(Box<dyn Fn(&mut Encoder<'_>)>, &[u8], &[u8])> = vec![
            (Box::new(|e| e.ok()), b"+OK\r\n", b"+OK\r\n"),
            (Box::new(|e| e.simple(b"PONG")), b"+PONG\r\n", b"+PONG\r\n"),
            (
                Box::new(|e| e.error(b"ERR x")),
                b"-ERR x\r\n",
                b"-ERR x\r\n",
            ),
            (Box::new(|e| e.integer(-5)), b":-5\r\n", b":-5\r\n"),
            (Box::new(|e| e.bulk(b"")), b"$0\r\n\r\n", b"$0\r\n\r\n"),
            (
                Box::new(|e| e.bulk_int(12)),
                b"$2\r\n12\r\n",
                b"$2\r\n12\r\n",
            ),
            (Box::new(|e| e.null()), b"$-1\r\n", b"_\r\n"),
            (Box::new(|e| e.null_array()), b"*-1\r\n", b"_\r\n"),
            (Box::new(|e| e.array(3)), b"*3\r\n", b"*3\r\n"),
            (Box::new(|e| e.map(2)), b"*4\r\n", b"%2\r\n"),
            (Box::new(|e| e.set(2)), b"*2\r\n", b"~2\r\n"),
            (Box::new(|e| e.push(2)), b"*2\r\n", b">2\r\n"),
            (Box::new(|e| e.double(1.5)), b"$3\r\n1.5\r\n", b",1.5\r\n"),
            (
                Box::new(|e| e.double(f64::INFINITY)),
                b"$3\r\ninf\r\n",
                b",inf\r\n",
            ),
            (Box::new(|e| e.boolean(true)), b":1\r\n", b"#t\r\n"),
            (Box::new(|e| e.boolean(false)), b":0\r\n", b"#f\r\n"),
            (
                Box::new(|e| e.verbatim(b"txt", b"hi")),
                b"$2\r\nhi\r\n",
                b"=6\r\ntxt:hi\r\n",
            ),
            (
                Box::new(|e| e.big_number(b"123")),
                b"$3\r\n123\r\n",
                b"(123\r\n",
            ),
        ];
        for (f, two, three) in cases {
            assert_eq!(enc(Resp2, &f), two);
            assert_eq!(enc(Resp3, &f), three);
        }
    }

    #[test]
    fn sanitized_errors() {
        let out = enc(Version::Resp2, |e| e.error_sanitized(b"\r\nERR a\r\nb\n"));
        assert_eq!(out, b"-ERR a  b\r\n");
        // Any error: client bytes formatted into its text cannot break the line.
        let out = enc(Version::Resp2, |e| {
            e.error(b"ERR Unrecognized option: \x16k\r")
        });
        assert_eq!(out, b"-ERR Unrecognized option: \x16k\r\n");
        let out = enc(Version::Resp2, |e| e.error(b"ERR a\nb"));
        assert_eq!(out, b"-ERR a b\r\n");
    }

    #[test]
    fn percent_17g() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (3.0e20, "3e+20"),
            (1.0e16, "10000000000000000"),
            (1.0e17, "1e+17"),
            (123456789.125, "123456789.125"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (-2.5e-300, "-2.5e-300"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for &(d, want) in cases {
            let mut buf = [0u8; 32];
            assert_eq!(
                std::str::from_utf8(format_double(d, &mut buf)),
                Ok(want),
                "{d}"
            );
        }
    }
}
