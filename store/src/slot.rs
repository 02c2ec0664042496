//! Hash slots, computed exactly as Redis Cluster computes them.

/// Number of hash slots in the keyspace (Redis Cluster's `CLUSTER_SLOTS`).
pub const SLOTS: usize = 16384;

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
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
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16-XMODEM of `data`.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)]
    })
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
