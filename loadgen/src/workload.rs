//! Request generation and reply interpretation for every workload.
//!
//! A [`Generator`] belongs to one thread. It writes requests straight into a connection's
//! output buffer with the protocol crate's [`Encoder`] (no allocation per request: keys
//! are formatted into a reused scratch buffer) and tags each with an [`Op`] that comes
//! back with its reply. Plain ops (get, set, mixed, command) are only counted by the
//! engine; claim and lock ops are interpreted here, and may schedule follow-ups (publish a
//! result after the simulated work, poll again after a nil, release a held lock) on the
//! connection that received the reply, through its [`ConnWork`]. Follow-ups wait in a
//! per-connection timer heap: nothing ever sleeps.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use goblin_protocol::{Encoder, Frame, Version};

use crate::cli::{Config, Target, WorkloadSpec};
use crate::detector::{ClaimDetector, encode_outcome};
use crate::keys::{KEY_DIGITS, KeySampler, pad12};
use crate::rng::Rng;
use crate::stats::LockStats;
use crate::template::Template;

/// Recent claim ids a duplicate is drawn from: large enough that duplicates hit ids in
/// every state (in flight, working, published, crashed), small enough to stay hot.
const DUP_WINDOW: usize = 1024;

/// Longest wait between polls of an id answered nil; polls start at `--work-ms` and
/// double up to this.
const MAX_POLL_BACKOFF_NS: u64 = 250_000_000;

/// Nanoseconds per millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// What a request was, carried beside it until its reply arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Counted only (get, set, mixed, command).
    Plain,
    /// GOBLIN.CLAIM for `id`; `attempt` 0 is the request itself, later ones are polls.
    Claim {
        /// The request id.
        id: u64,
        /// 0 for the first try, n for the n-th poll.
        attempt: u32,
    },
    /// `SET result:<id> <outcome> EX ttl`.
    Publish {
        /// The request id.
        id: u64,
    },
    /// `SET lock:<key> <token> NX PX ttl`.
    Acquire {
        /// Key index.
        key: u64,
        /// Token sequence number.
        token: u64,
    },
    /// GOBLIN.CAD `lock:<key> <token>`.
    Release {
        /// Key index.
        key: u64,
        /// Token sequence number.
        token: u64,
    },
}

/// A follow-up due at `due` (ns since the run's start).
#[derive(Debug)]
struct Scheduled {
    due: u64,
    seq: u64,
    op: Op,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// One connection's workload state: its worker number and its pending follow-ups.
#[derive(Debug)]
pub struct ConnWork {
    worker: u32,
    followups: BinaryHeap<Scheduled>,
    seq: u64,
}

impl ConnWork {
    /// State for the connection numbered `worker` within its thread.
    pub fn new(worker: u32) -> Self {
        ConnWork {
            worker,
            followups: BinaryHeap::new(),
            seq: 0,
        }
    }

    fn schedule(&mut self, due: u64, op: Op) {
        self.seq += 1;
        self.followups.push(Scheduled {
            due,
            seq: self.seq,
            op,
        });
    }

    /// The earliest follow-up's due time.
    pub fn next_due(&self) -> Option<u64> {
        self.followups.peek().map(|s| s.due)
    }

    /// Takes the earliest follow-up if it is due at `now`: its due time and op.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Op)> {
        if self.followups.peek()?.due > now {
            return None;
        }
        self.followups.pop().map(|s| (s.due, s.op))
    }
}

/// A request whose only varying part is one key index, pre-encoded once: sending it
/// copies the bytes and writes 12 digits in place, the cheapest possible encoding
/// (get, set and mixed send nothing else).
#[derive(Clone, Debug)]
struct Stamp {
    bytes: Vec<u8>,
    /// Offset of the key's 12 index digits in `bytes`.
    digits_at: usize,
}

