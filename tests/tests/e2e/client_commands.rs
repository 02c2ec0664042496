//! MONITOR, CLIENT REPLY and CLIENT PAUSE / UNPAUSE, differentially against redis-server:
//! the same commands from clients on several threads, the same lines, replies and waits.

use std::time::{Duration, Instant};

use goblin_tests::{Raw, Server, encode};

/// Both servers, goblin with clients spread over threads.
fn servers() -> Vec<Server> {
    vec![Server::goblin_threads(3), Server::redis()]
}

/// Everything that arrives on `c` within `wait`.
fn drain(c: &mut Raw, wait: Duration) -> Vec<u8> {
    std::thread::sleep(wait);
    let (bytes, _) = c.read_to_close(Duration::from_millis(100));
    bytes
}

/// A MONITOR line with its time and client port replaced, so that two servers' lines
/// compare: `+T [db ADDR] "set" "k" "v"`.
fn normalise(lines: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(lines)
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|line| {
            let Some((time, rest)) = line.split_once(" [") else {
                return line.to_string();
            };
            let (db, rest) = rest.split_once(' ').unwrap_or_default();
            let (addr, args) = rest.split_once("] ").unwrap_or_default();
            let stamp_ok = time.starts_with('+')
                && time[1..].split_once('.').is_some_and(|(s, us)| {
                    s.parse::<u64>().is_ok() && us.len() == 6 && us.parse::<u32>().is_ok()
                });
            // (A script's calls come from `lua`.)
            let addr_ok = addr.starts_with("127.0.0.1:") || addr == "lua";
            format!("+T({stamp_ok}) [{db} ADDR({addr_ok})] {args}")
        })
        .collect()
}

/// What a MONITOR client sees of another client's commands, on several threads: every
/// command that ran (not those refused before running, not administrative ones), with
/// its database, arguments quoted as Redis quotes them, secrets redacted, MULTI's
/// commands as EXEC runs them (none of a DISCARDed one), EVAL and FCALL before the
/// commands their scripts call (shown from `lua`, on a shard or under a plan).
#[test]
fn monitor_shows_what_redis_shows() {
    let script: &[&[&[u8]]] = &[
        &[b"set", b"k", b"v"],
        &[b"GET", b"k"],
        &[b"select", b"2"],
        &[b"set", b"a\nb", b"q\"x\x01\xff"],
        &[b"auth", b"pw"],
        &[b"hello", b"2", b"auth", b"default", b"pw"],
        &[b"multi"],
        &[b"set", b"x", b"1"],
        &[b"incr", b"x"],
        &[b"exec"],
        &[b"multi"],
        &[b"set", b"y", b"1"],
        &[b"discard"],
        &[b"config", b"get", b"maxmemory"],
        &[b"client", b"list"],
        &[b"nosuch"],
        &[b"get"],
        &[b"ping"],
        &[b"client", b"setname", b"foo"],
        &[b"mget", b"a", b"b", b"c", b"d", b"e", b"f"],
        &[b"del", b"a", b"b", b"c", b"d", b"e", b"f"],
        &[b"flushall"],
        // A script's commands, after it, from the Lua client, in the database it selects.
        &[
            b"eval",
            b"redis.call('set', KEYS[1], 'v') redis.call('select', '3') return redis.call('get', KEYS[1])",
            b"1",
            b"s",
        ],
        &[b"evalsha", b"0000000000000000000000000000000000000000", b"0"],
        // One that touches an undeclared key: with several threads, run under its plan.
        &[
            b"eval",
            b"redis.call('set', KEYS[1], 'x') return redis.call('get', ARGV[1])",
            b"1",
            b"mon1",
            b"mon2",
        ],
        &[
            b"function",
            b"load",
            b"#!lua name=mlib\nredis.register_function('mf', function(keys) return redis.call('get', keys[1]) end)",
        ],
        &[b"fcall", b"mf", b"1", b"s"],
        &[b"monitor"],
    ];
    let mut seen = Vec::new();
    for server in servers() {
        let mut m = Raw::connect(server.port);
        assert_eq!(m.cmd(&[b"MONITOR"]), b"+OK\r\n");
        // Its own later commands are shown too; a second MONITOR has no reply.
        m.send(&encode(&[b"MONITOR"]));
        let mut clients: Vec<Raw> = (0..3).map(|_| Raw::connect(server.port)).collect();
        for (i, args) in script.iter().enumerate() {
            // One client per thread (goblin deals them round-robin), in turn.
            let c = &mut clients[i % 3];
            c.cmd(args);
        }
        let lines = normalise(&drain(&mut m, Duration::from_millis(500)));
        seen.push(lines);
    }
    assert_eq!(seen[0], seen[1], "goblin, then redis");
    assert!(seen[0].len() > 15, "{:?}", seen[0]);
    assert!(
        seen[0]
            .iter()
            .all(|l| l.contains("+T(true)") && l.contains("ADDR(true)"))
    );
}

