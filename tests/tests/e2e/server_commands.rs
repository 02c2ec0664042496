//! Server commands: COMMAND, CONFIG, INFO, DBSIZE, FLUSHALL.

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::{Differential, Raw, Server, show};

/// Every Redis command Goblin implements has COMMAND INFO and DOCS entries identical to
/// redis-server's (those are what cluster-aware clients and redis-cli read). Containers
/// list only the subcommands Goblin has, so their subcommands are compared one by one.
#[test]
fn command_info_and_docs_match_redis() {
    let mut d = Differential::new();
    let all = d.g.cmd_str("COMMAND");
    let Some((Frame::Array(entries), _)) = parse_reply(&all).unwrap() else {
        panic!("COMMAND")
    };
    let mut names = Vec::new();
    for entry in &entries {
        let Frame::Array(fields) = entry else {
            panic!("entry")
        };
        let (Frame::Bulk(name), Frame::Array(subs)) = (&fields[0], &fields[9]) else {
            panic!("fields")
        };
        // Goblin's own commands, and those of later Redis or Valkey versions, have no
        // redis-server 7.0 entry to compare with.
        if name.starts_with(b"goblin.") || [&b"delex"[..], b"delifeq"].contains(name) {
            continue;
        }
        if subs.is_empty() {
            names.push(name.to_vec());
        }
        for sub in subs {
            let Frame::Array(sub_fields) = sub else {
                panic!("subcommand")
            };
            let Frame::Bulk(sub_name) = &sub_fields[0] else {
                panic!("subcommand name")
            };
            // (Subcommands redis-server 7.0 lacks have entries of Goblin's own.)
            if ![&b"client|setinfo"[..], b"cluster|myshardid"].contains(sub_name) {
                names.push(sub_name.to_vec());
            }
        }
    }
    assert!(names.len() > 20, "{names:?}");
    for name in &names {
        d.check(&[b"COMMAND", b"INFO", name]);
        d.check(&[b"COMMAND", b"DOCS", name]);
    }
    d.check(&[b"COMMAND", b"INFO", b"GET", b"set", b"nope", b"del"]);
    d.check(&[b"COMMAND", b"DOCS", b"nope"]);
    d.check_lines("COMMAND COUNT x\nCOMMAND NOPE\nCOMMAND HELP x\nCONFIG\nCONFIG GET\nCONFIG NOPE");
}

