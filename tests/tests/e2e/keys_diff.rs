//! The keyspace commands of issue 6 differentially against redis-server 7.0, with
//! `--threads 1` and 4: DEL, UNLINK, EXISTS, TOUCH, TYPE, EXPIRE, PEXPIRE, EXPIREAT,
//! PEXPIREAT (NX|XX|GT|LT on every key state), TTL, PTTL, EXPIRETIME, PEXPIRETIME,
//! PERSIST, RENAME, RENAMENX, COPY, KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHDB, FLUSHALL and
//! OBJECT; multi-key commands with their keys in one slot, on one shard and on different
//! shards. Then seeded random sequences mixing every string and key command with valid
//! and invalid arguments over eight keys, compared reply by reply.
//!
//! Replies that depend on the instant a server reads its clock (TTL, PTTL, and EXPIRETIME
//! after a relative expiry) are compared within a tolerance; every expiry a sequence sets
//! is either already past or days away, so that no key expires between the two servers'
//! answers (one test lets keys expire on purpose, and waits for them with a wide margin).
//! KEYS, SCAN and RANDOMKEY answer in each server's own order and are compared as sets
//! (RANDOMKEY: nil on both, or a key redis also holds). redis-server counts in DBSIZE a key
//! whose deadline passed until it reclaims it, so a sequence looks every key up before it
//! compares DBSIZE.
//!
//! Replay a failing sequence with `GOBLIN_DIFF_SEED=<seed>` (printed).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use goblin_tests::cmd::{self, Cmd, brief, cmd, show_cmd, words};
use goblin_tests::diff::{
    How, ask_both, compare, differences, for_each_thread_count, same, script, script_everywhere,
    script_on_both,
};
use goblin_tests::keys::{LAYOUTS, Layout, THREADS, keys_on};
use goblin_tests::reply::bulks;
use goblin_tests::rng::{Rng, random_decimal, seeds};
use goblin_tests::{Differential, Raw, show};

/// Seconds since the Unix epoch.
fn unix_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// DEL, UNLINK, EXISTS, TOUCH and TYPE over keys of every type and layout: repeated keys
/// (counted by EXISTS and TOUCH, not by DEL), absent keys, arity.
#[test]
fn del_unlink_exists_touch_type_match_redis() {
    script_everywhere(
        8,
        r#"
        MSET K0 a K1 b K2 c
        HSET K3 f v
        ZADD K4 1 m
        TYPE K0
        TYPE K3
        TYPE K4
        TYPE K7
        EXISTS K0 K1 K2 K3 K4 K7
        EXISTS K0 K0 K7 K7 K3 K4 K4
        TOUCH K0 K1 K7 K0 K3 K4
        DEL K0 K0 K1 K7 K3
        EXISTS K0 K1 K3 K4
        TYPE K3
        UNLINK K2 K4 K4 K6
        UNLINK K2
        DEL K7
        EXISTS K0 K1 K2 K3 K4 K5 K6 K7
        DBSIZE
        SET K5 v EX 100
        DEL K5
        EXISTS K5
        TTL K5
        DEL
        UNLINK
        EXISTS
        TOUCH
        TYPE
        TYPE K0 K1
        "#,
    );
}

/// EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT with every flag combination, on an absent
/// key, a key without expiry and a key with a far deadline, with a time below and above
/// that deadline, zero or past (the key is deleted when the flags let the command
/// through), and negative; after each, the key's PEXPIRETIME and existence.
#[test]
fn expire_family_flags_on_every_key_state_match_redis() {
    let flags: [&str; 11] = [
        "", "NX", "XX", "GT", "LT", "nx", "XX GT", "XX LT", "GT GT", "lt xx", "NX NX",
    ];
    for_each_thread_count(|d, ctx| {
        // The existing deadline, in seconds; every other time is far from it.
        let base = unix_secs() + 50_000;
        // Per command: below and above the existing deadline, zero or past, negative, and
        // the deadline itself (PEXPIREAT), just below it (EXPIREAT: whole seconds) or ten
        // seconds away (the relative ones).
        let commands: [(&str, [i64; 5]); 4] = [
            ("EXPIRE", [1000, 100_000, 0, -1, 10]),
            ("PEXPIRE", [1_000_000, 100_000_000, 0, -1, 10_000]),
            ("EXPIREAT", [base - 20_000, base + 20_000, 1, -5, base]),
            (
                "PEXPIREAT",
                [
                    (base - 20_000) * 1000,
                    (base + 20_000) * 1000 + 7,
                    1000,
                    -5,
                    base * 1000 + 123,
                ],
            ),
        ];
        let states = [
            "DEL K0".to_string(),
            "SET K0 v".to_string(),
            format!("SET K0 v PXAT {}", base * 1000 + 123),
        ];
        for (name, times) in commands {
            let how = if name.ends_with("AT") {
                How::Exact
            } else {
                How::Near
            };
            for state in &states {
                for time in times {
                    for flag in flags {
                        let ctx = format!("{ctx}, after {state}");
                        compare(d, &words(state), How::Exact, &ctx);
                        compare(
                            d,
                            &words(&format!("{name} K0 {time} {flag}")),
                            How::Exact,
                            &ctx,
                        );
                        compare(d, &words("PEXPIRETIME K0"), how, &ctx);
                        compare(d, &words("EXISTS K0"), How::Exact, &ctx);
                    }
                }
            }
        }
    });
}

/// The EXPIRE family's errors: incompatible flags (reported before a bad time), unknown
/// options (reported first, sanitized), times that are not integers, and times whose
/// conversion to an absolute millisecond deadline overflows; on absent keys too; arity.
#[test]
fn expire_family_errors_match_redis() {
    let mut text = String::from(
        r#"
        SET K0 v
        EXPIRE K0 50 NX XX
        EXPIRE K0 50 GT LT
        EXPIRE K0 50 NX GT
        EXPIRE K0 50 NX LT
        EXPIRE K0 50 NX GT LT
        EXPIRE K0 50 lt gt
        EXPIRE K0 50 FOO
        EXPIRE K0 50 nx FOO
        EXPIRE K0 abc FOO
        EXPIRE K0 abc NX XX
        EXPIRE K0 abc GT LT
        EXPIRE K0 50 ""
        EXPIRE K0 50 "F\0O"
        EXPIRE K0 50 "a\r\nb"
        EXPIRE K0 50 NX "x y"
        EXPIRE K1 50 FOO
        EXPIRE K1 50 NX XX
        EXPIRE K1 abc
        EXPIRE K1 50
        PEXPIRE K0 50 GT LT
        EXPIREAT K0 50 NX LT
        PEXPIREAT K0 abc XX NX
        PEXPIREAT K0 50 BAR
        EXPIRE
        EXPIRE K0
        PEXPIRE K0
        EXPIREAT K0
        PEXPIREAT
        "#,
    );
    for name in ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"] {
        for time in [
            "9223372036854775807",
            "9223372036854775806",
            "9223372036854775",
            "9223372036854774",
            "9223372036854700000",
            "-9223372036854775808",
            "-9223372036854775",
            "-9223372036854776",
            "9223372036854775808",
            "-9223372036854775809",
            "1.5",
            "\"\"",
            "\" 5\"",
            "+5",
            "05",
            "0x10",
            "abc",
        ] {
            text.push_str(&format!(
                "SET K0 v\n{name} K0 {time}\nEXISTS K0\n~PEXPIRETIME K0\n{name} K1 {time}\n"
            ));
        }
    }
    script_on_both(2, &text);
}

/// TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 for absent keys, -1 without expiry, and the
/// deadline of every type; EXPIRETIME's rounding to the nearest second (499, 500, 501
/// ms); the largest deadline; arity.
#[test]
fn ttl_pttl_expiretime_match_redis() {
    let at = (unix_secs() + 100_000) * 1000;
    let mut text = String::from(
        r#"
        TTL K0
        PTTL K0
        EXPIRETIME K0
        PEXPIRETIME K0
        SET K0 v
        TTL K0
        PTTL K0
        EXPIRETIME K0
        PEXPIRETIME K0
        SET K0 v EX 1000
        ~TTL K0
        ~PTTL K0
        ~EXPIRETIME K0
        ~PEXPIRETIME K0
        HSET K1 f v
        EXPIRE K1 5000
        ~TTL K1
        ~PTTL K1
        ZADD K2 1 m
        PEXPIRE K2 7000000
        ~EXPIRETIME K2
        ~PEXPIRETIME K2
        PEXPIREAT K2 9223372036854775807
        PEXPIRETIME K2
        EXPIRETIME K2
        ~PTTL K2
        ~TTL K2
        TTL
        PTTL K0 K1
        EXPIRETIME
        PEXPIRETIME K0 K1
        "#,
    );
    for ms in [0, 1, 123, 499, 500, 501, 999] {
        let t = at + ms;
        text.push_str(&format!(
            "PEXPIREAT K0 {t}\nPEXPIRETIME K0\nEXPIRETIME K0\n~TTL K0\n~PTTL K0\n\
             SET K3 v PXAT {t}\nEXPIRETIME K3\nGETEX K3 PXAT {t}\nPEXPIRETIME K3\n"
        ));
    }
    script_on_both(4, &text);
}

/// Keys whose deadline passed (set by SET PX, PSETEX, GETEX PX, PEXPIRE and PEXPIREAT,
/// on strings, hashes and sorted sets) behave as absent to every command, whether or not
/// a server has reclaimed them yet; waited for with a wide margin.
#[test]
fn expired_keys_behave_as_absent_match_redis() {
    const KEYS: usize = 24;
    let setup: String = (0..KEYS)
        .map(|i| match i % 6 {
            0 => format!("SET K{i} v{i} PX 50\n"),
            1 => format!("PSETEX K{i} 50 {i}\n"),
            2 => format!("SET K{i} abc\nGETEX K{i} PX 50\n"),
            3 => format!("HSET K{i} f v\nPEXPIRE K{i} 50\n"),
            4 => format!("ZADD K{i} 1 m\nPEXPIRE K{i} 50\n"),
            _ => format!("SET K{i} 7\nPEXPIREAT K{i} {}\n", (unix_secs() - 1) * 1000),
        })
        .collect();
    let mut probes = String::new();
    for i in 0..KEYS {
        let line = match i {
            0 => "GET K0".to_string(),
            1 => "INCR K1".into(),
            2 => "APPEND K2 x".into(),
            3 => "HSET K3 g v".into(),
            4 => "ZADD K4 2 n".into(),
            5 => "INCRBYFLOAT K5 1.5".into(),
            6 => "GETSET K6 new".into(),
            7 => "SET K7 x NX".into(),
            8 => "SET K8 x XX".into(),
            9 => "GETEX K9 PERSIST".into(),
            10 => "GETDEL K10".into(),
            11 => "SETRANGE K11 2 x".into(),
            12 => "COPY K12 K0 REPLACE".into(),
            13 => "RENAME K13 K1".into(),
            14 => "RENAMENX K14 K1".into(),
            15 => "EXPIRE K15 100".into(),
            16 => "PERSIST K16".into(),
            17 => "OBJECT ENCODING K17".into(),
            18 => "MSETNX K18 a K19 b".into(),
            19 => "STRLEN K19".into(),
            20 => "DECRBY K20 5".into(),
            21 => "GETRANGE K21 0 -1".into(),
            22 => "EXISTS K22 K23".into(),
            _ => "TOUCH K23".into(),
        };
        let _ = writeln!(probes, "{line}\nTYPE K{i}\nPTTL K{i}\nEXPIRETIME K{i}");
    }
    probes.push_str("%KEYS *\nMGET K0 K1 K2 K3 K4 K5 K6 K7 K8 K9 K10 K11\n");
    for_each_thread_count(|d, ctx| {
        for layout in LAYOUTS {
            let keys = layout.keys(KEYS);
            let ctx = format!("{ctx}, {layout:?}");
            script(d, &keys, &ctx, "FLUSHALL");
            script(d, &keys, &ctx, &setup);
            thread::sleep(std::time::Duration::from_millis(300));
            script(d, &keys, &ctx, &probes);
        }
    });
}

/// PERSIST on absent keys, keys without and with an expiry (also of other types), twice;
/// arity.
#[test]
fn persist_matches_redis() {
    script_on_both(
        3,
        r#"
        PERSIST K0
        SET K0 v
        PERSIST K0
        EXPIRE K0 100
        PERSIST K0
        PERSIST K0
        TTL K0
        GET K0
        HSET K1 f v
        PEXPIRE K1 100000
        PERSIST K1
        TTL K1
        PERSIST K1
        ZADD K2 1 m
        EXPIREAT K2 99999999999
        PERSIST K2
        EXPIRETIME K2
        SET K0 v EX 100
        SET K0 v KEEPTTL
        PERSIST K0
        PERSIST
        PERSIST K0 K1
        "#,
    );
}

/// RENAME and RENAMENX in one slot, on one shard and across shards: absent sources, a
/// key onto itself, overwriting a destination of another type and its TTL, the source's
/// TTL and type travelling, RENAMENX onto an existing key, arity.
#[test]
fn rename_renamenx_match_redis() {
    script_everywhere(
        8,
        r#"
        RENAME K0 K1
        RENAMENX K0 K1
        RENAME K0 K0
        RENAMENX K0 K0
        SET K0 v0
        RENAME K0 K1
        MGET K0 K1
        RENAME K1 K1
        RENAMENX K1 K1
        TTL K1
        HSET K2 f v
        EXPIRE K2 500
        RENAME K1 K2
        TYPE K2
        TTL K2
        GET K2
        HSET K3 f v
        PEXPIREAT K3 99999999999999
        RENAME K3 K4
        TYPE K4
        PEXPIRETIME K4
        HGET K4 f
        EXISTS K3
        ZADD K5 2 m
        RENAMENX K5 K4
        RENAMENX K5 K6
        TYPE K6
        ZSCORE K6 m
        RENAMENX K4 K6
        RENAMENX K4 K7
        PEXPIRETIME K7
        RENAME K7 K2
        TYPE K2
        PEXPIRETIME K2
        SET K0 x EX 1000
        RENAME K0 K1
        ~TTL K1
        RENAME K1 K0
        ~TTL K0
        SET K1 other
        RENAMENX K0 K1
        ~TTL K0
        DBSIZE
        RENAME K0
        RENAME
        RENAMENX K0
        RENAME K0 K1 K2
        RENAMENX K0 K1 K2
        "#,
    );
}

