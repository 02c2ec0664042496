//! Keyspace notifications (issue 15) against redis-server, message by message: the
//! same commands on both, each followed by a marker PUBLISH; a subscriber to every
//! channel on each server must have received the same messages, in the same order, up
//! to the marker.

use std::time::Duration;

use goblin_tests::diff::differences;
use goblin_tests::keys::{THREADS, spread};
use goblin_tests::{Raw, Server, show};

/// A subscriber and a client on each server.
struct Watcher {
    _goblin: Server,
    _redis: Server,
    /// (goblin, redis) subscribers to `*`.
    sub: (Raw, Raw),
    /// (goblin, redis) clients running the commands.
    cmd: (Raw, Raw),
    context: String,
    /// Between MULTI and EXEC.
    in_multi: bool,
}

const MARKER: &str = "goblin-tests:marker";

impl Watcher {
    fn new(threads: usize, classes: &str) -> Watcher {
        let goblin = Server::goblin_threads(threads);
        let redis = Server::redis();
        let mut cmd = (goblin.raw(), redis.raw());
        let mut sub = (goblin.raw(), redis.raw());
        for raw in [&mut cmd.0, &mut cmd.1] {
            let ok = raw.cmd(&[
                b"CONFIG",
                b"SET",
                b"notify-keyspace-events",
                classes.as_bytes(),
            ]);
            assert_eq!(ok, b"+OK\r\n", "{}", show(&ok));
        }
        for raw in [&mut sub.0, &mut sub.1] {
            raw.cmd(&[b"PSUBSCRIBE", b"*"]);
        }
        Watcher {
            _goblin: goblin,
            _redis: redis,
            sub,
            cmd,
            context: format!("--threads {threads}, notify-keyspace-events {classes}"),
            in_multi: false,
        }
    }

    /// The messages a subscriber got until the marker.
    fn messages(raw: &mut Raw) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let m = raw.reply();
            if m.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()) {
                return out;
            }
            out.push(m);
        }
    }

    /// Runs `line` on both (replies compared), then compares what each subscriber got:
    /// in order, or as multisets with `sorted` (events of one command on several
    /// shards may come in either order) — but inside MULTI, where the marker would be
    /// queued: there EXEC's events are compared.
    fn run(&mut self, line: &str, sorted: bool) {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let want = self.cmd.1.cmd(&args);
        let got = self.cmd.0.cmd(&args);
        assert!(
            got == want,
            "{}: {line}: replies differ\n{}",
            self.context,
            differences(&got, &want)
        );
        let word = line
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        if word == "MULTI" {
            self.in_multi = true;
        } else if word == "EXEC" || word == "DISCARD" {
            self.in_multi = false;
        }
        if !self.in_multi {
            self.compare(line, sorted);
        }
    }

    /// Compares what the subscribers got since the last marker.
    fn compare(&mut self, line: &str, sorted: bool) {
        for raw in [&mut self.cmd.0, &mut self.cmd.1] {
            raw.cmd(&[b"PUBLISH", MARKER.as_bytes(), b"x"]);
        }
        let mut want = Self::messages(&mut self.sub.1);
        let mut got = Self::messages(&mut self.sub.0);
        if sorted {
            want.sort();
            got.sort();
        }
        assert!(
            got == want,
            "{}: after {line}: goblin's notifications differ from redis's\n{}",
            self.context,
            differences(&got.concat(), &want.concat())
        );
    }

    /// Runs each line of `script` (`{t}`-tagged keys share a shard).
    fn script(&mut self, script: &str, sorted: bool) {
        for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(ms) = line.strip_prefix("sleep ") {
                std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
                self.compare(line, sorted);
            } else {
                self.run(line, sorted);
            }
        }
    }
}

