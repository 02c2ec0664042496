//! The string commands of issue 6 differentially against redis-server 7.0, byte for byte,
//! with `--threads 1` and 4: GET, SET with every option and every conflict, SETNX, SETEX,
//! PSETEX, GETSET, GETDEL, GETEX, MGET, MSET, MSETNX, APPEND, STRLEN, INCR, DECR, INCRBY,
//! DECRBY, INCRBYFLOAT (a table of operands, the edges where its printing rounds, and a
//! seeded random walk: where the exact `long double` shows), GETRANGE, SUBSTR, SETRANGE,
//! each against keys of the wrong type, and the encodings OBJECT reports for strings.
//! Multi-key commands run with their keys in one slot, on one shard, and on different
//! shards. Differences found are kept as regression tests at the end of the file, named
//! after the behaviour they pin down.
//!
//! Most tests are scripts (`goblin_tests::diff::script`): one command per line, words
//! split on blanks, `"…"` quoting a word (with `\r`, `\n`, `\t`, `\0`, `\xHH`, `\"` and `\\`
//! escapes), `K0`, `K1`, … standing for the keys of a [`Layout`]. Each command goes to
//! redis-server, then to goblin-server, and the replies must be the same bytes; a line
//! starting with `~` compares integer replies that depend on the clock (TTL, PTTL,
//! EXPIRETIME) within ten seconds, and a line starting with `%` compares arrays as
//! multisets (KEYS).
//!
//! Replay a failing random walk with `GOBLIN_DIFF_SEED=<seed>` (printed).

use goblin_store::{SLOTS, key_slot};
use goblin_tests::cmd::{Cmd, call, cmd, words};
use goblin_tests::diff::{
    How, compare, compare_pipeline, for_each_thread_count, script, script_everywhere,
    script_on_both,
};
use goblin_tests::keys::{LAYOUT_THREADS, LAYOUTS, Layout, THREADS, shard_of};
use goblin_tests::reply::scan_reply;
use goblin_tests::rng::{Rng, random_decimal, seeds};
use goblin_tests::{Raw, Server};

/// The hash slot goblin-server files `key` under, as SCAN shows it: SCAN's cursor is a
/// slot, and with `key` alone in the keyspace `SCAN 0 COUNT 1` stops right after the
/// key's slot (cursor 0 when that is the last slot).
fn server_slot(raw: &mut Raw, key: &str) -> usize {
    call(raw, &cmd(&["FLUSHALL"]));
    call(raw, &cmd(&["SET", key, "v"]));
    let (cursor, keys) = scan_reply(&call(raw, &cmd(&["SCAN", "0", "COUNT", "1"])));
    assert_eq!(
        keys,
        vec![key.as_bytes().to_vec()],
        "SCAN 0 COUNT 1 with only {key}"
    );
    let next = if cursor == 0 { SLOTS } else { cursor as usize };
    next - 1
}

/// Whether goblin-server keeps `a` and `b` (in slots `sa < sb`) on one shard, as SCAN
/// shows it: COUNT bounds the keys each shard looks at in a call, and a call carries on
/// to the next shard while it has found fewer keys than COUNT. With only `a` and `b` in
/// the keyspace, `SCAN sa COUNT 2` on one shard looks at both and stops right after `sb`;
/// across shards, `a`'s shard ends its pass at its last slot having looked at one key, and
/// `b`'s shard, having looked at one key too, walks on to its own last slot.
///
/// # Panics
/// When `sb` is the last slot of its shard, where both answers are the same cursor.
fn server_same_shard(raw: &mut Raw, (a, sa): (&str, usize), (b, sb): (&str, usize)) -> bool {
    assert!(sa < sb, "{a} (slot {sa}) must come before {b} (slot {sb})");
    call(raw, &cmd(&["FLUSHALL"]));
    call(raw, &cmd(&["MSET", a, "v", b, "v"]));
    let (cursor, mut keys) = scan_reply(&call(raw, &cmd(&["SCAN", &sa.to_string(), "COUNT", "2"])));
    keys.sort();
    let mut want = vec![a.as_bytes().to_vec(), b.as_bytes().to_vec()];
    want.sort();
    assert_eq!(keys, want, "SCAN {sa} COUNT 2 with only {a} and {b}");
    cursor as usize == (sb + 1) % SLOTS
}

/// The layouts place keys as they say, for the server as much as for [`shard_of`]: slots
/// as goblin-server reports them through SCAN's cursor, and whether two keys share a
/// shard as SCAN's carrying over shard boundaries shows it, with one thread (one shard
/// for everything) and four.
#[test]
fn layouts_place_keys_as_documented() {
    let slot = |k: &String| usize::from(key_slot(k.as_bytes()));
    let same_slot = Layout::SameSlot.keys(8);
    assert!(same_slot.iter().all(|k| slot(k) == slot(&same_slot[0])));
    let same_shard = Layout::SameShard.keys(8);
    assert!(
        same_shard
            .iter()
            .all(|k| shard_of(k.as_bytes(), LAYOUT_THREADS) == 2)
    );
    assert!(same_shard.iter().any(|k| slot(k) != slot(&same_shard[0])));
    let cross = Layout::CrossShard.keys(8);
    for (i, k) in cross.iter().enumerate() {
        assert_eq!(
            shard_of(k.as_bytes(), LAYOUT_THREADS),
            i % LAYOUT_THREADS,
            "{k}"
        );
    }
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        let mut raw = server.raw();
        let mut pairs = 0;
        for layout in LAYOUTS {
            let keys = layout.keys(8);
            let mut placed: Vec<(&str, usize)> = Vec::new();
            for k in &keys {
                let s = server_slot(&mut raw, k);
                assert_eq!(
                    s,
                    slot(k),
                    "--threads {threads}, {layout:?}: the slot of {k}"
                );
                placed.push((k, s));
            }
            placed.sort_by_key(|&(_, s)| s);
            for (i, &a) in placed.iter().enumerate() {
                for &b in &placed[i + 1..] {
                    if a.1 == b.1 {
                        continue;
                    }
                    let last =
                        b.1 + 1 == SLOTS || (b.1 * threads / SLOTS != (b.1 + 1) * threads / SLOTS);
                    assert!(
                        !last,
                        "{layout:?}: {} is in the last slot of its shard, where SCAN cannot \
                         tell shards apart: choose other key names",
                        b.0
                    );
                    let want =
                        shard_of(a.0.as_bytes(), threads) == shard_of(b.0.as_bytes(), threads);
                    assert_eq!(
                        server_same_shard(&mut raw, a, b),
                        want,
                        "--threads {threads}, {layout:?}: whether {} and {} share a shard",
                        a.0,
                        b.0
                    );
                    pairs += 1;
                }
            }
        }
        assert!(
            pairs > 50,
            "--threads {threads}: only {pairs} pairs of keys compared"
        );
    }
}

