//! Atomicity of multi-shard commands and MULTI/EXEC to concurrent observers (issue 3):
//! writers change a set of keys spread over every shard at once, readers on other
//! connections (so other threads) must always see all of a change or none of it.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use goblin_tests::StopOnDrop;
use goblin_tests::assert_bytes_eq;
use goblin_tests::cmd::{Cmd, call, cmd, over_keys, pipeline};
use goblin_tests::keys::{THREAD_COUNTS, spread};
use goblin_tests::reply::{array, bulks, int, integer, ok, simple};
use goblin_tests::{Raw, Server, show};

/// How long the writers run for each thread count, at least.
const RUN: Duration = Duration::from_millis(700);
/// Reads each reader must have made before the writers stop, so that a loaded machine
/// cannot make a run vacuous…
const MIN_READS: usize = 30;
/// …unless the run takes this long.
const GIVE_UP: Duration = Duration::from_secs(20);

/// Paces a run: writers go on while [`Pace::going`].
struct Pace {
    start: Instant,
    reads: AtomicUsize,
    readers: usize,
}

impl Pace {
    fn new(readers: usize) -> Pace {
        Pace {
            start: Instant::now(),
            reads: AtomicUsize::new(0),
            readers,
        }
    }

    /// A reader made a read.
    fn read(&self) {
        self.reads.fetch_add(1, Ordering::SeqCst);
    }

    /// True for at least [`RUN`] and until the readers made [`MIN_READS`] each.
    fn going(&self) -> bool {
        let elapsed = self.start.elapsed();
        elapsed < GIVE_UP
            && (elapsed < RUN || self.reads.load(Ordering::SeqCst) < MIN_READS * self.readers)
    }
}

/// Keys per atomic change: two per shard with 4 threads.
const KEYS: usize = 8;

/// The values of an MGET (or of an EXEC of GETs), asserting they are all equal and set;
/// returns that value.
fn all_equal(reply: &[u8], what: &str) -> Vec<u8> {
    let values = bulks(reply);
    let first = values[0].clone();
    assert!(
        first.is_some() && values.iter().all(|v| *v == first),
        "{what}: saw a partial change: {}",
        show(reply)
    );
    first.unwrap_or_default()
}

/// `MULTI`, the commands, `EXEC` in one write; asserts the `+OK`/`+QUEUED` replies and
/// returns EXEC's.
fn multi_exec(raw: &mut Raw, cmds: &[Cmd], what: &str) -> Vec<u8> {
    let mut block = vec![cmd(&["MULTI"])];
    block.extend_from_slice(cmds);
    block.push(cmd(&["EXEC"]));
    let mut replies = pipeline(raw, &block);
    let exec = replies.pop().unwrap_or_default();
    assert_eq!(replies[0], ok(), "{what}: MULTI");
    for r in &replies[1..] {
        assert_bytes_eq!(r, &simple("QUEUED"), "{what}");
    }
    exec
}

/// A writer MSETs the same value (its round number) to 8 keys spread over every shard,
/// round after round; two readers MGET those keys (in two orders) as fast as they can.
/// Every MGET must see 8 equal values, and a reader never sees a round older than one it
/// has already seen.
#[test]
fn mset_across_shards_is_atomic_to_concurrent_mget() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let keys = spread("m", threads, KEYS / threads);
        let what = format!("--threads {threads}");
        let mut writer = server.raw();
        assert_eq!(
            call(&mut writer, &over_keys("MSET", &keys, Some("0"))),
            ok()
        );
        let stop = AtomicBool::new(false);
        let pace = Pace::new(2);
        thread::scope(|s| {
            let _stop_on_panic = StopOnDrop(&stop);
            let readers: Vec<_> = (0..2)
                .map(|r| {
                    let mut raw = server.raw();
                    let mut keys = keys.clone();
                    if r == 1 {
                        keys.reverse();
                    }
                    let mget = over_keys("MGET", &keys, None);
                    let (stop, what, pace) = (&stop, &what, &pace);
                    s.spawn(move || {
                        let (mut last, mut reads, mut rounds_seen) = (0u64, 0usize, 0usize);
                        loop {
                            let stopping = stop.load(Ordering::SeqCst);
                            let v = all_equal(&call(&mut raw, &mget), what);
                            let round: u64 = String::from_utf8_lossy(&v).parse().unwrap();
                            assert!(round >= last, "{what}: saw round {round} after {last}");
                            rounds_seen += usize::from(round > last);
                            last = round;
                            reads += 1;
                            pace.read();
                            if stopping {
                                return (reads, rounds_seen);
                            }
                        }
                    })
                })
                .collect();
            let mut round = 0u64;
            while pace.going() {
                round += 1;
                let mset = over_keys("MSET", &keys, Some(&round.to_string()));
                assert_eq!(call(&mut writer, &mset), ok(), "{what}");
            }
            stop.store(true, Ordering::SeqCst);
            for r in readers {
                let (reads, rounds_seen) = r.join().unwrap();
                eprintln!("{what}: {round} rounds written, a reader saw {rounds_seen} in {reads}");
                assert!(
                    rounds_seen >= 2,
                    "{what}: a reader saw no concurrent writes"
                );
            }
        });
    }
}

