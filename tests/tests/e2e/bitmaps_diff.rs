//! The bitmap commands on strings — SETBIT, GETBIT, BITCOUNT, BITPOS — differentially
//! against redis-server 7.0, with `--threads 1` and 4: every argument error in Redis's
//! order of checks, growth and zero padding, BYTE and BIT ranges with negative and
//! out-of-range indexes, BITPOS's clear bit past the end without an explicit end, keys of
//! other types and missing keys; then seeded random operations over two keys.

use goblin_tests::diff::{for_each_thread_count, script, script_everywhere};
use goblin_tests::rng::{Rng, seeds};

/// Every option and error, on strings set by SET and grown by SETBIT.
#[test]
fn bitmap_commands_match_redis() {
    script_everywhere(
        3,
        r#"
        SETBIT K0 7 1
        SETBIT K0 7 1
        SETBIT K0 7 0
        SETBIT K0 100 1
        GET K0
        STRLEN K0
        OBJECT ENCODING K0
        SETBIT K0 -1 1
        SETBIT K0 x 1
        SETBIT K0 4294967296 1
        SETBIT K0 4294967295 x
        SETBIT K0 1 2
        SETBIT K0 1 -1
        SETBIT K0 x 2
        GETBIT K0 100
        GETBIT K0 101
        GETBIT K0 99999
        GETBIT K0 -1
        GETBIT K0 x
        GETBIT K1 0
        SET K1 "\xff\xf0\x00\x0f"
        BITCOUNT K1
        BITCOUNT K1 0 0
        BITCOUNT K1 1 2
        BITCOUNT K1 -1 -1
        BITCOUNT K1 -2 -3
        BITCOUNT K1 -100 100
        BITCOUNT K1 2 1
        BITCOUNT K1 0 -1 BYTE
        BITCOUNT K1 0 -1 BIT
        BITCOUNT K1 5 13 BIT
        BITCOUNT K1 9 9 BIT
        BITCOUNT K1 8 8 bit
        BITCOUNT K1 -5 -1 BIT
        BITCOUNT K1 -100 7 BIT
        BITCOUNT K1 30 1000 BIT
        BITCOUNT K1 0 -1 FOO
        BITCOUNT K1 0
        BITCOUNT K1 x 1
        BITCOUNT K1 0 1 BIT x
        BITCOUNT K2
        BITCOUNT K2 x y
        BITPOS K1 1
        BITPOS K1 0
        BITPOS K1 0 1
        BITPOS K1 1 2
        BITPOS K1 1 -1
        BITPOS K1 0 0 0
        BITPOS K1 0 3 3
        BITPOS K1 1 2 2
        BITPOS K1 1 7 9 BIT
        BITPOS K1 0 0 7 BIT
        BITPOS K1 0 0 11 BIT
        BITPOS K1 1 13 30 BIT
        BITPOS K1 0 -4 -1 BIT
        BITPOS K1 1 -100 -90
        BITPOS K1 1 5 2
        BITPOS K1 0 1 2 FOO
        BITPOS K1 2
        BITPOS K1 x
        BITPOS K1 1 x
        BITPOS K1 1 0 x
        BITPOS K2 0
        BITPOS K2 1
        BITPOS K2 0 5 10
        BITPOS K2 2
        SET K2 "\xff\xff"
        BITPOS K2 0
        BITPOS K2 0 0
        BITPOS K2 0 0 -1
        BITPOS K2 0 0 15 BIT
        SET K2 ""
        BITPOS K2 0
        BITPOS K2 1
        BITCOUNT K2
        BITCOUNT K2 0 -1
        LPUSH K2 a
        SETBIT K2 0 1
        GETBIT K2 0
        BITCOUNT K2
        BITPOS K2 1
        SET K2 12345
        OBJECT ENCODING K2
        SETBIT K2 0 1
        GET K2
        OBJECT ENCODING K2
        "#,
    );
}

/// BITOP with its keys in one slot, on one shard and on different shards: every
/// operation, missing and shorter sources, an empty result deleting the destination, a
/// destination of another type or with an expiry replaced, and its errors.
#[test]
fn bitop_matches_redis() {
    script_everywhere(
        4,
        r#"
        SET K0 "ðª"
        SET K1 "ÿ"
        BITOP AND K2 K0 K1
        GET K2
        BITOP OR K2 K0 K1
        GET K2
        BITOP XOR K2 K0 K1 K3
        GET K2
        BITOP NOT K2 K0
        GET K2
        OBJECT ENCODING K2
        BITOP and K2 K3
        EXISTS K2
        BITOP NOT K2 K3
        BITOP AND K2 K0 K0
        GET K2
        BITOP NOT K2 K0 K1
        BITOP NOPE K2 K0
        BITOP AND K2
        LPUSH K3 x
        BITOP OR K2 K0 K3
        BITOP OR K3 K0 K1
        TYPE K3
        GET K3
        SET K2 x EX 100
        BITOP OR K2 K1
        TTL K2
        SET K0 ""
        BITOP OR K2 K0
        EXISTS K2
        "#,
    );
}

