//! The per-connection contract under pipelining across shards (issue 3): replies come
//! back in request order, and a connection's commands take effect in the order it sent
//! them, even when consecutive commands go to different shards.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use goblin_tests::assert_bytes_eq;
use goblin_tests::cmd::{Cmd, call, cmd, pipeline, show_cmd};
use goblin_tests::keys::{THREAD_COUNTS, keys_on, spread};
use goblin_tests::model::Model;
use goblin_tests::reply::bulks;
use goblin_tests::rng::{Rng, seed};
use goblin_tests::{Server, show};

/// Commands per pipelined write.
const PIPELINE_LEN: usize = 2500;

/// A random keyed command whose first key lives on shard `i % threads` (so consecutive
/// commands hit different shards); multi-key commands take keys from every shard.
fn keyed_command(rng: &mut Rng, keys_by_shard: &[Vec<String>], i: usize) -> Cmd {
    let all: Vec<&String> = keys_by_shard.iter().flatten().collect();
    let first = rng.pick(&keys_by_shard[i % keys_by_shard.len()]).clone();
    let value = format!("v{}", rng.below(1000));
    let more = |n: usize, rng: &mut Rng| -> Vec<String> {
        (0..n).map(|_| (*rng.pick(&all)).clone()).collect()
    };
    match rng.below(10) {
        0..=2 => cmd(&["SET", &first, &value]),
        3..=4 => cmd(&["GET", &first]),
        5 => {
            let n = rng.below(3);
            let mut c = cmd(&["DEL", &first]);
            c.extend(more(n, rng).into_iter().map(String::into_bytes));
            c
        }
        6 => {
            let n = rng.below(4);
            let mut c = cmd(&["EXISTS", &first]);
            c.extend(more(n, rng).into_iter().map(String::into_bytes));
            c
        }
        7 => {
            let mut c = cmd(&["MSET", &first, &value]);
            for k in more(rng.below(4), rng) {
                c.push(k.into_bytes());
                c.push(format!("m{}", rng.below(1000)).into_bytes());
            }
            c
        }
        _ => {
            let n = rng.below(5);
            let mut c = cmd(&["MGET", &first]);
            c.extend(more(n, rng).into_iter().map(String::into_bytes));
            c
        }
    }
}

/// Sends `cmds` as one pipeline and asserts each reply equals the model's.
fn run_against_model(raw: &mut goblin_tests::Raw, model: &mut Model, cmds: &[Cmd], what: &str) {
    let got = pipeline(raw, cmds);
    for (i, (c, reply)) in cmds.iter().zip(&got).enumerate() {
        let want = model.apply(c);
        assert_bytes_eq!(
            reply,
            &want,
            "{what}: reply {i} (to {}) differs from the sequential model",
            show_cmd(c)
        );
    }
}

/// One connection pipelines (one write) long sequences of SET/GET/DEL/EXISTS/MSET/MGET
/// whose consecutive commands hit different shards; every reply equals what a
/// sequential model predicts, in order.
#[test]
fn pipelined_keyed_commands_across_shards_reply_in_order() {
    let mut rng = Rng::new(seed(
        "pipelined_keyed_commands_across_shards_reply_in_order",
    ));
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let keys_by_shard: Vec<Vec<String>> = (0..threads)
            .map(|s| keys_on(&format!("o{s}."), s, threads, 6))
            .collect();
        let mut model = Model::default();
        let mut raw = server.raw();
        for round in 0..2 {
            let cmds: Vec<Cmd> = (0..PIPELINE_LEN)
                .map(|i| keyed_command(&mut rng, &keys_by_shard, i))
                .collect();
            run_against_model(
                &mut raw,
                &mut model,
                &cmds,
                &format!("--threads {threads}, round {round}"),
            );
        }
        // The final state, read back key by key, is the model's.
        let all: Vec<&String> = keys_by_shard.iter().flatten().collect();
        let mut mget = cmd(&["MGET"]);
        mget.extend(all.iter().map(|k| k.as_bytes().to_vec()));
        let values = bulks(&call(&mut raw, &mget));
        for (k, v) in all.iter().zip(values) {
            assert_eq!(
                v.as_deref(),
                model.map.get(k.as_bytes()).map(Vec::as_slice),
                "--threads {threads}: final value of {k}"
            );
        }
    }
}