/// SET with every option alone and in every order: NX, XX, GET and their conflicts
/// (repeating an option is allowed, NX with XX is not), EX, PX, EXAT, PXAT and KEEPTTL
/// (one expiry at most, a repeated unit overriding), missing, zero, negative, non-integer
/// and overflowing times (`invalid expire time in 'set' command`), deadlines already past
/// (the key is gone, and GET still answers the old value), unknown options, binary keys
/// and values, the empty key, arity; GET's arity.
#[test]
fn set_options_conflicts_and_errors_match_redis() {
    script_on_both(
        6,
        r#"
        SET K0 v
        GET K0
        SET K0 v2 NX
        SET K0 v2 XX
        GET K0
        SET K3 v XX
        GET K3
        SET K3 v NX
        SET K0 v3 GET
        SET K0 v4 GET NX
        SET K0 v4 GET XX
        GET K0
        SET K4 v GET NX
        SET K5 v GET XX
        EXISTS K5
        SET K0 v NX XX
        SET K0 v XX NX
        SET K0 v NX NX
        SET K0 v XX XX
        SET K0 v nx Nx
        SET K0 v GET GET
        SET K0 v GET GET NX
        SET K0 v EX 100
        ~TTL K0
        SET K0 v KEEPTTL
        ~TTL K0
        SET K0 w KEEPTTL GET
        ~PTTL K0
        SET K0 v KEEPTTL KEEPTTL
        ~PTTL K0
        SET K0 v
        TTL K0
        SET K0 v PX 100000
        ~PTTL K0
        SET K0 v EXAT 99999999999
        EXPIRETIME K0
        PEXPIRETIME K0
        SET K0 v PXAT 99999999999123
        PEXPIRETIME K0
        EXPIRETIME K0
        SET K0 v EX 10 EX 20
        ~TTL K0
        SET K0 v PX 10 PX 200000
        ~PTTL K0
        SET K0 v EX 1 PX 1
        SET K0 v PX 1 EX 1
        SET K0 v EX 1 EXAT 1
        SET K0 v PXAT 1 EX 1
        SET K0 v EXAT 1 PXAT 1
        SET K0 v KEEPTTL EX 1
        SET K0 v EX 1 KEEPTTL
        SET K0 v KEEPTTL PXAT 1
        SET K0 v PERSIST
        SET K0 v EX
        SET K0 v PX
        SET K0 v EXAT
        SET K0 v PXAT
        SET K0 v NX EX
        SET K0 v EX 0
        SET K0 v EX -1
        SET K0 v PX 0
        SET K0 v PX -100
        SET K0 v EXAT 0
        SET K0 v PXAT 0
        SET K0 v EXAT -1
        SET K0 v PXAT -1
        SET K0 v EX x
        SET K0 v EX 1.5
        SET K0 v EX +5
        SET K0 v EX " 5"
        SET K0 v EX "5 "
        SET K0 v EX 05
        SET K0 v EX ""
        SET K0 v EX 9223372036854775807
        SET K0 v EX 9223372036854775808
        SET K0 v EX -9223372036854775808
        SET K0 v PX 9223372036854775807
        SET K0 v PX 9223372036854775806
        SET K0 v EX 9223372036854775
        SET K0 v EX 9223372036854774
        SET K0 v EX 9999999999999
        SET K0 v EXAT 9223372036854775807
        SET K0 v EXAT 9223372036854775
        EXPIRETIME K0
        SET K0 v PXAT 9223372036854775807
        PEXPIRETIME K0
        SET K0 v EX abc FOO
        SET K0 v FOO
        SET K0 v NX FOO
        SET K0 v GET EX abc
        SET K0 v EX abc GET
        SET K0 v ex 10 get
        SET K0 v xx px 500000 get
        ~PTTL K0
        SET K0 v E
        SET K0 v "NX\0junk"
        SET K0 v EXAT 1
        GET K0
        EXISTS K0
        SET K0 v PXAT 1 GET
        SET K0 v
        SET K0 w PXAT 1 GET
        EXISTS K0
        SET K0 v NX EXAT 1
        EXISTS K0
        SET K0 v XX EXAT 1
        SET K0 v NX PXAT 2 GET
        EXISTS K0
        SET K1 v
        SET K1 w XX EXAT 1 GET
        EXISTS K1
        SET "bin\0key" "v\r\n\0\xff"
        GET "bin\0key"
        SET "" ""
        GET ""
        SET
        SET K0
        set K0
        GET
        GET K0 K1
        get K0
        "#,
    );
}

/// GET and SET on hashes and sorted sets: GET is WRONGTYPE, SET replaces the key (its
/// TTL too, unless KEEPTTL), SET … GET is WRONGTYPE before any other option is looked at
/// and leaves the key alone, even when NX or XX would not have written.
#[test]
fn set_and_get_on_other_types_match_redis() {
    script_on_both(
        4,
        r#"
        HSET K1 f v
        ZADD K2 1 m
        GET K1
        GET K2
        SET K1 v GET
        SET K1 v NX GET
        SET K1 v XX GET
        SET K1 v GET NX
        SET K1 v EX abc GET
        SET K1 v EX 0 GET
        SET K1 v EXAT 1 GET
        SET K1 v FOO GET
        TYPE K1
        SET K1 v NX
        TYPE K1
        SET K1 v XX KEEPTTL
        TYPE K1
        GET K1
        EXPIRE K2 1000
        SET K2 v KEEPTTL
        TYPE K2
        ~TTL K2
        ZADD K3 1 m
        SET K3 v EXAT 1
        TYPE K3
        HSET K3 f v
        SET K3 v PX 100000
        ~PTTL K3
        GET K3
        "#,
    );
}

