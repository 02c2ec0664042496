//! What one client may make the server hold, and how many clients it can hold:
//! `client-output-buffer-limit` (hard and soft), `client-query-buffer-limit`, and
//! `maxclients` against the descriptor limit — differentially against redis-server where
//! it defines the outcome.

use std::time::Duration;

use goblin_tests::Server;
use goblin_tests::{Raw, encode};

/// Sets up both servers the same way.
fn both(config: &[&[u8]]) -> Vec<Server> {
    let servers = vec![Server::goblin_threads(3), Server::redis()];
    for server in &servers {
        let mut c = Raw::connect(server.port);
        let mut args: Vec<&[u8]> = vec![b"CONFIG", b"SET"];
        args.extend_from_slice(config);
        assert_eq!(c.cmd(&args), b"+OK\r\n", "{:?}", server.kind);
    }
    servers
}

/// A reply past the hard limit closes the client before any of it is sent, on both
/// servers; other clients go on.
#[test]
fn a_reply_past_the_hard_output_limit_closes_the_client() {
    for server in both(&[b"client-output-buffer-limit", b"normal 1mb 0 0"]) {
        let mut c = Raw::connect(server.port);
        let big = vec![b'v'; 2 << 20];
        // Keys on every shard, so that some replies come from other threads.
        for key in ["a", "b", "c", "d", "e", "f"] {
            assert_eq!(c.cmd(&[b"SET", key.as_bytes(), &big]), b"+OK\r\n");
        }
        // A small reply passes.
        assert_eq!(c.cmd(&[b"STRLEN", b"a"]), b":2097152\r\n");
        for key in ["a", "b", "c", "d", "e", "f"] {
            let mut victim = Raw::connect(server.port);
            victim.send(&encode(&[b"GET", key.as_bytes()]));
            let (bytes, closed) = victim.read_to_close(Duration::from_secs(5));
            assert!(closed, "{:?}: GET {key} not closed", server.kind);
            assert!(
                bytes.is_empty(),
                "{:?}: GET {key} sent {} bytes before closing",
                server.kind,
                bytes.len()
            );
        }
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    }
}

/// A client that stays past the soft limit longer than its seconds is closed when its
/// next reply comes; one that falls back under it in time is not.
#[test]
fn a_client_past_the_soft_output_limit_for_its_seconds_is_closed() {
    for server in both(&[b"client-output-buffer-limit", b"normal 0 1mb 1"]) {
        let mut c = Raw::connect(server.port);
        let value = vec![b'v'; 100 << 10];
        assert_eq!(c.cmd(&[b"SET", b"k", &value]), b"+OK\r\n");
        // Briefly past the soft limit, then read: not closed.
        let mut reader = Raw::connect(server.port);
        let gets: Vec<u8> = (0..30).flat_map(|_| encode(&[b"GET", b"k"])).collect();
        reader.send(&gets);
        for _ in 0..30 {
            reader.reply();
        }
        assert_eq!(reader.cmd(&[b"PING"]), b"+PONG\r\n");
        // Past it for longer than a second without reading: the next reply closes it.
        let mut sleeper = Raw::connect(server.port);
        let gets: Vec<u8> = (0..200).flat_map(|_| encode(&[b"GET", b"k"])).collect();
        sleeper.send(&gets);
        std::thread::sleep(Duration::from_millis(2500));
        sleeper.send(&encode(&[b"PING"]));
        let (bytes, closed) = sleeper.read_to_close(Duration::from_secs(5));
        assert!(closed, "{:?}: not closed", server.kind);
        assert!(
            bytes.len() < 200 * value.len(),
            "{:?}: every reply was sent",
            server.kind
        );
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    }
}

