//! A connection's unsent replies are bounded wherever they are held: a client that
//! pipelines requests for large values on another shard and does not read makes the
//! server hold its output bound (64 MiB) and a batch's reply budget, not every reply.
//! (Before the bound counted replies held for a connection on other shards, 512 GETs of
//! a 4 MiB value there — 12 KB sent — made the server hold 2.1 GB.)

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use goblin_store::key_slot;
use goblin_tests::{Raw, Server, encode, reply};

const VALUE: usize = 4 * 1024 * 1024;
const GETS: usize = 512;

fn info_field(raw: &mut Raw, field: &str) -> String {
    let reply = raw.cmd(&[b"INFO", b"everything"]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    reply::info_field(&text, field)
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .to_string()
}

/// A two-thread server, a connection, and a 4 MiB value stored on the shard that is not
/// the connection's; a second connection for INFO; the server's used_memory then. The
/// connection has already sent (and not read) GETS GETs of the value.
struct Flood {
    _server: Server,
    flood: Raw,
    admin: Raw,
    baseline: i64,
}

fn flood_from_another_shard() -> Flood {
    let server = Server::goblin_threads(2);
    let (mut flood, worker) = server.raw_located(&mut server.raw());
    // With two shards, shard 0 owns slots 0..8192 and shard 1 the rest.
    let other = 1 - worker;
    let key = (0..)
        .map(|i| format!("big:{i}"))
        .find(|k| (usize::from(key_slot(k.as_bytes())) >= 8192) == (other == 1))
        .unwrap();
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&[b"SET", key.as_bytes(), &vec![b'x'; VALUE]]),
        b"+OK\r\n"
    );
    let baseline: i64 = info_field(&mut admin, "used_memory").parse().unwrap();
    let mut pipeline = Vec::new();
    for _ in 0..GETS {
        pipeline.extend_from_slice(&encode(&[b"GET", key.as_bytes()]));
    }
    flood.send(&pipeline);
    Flood {
        _server: server,
        flood,
        admin,
        baseline,
    }
}

#[test]
fn unread_replies_from_another_shard_stay_bounded() {
    let Flood {
        _server,
        mut flood,
        mut admin,
        baseline,
    } = flood_from_another_shard();
    // The client does not read. Watch the server's memory for a while.
    let mut worst = 0i64;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let used: i64 = info_field(&mut admin, "used_memory").parse().unwrap();
        worst = worst.max(used - baseline);
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "unread replies: the server held at most {} MiB more",
        worst >> 20
    );
    assert!(
        worst < 300 << 20,
        "the server held {} MiB for a client that does not read (the bound is 64 MiB \
         of output and a 4 MiB batch budget)",
        worst >> 20
    );
    // Every reply still arrives, in full and in order, once the client reads.
    let header = format!("${VALUE}\r\n").into_bytes();
    let per_reply = header.len() + VALUE + 2;
    let stream = flood.stream();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reply = vec![0u8; per_reply];
    for i in 0..GETS {
        stream
            .read_exact(&mut reply)
            .unwrap_or_else(|e| panic!("reply {i}: {e}"));
        assert!(reply.starts_with(&header), "reply {i}");
        assert!(
            reply[header.len()..header.len() + VALUE]
                .iter()
                .all(|&b| b == b'x')
        );
        assert!(reply.ends_with(b"\r\n"));
    }
    // And the connection goes on.
    stream.write_all(&encode(&[b"PING"])).unwrap();
    assert_eq!(flood.reply(), b"+PONG\r\n");
    let after: i64 = info_field(&mut admin, "used_memory").parse().unwrap();
    assert!(
        after - baseline < 32 << 20,
        "{} MiB left",
        (after - baseline) >> 20
    );
}

#[test]
fn a_client_that_leaves_with_replies_unread_frees_them() {
    let Flood {
        _server,
        flood,
        mut admin,
        baseline,
    } = flood_from_another_shard();
    std::thread::sleep(Duration::from_millis(500));
    drop(flood);
    // Its stalled batch is dropped at the owner and its output freed.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let used: i64 = info_field(&mut admin, "used_memory").parse().unwrap();
        let clients = info_field(&mut admin, "connected_clients");
        if used - baseline < 16 << 20 && clients == "1" {
            break;
        }
        assert!(
            Instant::now() < until,
            "{} MiB still held, {clients} clients",
            (used - baseline) >> 20
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(admin.cmd(&[b"DBSIZE"]), b":1\r\n");
}