impl Stamp {
    /// `cmd <key_prefix><index> <rest…>`, encoded with the protocol crate's encoder.
    fn new(cmd: &[u8], key_prefix: &[u8], rest: &[&[u8]]) -> Stamp {
        let mut bytes = Vec::new();
        let mut enc = Encoder::new(&mut bytes, Version::Resp2);
        enc.array(2 + rest.len());
        enc.bulk(cmd);
        enc.bulk(&[key_prefix, &[b'0'; KEY_DIGITS]].concat());
        // The key bulk ends with its digits and CRLF.
        let digits_at = enc.len() - 2 - KEY_DIGITS;
        for arg in rest {
            enc.bulk(arg);
        }
        Stamp { bytes, digits_at }
    }

    #[inline]
    fn write(&self, out: &mut Vec<u8>, index: u64) {
        let start = out.len();
        out.extend_from_slice(&self.bytes);
        let at = start + self.digits_at;
        if let Some(digits) = out
            .get_mut(at..at + KEY_DIGITS)
            .and_then(|d| d.try_into().ok())
        {
            pad12(index, digits);
        }
    }
}

/// Why a reply made no sense for its request (counted as an error kind).
pub type Unexpected = &'static str;

#[derive(Debug)]
enum Kind {
    Get(Stamp),
    Set(Stamp),
    Mixed { read: f64, get: Stamp, set: Stamp },
    Command(Template),
    Claim(Box<ClaimWork>),
    Lock(LockWork),
}

#[derive(Debug)]
struct ClaimWork {
    detector: ClaimDetector,
    dup_ratio: f64,
    crash_ratio: f64,
    work_ns: u64,
    lease: Vec<u8>,
    result_ttl: Vec<u8>,
    hash_tag: bool,
    next_id: u64,
    /// The last `DUP_WINDOW` ids, as a ring.
    recent: Vec<u64>,
    recent_head: usize,
    next_outcome: u64,
}

#[derive(Debug)]
struct LockWork {
    hold_ns: u64,
    ttl_ms: Vec<u8>,
    next_token: u64,
    stats: LockStats,
}

/// The scripts a redis target runs instead of the native GOBLIN.* commands.
#[derive(Clone, Debug, Default)]
pub struct Shas {
    /// SHA1 of the GOBLIN.CLAIM oracle script.
    pub claim: Vec<u8>,
    /// SHA1 of the GOBLIN.CAD oracle script.
    pub cad: Vec<u8>,
}

/// One thread's request generator.
#[derive(Debug)]
pub struct Generator {
    kind: Kind,
    keys: KeySampler,
    rng: Rng,
    scratch: Vec<u8>,
    target: Target,
    shas: Shas,
    /// Thread number, part of every claim id and lock token so threads never collide.
    thread: u32,
    /// Run identifier (hex), part of every claim id and lock token so runs never collide.
    nonce: Vec<u8>,
}

impl Generator {
    /// The generator for thread `thread` of a run configured by `cfg`.
    pub fn new(cfg: &Config, thread: u32, nonce: &str, shas: Shas) -> Self {
        let c = &cfg.cli;
        let value = vec![b'x'; c.value_size];
        let get = || Stamp::new(b"GET", b"key:", &[]);
        let set = || Stamp::new(b"SET", b"key:", &[&value]);
        let kind = match c.workload {
            WorkloadSpec::Get => Kind::Get(get()),
            WorkloadSpec::Set => Kind::Set(set()),
            WorkloadSpec::Mixed(read) => Kind::Mixed {
                read,
                get: get(),
                set: set(),
            },
            // `Config::from_cli` guarantees a template for this workload.
            WorkloadSpec::Command => Kind::Command(cfg.template.clone().unwrap_or_default()),
            WorkloadSpec::Claim => Kind::Claim(Box::new(ClaimWork {
                detector: ClaimDetector::new(c.lease_secs.saturating_mul(1_000_000_000)),
                dup_ratio: c.dup_ratio,
                crash_ratio: c.crash_ratio,
                work_ns: c.work_ms.saturating_mul(NS_PER_MS),
                lease: c.lease_secs.to_string().into_bytes(),
                result_ttl: c.result_ttl.to_string().into_bytes(),
                hash_tag: c.hash_tag,
                next_id: 0,
                recent: Vec::with_capacity(DUP_WINDOW),
                recent_head: 0,
                next_outcome: 0,
            })),
            WorkloadSpec::Lock => Kind::Lock(LockWork {
                hold_ns: c.hold_ms.saturating_mul(NS_PER_MS),
                ttl_ms: c.lock_ttl_ms.to_string().into_bytes(),
                next_token: 0,
                stats: LockStats::default(),
            }),
        };
        let seed = cfg.seed ^ u64::from(thread).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Generator {
            kind,
            keys: KeySampler::new(c.key_dist, c.keyspace),
            rng: Rng::new(seed),
            scratch: Vec::with_capacity(256),
            target: c.target,
            shas,
            thread,
            nonce: nonce.as_bytes().to_vec(),
        }
    }

