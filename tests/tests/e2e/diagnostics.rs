//! LATENCY, MEMORY and DEBUG against the real binary, differentially against
//! redis-server where it defines the reply.

use std::time::Duration;

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::{Raw, Server};

fn both(args: &[&str]) -> Vec<Server> {
    vec![
        Server::goblin_with(&[&["--threads", "3"], args].concat()),
        Server::redis_with(args),
    ]
}

fn items(reply: &[u8]) -> Vec<Vec<u8>> {
    let Ok(Some((Frame::Array(items), _))) = parse_reply(reply) else {
        panic!("not an array: {}", String::from_utf8_lossy(reply));
    };
    items
        .iter()
        .map(|f| match f {
            Frame::Bulk(b) => b.to_vec(),
            Frame::Integer(n) => n.to_string().into_bytes(),
            other => format!("{other:?}").into_bytes(),
        })
        .collect()
}

/// DEBUG and MODULE LOAD, LOADEX and UNLOAD are refused before anything else is checked,
/// as redis-server refuses its protected commands: inside MULTI the refusal is not queued
/// and EXEC answers EXECABORT; before AUTH they answer the refusal, not NOAUTH.
#[test]
fn protected_commands_are_refused_before_they_are_queued_or_authenticated() {
    for args in [&[][..], &["--requirepass", "pw"][..]] {
        let mut d = goblin_tests::diff::Differential::with_servers(
            Server::goblin_with(&[&["--threads", "3"], args].concat()),
            Server::redis_with(args),
        );
        d.check_lines(
            "
            DEBUG SLEEP 0
            MODULE UNLOAD foo
            MODULE LOAD /x.so
            MODULE LIST
            AUTH pw
            MULTI
            SET k 1
            DEBUG SLEEP 0
            EXEC
            GET k
            MULTI
            MODULE LOADEX /x.so
            SET k 2
            EXEC
            GET k
            MULTI
            MODULE LIST
            SET k 3
            EXEC
            ",
        );
    }
}

/// DEBUG is refused unless `enable-debug-command` allows it, with redis-server's text;
/// allowed, SLEEP and SET-ACTIVE-EXPIRE act as in redis-server.
#[test]
fn debug_is_guarded_and_its_subcommands_act_as_in_redis() {
    for server in both(&[]) {
        let mut c = Raw::connect(server.port);
        let reply = c.cmd(&[b"DEBUG", b"SLEEP", b"0"]);
        assert!(
            reply.starts_with(b"-ERR DEBUG command not allowed. If the enable-debug-command"),
            "{:?}: {}",
            server.kind,
            String::from_utf8_lossy(&reply)
        );
    }
    let mut replies = Vec::new();
    for server in both(&["--enable-debug-command", "yes"]) {
        let kind = server.kind;
        let mut c = Raw::connect(server.port);
        let start = std::time::Instant::now();
        assert_eq!(c.cmd(&[b"DEBUG", b"SLEEP", b"0.2"]), b"+OK\r\n");
        assert!(start.elapsed() >= Duration::from_millis(200), "{kind:?}");
        assert_eq!(c.cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]), b"+OK\r\n");
        for key in ["a", "b", "c", "d"] {
            c.cmd(&[b"SET", key.as_bytes(), b"v", b"PX", b"20"]);
        }
        std::thread::sleep(Duration::from_millis(300));
        // Expired but not actively deleted: still counted.
        assert_eq!(c.cmd(&[b"DBSIZE"]), b":4\r\n", "{kind:?}");
        assert_eq!(c.cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"]), b"+OK\r\n");
        let mut size = Vec::new();
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(100));
            size = c.cmd(&[b"DBSIZE"]);
            if size == b":0\r\n" {
                break;
            }
        }
        assert_eq!(size, b":0\r\n", "{kind:?}");
        replies.push(c.cmd(&[b"DEBUG", b"NOPE"]));
    }
    assert_eq!(replies[0], replies[1]);
}

