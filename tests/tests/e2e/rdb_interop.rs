//! The RDB codec (goblin_store::rdb) against redis-server 7.0: a dump.rdb that
//! redis-server saved reads back as what it holds (strings in every encoding: plain,
//! integer, LZF; collections in every encoding 7.0 writes), and a file Goblin writes loads
//! into redis-server at start-up with the same values and expiries. The codec is not
//! wired into the server yet (issue 13).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use goblin_store::rdb::{self, RdbValue, RdbWriter};
use goblin_tests::Server;

/// A fresh directory for one test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("goblin-rdb-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temporary path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Strings in every encoding redis-server chooses: short, integers of each width, not
/// quite integers, binary, long and compressible (LZF), long and random-ish.
fn values() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = [
        "",
        "v",
        "0",
        "-1",
        "127",
        "-128",
        "255",
        "-32769",
        "65536",
        "2147483647",
        "-2147483649",
        "9223372036854775807",
        "007",
        "+5",
        "1.5",
        " 1",
    ]
    .iter()
    .enumerate()
    .map(|(i, s)| (format!("s{i}"), s.as_bytes().to_vec()))
    .collect();
    v.push(("binary".into(), vec![0, 255, b'\r', b'\n', 1]));
    v.push(("lzf".into(), b"abcdefgh".repeat(500)));
    let noise: Vec<u8> = (0u32..3000)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    v.push(("noise".into(), noise));
    v
}

#[test]
fn redis_server_dump_reads_back() {
    let dir = TempDir::new("from-redis");
    let redis = Server::redis_with(&["--dir", dir.path(), "--dbfilename", "dump.rdb"]);
    let mut raw = redis.raw();
    let at = unix_ms() + 3_600_000;
    for (key, value) in values() {
        assert_eq!(raw.cmd(&[b"SET", key.as_bytes(), &value]), b"+OK\r\n");
    }
    let deadline = at.to_string();
    raw.cmd(&[b"PEXPIREAT", b"s1", deadline.as_bytes()]);
    assert_eq!(raw.cmd(&[b"SAVE"]), b"+OK\r\n");
    let file = std::fs::read(dir.0.join("dump.rdb")).expect("redis-server's dump.rdb");
    assert!(file.starts_with(b"REDIS0010"), "header: {:?}", &file[..9]);
    // The 4,000 repetitive bytes were LZF-compressed (uncompressed, with the 3,000 of
    // noise, the file would pass 7,000 bytes): the reader's LZF path was exercised.
    assert!(file.len() < 6_000, "dump of {} bytes", file.len());
    let mut got = Vec::new();
    let info = rdb::read(&file, |k| {
        got.push(k);
        Ok(())
    })
    .unwrap_or_else(|e| panic!("reading redis-server's dump: {e}"));
    assert_eq!(info.version, 10);
    assert!(
        info.aux
            .iter()
            .any(|(k, v)| k == b"redis-ver" && v.starts_with(b"7.0.")),
        "aux fields: {:?}",
        info.aux
    );
    let want = values();
    assert_eq!(got.len(), want.len(), "every key");
    for (key, value) in want {
        let k = got
            .iter()
            .find(|k| k.key == key.as_bytes())
            .unwrap_or_else(|| panic!("{key} missing"));
        assert_eq!(k.value, RdbValue::Str(value), "{key}");
        assert_eq!(k.db, 0);
        let expire = (key == "s1").then_some(at);
        assert_eq!(k.expire_at, expire, "{key}'s expiry");
    }
}

