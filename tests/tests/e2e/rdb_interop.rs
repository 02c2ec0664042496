//! The RDB codec (goblin_store::rdb) against redis-server 7.0: a dump.rdb that
//! redis-server saved reads back as the strings it holds (every string encoding: plain,
//! integer, LZF), and a file Goblin writes loads into redis-server at start-up with the
//! same values and expiries. Collections are not in the codec yet (issue 13).

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
