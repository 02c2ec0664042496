//! Helpers for the thread-per-core suites (issue 3): which shard owns a key, keys chosen
//! to land on a given shard, expected reply bytes, pipelines, a sequential model of the
//! string commands, and a seeded generator.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use goblin_protocol::{Frame, parse_reply, reply_len};
use goblin_store::{SLOTS, key_slot};
use goblin_tests::{Differential, Raw, encode, show};

/// The `--threads` every issue-3 suite runs with: one shard, two, and more shards than
/// this machine's two cores.
pub const THREAD_COUNTS: [usize; 3] = [1, 2, 4];

/// A command as owned arguments.
pub type Cmd = Vec<Vec<u8>>;

/// The shard owning `key` when the server runs `threads` threads: slots are dealt in
/// contiguous ranges, `shard = slot * threads / 16384`.
pub fn shard_of(key: &[u8], threads: usize) -> usize {
    usize::from(key_slot(key)) * threads / SLOTS
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

/// Sets a stop flag when dropped: created in a thread scope before anything that can
/// fail, it makes the helper threads (which loop until the flag is set) end when the
/// test's own thread panics, instead of the scope waiting for them forever.
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A command from words.
pub fn cmd<S: AsRef<[u8]>>(words: &[S]) -> Cmd {
    words.iter().map(|w| w.as_ref().to_vec()).collect()
}

/// The expected reply `+OK`.
pub fn ok() -> Vec<u8> {
    b"+OK\r\n".to_vec()
}

/// The expected reply for a simple string.
pub fn simple(s: &str) -> Vec<u8> {
    format!("+{s}\r\n").into_bytes()
}

/// The expected reply for an integer.
pub fn int(n: i64) -> Vec<u8> {
    format!(":{n}\r\n").into_bytes()
}

/// The expected RESP2 reply for a bulk string, or the null bulk for `None`.
pub fn bulk_or_nil(v: Option<&[u8]>) -> Vec<u8> {
    match v {
        None => b"$-1\r\n".to_vec(),
        Some(v) => {
            let mut out = format!("${}\r\n", v.len()).into_bytes();
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
            out
        }
    }
}

/// The expected reply for an array of already encoded elements.
pub fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    items.iter().for_each(|i| out.extend_from_slice(i));
    out
}

/// Sends every command in one write, then reads one reply per command.
pub fn pipeline(raw: &mut Raw, cmds: &[Cmd]) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
        bytes.extend(encode(&args));
    }
    raw.send(&bytes);
    cmds.iter()
        .enumerate()
        .map(|(i, c)| {
            raw.try_reply().unwrap_or_else(|e| {
                let from = i.saturating_sub(8);
                let before: Vec<String> = cmds[from..i].iter().map(|c| show_cmd(c)).collect();
                panic!(
                    "no reply to pipelined command {i} of {} ({}): {e}; the commands before \
                     it: {before:?}",
                    cmds.len(),
                    show_cmd(c)
                )
            })
        })
        .collect()
}

/// Sends one command and returns its reply.
pub fn call(raw: &mut Raw, c: &[Vec<u8>]) -> Vec<u8> {
    let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
    raw.cmd(&args)
}

/// `name k1 v k2 v …` for every key, or `name k1 k2 …` when `value` is `None`.
pub fn over_keys(name: &str, keys: &[String], value: Option<&str>) -> Cmd {
    let mut c = cmd(&[name]);
    for k in keys {
        c.push(k.as_bytes().to_vec());
        if let Some(v) = value {
            c.push(v.as_bytes().to_vec());
        }
    }
    c
}

/// Sends the same pipeline (one write) to goblin-server and redis-server and asserts
/// byte-identical replies, reply by reply; returns goblin's.
pub fn check_pipeline(d: &mut Differential, cmds: &[Cmd]) -> Vec<Vec<u8>> {
    let want = pipeline(&mut d.r, cmds);
    let got = pipeline(&mut d.g, cmds);
    for ((c, g), r) in cmds.iter().zip(&got).zip(&want) {
        assert_eq!(
            show(g),
            show(r),
            "pipelined reply to {} differs (left: goblin, right: redis)",
            show_cmd(c)
        );
    }
    got
}

/// A command, readably.
pub fn show_cmd(c: &[Vec<u8>]) -> String {
    c.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}

/// The integer of an integer reply.
///
/// # Panics
/// When the reply is anything else.
pub fn integer(reply: &[u8]) -> i64 {
    match parse_reply(reply) {
        Ok(Some((Frame::Integer(n), _))) => n,
        _ => panic!("expected an integer reply, got {}", show(reply)),
    }
}

/// The elements of an array of bulk strings (MGET, KEYS), `None` for nulls.
///
/// # Panics
/// When the reply is anything else.
pub fn bulks(reply: &[u8]) -> Vec<Option<Vec<u8>>> {
    match parse_reply(reply) {
        Ok(Some((Frame::Array(items), _))) => items
            .into_iter()
            .map(|f| match f {
                Frame::Bulk(b) => Some(b.to_vec()),
                Frame::Null => None,
                other => panic!("expected a bulk string, got {other:?} in {}", show(reply)),
            })
            .collect(),
        _ => panic!("expected an array reply, got {}", show(reply)),
    }
}