#[test]
fn goblin_rdb_loads_into_redis_server() {
    let dir = TempDir::new("to-redis");
    let at = unix_ms() + 3_600_000;
    let mut w = RdbWriter::new(&[(b"redis-ver", b"7.0.15"), (b"redis-bits", b"64")]);
    let values = values();
    w.select_db(0, values.len() as u64 + 1, 1);
    for (key, value) in &values {
        w.string_key(key.as_bytes(), value, None);
    }
    w.string_key(b"leased", b"worker-3", Some(at));
    std::fs::write(dir.0.join("dump.rdb"), w.finish()).expect("write dump.rdb");
    let redis = Server::redis_with(&["--dir", dir.path(), "--dbfilename", "dump.rdb"]);
    let mut raw = redis.raw();
    let n = values.len() + 1;
    assert_eq!(raw.cmd(&[b"DBSIZE"]), format!(":{n}\r\n").into_bytes());
    for (key, value) in &values {
        let mut want = format!("${}\r\n", value.len()).into_bytes();
        want.extend_from_slice(value);
        want.extend_from_slice(b"\r\n");
        assert_eq!(raw.cmd(&[b"GET", key.as_bytes()]), want, "{key}");
    }
    assert_eq!(raw.cmd(&[b"GET", b"leased"]), b"$8\r\nworker-3\r\n");
    let pexpiretime = raw.cmd(&[b"PEXPIRETIME", b"leased"]);
    assert_eq!(
        pexpiretime,
        format!(":{at}\r\n").into_bytes(),
        "the deadline kept"
    );
}

/// Collections in each of redis-server 7.0's encodings: small ones (listpack, intset) and
/// large ones (quicklist of several nodes, hashtable, skiplist).
fn collections() -> Vec<(String, RdbValue)> {
    let strs = |n: usize, p: &str| -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("{p}{i}").into_bytes()).collect()
    };
    let ints = |n: i64, step: i64| -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| (i * step - 70_000).to_string().into_bytes())
            .collect()
    };
    let mut long_list = strs(3000, "element-");
    long_list.push(vec![b'x'; 20_000]);
    long_list.extend(ints(50, 1_000_003));
    vec![
        (
            "list.small".into(),
            RdbValue::List(vec![b"a".to_vec(), b"7".to_vec(), b"-1".to_vec()]),
        ),
        ("list.long".into(), RdbValue::List(long_list)),
        ("set.intset".into(), RdbValue::Set(ints(100, 3))),
        ("set.big-ints".into(), RdbValue::Set(ints(600, 100_000))),
        ("set.strings".into(), RdbValue::Set(strs(50, "m"))),
        (
            "hash.small".into(),
            RdbValue::Hash(vec![
                (b"f".to_vec(), b"v".to_vec()),
                (b"n".to_vec(), b"-12".to_vec()),
            ]),
        ),
        (
            "hash.big".into(),
            RdbValue::Hash(strs(700, "field").into_iter().zip(ints(700, 7)).collect()),
        ),
        (
            "zset.small".into(),
            RdbValue::ZSet(vec![
                (b"a".to_vec(), 1.5),
                (b"b".to_vec(), -3.0),
                (b"c".to_vec(), f64::INFINITY),
                (b"d".to_vec(), 1e-7),
            ]),
        ),
        (
            "zset.big".into(),
            RdbValue::ZSet(
                strs(300, "member")
                    .into_iter()
                    .zip((0..300).map(|i| f64::from(i) / 7.0))
                    .collect(),
            ),
        ),
    ]
}

/// What redis-server holds at `key`, in the codec's terms (sets, hashes and sorted sets
/// in a canonical order).
fn fetch(con: &mut redis::Connection, key: &str, like: &RdbValue) -> RdbValue {
    let q = |c: &mut redis::Connection, cmd: &str, extra: &[&str]| -> Vec<Vec<u8>> {
        redis::cmd(cmd)
            .arg(key)
            .arg(extra)
            .query(c)
            .unwrap_or_else(|e| panic!("{cmd} {key}: {e}"))
    };
    match like {
        RdbValue::Str(_) => RdbValue::Str(redis::cmd("GET").arg(key).query(con).expect("GET")),
        RdbValue::List(_) => RdbValue::List(q(con, "LRANGE", &["0", "-1"])),
        RdbValue::Set(_) => RdbValue::Set(q(con, "SMEMBERS", &[])),
        RdbValue::Hash(_) => {
            let flat = q(con, "HGETALL", &[]);
            RdbValue::Hash(
                flat.chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
            )
        }
        RdbValue::ZSet(_) => {
            let flat = q(con, "ZRANGE", &["0", "-1", "WITHSCORES"]);
            RdbValue::ZSet(
                flat.chunks(2)
                    .map(|p| {
                        let score = String::from_utf8_lossy(&p[1]).parse().expect("a score");
                        (p[0].clone(), score)
                    })
                    .collect(),
            )
        }
        // Streams migrate both ways in persistence.rs (snapshots_migrate_both_ways_…),
        // compared by their replies.
        RdbValue::Stream(_) => panic!("fetch compares streams elsewhere"),
    }
}