/// CLIENT REPLY OFF / ON / SKIP over a pipeline of local and remote keys, errors included.
#[test]
fn client_reply_drops_replies_as_redis_does() {
    let mut seen = Vec::new();
    for server in servers() {
        let mut c = Raw::connect(server.port);
        let script: &[&[&[u8]]] = &[
            &[b"client", b"reply", b"off"],
            &[b"set", b"a", b"1"],
            &[b"get", b"a"],
            &[b"mget", b"a", b"b", b"c", b"d"],
            &[b"nosuch"],
            &[b"client", b"reply", b"on"],
            &[b"get", b"a"],
            &[b"client", b"reply", b"skip"],
            &[b"get", b"a"],
            &[b"mget", b"a", b"b", b"c", b"d"],
            &[b"client", b"reply", b"skip"],
            &[b"client", b"reply", b"skip"],
            &[b"get", b"a"],
            &[b"incr", b"a"],
            &[b"client", b"reply", b"skip"],
            &[b"client", b"reply", b"on"],
            &[b"client", b"reply", b"bad"],
            &[b"client", b"reply", b"off"],
            &[b"client", b"list"],
            &[b"keys", b"*"],
            &[b"dbsize"],
            &[b"client", b"reply", b"on"],
            &[b"ping"],
        ];
        let bytes: Vec<u8> = script.iter().flat_map(|a| encode(a)).collect();
        c.send(&bytes);
        seen.push(drain(&mut c, Duration::from_millis(500)));
    }
    assert_eq!(
        String::from_utf8_lossy(&seen[0]),
        String::from_utf8_lossy(&seen[1])
    );
    assert!(seen[0].ends_with(b"+PONG\r\n"));
}

/// How long a command takes to answer.
fn timed(c: &mut Raw, args: &[&[u8]]) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    let reply = c.cmd(args);
    (reply, start.elapsed())
}

/// A command held by a pause that ends before the server next sleeps goes on at once: a
/// server held a command for good when a pause of 1 ms had ended between the command's
/// timestamp and the loop's sleep (found by redis-py's `test_client_pause`; 94 rounds of
/// this loop were enough to hang the debug build before the fix). Each round's replies
/// must come within the reply timeout. (redis-server lets held clients go on from its
/// cron, ten times a second: a few rounds of it show the same replies.)
#[test]
fn commands_held_by_a_short_pause_go_on() {
    for server in servers() {
        let mut c = Raw::connect(server.port);
        let rounds = match server.kind {
            goblin_tests::Kind::Goblin => 500,
            goblin_tests::Kind::Redis => 5,
        };
        for round in 0..rounds {
            c.send(b"CLIENT PAUSE 1\r\nPING\r\n");
            for want in [&b"+OK\r\n"[..], b"+PONG\r\n"] {
                let reply = c
                    .try_reply()
                    .unwrap_or_else(|e| panic!("{:?}, round {round}: no reply: {e}", server.kind));
                assert_eq!(reply, want, "{:?}, round {round}", server.kind);
            }
        }
    }
}