/// SETNX, SETEX, PSETEX (zero, negative, non-integer and overflowing times), GETSET
/// (which drops the TTL) and GETDEL, on strings, hashes and sorted sets; arity.
#[test]
fn setnx_setex_psetex_getset_getdel_match_redis() {
    script_on_both(
        4,
        r#"
        SETNX K0 1
        SETNX K0 2
        GET K0
        HSET K1 f v
        ZADD K2 1 m
        SETNX K1 v
        SETNX K2 v
        TYPE K1
        SETNX K0
        SETNX K0 a b
        SETEX K0 100 v
        ~TTL K0
        GET K0
        SETEX K0 0 v
        SETEX K0 -5 v
        SETEX K0 x v
        SETEX K0 10.0 v
        SETEX K0 "" v
        SETEX K0 " 10" v
        SETEX K0 9223372036854775807 v
        SETEX K0 9223372036854775808 v
        SETEX K0 9223372036854775 v
        SETEX K0 9223372036854774 v
        SETEX K0 -9223372036854775808 v
        GET K0
        SETEX K0 100
        SETEX K0 100 v w
        PSETEX K0 100000 w
        ~PTTL K0
        GET K0
        PSETEX K0 0 v
        PSETEX K0 -1 v
        PSETEX K0 9223372036854775807 v
        PSETEX K0 9223372036854775806 v
        PSETEX K0 x v
        PSETEX K0 1.5 v
        PSETEX K0
        GET K0
        SETEX K1 100 v
        TYPE K1
        ~TTL K1
        PSETEX K2 100000 v
        TYPE K2
        GETSET K3 a
        GETSET K3 b
        GET K3
        SET K0 v EX 100
        GETSET K0 w
        TTL K0
        GET K0
        ZADD K2 1 m
        DEL K2
        ZADD K2 1 m
        GETSET K2 v
        TYPE K2
        GETSET K0
        GETSET K0 a b
        GETDEL K0
        GETDEL K0
        EXISTS K0
        GETDEL K2
        EXISTS K2
        SET K0 v EX 100
        GETDEL K0
        TTL K0
        GETDEL
        GETDEL K0 K1
        "#,
    );
}

/// GETEX with EX, PX, EXAT, PXAT and PERSIST: each alone, conflicting pairs, repeated
/// options, SET's options (a syntax error), invalid times, an absent key with bad options
/// (nil before anything is parsed), deadlines already past (the key is deleted after its
/// value is answered), other types.
#[test]
fn getex_options_match_redis() {
    script_on_both(
        4,
        r#"
        GETEX K0
        GETEX K0 EX abc
        GETEX K0 EX 0
        GETEX K0 PX -1
        GETEX K0 EXAT 1
        GETEX K0 EX 10 PX 10
        GETEX K0 PERSIST EX 10
        GETEX K0 FOO
        GETEX K0 EX
        SET K0 v
        GETEX K0
        TTL K0
        GETEX K0 EX 100
        ~TTL K0
        GETEX K0 PERSIST
        TTL K0
        GETEX K0 PX 100000
        ~PTTL K0
        GETEX K0 EXAT 99999999999
        EXPIRETIME K0
        GETEX K0 PXAT 99999999999999
        PEXPIRETIME K0
        GETEX K0 EX 0
        GETEX K0 EX -1
        GETEX K0 PX 0
        GETEX K0 EXAT 0
        GETEX K0 PXAT 0
        GETEX K0 EXAT -5
        GETEX K0 EX 9223372036854775
        GETEX K0 PX 9223372036854775807
        GETEX K0 EXAT 9223372036854775807
        GETEX K0 EX 9223372036854775808
        GETEX K0 EX 1.5
        GETEX K0 EX ""
        PEXPIRETIME K0
        GETEX K0 EX 1 EX 200
        ~TTL K0
        GETEX K0 PX 1 PX 300000
        ~PTTL K0
        GETEX K0 EX 1 PX 2
        GETEX K0 EXAT 1 PXAT 1
        GETEX K0 PERSIST PERSIST
        TTL K0
        GETEX K0 persist
        GETEX K0 PERSIST EX 1
        GETEX K0 EX 1 PERSIST
        GETEX K0 KEEPTTL
        GETEX K0 NX
        GETEX K0 XX
        GETEX K0 GET
        GETEX K0 EX
        GETEX K0 ex 500 FOO
        GET K0
        GETEX K0 EXAT 1
        EXISTS K0
        SET K0 v EX 100
        GETEX K0 PXAT 1
        EXISTS K0
        SET K0 w
        GETEX K0 PXAT 1000
        GETEX K0
        HSET K1 f v
        ZADD K2 1 m
        GETEX K1
        GETEX K1 EX 10
        GETEX K1 EX abc
        GETEX K1 EX 0
        GETEX K1 PERSIST
        GETEX K2 EXAT 1
        TYPE K2
        GETEX K1 FOO
        GETEX
        "#,
    );
}

/// MGET, MSET and MSETNX with their keys in one slot, on one shard and across shards:
/// repeated keys (the last value wins; MSETNX sees none of its own), odd argument counts,
/// keys of other types (nil in MGET, replaced by MSET, blocking MSETNX), MSET dropping a
/// TTL, binary values.
#[test]
fn mget_mset_msetnx_match_redis() {
    script_everywhere(
        8,
        r#"
        MSET K0 a K1 b K2 c K3 d
        MGET K0 K1 K2 K3 K4
        MGET K3 K3 K0 K7 K3
        MGET K7
        MSET K0 x K1 y K0 z
        MGET K0 K1
        MSET K0 1 K1
        MSET K0 1 K1 2 K2
        MSET K0
        MSET
        MGET
        MSETNX K4 a K5 b
        MGET K4 K5
        MSETNX K5 z K6 w
        MGET K5 K6
        MSETNX K6 1 K6 2
        GET K6
        MSETNX K7 1 K7
        MSETNX K7
        MSETNX
        HSET K7 f v
        MGET K7 K0 K7
        MSETNX K7 v K4 w
        MSETNX K4 v K7 w
        TYPE K7
        MSET K6 v K7 w
        TYPE K7
        GET K7
        SET K0 v EX 100
        MSET K0 w K1 x
        TTL K0
        ZADD K2 1 m
        MSETNX K3 a K2 b
        DEL K0 K1 K2 K3
        MSETNX K0 "" K1 "\0" K2 "a b" K3 "\r\n"
        MGET K0 K1 K2 K3
        DBSIZE
        "#,
    );
}

