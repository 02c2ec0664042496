//! SLOWLOG (entries, trimming, client name and address, LEN, RESET, the maximum length),
//! ACL WHOAMI, CLIENT NO-EVICT, INFO errorstats, the log's format and levels; errors
//! differentially against redis-server.

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::diff::script;
use goblin_tests::{Differential, Server};

fn frame(bytes: &[u8]) -> Frame<'_> {
    parse_reply(bytes)
        .ok()
        .flatten()
        .map(|(f, _)| f)
        .unwrap_or_else(|| panic!("not a reply: {bytes:?}"))
}

fn items<'b, 'a>(f: &'b Frame<'a>) -> &'b [Frame<'a>] {
    match f {
        Frame::Array(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

fn bulk(f: &Frame<'_>) -> Vec<u8> {
    match f {
        Frame::Bulk(b) => b.to_vec(),
        other => panic!("not a bulk: {other:?}"),
    }
}

fn int(f: &Frame<'_>) -> i64 {
    match f {
        Frame::Integer(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

#[test]
fn slow_commands_are_logged_with_their_client_and_trimmed_as_redis_trims_them() {
    for threads in [1, 3] {
        let server = Server::goblin_threads(threads);
        let mut raw = server.raw();
        assert_eq!(
            raw.cmd_str("CONFIG SET slowlog-log-slower-than 0"),
            b"+OK\r\n"
        );
        assert_eq!(raw.cmd_str("SLOWLOG RESET"), b"+OK\r\n");
        assert_eq!(raw.cmd_str("CLIENT SETNAME slow-one"), b"+OK\r\n");
        let long = vec![b'a'; 200];
        let mut many: Vec<Vec<u8>> = vec![b"SADD".to_vec(), b"set-key".to_vec()];
        many.extend((0..40).map(|i| format!("m{i}").into_bytes()));
        // Keys on the connection's shard and on others.
        for key in ["k1", "k2", "k3", "k4"] {
            raw.cmd(&[b"LRANGE", key.as_bytes(), b"0", b"-1"]);
        }
        raw.cmd(&[b"SMEMBERS", &long]);
        let argv: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
        raw.cmd(&argv);
        raw.cmd(&[b"SMEMBERS", b"set-key"]);
        let reply = raw.cmd_str("SLOWLOG GET -1");
        let log = frame(&reply);
        let entries = items(&log);
        let addr = {
            let info = String::from_utf8_lossy(&raw.cmd_str("CLIENT INFO")).into_owned();
            info.split(' ')
                .find_map(|f| f.strip_prefix("addr="))
                .unwrap()
                .to_string()
        };
        let commands: Vec<Vec<Vec<u8>>> = entries
            .iter()
            .map(|e| items(&items(e)[3]).iter().map(bulk).collect())
            .collect();
        // Newest first.
        assert_eq!(
            commands[0],
            [b"SMEMBERS".to_vec(), b"set-key".to_vec()],
            "{commands:?}"
        );
        // At threshold 0 every command is timed, `fast` ones too.
        let smembers_long = commands
            .iter()
            .find(|c| c[0] == b"SMEMBERS" && c[1].starts_with(b"aaa"))
            .expect("the SMEMBERS of a long key");
        let mut trimmed = vec![b'a'; 128];
        trimmed.extend_from_slice(b"... (72 more bytes)");
        assert_eq!(smembers_long[1], trimmed);
        let lranges = commands.iter().filter(|c| c[0] == b"LRANGE").count();
        assert_eq!(lranges, 4, "--threads {threads}: {commands:?}");
        for e in entries {
            let e = items(e);
            assert_eq!(e.len(), 6);
            assert!(int(&e[1]) > 1_700_000_000);
            assert!(int(&e[2]) >= 0);
            assert_eq!(bulk(&e[4]), addr.as_bytes(), "--threads {threads}");
            // The name as it was once the command ran: SLOWLOG RESET came before it.
            let reset = bulk(&items(&e[3])[0]) == b"SLOWLOG";
            let name: &[u8] = if reset { b"" } else { b"slow-one" };
            assert_eq!(bulk(&e[5]), name, "{:?}", items(&e[3]));
        }
        let ids: Vec<i64> = entries.iter().map(|e| int(&items(e)[0])).collect();
        assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
        // Every command is logged once it ran, as in redis-server: SLOWLOG GET and
        // CLIENT INFO since.
        let reply = raw.cmd_str("SLOWLOG LEN");
        let n = int(&frame(&reply));
        assert_eq!(n as usize, entries.len() + 2);
        let reply = raw.cmd_str("SLOWLOG GET 1");
        assert_eq!(items(&frame(&reply)).len(), 1);
        let reply = raw.cmd_str("SLOWLOG GET");
        assert_eq!(items(&frame(&reply)).len(), 10);
        // A shorter maximum keeps the newest.
        assert_eq!(raw.cmd_str("CONFIG SET slowlog-max-len 2"), b"+OK\r\n");
        assert_eq!(raw.cmd_str("SLOWLOG LEN"), b":2\r\n");
        // SLOWLOG RESET is logged once it ran (as in redis-server).
        assert_eq!(raw.cmd_str("SLOWLOG RESET"), b"+OK\r\n");
        assert_eq!(raw.cmd_str("SLOWLOG LEN"), b":1\r\n");
        // Off: nothing is logged.
        assert_eq!(
            raw.cmd_str("CONFIG SET slowlog-log-slower-than -1"),
            b"+OK\r\n"
        );
        raw.cmd_str("KEYS *");
        assert_eq!(raw.cmd_str("SLOWLOG LEN"), b":2\r\n");
        // A command with more than 32 arguments keeps 31 and says how many more.
        assert_eq!(
            raw.cmd_str("CONFIG SET slowlog-log-slower-than 0"),
            b"+OK\r\n"
        );
        assert_eq!(raw.cmd_str("CONFIG SET slowlog-max-len 10"), b"+OK\r\n");
        let mut mget: Vec<Vec<u8>> = vec![b"SUNION".to_vec()];
        mget.extend((0..40).map(|_| b"{t}x".to_vec()));
        let argv: Vec<&[u8]> = mget.iter().map(Vec::as_slice).collect();
        raw.cmd(&argv);
        let reply = raw.cmd_str("SLOWLOG GET 1");
        let log = frame(&reply);
        let logged: Vec<Vec<u8>> = items(&items(&items(&log)[0])[3]).iter().map(bulk).collect();
        assert_eq!(logged.len(), 32);
        assert_eq!(logged[31], b"... (10 more arguments)");
    }
}

/// What one connection's commands leave in SLOWLOG at threshold 0: each entry's
/// arguments and who sent it (`me` for the connection, else the address as logged) with
/// its name, newest first.
fn slowlog_of(server: &Server) -> Vec<(Vec<String>, String, String)> {
    let mut raw = server.raw();
    let lines = [
        "CONFIG SET slowlog-log-slower-than 0",
        "CONFIG SET slowlog-max-len 128",
        "SLOWLOG RESET",
        "CLIENT SETNAME cmp",
        // Keys on several shards: plans, as keyspace-wide commands are.
        "MSET a 1 b 2 c 3 d 4 e 5 f 6",
        "DBSIZE",
        "KEYS nothing*",
        "MGET a b c d",
        "DEL a b",
        // `fast` commands, and one that fails as it runs.
        "INCR n",
        "SADD s x",
        "GETSET c 5",
        "SPOP s",
        "GET s",
        "INCR c",
        // Refused before running: not an entry.
        "SET",
        "NOPE",
        // EXEC is no entry; the commands it runs are, a cross-shard one too.
        "MULTI",
        "SET x 1",
        "INCR x",
        "MSET p 1 q 2 r 3 t 4",
        "PING",
        "EXEC",
        "WATCH x",
        "UNWATCH",
        "MULTI",
        "DISCARD",
        // A blocking command that times out is no entry; served at once, it is.
        "BLPOP nolist 0.01",
        "RPUSH l1 a",
        "BLPOP l1 1",
        "CLIENT ID",
        "FLUSHALL",
    ];
    for line in lines {
        raw.cmd_str(line);
    }
    // A script's commands are entries of the script's client.
    raw.cmd(&[
        b"EVAL",
        b"redis.call('set', KEYS[1], 'v') return 1",
        b"1",
        b"k",
    ]);
    let info = String::from_utf8_lossy(&raw.cmd_str("CLIENT INFO")).into_owned();
    let me = info
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    let reply = raw.cmd_str("SLOWLOG GET -1");
    let log = frame(&reply);
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    items(&log)
        .iter()
        .map(|e| {
            let e = items(e);
            let argv = items(&e[3]).iter().map(|a| text(bulk(a))).collect();
            let addr = text(bulk(&e[4]));
            let who = if addr == me { "me".to_string() } else { addr };
            (argv, who, text(bulk(&e[5])))
        })
        .collect()
}

/// The commands SLOWLOG records, and whose they are, are redis-server's: plans
/// (keyspace-wide and cross-shard commands), EXEC's commands one by one, a script's
/// commands, blocking commands once served, `fast` commands at a low threshold.
#[test]
fn slowlog_records_the_commands_redis_records() {
    let want = slowlog_of(&Server::redis());
    // Sanity: the oracle logged what this test is about.
    for needle in ["FLUSHALL", "DBSIZE", "INCR", "BLPOP", "set", "MULTI"] {
        assert!(
            want.iter().any(|(argv, _, _)| argv[0] == needle),
            "{want:?}"
        );
    }
    for threads in [1, 3] {
        let got = slowlog_of(&Server::goblin_threads(threads));
        assert_eq!(got, want, "--threads {threads}");
    }
}

/// A blocking command is an entry once served, not while it waits.
#[test]
fn slowlog_records_a_blocked_command_once_served() {
    for server in [Server::redis(), Server::goblin_threads(3)] {
        let mut raw = server.raw();
        raw.cmd_str("CONFIG SET slowlog-log-slower-than 0");
        let mut waiter = server.raw();
        waiter.send(&goblin_tests::encode(&[b"BLPOP", b"wl", b"0"]));
        let blpops = |raw: &mut goblin_tests::Raw| {
            let reply = raw.cmd_str("SLOWLOG GET -1");
            let log = frame(&reply);
            items(&log)
                .iter()
                .filter(|e| bulk(&items(&items(e)[3])[0]) == b"BLPOP")
                .count()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !String::from_utf8_lossy(&raw.cmd_str("INFO clients")).contains("blocked_clients:1") {
            assert!(std::time::Instant::now() < deadline, "BLPOP never blocked");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(blpops(&mut raw), 0);
        raw.cmd_str("RPUSH wl x");
        waiter.reply();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while blpops(&mut raw) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the served BLPOP is no entry"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(blpops(&mut raw), 1);
    }
}

#[test]
fn slowlog_acl_and_client_errors_match_redis() {
    let mut d = Differential::new();
    script(
        &mut d,
        &[],
        "",
        "
        SLOWLOG GET -2
        SLOWLOG GET x
        SLOWLOG GET 1 2
        SLOWLOG LEN x
        SLOWLOG NOPE
        SLOWLOG HELP
        CONFIG SET slowlog-log-slower-than -2
        CONFIG SET slowlog-max-len -1
        %CONFIG GET slowlog-*
        ACL WHOAMI
        ACL WHOAMI x
        CLIENT NO-EVICT on
        CLIENT NO-EVICT OFF
        CLIENT NO-EVICT maybe
        ",
    );
}

/// INFO errorstats counts error replies by code as redis-server does: commands that
/// failed on a shard, commands refused before running, connection commands.
#[test]
fn error_counts_match_redis() {
    let mut d = Differential::new();
    script(
        &mut d,
        &[],
        "",
        "
        CONFIG RESETSTAT
        SET s v
        LPUSH s x
        NOPE
        GET
        CONFIG SET maxmemory-policy x
        INCR s
        HGET s f
        CLIENT NOPE
        INFO errorstats
        CONFIG RESETSTAT
        INFO errorstats
        ",
    );
}

/// The log: redis-server's line format, in `logfile`, filtered by `loglevel`.
#[test]
fn the_log_has_redis_lines_and_levels() {
    let dir = goblin_tests::scratch_dir("logfile");
    let file = dir.join("goblin.log");
    let path = file.to_str().unwrap().to_string();
    let mut server = Server::goblin_with(&["--logfile", &path]);
    let mut raw = server.raw();
    assert_eq!(raw.cmd_str("CONFIG GET logfile"), {
        let mut want = format!("*2\r\n$7\r\nlogfile\r\n${}\r\n", path.len()).into_bytes();
        want.extend_from_slice(path.as_bytes());
        want.extend_from_slice(b"\r\n");
        want
    });
    assert_eq!(raw.cmd_str("SAVE"), b"+OK\r\n");
    assert_eq!(raw.cmd_str("CONFIG SET loglevel warning"), b"+OK\r\n");
    assert_eq!(raw.cmd_str("SAVE"), b"+OK\r\n");
    server.kill();
    let log = std::fs::read_to_string(&file).unwrap();
    let line = regex_like_line(log.lines().next().unwrap());
    assert!(line, "{log}");
    assert!(log.contains(" * Ready to accept connections tcp"), "{log}");
    assert_eq!(
        log.matches("DB saved on disk").count(),
        1,
        "the second save's notice is below `warning`: {log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pid:M dd Mon yyyy hh:mm:ss.mmm * text`
fn regex_like_line(line: &str) -> bool {
    let mut parts = line.splitn(2, ":M ");
    let pid = parts.next().unwrap_or("");
    let rest = parts.next().unwrap_or("");
    let words: Vec<&str> = rest.splitn(6, ' ').collect();
    pid.chars().all(|c| c.is_ascii_digit())
        && words.len() == 6
        && words[0].len() == 2
        && words[1].len() == 3
        && words[2].len() == 4
        && words[3].len() == 12
        && ["*", "#", "-", "."].contains(&words[4])
}

#[test]
fn loglevel_is_set_and_refused_as_redis_does() {
    let mut d = Differential::new();
    script(
        &mut d,
        &[],
        "",
        "
        CONFIG SET loglevel verbose
        CONFIG GET loglevel
        CONFIG SET loglevel loud
        CONFIG SET logfile /tmp/elsewhere
        CONFIG SET loglevel notice
        ",
    );
}

/// A field of an INFO reply.
fn info_field(raw: &mut goblin_tests::Raw, section: &str, name: &str) -> String {
    let info = String::from_utf8_lossy(&raw.cmd_str(&format!("INFO {section}"))).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim()
        .to_string()
}

/// INFO stats counts what redis-server counts: keys that expired (lazily or actively),
/// connections refused by `maxclients`, bytes in and out; CONFIG RESETSTAT zeroes them.
#[test]
fn info_stats_count_expiries_refusals_and_traffic_as_redis_does() {
    for server in [Server::goblin_threads(3), Server::redis()] {
        let kind = server.kind;
        let mut raw = server.raw();
        for i in 0..10 {
            raw.cmd_str(&format!("SET e{i} v PX 20"));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        for i in 0..10 {
            assert_eq!(raw.cmd_str(&format!("GET e{i}")), b"$-1\r\n");
        }
        assert_eq!(
            info_field(&mut raw, "stats", "expired_keys"),
            "10",
            "{kind:?}"
        );
        assert_eq!(raw.cmd_str("CONFIG SET maxclients 2"), b"+OK\r\n");
        let _second = server.raw();
        let mut third = goblin_tests::Raw::connect(server.port);
        let (refused, _) = third.read_to_close(std::time::Duration::from_secs(2));
        assert_eq!(
            refused, b"-ERR max number of clients reached\r\n",
            "{kind:?}"
        );
        assert_eq!(
            info_field(&mut raw, "stats", "rejected_connections"),
            "1",
            "{kind:?}"
        );
        let input: u64 = info_field(&mut raw, "stats", "total_net_input_bytes")
            .parse()
            .unwrap_or(0);
        let output: u64 = info_field(&mut raw, "stats", "total_net_output_bytes")
            .parse()
            .unwrap_or(0);
        assert!(input > 200 && output > 100, "{kind:?}: {input} {output}");
        info_field(&mut raw, "stats", "instantaneous_ops_per_sec");
        assert_eq!(raw.cmd_str("CONFIG RESETSTAT"), b"+OK\r\n");
        assert_eq!(
            info_field(&mut raw, "stats", "expired_keys"),
            "0",
            "{kind:?}"
        );
        assert_eq!(
            info_field(&mut raw, "stats", "rejected_connections"),
            "0",
            "{kind:?}"
        );
    }
}

/// INFO stats counts as redis-server does: socket reads and writes (one each at least per command sent alone), the time memory
/// has been over `maxmemory` (growing while it is, then added to the total once it is
/// not), the active expiry's CPU time; CONFIG RESETSTAT zeroes them.
#[test]
fn info_stats_counts_reads_writes_and_time_over_maxmemory_as_redis_does() {
    let number = |raw: &mut goblin_tests::Raw, name: &str| -> u64 {
        info_field(raw, "stats", name).parse().unwrap()
    };
    for server in [Server::goblin_threads(2), Server::redis()] {
        let kind = server.kind;
        let mut raw = server.raw();
        let (reads, writes) = (
            number(&mut raw, "total_reads_processed"),
            number(&mut raw, "total_writes_processed"),
        );
        for _ in 0..10 {
            assert_eq!(raw.cmd_str("PING"), b"+PONG\r\n");
        }
        assert!(
            number(&mut raw, "total_reads_processed") >= reads + 10,
            "{kind:?}"
        );
        assert!(
            number(&mut raw, "total_writes_processed") >= writes + 10,
            "{kind:?}"
        );
        // Over `maxmemory` (refused writes, nothing to evict) for a while.
        let value = "x".repeat(10_000);
        for i in 0..100 {
            raw.cmd(&[b"SET", format!("k{i}").as_bytes(), value.as_bytes()]);
        }
        let used = number_in(&mut raw, "memory", "used_memory");
        raw.cmd_str(&format!("CONFIG SET maxmemory {}", used - 500_000));
        assert!(raw.cmd_str("SET more v").starts_with(b"-OOM"), "{kind:?}");
        std::thread::sleep(std::time::Duration::from_millis(400));
        raw.cmd_str("PING");
        let now = number(&mut raw, "current_eviction_exceeded_time");
        assert!(now >= 300, "{kind:?}: {now}");
        assert!(
            number(&mut raw, "total_eviction_exceeded_time") >= now,
            "{kind:?}"
        );
        raw.cmd_str("FLUSHALL");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while number(&mut raw, "current_eviction_exceeded_time") != 0 {
            assert!(std::time::Instant::now() < deadline, "{kind:?}: still over");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            number(&mut raw, "total_eviction_exceeded_time") >= 300,
            "{kind:?}"
        );
        raw.cmd_str("CONFIG SET maxmemory 0");
        number(&mut raw, "expire_cycle_cpu_milliseconds");
        number(&mut raw, "expired_time_cap_reached_count");
        assert_eq!(raw.cmd_str("CONFIG RESETSTAT"), b"+OK\r\n");
        assert_eq!(
            number(&mut raw, "total_eviction_exceeded_time"),
            0,
            "{kind:?}"
        );
        // (The INFO itself was read and answered.)
        assert!(number(&mut raw, "total_reads_processed") <= 3, "{kind:?}");
    }
}

/// A numeric field of an INFO section.
fn number_in(raw: &mut goblin_tests::Raw, section: &str, name: &str) -> u64 {
    info_field(raw, section, name).parse().unwrap()
}

/// INFO's `keyspace_hits` and `keyspace_misses` count the keys read-only commands look
/// up, found or not (an expired one is a miss), across threads, and not those of
/// commands that write; CONFIG RESETSTAT zeroes them — as redis-server counts them.
#[test]
fn info_counts_keyspace_hits_and_misses_as_redis_does() {
    for server in [Server::goblin_threads(3), Server::redis()] {
        let kind = server.kind;
        let mut raw = server.raw();
        for line in [
            "MSET a 1 b 2 c 3",
            "SET gone v PX 20",
            "INCR n",
            "HSET h f v",
            "RPUSH l x",
        ] {
            raw.cmd_str(line);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        for line in [
            "GET a",
            "GET nothing",
            "GET gone",
            "MGET a b c d e",
            "EXISTS a nothing b",
            "TYPE h",
            "STRLEN nothing",
            "HGET h f",
            "HGET nothing f",
            "LRANGE l 0 -1",
            "EVAL redis.call('get',KEYS[1]) 1 c",
            "SET a 5",
            "INCR n",
            "DEL b",
        ] {
            raw.cmd_str(line);
        }
        let hits = info_field(&mut raw, "stats", "keyspace_hits");
        let misses = info_field(&mut raw, "stats", "keyspace_misses");
        assert_eq!((hits.as_str(), misses.as_str()), ("10", "7"), "{kind:?}");
        assert_eq!(raw.cmd_str("CONFIG RESETSTAT"), b"+OK\r\n");
        assert_eq!(info_field(&mut raw, "stats", "keyspace_hits"), "0");
        assert_eq!(info_field(&mut raw, "stats", "keyspace_misses"), "0");
    }
}

/// INFO threads shows, per shard thread, its queue and the hops its connections made to
/// other shards; CLIENT KILL MAXAGE (Redis 7.4) closes the clients older than it.
#[test]
fn info_threads_and_client_kill_maxage() {
    let server = Server::goblin_threads(2);
    let mut raw = server.raw();
    for i in 0..50 {
        raw.cmd_str(&format!("SET k{i} v"));
    }
    let info = String::from_utf8_lossy(&raw.cmd_str("INFO threads")).into_owned();
    let hops: u64 = info
        .lines()
        .filter_map(|l| l.split("cross_shard_hops=").nth(1))
        .filter_map(|h| h.trim().parse::<u64>().ok())
        .sum();
    assert!(hops > 0, "{info}");
    assert!(info.contains("queue_depth="), "{info}");
    let mut old = server.raw();
    assert_eq!(old.cmd_str("PING"), b"+PONG\r\n");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let mut young = server.raw();
    assert_eq!(
        young.cmd_str("CLIENT KILL MAXAGE x"),
        b"-ERR maxage is not an integer or out of range\r\n"
    );
    // The first two are over a second old; the asker is skipped.
    assert_eq!(young.cmd_str("CLIENT KILL MAXAGE 1"), b":2\r\n");
    let (_, closed) = old.read_to_close(std::time::Duration::from_secs(2));
    assert!(closed);
    assert_eq!(young.cmd_str("PING"), b"+PONG\r\n");
}

/// redis-server's hidden options (its tests' knobs: `key-load-delay`,
/// `rdb-key-save-delay` …) are shown only when named, not by a pattern; the cluster's
/// timeouts are settable as in redis-server; `maxmemory-clients` takes bytes or a
/// percentage, checked and shown as redis-server does — Redis's "CONFIG GET hidden
/// configs", "CONFIG sanity" and "CONFIG SET rollback on set error".
#[test]
fn hidden_cluster_and_client_memory_options_answer_as_redis_does() {
    let text = r#"
        CONFIG GET key-load-delay
        CONFIG GET rdb-key-save-delay
        CONFIG GET loading-process-events-interval-bytes
        CONFIG GET watchdog-period
        CONFIG GET use-exit-on-panic
        CONFIG GET *-delay
        CONFIG GET *panic*
        CONFIG SET rdb-key-save-delay 100
        CONFIG GET rdb-key-save-delay
        CONFIG SET rdb-key-save-delay 0
        CONFIG SET use-exit-on-panic yes
        CONFIG SET loading-process-events-interval-bytes 10
        CONFIG SET cluster-node-timeout 16000
        CONFIG GET cluster-node-timeout
        CONFIG SET cluster-node-timeout 15000
        CONFIG SET cluster-require-full-coverage no
        CONFIG GET cluster-require-full-coverage
        CONFIG SET cluster-require-full-coverage yes
        CONFIG SET cluster-allow-reads-when-down yes
        CONFIG SET cluster-allow-reads-when-down no
        CONFIG GET maxmemory-clients
        CONFIG SET maxmemory-clients 10%
        CONFIG GET maxmemory-clients
        CONFIG SET maxmemory-clients 1mb
        CONFIG GET maxmemory-clients
        CONFIG SET maxmemory-clients 200%
        CONFIG SET maxmemory-clients -5%
        CONFIG SET maxmemory-clients %
        CONFIG SET maxmemory-clients abc
        CONFIG SET maxmemory 10000002
        CONFIG SET maxmemory 10000001 maxmemory-clients 200% client-query-buffer-limit invalid
        CONFIG GET maxmemory
        CONFIG GET maxmemory-clients
        CONFIG SET maxmemory-clients 0
        CONFIG SET maxmemory 0
    "#;
    script(&mut Differential::new(), &[], "", text);
    let server = Server::goblin_threads(2);
    let mut raw = server.raw();
    let all = String::from_utf8_lossy(&raw.cmd_str("CONFIG GET *")).into_owned();
    for hidden in ["key-load-delay", "rdb-key-save-delay", "watchdog-period"] {
        assert!(
            !all.contains(&format!("\r\n{hidden}\r\n")),
            "{hidden} shown by *"
        );
    }
    assert!(all.contains("\r\nmaxmemory-clients\r\n"));
}

/// Every parameter CONFIG GET shows can be set to the value it shows, or is refused as
/// immutable, as redis-server answers (the configurations' sanity check of Redis's own
/// test suite); `hz` is kept within 1..500.
#[test]
fn config_set_of_shown_values_answers_as_redis_does() {
    let text = r#"
        CONFIG SET hz 20
        CONFIG GET hz
        CONFIG SET hz 100000
        CONFIG GET hz
        CONFIG SET hz -1
        CONFIG SET hz 10
        CONFIG SET io-threads 1
        CONFIG SET cluster-enabled no
        CONFIG SET hash-max-listpack-entries 512
        CONFIG SET zset-max-listpack-value 64
        CONFIG SET set-max-intset-entries 512
        CONFIG SET list-max-listpack-size -2
    "#;
    script(&mut Differential::new(), &[], "", text);
    let server = Server::goblin_threads(2);
    let mut raw = server.raw();
    let reply = raw.cmd_str("CONFIG GET *");
    let all = frame(&reply);
    let items = items(&all);
    let mut refused = Vec::new();
    for pair in items.chunks(2) {
        let (name, value) = (bulk(&pair[0]), bulk(&pair[1]));
        if name == b"port" || name == b"bind" {
            continue;
        }
        let reply = raw.cmd(&[b"CONFIG", b"SET", &name, &value]);
        if reply != b"+OK\r\n" {
            assert!(
                reply.ends_with(b"can't set immutable config\r\n")
                    || reply.ends_with(b"can't set protected config\r\n"),
                "{}: {}",
                String::from_utf8_lossy(&name),
                String::from_utf8_lossy(&reply)
            );
            refused.push(String::from_utf8_lossy(&name).into_owned());
        }
    }
    assert!(refused.contains(&"databases".to_string()), "{refused:?}");
    assert_eq!(raw.cmd_str("PING"), b"+PONG\r\n");
}

/// INFO commandstats and errorstats as redis-server counts them around transactions and
/// scripts: an error of a connection command inside EXEC, EXEC's and DISCARD's own
/// errors (EXECABORT too); a script's call of an undeclared key counted once (the run it
/// restarts under its plan does not count it twice); a command refused over
/// `maxmemory` is a rejected call and no call; INFO leaves out its own call; the errors
/// a script's reply holds; SELECT's error inside a script.
#[test]
fn command_and_error_counts_around_transactions_and_scripts_match_redis() {
    let scenarios = [
        "MULTI|SET a b|AUTH a|EXEC|EXEC",
        "EVAL \"redis.pcall('XGROUP', 'CREATECONSUMER', 's1', 'mygroup', 'consumer') return\" 0|EVAL a",
        "EVAL \"redis.pcall('get','zz'); redis.pcall('set','zz', 1); return redis.pcall('get','yy')\" 0",
        "MULTI|SET|EXEC",
        "MULTI|MULTI|DISCARD|DISCARD",
        "CONFIG SET maxmemory 1|SET a b|CONFIG SET maxmemory 0",
        "INFO commandstats|INFO commandstats",
        // A script's reply: an error passed on from a command it called is counted
        // once (by that command), any other error it holds (nested too) now; a call
        // refused before it ran is counted as it is refused. On one shard and across.
        "SET a 1|EVAL \"return {1,{err='MY x'}}\" 0|EVAL \"return redis.call('lpush',KEYS[1],'x')\" 1 a|EVAL \"return redis.error_reply('NOSPACE')\" 0",
        "SET a 1|EVAL \"return {redis.pcall('lpush',KEYS[1],'x'), redis.pcall('nosuch'), {err='A b'}}\" 2 a b|EVAL \"return redis.call('lpush',KEYS[1],'x')\" 2 a b|EVAL \"return {err='E f'}\" 2 a b|EVAL \"return redis.call('nosuch')\" 2 a b|EVAL \"return redis.call('get', {})\" 2 a b|EVAL \"error({err='Q r'})\" 2 a b",
        "EVAL \"return redis.pcall('nosuch')\" 0|EVAL \"error('boom')\" 0|EVAL \"return redis.call('get', 'undeclared')\" 1 a|EVAL \"return redis.call('get', {})\" 0|EVAL \"local e = redis.pcall('nosuch') error(e)\" 0",
        // Scripts inside EXEC (on one shard and across), then errors after it.
        "SET s 1|MULTI|EVAL \"return redis.call('lpush', KEYS[1], 'x')\" 2 s b|EVAL \"return {err='X y'}\" 2 a b|EXEC|LPUSH s x|EVAL \"return {err='Z w'}\" 2 a b|MULTI|EVAL \"return {1, {err='Q q'}}\" 1 a|EXEC",
        // SELECT's error inside a script is a failed call of SELECT, counted once (Redis's
        // "Consistent eval error reporting"); on one shard and across.
        "EVAL \"return redis.call('select',99)\" 0|EVAL \"return redis.pcall('select',99)['err']\" 0|EVAL \"return redis.pcall('select','x')\" 0",
        "EVAL \"redis.call('set',KEYS[1],1) return redis.call('select',99)\" 2 a b|EVAL \"redis.call('set',KEYS[1],1) return redis.pcall('select',99)\" 2 a b",
        // The code is the first word when a space ends it within 32 bytes, else ERR.
        "EVAL \"return {err='NOSPACE'}\" 0|EVAL \"return {err='-X y'}\" 0|EVAL \"return {err=''}\" 0|EVAL \"return {err='ABCDEFGHIJKLMNOPQRSTUVWXYZABCD x'}\" 0|EVAL \"return {err='ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE x'}\" 0",
    ];
    // The two sections, each line without its timing, in order.
    let stats = |raw: &mut goblin_tests::Raw| -> Vec<String> {
        let mut lines = Vec::new();
        for section in ["commandstats", "errorstats"] {
            let reply = raw.cmd(&[b"INFO", section.as_bytes()]);
            for line in String::from_utf8_lossy(&reply).split("\r\n") {
                if let Some((name, values)) = line.split_once(':') {
                    let kept: Vec<&str> = values
                        .split(',')
                        .filter(|v| !v.starts_with("usec"))
                        .collect();
                    lines.push(format!("{name}:{}", kept.join(",")));
                }
            }
        }
        lines.sort();
        lines
    };
    same_after_scenarios(&[1, 2], &scenarios, stats);
}

/// Runs each of `scenarios` (commands separated by `|`) after CONFIG RESETSTAT on
/// redis-server and on goblin-server with each of `threads`, and asserts that what
/// `observe` reads after it is the same on both.
fn same_after_scenarios<T: PartialEq + std::fmt::Debug>(
    threads: &[usize],
    scenarios: &[&str],
    mut observe: impl FnMut(&mut goblin_tests::Raw) -> T,
) {
    for &threads in threads {
        let (g, r) = (Server::goblin_threads(threads), Server::redis());
        for scenario in scenarios {
            let mut seen = Vec::new();
            for server in [&r, &g] {
                let mut raw = server.raw();
                raw.cmd_str("CONFIG RESETSTAT");
                for line in scenario.split('|') {
                    let c = goblin_tests::cmd::words(line);
                    goblin_tests::cmd::call(&mut raw, &c);
                }
                seen.push(observe(&mut raw));
            }
            assert_eq!(
                seen[1], seen[0],
                "--threads {threads}, {scenario}: goblin (left), redis (right)"
            );
        }
    }
}

/// LATENCY HISTOGRAM's commands and calls (not their buckets: times differ), as a
/// sorted list of `name calls`.
fn histogram_calls(raw: &mut goblin_tests::Raw, args: &[&str]) -> Vec<String> {
    let mut cmd: Vec<&[u8]> = vec![b"LATENCY", b"HISTOGRAM"];
    cmd.extend(args.iter().map(|a| a.as_bytes()));
    let reply = raw.cmd(&cmd);
    let f = frame(&reply);
    let mut seen = Vec::new();
    for pair in items(&f).chunks(2) {
        let [name, detail] = pair else {
            panic!("odd map: {reply:?}")
        };
        let detail = items(detail);
        assert_eq!(bulk(&detail[0]), b"calls");
        assert_eq!(bulk(&detail[2]), b"histogram_usec");
        // Cumulative: counts rise with the buckets, up to the calls.
        let buckets = items(&detail[3]);
        let counts: Vec<i64> = buckets.chunks(2).map(|b| int(&b[1])).collect();
        assert!(counts.windows(2).all(|w| w[0] < w[1]), "{reply:?}");
        assert_eq!(counts.last().copied(), Some(int(&detail[1])), "{reply:?}");
        seen.push(format!(
            "{} {}",
            String::from_utf8_lossy(&bulk(name)),
            int(&detail[1])
        ));
    }
    seen.sort();
    seen
}

/// INFO latencystats' lines without their values: `name:p50,p99,…`, sorted.
fn latencystats_shape(raw: &mut goblin_tests::Raw) -> Vec<String> {
    let reply = raw.cmd_str("INFO latencystats");
    let mut lines: Vec<String> = String::from_utf8_lossy(&reply)
        .split("\r\n")
        .filter_map(|line| line.split_once(':'))
        .map(|(name, values)| {
            let labels: Vec<&str> = values
                .split(',')
                .filter_map(|v| v.split_once('=').map(|(p, _)| p))
                .collect();
            format!("{name}:{}", labels.join(","))
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn latency_histograms_and_latencystats_record_the_calls_redis_records() {
    let scenarios = [
        // Commands on shards, on the connection's worker, as plans, inside EXEC and
        // scripts (on one shard and across), a blocking command served and one timed
        // out, and one refused before it ran (no call).
        "SET a b|SET c d|GET a|CLIENT ID|CONFIG GET maxmemory|MSET x 1 y 2 z 3|MULTI|SET a 1|INCR n|CLIENT ID|EXEC|HSET h f v|DEL a|LPUSH l x|BLPOP l 0|BLPOP nolist 0.01|GET|EVAL \"return redis.call('set', KEYS[1], 'v')\" 1 a|EVAL \"return redis.call('incr', KEYS[2])\" 2 a b",
        "CONFIG SET latency-tracking no|SET a b|GET a|CONFIG SET latency-tracking yes|GET a",
        "CONFIG SET latency-tracking-info-percentiles \"0 50 99.99 100\"|SET a b|INFO latencystats|CONFIG SET latency-tracking-info-percentiles \"\"|GET a|INFO latencystats|CONFIG SET latency-tracking-info-percentiles \"50 99 99.9\"",
    ];
    same_after_scenarios(&[1, 3], &scenarios, |raw| {
        let some = histogram_calls(raw, &["set", "client", "nosuch", "blpop"]);
        let all = histogram_calls(raw, &[]);
        assert!(!all.is_empty());
        (some, all, latencystats_shape(raw))
    });
    // CLIENT UNBLOCK ends a wait: the blocked command is recorded, and is a failed call
    // whatever its reply (a timeout's nil too), as redis-server counts it.
    for threads in [1, 3] {
        let (g, r) = (Server::goblin_threads(threads), Server::redis());
        let mut seen = Vec::new();
        for server in [&r, &g] {
            let (mut a, mut b) = (server.raw(), server.raw());
            b.cmd_str("CONFIG RESETSTAT");
            let id = String::from_utf8_lossy(&a.cmd_str("CLIENT ID"))
                .trim()
                .trim_start_matches(':')
                .to_string();
            let mut replies = Vec::new();
            for how in ["TIMEOUT", "ERROR"] {
                a.send(b"BLPOP nolist 0\r\n");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while !String::from_utf8_lossy(&b.cmd_str("INFO clients"))
                    .contains("blocked_clients:1")
                {
                    assert!(std::time::Instant::now() < deadline, "never blocked");
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                b.cmd_str(&format!("CLIENT UNBLOCK {id} {how}"));
                replies.push(a.reply());
            }
            let blpop: Vec<String> = String::from_utf8_lossy(&b.cmd_str("INFO commandstats"))
                .lines()
                .filter(|l| l.starts_with("cmdstat_blpop"))
                .map(|l| l.split(',').filter(|v| !v.contains("usec")).collect())
                .collect();
            seen.push((replies, blpop, histogram_calls(&mut b, &["blpop"])));
        }
        assert_eq!(
            seen[1], seen[0],
            "--threads {threads}: goblin (left), redis (right)"
        );
    }
    // The percentiles' option, checked and shown as redis-server does, and CONFIG
    // RESETSTAT forgets every histogram.
    let mut d = Differential::new();
    for value in [
        "0.0 50.0 100.0",
        "10.0 50.0 a",
        "10.0 50.0 101.0",
        "-1",
        "nan",
        "",
        "99.999",
    ] {
        d.check(&[
            b"CONFIG",
            b"SET",
            b"latency-tracking-info-percentiles",
            value.as_bytes(),
        ]);
        d.check(&[b"CONFIG", b"GET", b"latency-tracking-info-percentiles"]);
    }
    d.check(&[b"CONFIG", b"RESETSTAT"]);
    d.check(&[b"LATENCY", b"HISTOGRAM", b"set", b"get"]);
    assert_eq!(latencystats_shape(&mut d.g), latencystats_shape(&mut d.r));
    let g = Server::goblin_with(&["--enable-debug-command", "yes"]);
    let mut raw = g.raw();
    raw.cmd_str("DEBUG SLEEP 0.05");
    let info = String::from_utf8_lossy(&raw.cmd_str("INFO latencystats")).into_owned();
    let p50: f64 = info
        .split("latency_percentiles_usec_debug:p50=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{info}"));
    assert!(p50 >= 50_000.0, "{info}");
}

/// CONFIG SET checks the names as redis-server 7.0 does, before any value — an unknown
/// name, one set only at start-up, a protected one, a repeated one: the first is the
/// error, named as typed — then the values in order; an odd count is a syntax error.
#[test]
fn config_set_checks_names_then_values_as_redis_does() {
    let mut d = Differential::new();
    d.check_lines(
        r#"
        CONFIG SET a b c
        CONFIG SET maxmemory bad dir x
        CONFIG SET MAXMEMORY bad
        CONFIG SET Dir x
        CONFIG SET FOO x maxmemory bad
        CONFIG SET maxmemory bad FOO x
        CONFIG SET maxmemory 1 MaxMemory 2
        CONFIG SET hash-max-ziplist-entries bad
        CONFIG SET Databases 3 dir x
        CONFIG SET maxmemory 1 Dbfilename x
        CONFIG SET enable-protected-configs yes
        CONFIG GET enable-protected-configs
        CONFIG GET maxmemory
        "#,
    );
}

/// With `enable-protected-configs yes` (or `local`, for a client on the loopback
/// interface), CONFIG SET `dir` moves the process there, as redis-server does (CONFIG
/// GET shows where it is; a relative name is relative to it; one that is not a
/// directory is refused with the system's reason), and `dbfilename` names the file
/// SAVE writes there.
#[test]
fn protected_configs_are_set_where_allowed() {
    for allow in ["yes", "local"] {
        let goblin = Server::goblin_with(&["--enable-protected-configs", allow]);
        let redis = Server::redis_with(&["--enable-protected-configs", allow]);
        for server in [&goblin, &redis] {
            let what = format!("{:?}, {allow}", server.kind);
            let base = goblin_tests::scratch_dir("protected");
            std::fs::create_dir_all(base.join("inner")).expect("a directory");
            let base = std::fs::canonicalize(&base).expect("canonical");
            let mut c = server.raw();
            let set = |c: &mut goblin_tests::Raw, name: &str, value: &str| {
                c.cmd(&[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()])
            };
            let dir = base.to_str().expect("UTF-8");
            assert_eq!(set(&mut c, "dir", dir), b"+OK\r\n", "{what}");
            assert_eq!(set(&mut c, "dir", "inner"), b"+OK\r\n", "{what}");
            let inner = format!("{}/inner", dir);
            let shown = goblin_tests::encode(&[b"dir", inner.as_bytes()]);
            assert_eq!(c.cmd(&[b"CONFIG", b"GET", b"dir"]), shown, "{what}");
            let missing = set(&mut c, "dir", "/nonexistent-goblin-dir");
            assert_eq!(
                missing,
                b"-ERR CONFIG SET failed (possibly related to argument 'dir') - No such file \
                  or directory\r\n",
                "{what}"
            );
            assert_eq!(c.cmd(&[b"CONFIG", b"GET", b"dir"]), shown, "{what}");
            assert_eq!(
                set(&mut c, "dbfilename", "a/b.rdb"),
                b"-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - \
                  dbfilename can't be a path, just a filename\r\n",
                "{what}"
            );
            assert_eq!(set(&mut c, "dbfilename", "moved.rdb"), b"+OK\r\n", "{what}");
            assert_eq!(c.cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n", "{what}");
            assert_eq!(c.cmd(&[b"SAVE"]), b"+OK\r\n", "{what}");
            assert!(base.join("inner/moved.rdb").is_file(), "{what}");
            let _ = std::fs::remove_dir_all(&base);
        }
    }
}

/// `oom-score-adj`: the process's `/proc/<pid>/oom_score_adj` as redis-server sets its
/// own — the first of `oom-score-adj-values` (a master's; the second, a replica's, while
/// it is one), `absolute` or added to the
/// score it started with (`yes`, `relative`), within ±1000, and the starting score back
/// with `no`; the values' checks.
#[test]
fn oom_score_adj_sets_the_process_score_as_redis_does() {
    let steps: &[&[&str]] = &[
        &["CONFIG", "SET", "oom-score-adj-values", "10 20 30"],
        &["CONFIG", "SET", "oom-score-adj", "absolute"],
        &["CONFIG", "SET", "oom-score-adj-values", "-5 20 30"],
        &["CONFIG", "SET", "oom-score-adj", "relative"],
        &["CONFIG", "SET", "oom-score-adj-values", "1500 20 30"],
        &["CONFIG", "SET", "oom-score-adj", "yes"],
        &["CONFIG", "SET", "oom-score-adj", "no"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2 x"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2 2001"],
        &["CONFIG", "GET", "oom-score-adj"],
        &["CONFIG", "GET", "oom-score-adj-values"],
    ];
    // A CONFIG SET whose port cannot be listened on puts every setting back, the score
    // too (redis-server's rollback).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let rollback: &[&str] = &[
        "CONFIG",
        "SET",
        "oom-score-adj",
        "yes",
        "oom-score-adj-values",
        "7 7 7",
        "port",
        &port,
    ];
    let mut steps = steps.to_vec();
    steps.push(rollback);
    steps.push(&["CONFIG", "GET", "oom-score-adj"]);
    // A replica's score is the second value (its class), a master's the first again.
    steps.extend_from_slice(&[
        &["CONFIG", "SET", "oom-score-adj-values", "10 20 30"][..],
        &["CONFIG", "SET", "oom-score-adj", "yes"],
        &["REPLICAOF", "127.0.0.1", "1"],
        &["CONFIG", "SET", "oom-score-adj-values", "15 25 30"],
        &["REPLICAOF", "NO", "ONE"],
        &["CONFIG", "SET", "oom-score-adj", "no"],
    ]);
    let mut seen = Vec::new();
    for server in [Server::goblin(), Server::redis()] {
        let path = format!("/proc/{}/oom_score_adj", server.pid());
        let score = || std::fs::read_to_string(&path).unwrap().trim().to_string();
        // (Started from this test's score: the same for both.)
        let mut lines = vec![format!("start {}", score())];
        let mut raw = server.raw();
        for step in &steps {
            let args: Vec<&[u8]> = step.iter().map(|a| a.as_bytes()).collect();
            let reply = raw.cmd(&args);
            lines.push(format!(
                "{} -> {} -> {}",
                step.join(" "),
                goblin_tests::show(&reply),
                score()
            ));
        }
        seen.push(lines);
    }
    assert_eq!(seen[0], seen[1], "goblin (left), redis (right)");
    let start: i64 = seen[0][0][6..].parse().unwrap();
    // What both did, for the reader (lowering the score takes a privilege the test may
    // not have, so the steps that lower it are compared, not spelled out): raised to
    // 1000 at most, then back to where it started.
    assert!(seen[0][5].ends_with(" -> 1000"), "{:?}", seen[0]);
    assert!(
        seen[0][7].ends_with(&format!(" -> {start}")),
        "{:?}",
        seen[0]
    );
}

/// `goblin-server -v` and `--version` print redis-server's line — `Redis server v=7.0.15
/// sha=… malloc=… bits=64 build=…` — with the version INFO's `redis_version` names
/// (tools read the version after ` v=`), and exit 0, as `redis-server -v` does.
#[test]
fn version_flag_prints_redis_servers_line() {
    let server = Server::goblin();
    let version = info_field(&mut server.raw(), "server", "redis_version");
    let theirs = std::process::Command::new("redis-server")
        .arg("-v")
        .output()
        .expect("redis-server -v");
    let theirs = String::from_utf8_lossy(&theirs.stdout).into_owned();
    for flag in ["-v", "--version"] {
        let out = std::process::Command::new(goblin_tests::goblin_binary())
            .arg(flag)
            .output()
            .expect("goblin-server runs");
        assert!(out.status.success(), "{flag}");
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            line.starts_with(&format!("Redis server v={version} ")),
            "{line}"
        );
        let fields = |l: &str| -> Vec<String> {
            l.split_whitespace()
                .take(6)
                .map(|w| w.split('=').next().unwrap_or("").to_string())
                .collect()
        };
        assert_eq!(fields(&line), fields(&theirs), "{line} / {theirs}");
    }
}