/// CLIENT PAUSE WRITE holds writes (queued in MULTI too) and not reads; ALL holds
/// everything; a pause ends by itself or with CLIENT UNPAUSE; keys do not expire
/// actively meanwhile; its argument errors are redis-server's.
#[test]
fn client_pause_holds_what_redis_holds() {
    for server in servers() {
        let kind = server.kind;
        let mut a = Raw::connect(server.port);
        let mut b = Raw::connect(server.port);
        for (args, want) in [
            (&[&b"client"[..], b"pause", b"abc"][..], &b"-ERR timeout is not an integer or out of range\r\n"[..]),
            (&[b"client", b"pause", b"-1"], b"-ERR timeout is negative\r\n"),
            (&[b"client", b"pause", b"1", b"x"], b"-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"),
            (
                &[b"client", b"pause", b"1", b"all", b"x"],
                b"-ERR unknown subcommand or wrong number of arguments for 'pause'. Try CLIENT HELP.\r\n",
            ),
            (&[b"client", b"pause", b"x", b"x"], b"-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"),
        ] {
            assert_eq!(a.cmd(args), want, "{kind:?} {args:?}");
        }
        assert_eq!(a.cmd(&[b"set", b"vol", b"1", b"px", b"200"]), b"+OK\r\n");
        assert_eq!(a.cmd(&[b"client", b"pause", b"1500", b"write"]), b"+OK\r\n");
        // Reads go on; a write waits for the end.
        let (reply, took) = timed(&mut b, &[b"get", b"vol"]);
        assert_eq!(reply, b"$1\r\n1\r\n", "{kind:?}");
        assert!(
            took < Duration::from_millis(300),
            "{kind:?} read held {took:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
        // Expired, but not actively deleted while paused: still counted. Read, it is
        // missing, and stays (Redis's "both active and passive expires are skipped").
        assert_eq!(b.cmd(&[b"dbsize"]), b":1\r\n", "{kind:?}");
        assert_eq!(b.cmd(&[b"get", b"vol"]), b"$-1\r\n", "{kind:?}");
        assert_eq!(b.cmd(&[b"exists", b"vol"]), b":0\r\n", "{kind:?}");
        assert_eq!(b.cmd(&[b"dbsize"]), b":1\r\n", "{kind:?}");
        assert_eq!(b.cmd(&[b"multi"]), b"+OK\r\n");
        let (reply, took) = timed(&mut b, &[b"set", b"x", b"1"]);
        assert_eq!(reply, b"+QUEUED\r\n", "{kind:?}");
        assert!(
            took > Duration::from_millis(500),
            "{kind:?} write queued after {took:?}"
        );
        assert_eq!(b.cmd(&[b"exec"]), b"*1\r\n+OK\r\n");
        // After the pause, the key expires actively.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(b.cmd(&[b"dbsize"]), b":1\r\n", "{kind:?}");
        // UNPAUSE lets the waiting write go at once.
        assert_eq!(
            a.cmd(&[b"client", b"pause", b"20000", b"write"]),
            b"+OK\r\n"
        );
        b.send(&encode(&[b"incr", b"x"]));
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        assert_eq!(a.cmd(&[b"client", b"unpause"]), b"+OK\r\n");
        assert_eq!(b.reply(), b":2\r\n");
        assert!(start.elapsed() < Duration::from_secs(2), "{kind:?}");
        // ALL holds reads too (the pausing client's own as well).
        assert_eq!(a.cmd(&[b"client", b"pause", b"800", b"all"]), b"+OK\r\n");
        let (reply, took) = timed(&mut b, &[b"get", b"x"]);
        assert_eq!(reply, b"$1\r\n2\r\n");
        assert!(
            took > Duration::from_millis(400),
            "{kind:?} read under ALL after {took:?}"
        );
        assert_eq!(a.cmd(&[b"ping"]), b"+PONG\r\n");
    }
}

/// CLIENT KILL SKIPME no kills the asker too, which gets its reply first and is closed
/// after it, as redis-server answers (Redis's "CLIENT KILL SKIPME YES/NO will kill all
/// clients": Goblin closed the asker before its reply).
#[test]
fn client_kill_skipme_no_answers_the_asker_before_closing_it() {
    for server in servers() {
        let kind = server.kind;
        let mut me = Raw::connect(server.port);
        let mut others: Vec<Raw> = (0..2).map(|_| Raw::connect(server.port)).collect();
        for o in &mut others {
            assert_eq!(o.cmd(&[b"PING"]), b"+PONG\r\n");
        }
        assert_eq!(
            me.cmd(&[b"CLIENT", b"KILL", b"SKIPME", b"yes"]),
            b":2\r\n",
            "{kind:?}"
        );
        let mut more: Vec<Raw> = (0..2).map(|_| Raw::connect(server.port)).collect();
        for o in &mut more {
            assert_eq!(o.cmd(&[b"PING"]), b"+PONG\r\n");
        }
        me.send(&encode(&[b"CLIENT", b"KILL", b"SKIPME", b"no"]));
        let (bytes, closed) = me.read_to_close(Duration::from_secs(2));
        assert_eq!(bytes, b":3\r\n", "{kind:?}");
        assert!(closed, "{kind:?}");
    }
}

/// INFO's `blocked_clients` of a server.
fn blocked_clients(c: &mut Raw) -> String {
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"clients"])).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .unwrap_or_default()
        .to_string()
}