#[test]
fn command_lists_every_registered_command() {
    let server = Server::goblin();
    let mut raw = server.raw();
    let count = raw.cmd_str("COMMAND COUNT");
    let n: usize = std::str::from_utf8(&count[1..count.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    let all = raw.cmd_str("COMMAND");
    assert!(all.starts_with(format!("*{n}\r\n").as_bytes()));
    let docs = raw.cmd_str("COMMAND DOCS");
    assert!(docs.starts_with(format!("*{}\r\n", 2 * n).as_bytes()));
}

/// COMMAND LIST names every command and subcommand COMMAND shows; with FILTERBY it answers
/// as redis-server does for the commands Goblin has (compared as sets: both answer in
/// their own order), errors included. TIME and ROLE as a standalone redis-server's.
#[test]
fn command_list_time_and_role_match_redis() {
    let mut d = Differential::new();
    let names = |reply: &[u8]| -> Vec<Vec<u8>> {
        let Some((Frame::Array(items), _)) = parse_reply(reply).unwrap() else {
            panic!("an array: {}", show(reply))
        };
        let mut names: Vec<Vec<u8>> = items
            .into_iter()
            .map(|f| match f {
                Frame::Bulk(b) => b.to_vec(),
                other => panic!("a name: {other:?}"),
            })
            .collect();
        names.sort();
        names
    };
    // Everything COMMAND INFO shows, subcommands included.
    let all = names(&d.g.cmd_str("COMMAND LIST"));
    let count = d.g.cmd_str("COMMAND COUNT");
    let top = all.iter().filter(|n| !n.contains(&b'|')).count();
    assert_eq!(show(&count), format!(":{top}\\r\\n"));
    assert!(all.contains(&b"xgroup|create".to_vec()) && all.contains(&b"get".to_vec()));
    for filter in [
        "COMMAND LIST FILTERBY PATTERN x*",
        "COMMAND LIST FILTERBY PATTERN XGROUP*",
        "COMMAND LIST FILTERBY PATTERN *|help",
        "COMMAND LIST FILTERBY ACLCAT stream",
        "COMMAND LIST FILTERBY ACLCAT Hash",
        "COMMAND LIST FILTERBY ACLCAT nope",
        "COMMAND LIST FILTERBY MODULE foo",
    ] {
        let (g, r) = (d.g.cmd_str(filter), d.r.cmd_str(filter));
        // redis-server has commands Goblin lacks: what Goblin lists, it lists too; and
        // of the stream, hash and help commands Goblin has all of redis-server's.
        let (g, r) = (names(&g), names(&r));
        assert!(g.iter().all(|n| r.contains(n)), "{filter}: {g:?} ⊄ {r:?}");
        if !filter.contains("PATTERN *|") {
            let missing: Vec<_> = r.iter().filter(|n| !g.contains(n)).collect();
            assert!(missing.is_empty(), "{filter}: missing {missing:?}");
        }
    }
    d.check_lines(
        "COMMAND LIST FILTERBY\nCOMMAND LIST x\nCOMMAND LIST FILTERBY NOPE x\nROLE\nROLE x\nTIME x",
    );
    let (g, r) = (d.g.cmd_str("TIME"), d.r.cmd_str("TIME"));
    let secs = |reply: &[u8]| -> i64 {
        let Some((Frame::Array(items), _)) = parse_reply(reply).unwrap() else {
            panic!("TIME: {}", show(reply))
        };
        assert_eq!(items.len(), 2, "TIME: {}", show(reply));
        let Frame::Bulk(s) = &items[0] else {
            panic!("TIME: {}", show(reply))
        };
        std::str::from_utf8(s).unwrap().parse().unwrap()
    };
    assert!(
        (secs(&g) - secs(&r)).abs() <= 2,
        "{} {}",
        show(&g),
        show(&r)
    );
}

#[test]
fn config_get_answers_what_benchmarks_ask() {
    let mut d = Differential::new();
    d.check_lines("CONFIG GET save\nCONFIG GET appendonly\nCONFIG GET SAVE\nCONFIG GET nope\nCONFIG GET save save");
    // Several parameters come back in redis-server's hash order, which is random per
    // process: compare them as a set.
    let reply = String::from_utf8(d.g.cmd_str("CONFIG GET save appendonly save nope")).unwrap();
    assert!(reply.starts_with("*4\r\n"), "{reply}");
    assert!(
        reply.contains("$4\r\nsave\r\n$0\r\n\r\n")
            && reply.contains("$10\r\nappendonly\r\n$2\r\nno\r\n")
    );
    let mut raw = d.goblin.raw();
    let port = raw.cmd_str("CONFIG GET port");
    assert!(String::from_utf8_lossy(&port).contains(&d.goblin.port.to_string()));
}

#[test]
fn dbsize_and_flushall_match_redis() {
    let mut d = Differential::new();
    d.check_lines(
        "
        DBSIZE
        SET a 1
        SET b 2
        SET c 3 PX 1000000
        DBSIZE
        FLUSHALL x
        FLUSHALL SYNC x
        FLUSHALL async
        DBSIZE
        SET a 1
        FLUSHDB sync
        FLUSHDB nope
        DBSIZE
        ",
    );
}

#[test]
fn info_has_the_sections_clients_read() {
    let server = Server::goblin();
    let mut raw = server.raw();
    raw.cmd_str("SET k v");
    raw.cmd_str("SET t v EX 100");
    let info = String::from_utf8(raw.cmd_str("INFO")).unwrap();
    for field in [
        "# Server\r\n",
        "redis_version:",
        "tcp_port:",
        "uptime_in_seconds:",
        "# Clients\r\n",
        "connected_clients:",
        "# Memory\r\n",
        "used_memory:",
        "# Stats\r\n",
        "total_commands_processed:",
        "# Keyspace\r\n",
        "db0:keys=2,expires=1,avg_ttl=",
    ] {
        assert!(info.contains(field), "INFO lacks {field:?}:\n{info}");
    }
    let keyspace = String::from_utf8(raw.cmd_str("INFO keyspace")).unwrap();
    assert!(keyspace.contains("# Keyspace") && !keyspace.contains("# Server"));
    // Sections add up, as in redis-server: default ones and commandstats.
    assert!(!info.contains("# Commandstats"));
    let both = String::from_utf8(raw.cmd_str("INFO default commandstats")).unwrap();
    assert!(
        both.contains("# Server\r\n") && both.contains("# Commandstats\r\n"),
        "{both}"
    );
    raw.cmd_str("HELLO 3");
    assert!(raw.cmd_str("INFO server").starts_with(b"="));
}

/// INFO's sections come in redis-server's order, for the default set, `all`,
/// `everything` and single sections — Modules (empty: no module is loaded) after CPU,
/// Cluster after the statistics — Goblin's own Threads section aside.
#[test]
fn info_sections_come_in_redis_order() {
    let (goblin, redis) = (Server::goblin(), Server::redis());
    let (mut g, mut r) = (goblin.raw(), redis.raw());
    let titles = |raw: &mut Raw, line: &str| -> Vec<String> {
        String::from_utf8_lossy(&raw.cmd_str(line))
            .lines()
            .filter(|l| l.starts_with("# ") && *l != "# Threads")
            .map(str::to_string)
            .collect()
    };
    for line in [
        "INFO",
        "INFO all",
        "INFO everything",
        "INFO cpu modules cluster",
    ] {
        assert_eq!(titles(&mut g, line), titles(&mut r, line), "{line}");
    }
    assert_eq!(g.cmd_str("INFO modules"), r.cmd_str("INFO modules"));
}

/// INFO keyspace's `avg_ttl` is the volatile keys' average time to live in ms (0 with
/// none), across threads, kept through overwrites, PERSIST, EXPIRE and DEL — what
/// redis-server estimates from its expiry cycle's samples (within 30% here).
#[test]
fn info_keyspace_avg_ttl_is_the_volatile_keys_average() {
    let avg_ttl = |raw: &mut Raw| -> f64 {
        let info = String::from_utf8_lossy(&raw.cmd_str("INFO keyspace")).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix("db0:"))
            .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("avg_ttl=")))
            .unwrap_or_else(|| panic!("{info}"))
            .parse()
            .unwrap()
    };
    let within = |got: f64, want: f64, share: f64, what: &str| {
        assert!(
            (got - want).abs() <= want * share,
            "{what}: {got}, not about {want}"
        );
    };
    let near = |got: f64, want: f64, what: &str| within(got, want, 0.01, what);
    for server in [Server::goblin_threads(2), Server::redis()] {
        let kind = server.kind;
        let mut raw = server.raw();
        for i in 0..100 {
            raw.cmd_str(&format!("SET short{i} v EX 1000"));
            raw.cmd_str(&format!("SET long{i} v EX 3000"));
            raw.cmd_str(&format!("SET plain{i} v"));
        }
        if kind == goblin_tests::Kind::Redis {
            // (Its figure comes from its expiry cycle's samples, ten times a second.)
            std::thread::sleep(std::time::Duration::from_millis(1500));
            within(avg_ttl(&mut raw), 2_000_000.0, 0.3, "redis");
            continue;
        }
        near(avg_ttl(&mut raw), 2_000_000.0, "all set");
        for i in 0..100 {
            raw.cmd_str(&format!("PERSIST long{i}"));
        }
        near(avg_ttl(&mut raw), 1_000_000.0, "the long ones persisted");
        for i in 0..50 {
            raw.cmd_str(&format!("SET short{i} v"));
            raw.cmd_str(&format!("DEL short{}", 50 + i));
        }
        assert_eq!(avg_ttl(&mut raw), 0.0);
        for i in 0..100 {
            raw.cmd_str(&format!("EXPIRE plain{i} 4000"));
        }
        near(avg_ttl(&mut raw), 4_000_000.0, "expiries set");
    }
}

