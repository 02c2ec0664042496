//! Request generation and reply interpretation for every workload.
//!
//! A [`Generator`] belongs to one thread. It writes requests straight into a connection's
//! output buffer with the protocol crate's [`Encoder`] (no allocation per request: keys
//! are formatted into a reused scratch buffer) and tags each with an [`Op`] that comes
//! back with its reply. Plain ops (get, set, mixed, command) are only counted by the
//! engine; claim and lock ops are interpreted here, and may schedule follow-ups (publish a
//! result after the simulated work, renew a lease, poll again after a nil, release a held
//! lock). Follow-ups wait in the thread's timer heap, and leave on whichever of the
//! thread's connections has room first: nothing ever sleeps.
//!
//! With `--block`, a duplicate claim waits for its result on a *waiter connection* of its
//! own, as a real client's blocking call holds its connection: such a call can wait for a
//! long time, and nothing must queue behind it — above all not the publication it waits
//! for. Duplicates queue here ([`Generator::next_wait`]) until a waiter connection is free.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use goblin_protocol::{Encoder, Frame, Version};
use hdrhistogram::Histogram;

use crate::cli::{Config, Target, WorkloadSpec};
use crate::detector::{ClaimDetector, Fenced, encode_outcome};
use crate::keys::{KEY_DIGITS, KeySampler, pad12};
use crate::rng::Rng;
use crate::stats::{LockStats, new_histogram};
use crate::template::Template;

/// Recent claim ids a duplicate is drawn from: large enough that duplicates hit ids in
/// every state (in flight, working, published, crashed), small enough to stay hot.
const DUP_WINDOW: usize = 1024;

/// Nanoseconds per millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// How far past the end of its lease a stalled worker publishes: beyond any doubt about
/// the lease's end (the detector's clock slack is 2 ms), so the publication must be
/// refused.
const STALE_OVERRUN_NS: u64 = 50 * NS_PER_MS;

/// Duplicates queued per waiter connection (`--block`) before the thread stops drawing
/// new requests: the queue absorbs bursts, and a full one pushes back on the load instead
/// of growing without bound while every waiter connection is held by a long wait.
const QUEUED_WAITS_PER_WAITER: usize = 8;

/// What a request was, carried beside it until its reply arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Counted only (get, set, mixed, command).
    Plain,
    /// A GOBLIN.CLAIM call (or its script).
    Claim(ClaimCall),
    /// GOBLIN.PUBLISH (or its script) by the winner holding `token`.
    Publish {
        /// The request id.
        id: u64,
        /// The winning call's token.
        token: u64,
        /// The value published (see [`encode_outcome`]).
        outcome: u64,
    },
    /// GOBLIN.RENEW (or its script) by a long-running winner holding `token`.
    Renew {
        /// The request id.
        id: u64,
        /// The winning call's token.
        token: u64,
        /// When the worker's work is done (ns since the run's start).
        done_at: u64,
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

impl Op {
    /// A claim call sent on a waiter connection: it may wait for a long time, so its
    /// reply's latency says nothing about the server's speed (the wait is measured as
    /// the duplicate's wait instead).
    pub fn is_blocking(&self) -> bool {
        matches!(self, Op::Claim(c) if c.waits)
    }
}

/// One GOBLIN.CLAIM call of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimCall {
    /// The request id.
    pub id: u64,
    /// This call's token, unique within the thread (`w<thread>.<token>` on the wire), so
    /// that each grant is told apart from every other.
    pub token: u64,
    /// When the request began: its first call's send time (or, for a duplicate queued
    /// for a waiter connection, the moment it was drawn).
    pub started: u64,
    /// 0 for the request's first call, n for its n-th poll or renewed wait.
    pub attempt: u32,
    /// The id was drawn as a duplicate of a recent one.
    pub dup: bool,
    /// Sent on a waiter connection (`--block`).
    pub waits: bool,
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

/// A thread's pending follow-ups, earliest first.
#[derive(Debug, Default)]
struct Timers {
    heap: BinaryHeap<Scheduled>,
    seq: u64,
}

impl Timers {
    fn schedule(&mut self, due: u64, op: Op) {
        self.seq += 1;
        self.heap.push(Scheduled {
            due,
            seq: self.seq,
            op,
        });
    }

    fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|s| s.due)
    }

    fn pop_due(&mut self, now: u64) -> Option<(u64, Op)> {
        if self.heap.peek()?.due > now {
            return None;
        }
        self.heap.pop().map(|s| (s.due, s.op))
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

/// What becomes of a won claim's worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Works `--work-ms`, publishes.
    Works,
    /// Never publishes.
    Crashes,
    /// Works `--long-work-ms`, renewing every half lease, then publishes.
    RunsLong,
    /// Stalls past its lease without renewing, then publishes (and must be refused).
    Stalls,
}

