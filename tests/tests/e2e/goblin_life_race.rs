//! The claim's whole life under contention (issue 12): 16 workers, dealt over the 4
//! threads of one goblin-server, race for 8 claim ids for 20 seconds, with the two keys
//! of an id in one slot or on two shards in either lock order. Each loop a worker asks
//! `GOBLIN.CLAIM claim result token 1 BLOCK ms` with a fresh token; when it wins it does
//! "work" and then, by turns, publishes with GOBLIN.PUBLISH, renews its lease with
//! GOBLIN.RENEW while it works, crashes (never publishes: the lease lapses), gives up and
//! releases with GOBLIN.CAD, or works past its lease (its publish must then be refused if
//! the claim moved on). Three ids publish results that outlive the test; the others
//! publish results that live one second, after which the work may be done again.
//!
//! The checks reason only with what a client can know: a command took effect somewhere
//! between the moment it was sent and the moment its reply arrived, and a lease runs for
//! at least its length from the moment its command (or the last renewal or publish that
//! extended it) was sent, less [`CLOCK_SLACK`] for the server's millisecond clock.
//! - Never two owners at once: two claims of one id overlap when neither could have ended
//!   before the other was granted.
//! - An owner whose lease certainly still runs is never refused a renewal, a publish or
//!   a release.
//! - Never a stale publish accepted: no accepted publish follows a claim certainly
//!   granted to another since its own; every value read is the token of an accepted
//!   publish of that id, read while its record lived.
//! - Never a finished result re-computed while its record lives: no claim certainly
//!   asked after an accepted publish is granted before the record's expiry; for the
//!   lasting results, every later call gets the value.
//! - Every waiter gets the result, the claim or its timeout's nil, never an error, and a
//!   nil only once its time is up and when no result was published while it waited.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::claim::{CLAIMED, Layout};
use goblin_tests::reply::{bulk, integer, nil};
use goblin_tests::rng::{Rng, seed};
use goblin_tests::{Raw, Server, StopOnDrop, show};

/// The server's threads: more shards than the machine has cores.
const THREADS: usize = 4;
/// Workers, each on its own connection.
const WORKERS: usize = 16;
/// Claim ids the workers race for.
const IDS: usize = 8;
/// Ids whose results outlive the test; the others' live [`SHORT_TTL`].
const LASTING: [usize; 3] = [0, 4, 5];
/// How long workers start new loops.
const RUN: Duration = Duration::from_secs(20);
/// The lease every claim asks for, in seconds.
const LEASE_SECS: u64 = 1;
const LEASE: Duration = Duration::from_secs(LEASE_SECS);
/// A lasting result's TTL: far beyond the test.
const LASTING_TTL: Duration = Duration::from_secs(300);
/// A short result's TTL: the work may be done again a second after it is published.
const SHORT_TTL: Duration = Duration::from_secs(1);
/// The BLOCK of a claim, in milliseconds: shorter than a lease, so that a wait's start
/// bounds when its claim could have been granted.
const BLOCK_MS: (i64, i64) = (100, 800);
/// The server stores deadlines in whole milliseconds of its wall clock: a lease may end
/// this much before its length from the moment its command was sent.
const CLOCK_SLACK: Duration = Duration::from_millis(25);

/// What a winner does with its claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Short work, then publish.
    Publish,
    /// Work longer than a lease, renewing it twice, then publish.
    Renew,
    /// Work past the lease without renewing, then publish (refused if another took over).
    Overrun,
    /// Never publish: the lease lapses.
    Crash,
    /// Give up, and release the claim with GOBLIN.CAD.
    Release,
}

/// What a winner did with its claim after winning it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Renew,
    Publish,
    Release,
}

/// One command of a winner: sent and answered, since the race began; accepted (1) or not.
#[derive(Clone, Debug)]
struct Op {
    kind: OpKind,
    sent: Duration,
    got: Duration,
    accepted: bool,
}

/// A won claim and all its owner did with it.
#[derive(Clone, Debug)]
struct Claim {
    worker: usize,
    id: usize,
    token: String,
    plan: Plan,
    sent: Duration,
    got: Duration,
    ops: Vec<Op>,
}

/// A GOBLIN.CLAIM that did not win: a value, or nil after its BLOCK.
#[derive(Clone, Debug)]
struct Call {
    worker: usize,
    id: usize,
    block: Duration,
    sent: Duration,
    got: Duration,
    /// `None`: nil.
    value: Option<Vec<u8>>,
}

