//! HyperLogLog — PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST — differentially against
//! redis-server 7.0, with `--threads 1` and 4 and keys in one slot, on one shard and on
//! different shards: the replies, and the values' bytes (GET) after every kind of
//! change — sparse values grown, split and merged run by run, promoted to dense by size
//! or by a register above 32, merged; the cached cardinality written by PFCOUNT; every
//! error, corrupted values set by SET included; WATCH seeing the cache's write but not
//! PFDEBUG's conversion; seeded random sequences; DUMP and RESTORE both ways.

use goblin_tests::diff::{for_each_thread_count, script, script_everywhere};
use goblin_tests::keys::{LAYOUTS, Layout};
use goblin_tests::rng::{Rng, seeds};
use goblin_tests::{Differential, Raw, Server, default_threads, show};

/// A PFADD of `n` elements named `{prefix}{i}`.
fn pfadd(key: &str, prefix: &str, range: std::ops::Range<usize>) -> String {
    let mut line = format!("PFADD {key}");
    for i in range {
        line.push_str(&format!(" {prefix}{i}"));
    }
    line
}

/// Small HyperLogLogs: creation, counting, the cache, the encodings, merges with
/// missing sources and an existing destination, TTLs kept, and every error.
#[test]
fn hyperloglog_commands_match_redis() {
    script_everywhere(
        4,
        r#"
        PFADD K0
        GET K0
        OBJECT ENCODING K0
        PFADD K0
        PFADD K0 a b c
        GET K0
        PFADD K0 a b c
        PFADD K0 c d
        PFCOUNT K0
        GET K0
        PFCOUNT K0
        PFCOUNT K1
        EXISTS K1
        PFADD K1 a
        PFADD K1 x y z ""
        PFCOUNT K0 K1
        PFCOUNT K1 K0 K2
        PFCOUNT K2 K2
        PFCOUNT K0 K0
        GET K0
        PFMERGE K2 K0 K1
        GET K2
        OBJECT ENCODING K2
        PFCOUNT K2
        PFMERGE K2 K3
        GET K2
        PFMERGE K3
        GET K3
        PFCOUNT K3
        PFMERGE K3 K2
        GET K3
        PFMERGE K1 K1
        GET K1
        PFDEBUG ENCODING K2
        PFDEBUG DECODE K2
        PFDEBUG encoding K2
        PFDEBUG GETREG K1
        PFDEBUG DECODE K1
        PFDEBUG ENCODING K1
        PFDEBUG TODENSE K0
        PFDEBUG TODENSE K0
        PFDEBUG DECODE K0
        PFDEBUG ENCODING K0
        GET K1
        PFCOUNT K0
        PFADD K0 a
        PFADD K0 newone
        PFCOUNT K0
        PFMERGE K3 K0 K2
        PFDEBUG ENCODING K3
        PFCOUNT K3
        PFDEBUG NOPE K3
        PFDEBUG "bad\r\nsub" K3
        PFDEBUG "getreg\x00tail" K1
        PFDEBUG GETREG nokey
        PFDEBUG NOPE nokey
        EXPIRE K1 1000
        PFADD K1 ttl1 ttl2
        ~TTL K1
        PFMERGE K1 K0
        ~TTL K1
        PFCOUNT K1
        ~TTL K1
        PFDEBUG TODENSE K1
        ~TTL K1
        DEL K0 K1 K2 K3
        SET K0 abc
        PFADD K0 a
        PFCOUNT K0
        PFCOUNT K0 K1
        PFMERGE K1 K0
        PFMERGE K0 K1
        EXISTS K1
        PFDEBUG ENCODING K0
        SET K0 12345678901234567
        PFADD K0 a
        LPUSH K1 a
        PFADD K1 a
        PFCOUNT K1
        PFCOUNT K2 K1
        PFMERGE K2 K1
        PFMERGE K1 K2
        PFDEBUG GETREG K1
        EXISTS K2
        PFADD
        PFCOUNT
        PFMERGE
        PFDEBUG GETREG
        PFDEBUG GETREG K0 extra
        PFSELFTEST extra
        "#,
    );
}

