//! Blocking commands, side by side with redis-server: the same scenario on both servers,
//! the same replies. Clients are served in the order they blocked, one element each; a
//! push serves a blocked client in the same step (the list is empty when the pusher's
//! reply arrives); waits span shards; timeouts, MULTI, CLIENT UNBLOCK and disconnects
//! behave as in Redis; and under load nothing pushed is lost or popped twice.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use goblin_tests::keys::{keys_on, shard_of};
use goblin_tests::{Raw, Server, default_threads, encode, reply};

/// The value of `field` in INFO.
fn info(raw: &mut Raw, field: &str) -> String {
    let text = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"everything"])).into_owned();
    reply::info_field(&text, field)
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .to_string()
}

/// Waits until the server counts `n` blocked clients.
fn until_blocked(admin: &mut Raw, n: usize) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while info(admin, "blocked_clients") != n.to_string() {
        assert!(Instant::now() < give_up, "never {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends a command without reading its reply.
fn send(raw: &mut Raw, line: &str) {
    let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    raw.send(&encode(&words));
}

/// Runs `scenario` on goblin and on redis and asserts the same transcript.
fn same(scenario: impl Fn(&Server) -> Vec<Vec<u8>>) {
    goblin_tests::diff::same_transcript(scenario);
}

/// Keys a test uses: on different shards of goblin when it has several.
fn two_keys() -> (String, String) {
    let threads = default_threads();
    let a = keys_on("a:", 0, threads, 1).remove(0);
    let b = keys_on("b:", threads - 1, threads, 1).remove(0);
    assert!(threads == 1 || shard_of(a.as_bytes(), threads) != shard_of(b.as_bytes(), threads));
    (a, b)
}

#[test]
fn data_already_there_is_served_at_once_and_errors_are_redis() {
    same(|s| {
        let mut c = s.raw();
        [
            "RPUSH l a b c",
            "BLPOP l 0",
            "BRPOP l 0",
            "BLMPOP 0 1 l LEFT COUNT 5",
            "RPUSH l x",
            "BLMOVE l d LEFT RIGHT 0",
            "BRPOPLPUSH d l 0",
            "BLPOP l x",
            "BLPOP l -1",
            "BLPOP l inf",
            "BLPOP l 1 ",
            "BLMPOP 0 0 l LEFT",
            "BLMPOP x 1 l LEFT",
            "BLMPOP 0 1 l UP",
            "BLMOVE l d UP LEFT 0",
            "BLMOVE l d LEFT LEFT x",
            "SET s v",
            "BLPOP s 0",
            "BLPOP nothing s 0",
            "BLMOVE s d LEFT LEFT 0",
            "RPUSH l y",
            "BLMOVE l s LEFT LEFT 0",
            "BLPOP l 0",
        ]
        .iter()
        .map(|line| c.cmd_str(line))
        .collect()
    });
}

#[test]
fn a_timeout_answers_nil_after_the_time_given() {
    same(|s| {
        let mut c = s.raw();
        let mut out = Vec::new();
        for line in ["BLPOP t 0.1", "BRPOPLPUSH t u 0.1", "BLMPOP 0.1 1 t RIGHT"] {
            let started = Instant::now();
            out.push(c.cmd_str(line));
            let took = started.elapsed();
            assert!(took >= Duration::from_millis(100), "{line}: {took:?}");
            assert!(took < Duration::from_millis(600), "{line}: {took:?}");
        }
        out
    });
    // The precision the issue asks for: 0.1–0.15 s (best of a few, on a busy machine).
    let g = Server::goblin_threads(default_threads());
    let mut c = g.raw();
    let best = (0..5)
        .map(|_| {
            let started = Instant::now();
            assert_eq!(c.cmd_str("BLPOP t 0.1"), b"*-1\r\n");
            started.elapsed()
        })
        .min()
        .unwrap();
    assert!(
        best >= Duration::from_millis(100) && best < Duration::from_millis(150),
        "{best:?}"
    );
}

#[test]
fn replies_before_a_blocking_command_arrive_while_it_waits() {
    // A pipeline whose last command blocks: the replies of the commands before it (one
    // on another shard) reach the client while it waits, as redis-server writes them.
    let (a, b) = two_keys();
    same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let mut out = Vec::new();
        for wait in ["BLPOP q 0", "XREAD BLOCK 0 STREAMS st $", "BZPOPMIN z 0"] {
            let mut pipeline = Vec::new();
            for line in [&format!("SET {a} 1"), &format!("GET {b}"), wait] {
                let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
                pipeline.extend(encode(&words));
            }
            c.send(&pipeline);
            until_blocked(&mut admin, 1);
            // Read while the last command still waits (a read times out after
            // REPLY_TIMEOUT when they are held back).
            out.push(c.reply());
            out.push(c.reply());
            assert_eq!(info(&mut admin, "blocked_clients"), "1", "{wait}");
            out.push(admin.cmd_str(match wait {
                "BLPOP q 0" => "RPUSH q v",
                "BZPOPMIN z 0" => "ZADD z 1 m",
                _ => "XADD st 1-1 f v",
            }));
            out.push(c.reply());
        }
        out
    });
}