/// What one worker saw.
#[derive(Default)]
struct Seen {
    claims: Vec<Claim>,
    calls: Vec<Call>,
}

/// An id's keys and its result's TTL.
struct Id {
    claim: Vec<u8>,
    result: Vec<u8>,
    ttl: Duration,
    layout: Layout,
}

fn ids() -> Vec<Id> {
    (0..IDS)
        .map(|i| {
            let layout = Layout::ALL[i % Layout::ALL.len()];
            let (claim, result) = layout.keys(&format!("race.{i}"), THREADS);
            Id {
                claim: claim.into_bytes(),
                result: result.into_bytes(),
                ttl: if LASTING.contains(&i) {
                    LASTING_TTL
                } else {
                    SHORT_TTL
                },
                layout,
            }
        })
        .collect()
}

/// A 1/0 reply as a bool; anything else fails the worker.
fn accepted(reply: &[u8], what: &str) -> bool {
    match integer(reply) {
        1 => true,
        0 => false,
        n => panic!("{what} replied {n}"),
    }
}

fn worker(
    server: &Server,
    ids: &[Id],
    n: usize,
    rng_seed: u64,
    start: Instant,
    stop: &AtomicBool,
) -> Seen {
    let _stop_all = StopOnDrop(stop);
    let mut raw = server.raw();
    let mut rng = Rng::new(rng_seed);
    let mut seen = Seen::default();
    let now = || start.elapsed();
    let nap = |ms: u64| thread::sleep(Duration::from_millis(ms));
    let mut loops = 0;
    while now() < RUN && !stop.load(Ordering::SeqCst) {
        loops += 1;
        let id = rng.below(IDS);
        let Id {
            claim, result, ttl, ..
        } = &ids[id];
        let token = format!("w{n}.{loops}");
        let block = rng.range(BLOCK_MS.0, BLOCK_MS.1);
        let lease = LEASE_SECS.to_string();
        let sent = now();
        let reply = raw.cmd(&[
            b"GOBLIN.CLAIM",
            claim,
            result,
            token.as_bytes(),
            lease.as_bytes(),
            b"BLOCK",
            block.to_string().as_bytes(),
        ]);
        let got = now();
        let block = Duration::from_millis(block as u64);
        if reply == CLAIMED {
            let plan = match rng.below(100) {
                0..=9 => Plan::Crash,
                10..=19 => Plan::Release,
                20..=31 => Plan::Overrun,
                32..=51 => Plan::Renew,
                _ => Plan::Publish,
            };
            let mut c = Claim {
                worker: n,
                id,
                token: token.clone(),
                plan,
                sent,
                got,
                ops: Vec::new(),
            };
            let what = |op: &str| format!("worker {n}: {op} of id {id} by {token}");
            let mut op = |raw: &mut Raw, kind: OpKind, args: &[&[u8]]| {
                let sent = now();
                let reply = raw.cmd(args);
                let got = now();
                let accepted = accepted(&reply, &what(&format!("{kind:?}")));
                c.ops.push(Op {
                    kind,
                    sent,
                    got,
                    accepted,
                });
            };
            let ttl_secs = ttl.as_secs().to_string();
            let publish: [&[u8]; 6] = [
                b"GOBLIN.PUBLISH",
                claim,
                result,
                token.as_bytes(),
                token.as_bytes(),
                ttl_secs.as_bytes(),
            ];
            match plan {
                Plan::Crash => {}
                Plan::Release => {
                    nap(5 + rng.below(20) as u64);
                    op(
                        &mut raw,
                        OpKind::Release,
                        &[b"GOBLIN.CAD", claim, token.as_bytes()],
                    );
                }
                Plan::Publish => {
                    nap(5 + rng.below(45) as u64);
                    op(&mut raw, OpKind::Publish, &publish);
                }
                Plan::Overrun => {
                    nap(LEASE.as_millis() as u64 + 100 + rng.below(300) as u64);
                    op(&mut raw, OpKind::Publish, &publish);
                }
                Plan::Renew => {
                    let renew: [&[u8]; 4] =
                        [b"GOBLIN.RENEW", claim, token.as_bytes(), lease.as_bytes()];
                    for _ in 0..2 {
                        nap(550 + rng.below(100) as u64);
                        op(&mut raw, OpKind::Renew, &renew);
                    }
                    nap(300);
                    op(&mut raw, OpKind::Publish, &publish);
                }
            }
            seen.claims.push(c);
        } else if reply == nil(false) {
            seen.calls.push(Call {
                worker: n,
                id,
                block,
                sent,
                got,
                value: None,
            });
        } else if reply.starts_with(b"$") {
            let value = match parse_reply(&reply) {
                Ok(Some((Frame::Bulk(v), _))) => Some(v.to_vec()),
                _ => panic!("worker {n}: GOBLIN.CLAIM replied {}", show(&reply)),
            };
            seen.calls.push(Call {
                worker: n,
                id,
                block,
                sent,
                got,
                value,
            });
            // The work is done: come back a little later.
            nap(2 + rng.below(10) as u64);
        } else {
            panic!(
                "worker {n}: GOBLIN.CLAIM of id {id} ({}) by {token} with BLOCK {block:?} replied {}",
                show(claim),
                show(&reply)
            );
        }
    }
    seen
}