/// One command of each kind, every key on one shard: the events, their names and order.
const SCRIPT: &str = "
    SET {t}s v
    SET {t}s v EX 100
    SET {t}s v KEEPTTL
    SET {t}s w NX
    SETNX {t}s2 v
    SETEX {t}s3 100 v
    PSETEX {t}s3 100000 v
    GETSET {t}s v2
    GETDEL {t}s2
    GETDEL {t}nothing
    GETEX {t}s3 EX 100
    GETEX {t}s3 PERSIST
    GETEX {t}s3
    MSET {t}a 1 {t}b 2
    MSETNX {t}c 1 {t}d 2
    MSETNX {t}c 1 {t}x 2
    APPEND {t}s x
    SETRANGE {t}s 1 yy
    INCR {t}n
    INCRBY {t}n 5
    DECR {t}n
    DECRBY {t}n 2
    INCRBYFLOAT {t}f 1.5
    EXPIRE {t}s 100
    PEXPIRE {t}s 100000
    EXPIREAT {t}s 99999999999
    PERSIST {t}s
    PERSIST {t}s
    EXPIRE {t}n -1
    DEL {t}a {t}b {t}nothing
    UNLINK {t}c
    RENAME {t}d {t}e
    RENAMENX {t}e {t}f
    RENAME {t}f {t}s
    COPY {t}s {t}g
    COPY {t}s {t}g REPLACE
    MOVE {t}g 1
    HSET {t}h a 1 b 2
    HSET {t}h a 1
    HSETNX {t}h c 3
    HMSET {t}h d 4
    HINCRBY {t}h a 1
    HINCRBYFLOAT {t}h a 1.5
    HDEL {t}h a b
    HDEL {t}h zz
    HDEL {t}h c d
    LPUSH {t}l a b c
    RPUSH {t}l d
    LPUSHX {t}l e
    RPUSHX {t}l f
    LPUSHX {t}nolist e
    LINSERT {t}l BEFORE a z
    LSET {t}l 0 q
    LREM {t}l 1 q
    LTRIM {t}l 0 3
    LPOP {t}l
    RPOP {t}l
    LMOVE {t}l {t}m LEFT RIGHT
    LMOVE {t}l {t}l RIGHT LEFT
    RPOPLPUSH {t}m {t}l
    LMPOP 1 {t}l LEFT COUNT 10
    RPUSH {t}l a b
    BLPOP {t}l 1
    BRPOP {t}l 1
    SADD {t}s1 a b c
    SADD {t}s1 a
    SREM {t}s1 a
    SADD {t}sp x
    SPOP {t}sp
    SADD {t}s2 x
    SMOVE {t}s2 {t}s1 x
    SINTERSTORE {t}si {t}s1 {t}s1
    SUNIONSTORE {t}su {t}s1 {t}s1
    SDIFFSTORE {t}su {t}s1 {t}s1
    ZADD {t}z 1 a 2 b 3 c 4 d
    ZADD {t}z INCR 1 a
    ZINCRBY {t}z 2 b
    ZREM {t}z a
    ZREMRANGEBYRANK {t}z 0 0
    ZREMRANGEBYSCORE {t}z 100 200
    ZADD {t}z 5 e 6 f
    ZPOPMIN {t}z
    ZPOPMAX {t}z
    ZUNIONSTORE {t}zu 1 {t}z
    ZRANGESTORE {t}zr {t}z 0 -1
    ZINTERSTORE {t}zi 2 {t}z {t}nothing
    ZMPOP 1 {t}z MIN COUNT 5
    SETBIT {t}bits 7 1
    SETBIT {t}bits 7 1
    BITOP OR {t}bo {t}bits
    BITOP AND {t}bo {t}none
    BITFIELD {t}bits SET u8 0 1 GET u8 0
    BITFIELD {t}bits SET u8 0 1
    BITFIELD {t}bits OVERFLOW FAIL SET u2 100 9
    BITFIELD {t}bits INCRBY u8 200 0
    BITFIELD_RO {t}bits GET u8 0
    RPUSH {t}sl 2 1
    SORT {t}sl STORE {t}sd
    SORT {t}sl
    SORT {t}none STORE {t}sd
    SORT {t}none STORE {t}sd
    GEOADD {t}geo 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
    GEOADD {t}geo 13.361389 38.115556 Palermo
    GEOADD {t}geo CH 13.361389 38.1 Palermo
    GEOSEARCHSTORE {t}gs {t}geo FROMLONLAT 15 37 BYRADIUS 200 km
    GEOSEARCHSTORE {t}gs {t}geo FROMLONLAT 15 37 BYRADIUS 1 m
    GEOSEARCHSTORE {t}gs {t}geo FROMLONLAT 15 37 BYRADIUS 1 m
    GEORADIUS {t}geo 15 37 200 km STORE {t}gr
    GEORADIUSBYMEMBER {t}geo Palermo 200 km STOREDIST {t}gr
    GEORADIUS {t}none 15 37 200 km STORE {t}gr
    GEORADIUS {t}geo 15 37 200 km
    PFADD {t}p a b
    PFADD {t}p a
    PFADD {t}p
    PFADD {t}p2
    PFCOUNT {t}p
    PFCOUNT {t}p {t}p2
    PFMERGE {t}pm {t}p
    PFMERGE {t}pm {t}p
    PFMERGE {t}pm2
    PFDEBUG TODENSE {t}p
    PFDEBUG GETREG {t}pm
    PFADD {t}pc
    SETRANGE {t}pc 16 n0
    PFADD {t}pc c d a
    GET {t}pc
    XADD {t}x 1-1 a 1
    XADD {t}x MAXLEN 1 2-1 a 2
    XADD {t}x MAXLEN 5 3-1 a 3
    XADD {t}nox NOMKSTREAM 1-1 a 1
    XTRIM {t}x MAXLEN 1
    XTRIM {t}x MAXLEN 1
    XDEL {t}x 3-1 9-9
    XSETID {t}x 9-9
    XGROUP CREATE {t}x g 0
    XGROUP CREATE {t}xm g 0 MKSTREAM
    XGROUP SETID {t}x g 0
    XADD {t}x 10-1 a 10
    XREADGROUP GROUP g c STREAMS {t}x >
    XREADGROUP GROUP g c STREAMS {t}x 0
    XCLAIM {t}x g d 0 10-1
    XAUTOCLAIM {t}x g e 0 0
    XACK {t}x g 10-1
    XGROUP CREATECONSUMER {t}x g z
    XGROUP CREATECONSUMER {t}x g z
    XGROUP DELCONSUMER {t}x g z
    XGROUP DESTROY {t}x g
    XGROUP DESTROY {t}x g
    SET {t}e v PX 200
    sleep 700
    GET {t}e
    SWAPDB 0 1
    FLUSHALL
