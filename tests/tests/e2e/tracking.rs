//! Client-side caching (CLIENT TRACKING, TRACKINGINFO, GETREDIR, CACHING) against
//! redis-server 7.0 byte for byte: the argument errors, the default mode (RESP3 pushes,
//! a key forgotten after one invalidation, NOLOOP, OPTIN/OPTOUT, expiry, DEL, FLUSHALL),
//! BCAST with prefixes, REDIRECT to a RESP2 subscriber of `__redis__:invalidate` and to
//! a RESP3 client, a redirect client gone; keys on several shards and connections on
//! different threads, with `--threads 1` and 4.

use std::time::Duration;

use goblin_tests::diff::differences;
use goblin_tests::{Raw, Server, encode, show};

/// Both servers with several connections each: connection `i` of goblin-server is
/// compared with connection `i` of redis-server. goblin-server deals connections to its
/// threads in turn, so with 4 threads consecutive connections live on different threads.
struct Pair {
    _goblin: Server,
    _redis: Server,
    conns: Vec<(Raw, Raw)>,
    /// Each connection's client id on goblin-server and on redis-server.
    ids: Vec<(String, String)>,
    context: String,
}

impl Pair {
    fn new(threads: usize, connections: usize) -> Pair {
        let goblin = Server::goblin_threads(threads);
        let redis = Server::redis();
        let mut conns: Vec<(Raw, Raw)> = (0..connections)
            .map(|_| (goblin.raw(), redis.raw()))
            .collect();
        let id = |raw: &mut Raw| {
            let reply = raw.cmd(&[b"CLIENT", b"ID"]);
            String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned()
        };
        let ids = conns.iter_mut().map(|(g, r)| (id(g), id(r))).collect();
        Pair {
            _goblin: goblin,
            _redis: redis,
            conns,
            ids,
            context: format!("--threads {threads}"),
        }
    }

