//! Persistence through the real server: the append-only log across restarts (every type,
//! expiries, deterministic effects, a different thread count), torn and corrupt logs,
//! snapshots (SAVE, BGSAVE under write load, SHUTDOWN) and their migration both ways with
//! redis-server 7.0, LOADING while a large file loads, MISCONF when snapshots fail.
//! SIGKILL crash tests under load are in `persistence_crash.rs`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use goblin_tests::dataset::{Content, Key, dataset};
use goblin_tests::keys::keys_on;
use goblin_tests::{Raw, Server, default_threads, scratch_dir, show};

/// A directory removed when the test ends.
pub(crate) struct Dir(PathBuf);

impl Dir {
    pub(crate) fn new(what: &str) -> Dir {
        Dir(scratch_dir(what))
    }

    pub(crate) fn arg(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temporary path")
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Sends `commands` in one write and reads their replies.
fn pipeline(raw: &mut Raw, commands: impl IntoIterator<Item = Vec<Vec<u8>>>) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut n = 0;
    for c in commands {
        let words: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
        bytes.extend(goblin_tests::encode(&words));
        n += 1;
    }
    raw.send(&bytes);
    (0..n).map(|_| raw.reply()).collect()
}

fn cmd(raw: &mut Raw, line: &str) -> Vec<u8> {
    raw.cmd_str(line)
}

fn ok(raw: &mut Raw, line: &str) {
    let reply = cmd(raw, line);
    assert!(!reply.starts_with(b"-"), "{line}: {}", show(&reply));
}

/// A dataset of every type, with expiries and commands whose replay must be their
/// effect, not the command (relative expiries, INCRBYFLOAT, SPOP, a claim's lease),
/// spread over shards, with cross-shard transactions.
fn write_everything(raw: &mut Raw, threads: usize, goblin: bool) {
    if goblin {
        for line in [
            "GOBLIN.CLAIM claim:{job1} result:{job1} token-1 600",
            "GOBLIN.CLAIM claim:{job2} result:{job2} token-2 600",
            "GOBLIN.PUBLISH claim:{job2} result:{job2} token-2 done 600",
        ] {
            ok(raw, line);
        }
    }
    for line in [
        "SET s:plain hello",
        "SET s:int 12345",
        "SET s:ttl v EX 1000",
        "PSETEX s:pttl 900000 v",
        "SET s:gone v PX 1",
        "SET s:float 1.5",
        "INCRBYFLOAT s:float 0.25",
        "APPEND s:plain ,world",
        "INCR s:int",
        "SETRANGE s:range 3 abc",
        "EXPIRE s:int 5000",
        "RPUSH l:list a b c d e",
        "LPOP l:list",
        "LPUSH l:list z",
        "SADD set:ints 1 2 3 400",
        "SADD set:strs x y z w",
        "SPOP set:strs",
        "SREM set:ints 2",
        "HSET h:hash f1 v1 f2 v2 f3 v3",
        "HDEL h:hash f2",
        "HINCRBYFLOAT h:hash n 2.5",
        "ZADD z:zset 1 a 2 b 3.5 c",
        "ZINCRBY z:zset 10 a",
        "ZPOPMIN z:zset",
        "SET temp:del x",
        "DEL temp:del",
        "MULTI",
        "SET tx:a 1",
        "INCR tx:b",
        "EXEC",
        // Streams: entries in nodes of both kinds of fields, trims, deletions, groups
        // with pending entries that changed hands, an empty stream with a group.
        "XADD x:log 1-1 a 1 b 2",
        "XADD x:log 1-* a 3 b 4",
        "XADD x:log 5-0 other field",
        "XADD x:log MAXLEN = 2 6-0 a 5 b 6",
        "XDEL x:log 5-0",
        "XGROUP CREATE x:log workers 0",
        "XGROUP CREATE x:log late $ ENTRIESREAD 3",
        "XREADGROUP GROUP workers alice COUNT 1 STREAMS x:log >",
        "XREADGROUP GROUP workers bob STREAMS x:log >",
        "XACK x:log workers 6-0",
        // (The group's read counter: XREADGROUP's own does not reach the log, as in
        // Redis 7.0, where only a read with NOACK propagates it.)
        "XGROUP SETID x:log workers 6-0 ENTRIESREAD 4",
        "XCLAIM x:log workers carol 0 1-2 RETRYCOUNT 4",
        "XGROUP CREATECONSUMER x:log workers idle",
        "XGROUP CREATE x:empty g 0 MKSTREAM",
        "XSETID x:empty 9-9 ENTRIESADDED 4 MAXDELETEDID 2-2",
    ] {
        ok(raw, line);
    }
    let fields: Vec<String> = (0..250)
        .map(|i| format!("XADD x:big {}-1 f1 v{i} f2 {i} f3 {}", i + 1, i * 7))
        .collect();
    for line in &fields {
        ok(raw, line);
    }
    ok(raw, "XTRIM x:big MAXLEN ~ 120");
    // RESTORE (a relative TTL, logged as an absolute one): the DUMP of the string "v".
    let payload: &[u8] = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce";
    for (key, ttl) in [(&b"r:restored"[..], &b"0"[..]), (b"r:ttl", b"900000000")] {
        let reply = raw.cmd(&[b"RESTORE", key, ttl, payload]);
        assert_eq!(show(&reply), "+OK\\r\\n", "RESTORE");
    }
    // Big collections (other encodings), and keys on every shard.
    let members: Vec<String> = (0..700).map(|i| format!("m{i}")).collect();
    ok(raw, &format!("SADD set:big {}", members.join(" ")));
    let pairs: Vec<String> = (0..300).map(|i| format!("f{i} {i}")).collect();
    ok(raw, &format!("HSET h:big {}", pairs.join(" ")));
    let scored: Vec<String> = (0..200).map(|i| format!("{i} m{i}")).collect();
    ok(raw, &format!("ZADD z:big {}", scored.join(" ")));
    for shard in 0..threads {
        let keys = keys_on("spread", shard, threads, 3);
        let mset: Vec<String> = keys.iter().map(|k| format!("{k} on-{shard}")).collect();
        ok(raw, &format!("MSET {}", mset.join(" ")));
    }
    // Across shards: MSET, RENAME, SMOVE, a store command.
    let a = keys_on("xa", 0, threads, 1).remove(0);
    let b = keys_on("xb", threads - 1, threads, 1).remove(0);
    ok(raw, &format!("MSET {a} 1 {b} 2"));
    ok(raw, &format!("RENAME {a} {a}.renamed"));
    ok(raw, &format!("SADD {b}.set p q"));
    ok(raw, &format!("SUNIONSTORE {a}.union {b}.set set:ints"));
    // Geo sets, and the geo STORE commands (their effects, across shards).
    ok(
        raw,
        &format!("GEOADD {a}.geo 13.361389 38.115556 Palermo 15.087269 37.502669 Catania"),
    );
    ok(
        raw,
        &format!("GEOSEARCHSTORE {b}.near {a}.geo FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST"),
    );
    ok(
        raw,
        &format!("GEORADIUS {a}.geo 15 37 200 km STORE {b}.geo"),
    );
    // HyperLogLogs: sparse, dense, a cached count, a conversion, a merge across shards
    // into a destination with an expiry.
    let elements: Vec<String> = (0..3000).map(|i| format!("e{i}")).collect();
    for line in [
        "PFADD hll:sparse a b c".to_string(),
        "PFCOUNT hll:sparse".into(),
        "PFADD hll:conv a".into(),
        "PFDEBUG TODENSE hll:conv".into(),
        format!("PFADD {b}.hll {}", elements.join(" ")),
        format!("PFADD {a}.hll x y z"),
        format!("EXPIRE {a}.hll 100000"),
        format!("PFMERGE {a}.hll {b}.hll hll:sparse"),
        format!("PFCOUNT {a}.hll"),
    ] {
        ok(raw, &line);
    }
}

/// The dataset, once it no longer has keys about to expire.
fn settled(server: &Server) -> BTreeMap<Vec<u8>, Key> {
    std::thread::sleep(Duration::from_millis(5));
    dataset(&mut server.client())
}

#[test]
fn the_log_brings_every_type_back_after_a_kill_with_any_thread_count() {
    let dir = Dir::new("aof-types");
    let threads = default_threads();
    let args = |t: usize| {
        vec![
            "--dir".to_string(),
            dir.arg().to_string(),
            "--appendonly".into(),
            "yes".into(),
            "--appendfsync".into(),
            "always".into(),
            "--threads".into(),
            t.to_string(),
        ]
    };
    let start = |t: usize| {
        let a = args(t);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        Server::goblin_with(&refs)
    };
    let mut server = start(threads);
    write_everything(&mut server.raw(), threads, true);
    let before = settled(&server);
    assert!(before.len() > 20, "{before:?}");
    assert!(!before.contains_key(&b"s:gone"[..]));
    server.kill();
    for t in [threads, 1, 3] {
        let mut again = start(t);
        let after = dataset(&mut again.client());
        assert_eq!(after, before, "after a restart with --threads {t}");
        // The log goes on: a write after the restart is there after the next.
        ok(&mut again.raw(), &format!("SET after:{t} x"));
        again.kill();
        let check = start(t);
        let mut con = check.client();
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("after:{t}"))
            .query(&mut con)
            .unwrap();
        assert_eq!(v.as_deref(), Some("x"));
        let _: () = redis::cmd("DEL")
            .arg(format!("after:{t}"))
            .query(&mut con)
            .unwrap();
    }
    let manifest = fs::read_to_string(dir.path().join("appendonlydir/appendonly.aof.manifest"))
        .expect("a manifest");
    assert!(manifest.contains("type i"), "{manifest}");
}