/// A pipeline mixing commands for the local shard, remote shards, keyless commands run on
/// the connection (PING, ECHO), keyspace-wide fan-outs (DBSIZE, FLUSHALL) and MULTI/EXEC
/// blocks is answered in order, and each fan-out sees exactly the effects of the
/// commands sent before it.
#[test]
fn pipelines_mixing_local_remote_keyless_and_fanout_commands_reply_in_order() {
    let mut rng = Rng::new(seed(
        "pipelines_mixing_local_remote_keyless_and_fanout_commands_reply_in_order",
    ));
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let keys_by_shard: Vec<Vec<String>> = (0..threads)
            .map(|s| keys_on(&format!("x{s}."), s, threads, 8))
            .collect();
        let mut model = Model::default();
        let mut raw = server.raw();
        for round in 0..2 {
            let mut cmds: Vec<Cmd> = Vec::new();
            let mut i = 0;
            while cmds.len() < PIPELINE_LEN {
                i += 1;
                match rng.below(20) {
                    0 => cmds.push(cmd(&["PING"])),
                    1 => cmds.push(cmd(&["PING", &format!("p{i}")])),
                    2 => cmds.push(cmd(&["ECHO", &format!("e{i}")])),
                    3 | 4 => cmds.push(cmd(&["DBSIZE"])),
                    5 if rng.percent(10) => cmds.push(cmd(&["FLUSHALL"])),
                    6 => {
                        cmds.push(cmd(&["MULTI"]));
                        for j in 0..rng.below(5) {
                            let c = match rng.below(4) {
                                0 => cmd(&["PING"]),
                                1 => cmd(&["DBSIZE"]),
                                _ => keyed_command(&mut rng, &keys_by_shard, i + j),
                            };
                            cmds.push(c);
                        }
                        // A block of keyless commands only is the subject of
                        // `keyless_multi_exec_mid_pipeline_keeps_the_stream_intact`.
                        cmds.push(keyed_command(&mut rng, &keys_by_shard, i));
                        cmds.push(cmd(&[if rng.percent(85) { "EXEC" } else { "DISCARD" }]));
                    }
                    _ => cmds.push(keyed_command(&mut rng, &keys_by_shard, i)),
                }
            }
            run_against_model(
                &mut raw,
                &mut model,
                &cmds,
                &format!("--threads {threads}, round {round}"),
            );
        }
    }
}

/// A connection on thread `on`.
fn connection_on(server: &Server, on: usize) -> goblin_tests::Raw {
    let mut probe = server.raw();
    // Connections on other threads stay open until one lands on `on`: a close taking
    // effect while the next one is located would hide it (`Server::raw_located`).
    let mut others = Vec::new();
    for _ in 0..16 {
        let (conn, worker) = server.raw_located(&mut probe);
        if worker == on {
            return conn;
        }
        others.push(conn);
    }
    panic!("no connection landed on thread {on}");
}

/// Write order of the writer below: `a_0, b_0, a_1, b_1, …`.
fn write_order(a: &[String], b: &[String]) -> Vec<String> {
    a.iter()
        .zip(b)
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect()
}