#[test]
fn a_transaction_or_script_serves_blocked_clients_when_it_ends() {
    // Clients blocked on two keys (of one shard) and a MULTI or a script pushing to
    // both: as in redis-server, the clients are served after the whole transaction, key
    // by key in the order the keys became ready, each key serving every client it can
    // — both clients take from {t}w2, whose push came first, and {t}w1 keeps its element.
    same(|s| {
        let mut admin = s.raw();
        let mut a = s.raw();
        let mut b = s.raw();
        let mut out = Vec::new();
        let pushes = [
            "MULTI",
            "RPUSH {t}w2 A",
            "RPUSH {t}w1 B",
            "RPUSH {t}w2 C",
            "EXEC",
        ];
        let script = "EVAL redis.call('rpush',KEYS[2],'A')redis.call('rpush',KEYS[1],'B')redis.call('rpush',KEYS[2],'C') 2 {t}w1 {t}w2";
        for transaction in [&pushes[..], &[script][..]] {
            send(&mut a, "BLPOP {t}w1 {t}w2 5");
            until_blocked(&mut admin, 1);
            send(&mut b, "BLPOP {t}w2 {t}w1 5");
            until_blocked(&mut admin, 2);
            for line in transaction {
                out.push(admin.cmd_str(line));
            }
            out.push(a.reply());
            out.push(b.reply());
            out.push(admin.cmd_str("LRANGE {t}w1 0 -1"));
            out.push(admin.cmd_str("LRANGE {t}w2 0 -1"));
            out.push(admin.cmd_str("DEL {t}w1 {t}w2"));
        }
        out
    });
}

#[test]
fn clients_are_served_in_the_order_they_blocked_one_element_each() {
    same(|s| {
        let mut admin = s.raw();
        let mut clients: Vec<Raw> = (0..3).map(|_| s.raw()).collect();
        for (i, c) in clients.iter_mut().enumerate() {
            send(c, "BLPOP q 0");
            until_blocked(&mut admin, i + 1);
        }
        let mut out = vec![admin.cmd_str("RPUSH q one two")];
        // Served in the push's step: the list is already empty.
        out.push(admin.cmd_str("LLEN q"));
        out.push(clients[0].reply());
        out.push(clients[1].reply());
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str("RPUSH q three"));
        out.push(clients[2].reply());
        out.push(admin.cmd_str("EXISTS q"));
        out
    });
}

#[test]
fn a_wait_on_keys_of_several_shards_is_served_by_a_push_on_either() {
    let (a, b) = two_keys();
    same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let mut out = Vec::new();
        for (first, second) in [(&a, &b), (&b, &a)] {
            send(&mut c, &format!("BLPOP {a} {b} 0"));
            until_blocked(&mut admin, 1);
            out.push(admin.cmd_str(&format!("RPUSH {second} v")));
            out.push(c.reply());
            until_blocked(&mut admin, 0);
            // The other key's push serves nobody: the client was served once.
            out.push(admin.cmd_str(&format!("RPUSH {first} w")));
            out.push(admin.cmd_str(&format!("LPOP {first}")));
        }
        out
    });
}

