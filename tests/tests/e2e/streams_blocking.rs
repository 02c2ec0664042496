//! Blocking stream reads, side by side with redis-server: the same scenario on both
//! servers, the same transcript (every reply, and whether a client is still waiting at
//! each point). XREAD BLOCK over streams on every shard, woken by an XADD on any of them;
//! `$` resolved when the command is called; BLOCK 0 waiting until served; timeouts
//! answering nil in RESP2 and RESP3; one XADD serving every XREAD waiting on its key;
//! XREADGROUP BLOCK `>` serving one consumer per entry, in the order they blocked;
//! XREADGROUP with a history ID answering at once; MULTI making the blocking forms
//! non-blocking; the stream deleted, replaced, renamed over, expired, flushed or swapped
//! out (SWAPDB) and the group destroyed while a consumer waits (answered as
//! redis-server 7.0 answers); CLIENT UNBLOCK.
//!
//! Last, `streams_stress`: a producer and a group of consumers (one of them crashing with
//! entries pending, the others claiming them with XAUTOCLAIM) over one stream and over
//! streams on every shard; every entry is delivered and acknowledged exactly once, against
//! goblin-server with 4 threads and, as a check of the test itself, against redis-server.
//!
//! `GOBLIN_STREAMS_SELF_CHECK=1` runs the side-by-side scenarios against two
//! redis-servers instead (a check of the scenarios themselves).

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::cmd::{Cmd, cmd, pipeline};
use goblin_tests::keys::{THREADS, shard_of, spread};
use goblin_tests::reply::{info_field, integer};
use goblin_tests::{REPLY_TIMEOUT, Raw, Server, StopOnDrop, default_threads, encode, show};

/// What a transcript records when a client has had no reply within [`QUIET`].
const WAITING: &[u8] = b"<still waiting>";

/// How long a client must stay without a reply to count as waiting.
const QUIET: Duration = Duration::from_millis(200);

/// The value of `field` in INFO.
fn info(raw: &mut Raw, field: &str) -> String {
    let text = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"everything"])).into_owned();
    info_field(&text, field)
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .to_string()
}

/// Waits until the server counts `n` blocked clients.
fn until_blocked(admin: &mut Raw, n: usize) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while info(admin, "blocked_clients") != n.to_string() {
        assert!(Instant::now() < give_up, "never {n} blocked clients");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Sends a command (words split on spaces) without reading its reply.
fn send(raw: &mut Raw, line: &str) {
    let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    raw.send(&encode(&words));
}

/// How long a client that should be answered may take before the transcript records it
/// as still waiting.
const ANSWER: Duration = Duration::from_secs(5);

/// The next reply of `raw` if one comes within `wait`, else [`WAITING`] (the client still
/// waits; its reply, if it comes, is read later).
fn reply_within(raw: &mut Raw, wait: Duration) -> Vec<u8> {
    let stream = raw.stream();
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    let peeked = stream.peek(&mut byte);
    stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    match peeked {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            WAITING.to_vec()
        }
        _ => raw.reply(),
    }
}

/// The reply of a client that should still be waiting: [`WAITING`] unless one comes
/// within [`QUIET`].
fn reply_or_waiting(raw: &mut Raw) -> Vec<u8> {
    reply_within(raw, QUIET)
}

/// The reply of a client that should be answered now, or [`WAITING`] when none comes
/// within [`ANSWER`] (so that the transcripts differ there, step by step).
fn answer(raw: &mut Raw) -> Vec<u8> {
    reply_within(raw, ANSWER)
}

/// Whether `GOBLIN_STREAMS_SELF_CHECK` asks for redis-server on both sides.
fn self_check() -> bool {
    std::env::var_os("GOBLIN_STREAMS_SELF_CHECK").is_some()
}

/// goblin-server with `--threads threads` and redis-server (or two redis-servers under
/// `GOBLIN_STREAMS_SELF_CHECK`).
fn servers(threads: usize) -> [Server; 2] {
    if self_check() {
        [Server::redis(), Server::redis()]
    } else {
        [Server::goblin_threads(threads), Server::redis()]
    }
}

/// Runs `scenario` on goblin-server with `threads` threads and on redis-server, and
/// asserts the same transcript, step by step. Returns redis's transcript.
fn same_with(threads: usize, scenario: impl Fn(&Server) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let [g, r] = servers(threads);
    let on = |server: &Server, name: &str| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(server))).unwrap_or_else(
            |e| {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_string()))
                    .unwrap_or_default();
                panic!("--threads {threads}: the scenario failed on {name}: {why}")
            },
        )
    };
    let (got, want) = (on(&g, "goblin-server"), on(&r, "redis-server"));
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            show(a),
            show(b),
            "--threads {threads}: step {i} differs (goblin, redis)"
        );
    }
    assert_eq!(
        got.len(),
        want.len(),
        "--threads {threads}: transcripts' lengths"
    );
    want
}

/// [`same_with`] with the default thread count.
fn same(scenario: impl Fn(&Server) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    same_with(default_threads(), scenario)
}