/// A writer pipelines `SET a_i i` (keys on shard A) and `SET b_i i` (keys on shard B)
/// alternately, in one write. Concurrent readers on other connections (other threads)
/// must never see `b_i` set while `a_i`, written before it by the same connection, is
/// not: a reader pipelining `GET b_i` then `GET a_i` never sees b without a; a reader's
/// MGET of a window of pairs (atomic across shards) always sees a prefix of the write
/// order, with the written values.
#[test]
fn a_connections_writes_take_effect_in_the_order_sent_across_shards() {
    const PAIRS: usize = 3000;
    const WINDOW: usize = 32;
    for threads in THREAD_COUNTS {
        let mut directions = vec![(0, threads - 1)];
        if threads > 1 {
            directions.push((threads - 1, 0));
        }
        // The writer on the first thread, or on the last: its batches go to later
        // shards or to earlier ones (`Worker::run_early`, `Worker::hold_back`).
        let mut runs: Vec<_> = directions.iter().map(|&d| (d, 0)).collect();
        if threads > 1 {
            runs.extend(directions.iter().map(|&d| (d, threads - 1)));
        }
        for ((sa, sb), on) in runs {
            let server = Server::goblin_threads(threads);
            let a = keys_on("a", sa, threads, PAIRS);
            let b = keys_on("b", sb, threads, PAIRS);
            let order = write_order(&a, &b);
            let what = format!(
                "--threads {threads}, a on shard {sa}, b on shard {sb}, writer on thread {on}"
            );
            // Connections are dealt to the threads round-robin: the readers land on other
            // threads than the writer's when there are several.
            let mut writer = connection_on(&server, on);
            let done = Arc::new(AtomicBool::new(false));
            // The writer starts once both readers are reading.
            let started = Arc::new(Barrier::new(3));
            let readers: Vec<_> = (0..2)
                .map(|r| {
                    let mut raw = server.raw();
                    let (a, b, order) = (a.clone(), b.clone(), order.clone());
                    let done = Arc::clone(&done);
                    let started = Arc::clone(&started);
                    let what = what.clone();
                    std::thread::spawn(move || {
                        started.wait();
                        let mut frontier = 0usize;
                        let mut reads = 0usize;
                        let mut saw_partial = false;
                        loop {
                            let finished = done.load(Ordering::SeqCst);
                            let start = frontier.saturating_sub(WINDOW / 2).min(PAIRS - WINDOW);
                            let range = start..start + WINDOW;
                            if r == 0 {
                                let mut mget = cmd(&["MGET"]);
                                mget.extend(
                                    order[2 * range.start..2 * range.end]
                                        .iter()
                                        .map(|k| k.as_bytes().to_vec()),
                                );
                                let got = bulks(&pipeline(&mut raw, &[mget])[0]);
                                let set: Vec<bool> = got.iter().map(Option::is_some).collect();
                                let present = set.iter().take_while(|s| **s).count();
                                assert!(
                                    set[present..].iter().all(|s| !s),
                                    "{what}: MGET of pairs {range:?} saw a state that is not a \
                                     prefix of the write order: {set:?}"
                                );
                                for (j, v) in got.iter().enumerate().take(present) {
                                    let want = (range.start + j / 2).to_string();
                                    assert_eq!(v.as_deref(), Some(want.as_bytes()), "{what}");
                                }
                                saw_partial |= present > 0 && present < set.len();
                                frontier = range.start + present / 2;
                            } else {
                                let gets: Vec<_> = range
                                    .clone()
                                    .flat_map(|i| [cmd(&["GET", &b[i]]), cmd(&["GET", &a[i]])])
                                    .collect();
                                let got = pipeline(&mut raw, &gets);
                                let mut last = range.start;
                                for (k, pair) in got.chunks(2).enumerate() {
                                    let i = range.start + k;
                                    let b_set = pair[0] != b"$-1\r\n";
                                    let a_set = pair[1] != b"$-1\r\n";
                                    assert!(
                                        !b_set || a_set,
                                        "{what}: GET {} saw it set, then GET {} (sent after) \
                                         saw it unset, though the writer set it first",
                                        b[i],
                                        a[i]
                                    );
                                    if a_set {
                                        last = i;
                                    }
                                    saw_partial |= a_set && !b_set;
                                }
                                frontier = last;
                            }
                            reads += 1;
                            if finished {
                                return (reads, saw_partial);
                            }
                        }
                    })
                })
                .collect();
            let sets: Vec<Cmd> = a
                .iter()
                .zip(&b)
                .enumerate()
                .flat_map(|(i, (a, b))| {
                    let v = i.to_string();
                    [cmd(&["SET", a, &v]), cmd(&["SET", b, &v])]
                })
                .collect();
            started.wait();
            let replies = pipeline(&mut writer, &sets);
            assert!(replies.iter().all(|r| r == b"+OK\r\n"), "{what}");
            done.store(true, Ordering::SeqCst);
            for reader in readers {
                let (reads, saw_partial) = reader.join().unwrap();
                eprintln!("{what}: {reads} reads, saw a write in progress: {saw_partial}");
            }
            // Everything the writer wrote is there.
            let mut mget = cmd(&["MGET"]);
            mget.extend(order.iter().map(|k| k.as_bytes().to_vec()));
            let got = bulks(&pipeline(&mut writer, &[mget])[0]);
            assert!(got.iter().all(Option::is_some), "{what}: a write was lost");
        }
    }
}