/// Random SETBIT, GETBIT, BITCOUNT and BITPOS over two keys, with ranges of both kinds;
/// replies compared one by one.
#[test]
fn random_bitmap_operations_match_redis() {
    for_each_thread_count(|d, ctx| {
        for seed in seeds("bitmap random operations", 2) {
            let mut rng = Rng::new(seed);
            let mut lines = Vec::new();
            for _ in 0..400 {
                let key = if rng.below(2) == 0 { "bm:a" } else { "bm:b" };
                let idx = |rng: &mut Rng| rng.below(80) as i64 - 20;
                let line = match rng.below(5) {
                    0 | 1 => format!("SETBIT {key} {} {}", rng.below(200), rng.below(2)),
                    2 => format!("GETBIT {key} {}", rng.below(220)),
                    3 => {
                        let unit = ["", " BYTE", " BIT"][rng.below(3)];
                        format!("BITCOUNT {key} {} {}{unit}", idx(&mut rng), idx(&mut rng))
                    }
                    _ => match rng.below(3) {
                        0 => format!("BITPOS {key} {}", rng.below(2)),
                        1 => format!("BITPOS {key} {} {}", rng.below(2), idx(&mut rng)),
                        _ => {
                            let unit = ["", " BYTE", " BIT"][rng.below(3)];
                            format!(
                                "BITPOS {key} {} {} {}{unit}",
                                rng.below(2),
                                idx(&mut rng),
                                idx(&mut rng)
                            )
                        }
                    },
                };
                lines.push(line);
            }
            let ctx = format!("{ctx}, seed {seed}");
            script(d, &[], &ctx, "FLUSHALL");
            script(d, &[], &ctx, &lines.join("\n"));
        }
    });
}

/// BITFIELD and BITFIELD_RO: every type width at the edges, `#` offsets, GET past the
/// end, SET and INCRBY under WRAP, SAT and FAIL (signed and unsigned, 64-bit signed and
/// 63-bit unsigned included), a policy changing mid-command, growth, a missing key made
/// by a failed write, integers made raw, and every error in Redis's order.
#[test]
fn bitfield_matches_redis() {
    script_everywhere(
        2,
        r#"
        BITFIELD K0 GET u8 0
        EXISTS K0
        BITFIELD K0 SET u8 0 255 GET u8 0 GET i8 0 GET u4 4 GET i4 4 GET u1 0 GET i1 0
        GET K0
        BITFIELD K0 SET i64 8 -1 GET u63 8 GET i64 8 GET i64 9 GET u63 70
        STRLEN K0
        BITFIELD K0 SET u8 #3 65 GET u8 #3 GET u16 #1 SET i5 #7 -3 GET i5 #7 GET u5 35
        BITFIELD K0 INCRBY u2 100 1 INCRBY u2 100 1 INCRBY u2 100 1 INCRBY u2 100 1
        BITFIELD K0 OVERFLOW SAT INCRBY u2 102 10 INCRBY i4 110 100 INCRBY i4 110 -100
        BITFIELD K0 OVERFLOW FAIL INCRBY u2 102 1 INCRBY i4 110 -1 INCRBY i4 110 -100 GET i4 110
        BITFIELD K0 OVERFLOW WRAP INCRBY i8 200 127 INCRBY i8 200 1 INCRBY i8 200 -1000
        BITFIELD K0 SET u8 300 256 SET i8 300 200 SET u8 308 -1 GET u8 300 GET u8 308
        BITFIELD K0 OVERFLOW SAT SET u8 316 256 SET i8 324 200 SET i8 332 -200 SET u8 340 -1
        BITFIELD K0 OVERFLOW FAIL SET u8 348 256 SET i8 356 -129 SET u3 364 7 OVERFLOW WRAP SET u3 364 9
        BITFIELD K0 INCRBY i64 400 9223372036854775807 INCRBY i64 400 1 INCRBY i64 400 -1
        BITFIELD K0 OVERFLOW SAT INCRBY i64 464 -9223372036854775808 INCRBY i64 464 -1 INCRBY i64 464 9223372036854775807 INCRBY i64 464 9223372036854775807
        BITFIELD K0 OVERFLOW FAIL INCRBY i64 528 9223372036854775807 INCRBY i64 528 1 INCRBY i64 528 -9223372036854775808 INCRBY i64 528 -9223372036854775808
        BITFIELD K0 INCRBY u63 600 9223372036854775807 INCRBY u63 600 1 OVERFLOW SAT INCRBY u63 600 -5 INCRBY u63 600 -9223372036854775808
        BITFIELD K0 SET u63 700 -1 GET u63 700 OVERFLOW SAT SET u63 700 -1 GET u63 700
        GET K0
        STRLEN K0
        BITFIELD K0 GET u8 100000 GET i64 4294967231
        BITFIELD K0
        BITFIELD K0 GET
        BITFIELD K0 GET u8
        BITFIELD K0 GET u8 0 SET
        BITFIELD K0 FOO u8 0
        BITFIELD K0 GET u64 0
        BITFIELD K0 GET i65 0
        BITFIELD K0 GET i0 0
        BITFIELD K0 GET x8 0
        BITFIELD K0 GET I8 0
        BITFIELD K0 SET U8 0 1
        BITFIELD K0 GET i-42 0
        BITFIELD K0 GET i5? 0
        BITFIELD_RO K0 GET I16 0
        BITFIELD K0 GET "" 0
        BITFIELD K0 GET u8 -1
        BITFIELD K0 GET u8 x
        BITFIELD K0 GET u8 4294967296
        BITFIELD K0 GET u8 #-1
        BITFIELD K0 GET u8 #536870912
        BITFIELD K0 GET u8 ##1
        BITFIELD K0 SET u8 0 x
        BITFIELD K0 SET u8 0 1.5
        BITFIELD K0 INCRBY u8 0 99999999999999999999
        BITFIELD K0 OVERFLOW
        BITFIELD K0 OVERFLOW NOPE GET u8 0
        BITFIELD K0 OVERFLOW sat overflow wrap GET u8 0
        BITFIELD K0 GET u8 0 OVERFLOW FAIL
        BITFIELD K0 SET u8 0 1 GET u64 0
        BITFIELD_RO K0 GET u8 0 GET i16 #2
        BITFIELD_RO K0 SET u8 0 1
        BITFIELD_RO K0 INCRBY u8 0 1
        BITFIELD_RO K0 GET u8 0 SET u8 0 1
        BITFIELD_RO K0 GET u9 x
        BITFIELD_RO K0
        BITFIELD_RO K1 GET u8 0
        BITFIELD K1 OVERFLOW FAIL SET u2 0 5
        EXISTS K1
        GET K1
        BITFIELD K1 OVERFLOW FAIL SET u2 16 5
        STRLEN K1
        SET K1 7
        OBJECT ENCODING K1
        BITFIELD K1 GET u8 0
        OBJECT ENCODING K1
        BITFIELD K1 SET u8 0 55
        OBJECT ENCODING K1
        SET K1 7
        BITFIELD K1 SET u8 0 56
        OBJECT ENCODING K1
        GET K1
        SET K1 v EX 100
        BITFIELD K1 SET u8 0 119
        GET K1
        TTL K1
        LPUSH K1 x
        LPUSH K0 x
        BITFIELD K0 GET u8 0
        BITFIELD K0 SET u8 0 1
        BITFIELD K0 SET u8 0 x
        BITFIELD_RO K0 GET u8 0
        BITFIELD_RO K0 SET u8 0 1
        "#,
    );
}

