//! Redis's listpack, byte for byte: a header (total bytes, u32 LE; element count, u16 LE,
//! 65535 once unknown), the elements, and an end byte `0xFF`. Each element is its
//! encoding and data, then its length written backwards (so the list walks both ways).
//! Strings that read as canonical integers are stored as integers, as `lpAppend` does.
//!
//! Streams keep their entries in listpacks (one per node, as Redis's radix tree does),
//! so that a stream costs what it costs in redis-server and its nodes go to and come from
//! an RDB file as they are. Positions are byte offsets into the buffer.

/// Bytes of the header.
pub const HEADER: usize = 6;
const END: u8 = 0xFF;
const COUNT_UNKNOWN: u16 = u16::MAX;

/// An element: an integer, or a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem<'a> {
    /// An integer-encoded element.
    Int(i64),
    /// A string element.
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// The element as bytes (an integer in decimal).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Int(v) => v.to_string().into_bytes(),
            Elem::Str(s) => s.to_vec(),
        }
    }

    /// The element as an integer (a string that reads as one, strictly).
    pub fn as_int(self) -> Option<i64> {
        match self {
            Elem::Int(v) => Some(v),
            Elem::Str(s) => str_to_int(s),
        }
    }

    /// Whether the element is exactly the bytes `s`.
    pub fn eq_bytes(self, s: &[u8]) -> bool {
        match self {
            Elem::Str(e) => e == s,
            Elem::Int(v) => str_to_int(s) == Some(v),
        }
    }
}

/// `s` as an integer when it is the canonical decimal form of one (Redis's
/// `lpStringToInt64`: no sign but `-`, no leading zero, at most 20 bytes).
pub fn str_to_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// An empty listpack.
pub fn new() -> Vec<u8> {
    let mut lp = Vec::new();
    lp.extend_from_slice(&((HEADER + 1) as u32).to_le_bytes());
    lp.extend_from_slice(&0u16.to_le_bytes());
    lp.push(END);
    lp
}

/// The header's element count (`None`: unknown, 65535 or more).
pub fn count(lp: &[u8]) -> Option<usize> {
    let n = u16::from_le_bytes([lp[4], lp[5]]);
    (n != COUNT_UNKNOWN).then_some(usize::from(n))
}

/// The first element's position.
pub fn first(lp: &[u8]) -> Option<usize> {
    (lp.get(HEADER) != Some(&END)).then_some(HEADER)
}

/// The last element's position.
pub fn last(lp: &[u8]) -> Option<usize> {
    prev(lp, lp.len() - 1)
}

/// The position after the element at `p` (`None`: `p` was the last).
pub fn next(lp: &[u8], p: usize) -> Option<usize> {
    let n = p + size(lp, p);
    (lp.get(n) != Some(&END)).then_some(n)
}

/// The position of the element before `p` (`p` may be the end byte); `None` at the first
/// element, or when the length written before `p` does not point inside the listpack.
pub fn prev(lp: &[u8], p: usize) -> Option<usize> {
    if p <= HEADER {
        return None;
    }
    // The backlen ends right before `p`: read it from its last byte backwards, at most
    // five bytes, the first one without the high bit ending it.
    let mut at = p - 1;
    let mut len: usize = 0;
    for i in 0..5 {
        let b = *lp.get(at)?;
        len |= usize::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return at.checked_sub(len).filter(|&start| start >= HEADER);
        }
        if at <= HEADER {
            return None;
        }
        at -= 1;
    }
    None
}

/// The bytes of an element's encoding and data (its backlen not counted).
fn body_len(lp: &[u8], p: usize) -> usize {
    let first = lp[p];
    if first & 0x80 == 0 {
        1
    } else if first & 0xC0 == 0x80 {
        1 + usize::from(first & 0x3F)
    } else if first & 0xE0 == 0xC0 {
        2
    } else if first & 0xF0 == 0xE0 {
        2 + ((usize::from(first & 0x0F) << 8) | usize::from(lp[p + 1]))
    } else {
        match first {
            0xF0 => 5 + u32::from_le_bytes([lp[p + 1], lp[p + 2], lp[p + 3], lp[p + 4]]) as usize,
            0xF1 => 3,
            0xF2 => 4,
            0xF3 => 5,
            _ => 9,
        }
    }
}

/// The bytes a backlen of `len` takes.
fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// The whole element at `p`, backlen included.
fn size(lp: &[u8], p: usize) -> usize {
    let body = body_len(lp, p);
    body + backlen_size(body)
}