/// Sets, hashes and sorted sets in a canonical order, for comparison.
fn canonical(v: RdbValue) -> RdbValue {
    match v {
        RdbValue::Set(mut items) => {
            items.sort();
            RdbValue::Set(items)
        }
        RdbValue::Hash(mut pairs) => {
            pairs.sort();
            RdbValue::Hash(pairs)
        }
        RdbValue::ZSet(mut members) => {
            members.sort_by(|a, b| a.0.cmp(&b.0));
            RdbValue::ZSet(members)
        }
        other => other,
    }
}

#[test]
fn redis_server_collections_read_back_in_every_encoding() {
    let dir = TempDir::new("collections-from-redis");
    // Written by Goblin's writer into redis-server, which re-encodes them as it loads…
    let mut w = RdbWriter::new(&[]);
    let all = collections();
    w.select_db(0, all.len() as u64, 0);
    for (key, value) in &all {
        w.key(key.as_bytes(), value, None);
    }
    std::fs::write(dir.0.join("dump.rdb"), w.finish()).expect("write dump.rdb");
    let redis = Server::redis_with(&["--dir", dir.path(), "--dbfilename", "dump.rdb"]);
    let mut con = redis.client();
    let mut raw = redis.raw();
    for (key, want) in &all {
        assert_eq!(
            canonical(fetch(&mut con, key, want)),
            canonical(want.clone()),
            "{key} as redis-server loaded it"
        );
    }
    // …in the encodings its size calls for, each of which the reader must know.
    for (key, encoding) in [
        ("list.small", "quicklist"),
        ("set.intset", "intset"),
        ("set.big-ints", "hashtable"),
        ("hash.small", "listpack"),
        ("hash.big", "hashtable"),
        ("zset.small", "listpack"),
        ("zset.big", "skiplist"),
    ] {
        let got = raw.cmd(&[b"OBJECT", b"ENCODING", key.as_bytes()]);
        assert_eq!(
            got,
            format!("${}\r\n{encoding}\r\n", encoding.len()).into_bytes(),
            "{key}"
        );
    }
    // Saved by redis-server, read back by Goblin's reader.
    assert_eq!(raw.cmd(&[b"SAVE"]), b"+OK\r\n");
    let file = std::fs::read(dir.0.join("dump.rdb")).expect("redis-server's dump.rdb");
    let mut got = Vec::new();
    rdb::read(&file, |k| {
        got.push(k);
        Ok(())
    })
    .unwrap_or_else(|e| panic!("reading redis-server's dump: {e}"));
    assert_eq!(got.len(), all.len());
    for (key, want) in all {
        let k = got
            .iter()
            .find(|k| k.key == key.as_bytes())
            .unwrap_or_else(|| panic!("{key} missing"));
        assert_eq!(
            canonical(k.value.clone()),
            canonical(want),
            "{key} as read back"
        );
    }
}

/// Files that redis-server before 7.0 wrote, from redis-server's own tests
/// (`tests/assets` of its 7.0.15 source, BSD-licensed): RDB 3's zipmap hash, RDB 4–9's
/// ziplists (lists, hashes, sorted sets), quicklists of ziplists and intsets.
const OLD_REDIS_FILES: [(&str, &[u8]); 5] = [
    (
        "encodings.rdb",
        include_bytes!("../../fixtures/redis-7.0.15/encodings.rdb"),
    ),
    (
        "list-quicklist.rdb",
        include_bytes!("../../fixtures/redis-7.0.15/list-quicklist.rdb"),
    ),
    (
        "hash-zipmap.rdb",
        include_bytes!("../../fixtures/redis-7.0.15/hash-zipmap.rdb"),
    ),
    (
        "hash-ziplist.rdb",
        include_bytes!("../../fixtures/redis-7.0.15/hash-ziplist.rdb"),
    ),
    (
        "zset-ziplist.rdb",
        include_bytes!("../../fixtures/redis-7.0.15/zset-ziplist.rdb"),
    ),
];