    /// The words of `line`, with `$i` replaced by connection i's id on the server
    /// (`redis`: redis-server's).
    fn words(&self, line: &str, redis: bool) -> Vec<Vec<u8>> {
        line.split(' ')
            .map(
                |w| match w.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                    Some(i) => {
                        let (g, r) = &self.ids[i];
                        if redis { r.clone() } else { g.clone() }.into_bytes()
                    }
                    None => w.as_bytes().to_vec(),
                },
            )
            .collect()
    }

    /// Client ids in a reply (HELLO's `id`, TRACKINGINFO's `redirect`,
    /// `tracking-redir-broken`'s, and with `whole` a reply that is just an id: GETREDIR)
    /// named `$i` instead.
    fn masked(&self, reply: &[u8], redis: bool, whole: bool) -> Vec<u8> {
        let mut text = reply.to_vec();
        for (i, (g, r)) in self.ids.iter().enumerate() {
            let id = if redis { r } else { g };
            for before in ["id\r\n", "redirect\r\n", "tracking-redir-broken\r\n"] {
                let from = format!("{before}:{id}\r\n").into_bytes();
                let to = format!("{before}:${i}\r\n").into_bytes();
                text = replace(&text, &from, &to);
            }
            if whole && text == format!(":{id}\r\n").into_bytes() {
                text = format!(":${i}\r\n").into_bytes();
            }
        }
        text
    }

    /// Sends `line` on connection `i` of both and compares the next `n` replies (ids
    /// masked).
    fn send_n(&mut self, i: usize, line: &str, n: usize) -> Vec<u8> {
        let gw = self.words(line, false);
        let rw = self.words(line, true);
        let (g, r) = &mut self.conns[i];
        r.send(&encode(&rw.iter().map(Vec::as_slice).collect::<Vec<_>>()));
        g.send(&encode(&gw.iter().map(Vec::as_slice).collect::<Vec<_>>()));
        let mut got = Vec::new();
        let mut want = Vec::new();
        for _ in 0..n {
            want.extend(r.reply());
            got.extend(g.reply());
        }
        let whole = line.contains("GETREDIR");
        let (got, want) = (
            self.masked(&got, false, whole),
            self.masked(&want, true, whole),
        );
        assert!(
            got == want,
            "{}: connection {i}, {line}: goblin differs from redis\n{}",
            self.context,
            differences(&got, &want)
        );
        got
    }

    /// One command, one reply, compared.
    fn check(&mut self, i: usize, line: &str) -> Vec<u8> {
        self.send_n(i, line, 1)
    }

    /// The next message pushed on connection `i`, compared.
    fn message(&mut self, i: usize) -> Vec<u8> {
        let (g, r) = &mut self.conns[i];
        let want = r.reply();
        let got = g.reply();
        let (got, want) = (
            self.masked(&got, false, false),
            self.masked(&want, true, false),
        );
        assert!(
            got == want,
            "{}: message on connection {i}: goblin differs from redis\n{}",
            self.context,
            differences(&got, &want)
        );
        got
    }

    /// The next `n` messages pushed on connection `i`, compared as a set (keys of
    /// several shards are invalidated by each shard in its turn).
    fn messages_sorted(&mut self, i: usize, n: usize) {
        let (g, r) = &mut self.conns[i];
        let mut want: Vec<Vec<u8>> = (0..n).map(|_| r.reply()).collect();
        let mut got: Vec<Vec<u8>> = (0..n).map(|_| g.reply()).collect();
        want.sort();
        got.sort();
        assert!(
            got == want,
            "{}: messages on connection {i}: goblin {:?} redis {:?}",
            self.context,
            got.iter().map(|m| show(m)).collect::<Vec<_>>(),
            want.iter().map(|m| show(m)).collect::<Vec<_>>()
        );
    }

    /// INFO's tracking figures (`tracking_clients`, `tracking_total_keys`, `_items`,
    /// `_prefixes`), compared.
    fn tracking_info(&mut self) {
        let (g, r) = &mut self.conns[3];
        let lines = |reply: Vec<u8>| -> Vec<String> {
            String::from_utf8_lossy(&reply)
                .lines()
                .filter(|l| l.starts_with("tracking_"))
                .map(str::to_string)
                .collect()
        };
        let want = lines(r.cmd(&[b"INFO"]));
        let got = lines(g.cmd(&[b"INFO"]));
        assert_eq!(got, want, "{}: INFO's tracking figures", self.context);
        assert_eq!(got.len(), 4);
    }

    /// CLIENT INFO's `flags=` and `redir=` (an id named `$i`), compared.
    fn client_flags(&mut self, i: usize) {
        let fields = |reply: &[u8], ids: Vec<String>| -> Vec<String> {
            String::from_utf8_lossy(reply)
                .split([' ', '\n'])
                .filter(|f| f.starts_with("flags=") || f.starts_with("redir="))
                .map(|f| match f.strip_prefix("redir=") {
                    Some(id) => match ids.iter().position(|x| x == id) {
                        Some(n) => format!("redir=${n}"),
                        None => f.to_string(),
                    },
                    None => f.to_string(),
                })
                .collect()
        };
        let gids = self.ids.iter().map(|(g, _)| g.clone()).collect();
        let rids = self.ids.iter().map(|(_, r)| r.clone()).collect();
        let (g, r) = &mut self.conns[i];
        let got = fields(&g.cmd(&[b"CLIENT", b"INFO"]), gids);
        let want = fields(&r.cmd(&[b"CLIENT", b"INFO"]), rids);
        assert_eq!(got, want, "{}: CLIENT INFO on connection {i}", self.context);
        assert_eq!(got.len(), 2);
    }

    /// Nothing more was pushed on connection `i`: a PING's reply comes next (after a
    /// moment, for invalidations on their way from other threads).
    fn quiet(&mut self, i: usize) {
        std::thread::sleep(Duration::from_millis(50));
        self.check(i, "PING");
    }
}