    /// True when replies can schedule follow-ups (claim and lock).
    pub fn has_followups(&self) -> bool {
        matches!(self.kind, Kind::Claim(_) | Kind::Lock(_))
    }

    /// True when replies must be decoded and handed to [`Generator::on_reply`].
    pub fn needs_replies(&self) -> bool {
        self.has_followups()
    }

    /// The claim detector's state, for the claim workload.
    pub fn claim_detector(&self) -> Option<&ClaimDetector> {
        match &self.kind {
            Kind::Claim(c) => Some(&c.detector),
            _ => None,
        }
    }

    /// The lock counters, for the lock workload.
    pub fn lock_stats(&self) -> Option<&LockStats> {
        match &self.kind {
            Kind::Lock(l) => Some(&l.stats),
            _ => None,
        }
    }

    /// Encodes the next new request into `out` and returns its op.
    #[inline]
    pub fn next(&mut self, conn: &mut ConnWork, out: &mut Vec<u8>) -> Op {
        match &mut self.kind {
            Kind::Get(stamp) | Kind::Set(stamp) => {
                stamp.write(out, self.keys.sample(&mut self.rng));
                Op::Plain
            }
            Kind::Mixed { read, get, set } => {
                let k = self.keys.sample(&mut self.rng);
                let stamp = if self.rng.chance(*read) { get } else { set };
                stamp.write(out, k);
                Op::Plain
            }
            Kind::Command(t) => {
                t.encode(out, &mut self.scratch, &self.keys, &mut self.rng);
                Op::Plain
            }
            Kind::Claim(_) => {
                let id = self.next_claim_id();
                let op = Op::Claim { id, attempt: 0 };
                self.encode_followup(op, conn, out);
                op
            }
            Kind::Lock(l) => {
                let key = self.keys.sample(&mut self.rng);
                let token = l.next_token;
                l.next_token += 1;
                let op = Op::Acquire { key, token };
                self.encode_followup(op, conn, out);
                op
            }
        }
    }

    fn next_claim_id(&mut self) -> u64 {
        let Kind::Claim(c) = &mut self.kind else {
            return 0;
        };
        if !c.recent.is_empty() && self.rng.chance(c.dup_ratio) {
            return c.recent[self.rng.below(c.recent.len() as u64) as usize];
        }
        let id = c.next_id;
        c.next_id += 1;
        if c.recent.len() < DUP_WINDOW {
            c.recent.push(id);
        } else {
            let old = std::mem::replace(&mut c.recent[c.recent_head], id);
            c.recent_head = (c.recent_head + 1) % DUP_WINDOW;
            c.detector.retire(old);
        }
        id
    }

