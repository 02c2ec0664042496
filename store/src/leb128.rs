//! LEB128 lengths, as entries, hash entries and list nodes store them: seven bits a
//! byte, least significant group first, the top bit set on every byte but the last.

/// Bytes the LEB128 encoding of `n` takes.
pub fn len(mut n: usize) -> usize {
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes
}

/// Reads a length at `*at` in `bytes`, moving `*at` past it. Damaged input reads as some
/// value, never a panic: the bytes run out, or the tenth byte ends it.
pub fn read(bytes: &[u8], at: &mut usize) -> usize {
    let mut n = 0usize;
    let mut shift = 0;
    while let Some(&b) = bytes.get(*at) {
        *at += 1;
        n |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 || shift >= 63 {
            break;
        }
        shift += 7;
    }
    n
}

/// Hands the encoding of `n` to `put`, a byte at a time.
pub fn write(mut n: usize, mut put: impl FnMut(u8)) {
    while n >= 0x80 {
        put((n as u8) | 0x80);
        n >>= 7;
    }
    put(n as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for n in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as usize,
            usize::MAX,
        ] {
            let mut out = Vec::new();
            write(n, |b| out.push(b));
            assert_eq!(out.len(), len(n));
            out.push(0xff);
            let mut at = 0;
            assert_eq!(read(&out, &mut at), n);
            assert_eq!(at, len(n));
        }
        let mut at = 0;
        assert_eq!(read(&[0x80, 0x80], &mut at), 0);
        assert_eq!(at, 2);
    }
}
