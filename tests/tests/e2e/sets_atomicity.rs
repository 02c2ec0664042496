//! Atomicity of the cross-shard set commands to concurrent observers (issue 10): a STORE
//! whose sources and destination live on different shards is never seen half done, and
//! SMOVEs between two shards, both ways at once, never lose or duplicate a member.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use goblin_tests::cmd::{Cmd, call, cmd, pipeline};
use goblin_tests::keys::{THREAD_COUNTS, keys_on};
use goblin_tests::reply::{bulks, elements, integer, ok, simple};
use goblin_tests::rng::Rng;
use goblin_tests::{Raw, Server, StopOnDrop, show};

/// How long the writers run for each thread count, at least…
const RUN: Duration = Duration::from_millis(700);
/// …and until each reader made this many reads…
const MIN_READS: usize = 30;
/// …unless the run takes this long.
const GIVE_UP: Duration = Duration::from_secs(20);
/// Members each source set gets per round.
const PER_SOURCE: usize = 6;

/// `n` keys on different shards (shard `i % threads`), each `{name}…`.
fn keys_across(name: &str, threads: usize, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| keys_on(&format!("{name}{i}."), i % threads, threads, 1).remove(0))
        .collect()
}

/// `MULTI`, the commands, `EXEC` in one write; returns EXEC's elements.
fn multi_exec(raw: &mut Raw, cmds: &[Cmd]) -> Vec<Vec<u8>> {
    let mut block = vec![cmd(&["MULTI"])];
    block.extend_from_slice(cmds);
    block.push(cmd(&["EXEC"]));
    let mut replies = pipeline(raw, &block);
    let exec = replies.pop().unwrap_or_default();
    assert_eq!(replies[0], ok());
    for r in &replies[1..] {
        assert_eq!(show(r), show(&simple("QUEUED")));
    }
    elements(&exec)
}

/// The members of an SMEMBERS (or SUNION) reply.
fn members_of(reply: &[u8]) -> BTreeSet<Vec<u8>> {
    bulks(reply).into_iter().flatten().collect()
}

/// The round a member was written in (members are `r<round>:<tag>`).
fn round_of(m: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(m);
    text.strip_prefix('r')
        .and_then(|t| t.split(':').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("not a round's member: {text}"))
}

/// The single round all of `set`'s members belong to (`None` for an empty set);
/// panics when they mix rounds.
fn one_round(set: &BTreeSet<Vec<u8>>, what: &str) -> Option<u64> {
    let rounds: BTreeSet<u64> = set.iter().map(|m| round_of(m)).collect();
    assert!(
        rounds.len() <= 1,
        "{what}: members of rounds {rounds:?} mixed"
    );
    rounds.into_iter().next()
}

/// Round `r`'s sources: `PER_SOURCE` members each, the first half shared by every source
/// (so that an intersection is not empty), the rest each source's own.
fn round_members(r: u64, source: usize) -> Vec<String> {
    (0..PER_SOURCE)
        .map(|i| {
            if i < PER_SOURCE / 2 {
                format!("r{r}:common{i}")
            } else {
                format!("r{r}:s{source}:{i}")
            }
        })
        .collect()
}