/// Input past `client-query-buffer-limit` (a bulk argument still arriving) closes the
/// client on both servers; the limit is refused below 1mb with redis-server's text.
#[test]
fn input_past_the_query_buffer_limit_closes_the_client() {
    for server in both(&[b"client-query-buffer-limit", b"1mb"]) {
        let mut c = Raw::connect(server.port);
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"client-query-buffer-limit", b"1000"]),
            b"-ERR CONFIG SET failed (possibly related to argument 'client-query-buffer-limit') \
              - argument must be between 1048576 and 9223372036854775807 inclusive\r\n"
        );
        let mut victim = Raw::connect(server.port);
        victim.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n");
        let chunk = vec![b'x'; 64 << 10];
        let mut sent = 0;
        while sent < 2_000_000 {
            if victim.try_send(&chunk).is_err() {
                break;
            }
            sent += chunk.len();
        }
        let (bytes, closed) = victim.read_to_close(Duration::from_secs(5));
        assert!(closed, "{:?}: not closed", server.kind);
        assert!(bytes.is_empty(), "{:?}: {bytes:?}", server.kind);
        assert_eq!(c.cmd(&[b"EXISTS", b"k"]), b":0\r\n");
        // A value under the limit goes in.
        let value = vec![b'y'; 500_000];
        assert_eq!(c.cmd(&[b"SET", b"k", &value]), b"+OK\r\n");
    }
}

/// With too few descriptors for `maxclients`, the server lowers it to what the limit
/// allows (after its own), refuses raising it past that with redis-server's error, and
/// tells every excess client `max number of clients reached` and closes it — none is
/// left waiting without an answer.
#[test]
fn maxclients_fits_the_descriptor_limit_and_excess_clients_are_told() {
    let server = Server::goblin_with_nofile(100, &["--threads", "2"]);
    let mut c = Raw::connect(server.port);
    // 100 descriptors, less 32 + 4 per thread kept for the server itself.
    let allowed = 100 - (32 + 4 * 2);
    let reply = c.cmd(&[b"CONFIG", b"GET", b"maxclients"]);
    assert_eq!(
        reply,
        format!("*2\r\n$10\r\nmaxclients\r\n$2\r\n{allowed}\r\n").into_bytes()
    );
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"maxclients", b"1000"]),
        format!(
            "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The \
             operating system is not able to handle the specified number of clients, try \
             with {allowed}\r\n"
        )
        .into_bytes()
    );
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..100 {
        let mut client = Raw::connect(server.port);
        client.send(&encode(&[b"PING"]));
        let reply = client.try_reply().expect("every client gets an answer");
        if reply == b"+PONG\r\n" {
            open.push(client);
        } else {
            assert_eq!(reply, b"-ERR max number of clients reached\r\n");
            let (_, closed) = client.read_to_close(Duration::from_secs(5));
            assert!(closed);
            refused += 1;
        }
    }
    // The control connection is one of the allowed.
    assert_eq!(open.len(), allowed - 1);
    assert_eq!(refused, 100 - (allowed - 1));
    // Closing clients makes room again.
    open.truncate(10);
    std::thread::sleep(Duration::from_millis(200));
    let mut late = Raw::connect(server.port);
    assert_eq!(late.cmd(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
}

/// CONFIG SET port moves the listener while connected clients stay; a port in use or an
/// address the machine does not have is refused with redis-server's errors, and nothing
/// changes.
#[test]
fn config_set_port_and_bind_move_the_listener() {
    let mut errors = Vec::new();
    for server in [Server::goblin_threads(2), Server::redis()] {
        let kind = server.kind;
        let mut c = Raw::connect(server.port);
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let busy_port = busy
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_default()
            .to_string();
        for args in [
            &[&b"CONFIG"[..], b"SET", b"port", busy_port.as_bytes()][..],
            &[b"CONFIG", b"SET", b"port", b"70000"],
            &[b"CONFIG", b"SET", b"port", b"x"],
            &[b"CONFIG", b"SET", b"bind", b"10.255.255.1"],
        ] {
            errors.push(c.cmd(args));
        }
        let moved = goblin_tests::free_port();
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"port", moved.to_string().as_bytes()]),
            b"+OK\r\n",
            "{kind:?}"
        );
        // The client that moved it stays; new clients come on the new port.
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
        let mut fresh = Raw::connect(moved);
        assert_eq!(
            fresh.cmd(&[b"CONFIG", b"GET", b"port"]),
            format!(
                "*2\r\n$4\r\nport\r\n${}\r\n{moved}\r\n",
                moved.to_string().len()
            )
            .into_bytes()
        );
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            Raw::try_connect(server.port).is_err(),
            "{kind:?}: the old port still listens"
        );
        assert_eq!(
            fresh.cmd(&[
                b"CONFIG",
                b"SET",
                b"port",
                server.port.to_string().as_bytes()
            ]),
            b"+OK\r\n"
        );
        let mut back = Raw::connect(server.port);
        assert_eq!(back.cmd(&[b"PING"]), b"+PONG\r\n");
        drop(busy);
    }
    let (g, r) = errors.split_at(errors.len() / 2);
    assert_eq!(
        g.iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect::<Vec<_>>(),
        r.iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect::<Vec<_>>()
    );
}