/// Corrupted values set with SET: headers that are not HyperLogLogs, sparse codes that
/// cover too few or too many registers, a valid stale cache over a broken code, an `XZERO` cut at the end (its
/// second byte is the string's terminator), and a PFADD that changes registers before it
/// finds the code broken.
///
/// (Not compared: a command after a PFADD that split such a cut `XZERO`. Redis then
/// leaves the split's last byte past the string's end, where its next commands read it;
/// Goblin keeps the string only, and reads 0 there.)
#[test]
fn corrupted_hyperloglogs_match_redis() {
    script_everywhere(
        3,
        r#"
        SET K2 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"
        OBJECT ENCODING K2
        PFADD K2
        OBJECT ENCODING K2
        SET K2 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"
        PFCOUNT K2 K1
        PFMERGE K1 K2
        OBJECT ENCODING K2
        PFDEBUG ENCODING K2
        OBJECT ENCODING K2
        SET K2 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"
        PFCOUNT K2
        OBJECT ENCODING K2
        GET K2
        DEL K1 K2
        SET K0 HYLL
        PFADD K0 a
        PFCOUNT K0
        PFDEBUG ENCODING K0
        SET K0 "HYLL\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"
        PFADD K0 a
        PFCOUNT K0 K1
        SET K0 "HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"
        PFADD K0 a
        PFMERGE K1 K0
        EXISTS K1
        SET K0 "HELL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"
        PFCOUNT K0
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x0a"
        PFCOUNT K0
        OBJECT ENCODING K0
        PFCOUNT K0 K1
        PFMERGE K1 K0
        EXISTS K1
        PFDEBUG DECODE K0
        PFDEBUG ENCODING K0
        PFDEBUG GETREG K0
        PFDEBUG TODENSE K0
        SET K0 "HYLL\x01\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\x0a"
        PFCOUNT K0
        GET K0
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"
        PFCOUNT K0
        PFADD K0 a
        PFDEBUG DECODE K0
        PFMERGE K1 K0
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff\x8f"
        PFCOUNT K0
        PFCOUNT K0 K1
        PFDEBUG DECODE K0
        PFMERGE K1 K0
        GET K1
        PFMERGE K0 K1
        GET K0
        PFDEBUG ENCODING K0
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff\x00"
        PFCOUNT K0
        PFCOUNT K0 K1
        PFMERGE K2 K0
        PFDEBUG TODENSE K0
        PFADD K0 a
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x6e\xdf"
        PFADD K0 a
        GET K0
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x6e\xdf"
        PFADD K0 c d a b
        GET K0
        OBJECT ENCODING K0
        PFADD K0 c
        PFADD K0 f
        GET K0
        PFCOUNT K0
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f\x3f\x3f\x3e\x7f"
        PFCOUNT K0
        GET K0
        PFDEBUG DECODE K0
        PFMERGE K1 K0
        GET K1
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f\x3f\x3f\x3e\x7f"
        PFADD K0 a
        GET K0
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f\x3f\x3f\x3e\x7f"
        PFDEBUG TODENSE K0
        PFCOUNT K0
        SET K0 "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f\x3f\x3f\x3e\x40"
        PFCOUNT K0
        PFADD K0 a
        GET K0
        "#,
    );
}

/// Thousands of elements: sparse values grown until promoted to dense, dense values
/// added to, merged with sparse ones into either encoding, counted alone and together;
/// the bytes of every value compared.
#[test]
fn large_hyperloglogs_match_redis() {
    let mut lines = vec![
        pfadd("K0", "e", 0..200),
        "GET K0".into(),
        "PFCOUNT K0".into(),
        pfadd("K0", "e", 200..700),
        "GET K0".into(),
        "PFDEBUG ENCODING K0".into(),
        pfadd("K0", "e", 700..3000),
        "PFDEBUG ENCODING K0".into(),
        "GET K0".into(),
        "PFCOUNT K0".into(),
        "GET K0".into(),
        pfadd("K0", "e", 2900..3100),
        "PFCOUNT K0".into(),
        pfadd("K1", "f", 0..100),
        "PFCOUNT K0 K1".into(),
        "PFMERGE K2 K1".into(),
        "GET K2".into(),
        "PFMERGE K2 K0".into(),
        "PFDEBUG ENCODING K2".into(),
        "GET K2".into(),
        "PFCOUNT K2".into(),
        pfadd("K3", "g", 0..400),
        "PFMERGE K3 K1".into(),
        "GET K3".into(),
        "PFDEBUG ENCODING K3".into(),
        pfadd("K1", "h", 0..600),
        "PFMERGE K3 K1".into(),
        "GET K3".into(),
        "PFDEBUG ENCODING K3".into(),
        "PFCOUNT K0 K1 K2 K3".into(),
        "PFMERGE K1 K0 K2 K3".into(),
        "GET K1".into(),
        "PFCOUNT K1".into(),
        pfadd("K0", "i", 0..20_000),
        "PFCOUNT K0".into(),
        "PFCOUNT K0 K3".into(),
    ];
    // One element at a time, checking the bytes, through the promotion.
    for i in 0..40 {
        lines.push(pfadd("K3", "one", i * 37..i * 37 + 1));
        lines.push("GET K3".into());
    }
    script_everywhere(4, &lines.join("\n"));
}