/// An RDB length.
fn rdb_len(out: &mut Vec<u8>, n: usize) {
    match n {
        0..=63 => out.push(n as u8),
        64..=16383 => out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]),
        _ => {
            out.push(0x80);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }
}

/// A ziplist of `items` as Redis 6 encoded them: integers in the narrowest integer
/// encoding, other strings with 6-, 14- or 32-bit lengths.
fn ziplist(items: &[Vec<u8>]) -> Vec<u8> {
    let entries: Vec<Vec<u8>> = items
        .iter()
        .map(|item| {
            let int = std::str::from_utf8(item)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .filter(|v| v.to_string().as_bytes() == item.as_slice());
            match int {
                Some(v @ 0..=12) => vec![0xF1 + v as u8],
                Some(v) if i8::try_from(v).is_ok() => vec![0xFE, v as u8],
                Some(v) if i16::try_from(v).is_ok() => {
                    [&[0xC0][..], &(v as i16).to_le_bytes()].concat()
                }
                Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                    [&[0xF0][..], &(v as i32).to_le_bytes()[..3]].concat()
                }
                Some(v) if i32::try_from(v).is_ok() => {
                    [&[0xD0][..], &(v as i32).to_le_bytes()].concat()
                }
                Some(v) => [&[0xE0][..], &v.to_le_bytes()].concat(),
                None => {
                    let mut e = match item.len() {
                        n @ 0..=63 => vec![n as u8],
                        n @ 64..=16383 => vec![0x40 | (n >> 8) as u8, n as u8],
                        n => [&[0x80][..], &(n as u32).to_be_bytes()].concat(),
                    };
                    e.extend_from_slice(item);
                    e
                }
            }
        })
        .collect();
    rdb::ziplist_of_entries(&entries)
}

/// An RDB 9 file, as redis-server 6.2 writes one: a ziplist list (type 10), a quicklist
/// of two ziplist nodes (14), a ziplist hash (13) and sorted set (12), one with entries
/// long enough for five-byte previous lengths and 14- and 32-bit string lengths. The
/// checksum is left 0 (`rdbchecksum no`), which both servers accept.
fn redis6_file() -> Vec<u8> {
    let s = |v: &str| v.as_bytes().to_vec();
    let ints: Vec<Vec<u8>> = [
        "0",
        "12",
        "13",
        "-1",
        "127",
        "-128",
        "300",
        "-32768",
        "70000",
        "-8388608",
        "2147483647",
        "-2147483649",
        "9223372036854775807",
        "007",
        "1.5",
    ]
    .iter()
    .map(|v| s(v))
    .collect();
    let long = vec![b'L'; 300];
    let longer = vec![b'M'; 17_000];
    let mut out = b"REDIS0009".to_vec();
    out.extend_from_slice(&[0xFA, 9]);
    out.extend_from_slice(b"redis-ver");
    out.extend_from_slice(&[5]);
    out.extend_from_slice(b"6.2.6");
    out.extend_from_slice(&[0xFE, 0]);
    let key = |out: &mut Vec<u8>, kind: u8, name: &str, blobs: &[Vec<u8>], nodes: bool| {
        out.push(kind);
        rdb_len(out, name.len());
        out.extend_from_slice(name.as_bytes());
        if nodes {
            rdb_len(out, blobs.len());
        }
        for blob in blobs {
            rdb_len(out, blob.len());
            out.extend_from_slice(blob);
        }
    };
    key(&mut out, 10, "zl-list", &[ziplist(&ints)], false);
    let mut mixed = ints.clone();
    mixed.push(long.clone());
    mixed.push(s("after-long"));
    mixed.push(longer.clone());
    key(
        &mut out,
        14,
        "ql-list",
        &[ziplist(&mixed), ziplist(&[s("tail"), s("-5")])],
        true,
    );
    let hash: Vec<Vec<u8>> = [
        s("f1"),
        s("v1"),
        s("n"),
        s("-70000"),
        s("long"),
        long,
        s("e"),
        s(""),
    ]
    .to_vec();
    key(&mut out, 13, "zl-hash", &[ziplist(&hash)], false);
    // In rank order, as Redis kept a ziplist sorted set.
    let zset: Vec<Vec<u8>> = [
        s("c"),
        s("-3"),
        s("a"),
        s("1"),
        s("b"),
        s("2.5"),
        s("e"),
        s("10000000000"),
        s("d"),
        s("inf"),
    ]
    .to_vec();
    key(&mut out, 12, "zl-zset", &[ziplist(&zset)], false);
    out.push(0xFF);
    out.extend_from_slice(&[0; 8]);
    out
}

