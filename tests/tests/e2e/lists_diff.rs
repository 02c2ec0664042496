//! The list commands of issue 11 differentially against redis-server 7.0, with
//! `--threads 1` and 4, in RESP2 and RESP3: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP (with
//! every kind of count), LLEN, LRANGE, LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS (RANK,
//! COUNT, MAXLEN), LMOVE, RPOPLPUSH and LMPOP, with every error and in Redis's order of
//! checks; OBJECT ENCODING, TYPE and SCAN TYPE; WRONGTYPE both ways; lists long enough
//! to span many nodes and elements larger than a node; the multi-key commands with their
//! keys in one slot, on one shard and on different shards, alone and inside MULTI/EXEC.
//! Then seeded random sequences over four keys, compared reply by reply.
//!
//! Last, the cross-shard moves under concurrency (not differential): LMOVE and RPOPLPUSH
//! between two lists on different shards, both ways at once, never lose or duplicate an
//! element, and a reader in MULTI/EXEC never sees an element in both lists or in neither.
//!
//! Replay a failing sequence with `GOBLIN_DIFF_SEED=<seed>` (printed).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use goblin_tests::cmd::{Cmd, call, cmd, pipeline, scan_all, script_commands};
use goblin_tests::diff::{How, compare, compare_pipeline, for_each_thread_count, script};
use goblin_tests::keys::{LAYOUTS, Layout, keys_on};
use goblin_tests::reply::{elements, integer, ok, simple};
use goblin_tests::rng::{Rng, seeds};
use goblin_tests::{Differential, Server, StopOnDrop, assert_bytes_eq, show};

/// Switches both servers' connections to RESP `version` (HELLO's replies differ between
/// the servers: they are not compared).
fn hello(d: &mut Differential, version: &str) {
    for raw in [&mut d.g, &mut d.r] {
        let reply = raw.cmd(&[b"HELLO", version.as_bytes()]);
        assert!(
            !reply.starts_with(b"-"),
            "HELLO {version}: {}",
            show(&reply)
        );
    }
}

/// Runs `text` with `n` keys in every layout and with each thread count, in RESP2 and
/// then again in RESP3, from an empty keyspace each time.
fn script_both_protocols(n: usize, text: &str) {
    for_each_thread_count(|d, ctx| {
        for version in ["2", "3"] {
            hello(d, version);
            for layout in LAYOUTS {
                let ctx = format!("{ctx}, {layout:?}, RESP{version}");
                script(d, &[], &ctx, "FLUSHALL");
                script(d, &layout.keys(n), &ctx, text);
            }
        }
        hello(d, "2");
    });
}

/// Pushes and pops at both ends, LLEN, the X forms, and every kind of count: absent,
/// 0, 1, more than the length, negative, not an integer, huge; on absent keys (nil or
/// nil array), on other types, and with too many arguments.
#[test]
fn push_pop_llen_match_redis() {
    script_both_protocols(
        2,
        r#"
        LPUSH K0 a
        LPUSH K0 b c d
        RPUSH K0 e f
        LLEN K0
        LRANGE K0 0 -1
        LPUSHX K0 x y
        RPUSHX K0 z
        LPUSHX K1 x
        RPUSHX K1 x
        EXISTS K1
        LLEN K1
        LPOP K0
        RPOP K0
        LPOP K0 0
        RPOP K0 0
        LPOP K0 1
        RPOP K0 2
        LPOP K0 -1
        RPOP K0 -5
        LPOP K0 x
        RPOP K0 ""
        LPOP K0 1.5
        LPOP K0 1 2
        RPOP K0 1 2 3
        LPOP K1
        RPOP K1
        LPOP K1 0
        RPOP K1 1
        LPOP K1 -1
        LPOP K1 x
        LRANGE K0 0 -1
        LPOP K0 9223372036854775807
        EXISTS K0
        RPUSH K0 1 2 3
        RPOP K0 100
        EXISTS K0
        LPOP K0
        RPOP K0
        SET K1 str
        LPUSH K1 a
        RPUSH K1 a
        LPUSHX K1 a
        RPUSHX K1 a
        LPOP K1
        RPOP K1
        LPOP K1 0
        LPOP K1 -1
        LLEN K1
        LPUSH K0 "\x00\r\n" "" "a b"
        LRANGE K0 0 -1
        LPOP K0 3
        LPUSH
        LPUSH K0
        RPUSH K0
        LPUSHX K0
        LPOP
        LLEN
        LLEN K0 K1
        "#,
    );
}