/// Connections are dealt round-robin over the worker threads: with 1,000 clients every
/// thread serves 250 (±1), whatever their ports hash to.
#[test]
fn connections_are_dealt_evenly_across_threads() {
    let server = Server::goblin_threads(4);
    let mut conns = Vec::new();
    for _ in 0..1000 {
        let mut raw = server.raw();
        assert_eq!(raw.cmd(&[b"PING"]), b"+PONG\r\n");
        conns.push(raw);
    }
    let mut info = server.raw();
    let text = String::from_utf8(info.cmd_str("INFO clients")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("goblin_clients_per_thread:"))
        .unwrap();
    let counts: Vec<usize> = line
        .split(':')
        .nth(1)
        .unwrap()
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 4);
    assert_eq!(counts.iter().sum::<usize>(), 1001, "{line}");
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(max - min <= 1, "unbalanced: {line}");
    assert!(text.contains("connected_clients:1001\r\n"), "{text}");
}

/// CONFIG RESETSTAT: the command statistics of every thread, and INFO's counters, start
/// again from zero.
#[test]
fn config_resetstat_clears_the_statistics_of_every_thread() {
    let server = Server::goblin();
    let mut raw = server.raw();
    for i in 0..20 {
        raw.cmd_str(&format!("SET k{i} v"));
        raw.cmd_str(&format!("GET k{i}"));
    }
    let stats =
        |raw: &mut Raw| String::from_utf8_lossy(&raw.cmd_str("INFO commandstats")).into_owned();
    let before = stats(&mut raw);
    assert!(before.contains("cmdstat_get:calls=20,"), "{before}");
    assert_eq!(raw.cmd_str("CONFIG RESETSTAT"), b"+OK\r\n");
    let after = stats(&mut raw);
    assert!(
        !after.contains("cmdstat_get") && !after.contains("cmdstat_set"),
        "{after}"
    );
    let info = String::from_utf8_lossy(&raw.cmd_str("INFO stats")).into_owned();
    let processed: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_commands_processed");
    assert!(processed < 10, "{info}");
}

