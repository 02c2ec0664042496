//! The wire protocol: framing, pipelining, protocol errors, hostile input.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use goblin_tests::rng::Rng;
use goblin_tests::{Differential, Server, encode, show};

#[test]
fn protocol_errors_match_redis_and_close_the_connection() {
    let mut d = Differential::new();
    let cases: &[&[u8]] = &[
        b"*abc\r\n",
        b"*+1\r\n",
        b"*2147483648\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\n$x\r\n",
        b"*1\r\n:4\r\n",
        b"*1\r\n\r\n\r\n",
        b"*2\r\n$4\r\nECHO\r\n+hi\r\n",
        b"PING \"a\r\n",
        b"PING 'a\r\n",
        b"ECHO \"a\"b\r\n",
        // Replies to the requests before the fault are sent first.
        b"PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n!\r\n",
    ];
    for case in cases {
        let (_, closed) = d.check_raw_to_close(case);
        assert!(closed, "{} should close the connection", show(case));
    }
}

#[test]
fn a_client_that_must_authenticate_sends_small_requests_until_it_does() {
    // As redis-server: before AUTH, at most 10 arguments of at most 16384 bytes; AUTH
    // lifts it for the requests after it, in the same write too.
    let mut d = Differential::with_servers(
        Server::goblin_with(&["--requirepass", "pw"]),
        Server::redis_with(&["--requirepass", "pw"]),
    );
    for case in [
        &b"*100\r\n"[..],
        b"*11\r\n",
        b"*1\r\n$100000000\r\n",
        b"*1\r\n$16385\r\n",
        b"*2\r\n$4\r\nAUTH\r\n$2\r\nno\r\n*11\r\n",
    ] {
        let (_, closed) = d.check_raw_to_close(case);
        assert!(closed, "{} should close the connection", show(case));
    }
    let mut big = encode(&[b"AUTH", b"pw"]);
    big.extend_from_slice(&encode(&[b"SET", b"k", &[b'x'; 20_000]]));
    big.extend_from_slice(&encode(&[
        b"MSET", b"a", b"1", b"b", b"2", b"c", b"3", b"d", b"4", b"e", b"5",
    ]));
    big.extend_from_slice(&encode(&[b"STRLEN", b"k"]));
    let (replies, closed) = d.check_raw_replies(&big, 4);
    assert!(
        !closed && replies.ends_with(b":20000\r\n"),
        "{}",
        show(&replies)
    );
    // Within the limits, a client gets NOAUTH and stays.
    let mut small = encode(&[b"PING"]);
    small.extend_from_slice(&encode(&[b"ECHO", &[b'y'; 16384]]));
    let (replies, closed) = d.check_raw(&small, Duration::from_millis(300));
    assert!(
        !closed && replies.starts_with(b"-NOAUTH"),
        "{}",
        show(&replies)
    );
}

#[test]
fn oversized_lines_are_protocol_errors() {
    let mut d = Differential::new();
    let mut inline = vec![b'a'; 70 * 1024];
    let (reply, closed) = d.check_raw_to_close(&inline);
    assert!(closed && reply.starts_with(b"-ERR Protocol error: too big inline request"));
    inline.truncate(60 * 1024);
    inline.extend_from_slice(b"\r\n");
    // A long unknown command: one error reply.
    d.check_raw_replies(&inline, 1);
    let mut header = b"*".to_vec();
    header.resize(70 * 1024, b'1');
    d.check_raw_to_close(&header);
    let mut bulk = b"*1\r\n$".to_vec();
    bulk.resize(70 * 1024, b'1');
    d.check_raw_to_close(&bulk);
}

#[test]
fn redis_leniencies_are_kept() {
    let mut d = Differential::new();
    // Each input, and the number of replies it gets.
    for (case, replies) in [
        (&b"*0\r\n*-1\r\nPING\r\n"[..], 1),
        // The two bytes after a bulk argument are skipped, whatever they are.
        (b"*1\r\n$4\r\nPINGxxPING\r\n", 2),
        (b"\r\n\n   \nPING\n", 1),
        (
            b"SET \"a b\" 'c\\'d'\r\nGET \"a b\"\r\nECHO \"\\x41\\n\\t\"\r\n",
            3,
        ),
        (b"ECHO \"\"\r\nECHO ''\r\n", 2),
    ] {
        let (_, closed) = d.check_raw_replies(case, replies);
        assert!(!closed, "{} must not close", show(case));
    }
}