/// LRANGE, LINDEX and LSET at every kind of index (negative, past either end, the
/// extremes of a 64-bit integer, not an integer), in Redis's order of checks.
#[test]
fn lrange_lindex_lset_match_redis() {
    let mut text = String::from(
        r#"
        RPUSH K0 a b c d e
        LRANGE K1 0 -1
        LRANGE K1 x 1
        LRANGE K0 x 1
        LRANGE K0 1 x
        LINDEX K1 x
        LINDEX K1 0
        LINDEX K0 x
        LINDEX K0 1.0
        LSET K1 0 v
        LSET K1 x v
        LSET K0 x v
        LSET K0 5 v
        LSET K0 -6 v
        LSET K0 9223372036854775807 v
        LSET K0 -9223372036854775808 v
        LSET K0 0 A
        LSET K0 -1 E
        LSET K0 2 ""
        LRANGE K0 0 -1
        SET K2 s
        LRANGE K2 0 -1
        LRANGE K2 x 0
        LINDEX K2 0
        LINDEX K2 x
        LSET K2 0 v
        LSET K2 x v
        LRANGE K0 0
        LINDEX K0
        LSET K0 0
        "#,
    );
    let indexes = [
        "0",
        "1",
        "4",
        "5",
        "6",
        "-1",
        "-5",
        "-6",
        "-100",
        "100",
        "9223372036854775807",
        "-9223372036854775808",
    ];
    for a in indexes {
        text.push_str(&format!("LINDEX K0 {a}\n"));
        for b in indexes {
            text.push_str(&format!("LRANGE K0 {a} {b}\n"));
        }
    }
    script_both_protocols(3, &text);
}

/// LINSERT, LREM and LTRIM: pivots found or not, every count of LREM (the extremes
/// included), every kind of range of LTRIM (a key trimmed away is deleted), errors first.
#[test]
fn linsert_lrem_ltrim_match_redis() {
    let mut text = String::from(
        r#"
        RPUSH K0 a b a c a
        LINSERT K0 BEFORE a x
        LINSERT K0 after a y
        LINSERT K0 AfTeR c z
        LINSERT K0 BEFORE nope x
        LINSERT K0 MIDDLE a x
        LINSERT K1 BEFORE a x
        LINSERT K1 MIDDLE a x
        LINSERT K0 BEFORE "" x
        LRANGE K0 0 -1
        LREM K0 1 a
        LREM K0 -1 a
        LRANGE K0 0 -1
        LREM K0 0 a
        LREM K0 0 nope
        LREM K1 0 a
        LREM K0 x a
        LREM K1 x a
        RPUSH K2 a b a b a b a
        LREM K2 -9223372036854775808 a
        LRANGE K2 0 -1
        RPUSH K2 b b
        LREM K2 9223372036854775807 b
        EXISTS K2
        SET K2 s
        LINSERT K2 BEFORE a b
        LINSERT K2 MIDDLE a b
        LREM K2 0 a
        LREM K2 x a
        LTRIM K2 0 1
        LTRIM K2 x 1
        LTRIM K1 0 1
        LTRIM K1 x 1
        LTRIM K0 x 1
        LTRIM K0 0 x
        LINSERT K0 BEFORE a
        LREM K0 1
        LTRIM K0 1
        RPUSH K5 1 01 -0 +1 " 1" 1.0 -1 9223372036854775807 9223372036854775808 1
        LPOS K5 1 COUNT 0
        LPOS K5 01 COUNT 0
        LPOS K5 -0
        LPOS K5 9223372036854775808
        LINSERT K5 AFTER 01 x
        LINSERT K5 BEFORE 1 y
        LREM K5 0 1
        LREM K5 0 -1
        LRANGE K5 0 -1
        "#,
    );
    for (a, b) in [
        ("0", "-1"),
        ("1", "-2"),
        ("-3", "-1"),
        ("0", "0"),
        ("-100", "100"),
        ("2", "1"),
        ("5", "10"),
        ("-1", "-2"),
        ("0", "-9223372036854775808"),
        ("-9223372036854775808", "9223372036854775807"),
    ] {
        text.push_str(&format!(
            "DEL K3\nRPUSH K3 a b c d e f\nLTRIM K3 {a} {b}\nLRANGE K3 0 -1\nEXISTS K3\n"
        ));
    }
    script_both_protocols(6, &text);
}