/// `rename-command` in a configuration file: the old name is an unknown command, the new
/// one runs it, an empty one removes it — as redis-server with the same renames.
#[test]
fn renamed_commands_answer_as_redis_renamed_ones() {
    let dir = goblin_tests::scratch_dir("rename");
    let conf = dir.join("goblin.conf");
    std::fs::write(
        &conf,
        "rename-command FLUSHALL wipe\nrename-command config \"\"\nsave \"\"\n",
    )
    .unwrap();
    let goblin = Server::goblin_with_file(&conf, &["--dir", dir.to_str().unwrap()]);
    let redis = Server::redis_with(&[
        "--rename-command",
        "FLUSHALL",
        "wipe",
        "--rename-command",
        "config",
        "",
    ]);
    let mut d = Differential::with_servers(goblin, redis);
    d.check_lines(
        "
        SET k v
        FLUSHALL
        flushall
        CONFIG GET save
        WIPE
        GET k
        wipe
        ",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Redis 7.0's options that Goblin keeps without acting on them (replication, TLS,
/// defragmentation, the encodings' thresholds …) and their other names: a redis.conf
/// written for redis-server starts goblin-server, and CONFIG GET and SET answer as
/// redis-server answers (its defaults, its checks, its immutable ones).
#[test]
fn options_goblin_keeps_without_acting_on_answer_as_redis() {
    let mut d = Differential::new();
    for name in [
        "active-defrag-cycle-max",
        "active-defrag-cycle-min",
        "active-defrag-ignore-bytes",
        "active-defrag-max-scan-fields",
        "active-defrag-threshold-lower",
        "active-defrag-threshold-upper",
        "active-expire-effort",
        "activedefrag",
        "activerehashing",
        "always-show-logo",
        "aof-disable-auto-gc",
        "aof-rewrite-incremental-fsync",
        "aof-timestamp-enabled",
        "aof-use-rdb-preamble",
        "aof_rewrite_cpulist",
        "bgsave_cpulist",
        "bind-source-addr",
        "bio_cpulist",
        "cluster-allow-pubsubshard-when-down",
        "cluster-allow-replica-migration",
        "cluster-announce-bus-port",
        "cluster-announce-hostname",
        "cluster-announce-ip",
        "cluster-announce-port",
        "cluster-announce-tls-port",
        "cluster-link-sendbuf-limit",
        "cluster-migration-barrier",
        "cluster-preferred-endpoint-type",
        "cluster-replica-no-failover",
        "cluster-replica-validity-factor",
        "cluster-slave-no-failover",
        "cluster-slave-validity-factor",
        "crash-log-enabled",
        "crash-memcheck-enabled",
        "daemonize",
        "disable-thp",
        "dynamic-hz",
        "enable-protected-configs",
        "hash-max-ziplist-entries",
        "hash-max-ziplist-value",
        "ignore-warnings",
        "io-threads-do-reads",
        "jemalloc-bg-thread",
        "latency-tracking",
        "latency-tracking-info-percentiles",
        "list-compress-depth",
        "list-max-ziplist-size",
        "masterauth",
        "masteruser",
        "maxmemory-clients",
        "maxmemory-eviction-tenacity",
        "min-replicas-max-lag",
        "min-replicas-to-write",
        "min-slaves-max-lag",
        "min-slaves-to-write",
        "no-appendfsync-on-rewrite",
        "oom-score-adj",
        "oom-score-adj-values",
        "pidfile",
        "proc-title-template",
        "propagation-error-behavior",
        "rdb-del-sync-files",
        "rdb-save-incremental-fsync",
        "rdbchecksum",
        "rdbcompression",
        "repl-backlog-size",
        "repl-backlog-ttl",
        "repl-disable-tcp-nodelay",
        "repl-diskless-load",
        "repl-diskless-sync",
        "repl-diskless-sync-delay",
        "repl-diskless-sync-max-replicas",
        "repl-ping-replica-period",
        "repl-ping-slave-period",
        "repl-timeout",
        "replica-announce-ip",
        "replica-announce-port",
        "replica-announced",
        "replica-ignore-disk-write-errors",
        "replica-ignore-maxmemory",
        "replica-lazy-flush",
        "replica-priority",
        "replica-read-only",
        "replica-serve-stale-data",
        "replicaof",
        "sanitize-dump-payload",
        "server_cpulist",
        "set-proc-title",
        "shutdown-on-sigint",
        "shutdown-on-sigterm",
        "shutdown-timeout",
        "slave-announce-ip",
        "slave-announce-port",
        "slave-ignore-maxmemory",
        "slave-lazy-flush",
        "slave-priority",
        "slave-read-only",
        "slave-serve-stale-data",
        "slaveof",
        "socket-mark-id",
        "supervised",
        "syslog-enabled",
        "syslog-facility",
        "syslog-ident",
        "tcp-backlog",
        "tls-auth-clients",
        "tls-ca-cert-dir",
        "tls-ca-cert-file",
        "tls-cert-file",
        "tls-ciphers",
        "tls-ciphersuites",
        "tls-client-cert-file",
        "tls-client-key-file",
        "tls-client-key-file-pass",
        "tls-cluster",
        "tls-dh-params-file",
        "tls-key-file",
        "tls-key-file-pass",
        "tls-port",
        "tls-prefer-server-ciphers",
        "tls-protocols",
        "tls-replication",
        "tls-session-cache-size",
        "tls-session-cache-timeout",
        "tls-session-caching",
        "unixsocket",
        "unixsocketperm",
        "zset-max-ziplist-entries",
        "zset-max-ziplist-value",
        "hash-max-listpack-entries",
        "hash-max-listpack-value",
        "list-max-listpack-size",
        "set-max-intset-entries",
        "zset-max-listpack-entries",
        "zset-max-listpack-value",
        "stream-node-max-bytes",
        "stream-node-max-entries",
    ] {
        d.check(&[b"CONFIG", b"GET", name.as_bytes()]);
    }
    d.check_lines(
        "
        CONFIG SET activerehashing no
        CONFIG GET activerehashing
        CONFIG SET activerehashing maybe
        CONFIG SET hash-max-ziplist-entries 64
        CONFIG GET hash-max-listpack-entries
        CONFIG GET hash-max-ziplist-entries
        CONFIG SET hash-max-listpack-entries x
        CONFIG SET active-expire-effort 11
        CONFIG SET active-expire-effort 3
        CONFIG GET active-expire-effort
        CONFIG SET repl-backlog-size 2mb
        CONFIG GET repl-backlog-size
        CONFIG SET repl-diskless-load swapdb
        CONFIG GET repl-diskless-load
        CONFIG SET repl-diskless-load maybe
        CONFIG SET tcp-backlog 100
        CONFIG SET daemonize yes
        CONFIG SET slave-read-only no
        CONFIG GET replica-read-only
        CONFIG GET slave-read-only
        CONFIG SET list-compress-depth 2
        CONFIG GET list-compress-depth
        CONFIG SET zset-max-ziplist-value 32 set-max-intset-entries 100
        CONFIG GET zset-max-listpack-value
        CONFIG GET set-max-intset-entries
        CONFIG SET oom-score-adj-values 0
        ",
    );
    // A file with them (as Debian's redis.conf has them) starts goblin-server.
    let dir = goblin_tests::scratch_dir("redis-conf");
    let conf = dir.join("redis.conf");
    std::fs::write(
        &conf,
        "tcp-backlog 511\nhash-max-ziplist-entries 128\nlist-compress-depth 1\n\
         latency-tracking-info-percentiles 50 99 99.9\nrepl-backlog-size 2mb\n\
         supervised no\nactiverehashing no\nsave \"\"\n",
    )
    .unwrap();
    let goblin = Server::goblin_with_file(&conf, &["--dir", dir.to_str().unwrap()]);
    let mut raw = goblin.raw();
    for (name, value) in [
        ("tcp-backlog", "511"),
        ("hash-max-listpack-entries", "128"),
        ("list-compress-depth", "1"),
        ("latency-tracking-info-percentiles", "50 99 99.9"),
        ("repl-backlog-size", "2097152"),
        ("activerehashing", "no"),
    ] {
        let want = format!(
            "*2\r\n${}\r\n{name}\r\n${}\r\n{value}\r\n",
            name.len(),
            value.len()
        );
        let got = raw.cmd(&[b"CONFIG", b"GET", name.as_bytes()]);
        assert_eq!(show(&got), show(want.as_bytes()));
    }
    drop(goblin);
    let _ = std::fs::remove_dir_all(&dir);
}

/// CONFIG SET as redis-server answers it: several pairs at once, all or nothing; unknown,
/// repeated and invalid ones refused with its texts; the new values in effect at once.
#[test]
fn config_set_changes_options_at_run_time_as_redis_does() {
    let mut d = Differential::new();
    d.check_lines(
        "
        CONFIG SET timeout 10
        CONFIG GET timeout
        CONFIG SET nosuch 1
        CONFIG SET timeout x
        CONFIG SET appendfsync maybe
        CONFIG SET protected-mode maybe
        CONFIG SET timeout 1 timeout 2
        CONFIG SET save
        CONFIG SET maxclients 100 timeout 5
        CONFIG GET maxclients
        CONFIG GET timeout
        CONFIG SET timeout 7 nosuch 1
        CONFIG GET timeout
        CONFIG SET appendfsync always
        CONFIG GET appendfsync
        CONFIG SET stop-writes-on-bgsave-error no
        CONFIG GET stop-writes-on-bgsave-error
        ",
    );
    d.check(&[b"CONFIG", b"SET", b"save", b"3600 1 300 100"]);
    d.check(&[b"CONFIG", b"GET", b"save"]);
    d.check(&[b"CONFIG", b"SET", b"save", b""]);
    d.check(&[b"CONFIG", b"GET", b"save"]);
    // A password set now is asked of new connections; this one stays in.
    d.check_str("CONFIG SET requirepass pw");
    d.check_str("PING");
    let mut fresh_g = d.goblin.raw();
    let mut fresh_r = d.redis.raw();
    let (g, r) = goblin_tests::diff::ask_both(&mut fresh_g, &mut fresh_r, &[b"GET", b"k"]);
    assert_eq!(g, r);
    assert!(g.starts_with(b"-NOAUTH"), "{}", show(&g));
}

/// LOLWUT: the line of versions without art, and the errors, byte for byte; versions 5
/// and 6 draw pictures of redis-server's size and caption (their randomness differs).
#[test]
fn lolwut_matches_redis() {
    let mut d = Differential::new();
    d.check_lines(
        "LOLWUT\nLOLWUT 10 10\nLOLWUT VERSION 7\nLOLWUT VERSION 4\nLOLWUT VERSION 59\n\
         LOLWUT VERSION -1\nLOLWUT VERSION\nLOLWUT VERSION x\nLOLWUT VERSION 5 x\n\
         LOLWUT VERSION 5 10 x\nLOLWUT VERSION 6 10 x\nLOLWUT VERSION 6 x\nLOLWUT foo",
    );
    d.g.cmd_str("HELLO 3");
    d.r.cmd_str("HELLO 3");
    d.check_lines("LOLWUT\nLOLWUT VERSION 8 a b");
    d.g.cmd_str("HELLO 2");
    d.r.cmd_str("HELLO 2");
    let shape = |reply: &[u8]| -> (usize, Vec<usize>, String) {
        let text = String::from_utf8(reply.to_vec()).unwrap();
        let body = text.split_once("\r\n").unwrap().1;
        let lines: Vec<&str> = body.lines().collect();
        // Characters, or coloured cells (version 6).
        let width = |l: &str| match l.matches("\x1b[0m").count() {
            0 => l.chars().count(),
            cells => cells,
        };
        let widths = lines.iter().map(|l| width(l)).collect::<Vec<_>>();
        let caption = lines[lines.len().saturating_sub(2)..].join("|");
        (lines.len(), widths[..widths.len() - 2].to_vec(), caption)
    };
    for line in [
        "LOLWUT VERSION 5",
        "LOLWUT VERSION 5 40 4 6",
        "LOLWUT VERSION 5 1 1 1",
        "LOLWUT VERSION 5 5000 0 -3",
        "LOLWUT VERSION 6",
        "LOLWUT VERSION 6 30 8 x",
        "LOLWUT VERSION 6 -1 2000",
    ] {
        let (g, r) = (d.g.cmd_str(line), d.r.cmd_str(line));
        assert_eq!(shape(&g), shape(&r), "{line}");
    }
}

/// INFO's replication and CPU sections have redis-server's fields, a standalone master's
/// values where they are fixed (offsets 0, no backlog), a replication ID of 40 hex
/// digits that DEBUG CHANGE-REPL-ID changes; INFO memory names the allocator.
#[test]
fn info_replication_and_cpu_have_redis_fields() {
    let mut d = Differential::with_servers(
        Server::goblin_with(&["--enable-debug-command", "yes"]),
        Server::redis_with(&["--enable-debug-command", "yes"]),
    );
    let fields = |text: Vec<u8>| -> Vec<(String, String)> {
        String::from_utf8(text)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (g, r) = (
        fields(d.g.cmd_str("INFO replication")),
        fields(d.r.cmd_str("INFO replication")),
    );
    let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&g), names(&r));
    for ((name, ours), (_, theirs)) in g.iter().zip(&r) {
        if name == "master_replid" {
            assert!(ours.len() == 40 && ours.bytes().all(|b| b.is_ascii_hexdigit()));
        } else {
            assert_eq!(ours, theirs, "{name}");
        }
    }
    let id = |f: &[(String, String)]| f.iter().find(|(k, _)| k == "master_replid").cloned();
    assert_eq!(d.g.cmd_str("DEBUG CHANGE-REPL-ID"), b"+OK\r\n");
    let after = fields(d.g.cmd_str("INFO replication"));
    assert_ne!(id(&g), id(&after));
    let cpu = fields(d.g.cmd_str("INFO cpu"));
    for name in ["used_cpu_sys", "used_cpu_user"] {
        let value = &cpu.iter().find(|(k, _)| k == name).unwrap().1;
        assert!(value.parse::<f64>().is_ok(), "{name}:{value}");
    }
    let memory = fields(d.g.cmd_str("INFO memory"));
    assert!(memory.iter().any(|(k, _)| k == "mem_allocator"));
    // The server section: redis-server's fields in its order (test frameworks read
    // `redis_git_sha1`, `run_id`), with Goblin's two of its own.
    let (g, r) = (
        fields(d.g.cmd_str("INFO server")),
        fields(d.r.cmd_str("INFO server")),
    );
    let ours: Vec<String> = names(&g)
        .into_iter()
        .filter(|n| n != "goblin_version" && n != "threads")
        .collect();
    assert_eq!(ours, names(&r));
    let run_id = &g.iter().find(|(k, _)| k == "run_id").unwrap().1;
    assert!(run_id.len() == 40 && run_id.bytes().all(|b| b.is_ascii_hexdigit()));
}

/// INFO's clients, memory and stats sections have redis-server's fields in its order
/// (and Goblin's own, `goblin_*`). Monitoring reads `keyspace_hits`, `used_memory_peak`,
/// `mem_fragmentation_ratio`, `maxclients`, which Goblin did not show.
#[test]
fn info_clients_memory_and_stats_have_redis_fields_in_its_order() {
    let goblin = Server::goblin_threads(2);
    let redis = Server::redis();
    let (mut g, mut r) = (goblin.raw(), redis.raw());
    g.cmd(&[b"EVAL", b"return 1", b"0"]);
    let names = |raw: &mut Raw, section: &str| -> Vec<String> {
        String::from_utf8_lossy(&raw.cmd_str(&format!("INFO {section}")))
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, _)| k.to_string())
            .filter(|k| !k.starts_with("goblin_"))
            .collect()
    };
    for section in ["clients", "memory", "stats"] {
        assert_eq!(names(&mut g, section), names(&mut r, section), "{section}");
    }
    let field = |raw: &mut Raw, name: &str| -> String {
        String::from_utf8_lossy(&raw.cmd_str("INFO memory"))
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
            .unwrap_or_default()
    };
    // Values that follow from the others.
    let used: u64 = field(&mut g, "used_memory").parse().expect("used_memory");
    let peak: u64 = field(&mut g, "used_memory_peak").parse().expect("peak");
    assert!(peak >= used, "peak {peak} used {used}");
    let lua: u64 = field(&mut g, "used_memory_lua").parse().expect("lua");
    assert!(lua > 0, "a script ran: its interpreter holds memory");
    let system: u64 = field(&mut g, "total_system_memory")
        .parse()
        .expect("system");
    assert!(system > used);
}