/// Regression (issue 3): an EXEC whose block touches no key (empty, or only PING/ECHO)
/// finishes at once; the rest of a pipeline larger than one read must still be answered
/// in order. Found by the mixed pipeline test above.
#[test]
fn keyless_multi_exec_mid_pipeline_keeps_the_stream_intact() {
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let mut raw = server.raw();
        for block in [&["MULTI", "EXEC"][..], &["MULTI", "PING", "ECHO", "EXEC"]] {
            let mut model = Model::default();
            let mut cmds: Vec<Cmd> = block
                .iter()
                .map(|w| {
                    if *w == "ECHO" {
                        cmd(&["ECHO", "hi"])
                    } else {
                        cmd(&[w])
                    }
                })
                .collect();
            // Well past one 16 KiB read.
            cmds.extend((0..3000).map(|i| cmd(&["ECHO", &format!("e{i}")])));
            run_against_model(
                &mut raw,
                &mut model,
                &cmds,
                &format!("--threads {threads}, block {block:?}"),
            );
        }
    }
}

/// HELLO 3 in the middle of a pipeline whose neighbours run on other shards switches the
/// protocol exactly there: the replies before it are RESP2, those after it RESP3 (nulls,
/// MGET across shards, EXEC), byte for byte as redis-server sends them; HELLO's own
/// reply (which names the server) is only checked to be a RESP3 map.
#[test]
fn hello_mid_pipeline_switches_the_protocol_exactly_there() {
    let keys = spread("h", 4, 2);
    let cmds: Vec<Cmd> = vec![
        cmd(&["SET", &keys[1], "v"]),
        cmd(&["GET", &keys[2]]),
        cmd(&["MGET", &keys[1], &keys[2], &keys[3]]),
        cmd(&["HELLO", "3"]),
        cmd(&["GET", &keys[3]]),
        cmd(&["MGET", &keys[1], &keys[2], &keys[3]]),
        cmd(&["DBSIZE"]),
        cmd(&["MULTI"]),
        cmd(&["GET", &keys[0]]),
        cmd(&["MGET", &keys[1], &keys[5]]),
        cmd(&["EXEC"]),
        cmd(&["HELLO", "2"]),
        cmd(&["GET", &keys[6]]),
        cmd(&["MGET", &keys[1], &keys[7]]),
    ];
    for threads in THREAD_COUNTS {
        let mut d = goblin_tests::Differential::threads(threads);
        let want = pipeline(&mut d.r, &cmds);
        let got = pipeline(&mut d.g, &cmds);
        for (i, c) in cmds.iter().enumerate() {
            if c[0] == b"HELLO" {
                let first = if c[1] == b"3" { b'%' } else { b'*' };
                assert_eq!(got[i].first(), Some(&first), "{}", show(&got[i]));
                continue;
            }
            assert_bytes_eq!(
                &got[i],
                &want[i],
                "--threads {threads}: reply {i} to {} (left: goblin, right: redis)",
                show_cmd(c)
            );
        }
    }
}