/// LPOS with every option, alone and combined, repeated, in any case, and every error:
/// RANK 0 (and RANK -9223372036854775808, which Redis takes as -1), negative or
/// non-integer COUNT and MAXLEN, unknown options and missing values; nil or an empty
/// array on an absent key.
#[test]
fn lpos_matches_redis() {
    let mut text = String::from(
        r#"
        RPUSH K0 a b c a b c a a x
        LPOS K0 a
        LPOS K0 x
        LPOS K0 nope
        LPOS K1 a
        LPOS K1 a COUNT 0
        LPOS K1 a RANK 0
        LPOS K1 a COUNT -1
        LPOS K0 a RANK 0
        LPOS K0 a RANK x
        LPOS K0 a RANK 1.5
        LPOS K0 a COUNT -1
        LPOS K0 a COUNT x
        LPOS K0 a MAXLEN -1
        LPOS K0 a MAXLEN x
        LPOS K0 a RANK
        LPOS K0 a COUNT
        LPOS K0 a MAXLEN
        LPOS K0 a FOO
        LPOS K0 a FOO 1
        LPOS K0 a RANK 0 COUNT -1
        LPOS K0 a COUNT -1 RANK 0
        LPOS K0 a RANK 1 FOO
        LPOS K0 a rank -1 count 0 maxlen 0
        LPOS K0 a RANK 2 RANK -2
        LPOS K0 a COUNT 1 COUNT 0
        LPOS K0 a RANK -9223372036854775808
        LPOS K0 a RANK -9223372036854775808 COUNT 1
        LPOS K0 a RANK -9223372036854775808 COUNT 0
        LPOS K0 a RANK 9223372036854775807
        LPOS K0 a RANK 9223372036854775807 COUNT 0
        LPOS K0 a RANK -9223372036854775807 COUNT 2
        LPOS K0 a COUNT 9223372036854775807
        LPOS K0 a MAXLEN 9223372036854775807
        SET K2 s
        LPOS K2 a
        LPOS K2 a RANK 0
        LPOS K2 a COUNT 1
        LPOS K0
        "#,
    );
    for rank in ["1", "2", "3", "5", "-1", "-2", "-4", "-5"] {
        for count in ["", "COUNT 0", "COUNT 1", "COUNT 2", "COUNT 10"] {
            for maxlen in ["", "MAXLEN 0", "MAXLEN 1", "MAXLEN 4", "MAXLEN 9"] {
                text.push_str(&format!("LPOS K0 a RANK {rank} {count} {maxlen}\n"));
            }
        }
    }
    script_both_protocols(3, &text);
}

/// LMOVE in every direction, RPOPLPUSH, a list moved onto itself (a rotation, even of
/// one element), an absent source (nil whatever the destination holds), a source or a
/// destination of another type (nothing moves), errors in the directions first; in
/// every layout (same slot, same shard, different shards), and inside MULTI/EXEC.
#[test]
fn lmove_rpoplpush_match_redis() {
    script_both_protocols(
        4,
        r#"
        RPUSH K0 a b c d
        LMOVE K0 K1 LEFT LEFT
        LMOVE K0 K1 LEFT RIGHT
        LMOVE K0 K1 RIGHT LEFT
        LMOVE K0 K1 right right
        LRANGE K0 0 -1
        LRANGE K1 0 -1
        EXISTS K0
        LMOVE K0 K1 LEFT LEFT
        RPOPLPUSH K1 K0
        RPOPLPUSH K1 K1
        LMOVE K1 K1 LEFT RIGHT
        LMOVE K1 K1 RIGHT LEFT
        LMOVE K1 K1 LEFT LEFT
        LRANGE K1 0 -1
        LRANGE K0 0 -1
        LMOVE K0 K0 LEFT RIGHT
        RPOPLPUSH K0 K0
        LRANGE K0 0 -1
        LMOVE K0 K1 UP LEFT
        LMOVE K0 K1 LEFT DOWN
        LMOVE K3 K1 UP LEFT
        LMOVE K3 K1 LEFT LEFT
        RPOPLPUSH K3 K1
        SET K2 s
        LMOVE K3 K2 LEFT LEFT
        RPOPLPUSH K3 K2
        LMOVE K0 K2 LEFT LEFT
        RPOPLPUSH K0 K2
        LMOVE K2 K0 LEFT LEFT
        RPOPLPUSH K2 K0
        LMOVE K2 K3 LEFT LEFT
        LMOVE K2 K2 LEFT LEFT
        LRANGE K0 0 -1
        LRANGE K1 0 -1
        GET K2
        EXISTS K3
        RPOPLPUSH K1 K3
        RPOPLPUSH K1 K3
        RPOPLPUSH K1 K3
        LRANGE K3 0 -1
        EXISTS K1
        MULTI
        LMOVE K3 K1 LEFT RIGHT
        RPOPLPUSH K3 K1
        LMOVE K2 K1 LEFT RIGHT
        LMOVE K3 K2 LEFT RIGHT
        LRANGE K1 0 -1
        EXEC
        LMOVE K0 K1 LEFT
        RPOPLPUSH K0
        LMOVE K0 K1 LEFT RIGHT extra
        RPOPLPUSH K0 K1 K2
        "#,
    );
}

