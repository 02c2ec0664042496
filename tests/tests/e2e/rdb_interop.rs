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