fn replace(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

const THREAD_COUNTS: [usize; 2] = [1, 4];

/// Every argument error, in Redis's order, and the state each leaves.
#[test]
fn tracking_arguments_and_errors_match_redis() {
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 2);
        for line in [
            "CLIENT TRACKING",
            "CLIENT TRACKING maybe",
            "CLIENT TRACKING on foo",
            "CLIENT TRACKING on redirect",
            "CLIENT TRACKING on prefix",
            "CLIENT TRACKING on redirect abc",
            "CLIENT TRACKING on redirect 999999",
            "CLIENT TRACKING on redirect -1",
            "CLIENT TRACKING on redirect 0",
            "CLIENT TRACKING on redirect $1 redirect $1",
            "CLIENT TRACKING on prefix a",
            "CLIENT TRACKING on optin optout",
            "CLIENT TRACKING on bcast optin",
            "CLIENT TRACKING on bcast optout",
            "CLIENT TRACKING on bcast prefix a prefix ab",
            "CLIENT TRACKING on bcast prefix ab prefix a",
            "CLIENT TRACKING on bcast prefix a prefix a",
            "CLIENT TRACKING off foo",
            "CLIENT TRACKING off redirect 999999",
            "CLIENT CACHING yes",
            "CLIENT CACHING no",
            "CLIENT CACHING maybe",
            "CLIENT CACHING yes no",
            "CLIENT GETREDIR",
            "CLIENT GETREDIR x",
            "CLIENT TRACKINGINFO",
            "CLIENT TRACKINGINFO x",
        ] {
            p.check(0, line);
        }
        // On, then options that cannot change while on.
        p.check(0, "CLIENT TRACKING on optin");
        p.check(0, "CLIENT TRACKING on optout");
        p.check(0, "CLIENT TRACKING on bcast");
        p.check(0, "CLIENT CACHING no");
        p.check(0, "CLIENT CACHING maybe");
        p.check(0, "CLIENT CACHING yes");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT TRACKING on optin noloop redirect $1");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT GETREDIR");
        p.check(0, "CLIENT TRACKING off");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT GETREDIR");
        p.check(0, "CLIENT TRACKING on optout");
        p.check(0, "CLIENT CACHING yes");
        p.check(0, "CLIENT CACHING no");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT TRACKING off");
        // BCAST: prefixes, their overlaps with those already there, the empty prefix.
        p.check(0, "CLIENT TRACKING on bcast prefix b prefix a");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT TRACKING on bcast prefix ab");
        p.check(0, "CLIENT TRACKING on bcast prefix c");
        p.check(0, "CLIENT TRACKING on");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT TRACKING off");
        p.check(0, "CLIENT TRACKING on bcast");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT TRACKING on bcast prefix x");
        p.check(0, "CLIENT TRACKING off");
        // Redis answers an overlap found past the first prefix with an error and then
        // enables tracking anyway (and answers OK too).
        p.send_n(0, "CLIENT TRACKING on bcast prefix x prefix a prefix ab", 2);
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT TRACKING off");
        // RESP3 shapes.
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT TRACKING on bcast prefix q noloop");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT TRACKING off");
        p.check(0, "CLIENT TRACKING on redirect $1 optin");
        p.check(0, "CLIENT CACHING yes");
        p.check(0, "CLIENT TRACKINGINFO");
    }
}