/// LMPOP: the first key holding a list in argument order, a key of another type before
/// it (WRONGTYPE) or after it (not looked at), COUNT below and above the length, every
/// parsing error (numkeys, the direction, COUNT, repeated or unknown options); in every
/// layout and inside MULTI/EXEC.
#[test]
fn lmpop_matches_redis() {
    script_both_protocols(
        4,
        r#"
        LMPOP 2 K0 K1 LEFT
        LMPOP 1 K0 RIGHT COUNT 5
        RPUSH K1 a b c d e
        LMPOP 2 K0 K1 LEFT
        LMPOP 2 K0 K1 RIGHT
        LMPOP 2 K1 K0 left COUNT 2
        LMPOP 3 K0 K0 K1 right count 100
        EXISTS K1
        RPUSH K2 x y
        SET K3 s
        LMPOP 3 K0 K3 K2 LEFT
        LMPOP 3 K0 K2 K3 LEFT
        LMPOP 2 K3 K2 LEFT
        LMPOP 1 K3 LEFT COUNT 1
        LMPOP 2 K0 K1 LEFT
        LMPOP 0 K0 LEFT
        LMPOP -1 K0 LEFT
        LMPOP x K0 LEFT
        LMPOP 1.5 K0 LEFT
        LMPOP 9223372036854775807 K0 LEFT
        LMPOP 9223372036854775806 K0 LEFT
        LMPOP 4294967298 K0 K1 LEFT
        LMPOP 2147483648 K0 LEFT
        LMPOP 4294967297 K0 LEFT
        LMPOP 2 K0 LEFT
        LMPOP 3 K0 K1 LEFT
        LMPOP 1 K0 MIDDLE
        LMPOP 1 K0 LEFT COUNT
        LMPOP 1 K0 LEFT COUNT 0
        LMPOP 1 K0 LEFT COUNT -1
        LMPOP 1 K0 LEFT COUNT x
        LMPOP 1 K0 LEFT COUNT 1 COUNT 1
        LMPOP 1 K0 LEFT FOO
        LMPOP 1 K0 LEFT COUNT 1 FOO
        LMPOP 1 K3 MIDDLE
        LMPOP 1 K3 LEFT COUNT 0
        LMPOP 2 K0 K1 LEFT COUNT 9223372036854775807
        RPUSH K0 1 2 3
        RPUSH K1 4 5 6
        MULTI
        LMPOP 2 K0 K1 LEFT COUNT 2
        LMPOP 2 K0 K1 RIGHT COUNT 2
        LMPOP 2 K0 K1 LEFT COUNT 2
        LMPOP 2 K3 K1 LEFT
        LMPOP 2 K0 K1 LEFT
        EXEC
        LMPOP
        LMPOP 1
        LMPOP 1 K0
        "#,
    );
}

/// OBJECT ENCODING of lists as redis-server 7.0 reports it (always `quicklist`) across
/// every size and operation: a small list, elements larger than a node, thousands of
/// elements, after pops, LTRIM, LREM, LSET and LINSERT of large elements; with TYPE and
/// SCAN's TYPE filter.
#[test]
fn object_encoding_type_and_scan_match_redis() {
    let big = "x".repeat(9000);
    let mid = "m".repeat(70);
    let text = format!(
        r#"
        RPUSH K0 a
        OBJECT ENCODING K0
        TYPE K0
        RPUSH K0 {mid}
        OBJECT ENCODING K0
        RPUSH K1 {big}
        OBJECT ENCODING K1
        LPOP K1
        EXISTS K1
        RPUSH K1 a b c
        LSET K1 1 {big}
        OBJECT ENCODING K1
        LSET K1 1 b
        OBJECT ENCODING K1
        LINSERT K1 BEFORE b {big}
        OBJECT ENCODING K1
        LREM K1 0 {big}
        OBJECT ENCODING K1
        LTRIM K1 0 0
        OBJECT ENCODING K1
        LRANGE K1 0 -1
        OBJECT ENCODING K2
        TYPE K2
        SET K2 s
        TYPE K2
        HSET K3 f v
        TYPE K3
        "#
    );
    script_both_protocols(4, &text);
    // SCAN's TYPE filter finds the lists, and only them.
    for_each_thread_count(|d, ctx| {
        let keys = Layout::CrossShard.keys(8);
        let mut cmds = vec![cmd(&["FLUSHALL"])];
        for (i, k) in keys.iter().enumerate() {
            cmds.push(match i % 3 {
                0 => cmd(&["RPUSH", k, "a"]),
                1 => cmd(&["SET", k, "a"]),
                _ => cmd(&["HSET", k, "f", "v"]),
            });
        }
        compare_pipeline(d, &cmds, ctx);
        for filter in ["list", "LIST", "string"] {
            let mut found = [Vec::new(), Vec::new()];
            for (raw, found) in [&mut d.g, &mut d.r].into_iter().zip(&mut found) {
                let scanned = scan_all(raw, &["TYPE", filter], |_, keys| found.extend(keys));
                assert!(scanned.is_ok(), "{ctx}: SCAN TYPE {filter}: {scanned:?}");
                found.sort();
            }
            assert_eq!(found[0], found[1], "{ctx}: SCAN TYPE {filter}");
        }
    });
    // Thousands of elements: many nodes, then popped back to a few.
    for_each_thread_count(|d, ctx| {
        let keys = Layout::CrossShard.keys(1);
        let k = &keys[0];
        let mut cmds: Vec<Cmd> = Vec::new();
        for i in 0..3000 {
            cmds.push(cmd(&["RPUSH", k, &format!("element-{i}")]));
            if i % 500 == 0 {
                cmds.push(cmd(&["OBJECT", "ENCODING", k]));
            }
        }
        cmds.push(cmd(&["LTRIM", k, "0", "9"]));
        cmds.push(cmd(&["OBJECT", "ENCODING", k]));
        cmds.push(cmd(&["LPOP", k, "9"]));
        cmds.push(cmd(&["OBJECT", "ENCODING", k]));
        compare_pipeline(d, &cmds, ctx);
    });
}