";

#[test]
fn keyspace_notifications_match_redis() {
    for threads in THREADS {
        let mut w = Watcher::new(threads, "KEA");
        w.script(SCRIPT, false);
    }
}

#[test]
fn new_key_and_single_class_notifications_match_redis() {
    for (classes, script) in [
        ("KEAn", SCRIPT),
        (
            "Egx",
            "SET {t}a v\nEXPIRE {t}a 100\nDEL {t}a\nSET {t}b v PX 200\nsleep 700",
        ),
        ("Kl", "LPUSH {t}l a\nSET {t}s v\nLPOP {t}l"),
        ("E$", "SET {t}s v\nLPUSH {t}l a"),
    ] {
        let mut w = Watcher::new(4, classes);
        w.script(script, false);
    }
}

#[test]
fn notification_config_matches_redis() {
    let mut d = goblin_tests::Differential::new();
    for value in ["KEA", "AKE", "gxE", "g$lshzxetdKEmn", "Kn", "", "KEy"] {
        d.check(&[
            b"CONFIG",
            b"SET",
            b"notify-keyspace-events",
            value.as_bytes(),
        ]);
        d.check(&[b"CONFIG", b"GET", b"notify-keyspace-events"]);
    }
}

/// Keys on every shard: a command's events on several shards may come in either order
/// (compared as multisets), each one's events are the same as redis-server's — also for
/// such commands queued in MULTI.
#[test]
fn notifications_of_commands_across_shards_match_redis() {
    let keys = spread("n", 4, 2);
    let mut w = Watcher::new(4, "KEA");
    let script = "
        MSET K0 1 K1 2 K2 3 K3 4
        DEL K0 K1 K2
        RENAME K3 K4
        LPUSH K5 a b
        LMOVE K5 K6 LEFT RIGHT
        RPOPLPUSH K5 K6
        SADD K7 a
        SMOVE K7 K0 a
        SUNIONSTORE K1 K0 K7
        ZADD K2 1 a
        ZUNIONSTORE K3 2 K2 K1
        BLPOP K4 K6 1
        COPY K3 K5
        MULTI
        RENAME K5 K1
        MSET K2 x K6 y
        SMOVE K0 K7 a
        DEL K2 K6
        EXEC
        DEL K0 K1 K2 K3
        XADD K0 1-1 a 1
        XADD K1 1-1 a 1
        XGROUP CREATE K0 g 0
        XGROUP CREATE K1 g 0
        XREADGROUP GROUP g c STREAMS K0 K1 > >
        XREAD STREAMS K0 K1 0 0
        RENAME K1 K3
        XADD K2 MAXLEN 0 1-1 a 1
        DEL K4 K5 K6 K7
        GEOADD K5 13.361389 38.115556 Palermo
        GEOSEARCHSTORE K6 K5 FROMLONLAT 15 37 BYRADIUS 200 km
        GEORADIUS K5 15 37 200 km STOREDIST K7
        GEORADIUSBYMEMBER K5 Palermo 1 m STORE K6
        GEOSEARCHSTORE K6 K4 FROMLONLAT 15 37 BYRADIUS 200 km
        DEL K4 K5 K6 K7
        PFADD K4 a
        PFADD K5 b
        PFMERGE K6 K4 K5
        PFMERGE K4 K5 K6
        PFCOUNT K4 K5 K6
    ";
    let mut text = script.to_string();
    for (i, key) in keys.iter().enumerate().rev() {
        text = text.replace(&format!("K{i}"), key);
    }
    w.script(&text, true);
}