/// A writer replaces three source sets on three shards with a new round's members (one
/// MULTI/EXEC), then stores their union (or intersection, or difference) into a
/// destination on a fourth shard, round after round. Readers read the destination alone
/// (SMEMBERS) and with the sources (one MULTI/EXEC): the destination is always one whole
/// round's result — never members of two rounds, never a partial result — and at most one
/// round behind the sources.
#[test]
fn stores_across_shards_are_never_seen_half_done() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let keys = keys_across("st", threads, 4);
        let (sources, dst) = (&keys[..3], keys[3].clone());
        let what = format!("--threads {threads}");
        let stop = AtomicBool::new(false);
        let reads = AtomicUsize::new(0);
        let start = Instant::now();
        thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            let readers: Vec<_> = (0..2)
                .map(|reader| {
                    let mut raw = server.raw();
                    let (stop, reads, what, dst) = (&stop, &reads, &what, dst.clone());
                    let sources = sources.to_vec();
                    s.spawn(move || {
                        let mut seen = 0usize;
                        loop {
                            let stopping = stop.load(Ordering::SeqCst);
                            if reader == 0 {
                                let d = members_of(&call(&mut raw, &cmd(&["SMEMBERS", &dst])));
                                check_result(&d, what);
                            } else {
                                let mut block: Vec<Cmd> = sources
                                    .iter()
                                    .map(|k| cmd(&["SMEMBERS", k]))
                                    .collect();
                                block.push(cmd(&["SMEMBERS", &dst]));
                                let replies = multi_exec(&mut raw, &block);
                                let sets: Vec<BTreeSet<Vec<u8>>> =
                                    replies.iter().map(|r| members_of(r)).collect();
                                let src_round = one_round(
                                    &sets[..3].iter().flatten().cloned().collect(),
                                    &format!("{what}: the sources"),
                                );
                                if let (Some(src), Some(d)) = (src_round, check_result(&sets[3], what)) {
                                    assert!(
                                        d == src || d + 1 == src,
                                        "{what}: destination of round {d} beside sources of round {src}"
                                    );
                                }
                            }
                            seen += 1;
                            reads.fetch_add(1, Ordering::SeqCst);
                            if stopping {
                                return seen;
                            }
                        }
                    })
                })
                .collect();
            let mut writer = server.raw();
            let mut round = 0u64;
            while start.elapsed() < GIVE_UP
                && (start.elapsed() < RUN || reads.load(Ordering::SeqCst) < 2 * MIN_READS)
            {
                round += 1;
                let mut block: Vec<Cmd> = Vec::new();
                for (i, k) in sources.iter().enumerate() {
                    block.push(cmd(&["DEL", k]));
                    let mut sadd = cmd(&["SADD", k]);
                    sadd.extend(round_members(round, i).into_iter().map(String::into_bytes));
                    block.push(sadd);
                }
                multi_exec(&mut writer, &block);
                let store = ["SUNIONSTORE", "SINTERSTORE", "SDIFFSTORE"][(round % 3) as usize];
                let mut c = cmd(&[store, &dst]);
                c.extend(sources.iter().map(|k| k.as_bytes().to_vec()));
                let n = integer(&call(&mut writer, &c));
                let want = match store {
                    "SUNIONSTORE" => PER_SOURCE / 2 + 3 * (PER_SOURCE - PER_SOURCE / 2),
                    "SINTERSTORE" => PER_SOURCE / 2,
                    _ => PER_SOURCE - PER_SOURCE / 2,
                };
                assert_eq!(n, want as i64, "{what}: {store} of round {round}");
            }
            stop.store(true, Ordering::SeqCst);
            for r in readers {
                let seen = r.join().unwrap();
                assert!(seen > 0, "{what}: a reader read nothing");
            }
        });
    }
}

/// A destination's members: one round's whole union, intersection or difference (by their
/// count and tags); returns the round.
fn check_result(d: &BTreeSet<Vec<u8>>, what: &str) -> Option<u64> {
    let round = one_round(d, &format!("{what}: the destination"))?;
    let common = d
        .iter()
        .filter(|m| String::from_utf8_lossy(m).contains(":common"))
        .count();
    let own = d.len() - common;
    let half = PER_SOURCE / 2;
    let whole = (common == half && (own == 3 * (PER_SOURCE - half) || own == 0))
        || (common == 0 && own == PER_SOURCE - half);
    assert!(
        whole,
        "{what}: a partial result of round {round}: {common} common and {own} own members"
    );
    Some(round)
}