/// APPEND and STRLEN: to absent keys, empty tails, binary tails, a TTL kept, an integer
/// grown into a non-integer, other types, arity; then a 320 KiB value grown by APPEND in
/// 64 KiB steps, read back whole and in part.
#[test]
fn append_strlen_match_redis() {
    script_on_both(
        4,
        r#"
        STRLEN K0
        APPEND K0 abc
        APPEND K0 def
        GET K0
        STRLEN K0
        APPEND K0 ""
        STRLEN K0
        APPEND K1 ""
        EXISTS K1
        STRLEN K1
        GET K1
        SET K2 v EX 100
        APPEND K2 "\0\r\n"
        ~TTL K2
        GET K2
        STRLEN K2
        SET K3 10
        APPEND K3 5
        INCR K3
        GET K3
        APPEND K3 x
        INCR K3
        SET K3 ""
        STRLEN K3
        HSET K1 f v
        APPEND K1 x
        STRLEN K1
        ZADD K1 1 m
        APPEND
        APPEND K0
        APPEND K0 a b
        STRLEN
        STRLEN K0 K1
        "#,
    );
    let chunk = "0123456789abcdef".repeat(4096);
    for_each_thread_count(|d, ctx| {
        let key = b"big".to_vec();
        for _ in 0..5 {
            let args = vec![b"APPEND".to_vec(), key.clone(), chunk.as_bytes().to_vec()];
            compare(d, &args, How::Exact, ctx);
        }
        compare(d, &[b"STRLEN".to_vec(), key.clone()], How::Exact, ctx);
        compare(d, &[b"GET".to_vec(), key.clone()], How::Exact, ctx);
        compare(
            d,
            &[
                b"GETRANGE".to_vec(),
                key,
                b"65530".to_vec(),
                b"65560".to_vec(),
            ],
            How::Exact,
            ctx,
        );
    });
}

/// INCR, DECR, INCRBY and DECRBY: overflow at both ends (`increment or decrement would
/// overflow`), DECRBY of i64::MIN (`decrement would overflow`), increments that are not
/// integers, stored values that are not (blanks, decimals, hex, signs, leading zeros,
/// `-0`, past the i64 limits), the TTL kept, other types, arity.
#[test]
fn incr_decr_family_matches_redis() {
    let mut text = String::from(
        r#"
        INCR K0
        INCR K0
        DECR K0
        DECR K1
        INCRBY K0 10
        INCRBY K0 -25
        DECRBY K0 -7
        DECRBY K0 100
        INCRBY K0 0
        GET K0
        SET K0 9223372036854775806
        INCR K0
        INCR K0
        INCRBY K0 0
        INCRBY K0 -1
        INCRBY K0 2
        DECRBY K0 -2
        GET K0
        SET K0 -9223372036854775807
        DECR K0
        DECR K0
        DECRBY K0 1
        INCRBY K0 -1
        INCRBY K0 9223372036854775807
        GET K0
        SET K0 9223372036854775807
        INCRBY K0 -9223372036854775808
        DECRBY K0 -9223372036854775808
        DECRBY K2 -9223372036854775808
        DECRBY K2 -9223372036854775807
        INCRBY K2 -9223372036854775808
        DECRBY K2 9223372036854775807
        GET K2
        DEL K2
        INCRBY K2 9223372036854775807
        INCRBY K2 1
        INCRBY K3 9223372036854775808
        INCRBY K3 -9223372036854775809
        DECRBY K3 9223372036854775808
        EXISTS K3
        SET K1 5 EX 100
        INCR K1
        INCRBY K1 10
        DECR K1
        ~TTL K1
        GET K1
        SET K1 9223372036854775808
        INCR K1
        SET K1 -9223372036854775809
        DECR K1
        SET K1 12345678901234567890123
        INCRBY K1 1
        GET K1
        HSET K2 f v
        ZADD K3 1 m
        INCR K2
        DECR K3
        INCRBY K2 1
        DECRBY K3 1
        INCRBY K2 abc
        DECRBY K3 abc
        DECRBY K2 -9223372036854775808
        INCRBY K2 9223372036854775808
        INCR
        INCR K0 K1
        DECR
        INCRBY K0
        INCRBY K0 1 2
        DECRBY K0
        "#,
    );
    for bad in [
        r#"" 1""#,
        r#""1 ""#,
        r#""""#,
        "1.0",
        "1e3",
        "0x1",
        "+1",
        "01",
        "-0",
        "00",
        "-",
        "+",
        "abc",
        "1a",
        r#""1\0""#,
        "99999999999999999999",
        "9223372036854775808",
        "-9223372036854775809",
    ] {
        text.push_str(&format!(
            "SET K0 {bad}\nINCR K0\nDECR K0\nINCRBY K0 1\nDECRBY K0 1\nGET K0\nINCRBY K1 {bad}\n\
             DECRBY K1 {bad}\n"
        ));
    }
    for good in [
        "0",
        "-1",
        "10",
        "-9223372036854775808",
        "9223372036854775807",
    ] {
        text.push_str(&format!(
            "SET K0 {good}\nINCR K0\nDECR K0\nDECR K0\nGET K0\n"
        ));
    }
    script_on_both(4, &text);
}