/// One key per shard of a 4-thread server (`THREADS`' largest), in shard order.
fn keys_on_every_shard(prefix: &str) -> Vec<String> {
    let threads = *THREADS.iter().max().unwrap();
    let keys = spread(prefix, threads, 1);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(shard_of(k.as_bytes(), threads), i);
    }
    keys
}

/// XREAD BLOCK 0 over streams on every shard (`$` for each) is woken by an XADD on any
/// of them, and gets that entry only; an entry added before the call is not returned
/// (`$` is the last ID when XREAD is called); COUNT keeps its meaning.
#[test]
fn xread_block_over_every_shard_is_woken_by_an_xadd_on_any() {
    let keys = keys_on_every_shard("xrb");
    for threads in THREADS {
        same_with(threads, |s| {
            let mut admin = s.raw();
            let mut c = s.raw();
            let mut out = Vec::new();
            for k in &keys {
                out.push(admin.cmd_str(&format!("XADD {k} 1-1 before 1")));
            }
            let dollars = vec!["$"; keys.len()].join(" ");
            for (i, k) in keys.iter().enumerate() {
                send(
                    &mut c,
                    &format!("XREAD BLOCK 0 STREAMS {} {dollars}", keys.join(" ")),
                );
                until_blocked(&mut admin, 1);
                out.push(reply_or_waiting(&mut c));
                out.push(admin.cmd_str(&format!("XADD {k} {}-1 woke {i}", i + 2)));
                out.push(answer(&mut c));
                until_blocked(&mut admin, 0);
            }
            // Several entries already newer than the ID given: answered at once.
            out.push(c.cmd_str(&format!(
                "XREAD COUNT 1 BLOCK 0 STREAMS {} {}",
                keys.join(" "),
                vec!["0"; keys.len()].join(" ")
            )));
            // An explicit ID at the end waits like `$`.
            let last = keys.len() + 1;
            send(
                &mut c,
                &format!("XREAD BLOCK 0 STREAMS {} {last}-1", keys[keys.len() - 1]),
            );
            until_blocked(&mut admin, 1);
            out.push(admin.cmd_str(&format!("XADD {} {last}-2 later 1", keys[keys.len() - 1])));
            out.push(answer(&mut c));
            out
        });
    }
}

/// XREADGROUP BLOCK `>` over streams on every shard (the group on each) is woken by an
/// XADD on any of them and gets that entry; a second consumer blocked on the same streams
/// keeps waiting; XPENDING and XINFO GROUPS of each stream after.
#[test]
fn xreadgroup_block_over_every_shard_is_woken_by_an_xadd_on_any() {
    let keys = keys_on_every_shard("xrgb");
    for threads in THREADS {
        same_with(threads, |s| {
            let mut admin = s.raw();
            let mut first = s.raw();
            let mut second = s.raw();
            let mut out = Vec::new();
            for k in &keys {
                out.push(admin.cmd_str(&format!("XGROUP CREATE {k} g $ MKSTREAM")));
            }
            let read = |me: &str| {
                format!(
                    "XREADGROUP GROUP g {me} BLOCK 0 STREAMS {} {}",
                    keys.join(" "),
                    vec![">"; keys.len()].join(" ")
                )
            };
            for (i, k) in keys.iter().enumerate().rev() {
                send(&mut first, &read("first"));
                until_blocked(&mut admin, 1);
                send(&mut second, &read("second"));
                until_blocked(&mut admin, 2);
                out.push(admin.cmd_str(&format!("XADD {k} {}-1 woke {i}", i + 1)));
                out.push(answer(&mut first));
                out.push(reply_or_waiting(&mut second));
                out.push(admin.cmd_str(&format!("XADD {k} {}-2 next {i}", i + 1)));
                out.push(answer(&mut second));
                until_blocked(&mut admin, 0);
            }
            for k in &keys {
                out.push(admin.cmd_str(&format!("XPENDING {k} g")));
                out.push(admin.cmd_str(&format!("XINFO GROUPS {k}")));
            }
            out
        });
    }
}

/// `$` is resolved when XREAD is called: an entry added between the call and the XADD
/// that wakes the client is returned, one added before it is not; with BLOCK 0 the
/// client waits however long it takes (no reply while nothing comes); with `$` on a
/// missing key, the first entry whatever its ID.
#[test]
fn dollar_is_resolved_at_call_time_and_block_0_waits() {
    same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let mut out = vec![admin.cmd_str("XADD k 5-1 before 1")];
        send(&mut c, "XREAD BLOCK 0 STREAMS k $");
        until_blocked(&mut admin, 1);
        thread::sleep(Duration::from_millis(300));
        out.push(reply_or_waiting(&mut c));
        out.push(info(&mut admin, "blocked_clients").into_bytes());
        out.push(admin.cmd_str("XADD k 6-1 after 1"));
        out.push(answer(&mut c));
        send(&mut c, "XREAD BLOCK 0 STREAMS missing $");
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str("XADD missing 0-1 first 1"));
        out.push(answer(&mut c));
        out
    });
}

