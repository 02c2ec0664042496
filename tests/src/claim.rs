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

/// `ERR syntax error`: GOBLIN.CLAIM's unknown option or BLOCK without a value, and SET's
/// conflicting conditions.
pub const SYNTAX: &str = "ERR syntax error";
/// GOBLIN.CLAIM's BLOCK value that is not an integer (XREAD's text).
pub const TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";
/// GOBLIN.CLAIM's negative BLOCK value (XREAD's text).
pub const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";

/// The invalid-expire error of the command `name`, as Redis names it (lower case).
pub fn invalid_expire(name: &str) -> String {
    format!("ERR invalid expire time in '{name}' command")
}

/// GOBLIN.CLAIM's oracle script of the spec: `EVAL <it> 2 claim_key result_key token
/// seconds`.
pub const CLAIM_ORACLE: &str = r#"if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return "CLAIMED"
end
return redis.call("get", KEYS[2])"#;

/// GOBLIN.PUBLISH's oracle script of the spec, for valid `seconds`: `EVAL <it> 2 claim_key
/// result_key token value seconds`.
pub const PUBLISH_ORACLE: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
  redis.call("set", KEYS[2], ARGV[2], "EX", ARGV[3])
  redis.call("expire", KEYS[1], ARGV[3])
  return 1
end
return 0"#;

/// GOBLIN.RENEW's oracle script of the spec, for valid `seconds`: `EVAL <it> 1 claim_key
/// token seconds`.
pub const RENEW_ORACLE: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("expire", KEYS[1], ARGV[2])
end
return 0"#;
