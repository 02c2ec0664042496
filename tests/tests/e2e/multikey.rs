//! Multi-key and keyspace-wide commands across shards against redis-server (issue 3):
//! MGET, MSET, MSETNX, DEL, UNLINK, EXISTS, TOUCH, RENAME, RENAMENX byte for byte; KEYS
//! and SCAN as sets (their order is the server's own); RANDOMKEY, DBSIZE, FLUSHALL.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use goblin_tests::cmd::{self, args, call, cmd, over_keys, script_commands};
use goblin_tests::keys::{THREAD_COUNTS, shard_of, spread};
use goblin_tests::reply::{bulks, integer, scan_reply};
use goblin_tests::{Differential, Raw, Server, show};

/// Twelve keys, `K0`…`K11` in the scripts; with 4 threads `Ki` lives on shard `i % 4`.
fn keys() -> Vec<String> {
    spread("q", 4, 3)
}

/// Checks every line of the script (`Ki` standing for key i) against both servers.
fn check_script(d: &mut Differential, text: &str) {
    for c in script_commands(text, &keys()) {
        d.check(&args(&c));
    }
}

/// Runs the script on a fresh pair of servers for every thread count.
fn check_everywhere(text: &str) {
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        check_script(&mut d, text);
    }
}

/// MSET, MGET and MSETNX over keys of every shard: repeated and missing keys, a key set
/// twice in one MSET (the last wins), MSETNX with one existing key (nothing is set),
/// with a repeated new key, and unpaired arguments.
#[test]
fn mget_mset_msetnx_across_shards_match_redis() {
    check_everywhere(
        "
        MSET K0 a K1 b K2 c K3 d
        MGET K0 K1 K2 K3 K4
        MGET K3 K3 K0 K11 K3
        MGET K11
        MSET K0 x K1 y K0 z
        MGET K0 K1
        MSET K0 1 K1
        MSET K0 1 K1 2 K2
        MSET K0
        MSET
        MGET
        MSETNX K4 a K5 b K6 c K7 d
        MGET K4 K5 K6 K7
        MSETNX K8 z K9 w K6 y K10 v
        MGET K8 K9 K6 K10
        MSETNX K8 1 K8 2
        GET K8
        MSETNX K9 1 K10
        MSETNX K9
        DBSIZE
        ",
    );
}

/// DEL, UNLINK, EXISTS and TOUCH over keys of every shard: repeats count for EXISTS and
/// TOUCH and not for DEL, missing keys, arity.
#[test]
fn del_unlink_exists_touch_across_shards_match_redis() {
    check_everywhere(
        "
        MSET K0 a K1 b K2 c K3 d K4 e K5 f K6 g K7 h
        EXISTS K0 K1 K2 K3 K11
        EXISTS K0 K0 K11 K11 K1 K3 K3
        TOUCH K0 K1 K11 K0 K2 K3
        DEL K0 K0 K1 K11 K2
        EXISTS K0 K1 K2 K3
        UNLINK K3 K4 K4 K10 K5
        UNLINK K3
        DEL K11
        EXISTS K6 K7
        DEL K6 K7 K8 K9 K10 K11
        DBSIZE
        DEL
        EXISTS
        UNLINK
        TOUCH
        ",
    );
}

/// RENAME and RENAMENX between shards (and within one): a missing source, a key renamed
/// to itself, overwriting a destination (whose TTL goes), the source's TTL travelling,
/// RENAMENX onto an existing key, an expired source, arity.
#[test]
fn rename_across_shards_matches_redis() {
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        check_script(
            &mut d,
            "
            SET K0 v0
            RENAME K0 K1
            MGET K0 K1
            RENAME K0 K1
            RENAMENX K0 K1
            RENAME K1 K1
            RENAME K5 K5
            RENAMENX K5 K5
            RENAMENX K1 K1
            SET K2 other EX 500
            RENAME K1 K2
            TTL K2
            MGET K1 K2
            SET K3 t EX 100
            RENAME K3 K4
            TTL K4
            TTL K3
            SET K5 x
            RENAMENX K4 K5
            RENAMENX K4 K6
            TTL K6
            MGET K4 K5 K6
            SET K7 px PX 100000
            RENAME K7 K8
            TTL K8
            RENAME K8 K3
            RENAMENX K3 K7
            TTL K7
            RENAME K8
            RENAMENX K8 K9 K10
            SET K9 short PX 30
            DBSIZE
            ",
        );
        std::thread::sleep(Duration::from_millis(80));
        check_script(
            &mut d,
            "
            RENAME K9 K10
            RENAMENX K9 K10
            MGET K9 K10
            DBSIZE
            ",
        );
    }
}