/// After SCRIPT FLUSH, `used_memory_lua` counts only the interpreters made since (each
/// thread makes its new one when it next runs a script), as Redis's reset interpreter:
/// 10,000 runs of a script on one key stay under Redis's own bound of 100 kB (Redis's
/// "EVAL does not leak in the Lua stack"), where every thread's old interpreter counted.
#[test]
fn script_flush_resets_the_lua_memory_as_redis_does() {
    for server in [Server::goblin_threads(4), Server::redis()] {
        let kind = server.kind;
        let mut raw = server.raw();
        // An interpreter on every thread: keys on every shard.
        for i in 0..32 {
            let key = format!("k{i}");
            raw.cmd(&[
                b"EVAL",
                b"return redis.call('incr', KEYS[1])",
                b"1",
                key.as_bytes(),
            ]);
        }
        assert_eq!(raw.cmd_str("SCRIPT FLUSH"), b"+OK\r\n");
        let mut bytes = Vec::new();
        for _ in 0..10_000 {
            bytes.extend(goblin_tests::encode(&[
                b"EVAL",
                b"return redis.call('incr', KEYS[1])",
                b"1",
                b"x",
            ]));
        }
        raw.send(&bytes);
        for _ in 0..10_000 {
            raw.reply();
        }
        assert_eq!(raw.cmd_str("GET x"), b"$5\r\n10000\r\n");
        let info = String::from_utf8_lossy(&raw.cmd_str("INFO memory")).into_owned();
        let lua: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory_lua:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{info}"));
        assert!(lua > 0 && lua < 100 * 1024, "{kind:?}: {lua}");
    }
}