/// QUIT and a protocol error at the end of a pipeline whose commands are in flight on
/// other shards: every earlier reply comes first, then QUIT's +OK or the error, then the
/// connection closes — as with redis-server.
#[test]
fn quit_and_protocol_errors_wait_for_the_commands_in_flight() {
    let keys = spread("e", 4, 2);
    let mut head = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        head.extend(goblin_tests::encode(&[
            b"SET",
            k.as_bytes(),
            i.to_string().as_bytes(),
        ]));
        head.extend(goblin_tests::encode(&[
            b"GET",
            keys[(i + 3) % keys.len()].as_bytes(),
        ]));
    }
    let mut mget = vec![&b"MGET"[..]];
    mget.extend(keys.iter().map(|k| k.as_bytes()));
    head.extend(goblin_tests::encode(&mget));
    head.extend(goblin_tests::encode(&[b"DBSIZE"]));
    for threads in THREAD_COUNTS {
        let mut d = goblin_tests::Differential::threads(threads);
        for tail in [&b"*1\r\n$4\r\nQUIT\r\nPING\r\n"[..], b"*1\r\n!\r\nPING\r\n"] {
            d.check(&[b"FLUSHALL"]);
            let input = [head.as_slice(), tail].concat();
            let (_, closed) = d.check_raw_to_close(&input);
            assert!(closed, "--threads {threads}: {} must close", show(tail));
        }
    }
}

/// A client that writes a pipeline across shards and closes at once: the server stays
/// healthy, and whatever of the pipeline took effect is a prefix of it (a connection's
/// commands take effect in order, even when it goes away).
#[test]
fn effects_of_a_connection_closed_mid_pipeline_are_a_prefix() {
    const CLIENTS: usize = 8;
    const SETS: usize = 2000;
    for threads in THREAD_COUNTS {
        let server = Server::goblin_threads(threads);
        let mut partial = 0;
        for c in 0..CLIENTS {
            let keys = spread(&format!("p{c}."), threads, SETS / threads);
            let mut raw = server.raw();
            let mut bytes = Vec::new();
            for (i, k) in keys.iter().enumerate() {
                bytes.extend(goblin_tests::encode(&[
                    b"SET",
                    k.as_bytes(),
                    i.to_string().as_bytes(),
                ]));
            }
            raw.send(&bytes);
            drop(raw);
            // Give the server time to do what it will with the rest.
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut check = server.raw();
            assert_eq!(check.cmd(&[b"PING"]), b"+PONG\r\n", "--threads {threads}");
            let mut mget = cmd(&["MGET"]);
            mget.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
            let values = bulks(&pipeline(&mut check, &[mget])[0]);
            let done = values.iter().take_while(|v| v.is_some()).count();
            assert!(
                values[done..].iter().all(Option::is_none),
                "--threads {threads}, client {c}: effects are not a prefix: the first {done} \
                 SETs took effect, and some later ones too"
            );
            for (i, v) in values.iter().take(done).enumerate() {
                assert_eq!(v.as_deref(), Some(i.to_string().as_bytes()));
            }
            partial += usize::from(done < keys.len());
        }
        eprintln!("--threads {threads}: {partial} of {CLIENTS} pipelines were cut short");
    }
}

/// Inline commands (unescaped in place, so a request that must wait for another shard is
/// kept parsed rather than decoded again) pipelined across shards, with quoting and
/// escapes, are answered exactly as redis-server answers them.
#[test]
fn inline_pipelines_across_shards_match_redis() {
    let keys = spread("i", 4, 4);
    let mut input = String::new();
    for round in 0..40 {
        for (i, k) in keys.iter().enumerate() {
            let line = match (round + i) % 6 {
                0 => format!("SET {k} \"v {round}\\x41\\n\"\r\n"),
                1 => format!("GET '{k}'\r\n"),
                2 => format!("MGET {k} {} {k}\r\n", keys[(i + 1) % keys.len()]),
                3 => format!("EXISTS {} \"{k}\"\r\n", keys[(i + 2) % keys.len()]),
                4 => format!("MSET {k} x{round} {} 'y z'\r\n", keys[(i + 3) % keys.len()]),
                _ => format!("DEL {k}\r\nDBSIZE\r\nPING \"p {round}\"\r\n"),
            };
            input.push_str(&line);
        }
    }
    for threads in THREAD_COUNTS {
        let mut d = goblin_tests::Differential::threads(threads);
        // One reply per line: no value holds a line break (`\\n` is an escape).
        let replies = input.matches("\r\n").count();
        let (_, closed) = d.check_raw_replies(input.as_bytes(), replies);
        assert!(!closed, "--threads {threads}");
    }
}
