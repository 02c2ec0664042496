//! Where keys live: hash slots, the shard owning a slot with a given thread count, keys
//! chosen to land on given shards, and the thread counts the suites run with.
//!
//! Slots are computed with a CRC16 written here, checked against Redis Cluster's
//! published vectors, rather than with the store's own `key_slot`: a test that asks the
//! code under test where a key lives cannot notice that it lives elsewhere.

/// Redis Cluster's slot count.
pub const SLOTS: usize = 16384;

/// The `--threads` the issue-3 suites run with: one shard, two, and more shards than
/// this machine's two cores.
pub const THREAD_COUNTS: [usize; 3] = [1, 2, 4];

/// The `--threads` the differential suites of issues 4 and 6 run goblin-server with: one
/// shard, and more shards than this machine's two cores.
pub const THREADS: [usize; 2] = [1, 4];

/// The thread count whose shards [`Layout`] places keys on (the largest of [`THREADS`]).
pub const LAYOUT_THREADS: usize = 4;

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's key hash.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
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

/// The hash slot of a key: CRC16 of its first non-empty `{hash tag}`, else of the key.
pub fn slot(key: &[u8]) -> usize {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&close| close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(key);
    usize::from(crc16(hashed)) % SLOTS
}

/// The shard owning `key` when the server runs `threads` threads: slots are dealt in
/// contiguous ranges, `shard = slot * threads / 16384`.
pub fn shard_of(key: &[u8], threads: usize) -> usize {
    slot(key) * threads / SLOTS
}

/// `count` keys named `{prefix}{n}` that live on `shard` with `threads` threads.
pub fn keys_on(prefix: &str, shard: usize, threads: usize, count: usize) -> Vec<String> {
    assert!(shard < threads, "shard {shard} of {threads}");
    (0..)
        .map(|n| format!("{prefix}{n}"))
        .filter(|k| shard_of(k.as_bytes(), threads) == shard)
        .take(count)
        .collect()
}

/// `per_shard * threads` keys dealt round-robin over the shards: key `i` lives on shard
/// `i % threads`, so consecutive keys are on different shards (when `threads > 1`).
pub fn spread(prefix: &str, threads: usize, per_shard: usize) -> Vec<String> {
    let by_shard: Vec<Vec<String>> = (0..threads)
        .map(|s| keys_on(&format!("{prefix}{s}."), s, threads, per_shard))
        .collect();
    (0..per_shard)
        .flat_map(|i| by_shard.iter().map(move |keys| keys[i].clone()))
        .collect()
}

/// Where the keys of a multi-key test live, with [`LAYOUT_THREADS`] threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Every key in one hash slot (a common `{slot}` hash tag).
    SameSlot,
    /// Every key on shard 2, in different slots.
    SameShard,
    /// Consecutive keys on different shards: key `i` on shard `i % 4`.
    CrossShard,
}

/// Every layout, in the order the tests run them.
pub const LAYOUTS: [Layout; 3] = [Layout::SameSlot, Layout::SameShard, Layout::CrossShard];

impl Layout {
    /// `n` distinct keys laid out as `self` says.
    pub fn keys(self, n: usize) -> Vec<String> {
        match self {
            Layout::SameSlot => (0..n).map(|i| format!("{{slot}}k{i}")).collect(),
            Layout::SameShard => keys_on("one.", 2, LAYOUT_THREADS, n),
            Layout::CrossShard => spread("cross", LAYOUT_THREADS, n.div_ceil(LAYOUT_THREADS))
                .into_iter()
                .take(n)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots here are the store's: helpers that placed keys with the store's
    /// `key_slot` place them on the same shards now.
    #[test]
    fn slots_agree_with_the_store() {
        let mut keys: Vec<Vec<u8>> = (0..5000).map(|i| format!("k{i}").into_bytes()).collect();
        keys.extend(
            [
                &b""[..],
                b"{",
                b"}",
                b"{}",
                b"{}x",
                b"x{}y",
                b"{a}",
                b"a{b}c",
                b"a{b}c{d}",
                b"{{b}}",
                b"a{}b{c}",
                b"\xff{\x00}",
            ]
            .map(<[u8]>::to_vec),
        );
        for k in &keys {
            assert_eq!(
                slot(k),
                usize::from(goblin_store::key_slot(k)),
                "{}",
                crate::show(k)
            );
        }
        assert_eq!(SLOTS, goblin_store::SLOTS);
    }
}
