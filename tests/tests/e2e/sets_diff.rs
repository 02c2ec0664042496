//! The set commands of issue 10 differentially against redis-server 7.0, with `--threads
//! 1` and 4, in RESP2 and RESP3: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP,
//! SRANDMEMBER, SMOVE, SINTER, SUNION, SDIFF, SINTERCARD, SINTERSTORE, SUNIONSTORE,
//! SDIFFSTORE, SSCAN — every option and error path, OBJECT ENCODING through every
//! conversion (STORE destinations and SPOP's rebuilt sets included), TYPE and SCAN TYPE,
//! WRONGTYPE both ways, multi-key commands with their keys in one slot, on one shard and on
//! different shards; then seeded random sequences over a few keys, compared reply by reply.
//!
//! Where Redis's order is unspecified (the members of a hashtable, random picks) replies
//! are compared as multisets; random picks (SPOP, SRANDMEMBER) are compared by their shape
//! (how many, distinct or not, drawn from the set), and a key SPOP changed is made the same
//! again on both servers before the sequence goes on. A hashtable's SSCAN cursor is
//! Goblin's own (a hash value), so whole iterations are compared; that one returns every
//! member present throughout is tested under concurrent changes.
//!
//! Replay a failing random sequence with `GOBLIN_DIFF_SEED=<seed>` (printed).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use goblin_tests::cmd::{Cmd, call, cmd, script_lines, show_cmd, substitute, words};
use goblin_tests::diff::{ask_both, differences, for_each_thread_count};
use goblin_tests::keys::{LAYOUTS, Layout, THREADS};
use goblin_tests::reply::{bulks, elements, integer, scan_reply, sorted_elements};
use goblin_tests::rng::{Rng, seeds};
use goblin_tests::{Differential, Raw, Server, StopOnDrop, show};

/// How a reply is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    /// Byte for byte.
    Exact,
    /// An array or a RESP3 set as a multiset (same type, same elements in any order).
    Sorted,
    /// A SCAN reply: the same cursor, the same elements in any order.
    Scan,
}

/// A SCAN reply's cursor and sorted elements; `None` for anything else.
fn scan_sorted(reply: &[u8]) -> Option<(u64, Vec<Vec<u8>>)> {
    if !reply.starts_with(b"*2\r\n") {
        return None;
    }
    let (cursor, mut items) = scan_reply(reply);
    items.sort();
    Some((cursor, items))
}

/// The elements of an array or RESP3 set reply, sorted; `None` for anything else.
fn sorted_any(reply: &[u8]) -> Option<Vec<Vec<u8>>> {
    match reply.first() {
        Some(b'~') => {
            let mut as_array = reply.to_vec();
            as_array[0] = b'*';
            sorted_elements(&as_array)
        }
        Some(b'*') => sorted_elements(reply),
        _ => None,
    }
}

/// Sends `args` to both servers and asserts their replies are the same as `how` says;
/// returns goblin's.
fn compare(d: &mut Differential, args: &[Vec<u8>], how: Cmp, ctx: &str) -> Vec<u8> {
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let (got, want) = ask_both(&mut d.g, &mut d.r, &refs);
    let same = got == want
        || match how {
            Cmp::Exact => false,
            Cmp::Sorted => {
                got.first() == want.first()
                    && sorted_any(&got).is_some()
                    && sorted_any(&got) == sorted_any(&want)
            }
            Cmp::Scan => scan_sorted(&got).is_some() && scan_sorted(&got) == scan_sorted(&want),
        };
    assert!(
        same,
        "{ctx}: reply to {} differs ({how:?})\n{}",
        show_cmd(args),
        differences(&got, &want)
    );
    got
}

/// Runs a script (one command a line; `K0`, `K1`… stand for `keys`; a line starting with
/// `%` is compared as a multiset, one starting with `@` as a SCAN reply).
fn run(d: &mut Differential, keys: &[String], ctx: &str, text: &str) {
    for line in script_lines(text) {
        let (how, line) = if let Some(rest) = line.strip_prefix('%') {
            (Cmp::Sorted, rest)
        } else if let Some(rest) = line.strip_prefix('@') {
            (Cmp::Scan, rest)
        } else {
            (Cmp::Exact, line)
        };
        compare(d, &substitute(words(line), keys), how, ctx);
    }
}

/// Switches both connections to protocol `version` (HELLO's replies differ by server and
/// are not compared).
fn hello(d: &mut Differential, version: &str) {
    let c = cmd(&["HELLO", version]);
    let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
    let (g, r) = ask_both(&mut d.g, &mut d.r, &args);
    assert!(
        !g.starts_with(b"-") && !r.starts_with(b"-"),
        "HELLO {version}"
    );
}

/// Runs `text` in RESP2 then in RESP3 with `n` keys in every layout, from an empty
/// keyspace each time, with each thread count.
fn everywhere(n: usize, text: &str) {
    for_each_thread_count(|d, ctx| {
        for layout in LAYOUTS {
            for version in ["2", "3"] {
                let ctx = format!("{ctx}, {layout:?}, RESP{version}");
                hello(d, version);
                run(d, &[], &ctx, "FLUSHALL");
                run(d, &layout.keys(n), &ctx, text);
            }
        }
        hello(d, "2");
    });
}