/// The element at `p`.
pub fn get(lp: &[u8], p: usize) -> Elem<'_> {
    let first = lp[p];
    let int = |bytes: &[u8], bits: u32| -> i64 {
        let mut v: u64 = 0;
        for (i, b) in bytes.iter().enumerate() {
            v |= u64::from(*b) << (8 * i);
        }
        let shift = 64 - bits;
        ((v << shift) as i64) >> shift
    };
    if first & 0x80 == 0 {
        Elem::Int(i64::from(first & 0x7F))
    } else if first & 0xC0 == 0x80 {
        let n = usize::from(first & 0x3F);
        Elem::Str(&lp[p + 1..p + 1 + n])
    } else if first & 0xE0 == 0xC0 {
        Elem::Int(int(&[lp[p + 1], first & 0x1F], 13))
    } else if first & 0xF0 == 0xE0 {
        let n = (usize::from(first & 0x0F) << 8) | usize::from(lp[p + 1]);
        Elem::Str(&lp[p + 2..p + 2 + n])
    } else {
        match first {
            0xF0 => {
                let n = u32::from_le_bytes([lp[p + 1], lp[p + 2], lp[p + 3], lp[p + 4]]) as usize;
                Elem::Str(&lp[p + 5..p + 5 + n])
            }
            0xF1 => Elem::Int(int(&lp[p + 1..p + 3], 16)),
            0xF2 => Elem::Int(int(&lp[p + 1..p + 4], 24)),
            0xF3 => Elem::Int(int(&lp[p + 1..p + 5], 32)),
            _ => Elem::Int(int(&lp[p + 1..p + 9], 64)),
        }
    }
}

/// The element at `p` as an integer (0 for a string that is not one: streams write
/// their own integers, so this does not happen in a listpack that passed [`validate`]).
pub fn get_int(lp: &[u8], p: usize) -> i64 {
    get(lp, p).as_int().unwrap_or(0)
}

/// Appends the encoding of the integer `v` and its backlen to `out`.
fn encode_int(v: i64, out: &mut Vec<u8>) {
    let start = out.len();
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = (v as u64) & 0x1FFF;
        out.push(0xC0 | (u >> 8) as u8);
        out.push(u as u8);
    } else if (-32_768..=32_767).contains(&v) {
        out.push(0xF1);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-8_388_608..=8_388_607).contains(&v) {
        out.push(0xF2);
        out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if let Ok(v) = i32::try_from(v) {
        out.push(0xF3);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(0xF4);
        out.extend_from_slice(&v.to_le_bytes());
    }
    let len = out.len() - start;
    encode_backlen(len, out);
}