    /// Encodes a claim or lock request (new, or a follow-up taken from [`ConnWork`]).
    pub fn encode_followup(&mut self, op: Op, conn: &ConnWork, out: &mut Vec<u8>) {
        let mut enc = Encoder::new(out, Version::Resp2);
        let s = &mut self.scratch;
        match (op, &mut self.kind) {
            (Op::Claim { id, attempt }, Kind::Claim(c)) => {
                // A poll (attempt > 0) was held when it was scheduled.
                if attempt == 0 {
                    c.detector.hold(id);
                } else {
                    c.detector.stats_mut().polls += 1;
                }
                match self.target {
                    Target::Goblin => {
                        enc.array(5);
                        enc.bulk(b"GOBLIN.CLAIM");
                    }
                    Target::Redis => {
                        enc.array(7);
                        enc.bulk(b"EVALSHA");
                        enc.bulk(&self.shas.claim);
                        enc.bulk(b"2");
                    }
                }
                id_key(s, b"claim:", &self.nonce, self.thread, id, c.hash_tag);
                enc.bulk(s);
                id_key(s, b"result:", &self.nonce, self.thread, id, c.hash_tag);
                enc.bulk(s);
                s.clear();
                s.push(b'w');
                push_u64(s, u64::from(self.thread));
                s.push(b'.');
                push_u64(s, u64::from(conn.worker));
                enc.bulk(s);
                enc.bulk(&c.lease);
            }
            (Op::Publish { id }, Kind::Claim(c)) => {
                let outcome = u64::from(self.thread) << 48 | c.next_outcome;
                c.next_outcome += 1;
                c.detector.published(id, outcome);
                enc.array(5);
                enc.bulk(b"SET");
                id_key(s, b"result:", &self.nonce, self.thread, id, c.hash_tag);
                enc.bulk(s);
                enc.bulk(&encode_outcome(outcome));
                enc.bulk(b"EX");
                enc.bulk(&c.result_ttl);
            }
            (Op::Acquire { key, token }, Kind::Lock(l)) => {
                enc.array(6);
                enc.bulk(b"SET");
                lock_key(s, key);
                enc.bulk(s);
                lock_token(s, &self.nonce, self.thread, token);
                enc.bulk(s);
                enc.bulk(b"NX");
                enc.bulk(b"PX");
                enc.bulk(&l.ttl_ms);
            }
            (Op::Release { key, token }, Kind::Lock(_)) => {
                match self.target {
                    Target::Goblin => {
                        enc.array(3);
                        enc.bulk(b"GOBLIN.CAD");
                    }
                    Target::Redis => {
                        enc.array(5);
                        enc.bulk(b"EVALSHA");
                        enc.bulk(&self.shas.cad);
                        enc.bulk(b"1");
                    }
                }
                lock_key(s, key);
                enc.bulk(s);
                lock_token(s, &self.nonce, self.thread, token);
                enc.bulk(s);
            }
            // Ops are only ever created by the workload that handles them.
            _ => {
                enc.array(1);
                enc.bulk(b"PING");
            }
        }
    }