#[derive(Debug)]
struct ClaimWork {
    detector: ClaimDetector,
    dup_ratio: f64,
    crash_ratio: f64,
    renew_ratio: f64,
    stale_ratio: f64,
    work_ns: u64,
    long_work_ns: u64,
    /// A long worker renews this often: every half lease.
    renew_every_ns: u64,
    /// How long a stalled worker takes: past its lease by [`STALE_OVERRUN_NS`].
    stall_ns: u64,
    poll_ns: u64,
    /// `--block`: the timeout in ms (its decimal text) and in ns.
    block: Option<(Vec<u8>, u64)>,
    lease: Vec<u8>,
    result_ttl: Vec<u8>,
    hash_tag: bool,
    next_id: u64,
    /// The last `DUP_WINDOW` ids, as a ring.
    recent: Vec<u64>,
    recent_head: usize,
    next_outcome: u64,
    next_token: u64,
    /// Duplicates waiting for a waiter connection (`--block`).
    waits: VecDeque<ClaimCall>,
    max_waits: usize,
    /// Only what completes from here on is counted (the warmup's end).
    measure_start: u64,
    /// From a duplicate's first call to the result in hand, for duplicates that found the
    /// work in flight (ns).
    dup_wait: Histogram<u64>,
}

impl ClaimWork {
    fn call(&mut self, id: u64, started: u64, attempt: u32, dup: bool) -> ClaimCall {
        self.next_token += 1;
        self.detector.hold(id);
        ClaimCall {
            id,
            token: self.next_token,
            started,
            attempt,
            dup,
            waits: false,
        }
    }

    fn fate(&self, u: f64) -> Fate {
        if u < self.crash_ratio {
            Fate::Crashes
        } else if u < self.crash_ratio + self.renew_ratio {
            Fate::RunsLong
        } else if u < self.crash_ratio + self.renew_ratio + self.stale_ratio {
            Fate::Stalls
        } else {
            Fate::Works
        }
    }

    fn publish_at(&mut self, timers: &mut Timers, thread: u32, due: u64, id: u64, token: u64) {
        let outcome = u64::from(thread) << 48 | self.next_outcome;
        self.next_outcome += 1;
        self.detector.hold(id);
        timers.schedule(due, Op::Publish { id, token, outcome });
    }

    fn renew_at(&mut self, timers: &mut Timers, due: u64, id: u64, token: u64, done_at: u64) {
        self.detector.hold(id);
        timers.schedule(due, Op::Renew { id, token, done_at });
    }

    /// The worker holding `token` for `id`, which won the claim at `now`, goes to work.
    fn start_work(
        &mut self,
        timers: &mut Timers,
        thread: u32,
        fate: Fate,
        id: u64,
        token: u64,
        now: u64,
    ) {
        let stats = self.detector.stats_mut();
        match fate {
            Fate::Crashes => stats.crashed += 1,
            Fate::Works => {
                self.publish_at(timers, thread, now.saturating_add(self.work_ns), id, token);
            }
            Fate::Stalls => {
                stats.stalled += 1;
                self.publish_at(timers, thread, now.saturating_add(self.stall_ns), id, token);
            }
            Fate::RunsLong => {
                stats.long_workers += 1;
                let done_at = now.saturating_add(self.long_work_ns);
                self.next_step(timers, thread, id, token, done_at, now);
            }
        }
    }

    /// A long worker's next step at `now`: renew in half a lease, or publish when done.
    fn next_step(
        &mut self,
        timers: &mut Timers,
        thread: u32,
        id: u64,
        token: u64,
        done_at: u64,
        now: u64,
    ) {
        let renew = now.saturating_add(self.renew_every_ns);
        if renew < done_at {
            self.renew_at(timers, renew, id, token, done_at);
        } else {
            self.publish_at(timers, thread, done_at.max(now), id, token);
        }
    }

    /// The request behind `call` has its result in hand at `now`.
    fn completed(&mut self, call: &ClaimCall, now: u64) {
        if now < self.measure_start {
            return;
        }
        self.detector.stats_mut().completed += 1;
        if call.dup {
            if self.detector.published_before(call.id, call.started) {
                self.detector.stats_mut().dups_served_at_once += 1;
            } else {
                self.dup_wait
                    .saturating_record(now.saturating_sub(call.started).max(1));
            }
        }
    }
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
    /// SHA1 of the GOBLIN.PUBLISH oracle script.
    pub publish: Vec<u8>,
    /// SHA1 of the GOBLIN.RENEW oracle script.
    pub renew: Vec<u8>,
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
    /// Follow-ups (publications, renewals, polls, releases), earliest first.
    timers: Timers,
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
        let lease_ns = c.lease_secs.saturating_mul(1_000_000_000);
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
                detector: ClaimDetector::new(lease_ns, c.result_ttl.saturating_mul(1_000_000_000)),
                dup_ratio: c.dup_ratio,
                crash_ratio: c.crash_ratio,
                renew_ratio: c.renew_ratio,
                stale_ratio: c.stale_ratio,
                work_ns: c.work_ms.saturating_mul(NS_PER_MS),
                long_work_ns: cfg.long_work_ms.saturating_mul(NS_PER_MS),
                renew_every_ns: lease_ns / 2,
                stall_ns: lease_ns
                    .saturating_add(STALE_OVERRUN_NS)
                    .saturating_add(c.work_ms.saturating_mul(NS_PER_MS)),
                poll_ns: c.poll_ms.saturating_mul(NS_PER_MS),
                block: c
                    .block
                    .map(|ms| (ms.to_string().into_bytes(), ms.saturating_mul(NS_PER_MS))),
                lease: c.lease_secs.to_string().into_bytes(),
                result_ttl: c.result_ttl.to_string().into_bytes(),
                hash_tag: c.hash_tag,
                next_id: 0,
                recent: Vec::with_capacity(DUP_WINDOW),
                recent_head: 0,
                next_outcome: 0,
                next_token: 0,
                waits: VecDeque::new(),
                max_waits: cfg.waiters().saturating_mul(QUEUED_WAITS_PER_WAITER),
                measure_start: u64::try_from(cfg.warmup.as_nanos()).unwrap_or(u64::MAX),
                dup_wait: new_histogram(),
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
            timers: Timers::default(),
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