#[test]
fn pipelines_are_answered_in_order() {
    let server = Server::goblin();
    let mut raw = server.raw();
    let mut pipeline = Vec::new();
    for i in 0..1000 {
        pipeline.extend(encode(&[
            b"SET",
            format!("k{i}").as_bytes(),
            format!("v{i}").as_bytes(),
        ]));
        pipeline.extend(encode(&[b"GET", format!("k{i}").as_bytes()]));
    }
    raw.send(&pipeline);
    for i in 0..1000 {
        assert_eq!(raw.reply(), b"+OK\r\n");
        let v = format!("v{i}");
        assert_eq!(raw.reply(), format!("${}\r\n{v}\r\n", v.len()).as_bytes());
    }
}

#[test]
fn requests_split_at_every_byte_are_decoded() {
    let server = Server::goblin();
    let mut raw = server.raw();
    let request = encode(&[b"SET", b"split", b"value with\r\nCRLF"]);
    for b in &request {
        raw.send(&[*b]);
        raw.stream().flush().unwrap();
    }
    assert_eq!(raw.reply(), b"+OK\r\n");
    assert_eq!(
        raw.cmd(&[b"GET", b"split"]),
        b"$16\r\nvalue with\r\nCRLF\r\n"
    );
}

#[test]
fn a_large_value_survives_partial_reads_and_writes() {
    let server = Server::goblin();
    let mut raw = server.raw();
    let value: Vec<u8> = (0..8 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    assert_eq!(raw.cmd(&[b"SET", b"big", &value]), b"+OK\r\n");
    let reply = raw.cmd(&[b"GET", b"big"]);
    assert_eq!(
        &reply[reply.len() - value.len() - 2..reply.len() - 2],
        &value[..]
    );
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[test]
fn declared_but_unsent_sizes_are_not_allocated() {
    let server = Server::goblin();
    let before = rss_kib(server.pid());
    let mut conns = Vec::new();
    for _ in 0..20 {
        let mut raw = server.raw();
        raw.send(b"*1048576\r\n$536870912\r\nsome bytes");
        conns.push(raw);
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = rss_kib(server.pid());
    // 20 clients declared 10 GiB between them; the server holds what they sent.
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    let mut other = server.raw();
    assert_eq!(other.cmd(&[b"PING"]), b"+PONG\r\n");
}

#[test]
fn garbage_never_crashes_the_server() {
    let mut server = Server::goblin();
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut next = || rng.next_u64();
    for round in 0..300 {
        let mut raw = server.raw();
        let len = (next() % 512) as usize;
        let mut junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 3 == 0 {
            // Make it look like RESP, so the deeper paths are reached too.
            junk.splice(0..0, b"*3\r\n$3\r\nSET\r\n$".iter().copied());
        }
        raw.send(&junk);
        let _ = raw.read_to_close(Duration::from_millis(5));
    }
    assert!(server.is_running());
    assert_eq!(server.raw().cmd(&[b"PING"]), b"+PONG\r\n");
}

#[test]
fn a_slow_reader_does_not_stall_others() {
    let server = Server::goblin();
    let mut slow = server.raw();
    let value = vec![b'x'; 1024 * 1024];
    slow.cmd(&[b"SET", b"big", &value]);
    // Ask for 64 MiB of replies and read none of them.
    let mut pipeline = Vec::new();
    for _ in 0..64 {
        pipeline.extend(encode(&[b"GET", b"big"]));
    }
    slow.send(&pipeline);
    let mut other = server.raw();
    let started = Instant::now();
    for _ in 0..100 {
        assert_eq!(other.cmd(&[b"PING"]), b"+PONG\r\n");
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // The slow reader still gets every byte once it reads.
    let mut total = 0;
    let mut chunk = vec![0u8; 1 << 20];
    let want = 64 * (value.len() + b"$1048576\r\n\r\n".len());
    while total < want {
        total += slow.stream().read(&mut chunk).unwrap();
    }
    assert_eq!(total, want);
}

#[test]
fn quit_replies_then_closes() {
    let mut d = Differential::new();
    let (reply, closed) = d.check_raw_to_close(b"PING\r\nQUIT\r\nPING\r\n");
    assert!(closed);
    assert_eq!(reply, b"+PONG\r\n+OK\r\n");
}

/// The harness's own check: `check_raw_replies` reads exactly the replies it is told to
/// expect, so a count that is too low fails instead of leaving replies unread.
#[test]
#[should_panic(expected = "the test's count is too low")]
fn check_raw_replies_refuses_a_count_that_is_too_low() {
    Differential::new().check_raw_replies(b"PING\r\nPING\r\n", 1);
}