/// Evictions are `evicted` events (goblin-server alone: which keys go is random).
#[test]
fn evictions_notify_evicted() {
    let server = Server::goblin_threads(2);
    let mut c = server.raw();
    let mut sub = server.raw();
    c.cmd(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"Ee"]);
    sub.cmd(&[b"SUBSCRIBE", b"__keyevent@0__:evicted"]);
    c.cmd(&[b"CONFIG", b"SET", b"maxmemory-policy", b"allkeys-random"]);
    let value = vec![b'v'; 1000];
    for i in 0..2000 {
        c.cmd(&[b"SET", format!("k{i}").as_bytes(), &value]);
    }
    let info = String::from_utf8(c.cmd(&[b"INFO", b"memory"])).unwrap();
    let used: u64 = goblin_tests::reply::info_field(&info, "used_memory")
        .unwrap()
        .parse()
        .unwrap();
    c.cmd(&[
        b"CONFIG",
        b"SET",
        b"maxmemory",
        (used - 500_000).to_string().as_bytes(),
    ]);
    c.cmd(&[b"SET", b"one-more", b"v"]);
    let m = sub.reply();
    let parts = goblin_tests::reply::bulks(&m);
    assert_eq!(
        parts.first().cloned().flatten().as_deref(),
        Some(&b"message"[..]),
        "{}",
        show(&m)
    );
    assert!(
        parts
            .get(2)
            .cloned()
            .flatten()
            .is_some_and(|k| k.starts_with(b"k")),
        "{}",
        show(&m)
    );
    c.cmd(&[b"CONFIG", b"SET", b"maxmemory", b"0"]);
}
