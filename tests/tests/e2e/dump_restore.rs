//! DUMP and RESTORE against redis-server 7.0: values of every type and encoding DUMPed by
//! one server RESTORE in the other, both ways, and come out the same (read back with
//! every type's commands); the errors, options and expiries of RESTORE, byte for byte.

use goblin_tests::dataset::dataset;
use goblin_tests::diff::{How, compare, for_each_thread_count};
use goblin_tests::{Differential, Raw, Server, default_threads, show};

/// Values of every type, in each encoding redis-server chooses (small and large), with a
/// stream holding groups and pending entries.
const VALUES: &str = "
    SET s:short v
    SET s:int 12345
    SET s:negative -77
    SET s:long aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    RPUSH l:small a b c 1 2
    SADD set:ints 1 2 3 400
    SADD set:strs x y z
    HSET h:small f1 v1 f2 2
    ZADD z:small 1 a 2.5 b -3 c
    XADD x:stream 1-1 a 1 b 2
    XADD x:stream 2-1 a 3 b 4
    XADD x:stream 3-1 other field
    XDEL x:stream 2-1
    XGROUP CREATE x:stream g 0
    XREADGROUP GROUP g alice COUNT 1 STREAMS x:stream >
    XGROUP CREATE x:empty g $ MKSTREAM
";

/// Large collections (hashtable, skiplist, quicklist of several nodes, a stream of
/// several nodes), added by pipelines.
fn large(raw: &mut Raw) {
    let mut cmds: Vec<String> = Vec::new();
    let members: Vec<String> = (0..600).map(|i| format!("m{i}")).collect();
    cmds.push(format!("SADD set:big {}", members.join(" ")));
    cmds.push(format!("RPUSH l:big {}", members.join(" ")));
    let pairs: Vec<String> = (0..600).map(|i| format!("f{i} {}", i * 3)).collect();
    cmds.push(format!("HSET h:big {}", pairs.join(" ")));
    let scored: Vec<String> = (0..600).map(|i| format!("{i}.5 m{i}")).collect();
    cmds.push(format!("ZADD z:big {}", scored.join(" ")));
    for i in 1..=250 {
        cmds.push(format!("XADD x:big {i}-0 f1 v{i} f2 {i}"));
    }
    for c in cmds {
        let reply = raw.cmd_str(&c);
        assert!(!reply.starts_with(b"-"), "{c}: {}", show(&reply));
    }
}

/// Fills `server` with every value.
fn fill(server: &Server) {
    let mut raw = server.raw();
    for line in VALUES.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let reply = raw.cmd_str(line);
        assert!(!reply.starts_with(b"-"), "{line}: {}", show(&reply));
    }
    large(&mut raw);
}

/// The payload of a bulk reply.
fn bulk(reply: &[u8]) -> Vec<u8> {
    let Some(rest) = reply.strip_prefix(b"$") else {
        panic!("not a bulk string: {}", show(reply));
    };
    let end = rest
        .iter()
        .position(|&b| b == b'\r')
        .unwrap_or_else(|| panic!("a bulk header: {}", show(reply)));
    let n: usize = std::str::from_utf8(&rest[..end])
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("a bulk length: {}", show(reply)));
    rest[end + 2..end + 2 + n].to_vec()
}

/// Every key of `from` DUMPed and RESTOREd into the empty `to`: the datasets are then the
/// same.
fn migrate(from: &Server, to: &Server, what: &str) {
    let want = dataset(&mut from.client());
    let (mut src, mut dst) = (from.raw(), to.raw());
    for key in want.keys() {
        let payload = bulk(&src.cmd(&[b"DUMP", key]));
        let reply = dst.cmd(&[b"RESTORE", key, b"0", &payload]);
        assert_eq!(
            show(&reply),
            "+OK\\r\\n",
            "{what}: RESTORE {}",
            String::from_utf8_lossy(key)
        );
    }
    let got = dataset(&mut to.client());
    assert_eq!(got.len(), want.len(), "{what}: the keys");
    for (key, value) in &want {
        assert_eq!(
            got.get(key),
            Some(value),
            "{what}: {}",
            String::from_utf8_lossy(key)
        );
    }
}