/// Random BITFIELD operations of random types, offsets and policies over two keys, read
/// back with GET; replies compared one by one.
#[test]
fn random_bitfield_operations_match_redis() {
    for_each_thread_count(|d, ctx| {
        for seed in seeds("bitfield random operations", 2) {
            let mut rng = Rng::new(seed);
            let mut lines = Vec::new();
            let values = [
                "0",
                "1",
                "-1",
                "7",
                "-128",
                "255",
                "65536",
                "9223372036854775807",
                "-9223372036854775808",
                "4611686018427387904",
            ];
            for _ in 0..300 {
                let key = if rng.below(2) == 0 { "bf:a" } else { "bf:b" };
                let mut line = if rng.below(8) == 0 {
                    format!("BITFIELD_RO {key}")
                } else {
                    format!("BITFIELD {key}")
                };
                for _ in 0..1 + rng.below(4) {
                    let signed = rng.below(2) == 0;
                    let bits = 1 + rng.below(if signed { 64 } else { 63 });
                    let ty = format!("{}{bits}", if signed { 'i' } else { 'u' });
                    let offset = if rng.below(4) == 0 {
                        format!("#{}", rng.below(6))
                    } else {
                        rng.below(200).to_string()
                    };
                    let value = values[rng.below(values.len())];
                    let op = match rng.below(6) {
                        0 | 1 => format!(" GET {ty} {offset}"),
                        2 => format!(" SET {ty} {offset} {value}"),
                        3 | 4 => format!(" INCRBY {ty} {offset} {value}"),
                        _ => format!(" OVERFLOW {}", ["WRAP", "SAT", "FAIL"][rng.below(3)]),
                    };
                    line.push_str(&op);
                }
                lines.push(line);
                if rng.below(10) == 0 {
                    lines.push(format!("GET {key}"));
                }
            }
            let ctx = format!("{ctx}, seed {seed}");
            script(d, &[], &ctx, "FLUSHALL");
            script(d, &[], &ctx, &lines.join("\n"));
        }
    });
}