/// The shard files of the log's last generation.
fn incr_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir.join("appendonlydir"))
        .expect("the log's directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_torn_last_record_is_cut_and_a_corrupt_one_stops_the_start() {
    let dir = Dir::new("aof-torn");
    let base = [
        "--dir",
        dir.arg(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--threads",
        "1",
    ];
    let mut server = Server::goblin_with(&base);
    ok(&mut server.raw(), "SET kept 1");
    ok(&mut server.raw(), "RPUSH list a b");
    server.kill();
    let file = incr_files(dir.path()).pop().expect("a log file");
    let whole = fs::read(&file).unwrap();
    // A record cut in the middle, as a crash during a write leaves it.
    let mut torn = whole.clone();
    torn.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nlost");
    fs::write(&file, &torn).unwrap();

    // Refused when asked to refuse.
    let mut strict = base.to_vec();
    strict.extend(["--aof-load-truncated", "no"]);
    let mut refused = Server::goblin_starting(&strict);
    let status = refused.wait_exit(Duration::from_secs(20));
    assert!(status.is_some_and(|s| !s.success()), "{status:?}");

    // Cut by default, with the rest kept, and the file cut to its whole records.
    let mut server = Server::goblin_with(&base);
    let mut raw = server.raw();
    assert_eq!(cmd(&mut raw, "GET kept"), b"$1\r\n1\r\n");
    assert_eq!(cmd(&mut raw, "EXISTS lost"), b":0\r\n");
    assert_eq!(cmd(&mut raw, "LLEN list"), b":2\r\n");
    ok(&mut raw, "SET next 2");
    server.kill();
    let mut server = Server::goblin_with(&base);
    assert_eq!(cmd(&mut server.raw(), "GET next"), b"$1\r\n2\r\n");
    server.kill();

    // A transaction's part without its end is dropped whole.
    let mut part = fs::read(&file).unwrap();
    part.extend_from_slice(
        b"*3\r\n$13\r\nGOBLIN.TXPART\r\n$5\r\nx-0-1\r\n$1\r\n2\r\n*3\r\n$3\r\nSET\r\n$2\r\nt1\r\n$1\r\n1\r\n",
    );
    fs::write(&file, &part).unwrap();
    let mut server = Server::goblin_with(&base);
    assert_eq!(cmd(&mut server.raw(), "EXISTS t1"), b":0\r\n");
    server.kill();

    // So is a transaction without its EXEC (the log's own form of a transaction),
    // whatever the thread count.
    let mut multi = fs::read(&file).unwrap();
    multi.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$2\r\nt2\r\n$1\r\n1\r\n");
    fs::write(&file, &multi).unwrap();
    let mut two = base.to_vec();
    two[7] = "2";
    let mut server = Server::goblin_with(&two);
    assert_eq!(cmd(&mut server.raw(), "EXISTS t2"), b":0\r\n");
    ok(&mut server.raw(), "SET after:multi 1");
    server.kill();
    let mut server = Server::goblin_with(&base);
    assert_eq!(cmd(&mut server.raw(), "GET after:multi"), b"$1\r\n1\r\n");
    assert_eq!(cmd(&mut server.raw(), "EXISTS t2"), b":0\r\n");
    server.kill();

    // Garbage in the middle: the start stops, naming the file and the offset.
    let good = fs::read(&file).unwrap();
    let mut corrupt = good.clone();
    corrupt.splice(0..0, b"GARBAGE\r\n".iter().copied());
    fs::write(&file, &corrupt).unwrap();
    let out = std::process::Command::new(goblin_tests::goblin_binary())
        .args(["--bind", "127.0.0.1", "--port", "0", "--save", ""])
        .args(base)
        .output()
        .expect("run goblin-server");
    // The log (standard output, as redis-server's) names the file and the offset.
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        log.contains(&*file.file_name().unwrap().to_string_lossy()) && log.contains("offset 0"),
        "{log}"
    );
}

/// The dataset of a server loaded from `file` (`--loadrdb`).
fn goblin_loading(file: &Path) -> (Server, BTreeMap<Vec<u8>, Key>) {
    let server = Server::goblin_with(&["--loadrdb", file.to_str().unwrap()]);
    let data = dataset(&mut server.client());
    (server, data)
}

#[test]
fn snapshots_migrate_both_ways_with_redis_server() {
    let threads = default_threads();
    // Goblin → redis-server: SAVE, then redis-server starts on the file.
    let dir = Dir::new("rdb-out");
    let goblin = Server::goblin_with(&["--dir", dir.arg()]);
    write_everything(&mut goblin.raw(), threads, true);
    let want = settled(&goblin);
    assert_eq!(cmd(&mut goblin.raw(), "SAVE"), b"+OK\r\n");
    let redis = Server::redis_with(&["--dir", dir.arg(), "--dbfilename", "dump.rdb"]);
    let got = dataset(&mut redis.client());
    assert_eq!(got, want, "redis-server loading Goblin's dump.rdb");

    // redis-server → Goblin: its SAVE (listpacks, intsets, quicklists …), loaded.
    let dir2 = Dir::new("rdb-in");
    let redis2 = Server::redis_with(&["--dir", dir2.arg(), "--dbfilename", "dump.rdb"]);
    write_everything(&mut redis2.raw(), threads, false);
    let want = settled(&redis2);
    assert_eq!(cmd(&mut redis2.raw(), "SAVE"), b"+OK\r\n");
    let (_g, got) = goblin_loading(&dir2.path().join("dump.rdb"));
    assert_eq!(got, want, "Goblin loading redis-server's dump.rdb");

    // And Goblin's own file, at start-up from dir/dbfilename.
    let again = Server::goblin_with(&["--dir", dir.arg()]);
    assert_eq!(dataset(&mut again.client()), settled(&goblin));
}

#[test]
fn a_background_save_is_the_dataset_at_its_start_under_writes() {
    let threads = default_threads();
    let dir = Dir::new("bgsave");
    let server = Server::goblin_with(&["--dir", dir.arg()]);
    let n = 30_000;
    let mut raw = server.raw();
    let sets = (0..n).map(|i| {
        let (k, v) = (format!("k{i}"), format!("v{i}"));
        vec![b"SET".to_vec(), k.into_bytes(), v.into_bytes()]
    });
    assert!(pipeline(&mut raw, sets).iter().all(|r| r == b"+OK\r\n"));
    // Pairs on two shards, always written together with one value.
    let a = keys_on("pa", 0, threads, 1).remove(0);
    let b = keys_on("pb", threads - 1, threads, 1).remove(0);
    ok(&mut raw, &format!("MSET {a} 0 {b} 0"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = std::sync::Arc::clone(&stop);
        let mut raw = server.raw();
        let (a, b) = (a.clone(), b.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let reply = raw.cmd_str(&format!("MSET {a} {i} {b} {i}"));
                assert_eq!(reply, b"+OK\r\n");
            }
            i
        })
    };
    // BGSAVE, then, on the same connection (so after the save's instant), every key
    // changed or deleted while the shards write their images.
    let mut changes = goblin_tests::encode(&[b"BGSAVE"]);
    for i in 0..n {
        let key = format!("k{i}");
        if i % 3 == 0 {
            changes.extend(goblin_tests::encode(&[b"DEL", key.as_bytes()]));
        } else {
            changes.extend(goblin_tests::encode(&[b"SET", key.as_bytes(), b"changed"]));
        }
    }
    raw.send(&changes);
    assert_eq!(raw.reply(), b"+Background saving started\r\n");
    for _ in 0..n {
        raw.reply();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = String::from_utf8_lossy(&cmd(&mut raw, "INFO persistence")).into_owned();
        if info.contains("rdb_bgsave_in_progress:0") {
            assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
            break;
        }
        assert!(Instant::now() < deadline, "the save did not end: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds > 0);
    let (_g, image) = goblin_loading(&dir.path().join("dump.rdb"));
    for i in 0..n {
        let key = format!("k{i}");
        let want = Content::Str(format!("v{i}").into_bytes());
        assert_eq!(
            image.get(key.as_bytes()).map(|k| &k.content),
            Some(&want),
            "{key} as it was when the save began"
        );
    }
    // Never half of a multi-shard write.
    let (va, vb) = (image.get(a.as_bytes()), image.get(b.as_bytes()));
    assert!(va.is_some() && va == vb, "{va:?} {vb:?}");
}

#[test]
fn shutdown_saves_when_rules_are_set_and_not_with_nosave() {
    let dir = Dir::new("shutdown");
    let mut server = Server::goblin_with(&["--dir", dir.arg(), "--save", "3600 1"]);
    ok(&mut server.raw(), "SET k v");
    let mut raw = server.raw();
    raw.send(&goblin_tests::encode(&[b"SHUTDOWN"]));
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(dir.path().join("dump.rdb").exists());
    let again = Server::goblin_with(&["--dir", dir.arg()]);
    assert_eq!(cmd(&mut again.raw(), "GET k"), b"$1\r\nv\r\n");
    ok(&mut again.raw(), "SET k changed");
    let mut again = again;
    again
        .raw()
        .send(&goblin_tests::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    assert!(again.wait_exit(Duration::from_secs(10)).is_some());
    let last = Server::goblin_with(&["--dir", dir.arg()]);
    assert_eq!(cmd(&mut last.raw(), "GET k"), b"$1\r\nv\r\n");
    assert_eq!(
        cmd(&mut last.raw(), "SHUTDOWN ABORT"),
        b"-ERR No shutdown in progress.\r\n"
    );
    assert_eq!(
        cmd(&mut last.raw(), "SHUTDOWN SAVE NOSAVE"),
        b"-ERR syntax error\r\n"
    );
}

#[test]
fn clients_get_loading_while_a_large_file_loads() {
    // redis-server makes the file: a million keys.
    let dir = Dir::new("loading");
    let redis = Server::redis_with(&[
        "--dir",
        dir.arg(),
        "--dbfilename",
        "dump.rdb",
        "--enable-debug-command",
        "yes",
    ]);
    ok(&mut redis.raw(), "DEBUG POPULATE 1000000");
    ok(&mut redis.raw(), "SAVE");
    drop(redis);
    let file = dir.path().join("dump.rdb");
    let server = Server::goblin_starting(&["--loadrdb", file.to_str().unwrap()]);
    let (mut saw_loading, mut info_loading) = (false, false);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let Ok(mut raw) = Raw::try_connect(server.port) else {
            continue;
        };
        let reply = raw.cmd(&[b"GET", b"key:1"]);
        if reply == b"-LOADING Redis is loading the dataset in memory\r\n" {
            saw_loading = true;
            // INFO is allowed while loading, and says so (unless loading just ended).
            let info = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"persistence"])).into_owned();
            assert!(info.contains("# Persistence"), "{info}");
            info_loading |= info.contains("loading:1");
        } else {
            assert_eq!(reply, b"$7\r\nvalue:1\r\n");
            break;
        }
        assert!(Instant::now() < deadline, "still loading after 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        saw_loading,
        "a million keys loaded before a client could ask"
    );
    assert!(info_loading, "INFO never said loading:1");
    assert_eq!(cmd(&mut server.raw(), "DBSIZE"), b":1000000\r\n");
}