/// The keys of an array reply, sorted (KEYS answers in the server's own order).
fn sorted_keys(reply: &[u8]) -> BTreeSet<Vec<u8>> {
    bulks(reply)
        .into_iter()
        .map(|k| k.unwrap_or_else(|| panic!("a null key in {}", show(reply))))
        .collect()
}

/// Keys with names that exercise glob patterns, spread over the slots.
fn pattern_keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..60).map(|i| format!("user:{i}")).collect();
    keys.extend((0..40).map(|i| format!("item:{i}:name")));
    keys.extend((0..10).map(|i| format!("{{tag}}x{i}")));
    keys.extend(
        [
            "hello",
            "hallo",
            "hxllo",
            "hllo",
            "heeello",
            "h*llo",
            "weird*key",
            "a?b",
            "a[b",
            "back\\slash",
            "UPPER",
            "upper",
        ]
        .map(String::from),
    );
    keys
}

/// Fills both servers with the same keys in one MSET.
fn fill(d: &mut Differential, keys: &[String]) {
    let mset = over_keys("MSET", keys, Some("v"));
    d.check(&mset.iter().map(Vec::as_slice).collect::<Vec<_>>());
}

/// KEYS with patterns (`*`, `?`, classes, ranges, negation, escapes, hash tags, no match)
/// returns the same set of keys as redis-server.
#[test]
fn keys_patterns_match_redis_as_sets() {
    let patterns = [
        "*",
        "user:*",
        "user:1?",
        "*:name",
        "item:?:*",
        "h?llo",
        "h*llo",
        "h[ae]llo",
        "h[^e]llo",
        "h[a-e]llo",
        "h\\*llo",
        "*\\**",
        "a\\?b",
        "a[[]b",
        "back\\\\slash",
        "{tag}*",
        "UPPER",
        "[u]*",
        "nomatch*",
        "",
    ];
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        d.check(&[b"KEYS", b"*"]);
        fill(&mut d, &pattern_keys());
        for p in patterns {
            let args: [&[u8]; 2] = [b"KEYS", p.as_bytes()];
            let want = sorted_keys(&d.r.cmd(&args));
            let got = sorted_keys(&d.g.cmd(&args));
            assert_eq!(got, want, "--threads {threads}: KEYS {p}");
        }
        d.check(&[b"KEYS"]);
        d.check(&[b"KEYS", b"a", b"b"]);
    }
}

/// Every key a full SCAN iteration (cursor 0 to cursor 0) returns.
fn scan_all(raw: &mut Raw, options: &[&str]) -> HashSet<Vec<u8>> {
    let mut found = HashSet::new();
    cmd::scan_all(raw, options, |_, keys| found.extend(keys))
        .unwrap_or_else(|e| panic!("SCAN {options:?}: {}", show(&e)));
    found
}

/// A full SCAN iteration returns the same set of keys as redis-server's, with every
/// COUNT, MATCH and TYPE combination tried; an empty keyspace scans to nothing; errors
/// (invalid cursor, COUNT 0 or negative or not a number, unknown option, missing
/// argument) are byte-identical.
#[test]
fn scan_full_iterations_match_redis_as_sets() {
    let options: [&[&str]; 12] = [
        &[],
        &["COUNT", "1"],
        &["COUNT", "7"],
        &["COUNT", "1000"],
        &["MATCH", "user:*"],
        &["MATCH", "user:*", "COUNT", "3"],
        &["COUNT", "2", "MATCH", "*:name"],
        &["TYPE", "string"],
        &["TYPE", "STRING", "COUNT", "5"],
        &["TYPE", "list"],
        &["TYPE", "nosuchtype"],
        &["MATCH", "*7*", "TYPE", "string", "COUNT", "4"],
    ];
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        assert!(scan_all(&mut d.g, &[]).is_empty());
        fill(&mut d, &pattern_keys());
        for opts in options {
            let want = scan_all(&mut d.r, opts);
            let got = scan_all(&mut d.g, opts);
            assert_eq!(
                got.into_iter().collect::<BTreeSet<_>>(),
                want.into_iter().collect::<BTreeSet<_>>(),
                "--threads {threads}: SCAN {opts:?}"
            );
        }
        for bad in [
            &[&b"SCAN"[..], b"abc"][..],
            &[b"SCAN", b"1.5"],
            &[b"SCAN", b" 1"],
            &[b"SCAN", b"1 "],
            &[b"SCAN", b"99999999999999999999999"],
            &[b"SCAN", b"0", b"COUNT", b"0"],
            &[b"SCAN", b"0", b"COUNT", b"-1"],
            &[b"SCAN", b"0", b"COUNT", b"x"],
            &[b"SCAN", b"0", b"MATCH"],
            &[b"SCAN", b"0", b"FOO", b"bar"],
            &[b"SCAN", b"0", b"COUNT"],
            &[b"SCAN"],
        ] {
            d.check(bad);
        }
    }
}