/// INCRBYFLOAT with 74 operands, each added to an absent key and to 10.5: decimals where
/// `long double` and `double` part (10.50 + 0.1 is 10.6), exponents, the `long double`
/// limits (overflow is `increment would produce NaN or Infinity`), underflow, many
/// digits, every spelling `strtold` accepts (hex floats, `inf`, `nan(…)`) and refuses
/// (blanks, `1.0.0`, the empty string: `value is not a valid float`); stored values that
/// are not floats; the TTL kept; other types; arity. Then operands of 5,000 characters and
/// more, around Redis's limit of 5,119.
#[test]
fn incrbyfloat_values_match_redis() {
    let operands = [
        "0.1",
        "-5",
        "5.0e3",
        "2.0e2",
        "1e-5",
        "1.5e3",
        "1e20",
        "1e400",
        "-1e400",
        "1e4000",
        "1e4932",
        "1e4933",
        "-1e4933",
        "1e-4950",
        "1e-5000",
        "3.6e-4951",
        "1.7976931348623157e308",
        "1.18973149535723176502e+4932",
        "1.18973149535723176508e+4932",
        "0.000000000000000001",
        "0.000000000000000005",
        "0.00000000000000001",
        "0.99999999999999999999",
        "3.0000000000000000001",
        "123456789012345678901234567890",
        "0",
        "-0",
        "-0.0",
        ".5",
        "5.",
        "+.5",
        "1E2",
        "1e+2",
        "00001.5",
        "1.5e0003",
        "0e99999999999999999999",
        "1e99999999999999999999",
        "1e-99999999999999999999",
        "inf",
        "-inf",
        "+inf",
        "INF",
        "infinity",
        "-Infinity",
        "nan",
        "NaN",
        "-nan",
        "nan(123)",
        "infx",
        "in",
        "0x10",
        "-0x10",
        "0X10",
        "0x1.8p1",
        "0x.8",
        "0x",
        "0x1p16383",
        "0x1p16384",
        "0x1p-16445",
        "0x1p-16447",
        "0x1p3",
        r#"" 1""#,
        r#""1 ""#,
        r#""\t1""#,
        "1.0.0",
        r#""""#,
        "1e",
        "e5",
        "-",
        "+",
        ".",
        "1_000",
        "1,5",
        r#""1\0""#,
    ];
    let mut text = String::new();
    for op in operands {
        text.push_str(&format!(
            "INCRBYFLOAT K0 {op}\nGET K0\nDEL K0\nSET K1 10.5\nINCRBYFLOAT K1 {op}\nGET K1\n"
        ));
    }
    text.push_str(
        r#"
        SET K0 10.50
        INCRBYFLOAT K0 0.1
        INCRBYFLOAT K0 -5
        SET K0 5.0e3
        INCRBYFLOAT K0 2.0e2
        SET K0 1e20
        INCRBYFLOAT K0 1
        SET K0 1.18973149535723176502e+4932
        INCRBYFLOAT K0 1.18973149535723176502e+4932
        INCRBYFLOAT K0 -1.18973149535723176502e+4932
        INCRBYFLOAT K0 1e4931
        SET K0 -1.18973149535723176502e+4932
        INCRBYFLOAT K0 -1.18973149535723176502e+4932
        GET K0
        SET K0 0.1
        INCRBYFLOAT K0 0.2
        INCRBYFLOAT K0 -0.3
        SET K0 " 1"
        INCRBYFLOAT K0 1
        SET K0 1abc
        INCRBYFLOAT K0 1
        SET K0 inf
        INCRBYFLOAT K0 1
        INCRBYFLOAT K0 -inf
        SET K0 nan
        INCRBYFLOAT K0 1
        SET K0 0x10
        INCRBYFLOAT K0 1
        SET K0 ""
        INCRBYFLOAT K0 1
        SET K0 5 EX 100
        INCRBYFLOAT K0 1.5
        ~TTL K0
        HSET K2 f v
        ZADD K3 1 m
        INCRBYFLOAT K2 1
        INCRBYFLOAT K2 abc
        INCRBYFLOAT K3 nan
        INCRBYFLOAT
        INCRBYFLOAT K0
        INCRBYFLOAT K0 1 2
        "#,
    );
    script_on_both(4, &text);
    for_each_thread_count(|d, ctx| {
        for op in [
            format!("1{}", "0".repeat(4931)),
            format!("1{}", "0".repeat(5118)),
            format!("0.{}1e5000", "0".repeat(5000)),
            format!("0.{}1", "0".repeat(5116)),
            format!("{}e-200", "1".repeat(250)),
        ] {
            compare(d, &words(&format!("INCRBYFLOAT f {op}")), How::Exact, ctx);
            compare(d, &words("INCRBYFLOAT f 1"), How::Exact, ctx);
            compare(d, &words("DEL f"), How::Exact, ctx);
            compare(d, &words(&format!("SET f {op}")), How::Exact, ctx);
            compare(d, &words("INCRBYFLOAT f 1"), How::Exact, ctx);
        }
    });
}

/// INCRBYFLOAT where `%.17Lf` printing rounds, about 6,500 cases compared reply by reply:
/// tiny binary increments (`0x1.8p-60`) added to and taken from integers and fractions,
/// so that the last printed digit rounds one way or the other; `k.xxxxxxxxxxxxxxxxx`
/// values with 17 decimals re-printed by adding 0; powers of two around 2^64 and one less,
/// plus halves and quarters, where the 64-bit mantissa runs out.
#[test]
fn incrbyfloat_rounding_edges_match_redis() {
    let mut cmds: Vec<Cmd> = Vec::new();
    for e in 40..80 {
        for m in [
            "1",
            "3",
            "5",
            "7",
            "f",
            "1.8",
            "1.0000000000001",
            "1.fffffffffffffffe",
        ] {
            for base in ["0", "1", "-1", "1000000", "0.5", "123456789"] {
                cmds.push(words(&format!("SET k {base}")));
                cmds.push(words(&format!("INCRBYFLOAT k 0x{m}p-{e}")));
                cmds.push(words(&format!("INCRBYFLOAT k -0x{m}p-{}", e + 1)));
            }
        }
    }
    for i in 1u64..200 {
        let frac = (i * 7919) % 100_000_000_000_000_000;
        cmds.push(words(&format!("SET k {i}.{frac:017}")));
        cmds.push(words("INCRBYFLOAT k 0"));
    }
    for e in 0..66u32 {
        let p = 2u128.pow(e);
        cmds.push(words(&format!("SET k {p}")));
        cmds.push(words("INCRBYFLOAT k 0.5"));
        cmds.push(words("INCRBYFLOAT k 0.25"));
        cmds.push(words(&format!("SET k {}", p - 1)));
        cmds.push(words("INCRBYFLOAT k 0.5"));
    }
    for_each_thread_count(|d, ctx| {
        compare_pipeline(d, &cmds, ctx);
    });
}