/// Registers set by hand: a sparse value holding the largest sparse register (32), made
/// dense, raised to 33 with SETRANGE, merged into sparse and dense destinations (elements
/// whose pattern is that long are one in 2^33).
#[test]
fn crafted_registers_match_redis() {
    // Register 0 at 32 (VAL 32,1), then XZERO 16383.
    let sparse32 = r#""HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\xfc\x7f\xfe""#;
    script_everywhere(
        3,
        &format!(
            "SET K0 {sparse32}
             PFCOUNT K0
             PFDEBUG DECODE K0
             PFMERGE K1 K0
             GET K1
             PFDEBUG TODENSE K0
             SETRANGE K0 16 \"\\x21\"
             PFDEBUG GETREG K0
             PFCOUNT K0
             PFMERGE K1 K0
             PFDEBUG ENCODING K1
             GET K1
             PFMERGE K2 K0 K1
             PFCOUNT K2"
        ),
    );
}

/// WATCH sees PFCOUNT's cache write (Redis signals it) but neither a PFADD that changes
/// nothing nor PFDEBUG's conversion to dense (Redis signals neither).
#[test]
fn watch_sees_what_redis_signals() {
    script_everywhere(
        3,
        "
        PFADD K0 a b c
        WATCH K0
        PFADD K0 a
        MULTI
        PING
        EXEC
        WATCH K0
        PFCOUNT K0
        MULTI
        PING
        EXEC
        WATCH K0
        PFCOUNT K0
        MULTI
        PING
        EXEC
        WATCH K0
        PFDEBUG TODENSE K0
        MULTI
        PING
        EXEC
        WATCH K0
        PFMERGE K0 K1
        MULTI
        PING
        EXEC
        MULTI
        PFADD K0 x
        PFMERGE K1 K0 K2
        PFCOUNT K0 K1
        PFCOUNT K1
        EXEC
        GET K1
        ",
    );
}

/// The configuration option, and PFSELFTEST's answer.
#[test]
fn config_and_selftest_match_redis() {
    let mut d = Differential::threads(default_threads());
    d.check_str("CONFIG GET hll-sparse-max-bytes");
    d.check_str("CONFIG GET hll*");
    for value in [
        "3000",
        "1kb",
        "0",
        "-1",
        "x",
        "9223372036854775807",
        "40",
        "3000",
    ] {
        d.check_str(&format!("CONFIG SET hll-sparse-max-bytes {value}"));
        d.check_str("CONFIG GET hll-sparse-max-bytes");
    }
    d.check_str("PFSELFTEST");
}

/// `hll-sparse-max-bytes` lowered and raised while values grow: sparse values promoted at
/// the threshold of the moment, on every shard.
#[test]
fn the_sparse_threshold_follows_the_configuration() {
    let mut lines = vec!["CONFIG SET hll-sparse-max-bytes 40".to_string()];
    for i in 0..12 {
        lines.push(pfadd("K0", "t", i * 3..i * 3 + 3));
        lines.push("GET K0".into());
        lines.push(pfadd("K1", "u", i..i + 1));
        lines.push("PFDEBUG ENCODING K1".into());
    }
    lines.push("PFMERGE K2 K1".into());
    lines.push("GET K2".into());
    lines.push("CONFIG SET hll-sparse-max-bytes 0".into());
    lines.push("PFADD K3 a".into());
    lines.push("GET K3".into());
    lines.push("PFMERGE K3 K2".into());
    lines.push("PFDEBUG ENCODING K3".into());
    lines.push("CONFIG SET hll-sparse-max-bytes 100000".into());
    lines.push(pfadd("K4", "v", 0..5000));
    lines.push("PFDEBUG ENCODING K4".into());
    lines.push("GET K4".into());
    lines.push("PFCOUNT K4".into());
    lines.push("CONFIG SET hll-sparse-max-bytes 3000".into());
    script_everywhere(5, &lines.join("\n"));
}