/// COPY in one slot, on one shard and across shards: absent sources, REPLACE, DB 0, DB 1
/// and other bad databases (out of range, not a number, past i32), unknown options, the
/// same key (an error even when absent), the TTL and the type copied, the destination's
/// TTL replaced, arity.
#[test]
fn copy_matches_redis() {
    script_everywhere(
        8,
        r#"
        COPY K0 K1
        SET K0 1
        COPY K0 K1
        GET K1
        COPY K0 K1
        COPY K0 K1 REPLACE
        COPY K0 K1 replace
        COPY K0 K1 DB 0
        COPY K0 K1 DB 0 REPLACE
        COPY K0 K1 REPLACE DB 0
        COPY K0 K1 REPLACE DB 1
        COPY K0 K1 DB 1
        COPY K0 K1 DB -1
        COPY K0 K1 DB abc
        COPY K0 K1 DB 2147483648
        COPY K0 K1 DB -2147483649
        COPY K0 K1 DB 1.5
        COPY K0 K1 DB
        COPY K0 K1 FOO
        COPY K0 K1 REPLACE FOO
        COPY K0 K1 replace replace
        COPY K0 K0
        COPY K0 K0 REPLACE
        COPY K0 K0 DB 1
        COPY K0 K0 FOO
        COPY K7 K7
        COPY K7 K2
        COPY K7 K2 REPLACE
        COPY K7 K2 DB 1
        SET K2 v EX 100
        COPY K2 K3
        ~TTL K3
        PEXPIREAT K2 99999999999999
        COPY K2 K3 REPLACE
        PEXPIRETIME K3
        COPY K0 K3 REPLACE
        TTL K3
        HSET K4 f v g w
        COPY K4 K5
        TYPE K5
        HGET K5 g
        HSET K4 f changed
        HGET K5 f
        ZADD K6 1 a 2 b
        COPY K6 K5
        COPY K6 K5 REPLACE
        TYPE K5
        ZSCORE K5 b
        ZADD K6 5 b
        ZSCORE K5 b
        COPY K5 K4 REPLACE
        TYPE K4
        DBSIZE
        COPY
        COPY K0
        "#,
    );
}

/// Keys whose names exercise glob patterns.
fn glob_keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = [
        "a", "b", "ab", "abc", "a]", "a[", "a-", "a\\", "\\", "[", "]", "-", "^", "a^", "*", "?",
        "a*b", "a?b", "x", "z", "c", "b]", "]a", "\\a", "a\\b", "aXb", "a.b", "", "hello", "hallo",
        "hxllo", "hllo", "heeello", "h\\llo", "A", "B", "ab]", "a-b", "m", "é", "user:1",
        "user:12", "user:123", "{tag}1", "{tag}2",
    ]
    .iter()
    .map(|k| k.as_bytes().to_vec())
    .collect();
    keys.push(b"\xff".to_vec());
    keys.push(b"bin\0key".to_vec());
    keys.push(b"line\r\nbreak".to_vec());
    keys
}

/// Glob patterns: wildcards, classes with ranges (also reversed), negation with `^`,
/// escapes inside and outside classes, unterminated classes, trailing backslashes.
const PATTERNS: [&str; 64] = [
    "*",
    "?",
    "??",
    "[",
    "[a",
    "[a-",
    "[a-]",
    "[-a]",
    "[]]",
    "[]a]",
    "[^]]",
    "[!a]",
    "[^a]",
    "[^a-z]*",
    "[z-a]",
    "[c-a]",
    "[\\]]",
    "\\",
    "a\\",
    "a\\\\",
    "\\*",
    "\\?",
    "\\[",
    "*\\",
    "[a\\]*",
    "[a\\-z]",
    "[[]",
    "a[]b",
    "a[^]b",
    "**",
    "*?*",
    "?*?",
    "a*",
    "*b",
    "*]",
    "[ab]",
    "[ab",
    "h[ae]llo",
    "h[^e]llo",
    "h[a-e]llo",
    "h\\llo",
    "h\\\\llo",
    "h*llo",
    "[A-Z]",
    "[a-c]",
    "?\\",
    "[\\",
    "[-]",
    "[a-]*",
    "[!-]",
    "a[-]",
    "[^",
    "[^]",
    "a*b*",
    "\\a",
    "\\\\*",
    "*\\\\",
    "a[a-",
    "x[",
    "user:*",
    "user:1?",
    "{tag}*",
    "",
    "nomatch*",
];

/// KEYS with every pattern of [`PATTERNS`] over the keys of [`glob_keys`] (binary ones
/// too), compared as sets; arity.
#[test]
fn keys_glob_patterns_match_redis() {
    for_each_thread_count(|d, ctx| {
        compare(d, &cmd(&["KEYS", "*"]), How::Exact, ctx);
        for key in glob_keys() {
            compare(d, &[b"SET".to_vec(), key, b"v".to_vec()], How::Exact, ctx);
        }
        for p in PATTERNS {
            compare(d, &cmd(&["KEYS", p]), How::Sorted, ctx);
        }
        compare(d, &[b"KEYS".to_vec(), b"bin\0*".to_vec()], How::Sorted, ctx);
        compare(d, &[b"KEYS".to_vec(), b"\xff".to_vec()], How::Sorted, ctx);
        compare(d, &[b"KEYS".to_vec(), b"*\r\n*".to_vec()], How::Sorted, ctx);
        // Long keys against many stars: Redis gives up past 1000 nested stars.
        compare(d, &cmd(&["SET", &"a".repeat(50), "v"]), How::Exact, ctx);
        for p in [
            "*".repeat(2000),
            format!("{}a", "*".repeat(999)),
            format!("{}a", "*".repeat(1001)),
            "a*".repeat(600),
            "a*".repeat(1001),
            format!("{}*", "*a".repeat(40)),
            format!("{}*", "*a".repeat(51)),
            format!("{}b", "*a".repeat(60)),
        ] {
            compare(d, &cmd(&["KEYS", &p]), How::Sorted, ctx);
        }
        script(d, &[], ctx, "KEYS\nKEYS a b");
    });
}

/// A full SCAN iteration (cursor 0 back to 0) with these options: every key returned, or
/// the error of the first call.
fn scan_all(raw: &mut Raw, options: &[Vec<u8>]) -> Result<BTreeSet<Vec<u8>>, Vec<u8>> {
    let mut found = BTreeSet::new();
    cmd::scan_all(raw, options, |_, keys| found.extend(keys)).map(|_| found)
}

