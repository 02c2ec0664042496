//! GOBLIN.CLAIM's helpers: where a claim's two keys live, and the replies and errors
//! its suites expect.

use crate::keys::{SLOTS, shard_of, slot};

/// The reply to a won claim.
pub const CLAIMED: &[u8] = b"$7\r\nCLAIMED\r\n";
/// `ERR value is not an integer or out of range`.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// GOBLIN.CLAIM's invalid-lease error.
pub const INVALID_EXPIRE: &str = "ERR invalid expire time in 'goblin.claim' command";
/// WRONGTYPE.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Where a claim's two keys live relative to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One slot (hash tags `claim:{id}` / `result:{id}`): one shard, the fast path.
    SameSlot,
    /// Different slots; with more than one thread, the claim key's shard comes first in
    /// the lock order (the protocol keeps the claim locked while it reads the result).
    CrossUp,
    /// Different slots; with more than one thread, the result key's shard comes first
    /// (the protocol drops the claim, reads the result, then tries the claim again).
    CrossDown,
}

impl Layout {
    /// Every layout.
    pub const ALL: [Layout; 3] = [Layout::SameSlot, Layout::CrossUp, Layout::CrossDown];

    /// The claim key and the result key of claim `id` (no braces in it) under this
    /// layout with `threads` threads.
    pub fn keys(self, id: &str, threads: usize) -> (String, String) {
        assert!(!id.contains(['{', '}']), "{id}");
        match self {
            Layout::SameSlot => {
                let (claim, result) = (format!("claim:{{{id}}}"), format!("result:{{{id}}}"));
                assert_eq!(slot(claim.as_bytes()), slot(result.as_bytes()));
                (claim, result)
            }
            Layout::CrossUp | Layout::CrossDown => {
                // Order by shard when there are several, else by slot (still two slots).
                let rank = |k: &str| {
                    if threads > 1 {
                        shard_of(k.as_bytes(), threads)
                    } else {
                        slot(k.as_bytes())
                    }
                };
                let (low, high) = if threads > 1 {
                    (0, threads - 1)
                } else {
                    (0, SLOTS / 2)
                };
                let (claim_rank, result_rank) = match self {
                    Layout::CrossUp => (low, high),
                    _ => (high, low),
                };
                let pick = |prefix: &str, want: usize| {
                    (0..)
                        .map(|n| format!("{prefix}:{id}.{n}"))
                        .find(|k| {
                            let r = rank(k);
                            if threads > 1 {
                                r == want
                            } else if want == low {
                                r < SLOTS / 2
                            } else {
                                r >= SLOTS / 2
                            }
                        })
                        .unwrap()
                };
                let claim = pick("claim", claim_rank);
                let result = pick("result", result_rank);
                let (c, r) = (rank(&claim), rank(&result));
                match self {
                    Layout::CrossUp => assert!(c < r, "{claim} {result}"),
                    _ => assert!(c > r, "{claim} {result}"),
                }
                (claim, result)
            }
        }
    }
}