#[test]
fn blmove_across_shards_moves_what_is_pushed() {
    let (a, b) = two_keys();
    same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let mut out = Vec::new();
        send(&mut c, &format!("BLMOVE {a} {b} LEFT RIGHT 0"));
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str(&format!("RPUSH {a} x")));
        out.push(c.reply());
        out.push(admin.cmd_str(&format!("LRANGE {a} 0 -1")));
        out.push(admin.cmd_str(&format!("LRANGE {b} 0 -1")));
        send(&mut c, &format!("BRPOPLPUSH {b}x {a} 0"));
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str(&format!("LPUSH {b}x y")));
        out.push(c.reply());
        out.push(admin.cmd_str(&format!("LRANGE {a} 0 -1")));
        out
    });
}

#[test]
fn inside_multi_a_blocking_command_does_not_block() {
    same(|s| {
        let mut c = s.raw();
        [
            "MULTI",
            "BLPOP none 0",
            "BLMOVE none d LEFT LEFT 0",
            "BLMPOP 0 1 none LEFT",
            "RPUSH l v",
            "BLPOP l 0",
            "EXEC",
        ]
        .iter()
        .map(|line| c.cmd_str(line))
        .collect()
    });
}

#[test]
fn client_unblock_and_a_disconnect_leave_nothing_behind() {
    same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let id = c.cmd_str("CLIENT ID");
        let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
        let mut out = Vec::new();
        send(&mut c, "BLPOP k 0");
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str(&format!("CLIENT UNBLOCK {id}")));
        out.push(c.reply());
        send(&mut c, "BLMOVE k d LEFT LEFT 0");
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str(&format!("CLIENT UNBLOCK {id} ERROR")));
        out.push(c.reply());
        out.push(admin.cmd_str(&format!("CLIENT UNBLOCK {id}")));
        // A client that leaves while blocked takes nothing with it.
        let mut gone = s.raw();
        send(&mut gone, "BLPOP k 0");
        until_blocked(&mut admin, 1);
        drop(gone);
        until_blocked(&mut admin, 0);
        out.push(admin.cmd_str("RPUSH k kept"));
        out.push(admin.cmd_str("LRANGE k 0 -1"));
        out
    });
}

#[test]
fn a_waiter_whose_move_fails_leaves_the_element_to_the_next() {
    // BRPOPLPUSH / BLMOVE into a key of another type: redis-server answers the first
    // waiter WRONGTYPE and serves the next from the same push. Source and destinations
    // on one shard, then on different shards of goblin.
    let (a, b) = two_keys();
    for (src, bad, good) in [
        (
            "{t}src".to_string(),
            "{t}bad".to_string(),
            "{t}good".to_string(),
        ),
        (a.clone(), b.clone(), a.clone() + "x"),
    ] {
        same(|s| {
            let mut admin = s.raw();
            let mut c1 = s.raw();
            let mut c2 = s.raw();
            let mut c3 = s.raw();
            let mut out = vec![admin.cmd_str(&format!("SET {bad} nolist"))];
            send(&mut c1, &format!("BRPOPLPUSH {src} {bad} 0"));
            until_blocked(&mut admin, 1);
            send(&mut c2, &format!("BLMOVE {src} {bad} LEFT RIGHT 0"));
            until_blocked(&mut admin, 2);
            send(&mut c3, &format!("BRPOPLPUSH {src} {good} 0"));
            until_blocked(&mut admin, 3);
            out.push(admin.cmd_str(&format!("LPUSH {src} foo")));
            out.push(c1.reply());
            out.push(c2.reply());
            out.push(c3.reply());
            out.push(admin.cmd_str(&format!("LRANGE {good} 0 -1")));
            out.push(admin.cmd_str(&format!("EXISTS {src}")));
            out.push(info(&mut admin, "blocked_clients").into_bytes());
            out.push(admin.cmd_str(&format!("DEL {bad} {good}")));
            out
        });
    }
}