/// Full SCAN iterations agree as sets with MATCH (glob patterns), COUNT and TYPE (each
/// type, any case, unknown types) alone and combined, over keys of three types; SCAN's
/// errors byte for byte.
#[test]
fn scan_match_count_type_match_redis() {
    let options: Vec<Vec<&str>> = vec![
        vec![],
        vec!["COUNT", "1"],
        vec!["COUNT", "3"],
        vec!["COUNT", "1000"],
        vec!["MATCH", "user:*"],
        vec!["MATCH", "h[ae]llo", "COUNT", "2"],
        vec!["MATCH", "*\\**"],
        vec!["MATCH", "[^a-z]*"],
        vec!["MATCH", "*", "COUNT", "5"],
        vec!["TYPE", "string"],
        vec!["TYPE", "hash"],
        vec!["TYPE", "zset", "COUNT", "2"],
        vec!["TYPE", "STRING", "MATCH", "a*"],
        vec!["TYPE", "Hash", "MATCH", "h*"],
        vec!["TYPE", "list"],
        vec!["TYPE", "none"],
        vec!["TYPE", "nosuchtype"],
        vec!["MATCH", "*1*", "TYPE", "zset", "COUNT", "4"],
        vec!["COUNT", "7", "COUNT", "2"],
        vec!["MATCH", "a*", "MATCH", "h*"],
    ];
    for_each_thread_count(|d, ctx| {
        assert_eq!(
            scan_all(&mut d.g, &[]),
            Ok(BTreeSet::new()),
            "{ctx}: SCAN of an empty keyspace"
        );
        for key in glob_keys() {
            compare(d, &[b"SET".to_vec(), key, b"v".to_vec()], How::Exact, ctx);
        }
        for i in 0..40 {
            compare(
                d,
                &cmd(&["HSET", &format!("h{i}"), "f", "v"]),
                How::Exact,
                ctx,
            );
            compare(
                d,
                &cmd(&["ZADD", &format!("z{i}1"), "1", "m"]),
                How::Exact,
                ctx,
            );
        }
        for opts in &options {
            let opts = cmd(opts);
            let want = scan_all(&mut d.r, &opts);
            let got = scan_all(&mut d.g, &opts);
            assert_eq!(got, want, "{ctx}: SCAN {}", show_cmd(&opts));
        }
        for bad in [
            "SCAN abc",
            "SCAN 1.5",
            "SCAN \" 1\"",
            "SCAN \"1 \"",
            "SCAN 18446744073709551616",
            "SCAN 0 COUNT 0",
            "SCAN 0 COUNT -1",
            "SCAN 0 COUNT x",
            "SCAN 0 COUNT 9223372036854775808",
            "SCAN 0 MATCH",
            "SCAN 0 TYPE",
            "SCAN 0 FOO bar",
            "SCAN 0 COUNT",
            "SCAN 0 MATCH a FOO",
            "SCAN",
        ] {
            compare(d, &words(bad), How::Exact, ctx);
        }
    });
}

/// RANDOMKEY, DBSIZE, FLUSHDB and FLUSHALL: nil and 0 on an empty keyspace, the only key
/// when there is one, SYNC and ASYNC in any case, bad options, arity; RANDOMKEY always
/// one of the keys.
#[test]
fn randomkey_dbsize_flushdb_flushall_match_redis() {
    for_each_thread_count(|d, ctx| {
        for layout in LAYOUTS {
            let keys = layout.keys(8);
            let ctx = format!("{ctx}, {layout:?}");
            script(
                d,
                &keys,
                &ctx,
                r#"
                RANDOMKEY
                DBSIZE
                SET K3 only
                RANDOMKEY
                DBSIZE
                FLUSHDB
                DBSIZE
                RANDOMKEY
                HSET K5 f v
                RANDOMKEY
                FLUSHDB ASYNC
                DBSIZE
                ZADD K6 1 m
                FLUSHDB sync
                DBSIZE
                SET K7 v
                FLUSHALL ASYNC
                DBSIZE
                SET K7 v
                FLUSHALL SYNC
                DBSIZE
                FLUSHALL async
                FLUSHDB foo
                FLUSHDB SYNC ASYNC
                FLUSHALL foo
                FLUSHALL SYNC SYNC
                RANDOMKEY x
                DBSIZE x
                MSET K0 a K1 b K2 c K3 d K4 e K5 f K6 g K7 h
                DBSIZE
                "#,
            );
            for _ in 0..30 {
                let reply = d.g.cmd(&[b"RANDOMKEY"]);
                let key = bulks(&[b"*1\r\n".as_slice(), &reply].concat())[0]
                    .clone()
                    .unwrap_or_else(|| panic!("{ctx}: RANDOMKEY answered nil"));
                assert!(
                    keys.iter().any(|k| k.as_bytes() == key),
                    "{ctx}: RANDOMKEY gave {}",
                    show(&key)
                );
            }
            script(
                d,
                &keys,
                &ctx,
                "DEL K0 K1 K2\nDBSIZE\nFLUSHALL\nDBSIZE\nRANDOMKEY",
            );
        }
    });
}

/// OBJECT's subcommands: HELP (any case), FREQ's error without an LFU policy, IDLETIME
/// right after a write, REFCOUNT of hashes and sorted sets, nil for absent keys, unknown
/// subcommands, arity; ENCODING of hashes and sorted sets at the listpack limits (128
/// sorted set entries, 64-byte fields, values and members), also after COPY and RENAME.
#[test]
fn object_subcommands_match_redis() {
    let fields: String = (0..128).map(|i| format!(" f{i} v")).collect();
    let members: String = (0..128).map(|i| format!(" {i} m{i}")).collect();
    let (v64, v65) = ("x".repeat(64), "x".repeat(65));
    let text = format!(
        r#"
        OBJECT HELP
        OBJECT help
        OBJECT HELP x
        OBJECT
        OBJECT FOO
        OBJECT FOO K0
        OBJECT "a\r\nb"
        OBJECT ENCODING
        OBJECT ENCODING K0 K1
        OBJECT FREQ
        OBJECT IDLETIME
        OBJECT REFCOUNT
        OBJECT ENCODING K0
        OBJECT FREQ K0
        OBJECT IDLETIME K0
        OBJECT REFCOUNT K0
        SET K0 v
        ~OBJECT IDLETIME K0
        OBJECT FREQ K0
        OBJECT freq K0
        HSET K1 f v
        OBJECT ENCODING K1
        OBJECT REFCOUNT K1
        ~OBJECT IDLETIME K1
        OBJECT FREQ K1
        ZADD K2 1 m
        OBJECT ENCODING K2
        OBJECT REFCOUNT K2
        HSET K3{fields}
        OBJECT ENCODING K3
        HSET K4 f {v64}
        OBJECT ENCODING K4
        HSET K4 g {v65}
        OBJECT ENCODING K4
        HSET K5 {v65} v
        OBJECT ENCODING K5
        ZADD K6{members}
        OBJECT ENCODING K6
        ZADD K6 5 extra
        OBJECT ENCODING K6
        ZADD K7 1 {v64}
        OBJECT ENCODING K7
        ZADD K7 1 {v65}
        OBJECT ENCODING K7
        COPY K7 K8
        OBJECT ENCODING K8
        COPY K1 K9
        OBJECT ENCODING K9
        RENAME K6 K10
        OBJECT ENCODING K10
        COPY K5 K11
        OBJECT ENCODING K11
        "#
    );
    script_everywhere(12, &text);
}