/// The default mode in RESP3: a key read, then written by another client, is
/// invalidated once and forgotten; DEL, expiry, FLUSHALL, FLUSHDB; a client's own writes,
/// and NOLOOP.
#[test]
fn default_mode_invalidates_read_keys_like_redis() {
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 3);
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKING on");
        p.check(1, "MSET a 1 b 2 c 3");
        p.check(0, "GET a");
        p.check(0, "MGET b c nokey");
        p.check(1, "SET a 10");
        p.message(0);
        // Forgotten after one invalidation.
        p.check(1, "SET a 11");
        p.quiet(0);
        p.check(1, "DEL b");
        p.message(0);
        p.check(1, "DEL nokey");
        // Its own write: the reply, then the invalidation.
        p.check(0, "GET c");
        p.send_n(0, "SET c 4", 2);
        // Expiry, found by another client's read.
        p.check(1, "SET e 1 PX 50");
        p.check(0, "GET e");
        std::thread::sleep(Duration::from_millis(120));
        p.check(1, "GET e");
        p.message(0);
        // Expiry by the timer wheel (redis-server's active expiry), untouched.
        p.check(1, "SET ax 1 PX 200");
        p.check(0, "GET ax");
        std::thread::sleep(Duration::from_millis(1200));
        p.message(0);
        // Another database: tracking is by key name only.
        p.check(0, "GET d");
        p.check(1, "SELECT 1");
        p.check(1, "SET d 1");
        p.message(0);
        p.check(1, "SELECT 0");
        // Flushes: a null to every tracking client, the table emptied.
        p.check(0, "GET f");
        p.check(1, "FLUSHALL");
        p.message(0);
        p.check(1, "SET f 1");
        p.quiet(0);
        p.check(1, "FLUSHDB");
        p.message(0);
        // Its own flush: the reply, then the null.
        p.send_n(0, "FLUSHALL", 2);
        // Writes that do not touch tracked keys; reads of other commands' kinds.
        p.check(0, "HGET h f");
        p.check(0, "LRANGE l 0 -1");
        p.check(0, "EXISTS s");
        p.check(1, "HSET h f v");
        p.message(0);
        p.check(1, "RPUSH l x");
        p.message(0);
        p.check(1, "SADD s m");
        p.message(0);
        p.quiet(0);
        // A write command does not make its keys tracked.
        p.check(0, "SET w 1");
        p.check(1, "SET w 2");
        p.quiet(0);
        // NOLOOP: not told of its own writes (the key is forgotten all the same).
        p.check(0, "CLIENT TRACKING on noloop");
        p.check(0, "GET n");
        p.check(0, "SET n 1");
        p.check(1, "SET n 2");
        p.quiet(0);
        p.check(0, "GET n");
        p.check(1, "SET n 3");
        p.message(0);
        // Off: nothing more.
        p.check(0, "GET o");
        p.check(0, "CLIENT TRACKING off");
        p.check(1, "SET o 1");
        p.quiet(0);
        // A RESP2 client without a redirect is sent nothing (its keys are remembered).
        p.check(2, "CLIENT TRACKING on");
        p.check(2, "GET r");
        p.check(1, "SET r 1");
        p.quiet(2);
        p.check(2, "CLIENT TRACKING off");
    }
}

/// OPTIN: only the keys read by the command right after CLIENT CACHING yes; OPTOUT:
/// every key but those. MULTI keeps CLIENT CACHING for the transaction.
#[test]
fn optin_and_optout_follow_client_caching() {
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 2);
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKING on optin");
        p.check(0, "GET i1");
        p.check(0, "CLIENT CACHING yes");
        p.check(0, "GET i2");
        p.check(0, "GET i3");
        p.check(0, "CLIENT CACHING yes");
        p.check(0, "CLIENT TRACKINGINFO");
        p.check(0, "CLIENT GETNAME");
        p.check(0, "GET i4");
        p.check(1, "SET i1 1");
        p.check(1, "SET i2 1");
        p.message(0);
        p.check(1, "SET i3 1");
        p.check(1, "SET i4 1");
        p.message(0);
        p.quiet(0);
        p.check(0, "CLIENT TRACKINGINFO");
        // A refused command ends CLIENT CACHING too, but a CLIENT subcommand's.
        for refused in ["NOSUCH", "GET", "CLIENT NOSUCH", "CLIENT CACHING"] {
            p.check(0, "CLIENT CACHING yes");
            p.check(0, refused);
            p.check(0, "GET x");
            p.check(1, "INCR x");
            p.quiet(1);
        }
        p.message(0);
        p.quiet(0);
        p.check(0, "CLIENT TRACKING off");
        p.check(0, "CLIENT TRACKING on optout");
        p.check(0, "GET u1");
        p.check(0, "CLIENT CACHING no");
        p.check(0, "GET u2");
        p.check(0, "GET u3");
        p.check(1, "SET u1 1");
        p.message(0);
        p.check(1, "SET u2 1");
        p.check(1, "SET u3 1");
        p.message(0);
        p.quiet(0);
        p.check(0, "CLIENT TRACKING off");
        // A transaction's reads.
        p.check(0, "CLIENT TRACKING on");
        p.check(0, "MULTI");
        p.check(0, "GET t1");
        p.check(0, "EXEC");
        p.check(1, "SET t1 1");
        p.message(0);
        p.quiet(0);
    }
}