/// With `always-show-logo yes` the log shows a logo with redis-server's ` Port: N` and
/// ` PID: N` lines, and the log goes to standard output (`logfile ""`), as redis-server's
/// does: Redis's own test framework starts a server and waits for those lines there.
#[test]
fn the_log_goes_to_standard_output_with_the_logo_when_asked() {
    use std::io::{BufRead as _, BufReader};
    use std::process::{Command, Stdio};
    let dir = goblin_tests::scratch_dir("logo");
    let mut child = Command::new(goblin_tests::goblin_binary())
        .args(["--bind", "127.0.0.1", "--port", "0", "--save", ""])
        .args(["--always-show-logo", "yes", "--loglevel", "verbose"])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen: Vec<String> = Vec::new();
    while !seen
        .iter()
        .any(|l| l.contains("Ready to accept connections"))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let first = seen.first().cloned().unwrap_or_default();
    assert!(first.contains(" ready on 127.0.0.1:"), "{first}");
    let port = first.rsplit(':').next().unwrap().to_string();
    let log = seen.join("\n");
    assert!(log.contains(&format!(" PID: {pid}\n")), "{log}");
    assert!(log.contains(&format!(" Port: {port}\n")), "{log}");
    assert!(!log.contains("Running mode="), "{log}");
}