/// ZADD scores read as Redis's `string2d` reads them: infinities by name, and numbers out
/// of a double's range (overflow, or underflow to zero) refused; subnormals kept.
#[test]
fn zadd_scores_match_redis() {
    script_everywhere(
        1,
        r#"
        ZADD K0 1e400 a
        ZADD K0 -1e400 a
        ZADD K0 1e-400 a
        ZADD K0 0e-400 a
        ZADD K0 0.0e-5 b
        ZADD K0 1e-310 c
        ZADD K0 inf d -Infinity e +INF f
        ZADD K0 nan g
        ZADD K0 " 1" h
        ZADD K0 "1 " h
        ZADD K0 1.5e308 i
        ZSCORE K0 a
        ZSCORE K0 b
        ZSCORE K0 c
        ZSCORE K0 d
        ZSCORE K0 e
        ZSCORE K0 i
        "#,
    );
}

/// redis-server 7.0 keeps a hash as a listpack up to `hash-max-listpack-entries` 512
/// (128 is the sorted sets' limit).
#[test]
fn hash_listpack_limit_is_512_entries_like_redis() {
    let fields = |n: usize| -> String { (0..n).map(|i| format!(" f{i} v")).collect() };
    script_on_both(
        3,
        &format!(
            "HSET K0{}\nOBJECT ENCODING K0\nHSET K1{}\nOBJECT ENCODING K1\n\
             HSET K2{}\nOBJECT ENCODING K2\n",
            fields(129),
            fields(512),
            fields(513)
        ),
    );
}

/// The option parsers (issue 9: SET, GETEX, EXPIRE, COPY, SCAN, FLUSHDB, FLUSHALL) read
/// a keyword as Redis's `strcasecmp` does, up to a NUL byte, in any case; a keyword's value
/// is still the next argument whatever it holds; error texts that quote an argument quote
/// it up to its NUL, with CR and LF made spaces. COPY and SCAN run as plans when their keys
/// span shards (SCAN always), so their errors take the plans' path.
#[test]
fn option_keywords_end_at_a_nul_byte_like_redis() {
    script_everywhere(
        4,
        r#"
        SET K0 v "nx\0junk"
        SET K0 v "Xx\0"
        GET K0
        SET K0 w "get\0x"
        SET K0 v "NX\0" "xx\0"
        SET K0 v "ex\0" 100 "EX\0y" 200
        ~TTL K0
        SET K0 v "keepttl\0" "px\0" 5
        SET K0 v "pxat\0" "nx"
        SET K0 v EX "nx"
        SET K0 v "\0nx"
        SET K0 v "nx\r\n"
        GETEX K0 "persist\0x"
        TTL K0
        GETEX K0 "exat\0" 99999999999 "persist\0"
        GETEX K0 "Persist" "EX" 5
        EXPIRE K0 50 "gt\0" "lt\0"
        EXPIRE K0 50 "nx\0" "xx"
        EXPIRE K0 50 "nx\0" "F\0O"
        EXPIRE K0 50 "\r\nx\r\ny\r\n"
        COPY K0 K1 "replace\0x"
        COPY K0 K1 "db\0" 0 "REPLACE\0"
        COPY K0 K1 "DB" "REPLACE"
        COPY K0 K1 "db\0" 1
        COPY K0 K1 "db\0"
        COPY K0 K1 "db" "0\0"
        COPY K0 K0 "db\0" 0
        SCAN 0 "count\0" 0
        SCAN 0 "count\0" x
        SCAN 0 "type\0"
        SCAN 0 "match\0x" "*" "count" "-5"
        SCAN x "count" 0
        SCAN "1\0x" COUNT 0
        SCAN "0\0x" COUNT 0
        SCAN "\0" COUNT 0
        SCAN "+\0"
        SCAN "18446744073709551616\0"
        FLUSHDB "async\0x" "sync"
        FLUSHDB "sync\0x"
        FLUSHALL "ASYNC\0"
        FLUSHALL "\0sync"
        DBSIZE
        "#,
    );
}

// ---------------------------------------------------------------------------------------
// Randomized sequences.

/// Sequences per thread count.
const SEQUENCES: u64 = 40;
/// Commands per sequence.
const STEPS: usize = 200;
/// Every deadline a sequence sets lies this many seconds apart from any other, far more
/// than a sequence lasts, so that GT and LT compare deadlines the same way on both servers
/// whichever instant each read its clock at.
const DEADLINE_SPACING: i64 = 100;

/// How a step's replies are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// As [`same`] compares them.
    Reply(How),
    /// A full SCAN iteration with the step's options, as sets.
    ScanAll,
    /// RANDOMKEY: nil on both, or a key that redis holds too.
    RandomKey,
}

/// One step of a sequence.
struct Step {
    args: Cmd,
    check: Check,
}

/// Generates the steps of one sequence.
struct Gen {
    rng: Rng,
    keys: Vec<String>,
    /// The sequence's start, in Unix seconds.
    t0: i64,
    /// The index of the step being generated.
    step: usize,
    /// Whether OBJECT ENCODING and OBJECT REFCOUNT are part of the mix.
    with_object: bool,
}

/// String values: integers in and out of the shared range and at the i64 limits,
/// decimals, things that look like numbers and are not, binary, and past the 44-byte
/// embedded limit.
const VALUES: [&str; 18] = [
    "v",
    "",
    "0",
    "1",
    "-1",
    "42",
    "9999",
    "10000",
    "9223372036854775807",
    "-9223372036854775808",
    "3.5",
    "10.5",
    "1e3",
    " 1",
    "abc",
    "hello world",
    "\0\r\n",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
];

/// Integer arguments that are not integers to Redis, or overflow.
const BAD_INTEGERS: [&str; 9] = [
    "abc",
    "1.5",
    "",
    "+5",
    " 5",
    "05",
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999",
];

/// Expiry units.
#[derive(Clone, Copy)]
enum Unit {
    Seconds,
    Millis,
    UnixSeconds,
    UnixMillis,
}

impl Gen {
    fn key(&mut self) -> Vec<u8> {
        self.rng.pick(&self.keys).as_bytes().to_vec()
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        self.rng.range(lo, hi)
    }

    fn value(&mut self) -> Vec<u8> {
        match self.rng.below(100) {
            0..=14 => self.range(-20, 20).to_string().into_bytes(),
            // Values stored out of line.
            15..=17 => {
                let len = *self.rng.pick(&[300, 5000]);
                let byte = b'a' + self.rng.below(26) as u8;
                vec![byte; len]
            }
            _ => self.rng.pick(&VALUES).as_bytes().to_vec(),
        }
    }

