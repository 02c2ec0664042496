//! Pub/Sub (issue 15): replies and messages against redis-server byte for byte, in RESP2
//! and RESP3, with subscribers and publishers on different threads; per-publisher order
//! across threads; the pubsub output-buffer limit; real clients.

use std::io::Read;
use std::time::{Duration, Instant};

use goblin_tests::diff::differences;
use goblin_tests::keys::THREADS;
use goblin_tests::{Raw, Server, encode, show};

/// Both servers with several connections each: connection `i` of goblin-server is
/// compared with connection `i` of redis-server. goblin-server deals connections to its
/// threads in turn, so with 4 threads consecutive connections live on different threads.
struct Pair {
    _goblin: Server,
    _redis: Server,
    conns: Vec<(Raw, Raw)>,
    context: String,
}

impl Pair {
    fn new(threads: usize, connections: usize) -> Pair {
        let goblin = Server::goblin_threads(threads);
        let redis = Server::redis();
        let conns = (0..connections)
            .map(|_| (goblin.raw(), redis.raw()))
            .collect();
        Pair {
            _goblin: goblin,
            _redis: redis,
            conns,
            context: format!("--threads {threads}"),
        }
    }

    fn words(line: &str) -> Vec<&[u8]> {
        line.split(' ').map(str::as_bytes).collect()
    }

    /// Sends `args` on connection `i` of both and compares the next `n` replies.
    fn send_n(&mut self, i: usize, args: &[&[u8]], n: usize) -> Vec<u8> {
        let (g, r) = &mut self.conns[i];
        r.send(&encode(args));
        g.send(&encode(args));
        let mut got = Vec::new();
        let mut want = Vec::new();
        for _ in 0..n {
            want.extend(r.reply());
            got.extend(g.reply());
        }
        assert!(
            got == want,
            "{}: connection {i}, {}: goblin differs from redis\n{}",
            self.context,
            show(&encode(args)),
            differences(&got, &want)
        );
        got
    }

    /// One command, one reply, compared.
    fn check(&mut self, i: usize, line: &str) -> Vec<u8> {
        self.send_n(i, &Self::words(line), 1)
    }

    /// One command answered with `n` replies (a SUBSCRIBE of n channels).
    fn check_n(&mut self, i: usize, line: &str, n: usize) -> Vec<u8> {
        self.send_n(i, &Self::words(line), n)
    }

    /// The next message pushed on connection `i`, compared.
    fn message(&mut self, i: usize) -> Vec<u8> {
        let (g, r) = &mut self.conns[i];
        let want = r.reply();
        let got = g.reply();
        assert!(
            got == want,
            "{}: message on connection {i}: goblin differs from redis\n{}",
            self.context,
            differences(&got, &want)
        );
        got
    }

    /// A command whose reply is an array in each server's own order: compared sorted.
    fn check_sorted(&mut self, i: usize, line: &str) {
        let (g, r) = &mut self.conns[i];
        let args = Self::words(line);
        let want = r.cmd(&args);
        let got = g.cmd(&args);
        let sorted = |reply: &[u8]| {
            let mut lines: Vec<&[u8]> = reply.split(|&b| b == b'\n').collect();
            lines.sort();
            lines.concat()
        };
        assert_eq!(
            sorted(&got),
            sorted(&want),
            "{}: {line}: goblin {} redis {}",
            self.context,
            show(&got),
            show(&want)
        );
    }
}

