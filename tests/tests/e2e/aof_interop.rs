//! Append-only logs that redis-server wrote, loaded by Goblin as redis-server 7.0 loads
//! them: its multi-part logs (a base snapshot or a base of commands, record files, the
//! manifest), the single file of Redis before 7.0 (moved into the log's directory, with
//! or without an RDB preamble), timestamp annotations, torn and broken files and
//! manifests (the same start or the same refusal, with redis-server's reason as the last
//! line of the log).

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use goblin_tests::dataset::all_databases;
use goblin_tests::{Raw, Server, default_threads, encode, free_port, goblin_binary, show};

use crate::persistence::{Dir, logging};

fn ok(raw: &mut Raw, line: &str) {
    let reply = raw.cmd_str(line);
    assert!(!reply.starts_with(b"-"), "{line}: {}", show(&reply));
}

/// Waits until INFO persistence shows no rewrite in progress or scheduled.
fn wait_rewrite(raw: &mut Raw) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"persistence"])).into_owned();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            return;
        }
        assert!(Instant::now() < deadline, "the rewrite did not end: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What redis-server's log and Goblin's both show for the same work: every type,
/// several databases, relative expiries, a transaction, effects that are not the
/// command (INCRBYFLOAT, SPOP).
const WRITES: &[&str] = &[
    "SET s:plain hello",
    "SET s:ttl v EX 1000",
    "SET s:int 12345",
    "INCRBYFLOAT s:float 1.5",
    "RPUSH l a b c d",
    "LPOP l",
    "HSET h f1 v1 f2 v2",
    "SADD set a b c d e",
    "SPOP set",
    "ZADD z 1 a 2.5 b -3 c",
    "XADD st * f v",
    "EXPIRE h 5000",
    "MULTI",
    "SET tx:a 1",
    "INCR tx:a",
    "EXEC",
    "SELECT 5",
    "SET db5 five",
    "SELECT 0",
];

/// A log redis-server wrote — a base (a snapshot, or commands with
/// `aof-use-rdb-preamble no`) and record files after it, left by a crash — loads into
/// Goblin with the dataset redis-server had; Goblin then appends to it and comes back
/// from its own restart with its writes too.
#[test]
fn logs_that_redis_server_wrote_load_as_there() {
    for preamble in ["yes", "no"] {
        let dir = Dir::new("aof-from-redis");
        let mut redis = Server::redis_with(&[
            "--dir",
            dir.arg(),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            preamble,
        ]);
        let mut raw = redis.raw();
        for line in WRITES {
            ok(&mut raw, line);
        }
        ok(&mut raw, "BGREWRITEAOF");
        wait_rewrite(&mut raw);
        for line in WRITES {
            ok(&mut raw, line);
        }
        ok(&mut raw, "SET after:rewrite 1");
        let want = all_databases(&mut redis.client());
        redis.kill();
        let manifest =
            fs::read_to_string(dir.path().join("appendonlydir/appendonly.aof.manifest")).unwrap();
        let suffix = if preamble == "yes" {
            ".base.rdb"
        } else {
            ".base.aof"
        };
        assert!(manifest.contains(suffix), "{manifest}");

        let args = ["--dir", dir.arg(), "--appendonly", "yes"];
        let mut goblin = Server::goblin_with(&args);
        assert_eq!(
            all_databases(&mut goblin.client()),
            want,
            "preamble {preamble}"
        );
        ok(&mut goblin.raw(), "SET from:goblin 1");
        goblin.kill();
        let mut goblin = Server::goblin_with(&args);
        let mut raw = goblin.raw();
        assert_eq!(raw.cmd_str("GET from:goblin"), b"$1\r\n1\r\n");
        assert_eq!(raw.cmd_str("GET after:rewrite"), b"$1\r\n1\r\n");
        goblin.kill();
    }
}

/// The log of a Goblin of any thread count is redis-server's to load: its transactions
/// (EXEC, a FLUSHALL inside one, MSET, SWAPDB, a move across shards) are written as
/// redis-server writes them, in MULTI/EXEC or alone, without records of Goblin's own —
/// before and after a rewrite, and across restarts with other thread counts (the record
/// file goes on). redis-check-aof finds it valid.
#[test]
fn a_log_of_any_thread_count_loads_in_redis_server() {
    let more = [
        "MSET m:a 1 m:b 2 m:c 3",
        "MULTI",
        "SET gone 1",
        "FLUSHALL",
        "SET kept 1",
        "EXEC",
        "SWAPDB 0 7",
        "SWAPDB 7 0",
        "RPUSH src x y",
        "LMOVE src dst LEFT RIGHT",
        // (No spaces: the line is split at them.)
        "EVAL redis.call('set',KEYS[1],1);redis.call('publish','ch','m');\
         return(redis.call('incr',KEYS[2])) 2 e:a e:b",
    ];
    for threads in ["1", "2", "3"] {
        let dir = Dir::new("aof-to-redis");
        let mut goblin = logging("goblin", &dir, threads);
        let mut raw = goblin.raw();
        for line in WRITES.iter().chain(&more) {
            ok(&mut raw, line);
        }
        ok(&mut raw, "BGREWRITEAOF");
        wait_rewrite(&mut raw);
        for line in WRITES.iter().chain(&more) {
            ok(&mut raw, line);
        }
        goblin.kill();
        // Another thread count goes on in the same file.
        let mut goblin = logging("goblin", &dir, if threads == "1" { "2" } else { "1" });
        ok(&mut goblin.raw(), "SET after:restart 1");
        let want = all_databases(&mut goblin.client());
        goblin.kill();
        let manifest = dir.path().join("appendonlydir/appendonly.aof.manifest");
        let text = fs::read_to_string(&manifest).unwrap();
        assert_eq!(text.lines().count(), 2, "{threads} threads: {text}");
        // Goblin loads it back…
        let mut again = logging("goblin", &dir, threads);
        assert_eq!(
            all_databases(&mut again.client()),
            want,
            "{threads} threads"
        );
        again.kill();
        // …and so does redis-server, and its checker.
        let logs = fs::read_dir(dir.path().join("appendonlydir")).unwrap();
        for file in logs.flatten() {
            let bytes = fs::read(file.path()).unwrap();
            assert!(
                !bytes.windows(7).any(|w| w.eq_ignore_ascii_case(b"GOBLIN.")),
                "{}",
                file.path().display()
            );
            assert!(
                !bytes.windows(7).any(|w| w.eq_ignore_ascii_case(b"PUBLISH")),
                "{}",
                file.path().display()
            );
        }
        let mut redis = logging("redis", &dir, "");
        assert_eq!(
            all_databases(&mut redis.client()),
            want,
            "{threads} threads"
        );
        redis.kill();
        let out = Command::new("redis-check-aof")
            .arg(&manifest)
            .output()
            .expect("redis-check-aof runs");
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && said.contains("is valid"),
            "{threads} threads: {text}\n{said}"
        );
    }
}

