//! Crash tests of the append-only log: a goblin-server under load is killed with SIGKILL
//! (no chance to save or sync anything) and restarted on the same directory, and what it
//! loads is checked against what its clients were told.
//!
//! - `appendfsync always`: every acknowledged write comes back. Four clients run a mix of
//!   SET (some with a short PX), INCR, a cross-shard MSET, GOBLIN.CLAIM (cross-shard and
//!   not), RPUSH, SADD, HSET and ZADD, each on keys only it writes, one command at a
//!   time, so that a client has at most one command in doubt when the server dies (sent,
//!   no reply seen): the dataset after a restart must be exactly what the acknowledged
//!   commands made, with or without that one command — never part of it (an MSET's two
//!   keys, on two shards, come back both or neither). Deadlines are checked against the
//!   window a client knows: a command took effect between the moment it was sent (less
//!   `CLOCK_SLACK_MS`) and its reply (or the kill); a key whose deadline certainly passed
//!   is gone. Each round
//!   kills and restarts with another thread count (4, 2, 3, 1, …: the log written by
//!   some number of shards is loaded into another), continues on fresh keys, and checks
//!   every expectation of the earlier rounds too. `GOBLIN_CRASH_ROUNDS` rounds (default
//!   5; `scripts/crash-test` runs 50).
//! - `appendfsync everysec`: writes acknowledged more than two seconds before the kill
//!   all come back (the policy's promise is about one second). The loss measured is
//!   printed. A SIGKILL loses no write the server made to its files (the kernel still
//!   has them), so this measures the server's own buffering, not the disk's: a lost
//!   power supply is out of a test's reach.
//!
//! On a failure the server's directory is kept, and its path printed, with the seed
//! (`GOBLIN_TEST_SEED` replays the choice of commands; timing is the machine's).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::claim::{CLAIMED, Layout};
use goblin_tests::cmd::{Cmd, cmd, pipeline, show_cmd};
use goblin_tests::dataset::{Content, Key};
use goblin_tests::keys::{keys_on, shard_of};
use goblin_tests::reply::{bulks, int, try_integer};
use goblin_tests::rng::{Rng, seed};
use goblin_tests::{Raw, Server, StopOnDrop, scratch_dir, show};

/// The thread counts of the servers of the always test, in turn: the first server runs
/// the first; each restart takes the next.
const THREAD_TURNS: [usize; 4] = [4, 2, 3, 1];
/// Client threads, each on its own connection and its own keys.
const CLIENTS: usize = 4;
/// The lease of every claim, in seconds: far beyond the test.
const LEASE_SECS: u64 = 600;
/// The PX of the SETs that expire: short enough that some expire during the test.
const PX_MS: (i64, i64) = (200, 3000);
/// How much earlier than its window a deadline may be. A relative deadline counts from
/// the command's timestamp, which is the clock its worker read when its loop iteration
/// began: for a request read by that iteration's events this is after the request
/// arrived, but the first request of a new connection can be read when the connection is
/// adopted, with the clock of an iteration that began before it was sent (hence each
/// client's PING first, and this slack). A deadline replayed as relative after a crash
/// comes out later than its window, and the window's end has no slack.
const CLOCK_SLACK_MS: u64 = 25;
/// How long after the clients start the server is killed, in milliseconds.
const KILL_AFTER_MS: (i64, i64) = (200, 800);
/// Fields of a client's hash and members of its sorted set that HSET and ZADD pick
/// from: some commands add, some overwrite.
const FIELDS: usize = 40;
/// How many failures a round's report lists.
const REPORT_MAX: usize = 30;