    fn integer(&mut self) -> Vec<u8> {
        let n = match self.rng.below(10) {
            0 => *self
                .rng
                .pick(&[i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1]),
            1 => return self.rng.pick(&BAD_INTEGERS).as_bytes().to_vec(),
            _ => self.range(-100, 100),
        };
        n.to_string().into_bytes()
    }

    /// A time for an expiry in `unit`: mostly days away (unique to this step), sometimes
    /// zero or already past, sometimes not an integer or overflowing.
    fn time(&mut self, unit: Unit) -> Vec<u8> {
        let roll = self.rng.below(100);
        let t = if roll < 60 {
            let secs = DEADLINE_SPACING * (self.range(1, 50) * 1000 + self.step as i64);
            let ms = self.range(0, 999);
            match unit {
                Unit::Seconds => secs,
                Unit::Millis => secs * 1000 + ms,
                Unit::UnixSeconds => self.t0 + secs,
                Unit::UnixMillis => (self.t0 + secs) * 1000 + ms,
            }
        } else if roll < 80 {
            match unit {
                Unit::Seconds | Unit::Millis => *self.rng.pick(&[0, -1, -100]),
                Unit::UnixSeconds => *self.rng.pick(&[0, 1, self.t0 - 100, -5]),
                Unit::UnixMillis => *self.rng.pick(&[0, 1, (self.t0 - 100) * 1000, -5]),
            }
        } else if roll < 86 {
            *self
                .rng
                .pick(&[i64::MAX, i64::MIN, i64::MAX / 1000, i64::MAX - 1000])
        } else {
            return self.rng.pick(&BAD_INTEGERS).as_bytes().to_vec();
        };
        t.to_string().into_bytes()
    }

    /// SET's or GETEX's options, in any order, conflicting ones included.
    fn string_options(&mut self, set: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let count = if set {
            *self.rng.pick(&[0, 0, 1, 1, 1, 1, 2, 2, 2, 3])
        } else {
            *self.rng.pick(&[0, 1, 1, 1, 1, 1, 2])
        };
        for _ in 0..count {
            let choice = self.rng.below(if set { 11 } else { 7 });
            let (word, unit) = match choice {
                0 => ("EX", Some(Unit::Seconds)),
                1 => ("PX", Some(Unit::Millis)),
                2 => ("EXAT", Some(Unit::UnixSeconds)),
                3 => ("PXAT", Some(Unit::UnixMillis)),
                4 if set => ("GET", None),
                4 => ("PERSIST", None),
                5 => (*self.rng.pick(&["FOO", "KEEPTTL", "NX"]), None),
                6 => ("ex", Some(Unit::Seconds)),
                7 => ("NX", None),
                8 => ("XX", None),
                9 => ("GET", None),
                _ => ("KEEPTTL", None),
            };
            out.push(word.as_bytes().to_vec());
            if let Some(unit) = unit
                && self.rng.percent(97)
            {
                out.push(self.time(unit));
            }
        }
        out
    }