/// What redis-server before 7.0 saved loads into Goblin as into redis-server 7.0: each
/// file of redis-server's own test assets, and a Redis 6 file with every ziplist encoding,
/// compared key by key (type, content, expiry) in every database.
#[test]
fn files_of_older_redis_servers_load_as_in_redis_server() {
    let mut files: Vec<(&str, Vec<u8>)> = OLD_REDIS_FILES
        .iter()
        .map(|(name, bytes)| (*name, bytes.to_vec()))
        .collect();
    files.push(("redis6.rdb", redis6_file()));
    for (name, bytes) in &files {
        let dir = TempDir::new(&format!("old-{name}"));
        std::fs::write(dir.0.join(name), bytes).expect("write the file");
        let args = ["--dir", dir.path(), "--dbfilename", name];
        let redis = Server::redis_with(&args);
        let goblin = Server::goblin_with(&args);
        let want = goblin_tests::dataset::all_databases(&mut redis.client());
        let got = goblin_tests::dataset::all_databases(&mut goblin.client());
        assert!(!want.is_empty(), "{name}: redis-server loaded nothing");
        for (db, keys) in &want {
            for (key, value) in keys {
                let got = got.get(db).and_then(|keys| keys.get(key));
                let key = String::from_utf8_lossy(key);
                assert_eq!(got, Some(value), "{name}: db {db} key {key}");
            }
        }
        assert_eq!(got, want, "{name}");
    }
}