/// The number of crash rounds of the always test: `GOBLIN_CRASH_ROUNDS`, else 5.
fn rounds() -> usize {
    std::env::var("GOBLIN_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(5)
}

/// The wall clock in Unix milliseconds, as the server reads it.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// goblin-server with the append-only log on `dir`.
fn start(dir: &Path, fsync: &str, threads: usize) -> Server {
    let dir = dir.to_str().expect("a UTF-8 temporary directory");
    Server::goblin_with(&[
        "--dir",
        dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        fsync,
        "--threads",
        &threads.to_string(),
    ])
}

/// The log's files, for a failure report.
fn listing(dir: &Path) -> String {
    let mut out = String::new();
    let mut walk = vec![dir.to_path_buf()];
    while let Some(d) = walk.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                walk.push(path);
            } else {
                let len = e.metadata().map_or(0, |m| m.len());
                out.push_str(&format!("\n  {} ({len} bytes)", path.display()));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Reading a whole dataset back, pipelined (tens of thousands of keys in a second).

/// The first frame of a reply, handed to `f`.
fn with_frame<T>(reply: &[u8], f: impl FnOnce(Frame<'_>) -> T) -> T {
    match parse_reply(reply) {
        Ok(Some((frame, _))) => f(frame),
        _ => panic!("not a reply: {}", show(reply)),
    }
}

/// Every element of an array of bulk strings.
fn items(reply: &[u8]) -> Vec<Vec<u8>> {
    bulks(reply)
        .into_iter()
        .map(|b| b.unwrap_or_else(|| panic!("a nil element in {}", show(reply))))
        .collect()
}

/// Every key of the server with its content and deadline, read with pipelines of TYPE
/// and PEXPIRETIME, then of the read that suits the type. A key that expires while it
/// is read is left out.
fn snapshot(raw: &mut Raw) -> BTreeMap<String, Key> {
    let keys = items(&raw.cmd(&[b"KEYS", b"*"]));
    let mut out = BTreeMap::new();
    for chunk in keys.chunks(1000) {
        let probes: Vec<Cmd> = chunk
            .iter()
            .flat_map(|k| [cmd(&[&b"TYPE"[..], k]), cmd(&[&b"PEXPIRETIME"[..], k])])
            .collect();
        let probed = pipeline(raw, &probes);
        let mut kinds = Vec::new();
        let mut reads = Vec::new();
        for (k, r) in chunk.iter().zip(probed.chunks(2)) {
            let kind = with_frame(&r[0], |f| match f {
                Frame::Simple(s) => String::from_utf8_lossy(s).into_owned(),
                other => panic!("TYPE {} answered {other:?}", show(k)),
            });
            let expire_at = try_integer(&r[1])
                .unwrap_or_else(|| panic!("PEXPIRETIME {} answered {}", show(k), show(&r[1])));
            let read: &[&[u8]] = match kind.as_str() {
                "string" => &[b"GET"],
                "list" => &[b"LRANGE", b"0", b"-1"],
                "set" => &[b"SMEMBERS"],
                "hash" => &[b"HGETALL"],
                "zset" => &[b"ZRANGE", b"0", b"-1", b"WITHSCORES"],
                _ => &[b"TYPE"],
            };
            let mut c = cmd(&[read[0], k]);
            c.extend(read[1..].iter().map(|w| w.to_vec()));
            reads.push(c);
            kinds.push((kind, expire_at));
        }
        let read = pipeline(raw, &reads);
        for ((k, (kind, expire_at)), r) in chunk.iter().zip(kinds).zip(read) {
            if kind == "none" || expire_at == -2 {
                continue;
            }
            let content = match kind.as_str() {
                "string" => match with_frame(&r, |f| match f {
                    Frame::Bulk(b) => Some(b.to_vec()),
                    _ => None,
                }) {
                    Some(v) => Content::Str(v),
                    None => continue,
                },
                "list" => Content::List(items(&r)),
                "set" => {
                    let mut m = items(&r);
                    m.sort();
                    Content::Set(m)
                }
                "hash" => Content::Hash(
                    items(&r)
                        .chunks(2)
                        .map(|p| (p[0].clone(), p[1].clone()))
                        .collect(),
                ),
                "zset" => Content::ZSet(
                    items(&r)
                        .chunks(2)
                        .map(|p| (p[0].clone(), String::from_utf8_lossy(&p[1]).into_owned()))
                        .collect(),
                ),
                other => Content::Other(other.to_string()),
            };
            let empty = matches!(&content, Content::List(v) | Content::Set(v) if v.is_empty())
                || matches!(&content, Content::Hash(m) if m.is_empty())
                || matches!(&content, Content::ZSet(v) if v.is_empty());
            if empty {
                continue;
            }
            out.insert(
                String::from_utf8_lossy(k).into_owned(),
                Key { content, expire_at },
            );
        }
    }
    out
}

/// A key's content, readable in a failure message.
fn show_content(content: &Content) -> String {
    let join = |items: &mut dyn Iterator<Item = String>| items.collect::<Vec<_>>().join(", ");
    match content {
        Content::Str(v) => format!("string {:?}", show(v)),
        Content::List(l) => format!("list [{}]", join(&mut l.iter().map(|e| show(e)))),
        Content::Set(m) => format!("set {{{}}}", join(&mut m.iter().map(|e| show(e)))),
        Content::Hash(h) => format!(
            "hash {{{}}}",
            join(&mut h.iter().map(|(f, v)| format!("{}: {}", show(f), show(v))))
        ),
        Content::ZSet(z) => format!(
            "zset [{}]",
            join(&mut z.iter().map(|(m, s)| format!("{} {s}", show(m))))
        ),
        Content::Stream(s) => format!("stream {s:?}"),
        Content::Other(kind) => format!("a {kind}"),
    }
}

/// What a key holds (or that there is none), readable in a failure message.
fn show_key(got: Option<&Key>) -> String {
    match got {
        None => "no key".into(),
        Some(k) if k.expire_at == -1 => show_content(&k.content),
        Some(k) => format!(
            "{} with the deadline {}",
            show_content(&k.content),
            k.expire_at
        ),
    }
}

// ---------------------------------------------------------------------------------------
// The commands of the load.

/// One command a client sends.
#[derive(Clone, Debug)]
enum Op {
    Set {
        key: String,
        value: String,
    },
    SetPx {
        key: String,
        value: String,
        px: u64,
    },
    Incr {
        key: String,
    },
    /// `MSET a value b value`, `a` and `b` on different shards.
    Mset {
        a: String,
        b: String,
        value: String,
    },
    Claim {
        claim: String,
        result: String,
        token: String,
    },
    Rpush {
        key: String,
        elem: String,
    },
    Sadd {
        key: String,
        member: String,
    },
    Hset {
        key: String,
        field: String,
        value: String,
    },
    Zadd {
        key: String,
        score: i64,
        member: String,
    },
}

impl Op {
    fn args(&self) -> Cmd {
        match self {
            Op::Set { key, value } => cmd(&["SET", key, value]),
            Op::SetPx { key, value, px } => cmd(&["SET", key, value, "PX", &px.to_string()]),
            Op::Incr { key } => cmd(&["INCR", key]),
            Op::Mset { a, b, value } => cmd(&["MSET", a, value, b, value]),
            Op::Claim {
                claim,
                result,
                token,
            } => cmd(&[
                "GOBLIN.CLAIM",
                claim,
                result,
                token,
                &LEASE_SECS.to_string(),
            ]),
            Op::Rpush { key, elem } => cmd(&["RPUSH", key, elem]),
            Op::Sadd { key, member } => cmd(&["SADD", key, member]),
            Op::Hset { key, field, value } => cmd(&["HSET", key, field, value]),
            Op::Zadd { key, score, member } => cmd(&["ZADD", key, &score.to_string(), member]),
        }
    }

    /// The keys it writes.
    fn keys(&self) -> Vec<&str> {
        match self {
            Op::Mset { a, b, .. } => vec![a, b],
            Op::Set { key, .. }
            | Op::SetPx { key, .. }
            | Op::Incr { key }
            | Op::Rpush { key, .. }
            | Op::Sadd { key, .. }
            | Op::Hset { key, .. }
            | Op::Zadd { key, .. } => vec![key],
            Op::Claim { claim, .. } => vec![claim],
        }
    }

    /// Whether `reply` is the kind of reply that acknowledges it (its exact value is
    /// checked against the model).
    fn acknowledged_by(&self, reply: &[u8]) -> bool {
        match self {
            Op::Set { .. } | Op::SetPx { .. } | Op::Mset { .. } => reply == b"+OK\r\n",
            Op::Claim { .. } => reply == CLAIMED,
            _ => try_integer(reply).is_some(),
        }
    }
}

/// A client's next command: its `n`th of round `round`. Keys are fresh but for the
/// client's counter and collections.
fn next_op(rng: &mut Rng, client: usize, round: usize, n: usize) -> Op {
    let id = format!("{client}:{round}:{n}");
    let value = format!("v{id}.{}", rng.next_u64() % 1000);
    match rng.below(100) {
        0..=24 => Op::Set {
            key: format!("k:{id}"),
            value,
        },
        25..=32 => Op::SetPx {
            key: format!("t:{id}"),
            value,
            px: rng.range(PX_MS.0, PX_MS.1) as u64,
        },
        33..=47 => Op::Incr {
            key: format!("ctr:{client}"),
        },
        48..=62 => {
            // The first quarter of the slots and the last: two shards with any thread
            // count above one.
            let a = keys_on(&format!("pair:{id}:a"), 0, 4, 1).remove(0);
            let b = keys_on(&format!("pair:{id}:b"), 3, 4, 1).remove(0);
            Op::Mset { a, b, value }
        }
        63..=72 => {
            let (claim, result) = Layout::ALL[n % Layout::ALL.len()].keys(&format!("c{id}"), 4);
            Op::Claim {
                claim,
                result,
                token: format!("tok{id}"),
            }
        }
        73..=82 => Op::Rpush {
            key: format!("list:{client}"),
            elem: format!("e{id}"),
        },
        83..=88 => Op::Sadd {
            key: format!("set:{client}"),
            member: format!("m{id}"),
        },
        89..=94 => Op::Hset {
            key: format!("hash:{client}"),
            field: format!("f{}", rng.below(FIELDS)),
            value,
        },
        _ => Op::Zadd {
            key: format!("zset:{client}"),
            score: rng.range(-1000, 1000),
            member: format!("z{}", rng.below(FIELDS)),
        },
    }
}

/// An acknowledged command: sent at `before`, answered `reply` at `after` (Unix ms).
struct Acked {
    op: Op,
    before: u64,
    after: u64,
    reply: Vec<u8>,
}

/// What one client saw until the server died.
#[derive(Default)]
struct Log {
    acked: Vec<Acked>,
    /// The command sent (at the time given) whose reply never came.
    in_doubt: Option<(Op, u64)>,
    /// Replies that acknowledge nothing (they are failures: the server was up).
    unexpected: Vec<String>,
}

/// One client's load: commands one at a time until the connection fails (the kill) or
/// `stop`.
fn load(port: u16, client: usize, round: usize, seed: u64, stop: &AtomicBool) -> Log {
    let mut rng =
        Rng::new(seed ^ ((round * CLIENTS + client + 1) as u64).wrapping_mul(0x9E37_79B9));
    let mut raw = Raw::connect(port);
    let mut log = Log::default();
    // Not the first request of the connection (see CLOCK_SLACK_MS).
    let ping = raw
        .try_send(&goblin_tests::encode(&[b"PING"]))
        .and_then(|()| raw.try_reply());
    match ping {
        Ok(r) if r == b"+PONG\r\n" => {}
        Ok(r) => {
            log.unexpected
                .push(format!("client {client}: PING answered {}", show(&r)));
            return log;
        }
        Err(_) => return log,
    }
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let op = next_op(&mut rng, client, round, n);
        let c = op.args();
        let before = now_ms();
        let sent = raw.try_send(&goblin_tests::encode(&goblin_tests::cmd::args(&c)));
        let reply = sent.and_then(|()| raw.try_reply());
        let after = now_ms();
        match reply {
            Ok(reply) if op.acknowledged_by(&reply) => log.acked.push(Acked {
                op,
                before,
                after,
                reply,
            }),
            Ok(reply) => {
                log.unexpected.push(format!(
                    "client {client}: {} answered {}",
                    show_cmd(&c),
                    show(&reply)
                ));
                log.in_doubt = Some((op, before));
                break;
            }
            Err(_) => {
                log.in_doubt = Some((op, before));
                break;
            }
        }
    }
    log
}

// ---------------------------------------------------------------------------------------
// What the keys must hold.

/// What a key must hold.
#[derive(Clone, Debug, PartialEq)]
enum Want {
    Absent,
    /// A string without a deadline.
    Str(String),
    /// A string whose deadline is in `lo..=hi` (Unix ms): present while it certainly
    /// runs, absent once it certainly passed.
    Expiring {
        value: String,
        lo: u64,
        hi: u64,
    },
    List(Vec<String>),
    Set(BTreeSet<String>),
    Hash(BTreeMap<String, String>),
    ZSet(BTreeMap<String, i64>),
}

/// Every key the clients wrote, and what it must hold.
#[derive(Clone, Debug, Default)]
struct Model {
    keys: BTreeMap<String, Want>,
}

impl Model {
    fn want(&self, key: &str) -> Want {
        self.keys.get(key).cloned().unwrap_or(Want::Absent)
    }

    /// Applies a command that took effect between `before` and `after`; its reply, when
    /// it was seen, must be the one the model predicts.
    fn apply(
        &mut self,
        op: &Op,
        before: u64,
        after: u64,
        reply: Option<&[u8]>,
    ) -> Result<(), String> {
        let want_reply = |predicted: i64| match reply {
            Some(r) if r != int(predicted) => Err(format!(
                "{} answered {}, but the acknowledged writes before it predict {predicted}",
                show_cmd(&op.args()),
                show(r)
            )),
            _ => Ok(()),
        };
        match op {
            Op::Set { key, value } => {
                self.keys.insert(key.clone(), Want::Str(value.clone()));
            }
            Op::SetPx { key, value, px } => {
                self.keys.insert(
                    key.clone(),
                    Want::Expiring {
                        value: value.clone(),
                        lo: (before + px).saturating_sub(CLOCK_SLACK_MS),
                        hi: after + px,
                    },
                );
            }
            Op::Mset { a, b, value } => {
                self.keys.insert(a.clone(), Want::Str(value.clone()));
                self.keys.insert(b.clone(), Want::Str(value.clone()));
            }
            Op::Claim { claim, token, .. } => {
                self.keys.insert(
                    claim.clone(),
                    Want::Expiring {
                        value: token.clone(),
                        lo: (before + LEASE_SECS * 1000).saturating_sub(CLOCK_SLACK_MS),
                        hi: after + LEASE_SECS * 1000,
                    },
                );
            }
            Op::Incr { key } => {
                let n = match self.want(key) {
                    Want::Absent => 0,
                    Want::Str(s) => s.parse::<i64>().map_err(|e| format!("{key}: {e}"))?,
                    other => return Err(format!("{key} is {other:?}, not a counter")),
                };
                want_reply(n + 1)?;
                self.keys
                    .insert(key.clone(), Want::Str((n + 1).to_string()));
            }
            Op::Rpush { key, elem } => {
                let mut list = match self.want(key) {
                    Want::Absent => Vec::new(),
                    Want::List(l) => l,
                    other => return Err(format!("{key} is {other:?}, not a list")),
                };
                list.push(elem.clone());
                want_reply(list.len() as i64)?;
                self.keys.insert(key.clone(), Want::List(list));
            }
            Op::Sadd { key, member } => {
                let mut set = match self.want(key) {
                    Want::Absent => BTreeSet::new(),
                    Want::Set(s) => s,
                    other => return Err(format!("{key} is {other:?}, not a set")),
                };
                let added = set.insert(member.clone());
                want_reply(i64::from(added))?;
                self.keys.insert(key.clone(), Want::Set(set));
            }
            Op::Hset { key, field, value } => {
                let mut hash = match self.want(key) {
                    Want::Absent => BTreeMap::new(),
                    Want::Hash(h) => h,
                    other => return Err(format!("{key} is {other:?}, not a hash")),
                };
                let added = hash.insert(field.clone(), value.clone()).is_none();
                want_reply(i64::from(added))?;
                self.keys.insert(key.clone(), Want::Hash(hash));
            }
            Op::Zadd { key, score, member } => {
                let mut zset = match self.want(key) {
                    Want::Absent => BTreeMap::new(),
                    Want::ZSet(z) => z,
                    other => return Err(format!("{key} is {other:?}, not a sorted set")),
                };
                let added = zset.insert(member.clone(), *score).is_none();
                want_reply(i64::from(added))?;
                self.keys.insert(key.clone(), Want::ZSet(zset));
            }
        }
        Ok(())
    }
}

/// Checks what a key holds against what it must: `Ok` when it may, else what is wrong.
/// The dataset was read between `t0` and `t1` (Unix ms).
fn check(want: &Want, got: Option<&Key>, t0: u64, t1: u64) -> Result<(), String> {
    let string = |value: &str| Content::Str(value.as_bytes().to_vec());
    let same = |content: Content| match got {
        Some(k) if k.content == content && k.expire_at == -1 => Ok(()),
        _ => Err(format!(
            "want {} without a deadline, got {}",
            show_content(&content),
            show_key(got)
        )),
    };
    match want {
        Want::Absent => match got {
            None => Ok(()),
            Some(k) => Err(format!("want no key, got {}", show_key(Some(k)))),
        },
        Want::Str(v) => same(string(v)),
        Want::Expiring { value, lo, hi } => {
            let right = got.is_some_and(|k| {
                k.content == string(value) && (*lo..=*hi).contains(&(k.expire_at as u64))
            });
            if *hi < t0 {
                match got {
                    None => Ok(()),
                    Some(k) => Err(format!(
                        "want no key (its deadline, in {lo}..={hi}, passed before the read at \
                         {t0}), got {}",
                        show_key(Some(k))
                    )),
                }
            } else if *lo > t1 {
                if right {
                    Ok(())
                } else {
                    Err(format!(
                        "want {value:?} with a deadline in {lo}..={hi} (not passed at {t1}), got \
                         {}",
                        show_key(got)
                    ))
                }
            } else if got.is_none() || right {
                Ok(())
            } else {
                Err(format!(
                    "want {value:?} with a deadline in {lo}..={hi}, or no key (the deadline may \
                     have passed), got {}",
                    show_key(got)
                ))
            }
        }
        Want::List(l) => same(Content::List(
            l.iter().map(|e| e.as_bytes().to_vec()).collect(),
        )),
        Want::Set(s) => same(Content::Set(
            s.iter().map(|e| e.as_bytes().to_vec()).collect(),
        )),
        Want::Hash(h) => same(Content::Hash(
            h.iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
        )),
        Want::ZSet(z) => {
            // Compared by member (the order of equal scores is the server's).
            let want: BTreeMap<Vec<u8>, String> = z
                .iter()
                .map(|(m, s)| (m.as_bytes().to_vec(), s.to_string()))
                .collect();
            match got {
                Some(Key {
                    content: Content::ZSet(items),
                    expire_at: -1,
                }) if items.iter().cloned().collect::<BTreeMap<_, _>>() == want => Ok(()),
                _ => Err(format!(
                    "want the sorted set {z:?} without a deadline, got {}",
                    show_key(got)
                )),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The tests.

/// One round of the always test: load, SIGKILL, restart with `next_threads`; returns the
/// new server and the failures seen.
fn crash_round(
    server: &mut Server,
    dir: &Path,
    model: &mut Model,
    round: usize,
    seed: u64,
    rng: &mut Rng,
    next_threads: usize,
) -> (Server, Vec<String>) {
    let mut failures = Vec::new();
    let port = server.port;
    let stop = AtomicBool::new(false);
    let kill_after = Duration::from_millis(rng.range(KILL_AFTER_MS.0, KILL_AFTER_MS.1) as u64);
    let (logs, kill_ms) = thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let stop = &stop;
                s.spawn(move || load(port, c, round, seed, stop))
            })
            .collect();
        thread::sleep(kill_after);
        server.kill();
        let kill_ms = now_ms();
        stop.store(true, Ordering::SeqCst);
        let logs: Vec<Log> = clients
            .into_iter()
            .map(|h| h.join().expect("a client thread panicked"))
            .collect();
        (logs, kill_ms)
    });
    let mut in_doubt = Vec::new();
    let mut counts = [0usize; 2];
    for log in logs {
        failures.extend(log.unexpected);
        counts[0] += log.acked.len();
        for a in &log.acked {
            if let Err(e) = model.apply(&a.op, a.before, a.after, Some(&a.reply)) {
                failures.push(format!("during the load: {e}"));
            }
        }
        if let Some(d) = log.in_doubt {
            counts[1] += 1;
            in_doubt.push(d);
        }
    }

    let server = start(dir, "always", next_threads);
    let mut raw = server.raw();
    let t0 = now_ms();
    let got = snapshot(&mut raw);
    let t1 = now_ms();
    eprintln!(
        "round {round}: killed after {kill_after:?}, {} acknowledged commands, {} in doubt; \
         restarted with {next_threads} threads: {} keys",
        counts[0],
        counts[1],
        got.len()
    );

    // A command in doubt took effect whole or not at all.
    for (op, before) in in_doubt {
        let keys = op.keys();
        let mut with = Model {
            keys: keys
                .iter()
                .map(|k| (k.to_string(), model.want(k)))
                .collect(),
        };
        if let Err(e) = with.apply(&op, before, kill_ms, None) {
            failures.push(format!("the command in doubt: {e}"));
            continue;
        }
        let fits = |m: &Model| {
            keys.iter()
                .map(|k| check(&m.want(k), got.get(*k), t0, t1))
                .collect::<Vec<_>>()
        };
        let (without_fit, with_fit) = (fits(model), fits(&with));
        if without_fit.iter().all(Result::is_ok) {
            continue;
        }
        if with_fit.iter().all(Result::is_ok) {
            model.keys.extend(with.keys);
            continue;
        }
        let detail: Vec<String> = keys
            .iter()
            .zip(without_fit.iter().zip(&with_fit))
            .map(|(k, (a, b))| {
                format!(
                    "{k}: as if not run: {}; as if run: {}",
                    a.as_ref().err().map_or("fits", String::as_str),
                    b.as_ref().err().map_or("fits", String::as_str)
                )
            })
            .collect();
        failures.push(format!(
            "{} (sent, reply not seen before the kill) left a state that is neither without \
             it nor with it — part of a command: {}",
            show_cmd(&op.args()),
            detail.join("; ")
        ));
    }

    // Every key the clients wrote, and nothing else.
    for (key, want) in &model.keys {
        if let Err(e) = check(want, got.get(key), t0, t1) {
            failures.push(format!("{key}: {e}"));
        }
    }
    for (key, k) in &got {
        if k.expire_at >= 0 && (k.expire_at as u64) < t0 {
            failures.push(format!(
                "{key}: its deadline {} passed before the read at {t0}, yet it is there",
                k.expire_at
            ));
        }
        if !model.keys.contains_key(key) {
            failures.push(format!(
                "{key}: no client wrote it, got {}",
                show_key(Some(k))
            ));
        }
    }
    (server, failures)
}

/// With `appendfsync always`, every acknowledged write survives SIGKILL, round after
/// round, across thread counts (see the module's documentation).
#[test]
fn crash_with_appendfsync_always_keeps_every_acknowledged_write() {
    let started = Instant::now();
    let seed = seed("crash_with_appendfsync_always_keeps_every_acknowledged_write");
    let mut rng = Rng::new(seed);
    let rounds = rounds();
    // The MSET pairs are on two shards with every thread count the test uses but one.
    for t in THREAD_TURNS.into_iter().filter(|&t| t > 1) {
        let a = keys_on("pair:x:a", 0, 4, 1).remove(0);
        let b = keys_on("pair:x:b", 3, 4, 1).remove(0);
        assert_ne!(shard_of(a.as_bytes(), t), shard_of(b.as_bytes(), t));
    }
    let dir = scratch_dir("crash-always");
    let mut server = start(&dir, "always", THREAD_TURNS[0]);
    let mut model = Model::default();
    for round in 0..rounds {
        let threads = THREAD_TURNS[round % THREAD_TURNS.len()];
        let next = THREAD_TURNS[(round + 1) % THREAD_TURNS.len()];
        let (restarted, failures) =
            crash_round(&mut server, &dir, &mut model, round, seed, &mut rng, next);
        server = restarted;
        if !failures.is_empty() {
            let shown: Vec<&String> = failures.iter().take(REPORT_MAX).collect();
            panic!(
                "round {round} (GOBLIN_TEST_SEED={seed}; killed under {threads} threads, \
                 restarted with {next}): {} failures:\n{}\nthe server's directory, kept: {}{}",
                failures.len(),
                shown
                    .iter()
                    .map(|s| format!("- {s}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                dir.display(),
                listing(&dir)
            );
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "{rounds} crash rounds, {} keys checked, in {:?}",
        model.keys.len(),
        started.elapsed()
    );
}

/// With `appendfsync everysec`, a SIGKILL loses no write acknowledged more than two
/// seconds before it (the policy's promise: about a second of writes); prints the loss
/// measured.
#[test]
fn appendfsync_everysec_loses_at_most_about_a_second() {
    const LOAD: Duration = Duration::from_millis(3500);
    const PROMISE_MS: u64 = 2000;
    let seed = seed("appendfsync_everysec_loses_at_most_about_a_second");
    let dir: PathBuf = scratch_dir("crash-everysec");
    let mut server = start(&dir, "everysec", 4);
    let port = server.port;
    let stop = AtomicBool::new(false);
    // Per client: (key, value, acknowledged at) in order, and the one in doubt.
    type Writes = (
        Vec<(String, String, u64)>,
        Option<(String, String)>,
        Vec<String>,
    );
    let (logs, kill_ms) = thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let stop = &stop;
                s.spawn(move || -> Writes {
                    let mut rng = Rng::new(seed ^ c as u64);
                    let mut raw = Raw::connect(port);
                    let mut acked = Vec::new();
                    for n in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            return (acked, None, Vec::new());
                        }
                        let key = format!("e:{c}:{n}");
                        let value = format!("v{}", rng.next_u64() % 1_000_000);
                        let sent = raw.try_send(&goblin_tests::encode(&[
                            b"SET",
                            key.as_bytes(),
                            value.as_bytes(),
                        ]));
                        match sent.and_then(|()| raw.try_reply()) {
                            Ok(r) if r == b"+OK\r\n" => acked.push((key, value, now_ms())),
                            Ok(r) => {
                                let e = format!("SET {key} {value} answered {}", show(&r));
                                return (acked, Some((key, value)), vec![e]);
                            }
                            Err(_) => return (acked, Some((key, value)), Vec::new()),
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        thread::sleep(LOAD);
        server.kill();
        let kill_ms = now_ms();
        stop.store(true, Ordering::SeqCst);
        let logs: Vec<Writes> = clients
            .into_iter()
            .map(|h| h.join().expect("a client thread panicked"))
            .collect();
        (logs, kill_ms)
    });

    let server = start(&dir, "everysec", 2);
    let got = snapshot(&mut server.raw());
    let mut failures: Vec<String> = Vec::new();
    let (mut acked, mut missing, mut oldest_missing) = (0usize, 0usize, None::<u64>);
    let mut known = BTreeSet::new();
    for (writes, in_doubt, unexpected) in logs {
        failures.extend(unexpected);
        for (key, value, at) in writes {
            acked += 1;
            let age = kill_ms.saturating_sub(at);
            match got.get(&key).map(|k| &k.content) {
                Some(Content::Str(v)) if v == value.as_bytes() => {}
                None => {
                    missing += 1;
                    oldest_missing = Some(oldest_missing.map_or(age, |o| o.max(age)));
                    if age > PROMISE_MS {
                        failures.push(format!(
                            "SET {key} {value}, acknowledged {age} ms before the kill, is lost"
                        ));
                    }
                }
                Some(other) => failures.push(format!(
                    "{key}: want {value:?}, got {}",
                    show_content(other)
                )),
            }
            known.insert(key);
        }
        if let Some((key, value)) = in_doubt {
            match got.get(&key).map(|k| &k.content) {
                None => {}
                Some(Content::Str(v)) if v == value.as_bytes() => {}
                Some(other) => failures.push(format!(
                    "{key} (in doubt): want {value:?} or no key, got {}",
                    show_content(other)
                )),
            }
            known.insert(key);
        }
    }
    for key in got.keys().filter(|k| !known.contains(*k)) {
        failures.push(format!("{key}: no client wrote it"));
    }
    println!(
        "appendfsync everysec, SIGKILL after {LOAD:?}: {acked} acknowledged writes, {missing} \
         missing after the restart{}",
        oldest_missing.map_or(String::new(), |age| format!(
            "; the oldest missing was acknowledged {age} ms before the kill"
        ))
    );
    assert!(acked > 0, "no write was acknowledged");
    if !failures.is_empty() {
        panic!(
            "GOBLIN_TEST_SEED={seed}: {} failures:\n{}\nthe server's directory, kept: {}{}",
            failures.len(),
            failures
                .iter()
                .take(REPORT_MAX)
                .map(|s| format!("- {s}"))
                .collect::<Vec<_>>()
                .join("\n"),
            dir.display(),
            listing(&dir)
        );
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
