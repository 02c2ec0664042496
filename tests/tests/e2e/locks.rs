//! Commands of a shard whose other keys are locked: a transaction holding some keys of a
//! shard holds back the commands on those keys only; a command on another key of that
//! shard runs at once. (A connection's command for its own thread's shard runs inline
//! then, `Shard::may_run_now`; it used to go through the shard's queue as a batch.) And
//! a connection's commands run early (`Worker::run_early`) hold their keys until the
//! batch sent before them is back, their replies in their places.

use std::time::{Duration, Instant};

use goblin_tests::keys::keys_on;
use goblin_tests::{Raw, Server, encode};

/// A script under its plan (its two keys on two shards) sets its key of shard `y`, then
/// spins for `SPIN_MS` on the other shard's thread, holding both keys.
const SPIN_MS: u64 = 1500;

/// The script that holds its two keys (`EVAL <it> 2 x y`, running on the thread of `x`'s
/// shard): sets `y` to `during`, spins for `SPIN_MS`, sets `x` to `done`.
fn spin_script() -> String {
    format!(
        "redis.call('set', KEYS[2], 'during') \
         local t0 = redis.call('time') \
         repeat local t = redis.call('time') \
         until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > {} \
         return redis.call('set', KEYS[1], 'done')",
        SPIN_MS * 1000
    )
}