/// The latency monitor: off by default (DOCTOR says so in redis-server's words), then an
/// event at least as slow as the threshold is a sample — LATEST, HISTORY, RESET as
/// redis-server answers them.
#[test]
fn the_latency_monitor_records_slow_events() {
    let mut doctor = Vec::new();
    for server in both(&["--enable-debug-command", "yes"]) {
        let kind = server.kind;
        let mut c = Raw::connect(server.port);
        doctor.push(c.cmd(&[b"LATENCY", b"DOCTOR"]));
        assert_eq!(c.cmd(&[b"LATENCY", b"LATEST"]), b"*0\r\n");
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"latency-monitor-threshold", b"50"]),
            b"+OK\r\n"
        );
        doctor.push(c.cmd(&[b"LATENCY", b"DOCTOR"]));
        assert_eq!(c.cmd(&[b"DEBUG", b"SLEEP", b"0.1"]), b"+OK\r\n");
        let latest = c.cmd(&[b"LATENCY", b"LATEST"]);
        let Ok(Some((Frame::Array(events), _))) = parse_reply(&latest) else {
            panic!("{kind:?}: {}", String::from_utf8_lossy(&latest));
        };
        assert_eq!(events.len(), 1, "{kind:?}");
        let Frame::Array(event) = &events[0] else {
            panic!("{kind:?}");
        };
        assert_eq!(event[0], Frame::Bulk(b"command"), "{kind:?}");
        let ms = |f: &Frame<'_>| match f {
            Frame::Integer(n) => *n,
            _ => -1,
        };
        assert!((100..1000).contains(&ms(&event[2])), "{kind:?} {event:?}");
        assert!(ms(&event[3]) >= ms(&event[2]), "{kind:?}");
        let history = items(&c.cmd(&[b"LATENCY", b"HISTORY", b"command"]));
        assert_eq!(history.len(), 1, "{kind:?}");
        assert_eq!(c.cmd(&[b"LATENCY", b"HISTORY", b"nosuch"]), b"*0\r\n");
        assert_eq!(
            c.cmd(&[b"LATENCY", b"RESET", b"nosuch", b"command"]),
            b":1\r\n"
        );
        assert_eq!(c.cmd(&[b"LATENCY", b"LATEST"]), b"*0\r\n");
        assert_eq!(c.cmd(&[b"LATENCY", b"RESET"]), b":0\r\n");
        // EXEC is a sample of its own (though SLOWLOG skips it): 50,000 fast commands
        // take more than 5 ms together.
        c.cmd(&[b"CONFIG", b"SET", b"latency-monitor-threshold", b"5"]);
        let mut tx = Vec::new();
        tx.extend_from_slice(b"MULTI\r\n");
        for i in 0..50_000 {
            tx.extend_from_slice(format!("SET k{i} v\r\n").as_bytes());
        }
        tx.extend_from_slice(b"EXEC\r\n");
        c.send(&tx);
        let replies: Vec<Vec<u8>> = (0..50_002).map(|_| c.reply()).collect();
        assert!(replies[50_001].starts_with(b"*50000\r\n"), "{kind:?}");
        let latest = c.cmd(&[b"LATENCY", b"LATEST"]);
        let text = String::from_utf8_lossy(&latest);
        assert!(text.contains("\r\ncommand\r\n"), "{kind:?} {text}");
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"latency-monitor-threshold", b"-1"]),
            b"-ERR CONFIG SET failed (possibly related to argument 'latency-monitor-threshold') \
              - argument must be between 0 and 9223372036854775807 inclusive\r\n"
        );
    }
    // DOCTOR's texts when it has nothing to report, disabled and enabled.
    assert_eq!(doctor[0], doctor[2]);
    assert_eq!(doctor[1], doctor[3]);
}