/// Subscribing, publishing to channels, patterns and shard channels, the confirmations'
/// counts, PUBSUB's introspection, unsubscribing (named, all, none), PING and other
/// commands on a subscribed RESP2 connection, RESET.
fn resp2_script(p: &mut Pair) {
    // 0: subscriber; 1: publisher; 2: a second subscriber.
    p.check_n(0, "SUBSCRIBE news sport", 2);
    p.check_n(0, "SUBSCRIBE news", 1);
    p.check_n(0, "PSUBSCRIBE h?llo n*", 2);
    p.check_n(0, "SSUBSCRIBE shard1", 1);
    p.check_n(2, "PSUBSCRIBE n*", 1);
    p.check_n(2, "SUBSCRIBE sport", 1);
    p.check(1, "PUBLISH news first");
    p.message(0);
    p.message(0);
    p.message(2);
    p.check(1, "PUBLISH hello there");
    p.message(0);
    p.check(1, "PUBLISH sport goal");
    p.message(0);
    p.message(2);
    p.check(1, "PUBLISH nobody listens");
    p.message(0); // through n*
    p.message(2);
    p.check(1, "PUBLISH zzz nobody");
    p.check(1, "SPUBLISH shard1 sharded");
    p.message(0);
    p.check(1, "SPUBLISH news not-a-shard-channel-subscriber");
    p.check(1, "PUBSUB NUMSUB news sport nobody");
    p.check(1, "PUBSUB NUMSUB");
    p.check(1, "PUBSUB NUMPAT");
    p.check(1, "PUBSUB SHARDNUMSUB shard1 news");
    p.check_sorted(1, "PUBSUB CHANNELS");
    p.check_sorted(1, "PUBSUB CHANNELS s*");
    p.check_sorted(1, "PUBSUB SHARDCHANNELS");
    p.check(1, "PUBSUB SHARDCHANNELS x*");
    p.check(1, "PUBSUB HELP");
    p.check(1, "PUBSUB NOPE");
    p.check(1, "PUBSUB NUMPAT extra");
    p.check(1, "PUBLISH onlyone");
    // A subscribed RESP2 connection: PING answers as a message, others are refused.
    p.check(0, "PING");
    p.check(0, "PING hi");
    p.check(0, "GET k");
    p.check(0, "CLIENT ID x");
    p.check(0, "SET k v");
    p.check(0, "MULTI");
    // Unsubscribing: by name (also from what it does not subscribe to), then all.
    p.check_n(0, "UNSUBSCRIBE news never", 2);
    p.check_n(0, "PUNSUBSCRIBE h?llo", 1);
    p.check(1, "PUBLISH news after");
    p.message(0); // through n*
    p.message(2);
    p.check_n(0, "UNSUBSCRIBE", 1);
    p.check_n(0, "UNSUBSCRIBE", 1);
    p.check_n(0, "PUNSUBSCRIBE", 1);
    p.check_n(0, "PUNSUBSCRIBE", 1);
    p.check(0, "GET k");
    p.check_n(0, "SUNSUBSCRIBE", 1);
    p.check_n(0, "SUNSUBSCRIBE", 1);
    p.check(0, "GET k");
    p.check(0, "PING");
    p.check(1, "PUBSUB NUMSUB news sport");
    // RESET leaves every subscription.
    p.check(2, "RESET");
    p.check(2, "GET k");
    p.check(1, "PUBSUB NUMPAT");
    p.check(1, "PUBLISH sport nobody");
    // PUBLISH inside MULTI.
    p.check_n(2, "SUBSCRIBE inmulti", 1);
    p.check(1, "MULTI");
    p.check(1, "PUBLISH inmulti 1");
    p.check(1, "PUBLISH inmulti 2");
    p.check(1, "EXEC");
    p.message(2);
    p.message(2);
    // Binary-safe names and messages.
    p.send_n(2, &[b"SUBSCRIBE", b"bin\r\n\x00"], 1);
    p.send_n(1, &[b"PUBLISH", b"bin\r\n\x00", b"\x00\xff\r\n"], 1);
    p.message(2);
    // Arity.
    p.check(1, "SUBSCRIBE");
    p.check(1, "PSUBSCRIBE");
    p.check(1, "PUBLISH a");
}

#[test]
fn pubsub_resp2_matches_redis() {
    for threads in THREADS {
        let mut p = Pair::new(threads, 3);
        resp2_script(&mut p);
    }
}