/// For the same writes of one client — each of one key, or of keys of one slot — the
/// record file holds the bytes redis-server's holds, whatever the thread count: the
/// `SELECT`s where the database changes, MULTI/EXEC around a transaction and a script,
/// PUBLISH left out, relative expiries as absolute ones, a read that found a key expired
/// as its DEL.
#[test]
fn records_are_redis_servers_bytes() {
    let writes = [
        "SET a 1",
        "INCR a",
        "SET b 2 PXAT 99999999999999",
        "SELECT 3",
        "RPUSH l x y z",
        "LPOP l",
        "HSET h f v",
        "SELECT 0",
        "MULTI",
        "SET {t}a 1",
        "INCR {t}b",
        "EXEC",
        "EVAL redis.call('set',KEYS[1],1);redis.call('publish','ch','m');\
         return(redis.call('set',KEYS[2],2)) 2 {s}a {s}b",
        "PUBLISH ch m",
        // (Its deadline: in 20 ms, a placeholder in the records compared.)
        "SET gone 1 PXAT <at>",
        "DEBUG SLEEP 0.03",
        "GET gone",
        "DEL a",
    ];
    let mut seen = Vec::new();
    for (kind, threads) in [
        ("redis", ""),
        ("goblin", "1"),
        ("goblin", "2"),
        ("goblin", "3"),
    ] {
        let dir = Dir::new("aof-bytes");
        let server = logging(kind, &dir, threads);
        let mut raw = server.raw();
        let at = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            + 20)
            .to_string();
        for line in writes {
            ok(&mut raw, &line.replace("<at>", &at));
        }
        drop(raw);
        drop(server);
        let (names, manifest) = log_files(&dir);
        let incr = names
            .iter()
            .find(|n| n.ends_with(".incr.aof"))
            .expect("a record file");
        let bytes = fs::read(dir.path().join("appendonlydir").join(incr)).unwrap();
        let records = show(&bytes).replace(&at, "<at>");
        seen.push((format!("{kind} {threads}"), names, manifest, records));
    }
    let (redis, goblins) = seen.split_first().unwrap();
    for goblin in goblins {
        assert_eq!(goblin.1, redis.1, "{}: the files", goblin.0);
        assert_eq!(goblin.2, redis.2, "{}: the manifest", goblin.0);
        assert_eq!(goblin.3, redis.3, "{}: the records", goblin.0);
    }
}