/// A timeout answers nil: `*-1` in RESP2, `_` in RESP3, after the time given, for XREAD
/// and XREADGROUP.
#[test]
fn a_timeout_answers_nil_in_both_protocols() {
    let want = same(|s| {
        let mut c = s.raw();
        let mut out = vec![c.cmd_str("XGROUP CREATE k g $ MKSTREAM")];
        for version in ["2", "3"] {
            c.cmd_str(&format!("HELLO {version}"));
            for line in [
                "XREAD BLOCK 100 STREAMS k $",
                "XREAD BLOCK 100 STREAMS k missing 0 0",
                "XREADGROUP GROUP g c BLOCK 100 STREAMS k >",
            ] {
                let started = Instant::now();
                out.push(c.cmd_str(line));
                let took = started.elapsed();
                assert!(took >= Duration::from_millis(100), "{line}: {took:?}");
                assert!(took < Duration::from_secs(2), "{line}: {took:?}");
            }
        }
        out
    });
    // redis's transcript is the documented one: the test compares what it means to.
    assert_eq!(show(&want[1]), show(b"*-1\r\n"));
    assert_eq!(show(&want[4]), show(b"_\r\n"));
}

/// A stream whose entries after the ID were deleted (its last ID still greater) keeps a
/// blocking XREAD or XREADGROUP waiting until it times out, as redis-server does
/// (Redis's tests for issue #5299): no empty list of entries at once; a later XADD
/// serves them.
#[test]
fn entries_deleted_past_the_id_keep_a_blocking_read_waiting() {
    same(|s| {
        let mut c = s.raw();
        let mut admin = s.raw();
        let mut out = Vec::new();
        for line in [
            "XADD s1 666 f v",
            "XADD s1 667 f2 v2",
            "XDEL s1 667",
            "XADD dry 666 key value",
            "XDEL dry 666",
            "XGROUP CREATE s1 g 666",
        ] {
            out.push(admin.cmd_str(line));
        }
        for line in [
            "XREAD BLOCK 100 STREAMS s1 666",
            "XREAD BLOCK 100 STREAMS dry 665",
            "XREADGROUP GROUP g c BLOCK 100 STREAMS s1 >",
        ] {
            let started = Instant::now();
            out.push(c.cmd_str(line));
            let took = started.elapsed();
            assert!(took >= Duration::from_millis(100), "{line}: {took:?}");
        }
        send(&mut c, "XREAD BLOCK 0 STREAMS dry 665");
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str("XADD dry 667 k2 v2"));
        out.push(answer(&mut c));
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS s1 >");
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str("XADD s1 668 f3 v3"));
        out.push(answer(&mut c));
        out
    });
}

/// Several clients blocked on one key with XREAD are all served by one XADD (each gets
/// the entry, in RESP2 or RESP3); a client waiting for a later ID than the entry's keeps
/// waiting.
#[test]
fn one_xadd_serves_every_xread_waiting_on_its_key() {
    same(|s| {
        let mut admin = s.raw();
        let mut out = vec![admin.cmd_str("XADD k 1-1 a 1")];
        let mut clients: Vec<Raw> = (0..4).map(|_| s.raw()).collect();
        // One of them speaks RESP3 (its reply is a map); HELLO's reply is not compared.
        clients[2].cmd_str("HELLO 3");
        let lines = [
            "XREAD BLOCK 0 STREAMS k $",
            "XREAD COUNT 5 BLOCK 0 STREAMS k 1-1",
            "XREAD BLOCK 0 STREAMS other k $ $",
            "XREAD BLOCK 0 STREAMS k 9-9",
        ];
        for (i, (c, line)) in clients.iter_mut().zip(lines).enumerate() {
            send(c, line);
            until_blocked(&mut admin, i + 1);
        }
        out.push(admin.cmd_str("XADD k 2-1 b 2"));
        for c in &mut clients {
            out.push(reply_or_waiting(c));
        }
        out.push(info(&mut admin, "blocked_clients").into_bytes());
        out.push(admin.cmd_str("XADD k 10-1 c 3"));
        out.push(answer(&mut clients[3]));
        out
    });
}