/// CLIENT PAUSE WRITE holds what may be propagated as redis-server does (Redis's
/// "Test special commands are paused by RO", "scripts are blocked by pause RO", "RO
/// scripts are not blocked"): PFCOUNT, PUBLISH, a script without a shebang or with one
/// that may write, a transaction holding one; not a script or function declared
/// `no-writes`, nor EVAL_RO; the clients it holds count as blocked in INFO. A read-only
/// script may not call PUBLISH or PFCOUNT.
#[test]
fn client_pause_write_holds_what_may_be_propagated_as_redis_does() {
    for server in servers() {
        let kind = server.kind;
        let mut admin = Raw::connect(server.port);
        assert_eq!(admin.cmd(&[b"PFADD", b"hll", b"a"]), b":1\r\n");
        let f1 = b"#!lua name=f1\nredis.register_function{function_name='f1', callback=function() return 'hello' end, flags={'no-writes'}}";
        assert_eq!(admin.cmd(&[b"FUNCTION", b"LOAD", f1]), b"$2\r\nf1\r\n");
        for script in [
            &b"return redis.call('publish','ch','m')"[..],
            b"return redis.call('pfcount','hll')",
        ] {
            let reply = admin.cmd(&[b"EVAL_RO", script, b"0"]);
            assert!(
                reply.starts_with(b"-ERR Write commands are not allowed from read-only scripts."),
                "{kind:?}: {}",
                String::from_utf8_lossy(&reply)
            );
        }
        // (Queued before the pause: a command that may write is held as it comes.)
        let mut tx = Raw::connect(server.port);
        assert_eq!(tx.cmd(&[b"MULTI"]), b"+OK\r\n");
        assert_eq!(tx.cmd(&[b"EVAL", b"return 6", b"0"]), b"+QUEUED\r\n");
        assert_eq!(
            admin.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]),
            b"+OK\r\n"
        );
        // Not held.
        let mut free = Raw::connect(server.port);
        for (args, want) in [
            (
                &[&b"EVAL"[..], b"#!lua flags=no-writes\nreturn 1", b"0"][..],
                &b":1\r\n"[..],
            ),
            (&[b"EVAL_RO", b"return 2", b"0"], b":2\r\n"),
            (&[b"FCALL", b"f1", b"0"], b"$5\r\nhello\r\n"),
            (&[b"EXISTS", b"hll"], b":1\r\n"),
        ] {
            let (reply, took) = timed(&mut free, args);
            assert_eq!(reply, want, "{kind:?} {args:?}");
            assert!(took < Duration::from_millis(500), "{kind:?} {args:?} held");
        }
        assert_eq!(free.cmd(&[b"MULTI"]), b"+OK\r\n");
        free.cmd(&[b"EVAL", b"#!lua flags=no-writes\nreturn 3", b"0"]);
        assert_eq!(free.cmd(&[b"EXEC"]), b"*1\r\n:3\r\n", "{kind:?}");
        assert_eq!(blocked_clients(&mut admin), "0", "{kind:?}");
        // Held, one client each.
        let held: Vec<(&[&[u8]], &[u8])> = vec![
            (&[b"PFCOUNT", b"hll"], b":1\r\n"),
            (&[b"PUBLISH", b"ch", b"m"], b":0\r\n"),
            (&[b"EVAL", b"return 4", b"0"], b":4\r\n"),
            (&[b"EVAL", b"#!lua\nreturn 5", b"0"], b":5\r\n"),
            (&[b"SET", b"k", b"v"], b"+OK\r\n"),
        ];
        let mut clients = Vec::new();
        for (args, _) in &held {
            let mut c = Raw::connect(server.port);
            c.send(&encode(args));
            clients.push(c);
        }
        tx.send(&encode(&[b"EXEC"]));
        let deadline = Instant::now() + Duration::from_secs(5);
        while blocked_clients(&mut admin) != "6" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(blocked_clients(&mut admin), "6", "{kind:?}");
        assert_eq!(admin.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
        for ((args, want), c) in held.iter().zip(&mut clients) {
            assert_eq!(c.reply(), *want, "{kind:?} {args:?}");
        }
        assert_eq!(tx.reply(), b"*1\r\n:6\r\n", "{kind:?}");
        assert_eq!(blocked_clients(&mut admin), "0", "{kind:?}");
        // A held client that goes away is no longer counted.
        assert_eq!(
            admin.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]),
            b"+OK\r\n"
        );
        let mut gone = Raw::connect(server.port);
        gone.send(&encode(&[b"SET", b"k", b"w"]));
        while blocked_clients(&mut admin) != "1" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(gone);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(blocked_clients(&mut admin), "0", "{kind:?}");
        assert_eq!(admin.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    }
}

