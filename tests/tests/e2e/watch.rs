//! WATCH and UNWATCH: what makes EXEC fail (a null array), differentially against
//! redis-server 7.0 byte for byte — keys changed by another client or the same one,
//! deleted, expired (lazily, actively, or only past their expiry), stale keys, flushes,
//! SWAPDB, databases, eviction, what unwatches — with the keys spread over every shard;
//! then goblin-server alone: watches across threads, and many clients racing optimistic
//! increments.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::cmd::{Cmd, script_commands, script_lines, substitute, words};
use goblin_tests::diff::{How, compare_pipeline, verdict};
use goblin_tests::keys::{keys_on, spread};
use goblin_tests::reply::bulk_or_nil;
use goblin_tests::{Differential, Raw, Server, default_threads, show};

/// Twelve keys, `K0`…`K11` in the scripts: with 4 threads `Ki` lives on shard `i % 4`.
fn keys() -> Vec<String> {
    spread("w", 4, 3)
}

/// How long a script waits for a server to expire its keys actively.
const EXPIRY_WAIT: Duration = Duration::from_secs(10);

/// Both servers (DEBUG allowed: stale keys need active expiry off), goblin-server with the
/// default thread count, and three clients `a`, `b`, `c`, each connected to both.
struct Script {
    /// The servers, running while the script does.
    _servers: (Server, Server),
    /// Each client's connections: (goblin-server, redis-server).
    clients: Vec<(Raw, Raw)>,
}

impl Script {
    fn new() -> Script {
        let threads = default_threads().to_string();
        let goblin = Server::goblin_with(&["--threads", &threads, "--enable-debug-command", "yes"]);
        let redis = Server::redis_with(&["--enable-debug-command", "yes"]);
        let clients = (0..3).map(|_| (goblin.raw(), redis.raw())).collect();
        Script {
            _servers: (goblin, redis),
            clients,
        }
    }

