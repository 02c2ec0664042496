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

/// A connection on each of the server's `N` threads, by thread.
fn one_per_thread<const N: usize>(server: &Server) -> [Raw; N] {
    let mut probe = server.raw();
    let mut by_worker: [Option<Raw>; N] = std::array::from_fn(|_| None);
    for _ in 0..8 * N {
        let (conn, worker) = server.raw_located(&mut probe);
        if by_worker[worker].is_none() {
            by_worker[worker] = Some(conn);
        }
        if by_worker.iter().all(Option::is_some) {
            break;
        }
    }
    by_worker.map(|c| c.expect("a connection on each thread"))
}

#[test]
fn a_held_key_holds_back_only_its_own_commands() {
    let server = Server::goblin_threads(2);
    let [mut runner, mut local] = one_per_thread::<2>(&server);
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
    let [mut early, mut reader, mut runner] = one_per_thread::<3>(&server);
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
    let [mut conn, _] = one_per_thread::<2>(&server);
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