/// RESTORE takes what DUMP answered on redis-server 6 (RDB 9's ziplists) as
/// redis-server 7.0 does.
#[test]
fn dump_payloads_of_redis_6_restore_as_in_redis_server() {
    let s = |v: &str| v.as_bytes().to_vec();
    let payload = |kind: u8, items: &[Vec<u8>], nodes: bool| {
        let mut p = vec![kind];
        if nodes {
            rdb_len(&mut p, 1);
        }
        let zl = ziplist(items);
        rdb_len(&mut p, zl.len());
        p.extend_from_slice(&zl);
        p.extend_from_slice(&9u16.to_le_bytes());
        let crc = rdb::crc64(0, &p);
        p.extend_from_slice(&crc.to_le_bytes());
        p
    };
    let items = [s("f"), s("1"), s("g"), s("-70000"), s("h"), vec![b'x'; 40]];
    let mut long = items.to_vec();
    long.push(vec![b'y'; 400]);
    let cases = [
        ("hash", payload(13, &items, false)),
        (
            "zset",
            payload(12, &[s("m"), s("2"), s("n"), s("3.5")], false),
        ),
        ("list", payload(10, &long, false)),
        ("quicklist", payload(14, &long, true)),
    ];
    let mut d = goblin_tests::Differential::new();
    for (key, p) in &cases {
        d.check(&[b"RESTORE", key.as_bytes(), b"0", p]);
        d.check(&[b"TYPE", key.as_bytes()]);
    }
    d.check(&[b"HGETALL", b"hash"]);
    d.check(&[b"ZRANGE", b"zset", b"0", b"-1", b"WITHSCORES"]);
    d.check(&[b"LRANGE", b"list", b"0", b"-1"]);
    d.check(&[b"LRANGE", b"quicklist", b"0", b"-1"]);
    // A damaged ziplist is refused, as there.
    let mut bad = payload(13, &items, false);
    bad[3] ^= 0x10;
    let crc = rdb::crc64(0, &bad[..bad.len() - 8]);
    let n = bad.len();
    bad[n - 8..].copy_from_slice(&crc.to_le_bytes());
    d.check(&[b"RESTORE", b"bad", b"0", &bad]);
    // A payload whose checksum is wrong: refused, unless DEBUG SET-SKIP-CHECKSUM-VALIDATION
    // says not to check it.
    let mut wrong_crc = payload(13, &items, false);
    let n = wrong_crc.len();
    wrong_crc[n - 1] ^= 0xFF;
    d.check(&[b"RESTORE", b"crc", b"0", &wrong_crc]);
    d.check(&[b"DEBUG", b"SET-SKIP-CHECKSUM-VALIDATION", b"1"]);
    d.check(&[b"RESTORE", b"crc", b"0", &wrong_crc]);
    d.check(&[b"HGETALL", b"crc"]);
    d.check(&[b"DEBUG", b"SET-SKIP-CHECKSUM-VALIDATION", b"0"]);
    d.check(&[b"RESTORE", b"crc2", b"0", &wrong_crc]);
    // A field or member twice is refused (redis-server: when it sanitizes payloads).
    d.check(&[b"CONFIG", b"SET", b"sanitize-dump-payload", b"yes"]);
    let dup_hash = payload(13, &[s("f"), s("1"), s("f"), s("2")], false);
    d.check(&[b"RESTORE", b"dup-hash", b"0", &dup_hash]);
    let dup_zset = payload(12, &[s("m"), s("1"), s("m"), s("2")], false);
    d.check(&[b"RESTORE", b"dup-zset", b"0", &dup_zset]);
    let mut plain = vec![4u8, 2, 1, b'a', 1, b'b', 1, b'a', 1, b'd'];
    plain.extend_from_slice(&9u16.to_le_bytes());
    let crc = rdb::crc64(0, &plain);
    plain.extend_from_slice(&crc.to_le_bytes());
    d.check(&[b"RESTORE", b"dup-plain", b"0", &plain]);
    d.check(&[b"EXISTS", b"dup-hash", b"dup-zset", b"dup-plain"]);
}

/// Empty collections in a file (an old redis-server's bug saved some) are passed over
/// with redis-server's lines: each key named, then the count. The file is redis-server's
/// own test asset.
#[test]
fn empty_keys_in_a_file_are_skipped_with_redis_servers_lines() {
    let mut seen = Vec::new();
    for kind in ["redis", "goblin"] {
        let dir = TempDir::new(&format!("empty-keys-{kind}"));
        std::fs::write(
            dir.0.join("dump.rdb"),
            include_bytes!("../../fixtures/redis-7.0.15/corrupt_empty_keys.rdb"),
        )
        .expect("write the file");
        let log = dir.0.join("server.log");
        let args = [
            "--dir",
            dir.path(),
            "--logfile",
            log.to_str().expect("a UTF-8 path"),
        ];
        let server = match kind {
            "redis" => Server::redis_with(&args),
            _ => Server::goblin_with(&args),
        };
        let dbsize = server.raw().cmd(&[b"DBSIZE"]);
        let text = std::fs::read_to_string(&log).expect("the log");
        let lines: Vec<String> = text
            .lines()
            .filter_map(|l| {
                ["rdbLoadObject skipping empty key", "Done loading RDB"]
                    .iter()
                    .find_map(|m| l.find(m).map(|at| l[at..].to_string()))
            })
            .collect();
        seen.push((dbsize, lines));
    }
    assert!(seen[0].1.len() > 9, "{:?}", seen[0]);
    assert_eq!(seen[1], seen[0]);
}