/// Seeded random PFADD (a few elements or hundreds, from pools that overlap), PFCOUNT of
/// one key or several, PFMERGE, PFDEBUG, GET, DEL, now and then a key of another type;
/// replies compared one by one.
#[test]
fn random_hyperloglog_operations_match_redis() {
    for_each_thread_count(|d, ctx| {
        for seed in seeds("hyperloglog random operations", 2) {
            let mut rng = Rng::new(seed);
            for layout in LAYOUTS {
                let keys = layout.keys(5);
                let mut lines = Vec::new();
                for _ in 0..250 {
                    let key = |rng: &mut Rng| format!("K{}", rng.below(5));
                    let line = match rng.below(12) {
                        0..=3 => {
                            let n = *rng.pick(&[0, 1, 2, 5, 20, 100, 400, 1500]);
                            let pool = *rng.pick(&["a", "b", "c"]);
                            let start = rng.below(3000);
                            pfadd(&key(&mut rng), pool, start..start + n)
                        }
                        4 | 5 => {
                            let n = 1 + rng.below(3);
                            let ks: Vec<String> = (0..n).map(|_| key(&mut rng)).collect();
                            format!("PFCOUNT {}", ks.join(" "))
                        }
                        6 => {
                            let n = rng.below(4);
                            let ks: Vec<String> = (0..=n).map(|_| key(&mut rng)).collect();
                            format!("PFMERGE {}", ks.join(" "))
                        }
                        7 | 8 => format!("GET {}", key(&mut rng)),
                        9 => {
                            let sub = *rng.pick(&["ENCODING", "DECODE", "TODENSE", "GETREG"]);
                            format!("PFDEBUG {sub} {}", key(&mut rng))
                        }
                        10 => format!("OBJECT ENCODING {}", key(&mut rng)),
                        _ => match rng.below(4) {
                            0 => format!("DEL {}", key(&mut rng)),
                            1 => format!("SADD {} m", key(&mut rng)),
                            2 => format!("SET {} plain", key(&mut rng)),
                            _ => format!("PFADD {}", key(&mut rng)),
                        },
                    };
                    lines.push(line);
                }
                let ctx = format!("{ctx}, {layout:?}, seed {seed}");
                script(d, &[], &ctx, "FLUSHALL");
                script(d, &keys, &ctx, &lines.join("\n"));
            }
        }
    });
}

/// A quoted script word holding `bytes`, every byte escaped.
fn quoted(bytes: &[u8]) -> String {
    let mut w = String::from("\"");
    for b in bytes {
        w.push_str(&format!("\\x{b:02x}"));
    }
    w.push('"');
    w
}

/// A sparse HyperLogLog of random opcodes, in runs of every kind and length (VAL runs of
/// up to 4 and neighbours of equal value, which PFADD itself rarely leaves), covering the
/// 16384 registers most of the time, else a few more or fewer; the cache valid or not.
fn random_sparse(rng: &mut Rng) -> Vec<u8> {
    let mut v = b"HYLL\x01\0\0\0".to_vec();
    for _ in 0..7 {
        v.push(rng.below(256) as u8);
    }
    v.push(if rng.percent(70) { 0x80 } else { 0 });
    let total: i64 = if rng.percent(75) {
        16384
    } else {
        16384 + rng.range(-70, 70)
    };
    let mut covered = 0i64;
    while covered < total {
        let left = total - covered;
        let n = match rng.below(10) {
            0..=4 => {
                let n = rng.range(1, 4).min(left);
                let value = rng.range(1, 32) as u8;
                v.push(0x80 | ((value - 1) << 2) | (n - 1) as u8);
                n
            }
            5..=7 => {
                let n = rng.range(1, 64).min(left);
                v.push((n - 1) as u8);
                n
            }
            _ => {
                let n = rng.range(1, 2000).min(left);
                v.push(0x40 | ((n - 1) >> 8) as u8);
                v.push(((n - 1) & 0xff) as u8);
                n
            }
        };
        covered += n;
        if v.len() > 2900 {
            break;
        }
    }
    v
}

