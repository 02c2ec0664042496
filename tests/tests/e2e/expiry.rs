//! Active expiry: a million keys with the same one-second TTL expire while a client keeps
//! pinging. The timer wheel expires them under a per-iteration budget, so the loop keeps
//! answering; every key goes, and the memory with them.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use goblin_tests::reply::info_field;
use goblin_tests::{Raw, Server, encode};

fn info_int(raw: &mut Raw, section: &str, field: &str) -> i64 {
    let text = String::from_utf8(raw.cmd(&[b"INFO", section.as_bytes()])).unwrap();
    info_field(&text, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} lacks {field}: {text}"))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Sends `commands` pipelined in chunks, checking every reply is `expect`.
fn send_expecting(raw: &mut Raw, commands: impl Iterator<Item = Vec<u8>>, expect: &[u8]) {
    let mut chunk = Vec::new();
    let mut n = 0;
    let flush = |raw: &mut Raw, chunk: &mut Vec<u8>, n: &mut usize| {
        raw.send(chunk);
        for _ in 0..*n {
            assert_eq!(raw.reply(), expect);
        }
        chunk.clear();
        *n = 0;
    };
    for c in commands {
        chunk.extend_from_slice(&c);
        n += 1;
        if n == 10_000 {
            flush(raw, &mut chunk, &mut n);
        }
    }
    flush(raw, &mut chunk, &mut n);
}

#[test]
fn a_million_keys_expire_together_without_stalling_the_loop() {
    const KEYS: usize = 1_000_000;
    let server = Server::goblin_threads(1);
    let mut loader = server.raw();
    let baseline = info_int(&mut loader, "memory", "used_memory");
    let key = |i: usize| format!("key:{i:012}").into_bytes();
    let started = Instant::now();
    send_expecting(
        &mut loader,
        (0..KEYS).map(|i| encode(&[b"SET", &key(i), &[b'v'; 32]])),
        b"+OK\r\n",
    );
    // One deadline for all, one second after the time setting it on every key takes
    // (about what loading took; twice that, to be safe on a slow machine).
    let deadline = now_ms() + 2 * started.elapsed().as_millis() as u64 + 1000;
    let at = deadline.to_string();
    send_expecting(
        &mut loader,
        (0..KEYS).map(|i| encode(&[b"PEXPIREAT", &key(i), at.as_bytes()])),
        b":1\r\n",
    );
    assert_eq!(loader.cmd(&[b"DBSIZE"]), format!(":{KEYS}\r\n").as_bytes());
    let loaded = info_int(&mut loader, "memory", "used_memory");
    assert!(
        loaded - baseline > 40 * KEYS as i64,
        "{baseline} -> {loaded}"
    );

    // Ping until every key is gone, timing each reply.
    let mut pinger = server.raw();
    let mut worst = Duration::ZERO;
    let mut pings = 0;
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let t = Instant::now();
        assert_eq!(pinger.cmd(&[b"PING"]), b"+PONG\r\n");
        if now_ms() > deadline {
            worst = worst.max(t.elapsed());
            pings += 1;
        }
        if pings % 200 == 199 && loader.cmd(&[b"DBSIZE"]) == b":0\r\n" {
            break;
        }
        assert!(Instant::now() < give_up, "keys did not all expire");
        std::thread::sleep(Duration::from_micros(500));
    }
    let after = info_int(&mut loader, "memory", "used_memory");
    let keyspace = info_int(&mut loader, "memory", "goblin_keyspace_bytes");
    println!(
        "mass expiry of {KEYS} keys: {pings} pings during it, worst PING latency {worst:?}; \
         used_memory {baseline} -> {loaded} -> {after}, keyspace bytes after {keyspace}"
    );
    // The memory is returned (the allocator's count, not RSS, which the allocator may keep).
    assert!(
        after - baseline < (loaded - baseline) / 10,
        "{baseline} -> {loaded} -> {after}"
    );
    assert!(keyspace < 4 * 1024 * 1024, "{keyspace}");
    // A debug build; the release figure is in docs/benchmarks.md. This only catches stalls.
    assert!(worst < Duration::from_millis(500), "worst PING {worst:?}");
}