/// MEMORY USAGE answers bytes for every type (more for a bigger value, nil for a missing
/// key) and checks SAMPLES as redis-server does; STATS counts the keys of every shard and
/// has the startup, clients' and scripts' figures; DOCTOR, PURGE and MALLOC-STATS answer.
#[test]
fn memory_usage_and_stats_answer() {
    let mut errors = Vec::new();
    for server in both(&[]) {
        let mut c = Raw::connect(server.port);
        for args in [
            &[&b"MEMORY"[..], b"USAGE", b"missing"][..],
            &[b"MEMORY", b"USAGE", b"k", b"SAMPLES"],
            &[b"MEMORY", b"USAGE", b"k", b"SAMPLES", b"x"],
            &[b"MEMORY", b"USAGE", b"k", b"SAMPLES", b"-1"],
            &[b"MEMORY", b"USAGE", b"k", b"foo", b"1"],
            &[b"MEMORY", b"PURGE"],
        ] {
            errors.push(c.cmd(args));
        }
    }
    let (g, r) = errors.split_at(errors.len() / 2);
    assert_eq!(g, r);

    let server = Server::goblin_threads(3);
    let mut c = Raw::connect(server.port);
    c.cmd(&[b"SET", b"small", b"v"]);
    c.cmd(&[b"SET", b"big", &[b'x'; 10_000]]);
    c.cmd(&[b"HSET", b"h", b"f", b"v", b"g", b"w"]);
    c.cmd(&[b"RPUSH", b"l", b"a", b"b"]);
    c.cmd(&[b"SADD", b"s", b"a", b"b"]);
    c.cmd(&[b"ZADD", b"z", b"1", b"a"]);
    let usage = |c: &mut Raw, key: &[u8]| -> i64 {
        let reply = c.cmd(&[b"MEMORY", b"USAGE", key, b"SAMPLES", b"0"]);
        String::from_utf8_lossy(&reply[1..reply.len() - 2])
            .parse()
            .unwrap_or(-1)
    };
    for key in [&b"small"[..], b"h", b"l", b"s", b"z"] {
        let n = usage(&mut c, key);
        assert!(
            (1..10_000).contains(&n),
            "{}: {n}",
            String::from_utf8_lossy(key)
        );
    }
    assert!(usage(&mut c, b"big") > 10_000);
    let stats = items(&c.cmd(&[b"MEMORY", b"STATS"]));
    // One whole reply, nothing after it: the next command's reply is its own.
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    assert!(
        stats.iter().any(|f| f == b"fragmentation.bytes"),
        "{stats:?}"
    );
    let field = |name: &str| {
        stats
            .iter()
            .position(|f| f == name.as_bytes())
            .and_then(|i| stats.get(i + 1))
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(field("keys.count").as_deref(), Some("6"));
    assert!(field("dataset.bytes").is_some_and(|b| b.parse::<u64>().is_ok_and(|n| n > 10_000)));
    // The figures INFO memory has: the memory in use at start, the clients' buffers
    // (measured once a second), the cached scripts' bodies.
    let number = |stats: &[Vec<u8>], name: &str| -> u64 {
        stats
            .iter()
            .position(|f| f == name.as_bytes())
            .and_then(|i| stats.get(i + 1))
            .and_then(|v| String::from_utf8_lossy(v).parse().ok())
            .unwrap_or_else(|| panic!("{name}: {stats:?}"))
    };
    let startup = number(&stats, "startup.allocated");
    assert!(
        startup > 0 && startup < number(&stats, "total.allocated"),
        "{stats:?}"
    );
    c.cmd(&[b"SCRIPT", b"LOAD", b"return 'a script of some length'"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        let stats = items(&c.cmd(&[b"MEMORY", b"STATS"]));
        if number(&stats, "clients.normal") > 0 {
            assert!(number(&stats, "lua.caches") > 0, "{stats:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{stats:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(c.cmd(&[b"MEMORY", b"DOCTOR"]).starts_with(b"$"));
    assert!(c.cmd(&[b"MEMORY", b"MALLOC-STATS"]).starts_with(b"$"));
}

/// Both servers with DEBUG allowed, goblin-server with `threads` threads.
fn debug_pair(threads: usize) -> goblin_tests::Differential {
    let t = threads.to_string();
    goblin_tests::Differential::with_servers(
        Server::goblin_with(&["--threads", &t, "--enable-debug-command", "yes"]),
        Server::redis_with(&["--enable-debug-command", "yes"]),
    )
}

/// DEBUG DIGEST and DIGEST-VALUE equal redis-server's for the same data — every type,
/// expiries, several databases, keys on every shard — and change with any change; the
/// other subcommands answer as redis-server's (PROTOCOL in RESP2 and RESP3, ERROR,
/// LOG, CHANGE-REPL-ID, HELP, OBJECT's errors, arity), with `--threads 1` and 4.
#[test]
fn debug_digests_and_subcommands_match_redis() {
    for threads in [1, 4] {
        let mut d = debug_pair(threads);
        d.check_lines(
            r#"
            DEBUG DIGEST
            DEBUG DIGEST-VALUE nokey
            DEBUG DIGEST-VALUE
            SET s1 hello
            SET s2 12
            SET s3 123456789012
            SET s4 x PX 100000
            RPUSH l1 a b c 1 2 3
            SADD set1 a b c
            SADD set2 1 2 3
            ZADD z1 1 a 2.5 b -3e10 c
            HSET h1 f v g w
            XADD x1 1-1 a b c d
            XADD x1 2-1 a e c f
            DEBUG DIGEST
            DEBUG DIGEST-VALUE s1 s2 s3 s4 l1 set1 set2 z1 h1 x1 nokey
            SELECT 5
            SET s1 hello
            DEBUG DIGEST
            DEBUG DIGEST-VALUE s1
            SELECT 0
            RPUSH l1 x
            DEBUG DIGEST
            PERSIST s4
            DEBUG DIGEST
            DEBUG DIGEST-VALUE s4
            DEBUG PROTOCOL string
            DEBUG PROTOCOL integer
            DEBUG PROTOCOL double
            DEBUG PROTOCOL bignum
            DEBUG PROTOCOL null
            DEBUG PROTOCOL array
            DEBUG PROTOCOL set
            DEBUG PROTOCOL map
            DEBUG PROTOCOL attrib
            DEBUG PROTOCOL push
            DEBUG PROTOCOL verbatim
            DEBUG PROTOCOL TRUE
            DEBUG PROTOCOL false
            DEBUG PROTOCOL nope
            DEBUG ERROR "oops here"
            DEBUG ERROR "-WRONG x"
            DEBUG ERROR ""
            DEBUG LOG hello
            DEBUG CHANGE-REPL-ID
            DEBUG QUICKLIST-PACKED-THRESHOLD 100
            DEBUG OBJECT nokey
            DEBUG OBJECT
            DEBUG SLEEP
            DEBUG RELOAD FOO
            DEBUG NOPE
            DEBUG
            DEBUG HELP x
            "#,
        );
        d.g.cmd_str("HELLO 3");
        d.r.cmd_str("HELLO 3");
        d.check_lines(
            "DEBUG PROTOCOL double\nDEBUG PROTOCOL bignum\nDEBUG PROTOCOL null\n\
             DEBUG PROTOCOL set\nDEBUG PROTOCOL map\n\
             DEBUG PROTOCOL verbatim\nDEBUG PROTOCOL true",
        );
        d.g.cmd_str("HELLO 2");
        d.r.cmd_str("HELLO 2");
        // The help lists what Goblin has, in redis-server's words.
        let help = items(&d.g.cmd_str("DEBUG HELP"));
        let theirs = items(&d.r.cmd_str("DEBUG HELP"));
        assert!(help.iter().all(|l| theirs.contains(l)), "{help:?}");
    }
}

/// DEBUG POPULATE makes the keys redis-server makes — names, values, sizes, in the
/// connection's database, keys that exist left alone — on every shard (the digest of
/// the whole dataset equals redis-server's), and refuses what it refuses.
#[test]
fn debug_populate_makes_the_keys_redis_makes() {
    for threads in [1, 4] {
        let mut d = debug_pair(threads);
        d.check_lines(
            r#"
            SET key:3 mine
            DEBUG POPULATE 1000
            DBSIZE
            GET key:3
            GET key:999
            GET key:1000
            DEBUG POPULATE 10 p 3
            GET p:7
            DEBUG POPULATE 10 q 12
            GET q:7
            STRLEN q:7
            SELECT 3
            DEBUG POPULATE 0
            DBSIZE
            "#,
        );
        // A prefix with a space, and one with a NUL byte (C's string ends there).
        d.check(&[b"DEBUG", b"POPULATE", b"5", b"with space"]);
        d.check(&[b"GET", b"with space:4"]);
        d.check(&[b"DEBUG", b"POPULATE", b"2", b"nul\0tail", b"20"]);
        d.check(&[b"GET", b"nul:1"]);
        d.check_lines(
            r#"
            DBSIZE
            SELECT 0
            DEBUG DIGEST
            DEBUG POPULATE 1 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
            KEYS xxx*
            DEBUG POPULATE -1
            DEBUG POPULATE abc
            DEBUG POPULATE 1 key -5
            DEBUG POPULATE 1 key 5x
            DEBUG POPULATE
            DEBUG POPULATE 1 a 1 extra
            DEBUG DIGEST
            "#,
        );
    }
}

/// DEBUG POPULATE with a count whose table could not be made (redis-server answers
/// `OOM in dictTryExpand` where its allocation fails, or dies): refused at once, and the
/// server goes on (it worked at it for ever, every shard locked).
#[test]
fn debug_populate_refuses_a_count_past_the_machines_memory() {
    let server = Server::goblin_with(&["--threads", "2", "--enable-debug-command", "yes"]);
    let mut c = server.raw();
    for count in ["100000000000", "9223372036854775807"] {
        assert_eq!(
            c.cmd(&[b"DEBUG", b"POPULATE", count.as_bytes()]),
            b"-ERR OOM in dictTryExpand\r\n"
        );
    }
    assert_eq!(c.cmd_str("DBSIZE"), b":0\r\n");
}

/// DEBUG OBJECT's line: the fields redis-server shows, with the same encoding,
/// refcount and list fields.
#[test]
fn debug_object_shows_what_redis_shows() {
    let mut d = debug_pair(2);
    for line in ["SET n 12", "SET s hello", "RPUSH l a b c", "SADD set a b"] {
        d.check_str(line);
    }
    let fields = |reply: Vec<u8>| -> Vec<(String, String)> {
        let text = String::from_utf8(reply).unwrap();
        let text = text.strip_prefix("+Value ").unwrap().trim_end();
        text.split(' ')
            .map(|f| {
                let (k, v) = f.split_once(':').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    for key in ["n", "s", "l", "set"] {
        let (g, r) = (
            fields(d.g.cmd_str(&format!("DEBUG OBJECT {key}"))),
            fields(d.r.cmd_str(&format!("DEBUG OBJECT {key}"))),
        );
        let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(names(&g), names(&r), "{key}");
        for (name, value) in &g {
            let theirs = &r.iter().find(|(k, _)| k == name).unwrap().1;
            match name.as_str() {
                "refcount" | "encoding" | "ql_nodes" | "ql_avg_node" | "ql_listpack_max"
                | "ql_compressed" => assert_eq!(value, theirs, "{key} {name}"),
                "lru_seconds_idle" => assert!(value.parse::<u64>().unwrap() < 5),
                "lru" => {
                    let (a, b): (i64, i64) = (value.parse().unwrap(), theirs.parse().unwrap());
                    assert!((a - b).abs() < 5, "{key} lru {a} {b}");
                }
                _ => assert!(!value.is_empty()),
            }
        }
    }
}

/// DEBUG RELOAD saves, empties and loads the dataset back (the digest is unchanged,
/// keys on every shard and database, expiries kept); NOSAVE loads the file as it is
/// (a key written since is gone); NOSAVE NOFLUSH MERGE adds the file to what is there;
/// a missing file is an error. Then DEBUG SLEEP holds other clients' commands on keys.
#[test]
fn debug_reload_round_trips_the_dataset() {
    let dir = tempfile_dir("debug-reload");
    let server = Server::goblin_with(&[
        "--threads",
        "4",
        "--enable-debug-command",
        "yes",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let mut c = Raw::connect(server.port);
    for i in 0..200 {
        c.cmd_str(&format!("SET k{i} v{i}"));
        c.cmd_str(&format!("RPUSH l{i} a b {i}"));
    }
    c.cmd_str("SET e v EX 1000");
    c.cmd_str("SELECT 2");
    c.cmd_str("HSET h f v");
    c.cmd_str("SELECT 0");
    let digest = c.cmd_str("DEBUG DIGEST");
    assert_eq!(digest.len(), 43, "{}", String::from_utf8_lossy(&digest));
    assert_eq!(c.cmd_str("DEBUG RELOAD"), b"+OK\r\n");
    assert_eq!(c.cmd_str("DEBUG DIGEST"), digest);
    assert_eq!(c.cmd_str("DBSIZE"), b":401\r\n");
    let ttl = String::from_utf8(c.cmd_str("TTL e")).unwrap();
    let ttl: i64 = ttl.trim_start_matches(':').trim_end().parse().unwrap();
    assert!((990..=1000).contains(&ttl), "{ttl}");
    c.cmd_str("SET later 1");
    assert_eq!(c.cmd_str("DEBUG RELOAD NOSAVE"), b"+OK\r\n");
    assert_eq!(c.cmd_str("EXISTS later"), b":0\r\n");
    assert_eq!(c.cmd_str("DEBUG DIGEST"), digest);
    c.cmd_str("SET later 1");
    c.cmd_str("DEL k0");
    assert_eq!(c.cmd_str("DEBUG RELOAD NOSAVE NOFLUSH MERGE"), b"+OK\r\n");
    assert_eq!(c.cmd_str("EXISTS later k0"), b":2\r\n");
    std::fs::remove_file(dir.join("dump.rdb")).unwrap();
    assert_eq!(
        c.cmd_str("DEBUG RELOAD NOSAVE"),
        b"-ERR Error trying to load the RDB dump\r\n"
    );
    // DEBUG SLEEP stops commands on keys (every shard) while it sleeps.
    let port = server.port;
    let sleeper = std::thread::spawn(move || {
        let mut s = Raw::connect(port);
        s.cmd_str("DEBUG SLEEP 0.5")
    });
    std::thread::sleep(Duration::from_millis(100));
    let start = std::time::Instant::now();
    c.cmd_str("SET k1 x");
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(sleeper.join().unwrap(), b"+OK\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory under the system's temporary one.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("goblin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// LATENCY GRAPH draws an event's samples as redis-server does (the same header, rule,
/// sparkline and labels for the same latencies); an event without samples is an error.
/// CONFIG HELP and LATENCY HELP are redis-server's lines.
#[test]
fn latency_graph_and_helps_match_redis() {
    let mut graphs = Vec::new();
    let mut helps = Vec::new();
    for server in both(&["--enable-debug-command", "yes"]) {
        let mut c = Raw::connect(server.port);
        c.cmd(&[b"CONFIG", b"SET", b"latency-monitor-threshold", b"50"]);
        c.cmd(&[b"DEBUG", b"SLEEP", b"0.1"]);
        // One sample per second: the next lands in a second of its own.
        std::thread::sleep(Duration::from_millis(1100));
        c.cmd(&[b"DEBUG", b"SLEEP", b"0.3"]);
        let graph = String::from_utf8(c.cmd(&[b"LATENCY", b"GRAPH", b"command"])).unwrap();
        // The latencies, to the millisecond, may differ by the server's own overhead, and
        // the labels (seconds ago) by when each server was asked: the rule and the rows.
        let shape: String = graph
            .lines()
            .skip(2)
            .take(6)
            .map(|l| l.to_string() + "\n")
            .collect();
        // (Past the bulk's length, the header, the rule, four rows and a blank line.)
        let labels = graph
            .lines()
            .skip(8)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>();
        assert_eq!(labels.len(), 2, "{graph}");
        assert!(labels[1].chars().all(|c| c == 's'), "{graph}");
        assert!(graph.contains("command - high 3"), "{graph}");
        graphs.push(shape);
        helps.push((
            c.cmd(&[b"LATENCY", b"GRAPH", b"nope"]),
            c.cmd(&[b"LATENCY", b"HELP"]),
            c.cmd(&[b"CONFIG", b"HELP"]),
        ));
    }
    assert_eq!(graphs[0], graphs[1]);
    let (g, r) = (&helps[0], &helps[1]);
    assert_eq!(g.0, r.0);
    assert_eq!(g.2, r.2);
    // Goblin's LATENCY HELP is redis-server's less HISTOGRAM.
    let lines = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .filter(|l| !l.starts_with('*'))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let theirs = lines(&r.1);
    assert!(lines(&g.1).iter().all(|l| theirs.contains(l)));
}

/// A crash is reported in the log as redis-server reports one — `crashed by signal`, the
/// sender, the stack trace between the bug report's START and END lines — and the
/// process dies of the signal: on SIGABRT from outside, DEBUG SEGFAULT and DEBUG PANIC
/// (after its Guru Meditation); with `crash-log-enabled no`, no report. The same lines
/// on both servers.
#[test]
fn crash_reports_are_logged_as_redis_does() {
    use std::os::unix::process::ExitStatusExt;
    for (how, signal) in [
        ("SIGABRT", 6),
        ("SEGFAULT", 11),
        ("PANIC", 6),
        ("no log", 6),
    ] {
        for kind in ["goblin", "redis"] {
            let what = format!("{kind} {how}");
            let dir = goblin_tests::scratch_dir("crash-report");
            let log = dir.join("server.log");
            let mut args = vec![
                "--logfile".to_string(),
                log.display().to_string(),
                "--enable-debug-command".to_string(),
                "yes".to_string(),
                "--crash-memcheck-enabled".to_string(),
                "no".to_string(),
            ];
            if how == "no log" {
                args.extend(["--crash-log-enabled".to_string(), "no".to_string()]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut server = match kind {
                "goblin" => Server::goblin_with(&args),
                _ => Server::redis_with(&args),
            };
            match how {
                "SEGFAULT" | "PANIC" => {
                    let mut raw = server.raw();
                    raw.send(format!("DEBUG {how}\r\n").as_bytes());
                }
                _ => server.signal("ABRT"),
            }
            let status = server
                .wait_exit(Duration::from_secs(20))
                .unwrap_or_else(|| panic!("{what}: still running"));
            assert_eq!(status.signal(), Some(signal), "{what}: {status:?}");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let reported = [
                "=== REDIS BUG REPORT START: Cut & paste starting from here ===".to_string(),
                format!("crashed by signal: {signal}, si_code:"),
                "------ STACK TRACE ------".to_string(),
                "=== REDIS BUG REPORT END. Make sure to include from START to END. ===".to_string(),
            ];
            for line in &reported {
                // (A panic's report has its Guru Meditation in place of the signal.)
                let expected = how != "no log" && !(how == "PANIC" && line.contains("crashed"));
                assert_eq!(
                    text.contains(line.as_str()),
                    expected,
                    "{what}: {line}\n{text}"
                );
            }
            if how == "SIGABRT" {
                assert!(text.contains("Killed by PID: "), "{what}: {text}");
            }
            if how == "PANIC" {
                for line in [
                    "# !!! Software Failure. Press left mouse button to continue",
                    "# Guru Meditation: DEBUG PANIC called at Unix time ",
                ] {
                    assert!(text.contains(line), "{what}: {line}\n{text}");
                }
            }
            drop(server);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// DEBUG SLEEP stops the whole server, as redis-server's one thread: a client on any
/// worker asking anything meanwhile (PING, SELECT, a key) is answered only once the
/// sleep is over.
#[test]
fn debug_sleep_stops_every_client_as_redis_does() {
    for server in both(&["--enable-debug-command", "yes"]) {
        let mut sleeper = server.raw();
        // (Connections go to the workers in turn: one on each, and more.)
        let mut others: Vec<Raw> = (0..4).map(|_| server.raw()).collect();
        let start = std::time::Instant::now();
        sleeper.send(b"DEBUG SLEEP 0.5\r\n");
        std::thread::sleep(Duration::from_millis(50));
        for (i, other) in others.iter_mut().enumerate() {
            let ask: &[&[u8]] = match i % 3 {
                0 => &[b"PING"],
                1 => &[b"SELECT", b"1"],
                _ => &[b"GET", b"k"],
            };
            let reply = other.cmd(ask);
            assert!(!reply.starts_with(b"-"), "{}", goblin_tests::show(&reply));
            let waited = start.elapsed();
            assert!(
                waited >= Duration::from_millis(450),
                "client {i} answered {waited:?} into the sleep"
            );
        }
        assert_eq!(sleeper.reply(), b"+OK\r\n");
    }
}