/// BCAST: every written key matching a prefix, one message per prefix with the keys
/// of a command sorted; NOLOOP; the empty prefix.
#[test]
fn bcast_sends_keys_matching_prefixes_like_redis() {
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 2);
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKING on bcast prefix {u}: prefix {o}");
        p.check(1, "SET {u}:1 x");
        p.message(0);
        p.check(1, "SET other x");
        p.check(1, "MSET {u}:b 1 {u}:a 2 {u}:c 3");
        p.message(0);
        p.check(1, "MSET {o}x 1 {o}a 2 {o}x 3");
        p.message(0);
        p.check(1, "DEL {u}:a {u}:zz {u}:b");
        p.message(0);
        p.quiet(0);
        // Its own writes: reply first.
        p.send_n(0, "SET {u}:own 1", 2);
        p.check(0, "CLIENT TRACKING off");
        p.check(0, "CLIENT TRACKING on bcast noloop");
        p.check(0, "SET x1 1");
        p.quiet(0);
        p.check(1, "SET x2 1");
        p.message(0);
        p.check(1, "FLUSHALL");
        p.message(0);
        p.check(0, "CLIENT TRACKING off");
    }
}

/// REDIRECT: to a RESP2 client subscribed to `__redis__:invalidate` (Pub/Sub messages),
/// to a RESP3 client (pushes); a RESP2 tracking client whose redirect client left; a
/// RESP3 one told `tracking-redir-broken`.
#[test]
fn redirected_invalidations_match_redis() {
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 5);
        // 1: a RESP2 subscriber; 0 tracks into it.
        p.check(1, "SUBSCRIBE __redis__:invalidate");
        p.client_flags(0);
        p.check(0, "CLIENT TRACKING on redirect $1");
        p.client_flags(0);
        p.check(0, "CLIENT GETREDIR");
        p.check(0, "GET a");
        p.check(2, "SET a 1");
        p.message(1);
        p.check(0, "GET a");
        p.check(2, "FLUSHALL");
        p.message(1);
        // BCAST through a redirect.
        p.check(0, "CLIENT TRACKING off");
        p.check(0, "CLIENT TRACKING on bcast prefix {k} redirect $1");
        p.client_flags(0);
        p.check(2, "MSET {k}2 1 {k}1 2");
        p.message(1);
        p.check(0, "CLIENT TRACKING off");
        // 3: a RESP3 client; 4 tracks into it.
        p.check(3, "HELLO 3");
        p.check(4, "CLIENT TRACKING on redirect $3");
        p.check(4, "GET b");
        p.check(2, "SET b 1");
        p.message(3);
        p.quiet(4);
        // A RESP2 client that is not subscribed receives nothing.
        p.check(0, "CLIENT TRACKING on redirect $2");
        p.check(0, "GET c");
        p.check(4, "SET c 1");
        p.quiet(2);
        // The redirect client leaves.
        p.check(0, "GET d");
        p.check(4, "GET d");
        p.conns[3] = (Raw::connect(p._goblin.port), Raw::connect(p._redis.port));
        p.conns[2] = (Raw::connect(p._goblin.port), Raw::connect(p._redis.port));
        std::thread::sleep(Duration::from_millis(100));
        p.check(1, "UNSUBSCRIBE");
        p.check(1, "SET d 1");
        p.quiet(0);
        p.check(0, "CLIENT TRACKINGINFO");
        p.client_flags(0);
        p.check(4, "HELLO 3");
        p.check(4, "CLIENT TRACKINGINFO");
        p.check(4, "GET d");
        p.check(1, "SET d 2");
        p.message(4);
        p.check(4, "CLIENT TRACKING on");
        p.check(4, "CLIENT TRACKINGINFO");
        // RESET turns tracking off.
        p.check(4, "RESET");
        p.check(4, "CLIENT TRACKINGINFO");
        p.check(4, "GET d");
        p.check(1, "SET d 3");
        p.quiet(4);
    }
}