/// The encodings' thresholds act as in redis-server: CONFIG SET (under the ziplist names
/// too) changes when a hash, sorted set or set takes its large form — on a write, on a
/// STORE command's destination, on HINCRBYFLOAT's result — and OBJECT ENCODING shows it.
#[test]
fn encoding_thresholds_set_by_config_act_as_in_redis() {
    goblin_tests::diff::for_each_thread_count(|d, ctx| {
        goblin_tests::diff::script(
            d,
            &[],
            ctx,
            "
            FLUSHALL
            CONFIG SET zset-max-ziplist-entries 1
            ZADD z 1 a
            OBJECT ENCODING z
            ZADD z 2 b
            OBJECT ENCODING z
            CONFIG SET zset-max-listpack-entries 128
            ZADD z2 1 a 2 b
            OBJECT ENCODING z2
            ZRANGESTORE z3 z2 0 -1
            OBJECT ENCODING z3
            CONFIG SET zset-max-listpack-entries 1
            ZRANGESTORE z4 z2 0 -1
            OBJECT ENCODING z4
            CONFIG SET zset-max-listpack-entries 0
            ZADD z5 1 a
            OBJECT ENCODING z5
            CONFIG SET zset-max-listpack-entries 128
            CONFIG SET zset-max-listpack-value 3
            ZADD z6 1 abcd
            OBJECT ENCODING z6
            CONFIG SET hash-max-listpack-entries 2
            HSET h a 1 b 2
            OBJECT ENCODING h
            HSET h c 3
            OBJECT ENCODING h
            CONFIG SET hash-max-listpack-value 4
            HSET h2 a 12345
            OBJECT ENCODING h2
            HSET h3 a 1.5
            HINCRBYFLOAT h3 a 0.0000000001
            OBJECT ENCODING h3
            CONFIG SET set-max-intset-entries 2
            SADD s 1 2
            OBJECT ENCODING s
            SADD s 3
            OBJECT ENCODING s
            SADD s4 1 2 3
            OBJECT ENCODING s4
            SADD s5 1
            SADD s6 2
            SUNIONSTORE s7 s5 s6
            OBJECT ENCODING s7
            CONFIG SET set-max-intset-entries 0
            SADD s8 1
            OBJECT ENCODING s8
            CONFIG SET zset-max-listpack-entries 1000
            CONFIG GET zset-max-listpack-entries
            CONFIG SET hash-max-listpack-entries 512
            CONFIG SET hash-max-listpack-value 1000000000
            HSET big f1 127 f2 abc
            HSET big long xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
            HSET big f3 2147483647 f4 0
            OBJECT ENCODING big
            HGETALL big
            HSET big long y
            HGETALL big
            CONFIG SET hash-max-listpack-value 64
            CONFIG SET zset-max-listpack-entries 128
            CONFIG SET zset-max-listpack-value 64
            CONFIG SET set-max-intset-entries 512
            ",
        );
    });
}