/// redis-server's DUMPs RESTORE in goblin-server, and goblin-server's in redis-server.
#[test]
fn dumps_restore_both_ways_with_redis() {
    let redis = Server::redis();
    fill(&redis);
    let goblin = Server::goblin_threads(default_threads());
    migrate(&redis, &goblin, "redis-server → goblin-server");
    let redis2 = Server::redis();
    migrate(&goblin, &redis2, "goblin-server → redis-server");
    // And a short string's payload is redis-server's, byte for byte.
    let (mut g, mut r) = (goblin.raw(), redis.raw());
    for key in [&b"s:short"[..], b"s:int", b"s:negative"] {
        assert_eq!(show(&g.cmd(&[b"DUMP", key])), show(&r.cmd(&[b"DUMP", key])));
    }
}

/// RESTORE's errors and options, in redis-server's order of checks; DUMP of a missing key;
/// TTLs relative and absolute, a past absolute one, REPLACE.
#[test]
fn restore_errors_and_options_match_redis() {
    for_each_thread_count(|d: &mut Differential, ctx| {
        let c = |d: &mut Differential, line: &[&[u8]], how: How| {
            let args: Vec<Vec<u8>> = line.iter().map(|a| a.to_vec()).collect();
            compare(d, &args, how, ctx);
        };
        c(d, &[b"FLUSHALL"], How::Exact);
        c(d, &[b"SET", b"src", b"hello"], How::Exact);
        let payload = bulk(&d.r.cmd(&[b"DUMP", b"src"]));
        let p = payload.as_slice();
        let mut bad_crc = payload.clone();
        let n = bad_crc.len();
        bad_crc[n - 1] ^= 1;
        let mut new_version = payload.clone();
        new_version[n - 10] = 11;
        let mut bad_body = payload.clone();
        bad_body[0] = 200;
        let crc = |body: &[u8]| {
            let mut out = body.to_vec();
            let sum = goblin_store::rdb::crc64(0, &out);
            out.extend_from_slice(&sum.to_le_bytes());
            out
        };
        let bad_body = crc(&bad_body[..n - 8]);
        let empty_list = crc(b"\x01\x00\x0a\x00");
        for line in [
            &[b"DUMP".as_slice(), b"nokey"][..],
            &[b"DUMP", b"src"],
            &[b"RESTORE", b"dst", b"0", p],
            &[b"RESTORE", b"dst", b"0", p],
            &[b"RESTORE", b"dst", b"0", p, b"REPLACE"],
            &[b"RESTORE", b"dst", b"x", p, b"REPLACE"],
            &[b"RESTORE", b"dst", b"-1", p, b"REPLACE"],
            &[b"RESTORE", b"dst", b"0", p, b"FOO"],
            &[b"RESTORE", b"dst", b"0", p, b"IDLETIME", b"-1"],
            &[b"RESTORE", b"dst", b"0", p, b"IDLETIME", b"x"],
            &[b"RESTORE", b"dst", b"0", p, b"FREQ", b"256"],
            &[
                b"RESTORE",
                b"dst",
                b"0",
                p,
                b"IDLETIME",
                b"5",
                b"FREQ",
                b"5",
            ],
            &[b"RESTORE", b"dst", b"0", p, b"REPLACE", b"IDLETIME", b"5"],
            &[b"RESTORE", b"dst", b"0", p, b"REPLACE", b"FREQ", b"100"],
            &[b"RESTORE", b"new", b"0", b"short"],
            &[b"RESTORE", b"new", b"0", &bad_crc],
            &[b"RESTORE", b"new", b"0", &new_version],
            &[b"RESTORE", b"new", b"0", &bad_body],
            &[b"RESTORE", b"new", b"0", &empty_list],
            &[b"EXISTS", b"new"],
            &[b"SET", b"str", b"x"],
            &[b"RESTORE", b"str", b"0", &bad_crc],
            &[b"GET", b"dst"],
            &[b"RESTORE", b"past", b"1", p, b"ABSTTL"],
            &[b"EXISTS", b"past"],
            &[b"RESTORE", b"dst", b"1", p, b"ABSTTL", b"REPLACE"],
            &[b"EXISTS", b"dst"],
            &[b"RESTORE", b"ttl", b"100000", p],
            &[b"RESTORE", b"abs", b"99999999999999", p, b"ABSTTL"],
            &[b"PEXPIRETIME", b"abs"],
            &[b"GET", b"abs"],
        ] {
            c(d, line, How::Exact);
        }
        c(d, &[b"PTTL", b"ttl"], How::Near);
        // IDLETIME and FREQ set what OBJECT IDLETIME and OBJECT FREQ read, under the
        // eviction policy that keeps each (the other is ignored).
        for (policy, lines) in [
            (
                &b"allkeys-lfu"[..],
                &[
                    &[b"RESTORE".as_slice(), b"f", b"0", p, b"FREQ", b"100"][..],
                    &[b"OBJECT", b"FREQ", b"f"],
                    &[b"RESTORE", b"g", b"0", p, b"IDLETIME", b"1000"],
                    &[b"OBJECT", b"FREQ", b"g"],
                ][..],
            ),
            (
                b"allkeys-lru",
                &[
                    &[b"RESTORE".as_slice(), b"i", b"0", p, b"IDLETIME", b"1000"][..],
                    &[b"OBJECT", b"IDLETIME", b"i"],
                    &[b"RESTORE", b"j", b"0", p, b"FREQ", b"100"],
                    &[b"OBJECT", b"IDLETIME", b"j"],
                    &[b"RESTORE", b"k", b"0", p, b"IDLETIME", b"999999999999"],
                    &[b"OBJECT", b"IDLETIME", b"k"],
                ],
            ),
        ] {
            c(
                d,
                &[b"CONFIG", b"SET", b"maxmemory-policy", policy],
                How::Exact,
            );
            for line in lines {
                // (An idle time may tick a second on one server and not the other.)
                let idle = line.get(1) == Some(&&b"IDLETIME"[..]) && line[0] == b"OBJECT";
                c(d, line, if idle { How::Near } else { How::Exact });
            }
        }
        c(
            d,
            &[b"CONFIG", b"SET", b"maxmemory-policy", b"noeviction"],
            How::Exact,
        );
    });
}