/// Keys on every shard, read by clients on every thread (one MGET across shards, GETs,
/// a transaction), written by clients on other threads: each key invalidated once for
/// each client that read it.
#[test]
fn keys_on_several_shards_and_threads_are_invalidated() {
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 4);
        let keys: Vec<String> = (0..12).map(|i| format!("key:{i}")).collect();
        let all = keys.join(" ");
        for i in 0..3 {
            p.check(i, "HELLO 3");
            p.check(i, "CLIENT TRACKING on");
        }
        p.check(0, &format!("MGET {all}"));
        for k in &keys {
            p.check(1, &format!("GET {k}"));
        }
        p.check(2, "MULTI");
        p.check(2, &format!("MGET {all}"));
        p.check(2, "EXEC");
        p.tracking_info();
        let pairs: Vec<String> = keys.iter().map(|k| format!("{k} v")).collect();
        p.check(3, &format!("MSET {}", pairs.join(" ")));
        for i in 0..3 {
            p.messages_sorted(i, keys.len());
            p.quiet(i);
        }
        p.check(3, &format!("MSET {}", pairs.join(" ")));
        for i in 0..3 {
            p.quiet(i);
        }
        p.tracking_info();
        // Its own writes across shards: the reply first, then the invalidations.
        p.check(0, &format!("MGET {all}"));
        p.check(0, &format!("MSET {}", pairs.join(" ")));
        p.messages_sorted(0, keys.len());
        p.quiet(0);
        p.check(1, &format!("MGET {all}"));
        p.check(1, "MULTI");
        for k in &keys {
            p.check(1, &format!("SET {k} w"));
        }
        p.check(1, "EXEC");
        p.messages_sorted(1, keys.len());
        p.quiet(1);
        p.check(0, "CLIENT TRACKING on bcast prefix a prefix b");
        p.check(1, "CLIENT TRACKING off");
        p.check(1, "CLIENT TRACKING on bcast prefix b prefix c");
        p.tracking_info();
    }
}

/// `tracking-table-max-keys`: CONFIG GET/SET as redis-server's; past it, keys are
/// forgotten and their readers invalidated (which keys: random in both), down to the
/// limit.
#[test]
fn the_tracking_table_is_bounded_like_redis() {
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 4);
        p.check(1, "CONFIG GET tracking-table-max-keys");
        p.check(1, "CONFIG SET tracking-table-max-keys -1");
        p.check(1, "CONFIG SET tracking-table-max-keys x");
        p.check(1, "CONFIG SET tracking-table-max-keys 2");
        p.check(1, "CONFIG GET tracking-table-max-keys");
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKING on");
        // Five reads; the keys past the limit are invalidated (Redis before the next
        // command, Goblin as soon as they are remembered): five replies and three
        // pushes, in some order, on each server.
        let gets: Vec<u8> = ["k1", "k2", "k3", "k4", "k5"]
            .iter()
            .flat_map(|k| encode(&[b"GET", k.as_bytes()]))
            .collect();
        p.conns[0].0.send(&gets);
        p.conns[0].1.send(&gets);
        p.check(1, "PING");
        let (g, r) = &mut p.conns[0];
        for (server, raw) in [("goblin", g), ("redis", r)] {
            let (mut nulls, mut pushes) = (0, 0);
            for _ in 0..8 {
                let frame = raw.reply();
                if frame == b"_\r\n" {
                    nulls += 1;
                } else {
                    assert!(
                        frame.starts_with(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nk"),
                        "{server}: {}",
                        show(&frame)
                    );
                    pushes += 1;
                }
            }
            assert_eq!((nulls, pushes), (5, 3), "{server}");
        }
        p.tracking_info();
        p.quiet(0);
        p.check(1, "CONFIG SET tracking-table-max-keys 0");
        p.check(1, "FLUSHALL");
        p.message(0);
    }
}

#[test]
fn a_script_tracks_its_declared_keys_once_it_reads_like_redis() {
    // Redis 7.0 remembers the keys a script declares once it calls a read-only command,
    // and not the keys of the commands it calls (Redis's "Tracking only occurs for
    // scripts when a command calls a read-only command", which waited for ever).
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 2);
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKING on");
        p.check(1, "MSET key2{t} 1 key3{t} 1");
        p.check(
            0,
            "EVAL redis.call('set','key3{t}','bar') 2 key1{t} key2{t}",
        );
        p.check(1, "MSET key2{t} 2 key1{t} 2");
        p.quiet(0);
        p.check(0, "EVAL redis.call('get','key3{t}') 2 key1{t} key2{t}");
        p.check(1, "SET key3{t} 5");
        p.quiet(0);
        p.check(1, "MSET key2{t} 2 key1{t} 2");
        p.message(0);
        p.message(0);
        p.check(0, "EVAL_RO redis.call('ping') 2 key1{t} key2{t}");
        p.check(1, "MSET key2{t} 2 key1{t} 2");
        p.quiet(0);
        p.check(0, "EVAL_RO redis.call('get','key1{t}') 2 key1{t} key2{t}");
        p.check(1, "MSET key2{t} 3 key1{t} 3");
        p.message(0);
        p.message(0);
        p.check(0, "PING");
    }
}