/// Runs `round` `n` times side by side on goblin and redis, each time with a hash tag
/// whose keys are on the next shard, the admin connection and two new clients (an extra
/// connection now and then moves them to other threads).
fn rounds_on_each_shard(
    n: usize,
    round: impl Fn(&str, &mut Raw, &mut Raw, &mut Raw) -> Vec<Vec<u8>>,
) {
    let threads = default_threads();
    let tags: Vec<String> = (0..threads)
        .map(|shard| keys_on("t", shard, threads, 1).remove(0))
        .collect();
    same(|s| {
        let mut admin = s.raw();
        let mut out = Vec::new();
        for i in 0..n {
            let _spare = (i % 3 == 1).then(|| s.raw());
            let (mut c1, mut c2) = (s.raw(), s.raw());
            out.extend(round(&tags[i % tags.len()], &mut admin, &mut c1, &mut c2));
        }
        out
    });
}

#[test]
fn clients_blocked_back_to_back_are_served_in_the_order_they_sent() {
    // After Redis's own "BRPOPLPUSH with multiple blocked clients": two clients block on
    // one list, sent one right after the other, and a push follows. The first is served
    // first (its move fails: WRONGTYPE) and the element goes to the second. In goblin
    // the first client's command may come from another thread than the list's and reach
    // the list's shard after the second's: it still keeps its turn. (Redis's test sends
    // the push at once too; goblin cannot promise that a push read on the list's thread
    // finds a wait still on its way from another.)
    rounds_on_each_shard(12, |tag, admin, c1, c2| {
        let (src, bad, good) = (
            format!("{{{tag}}}src"),
            format!("{{{tag}}}bad"),
            format!("{{{tag}}}good"),
        );
        let mut out = vec![admin.cmd_str(&format!("SET {bad} nolist"))];
        send(c1, &format!("BRPOPLPUSH {src} {bad} 0"));
        send(c2, &format!("BRPOPLPUSH {src} {good} 0"));
        until_blocked(admin, 2);
        out.push(admin.cmd_str(&format!("LPUSH {src} foo")));
        out.push(c1.reply());
        out.push(c2.reply());
        out.push(admin.cmd_str(&format!("LRANGE {good} 0 -1")));
        out.push(admin.cmd_str(&format!("DEL {src} {bad} {good}")));
        out
    });
}

#[test]
fn the_pushers_next_command_finds_the_blocked_clients_served() {
    // Redis serves blocked clients right after the command that made their key ready,
    // before any other command: a command pipelined after the push sees the rotation of
    // a BLMOVE from a list into itself, and circular BRPOPLPUSHes (each one's push
    // serves the other) are over before the pusher's next command (Redis's "Circular
    // BRPOPLPUSH").
    rounds_on_each_shard(8, |tag, admin, c1, c2| {
        let (l1, l2) = (format!("{{{tag}}}l1"), format!("{{{tag}}}l2"));
        let mut out = Vec::new();
        send(c1, &format!("BLMOVE {l1} {l1} LEFT RIGHT 0"));
        until_blocked(admin, 1);
        admin.send(&encode(&[b"RPUSH", l1.as_bytes(), b"a", b"b"]));
        admin.send(&encode(&[b"LRANGE", l1.as_bytes(), b"0", b"-1"]));
        out.push(admin.reply());
        out.push(admin.reply());
        out.push(c1.reply());
        out.push(admin.cmd_str(&format!("DEL {l1}")));
        send(c1, &format!("BRPOPLPUSH {l1} {l2} 0"));
        until_blocked(admin, 1);
        send(c2, &format!("BRPOPLPUSH {l2} {l1} 0"));
        until_blocked(admin, 2);
        out.push(admin.cmd_str(&format!("RPUSH {l1} foo")));
        out.push(admin.cmd_str(&format!("LRANGE {l1} 0 -1")));
        out.push(admin.cmd_str(&format!("LRANGE {l2} 0 -1")));
        out.push(c1.reply());
        out.push(c2.reply());
        out.push(admin.cmd_str(&format!("DEL {l1} {l2}")));
        out
    });
}