/// Two writers change the same 8 keys: one with a MULTI/EXEC block that deletes every
/// key and sets it again (16 commands across the shards), the other with MSET. Readers
/// use MGET and a MULTI/EXEC of GETs. Every read sees 8 equal values: never a key of the
/// block deleted and not yet set again, never a mix of the two writers.
#[test]
fn multi_exec_is_atomic_to_concurrent_readers() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let keys = spread("t", threads, KEYS / threads);
        let what = format!("--threads {threads}");
        let mut setup = server.raw();
        assert_eq!(
            call(&mut setup, &over_keys("MSET", &keys, Some("init"))),
            ok()
        );
        let stop = AtomicBool::new(false);
        let pace = Pace::new(2);
        thread::scope(|s| {
            let _stop_on_panic = StopOnDrop(&stop);
            let readers: Vec<_> = (0..2)
                .map(|r| {
                    let mut raw = server.raw();
                    let (keys, stop, what, pace) = (&keys, &stop, &what, &pace);
                    s.spawn(move || {
                        let gets: Vec<Cmd> = keys.iter().map(|k| cmd(&["GET", k])).collect();
                        let mget = over_keys("MGET", keys, None);
                        let mut seen = std::collections::HashSet::new();
                        loop {
                            let stopping = stop.load(Ordering::SeqCst);
                            let reply = if r == 0 {
                                call(&mut raw, &mget)
                            } else {
                                multi_exec(&mut raw, &gets, what)
                            };
                            seen.insert(all_equal(&reply, what));
                            pace.read();
                            if stopping {
                                return seen.len();
                            }
                        }
                    })
                })
                .collect();
            let block_writer = {
                let mut raw = server.raw();
                let (keys, stop, what) = (&keys, &stop, &what);
                s.spawn(move || {
                    let mut round = 0;
                    while !stop.load(Ordering::SeqCst) {
                        round += 1;
                        let v = format!("x{round}");
                        let mut block: Vec<Cmd> = keys.iter().map(|k| cmd(&["DEL", k])).collect();
                        block.extend(keys.iter().map(|k| cmd(&["SET", k, &v])));
                        let mut want = vec![int(1); keys.len()];
                        want.extend(vec![ok(); keys.len()]);
                        assert_bytes_eq!(
                            &multi_exec(&mut raw, &block, what),
                            &array(&want),
                            "{what}: the block's replies"
                        );
                    }
                    round
                })
            };
            let mut writer = server.raw();
            let mut round = 0;
            while pace.going() {
                round += 1;
                let mset = over_keys("MSET", &keys, Some(&format!("y{round}")));
                assert_eq!(call(&mut writer, &mset), ok(), "{what}");
            }
            stop.store(true, Ordering::SeqCst);
            let blocks = block_writer.join().unwrap();
            for r in readers {
                let distinct = r.join().unwrap();
                eprintln!("{what}: {round} MSETs, {blocks} blocks; a reader saw {distinct} states");
                assert!(distinct >= 2, "{what}: a reader saw no concurrent writes");
            }
        });
    }
}