/// The latest moment a claim's owner may have lost it: no earlier than this, its lease
/// still ran (or it was released no earlier than this). Also checks, on the way, that an
/// owner whose lease certainly ran was never refused.
fn held_until(c: &Claim, faults: &mut Vec<String>) -> Duration {
    let mut until = (c.sent + LEASE).saturating_sub(CLOCK_SLACK);
    for op in &c.ops {
        if !op.accepted && op.got < until {
            faults.push(format!(
                "{:?} by the owner refused: {} (id {}) won at {:?}..{:?}, its lease ran at \
                 least until {until:?}, and its {:?} was answered 0 at {:?}..{:?}",
                op.kind, c.token, c.id, c.sent, c.got, op.kind, op.sent, op.got
            ));
        }
        if op.accepted {
            until = match op.kind {
                OpKind::Renew => (op.sent + LEASE).saturating_sub(CLOCK_SLACK),
                OpKind::Publish => until.max(op.sent),
                OpKind::Release => op.sent,
            };
        }
    }
    until
}

/// Every check of the module docs, over everything the workers saw.
fn check(ids: &[Id], claims: &[Claim], calls: &[Call], faults: &mut Vec<String>) {
    for (id, spec) in ids.iter().enumerate() {
        let ttl = spec.ttl;
        let mut mine: Vec<&Claim> = claims.iter().filter(|c| c.id == id).collect();
        mine.sort_by_key(|c| c.got);
        // The accepted publishes, and how long each claim certainly held.
        let publishes: Vec<(&Claim, &Op)> = mine
            .iter()
            .flat_map(|c| {
                c.ops
                    .iter()
                    .filter(|o| o.kind == OpKind::Publish && o.accepted)
                    .map(move |o| (*c, o))
            })
            .collect();
        let held: Vec<Duration> = mine
            .iter()
            .map(|c| {
                let until = held_until(c, faults);
                // An accepted publish holds the claim until the result expires.
                publishes
                    .iter()
                    .filter(|(p, _)| p.token == c.token)
                    .map(|(_, o)| (o.sent + ttl).saturating_sub(CLOCK_SLACK))
                    .fold(until, Duration::max)
            })
            .collect();

        // Never two owners at once.
        for (a, ca) in mine.iter().enumerate() {
            for (b, cb) in mine.iter().enumerate().skip(a + 1) {
                if cb.got < held[a] && ca.got < held[b] {
                    faults.push(format!(
                        "two owners of id {id} ({:?}) at once: {} (worker {}, {:?}) asked at \
                         {:?}, won at {:?}, held at least until {:?}; and {} (worker {}, \
                         {:?}) asked at {:?}, won at {:?}, held at least until {:?}",
                        spec.layout,
                        ca.token,
                        ca.worker,
                        ca.plan,
                        ca.sent,
                        ca.got,
                        held[a],
                        cb.token,
                        cb.worker,
                        cb.plan,
                        cb.sent,
                        cb.got,
                        held[b]
                    ));
                }
            }
        }

        for &(owner, publish) in &publishes {
            for other in &mine {
                // A stale publish: another claim was certainly granted between the
                // owner's and its publish.
                if other.token != owner.token && other.sent > owner.got && other.got < publish.sent
                {
                    faults.push(format!(
                        "stale publish accepted on id {id}: {} won at {:?}, {} won at \
                         {:?}..{:?}, then {}'s publish at {:?}..{:?} was accepted",
                        owner.token,
                        owner.got,
                        other.token,
                        other.sent,
                        other.got,
                        owner.token,
                        publish.sent,
                        publish.got
                    ));
                }
                // Re-computed while the record lives.
                if other.sent > publish.got
                    && other.got < (publish.sent + ttl).saturating_sub(CLOCK_SLACK)
                {
                    faults.push(format!(
                        "id {id}'s result was published by {} at {:?}..{:?} to live {ttl:?}, \
                         but {} asked at {:?} and won the claim at {:?}",
                        owner.token, publish.sent, publish.got, other.token, other.sent, other.got
                    ));
                }
            }
        }
        if ttl == LASTING_TTL && publishes.len() > 1 {
            let who: Vec<&str> = publishes.iter().map(|(c, _)| c.token.as_str()).collect();
            faults.push(format!(
                "id {id}'s lasting result was published {} times: {who:?}",
                publishes.len()
            ));
        }

        // Every call that did not win: a value some accepted publish wrote while it
        // lived, or nil once the time was up and no result came meanwhile.
        for call in calls.iter().filter(|c| c.id == id) {
            match &call.value {
                Some(v) => {
                    let writer = publishes.iter().find(|(c, _)| c.token.as_bytes() == &v[..]);
                    match writer {
                        None => faults.push(format!(
                            "worker {} read {} for id {id} at {:?}..{:?}: no accepted publish \
                             wrote it",
                            call.worker,
                            show(v),
                            call.sent,
                            call.got
                        )),
                        Some((_, p)) => {
                            if call.got < p.sent || call.sent > p.got + ttl + CLOCK_SLACK {
                                faults.push(format!(
                                    "worker {} read {} for id {id} at {:?}..{:?}, but it was \
                                     published at {:?}..{:?} to live {ttl:?}",
                                    call.worker,
                                    show(v),
                                    call.sent,
                                    call.got,
                                    p.sent,
                                    p.got
                                ));
                            }
                        }
                    }
                }
                None => {
                    if call.got < call.sent + call.block.saturating_sub(Duration::from_millis(1)) {
                        faults.push(format!(
                            "worker {} got nil for id {id} after {:?}, before its BLOCK of {:?}",
                            call.worker,
                            call.got - call.sent,
                            call.block
                        ));
                    }
                    // A result published while it waited (before its timeout could
                    // fire) must have reached it, unless the machine stalled it.
                    let prompt = call.got < call.sent + call.block + Duration::from_millis(200);
                    if let Some((c, p)) = publishes
                        .iter()
                        .find(|(_, p)| p.sent >= call.sent && p.got < call.sent + call.block)
                        && prompt
                    {
                        faults.push(format!(
                            "worker {} waited for id {id} from {:?} with BLOCK {:?} and got nil \
                             at {:?}, although {} published at {:?}..{:?}",
                            call.worker, call.sent, call.block, call.got, c.token, p.sent, p.got
                        ));
                    }
                    // Once a lasting result is published, every later call reads it.
                    if ttl == LASTING_TTL
                        && let Some((c, p)) = publishes.iter().find(|(_, p)| call.sent > p.got)
                    {
                        faults.push(format!(
                            "worker {} got nil for id {id} at {:?}..{:?}, after {}'s lasting \
                             result was published at {:?}..{:?}",
                            call.worker, call.sent, call.got, c.token, p.sent, p.got
                        ));
                    }
                }
            }
        }
    }
}