/// WRONGTYPE both ways: every list command on a string, a hash and a sorted set, and
/// other types' commands on a list.
#[test]
fn wrongtype_both_ways_matches_redis() {
    let list_commands = [
        "LPUSH K a",
        "RPUSH K a",
        "LPUSHX K a",
        "RPUSHX K a",
        "LPOP K",
        "RPOP K",
        "LPOP K 2",
        "LLEN K",
        "LRANGE K 0 -1",
        "LINDEX K 0",
        "LSET K 0 a",
        "LINSERT K BEFORE a b",
        "LREM K 0 a",
        "LTRIM K 0 1",
        "LPOS K a",
        "LMOVE K K LEFT RIGHT",
        "RPOPLPUSH K K",
        "LMPOP 1 K LEFT",
    ];
    let mut text = String::from("SET K0 s\nHSET K1 f v\nZADD K2 1 m\nRPUSH K3 a b\n");
    for key in ["K0", "K1", "K2"] {
        for c in list_commands {
            text.push_str(&c.replace(" K", &format!(" {key}")));
            text.push('\n');
        }
    }
    text.push_str(
        r#"
        GET K3
        INCR K3
        APPEND K3 x
        STRLEN K3
        SET K3 v GET
        HSET K3 f v
        HGET K3 f
        ZADD K3 1 m
        ZSCORE K3 m
        LRANGE K3 0 -1
        "#,
    );
    script_both_protocols(4, &text);
}

/// Lists that span many nodes, with elements of every size up to several nodes: LRANGE
/// and LINDEX all over them, LSET, LINSERT and LREM in their middle, LTRIM to a middle
/// range, LPOS from both ends, pops of large counts.
#[test]
fn long_lists_match_redis() {
    let seeds = seeds("long_lists", 1);
    for_each_thread_count(|d, ctx| {
        for &seed in &seeds {
            let ctx = format!("{ctx}, GOBLIN_DIFF_SEED={seed}");
            let mut rng = Rng::new(seed);
            let k = "biglist";
            let mut cmds: Vec<Cmd> = vec![cmd(&["DEL", k])];
            for i in 0..4000 {
                let e = match rng.below(20) {
                    0 => "L".repeat(rng.range(100, 20_000) as usize),
                    1 => String::new(),
                    _ => format!("e{}", i % 97),
                };
                let push = if rng.percent(50) { "LPUSH" } else { "RPUSH" };
                cmds.push(cmd(&[push, k, &e]));
            }
            cmds.push(cmd(&["LLEN", k]));
            for _ in 0..200 {
                let i = rng.range(-4500, 4500).to_string();
                cmds.push(cmd(&["LINDEX", k, &i]));
            }
            for _ in 0..50 {
                let a = rng.range(-4500, 4500).to_string();
                let b = rng.range(-4500, 4500).to_string();
                cmds.push(cmd(&["LRANGE", k, &a, &b]));
            }
            for _ in 0..100 {
                let i = rng.range(-4000, 4000).to_string();
                let e = if rng.percent(10) {
                    "S".repeat(9000)
                } else {
                    format!("set{}", rng.below(10))
                };
                cmds.push(cmd(&["LSET", k, &i, &e]));
                let pivot = format!("e{}", rng.below(97));
                let w = if rng.percent(50) { "BEFORE" } else { "AFTER" };
                cmds.push(cmd(&[
                    "LINSERT",
                    k,
                    w,
                    &pivot,
                    &format!("ins{}", rng.below(5)),
                ]));
            }
            for _ in 0..20 {
                let n = rng.range(-3, 3).to_string();
                let e = format!("e{}", rng.below(97));
                cmds.push(cmd(&["LREM", k, &n, &e]));
                let rank = *rng.pick(&["1", "2", "-1", "-3"]);
                cmds.push(cmd(&["LPOS", k, &e, "RANK", rank, "COUNT", "0"]));
            }
            cmds.push(cmd(&["LRANGE", k, "0", "-1"]));
            cmds.push(cmd(&["LTRIM", k, "500", "-500"]));
            cmds.push(cmd(&["LRANGE", k, "0", "-1"]));
            cmds.push(cmd(&["LPOP", k, "1000"]));
            cmds.push(cmd(&["RPOP", k, "1000"]));
            cmds.push(cmd(&["LRANGE", k, "0", "-1"]));
            cmds.push(cmd(&["RPOP", k, "100000"]));
            cmds.push(cmd(&["EXISTS", k]));
            compare_pipeline(d, &cmds, &ctx);
        }
    });
}