    /// Interprets the reply `frame` to `op`, sent (or due) at `sent` and answered at `now`
    /// (ns since the run's start), scheduling follow-ups on `conn`. Error replies arrive
    /// here too (already counted by the caller) so that the op's bookkeeping is released.
    ///
    /// # Errors
    /// A description when the reply is not one the command can give.
    pub fn on_reply(
        &mut self,
        conn: &mut ConnWork,
        op: Op,
        frame: &Frame<'_>,
        sent: u64,
        now: u64,
    ) -> Result<(), Unexpected> {
        let is_error = matches!(frame, Frame::Error(_) | Frame::BlobError(_));
        match (op, &mut self.kind) {
            (Op::Claim { id, attempt }, Kind::Claim(c)) => {
                let result = match frame {
                    Frame::Bulk(b"CLAIMED") => {
                        c.detector.claimed(id, sent, now);
                        if self.rng.chance(c.crash_ratio) {
                            c.detector.stats_mut().crashed += 1;
                        } else {
                            c.detector.hold(id);
                            conn.schedule(now.saturating_add(c.work_ns), Op::Publish { id });
                        }
                        Ok(())
                    }
                    Frame::Bulk(value) => {
                        c.detector.replay(id, value);
                        Ok(())
                    }
                    Frame::Null => {
                        c.detector.nil(id);
                        let backoff = c
                            .work_ns
                            .max(NS_PER_MS)
                            .saturating_mul(1 << attempt.min(20))
                            .min(MAX_POLL_BACKOFF_NS);
                        c.detector.hold(id);
                        conn.schedule(
                            now.saturating_add(backoff),
                            Op::Claim {
                                id,
                                attempt: attempt + 1,
                            },
                        );
                        Ok(())
                    }
                    _ if is_error => Ok(()),
                    _ => Err("unexpected reply to a claim (want CLAIMED, a value or nil)"),
                };
                c.detector.release(id);
                result
            }
            (Op::Publish { id }, Kind::Claim(c)) => {
                c.detector.release(id);
                match frame {
                    Frame::Simple(b"OK") => Ok(()),
                    _ if is_error => Ok(()),
                    _ => Err("unexpected reply to SET result (want OK)"),
                }
            }
            (Op::Acquire { key, token }, Kind::Lock(l)) => match frame {
                Frame::Simple(b"OK") => {
                    l.stats.acquired += 1;
                    conn.schedule(now.saturating_add(l.hold_ns), Op::Release { key, token });
                    Ok(())
                }
                Frame::Null => {
                    l.stats.contended += 1;
                    Ok(())
                }
                _ if is_error => Ok(()),
                _ => Err("unexpected reply to SET NX PX (want OK or nil)"),
            },
            (Op::Release { .. }, Kind::Lock(l)) => match frame {
                Frame::Integer(1) => {
                    l.stats.released += 1;
                    Ok(())
                }
                Frame::Integer(0) => {
                    l.stats.lost += 1;
                    Ok(())
                }
                _ if is_error => Ok(()),
                _ => Err("unexpected reply to a lock release (want 0 or 1)"),
            },
            _ => Ok(()),
        }
    }
}