    fn next(&mut self) -> Step {
        let mut check = Check::Reply(How::Exact);
        let k = self.key();
        let mut args: Cmd = match self.rng.below(106) {
            0..=5 => vec![b"GET".to_vec(), k],
            6..=15 => {
                let mut a = vec![b"SET".to_vec(), k, self.value()];
                a.extend(self.string_options(true));
                a
            }
            16 => vec![b"SETNX".to_vec(), k, self.value()],
            17 => {
                let t = self.time(Unit::Seconds);
                vec![b"SETEX".to_vec(), k, t, self.value()]
            }
            18 => {
                let t = self.time(Unit::Millis);
                vec![b"PSETEX".to_vec(), k, t, self.value()]
            }
            19 => vec![b"GETSET".to_vec(), k, self.value()],
            20 => vec![b"GETDEL".to_vec(), k],
            21..=23 | 100..=105 => {
                let mut a = vec![b"GETEX".to_vec(), k];
                a.extend(self.string_options(false));
                a
            }
            24..=25 => {
                let mut a = vec![b"MGET".to_vec(), k];
                for _ in 0..self.rng.below(4) {
                    a.push(self.key());
                }
                a
            }
            26..=28 => {
                let name: &[u8] = if self.rng.percent(60) {
                    b"MSET"
                } else {
                    b"MSETNX"
                };
                let mut a = vec![name.to_vec(), k, self.value()];
                for _ in 0..self.rng.below(3) {
                    a.push(self.key());
                    a.push(self.value());
                }
                if self.rng.percent(5) {
                    a.push(self.key());
                }
                a
            }
            29..=30 => vec![b"APPEND".to_vec(), k, self.value()],
            31 => vec![b"STRLEN".to_vec(), k],
            32..=33 => {
                let name = *self.rng.pick(&["INCR", "DECR"]);
                vec![name.as_bytes().to_vec(), k]
            }
            34..=35 => {
                let name = *self.rng.pick(&["INCRBY", "DECRBY"]);
                vec![name.as_bytes().to_vec(), k, self.integer()]
            }
            36..=38 => vec![
                b"INCRBYFLOAT".to_vec(),
                k,
                random_decimal(&mut self.rng).into_bytes(),
            ],
            39..=40 => {
                let name = *self.rng.pick(&["GETRANGE", "GETRANGE", "SUBSTR"]);
                let start = self.range(-20, 20).to_string().into_bytes();
                let end = if self.rng.percent(10) {
                    self.integer()
                } else {
                    self.range(-20, 20).to_string().into_bytes()
                };
                vec![name.as_bytes().to_vec(), k, start, end]
            }
            41..=42 => {
                let offset = match self.rng.below(10) {
                    0 => (*self
                        .rng
                        .pick(&["-1", "536870912", "x", "9223372036854775807"]))
                    .as_bytes()
                    .to_vec(),
                    1 => (*self.rng.pick(&["100", "1000", "70000"]))
                        .as_bytes()
                        .to_vec(),
                    _ => self.range(0, 20).to_string().into_bytes(),
                };
                let patch = (*self.rng.pick(&["", "x", "abc", "\0", "12"]))
                    .as_bytes()
                    .to_vec();
                vec![b"SETRANGE".to_vec(), k, offset, patch]
            }
            43..=45 => {
                let name = *self.rng.pick(&["DEL", "UNLINK"]);
                let mut a = vec![name.as_bytes().to_vec(), k];
                for _ in 0..self.rng.below(3) {
                    a.push(self.key());
                }
                a
            }
            46..=47 => {
                let name = *self.rng.pick(&["EXISTS", "TOUCH"]);
                let mut a = vec![name.as_bytes().to_vec(), k];
                for _ in 0..self.rng.below(3) {
                    a.push(self.key());
                }
                a
            }
            48..=49 => vec![b"TYPE".to_vec(), k],
            50..=57 => {
                let (name, unit) = *self.rng.pick(&[
                    ("EXPIRE", Unit::Seconds),
                    ("PEXPIRE", Unit::Millis),
                    ("EXPIREAT", Unit::UnixSeconds),
                    ("PEXPIREAT", Unit::UnixMillis),
                ]);
                let mut a = vec![name.as_bytes().to_vec(), k, self.time(unit)];
                for _ in 0..self.rng.below(3).saturating_sub(self.rng.below(2)) {
                    let flag = *self.rng.pick(&["NX", "XX", "GT", "LT", "nx", "gt", "FOO"]);
                    a.push(flag.as_bytes().to_vec());
                }
                a
            }
            58..=62 => {
                check = Check::Reply(How::Near);
                let name = *self.rng.pick(&["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]);
                vec![name.as_bytes().to_vec(), k]
            }
            63..=64 => vec![b"PERSIST".to_vec(), k],
            65..=67 => {
                let name = *self.rng.pick(&["RENAME", "RENAMENX"]);
                let to = if self.rng.percent(10) {
                    k.clone()
                } else {
                    self.key()
                };
                vec![name.as_bytes().to_vec(), k, to]
            }
            68..=70 => {
                let to = if self.rng.percent(8) {
                    k.clone()
                } else {
                    self.key()
                };
                let mut a = vec![b"COPY".to_vec(), k, to];
                // (Each database error its own case: MUST_SEE wants both in every run,
                // and one in a third of a tenth of COPYs once came out in none.)
                match self.rng.below(10) {
                    0..=3 => a.push(b"REPLACE".to_vec()),
                    4 => a.extend(cmd(&["DB", "0"])),
                    5 => a.extend(cmd(&["DB", *self.rng.pick(&["1", "x"])])),
                    6 => a.extend(cmd(&["DB", *self.rng.pick(&["-1", "16"])])),
                    7 => a.push(b"FOO".to_vec()),
                    _ => {}
                }
                a
            }
            71 => {
                check = Check::Reply(How::Sorted);
                let pattern = match self.rng.below(6) {
                    0 => b"*".to_vec(),
                    1 => k,
                    2 => [&k[..k.len().min(3)], b"*"].concat(),
                    3 => b"*1*".to_vec(),
                    4 => b"?[a-m]*".to_vec(),
                    _ => b"{t}?".to_vec(),
                };
                vec![b"KEYS".to_vec(), pattern]
            }
            72 => {
                check = Check::ScanAll;
                let mut a = Vec::new();
                if self.rng.percent(40) {
                    a.push(b"MATCH".to_vec());
                    a.push((*self.rng.pick(&["*", "c*", "*1*", "{t}*", "?"])).into());
                }
                if self.rng.percent(40) {
                    a.push(b"COUNT".to_vec());
                    a.push((*self.rng.pick(&["1", "2", "10", "0", "x"])).into());
                }
                if self.rng.percent(40) {
                    a.push(b"TYPE".to_vec());
                    a.push((*self.rng.pick(&["string", "hash", "zset", "list"])).into());
                }
                a
            }
            73 => {
                check = Check::RandomKey;
                vec![b"RANDOMKEY".to_vec()]
            }
            74 => vec![b"DBSIZE".to_vec()],
            75..=78 => {
                let field = *self.rng.pick(&["f", "g"]);
                vec![b"HSET".to_vec(), k, field.into(), self.value()]
            }
            79..=82 => {
                let score = self.range(1, 3).to_string();
                let member = *self.rng.pick(&["m", "n"]);
                vec![b"ZADD".to_vec(), k, score.into(), member.into()]
            }
            83 => vec![b"HGET".to_vec(), k, b"f".to_vec()],
            84 => vec![b"ZSCORE".to_vec(), k, b"m".to_vec()],
            85 => vec![b"OBJECT".to_vec(), b"FREQ".to_vec(), k],
            86..=89 if self.with_object => {
                let sub = *self.rng.pick(&["ENCODING", "ENCODING", "REFCOUNT"]);
                vec![b"OBJECT".to_vec(), sub.into(), k]
            }
            90 if self.rng.percent(30) => {
                let name = *self.rng.pick(&["FLUSHDB", "FLUSHALL"]);
                let mut a = vec![name.as_bytes().to_vec()];
                if self.rng.percent(50) {
                    a.push((*self.rng.pick(&["SYNC", "ASYNC", "async", "FOO"])).into());
                }
                a
            }
            91..=94 => vec![b"SET".to_vec(), k, self.value()],
            95..=97 => vec![b"GET".to_vec(), k],
            98..=99 => vec![b"MSET".to_vec(), k, self.value(), self.key(), self.value()],
            _ => vec![b"EXISTS".to_vec(), k],
        };
        // Now and then one argument short: an arity error, or another command.
        if args.len() > 1 && check == Check::Reply(How::Exact) && self.rng.percent(2) {
            args.pop();
        }
        self.step += 1;
        Step { args, check }
    }
}

/// Replies seen, by command and kind, over a whole run.
type Tally = BTreeMap<String, usize>;

/// The kind of a reply, for the tally: the error text, or the reply's type.
fn reply_kind(name: &[u8], reply: &[u8]) -> String {
    let name = String::from_utf8_lossy(name).to_ascii_uppercase();
    let kind = match reply.first() {
        Some(b'-') => String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned(),
        Some(b'$') if reply.starts_with(b"$-1") => "nil".into(),
        Some(b'$') => "bulk".into(),
        Some(b':') => "integer".into(),
        Some(b'+') => "simple".into(),
        Some(b'*') => "array".into(),
        _ => show(reply),
    };
    format!("{name} → {kind}")
}

/// Errors every full run must have compared at least once, as the start of the error
/// text: a generator that stopped producing one would leave that path untested.
const MUST_SEE: [&str; 12] = [
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "ERR syntax error",
    "ERR value is not an integer or out of range",
    "ERR invalid expire time in 'set' command",
    "ERR invalid expire time in 'expire",
    "ERR invalid expire time in 'getex' command",
    "ERR no such key",
    "ERR value is not a valid float",
    "ERR Unsupported option",
    "ERR NX and XX, GT or LT options at the same time are not compatible",
    "ERR wrong number of arguments",
    "ERR DB index is out of range",
];

/// One sequence's two connections and its log.
struct Run<'a> {
    d: &'a mut Differential,
    seed: u64,
    threads: usize,
    log: Vec<String>,
    tally: &'a mut Tally,
    /// The sequence's keys.
    keys: Vec<String>,
}

impl Run<'_> {
    /// Panics with the seed, the last steps, and both keyspaces.
    fn fail(&mut self, what: &str) -> ! {
        let mut text = String::new();
        for line in self.log.iter().rev().take(25).rev() {
            let _ = writeln!(text, "  {line}");
        }
        let keyspace = |raw: &mut Raw| {
            let mut keys = bulks(&raw.cmd(&[b"KEYS", b"*"]));
            keys.sort();
            keys.into_iter()
                .map(|k| show(&k.unwrap_or_default()))
                .collect::<Vec<_>>()
        };
        let (g, r) = (keyspace(&mut self.d.g), keyspace(&mut self.d.r));
        panic!(
            "GOBLIN_DIFF_SEED={} (--threads {}): {what}\nthe last steps (command → goblin | \
             redis):\n{text}keys on goblin: {g:?}\nkeys on redis:  {r:?}",
            self.seed, self.threads
        );
    }