/// Rounds of four concurrent MSETNX on overlapping key sets (a ring: each set shares
/// two keys with each neighbour) over 12 fresh keys spread over the shards. In every
/// round the winners are exactly one of the two pairs of non-neighbours, each winner's
/// keys all hold its value, no loser's value is anywhere; a concurrent reader's MGET of
/// all 12 keys always sees each value on all of its writer's 5 keys or on none.
#[test]
fn msetnx_is_all_or_nothing_under_contention() {
    const CONTENDERS: usize = 4;
    const SET: usize = 5;
    const UNIVERSE: usize = 12;
    const ROUNDS: usize = 60;
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let universe = spread("n", threads, UNIVERSE / threads);
        let sets: Vec<Vec<String>> = (0..CONTENDERS)
            .map(|c| {
                (0..SET)
                    .map(|j| universe[(3 * c + j) % UNIVERSE].clone())
                    .collect()
            })
            .collect();
        let what = format!("--threads {threads}");
        let barrier = Barrier::new(CONTENDERS + 1);
        let results: Mutex<Vec<Result<Vec<u8>, String>>> =
            Mutex::new(vec![Ok(Vec::new()); CONTENDERS]);
        let stop = AtomicBool::new(false);
        let abort = AtomicBool::new(false);
        let mut control = server.raw();
        // The state after a round, given what each MSETNX answered.
        let check_round = |round: usize, control: &mut Raw| {
            let won: Vec<bool> = results
                .lock()
                .unwrap()
                .iter()
                .map(|r| match r {
                    Ok(reply) if *reply == int(1) => true,
                    Ok(reply) if *reply == int(0) => false,
                    other => panic!("{what}, round {round}: MSETNX answered {other:?}"),
                })
                .collect();
            let values = bulks(&call(control, &over_keys("MGET", &universe, None)));
            let value_of = |k: &String| {
                let i = universe.iter().position(|u| u == k).unwrap();
                values[i].clone()
            };
            let winners: Vec<usize> = (0..CONTENDERS).filter(|&c| won[c]).collect();
            assert!(
                winners == [0, 2] || winners == [1, 3],
                "{what}, round {round}: winners {winners:?} are not a maximal set of \
                 non-overlapping MSETNX"
            );
            for (c, set) in sets.iter().enumerate() {
                let mine = format!("c{c}r{round}").into_bytes();
                let held = set
                    .iter()
                    .filter(|k| value_of(k).as_ref() == Some(&mine))
                    .count();
                let want = if won[c] { SET } else { 0 };
                assert_eq!(held, want, "{what}, round {round}: contender {c} {won:?}");
            }
            for (k, v) in universe.iter().zip(&values) {
                let owner = winners.iter().find(|&&c| sets[c].contains(k));
                let want = owner.map(|c| format!("c{c}r{round}").into_bytes());
                assert_eq!(v, &want, "{what}, round {round}: key {k}");
            }
        };
        thread::scope(|s| {
            let _stop_on_panic = StopOnDrop(&stop);
            let reader = {
                let mut raw = server.raw();
                let (universe, stop, what) = (&universe, &stop, &what);
                s.spawn(move || {
                    let mget = over_keys("MGET", universe, None);
                    let mut reads = 0;
                    loop {
                        let stopping = stop.load(Ordering::SeqCst);
                        let reply = call(&mut raw, &mget);
                        let values = bulks(&reply);
                        for v in values.iter().flatten() {
                            let n = values.iter().filter(|w| w.as_ref() == Some(v)).count();
                            assert_eq!(n, SET, "{what}: a partial MSETNX: {}", show(&reply));
                        }
                        reads += 1;
                        if stopping {
                            return reads;
                        }
                    }
                })
            };
            let contenders: Vec<_> = (0..CONTENDERS)
                .map(|c| {
                    let mut raw = server.raw();
                    let (barrier, results, abort) = (&barrier, &results, &abort);
                    let set = &sets[c];
                    s.spawn(move || {
                        // Never panics between the barriers (the others would wait
                        // forever): a failure is reported to the controller.
                        for round in 0..ROUNDS {
                            let msetnx = over_keys("MSETNX", set, Some(&format!("c{c}r{round}")));
                            let args: Vec<&[u8]> = msetnx.iter().map(Vec::as_slice).collect();
                            barrier.wait();
                            if !abort.load(Ordering::SeqCst) {
                                raw.send(&goblin_tests::encode(&args));
                                let reply = raw.try_reply().map_err(|e| format!("no reply: {e}"));
                                results.lock().unwrap()[c] = reply;
                            }
                            barrier.wait();
                        }
                    })
                })
                .collect();
            // Nor does the controller: a failed check ends the contest, and is raised
            // again once everyone has left.
            let mut failure = None;
            for round in 0..ROUNDS {
                if failure.is_none() {
                    let del = over_keys("DEL", &universe, None);
                    failure = catch_unwind(AssertUnwindSafe(|| call(&mut control, &del))).err();
                }
                abort.store(failure.is_some(), Ordering::SeqCst);
                barrier.wait();
                barrier.wait();
                if failure.is_none() {
                    failure =
                        catch_unwind(AssertUnwindSafe(|| check_round(round, &mut control))).err();
                }
            }
            for c in contenders {
                c.join().unwrap();
            }
            stop.store(true, Ordering::SeqCst);
            let reads = reader.join().unwrap();
            if let Some(panic) = failure {
                resume_unwind(panic);
            }
            eprintln!("{what}: {ROUNDS} rounds, {reads} concurrent reads");
        });
    }
}