/// Seeded random walks of INCRBYFLOAT over four keys on different shards: 400 steps per
/// seed of random decimal operands (see [`random_decimal`]), now and then a SET of one or
/// a GET, compared reply by reply. A walk must add more than 200 times and be refused at
/// least once, or the operands have drifted away from what they are meant to cover.
#[test]
fn incrbyfloat_random_walk_matches_redis() {
    let seeds = seeds("incrbyfloat_random_walk", 2);
    for_each_thread_count(|d, ctx| {
        let keys = Layout::CrossShard.keys(4);
        for &seed in &seeds {
            let mut rng = Rng::new(seed);
            let cmds: Vec<Cmd> = (0..400)
                .map(|_| {
                    let key = rng.pick(&keys).as_bytes().to_vec();
                    match rng.below(100) {
                        0..=4 => vec![b"SET".to_vec(), key, random_decimal(&mut rng).into_bytes()],
                        5..=9 => vec![b"GET".to_vec(), key],
                        _ => vec![
                            b"INCRBYFLOAT".to_vec(),
                            key,
                            random_decimal(&mut rng).into_bytes(),
                        ],
                    }
                })
                .collect();
            let ctx = format!("{ctx}, GOBLIN_DIFF_SEED={seed}");
            let replies = compare_pipeline(d, &cmds, &ctx);
            let (mut added, mut refused) = (0, 0);
            for (c, reply) in cmds.iter().zip(&replies) {
                if c[0] == b"INCRBYFLOAT" {
                    if reply.starts_with(b"$") {
                        added += 1;
                    } else {
                        refused += 1;
                    }
                }
            }
            assert!(
                added > 200 && refused > 0,
                "{ctx}: {added} INCRBYFLOATs added, {refused} refused"
            );
        }
    });
}

/// Start and end indexes: past either end, negative, the i64 limits, around the lengths
/// of the values GETRANGE reads.
const INDEXES: [i64; 17] = [
    i64::MIN,
    -100,
    -12,
    -11,
    -10,
    -6,
    -2,
    -1,
    0,
    1,
    2,
    5,
    10,
    11,
    12,
    100,
    i64::MAX,
];

/// GETRANGE with every pair of [`INDEXES`] on an empty string, strings of 1, 5 and 11
/// bytes and an absent key (SUBSTR, its old name, on one of them); indexes that are not
/// integers, other types, arity.
#[test]
fn getrange_substr_match_redis() {
    let values: [&[u8]; 4] = [b"", b"a", b"Hello World", b"12345"];
    for_each_thread_count(|d, ctx| {
        let mut cmds: Vec<Cmd> = Vec::new();
        for (i, v) in values.iter().enumerate() {
            cmds.push(vec![
                b"SET".to_vec(),
                format!("r{i}").into_bytes(),
                v.to_vec(),
            ]);
        }
        for key in ["r0", "r1", "r2", "r3", "absent"] {
            for start in INDEXES {
                for end in INDEXES {
                    for name in ["GETRANGE", "SUBSTR"] {
                        if name == "SUBSTR" && key != "r2" {
                            continue;
                        }
                        cmds.push(words(&format!("{name} {key} {start} {end}")));
                    }
                }
            }
        }
        compare_pipeline(d, &cmds, ctx);
        script(
            d,
            &[],
            ctx,
            r#"
            GETRANGE r2 1.5 2
            GETRANGE r2 0 9223372036854775808
            GETRANGE r2 -9223372036854775809 1
            GETRANGE r2 "" 1
            GETRANGE r2 " 1" 2
            GETRANGE r2 0 x
            GETRANGE absent a b
            SUBSTR r2 x 1
            SUBSTR absent 0 y
            HSET h f v
            ZADD z 1 m
            GETRANGE h 0 -1
            GETRANGE h a 1
            SUBSTR z 0 1
            GETRANGE r2
            GETRANGE r2 0
            GETRANGE r2 0 1 2
            SUBSTR r2 0
            "#,
        );
    });
}

/// SETRANGE: patches inside, across the end of and past a value (zero padding), an empty
/// patch on absent and existing keys (no key created; the length answered), negative
/// offsets (`offset is out of range`, even with an empty patch), offsets reaching past
/// 512 MiB (`string exceeds maximum allowed size (proto-max-bulk-len)`), offsets that are
/// not integers, the TTL kept, an integer patched, long (boxed) values patched and grown,
/// other types, arity.
#[test]
fn setrange_matches_redis() {
    script_on_both(
        5,
        r#"
        SET K0 "Hello World"
        SETRANGE K0 6 Redis
        GET K0
        SETRANGE K4 300 x
        SETRANGE K4 10 abc
        SETRANGE K4 299 yz
        SETRANGE K4 400 tail
        GET K4
        STRLEN K4
        OBJECT ENCODING K4
        EXPIRE K4 100
        SETRANGE K4 0 head
        ~TTL K4
        GETRANGE K4 0 12
        SETRANGE K0 0 HELLO
        SETRANGE K0 11 "!"
        SETRANGE K0 9 "XYZ!!"
        GET K0
        SETRANGE K0 20 tail
        GET K0
        STRLEN K0
        SETRANGE K1 5 abc
        GET K1
        SETRANGE K2 0 ""
        EXISTS K2
        SETRANGE K2 100 ""
        EXISTS K2
        SETRANGE K0 0 ""
        SETRANGE K0 1000 ""
        STRLEN K0
        SETRANGE K0 -1 x
        SETRANGE K0 -1 ""
        SETRANGE K2 -1 ""
        SETRANGE K2 -9223372036854775808 x
        SETRANGE K0 536870911 ""
        SETRANGE K0 536870912 ""
        SETRANGE K0 536870912 x
        SETRANGE K0 536870911 xx
        SETRANGE K0 9223372036854775807 x
        SETRANGE K0 9223372036854775808 x
        SETRANGE K2 536870912 x
        SETRANGE K2 536870912 ""
        EXISTS K2
        SETRANGE K0 x y
        SETRANGE K0 1.5 y
        SETRANGE K0 "" y
        SET K3 12345 EX 100
        SETRANGE K3 1 "\0\r\n"
        GET K3
        ~TTL K3
        INCR K3
        SET K3 100
        SETRANGE K3 0 2
        INCR K3
        HSET K2 f v
        SETRANGE K2 0 x
        SETRANGE K2 0 ""
        SETRANGE K2 -1 x
        SETRANGE K2 x x
        SETRANGE K2 536870912 x
        ZADD K1 1 m
        SETRANGE
        SETRANGE K0
        SETRANGE K0 1
        SETRANGE K0 1 a b
        "#,
    );
}