/// RESTORE refuses payloads that read but hold what no value may (Redis's corrupt-dump
/// tests' payloads): a set (not an intset) with a member twice, a sorted set with a NaN
/// score, a stream group with a consumer twice — `Bad data format`, with or without the
/// checksum checked and the payload sanitized, as redis-server; the server answers on.
#[test]
fn restore_refuses_duplicates_and_nan_scores_as_redis() {
    let set_twice: &[u8] =
        b"\x02\x0A\x02\x5F\x39\xC0\x06\x02\x5F\x31\xC0\x00\xC0\x04\x02\x5F\x35\xC0\
        \x02\xC0\x08\x02\x5F\x31\x02\x5F\x33\x09\x00\x7A\x5A\xFB\x90\x3A\xE9\x3C\xBE";
    let nan_score: &[u8] = b"\x05\x0A\x02\x5F\x39\x00\x00\x00\x00\x00\x00\x22\x40\xC0\x08\x00\x00\
        \x00\x00\x00\x00\x20\x40\x02\x5F\x37\x00\x00\x00\x00\x00\x00\x1C\x40\xC0\x06\x00\x00\x00\
        \x00\x00\x00\x18\x40\x02\x5F\x35\x00\x00\x00\x00\x00\x00\x14\x40\xC0\x04\x00\x00\x00\x00\
        \x00\x00\x10\x40\x02\x5F\x33\x00\x00\x00\x00\x00\x00\x08\x40\xC0\x02\x00\x00\x00\x00\x00\
        \x00\x00\x40\x02\x5F\x31\x00\x00\x00\x00\x00\x55\xF0\x7F\xC0\x00\x00\x00\x00\x00\x00\x00\
        \x00\x00\x0A\x00\xEC\x94\x86\xD8\xFD\x5C\x5F\xD8";
    let consumer_twice: &[u8] = b"\x0F\x00\x00\x00\x00\x01\x07\x6D\x79\x67\x72\x6F\x75\x70\x00\x00\
        \x00\x02\x04\x6E\x61\x6D\x65\x2A\x4C\xAA\x9A\x7D\x01\x00\x00\x00\x04\x6E\x61\x6D\x65\x2B\
        \x4C\xAA\x9A\x7D\x01\x00\x00\x00\x0A\x00\xCC\xED\x8C\xA7\x62\xEE\xC7\xC8";
    let args = ["--enable-debug-command", "yes"];
    let mut d = Differential::with_servers(Server::goblin_with(&args), Server::redis_with(&args));
    for (sanitize, skip) in [("no", "1"), ("yes", "0"), ("no", "0")] {
        let ctx = format!("sanitize-dump-payload {sanitize}, skip checksum {skip}");
        let c = |d: &mut Differential, line: &[&[u8]]| {
            let args: Vec<Vec<u8>> = line.iter().map(|a| a.to_vec()).collect();
            compare(d, &args, How::Exact, &ctx);
        };
        c(
            &mut d,
            &[
                b"CONFIG",
                b"SET",
                b"sanitize-dump-payload",
                sanitize.as_bytes(),
            ],
        );
        c(
            &mut d,
            &[b"DEBUG", b"SET-SKIP-CHECKSUM-VALIDATION", skip.as_bytes()],
        );
        for payload in [set_twice, nan_score, consumer_twice] {
            c(&mut d, &[b"RESTORE", b"key", b"0", payload]);
            c(&mut d, &[b"EXISTS", b"key"]);
            c(&mut d, &[b"PING"]);
        }
    }
}