/// The elements of an array reply (EXEC's), each as its raw bytes.
///
/// # Panics
/// When the reply is not a complete array.
pub fn elements(reply: &[u8]) -> Vec<Vec<u8>> {
    let header = reply
        .iter()
        .position(|&b| b == b'\n')
        .filter(|_| reply.first() == Some(&b'*'))
        .unwrap_or_else(|| panic!("expected an array reply, got {}", show(reply)));
    let count: usize = String::from_utf8_lossy(&reply[1..header - 1])
        .parse()
        .unwrap_or_else(|_| panic!("expected an array reply, got {}", show(reply)));
    let mut pos = header + 1;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let (n, _) = reply_len(&reply[pos..])
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("a truncated array: {}", show(reply)));
        out.push(reply[pos..pos + n].to_vec());
        pos += n;
    }
    assert_eq!(pos, reply.len(), "bytes after the array: {}", show(reply));
    out
}

/// A SCAN reply: the next cursor and the keys.
///
/// # Panics
/// When the reply is not a SCAN reply.
pub fn scan_reply(reply: &[u8]) -> (u64, Vec<Vec<u8>>) {
    match parse_reply(reply) {
        Ok(Some((Frame::Array(items), _))) => match items.as_slice() {
            [Frame::Bulk(cursor), Frame::Array(keys)] => {
                let cursor = std::str::from_utf8(cursor)
                    .ok()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or_else(|| panic!("bad cursor in {}", show(reply)));
                let keys = keys
                    .iter()
                    .map(|k| match k {
                        Frame::Bulk(k) => k.to_vec(),
                        other => panic!("expected a key, got {other:?}"),
                    })
                    .collect();
                (cursor, keys)
            }
            _ => panic!("not a SCAN reply: {}", show(reply)),
        },
        _ => panic!("not a SCAN reply: {}", show(reply)),
    }
}

/// A sequential model of the string keyspace: what one connection alone should see.
#[derive(Debug, Default, Clone)]
pub struct Model {
    /// The keys and their values.
    pub map: HashMap<Vec<u8>, Vec<u8>>,
    /// Commands queued by MULTI, when in a MULTI block.
    queued: Option<Vec<Cmd>>,
}

impl Model {
    /// Applies one command and returns the exact RESP2 reply Redis gives for it. Knows
    /// SET (no options), GET, DEL, UNLINK, EXISTS, TOUCH, MSET, MSETNX, MGET, RENAME,
    /// RENAMENX, PING, ECHO, DBSIZE, FLUSHALL, MULTI, EXEC and DISCARD, well-formed.
    ///
    /// # Panics
    /// On any other command.
    pub fn apply(&mut self, c: &[Vec<u8>]) -> Vec<u8> {
        let name = String::from_utf8_lossy(&c[0]).to_ascii_uppercase();
        if let Some(queue) = self.queued.as_mut() {
            match name.as_str() {
                "EXEC" => {
                    let queue = self.queued.take().unwrap_or_default();
                    let replies: Vec<Vec<u8>> = queue.iter().map(|q| self.apply(q)).collect();
                    return array(&replies);
                }
                "DISCARD" => {
                    self.queued = None;
                    return ok();
                }
                "MULTI" => return b"-ERR MULTI calls can not be nested\r\n".to_vec(),
                _ => {
                    queue.push(c.to_vec());
                    return simple("QUEUED");
                }
            }
        }
        let keys = &c[1..];
        match name.as_str() {
            "SET" => {
                self.map.insert(c[1].clone(), c[2].clone());
                ok()
            }
            "GET" => bulk_or_nil(self.map.get(&c[1]).map(Vec::as_slice)),
            "DEL" | "UNLINK" => {
                let n = keys
                    .iter()
                    .filter(|k| self.map.remove(k.as_slice()).is_some())
                    .count();
                int(n as i64)
            }
            "EXISTS" | "TOUCH" => {
                let n = keys.iter().filter(|k| self.map.contains_key(*k)).count();
                int(n as i64)
            }
            "MSET" => {
                for pair in keys.chunks(2) {
                    self.map.insert(pair[0].clone(), pair[1].clone());
                }
                ok()
            }
            "MSETNX" => {
                if keys.chunks(2).any(|p| self.map.contains_key(&p[0])) {
                    return int(0);
                }
                for pair in keys.chunks(2) {
                    self.map.insert(pair[0].clone(), pair[1].clone());
                }
                int(1)
            }
            "MGET" => array(
                &keys
                    .iter()
                    .map(|k| bulk_or_nil(self.map.get(k).map(Vec::as_slice)))
                    .collect::<Vec<_>>(),
            ),
            "RENAME" | "RENAMENX" => {
                let nx = name == "RENAMENX";
                let (src, dst) = (&c[1], &c[2]);
                let Some(value) = self.map.get(src).cloned() else {
                    return b"-ERR no such key\r\n".to_vec();
                };
                if src == dst {
                    return if nx { int(0) } else { ok() };
                }
                if nx && self.map.contains_key(dst) {
                    return int(0);
                }
                self.map.remove(src);
                self.map.insert(dst.clone(), value);
                if nx { int(1) } else { ok() }
            }
            "PING" => match c.get(1) {
                None => simple("PONG"),
                Some(msg) => bulk_or_nil(Some(msg)),
            },
            "ECHO" => bulk_or_nil(Some(&c[1])),
            "DBSIZE" => int(self.map.len() as i64),
            "FLUSHALL" => {
                self.map.clear();
                ok()
            }
            "MULTI" => {
                self.queued = Some(Vec::new());
                ok()
            }
            "EXEC" => b"-ERR EXEC without MULTI\r\n".to_vec(),
            "DISCARD" => b"-ERR DISCARD without MULTI\r\n".to_vec(),
            other => panic!("the model does not know {other}"),
        }
    }
}

/// A small seeded generator (SplitMix64): reproducible runs without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The seed of a randomised test: `GOBLIN_TEST_SEED` to replay a run, else the clock.
/// Printed, so a failing run's output says how to replay it.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("GOBLIN_TEST_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("{test}: GOBLIN_TEST_SEED={seed}");
    seed
}