/// What the race did, to show it was one.
#[derive(Debug, Default)]
struct Tally {
    claims: usize,
    won_after_waiting: usize,
    values: usize,
    values_after_waiting: usize,
    nils: usize,
    published: usize,
    refused_publishes: usize,
    renewed: usize,
    released: usize,
    crashes: usize,
    taken_over_from_a_crash: usize,
}

fn tally(claims: &[Claim], calls: &[Call]) -> Tally {
    /// A call answered this long after it was sent waited for its answer.
    const WAITED: Duration = Duration::from_millis(20);
    let mut t = Tally {
        claims: claims.len(),
        ..Tally::default()
    };
    for c in claims {
        t.won_after_waiting += usize::from(c.got - c.sent > WAITED);
        t.crashes += usize::from(c.plan == Plan::Crash);
        for op in &c.ops {
            match (op.kind, op.accepted) {
                (OpKind::Publish, true) => t.published += 1,
                (OpKind::Publish, false) => t.refused_publishes += 1,
                (OpKind::Renew, true) => t.renewed += 1,
                (OpKind::Release, true) => t.released += 1,
                _ => {}
            }
        }
        // The next claim of the id after a crash: granted once the lease lapsed.
        if c.plan == Plan::Crash
            && claims
                .iter()
                .filter(|n| n.id == c.id && n.got > c.got)
                .min_by_key(|n| n.got)
                .is_some_and(|n| n.got < c.got + LEASE + Duration::from_millis(500))
        {
            t.taken_over_from_a_crash += 1;
        }
    }
    for call in calls {
        match call.value {
            Some(_) => {
                t.values += 1;
                t.values_after_waiting += usize::from(call.got - call.sent > WAITED);
            }
            None => t.nils += 1,
        }
    }
    t
}