#[test]
fn a_transaction_remembers_what_it_read_when_it_read_it_like_redis() {
    // Redis remembers a read-only command's keys as EXEC runs it: what the transaction
    // wrote before is not sent back to it, what it writes after is (after EXEC's
    // reply). Goblin remembered every key the transaction locked, when it locked them,
    // and told the client of its own earlier writes (Redis's "Tracking invalidation
    // message is not interleaved with multiple keys response"). With 4 threads the
    // MGET is a plan of its own inside EXEC.
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 2);
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKING on");
        for line in ["MULTI", "MSET x{t} 1 y{t} 2", "GET y{t}", "EXEC"] {
            p.check(0, line);
        }
        p.quiet(0);
        for line in ["MULTI", "GET a{t}", "SET a{t} 2", "EXEC"] {
            p.check(0, line);
        }
        p.message(0);
        p.quiet(0);
        for line in ["MULTI", "SET k1 1", "MGET k1 k2 k3 k4", "SET k2 2", "EXEC"] {
            p.check(0, line);
        }
        p.message(0);
        p.quiet(0);
        p.check(1, "SET y{t} 3");
        p.message(0);
        for key in ["k1", "k3", "k4"] {
            p.check(1, &format!("SET {key} x"));
            p.message(0);
        }
        p.check(1, "SET k2 x");
        p.quiet(0);
    }
}

#[test]
fn a_noloop_client_is_not_told_of_its_scripts_writes_like_redis() {
    // A script's writes are its caller's: a NOLOOP client is not told of them (Redis's
    // "Invalid keys should not be tracked for scripts in NOLOOP mode"), whether the
    // script runs on its keys' shard or as a plan across shards (an undeclared key on
    // another thread), and the keys are forgotten all the same.
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 2);
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKING on NOLOOP");
        p.check(0, "MSET key1 1 key2 1 key3 1");
        p.check(0, "MGET key1 key2 key3");
        p.check(0, "EVAL redis.call('set','key1','2') 1 key1");
        p.quiet(0);
        p.check(0, "EVAL redis.call('set','key2','2') 0");
        p.quiet(0);
        p.check(1, "SET key1 3");
        p.check(1, "SET key2 3");
        p.quiet(0);
        p.check(1, "SET key3 3");
        p.message(0);
        p.quiet(0);
    }
}

#[test]
fn a_lowered_table_limit_invalidates_keys_with_no_further_command_like_redis() {
    // CONFIG SET tracking-table-max-keys below what the tables hold: the keys past it
    // are invalidated even if no client sends anything more (Redis's cron trims the
    // table; Redis's "Tracking gets notification on tracking table key eviction"
    // waited for ever on Goblin, which trimmed only when a key was next remembered).
    for threads in THREAD_COUNTS {
        let mut p = Pair::new(threads, 4);
        p.check(0, "HELLO 3");
        p.check(0, "CLIENT TRACKING on");
        p.check(1, "MSET k1 1 k2 2 k3 3");
        p.check(0, "MGET k1 k2 k3");
        p.check(1, "CONFIG SET tracking-table-max-keys 1");
        let (g, r) = &mut p.conns[0];
        for (server, raw) in [("goblin", g), ("redis", r)] {
            for _ in 0..2 {
                let frame = raw.reply();
                assert!(
                    frame.starts_with(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nk"),
                    "{server}, --threads {threads}: {}",
                    show(&frame)
                );
            }
        }
        p.quiet(0);
        p.tracking_info();
        // A flush empties the tables even when no client tracks any more.
        p.check(0, "CLIENT TRACKING off");
        p.check(1, "FLUSHALL");
        p.tracking_info();
    }
}