/// Every string command against a hash and a sorted set: WRONGTYPE, the key untouched
/// (TYPE after each); then the commands that overwrite whatever a key holds (SET, SETEX,
/// PSETEX, MSET), and the ones that do not (SET KEEPTTL and SET EXAT in the past on a key
/// of another type), in every layout.
#[test]
fn string_commands_on_other_types_match_redis() {
    let mut text = String::new();
    for key in ["K1", "K2"] {
        for line in [
            "GET @",
            "SET @ v GET",
            "SET @ v NX GET",
            "SET @ v XX GET",
            "GETSET @ v",
            "GETDEL @",
            "GETEX @",
            "GETEX @ EX 10",
            "GETEX @ PERSIST",
            "GETEX @ EX abc",
            "GETEX @ EX 0",
            "GETEX @ FOO",
            "MGET @ K3",
            "MSETNX @ v K3 w",
            "MSETNX K3 w @ v",
            "APPEND @ x",
            r#"APPEND @ """#,
            "STRLEN @",
            "INCR @",
            "DECR @",
            "INCRBY @ 5",
            "INCRBY @ abc",
            "DECRBY @ 5",
            "DECRBY @ -9223372036854775808",
            "INCRBYFLOAT @ 1.5",
            "INCRBYFLOAT @ abc",
            "GETRANGE @ 0 -1",
            "GETRANGE @ a 1",
            "SUBSTR @ 0 -1",
            "SETRANGE @ 0 x",
            r#"SETRANGE @ 0 """#,
            "SETRANGE @ -1 x",
            "SETRANGE @ 536870912 x",
            "SETRANGE @ x x",
        ] {
            text.push_str(&format!("{}\nTYPE {key}\n", line.replace('@', key)));
        }
    }
    for line in [
        "SET @ v",
        "SETEX @ 100 v",
        "PSETEX @ 100000 v",
        "MSET @ v K3 w",
        "SET @ v KEEPTTL",
        "SET @ v EXAT 1",
    ] {
        for key in ["K1", "K2"] {
            text.push_str(&format!(
                "DEL K1 K2\nHSET K1 f v\nZADD K2 1 m\n{}\nTYPE {key}\nGET {key}\n",
                line.replace('@', key)
            ));
        }
    }
    let setup = "HSET K1 f v\nZADD K2 1 m\n";
    script_everywhere(4, &format!("{setup}{text}"));
}

/// OBJECT ENCODING and OBJECT REFCOUNT of strings: `int` for what `string2ll` reads and
/// fits a long (shared below 10,000), `embstr` up to 44 bytes, `raw` above; as SET, MSET,
/// SETNX, SETEX and GETSET store them; after APPEND and SETRANGE (always `raw`), INCR,
/// INCRBY and DECR (in and out of the shared range), INCRBYFLOAT, GETEX; and not shared
/// under an LRU or LFU `maxmemory` policy (Redis's "With maxmemory and LRU policy
/// integers are not shared").
#[test]
fn object_encoding_of_strings_matches_redis() {
    let long = ["x".repeat(44), "x".repeat(45), "7".repeat(44)];
    let mut text = String::new();
    for v in [
        "1",
        "0",
        "-123",
        "9999",
        "10000",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "12345678901234567890",
        "0123",
        "+1",
        r#"" 1""#,
        "1.5",
        "hello",
        r#""""#,
        &long[0],
        &long[1],
        &long[2],
    ] {
        for set in [
            "SET K0 {}",
            "MSET K0 {} K1 x",
            "SETNX K0 {}",
            "SETEX K0 100 {}",
            "GETSET K0 {}",
        ] {
            text.push_str(&format!(
                "DEL K0\n{}\nOBJECT ENCODING K0\nOBJECT REFCOUNT K0\n",
                set.replace("{}", v)
            ));
        }
    }
    text.push_str(
        r#"
        SET K0 hello
        APPEND K0 x
        OBJECT ENCODING K0
        SET K0 abc
        SETRANGE K0 1 x
        OBJECT ENCODING K0
        SET K0 abc
        SETRANGE K0 0 ""
        OBJECT ENCODING K0
        SET K0 abc
        APPEND K0 ""
        OBJECT ENCODING K0
        DEL K0
        SETRANGE K0 0 abc
        OBJECT ENCODING K0
        DEL K0
        APPEND K0 5
        OBJECT ENCODING K0
        OBJECT REFCOUNT K0
        APPEND K0 5
        OBJECT ENCODING K0
        OBJECT REFCOUNT K0
        INCR K0
        OBJECT ENCODING K0
        OBJECT REFCOUNT K0
        INCRBY K0 20000
        OBJECT REFCOUNT K0
        DECRBY K0 20000
        OBJECT REFCOUNT K0
        SET K0 -5
        DECR K0
        OBJECT REFCOUNT K0
        OBJECT ENCODING K0
        INCRBYFLOAT K1 1.5
        OBJECT ENCODING K1
        SET K0 12345678901234567890123456789012345678901234567890
        OBJECT ENCODING K0
        APPEND K0 x
        OBJECT ENCODING K0
        SET K0 v
        GETEX K0 EX 100
        OBJECT ENCODING K0
        OBJECT ENCODING K3
        OBJECT REFCOUNT K3
        CONFIG SET maxmemory 1gb
        CONFIG SET maxmemory-policy allkeys-lru
        SET K0 1
        OBJECT REFCOUNT K0
        CONFIG SET maxmemory-policy volatile-lfu
        INCR K0
        OBJECT REFCOUNT K0
        CONFIG SET maxmemory-policy allkeys-random
        SET K0 7
        OBJECT REFCOUNT K0
        CONFIG SET maxmemory 0
        CONFIG SET maxmemory-policy volatile-lru
        SET K0 8
        OBJECT REFCOUNT K0
        CONFIG SET maxmemory-policy noeviction
        "#,
    );
    script_on_both(4, &text);
}

// ---------------------------------------------------------------------------------------
// Regression tests: differences the tests above found, each pinned down on its own.

/// Redis stores INCRBYFLOAT's result as a new string object (`embstr`), never as an
/// integer, even when the sum is integral: after `INCRBYFLOAT k 3`, OBJECT ENCODING is
/// `embstr` and OBJECT REFCOUNT 1 (not the shared integers' 2147483647).
#[test]
fn incrbyfloat_result_is_embstr_like_redis() {
    script_on_both(
        2,
        r#"
        INCRBYFLOAT K0 3
        OBJECT ENCODING K0
        OBJECT REFCOUNT K0
        INCRBYFLOAT K1 100000
        OBJECT ENCODING K1
        SET K1 5
        INCRBYFLOAT K1 0
        OBJECT ENCODING K1
        OBJECT REFCOUNT K1
        "#,
    );
}