    /// Runs `text` on both servers, comparing every reply byte for byte. A line is
    /// `x: COMMAND …` (client `x`; `x:~ COMMAND …` sends without comparing, for HELLO),
    /// `sleep MS`, or `await-empty` (until each server's database 0 holds no key, seen
    /// from client `c`: active expiry did its work). `K0`…`K11` stand for [`keys`].
    fn run(&mut self, name: &str, text: &str) {
        let keys = keys();
        for (n, line) in script_lines(text).enumerate() {
            if let Some(ms) = line.strip_prefix("sleep ") {
                std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
                continue;
            }
            if line == "await-empty" {
                let (g, r) = &mut self.clients[2];
                for (raw, who) in [(g, "goblin-server"), (r, "redis-server")] {
                    let start = Instant::now();
                    while raw.cmd(&[b"DBSIZE"]) != b":0\r\n" {
                        assert!(
                            start.elapsed() < EXPIRY_WAIT,
                            "{name}: {who} did not expire its keys"
                        );
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                continue;
            }
            let (who, command) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("{name}: no client in {line:?}"));
            let (compared, command) = match command.strip_prefix('~') {
                Some(rest) => (false, rest),
                None => (true, command),
            };
            let client = match who.trim() {
                "a" => 0,
                "b" => 1,
                "c" => 2,
                other => panic!("{name}: no client {other:?}"),
            };
            let args = substitute(words(command), &keys);
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let (g, r) = &mut self.clients[client];
            let want = r.cmd(&refs);
            let got = g.cmd(&refs);
            if compared && let Err(e) = verdict(&got, &want, How::Exact, &args) {
                panic!("{name}, line {} ({line}): {e}", n + 1);
            }
        }
    }
}

/// What changes a watched key, and what does not: EXEC answers a null array (and runs
/// nothing) after a change by another client or by the same one, a delete, an expiry
/// set, a key created, a transaction of another client, RENAME, MOVE, COPY; it runs
/// after writes that change nothing. Several keys over every shard, watched at once or
/// in several WATCHes.
#[test]
fn watch_sees_changes_as_redis_does() {
    let mut s = Script::new();
    s.run(
        "unmodified",
        "
        a: SET K0 1
        a: WATCH K0
        a: MULTI
        a: GET K0
        a: INCR K0
        a: EXEC
        a: WATCH K0 K1 K2 K3 K4 K5 K6 K7
        a: WATCH K8
        a: MULTI
        a: MGET K0 K5 K8
        a: EXEC
        ",
    );
    s.run(
        "changed by another client",
        "
        a: WATCH K0
        b: SET K0 2
        a: MULTI
        a: SET K0 3
        a: EXEC
        a: GET K0
        ",
    );
    s.run(
        "changed by the same client",
        "
        a: WATCH K0
        a: SET K0 4
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K0
        a: MULTI
        a: SET K0 5
        a: EXEC
        a: GET K0
        ",
    );
    s.run(
        "deleted, given an expiry, created",
        "
        a: WATCH K0
        b: DEL K0
        a: MULTI
        a: PING
        a: EXEC
        a: SET K1 x
        a: WATCH K1
        b: EXPIRE K1 100
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K2
        b: SET K2 new
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K3
        b: DEL K3
        b: GET K3
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
    s.run(
        "one of many keys, over every shard",
        "
        a: WATCH K0 K1 K2 K3
        b: SET K3 x
        a: MULTI
        a: SET K0 y
        a: EXEC
        a: GET K0
        a: WATCH K4
        a: WATCH K5 K6
        a: WATCH K7 K4
        b: LPUSH K6 e
        a: MULTI
        a: SET K0 z
        a: EXEC
        a: GET K0
        a: WATCH K8 K9 K10 K11
        b: MSET K1 1 K2 2 K3 3
        a: MULTI
        a: MGET K8 K11
        a: EXEC
        ",
    );
    s.run(
        "transactions and moves",
        "
        a: WATCH K0
        b: MULTI
        b: SET K0 t
        b: SET K1 t
        b: EXEC
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K1
        b: RENAME K1 K2
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K2
        b: RENAME K0 K2
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K2
        b: MOVE K2 3
        a: MULTI
        a: PING
        a: EXEC
        b: SET K4 v
        a: WATCH K4 K5
        b: COPY K4 K6
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K6
        b: COPY K4 K6 REPLACE
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
    s.run(
        "writes that change nothing",
        "
        b: FLUSHALL
        b: SADD K0 m
        b: SET K1 1
        b: ZADD K2 1 m
        b: RPUSH K3 e
        a: WATCH K0 K1 K2 K3 K4
        b: SADD K0 m
        b: SET K1 2 NX
        b: ZADD K2 1 m
        b: LREM K3 0 nothing
        b: PERSIST K1
        b: EXPIRE K1 100 XX
        b: RENAME K1 K1
        b: LPOP K4
        b: DEL K4
        b: GET K1
        b: TOUCH K1
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K1
        b: HSET K5 f v
        b: INCRBY K1 0
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
}

/// Expiry: a watched key that expires (lazily, on access, or actively) fails EXEC, and so
/// does one past its expiry that nothing removed yet; a key already stale when watched
/// does not, whether it is then removed (by access, DEL, FLUSHDB) or not — but written,
/// it does.
/// Streams: an XADD, a trimming XTRIM, an XDEL and a stream created by XGROUP CREATE
/// MKSTREAM make EXEC fail; what Redis 7.0 changes without telling WATCH — a consumer
/// group's state (XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, every XGROUP subcommand on an
/// existing stream) and XSETID — does not.
#[test]
fn watch_and_streams_match_redis() {
    let mut s = Script::new();
    let setup = "
        c: DEL K0 K1
        c: XADD K0 1-1 f v
        c: XGROUP CREATE K0 g 0
        c: XREADGROUP GROUP g c STREAMS K0 >
        a: WATCH K0 K1
        ";
    for (name, change) in [
        ("XADD", "b: XADD K0 2-1 f v"),
        ("XTRIM", "b: XTRIM K0 MAXLEN 0"),
        ("XDEL", "b: XDEL K0 1-1"),
        ("XGROUP CREATE MKSTREAM", "b: XGROUP CREATE K1 g 0 MKSTREAM"),
        ("XREADGROUP >", "b: XREADGROUP GROUP g d STREAMS K0 >"),
        ("XREADGROUP history", "b: XREADGROUP GROUP g c STREAMS K0 0"),
        ("XACK", "b: XACK K0 g 1-1"),
        ("XCLAIM", "b: XCLAIM K0 g d 0 1-1"),
        ("XAUTOCLAIM", "b: XAUTOCLAIM K0 g e 0 0"),
        ("XGROUP CREATE", "b: XGROUP CREATE K0 g2 0"),
        ("XGROUP SETID", "b: XGROUP SETID K0 g 0"),
        ("XGROUP CREATECONSUMER", "b: XGROUP CREATECONSUMER K0 g z"),
        ("XGROUP DELCONSUMER", "b: XGROUP DELCONSUMER K0 g c"),
        ("XGROUP DESTROY", "b: XGROUP DESTROY K0 g"),
        ("XSETID", "b: XSETID K0 9-9 ENTRIESADDED 5"),
        ("a no-op XTRIM", "b: XTRIM K0 MAXLEN 10"),
    ] {
        let text = format!(
            "{setup}
            {change}
            a: MULTI
            a: XLEN K0
            a: EXEC
            "
        );
        s.run(name, &text);
    }
}

#[test]
fn watch_and_expiry_match_redis() {
    let mut s = Script::new();
    s.run(
        "past its expiry",
        "
        a: DEBUG SET-ACTIVE-EXPIRE 0
        a: SET K0 1 PX 100
        a: WATCH K0
        sleep 200
        a: MULTI
        a: INCR K0
        a: EXEC
        a: SET K1 1 PX 100
        a: WATCH K1
        sleep 200
        b: GET K1
        a: MULTI
        a: PING
        a: EXEC
        a: SET K2 1 PX 100
        a: SET K3 1
        a: WATCH K3 K2
        a: MULTI
        a: GET K2
        a: EXEC
        ",
    );
    s.run(
        "stale when watched",
        "
        a: SET K0 foo PX 1
        sleep 5
        a: WATCH K0
        a: MULTI
        a: PING
        a: EXEC
        a: SET K0 foo PX 1
        sleep 5
        a: WATCH K0
        b: EXISTS K0
        a: MULTI
        a: PING
        a: EXEC
        a: SET K1 foo PX 1
        sleep 5
        a: WATCH K1
        b: DEL K1
        a: MULTI
        a: PING
        a: EXEC
        a: SET K2 foo PX 1
        sleep 5
        a: WATCH K2
        b: FLUSHDB
        a: MULTI
        a: PING
        a: EXEC
        a: SET K3 foo PX 1
        sleep 5
        a: WATCH K3
        b: SET K3 bar
        a: MULTI
        a: PING
        a: EXEC
        a: SET K4 foo PX 1
        sleep 5
        a: WATCH K4
        b: GET K4
        b: SET K4 bar
        a: MULTI
        a: PING
        a: EXEC
        a: SET K5 foo PX 1
        sleep 5
        a: WATCH K5 K6
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
    s.run(
        "expired actively",
        "
        a: DEBUG SET-ACTIVE-EXPIRE 1
        a: FLUSHALL
        a: SET K0 foo
        a: PEXPIRE K0 50
        a: WATCH K0
        await-empty
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
}

/// FLUSHALL, FLUSHDB and SWAPDB fail EXEC only for watched keys that were there before or
/// are there after (and not for stale keys that stay stale or go, or absent keys replaced
/// by stale ones), as Redis 7.0's `touchAllWatchedKeysInDb`.
#[test]
fn watch_and_flushes_match_redis() {
    let mut s = Script::new();
    s.run(
        "flushes",
        "
        a: SET K0 30
        a: WATCH K0
        b: FLUSHALL
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K0
        b: FLUSHALL
        a: MULTI
        a: PING
        a: EXEC
        a: SET K1 30
        a: WATCH K1
        b: FLUSHDB
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K1
        b: FLUSHDB
        a: MULTI
        a: PING
        a: EXEC
        a: SET K2 30
        a: WATCH K2 K3
        b: SELECT 1
        b: FLUSHDB
        b: FLUSHALL ASYNC
        b: SELECT 0
        a: MULTI
        a: PING
        a: EXEC
        a: SET K2 30
        a: WATCH K3
        b: FLUSHDB SYNC
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
    s.run(
        "swapdb",
        "
        a: DEBUG SET-ACTIVE-EXPIRE 0
        b: FLUSHALL
        a: SET K0 30
        a: WATCH K0
        b: SWAPDB 0 1
        a: MULTI
        a: PING
        a: EXEC
        b: FLUSHALL
        a: SELECT 1
        a: SET K1 30
        a: SELECT 0
        a: WATCH K1
        b: SWAPDB 0 1
        a: MULTI
        a: PING
        a: EXEC
        b: FLUSHALL
        a: SELECT 1
        a: SET K2 foo PX 1
        sleep 5
        a: WATCH K2
        b: SWAPDB 0 1
        a: MULTI
        a: PING
        a: EXEC
        b: FLUSHALL
        a: SELECT 0
        a: SET K3 foo PX 1
        sleep 5
        a: SELECT 1
        a: WATCH K3
        b: SWAPDB 0 1
        a: MULTI
        a: PING
        a: EXEC
        b: FLUSHALL
        a: SELECT 1
        a: SET K4 foo PX 1
        a: SELECT 0
        a: SET K4 bar PX 1
        sleep 5
        a: SELECT 1
        a: WATCH K4
        b: SWAPDB 0 1
        a: MULTI
        a: PING
        a: EXEC
        b: FLUSHALL
        a: SELECT 0
        a: SET K5 foo PX 1
        sleep 5
        a: SELECT 1
        a: WATCH K5
        b: SWAPDB 0 1
        b: SWAPDB 0 1
        b: SELECT 1
        b: DEL K5
        b: SELECT 0
        a: MULTI
        a: PING
        a: EXEC
        b: FLUSHALL
        a: SELECT 0
        a: SET K6 1
        a: WATCH K6
        b: SWAPDB 1 2
        a: MULTI
        a: PING
        a: EXEC
        a: SET K7 1
        a: SELECT 2
        a: SET K7 2 PX 1
        sleep 5
        a: SELECT 0
        a: WATCH K7
        b: SWAPDB 0 2
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
}

/// WATCH remembers each key's database; EXEC (run, failed, or aborted), DISCARD, UNWATCH,
/// RESET clear the watch and its dirty flag, EXEC and DISCARD without MULTI do not; WATCH inside
/// MULTI is an error that does not abort the block, UNWATCH inside it is queued; arity
/// errors; the null array of RESP3.
#[test]
fn watch_state_and_its_end_match_redis() {
    let mut s = Script::new();
    s.run(
        "databases",
        "
        a: SELECT 5
        a: SET K0 30
        a: WATCH K0
        a: SELECT 1
        a: SET K0 10
        a: SELECT 5
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K0
        a: SELECT 1
        b: SELECT 5
        b: SET K0 11
        b: SELECT 0
        a: MULTI
        a: PING
        a: EXEC
        a: SELECT 0
        a: WATCH K1
        a: SELECT 2
        a: WATCH K1
        b: SET K1 1
        a: MULTI
        a: PING
        a: EXEC
        a: SELECT 0
        ",
    );
    s.run(
        "what unwatches",
        "
        a: SET K0 30
        a: WATCH K0
        a: MULTI
        a: PING
        a: EXEC
        b: SET K0 40
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K0
        b: SET K0 40
        a: MULTI
        a: PING
        a: EXEC
        b: SET K0 40
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K0
        b: SET K0 40
        a: UNWATCH
        a: MULTI
        a: PING
        a: EXEC
        a: UNWATCH
        a: WATCH K0
        b: SET K0 10
        a: MULTI
        a: DISCARD
        a: MULTI
        a: INCR K0
        a: EXEC
        a: WATCH K0
        a: MULTI
        a: DISCARD
        b: SET K0 10
        a: MULTI
        a: INCR K0
        a: EXEC
        a: WATCH K1
        a: MULTI
        a: NOSUCHCOMMAND
        a: EXEC
        a: WATCH K1
        b: SET K1 0
        a: MULTI
        a: NOSUCHCOMMAND
        a: EXEC
        b: SET K1 1
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K1
        a: EXEC extra
        b: SET K1 1
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K1
        a: EXEC
        a: DISCARD
        b: SET K1 2
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K2
        b: SET K2 1
        a: RESET
        a: MULTI
        a: PING
        a: EXEC
        a: WATCH K2
        a: MULTI
        b: SET K2 2
        a: RESET
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
    s.run(
        "inside MULTI, arities",
        "
        a: WATCH K0
        a: MULTI
        a: WATCH K1
        a: SET K0 in
        a: EXEC
        a: WATCH K0
        a: MULTI
        a: UNWATCH
        b: SET K0 other
        a: EXEC
        a: WATCH K0
        a: MULTI
        a: UNWATCH
        a: EXEC
        a: WATCH
        a: UNWATCH x
        a: MULTI
        a: WATCH
        a: EXEC
        a: MULTI
        a: UNWATCH x
        a: EXEC
        a: WATCH K0 K0 K0
        b: SET K0 again
        a: MULTI
        a: PING
        a: EXEC
        ",
    );
    s.run(
        "RESP3",
        "
        a:~ HELLO 3
        a: WATCH K0
        b: SET K0 1
        a: MULTI
        a: GET K0
        a: EXEC
        a: WATCH K0
        a: MULTI
        a: GET K0
        a: EXEC
        a:~ HELLO 2
        ",
    );
}

/// A watched key evicted (`maxmemory` with `allkeys-random`, under which every key goes)
/// fails EXEC, as in Redis.
#[test]
fn watch_of_an_evicted_key_matches_redis() {
    let mut s = Script::new();
    s.run(
        "eviction",
        "
        a: SET K0 value
        a: SET K1 value
        a: WATCH K0 K1
        a: MULTI
        a: PING
        b: CONFIG SET maxmemory-policy allkeys-random
        b: CONFIG SET maxmemory 1
        await-empty
        b: CONFIG SET maxmemory 0
        a: EXEC
        ",
    );
}

/// Scripts of one client sent as one pipelined write: WATCH's answer comes from the
/// shards, and the commands after it must wait for it.
#[test]
fn watch_pipelined_matches_redis() {
    let mut d = Differential::new();
    let mut other_g = d.goblin.raw();
    let mut other_r = d.redis.raw();
    let cmds: Vec<Cmd> = script_commands(
        "
        SET K0 1
        WATCH K0 K1 K2 K3
        SET K2 mine
        MULTI
        GET K0
        EXEC
        WATCH K0 K1 K2 K3
        MGET K0 K1 K2 K3
        MULTI
        INCR K0
        SET K1 b
        EXEC
        MGET K0 K1
        WATCH K4
        UNWATCH
        SET K4 x
        MULTI
        GET K4
        EXEC
        ",
        &keys(),
    );
    compare_pipeline(&mut d, &cmds, "one client");
    // Interleaved with another client: its write lands between WATCH and EXEC.
    let first: Vec<Cmd> = script_commands("WATCH K5 K6\nGET K5\nMULTI\nSET K5 1", &keys());
    compare_pipeline(&mut d, &first, "watching");
    let k6 = keys()[6].clone();
    let write = [&b"SET"[..], k6.as_bytes(), b"other"];
    assert_eq!(other_g.cmd(&write), other_r.cmd(&write));
    let rest: Vec<Cmd> = script_commands("EXEC\nGET K5", &keys());
    compare_pipeline(&mut d, &rest, "after another client's write");
}

/// Watching across threads, with 4: a connection on every worker watches a key of every
/// shard; a change by a connection of a third thread, an active expiry on the key's own
/// thread, and an expiry that nothing acted on each fail its EXEC; an untouched key
/// does not.
#[test]
fn watch_works_across_threads() {
    const THREADS: usize = 4;
    let server = Server::goblin_with(&[
        "--threads",
        &THREADS.to_string(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut probe = server.raw();
    let mut watchers: Vec<Option<Raw>> = (0..THREADS).map(|_| None).collect();
    // Spares stay open while connections are located: a close taking effect meanwhile
    // would hide the next one (`Server::raw_located`).
    let mut spares = Vec::new();
    for _ in 0..64 {
        if watchers.iter().all(Option::is_some) {
            break;
        }
        let (conn, worker) = server.raw_located(&mut probe);
        if watchers[worker].is_none() {
            watchers[worker] = Some(conn);
        } else {
            spares.push(conn);
        }
    }
    let mut watchers: Vec<(usize, Raw)> = watchers
        .into_iter()
        .enumerate()
        .map(|(w, c)| (w, c.expect("a connection on every worker")))
        .collect();
    let (mut writer, writer_thread) = server.raw_located(&mut probe);
    let exec = |c: &mut Raw, queued: &[&[u8]]| -> Vec<u8> {
        assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
        assert_eq!(c.cmd(queued), b"+QUEUED\r\n");
        c.cmd(&[b"EXEC"])
    };
    for shard in 0..THREADS {
        let key = keys_on("cross", shard, THREADS, 1).remove(0);
        let k = key.as_bytes();
        for (thread, w) in &mut watchers {
            let what = format!("key of shard {shard}, watched from thread {thread}");
            // Changed from yet another thread (when the writer's is neither).
            assert_eq!(writer.cmd(&[b"SET", k, b"0"]), b"+OK\r\n");
            assert_eq!(w.cmd(&[b"WATCH", k]), b"+OK\r\n");
            assert_eq!(writer.cmd(&[b"INCR", k]), b":1\r\n");
            let reply = exec(w, &[b"INCR", k]);
            assert_eq!(reply, b"*-1\r\n", "{what}, writer on {writer_thread}");
            // Untouched.
            assert_eq!(w.cmd(&[b"WATCH", k]), b"+OK\r\n");
            let reply = exec(w, &[b"INCR", k]);
            assert_eq!(reply, b"*1\r\n:2\r\n", "{what}: {}", show(&reply));
            // Expired actively, on the key's thread.
            assert_eq!(writer.cmd(&[b"SET", k, b"v", b"PX", b"30"]), b"+OK\r\n");
            assert_eq!(w.cmd(&[b"WATCH", k]), b"+OK\r\n");
            let start = Instant::now();
            while writer.cmd(&[b"DBSIZE"]) != b":0\r\n" {
                assert!(start.elapsed() < EXPIRY_WAIT, "{what}: not expired");
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(exec(w, &[b"PING"]), b"*-1\r\n", "{what}: expired actively");
            // Past its expiry, removed by nobody.
            assert_eq!(
                probe.cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]),
                b"+OK\r\n"
            );
            assert_eq!(writer.cmd(&[b"SET", k, b"v", b"PX", b"30"]), b"+OK\r\n");
            assert_eq!(w.cmd(&[b"WATCH", k]), b"+OK\r\n");
            std::thread::sleep(Duration::from_millis(60));
            assert_eq!(exec(w, &[b"PING"]), b"*-1\r\n", "{what}: past its expiry");
            assert_eq!(
                probe.cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"]),
                b"+OK\r\n"
            );
            // Stale: DEL finds nothing live.
            assert_eq!(writer.cmd(&[b"DEL", k]), b":0\r\n");
        }
    }
}

/// The number a GET of a counter answered (nil: 0).
fn counter_value(reply: &[u8]) -> i64 {
    match parse_reply(reply) {
        Ok(Some((Frame::Null, _))) => 0,
        Ok(Some((Frame::Bulk(text), _))) => std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("GET: {}", show(reply))),
        _ => panic!("GET: {}", show(reply)),
    }
}

/// How long the race runs: `GOBLIN_WATCH_RACE_SECS`, else 20 seconds.
fn race_duration() -> Duration {
    let secs = std::env::var("GOBLIN_WATCH_RACE_SECS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(20.0);
    Duration::from_secs_f64(secs)
}

/// Optimistic locking under contention, with 4 threads: 32 clients (dealt over every
/// worker) increment counters (one per shard; each client two of them, on two shards) by
/// WATCH, GET, MULTI, SET, EXEC, retrying on a null array. At the end each counter equals
/// the number of EXECs that ran for it: no increment was lost to a race, none counted
/// twice. (Runs once in CI: `scripts/test` skips it in its loops over thread counts.)
#[test]
fn watch_race_of_optimistic_increments() {
    const THREADS: usize = 4;
    const CLIENTS: usize = 32;
    let server = Server::goblin_threads(THREADS);
    let counters: Vec<String> = (0..THREADS)
        .map(|s| keys_on("counter", s, THREADS, 1).remove(0))
        .collect();
    let counters = Arc::new(counters);
    let runs: Arc<Vec<AtomicU64>> = Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
    let failed = Arc::new(AtomicU64::new(0));
    let duration = race_duration();
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let mut c = server.raw();
            let (counters, runs, failed, barrier) = (
                Arc::clone(&counters),
                Arc::clone(&runs),
                Arc::clone(&failed),
                Arc::clone(&barrier),
            );
            std::thread::spawn(move || {
                let (x, y) = (i % THREADS, (i / THREADS + i + 1) % THREADS);
                let pair: Vec<usize> = if x == y { vec![x] } else { vec![x, y] };
                barrier.wait();
                let start = Instant::now();
                while start.elapsed() < duration {
                    let mut watch: Vec<&[u8]> = vec![b"WATCH"];
                    watch.extend(pair.iter().map(|&k| counters[k].as_bytes()));
                    assert_eq!(c.cmd(&watch), b"+OK\r\n");
                    let values: Vec<i64> = pair
                        .iter()
                        .map(|&k| counter_value(&c.cmd(&[b"GET", counters[k].as_bytes()])))
                        .collect();
                    assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
                    for (&k, v) in pair.iter().zip(&values) {
                        let next = (v + 1).to_string();
                        let set = [&b"SET"[..], counters[k].as_bytes(), next.as_bytes()];
                        assert_eq!(c.cmd(&set), b"+QUEUED\r\n");
                    }
                    let reply = c.cmd(&[b"EXEC"]);
                    if reply == b"*-1\r\n" {
                        failed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let ok = format!("*{}\r\n{}", pair.len(), "+OK\r\n".repeat(pair.len()));
                    assert_eq!(reply, ok.as_bytes(), "EXEC: {}", show(&reply));
                    for &k in &pair {
                        runs[k].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut check = server.raw();
    let mut total = 0;
    for (k, counter) in counters.iter().enumerate() {
        let ran = runs[k].load(Ordering::Relaxed);
        let reply = check.cmd(&[b"GET", counter.as_bytes()]);
        let want = bulk_or_nil((ran > 0).then(|| ran.to_string().into_bytes()).as_deref());
        assert_eq!(
            reply,
            want,
            "counter {k} after {ran} EXECs: {}",
            show(&reply)
        );
        total += ran;
    }
    assert!(total > 0, "no EXEC ran");
    assert!(
        failed.load(Ordering::Relaxed) > 0,
        "no EXEC failed: there was no contention"
    );
}

/// Write skew, which WATCH must prevent, with 4 threads: in each round two clients watch
/// the same two keys (on two shards), read both, and each sets its own key when both are
/// unset. Each EXEC writes one key and only reads the other: only the lock EXEC takes on
/// a key it watched without writing keeps the other client's write from landing between
/// its check and its own write. At most one of the two keys may end set. (Runs once in
/// CI, as the race above.)
#[test]
fn watch_race_of_write_skew() {
    const THREADS: usize = 4;
    const PAIRS: usize = 16;
    let server = Server::goblin_threads(THREADS);
    let duration = race_duration() / 2;
    let skewed = Arc::new(AtomicU64::new(0));
    let rounds = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..PAIRS)
        .flat_map(|p| {
            let pair = Arc::new((Barrier::new(2), AtomicBool::new(true)));
            (0..2).map(move |side| (p, side, Arc::clone(&pair)))
        })
        .map(|(p, side, pair)| {
            let mut c = server.raw();
            let (skewed, rounds) = (Arc::clone(&skewed), Arc::clone(&rounds));
            std::thread::spawn(move || {
                let (barrier, go) = &*pair;
                for round in 0.. {
                    // Side 0 decides for the pair whether it plays another round.
                    if side == 0 {
                        go.store(start.elapsed() < duration, Ordering::Relaxed);
                    }
                    barrier.wait();
                    if !go.load(Ordering::Relaxed) {
                        break;
                    }
                    let x = keys_on(&format!("skew{p}.{round}.x"), p % THREADS, THREADS, 1);
                    let y = keys_on(&format!("skew{p}.{round}.y"), (p + 1) % THREADS, THREADS, 1);
                    let (x, y) = (x[0].as_bytes(), y[0].as_bytes());
                    assert_eq!(c.cmd(&[b"WATCH", x, y]), b"+OK\r\n");
                    if c.cmd(&[b"MGET", x, y]) == b"*2\r\n$-1\r\n$-1\r\n" {
                        assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
                        let own = if side == 0 { x } else { y };
                        assert_eq!(c.cmd(&[b"SET", own, b"1"]), b"+QUEUED\r\n");
                        c.cmd(&[b"EXEC"]);
                    } else {
                        assert_eq!(c.cmd(&[b"UNWATCH"]), b"+OK\r\n");
                    }
                    barrier.wait();
                    if side == 0 {
                        rounds.fetch_add(1, Ordering::Relaxed);
                        if c.cmd(&[b"MGET", x, y]) == b"*2\r\n$1\r\n1\r\n$1\r\n1\r\n" {
                            skewed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let rounds = rounds.load(Ordering::Relaxed);
    assert!(rounds > 0, "no round was played");
    assert_eq!(
        skewed.load(Ordering::Relaxed),
        0,
        "rounds where both keys were set, of {rounds}"
    );
}