/// Starts `spin_script` on `runner` holding keys `x` and `y`, and gives it time to take
/// its locks.
fn spin(runner: &mut Raw, x: &str, y: &str) {
    runner.send(&encode(&[
        b"EVAL",
        spin_script().as_bytes(),
        b"2",
        x.as_bytes(),
        y.as_bytes(),
    ]));
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
fn a_held_key_holds_back_only_its_own_commands() {
    let server = Server::goblin_threads(2);
    let [mut runner, mut local] = server.one_per_thread::<2>();
    let (x, y) = (0, 1);
    let held_x = keys_on("held.x.", x, 2, 1).remove(0);
    let held_y = keys_on("held.y.", y, 2, 1).remove(0);
    let free_y = keys_on("free.y.", y, 2, 1).remove(0);
    // The script starts at once, holding both keys, spinning on thread x.
    spin(&mut runner, &held_x, &held_y);
    let asked = Instant::now();
    assert_eq!(local.cmd(&[b"SET", free_y.as_bytes(), b"v"]), b"+OK\r\n");
    let free_took = asked.elapsed();
    let read = local.cmd(&[b"GET", held_y.as_bytes()]);
    let held_took = asked.elapsed();
    assert_eq!(runner.reply(), b"+OK\r\n");
    if held_took < Duration::from_millis(SPIN_MS / 3) {
        // Answered before the script ended: only if the script had not taken its keys
        // yet (a slow machine), when the key is not set yet.
        assert_eq!(read, b"$-1\r\n", "a key a script held was read meanwhile");
        return;
    }
    assert_eq!(read, b"$6\r\nduring\r\n");
    // The key the script holds held back the GET; the free one did not hold back the SET.
    assert!(
        free_took < Duration::from_millis(SPIN_MS / 3),
        "a command on a free key of a shard waited {free_took:?} for a script holding \
         another key of it (the held key's command waited {held_took:?})"
    );
}

/// A command of a connection's own thread's shard that runs ahead of the connection's
/// batch in flight to a later shard (`Worker::run_early`) holds its key until that batch
/// is back: until then, nobody else may see its effect, which comes after the batch's
/// in the connection's order. Here the batch waits at its shard for a key a script holds
/// (running on a third thread), and another client's GET of the early command's key
/// waits for it, then sees both writes.
#[test]
fn a_command_run_early_holds_its_key_until_the_batch_before_it_is_back() {
    let server = Server::goblin_threads(3);
    let [mut early, mut reader, mut runner] = server.one_per_thread::<3>();
    let held = keys_on("held.", 2, 3, 1).remove(0);
    let remote = keys_on("remote.", 1, 3, 1).remove(0);
    let own = keys_on("own.", 0, 3, 1).remove(0);
    // The script holds `remote` (shard 1) and spins on thread 2.
    spin(&mut runner, &held, &remote);
    // Thread 0's client: a write of `remote` (waits for the script), then one of its own
    // shard's key, which runs early.
    let started = Instant::now();
    let mut pipeline = encode(&[b"SET", remote.as_bytes(), b"first"]);
    pipeline.extend(encode(&[b"SET", own.as_bytes(), b"second"]));
    early.send(&pipeline);
    std::thread::sleep(Duration::from_millis(200));
    let read = reader.cmd(&[b"GET", own.as_bytes()]);
    let read_took = started.elapsed();
    let after = reader.cmd(&[b"GET", remote.as_bytes()]);
    assert_eq!(runner.reply(), b"+OK\r\n");
    assert_eq!(early.reply(), b"+OK\r\n");
    assert_eq!(early.reply(), b"+OK\r\n");
    if read == b"$-1\r\n" {
        // Read before the pipeline ran at all: only on a machine so slow that 200 ms
        // did not let thread 0 take it.
        assert!(
            read_took < Duration::from_millis(SPIN_MS / 2),
            "{read_took:?}"
        );
        return;
    }
    assert_eq!(read, b"$6\r\nsecond\r\n");
    assert_eq!(
        after, b"$5\r\nfirst\r\n",
        "the second write was seen before the first had taken effect (read after {read_took:?})"
    );
    assert!(
        read_took > Duration::from_millis(SPIN_MS / 2),
        "the key written early was read after {read_took:?}, while the write before it \
         waited for the script"
    );
}

/// The replies of commands run early take their places among those of the batch in
/// flight, also when that batch stops at its reply budget (4 MB) and comes back in parts:
/// a pipeline of GETs of a 3 MB value on the other shard and of small values on the
/// connection's own, interleaved, answers in order.
#[test]
fn replies_of_commands_run_early_keep_their_places() {
    let server = Server::goblin_threads(2);
    let [mut conn, _] = server.one_per_thread::<2>();
    let big = keys_on("big.", 1, 2, 1).remove(0);
    let small = keys_on("small.", 1, 2, 1).remove(0);
    let own = keys_on("own.", 0, 2, 3);
    let value = vec![b'x'; 3 << 20];
    assert_eq!(conn.cmd(&[b"SET", big.as_bytes(), &value]), b"+OK\r\n");
    assert_eq!(conn.cmd(&[b"SET", small.as_bytes(), b"s"]), b"+OK\r\n");
    for (i, k) in own.iter().enumerate() {
        let v = format!("own{i}");
        assert_eq!(conn.cmd(&[b"SET", k.as_bytes(), v.as_bytes()]), b"+OK\r\n");
    }
    let mut big_reply = format!("${}\r\n", value.len()).into_bytes();
    big_reply.extend_from_slice(&value);
    big_reply.extend_from_slice(b"\r\n");
    let (b, s) = (big.as_bytes(), small.as_bytes());
    let (o0, o1, o2) = (own[0].as_bytes(), own[1].as_bytes(), own[2].as_bytes());
    let script: Vec<(Vec<&[u8]>, Vec<u8>)> = vec![
        (vec![b"GET", b], big_reply.clone()),
        (vec![b"GET", o0], b"$4\r\nown0\r\n".to_vec()),
        (vec![b"GET", b], big_reply.clone()),
        (
            vec![b"INCR", o1],
            b"-ERR value is not an integer or out of range\r\n".to_vec(),
        ),
        (vec![b"GET", o1], b"$4\r\nown1\r\n".to_vec()),
        (vec![b"GET", s], b"$1\r\ns\r\n".to_vec()),
        (vec![b"GET", b], big_reply.clone()),
        (vec![b"GET", s], b"$1\r\ns\r\n".to_vec()),
        (vec![b"APPEND", o2, b"!"], b":5\r\n".to_vec()),
        (vec![b"GET", b], big_reply.clone()),
        (vec![b"GET", o2], b"$5\r\nown2!\r\n".to_vec()),
    ];
    for round in 0..3 {
        let mut pipeline = Vec::new();
        for (command, _) in &script {
            pipeline.extend(encode(command));
        }
        if round > 0 {
            // APPEND made it longer each round: set it back first.
            assert_eq!(conn.cmd(&[b"SET", o2, b"own2"]), b"+OK\r\n");
        }
        conn.send(&pipeline);
        for (i, (command, expected)) in script.iter().enumerate() {
            let reply = conn.reply();
            assert!(
                reply == *expected,
                "round {round}, reply {i} to {:?}: {:?}",
                String::from_utf8_lossy(command[0]),
                String::from_utf8_lossy(&reply[..reply.len().min(40)])
            );
        }
    }
}

/// A command of a connection's own thread's shard held back while its batch runs at an
/// earlier shard (`Worker::hold_back`) when that batch cannot run there at once: the
/// batch comes back unrun (it never waits while the connection holds keys of its own
/// shard), the key is unlocked, and the commands go on in order the ordinary way — the
/// batch waits for the script that holds its key, the held-back write after it. Another
/// client meanwhile reads the held-back command's key at once, unwritten.
#[test]
fn a_held_back_command_waits_for_the_batch_before_it_when_that_batch_cannot_run() {
    let server = Server::goblin_threads(3);
    let [mut reader, mut back, mut runner] = server.one_per_thread::<3>();
    let held = keys_on("held.", 2, 3, 1).remove(0);
    let remote = keys_on("remote.", 0, 3, 1).remove(0);
    let own = keys_on("own.", 1, 3, 1).remove(0);
    assert_eq!(reader.cmd(&[b"CONFIG", b"RESETSTAT"]), b"+OK\r\n");
    // The script holds `remote` (shard 0) and spins on thread 2.
    spin(&mut runner, &held, &remote);
    // Thread 1's client: a write of `remote` (shard 0, earlier), then one of its own
    // shard's key.
    let started = Instant::now();
    let mut pipeline = encode(&[b"APPEND", remote.as_bytes(), b"first"]);
    pipeline.extend(encode(&[b"APPEND", own.as_bytes(), b"second"]));
    back.send(&pipeline);
    std::thread::sleep(Duration::from_millis(200));
    let read = reader.cmd(&[b"GET", own.as_bytes()]);
    let read_took = started.elapsed();
    assert_eq!(runner.reply(), b"+OK\r\n");
    // (After the script's `during`.)
    assert_eq!(back.reply(), b":11\r\n");
    assert_eq!(back.reply(), b":6\r\n");
    let finished = started.elapsed();
    assert_eq!(
        read, b"$-1\r\n",
        "the held-back write was seen before the one before it"
    );
    if finished > Duration::from_millis(SPIN_MS / 2) {
        // (The script did hold the key meanwhile: the read did not wait for it.)
        assert!(
            read_took < Duration::from_millis(SPIN_MS / 2),
            "a key held back for a batch that could not run stayed locked: read after \
             {read_took:?}"
        );
    }
    assert_eq!(reader.cmd(&[b"GET", own.as_bytes()]), b"$6\r\nsecond\r\n");
    assert_eq!(
        reader.cmd(&[b"GET", remote.as_bytes()]),
        b"$11\r\nduringfirst\r\n"
    );
    // Each APPEND counted once, though the second was decoded twice.
    let stats = String::from_utf8_lossy(&reader.cmd(&[b"INFO", b"commandstats"])).into_owned();
    assert!(
        stats.contains("cmdstat_append:calls=2,"),
        "APPEND counted other than twice: {stats}"
    );
}

/// Commands held back while their connection's batches run at an earlier shard
/// (`Worker::hold_back`) answer in their places: a pipeline interleaving both shards'
/// keys, reads and writes, some keys twice, larger than one read, gets the replies
/// a single-threaded run of it gives (each INCR's count of its key so far, each GET the
/// count as a string).
#[test]
fn replies_of_held_back_commands_keep_their_places() {
    let server = Server::goblin_threads(2);
    let [_, mut conn] = server.one_per_thread::<2>();
    let earlier = keys_on("e.", 0, 2, 40);
    let own = keys_on("o.", 1, 2, 40);
    let mut pipeline = Vec::new();
    let mut expected = Vec::new();
    let mut counts = std::collections::HashMap::new();
    for i in 0..4000usize {
        let k = if i % 3 == 0 {
            &own[i % 40]
        } else if i % 3 == 1 {
            &earlier[(i * 7) % 40]
        } else {
            &own[(i * 11) % 40]
        };
        pipeline.extend(encode(&[b"INCR", k.as_bytes()]));
        let n = counts.entry(k.clone()).or_insert(0u64);
        *n += 1;
        expected.extend(format!(":{n}\r\n").into_bytes());
        if i % 5 == 0 {
            pipeline.extend(encode(&[b"GET", k.as_bytes()]));
            let v = n.to_string();
            expected.extend(format!("${}\r\n{v}\r\n", v.len()).into_bytes());
        }
    }
    conn.send(&pipeline);
    let mut got = Vec::new();
    while got.len() < expected.len() {
        got.extend(conn.reply());
    }
    assert!(got == expected, "replies out of place");
}