/// Runs `text` in RESP2 then in RESP3 with `n` keys on different shards, with each thread
/// count: for scripts whose commands take one key each.
fn on_both(n: usize, text: &str) {
    for_each_thread_count(|d, ctx| {
        for version in ["2", "3"] {
            let ctx = format!("{ctx}, RESP{version}");
            hello(d, version);
            run(d, &[], &ctx, "FLUSHALL");
            run(d, &Layout::CrossShard.keys(n), &ctx, text);
        }
        hello(d, "2");
    });
}

/// The integers `from..=to`, space-separated.
fn ints(from: i64, to: i64) -> String {
    (from..=to)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD: new and repeated members, absent
/// keys, strict integers, binary members, an emptied set disappearing, arity.
#[test]
fn single_key_commands_match_redis() {
    on_both(
        4,
        r#"
        SADD K0 a b c a
        SADD K0 b d
        %SMEMBERS K0
        SCARD K0
        SISMEMBER K0 a
        SISMEMBER K0 z
        SMISMEMBER K0 a z b a
        SMISMEMBER K3 a b
        SISMEMBER K3 a
        SCARD K3
        SMEMBERS K3
        SREM K0 a z a
        SREM K3 a
        SREM K0 b c d
        EXISTS K0
        TYPE K0
        SADD K0 3 1 2 -5 1
        SMEMBERS K0
        OBJECT ENCODING K0
        SISMEMBER K0 1
        SISMEMBER K0 01
        SISMEMBER K0 "1 "
        SMISMEMBER K0 -5 +1 -0 1.0 x
        SREM K0 01 +1
        SCARD K0
        SADD K0 01 -0 +1 1.0 "" " 1" 9223372036854775808 -9223372036854775809
        OBJECT ENCODING K0
        %SMEMBERS K0
        SISMEMBER K0 01
        SISMEMBER K0 ""
        SREM K0 "" 01 1 +1
        %SMEMBERS K0
        SADD K1 "\x00\xff" "a\r\nb" "\x00"
        %SMEMBERS K1
        SISMEMBER K1 "\x00"
        SMISMEMBER K1 "\x00\xff" "\x00\xfe"
        SADD K2 9223372036854775807 -9223372036854775808 0
        SMEMBERS K2
        OBJECT ENCODING K2
        SADD K0
        SADD
        SREM K0
        SMEMBERS
        SMEMBERS K0 K1
        SISMEMBER K0
        SISMEMBER K0 a b
        SMISMEMBER K0
        SCARD
        SCARD K0 K1
        "#,
    );
}

/// Set commands on keys of other types, and other types' commands on sets: WRONGTYPE
/// both ways; TYPE; SCAN with TYPE set; DEL, EXPIRE, RENAME, COPY of sets.
#[test]
fn wrong_types_both_ways_and_key_commands_match_redis() {
    on_both(
        6,
        r#"
        SET K0 v
        HSET K1 f v
        ZADD K2 1 m
        SADD K3 a b
        SADD K4 1 2
        SADD K0 a
        SREM K0 a
        SMEMBERS K1
        SISMEMBER K2 a
        SMISMEMBER K0 a
        SCARD K1
        SPOP K0
        SPOP K1 2
        SPOP K2 0
        SRANDMEMBER K0
        SRANDMEMBER K1 2
        SRANDMEMBER K2 -2
        SRANDMEMBER K0 0
        SSCAN K0 0
        SSCAN K1 0 COUNT 0
        SINTER K0
        SUNION K1
        SDIFF K2
        SINTERCARD 1 K0
        GET K3
        INCR K4
        APPEND K3 x
        STRLEN K3
        GETRANGE K3 0 1
        HSET K3 f v
        HGET K3 f
        ZADD K4 1 m
        ZSCORE K3 m
        TYPE K3
        TYPE K4
        TYPE K5
        EXISTS K3 K4
        EXPIRE K3 100
        TTL K3
        PERSIST K3
        DEL K3
        TYPE K3
        "#,
    );
    for_each_thread_count(|d, ctx| {
        run(d, &[], ctx, "FLUSHALL");
        let keys = Layout::CrossShard.keys(8);
        run(
            d,
            &keys,
            ctx,
            "SADD K0 a\nSADD K1 1\nSET K2 v\nHSET K3 f v\nSADD K4 x y\nZADD K5 1 m",
        );
        for ty in ["set", "SET", "string", "hash", "zset"] {
            let got = |raw: &mut Raw| {
                let c = cmd(&["SCAN", "0", "TYPE", ty, "COUNT", "1000"]);
                let (cursor, mut keys) = scan_reply(&call(raw, &c));
                keys.sort();
                (cursor, keys)
            };
            assert_eq!(got(&mut d.g), got(&mut d.r), "{ctx}: SCAN TYPE {ty}");
        }
    });
}

/// OBJECT ENCODING through every conversion: integers make an intset in any width, a
/// non-integer or a 513th member make a hashtable for good; new sets of SMOVE; STORE
/// destinations get the encoding their size calls for (and SDIFFSTORE's, when Redis
/// copies the first set whole, the first set's); COPY and RENAME keep the encoding.
#[test]
fn encodings_match_redis() {
    let script = format!(
        r#"
        SADD K0 1 70000 5000000000 -32768
        OBJECT ENCODING K0
        SMEMBERS K0
        SADD K0 a
        OBJECT ENCODING K0
        SREM K0 a
        OBJECT ENCODING K0
        SADD K1 {all512}
        OBJECT ENCODING K1
        SADD K1 1 512
        OBJECT ENCODING K1
        SMEMBERS K1
        SADD K1 513
        OBJECT ENCODING K1
        SREM K1 513
        OBJECT ENCODING K1
        SCARD K1
        SADD K2 x
        OBJECT ENCODING K2
        SADD K3 {all512} 513
        OBJECT ENCODING K3
        SADD K4 1 2 3 zz
        SREM K4 zz
        SINTERSTORE K5 K4 K1
        OBJECT ENCODING K5
        SMEMBERS K5
        SUNIONSTORE K5 K4 K1
        OBJECT ENCODING K5
        SCARD K5
        SUNIONSTORE K5 K1 K3
        OBJECT ENCODING K5
        SUNIONSTORE K5 K4 K2
        OBJECT ENCODING K5
        SUNIONSTORE K5 K4
        OBJECT ENCODING K5
        SDIFFSTORE K5 K3 K4
        OBJECT ENCODING K5
        SCARD K5
        SDIFFSTORE K5 K1 K4
        OBJECT ENCODING K5
        SADD K6 {first100}
        SADD K7 {second100}
        SDIFFSTORE K5 K3 K6 K7
        OBJECT ENCODING K5
        SCARD K5
        SDIFFSTORE K5 K3 K6
        OBJECT ENCODING K5
        SINTERSTORE K5 K3 K1
        OBJECT ENCODING K5
        SINTERSTORE K5 K3 K3
        OBJECT ENCODING K5
        SMOVE K0 K8 1
        OBJECT ENCODING K8
        SADD K0 b
        SMOVE K0 K9 b
        OBJECT ENCODING K9
        SMOVE K4 K8 2
        SMOVE K4 K8 3
        OBJECT ENCODING K8
        SMEMBERS K8
        EXISTS K4
        COPY K0 K4
        OBJECT ENCODING K4
        RENAME K4 K6
        OBJECT ENCODING K6
        SMEMBERS K6
        "#,
        all512 = ints(1, 512),
        first100 = ints(1, 100),
        second100 = ints(101, 200),
    );
    everywhere(10, &script);
}

/// SINTER, SUNION, SDIFF, SINTERCARD and the STORE forms: absent keys, a key of another
/// type anywhere (nothing stored), repeated keys, the destination among the sources, a
/// destination of another type or with an expiry replaced, an empty result deleting the
/// destination; SINTERCARD's numkeys and LIMIT and their errors; arity.
#[test]
fn algebra_matches_redis() {
    everywhere(
        6,
        r#"
        SADD K0 a b c d 1 2
        SADD K1 c d e 2 3
        SADD K2 d 2 x
        %SINTER K0 K1 K2
        %SINTER K0 K1
        %SINTER K0
        SINTER K0 K5
        SINTER K5 K0
        %SINTER K0 K0 K1
        %SUNION K0 K1 K2
        %SUNION K5 K0 K5
        SUNION K5
        %SDIFF K0 K1 K2
        %SDIFF K0 K5 K1
        SDIFF K5 K0
        SDIFF K0 K0
        SDIFF K0 K1 K0
        %SDIFF K1 K2 K2
        SINTERCARD 3 K0 K1 K2
        SINTERCARD 2 K0 K1
        SINTERCARD 2 K0 K1 LIMIT 1
        SINTERCARD 2 K0 K1 limit 0
        SINTERCARD 2 K0 K1 LIMIT 100
        SINTERCARD 2 K0 K1 LIMIT 2 LIMIT 3
        SINTERCARD 1 K0
        SINTERCARD 2 K0 K5
        SINTERCARD 0 K0
        SINTERCARD -1 K0
        SINTERCARD x K0
        SINTERCARD 3 K0 K1
        SINTERCARD 99999999999999999999 K0
        SINTERCARD 2 K0 K1 LIMIT -1
        SINTERCARD 2 K0 K1 LIMIT x
        SINTERCARD 2 K0 K1 LIMIT
        SINTERCARD 2 K0 K1 FOO 1
        SINTERCARD 1 K0 K1
        SINTERSTORE K3 K0 K1 K2
        %SMEMBERS K3
        SUNIONSTORE K3 K0 K1 K2
        SCARD K3
        SDIFFSTORE K3 K0 K1
        %SMEMBERS K3
        SINTERSTORE K3 K0 K5
        EXISTS K3
        SDIFFSTORE K3 K0 K0
        EXISTS K3
        SUNIONSTORE K3 K5
        EXISTS K3
        SET K4 v EX 100
        SUNIONSTORE K4 K0
        TYPE K4
        TTL K4
        SET K4 v
        SINTERSTORE K4 K0 K5
        EXISTS K4
        SADD K3 a
        SUNIONSTORE K0 K0 K1
        %SMEMBERS K0
        SINTERSTORE K1 K0 K1 K2
        %SMEMBERS K1
        SDIFFSTORE K2 K2 K1
        %SMEMBERS K2
        SET K5 s
        SINTER K0 K5
        SINTER K5 K4
        SINTER K4 K5
        SUNION K0 K1 K5
        SDIFF K4 K5
        SDIFF K0 K5
        SINTERCARD 2 K0 K5
        SINTERSTORE K3 K0 K5
        SMEMBERS K3
        SUNIONSTORE K3 K5 K0
        SDIFFSTORE K3 K4 K5
        SMEMBERS K3
        SINTERSTORE K5 K0
        TYPE K5
        SINTER
        SUNION
        SDIFF
        SINTERCARD
        SINTERCARD 1
        SINTERSTORE K3
        SUNIONSTORE K3
        SDIFFSTORE K3
        "#,
    );
}

/// SMOVE: between two sets, to an absent or a wrong-type destination, from an absent or
/// a wrong-type source, a member that is not there, one key as both, the source emptied.
#[test]
fn smove_matches_redis() {
    everywhere(
        4,
        r#"
        SADD K0 a b 1
        SADD K1 c
        SMOVE K0 K1 a
        %SMEMBERS K0
        %SMEMBERS K1
        SMOVE K0 K1 zz
        SMOVE K0 K1 c
        SMOVE K1 K0 c
        SMOVE K0 K0 b
        SMOVE K0 K0 zz
        SMOVE K3 K0 a
        SMOVE K3 K3 a
        SET K2 v
        SMOVE K0 K2 b
        SMOVE K2 K0 b
        SMOVE K3 K2 b
        SMOVE K2 K2 b
        SMOVE K0 K3 1
        OBJECT ENCODING K3
        SMOVE K0 K3 b
        SMOVE K0 K3 c
        EXISTS K0
        %SMEMBERS K3
        OBJECT ENCODING K3
        SMOVE K0 K1
        SMOVE K0 K1 a b
        "#,
    );
}

/// Set commands inside MULTI/EXEC, multi-key ones across shards among them: replies
/// inside EXEC's array, WRONGTYPE inside it, and the state after.
#[test]
fn set_commands_in_multi_exec_match_redis() {
    everywhere(
        4,
        r#"
        MULTI
        SADD K0 1 2 x
        SADD K1 2 3 y
        SUNIONSTORE K2 K0 K1
        SINTERCARD 2 K0 K1
        SMOVE K0 K1 x
        SINTERSTORE K0 K0 K1
        SET K3 v
        SDIFFSTORE K2 K3 K0
        SMOVE K1 K3 2
        SINTER K0 K1
        SCARD K2
        EXEC
        %SMEMBERS K1
        SMEMBERS K0
        OBJECT ENCODING K0
        OBJECT ENCODING K2
        "#,
    );
}

/// Shape of a SPOP or SRANDMEMBER reply: a nil, a bulk, or the elements of an array or
/// set with its type byte.
fn shape(reply: &[u8]) -> (u8, Option<Vec<Vec<u8>>>) {
    let kind = reply.first().copied().unwrap_or(0);
    match kind {
        b'*' | b'~' => {
            let mut as_array = reply.to_vec();
            as_array[0] = b'*';
            (kind, Some(bulks(&as_array).into_iter().flatten().collect()))
        }
        _ => (kind, None),
    }
}

/// The members of `key` on a connection, as a set.
fn members(raw: &mut Raw, key: &str) -> BTreeSet<Vec<u8>> {
    let reply = call(raw, &cmd(&["SMEMBERS", key]));
    shape(&reply).1.unwrap_or_default().into_iter().collect()
}

/// The elements of a random reply (of a bulk: itself), checked to come from `pool`.
fn drawn(reply: &[u8], pool: &BTreeSet<Vec<u8>>, what: &str) -> Vec<Vec<u8>> {
    let items = match shape(reply) {
        (_, Some(items)) => items,
        (b'$', None) => bulks(&[b"*1\r\n", reply].concat())
            .into_iter()
            .flatten()
            .collect(),
        _ => panic!("{what}: unexpected reply {}", show(reply)),
    };
    for m in &items {
        assert!(pool.contains(m), "{what}: {} is not a member", show(m));
    }
    items
}

/// Sends a random command (SPOP, SRANDMEMBER) to both servers: the replies must have the
/// same shape (type, count), draw members of the key, distinct unless repetition is
/// asked; returns (goblin's members, redis's members).
fn compare_random(
    d: &mut Differential,
    c: &Cmd,
    key: &str,
    ctx: &str,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let pool_g = members(&mut d.g, key);
    let pool_r = members(&mut d.r, key);
    assert_eq!(pool_g, pool_r, "{ctx}: {key} before {}", show_cmd(c));
    let refs: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
    let (got, want) = ask_both(&mut d.g, &mut d.r, &refs);
    let what = format!("{ctx}: {}", show_cmd(c));
    if got.starts_with(b"-") || want.starts_with(b"-") || got.len() < 4 || want.len() < 4 {
        assert_eq!(show(&got), show(&want), "{what}");
        return (Vec::new(), Vec::new());
    }
    let (kind_g, items_g) = shape(&got);
    let (kind_r, items_r) = shape(&want);
    assert_eq!(kind_g, kind_r, "{what}: {} vs {}", show(&got), show(&want));
    assert_eq!(
        items_g.as_ref().map(Vec::len),
        items_r.as_ref().map(Vec::len),
        "{what}: {} vs {}",
        show(&got),
        show(&want)
    );
    let g = drawn(&got, &pool_g, &what);
    let r = drawn(&want, &pool_r, &what);
    let repeats = c.get(2).is_some_and(|n| n.starts_with(b"-"));
    if !repeats {
        let distinct: BTreeSet<_> = g.iter().collect();
        assert_eq!(
            distinct.len(),
            g.len(),
            "{what}: repeated members {}",
            show(&got)
        );
    }
    (g, r)
}

/// Makes `key` hold the same members on both servers again after a SPOP (goblin's state
/// wins), with the encoding a new set of them gets on both.
fn resync(d: &mut Differential, key: &str, ctx: &str) {
    let now = members(&mut d.g, key);
    let mut rebuild = vec![cmd(&["DEL", key])];
    if !now.is_empty() {
        let mut sadd = cmd(&["SADD", key]);
        sadd.extend(now);
        rebuild.push(sadd);
    }
    for c in &rebuild {
        compare(d, c, Cmp::Exact, ctx);
    }
}

/// SPOP and SRANDMEMBER: counts of every kind (none, 0, 1, below and above the set's
/// size, negative, the extremes), their errors in Redis's order, absent keys, and the
/// encoding SPOP leaves (a set rebuilt from the members that stay when most go).
#[test]
fn spop_and_srandmember_match_redis() {
    for_each_thread_count(|d, ctx| {
        for version in ["2", "3"] {
            let ctx = &format!("{ctx}, RESP{version}");
            hello(d, version);
            run(
                d,
                &[],
                ctx,
                r#"
                FLUSHALL
                SPOP nokey
                SPOP nokey 3
                SPOP nokey 0
                SPOP nokey -1
                SPOP nokey x
                SRANDMEMBER nokey
                SRANDMEMBER nokey 3
                SRANDMEMBER nokey -3
                SRANDMEMBER nokey 0
                SRANDMEMBER nokey x
                SRANDMEMBER nokey -9223372036854775808
                SRANDMEMBER nokey -9223372036854775807
                SRANDMEMBER nokey 9223372036854775807
                SADD s a b c 1 2
                SPOP s 0
                SPOP s -1
                SPOP s 1.5
                SPOP s 99999999999999999999
                SPOP s 1 2
                SRANDMEMBER s 0
                SRANDMEMBER s x
                SRANDMEMBER s -9223372036854775808
                SRANDMEMBER s 1 2
                %SRANDMEMBER s 5
                %SRANDMEMBER s 6
                %SRANDMEMBER s 9223372036854775807
                SCARD s
                %SPOP s 5
                EXISTS s
                SADD s 1 2 3
                SPOP s 3
                EXISTS s
                SADD i 5
                SPOP i
                SPOP i
                SRANDMEMBER i
                SADD i 7
                SRANDMEMBER i
                SRANDMEMBER i -3
                SRANDMEMBER i 2
                SPOP i 1
                SPOP
                SRANDMEMBER
                "#,
            );
            let base = ints(1, 20);
            for (setup, c, key) in [
                (format!("SADD s {base} a b c"), "SRANDMEMBER s", "s"),
                (format!("SADD s {base} a b c"), "SRANDMEMBER s 1", "s"),
                (format!("SADD s {base} a b c"), "SRANDMEMBER s 3", "s"),
                (format!("SADD s {base} a b c"), "SRANDMEMBER s 10", "s"),
                (format!("SADD s {base} a b c"), "SRANDMEMBER s 22", "s"),
                (format!("SADD s {base} a b c"), "SRANDMEMBER s -1", "s"),
                (format!("SADD s {base} a b c"), "SRANDMEMBER s -50", "s"),
                (format!("SADD s {base}"), "SRANDMEMBER s 19", "s"),
                (format!("SADD s {base}"), "SRANDMEMBER s -7", "s"),
                (format!("SADD s {base} a b c"), "SPOP s", "s"),
                (format!("SADD s {base} a b c"), "SPOP s 1", "s"),
                (format!("SADD s {base} a b c"), "SPOP s 4", "s"),
                (format!("SADD s {base} a b c"), "SPOP s 19", "s"),
                (format!("SADD s {base}"), "SPOP s 2", "s"),
                (format!("SADD s {base}"), "SPOP s 19", "s"),
            ] {
                run(d, &[], ctx, &format!("DEL s\n{setup}"));
                let (popped, _) = compare_random(d, &words(c), key, ctx);
                if c.starts_with("SPOP") {
                    // The popped members are gone, the rest stayed; SPOP's rebuilt set has
                    // the encoding of its size on both.
                    let left = members(&mut d.g, key);
                    assert!(popped.iter().all(|m| !left.contains(m)), "{ctx}: {c}");
                    run(d, &[], ctx, &format!("SCARD {key}"));
                    resync(d, key, ctx);
                }
            }
            // Encodings SPOP leaves, whatever it picks: a hashtable of integers stays one
            // when a few go, becomes an intset when most go; SPOP of one never rebuilds.
            for (pop, count) in [
                ("SPOP h 2", 18),
                ("SPOP h 17", 3),
                ("SPOP h 19", 1),
                ("SPOP h", 19),
            ] {
                run(d, &[], ctx, &format!("DEL h\nSADD h {base} a\nSREM h a"));
                compare_random(d, &words(pop), "h", ctx);
                run(d, &[], ctx, "OBJECT ENCODING h\nSCARD h");
                assert_eq!(integer(&call(&mut d.g, &words("SCARD h"))), count, "{ctx}");
                resync(d, "h", ctx);
            }
        }
        hello(d, "2");
    });
}

/// A negative SRANDMEMBER count asks for that many repeated picks: Redis streams them
/// until its memory runs out; Goblin answers up to 2^24 and refuses more with a range
/// error, without allocating for the count. (Not compared with redis-server, which would
/// never answer.)
#[test]
fn huge_negative_srandmember_counts_are_refused() {
    let server = Server::goblin_threads(2);
    let mut raw = server.raw();
    call(&mut raw, &words("SADD s a b c"));
    let refused =
        b"-ERR value is out of range, value must between -16777216 and 9223372036854775807\r\n";
    for n in ["-9223372036854775807", "-16777217", "-1000000000000"] {
        let reply = call(&mut raw, &words(&format!("SRANDMEMBER s {n}")));
        assert_eq!(show(&reply), show(refused), "SRANDMEMBER s {n}");
    }
    // Redis's own refusal comes first.
    let reply = call(&mut raw, &words("SRANDMEMBER s -9223372036854775808"));
    assert!(
        reply.starts_with(b"-ERR value is out of range, value must between -9223372036854775807")
    );
    // At the bound the picks come (here a smaller count: the same path).
    let reply = call(&mut raw, &words("SRANDMEMBER s -100000"));
    assert_eq!(elements(&reply).len(), 100_000);
    assert_eq!(call(&mut raw, &words("PING")), b"+PONG\r\n");
}

/// SSCAN: an intset answers everything at once with cursor 0, in order; a hashtable's
/// whole iteration returns every member once; MATCH and COUNT; errors in Redis's order
/// (the cursor first, then the key, then the options).
#[test]
fn sscan_matches_redis() {
    for_each_thread_count(|d, ctx| {
        for version in ["2", "3"] {
            let ctx = &format!("{ctx}, RESP{version}");
            hello(d, version);
            run(
                d,
                &[],
                ctx,
                &format!(
                    r#"
                    FLUSHALL
                    SADD i {}
                    SSCAN i 0
                    SSCAN i 0 COUNT 1
                    SSCAN i 0 MATCH 1*
                    SSCAN i 0 match *0 count 5
                    SSCAN i 0 MATCH *
                    SSCAN i 123
                    SSCAN i 0 COUNT 0
                    SSCAN i 0 COUNT -1
                    SSCAN i 0 COUNT x
                    SSCAN i 0 COUNT
                    SSCAN i 0 MATCH
                    SSCAN i 0 TYPE set
                    SSCAN i 0 FOO
                    SSCAN i x
                    SSCAN i -1
                    SSCAN i 18446744073709551616
                    SSCAN nokey 0
                    SSCAN nokey 0 COUNT 0
                    SSCAN nokey x
                    SSCAN nokey 0 FOO
                    SADD small a b c
                    @SSCAN small 0 COUNT 100
                    SSCAN
                    SSCAN i
                    "#,
                    ints(1, 300)
                ),
            );
            let members: Vec<String> = (0..2000).map(|i| format!("m:{i}")).collect();
            for chunk in members.chunks(500) {
                let mut sadd = cmd(&["SADD", "h"]);
                sadd.extend(chunk.iter().map(|m| m.as_bytes().to_vec()));
                compare(d, &sadd, Cmp::Exact, ctx);
            }
            for options in [
                vec![],
                vec!["COUNT", "7"],
                vec!["MATCH", "m:1*"],
                vec!["MATCH", "*5", "COUNT", "100"],
            ] {
                let all = |raw: &mut Raw| {
                    let mut seen = Vec::new();
                    let mut cursor = 0u64;
                    loop {
                        let mut c = cmd(&["SSCAN", "h", &cursor.to_string()]);
                        c.extend(options.iter().map(|o| o.as_bytes().to_vec()));
                        let (next, items) = scan_reply(&call(raw, &c));
                        seen.extend(items);
                        if next == 0 {
                            return seen;
                        }
                        cursor = next;
                    }
                };
                let mut got = all(&mut d.g);
                let mut want = all(&mut d.r);
                let n = got.len();
                got.sort();
                got.dedup();
                assert_eq!(
                    got.len(),
                    n,
                    "{ctx}: SSCAN {options:?} returned a member twice"
                );
                want.sort();
                want.dedup();
                assert_eq!(got, want, "{ctx}: SSCAN h {options:?}");
            }
        }
        hello(d, "2");
    });
}

/// Every member present for a whole SSCAN iteration is returned, exactly once, while
/// another connection adds and removes other members all along (the set's parts split and
/// merge meanwhile). Goblin's own guarantee; not compared with redis-server.
#[test]
fn sscan_returns_every_member_present_throughout() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        let mut raw = server.raw();
        let stable: Vec<String> = (0..3000).map(|i| format!("stay:{i}")).collect();
        for chunk in stable.chunks(500) {
            let mut sadd = cmd(&["SADD", "big"]);
            sadd.extend(chunk.iter().map(|m| m.as_bytes().to_vec()));
            call(&mut raw, &sadd);
        }
        let stop = AtomicBool::new(false);
        thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            let mut churn = server.raw();
            let stop = &stop;
            s.spawn(move || {
                let mut rng = Rng::new(9);
                let mut round = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    round += 1;
                    // Waves of thousands of members in and out: the parts split and merge.
                    let wave: Vec<Vec<u8>> = (0..500)
                        .map(|_| format!("tmp:{}", rng.below(20_000)).into_bytes())
                        .collect();
                    let verb = if round.is_multiple_of(3) {
                        "SREM"
                    } else {
                        "SADD"
                    };
                    let mut c = cmd(&[verb, "big"]);
                    c.extend(wave);
                    call(&mut churn, &c);
                    if round.is_multiple_of(10) {
                        let mut c = cmd(&["SREM", "big"]);
                        c.extend((0..20_000).map(|i| format!("tmp:{i}").into_bytes()));
                        call(&mut churn, &c);
                    }
                }
            });
            for count in ["3", "50"] {
                let mut seen = BTreeSet::new();
                let mut cursor = 0u64;
                let mut calls = 0;
                loop {
                    calls += 1;
                    let c = cmd(&["SSCAN", "big", &cursor.to_string(), "COUNT", count]);
                    let (next, items) = scan_reply(&call(&mut raw, &c));
                    for m in items {
                        assert!(
                            seen.insert(m.clone()),
                            "--threads {threads}: {} returned twice",
                            show(&m)
                        );
                    }
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
                let missed: Vec<&String> = stable
                    .iter()
                    .filter(|m| !seen.contains(m.as_bytes()))
                    .collect();
                assert!(
                    missed.is_empty(),
                    "--threads {threads}, COUNT {count}: {} stable members missed in {calls} \
                     calls, e.g. {:?}",
                    missed.len(),
                    missed.first()
                );
            }
            stop.store(true, Ordering::SeqCst);
        });
    }
}

