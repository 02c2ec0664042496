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