/// MIGRATE keeps its connection to a target for the next MIGRATE there, as redis-server
/// does (INFO `migrate_cached_sockets`): several MIGRATEs, to other databases too, make
/// one connection at the target; one the target closed meanwhile is replaced and the
/// MIGRATE goes through; after 10 s unused it is closed. The same counts with
/// redis-server as the source.
#[test]
fn migrate_caches_its_connections_as_redis_does() {
    let field = |raw: &mut Raw, name: &str| -> i64 {
        let info = String::from_utf8_lossy(&raw.cmd_str("INFO stats")).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {info}"))
    };
    let target = Server::redis();
    let mut t = target.raw();
    let port = target.port.to_string();
    let sources = [Server::redis(), Server::goblin_threads(default_threads())];
    for source in &sources {
        let who = format!("{:?}", source.port);
        let mut s = source.raw();
        assert_eq!(field(&mut s, "migrate_cached_sockets"), 0, "{who}");
        let accepted = field(&mut t, "total_connections_received");
        for (i, db) in ["0", "3", "3", "0"].iter().enumerate() {
            let key = format!("k{i}:{}", source.port);
            assert_eq!(s.cmd(&[b"SET", key.as_bytes(), b"v"]), b"+OK\r\n");
            let migrate = ["MIGRATE", "127.0.0.1", &port, &key, db, "5000"];
            let migrate: Vec<&[u8]> = migrate.iter().map(|a| a.as_bytes()).collect();
            assert_eq!(s.cmd(&migrate), b"+OK\r\n", "{who}, {key}");
            assert_eq!(field(&mut s, "migrate_cached_sockets"), 1, "{who}");
            t.cmd(&[b"SELECT", db.as_bytes()]);
            assert_eq!(t.cmd(&[b"GET", key.as_bytes()]), b"$1\r\nv\r\n", "{who}");
        }
        assert_eq!(
            field(&mut t, "total_connections_received") - accepted,
            1,
            "{who}: one connection for four MIGRATEs"
        );
        // The target closes it: the next MIGRATE connects again.
        t.cmd_str("CLIENT KILL TYPE normal SKIPME yes");
        let key = format!("again:{}", source.port);
        s.cmd(&[b"SET", key.as_bytes(), b"v"]);
        let migrate = ["MIGRATE", "127.0.0.1", &port, &key, "0", "5000"];
        let migrate: Vec<&[u8]> = migrate.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(s.cmd(&migrate), b"+OK\r\n", "{who}");
        assert_eq!(field(&mut s, "migrate_cached_sockets"), 1, "{who}");
    }
    // Unused for 10 s, closed (by each server's cron).
    std::thread::sleep(std::time::Duration::from_millis(11_500));
    for source in &sources {
        let mut s = source.raw();
        assert_eq!(
            field(&mut s, "migrate_cached_sockets"),
            0,
            "{}",
            source.port
        );
    }
}