/// Random sequences per thread count.
const SEQUENCES: u64 = 3;
/// Commands per sequence.
const STEPS: usize = 400;

/// A random member: small integers (intsets), a few strings, now and then an integer that
/// is not one to Redis, or a wide one.
fn member(rng: &mut Rng) -> String {
    match rng.below(10) {
        0..=4 => rng.range(-3, 12).to_string(),
        5..=7 => (*rng.pick(&["a", "b", "c", "dd", "e"])).to_string(),
        8 => (*rng.pick(&["01", "-0", "+1", "1.0", "x y"])).to_string(),
        _ => (*rng.pick(&["70000", "-5000000000", "9223372036854775807"])).to_string(),
    }
}

/// A random command over `keys` (the last key is a string, to meet WRONGTYPE): returns
/// the command, how it is compared, and for random picks the key they read (`None`: not
/// random).
fn random_command(rng: &mut Rng, keys: &[String]) -> (Cmd, Cmp, Option<String>) {
    let key = |rng: &mut Rng| rng.pick(keys).clone();
    let members =
        |rng: &mut Rng, n: usize| -> Vec<String> { (0..n).map(|_| member(rng)).collect() };
    let some_keys = |rng: &mut Rng| -> Vec<String> {
        let n = 1 + rng.below(3);
        (0..n).map(|_| key(rng)).collect()
    };
    let line = |parts: Vec<String>| -> Cmd { parts.into_iter().map(String::into_bytes).collect() };
    let k = key(rng);
    let mut parts = Vec::new();
    let (how, random) = match rng.below(22) {
        0..=3 => {
            parts.extend(["SADD".to_string(), k]);
            let n = 1 + rng.below(4);
            parts.extend(members(rng, n));
            (Cmp::Exact, None)
        }
        4..=5 => {
            parts.extend(["SREM".to_string(), k]);
            let n = 1 + rng.below(3);
            parts.extend(members(rng, n));
            (Cmp::Exact, None)
        }
        6 => {
            parts.extend(["SMEMBERS".to_string(), k]);
            (Cmp::Sorted, None)
        }
        7 => {
            parts.extend(["SISMEMBER".to_string(), k, member(rng)]);
            (Cmp::Exact, None)
        }
        8 => {
            parts.extend(["SMISMEMBER".to_string(), k]);
            parts.extend(members(rng, 3));
            (Cmp::Exact, None)
        }
        9 => {
            parts.extend(["SCARD".to_string(), k]);
            (Cmp::Exact, None)
        }
        10 => {
            parts.extend(["SMOVE".to_string(), k, key(rng), member(rng)]);
            (Cmp::Exact, None)
        }
        11 => {
            let name = rng.pick(&["SINTER", "SUNION", "SDIFF"]).to_string();
            parts.push(name);
            parts.extend(some_keys(rng));
            (Cmp::Sorted, None)
        }
        12..=13 => {
            let name = rng
                .pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])
                .to_string();
            parts.extend([name, k]);
            parts.extend(some_keys(rng));
            (Cmp::Exact, None)
        }
        14 => {
            let ks = some_keys(rng);
            parts.extend(["SINTERCARD".to_string(), ks.len().to_string()]);
            parts.extend(ks);
            if rng.percent(50) {
                parts.extend(["LIMIT".to_string(), rng.range(0, 3).to_string()]);
            }
            (Cmp::Exact, None)
        }
        15..=16 => {
            parts.extend(["OBJECT".to_string(), "ENCODING".to_string(), k]);
            (Cmp::Exact, None)
        }
        17 => {
            parts.extend(["SPOP".to_string(), k.clone()]);
            if rng.percent(60) {
                parts.push(rng.range(0, 6).to_string());
            }
            (Cmp::Exact, Some(k))
        }
        18 => {
            parts.extend(["SRANDMEMBER".to_string(), k.clone()]);
            if rng.percent(70) {
                parts.push(rng.range(-6, 6).to_string());
            }
            (Cmp::Exact, Some(k))
        }
        19 => {
            parts.extend(["SSCAN".to_string(), k, "0".to_string()]);
            (Cmp::Sorted, None)
        }
        20 => {
            parts.extend(["TYPE".to_string(), k]);
            (Cmp::Exact, None)
        }
        _ => {
            parts.extend(["DEL".to_string(), k]);
            (Cmp::Exact, None)
        }
    };
    (line(parts), how, random)
}