#[test]
fn writes_get_misconf_while_snapshots_fail_and_reads_go_on() {
    let dir = Dir::new("misconf");
    let gone = dir.path().join("gone");
    fs::create_dir_all(&gone).unwrap();
    let server = Server::goblin_with(&["--dir", gone.to_str().unwrap(), "--save", "3600 1"]);
    let mut raw = server.raw();
    ok(&mut raw, "SET k v");
    fs::remove_dir_all(&gone).unwrap();
    assert_eq!(cmd(&mut raw, "BGSAVE"), b"+Background saving started\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&cmd(&mut raw, "INFO persistence"))
        .contains("rdb_last_bgsave_status:err")
    {
        assert!(Instant::now() < deadline, "the save did not fail");
        std::thread::sleep(Duration::from_millis(10));
    }
    let misconf = cmd(&mut raw, "SET k2 v");
    assert!(
        misconf.starts_with(b"-MISCONF Redis is configured to save RDB snapshots"),
        "{}",
        show(&misconf)
    );
    assert!(cmd(&mut raw, "PING").starts_with(b"-MISCONF"));
    assert_eq!(cmd(&mut raw, "GET k"), b"$1\r\nv\r\n");
    // Inside MULTI the refusal flags the transaction.
    ok(&mut raw, "MULTI");
    assert!(cmd(&mut raw, "SET k3 v").starts_with(b"-MISCONF"));
    assert!(cmd(&mut raw, "EXEC").starts_with(b"-EXECABORT"));
    // The disk is back: the next save succeeds and writes are accepted again.
    fs::create_dir_all(&gone).unwrap();
    assert_eq!(cmd(&mut raw, "BGSAVE"), b"+Background saving started\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&cmd(&mut raw, "INFO persistence"))
        .contains("rdb_last_bgsave_status:ok")
    {
        assert!(Instant::now() < deadline, "the save did not succeed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(cmd(&mut raw, "SET k2 v"), b"+OK\r\n");
}

#[test]
fn persistence_settings_and_lastsave_answer_as_redis_server() {
    let dir = Dir::new("config");
    let server = Server::goblin_with(&[
        "--dir",
        dir.arg(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "no",
        "--save",
        "900 1 300 10",
    ]);
    let mut raw = server.raw();
    let canonical = fs::canonicalize(dir.path()).unwrap();
    let want = |pairs: &[(&str, &str)]| {
        let mut out = format!("*{}\r\n", pairs.len() * 2).into_bytes();
        for (k, v) in pairs {
            out.extend(format!("${}\r\n{k}\r\n${}\r\n{v}\r\n", k.len(), v.len()).bytes());
        }
        out
    };
    assert_eq!(
        cmd(&mut raw, "CONFIG GET appendfsync"),
        want(&[("appendfsync", "no")])
    );
    assert_eq!(
        cmd(&mut raw, "CONFIG GET save"),
        want(&[("save", "900 1 300 10")])
    );
    assert_eq!(
        cmd(&mut raw, "CONFIG GET dir"),
        want(&[("dir", canonical.to_str().unwrap())])
    );
    assert_eq!(
        cmd(&mut raw, "CONFIG GET appendonly"),
        want(&[("appendonly", "yes")])
    );
    let before = cmd(&mut raw, "LASTSAVE");
    assert!(before.starts_with(b":"), "{}", show(&before));
    std::thread::sleep(Duration::from_millis(1100));
    ok(&mut raw, "SAVE");
    let after = cmd(&mut raw, "LASTSAVE");
    assert!(after > before, "{} then {}", show(&before), show(&after));
    let info = String::from_utf8_lossy(&cmd(&mut raw, "INFO persistence")).into_owned();
    for field in [
        "aof_enabled:1",
        "rdb_changes_since_last_save:0",
        "rdb_saves:1",
        "aof_last_write_status:ok",
        "aof_current_size:",
    ] {
        assert!(info.contains(field), "{field} in {info}");
    }
}

/// Waits until INFO persistence shows `field`.
fn wait_info(raw: &mut Raw, field: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = String::from_utf8_lossy(&cmd(raw, "INFO persistence")).into_owned();
        if info.contains(field) {
            return info;
        }
        assert!(Instant::now() < deadline, "no {field} in {info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_rewrite_compacts_the_log_while_writes_go_on() {
    let dir = Dir::new("rewrite");
    let args = [
        "--dir",
        dir.arg(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--auto-aof-rewrite-percentage",
        "0",
    ];
    let mut server = Server::goblin_with(&args);
    let mut raw = server.raw();
    // Many writes to few keys: a log far larger than the dataset. Written under
    // `everysec`: under `always`, a pipeline whose commands alternate between shards
    // costs one fsync per hop, which a slow disk turns into minutes. Going back to
    // `always` syncs all of it with the next write.
    ok(&mut raw, "CONFIG SET appendfsync everysec");
    let incrs = (0..20_000).map(|i| vec![b"INCR".to_vec(), format!("k{}", i % 100).into_bytes()]);
    pipeline(&mut raw, incrs);
    ok(&mut raw, "CONFIG SET appendfsync always");
    let size = |raw: &mut Raw| -> u64 {
        let info = String::from_utf8_lossy(&cmd(raw, "INFO persistence")).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix("aof_current_size:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("aof_current_size")
    };
    let before = size(&mut raw);
    // The rewrite, with writes on the same connection right after its instant.
    let mut batch = goblin_tests::encode(&[b"BGREWRITEAOF"]);
    for i in 0..100 {
        batch.extend(goblin_tests::encode(&[b"INCR", format!("k{i}").as_bytes()]));
    }
    raw.send(&batch);
    assert_eq!(
        raw.reply(),
        b"+Background append only file rewriting started\r\n"
    );
    for _ in 0..100 {
        raw.reply();
    }
    wait_info(&mut raw, "aof_rewrites:1");
    let info = wait_info(&mut raw, "aof_rewrite_in_progress:0");
    assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
    let after = size(&mut raw);
    assert!(
        after * 10 < before,
        "the log went from {before} to {after} bytes"
    );
    ok(&mut raw, "SET last 1");
    let want = dataset(&mut server.client());
    server.kill();
    let manifest =
        fs::read_to_string(dir.path().join("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert!(manifest.contains("type b"), "{manifest}");
    let files = fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .count();
    assert_eq!(
        files,
        manifest.lines().count() + 1,
        "only the manifest's files remain: {manifest}"
    );
    let again = Server::goblin_with(&args);
    assert_eq!(dataset(&mut again.client()), want);
    assert_eq!(cmd(&mut again.raw(), "GET k7"), b"$3\r\n201\r\n");
}

#[test]
fn the_log_rewrites_itself_when_it_grows() {
    let dir = Dir::new("auto-rewrite");
    let args = [
        "--dir",
        dir.arg(),
        "--appendonly",
        "yes",
        "--auto-aof-rewrite-min-size",
        "64kb",
        "--auto-aof-rewrite-percentage",
        "100",
    ];
    let mut server = Server::goblin_with(&args);
    let mut raw = server.raw();
    let sets = (0..20_000).map(|i| {
        vec![
            b"SET".to_vec(),
            b"same".to_vec(),
            format!("{i}").into_bytes(),
        ]
    });
    pipeline(&mut raw, sets);
    wait_info(&mut raw, "aof_rewrites:1");
    wait_info(&mut raw, "aof_rewrite_in_progress:0");
    server.kill();
    let again = Server::goblin_with(&args);
    assert_eq!(cmd(&mut again.raw(), "GET same"), b"$5\r\n19999\r\n");
}

#[test]
fn a_saved_file_is_rdb_10_byte_for_byte() {
    let dir = Dir::new("rdb-bytes");
    let server = Server::goblin_with(&["--dir", dir.arg()]);
    let mut raw = server.raw();
    ok(&mut raw, "SET k 300");
    ok(&mut raw, "SET t v PXAT 99999999999999");
    ok(&mut raw, "SAVE");
    let file = fs::read(dir.path().join("dump.rdb")).unwrap();
    assert!(file.starts_with(b"REDIS0010"), "{}", show(&file[..16]));
    // Auxiliary fields: opcode 0xFA, then length-prefixed name and value.
    let aux = |name: &[u8], value: &[u8]| {
        let mut field = vec![0xFA, name.len() as u8];
        field.extend_from_slice(name);
        field.push(value.len() as u8);
        field.extend_from_slice(value);
        file.windows(field.len()).any(|w| w == field.as_slice())
    };
    assert!(aux(b"redis-ver", b"7.0.15"), "{}", show(&file));
    // Integers are stored integer-encoded, as Redis stores `redis-bits`: 0xC0 and a byte.
    let bits = [&[0xFA, 10][..], b"redis-bits", &[0xC0, 64]].concat();
    assert!(
        file.windows(bits.len()).any(|w| w == bits.as_slice()),
        "{}",
        show(&file)
    );
    // Database 0 with two keys, one with an expiry.
    assert!(
        file.windows(5).any(|w| w == [0xFE, 0x00, 0xFB, 0x02, 0x01]),
        "{}",
        show(&file)
    );
    // An integer-encoded string (300 as 16 bits), a millisecond expiry.
    assert!(file.windows(5).any(|w| w == [0x00, 0x01, b'k', 0xC1, 0x2C]));
    assert!(
        file.windows(9)
            .any(|w| w[0] == 0xFC && w[1..] == 99_999_999_999_999u64.to_le_bytes())
    );
    // EOF, then the CRC-64 of everything before it.
    let (body, crc) = file.split_at(file.len() - 8);
    assert_eq!(body.last(), Some(&0xFF));
    assert_eq!(
        crc,
        goblin_store::rdb::crc64(0, body).to_le_bytes(),
        "the checksum"
    );
    if let Ok(out) = std::process::Command::new("redis-check-rdb")
        .arg(dir.path().join("dump.rdb"))
        .output()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("RDB looks OK"), "{text}");
    }
}

/// A log directory whose only record file is /dev/full: every write of it fails with
/// ENOSPC, as on a full disk.
fn full_disk_log(dir: &Dir) {
    let log = dir.path().join("appendonlydir");
    fs::create_dir_all(&log).unwrap();
    fs::write(
        log.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.0.incr.aof seq 1 type i shard 0 shards 1\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/dev/full", log.join("appendonly.aof.1.0.incr.aof")).unwrap();
}

#[test]
fn a_full_disk_refuses_writes_with_misconf_or_stops_an_always_log() {
    // everysec: the write that failed was answered (as with redis-server), the next are
    // refused with the reason, and reads go on.
    let dir = Dir::new("full-everysec");
    full_disk_log(&dir);
    let base = ["--dir", dir.arg(), "--appendonly", "yes", "--threads", "1"];
    let server = Server::goblin_with(&base);
    let mut raw = server.raw();
    assert_eq!(cmd(&mut raw, "SET k v"), b"+OK\r\n");
    assert_eq!(
        cmd(&mut raw, "SET k2 v"),
        b"-MISCONF Errors writing to the AOF file: No space left on device\r\n"
    );
    assert_eq!(cmd(&mut raw, "GET k"), b"$1\r\nv\r\n");
    let info = String::from_utf8_lossy(&cmd(&mut raw, "INFO persistence")).into_owned();
    assert!(info.contains("aof_last_write_status:err"), "{info}");
    drop(server);

    // always: no write is acknowledged that is not on disk; the server stops instead.
    let dir = Dir::new("full-always");
    full_disk_log(&dir);
    let mut always = base.to_vec();
    always[1] = dir.arg();
    always.extend(["--appendfsync", "always"]);
    let mut server = Server::goblin_with(&always);
    let mut raw = server.raw();
    raw.send(&goblin_tests::encode(&[b"SET", b"k", b"v"]));
    let (reply, closed) = raw.read_to_close(Duration::from_secs(10));
    assert!(closed && reply.is_empty(), "{}", show(&reply));
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|s| !s.success()), "{status:?}");
}

#[test]
fn sigterm_and_sigint_save_and_exit_as_shutdown_does() {
    for signal in ["TERM", "INT"] {
        let dir = Dir::new("signal");
        let mut server = Server::goblin_with(&["--dir", dir.arg(), "--save", "3600 1"]);
        ok(&mut server.raw(), "SET k v");
        server.signal(signal);
        let status = server.wait_exit(Duration::from_secs(10));
        assert!(
            status.is_some_and(|s| s.success()),
            "SIG{signal}: {status:?}"
        );
        let again = Server::goblin_with(&["--dir", dir.arg()]);
        assert_eq!(
            cmd(&mut again.raw(), "GET k"),
            b"$1\r\nv\r\n",
            "SIG{signal}"
        );
    }
    // With the log and no save rules: nothing saved, the log synced, all there.
    let dir = Dir::new("signal-aof");
    let args = ["--dir", dir.arg(), "--appendonly", "yes"];
    let mut server = Server::goblin_with(&args);
    ok(&mut server.raw(), "RPUSH l a b c");
    server.signal("TERM");
    assert!(
        server
            .wait_exit(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
    assert!(!dir.path().join("dump.rdb").exists());
    let again = Server::goblin_with(&args);
    assert_eq!(cmd(&mut again.raw(), "LLEN l"), b":3\r\n");
}

#[test]
fn shutdown_abort_cancels_a_signal_while_the_cron_is_paused_like_redis() {
    // Redis's "SHUTDOWN ABORT can cancel SIGTERM": with DEBUG PAUSE-CRON 1 the shutdown a
    // signal asks for waits for the cron, and SHUTDOWN ABORT cancels it; once the cron
    // goes on, a signal's shutdown starts. Goblin knew neither.
    let debug = ["--enable-debug-command", "yes"];
    // DEBUG PAUSE-CRON 1, then SIGTERM: the server is still there a moment later.
    let signal_while_paused = |server: &mut Server, raw: &mut Raw| {
        assert_eq!(
            cmd(raw, "DEBUG PAUSE-CRON 1"),
            b"+OK\r\n",
            "{:?}",
            server.kind
        );
        server.signal("TERM");
        std::thread::sleep(Duration::from_millis(300));
        assert!(server.is_running(), "{:?}", server.kind);
    };
    for mut server in [Server::goblin_with(&debug), Server::redis_with(&debug)] {
        let kind = server.kind;
        let mut raw = server.raw();
        assert_eq!(
            cmd(&mut raw, "SHUTDOWN ABORT"),
            b"-ERR No shutdown in progress.\r\n"
        );
        signal_while_paused(&mut server, &mut raw);
        assert_eq!(cmd(&mut raw, "SHUTDOWN ABORT"), b"+OK\r\n", "{kind:?}");
        assert_eq!(cmd(&mut raw, "DEBUG PAUSE-CRON 0"), b"+OK\r\n", "{kind:?}");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(cmd(&mut raw, "PING"), b"+PONG\r\n", "{kind:?}");
        assert_eq!(
            cmd(&mut raw, "SHUTDOWN ABORT"),
            b"-ERR No shutdown in progress.\r\n"
        );
        // Asked while paused, it starts when the cron goes on.
        signal_while_paused(&mut server, &mut raw);
        raw.send(&goblin_tests::encode(&[b"DEBUG", b"PAUSE-CRON", b"0"]));
        let status = server.wait_exit(Duration::from_secs(10));
        assert!(status.is_some(), "{kind:?}: still running");
    }
}

/// `rdb_changes_since_last_save` (what the `save` rules count) grows by what a command
/// changed, as redis-server's `dirty`: each key written or deleted, nothing for a write
/// that changed nothing (Redis's "SETBIT/BITFIELD only increase dirty when the value
/// changed"), on one thread or across.
#[test]
fn changes_since_the_last_save_count_what_changed_as_redis_does() {
    let changes = |raw: &mut Raw| -> i64 {
        let info = String::from_utf8_lossy(&cmd(raw, "INFO persistence")).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(-1)
    };
    let lines = [
        "SET a 1",
        "SET a 1",
        "SETBIT bits 0 0",
        "SETBIT bits 0 0",
        "SETBIT bits 0 1",
        "BITFIELD bf SET i5 0 0",
        "BITFIELD bf SET i5 0 0",
        "MSET a 2 b 2 c 2",
        "DEL a b nothing",
        "DEL nothing",
        "INCR n",
        "EXPIRE n 100",
        "SADD s x",
        "SADD s x",
        "SREM s y",
        "GET c",
        "EVAL redis.call('set',KEYS[1],'v') 1 e",
        "LPUSH l x",
        "LPUSH l x",
        "SET a 1 XX",
    ];
    let goblin = Server::goblin_threads(3);
    let redis = Server::redis();
    let (mut g, mut r) = (goblin.raw(), redis.raw());
    for line in lines {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let (gb, rb) = (changes(&mut g), changes(&mut r));
        let (gr, rr) = (g.cmd(&words), r.cmd(&words));
        assert_eq!(gr, rr, "{line}");
        let (ga, ra) = (changes(&mut g), changes(&mut r));
        assert_eq!(
            ga - gb,
            ra - rb,
            "{line}: goblin counted {}, redis {}",
            ga - gb,
            ra - rb
        );
    }
}

#[test]
fn requests_are_logged_as_they_came_and_replay() {
    // A request's own frame is its record, with Redis's leniency kept: the two bytes
    // after a bulk string are not checked (`$3\r\nSETxx` is SET).
    let dir = Dir::new("frames");
    let args = ["--dir", dir.arg(), "--appendonly", "yes", "--threads", "1"];
    let mut server = Server::goblin_with(&args);
    let mut raw = server.raw();
    raw.send(b"*3\r\n$3\r\nSETxx$1\r\nk\r\n$5\r\nv\r\nv2\r\n");
    assert_eq!(raw.reply(), b"+OK\r\n");
    raw.send(b"SET inline \"a b\"\r\n");
    assert_eq!(raw.reply(), b"+OK\r\n");
    server.kill();
    let again = Server::goblin_with(&args);
    assert_eq!(cmd(&mut again.raw(), "GET k"), b"$5\r\nv\r\nv2\r\n");
    assert_eq!(cmd(&mut again.raw(), "GET inline"), b"$3\r\na b\r\n");
}

#[test]
fn a_configuration_file_sets_persistence_and_a_bad_one_stops_the_start() {
    let dir = Dir::new("conf");
    let conf = dir.path().join("goblin.conf");
    fs::write(
        &conf,
        format!(
            "# as in redis.conf\nappendonly yes\nappendfsync always\ndir {}\nsave \"\"\n",
            dir.arg()
        ),
    )
    .unwrap();
    let server = Server::goblin_with_file(&conf, &[]);
    let mut raw = server.raw();
    let info = String::from_utf8_lossy(&cmd(&mut raw, "INFO server")).into_owned();
    let canonical = fs::canonicalize(&conf).unwrap();
    assert!(
        info.contains(&format!("config_file:{}\r\n", canonical.display())),
        "{info}"
    );
    assert_eq!(
        cmd(&mut raw, "CONFIG GET appendfsync"),
        b"*2\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n"
    );
    ok(&mut raw, "SET k v");
    drop(server);
    assert!(dir.path().join("appendonlydir").exists());

    fs::write(&conf, "port 0\nappendonly perhaps\n").unwrap();
    let out = std::process::Command::new(goblin_tests::goblin_binary())
        .arg(&conf)
        .output()
        .expect("run goblin-server");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("*** FATAL CONFIG FILE ERROR")
            && stderr.contains(&format!("'{}', at line 2", conf.display()))
            && stderr.contains(">>> 'appendonly perhaps'"),
        "{stderr}"
    );
}

/// A flush is logged by every shard as its part of it: replayed, each part empties the
/// keys of its own shard's slots only — not the keys that later writes put in other
/// shards' files, which the replay of an earlier file would otherwise wipe.
#[test]
fn a_replayed_flush_empties_only_what_it_emptied() {
    let dir = Dir::new("flush-replay");
    let args = [
        "--dir",
        dir.arg(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--threads",
        "3",
    ];
    let mut server = Server::goblin_with(&args);
    let mut raw = server.raw();
    let keys: Vec<String> = (0..3).flat_map(|shard| keys_on("k", shard, 3, 4)).collect();
    for k in &keys {
        ok(&mut raw, &format!("SET {k} before"));
    }
    ok(&mut raw, "FLUSHALL");
    for k in &keys {
        ok(&mut raw, &format!("SET {k} after"));
    }
    ok(&mut raw, "SELECT 3");
    for k in &keys {
        ok(&mut raw, &format!("SET {k} three"));
    }
    ok(&mut raw, "FLUSHDB");
    ok(&mut raw, "SET survivor 1");
    let want = goblin_tests::dataset::all_databases(&mut server.client());
    assert_eq!(want.len(), 2, "{want:?}");
    assert_eq!(want[&0].len(), keys.len());
    server.kill();
    for threads in ["3", "2"] {
        let mut again = args.to_vec();
        again[7] = threads;
        let mut server = Server::goblin_with(&again);
        assert_eq!(
            goblin_tests::dataset::all_databases(&mut server.client()),
            want,
            "replayed by {threads} threads"
        );
        server.kill();
    }
}

/// CONFIG SET appendonly yes on a running server starts the log with a rewrite (its base
/// the dataset at its instant, writes after it in the new files), as redis-server's
/// `startAppendOnly`: a kill and a restart with the log on bring everything back. CONFIG
/// SET appendonly no closes the log: later writes are not in it.
#[test]
fn the_log_turns_on_and_off_at_run_time() {
    let dir = Dir::new("aof-toggle");
    let threads = default_threads().max(2).to_string();
    let base = ["--dir", dir.arg(), "--threads", &threads, "--save", ""];
    let mut server = Server::goblin_with(&base);
    let mut raw = server.raw();
    write_everything(&mut raw, 2, true);
    let before_on = settled(&server);
    ok(&mut raw, "CONFIG SET appendonly yes");
    assert_eq!(
        cmd(&mut raw, "CONFIG GET appendonly"),
        b"*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n"
    );
    // Writes while the rewrite starts and runs.
    let sets = (0..2000).map(|i| {
        vec![
            b"SET".to_vec(),
            format!("on:{i}").into_bytes(),
            b"v".to_vec(),
        ]
    });
    pipeline(&mut raw, sets);
    wait_info(&mut raw, "aof_enabled:1");
    wait_info(&mut raw, "aof_rewrites:1");
    wait_info(&mut raw, "aof_rewrite_in_progress:0");
    ok(&mut raw, "SET after:rewrite 1");
    let want = settled(&server);
    assert!(want.len() > before_on.len() + 2000);
    server.kill();
    let on = [&base[..], &["--appendonly", "yes"]].concat();
    let mut again = Server::goblin_with(&on);
    assert_eq!(
        dataset(&mut again.client()),
        want,
        "after turning the log on"
    );
    // Off: what is written after is not in the log.
    let mut raw = again.raw();
    ok(&mut raw, "SET before:off 1");
    ok(&mut raw, "CONFIG SET appendonly no");
    wait_info(&mut raw, "aof_enabled:0");
    // Each shard closes its log in its next loop iteration.
    std::thread::sleep(Duration::from_millis(100));
    ok(&mut raw, "SET after:off 1");
    again.kill();
    let last = Server::goblin_with(&on);
    let mut raw = last.raw();
    assert_eq!(cmd(&mut raw, "EXISTS before:off"), b":1\r\n");
    assert_eq!(cmd(&mut raw, "EXISTS after:off"), b":0\r\n");
    assert_eq!(cmd(&mut raw, "EXISTS after:rewrite"), b":1\r\n");
}

/// With `save` rules, FLUSHALL saves the emptied dataset at once, as redis-server does:
/// the changes count is 0 after it, and a server killed right after comes back empty,
/// not with what the last snapshot held. FLUSHDB does not save.
#[test]
fn flushall_with_save_rules_saves_the_empty_dataset() {
    let dir = Dir::new("flushall-save");
    let base = ["--dir", dir.arg(), "--save", "3600 1"];
    let mut server = Server::goblin_with(&base);
    let mut raw = server.raw();
    ok(&mut raw, "SET a 1");
    ok(&mut raw, "SAVE");
    ok(&mut raw, "SET b 2");
    ok(&mut raw, "FLUSHDB");
    ok(&mut raw, "SET c 3");
    ok(&mut raw, "FLUSHALL");
    let info = String::from_utf8(cmd(&mut raw, "INFO persistence")).unwrap();
    assert!(info.contains("rdb_changes_since_last_save:0\r\n"), "{info}");
    server.kill();
    let server = Server::goblin_with(&base);
    assert_eq!(cmd(&mut server.raw(), "DBSIZE"), b":0\r\n");
}

/// DEBUG LOADAOF, as redis-server's: every shard's log is written out, then the log's
/// files are read back in place of the keys in memory, which come back the same (types,
/// expiries; a cross-shard transaction's parts). Neither it nor DEBUG RELOAD writes to
/// the log: a restart after them brings back the same dataset (DEBUG RELOAD used to log
/// its flush without the keys it put back, and a restart lost them).
#[test]
fn debug_loadaof_and_reload_leave_the_log_whole() {
    let dir = Dir::new("loadaof");
    let threads = default_threads();
    let t = threads.to_string();
    let args = [
        "--dir",
        dir.arg(),
        "--appendonly",
        "yes",
        "--enable-debug-command",
        "yes",
        "--threads",
        t.as_str(),
    ];
    let mut server = Server::goblin_with(&args);
    let mut raw = server.raw();
    write_everything(&mut raw, threads, true);
    let before = settled(&server);
    let digest = cmd(&mut raw, "DEBUG DIGEST");
    for line in ["DEBUG LOADAOF", "DEBUG RELOAD", "DEBUG LOADAOF"] {
        assert_eq!(cmd(&mut raw, line), b"+OK\r\n", "{line}");
        assert_eq!(cmd(&mut raw, "DEBUG DIGEST"), digest, "after {line}");
        assert_eq!(settled(&server), before, "after {line}");
    }
    ok(&mut raw, "SET after:debug x");
    let digest = cmd(&mut raw, "DEBUG DIGEST");
    server.kill();
    let server = Server::goblin_with(&args);
    assert_eq!(cmd(&mut server.raw(), "DEBUG DIGEST"), digest);
    // Without the log and its files (where redis-server exits): refused, nothing
    // changed.
    let plain = Server::goblin_with(&["--enable-debug-command", "yes"]);
    let mut raw = plain.raw();
    ok(&mut raw, "SET k v");
    assert_eq!(
        show(&cmd(&mut raw, "DEBUG LOADAOF")),
        show(
            b"-ERR DEBUG LOADAOF needs the append-only log (appendonly yes, or a \
              BGREWRITEAOF's files)\r\n"
        )
    );
    assert_eq!(cmd(&mut raw, "GET k"), b"$1\r\nv\r\n");
    // With the log off, BGREWRITEAOF writes the log's files all the same, and DEBUG
    // LOADAOF loads them, as redis-server does.
    let redis_dir = Dir::new("loadaof-redis");
    let redis = Server::redis_with(&["--dir", redis_dir.arg(), "--enable-debug-command", "yes"]);
    let transcript = |server: &Server| -> Vec<String> {
        let mut raw = server.raw();
        let mut out = vec![show(&cmd(&mut raw, "SET a 1"))];
        out.push(show(&cmd(&mut raw, "BGREWRITEAOF")));
        wait_info(&mut raw, "aof_rewrite_in_progress:0");
        out.push(
            wait_info(&mut raw, "aof_rewrites:1")
                .contains("aof_enabled:0")
                .to_string(),
        );
        for line in ["SET b 2", "DEBUG LOADAOF", "MGET a b"] {
            out.push(show(&cmd(&mut raw, line)));
        }
        out
    };
    assert_eq!(transcript(&plain), transcript(&redis));
}

/// BGSAVE and BGREWRITEAOF inside MULTI answer that the save is `scheduled`, as
/// redis-server, which starts it after the transaction (Goblin starts it at once); the
/// save happens all the same.
#[test]
fn background_saves_inside_exec_answer_scheduled() {
    let dir = Dir::new("bgsave-exec");
    let goblin = Server::goblin_with(&["--appendonly", "yes"]);
    let redis = Server::redis_with(&["--dir", dir.arg(), "--appendonly", "yes"]);
    let transcript = |server: &Server| -> Vec<String> {
        let mut raw = server.raw();
        let mut out = Vec::new();
        for lines in [
            ["SET k v", "MULTI", "BGSAVE", "EXEC"],
            ["SET k w", "MULTI", "BGREWRITEAOF", "EXEC"],
        ] {
            wait_info(&mut raw, "rdb_bgsave_in_progress:0");
            wait_info(&mut raw, "aof_rewrite_in_progress:0");
            for line in lines {
                out.push(show(&cmd(&mut raw, line)));
            }
            // The save is made: what the SET changed is in it.
            if lines[2] == "BGSAVE" {
                wait_info(&mut raw, "rdb_changes_since_last_save:0");
            }
        }
        out
    };
    assert_eq!(transcript(&goblin), transcript(&redis));
}

/// `key-load-delay` (redis-server's test knob: microseconds after each key loaded) slows
/// loading down: meanwhile INFO says `loading:1` and commands on keys answer LOADING;
/// then every key is there.
#[test]
fn key_load_delay_holds_the_loading_state_visible() {
    let dir = Dir::new("load-delay");
    let goblin = Server::goblin_with(&["--dir", dir.arg()]);
    let mut raw = goblin.raw();
    let keys: Vec<Vec<Vec<u8>>> = (0..5_000)
        .map(|i| vec![b"SET".to_vec(), format!("k{i}").into_bytes(), b"v".to_vec()])
        .collect();
    pipeline(&mut raw, keys);
    ok(&mut raw, "SAVE");
    drop(raw);
    drop(goblin);
    let again = Server::goblin_starting(&["--dir", dir.arg(), "--key-load-delay", "300"]);
    let started = Instant::now();
    let mut raw = loop {
        if let Ok(raw) = Raw::try_connect(again.port) {
            break raw;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never listened"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let info = String::from_utf8_lossy(&cmd(&mut raw, "INFO persistence")).into_owned();
    assert!(info.contains("loading:1"), "{info}");
    assert!(cmd(&mut raw, "GET k1").starts_with(b"-LOADING"));
    again.wait_ready();
    assert_eq!(cmd(&mut raw, "DBSIZE"), b":5000\r\n");
    assert!(started.elapsed() >= Duration::from_millis(1_000));
}

/// INFO's `rdb_last_load_keys_loaded` and `rdb_last_load_keys_expired` count what the
/// last load of a snapshot kept and what it dropped as expired, as redis-server's do: one
/// file that redis-server saved with keys past their deadline (its active expiry off),
/// loaded by both.
#[test]
fn a_load_counts_the_keys_it_kept_and_those_expired_as_redis_does() {
    let dir = Dir::new("load-counts");
    let mut redis = Server::redis_with(&["--dir", dir.arg(), "--enable-debug-command", "yes"]);
    let mut raw = redis.raw();
    ok(&mut raw, "DEBUG SET-ACTIVE-EXPIRE 0");
    for i in 0..30 {
        ok(&mut raw, &format!("SET kept:{i} v"));
    }
    for i in 0..12 {
        ok(&mut raw, &format!("SELECT {}", i % 3));
        ok(&mut raw, &format!("SET gone:{i} v PX 10"));
    }
    std::thread::sleep(Duration::from_millis(30));
    ok(&mut raw, "SAVE");
    redis.kill();
    let mut seen = Vec::new();
    for kind in ["redis", "goblin"] {
        let args = ["--dir", dir.arg()];
        let server = match kind {
            "redis" => Server::redis_with(&args),
            _ => Server::goblin_with(&args),
        };
        let mut raw = server.raw();
        let info = String::from_utf8_lossy(&cmd(&mut raw, "INFO persistence")).into_owned();
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(str::to_string)
        };
        seen.push((
            field("rdb_last_load_keys_loaded"),
            field("rdb_last_load_keys_expired"),
        ));
    }
    assert_eq!(seen[0], (Some("30".into()), Some("12".into())));
    assert_eq!(seen[1], seen[0]);
}

/// INFO's `total_forks` counts the background saves and rewrites begun, as
/// redis-server's counts the children it forks for them (Goblin forks none): a BGSAVE,
/// a BGREWRITEAOF, one scheduled inside MULTI, and CONFIG SET appendonly yes inside
/// MULTI, which logs that its rewrite was scheduled.
#[test]
fn total_forks_counts_background_jobs_as_redis_does() {
    let mut seen = Vec::new();
    for kind in ["redis", "goblin"] {
        let dir = Dir::new("total-forks");
        let log = dir.path().join("server.log");
        let args = ["--dir", dir.arg(), "--logfile", log.to_str().unwrap()];
        let server = match kind {
            "redis" => Server::redis_with(&args),
            _ => Server::goblin_with(&args),
        };
        let mut raw = server.raw();
        let forks = |raw: &mut Raw| {
            String::from_utf8_lossy(&cmd(raw, "INFO stats"))
                .lines()
                .find_map(|l| l.strip_prefix("total_forks:").map(str::to_string))
        };
        let idle = |raw: &mut Raw| {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let info = String::from_utf8_lossy(&cmd(raw, "INFO persistence")).into_owned();
                if [
                    "rdb_bgsave_in_progress:0",
                    "aof_rewrite_in_progress:0",
                    "aof_rewrite_scheduled:0",
                ]
                .iter()
                .all(|f| info.contains(f))
                {
                    return;
                }
                assert!(Instant::now() < deadline, "{info}");
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let mut lines = vec![forks(&mut raw)];
        ok(&mut raw, "SET k v");
        ok(&mut raw, "BGSAVE");
        idle(&mut raw);
        lines.push(forks(&mut raw));
        ok(&mut raw, "BGREWRITEAOF");
        idle(&mut raw);
        lines.push(forks(&mut raw));
        ok(&mut raw, "MULTI");
        cmd(&mut raw, "BGREWRITEAOF");
        lines.push(Some(show(&cmd(&mut raw, "EXEC"))));
        idle(&mut raw);
        lines.push(forks(&mut raw));
        ok(&mut raw, "MULTI");
        cmd(&mut raw, "CONFIG SET appendonly yes");
        ok(&mut raw, "EXEC");
        idle(&mut raw);
        lines.push(forks(&mut raw));
        let text = fs::read_to_string(&log).unwrap();
        lines.push(Some(
            text.contains("An AOF background was scheduled to start when possible")
                .to_string(),
        ));
        seen.push(lines);
    }
    assert_eq!(seen[1], seen[0]);
}

/// A `kind` server (`redis` or `goblin`, on `threads`) in `dir` with the log on, synced
/// on every write, and DEBUG allowed.
pub(crate) fn logging(kind: &str, dir: &Dir, threads: &str) -> Server {
    let mut args = vec![
        "--dir",
        dir.arg(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--enable-debug-command",
        "yes",
    ];
    match kind {
        "redis" => Server::redis_with(&args),
        _ => {
            args.extend(["--threads", threads]);
            Server::goblin_with(&args)
        }
    }
}

/// A key the log wrote to before its deadline, whose deadline passed before the log is
/// loaded again, is gone once loaded — as from redis-server, which loads a log (and its
/// RDB base) without expiring anything: Goblin's replay expired such a key at the write
/// (or left it out of the base), so the write made a new key without a deadline (`INCR
/// k` after `SET k 0 PX 400` came back as `k = 1`, for ever).
#[test]
fn keys_written_before_their_deadline_expire_after_a_reload_as_redis_does() {
    let transcript = |kind: &str| -> Vec<String> {
        let dir = Dir::new("deadline-reload");
        let threads = default_threads().max(2).to_string();
        let start = || logging(kind, &dir, &threads);
        let mut server = start();
        let mut raw = server.raw();
        ok(&mut raw, "DEBUG SET-ACTIVE-EXPIRE 0");
        // In the base the rewrite writes…
        for line in [
            "SET k 0 PX 400",
            "HSET h f v",
            "PEXPIRE h 400",
            "RPUSH l a",
            "PEXPIRE l 400",
            "SADD s a",
            "PEXPIRE s 400",
            "SET live 1",
        ] {
            ok(&mut raw, line);
        }
        assert!(cmd(&mut raw, "BGREWRITEAOF").starts_with(b"+"));
        wait_info(&mut raw, "aof_rewrites:1");
        wait_info(&mut raw, "aof_rewrite_in_progress:0");
        // …and in the log after it (a SWAPDB brings a key with a deadline over).
        for line in [
            "INCR k",
            "HINCRBY h n 1",
            "RPUSH l b",
            "SADD s b",
            "SET c 0 PX 400",
            "INCR c",
            "SELECT 1",
            "SET w v PX 400",
            "SELECT 0",
            "SWAPDB 0 1",
            "APPEND w x",
        ] {
            ok(&mut raw, line);
        }
        std::thread::sleep(Duration::from_millis(500));
        server.kill();
        let server = start();
        let mut raw = server.raw();
        let mut out = Vec::new();
        for line in ["SELECT 0", "SELECT 1"] {
            ok(&mut raw, line);
            for key in ["k", "h", "l", "s", "c", "w", "live"] {
                out.push(format!(
                    "{line} {key}: {}",
                    show(&cmd(&mut raw, &format!("EXISTS {key}")))
                ));
            }
        }
        out.push(show(&cmd(&mut raw, "GET live")));
        out
    };
    assert_eq!(transcript("goblin"), transcript("redis"));
}

/// A `kind` server (`redis` or `goblin`) started on a log of `records` in `dir` — one
/// record file, named by a manifest as redis-server names its first — with `extra`
/// arguments.
fn started_on_log(kind: &str, dir: &Dir, records: &[u8], extra: &[&str]) -> Server {
    let logs = dir.path().join("appendonlydir");
    fs::create_dir_all(&logs).unwrap();
    fs::write(
        logs.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    fs::write(logs.join("appendonly.aof.1.incr.aof"), records).unwrap();
    let mut args = vec!["--dir", dir.arg(), "--appendonly", "yes"];
    args.extend(extra);
    match kind {
        "redis" => Server::redis_with(&args),
        _ => Server::goblin_with(&args),
    }
}

/// A log's scripts (EVAL records, as redis-server before 7.0 could log them) write on a
/// read-only replica too: the replay is obeyed, as redis-server obeys its log's client. Before, each script's write was
/// refused (`READONLY`) and the key was missing.
#[test]
fn a_replayed_scripts_writes_are_obeyed_on_a_read_only_replica() {
    let record = |argv: &[&str]| {
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        goblin_tests::encode(&argv)
    };
    let mut seen = Vec::new();
    for kind in ["redis", "goblin"] {
        let dir = Dir::new("replayed-scripts");
        let mut log = record(&["SELECT", "9"]);
        log.extend(record(&[
            "EVAL",
            "redis.call('set',KEYS[1],'100')",
            "1",
            "foo",
        ]));
        for _ in 0..2 {
            log.extend(record(&["EVAL", "redis.call('incr',KEYS[1])", "1", "foo"]));
        }
        let server = started_on_log(kind, &dir, &log, &["--replicaof", "127.0.0.1 0"]);
        let mut raw = server.raw();
        ok(&mut raw, "SELECT 9");
        seen.push(show(&cmd(&mut raw, "GET foo")));
    }
    assert_eq!(seen[0], show(b"$3\r\n102\r\n"));
    assert_eq!(seen[1], seen[0]);
}

/// While DEBUG LOADAOF replays a log whose script runs long, other clients are told
/// `LOADING` (not `BUSY`), as redis-server tells them while it loads; the script's write
/// is there afterwards.
#[test]
fn a_slow_script_in_a_replayed_log_answers_loading() {
    let mut seen = Vec::new();
    for kind in ["redis", "goblin"] {
        let dir = Dir::new("slow-replay");
        let script = "redis.call('set',KEYS[1],'y') local n = 0 \
                      for i = 1, 100000000 do n = n + i end return 'ok'";
        let mut log = goblin_tests::encode(&[b"SELECT", b"9"]);
        log.extend(goblin_tests::encode(&[
            b"EVAL",
            script.as_bytes(),
            b"1",
            b"x",
        ]));
        let debug = ["--lua-time-limit", "1", "--enable-debug-command", "yes"];
        let server = started_on_log(kind, &dir, &log, &debug);
        let mut loader = server.raw();
        loader.send(&goblin_tests::encode(&[b"DEBUG", b"LOADAOF"]));
        let mut other = server.raw();
        let deadline = Instant::now() + Duration::from_secs(20);
        let refused = loop {
            let reply = cmd(&mut other, "PING");
            if reply.starts_with(b"-") {
                break show(&reply)
                    .split(' ')
                    .next()
                    .unwrap_or_default()
                    .to_string();
            }
            assert!(Instant::now() < deadline, "{kind}: never refused");
            std::thread::sleep(Duration::from_millis(5));
        };
        let loaded = show(&loader.reply());
        ok(&mut other, "SELECT 9");
        seen.push((refused, loaded, show(&cmd(&mut other, "GET x"))));
    }
    assert_eq!(seen[0].0, "-LOADING");
    assert_eq!(seen[1], seen[0]);
}

/// DEBUG AOF-FLUSH-SLEEP: the log sleeps that long before each write of its records, and
/// a write's reply still comes only once its record is in the file (what redis-server's
/// `AOF fsync always barrier issue` test looks at).
#[test]
fn debug_aof_flush_sleep_delays_the_log_not_past_the_reply() {
    let mut seen = Vec::new();
    for kind in ["redis", "goblin"] {
        let dir = Dir::new("flush-sleep");
        let server = logging(kind, &dir, "1");
        let mut raw = server.raw();
        ok(&mut raw, "SET warm 1");
        let sizes = |dir: &Dir| -> u64 {
            incr_files(dir.path())
                .iter()
                .map(|p| fs::metadata(p).map_or(0, |m| m.len()))
                .sum()
        };
        let before = sizes(&dir);
        ok(&mut raw, "DEBUG AOF-FLUSH-SLEEP 200000");
        let started = Instant::now();
        let reply = show(&cmd(&mut raw, "INCR counter"));
        let took = started.elapsed();
        let grown = sizes(&dir) > before;
        ok(&mut raw, "DEBUG AOF-FLUSH-SLEEP 0");
        let started = Instant::now();
        ok(&mut raw, "INCR counter");
        let quick = started.elapsed() < Duration::from_millis(150);
        seen.push((reply, took >= Duration::from_millis(200), grown, quick));
    }
    assert_eq!(seen[0], (show(b":1\r\n"), true, true, true));
    assert_eq!(seen[1], seen[0]);
}

/// `aof-timestamp-enabled yes` (set at run time): the log's records of a new second
/// follow a `#TS:<Unix seconds>` annotation, as redis-server writes them — its record
/// file starts with one, and a write a second later is preceded by another —, and the
/// log loads back (Goblin one file per shard, redis-server one).
#[test]
fn aof_timestamp_annotations_are_written_as_redis_does() {
    for kind in ["goblin", "redis"] {
        let dir = Dir::new("aof-ts");
        let threads = default_threads().to_string();
        let mut server = logging(kind, &dir, &threads);
        let mut raw = server.raw();
        ok(&mut raw, "CONFIG SET aof-timestamp-enabled yes");
        assert_eq!(
            cmd(&mut raw, "CONFIG GET aof-timestamp-enabled"),
            b"*2\r\n$21\r\naof-timestamp-enabled\r\n$3\r\nyes\r\n"
        );
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        ok(&mut raw, "SET foo bar");
        std::thread::sleep(Duration::from_millis(1100));
        ok(&mut raw, "SET foo baz");
        let files = incr_files(dir.path());
        let text: String = files
            .iter()
            .map(|f| String::from_utf8_lossy(&fs::read(f).unwrap()).into_owned())
            .collect();
        let stamps: Vec<u64> = text
            .split("\r\n")
            .filter_map(|line| line.strip_prefix("#TS:"))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(stamps.len(), 2, "{kind}: {text:?}");
        assert!(
            stamps[0] >= before && stamps[0] <= before + 1 && stamps[1] > stamps[0],
            "{kind}: {stamps:?}, before {before}"
        );
        let holder = files
            .iter()
            .find(|f| String::from_utf8_lossy(&fs::read(f).unwrap()).contains("foo"))
            .unwrap();
        assert!(
            fs::read(holder).unwrap().starts_with(b"#TS:"),
            "{kind}: {text:?}"
        );
        server.kill();
        let server = logging(kind, &dir, &threads);
        assert_eq!(cmd(&mut server.raw(), "GET foo"), b"$3\r\nbaz\r\n");
    }
}

/// The value of an INFO persistence field.
fn persistence_field(raw: &mut Raw, name: &str) -> String {
    let info = String::from_utf8_lossy(&cmd(raw, "INFO persistence")).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .to_string()
}

/// Waits until INFO persistence's `name` is `value`, failing with `why` after `ms`
/// milliseconds.
/// Asserts INFO persistence's field `name` is `value` (`what` says of which server).
#[track_caller]
fn field_is(raw: &mut Raw, name: &str, value: &str, what: &str) {
    assert_eq!(persistence_field(raw, name), value, "{what}: {name}");
}

fn wait_field(raw: &mut Raw, name: &str, value: &str, ms: u64, why: &str) {
    let deadline = Instant::now() + Duration::from_millis(ms);
    while persistence_field(raw, name) != value {
        assert!(Instant::now() < deadline, "{why}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `kind` server (Goblin on `threads`) in `dir` with `save` rules `rules`, given
/// `keys` keys (`k0` … in one pipelined write), and a connection to it.
fn filled_with_save_rules(
    kind: &str,
    dir: &Dir,
    rules: &str,
    threads: &str,
    keys: usize,
) -> (Server, Raw) {
    filled_with(kind, &["--dir", dir.arg(), "--save", rules], threads, keys)
}

/// A `kind` server (Goblin on `threads`) started with `args`, given `keys` keys (`k0` …
/// in one pipelined write), and a connection to it.
fn filled_with(kind: &str, args: &[&str], threads: &str, keys: usize) -> (Server, Raw) {
    let server = match kind {
        "redis" => Server::redis_with(args),
        _ => Server::goblin_with(&[args, &["--threads", threads]].concat()),
    };
    let mut raw = server.raw();
    let mut pipeline = Vec::new();
    for i in 0..keys {
        pipeline.extend(goblin_tests::encode(&[
            b"SET",
            format!("k{i}").as_bytes(),
            b"v",
        ]));
    }
    raw.send(&pipeline);
    for _ in 0..keys {
        assert_eq!(raw.reply(), b"+OK\r\n");
    }
    (server, raw)
}

/// FLUSHALL abandons a background save in progress (slowed by `rdb-key-save-delay`), as
/// redis-server kills its child: the save ends at once, neither a success nor a failure
/// (LASTSAVE stays, `rdb_last_bgsave_status:ok`), the keys written and flushed still
/// count for the `save` rules; a save afterwards writes and resets them. With `save`
/// rules, FLUSHALL then saves the empty dataset itself.
#[test]
fn flushall_abandons_a_background_save_as_redis_does() {
    for kind in ["goblin", "redis"] {
        for rules in ["", "3600 1"] {
            let dir = Dir::new("flushall-bgsave");
            let (_server, mut raw) = filled_with_save_rules(kind, &dir, rules, "3", 2000);
            ok(&mut raw, "CONFIG SET rdb-key-save-delay 1000");
            let lastsave = cmd(&mut raw, "LASTSAVE");
            assert!(cmd(&mut raw, "BGSAVE").starts_with(b"+Background saving started"));
            let what = format!("{kind} save '{rules}'");
            assert_eq!(
                persistence_field(&mut raw, "rdb_bgsave_in_progress"),
                "1",
                "{what}"
            );
            ok(&mut raw, "FLUSHALL");
            wait_field(
                &mut raw,
                "rdb_bgsave_in_progress",
                "0",
                1000,
                &format!("{what}: the save was not abandoned"),
            );
            assert_eq!(
                persistence_field(&mut raw, "rdb_last_bgsave_status"),
                "ok",
                "{what}"
            );
            let changes: u64 = persistence_field(&mut raw, "rdb_changes_since_last_save")
                .parse()
                .unwrap();
            if rules.is_empty() {
                // Written 2000, flushed 2000.
                assert_eq!(changes, 4000, "{what}");
                assert_eq!(cmd(&mut raw, "LASTSAVE"), lastsave, "{what}");
            } else {
                // FLUSHALL saved the empty dataset.
                assert_eq!(changes, 0, "{what}");
                assert_eq!(cmd(&mut raw, "DBSIZE"), b":0\r\n", "{what}");
            }
            ok(&mut raw, "SET x xx");
            ok(&mut raw, "CONFIG SET rdb-key-save-delay 0");
            assert!(cmd(&mut raw, "BGSAVE").starts_with(b"+Background saving started"));
            wait_info(&mut raw, "rdb_bgsave_in_progress:0");
            assert_eq!(
                persistence_field(&mut raw, "rdb_changes_since_last_save"),
                "0",
                "{what}"
            );
        }
    }
}

/// BGREWRITEAOF during a background save is scheduled, and runs once the save ended —
/// with the log off too (it writes the files DEBUG LOADAOF loads), as in redis-server;
/// turning the log off unschedules what waited to start it.
#[test]
fn a_rewrite_scheduled_behind_a_save_runs_with_the_log_off() {
    for kind in ["goblin", "redis"] {
        let dir = Dir::new("rewrite-scheduled");
        let (_server, mut raw) = filled_with_save_rules(kind, &dir, "", "2", 1000);
        ok(&mut raw, "CONFIG SET rdb-key-save-delay 1000");
        assert!(cmd(&mut raw, "BGSAVE").starts_with(b"+Background saving started"));
        assert_eq!(
            cmd(&mut raw, "BGREWRITEAOF"),
            b"+Background append only file rewriting scheduled\r\n",
            "{kind}"
        );
        field_is(&mut raw, "aof_rewrite_scheduled", "1", kind);
        ok(&mut raw, "CONFIG SET rdb-key-save-delay 0");
        wait_field(
            &mut raw,
            "aof_rewrites",
            "1",
            10000,
            &format!("{kind}: the scheduled rewrite did not run"),
        );
        wait_info(&mut raw, "aof_rewrite_in_progress:0");
        field_is(&mut raw, "aof_rewrite_scheduled", "0", kind);
        // What waited to start the log is dropped when the log goes off again.
        ok(&mut raw, "CONFIG SET appendonly yes");
        ok(&mut raw, "CONFIG SET appendonly no");
        wait_info(&mut raw, "aof_rewrite_in_progress:0");
        wait_field(
            &mut raw,
            "aof_rewrite_scheduled",
            "0",
            5000,
            &format!("{kind}: a rewrite stays scheduled"),
        );
    }
}

/// `CONFIG SET appendonly no` kills a log rewrite in progress (slowed by
/// `rdb-key-save-delay`), as redis-server kills its child: the rewrite ends at once,
/// neither a success nor a failure, with redis-server's log line; a BGSAVE may start
/// right after, and the log, turned on again, starts with a rewrite of its own.
#[test]
fn turning_the_log_off_kills_a_rewrite_in_progress() {
    for kind in ["goblin", "redis"] {
        let dir = Dir::new("kill-rewrite");
        let log = dir.path().join("server.log");
        let args = [
            "--dir",
            dir.arg(),
            "--logfile",
            log.to_str().unwrap(),
            "--loglevel",
            "notice",
            "--enable-debug-command",
            "yes",
        ];
        let (_server, mut raw) = filled_with(kind, &args, "2", 4000);
        ok(&mut raw, "CONFIG SET appendonly yes");
        wait_field(
            &mut raw,
            "aof_rewrites",
            "1",
            10000,
            "the log did not start",
        );
        wait_info(&mut raw, "aof_rewrite_in_progress:0");
        ok(&mut raw, "CONFIG SET rdb-key-save-delay 1000");
        assert_eq!(
            cmd(&mut raw, "BGREWRITEAOF"),
            b"+Background append only file rewriting started\r\n",
            "{kind}"
        );
        field_is(&mut raw, "aof_rewrite_in_progress", "1", kind);
        ok(&mut raw, "CONFIG SET appendonly no");
        // (At a millisecond a key, the rewrite would take two seconds or more.)
        wait_field(
            &mut raw,
            "aof_rewrite_in_progress",
            "0",
            500,
            &format!("{kind}: the rewrite was not killed"),
        );
        // (A rewrite counts as it starts, killed or not.)
        for (field, value) in [("aof_rewrites", "2"), ("aof_last_bgrewrite_status", "ok")] {
            assert_eq!(persistence_field(&mut raw, field), value, "{kind}: {field}");
        }
        let text = fs::read_to_string(&log).unwrap();
        assert!(
            text.contains("Killing running AOF rewrite child"),
            "{kind}: {text}"
        );
        ok(&mut raw, "CONFIG SET rdb-key-save-delay 0");
        assert!(cmd(&mut raw, "BGSAVE").starts_with(b"+Background saving started"));
        wait_info(&mut raw, "rdb_bgsave_in_progress:0");
        ok(&mut raw, "CONFIG SET appendonly yes");
        wait_field(
            &mut raw,
            "aof_rewrites",
            "3",
            10000,
            "the log did not start again",
        );
        wait_info(&mut raw, "aof_rewrite_in_progress:0");
        assert_eq!(cmd(&mut raw, "DBSIZE"), b":4000\r\n", "{kind}");
        ok(&mut raw, "SET after yes");
        assert_eq!(cmd(&mut raw, "DEBUG LOADAOF"), b"+OK\r\n", "{kind}");
        assert_eq!(cmd(&mut raw, "DBSIZE"), b":4001\r\n", "{kind}");
    }
}

/// `CONFIG SET appendonly yes` starts the log's rewrite at once, as redis-server's
/// `startAppendOnly`: the INFO right after shows it in progress (Redis's test helper
/// `waitForBgrewriteaof` looks at nothing else), then done; with a background save
/// running, it is scheduled, and runs once the save ends.
#[test]
fn turning_the_log_on_starts_its_rewrite_at_once() {
    for kind in ["goblin", "redis"] {
        let dir = Dir::new("log-on");
        let args = [
            "--dir",
            dir.arg(),
            "--save",
            "",
            "--enable-debug-command",
            "yes",
        ];
        let (_server, mut raw) = filled_with(kind, &args, "2", 1000);
        let fields = |raw: &mut Raw| {
            ["aof_rewrite_in_progress", "aof_rewrite_scheduled"].map(|f| persistence_field(raw, f))
        };
        ok(&mut raw, "CONFIG SET appendonly yes");
        assert_eq!(fields(&mut raw), ["1", "0"], "{kind}");
        wait_field(
            &mut raw,
            "aof_rewrites",
            "1",
            10000,
            "the log did not start",
        );
        wait_info(&mut raw, "aof_rewrite_in_progress:0");
        ok(&mut raw, "CONFIG SET appendonly no");
        // Behind a save.
        ok(&mut raw, "CONFIG SET rdb-key-save-delay 1000");
        assert!(cmd(&mut raw, "BGSAVE").starts_with(b"+Background saving started"));
        ok(&mut raw, "CONFIG SET appendonly yes");
        assert_eq!(fields(&mut raw), ["0", "1"], "{kind}");
        ok(&mut raw, "CONFIG SET rdb-key-save-delay 0");
        wait_field(
            &mut raw,
            "aof_rewrites",
            "2",
            10000,
            "the log did not start after the save",
        );
        wait_info(&mut raw, "aof_rewrite_in_progress:0");
        assert_eq!(fields(&mut raw), ["0", "0"], "{kind}");
        ok(&mut raw, "SET after log");
        assert_eq!(cmd(&mut raw, "DEBUG LOADAOF"), b"+OK\r\n", "{kind}");
        assert_eq!(cmd(&mut raw, "DBSIZE"), b":1001\r\n", "{kind}");
    }
}