/// The elements a random command uses: a few short ones (so that commands find each
/// other's elements), the empty string, binary bytes, and now and then one larger than
/// a node.
fn random_element(rng: &mut Rng) -> Vec<u8> {
    match rng.below(40) {
        0 => b"\x00\r\n\xff".to_vec(),
        1 => Vec::new(),
        2 => vec![b'B'; rng.range(8000, 9000) as usize],
        _ => vec![*rng.pick(b"abcd")],
    }
}

/// An index for LRANGE, LINDEX, LSET, LTRIM: mostly near the ends of short lists, now
/// and then far away or not an integer.
fn random_index(rng: &mut Rng) -> Vec<u8> {
    match rng.below(30) {
        0 => b"x".to_vec(),
        1 => b"9223372036854775807".to_vec(),
        2 => b"-9223372036854775808".to_vec(),
        _ => rng.range(-12, 12).to_string().into_bytes(),
    }
}

/// A word as an argument.
fn word(w: &str) -> Vec<u8> {
    w.as_bytes().to_vec()
}

/// One of `words`, as an argument.
fn pick_word(rng: &mut Rng, words: &[&str]) -> Vec<u8> {
    word(words[rng.below(words.len())])
}

/// A random list command (or one of another type now and then) over keys `K0`..`K3`.
fn random_command(rng: &mut Rng, keys: &[String]) -> Cmd {
    let key = |rng: &mut Rng| keys[rng.below(keys.len())].as_bytes().to_vec();
    let end = |rng: &mut Rng| rng.pick(&[&b"LEFT"[..], b"RIGHT", b"left"]).to_vec();
    let mut c: Cmd;
    match rng.below(24) {
        0..=3 => {
            c = vec![pick_word(rng, &["LPUSH", "RPUSH"]), key(rng)];
            for _ in 0..rng.range(1, 4) {
                c.push(random_element(rng));
            }
        }
        4 => {
            c = vec![
                pick_word(rng, &["LPUSHX", "RPUSHX"]),
                key(rng),
                random_element(rng),
            ]
        }
        5..=6 => {
            c = vec![pick_word(rng, &["LPOP", "RPOP"]), key(rng)];
            if rng.percent(50) {
                c.push(pick_word(rng, &["0", "1", "2", "5", "-1", "x", "100"]));
            }
        }
        7 => c = vec![word("LLEN"), key(rng)],
        8..=9 => {
            c = vec![
                word("LRANGE"),
                key(rng),
                random_index(rng),
                random_index(rng),
            ]
        }
        10 => c = vec![word("LINDEX"), key(rng), random_index(rng)],
        11 => {
            c = vec![
                word("LSET"),
                key(rng),
                random_index(rng),
                random_element(rng),
            ]
        }
        12 => {
            c = vec![
                word("LINSERT"),
                key(rng),
                pick_word(rng, &["BEFORE", "AFTER", "after", "NEAR"]),
                random_element(rng),
                random_element(rng),
            ];
        }
        13 => {
            let n = rng.range(-3, 3).to_string();
            c = vec![word("LREM"), key(rng), n.into_bytes(), random_element(rng)];
        }
        14 => {
            c = vec![
                word("LTRIM"),
                key(rng),
                random_index(rng),
                random_index(rng),
            ]
        }
        15 => {
            c = vec![word("LPOS"), key(rng), random_element(rng)];
            for _ in 0..rng.below(3) {
                match rng.below(3) {
                    0 => c.extend([word("RANK"), pick_word(rng, &["1", "2", "-1", "-2", "0"])]),
                    1 => c.extend([word("COUNT"), pick_word(rng, &["0", "1", "2", "-1"])]),
                    _ => c.extend([word("MAXLEN"), pick_word(rng, &["0", "1", "3", "-1"])]),
                }
            }
        }
        16..=18 => c = vec![word("LMOVE"), key(rng), key(rng), end(rng), end(rng)],
        19 => c = vec![word("RPOPLPUSH"), key(rng), key(rng)],
        20..=21 => {
            let n = rng.range(1, 4) as usize;
            c = vec![word("LMPOP"), n.to_string().into_bytes()];
            for _ in 0..n {
                c.push(key(rng));
            }
            c.push(end(rng));
            if rng.percent(50) {
                c.extend([word("COUNT"), pick_word(rng, &["1", "2", "10"])]);
            }
        }
        22 => c = vec![pick_word(rng, &["SET", "DEL", "TYPE", "EXISTS"]), key(rng)],
        _ => c = vec![word("OBJECT"), word("ENCODING"), key(rng)],
    }
    if c[0] == b"SET" {
        c.push(b"str".to_vec());
    }
    c
}