#[test]
fn claims_renewals_crashes_and_publishes_keep_one_owner_per_lease() {
    let server = Server::goblin_threads(THREADS);
    let ids = ids();
    let base = seed("goblin_life_race");
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let seen: Vec<Seen> = thread::scope(|scope| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|n| {
                let (server, ids, stop) = (&server, &ids, &stop);
                scope
                    .spawn(move || worker(server, ids, n, base.wrapping_add(n as u64), start, stop))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let ended = start.elapsed();
    let claims: Vec<Claim> = seen.iter().flat_map(|s| s.claims.clone()).collect();
    let calls: Vec<Call> = seen.iter().flat_map(|s| s.calls.clone()).collect();

    let mut faults = Vec::new();
    check(&ids, &claims, &calls, &mut faults);

    // The keyspace at the end: a result is an accepted publish's, and a lasting one holds
    // its claim until the same instant.
    let mut raw = server.raw();
    let checked = start.elapsed();
    for (id, spec) in ids.iter().enumerate() {
        let accepted: Vec<(&Claim, &Op)> = claims
            .iter()
            .filter(|c| c.id == id)
            .flat_map(|c| {
                c.ops
                    .iter()
                    .filter(|o| o.kind == OpKind::Publish && o.accepted)
                    .map(move |o| (c, o))
            })
            .collect();
        let result = raw.cmd(&[b"GET", &spec.result]);
        if result == nil(false) {
            if spec.ttl == LASTING_TTL && !accepted.is_empty() {
                faults.push(format!("id {id}'s lasting result is gone at the end"));
            }
            continue;
        }
        match accepted
            .iter()
            .find(|(c, _)| bulk(c.token.as_bytes()) == result)
        {
            None => faults.push(format!(
                "id {id}'s result at the end is {}: no accepted publish wrote it",
                show(&result)
            )),
            Some((c, p)) => {
                if checked > p.got + spec.ttl + CLOCK_SLACK {
                    faults.push(format!(
                        "id {id}'s result {} outlived its TTL: published at {:?}, read at {checked:?}",
                        c.token, p.got
                    ));
                }
                if spec.ttl == LASTING_TTL {
                    let claim = raw.cmd(&[b"GET", &spec.claim]);
                    let (cp, rp) = (
                        integer(&raw.cmd(&[b"PTTL", &spec.claim])),
                        integer(&raw.cmd(&[b"PTTL", &spec.result])),
                    );
                    if claim != bulk(c.token.as_bytes()) || (cp - rp).abs() > 50 {
                        faults.push(format!(
                            "id {id}: the claim of a published result is {} with PTTL {cp}, \
                             the result {} with PTTL {rp}: not held by its owner until the \
                             result expires",
                            show(&claim),
                            c.token
                        ));
                    }
                }
            }
        }
    }

    let t = tally(&claims, &calls);
    eprintln!(
        "goblin_life_race: {:?} of racing over {IDS} ids: {t:#?}",
        ended
    );
    if !faults.is_empty() {
        let shown: Vec<&String> = faults.iter().take(12).collect();
        panic!(
            "{} violations (GOBLIN_TEST_SEED={base}), the first:\n{}",
            faults.len(),
            shown
                .iter()
                .map(|f| format!("  - {f}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    // The race exercised what it checks.
    let lasting_done = LASTING
        .iter()
        .filter(|&&id| {
            claims.iter().any(|c| {
                c.id == id
                    && c.ops
                        .iter()
                        .any(|o| o.kind == OpKind::Publish && o.accepted)
            })
        })
        .count();
    for (what, n, least) in [
        ("claims", t.claims, 50),
        ("claims won after waiting", t.won_after_waiting, 5),
        ("values read after waiting", t.values_after_waiting, 5),
        ("accepted publishes", t.published, 20),
        ("refused publishes", t.refused_publishes, 1),
        ("accepted renewals", t.renewed, 5),
        ("releases", t.released, 1),
        ("crashes taken over", t.taken_over_from_a_crash, 1),
        ("lasting results published", lasting_done, 1),
    ] {
        assert!(
            n >= least,
            "too little of it to mean anything: {n} {what} (want {least}): {t:#?}"
        );
    }
}

/// The checks find what they look for: each fault, fabricated, is reported, and a clean
/// history is not.
#[test]
fn race_checks_report_each_kind_of_fault() {
    let ids = ids();
    let ms = Duration::from_millis;
    let short = 1; // An id with a short result.
    let claim = |token: &str, sent: u64, got: u64, ops: Vec<Op>| Claim {
        worker: 0,
        id: short,
        token: token.into(),
        plan: Plan::Publish,
        sent: ms(sent),
        got: ms(got),
        ops,
    };
    let op = |kind: OpKind, sent: u64, got: u64, accepted: bool| Op {
        kind,
        sent: ms(sent),
        got: ms(got),
        accepted,
    };
    let call = |sent: u64, got: u64, block: u64, value: Option<&str>| Call {
        worker: 1,
        id: short,
        block: ms(block),
        sent: ms(sent),
        got: ms(got),
        value: value.map(|v| v.as_bytes().to_vec()),
    };
    let faults = |claims: Vec<Claim>, calls: Vec<Call>| {
        let mut faults = Vec::new();
        check(&ids, &claims, &calls, &mut faults);
        faults
    };

    // Clean: a publish, reads of it, a nil while nothing came, a claim after the record.
    let clean = faults(
        vec![
            claim("a", 0, 1, vec![op(OpKind::Publish, 50, 51, true)]),
            claim("b", 1100, 1101, vec![op(OpKind::Renew, 1600, 1601, true)]),
        ],
        vec![call(20, 70, 500, Some("a")), call(1150, 1700, 500, None)],
    );
    assert!(clean.is_empty(), "{clean:#?}");

    let cases: Vec<(&str, Vec<Claim>, Vec<Call>)> = vec![
        (
            "two owners",
            vec![claim("a", 0, 1, vec![]), claim("b", 100, 101, vec![])],
            vec![],
        ),
        (
            "two owners",
            // A renewal keeps the first lease running past its first second.
            vec![
                claim("a", 0, 1, vec![op(OpKind::Renew, 600, 601, true)]),
                claim("b", 1200, 1201, vec![]),
            ],
            vec![],
        ),
        (
            "stale publish accepted",
            vec![
                claim("a", 0, 1, vec![op(OpKind::Publish, 1300, 1301, true)]),
                claim("b", 1100, 1101, vec![]),
            ],
            vec![],
        ),
        (
            "won the claim",
            vec![
                claim("a", 0, 1, vec![op(OpKind::Publish, 50, 51, true)]),
                claim("b", 100, 900, vec![]),
            ],
            vec![],
        ),
        (
            "by the owner refused",
            vec![claim("a", 0, 1, vec![op(OpKind::Renew, 500, 501, false)])],
            vec![],
        ),
        (
            "no accepted publish wrote it",
            vec![claim(
                "a",
                0,
                1,
                vec![op(OpKind::Publish, 1300, 1301, false)],
            )],
            vec![call(1400, 1401, 500, Some("a"))],
        ),
        (
            "but it was published",
            vec![claim("a", 0, 1, vec![op(OpKind::Publish, 50, 51, true)])],
            vec![call(1200, 1201, 500, Some("a"))],
        ),
        ("before its BLOCK", vec![], vec![call(0, 100, 500, None)]),
        (
            "although a published",
            vec![claim("a", 0, 1, vec![op(OpKind::Publish, 200, 201, true)])],
            vec![call(100, 610, 500, None)],
        ),
    ];
    for (want, claims, calls) in cases {
        let found = faults(claims, calls);
        assert!(
            found.iter().any(|f| f.contains(want)),
            "no fault \"{want}\" reported: {found:#?}"
        );
    }
}