/// Seeded random sequences of every set command over five set keys and a string key
/// spread over the shards, compared reply by reply with `--threads 1` and 4 (SSCAN of a
/// hashtable and random picks by their contents, as described above); at the end every
/// key's type, members and encoding.
#[test]
fn random_sequences_match_redis() {
    let seeds = seeds("sets random_sequences_match_redis", SEQUENCES);
    thread::scope(|scope| {
        for threads in THREADS {
            let seeds = &seeds;
            scope.spawn(move || {
                let mut d = Differential::threads(threads);
                for &seed in seeds {
                    let ctx = format!("--threads {threads}, GOBLIN_DIFF_SEED={seed}");
                    let mut rng = Rng::new(seed);
                    let keys = Layout::CrossShard.keys(6);
                    let version = if rng.percent(50) { "3" } else { "2" };
                    hello(&mut d, version);
                    let ctx = format!("{ctx}, RESP{version}");
                    run(&mut d, &[], &ctx, "FLUSHALL");
                    run(&mut d, &keys, &ctx, "SET K5 str");
                    for step in 0..STEPS {
                        let (c, how, random) = random_command(&mut rng, &keys);
                        let ctx = format!("{ctx}, step {step}");
                        match random {
                            Some(key) => {
                                compare_random(&mut d, &c, &key, &ctx);
                                if c[0] == b"SPOP" {
                                    resync(&mut d, &key, &ctx);
                                }
                            }
                            None if c[0] == b"SSCAN" => {
                                // An intset's answer is exact; a hashtable's whole at once
                                // only with a large COUNT.
                                let mut c = c;
                                c.extend([b"COUNT".to_vec(), b"1000".to_vec()]);
                                compare(&mut d, &c, Cmp::Scan, &ctx);
                            }
                            None => {
                                compare(&mut d, &c, how, &ctx);
                            }
                        }
                    }
                    for k in &keys {
                        for c in ["TYPE", "OBJECT ENCODING", "SMEMBERS"] {
                            let mut c = words(c);
                            c.push(k.as_bytes().to_vec());
                            compare(&mut d, &c, Cmp::Sorted, &ctx);
                        }
                    }
                }
            });
        }
    });
}