/// CLIENT LIST and CLIENT KILL by TYPE: a subscribed client is a `pubsub` one, not a
/// `normal` one; a client inside MULTI shows the command it queued last — as
/// redis-server shows them (what is compared: which clients each filter finds, and the
/// `cmd` field).
#[test]
fn client_types_and_the_last_command_are_redis_ones() {
    let transcript = |s: &Server| -> Vec<String> {
        let mut admin = s.raw();
        let mut sub = s.raw();
        let mut queued = s.raw();
        let mut out = Vec::new();
        sub.cmd_str("CLIENT SETNAME listener");
        sub.cmd_str("SUBSCRIBE ch");
        queued.cmd_str("CLIENT SETNAME queuer");
        for line in ["MULTI", "SET x 1", "GET x"] {
            queued.cmd_str(line);
        }
        let names = |reply: Vec<u8>| -> String {
            let text = String::from_utf8_lossy(&reply).into_owned();
            let mut names: Vec<String> = text
                .lines()
                .filter_map(|l| l.split(" name=").nth(1))
                .filter_map(|rest| rest.split(' ').next())
                .map(String::from)
                .collect();
            names.sort();
            names.join(",")
        };
        out.push(names(admin.cmd_str("CLIENT LIST TYPE pubsub")));
        out.push(names(admin.cmd_str("CLIENT LIST TYPE normal")));
        out.push(names(admin.cmd_str("CLIENT LIST TYPE replica")));
        let list = String::from_utf8_lossy(&admin.cmd_str("CLIENT LIST")).into_owned();
        let queuer = list
            .lines()
            .find(|l| l.contains("name=queuer"))
            .unwrap_or("");
        out.push(
            queuer
                .split(' ')
                .filter(|f| f.starts_with("cmd=") || f.starts_with("multi="))
                .collect::<Vec<_>>()
                .join(" "),
        );
        out.push(String::from_utf8_lossy(&admin.cmd_str("CLIENT KILL TYPE pubsub")).into_owned());
        out.push(names(admin.cmd_str("CLIENT LIST TYPE pubsub")));
        out
    };
    let servers = servers();
    let got = transcript(&servers[0]);
    let want = transcript(&servers[1]);
    assert_eq!(got, want);
    assert_eq!(want[0], "listener", "{want:?}");
}

/// The caller's `qbuf` in CLIENT LIST and CLIENT INFO holds the command it runs, as
/// redis-server's query buffer still does (Redis's introspection tests match
/// `qbuf=26` for `CLIENT LIST`), on every thread count.
#[test]
fn the_callers_query_buffer_holds_its_command() {
    let qbuf = |reply: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(reply)
            .split_whitespace()
            .filter(|f| f.starts_with("qbuf="))
            .map(String::from)
            .collect()
    };
    for server in [Server::redis(), Server::goblin()] {
        let mut raw = server.raw();
        // The harness's readiness check closed its connection: once the server has
        // seen it go, the caller is the one client.
        let deadline = Instant::now() + Duration::from_secs(5);
        while qbuf(&raw.cmd_str("CLIENT LIST")).len() > 1 {
            assert!(Instant::now() < deadline, "{}", server.port);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            qbuf(&raw.cmd_str("CLIENT LIST")),
            ["qbuf=26"],
            "{}",
            server.port
        );
        assert_eq!(
            qbuf(&raw.cmd_str("CLIENT INFO")),
            ["qbuf=26"],
            "{}",
            server.port
        );
        let mut other = server.raw();
        other.cmd_str("PING");
        let list = raw.cmd_str("CLIENT LIST");
        assert_eq!(
            qbuf(&list),
            ["qbuf=26", "qbuf=0"],
            "{}",
            String::from_utf8_lossy(&list)
        );
    }
}