#[test]
fn pubsub_resp3_matches_redis() {
    for threads in THREADS {
        let mut p = Pair::new(threads, 3);
        for (g, r) in &mut p.conns {
            // (HELLO's reply holds the client id, which differs.)
            for raw in [g, r] {
                let hello = raw.cmd(&[b"HELLO", b"3"]);
                assert!(hello.starts_with(b"%7\r\n"), "{}", show(&hello));
            }
        }
        p.check_n(0, "SUBSCRIBE news sport", 2);
        p.check_n(0, "PSUBSCRIBE n*", 1);
        p.check_n(0, "SSUBSCRIBE s", 1);
        // RESP3: any command on a subscribed connection; messages are pushes between
        // replies.
        p.check(0, "SET k v");
        p.check(0, "GET k");
        p.check(0, "PING");
        p.check(1, "PUBLISH news hello");
        p.message(0);
        p.message(0);
        p.check(1, "SPUBLISH s x");
        p.message(0);
        p.check(1, "PUBSUB NUMSUB news");
        p.check_n(0, "UNSUBSCRIBE news", 1);
        p.check_n(0, "UNSUBSCRIBE", 1);
        p.check_n(0, "UNSUBSCRIBE", 1);
        p.check_n(0, "PUNSUBSCRIBE", 1);
        p.check_n(0, "SUNSUBSCRIBE", 1);
        p.check_n(0, "SUNSUBSCRIBE", 1);
        p.check(0, "RESET");
        p.check(0, "GET k");
    }
}

/// Reads messages from `raw` until `n` arrived (or a deadline); returns their channel
/// and payload.
fn read_messages(raw: &mut Raw, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let reply = raw.reply();
        let parts: Vec<Vec<u8>> = goblin_tests::reply::bulks(&reply)
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        // ["message", channel, payload] or ["pmessage", pattern, channel, payload]
        let (channel, payload) = match parts.first().map(Vec::as_slice) {
            Some(b"message") => (parts[1].clone(), parts[2].clone()),
            Some(b"pmessage") => (parts[2].clone(), parts[3].clone()),
            _ => panic!("not a message: {}", show(&reply)),
        };
        out.push((channel, payload));
    }
    out
}

/// Publishers and subscribers on every thread: each PUBLISH counts the receivers on
/// every thread, and each subscriber gets every publisher's messages in the order they
/// were published.
#[test]
fn publishers_and_subscribers_on_different_threads_keep_order() {
    let threads = 4;
    let server = Server::goblin_threads(threads);
    // Connections are dealt to the threads in turn: 4 subscribers on 4 threads, then
    // 3 publishers on 3 of them.
    let mut subs: Vec<Raw> = (0..4).map(|_| server.raw()).collect();
    for (i, s) in subs.iter_mut().enumerate() {
        let confirm = if i % 2 == 0 {
            s.cmd(&[b"SUBSCRIBE", b"orders"])
        } else {
            s.cmd(&[b"PSUBSCRIBE", b"ord*"])
        };
        assert!(confirm.starts_with(b"*3\r\n"), "{}", show(&confirm));
    }
    let mut pubs: Vec<Raw> = (0..3).map(|_| server.raw()).collect();
    let per_publisher = 2000;
    // Each publisher sends its whole run as one pipeline.
    for (p, raw) in pubs.iter_mut().enumerate() {
        let mut batch = Vec::new();
        for n in 0..per_publisher {
            batch.extend(encode(&[
                b"PUBLISH",
                b"orders",
                format!("{p}:{n}").as_bytes(),
            ]));
        }
        raw.send(&batch);
    }
    for raw in &mut pubs {
        for _ in 0..per_publisher {
            assert_eq!(raw.reply(), b":4\r\n", "every subscriber counted");
        }
    }
    for (i, s) in subs.iter_mut().enumerate() {
        let got = read_messages(s, 3 * per_publisher);
        let mut next = [0usize; 3];
        for (channel, payload) in got {
            assert_eq!(channel, b"orders");
            let text = String::from_utf8(payload).unwrap();
            let (p, n) = text.split_once(':').unwrap();
            let (p, n): (usize, usize) = (p.parse().unwrap(), n.parse().unwrap());
            assert_eq!(
                n, next[p],
                "subscriber {i}: publisher {p}'s messages out of order"
            );
            next[p] += 1;
        }
        assert_eq!(next, [per_publisher; 3], "subscriber {i}");
    }
}