/// One value moves around a ring of three keys on different shards by RENAME and
/// RENAMENX, pushed forward by one connection and backward by another; each renames the
/// key it last saw holding the value, so they race for the same source and the loser
/// gets `ERR no such key`. Readers' MGET and EXISTS of the three keys always find exactly
/// one of them, holding the value; its TTL travels with it.
#[test]
fn rename_across_shards_is_atomic_to_concurrent_readers() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let ring: Vec<String> = spread("r", threads, 3).into_iter().take(3).collect();
        let what = format!("--threads {threads}");
        let mut setup = server.raw();
        assert_eq!(
            call(
                &mut setup,
                &cmd(&["SET", &ring[0], "the-value", "EX", "1000"])
            ),
            ok()
        );
        let stop = AtomicBool::new(false);
        let pace = Pace::new(2);
        thread::scope(|s| {
            let _stop_on_panic = StopOnDrop(&stop);
            let readers: Vec<_> = (0..2)
                .map(|r| {
                    let mut raw = server.raw();
                    let (ring, stop, what, pace) = (&ring, &stop, &what, &pace);
                    s.spawn(move || {
                        let mget = over_keys("MGET", ring, None);
                        let exists = over_keys("EXISTS", ring, None);
                        let mut reads = 0;
                        loop {
                            let stopping = stop.load(Ordering::SeqCst);
                            if (reads + r) % 2 == 0 {
                                let reply = call(&mut raw, &mget);
                                let found: Vec<_> = bulks(&reply).into_iter().flatten().collect();
                                assert_eq!(
                                    found,
                                    [b"the-value".to_vec()],
                                    "{what}: MGET {}",
                                    show(&reply)
                                );
                            } else {
                                assert_eq!(call(&mut raw, &exists), int(1), "{what}: EXISTS");
                            }
                            reads += 1;
                            pace.read();
                            if stopping {
                                return reads;
                            }
                        }
                    })
                })
                .collect();
            let backward = {
                let mut raw = server.raw();
                let (ring, stop, what) = (&ring, &stop, &what);
                s.spawn(move || {
                    let mut moved = 0;
                    let mut i = 0;
                    while !stop.load(Ordering::SeqCst) {
                        // Where the value is now; the forward renamer may move it first.
                        let values = bulks(&call(&mut raw, &over_keys("MGET", ring, None)));
                        let at = values.iter().position(Option::is_some).unwrap();
                        let (src, dst) = (&ring[at], &ring[(at + 2) % 3]);
                        let nx = i % 2 == 0;
                        let reply = call(
                            &mut raw,
                            &cmd(&[if nx { "RENAMENX" } else { "RENAME" }, src, dst]),
                        );
                        let success = if nx { int(1) } else { ok() };
                        if reply == success {
                            moved += 1;
                        } else {
                            assert_bytes_eq!(reply, b"-ERR no such key\r\n", "{what}");
                        }
                        i += 1;
                    }
                    (moved, i)
                })
            };
            let mut forward = server.raw();
            let mut at = 0;
            let mut moved = 0;
            while pace.going() {
                let next = (at + 1) % 3;
                let nx = moved % 2 == 0;
                let reply = call(
                    &mut forward,
                    &cmd(&[
                        if nx { "RENAMENX" } else { "RENAME" },
                        &ring[at],
                        &ring[next],
                    ]),
                );
                if reply == (if nx { int(1) } else { ok() }) {
                    at = next;
                    moved += 1;
                } else {
                    // The other renamer moved it: find where it is now.
                    assert_bytes_eq!(reply, b"-ERR no such key\r\n", "{what}");
                    let values = bulks(&call(&mut forward, &over_keys("MGET", &ring, None)));
                    at = values.iter().position(Option::is_some).unwrap();
                }
            }
            stop.store(true, Ordering::SeqCst);
            let (back, back_tries) = backward.join().unwrap();
            for r in readers {
                let reads = r.join().unwrap();
                eprintln!(
                    "{what}: {moved} renames forward, {back} back (of {back_tries}), {reads} reads"
                );
                assert!(reads > 10, "{what}: the reader barely ran");
            }
            assert!(moved > 10, "{what}: the value barely moved");
            let values = bulks(&call(&mut forward, &over_keys("MGET", &ring, None)));
            let holder = &ring[values.iter().position(Option::is_some).unwrap()];
            let ttl: i64 =
                String::from_utf8_lossy(&call(&mut forward, &cmd(&["TTL", holder]))[1..])
                    .trim()
                    .parse()
                    .unwrap();
            assert!(
                (990..=1000).contains(&ttl),
                "{what}: TTL {ttl} after the renames"
            );
        });
    }
}