/// XREADGROUP BLOCK `>`: one XADD of one entry serves exactly one of two consumers of
/// the same group, the first blocked; the other keeps waiting until the next entry. An
/// XADD of two entries in one MULTI serves one consumer with both. Consumers of another
/// group are served the same entries; NOACK leaves nothing pending.
#[test]
fn xreadgroup_block_serves_one_consumer_per_entry() {
    same(|s| {
        let mut admin = s.raw();
        let mut out = vec![
            admin.cmd_str("XGROUP CREATE k g $ MKSTREAM"),
            admin.cmd_str("XGROUP CREATE k h $"),
        ];
        let mut c1 = s.raw();
        let mut c2 = s.raw();
        let mut other = s.raw();
        // The other group's consumer speaks RESP3; HELLO's reply is not compared.
        other.cmd_str("HELLO 3");
        send(&mut c1, "XREADGROUP GROUP g c1 BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 1);
        send(
            &mut c2,
            "XREADGROUP GROUP g c2 COUNT 10 BLOCK 0 STREAMS k >",
        );
        until_blocked(&mut admin, 2);
        send(&mut other, "XREADGROUP GROUP h x NOACK BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 3);
        out.push(admin.cmd_str("XADD k 1-1 one 1"));
        out.push(answer(&mut c1));
        out.push(answer(&mut other));
        out.push(reply_or_waiting(&mut c2));
        out.push(info(&mut admin, "blocked_clients").into_bytes());
        out.push(admin.cmd_str("XADD k 2-1 two 2"));
        out.push(answer(&mut c2));
        out.push(admin.cmd_str("XPENDING k g"));
        out.push(admin.cmd_str("XPENDING k h"));
        // Two entries in one transaction: the first consumer gets both.
        send(&mut c1, "XREADGROUP GROUP g c1 BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 1);
        send(&mut c2, "XREADGROUP GROUP g c2 BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 2);
        for line in ["MULTI", "XADD k 3-1 three 3", "XADD k 3-2 four 4", "EXEC"] {
            out.push(admin.cmd_str(line));
        }
        out.push(answer(&mut c1));
        out.push(reply_or_waiting(&mut c2));
        out.push(admin.cmd_str("XADD k 4-1 five 5"));
        out.push(answer(&mut c2));
        out.push(admin.cmd_str("XINFO GROUPS k"));
        // An entry added and deleted in one transaction wakes the consumer to nothing.
        send(&mut c1, "XREADGROUP GROUP g c1 BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 1);
        for line in ["MULTI", "XADD k 5-1 gone 1", "XDEL k 5-1", "EXEC"] {
            out.push(admin.cmd_str(line));
        }
        out.push(reply_or_waiting(&mut c1));
        out.push(info(&mut admin, "blocked_clients").into_bytes());
        out
    });
}

/// XREADGROUP BLOCK with an ID other than `>` reads the consumer's history and answers
/// at once, even when there is nothing (an empty list), as does XREAD BLOCK with data
/// there.
#[test]
fn xreadgroup_block_with_a_history_id_answers_at_once() {
    same(|s| {
        let mut c = s.raw();
        [
            "XGROUP CREATE k g $ MKSTREAM",
            "XREADGROUP GROUP g c BLOCK 0 STREAMS k 0",
            "XADD k 1-1 a 1",
            "XREADGROUP GROUP g c BLOCK 0 STREAMS k >",
            "XREADGROUP GROUP g c BLOCK 0 STREAMS k 0",
            "XREADGROUP GROUP g c BLOCK 0 STREAMS k 1-1",
            "XREADGROUP GROUP g other BLOCK 0 STREAMS k 0",
            "XREAD BLOCK 0 STREAMS k 0",
        ]
        .iter()
        .map(|line| c.cmd_str(line))
        .collect()
    });
}

/// Inside MULTI the blocking forms do not block: EXEC answers nil for what has no data.
#[test]
fn inside_multi_blocking_reads_do_not_block() {
    same(|s| {
        let mut c = s.raw();
        [
            "XGROUP CREATE k g $ MKSTREAM",
            "MULTI",
            "XREAD BLOCK 0 STREAMS k $",
            "XREAD BLOCK 0 STREAMS missing 0",
            "XREADGROUP GROUP g c BLOCK 0 STREAMS k >",
            "XADD k 1-1 a 1",
            "XREAD BLOCK 0 STREAMS k 0",
            "XREADGROUP GROUP g c BLOCK 0 STREAMS k >",
            "XREAD BLOCK 0 STREAMS k $",
            "EXEC",
        ]
        .iter()
        .map(|line| c.cmd_str(line))
        .collect()
    });
}

/// What a consumer waiting in XREADGROUP BLOCK is answered when its stream is deleted
/// (`-UNBLOCKED the stream key no longer exists` from redis-server 7.0.15), replaced by
/// a string (the same), renamed over by a stream without its group, or when its group
/// is destroyed (`-NOGROUP the consumer group this client was blocked on no longer
/// exists`); an XREAD waiting with `$` is not answered by any of these, and an entry
/// whose ID is below the `$` it was called with does not serve it.
#[test]
fn deleting_the_stream_or_its_group_answers_a_waiting_consumer() {
    let want = same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let mut reader = s.raw();
        let mut out = vec![
            admin.cmd_str("XADD k 5-1 a 1"),
            admin.cmd_str("XGROUP CREATE k g $"),
        ];
        send(&mut reader, "XREAD BLOCK 0 STREAMS k $");
        until_blocked(&mut admin, 1);
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 2);
        out.push(admin.cmd_str("DEL k"));
        out.push(answer(&mut c));
        out.push(reply_or_waiting(&mut reader));
        // A new stream under the name: an ID below the XREAD's `$` does not serve it.
        out.push(admin.cmd_str("XADD k 1-1 b 2"));
        out.push(reply_or_waiting(&mut reader));
        out.push(admin.cmd_str("XGROUP CREATE k g $"));
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 2);
        out.push(admin.cmd_str("XGROUP DESTROY k g"));
        out.push(answer(&mut c));
        out.push(admin.cmd_str("XGROUP CREATE k g $"));
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 2);
        out.push(admin.cmd_str("SET k str"));
        out.push(answer(&mut c));
        out.push(reply_or_waiting(&mut reader));
        out.push(admin.cmd_str("DEL k"));
        out.push(admin.cmd_str("XGROUP CREATE k g $ MKSTREAM"));
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 2);
        out.push(admin.cmd_str("XADD other 3-1 x 1"));
        out.push(admin.cmd_str("XADD other 9-1 y 2"));
        out.push(admin.cmd_str("RENAME other k"));
        out.push(answer(&mut c));
        // The XREAD, still waiting with `$` = 5-1, is served by the renamed stream's
        // entry after it.
        out.push(reply_or_waiting(&mut reader));
        out.push(info(&mut admin, "blocked_clients").into_bytes());
        out
    });
    // redis-server 7.0.15's answers, as the test expects them (checks the test).
    assert_eq!(
        show(&want[3]),
        show(b"-UNBLOCKED the stream key no longer exists\r\n")
    );
    assert_eq!(
        show(&want[9]),
        show(b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n")
    );
}