/// Seeded random sequences of list commands (with a string key now and then) over four
/// keys, in every layout and with each thread count, in RESP2 and RESP3, compared reply
/// by reply; then every key's final state.
#[test]
fn random_sequences_match_redis() {
    let seeds = seeds("list random sequences", 2);
    for_each_thread_count(|d, ctx| {
        for &seed in &seeds {
            for layout in LAYOUTS {
                let mut rng = Rng::new(seed ^ layout as u64);
                let version = if rng.percent(50) { "2" } else { "3" };
                hello(d, version);
                let ctx = format!("{ctx}, {layout:?}, RESP{version}, GOBLIN_DIFF_SEED={seed}");
                let keys = layout.keys(4);
                let mut cmds = vec![cmd(&["FLUSHALL"])];
                for _ in 0..600 {
                    if rng.percent(2) {
                        cmds.push(cmd(&["MULTI"]));
                        for _ in 0..rng.range(1, 4) {
                            cmds.push(random_command(&mut rng, &keys));
                        }
                        cmds.push(cmd(&["EXEC"]));
                    } else {
                        cmds.push(random_command(&mut rng, &keys));
                    }
                }
                for k in &keys {
                    cmds.push(cmd(&["TYPE", k]));
                    cmds.push(cmd(&["LRANGE", k, "0", "-1"]));
                }
                compare_pipeline(d, &cmds, &ctx);
            }
        }
        hello(d, "2");
    });
}

/// What `LRANGE` of two lists saw, as element → where (0: the first list, 1: the second).
fn places(a: &[Vec<u8>], b: &[Vec<u8>]) -> BTreeMap<Vec<u8>, Vec<usize>> {
    let mut seen: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
    for (list, elements) in [a, b].into_iter().enumerate() {
        for e in elements {
            seen.entry(e.clone()).or_default().push(list);
        }
    }
    seen
}

/// Asserts that the two lists hold every one of `n` elements exactly once.
fn exactly_once(a: &[Vec<u8>], b: &[Vec<u8>], n: usize, what: &str) {
    let seen = places(a, b);
    let wrong: Vec<_> = seen.iter().filter(|(_, at)| at.len() != 1).collect();
    assert!(
        wrong.is_empty() && seen.len() == n,
        "{what}: {} distinct elements of {n}; in both or twice: {:?}",
        seen.len(),
        wrong
            .iter()
            .map(|(e, at)| (String::from_utf8_lossy(e).to_string(), at))
            .collect::<Vec<_>>()
    );
}