/// Members SMOVEd between two sets on different shards, both ways at once by two
/// connections each, for a while: every reader sees every member in exactly one of the
/// two sets (one MULTI/EXEC of both SMEMBERS, and SUNION/SINTER of the pair), and at the
/// end the moves that answered 1 add up to where the members are.
#[test]
fn smove_across_shards_never_loses_or_duplicates_a_member() {
    const MEMBERS: usize = 40;
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let keys = keys_across("mv", threads, 2);
        let (a, b) = (keys[0].clone(), keys[1].clone());
        let what = format!("--threads {threads}");
        let all: BTreeSet<Vec<u8>> = (0..MEMBERS).map(|i| format!("m{i}").into_bytes()).collect();
        let mut setup = server.raw();
        let mut sadd = cmd(&["SADD", &a]);
        sadd.extend(all.iter().cloned());
        assert_eq!(integer(&call(&mut setup, &sadd)), MEMBERS as i64);
        let stop = AtomicBool::new(false);
        let reads = AtomicUsize::new(0);
        let start = Instant::now();
        let (moved_to_b, moved_to_a) = thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            let movers: Vec<_> = (0..4)
                .map(|m| {
                    let mut raw = server.raw();
                    let (from, to) = if m % 2 == 0 { (&a, &b) } else { (&b, &a) };
                    let (from, to) = (from.clone(), to.clone());
                    let (stop, reads) = (&stop, &reads);
                    s.spawn(move || {
                        let mut rng = Rng::new(m as u64 + 1);
                        let mut moved = 0i64;
                        while start.elapsed() < GIVE_UP
                            && (start.elapsed() < RUN
                                || reads.load(Ordering::SeqCst) < 2 * MIN_READS)
                            && !stop.load(Ordering::SeqCst)
                        {
                            let member = format!("m{}", rng.below(MEMBERS));
                            moved +=
                                integer(&call(&mut raw, &cmd(&["SMOVE", &from, &to, &member])));
                        }
                        (m % 2, moved)
                    })
                })
                .collect();
            let readers: Vec<_> = (0..2)
                .map(|reader| {
                    let mut raw = server.raw();
                    let (a, b, all, what, stop, reads) =
                        (a.clone(), b.clone(), &all, &what, &stop, &reads);
                    s.spawn(move || {
                        while !stop.load(Ordering::SeqCst) {
                            if reader == 0 {
                                let replies = multi_exec(
                                    &mut raw,
                                    &[cmd(&["SMEMBERS", &a]), cmd(&["SMEMBERS", &b])],
                                );
                                let (in_a, in_b) =
                                    (members_of(&replies[0]), members_of(&replies[1]));
                                assert!(in_a.is_disjoint(&in_b), "{what}: a member in both sets");
                                let union: BTreeSet<Vec<u8>> = in_a.union(&in_b).cloned().collect();
                                assert_eq!(&union, all, "{what}: members lost");
                            } else {
                                let union = members_of(&call(&mut raw, &cmd(&["SUNION", &a, &b])));
                                assert_eq!(&union, all, "{what}: SUNION lost members");
                                let both = call(&mut raw, &cmd(&["SINTERCARD", "2", &a, &b]));
                                assert_eq!(integer(&both), 0, "{what}: a member in both sets");
                            }
                            reads.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            let mut totals = (0i64, 0i64);
            for m in movers {
                let (dir, moved) = m.join().unwrap();
                if dir == 0 {
                    totals.0 += moved;
                } else {
                    totals.1 += moved;
                }
            }
            stop.store(true, Ordering::SeqCst);
            for r in readers {
                r.join().unwrap();
            }
            totals
        });
        let mut raw = server.raw();
        let in_b = integer(&call(&mut raw, &cmd(&["SCARD", &b])));
        let in_a = integer(&call(&mut raw, &cmd(&["SCARD", &a])));
        assert_eq!(in_a + in_b, MEMBERS as i64, "{what}");
        assert_eq!(
            in_b,
            moved_to_b - moved_to_a,
            "{what}: the moves do not add up"
        );
        assert!(
            moved_to_b > 0 && moved_to_a > 0,
            "{what}: no moves both ways"
        );
    }
}
