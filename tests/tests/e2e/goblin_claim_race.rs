//! GOBLIN.CLAIM under contention (issue 4): 32 connections, dealt round-robin over every
//! worker thread, race for the same claim ids, with the two keys on one shard and on two
//! shards in either lock order.
//!
//! - With a lease longer than the test, each id has exactly one winner, and every other
//!   caller sees nil (in flight) or the value the winner published — never a value before
//!   it was written, never nil after it was.
//! - With 1-second leases and workers that never publish, the claim changes hands as the
//!   leases lapse, but no two holders overlap: a claim is never won while an earlier
//!   lease on the same id was certainly still running.

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use goblin_tests::assert_bytes_eq;
use goblin_tests::claim::{CLAIMED, Layout};
use goblin_tests::keys::THREADS;
use goblin_tests::reply::{bulk, nil};
use goblin_tests::rng::Rng;
use goblin_tests::{Server, show};

/// Connections racing.
const CONNS: usize = 32;
/// Claim ids per layout in the long-lease race.
const LONG_IDS_PER_LAYOUT: usize = 3;
/// Passes each connection makes over every id in the long-lease race.
const LONG_ROUNDS: usize = 10;
/// Claim ids per layout in the short-lease race.
const SHORT_IDS_PER_LAYOUT: usize = 2;
/// How long the short-lease race runs: three lease turnovers and some.
const SHORT_RUN: Duration = Duration::from_millis(3600);
/// The short lease.
const LEASE: Duration = Duration::from_secs(1);
/// Clock disagreement forgiven between the test and the server (millisecond clocks).
const TOLERANCE: Duration = Duration::from_millis(50);

/// One GOBLIN.CLAIM as a connection saw it.
#[derive(Debug, Clone)]
struct Attempt {
    conn: usize,
    id: usize,
    token: String,
    /// When it was sent and when its reply arrived, since the race began.
    sent: Duration,
    got: Duration,
    reply: Vec<u8>,
}

/// A winner's publication of its result.
#[derive(Debug, Clone)]
struct Publish {
    conn: usize,
    id: usize,
    value: Vec<u8>,
    sent: Duration,
    done: Duration,
}

/// The claim ids of a race: `per_layout` for each layout.
fn claim_ids(test: &str, threads: usize, per_layout: usize) -> Vec<(Layout, String, String)> {
    Layout::ALL
        .iter()
        .flat_map(|&layout| {
            (0..per_layout).map(move |i| {
                let (claim, result) = layout.keys(&format!("{test}.{i}"), threads);
                (layout, claim, result)
            })
        })
        .collect()
}

fn long_lease_race(threads: usize) {
    let server = Server::goblin_threads(threads);
    let ids = claim_ids("race", threads, LONG_IDS_PER_LAYOUT);
    let barrier = Barrier::new(CONNS);
    let start = Instant::now();
    let (attempts, publishes): (Vec<Attempt>, Vec<Publish>) = thread::scope(|scope| {
        let handles: Vec<_> = (0..CONNS)
            .map(|conn| {
                let (server, ids, barrier) = (&server, &ids, &barrier);
                scope.spawn(move || {
                    // Connection `conn` lands on worker `conn % threads`.
                    let mut raw = server.raw();
                    let mut rng = Rng::new(conn as u64);
                    let token = format!("c{conn}");
                    let (mut attempts, mut publishes) = (Vec::new(), Vec::new());
                    barrier.wait();
                    for _ in 0..LONG_ROUNDS {
                        let mut order: Vec<usize> = (0..ids.len()).collect();
                        for i in (1..order.len()).rev() {
                            order.swap(i, rng.below(i + 1));
                        }
                        for id in order {
                            let (_, claim, result) = &ids[id];
                            let sent = start.elapsed();
                            let reply = raw.cmd(&[
                                b"GOBLIN.CLAIM",
                                claim.as_bytes(),
                                result.as_bytes(),
                                token.as_bytes(),
                                b"60",
                            ]);
                            let got = start.elapsed();
                            let won = reply == CLAIMED;
                            attempts.push(Attempt {
                                conn,
                                id,
                                token: token.clone(),
                                sent,
                                got,
                                reply,
                            });
                            if won {
                                // The work takes a while; duplicates arrive meanwhile.
                                thread::sleep(Duration::from_millis(5 + rng.below(15) as u64));
                                let value = format!("v{conn}:{id}").into_bytes();
                                let sent = start.elapsed();
                                let ok =
                                    raw.cmd(&[b"SET", result.as_bytes(), &value, b"EX", b"60"]);
                                assert_eq!(ok, b"+OK\r\n");
                                let done = start.elapsed();
                                publishes.push(Publish {
                                    conn,
                                    id,
                                    value,
                                    sent,
                                    done,
                                });
                            }
                        }
                    }
                    (attempts, publishes)
                })
            })
            .collect();
        let mut all = (Vec::new(), Vec::new());
        for h in handles {
            let (a, p) = h.join().unwrap();
            all.0.extend(a);
            all.1.extend(p);
        }
        all
    });

    let mut raw = server.raw();
    let (mut nils, mut values) = (0, 0);
    for (id, (layout, claim, result)) in ids.iter().enumerate() {
        let what = format!("--threads {threads}, {layout:?} {claim} / {result}");
        let mine: Vec<&Attempt> = attempts.iter().filter(|a| a.id == id).collect();
        let winners: Vec<&&Attempt> = mine.iter().filter(|a| a.reply == CLAIMED).collect();
        assert_eq!(winners.len(), 1, "{what}: winners {winners:#?}");
        let winner = winners[0];
        let publish = publishes.iter().find(|p| p.id == id).unwrap();
        assert_eq!(publish.conn, winner.conn);
        let value_reply = bulk(&publish.value);
        let mut seen_value = [false; CONNS];
        for a in &mine {
            if a.reply == CLAIMED {
                continue;
            }
            if a.reply == nil(false) {
                nils += 1;
                assert!(
                    a.sent < publish.done,
                    "{what}: conn {} was told in flight at {:?}, after the result was \
                     published at {:?}",
                    a.conn,
                    a.sent,
                    publish.done
                );
                assert!(
                    !seen_value[a.conn],
                    "{what}: conn {} saw the value, then nil",
                    a.conn
                );
            } else if a.reply == value_reply {
                values += 1;
                assert!(
                    a.got >= publish.sent,
                    "{what}: conn {} got the value at {:?}, before it was sent at {:?}",
                    a.conn,
                    a.got,
                    publish.sent
                );
                seen_value[a.conn] = true;
            } else {
                panic!(
                    "{what}: conn {} got {} (winner conn {}, value {})",
                    a.conn,
                    show(&a.reply),
                    winner.conn,
                    show(&value_reply)
                );
            }
        }
        assert_eq!(
            raw.cmd(&[b"GET", claim.as_bytes()]),
            bulk(winner.token.as_bytes()),
            "{what}"
        );
        assert_eq!(raw.cmd(&[b"GET", result.as_bytes()]), value_reply, "{what}");
    }
    eprintln!(
        "long-lease race --threads {threads}: {} claims over {} ids, {nils} nils, {values} values",
        attempts.len(),
        ids.len()
    );
    // Both kinds of answer to a loser happened: the race was a race.
    assert!(
        nils > 0 && values > 0,
        "--threads {threads}: {nils} nils, {values} values"
    );
}