/// LMOVE and RPOPLPUSH between two lists on different shards, both ways at once from
/// four connections (one of them rotating a list onto itself now and then), while two
/// readers take both lists in MULTI/EXEC: every read sees each element exactly once, in
/// one list or the other, and so do the lists at the end.
#[test]
fn cross_shard_moves_never_lose_or_duplicate_under_concurrency() {
    /// Elements moved around.
    const N: usize = 60;
    /// How long the movers run, at least…
    const RUN: Duration = Duration::from_millis(1500);
    /// …and the reads each reader must have made (unless the run takes this long).
    const MIN_READS: usize = 50;
    const GIVE_UP: Duration = Duration::from_secs(20);
    for threads in [2, 4] {
        let server = Server::goblin_threads(threads);
        let a = keys_on("qa", 0, threads, 1).remove(0);
        let b = keys_on("qb", 1, threads, 1).remove(0);
        let what = format!("--threads {threads}");
        let mut setup = server.raw();
        let mut push = vec![b"RPUSH".to_vec(), a.as_bytes().to_vec()];
        push.extend((0..N).map(|i| format!("job-{i}").into_bytes()));
        assert_eq!(integer(&call(&mut setup, &push)), N as i64);
        let stop = AtomicBool::new(false);
        let reads = AtomicUsize::new(0);
        let moves = AtomicUsize::new(0);
        let start = Instant::now();
        thread::scope(|s| {
            let _stop_on_panic = StopOnDrop(&stop);
            let movers: Vec<_> = (0..4)
                .map(|m| {
                    let mut raw = server.raw();
                    let (a, b, stop, moves) = (&a, &b, &stop, &moves);
                    s.spawn(move || {
                        let mut rng = Rng::new(m as u64 + 1);
                        let (src, dst) = if m % 2 == 0 { (a, b) } else { (b, a) };
                        while !stop.load(Ordering::SeqCst) {
                            let c = match rng.below(8) {
                                0 => cmd(&["RPOPLPUSH", src, dst]),
                                1 if m == 3 => cmd(&["LMOVE", src, src, "LEFT", "RIGHT"]),
                                _ => {
                                    let from = rng.pick(&["LEFT", "RIGHT"]);
                                    let to = rng.pick(&["LEFT", "RIGHT"]);
                                    cmd(&["LMOVE", src, dst, from, to])
                                }
                            };
                            let reply = call(&mut raw, &c);
                            assert!(
                                reply.starts_with(b"$"),
                                "{}: {}",
                                String::from_utf8_lossy(&c[0]),
                                show(&reply)
                            );
                            if reply != b"$-1\r\n" {
                                moves.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    })
                })
                .collect();
            let readers: Vec<_> = (0..2)
                .map(|r| {
                    let mut raw = server.raw();
                    let (a, b, stop, reads, what) = (&a, &b, &stop, &reads, &what);
                    s.spawn(move || {
                        let (first, second) = if r == 0 { (a, b) } else { (b, a) };
                        let block = vec![
                            cmd(&["MULTI"]),
                            cmd(&["LRANGE", first, "0", "-1"]),
                            cmd(&["LRANGE", second, "0", "-1"]),
                            cmd(&["EXEC"]),
                        ];
                        while !stop.load(Ordering::SeqCst) {
                            let replies = pipeline(&mut raw, &block);
                            assert_eq!(replies[0], ok());
                            assert_bytes_eq!(replies[1], simple("QUEUED"));
                            let exec = elements(&replies[3]);
                            assert_eq!(exec.len(), 2, "{what}: {}", show(&replies[3]));
                            exactly_once(
                                &elements(&exec[0]),
                                &elements(&exec[1]),
                                N,
                                &format!("{what}, a reader's EXEC"),
                            );
                            reads.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            while start.elapsed() < GIVE_UP
                && (start.elapsed() < RUN || reads.load(Ordering::SeqCst) < 2 * MIN_READS)
                && !movers.iter().chain(&readers).any(|h| h.is_finished())
            {
                thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, Ordering::SeqCst);
            for h in movers.into_iter().chain(readers) {
                if let Err(e) = h.join() {
                    std::panic::resume_unwind(e);
                }
            }
        });
        let in_a = elements(&call(&mut setup, &cmd(&["LRANGE", &a, "0", "-1"])));
        let in_b = elements(&call(&mut setup, &cmd(&["LRANGE", &b, "0", "-1"])));
        exactly_once(&in_a, &in_b, N, &format!("{what}, at the end"));
        assert!(
            moves.load(Ordering::SeqCst) > 100,
            "{what}: only {} moves",
            moves.load(Ordering::SeqCst)
        );
        assert!(
            reads.load(Ordering::SeqCst) >= MIN_READS,
            "{what}: too few reads"
        );
    }
}

/// The script helpers run commands one by one; a pipeline of the same script must give
/// the same replies (LMOVE's plan and the plain commands after it keep their order).
#[test]
fn pipelined_cross_shard_moves_keep_their_order() {
    for_each_thread_count(|d, ctx| {
        let keys = Layout::CrossShard.keys(3);
        let cmds = script_commands(
            r#"
            FLUSHALL
            RPUSH K0 a b c d e f
            LMOVE K0 K1 LEFT RIGHT
            LRANGE K1 0 -1
            RPOPLPUSH K0 K1
            LPUSH K1 x
            LMOVE K1 K2 LEFT LEFT
            LMPOP 3 K2 K1 K0 LEFT COUNT 2
            LRANGE K0 0 -1
            LRANGE K1 0 -1
            LRANGE K2 0 -1
            LMPOP 3 K2 K0 K1 RIGHT COUNT 10
            LMPOP 3 K2 K0 K1 RIGHT COUNT 10
            LMPOP 3 K2 K0 K1 RIGHT COUNT 10
            "#,
            &keys,
        );
        compare_pipeline(d, &cmds, ctx);
        compare(d, &cmd(&["DBSIZE"]), How::Exact, ctx);
    });
}
