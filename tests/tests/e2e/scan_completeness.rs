//! SCAN's guarantee while keys come and go (issue 3): a key present for the whole
//! iteration is returned, whatever other keys are added and removed meanwhile, on every
//! shard and across the shard boundaries the cursor crosses.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use goblin_tests::StopOnDrop;
use goblin_tests::cmd::{self, call, cmd, over_keys};
use goblin_tests::keys::THREAD_COUNTS;
use goblin_tests::reply::scan_reply;
use goblin_tests::rng::{Rng, seed};
use goblin_tests::{Raw, Server, show};

/// Keys present throughout.
const STABLE: usize = 400;
/// Distinct keys the mutator adds and removes.
const CHURN: usize = 600;

fn stable_keys() -> Vec<String> {
    (0..STABLE).map(|i| format!("stable:{i}")).collect()
}

/// A churning key: half of them share a hash slot with a stable key (a `{hash tag}` of
/// the stable key's name), so the slots being scanned change under the cursor too.
fn churn_key(i: usize) -> String {
    if i.is_multiple_of(2) {
        format!("{{stable:{}}}churn{i}", i % STABLE)
    } else {
        format!("churn:{i}")
    }
}

/// A full SCAN iteration with `options`; every call's keys, and the number of calls.
/// With `delete`, the churn keys each call returns are deleted (one DEL across shards)
/// before the next call, as a SCAN-and-delete loop does.
fn scan_all(raw: &mut Raw, options: &[&str], delete: bool) -> (HashSet<Vec<u8>>, usize) {
    let mut found = HashSet::new();
    let calls = cmd::scan_all(raw, options, |raw, keys| {
        if delete {
            let churn: Vec<String> = keys
                .iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .filter(|k| k.contains("churn"))
                .collect();
            if !churn.is_empty() {
                call(raw, &over_keys("DEL", &churn, None));
            }
        }
        found.extend(keys);
    })
    .unwrap_or_else(|e| panic!("SCAN {options:?}: {}", show(&e)));
    (found, calls)
}

/// While a mutator connection keeps adding and removing keys (SET, DEL, MSET and DEL
/// across shards, some in the very slots of the stable keys), full SCAN iterations with
/// small COUNTs, with MATCH and TYPE, and a SCAN-and-delete loop each return every one of
/// 400 keys present throughout, and nothing that was never written.
#[test]
fn scan_returns_every_key_present_throughout_while_others_come_and_go() {
    let options: [(&[&str], bool); 6] = [
        (&["COUNT", "1"], false),
        (&["COUNT", "3"], false),
        (&[], false),
        (&["COUNT", "2", "MATCH", "stable:*"], false),
        (&["TYPE", "string", "COUNT", "5"], false),
        (&["COUNT", "4"], true),
    ];
    let mut rng = Rng::new(seed(
        "scan_returns_every_key_present_throughout_while_others_come_and_go",
    ));
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let stable = stable_keys();
        let mut scanner = server.raw();
        assert_eq!(
            call(&mut scanner, &over_keys("MSET", &stable, Some("s"))),
            b"+OK\r\n"
        );
        let stop = AtomicBool::new(false);
        let ops = AtomicUsize::new(0);
        let mutator_seed = rng.next_u64();
        thread::scope(|s| {
            let _stop_on_panic = StopOnDrop(&stop);
            let mutator = {
                let mut raw = server.raw();
                let (stop, ops) = (&stop, &ops);
                s.spawn(move || {
                    let mut rng = Rng::new(mutator_seed);
                    while !stop.load(Ordering::SeqCst) {
                        let some = |rng: &mut Rng, n: usize| -> Vec<String> {
                            (0..n).map(|_| churn_key(rng.below(CHURN))).collect()
                        };
                        let c = match rng.below(4) {
                            0 => cmd(&["SET", &churn_key(rng.below(CHURN)), "c"]),
                            1 => cmd(&["DEL", &churn_key(rng.below(CHURN))]),
                            2 => over_keys("MSET", &some(&mut rng, 8), Some("c")),
                            _ => over_keys("DEL", &some(&mut rng, 8), None),
                        };
                        let reply = call(&mut raw, &c);
                        assert!(reply[0] != b'-', "{}", show(&reply));
                        ops.fetch_add(1, Ordering::SeqCst);
                    }
                })
            };
            for (opts, delete) in options {
                let what = format!("--threads {threads}, SCAN {opts:?}, delete: {delete}");
                let before = ops.load(Ordering::SeqCst);
                let (found, calls) = scan_all(&mut scanner, opts, delete);
                let during = ops.load(Ordering::SeqCst) - before;
                eprintln!("{what}: {calls} calls, {during} changes meanwhile");
                let missing: Vec<&String> = stable
                    .iter()
                    .filter(|k| !found.contains(k.as_bytes()))
                    .collect();
                assert!(
                    missing.is_empty(),
                    "{what}: keys present throughout were not returned: {missing:?}"
                );
                for k in &found {
                    let k = String::from_utf8_lossy(k);
                    assert!(
                        k.starts_with("stable:") || k.contains("churn"),
                        "{what}: returned {k}, never written"
                    );
                    if opts.contains(&"MATCH") {
                        assert!(k.starts_with("stable:"), "{what}: {k} does not match");
                    }
                }
                assert!(during > 0, "{what}: nothing changed during the iteration");
            }
            stop.store(true, Ordering::SeqCst);
            mutator.join().unwrap();
        });
    }
}

/// How SCAN keeps its guarantee: the cursor is a hash slot and each call returns whole
/// slots. Six keys sharing one slot (a hash tag) come back in the same call even with
/// COUNT 1, and no call returns a key twice in one iteration over a still keyspace.
#[test]
fn scan_returns_whole_slots() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let mut raw = server.raw();
        let tagged: Vec<String> = (0..6).map(|i| format!("{{same}}k{i}")).collect();
        let others: Vec<String> = (0..200).map(|i| format!("other:{i}")).collect();
        let all: Vec<String> = tagged.iter().chain(&others).cloned().collect();
        assert_eq!(
            call(&mut raw, &over_keys("MSET", &all, Some("v"))),
            b"+OK\r\n"
        );
        let mut cursor = 0u64;
        let mut seen = HashSet::new();
        let mut tagged_calls = 0;
        loop {
            let (next, keys) = scan_reply(&call(
                &mut raw,
                &cmd(&["SCAN", &cursor.to_string(), "COUNT", "1"]),
            ));
            let here = keys.iter().filter(|k| k.starts_with(b"{same}")).count();
            if here > 0 {
                assert_eq!(
                    here,
                    tagged.len(),
                    "--threads {threads}: a slot came back split"
                );
                tagged_calls += 1;
            }
            for k in keys {
                assert!(seen.insert(k.clone()), "--threads {threads}: {k:?} twice");
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert_eq!(tagged_calls, 1, "--threads {threads}");
        assert_eq!(seen.len(), all.len(), "--threads {threads}");
    }
}