#[test]
fn one_winner_per_id_and_losers_see_nil_or_the_published_value() {
    for threads in THREADS {
        long_lease_race(threads);
    }
}

fn short_lease_race(threads: usize) {
    let server = Server::goblin_threads(threads);
    let ids = claim_ids("lease", threads, SHORT_IDS_PER_LAYOUT);
    let barrier = Barrier::new(CONNS);
    let start = Instant::now();
    let attempts: Vec<Attempt> = thread::scope(|scope| {
        let handles: Vec<_> = (0..CONNS)
            .map(|conn| {
                let (server, ids, barrier) = (&server, &ids, &barrier);
                scope.spawn(move || {
                    let mut raw = server.raw();
                    let mut rng = Rng::new(1000 + conn as u64);
                    let mut attempts = Vec::new();
                    barrier.wait();
                    let mut n = 0;
                    while start.elapsed() < SHORT_RUN {
                        let id = rng.below(ids.len());
                        let (_, claim, result) = &ids[id];
                        let token = format!("c{conn}.{n}");
                        n += 1;
                        let sent = start.elapsed();
                        let reply = raw.cmd(&[
                            b"GOBLIN.CLAIM",
                            claim.as_bytes(),
                            result.as_bytes(),
                            token.as_bytes(),
                            b"1",
                        ]);
                        let got = start.elapsed();
                        attempts.push(Attempt {
                            conn,
                            id,
                            token,
                            sent,
                            got,
                            reply,
                        });
                        // Winners never publish: they crash, and their lease lapses.
                        thread::sleep(Duration::from_millis(1 + rng.below(3) as u64));
                    }
                    attempts
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });

    let mut raw = server.raw();
    for (id, (layout, claim, result)) in ids.iter().enumerate() {
        let what = format!("--threads {threads}, {layout:?} {claim} / {result}");
        let mut holders: Vec<&Attempt> = Vec::new();
        for a in attempts.iter().filter(|a| a.id == id) {
            if a.reply == CLAIMED {
                holders.push(a);
            } else {
                assert_bytes_eq!(
                    &a.reply,
                    nil(false),
                    "{what}: conn {} at {:?}",
                    a.conn,
                    a.sent
                );
            }
        }
        holders.sort_by_key(|a| a.sent);
        let times: Vec<_> = holders.iter().map(|a| (a.sent, a.got)).collect();
        // Leases lapse and are re-taken: a claim at the start, then one after each lease.
        assert!(holders.len() >= 3, "{what}: holders at {times:?}");
        for pair in holders.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            // a's lease began no earlier than a was sent, so it ran at least until
            // a.sent + LEASE; b was granted no later than its reply arrived.
            assert!(
                b.got + TOLERANCE >= a.sent + LEASE,
                "{what}: conn {} won at {:?}..{:?} while conn {}'s lease from {:?} still ran",
                b.conn,
                b.sent,
                b.got,
                a.conn,
                a.sent
            );
            // And the claim does not stay stuck after a lease lapses.
            assert!(
                b.sent <= a.got + LEASE + Duration::from_millis(700),
                "{what}: no claim between {:?} and {:?}",
                a.got,
                b.sent
            );
        }
        eprintln!(
            "short-lease race {what}: {} attempts, holders at {times:?}",
            attempts.iter().filter(|a| a.id == id).count()
        );
        // The last holder's token is the claim, unless its lease has lapsed since.
        let last = holders.last().unwrap();
        let current = raw.cmd(&[b"GET", claim.as_bytes()]);
        let surely_held = start.elapsed() + TOLERANCE < last.sent + LEASE;
        if surely_held || current != nil(false) {
            assert_bytes_eq!(&current, &bulk(last.token.as_bytes()), "{what}");
        }
    }
}

#[test]
fn short_leases_never_have_two_holders_at_once() {
    for threads in THREADS {
        short_lease_race(threads);
    }
}