/// A consumer waiting in XREADGROUP BLOCK when its stream expires, when FLUSHALL empties
/// the database (an XREAD waiting beside it keeps waiting), or when SWAPDB brings in
/// another database: a stream there with the group and newer entries serves it (and the
/// XREAD), none answers UNBLOCKED.
#[test]
fn a_waiting_consumer_on_expiry_flushall_and_swapdb() {
    let want = same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let mut reader = s.raw();
        let mut out = vec![admin.cmd_str("XGROUP CREATE k g $ MKSTREAM")];
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str("PEXPIRE k 50"));
        out.push(answer(&mut c));
        out.push(admin.cmd_str("XGROUP CREATE k g $ MKSTREAM"));
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 1);
        send(&mut reader, "XREAD BLOCK 0 STREAMS k $");
        until_blocked(&mut admin, 2);
        out.push(admin.cmd_str("FLUSHALL"));
        out.push(answer(&mut c));
        out.push(reply_or_waiting(&mut reader));
        out.push(admin.cmd_str("XGROUP CREATE k g $ MKSTREAM"));
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 2);
        for line in [
            "SELECT 1",
            "XADD k 5-1 a 1",
            "XGROUP CREATE k g 0",
            "SWAPDB 0 1",
        ] {
            out.push(admin.cmd_str(line));
        }
        out.push(answer(&mut c));
        out.push(answer(&mut reader));
        send(&mut c, "XREADGROUP GROUP g c BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 1);
        out.push(admin.cmd_str("FLUSHDB"));
        out.push(admin.cmd_str("SWAPDB 0 1"));
        out.push(answer(&mut c));
        out
    });
    // redis-server 7.0.15's answers where the test means them (checks the test).
    let unblocked = show(b"-UNBLOCKED the stream key no longer exists\r\n");
    for step in [2, 5, 16] {
        assert_eq!(show(&want[step]), unblocked, "step {step}");
    }
    assert_eq!(want[6], WAITING);
    assert!(want[12].starts_with(b"*1\r\n"), "{}", show(&want[12]));
}

/// CLIENT UNBLOCK of an XREAD BLOCK answers nil (as a timeout), with ERROR an
/// `-UNBLOCKED` error; of an XREADGROUP BLOCK alike; a client not blocked: 0.
#[test]
fn client_unblock_of_blocking_stream_reads() {
    same(|s| {
        let mut admin = s.raw();
        let mut c = s.raw();
        let id = c.cmd_str("CLIENT ID");
        let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
        let mut out = vec![admin.cmd_str("XGROUP CREATE k g $ MKSTREAM")];
        for (line, how) in [
            ("XREAD BLOCK 0 STREAMS k $", ""),
            ("XREAD BLOCK 0 STREAMS k $", " ERROR"),
            ("XREADGROUP GROUP g c BLOCK 0 STREAMS k >", ""),
            ("XREADGROUP GROUP g c BLOCK 0 STREAMS k >", " ERROR"),
            ("XREAD BLOCK 0 STREAMS k $", " TIMEOUT"),
        ] {
            send(&mut c, line);
            until_blocked(&mut admin, 1);
            out.push(admin.cmd_str(&format!("CLIENT UNBLOCK {id}{how}")));
            out.push(answer(&mut c));
        }
        out.push(admin.cmd_str(&format!("CLIENT UNBLOCK {id}")));
        // A client that leaves while blocked leaves nothing behind.
        let mut gone = s.raw();
        send(&mut gone, "XREADGROUP GROUP g gone BLOCK 0 STREAMS k >");
        until_blocked(&mut admin, 1);
        drop(gone);
        until_blocked(&mut admin, 0);
        out.push(admin.cmd_str("XADD k 1-1 kept 1"));
        out.push(admin.cmd_str("XPENDING k g"));
        out
    });
}

