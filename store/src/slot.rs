//! Hash slots, computed exactly as Redis Cluster computes them.

/// Number of hash slots in the keyspace (Redis Cluster's `CLUSTER_SLOTS`).
pub const SLOTS: usize = 16384;

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses,
/// by tables for 8 bytes at a time ("slicing-by-8"): `TABLES[k][b]` is what byte `b`
/// followed by `k` zero bytes adds to the checksum. A byte at a time, every step waits for
/// the one before (a table load on the critical path per byte); eight bytes take eight
/// independent loads. Every command with a key computes it at least once.
const TABLES: [[u16; 256]; 8] = {
    let mut tables = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev << 8) ^ tables[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
};

/// CRC16-XMODEM of `data`.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc = 0u16;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let [hi, lo] = crc.to_be_bytes();
        crc = TABLES[7][usize::from(w[0] ^ hi)]
            ^ TABLES[6][usize::from(w[1] ^ lo)]
            ^ TABLES[5][usize::from(w[2])]
            ^ TABLES[4][usize::from(w[3])]
            ^ TABLES[3][usize::from(w[4])]
            ^ TABLES[2][usize::from(w[5])]
            ^ TABLES[1][usize::from(w[6])]
            ^ TABLES[0][usize::from(w[7])];
    }
    // The rest (most keys are shorter than eight bytes, or end in a few): four, two,
    // then one at a time, so at most three steps wait on each other.
    let mut rest = words.remainder();
    if let [a, b, c, d, tail @ ..] = rest {
        let [hi, lo] = crc.to_be_bytes();
        crc = TABLES[3][usize::from(a ^ hi)]
            ^ TABLES[2][usize::from(b ^ lo)]
            ^ TABLES[1][usize::from(*c)]
            ^ TABLES[0][usize::from(*d)];
        rest = tail;
    }
    if let [a, b, tail @ ..] = rest {
        let [hi, lo] = crc.to_be_bytes();
        crc = TABLES[1][usize::from(a ^ hi)] ^ TABLES[0][usize::from(b ^ lo)];
        rest = tail;
    }
    if let [a] = rest {
        crc = (crc << 8) ^ TABLES[0][usize::from((crc >> 8) as u8 ^ a)];
    }
    crc
}

/// The part of `key` that is hashed: the content of the first `{…}` when it is non-empty,
/// otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The hash slot of `key`, as `CLUSTER KEYSLOT` reports it.
///
/// # Examples
/// ```
/// use goblin_store::key_slot;
/// assert_eq!(key_slot(b"foo"), 12182);
/// assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
/// ```
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum a bit at a time, as its definition reads.
    fn crc16_bitwise(data: &[u8]) -> u16 {
        let mut crc = 0u16;
        for &b in data {
            crc ^= u16::from(b) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc
    }

    #[test]
    fn crc16_by_eight_bytes_is_the_bitwise_checksum() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut data = Vec::new();
        for len in 0..200 {
            data.clear();
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                data.push(x as u8);
            }
            assert_eq!(crc16(&data), crc16_bitwise(&data), "{data:?}");
        }
    }

    #[test]
    fn crc16_check_value() {
        // The standard check value of CRC-16/XMODEM.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_match_redis_cluster_keyslot() {
        // Values from `CLUSTER KEYSLOT` on redis-server 7.
        let known: &[(&[u8], u16)] = &[
            (b"foo", 12182),
            (b"bar", 5061),
            (b"hello", 866),
            (b"key:000000000001", 8924),
            (b"", 0),
            (b"{user1000}.following", 3443),
            (b"{user1000}.followers", 3443),
            (b"foo{}{bar}", 8363),
            (b"foo{{bar}}zap", 4015),
            (b"foo{bar}{zap}", 5061),
            (b"{}", 15257),
            (b"{", 4092),
            (b"a{b}", 3300),
            (b"{a}b}", 15495),
        ];
        for &(key, slot) in known {
            assert_eq!(key_slot(key), slot, "{}", String::from_utf8_lossy(key));
        }
    }
}
