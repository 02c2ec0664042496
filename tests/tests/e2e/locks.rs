//! Commands of a shard whose other keys are locked: a transaction holding some keys of a
//! shard holds back the commands on those keys only; a command on another key of that
//! shard runs at once (through the shard's queue, which checks each command's keys).

use std::time::{Duration, Instant};

use goblin_tests::keys::keys_on;
use goblin_tests::{Raw, Server, encode};

/// A script under its plan (its two keys on two shards) sets its key of shard `y`, then
/// spins for `SPIN_MS` on the other shard's thread, holding both keys.
const SPIN_MS: u64 = 1500;

#[test]
fn a_held_key_holds_back_only_its_own_commands() {
    let server = Server::goblin_threads(2);
    let mut probe = server.raw();
    let mut by_worker: [Option<Raw>; 2] = [None, None];
    let mut runner = None;
    for _ in 0..16 {
        let (conn, worker) = server.raw_located(&mut probe);
        if runner.is_none() {
            runner = Some((conn, worker));
        } else if by_worker[worker].is_none() {
            by_worker[worker] = Some(conn);
        }
        if by_worker.iter().all(Option::is_some) {
            break;
        }
    }
    let (mut runner, x) = runner.expect("a connection");
    let y = 1 - x;
    let mut local = by_worker[y]
        .take()
        .expect("a connection on the other thread");
    let held_x = keys_on("held.x.", x, 2, 1).remove(0);
    let held_y = keys_on("held.y.", y, 2, 1).remove(0);
    let free_y = keys_on("free.y.", y, 2, 1).remove(0);
    let spin = format!(
        "redis.call('set', KEYS[2], 'during') \
         local t0 = redis.call('time') \
         repeat local t = redis.call('time') \
         until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > {} \
         return redis.call('set', KEYS[1], 'done')",
        SPIN_MS * 1000
    );
    runner.send(&encode(&[
        b"EVAL",
        spin.as_bytes(),
        b"2",
        held_x.as_bytes(),
        held_y.as_bytes(),
    ]));
    // The script starts at once; give it time to take its locks.
    std::thread::sleep(Duration::from_millis(300));
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