/// An entry of a stream as the stress test reads it: stream, ID, payload.
type Entry = (String, String, Vec<u8>);

/// The entries of an XREADGROUP reply (`[[key, [[id, [field, value…]]…]]…]`) or of an
/// XAUTOCLAIM reply's second element; a deleted entry (null fields) comes with an empty
/// payload.
fn entries_of(key: &str, list: &Frame<'_>) -> Vec<Entry> {
    let Frame::Array(items) = list else {
        panic!("not a list of entries: {list:?}");
    };
    items
        .iter()
        .map(|e| match e {
            Frame::Array(pair) => match pair.as_slice() {
                [Frame::Bulk(id), Frame::Array(fields)] => {
                    let payload = match fields.as_slice() {
                        [Frame::Bulk(_), Frame::Bulk(v)] => v.to_vec(),
                        other => panic!("unexpected fields {other:?}"),
                    };
                    (
                        key.to_string(),
                        String::from_utf8_lossy(id).into_owned(),
                        payload,
                    )
                }
                [Frame::Bulk(id), Frame::Null] => (
                    key.to_string(),
                    String::from_utf8_lossy(id).into_owned(),
                    Vec::new(),
                ),
                other => panic!("unexpected entry {other:?}"),
            },
            other => panic!("unexpected entry {other:?}"),
        })
        .collect()
}

/// The entries of an XREADGROUP reply (nil: none).
fn xreadgroup_entries(reply: &[u8]) -> Vec<Entry> {
    let (frame, _) = parse_reply(reply)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("XREADGROUP: {}", show(reply)));
    match frame {
        Frame::Null => Vec::new(),
        Frame::Array(streams) => streams
            .iter()
            .flat_map(|s| match s {
                Frame::Array(kv) if kv.len() == 2 => match &kv[0] {
                    Frame::Bulk(k) => entries_of(&String::from_utf8_lossy(k), &kv[1]),
                    other => panic!("unexpected key {other:?}"),
                },
                other => panic!("unexpected stream {other:?} in {}", show(reply)),
            })
            .collect(),
        other => panic!("XREADGROUP: {other:?}"),
    }
}

/// The shared state of one stress run.
struct Ledger {
    /// Payload of each entry the producer added, by (stream, ID).
    added: Mutex<BTreeMap<(String, String), Vec<u8>>>,
    /// Payload of each entry delivered, by (stream, ID).
    delivered: Mutex<BTreeMap<(String, String), Vec<u8>>>,
    /// XACKs that answered 1, by (stream, ID).
    acked: Mutex<BTreeMap<(String, String), usize>>,
    /// Entries delivered (by XREADGROUP or XAUTOCLAIM), duplicates included.
    deliveries: AtomicUsize,
    /// Entries taken over by XAUTOCLAIM.
    claimed: AtomicUsize,
    /// Whether the producer is done.
    produced: AtomicBool,
    /// Set when the run must end.
    stop: AtomicBool,
}

/// Acknowledges `entries` one XACK per ID (pipelined), counting those answered 1, and
/// records the payloads delivered (checked against the producer's at the end: an entry
/// can be read before the producer has its XADD's reply).
fn ack(raw: &mut Raw, entries: &[Entry], ledger: &Ledger) {
    let cmds: Vec<Cmd> = entries
        .iter()
        .map(|(k, id, _)| cmd(&["XACK", k, "g", id]))
        .collect();
    let replies = pipeline(raw, &cmds);
    let mut delivered = ledger.delivered.lock().unwrap();
    for (k, id, payload) in entries {
        let first = delivered
            .entry((k.clone(), id.clone()))
            .or_insert_with(|| payload.clone());
        assert_eq!(
            show(first),
            show(payload),
            "{k} {id} delivered with two payloads"
        );
    }
    drop(delivered);
    let mut acked = ledger.acked.lock().unwrap();
    for ((k, id, _), reply) in entries.iter().zip(replies) {
        let key = (k.clone(), id.clone());
        match integer(&reply) {
            1 => *acked.entry(key).or_default() += 1,
            0 => {}
            n => panic!("XACK {k} g {id} answered {n}"),
        }
    }
}

/// Takes over the entries idle for more than 200 ms with XAUTOCLAIM (the whole PEL of
/// each stream, cursor by cursor); returns them.
fn autoclaim(raw: &mut Raw, keys: &[String], me: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for k in keys {
        let mut cursor = "0-0".to_string();
        loop {
            let reply = raw.cmd(&[
                b"XAUTOCLAIM",
                k.as_bytes(),
                b"g",
                me.as_bytes(),
                b"200",
                cursor.as_bytes(),
                b"COUNT",
                b"25",
            ]);
            let (frame, _) = parse_reply(&reply)
                .ok()
                .flatten()
                .unwrap_or_else(|| panic!("XAUTOCLAIM: {}", show(&reply)));
            let Frame::Array(parts) = frame else {
                panic!("XAUTOCLAIM: {}", show(&reply));
            };
            let [Frame::Bulk(next), list, Frame::Array(deleted)] = parts.as_slice() else {
                panic!("XAUTOCLAIM: {}", show(&reply));
            };
            assert!(deleted.is_empty(), "nothing is deleted: {}", show(&reply));
            out.extend(entries_of(k, list));
            cursor = String::from_utf8_lossy(next).into_owned();
            if cursor == "0-0" {
                break;
            }
        }
    }
    out
}