    /// The claim workload: the wall clock read `offset_ns` ahead of the monotonic clock
    /// (see [`ClaimDetector::wall_clock_offset`]).
    pub fn wall_clock_offset(&mut self, offset_ns: i64) {
        if let Kind::Claim(c) = &mut self.kind {
            c.detector.wall_clock_offset(offset_ns);
        }
    }

    /// The duplicates' waits (ns), for the claim workload.
    pub fn dup_wait(&self) -> Option<&Histogram<u64>> {
        match &self.kind {
            Kind::Claim(c) => Some(&c.dup_wait),
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

    /// The earliest follow-up's due time.
    pub fn next_due(&self) -> Option<u64> {
        self.timers.next_due()
    }

    /// Takes the earliest follow-up if it is due at `now`: its due time and op.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Op)> {
        self.timers.pop_due(now)
    }

    /// True when so many duplicates wait for a waiter connection that no new request
    /// should be drawn.
    pub fn backlogged(&self) -> bool {
        matches!(&self.kind, Kind::Claim(c) if c.block.is_some() && c.waits.len() >= c.max_waits)
    }

    /// Encodes the next new request into `out`, sent at `sent`, and returns its op; or
    /// returns `None`, with nothing encoded, for a duplicate queued for a waiter
    /// connection (`--block`).
    #[inline]
    pub fn next(&mut self, out: &mut Vec<u8>, sent: u64) -> Option<Op> {
        match &mut self.kind {
            Kind::Get(stamp) | Kind::Set(stamp) => {
                stamp.write(out, self.keys.sample(&mut self.rng));
                Some(Op::Plain)
            }
            Kind::Mixed { read, get, set } => {
                let k = self.keys.sample(&mut self.rng);
                let stamp = if self.rng.chance(*read) { get } else { set };
                stamp.write(out, k);
                Some(Op::Plain)
            }
            Kind::Command(t) => {
                t.encode(out, &mut self.scratch, &self.keys, &mut self.rng);
                Some(Op::Plain)
            }
            Kind::Claim(_) => {
                let (id, dup) = self.next_claim_id();
                let Kind::Claim(c) = &mut self.kind else {
                    return None;
                };
                let mut call = c.call(id, sent, 0, dup);
                if dup && c.block.is_some() {
                    call.waits = true;
                    c.waits.push_back(call);
                    return None;
                }
                self.encode_claim(call, out, sent);
                Some(Op::Claim(call))
            }
            Kind::Lock(l) => {
                let key = self.keys.sample(&mut self.rng);
                let token = l.next_token;
                l.next_token += 1;
                let op = Op::Acquire { key, token };
                self.encode_followup(op, out, sent);
                Some(op)
            }
        }
    }

    /// For an idle waiter connection: encodes the longest-queued duplicate's
    /// `GOBLIN.CLAIM … BLOCK` into `out`, sent at `sent`.
    pub fn next_wait(&mut self, out: &mut Vec<u8>, sent: u64) -> Option<Op> {
        let Kind::Claim(c) = &mut self.kind else {
            return None;
        };
        let call = c.waits.pop_front()?;
        self.encode_claim(call, out, sent);
        Some(Op::Claim(call))
    }

    /// The next request id: a new one, or (`--dup-ratio`) a recent one, and which.
    fn next_claim_id(&mut self) -> (u64, bool) {
        let Kind::Claim(c) = &mut self.kind else {
            return (0, false);
        };
        if !c.recent.is_empty() && self.rng.chance(c.dup_ratio) {
            return (
                c.recent[self.rng.below(c.recent.len() as u64) as usize],
                true,
            );
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
        (id, false)
    }

    fn encode_claim(&mut self, call: ClaimCall, out: &mut Vec<u8>, sent: u64) {
        let Kind::Claim(c) = &mut self.kind else {
            return;
        };
        c.detector.claim_sent(call.id, call.token, sent);
        let mut enc = Encoder::new(out, Version::Resp2);
        let s = &mut self.scratch;
        match (self.target, &c.block) {
            (Target::Goblin, None) => {
                enc.array(5);
                enc.bulk(b"GOBLIN.CLAIM");
            }
            (Target::Goblin, Some(_)) => {
                enc.array(7);
                enc.bulk(b"GOBLIN.CLAIM");
            }
            (Target::Redis, _) => {
                enc.array(7);
                enc.bulk(b"EVALSHA");
                enc.bulk(&self.shas.claim);
                enc.bulk(b"2");
            }
        }
        id_key(s, b"claim:", &self.nonce, self.thread, call.id, c.hash_tag);
        enc.bulk(s);
        id_key(s, b"result:", &self.nonce, self.thread, call.id, c.hash_tag);
        enc.bulk(s);
        claim_token(s, self.thread, call.token);
        enc.bulk(s);
        enc.bulk(&c.lease);
        if let (Target::Goblin, Some((ms, _))) = (self.target, &c.block) {
            enc.bulk(b"BLOCK");
            enc.bulk(ms);
        }
    }

    /// Encodes a follow-up taken from [`Generator::pop_due`] (or a lock acquire), sent at
    /// `sent`.
    pub fn encode_followup(&mut self, op: Op, out: &mut Vec<u8>, sent: u64) {
        if let Op::Claim(call) = op {
            self.encode_claim(call, out, sent);
            return;
        }
        let mut enc = Encoder::new(out, Version::Resp2);
        let s = &mut self.scratch;
        let (nonce, thread) = (&self.nonce, self.thread);
        match (op, &mut self.kind) {
            (Op::Publish { id, token, outcome }, Kind::Claim(c)) => {
                c.detector.publishing(id, outcome);
                match self.target {
                    Target::Goblin => {
                        enc.array(6);
                        enc.bulk(b"GOBLIN.PUBLISH");
                    }
                    Target::Redis => {
                        enc.array(8);
                        enc.bulk(b"EVALSHA");
                        enc.bulk(&self.shas.publish);
                        enc.bulk(b"2");
                    }
                }
                id_key(s, b"claim:", nonce, thread, id, c.hash_tag);
                enc.bulk(s);
                id_key(s, b"result:", nonce, thread, id, c.hash_tag);
                enc.bulk(s);
                claim_token(s, thread, token);
                enc.bulk(s);
                enc.bulk(&encode_outcome(outcome));
                enc.bulk(&c.result_ttl);
            }
            (Op::Renew { id, token, .. }, Kind::Claim(c)) => {
                c.detector.stats_mut().renewals += 1;
                match self.target {
                    Target::Goblin => {
                        enc.array(4);
                        enc.bulk(b"GOBLIN.RENEW");
                    }
                    Target::Redis => {
                        enc.array(6);
                        enc.bulk(b"EVALSHA");
                        enc.bulk(&self.shas.renew);
                        enc.bulk(b"1");
                    }
                }
                id_key(s, b"claim:", nonce, thread, id, c.hash_tag);
                enc.bulk(s);
                claim_token(s, thread, token);
                enc.bulk(s);
                enc.bulk(&c.lease);
            }
            (Op::Acquire { key, token }, Kind::Lock(l)) => {
                enc.array(6);
                enc.bulk(b"SET");
                lock_key(s, key);
                enc.bulk(s);
                lock_token(s, nonce, thread, token);
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
                lock_token(s, nonce, thread, token);
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
    /// (ns since the run's start), scheduling follow-ups. Error replies arrive here too
    /// (already counted by the caller) so that the op's bookkeeping is released.
    ///
    /// # Errors
    /// A description when the reply is not one the command can give.
    pub fn on_reply(
        &mut self,
        op: Op,
        frame: &Frame<'_>,
        sent: u64,
        now: u64,
    ) -> Result<(), Unexpected> {
        let is_error = matches!(frame, Frame::Error(_) | Frame::BlobError(_));
        let thread = self.thread;
        match (op, &mut self.kind) {
            (Op::Claim(call), Kind::Claim(c)) => {
                let id = call.id;
                let result = match frame {
                    Frame::Bulk(b"CLAIMED") => {
                        c.detector.claimed(id, call.token, sent, now);
                        if call.dup {
                            c.detector.stats_mut().takeovers += 1;
                        }
                        let fate = c.fate(self.rng.unit());
                        c.start_work(&mut self.timers, thread, fate, id, call.token, now);
                        Ok(())
                    }
                    Frame::Bulk(value) => {
                        c.detector.replay(id, call.token, value);
                        c.completed(&call, now);
                        Ok(())
                    }
                    Frame::Null => {
                        if let Some((_, block_ns)) = c.block {
                            // A wait that ended empty: wait again, first in the queue.
                            c.detector.timed_out(id, call.token, sent, now, block_ns);
                            let mut again = c.call(id, call.started, call.attempt + 1, call.dup);
                            again.waits = true;
                            c.waits.push_front(again);
                        } else {
                            c.detector.nil(id, call.token);
                            c.detector.stats_mut().polls += 1;
                            let again = c.call(id, call.started, call.attempt + 1, call.dup);
                            self.timers
                                .schedule(now.saturating_add(c.poll_ns), Op::Claim(again));
                        }
                        Ok(())
                    }
                    _ if is_error => {
                        c.detector.claim_failed(id, call.token);
                        Ok(())
                    }
                    _ => {
                        c.detector.claim_failed(id, call.token);
                        Err("unexpected reply to a claim (want CLAIMED, a value or nil)")
                    }
                };
                c.detector.release(id);
                result
            }
            (Op::Publish { id, token, outcome }, Kind::Claim(c)) => {
                let result = match frame {
                    Frame::Integer(n @ (0 | 1)) => {
                        let accepted = *n == 1;
                        c.detector
                            .fenced(Fenced::Publish, id, token, outcome, sent, now, accepted);
                        if accepted {
                            // The winner holds the result it computed.
                            let call = ClaimCall {
                                id,
                                token,
                                started: sent,
                                attempt: 0,
                                dup: false,
                                waits: false,
                            };
                            c.completed(&call, now);
                        }
                        Ok(())
                    }
                    _ if is_error => Ok(()),
                    _ => Err("unexpected reply to a publication (want 0 or 1)"),
                };
                // Last: the record must outlive the judgement.
                c.detector.release(id);
                result
            }
            (Op::Renew { id, token, done_at }, Kind::Claim(c)) => {
                let result = match frame {
                    Frame::Integer(n @ (0 | 1)) => {
                        let accepted = *n == 1;
                        c.detector
                            .fenced(Fenced::Renew, id, token, 0, sent, now, accepted);
                        // A worker whose renewal is refused has lost its lease: it gives up.
                        if accepted {
                            c.next_step(&mut self.timers, thread, id, token, done_at, now);
                        }
                        Ok(())
                    }
                    _ if is_error => Ok(()),
                    _ => Err("unexpected reply to a renewal (want 0 or 1)"),
                };
                c.detector.release(id);
                result
            }
            (Op::Acquire { key, token }, Kind::Lock(l)) => match frame {
                Frame::Simple(b"OK") => {
                    l.stats.acquired += 1;
                    self.timers
                        .schedule(now.saturating_add(l.hold_ns), Op::Release { key, token });
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

    /// The run ended at `end` with these waits — `(op, sent)` — still unanswered on the
    /// waiter connections: they are judged by the detector and counted.
    pub fn abandon(&mut self, waits: &[(Op, u64)], end: u64) {
        let Kind::Claim(c) = &mut self.kind else {
            return;
        };
        let calls: Vec<(u64, u64, u64)> = waits
            .iter()
            .filter_map(|&(op, sent)| match op {
                Op::Claim(call) => Some((call.id, call.token, sent)),
                _ => None,
            })
            .collect();
        c.detector.abandoned(&calls, end);
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

/// A claim call's token: `w<thread>.<token>`.
fn claim_token(s: &mut Vec<u8>, thread: u32, token: u64) {
    s.clear();
    s.push(b'w');
    push_u64(s, u64::from(thread));
    s.push(b'.');
    push_u64(s, token);
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

    const MS: u64 = NS_PER_MS;

    fn generator(args: &[&str], target: Target) -> Generator {
        let mut argv = vec!["goblin-loadgen", "--seed", "1"];
        argv.extend_from_slice(args);
        let cfg = Config::from_cli(Cli::try_parse_from(argv).unwrap()).unwrap();
        let shas = Shas {
            claim: b"c0ffee".to_vec(),
            cad: b"cad5ha".to_vec(),
            publish: b"pub5ha".to_vec(),
            renew: b"ren5ha".to_vec(),
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

    fn frame(bytes: &'static [u8]) -> Frame<'static> {
        parse_reply(bytes).unwrap().unwrap().0
    }

    fn stats(g: &Generator) -> crate::detector::ClaimStats {
        g.claim_detector().unwrap().stats().clone()
    }

    /// Encodes the next due follow-up (due by `now`) and returns its op and arguments.
    fn followup(g: &mut Generator, now: u64) -> (u64, Op, Vec<String>) {
        let (due, op) = g.pop_due(now).expect("a follow-up is due");
        let mut out = Vec::new();
        g.encode_followup(op, &mut out, due);
        (due, op, args_of(&out))
    }

    #[test]
    fn get_set_and_mixed() {
        let mut g = generator(&["--keyspace", "1"], Target::Goblin);
        let mut out = Vec::new();
        assert_eq!(g.next(&mut out, 0), Some(Op::Plain));
        assert_eq!(args_of(&out), ["GET", "key:000000000000"]);
        let mut g = generator(&["--workload", "set", "--value-size", "5"], Target::Goblin);
        out.clear();
        g.next(&mut out, 0);
        let args = args_of(&out);
        assert_eq!(
            (args[0].as_str(), args[1].len(), args[2].as_str()),
            ("SET", 16, "xxxxx")
        );
        let mut g = generator(&["--workload", "mixed:0.5"], Target::Goblin);
        let mut gets = 0;
        for _ in 0..1000 {
            out.clear();
            g.next(&mut out, 0);
            gets += usize::from(args_of(&out)[0] == "GET");
        }
        assert!((400..600).contains(&gets), "{gets}");
    }

    #[test]
    fn claim_requests_on_both_targets() {
        let mut out = Vec::new();
        let mut g = generator(
            &["--workload", "claim", "--lease-secs", "9"],
            Target::Goblin,
        );
        let Some(Op::Claim(call)) = g.next(&mut out, 5) else {
            panic!("a claim")
        };
        assert_eq!((call.id, call.attempt, call.started), (0, 0, 5));
        assert!(!call.dup && !call.waits);
        assert_eq!(
            args_of(&out),
            [
                "GOBLIN.CLAIM",
                "claim:n0nce:3:0",
                "result:n0nce:3:0",
                "w3.1",
                "9"
            ]
        );
        // Every call has a token of its own.
        out.clear();
        g.next(&mut out, 6);
        assert_eq!(args_of(&out)[3], "w3.2");
        let mut g = generator(&["--workload", "claim", "--hash-tag"], Target::Redis);
        out.clear();
        g.next(&mut out, 0);
        assert_eq!(
            args_of(&out),
            [
                "EVALSHA",
                "c0ffee",
                "2",
                "claim:{n0nce:3:0}",
                "result:{n0nce:3:0}",
                "w3.1",
                "5"
            ]
        );
    }

    #[test]
    fn claim_publish_replay_and_poll() {
        let mut out = Vec::new();
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--crash-ratio",
                "0",
                "--work-ms",
                "2",
                "--poll-ms",
                "30",
            ],
            Target::Goblin,
        );
        let op = g.next(&mut out, 0).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 0, 1000)
            .unwrap();
        assert_eq!(g.next_due(), Some(1000 + 2 * MS));
        assert_eq!(g.pop_due(1000), None, "not due yet");
        let (due, publish, args) = followup(&mut g, 3 * MS);
        assert_eq!(due, 1000 + 2 * MS);
        assert!(matches!(
            publish,
            Op::Publish {
                id: 0,
                token: 1,
                ..
            }
        ));
        assert_eq!(
            args[..4],
            [
                "GOBLIN.PUBLISH",
                "claim:n0nce:3:0",
                "result:n0nce:3:0",
                "w3.1"
            ]
        );
        assert_eq!(args[5], "60");
        g.on_reply(publish, &frame(b":1\r\n"), due, due + 1000)
            .unwrap();
        // A duplicate is served the outcome just published.
        let replay = format!("${}\r\n{}\r\n", args[4].len(), args[4]);
        let (value, _) = parse_reply(replay.as_bytes()).unwrap().unwrap();
        let dup = ClaimCall {
            id: 0,
            token: 50,
            started: 5 * MS,
            attempt: 0,
            dup: true,
            waits: false,
        };
        g.on_reply(Op::Claim(dup), &value, 5 * MS, 6 * MS).unwrap();
        // Another gets nil (in flight) and polls --poll-ms later, with a new token.
        g.on_reply(Op::Claim(dup), &frame(b"$-1\r\n"), 7 * MS, 8 * MS)
            .unwrap();
        let (due, poll, args) = followup(&mut g, u64::MAX);
        assert_eq!(due, 38 * MS);
        let Op::Claim(poll) = poll else {
            panic!("a poll")
        };
        assert_eq!((poll.attempt, poll.started, poll.dup), (1, 5 * MS, true));
        assert_eq!(args[3], format!("w3.{}", poll.token));
        assert_ne!(poll.token, dup.token);
        let s = stats(&g);
        assert_eq!(
            (s.claims_won, s.published, s.replays_served, s.nils, s.polls),
            (1, 1, 1, 1, 1)
        );
        assert_eq!(
            (s.completed, s.dups_served_at_once),
            (2, 1),
            "the winner and the replay"
        );
        assert_eq!(s.violations(), 0);
        assert!(g.on_reply(publish, &frame(b"$-1\r\n"), 0, 0).is_err());
    }

    #[test]
    fn publish_and_renew_on_redis_run_the_scripts() {
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--crash-ratio",
                "0",
                "--renew-ratio",
                "1",
                "--lease-secs",
                "2",
                "--long-work-ms",
                "2500",
            ],
            Target::Redis,
        );
        let mut out = Vec::new();
        let op = g.next(&mut out, 0).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS).unwrap();
        let (due, renew, args) = followup(&mut g, u64::MAX);
        assert_eq!(due, MS + 1000 * MS, "half a lease after the grant");
        assert_eq!(
            args,
            ["EVALSHA", "ren5ha", "1", "claim:n0nce:3:0", "w3.1", "2"]
        );
        g.on_reply(renew, &frame(b":1\r\n"), due, due + MS).unwrap();
        let (due, renew, _) = followup(&mut g, u64::MAX);
        assert_eq!(due, 2002 * MS);
        g.on_reply(renew, &frame(b":1\r\n"), due, due + MS).unwrap();
        // The next renewal would come after the work is done: publish at 2.501 s.
        let (due, publish, args) = followup(&mut g, u64::MAX);
        assert_eq!(due, 2501 * MS);
        assert_eq!(
            args[..6],
            [
                "EVALSHA",
                "pub5ha",
                "2",
                "claim:n0nce:3:0",
                "result:n0nce:3:0",
                "w3.1"
            ]
        );
        assert_eq!(args[7], "60");
        g.on_reply(publish, &frame(b":1\r\n"), due, due + MS)
            .unwrap();
        let s = stats(&g);
        assert_eq!(
            (s.long_workers, s.renewals, s.published, s.completed),
            (1, 2, 1, 1)
        );
        assert_eq!(s.violations(), 0);
    }

    /// A long worker's id leaves the duplicate window while it works: its record must
    /// live on until its last follow-up is judged (it was dropped between a renewal's reply
    /// and the next step, and the publication was then "never granted").
    #[test]
    fn a_long_worker_outlives_the_duplicate_window() {
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--dup-ratio",
                "0",
                "--crash-ratio",
                "0",
                "--renew-ratio",
                "1",
                "--lease-secs",
                "1",
                "--long-work-ms",
                "900",
            ],
            Target::Goblin,
        );
        let mut out = Vec::new();
        let op = g.next(&mut out, 0).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS).unwrap();
        // Push id 0 out of the window; the new ids' claims fail and are forgotten.
        let err = frame(b"-ERR busy\r\n");
        for _ in 0..DUP_WINDOW + 1 {
            let op = g.next(&mut out, 2 * MS).unwrap();
            g.on_reply(op, &err, 2 * MS, 2 * MS).unwrap();
        }
        let (due, renew, _) = followup(&mut g, u64::MAX);
        g.on_reply(renew, &frame(b":1\r\n"), due, due + MS).unwrap();
        let (due, publish, _) = followup(&mut g, u64::MAX);
        g.on_reply(publish, &frame(b":1\r\n"), due, due + MS)
            .unwrap();
        let s = stats(&g);
        assert_eq!((s.renewals, s.published, s.completed), (1, 1, 1));
        assert_eq!(
            s.violations(),
            0,
            "{:?}",
            g.claim_detector().unwrap().described()
        );
        assert_eq!(g.claim_detector().unwrap().tracked(), DUP_WINDOW);
    }

    #[test]
    fn a_refused_renewal_ends_the_work() {
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--crash-ratio",
                "0",
                "--renew-ratio",
                "1",
            ],
            Target::Goblin,
        );
        let mut out = Vec::new();
        let op = g.next(&mut out, 0).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS).unwrap();
        let (due, renew, args) = followup(&mut g, u64::MAX);
        assert_eq!(args, ["GOBLIN.RENEW", "claim:n0nce:3:0", "w3.1", "5"]);
        // Refused at 2.5 s, when the lease certainly still ran: a violation, and the
        // worker gives up.
        g.on_reply(renew, &frame(b":0\r\n"), due, due + MS).unwrap();
        assert_eq!(g.next_due(), None, "no publication after a lost lease");
        let s = stats(&g);
        assert_eq!((s.renew_refused, s.owner_refused), (0, 1));
    }

    #[test]
    fn fates_of_winners() {
        let mut out = Vec::new();
        let mut g = generator(
            &["--workload", "claim", "--crash-ratio", "1"],
            Target::Goblin,
        );
        let op = g.next(&mut out, 0).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS).unwrap();
        assert_eq!(g.next_due(), None, "a crashed worker never publishes");
        assert_eq!(stats(&g).crashed, 1);
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--crash-ratio",
                "0",
                "--stale-ratio",
                "1",
                "--lease-secs",
                "1",
                "--work-ms",
                "3",
            ],
            Target::Goblin,
        );
        let op = g.next(&mut out, 0).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS).unwrap();
        let (due, publish, _) = followup(&mut g, u64::MAX);
        assert_eq!(due, MS + 1000 * MS + STALE_OVERRUN_NS + 3 * MS);
        // Refused: the fence works, and the stale worker's request is lost.
        g.on_reply(publish, &frame(b":0\r\n"), due, due + MS)
            .unwrap();
        let s = stats(&g);
        assert_eq!(
            (s.stalled, s.publish_refused, s.completed, s.violations()),
            (1, 1, 0, 0)
        );
        // Accepted: a stale publication the server should have refused.
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--crash-ratio",
                "0",
                "--stale-ratio",
                "1",
                "--lease-secs",
                "1",
            ],
            Target::Goblin,
        );
        let op = g.next(&mut out, 0).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS).unwrap();
        let (due, publish, _) = followup(&mut g, u64::MAX);
        g.on_reply(publish, &frame(b":1\r\n"), due, due + MS)
            .unwrap();
        assert_eq!(stats(&g).stale_publishes, 1);
    }

    #[test]
    fn with_block_duplicates_wait_on_waiter_connections() {
        let mut out = Vec::new();
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--block",
                "250",
                "--dup-ratio",
                "1",
                "--waiters",
                "1",
                "--crash-ratio",
                "0",
            ],
            Target::Goblin,
        );
        // A new id's call carries BLOCK too (it cannot wait: nobody holds a new id).
        let first = g.next(&mut out, 0).unwrap();
        assert_eq!(
            args_of(&out),
            [
                "GOBLIN.CLAIM",
                "claim:n0nce:3:0",
                "result:n0nce:3:0",
                "w3.1",
                "5",
                "BLOCK",
                "250"
            ]
        );
        assert!(!first.is_blocking());
        // Duplicates are queued, not written, until the queue is full.
        out.clear();
        for i in 0..QUEUED_WAITS_PER_WAITER {
            assert!(!g.backlogged(), "{i}");
            assert_eq!(g.next(&mut out, MS), None);
        }
        assert!(g.backlogged());
        assert!(out.is_empty());
        let wait = g.next_wait(&mut out, 2 * MS).unwrap();
        assert!(wait.is_blocking());
        assert_eq!(args_of(&out)[3..], ["w3.2", "5", "BLOCK", "250"]);
        assert!(!g.backlogged());
        // The winner publishes; the waiter is woken with the value, 3 ms after it began.
        g.on_reply(first, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS)
            .unwrap();
        let (due, publish, args) = followup(&mut g, u64::MAX);
        g.on_reply(publish, &frame(b":1\r\n"), due, 3 * MS).unwrap();
        let replay = format!("${}\r\n{}\r\n", args[4].len(), args[4]);
        let (value, _) = parse_reply(replay.as_bytes()).unwrap().unwrap();
        g.on_reply(wait, &value, 2 * MS, 4 * MS).unwrap();
        let waits = g.dup_wait().unwrap();
        assert_eq!(waits.len(), 1);
        assert!(waits.equivalent(waits.max(), 3 * MS), "{}", waits.max());
        // A wait that times out waits again, ahead of the queue, with a new token.
        out.clear();
        let wait = g.next_wait(&mut out, 5 * MS).unwrap();
        g.on_reply(wait, &frame(b"$-1\r\n"), 5 * MS, 256 * MS)
            .unwrap();
        out.clear();
        let Some(Op::Claim(again)) = g.next_wait(&mut out, 257 * MS) else {
            panic!("a wait")
        };
        let Op::Claim(wait) = wait else { panic!() };
        assert_eq!((again.attempt, again.started), (1, wait.started));
        assert_ne!(again.token, wait.token);
        let s = stats(&g);
        assert_eq!(
            (s.block_timeouts, s.violations()),
            (0, 1),
            "the claim was published: {:?}",
            g.claim_detector().unwrap().described()
        );
        assert_eq!(s.missed_results, 1);
    }

    #[test]
    fn a_waiter_that_wins_takes_over() {
        let mut out = Vec::new();
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--block",
                "0",
                "--dup-ratio",
                "1",
                "--crash-ratio",
                "0",
                "--lease-secs",
                "1",
            ],
            Target::Goblin,
        );
        let first = g.next(&mut out, 0).unwrap();
        assert_eq!(g.next(&mut out, MS), None);
        let wait = g.next_wait(&mut out, MS).unwrap();
        // The first winner "crashed" (its publication is never sent); the waiter wins
        // the claim when the lease runs out.
        g.on_reply(first, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS)
            .unwrap();
        let _ = g.pop_due(u64::MAX);
        g.on_reply(wait, &frame(b"$7\r\nCLAIMED\r\n"), MS, 1003 * MS)
            .unwrap();
        let (_, publish, args) = followup(&mut g, u64::MAX);
        assert_eq!(args[3], "w3.2");
        g.on_reply(publish, &frame(b":1\r\n"), 1004 * MS, 1005 * MS)
            .unwrap();
        let s = stats(&g);
        assert_eq!(
            (
                s.claims_won,
                s.reclaims_after_lease,
                s.takeovers,
                s.completed
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(s.violations(), 0);
        assert_eq!(g.dup_wait().unwrap().len(), 0, "a takeover is no replay");
    }

    #[test]
    fn nothing_is_counted_as_completed_during_the_warmup() {
        let mut g = generator(
            &["--workload", "claim", "--crash-ratio", "0", "--warmup", "1"],
            Target::Goblin,
        );
        let mut out = Vec::new();
        let op = g.next(&mut out, 0).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS).unwrap();
        let (due, publish, _) = followup(&mut g, u64::MAX);
        g.on_reply(publish, &frame(b":1\r\n"), due, due + MS)
            .unwrap();
        assert_eq!(stats(&g).completed, 0);
        let op = g.next(&mut out, 2_000 * MS).unwrap();
        g.on_reply(op, &frame(b"$7\r\nCLAIMED\r\n"), 2_000 * MS, 2_001 * MS)
            .unwrap();
        let (due, publish, _) = followup(&mut g, u64::MAX);
        g.on_reply(publish, &frame(b":1\r\n"), due, due + MS)
            .unwrap();
        assert_eq!(stats(&g).completed, 1);
    }

    #[test]
    fn waits_left_at_the_end_are_judged() {
        let mut out = Vec::new();
        let mut g = generator(
            &[
                "--workload",
                "claim",
                "--block",
                "0",
                "--dup-ratio",
                "1",
                "--lease-secs",
                "1",
            ],
            Target::Goblin,
        );
        let first = g.next(&mut out, 0).unwrap();
        g.on_reply(first, &frame(b"$7\r\nCLAIMED\r\n"), 0, MS)
            .unwrap();
        assert_eq!(g.next(&mut out, MS), None);
        let wait = g.next_wait(&mut out, MS).unwrap();
        g.abandon(&[(wait, MS)], 500 * MS);
        let s = stats(&g);
        assert_eq!((s.waiting_at_end, s.violations()), (1, 0));
    }

    /// Every request the detector holds an id for is released once: ids that were polled
    /// are forgotten once they leave the duplicate window.
    #[test]
    fn polled_claims_are_forgotten() {
        let mut out = Vec::new();
        let mut g = generator(&["--workload", "claim", "--dup-ratio", "0"], Target::Goblin);
        let nil = frame(b"$-1\r\n");
        let err = frame(b"-ERR busy\r\n");
        for _ in 0..3 * DUP_WINDOW {
            out.clear();
            let op = g.next(&mut out, 0).unwrap();
            g.on_reply(op, &nil, 0, 0).unwrap();
            let (_, poll) = g.pop_due(u64::MAX).unwrap();
            g.encode_followup(poll, &mut out, 0);
            g.on_reply(poll, &err, 0, 0).unwrap();
        }
        let tracked = g.claim_detector().unwrap().tracked();
        assert!(tracked <= DUP_WINDOW, "{tracked} ids still tracked");
    }

    #[test]
    fn lock_flow_on_both_targets() {
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
        let op = g.next(&mut out, 0).unwrap();
        assert_eq!(
            args_of(&out),
            ["SET", "lock:000000000000", "n0nce:3:0", "NX", "PX", "50"]
        );
        g.on_reply(op, &frame(b"+OK\r\n"), 0, 5).unwrap();
        let (_, release) = g.pop_due(u64::MAX).unwrap();
        out.clear();
        g.encode_followup(release, &mut out, 0);
        assert_eq!(
            args_of(&out),
            ["GOBLIN.CAD", "lock:000000000000", "n0nce:3:0"]
        );
        g.target = Target::Redis;
        out.clear();
        g.encode_followup(release, &mut out, 0);
        assert_eq!(
            args_of(&out),
            ["EVALSHA", "cad5ha", "1", "lock:000000000000", "n0nce:3:0"]
        );
        g.on_reply(release, &frame(b":1\r\n"), 0, 0).unwrap();
        g.on_reply(op, &frame(b"$-1\r\n"), 0, 0).unwrap();
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