#[test]
fn a_key_of_another_type_keeps_its_waiters_waiting() {
    same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let mut out = Vec::new();
        send(&mut c, "BLPOP k 0");
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str("SET k string"));
        out.push(admin.cmd_str("HSET h f v"));
        out.push(admin.cmd_str("RENAME h k"));
        std::thread::sleep(Duration::from_millis(50));
        out.push(info(&mut admin, "blocked_clients").into_bytes());
        out.push(admin.cmd_str("DEL k"));
        out.push(admin.cmd_str("RPUSH k v"));
        out.push(c.reply());
        out
    });
}

#[test]
fn sorted_set_pops_block_as_redis_does() {
    let (a, b) = two_keys();
    same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let mut out: Vec<Vec<u8>> = [
            "ZADD z 1 a 2 b 3 c 4 d",
            "BZPOPMIN z 0",
            "BZPOPMAX z 0",
            "BZMPOP 0 1 z MIN COUNT 5",
            "BZPOPMIN z x",
            "BZPOPMIN z -1",
            "BZMPOP 0 0 z MIN",
            "BZMPOP x 1 z MIN",
            "BZMPOP 0 1 z UP",
            "BZMPOP 0 2 z MAX",
            "BZMPOP 0 1 z MAX COUNT 0",
            "SET s v",
            "BZPOPMIN s 0",
            "BZPOPMIN nothing s 0",
            "BZMPOP 0 2 nothing s MIN",
            "RPUSH l v",
            "BZPOPMAX l 0.01",
            "BZPOPMIN z 0.01",
            "BZMPOP 0.01 1 z MAX",
            "MULTI",
            "BZPOPMIN none 0",
            "BZMPOP 0 1 none MIN",
            "ZADD y 1 one",
            "BZPOPMAX y 0",
            "EXEC",
        ]
        .iter()
        .map(|line| c.cmd_str(line))
        .collect();
        // Waits served in the order they began, across shards, by ZADD and ZUNIONSTORE.
        let mut waiters: Vec<Raw> = (0..3).map(|_| s.raw()).collect();
        send(&mut waiters[0], &format!("BZPOPMIN {a} {b} 0"));
        until_blocked(&mut admin, 1);
        send(&mut waiters[1], &format!("BZMPOP 0 1 {b} MAX COUNT 2"));
        until_blocked(&mut admin, 2);
        send(&mut waiters[2], &format!("BZPOPMAX {b} 0"));
        until_blocked(&mut admin, 3);
        out.push(admin.cmd_str(&format!("ZADD {b} 1 x 2 y 3 z 4 w")));
        out.push(admin.cmd_str(&format!("ZRANGE {b} 0 -1 WITHSCORES")));
        for w in &mut waiters {
            out.push(w.reply());
        }
        out.push(admin.cmd_str(&format!("ZADD {b} 5 v 6 u")));
        send(&mut waiters[0], &format!("BZPOPMAX {a} 0"));
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str(&format!("ZUNIONSTORE {a} 1 {b}")));
        out.push(waiters[0].reply());
        // In RESP3 the score is a double.
        c.cmd_str("HELLO 3");
        out.push(c.cmd_str("ZADD r 1.5 m 2 n"));
        out.push(c.cmd_str("BZPOPMIN r 0"));
        out.push(c.cmd_str("BZMPOP 0 1 r MAX"));
        out.push(c.cmd_str("BZPOPMIN r 0.01"));
        out
    });
}