/// One stress run against `server` over `keys`: a producer adds `n` entries with known
/// payloads (round-robin over the keys); four consumers of group `g` loop XREADGROUP
/// BLOCK 100 COUNT 10 `>` over every key, then XACK; consumer 3 acknowledges its first
/// batch, then stops acknowledging and crashes (disconnects) holding entries pending; the
/// others run
/// XAUTOCLAIM with a min-idle-time of 200 ms whenever a read comes back empty. At the end
/// every entry was delivered and acknowledged exactly once, and nothing is pending.
fn stress_run(server: &Server, keys: &[String], n: usize, what: &str) {
    /// How long the producer adds entries at most (it stops sooner once it added `n`).
    const PRODUCE_FOR: Duration = Duration::from_secs(8);
    /// How long a run may take, draining included (four runs make the test).
    const GIVE_UP: Duration = Duration::from_secs(20);
    /// Entries a run must have added at least, however slow the machine.
    const AT_LEAST: usize = 1000;
    /// Entries the crashing consumer holds unacknowledged when it goes.
    const CRASH_HOLDING: usize = 15;
    let mut admin = server.raw();
    for k in keys {
        let reply = admin.cmd_str(&format!("XGROUP CREATE {k} g $ MKSTREAM"));
        assert_eq!(show(&reply), "+OK\\r\\n", "{what}");
    }
    let ledger = Ledger {
        added: Mutex::new(BTreeMap::new()),
        delivered: Mutex::new(BTreeMap::new()),
        acked: Mutex::new(BTreeMap::new()),
        deliveries: AtomicUsize::new(0),
        claimed: AtomicUsize::new(0),
        produced: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    };
    let start = Instant::now();
    let crashed_with = AtomicUsize::new(0);
    thread::scope(|s| {
        let _stop_on_panic = StopOnDrop(&ledger.stop);
        let mut producer_raw = server.raw();
        let ledger = &ledger;
        let producer = s.spawn(move || {
            for batch in (0..n).collect::<Vec<_>>().chunks(25) {
                if ledger.stop.load(Ordering::SeqCst) {
                    return;
                }
                if start.elapsed() > PRODUCE_FOR {
                    break;
                }
                let cmds: Vec<Cmd> = batch
                    .iter()
                    .map(|&i| {
                        let k = &keys[i % keys.len()];
                        cmd(&["XADD", k, "*", "payload", &format!("entry-{i}")])
                    })
                    .collect();
                let replies = pipeline(&mut producer_raw, &cmds);
                let mut added = ledger.added.lock().unwrap();
                for (&i, reply) in batch.iter().zip(replies) {
                    let id = reply
                        .strip_prefix(b"$")
                        .and_then(|r| r.split(|&b| b == b'\n').nth(1))
                        .map(|id| String::from_utf8_lossy(id).trim_end().to_string())
                        .unwrap_or_else(|| panic!("XADD answered {}", show(&reply)));
                    let key = (keys[i % keys.len()].clone(), id);
                    let fresh = added.insert(key, format!("entry-{i}").into_bytes());
                    assert!(fresh.is_none(), "an ID given twice");
                }
                drop(added);
                thread::sleep(Duration::from_millis(3));
            }
            ledger.produced.store(true, Ordering::SeqCst);
        });
        let consumers: Vec<_> = (0..4)
            .map(|c| {
                let mut raw = server.raw();
                let crashed_with = &crashed_with;
                s.spawn(move || {
                    let me = format!("c{c}");
                    let mut read = vec![
                        "XREADGROUP".to_string(),
                        "GROUP".into(),
                        "g".into(),
                        me.clone(),
                        "BLOCK".into(),
                        "100".into(),
                        "COUNT".into(),
                        "10".into(),
                        "STREAMS".into(),
                    ];
                    read.extend(keys.iter().cloned());
                    read.extend(keys.iter().map(|_| ">".to_string()));
                    let read = cmd(&read);
                    let mut batches = 0;
                    let mut unacked = 0;
                    while !ledger.stop.load(Ordering::SeqCst) {
                        let reply = goblin_tests::cmd::call(&mut raw, &read);
                        let got = xreadgroup_entries(&reply);
                        ledger.deliveries.fetch_add(got.len(), Ordering::SeqCst);
                        if c == 3 && !got.is_empty() {
                            batches += 1;
                            if batches == 1 {
                                ack(&mut raw, &got, ledger);
                                continue;
                            }
                            // Then it stops acknowledging, and once it holds enough
                            // entries it crashes: they stay pending, the connection goes.
                            unacked += got.len();
                            if unacked >= CRASH_HOLDING {
                                crashed_with.store(unacked, Ordering::SeqCst);
                                return;
                            }
                            continue;
                        }
                        if got.is_empty() {
                            let taken = autoclaim(&mut raw, keys, &me);
                            ledger.claimed.fetch_add(taken.len(), Ordering::SeqCst);
                            ledger.deliveries.fetch_add(taken.len(), Ordering::SeqCst);
                            ack(&mut raw, &taken, ledger);
                        } else {
                            ack(&mut raw, &got, ledger);
                        }
                    }
                })
            })
            .collect();
        let finished = |ledger: &Ledger| {
            // One lock at a time.
            let added = ledger.added.lock().unwrap().len();
            let acked = ledger.acked.lock().unwrap().len();
            ledger.produced.load(Ordering::SeqCst) && acked >= added
        };
        while start.elapsed() < GIVE_UP
            && !finished(ledger)
            && !consumers
                .iter()
                .enumerate()
                .any(|(i, h)| i != 3 && h.is_finished())
            && (!producer.is_finished() || ledger.produced.load(Ordering::SeqCst))
        {
            thread::sleep(Duration::from_millis(20));
        }
        ledger.stop.store(true, Ordering::SeqCst);
        for h in consumers {
            if let Err(e) = h.join() {
                std::panic::resume_unwind(e);
            }
        }
        if let Err(e) = producer.join() {
            std::panic::resume_unwind(e);
        }
    });
    let added = ledger.added.into_inner().unwrap();
    let acked = ledger.acked.into_inner().unwrap();
    assert!(
        added.len() >= AT_LEAST.min(n),
        "{what}: only {} entries added in {PRODUCE_FOR:?}",
        added.len()
    );
    let missing: Vec<_> = added.keys().filter(|k| !acked.contains_key(*k)).collect();
    assert!(
        missing.is_empty(),
        "{what}: {} of {n} entries never acknowledged (within {:?}), e.g. {:?}",
        missing.len(),
        start.elapsed(),
        &missing[..missing.len().min(5)]
    );
    let delivered = ledger.delivered.into_inner().unwrap();
    for (key, payload) in &delivered {
        assert_eq!(
            added.get(key).map(|p| show(p)),
            Some(show(payload)),
            "{what}: {key:?}: the payload delivered is not the one added"
        );
    }
    let twice: Vec<_> = acked.iter().filter(|(_, count)| **count != 1).collect();
    assert!(twice.is_empty(), "{what}: acknowledged twice: {twice:?}");
    let unknown: BTreeSet<_> = acked.keys().filter(|k| !added.contains_key(*k)).collect();
    assert!(
        unknown.is_empty(),
        "{what}: acknowledged, never added: {unknown:?}"
    );
    for k in keys {
        let summary = admin.cmd_str(&format!("XPENDING {k} g"));
        assert!(
            summary.starts_with(b"*4\r\n:0\r\n"),
            "{what}: {k} still has pending entries: {}",
            show(&summary)
        );
        let len = integer(&admin.cmd_str(&format!("XLEN {k}")));
        assert_eq!(
            len as usize,
            added.keys().filter(|(key, _)| key == k).count(),
            "{what}: XLEN {k}"
        );
    }
    let crashed = crashed_with.load(Ordering::SeqCst);
    let claimed = ledger.claimed.load(Ordering::SeqCst);
    assert!(
        crashed > 0,
        "{what}: consumer 3 never crashed with entries pending"
    );
    assert!(
        claimed >= crashed,
        "{what}: XAUTOCLAIM took over {claimed} entries, the crash left {crashed}"
    );
    println!(
        "{what}: {} entries, {} deliveries, {claimed} taken over by XAUTOCLAIM ({crashed} \
         left by the crash), {:?}",
        added.len(),
        ledger.deliveries.load(Ordering::SeqCst),
        start.elapsed()
    );
}

/// The stress test: a producer, a group of four consumers blocking in XREADGROUP, one
/// of them crashing with entries pending and the others taking them over with
/// XAUTOCLAIM; over one stream, then over a stream on every shard read at once. Every
/// entry is delivered and acknowledged exactly once, nothing is left pending. Against
/// goblin-server with 4 threads, then against redis-server with the same body (a check of
/// the test itself). Each run adds up to 20,000 entries for at most 8 s and gives up after
/// 20 s; goblin-server's two runs make about 20 s of stress.
#[test]
fn streams_stress() {
    const N: usize = 20_000;
    let shards = keys_on_every_shard("stress");
    let servers: Vec<(Server, &str)> = if self_check() {
        vec![(Server::redis(), "redis (self-check)")]
    } else {
        vec![
            (Server::goblin_threads(4), "goblin --threads 4"),
            (Server::redis(), "redis"),
        ]
    };
    for (server, name) in &servers {
        stress_run(
            server,
            &["one".to_string()],
            N,
            &format!("{name}, one stream"),
        );
        stress_run(
            server,
            &shards,
            N,
            &format!("{name}, a stream on every shard"),
        );
    }
}