/// `bind` takes several addresses, as redis-server's does: each is listened on, one
/// marked `-` that the machine does not have is skipped (and `::1` where there is no
/// IPv6), CONFIG GET shows them as given; an address that cannot be bound, or more than
/// 16, is refused and nothing changes. The same replies as redis-server's.
#[test]
fn bind_listens_on_several_addresses() {
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    let mut replies = Vec::new();
    for server in [Server::goblin_threads(2), Server::redis()] {
        let kind = server.kind;
        let mut c = Raw::connect(server.port);
        let set = |c: &mut Raw, value: &str| c.cmd(&[b"CONFIG", b"SET", b"bind", value.as_bytes()]);
        let both = "127.0.0.1 -::1 -192.0.2.1";
        assert_eq!(set(&mut c, both), b"+OK\r\n", "{kind:?}");
        replies.push(c.cmd(&[b"CONFIG", b"GET", b"bind"]));
        assert_eq!(Raw::connect(server.port).cmd(&[b"PING"]), b"+PONG\r\n");
        let v6 = std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, server.port));
        if ipv6 {
            let mut over_v6 = Raw::try_connect_to(v6).expect("::1");
            assert_eq!(over_v6.cmd(&[b"PING"]), b"+PONG\r\n", "{kind:?}");
        }
        replies.push(set(&mut c, "127.0.0.1 192.0.2.1"));
        let many: Vec<String> = (1..=17).map(|i| format!("-192.0.2.{i}")).collect();
        replies.push(set(&mut c, &many.join(" ")));
        replies.push(c.cmd(&[b"CONFIG", b"GET", b"bind"]));
        assert_eq!(set(&mut c, "127.0.0.1"), b"+OK\r\n", "{kind:?}");
        std::thread::sleep(Duration::from_millis(100));
        if ipv6 {
            assert!(
                Raw::try_connect_to(v6).is_err(),
                "{kind:?}: ::1 still listens"
            );
        }
        assert_eq!(Raw::connect(server.port).cmd(&[b"PING"]), b"+PONG\r\n");
    }
    let (g, r) = replies.split_at(replies.len() / 2);
    assert_eq!(g, r);
    assert_eq!(g[0], encode(&[b"bind", b"127.0.0.1 -::1 -192.0.2.1"]));
}

/// `tcp-backlog`: the listening sockets' queue of pending connections, as the kernel
/// reports it (`ss`'s Send-Q for a listener), the Unix socket's too — as redis-server
/// sets them.
#[test]
fn tcp_backlog_sizes_the_listen_queues_as_redis_does() {
    let listen_queue = |filter: &str, unix: bool| -> String {
        let out = std::process::Command::new("ss")
            .args([if unix { "-lxH" } else { "-ltnH" }, filter])
            .output()
            .expect("ss (iproute2) runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // `State Recv-Q Send-Q …` (a Unix socket's line starts with its type).
        let fields: Vec<&str> = text.split_whitespace().collect();
        let at = if unix { 3 } else { 2 };
        fields.get(at).map_or(text.clone(), |f| (*f).to_string())
    };
    let mut seen = Vec::new();
    for kind in [goblin_tests::Kind::Goblin, goblin_tests::Kind::Redis] {
        let dir = goblin_tests::scratch_dir("backlog");
        let sock = dir.join("b.sock");
        let sock_text = sock.to_str().unwrap();
        let args = ["--tcp-backlog", "100", "--unixsocket", sock_text];
        let server = match kind {
            goblin_tests::Kind::Goblin => {
                let port = goblin_tests::free_port().to_string();
                Server::goblin_with(&[&args[..], &["--port", &port]].concat())
            }
            goblin_tests::Kind::Redis => Server::redis_with(&args),
        };
        let tcp = listen_queue(&format!("sport = :{}", server.port), false);
        let unix = listen_queue(&format!("src = {sock_text}"), true);
        seen.push((tcp, unix));
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(seen[0], seen[1], "goblin (left), redis (right)");
    assert_eq!(seen[0], ("100".to_string(), "100".to_string()));
}