/// Random sparse codes set by SET — valid and not, canonical or not — then added to,
/// counted, merged, converted and decoded: the same replies and the same bytes.
#[test]
fn random_sparse_codes_match_redis() {
    for_each_thread_count(|d, ctx| {
        for seed in seeds("hyperloglog random sparse codes", 2) {
            let mut rng = Rng::new(seed);
            let keys = Layout::CrossShard.keys(2);
            let mut lines = Vec::new();
            for _ in 0..60 {
                lines.push(format!("SET K0 {}", quoted(&random_sparse(&mut rng))));
                for _ in 0..6 {
                    let line = match rng.below(8) {
                        0..=2 => {
                            let n = 1 + rng.below(6);
                            let start = rng.below(200);
                            pfadd("K0", "r", start..start + n)
                        }
                        3 => "PFCOUNT K0".into(),
                        4 => "PFCOUNT K0 K1".into(),
                        5 => "PFMERGE K1 K0".into(),
                        6 => (*rng.pick(&["PFDEBUG TODENSE K0", "PFDEBUG DECODE K0"])).into(),
                        _ => "DEL K1".into(),
                    };
                    lines.push(line);
                    lines.push("GET K0".into());
                }
            }
            let ctx = format!("{ctx}, seed {seed}");
            script(d, &[], &ctx, "FLUSHALL");
            script(d, &keys, &ctx, &lines.join("\n"));
        }
    });
}

/// The payload of a bulk reply.
fn bulk(reply: &[u8]) -> Vec<u8> {
    let Some(rest) = reply.strip_prefix(b"$") else {
        panic!("not a bulk string: {}", show(reply));
    };
    let end = rest.iter().position(|&b| b == b'\r').unwrap();
    let n: usize = std::str::from_utf8(&rest[..end]).unwrap().parse().unwrap();
    rest[end + 2..end + 2 + n].to_vec()
}

/// `fill`'s HyperLogLogs made on `from`, DUMPed and RESTOREd into `to`: the values' bytes
/// and their counts, alone and together, are the same on both.
fn migrate(from: &mut Raw, to: &mut Raw, keys: &[String], what: &str) {
    let fill = [
        pfadd(&keys[0], "s", 0..50),
        pfadd(&keys[1], "d", 0..5000),
        pfadd(&keys[2], "c", 0..10),
        format!("PFCOUNT {}", keys[2]),
    ];
    for raw in [&mut *from, &mut *to] {
        raw.cmd(&[b"FLUSHALL"]);
    }
    for line in &fill {
        assert!(!from.cmd_str(line).starts_with(b"-"), "{what}: {line}");
    }
    for key in keys {
        let k = key.as_bytes();
        let payload = bulk(&from.cmd(&[b"DUMP", k]));
        let restored = to.cmd(&[b"RESTORE", k, b"0", &payload]);
        assert_eq!(show(&restored), "+OK\\r\\n", "{what}: RESTORE {key}");
        for cmd in [&b"GET"[..], b"PFCOUNT", b"GET"] {
            assert_eq!(
                show(&to.cmd(&[cmd, k])),
                show(&from.cmd(&[cmd, k])),
                "{what}: {} {key}",
                String::from_utf8_lossy(cmd)
            );
        }
    }
    let all: Vec<&[u8]> = std::iter::once(&b"PFCOUNT"[..])
        .chain(keys.iter().map(|k| k.as_bytes()))
        .collect();
    assert_eq!(show(&to.cmd(&all)), show(&from.cmd(&all)), "{what}");
}

/// HyperLogLogs DUMPed by redis-server RESTORE in goblin-server and count the same, and
/// the other way round; the values' bytes come out the same.
#[test]
fn hyperloglogs_dump_and_restore_both_ways() {
    let redis = Server::redis();
    let goblin = Server::goblin_threads(default_threads());
    let (mut r, mut g) = (redis.raw(), goblin.raw());
    let keys = Layout::CrossShard.keys(3);
    migrate(&mut r, &mut g, &keys, "redis-server → goblin-server");
    migrate(&mut g, &mut r, &keys, "goblin-server → redis-server");
}