/// An empty cursor is cursor 0 to redis-server (`strtoul("")` is 0 with nothing left
/// over).
#[test]
fn scan_with_an_empty_cursor_is_cursor_zero_like_redis() {
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        d.check(&[b"SCAN", b""]);
        d.check(&[b"SET", b"k", b"v"]);
        let want = scan_reply(&d.r.cmd(&[b"SCAN", b"", b"COUNT", b"100000"])).1;
        let got = scan_reply(&d.g.cmd(&[b"SCAN", b"", b"COUNT", b"100000"])).1;
        assert_eq!(got, want, "--threads {threads}");
    }
}

/// The suites' model of ownership is the server's: with N threads the SCAN cursor is a
/// hash slot, and a SCAN starting at the first slot of shard s (with a COUNT large enough
/// to finish) returns exactly the keys `shard_of` puts on shards s and after, then cursor 0.
#[test]
fn scan_cursor_follows_the_shard_ranges() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let mut raw = server.raw();
        let keys = spread("s", threads, 50);
        assert_eq!(
            call(&mut raw, &over_keys("MSET", &keys, Some("v"))),
            b"+OK\r\n"
        );
        for shard in 0..threads {
            let start = (16384 * shard).div_ceil(threads);
            let (next, found) = scan_reply(&call(
                &mut raw,
                &cmd(&["SCAN", &start.to_string(), "COUNT", "1000000"]),
            ));
            assert_eq!(next, 0, "--threads {threads}, from shard {shard}");
            let found: BTreeSet<Vec<u8>> = found.into_iter().collect();
            let want: BTreeSet<Vec<u8>> = keys
                .iter()
                .filter(|k| shard_of(k.as_bytes(), threads) >= shard)
                .map(|k| k.as_bytes().to_vec())
                .collect();
            assert_eq!(found, want, "--threads {threads}, from shard {shard}");
        }
    }
}

/// RANDOMKEY, DBSIZE and FLUSHALL against redis-server: nil and 0 on an empty keyspace,
/// the only key when there is one, an expired key never returned, options and arity;
/// with keys on every shard RANDOMKEY always returns an existing key, and over many
/// calls keys of several shards.
#[test]
fn randomkey_dbsize_flushall_match_redis() {
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        check_script(
            &mut d,
            "
            RANDOMKEY
            DBSIZE
            FLUSHALL
            SET K3 only
            RANDOMKEY
            DBSIZE
            DEL K3
            SET K5 gone PX 20
            ",
        );
        std::thread::sleep(Duration::from_millis(60));
        check_script(
            &mut d,
            "
            RANDOMKEY
            DBSIZE
            RANDOMKEY x
            DBSIZE x
            FLUSHALL x
            FLUSHALL SYNC ASYNC
            FLUSHALL SYNC
            FLUSHALL ASYNC
            FLUSHALL sync
            ",
        );
        let keys = spread("rk", threads, 100 / threads);
        fill(&mut d, &keys);
        d.check(&[b"DBSIZE"]);
        let mut shards_seen = HashSet::new();
        for _ in 0..100 {
            let reply = d.g.cmd(&[b"RANDOMKEY"]);
            let key = bulks(&[b"*1\r\n".as_slice(), &reply].concat())[0]
                .clone()
                .unwrap_or_else(|| panic!("--threads {threads}: RANDOMKEY answered nil"));
            let key = String::from_utf8(key).unwrap();
            assert!(
                keys.contains(&key),
                "--threads {threads}: RANDOMKEY gave {key}"
            );
            shards_seen.insert(shard_of(key.as_bytes(), threads));
        }
        assert_eq!(
            shards_seen.len(),
            threads,
            "--threads {threads}: 100 RANDOMKEYs over 100 keys spread evenly saw shards \
             {shards_seen:?}"
        );
        let dels = over_keys("DEL", &keys[..30], None);
        assert_eq!(integer(&call(&mut d.g, &dels)), 30);
        assert_eq!(integer(&call(&mut d.r, &dels)), 30);
        check_script(&mut d, "DBSIZE\nFLUSHALL\nDBSIZE\nRANDOMKEY\nKEYS *");
        assert!(scan_all(&mut d.g, &[]).is_empty(), "--threads {threads}");
    }
}