    /// Runs a step on both servers and compares.
    fn step(&mut self, n: usize, step: &Step) {
        let args = &step.args;
        if args == &[b"DBSIZE".to_vec()] {
            // redis-server counts a key whose deadline passed until it reclaims it, and SET
            // with EXAT or PXAT in the past leaves one; looking every key up reclaims them.
            let mut exists = vec![b"EXISTS".to_vec()];
            exists.extend(self.keys.iter().map(|k| k.as_bytes().to_vec()));
            self.step(
                n,
                &Step {
                    args: exists,
                    check: Check::Reply(How::Exact),
                },
            );
        }
        match step.check {
            Check::Reply(how) => {
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                let (got, want) = ask_both(&mut self.d.g, &mut self.d.r, &refs);
                let line = args.iter().map(|a| brief(a)).collect::<Vec<_>>().join(" ");
                self.log
                    .push(format!("#{n} {line} → {} | {}", brief(&got), brief(&want)));
                *self.tally.entry(reply_kind(&args[0], &want)).or_default() += 1;
                if !same(&got, &want, how, &args[0]) {
                    self.fail(&format!(
                        "step #{n} {line} differs ({how:?}):\n{}",
                        differences(&got, &want)
                    ));
                }
            }
            Check::ScanAll => {
                let want = scan_all(&mut self.d.r, args);
                let got = scan_all(&mut self.d.g, args);
                let text = |r: &Result<BTreeSet<Vec<u8>>, Vec<u8>>| match r {
                    Ok(keys) => format!("{:?}", keys.iter().map(|k| show(k)).collect::<Vec<_>>()),
                    Err(e) => show(e),
                };
                self.log.push(format!(
                    "#{n} SCAN (all) {} → {} | {}",
                    show_cmd(args),
                    text(&got),
                    text(&want)
                ));
                if got != want {
                    self.fail(&format!(
                        "step #{n}: a full SCAN {} differs",
                        show_cmd(args)
                    ));
                }
            }
            Check::RandomKey => {
                let want = self.d.r.cmd(&[b"RANDOMKEY"]);
                let got = self.d.g.cmd(&[b"RANDOMKEY"]);
                self.log
                    .push(format!("#{n} RANDOMKEY → {} | {}", show(&got), show(&want)));
                let nil = |r: &[u8]| r == b"$-1\r\n";
                if nil(&got) != nil(&want) {
                    self.fail(&format!("step #{n}: RANDOMKEY nil on one server only"));
                }
                if !nil(&got) {
                    let key = &bulks(&[b"*1\r\n".as_slice(), &got].concat())[0];
                    let key = key.as_deref().unwrap_or_default();
                    if self.d.r.cmd(&[b"EXISTS", key]) != b":1\r\n" {
                        self.fail(&format!(
                            "step #{n}: goblin's RANDOMKEY {} is not a key on redis",
                            show(key)
                        ));
                    }
                }
            }
        }
    }
}

/// Runs one sequence from an empty keyspace, then compares every key's final state.
fn run_sequence(
    d: &mut Differential,
    threads: usize,
    seed: u64,
    with_object: bool,
    tally: &mut Tally,
) {
    // Eight keys: four on different shards, two sharing a slot, two sharing another shard.
    let mut keys = Layout::CrossShard.keys(4);
    keys.extend(["{t}a".to_string(), "{t}b".to_string()]);
    keys.extend(keys_on("rs.", 1, 4, 2));
    let mut generator = Gen {
        rng: Rng::new(seed),
        keys: keys.clone(),
        t0: unix_secs(),
        step: 0,
        with_object,
    };
    let mut run = Run {
        d,
        seed,
        threads,
        log: Vec::new(),
        tally,
        keys: keys.clone(),
    };
    run.step(
        0,
        &Step {
            args: cmd(&["FLUSHALL"]),
            check: Check::Reply(How::Exact),
        },
    );
    for n in 1..=STEPS {
        let step = generator.next();
        run.step(n, &step);
    }
    let mut finals: Vec<Step> = Vec::new();
    for key in &keys {
        for (line, how) in [
            (vec!["TYPE", key], How::Exact),
            (vec!["GET", key], How::Exact),
            (vec!["HGET", key, "f"], How::Exact),
            (vec!["HGET", key, "g"], How::Exact),
            (vec!["ZSCORE", key, "m"], How::Exact),
            (vec!["ZSCORE", key, "n"], How::Exact),
            (vec!["PTTL", key], How::Near),
            (vec!["EXPIRETIME", key], How::Near),
        ] {
            finals.push(Step {
                args: cmd(&line),
                check: Check::Reply(how),
            });
        }
    }
    finals.push(Step {
        args: cmd(&["DBSIZE"]),
        check: Check::Reply(How::Exact),
    });
    finals.push(Step {
        args: cmd(&["KEYS", "*"]),
        check: Check::Reply(How::Sorted),
    });
    for (i, step) in finals.iter().enumerate() {
        run.step(STEPS + 1 + i, step);
    }
}

/// Runs [`SEQUENCES`] sequences (or the replayed one) with each thread count, the thread
/// counts side by side; checks that the run met every error of [`MUST_SEE`].
fn run_sequences(test: &str, with_object: bool) {
    let seeds = seeds(test, SEQUENCES);
    let tallies: Vec<Tally> = thread::scope(|scope| {
        let handles: Vec<_> = THREADS
            .iter()
            .map(|&threads| {
                let seeds = &seeds;
                scope.spawn(move || {
                    let mut d = Differential::threads(threads);
                    let mut tally = Tally::new();
                    for &seed in seeds {
                        run_sequence(&mut d, threads, seed, with_object, &mut tally);
                    }
                    tally
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    for (threads, tally) in THREADS.iter().zip(&tallies) {
        eprintln!("{test} --threads {threads}: replies compared: {tally:#?}");
    }
    if seeds.len() > 1 {
        for tally in &tallies {
            for error in MUST_SEE {
                assert!(
                    tally
                        .keys()
                        .any(|k| k.split(" → ").nth(1).is_some_and(|e| e.starts_with(error))),
                    "{test}: no {error:?} compared in the whole run: {tally:#?}"
                );
            }
            let total: usize = tally.values().sum();
            let errors: usize = tally
                .iter()
                .filter(|(k, _)| k.contains(" → ERR") || k.contains(" → WRONGTYPE"))
                .map(|(_, n)| n)
                .sum();
            assert!(
                errors * 3 < total,
                "{test}: {errors} of {total} replies are errors: the mix is too invalid"
            );
        }
    }
}

/// Seeded random sequences of every string and key command above, valid and invalid,
/// over eight keys spread over the shards, compared reply by reply with `--threads 1` and
/// 4; at the end every key's type, value, hash fields, sorted set members and deadline.
#[test]
fn random_sequences_match_redis() {
    run_sequences("random_sequences_match_redis", false);
}

/// The same sequences with OBJECT ENCODING and OBJECT REFCOUNT in the mix.
#[test]
fn random_sequences_with_object_encoding_match_redis() {
    run_sequences("random_sequences_with_object_encoding_match_redis", true);
}