/// MODULE, REPLICAOF, SLAVEOF and WAIT answer as a standalone redis-server without
/// modules or replicas answers them (its defaults: `enable-module-command no`).
#[test]
fn module_replicaof_and_wait_match_a_standalone_redis() {
    goblin_tests::diff::for_each_thread_count(|d, ctx| {
        goblin_tests::diff::script(
            d,
            &[],
            ctx,
            "
            MODULE HELP
            MODULE LIST
            MODULE LOAD /nonexistent.so
            MODULE LOADEX /x.so CONFIG a b ARGS c
            MODULE UNLOAD foo
            MODULE NOPE
            MODULE
            REPLICAOF NO ONE
            SLAVEOF no one
            REPLICAOF no
            REPLICAOF host port
            REPLICAOF 127.0.0.1 70000
            ROLE
            WAIT 0 0
            WAIT -1 0
            WAIT x 0
            WAIT 1 -1
            WAIT 1 x
            WAIT 1 1.5
            WAIT 1 20
            WAIT
            MULTI
            WAIT 3 0
            EXEC
            CONFIG GET enable-module-command
            CONFIG SET enable-module-command yes
            ",
        );
    });
}

/// WAIT for replicas that never acknowledge blocks for its timeout (a blocked client
/// meanwhile), forever at 0 until CLIENT UNBLOCK, and answers 0: as redis-server without
/// replicas.
#[test]
fn wait_blocks_for_its_timeout_as_redis_does() {
    for server in [Server::redis(), Server::goblin_threads(3)] {
        let mut raw = server.raw();
        let started = std::time::Instant::now();
        assert_eq!(raw.cmd_str("WAIT 1 200"), b":0\r\n");
        let took = started.elapsed();
        assert!(took >= std::time::Duration::from_millis(190), "{took:?}");
        let mut waiter = server.raw();
        let id = String::from_utf8(waiter.cmd_str("CLIENT ID")).unwrap();
        let id = id.trim_start_matches(':').trim_end().to_string();
        waiter.send(&goblin_tests::encode(&[b"WAIT", b"2", b"0"]));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !String::from_utf8_lossy(&raw.cmd_str("INFO clients")).contains("blocked_clients:1") {
            assert!(std::time::Instant::now() < deadline, "WAIT never blocked");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(raw.cmd(&[b"CLIENT", b"UNBLOCK", id.as_bytes()]), b":1\r\n");
        assert_eq!(waiter.reply(), b":0\r\n");
    }
}