/// Redis's `dupStringObject` gives a copied integer its own object: after `SET a 1`,
/// `COPY a b`, OBJECT REFCOUNT of b is 1.
#[test]
fn copy_of_a_shared_integer_is_unshared_like_redis() {
    script_everywhere(
        2,
        r#"
        SET K0 1
        COPY K0 K1
        OBJECT ENCODING K1
        OBJECT REFCOUNT K1
        OBJECT REFCOUNT K0
        "#,
    );
}

/// A string APPEND or SETRANGE made `raw` stays `raw` in Redis when its expiry changes or
/// it is renamed or copied: the object is the same (or a raw duplicate).
#[test]
fn raw_strings_stay_raw_like_redis() {
    script_everywhere(
        3,
        r#"
        SET K0 abc
        APPEND K0 d
        OBJECT ENCODING K0
        EXPIRE K0 100
        OBJECT ENCODING K0
        PERSIST K0
        OBJECT ENCODING K0
        GETEX K0 EX 100
        OBJECT ENCODING K0
        GETEX K0 PERSIST
        OBJECT ENCODING K0
        PEXPIREAT K0 99999999999999
        OBJECT ENCODING K0
        COPY K0 K1
        OBJECT ENCODING K1
        RENAME K0 K2
        OBJECT ENCODING K2
        RENAMENX K2 K0
        OBJECT ENCODING K0
        "#,
    );
}

/// glibc's `strtold` rounds a value at or just below half the smallest subnormal long
/// double (2^-16446) to zero and reports ERANGE, which `string2ld` refuses.
#[test]
fn incrbyfloat_refuses_operands_that_underflow_to_zero() {
    script_on_both(
        1,
        r#"
        INCRBYFLOAT K0 0x1p-16446
        INCRBYFLOAT K0 0x0.00001p-16426
        INCRBYFLOAT K0 1.82259976594123730126e-4951
        INCRBYFLOAT K0 1.8225997659412373012e-4951
        SET K0 0x1p-16446
        INCRBYFLOAT K0 1
        "#,
    );
}

/// LCS with its keys in one slot, on one shard and on two: the string, LEN, IDX with
/// MINMATCHLEN (negative, zero, filtering) and WITHMATCHLEN, RESP2 and RESP3, missing
/// keys, empty strings, integers, and every error in Redis's order (the keys' type
/// first, then the options).
#[test]
fn lcs_matches_redis() {
    script_everywhere(
        2,
        r#"
        SET K0 ohmytext
        SET K1 mynewtext
        LCS K0 K1
        LCS K0 K1 LEN
        LCS K0 K1 len
        LCS K0 K1 IDX
        LCS K0 K1 IDX WITHMATCHLEN
        LCS K0 K1 IDX MINMATCHLEN 4
        LCS K0 K1 IDX MINMATCHLEN 4 WITHMATCHLEN
        LCS K0 K1 IDX MINMATCHLEN -5 WITHMATCHLEN
        LCS K0 K1 MINMATCHLEN 2 IDX MINMATCHLEN 3
        LCS K0 K1 WITHMATCHLEN
        LCS K0 K1 MINMATCHLEN 100
        LCS K1 K0 IDX WITHMATCHLEN
        LCS K0 K0 IDX WITHMATCHLEN
        LCS K0 K1 IDX LEN
        LCS K0 K1 LEN IDX
        LCS K0 K1 MINMATCHLEN
        LCS K0 K1 MINMATCHLEN x
        LCS K0 K1 MINMATCHLEN 1.5 IDX
        LCS K0 K1 FOO
        LCS K0 K1 IDX FOO
        LCS K0
        LCS K0 nokey
        LCS nokey K0 IDX
        LCS nokey nokey2 IDX WITHMATCHLEN
        SET K1 ""
        LCS K0 K1 IDX
        SET K0 123456789
        SET K1 9384756
        LCS K0 K1 IDX WITHMATCHLEN
        LCS K0 K1
        SET K0 "abcabcabcabcXabcabc"
        SET K1 "cbacbaabcabcYcbaabc"
        LCS K0 K1 IDX WITHMATCHLEN
        LCS K0 K1 IDX MINMATCHLEN 3
        LCS K0 K1
        !HELLO 3
        LCS K0 K1 IDX WITHMATCHLEN
        LCS K0 K1 IDX
        LCS K0 K1 LEN
        !HELLO 2
        LPUSH K1 x
        LCS K0 K1
        LCS K0 K1 FOO
        LCS K1 K0 IDX LEN
        LCS K1 nokey MINMATCHLEN x
        CONFIG SET proto-max-bulk-len 1048576
        SET K0 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        SET K1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        LCS K0 K1 LEN
        SET K1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        LCS K0 K1 LEN
        CONFIG SET proto-max-bulk-len 536870912
        "#,
    );
}

/// Random strings over a small alphabet, LCS with random options, both ways.
#[test]
fn random_lcs_match_redis() {
    for_each_thread_count(|d, ctx| {
        for seed in seeds("lcs random strings", 2) {
            let mut rng = Rng::new(seed);
            let mut lines = Vec::new();
            for _ in 0..40 {
                for key in ["lcs:a", "{lcs:a}b", "lcs:c"] {
                    let len = rng.below(30);
                    let s: String = (0..len)
                        .map(|_| ['a', 'b', 'c', 'd'][rng.below(4)])
                        .collect();
                    lines.push(format!("SET {key} \"{s}\""));
                }
                for (x, y) in [
                    ("lcs:a", "{lcs:a}b"),
                    ("lcs:a", "lcs:c"),
                    ("lcs:c", "lcs:a"),
                ] {
                    let opts = [
                        "",
                        " LEN",
                        " IDX",
                        " IDX WITHMATCHLEN",
                        " IDX MINMATCHLEN 2 WITHMATCHLEN",
                        " IDX MINMATCHLEN 3",
                    ][rng.below(6)];
                    lines.push(format!("LCS {x} {y}{opts}"));
                }
            }
            let ctx = format!("{ctx}, seed {seed}");
            script(d, &[], &ctx, "FLUSHALL");
            script(d, &[], &ctx, &lines.join("\n"));
        }
    });
}