/// A subscriber that does not read is closed by the pubsub output-buffer limit, and the
/// server forgets its subscriptions; the others go on.
#[test]
fn a_subscriber_that_does_not_read_is_cut_off_by_the_pubsub_limit() {
    let server = Server::goblin_with(&["--threads", "2"]);
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&[
            b"CONFIG",
            b"SET",
            b"client-output-buffer-limit",
            b"pubsub 1mb 0 0"
        ]),
        b"+OK\r\n"
    );
    let mut sleeper = server.raw();
    let confirm = sleeper.cmd(&[b"SUBSCRIBE", b"firehose"]);
    assert!(confirm.starts_with(b"*3\r\n"), "{}", show(&confirm));
    let mut reader = server.raw();
    reader.cmd(&[b"SUBSCRIBE", b"firehose"]);
    // Make the sleeper's socket buffers small, so its output piles up in the server.
    let payload = vec![b'x'; 64 * 1024];
    let mut publisher = server.raw();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut published = 0;
    loop {
        let n = publisher.cmd(&[b"PUBLISH", b"firehose", &payload]);
        published += 1;
        // The reader keeps up.
        let msg = reader.reply();
        assert!(msg.len() > payload.len());
        if n == b":1\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the sleeper was never cut off");
    }
    // Cut off after at least the limit (plus what the socket buffers took), and far
    // sooner than its messages could fill the server's memory.
    assert!(published >= 16, "cut off after {published} messages");
    assert!(published < 2000, "cut off only after {published} messages");
    let (_, closed) = sleeper.read_to_close(Duration::from_secs(5));
    assert!(closed, "the sleeper's connection is closed");
    assert_eq!(
        admin.cmd(&[b"PUBSUB", b"NUMSUB", b"firehose"]),
        b"*2\r\n$8\r\nfirehose\r\n:1\r\n"
    );
}