/// Appends the encoding of `s` (an integer if it reads as one) and its backlen.
fn encode_str(s: &[u8], out: &mut Vec<u8>) {
    if let Some(v) = str_to_int(s) {
        return encode_int(v, out);
    }
    let start = out.len();
    let n = s.len();
    if n < 64 {
        out.push(0x80 | n as u8);
    } else if n < 4096 {
        out.push(0xE0 | (n >> 8) as u8);
        out.push(n as u8);
    } else {
        out.push(0xF0);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    out.extend_from_slice(s);
    let len = out.len() - start;
    encode_backlen(len, out);
}

fn encode_backlen(len: usize, out: &mut Vec<u8>) {
    let n = backlen_size(len);
    for i in (0..n).rev() {
        let b = ((len >> (7 * i)) & 0x7F) as u8;
        out.push(if i == n - 1 { b } else { b | 0x80 });
    }
}

fn set_header(lp: &mut [u8], added: isize) {
    let total = lp.len() as u32;
    lp[0..4].copy_from_slice(&total.to_le_bytes());
    let n = u16::from_le_bytes([lp[4], lp[5]]);
    if n != COUNT_UNKNOWN {
        let m = (n as isize + added).clamp(0, 65535) as u16;
        lp[4..6].copy_from_slice(&m.to_le_bytes());
    }
}

/// Appends an integer.
pub fn append_int(lp: &mut Vec<u8>, v: i64) {
    lp.pop();
    encode_int(v, lp);
    lp.push(END);
    set_header(lp, 1);
}

/// Appends a string (as an integer if it reads as one).
pub fn append_str(lp: &mut Vec<u8>, s: &[u8]) {
    lp.pop();
    encode_str(s, lp);
    lp.push(END);
    set_header(lp, 1);
}

/// Replaces the element at `p` with the integer `v`.
pub fn replace_int(lp: &mut Vec<u8>, p: usize, v: i64) {
    let old = size(lp, p);
    let mut buf = Vec::with_capacity(12);
    encode_int(v, &mut buf);
    lp.splice(p..p + old, buf);
    set_header(lp, 0);
}

/// Whether `lp` is a well-formed listpack: its header's size, every element inside it
/// with its backlen, the end byte last (what an RDB file's blob must be before it is
/// walked).
pub fn validate(lp: &[u8]) -> bool {
    if lp.len() < HEADER + 1
        || u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize != lp.len()
        || lp[lp.len() - 1] != END
    {
        return false;
    }
    let mut p = HEADER;
    let mut n = 0usize;
    while lp[p] != END {
        let first = lp[p];
        let head = match first {
            0xF0 => 5,
            0xC0..=0xEF => 2,
            0xF5..=0xFE => return false,
            _ => 1,
        };
        if p + head >= lp.len() {
            return false;
        }
        let body = body_len(lp, p);
        let Some(end) = p.checked_add(body + backlen_size(body)) else {
            return false;
        };
        if end >= lp.len() {
            return false;
        }
        p = end;
        n += 1;
        if prev(lp, p) != Some(p - body - backlen_size(body)) {
            return false;
        }
    }
    // The end byte is the last one.
    if p != lp.len() - 1 {
        return false;
    }
    match count(lp) {
        Some(c) => c == n,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_strings_round_trip_both_ways() {
        let mut lp = new();
        let ints = [
            0i64,
            127,
            128,
            -1,
            4095,
            -4096,
            4096,
            32_767,
            -32_768,
            8_388_607,
            -8_388_608,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ];
        for v in ints {
            append_int(&mut lp, v);
        }
        let long = vec![b'x'; 5000];
        let strs: [&[u8]; 5] = [b"", b"hello", &[b'y'; 100], &long, b"007"];
        for s in strs {
            append_str(&mut lp, s);
        }
        assert!(validate(&lp));
        assert_eq!(count(&lp), Some(ints.len() + strs.len()));
        let mut got = Vec::new();
        let mut p = first(&lp);
        while let Some(at) = p {
            got.push(get(&lp, at).to_vec());
            p = next(&lp, at);
        }
        let want: Vec<Vec<u8>> = ints
            .iter()
            .map(|v| v.to_string().into_bytes())
            .chain(strs.iter().map(|s| s.to_vec()))
            .collect();
        assert_eq!(got, want);
        let mut back = Vec::new();
        let mut p = last(&lp);
        while let Some(at) = p {
            back.push(get(&lp, at).to_vec());
            p = prev(&lp, at);
        }
        back.reverse();
        assert_eq!(back, want);
    }

    #[test]
    fn replacing_an_integer_resizes_it() {
        let mut lp = new();
        append_int(&mut lp, 127);
        append_str(&mut lp, b"after");
        replace_int(&mut lp, HEADER, 100_000);
        assert!(validate(&lp));
        assert_eq!(get(&lp, HEADER), Elem::Int(100_000));
        let p = next(&lp, HEADER).expect("a second element");
        assert_eq!(get(&lp, p), Elem::Str(b"after"));
    }

    #[test]
    fn canonical_integers_only() {
        assert_eq!(str_to_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(str_to_int(b"9223372036854775808"), None);
        for s in [&b"01"[..], b"+1", b"-0", b"", b" 1", b"1 "] {
            assert_eq!(str_to_int(s), None, "{s:?}");
        }
    }

    #[test]
    fn a_backlen_that_points_nowhere_is_refused_not_followed() {
        // Every byte with its high bit set: a backlen that never ends.
        let mut lp = vec![0xFFu8; 40];
        lp[0..4].copy_from_slice(&40u32.to_le_bytes());
        assert_eq!(prev(&lp, 39), None);
        assert!(!validate(&lp));
        let mut lp = new();
        append_str(&mut lp, b"abc");
        let end = lp.len() - 1;
        lp[end - 1] = 0x7F; // a length past the start
        assert_eq!(prev(&lp, end), None);
        assert!(!validate(&lp));
    }

    #[test]
    fn malformed_listpacks_are_refused() {
        let mut lp = new();
        append_str(&mut lp, b"abc");
        assert!(validate(&lp));
        let mut short = lp.clone();
        short.truncate(lp.len() - 2);
        assert!(!validate(&short));
        let mut wrong = lp.clone();
        wrong[HEADER] = 0x80 | 50;
        assert!(!validate(&wrong));
    }
}