fn push_u64(s: &mut Vec<u8>, n: u64) {
    s.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// `<prefix><nonce>:<thread>:<id>`, or with the id part in a hash tag.
fn id_key(s: &mut Vec<u8>, prefix: &[u8], nonce: &[u8], thread: u32, id: u64, tag: bool) {
    s.clear();
    s.extend_from_slice(prefix);
    if tag {
        s.push(b'{');
    }
    s.extend_from_slice(nonce);
    s.push(b':');
    push_u64(s, u64::from(thread));
    s.push(b':');
    push_u64(s, id);
    if tag {
        s.push(b'}');
    }
}

fn lock_key(s: &mut Vec<u8>, key: u64) {
    s.clear();
    s.extend_from_slice(b"lock:");
    let mut digits = [0u8; KEY_DIGITS];
    pad12(key, &mut digits);
    s.extend_from_slice(&digits);
}

fn lock_token(s: &mut Vec<u8>, nonce: &[u8], thread: u32, token: u64) {
    s.clear();
    s.extend_from_slice(nonce);
    s.push(b':');
    push_u64(s, u64::from(thread));
    s.push(b':');
    push_u64(s, token);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;
    use goblin_protocol::parse_reply;

    fn generator(args: &[&str], target: Target) -> Generator {
        let mut argv = vec!["goblin-loadgen", "--seed", "1"];
        argv.extend_from_slice(args);
        let cfg = Config::from_cli(Cli::try_parse_from(argv).unwrap()).unwrap();
        let shas = Shas {
            claim: b"c0ffee".to_vec(),
            cad: b"cad5ha".to_vec(),
        };
        let mut g = Generator::new(&cfg, 3, "n0nce", shas);
        g.target = target;
        g
    }

    fn args_of(bytes: &[u8]) -> Vec<String> {
        let mut dec = goblin_protocol::RequestDecoder::default();
        let mut buf = bytes.to_vec();
        let goblin_protocol::Decoded::Command(n) = dec.decode(&mut buf).unwrap() else {
            panic!("not a command")
        };
        assert_eq!(n, bytes.len(), "exactly one command");
        dec.args()
            .iter()
            .map(|r| String::from_utf8_lossy(&buf[r.clone()]).into_owned())
            .collect()
    }

    #[test]
    fn get_set_and_mixed() {
        let mut g = generator(&["--keyspace", "1"], Target::Goblin);
        let mut conn = ConnWork::new(0);
        let mut out = Vec::new();
        assert_eq!(g.next(&mut conn, &mut out), Op::Plain);
        assert_eq!(args_of(&out), ["GET", "key:000000000000"]);
        let mut g = generator(&["--workload", "set", "--value-size", "5"], Target::Goblin);
        out.clear();
        g.next(&mut conn, &mut out);
        let args = args_of(&out);
        assert_eq!(
            (args[0].as_str(), args[1].len(), args[2].as_str()),
            ("SET", 16, "xxxxx")
        );
        let mut g = generator(&["--workload", "mixed:0.5"], Target::Goblin);
        let mut gets = 0;
        for _ in 0..1000 {
            out.clear();
            g.next(&mut conn, &mut out);
            gets += usize::from(args_of(&out)[0] == "GET");
        }
        assert!((400..600).contains(&gets), "{gets}");
    }

    #[test]
    fn claim_requests_on_both_targets() {
        let mut conn = ConnWork::new(7);
        let mut out = Vec::new();
        let mut g = generator(
            &["--workload", "claim", "--lease-secs", "9"],
            Target::Goblin,
        );
        assert_eq!(g.next(&mut conn, &mut out), Op::Claim { id: 0, attempt: 0 });
        assert_eq!(
            args_of(&out),
            [
                "GOBLIN.CLAIM",
                "claim:n0nce:3:0",
                "result:n0nce:3:0",
                "w3.7",
                "9"
            ]
        );
        let mut g = generator(&["--workload", "claim", "--hash-tag"], Target::Redis);
        out.clear();
        g.next(&mut conn, &mut out);
        assert_eq!(
            args_of(&out),
            [
                "EVALSHA",
                "c0ffee",
                "2",
                "claim:{n0nce:3:0}",
                "result:{n0nce:3:0}",
                "w3.7",
                "5"
            ]
        );
    }

    #[test]
    fn claim_reply_flow() {
        let mut conn = ConnWork::new(0);
        let mut out = Vec::new();
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--crash-ratio",
                "0",
                "--work-ms",
                "2",
            ],
            Target::Goblin,
        );
        let op = g.next(&mut conn, &mut out);
        let (claimed, _) = parse_reply(b"$7\r\nCLAIMED\r\n").unwrap().unwrap();
        g.on_reply(&mut conn, op, &claimed, 0, 1000).unwrap();
        assert_eq!(conn.next_due(), Some(1000 + 2 * NS_PER_MS));
        assert_eq!(conn.pop_due(1000), None, "not due yet");
        let (due, publish) = conn.pop_due(3 * NS_PER_MS).unwrap();
        assert_eq!(
            (due, publish),
            (1000 + 2 * NS_PER_MS, Op::Publish { id: 0 })
        );
        out.clear();
        g.encode_followup(publish, &conn, &mut out);
        let args = args_of(&out);
        assert_eq!(args[..2], ["SET", "result:n0nce:3:0"]);
        assert_eq!(args[3..], ["EX", "60"]);
        let (ok, _) = parse_reply(b"+OK\r\n").unwrap().unwrap();
        g.on_reply(&mut conn, publish, &ok, 0, 0).unwrap();
        // A duplicate is served the outcome just published.
        let replay = format!("${}\r\n{}\r\n", args[2].len(), args[2]);
        let (value, _) = parse_reply(replay.as_bytes()).unwrap().unwrap();
        g.on_reply(&mut conn, Op::Claim { id: 0, attempt: 0 }, &value, 0, 0)
            .unwrap();
        // Another gets nil (in flight) and polls later.
        let (nil, _) = parse_reply(b"$-1\r\n").unwrap().unwrap();
        g.on_reply(&mut conn, Op::Claim { id: 0, attempt: 0 }, &nil, 0, 10)
            .unwrap();
        assert_eq!(
            conn.pop_due(u64::MAX),
            Some((10 + 2 * NS_PER_MS, Op::Claim { id: 0, attempt: 1 }))
        );
        let stats = g.claim_detector().unwrap().stats().clone();
        assert_eq!(
            (
                stats.claims_won,
                stats.published,
                stats.replays_served,
                stats.nils
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(stats.violations(), 0);
        assert!(g.on_reply(&mut conn, publish, &nil, 0, 0).is_err());
    }

    /// Every request the detector holds an id for is released once: ids that were polled
    /// are forgotten once they leave the duplicate window.
    #[test]
    fn polled_claims_are_forgotten() {
        let mut conn = ConnWork::new(0);
        let mut out = Vec::new();
        let mut g = generator(&["--workload", "claim", "--dup-ratio", "0"], Target::Goblin);
        let (nil, _) = parse_reply(b"$-1\r\n").unwrap().unwrap();
        let (err, _) = parse_reply(b"-ERR busy\r\n").unwrap().unwrap();
        for _ in 0..3 * DUP_WINDOW {
            out.clear();
            let op = g.next(&mut conn, &mut out);
            g.on_reply(&mut conn, op, &nil, 0, 0).unwrap();
            let (_, poll) = conn.pop_due(u64::MAX).unwrap();
            g.encode_followup(poll, &conn, &mut out);
            g.on_reply(&mut conn, poll, &err, 0, 0).unwrap();
        }
        let tracked = g.claim_detector().unwrap().tracked();
        assert!(tracked <= DUP_WINDOW, "{tracked} ids still tracked");
    }

    #[test]
    fn lock_flow_on_both_targets() {
        let mut conn = ConnWork::new(0);
        let mut out = Vec::new();
        let mut g = generator(
            &[
                "--workload",
                "lock",
                "--keyspace",
                "1",
                "--lock-ttl-ms",
                "50",
            ],
            Target::Goblin,
        );
        let op = g.next(&mut conn, &mut out);
        assert_eq!(
            args_of(&out),
            ["SET", "lock:000000000000", "n0nce:3:0", "NX", "PX", "50"]
        );
        let (ok, _) = parse_reply(b"+OK\r\n").unwrap().unwrap();
        g.on_reply(&mut conn, op, &ok, 0, 5).unwrap();
        let (_, release) = conn.pop_due(u64::MAX).unwrap();
        out.clear();
        g.encode_followup(release, &conn, &mut out);
        assert_eq!(
            args_of(&out),
            ["GOBLIN.CAD", "lock:000000000000", "n0nce:3:0"]
        );
        g.target = Target::Redis;
        out.clear();
        g.encode_followup(release, &conn, &mut out);
        assert_eq!(
            args_of(&out),
            ["EVALSHA", "cad5ha", "1", "lock:000000000000", "n0nce:3:0"]
        );
        let (one, _) = parse_reply(b":1\r\n").unwrap().unwrap();
        g.on_reply(&mut conn, release, &one, 0, 0).unwrap();
        let (nil, _) = parse_reply(b"$-1\r\n").unwrap().unwrap();
        g.on_reply(&mut conn, op, &nil, 0, 0).unwrap();
        assert_eq!(
            g.lock_stats().unwrap(),
            &LockStats {
                acquired: 1,
                contended: 1,
                released: 1,
                lost: 0
            }
        );
    }
}