/// A log of an earlier Goblin version — a record file per shard, a transaction's parts
/// framed by `GOBLIN.TXPART` and ended by `GOBLIN.TXCOMMIT` — loads (a part without its
/// commit dropped), and the log goes on in a new record file of every key, as
/// redis-server names it, listed after the old ones; it comes back after a restart.
#[test]
fn an_earlier_goblins_log_of_a_file_per_shard_loads_and_goes_on() {
    let dir = Dir::new("aof-earlier");
    let logs = dir.path().join("appendonlydir");
    fs::create_dir_all(&logs).unwrap();
    let part = |id: &str| format!("GOBLIN.TXPART {id} 1");
    let shard0 = records(&[
        "SELECT 0",
        "SET a 1",
        &part("x-0-1"),
        "SET t0 1",
        "GOBLIN.TXCOMMIT x-0-1",
        &part("x-0-2"),
        "SET lost0 1",
    ]);
    let shard1 = records(&[
        "SELECT 0",
        "SET b 2",
        &part("x-0-1"),
        "SET t1 1",
        &part("x-0-2"),
        "SET lost1 1",
    ]);
    fs::write(logs.join("appendonly.aof.1.0.incr.aof"), shard0).unwrap();
    fs::write(logs.join("appendonly.aof.1.1.incr.aof"), shard1).unwrap();
    let listed = "file appendonly.aof.1.0.incr.aof seq 1 type i shard 0 shards 2 generation 1\n\
                  file appendonly.aof.1.1.incr.aof seq 2 type i shard 1 shards 2 generation 1\n";
    fs::write(logs.join("appendonly.aof.manifest"), listed).unwrap();
    let keys = |server: &Server| {
        let mut raw = server.raw();
        ["a", "b", "t0", "t1", "lost0", "lost1", "c"]
            .iter()
            .map(|k| show(&raw.cmd_str(&format!("GET {k}"))))
            .collect::<Vec<_>>()
    };
    let want = |c: &str| {
        [
            "$1\r\n1\r\n",
            "$1\r\n2\r\n",
            "$1\r\n1\r\n",
            "$1\r\n1\r\n",
            "$-1\r\n",
            "$-1\r\n",
            c,
        ]
        .iter()
        .map(|r| show(r.as_bytes()))
        .collect::<Vec<_>>()
    };
    let goblin = logging("goblin", &dir, "2");
    assert_eq!(keys(&goblin), want("$-1\r\n"));
    ok(&mut goblin.raw(), "SET c 3");
    drop(goblin);
    let manifest = fs::read_to_string(logs.join("appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        format!("{listed}file appendonly.aof.3.incr.aof seq 3 type i\n")
    );
    let goblin = logging("goblin", &dir, "3");
    assert_eq!(keys(&goblin), want("$1\r\n3\r\n"));
}

/// The log's records as redis-server writes them.
fn records(lines: &[&str]) -> Vec<u8> {
    lines
        .iter()
        .flat_map(|line| {
            let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            encode(&words)
        })
        .collect()
}

/// The single file of Redis before 7.0 (`dir/appendonly.aof`: commands, or an RDB
/// preamble and commands after it) is moved into the log's directory under a manifest
/// that names it as the base, and loads, as redis-server 7.0 upgrades it; a manifest
/// that an upgrade cut short left behind is finished.
#[test]
fn an_old_style_log_is_upgraded_as_redis_server_upgrades_it() {
    let mut plain = b"#TS:1628217470\r\n".to_vec();
    plain.extend(records(&[
        "SET k1 v1",
        "RPUSH list a b",
        "SELECT 2",
        "SET k2 v2",
    ]));
    plain.extend_from_slice(b"#TS:1628217471\r\n");
    plain.extend(records(&["INCR n", "INCR n"]));
    let preamble = include_bytes!("../../fixtures/redis-7.0.15/rdb-preamble.aof").to_vec();
    let cut_short = "file appendonly.aof seq 1 type b\n";
    for (what, file, manifest) in [
        ("commands", &plain, None),
        ("an RDB preamble", &preamble, None),
        ("an upgrade cut short", &plain, Some(cut_short)),
    ] {
        let mut seen = Vec::new();
        for kind in ["redis", "goblin"] {
            let dir = Dir::new("aof-old-style");
            fs::write(dir.path().join("appendonly.aof"), file).unwrap();
            if let Some(text) = manifest {
                fs::create_dir_all(dir.path().join("appendonlydir")).unwrap();
                fs::write(
                    dir.path().join("appendonlydir/appendonly.aof.manifest"),
                    text,
                )
                .unwrap();
            }
            let args = ["--dir", dir.arg(), "--appendonly", "yes"];
            let mut server = match kind {
                "redis" => Server::redis_with(&args),
                _ => Server::goblin_with(&args),
            };
            let data = all_databases(&mut server.client());
            server.kill();
            let moved = dir.path().join("appendonlydir/appendonly.aof");
            let first_line =
                fs::read_to_string(dir.path().join("appendonlydir/appendonly.aof.manifest"))
                    .unwrap()
                    .lines()
                    .next()
                    .map(str::to_string);
            seen.push((
                data,
                dir.path().join("appendonly.aof").exists(),
                fs::read(&moved).ok(),
                first_line,
            ));
        }
        assert!(!seen[0].0.is_empty(), "{what}: redis-server loaded nothing");
        assert_eq!(seen[1], seen[0], "{what}");
    }
}

/// A server started on `dir`: whether it refused to start (exited) and then the last
/// line of its log (the reason, as redis-server logs it) without the log line's prefix;
/// a server that answers PING instead is stopped (SIGKILL), with no reason.
fn refusal(kind: &str, dir: &Path, extra: &[&str]) -> (bool, String) {
    let log = dir.join("server.log");
    let port = free_port().to_string();
    let common = [
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--dir",
        dir.to_str().unwrap(),
        "--appendonly",
        "yes",
        "--save",
        "",
        "--logfile",
        log.to_str().unwrap(),
    ];
    let threads = default_threads().to_string();
    let mut child = match kind {
        "redis" => Command::new("redis-server"),
        _ => {
            let mut c = Command::new(goblin_binary());
            c.args(["--threads", &threads]);
            c
        }
    }
    .args(common)
    .args(extra)
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start a server");
    let deadline = Instant::now() + Duration::from_secs(20);
    let port: u16 = port.parse().unwrap();
    let exited = loop {
        if let Ok(Some(_)) = child.try_wait() {
            break true;
        }
        let serves = Raw::try_connect(port).is_ok_and(|mut raw| {
            raw.try_send(&encode(&[b"PING"])).is_ok()
                && raw.try_reply().is_ok_and(|r| r == b"+PONG\r\n")
        });
        if serves || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            assert!(serves, "{kind} neither served nor exited");
            return (false, String::new());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = fs::read_to_string(&log).unwrap_or_default();
    let last = text
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string();
    // `pid:M 05 Dec 2026 10:00:00.000 # text`: the text after the level mark.
    let reason = last
        .split_once(" # ")
        .or_else(|| last.split_once(" * "))
        .map_or(last.as_str(), |(_, r)| r)
        .to_string();
    (exited, reason)
}

/// Broken manifests and records: each refused by both servers, with the same reason as
/// the log's last line — or, for a torn last record with `aof-load-truncated yes`, loaded
/// by both, the file cut to the same length.
#[test]
fn broken_logs_are_refused_or_cut_as_redis_server_does() {
    let set1 = records(&["SET k1 v1"]);
    let set2 = records(&["SET k2 v2"]);
    let mut torn = records(&["INCR n", "INCR n"]);
    torn.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$1\r\n");
    let unfinished = records(&["SET k v", "MULTI", "SET in multi"]);
    let mut garbage = set1.clone();
    garbage.extend_from_slice(b"!!!");
    garbage.extend(set2.clone());
    let incr1 = "appendonly.aof.1.incr.aof";
    let line = |l: &str| format!("{l}\n");
    let long = format!("file {} seq 1 type b\n", "x".repeat(1100));
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, String, Vec<(&str, Vec<u8>)>, &[&str])> = vec![
        ("an empty manifest", String::new(), vec![], &[]),
        (
            "a blank line",
            line("file appendonly.aof.1.incr.aof seq 1 type i") + "\n",
            vec![(incr1, set1.clone())],
            &[],
        ),
        (
            "a missing key",
            line("filx appendonly.aof.1.incr.aof seq 1 type i"),
            vec![(incr1, set1.clone())],
            &[],
        ),
        (
            "a line too short",
            line("file appendonly.aof.1.incr.aof type i"),
            vec![(incr1, set1.clone())],
            &[],
        ),
        (
            "an odd parameter",
            line("file appendonly.aof.1.incr.aof seq 1 type i newkey"),
            vec![(incr1, set1.clone())],
            &[],
        ),
        (
            "an unknown type",
            line("file appendonly.aof.1.incr.aof seq 1 type x"),
            vec![(incr1, set1.clone())],
            &[],
        ),
        ("a line too long", long, vec![], &[]),
        (
            "a path",
            line("file ../appendonly.aof.1.incr.aof seq 1 type i"),
            vec![],
            &[],
        ),
        (
            "two bases",
            line("file b1 seq 1 type b") + &line("file b2 seq 2 type b"),
            vec![("b1", set1.clone()), ("b2", set2.clone())],
            &[],
        ),
        (
            "sequence numbers going down",
            line("file i2 seq 2 type i") + &line("file i1 seq 1 type i"),
            vec![("i1", set1.clone()), ("i2", set2.clone())],
            &[],
        ),
        (
            "a file missing",
            line("file appendonly.aof.1.incr.aof seq 1 type i") + &line("file gone seq 2 type i"),
            vec![(incr1, set1.clone())],
            &[],
        ),
        (
            "a byte that starts no record",
            line("file appendonly.aof.1.incr.aof seq 1 type i"),
            vec![(incr1, garbage)],
            &[],
        ),
        (
            "an unknown command",
            line("file appendonly.aof.1.incr.aof seq 1 type i"),
            vec![(incr1, records(&["SET a 1", "NOSUCHCOMMAND x"]))],
            &[],
        ),
        (
            "a torn record, refused",
            line("file appendonly.aof.1.incr.aof seq 1 type i"),
            vec![(incr1, torn.clone())],
            &["--aof-load-truncated", "no"],
        ),
        (
            "a torn record in a file before another",
            line("file appendonly.aof.1.incr.aof seq 1 type i") + &line("file i2 seq 2 type i"),
            vec![(incr1, torn.clone()), ("i2", set2.clone())],
            &[],
        ),
        (
            "a torn record, cut",
            line("file appendonly.aof.1.incr.aof seq 1 type i"),
            vec![(incr1, torn)],
            &[],
        ),
        (
            "an unfinished MULTI, cut",
            line("file appendonly.aof.1.incr.aof seq 1 type i"),
            vec![(incr1, unfinished)],
            &[],
        ),
    ];
    for (what, manifest, files, extra) in &cases {
        let mut seen = Vec::new();
        for kind in ["redis", "goblin"] {
            let dir = Dir::new("aof-broken");
            let aof_dir = dir.path().join("appendonlydir");
            fs::create_dir_all(&aof_dir).unwrap();
            fs::write(aof_dir.join("appendonly.aof.manifest"), manifest).unwrap();
            for (name, bytes) in files {
                fs::write(aof_dir.join(name), bytes).unwrap();
            }
            let (exited, reason) = refusal(kind, dir.path(), extra);
            let cut = fs::metadata(aof_dir.join(incr1)).map(|m| m.len()).ok();
            seen.push((exited, reason, cut));
        }
        assert_eq!(seen[1], seen[0], "{what}");
    }
}

/// Writes whose base is the same on every server (absolute deadlines and stream IDs,
/// nothing random): every type, two databases, a stream with a deleted entry, a group,
/// a consumer with a pending entry and one without, an empty stream.
const BASE_WRITES: &[&str] = &[
    "SET s hello",
    "SET n 12345",
    "PEXPIREAT s 4102444800000",
    "RPUSH l a b c 1 2",
    "SADD words x y z",
    "SADD ints 3 1 2",
    "HSET h f1 v1 f2 v2",
    "ZADD z 1.5 a 0.1 b inf c -2 d",
    "XADD x 1-1 a 1 b 2",
    "XADD x 2-1 c 3",
    "XADD x 3-1 d 4",
    "XDEL x 3-1",
    "XGROUP CREATE x g1 0",
    "XREADGROUP GROUP g1 alice COUNT 1 STREAMS x >",
    "XGROUP CREATECONSUMER x g1 bob",
    "XADD empty MAXLEN 0 5-5 k v",
    "SELECT 3",
    "SET other three",
    "SET more four",
    "SADD third a b",
    "RPUSH fourth c d",
    "SET fifth e",
    "SELECT 0",
];

/// A command's arguments.
type Argv = Vec<Vec<u8>>;
/// A base's libraries' loads, and each database's commands (after its `SELECT`).
type Base = (Vec<Argv>, Vec<(Vec<u8>, Vec<Argv>)>);

/// A base of commands, comparable from server to server: its libraries' loads apart,
/// then each database's commands as a sorted list (keys come in table order), with a
/// set's members sorted and a pending entry's delivery time left out.
fn base_commands(bytes: &[u8]) -> Base {
    use goblin_protocol::{Frame, parse_reply};
    let (mut functions, mut dbs) = (Vec::new(), Vec::<(Vec<u8>, Vec<Argv>)>::new());
    let mut at = 0;
    while at < bytes.len() {
        let (frame, n) = parse_reply(&bytes[at..]).unwrap().unwrap();
        at += n;
        let Frame::Array(items) = frame else {
            panic!("not a command at {at}");
        };
        let mut args: Vec<Vec<u8>> = items
            .into_iter()
            .map(|f| match f {
                Frame::Bulk(b) => b.to_vec(),
                other => panic!("{other:?}"),
            })
            .collect();
        match args[0].to_ascii_uppercase().as_slice() {
            b"FUNCTION" => functions.push(args),
            b"SELECT" => dbs.push((args[1].clone(), Vec::new())),
            name => {
                if name == b"SADD" {
                    args[2..].sort();
                }
                if name == b"XCLAIM" {
                    args[7] = b"<time>".to_vec();
                }
                dbs.last_mut().expect("a SELECT first").1.push(args);
            }
        }
    }
    for (_, commands) in &mut dbs {
        commands.sort();
    }
    (functions, dbs)
}

/// The files of the log's directory, and its manifest.
fn log_files(dir: &Dir) -> (Vec<String>, String) {
    let path = dir.path().join("appendonlydir");
    let mut names: Vec<String> = fs::read_dir(&path)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let manifest = fs::read_to_string(path.join("appendonly.aof.manifest")).unwrap();
    (names, manifest)
}

/// A log's bases as redis-server writes them: started on an empty dataset, the log
/// begins with an empty base (an RDB file, or with `aof-use-rdb-preamble no` a file of
/// commands) before its first record file; with `aof-use-rdb-preamble no`, a rewrite's
/// base is the commands redis-server writes (every type, two databases, a stream with
/// its group, consumers and pending entry, a library), named `.base.aof`, and
/// redis-server loads it to the same dataset. The files and manifests are
/// redis-server's, with one thread and with two.
#[test]
fn bases_are_written_as_redis_server_writes_them() {
    const LIBRARY: &[u8] =
        b"#!lua name=mylib\nredis.register_function('f1', function() return 1 end)";
    for preamble in ["yes", "no"] {
        let mut seen = Vec::new();
        for (kind, threads) in [("redis", ""), ("goblin", "1"), ("goblin", "2")] {
            let what = format!("{kind} {threads} preamble {preamble}");
            let dir = Dir::new("aof-bases");
            let mut args = vec![
                "--dir",
                dir.arg(),
                "--appendonly",
                "yes",
                "--aof-use-rdb-preamble",
                preamble,
                "--enable-debug-command",
                "yes",
            ];
            let server = match kind {
                "redis" => Server::redis_with(&args),
                _ => {
                    args.extend(["--threads", threads]);
                    Server::goblin_with(&args)
                }
            };
            let mut raw = server.raw();
            let started = log_files(&dir);
            for line in BASE_WRITES {
                ok(&mut raw, line);
            }
            assert!(!raw.cmd(&[b"FUNCTION", b"LOAD", LIBRARY]).starts_with(b"-"));
            ok(&mut raw, "BGREWRITEAOF");
            wait_rewrite(&mut raw);
            let rewritten = log_files(&dir);
            let digest = raw.cmd_str("DEBUG DIGEST");
            ok(&mut raw, "DEBUG LOADAOF");
            assert_eq!(raw.cmd_str("DEBUG DIGEST"), digest, "{what}");
            // The library comes back from the base (as in Redis's `AOF rewrite
            // functions`: the log off, so that what removes it is not logged).
            let mut calls = Vec::new();
            for line in [
                "CONFIG SET appendonly no",
                "FUNCTION DELETE mylib",
                "DEBUG LOADAOF",
                "FCALL f1 0",
                "FUNCTION FLUSH",
                "DEBUG LOADAOF",
                "FCALL f1 0",
            ] {
                calls.push(raw.cmd_str(line));
            }
            let base = rewritten
                .0
                .iter()
                .find(|name| name.contains(".base."))
                .unwrap_or_else(|| panic!("{what}: no base in {rewritten:?}"))
                .clone();
            let bytes = fs::read(dir.path().join("appendonlydir").join(&base)).unwrap();
            let commands = (preamble == "no").then(|| base_commands(&bytes));
            if preamble == "no" {
                // redis-server loads the base alone to the same dataset.
                let alone = Dir::new("aof-base-alone");
                let logs = alone.path().join("appendonlydir");
                fs::create_dir_all(&logs).unwrap();
                fs::write(logs.join(&base), &bytes).unwrap();
                fs::write(
                    logs.join("appendonly.aof.manifest"),
                    format!("file {base} seq 1 type b\n"),
                )
                .unwrap();
                let redis = Server::redis_with(&[
                    "--dir",
                    alone.arg(),
                    "--appendonly",
                    "yes",
                    "--enable-debug-command",
                    "yes",
                ]);
                assert_eq!(redis.raw().cmd_str("DEBUG DIGEST"), digest, "{what}");
            }
            seen.push((what, started, rewritten, base, commands, digest, calls));
        }
        let (redis, goblins) = seen.split_first().unwrap();
        for goblin in goblins {
            let what = &goblin.0;
            assert_eq!(goblin.1, redis.1, "{what}: the start's files");
            assert_eq!(goblin.2, redis.2, "{what}: the rewrite's files");
            assert_eq!(goblin.4, redis.4, "{what}: the base's commands");
            assert_eq!(goblin.5, redis.5, "{what}: the dataset");
            assert_eq!(goblin.6, redis.6, "{what}: the library after DEBUG LOADAOF");
        }
    }
}

/// The log's files once those no longer listed are gone (redis-server deletes them in
/// the background).
fn settled_files(dir: &Dir) -> (Vec<String>, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (names, manifest) = log_files(dir);
        let listed = names
            .iter()
            .all(|n| n.ends_with(".manifest") || manifest.contains(&format!("file {n} ")));
        if listed || Instant::now() > deadline {
            return (names, manifest);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the log's directory holds at the start and after each of `steps` (waiting for
/// any rewrite it starts), on redis-server, and Goblin with one thread and with two;
/// with the dataset's digest at the end, checked to come back the same after a restart
/// from the log.
type Run = (String, Vec<(Vec<String>, String)>, Vec<u8>);

/// Runs `steps` (see [`Run`]) and checks that every Goblin run has redis-server's
/// data, and its directory and manifest after every step.
fn same_log_as_redis(prefix: &str, steps: &[&str]) {
    let seen = log_runs(prefix, steps);
    let (redis, goblins) = seen.split_first().expect("redis first");
    for goblin in goblins {
        assert_eq!(goblin.2, redis.2, "{}: the data", goblin.0);
        for (i, (g, r)) in goblin.1.iter().zip(&redis.1).enumerate() {
            let after = if i == 0 { "start" } else { steps[i - 1] };
            assert_eq!(g, r, "{}: after {after}", goblin.0);
        }
    }
}

/// The [`Run`]s of `steps` on redis-server and Goblin (one thread, two), each server in
/// a directory of its own named after `prefix`.
fn log_runs(prefix: &str, steps: &[&str]) -> Vec<Run> {
    let mut seen = Vec::new();
    for (kind, threads) in [("redis", ""), ("goblin", "1"), ("goblin", "2")] {
        let what = format!("{kind} {threads}");
        let dir = Dir::new(prefix);
        let mut args = vec![
            "--dir",
            dir.arg(),
            "--appendonly",
            "yes",
            "--enable-debug-command",
            "yes",
        ];
        if kind == "goblin" {
            args.extend(["--threads", threads]);
        }
        let start = |args: &[&str]| match kind {
            "redis" => Server::redis_with(args),
            _ => Server::goblin_with(args),
        };
        let server = start(&args);
        let mut raw = server.raw();
        let mut files = vec![settled_files(&dir)];
        for step in steps {
            let reply = raw.cmd_str(step);
            assert!(!reply.starts_with(b"-"), "{what}: {step}: {}", show(&reply));
            wait_rewrite(&mut raw);
            files.push(settled_files(&dir));
        }
        let digest = raw.cmd_str("DEBUG DIGEST");
        drop(raw);
        drop(server);
        assert_eq!(
            start(&args).raw().cmd_str("DEBUG DIGEST"),
            digest,
            "{what}: restarted"
        );
        seen.push((what, files, digest));
    }
    seen
}

/// A base and the record files are numbered each on from their own last, and a
/// rewrite with the log off writes the base alone, as redis-server's: the files and
/// manifests after a rewrite, the log turned off, a rewrite then, DEBUG LOADAOF, the
/// log on again and another rewrite are redis-server's, with one thread and with two,
/// and the data comes back.
#[test]
fn log_files_are_numbered_as_redis_server_numbers_them() {
    let steps: &[&str] = &[
        "SET a 1",
        "BGREWRITEAOF",
        "SET b 2",
        "CONFIG SET appendonly no",
        "BGREWRITEAOF",
        "DEBUG LOADAOF",
        "CONFIG SET appendonly yes",
        "SET c 3",
        "BGREWRITEAOF",
        "SET d 4",
    ];
    same_log_as_redis("aof-numbers", steps);
}

/// `aof-disable-auto-gc yes`: a rewrite keeps the files it replaced, listed as history
/// (`type h`, newest first), not replayed; turned off, they are deleted and listed no
/// more — the files and manifests redis-server's, with one thread and with two; the data
/// is the same throughout, and after a restart.
#[test]
fn history_is_kept_without_auto_gc_as_redis_keeps_it() {
    let steps: &[&str] = &[
        "SET a 1",
        "CONFIG SET aof-disable-auto-gc yes",
        "BGREWRITEAOF",
        "SET b 2",
        "BGREWRITEAOF",
        "DEBUG LOADAOF",
        "CONFIG SET aof-disable-auto-gc no",
        "SET c 3",
    ];
    same_log_as_redis("aof-history", steps);
}