/// Keyspace-wide readers are observers too: while a writer alternately MSETs 8 new keys
/// spread over every shard and DELs them (each atomic), DBSIZE counts 0 or 8 of them and
/// KEYS * lists none or all of them.
#[test]
fn dbsize_and_keys_see_a_multi_shard_mset_whole_or_not_at_all() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let keys = spread("w", threads, KEYS / threads);
        let what = format!("--threads {threads}");
        let stop = AtomicBool::new(false);
        let pace = Pace::new(2);
        thread::scope(|s| {
            let _stop_on_panic = StopOnDrop(&stop);
            let readers: Vec<_> = (0..2)
                .map(|r| {
                    let mut raw = server.raw();
                    let (stop, pace) = (&stop, &pace);
                    s.spawn(move || {
                        let mut partial = Vec::new();
                        let mut reads = 0;
                        loop {
                            let stopping = stop.load(Ordering::SeqCst);
                            let n = if r == 0 {
                                integer(&call(&mut raw, &cmd(&["DBSIZE"])))
                            } else {
                                bulks(&call(&mut raw, &cmd(&["KEYS", "*"]))).len() as i64
                            };
                            if n != 0 && n != KEYS as i64 {
                                partial.push(n);
                            }
                            reads += 1;
                            pace.read();
                            if stopping {
                                return (reads, partial);
                            }
                        }
                    })
                })
                .collect();
            let mut writer = server.raw();
            let (mset, del) = (
                over_keys("MSET", &keys, Some("v")),
                over_keys("DEL", &keys, None),
            );
            let mut rounds = 0;
            while pace.going() {
                assert_eq!(call(&mut writer, &mset), ok(), "{what}");
                assert_eq!(call(&mut writer, &del), int(KEYS as i64), "{what}");
                rounds += 1;
            }
            stop.store(true, Ordering::SeqCst);
            let seen: Vec<String> = readers
                .into_iter()
                .zip(["DBSIZE", "KEYS *"])
                .map(|(reader, name)| {
                    let (reads, partial) = reader.join().unwrap();
                    format!(
                        "{name} saw {} partial states in {reads} reads, e.g. {:?}",
                        partial.len(),
                        &partial[..partial.len().min(5)]
                    )
                })
                .collect();
            assert!(
                seen.iter().all(|s| s.contains(" saw 0 partial")),
                "{what}, {rounds} MSET/DEL rounds: {seen:?}"
            );
        });
    }
}

/// FLUSHALL is one event to observers: while 8 keys spread over every shard are MSET
/// and FLUSHALLed again and again, a concurrent MGET of them sees all or none.
#[test]
fn flushall_is_atomic_to_concurrent_mget() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let keys = spread("f", threads, KEYS / threads);
        let what = format!("--threads {threads}");
        let stop = AtomicBool::new(false);
        let pace = Pace::new(1);
        thread::scope(|s| {
            let _stop_on_panic = StopOnDrop(&stop);
            let reader = {
                let mut raw = server.raw();
                let (keys, stop, pace) = (&keys, &stop, &pace);
                s.spawn(move || {
                    let mget = over_keys("MGET", keys, None);
                    let (mut reads, mut partial) = (0, Vec::new());
                    loop {
                        let stopping = stop.load(Ordering::SeqCst);
                        let reply = call(&mut raw, &mget);
                        let set = bulks(&reply).iter().filter(|v| v.is_some()).count();
                        if set != 0 && set != KEYS {
                            partial.push(set);
                        }
                        reads += 1;
                        pace.read();
                        if stopping {
                            return (reads, partial);
                        }
                    }
                })
            };
            let mut writer = server.raw();
            let mset = over_keys("MSET", &keys, Some("v"));
            let mut rounds = 0;
            while pace.going() {
                assert_eq!(call(&mut writer, &mset), ok(), "{what}");
                assert_eq!(call(&mut writer, &cmd(&["FLUSHALL"])), ok(), "{what}");
                rounds += 1;
            }
            stop.store(true, Ordering::SeqCst);
            let (reads, partial) = reader.join().unwrap();
            assert!(
                partial.is_empty(),
                "{what}: MGET saw {} partially flushed states of {reads} (of {rounds} \
                 MSET/FLUSHALL rounds), e.g. {:?} of {KEYS} keys set",
                partial.len(),
                &partial[..partial.len().min(10)]
            );
        });
    }
}