/// Producers push numbered elements onto a few lists; consumers pop them with blocking
/// pops on keys of every shard; every element is popped exactly once.
#[test]
fn blocking_stress_loses_and_duplicates_nothing() {
    const PRODUCERS: usize = 4;
    const CONSUMERS: usize = 6;
    const RUN: Duration = Duration::from_secs(20);
    let threads = 4;
    let server = Server::goblin_threads(threads);
    let keys: Vec<String> = (0..threads)
        .map(|s| keys_on("queue:", s, threads, 1).remove(0))
        .collect();
    let stop_at = Instant::now() + RUN;
    let port = server.port;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut c = Raw::connect(port);
                let mut pushed = 0u64;
                while Instant::now() < stop_at {
                    let key = &keys[pushed as usize % keys.len()];
                    let element = format!("{p}:{pushed}");
                    let cmd = if pushed.is_multiple_of(3) {
                        "LPUSH"
                    } else {
                        "RPUSH"
                    };
                    c.cmd(&[cmd.as_bytes(), key.as_bytes(), element.as_bytes()]);
                    pushed += 1;
                }
                pushed
            })
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|i| {
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut c = Raw::connect(port);
                let mut got = Vec::new();
                loop {
                    let mut args: Vec<&[u8]> = vec![if i % 2 == 0 { b"BLPOP" } else { b"BRPOP" }];
                    args.extend(keys.iter().map(|k| k.as_bytes()));
                    args.push(b"0.5");
                    let r = c.cmd(&args);
                    if r == b"*-1\r\n" {
                        if Instant::now() > stop_at {
                            return got;
                        }
                        continue;
                    }
                    let parts = reply::bulks(&r);
                    assert_eq!(parts.len(), 2, "{}", goblin_tests::show(&r));
                    got.push(parts[1].clone().unwrap_or_default());
                }
            })
        })
        .collect();
    let pushed: u64 = producers.into_iter().map(|h| h.join().unwrap()).sum();
    let mut seen = HashSet::new();
    let mut popped = 0u64;
    for h in consumers {
        for element in h.join().unwrap() {
            assert!(seen.insert(element.clone()), "popped twice: {element:?}");
            popped += 1;
        }
    }
    // What the consumers left (none, normally) is still in the lists.
    let mut admin = server.raw();
    for key in &keys {
        for element in reply::bulks(&admin.cmd(&[b"LRANGE", key.as_bytes(), b"0", b"-1"])) {
            assert!(
                seen.insert(element.unwrap_or_default()),
                "left behind and popped"
            );
            popped += 1;
        }
    }
    println!("blocking stress: {pushed} pushed, {popped} popped or left");
    assert!(
        pushed > 1000,
        "too little traffic to mean anything: {pushed}"
    );
    assert_eq!(popped, pushed, "elements lost");
}

/// A key a transaction pushed to, and whose deadline passed before the transaction
/// ended (its DEBUG SLEEP), serves nobody: the blocked client stays blocked until CLIENT
/// UNBLOCK, as in redis-server, which serves its blocked clients with the time after the
/// command — with one thread, where the waiter shares the transaction's worker, too.
#[test]
fn a_key_past_its_deadline_when_a_transaction_ends_serves_nobody() {
    let threads = default_threads().to_string();
    let debug = ["--enable-debug-command", "yes"];
    let servers = [
        Server::goblin_with(&[&["--threads", "1"], &debug[..]].concat()),
        Server::goblin_with(&[&["--threads", threads.as_str()], &debug[..]].concat()),
        Server::redis_with(&debug),
    ];
    let mut transcripts = Vec::new();
    for s in &servers {
        let mut admin = s.raw();
        let mut a = s.raw();
        let id = reply::integer(&a.cmd_str("CLIENT ID"));
        let mut out = Vec::new();
        send(&mut a, "BRPOP k 0");
        until_blocked(&mut admin, 1);
        for line in [
            "DEBUG SET-ACTIVE-EXPIRE 0",
            "MULTI",
            "RPUSH k hello",
            "PEXPIRE k 100",
            "DEBUG SLEEP 0.2",
            "EXEC",
        ] {
            out.push(goblin_tests::show(&admin.cmd_str(line)));
        }
        std::thread::sleep(Duration::from_millis(100));
        out.push(info(&mut admin, "blocked_clients"));
        out.push(goblin_tests::show(
            &admin.cmd_str(&format!("CLIENT UNBLOCK {id}")),
        ));
        out.push(goblin_tests::show(&a.reply()));
        out.push(goblin_tests::show(&admin.cmd_str("EXISTS k")));
        transcripts.push(out);
    }
    assert_eq!(transcripts[0], transcripts[2], "--threads 1");
    assert_eq!(transcripts[1], transcripts[2], "--threads {threads}");
    assert_eq!(transcripts[2][6], "1");
}