/// The `redis` crate's Pub/Sub client, against a publisher on another connection.
#[test]
fn the_redis_crate_subscribes_and_receives() {
    let server = Server::goblin_threads(4);
    let mut sub_conn = server.client();
    let mut publisher = server.client();
    let mut pubsub = sub_conn.as_pubsub();
    pubsub.subscribe("jobs").unwrap();
    pubsub.psubscribe("job*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let n: i64 = redis::cmd("PUBLISH")
        .arg("jobs")
        .arg("done")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(n, 2);
    let mut got = Vec::new();
    for _ in 0..2 {
        let msg = pubsub.get_message().unwrap();
        let payload: String = msg.get_payload().unwrap();
        got.push((
            msg.get_channel_name().to_string(),
            payload,
            msg.from_pattern(),
        ));
    }
    got.sort();
    assert_eq!(
        got,
        vec![
            ("jobs".to_string(), "done".to_string(), false),
            ("jobs".to_string(), "done".to_string(), true),
        ]
    );
    pubsub.unsubscribe("jobs").unwrap();
    pubsub.punsubscribe("job*").unwrap();
    drop(pubsub);
    let n: i64 = redis::cmd("PUBLISH")
        .arg("jobs")
        .arg("again")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(n, 0);
    // The subscriber's connection serves ordinary commands again.
    let pong: String = redis::cmd("PING").query(&mut sub_conn).unwrap();
    assert_eq!(pong, "PONG");
}

/// A closed subscriber's subscriptions are gone from every count.
#[test]
fn a_closed_subscriber_is_forgotten() {
    let server = Server::goblin_threads(4);
    let mut admin = server.raw();
    {
        let mut s = server.raw();
        s.cmd(&[b"SUBSCRIBE", b"a"]);
        s.cmd(&[b"PSUBSCRIBE", b"p*"]);
        s.cmd(&[b"SSUBSCRIBE", b"s"]);
        assert_eq!(admin.cmd(&[b"PUBSUB", b"NUMPAT"]), b":1\r\n");
        let mut byte = [0u8; 1];
        s.stream()
            .set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        let _ = s.stream().read(&mut byte);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let numsub = admin.cmd(&[b"PUBSUB", b"NUMSUB", b"a"]);
        let numpat = admin.cmd(&[b"PUBSUB", b"NUMPAT"]);
        let shard = admin.cmd(&[b"PUBSUB", b"SHARDNUMSUB", b"s"]);
        if numsub == b"*2\r\n$1\r\na\r\n:0\r\n"
            && numpat == b":0\r\n"
            && shard == b"*2\r\n$1\r\ns\r\n:0\r\n"
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still counted: {}",
            show(&numsub)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(admin.cmd(&[b"PUBLISH", b"a", b"x"]), b":0\r\n");
}

/// A message published before a subscriber's command was sent (the publisher read
/// PUBLISH's reply first) arrives before that command's reply, whichever threads they
/// live on — as with redis-server, where one thread does both.
#[test]
fn a_message_published_before_a_command_comes_before_its_reply() {
    let server = Server::goblin_threads(4);
    // Subscribers on every thread, a publisher on each of the next ones.
    let mut subs: Vec<Raw> = (0..4).map(|_| server.raw()).collect();
    for s in &mut subs {
        let hello = s.cmd(&[b"HELLO", b"3"]);
        assert!(hello.starts_with(b"%"), "{}", show(&hello));
        let confirm = s.cmd(&[b"SUBSCRIBE", b"c"]);
        assert!(confirm.starts_with(b">3\r\n"), "{}", show(&confirm));
    }
    let mut publisher = server.raw();
    // Busy threads: long pipelines on every thread, so that messages between threads
    // and new requests from sockets often wait for the same loop iteration.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..4)
        .map(|i| {
            let mut raw = server.raw();
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                for n in 0..2000 {
                    batch.extend(encode(&[b"SET", format!("busy{i}:{n}").as_bytes(), b"v"]));
                }
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    raw.send(&batch);
                    for _ in 0..2000 {
                        raw.reply();
                    }
                }
            })
        })
        .collect();
    for round in 0..300 {
        assert_eq!(
            publisher.cmd(&[b"PUBLISH", b"c", round.to_string().as_bytes()]),
            b":4\r\n"
        );
        for (i, s) in subs.iter_mut().enumerate() {
            s.send(&encode(&[b"PING"]));
            let first = s.reply();
            assert!(
                first.starts_with(b">3\r\n$7\r\nmessage\r\n"),
                "round {round}, subscriber {i}: the reply came before the message: {}",
                show(&first)
            );
            assert_eq!(s.reply(), b"+PONG\r\n");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for b in busy {
        b.join().unwrap();
    }
}

/// Under CLIENT REPLY OFF, (un)subscribe confirmations are still sent, in RESP2 and
/// RESP3, as redis-server sends every Pub/Sub reply (`CLIENT_PUSHING`); other replies are
/// not (Redis's pubsub tests).
#[test]
fn subscribe_confirmations_are_sent_under_client_reply_off() {
    let transcript = |server: &Server| {
        let mut out = Vec::new();
        for version in ["2", "3"] {
            for sub in [
                "SUBSCRIBE ch ch3",
                "PSUBSCRIBE p*",
                "SSUBSCRIBE ch2",
                "UNSUBSCRIBE",
                "SUBSCRIBE",
            ] {
                let mut c = server.raw();
                c.cmd_str(&format!("HELLO {version}"));
                let mut bytes = Vec::new();
                for line in ["CLIENT REPLY OFF", "PING", sub, "PING"] {
                    let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
                    bytes.extend_from_slice(&encode(&words));
                }
                c.send(&bytes);
                out.push(c.read_to_close(Duration::from_millis(200)).0);
            }
        }
        out
    };
    let want = goblin_tests::diff::same_transcript(transcript);
    assert!(!want[0].is_empty());
}
