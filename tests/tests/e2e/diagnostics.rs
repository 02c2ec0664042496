//! LATENCY, MEMORY and DEBUG against the real binary, differentially against
//! redis-server where it defines the reply.

use std::time::Duration;

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::{Raw, Server};

fn both(args: &[&str]) -> Vec<Server> {
    vec![
        Server::goblin_with(&[&["--threads", "3"], args].concat()),
        Server::redis_with(args),
    ]
}

fn items(reply: &[u8]) -> Vec<Vec<u8>> {
    let Ok(Some((Frame::Array(items), _))) = parse_reply(reply) else {
        panic!("not an array: {}", String::from_utf8_lossy(reply));
    };
    items
        .iter()
        .map(|f| match f {
            Frame::Bulk(b) => b.to_vec(),
            Frame::Integer(n) => n.to_string().into_bytes(),
            other => format!("{other:?}").into_bytes(),
        })
        .collect()
}

/// DEBUG is refused unless `enable-debug-command` allows it, with redis-server's text;
/// allowed, SLEEP and SET-ACTIVE-EXPIRE act as in redis-server.
#[test]
fn debug_is_guarded_and_its_subcommands_act_as_in_redis() {
    for server in both(&[]) {
        let mut c = Raw::connect(server.port);
        let reply = c.cmd(&[b"DEBUG", b"SLEEP", b"0"]);
        assert!(
            reply.starts_with(b"-ERR DEBUG command not allowed. If the enable-debug-command"),
            "{:?}: {}",
            server.kind,
            String::from_utf8_lossy(&reply)
        );
    }
    let mut replies = Vec::new();
    for server in both(&["--enable-debug-command", "yes"]) {
        let kind = server.kind;
        let mut c = Raw::connect(server.port);
        let start = std::time::Instant::now();
        assert_eq!(c.cmd(&[b"DEBUG", b"SLEEP", b"0.2"]), b"+OK\r\n");
        assert!(start.elapsed() >= Duration::from_millis(200), "{kind:?}");
        assert_eq!(c.cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]), b"+OK\r\n");
        for key in ["a", "b", "c", "d"] {
            c.cmd(&[b"SET", key.as_bytes(), b"v", b"PX", b"20"]);
        }
        std::thread::sleep(Duration::from_millis(300));
        // Expired but not actively deleted: still counted.
        assert_eq!(c.cmd(&[b"DBSIZE"]), b":4\r\n", "{kind:?}");
        assert_eq!(c.cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"]), b"+OK\r\n");
        let mut size = Vec::new();
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(100));
            size = c.cmd(&[b"DBSIZE"]);
            if size == b":0\r\n" {
                break;
            }
        }
        assert_eq!(size, b":0\r\n", "{kind:?}");
        replies.push(c.cmd(&[b"DEBUG", b"NOPE"]));
    }
    assert_eq!(replies[0], replies[1]);
}

/// The latency monitor: off by default (DOCTOR says so in redis-server's words), then an
/// event at least as slow as the threshold is a sample — LATEST, HISTORY, RESET as
/// redis-server answers them.
#[test]
fn the_latency_monitor_records_slow_events() {
    let mut doctor = Vec::new();
    for server in both(&["--enable-debug-command", "yes"]) {
        let kind = server.kind;
        let mut c = Raw::connect(server.port);
        doctor.push(c.cmd(&[b"LATENCY", b"DOCTOR"]));
        assert_eq!(c.cmd(&[b"LATENCY", b"LATEST"]), b"*0\r\n");
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"latency-monitor-threshold", b"50"]),
            b"+OK\r\n"
        );
        doctor.push(c.cmd(&[b"LATENCY", b"DOCTOR"]));
        assert_eq!(c.cmd(&[b"DEBUG", b"SLEEP", b"0.1"]), b"+OK\r\n");
        let latest = c.cmd(&[b"LATENCY", b"LATEST"]);
        let Ok(Some((Frame::Array(events), _))) = parse_reply(&latest) else {
            panic!("{kind:?}: {}", String::from_utf8_lossy(&latest));
        };
        assert_eq!(events.len(), 1, "{kind:?}");
        let Frame::Array(event) = &events[0] else {
            panic!("{kind:?}");
        };
        assert_eq!(event[0], Frame::Bulk(b"command"), "{kind:?}");
        let ms = |f: &Frame<'_>| match f {
            Frame::Integer(n) => *n,
            _ => -1,
        };
        assert!((100..1000).contains(&ms(&event[2])), "{kind:?} {event:?}");
        assert!(ms(&event[3]) >= ms(&event[2]), "{kind:?}");
        let history = items(&c.cmd(&[b"LATENCY", b"HISTORY", b"command"]));
        assert_eq!(history.len(), 1, "{kind:?}");
        assert_eq!(c.cmd(&[b"LATENCY", b"HISTORY", b"nosuch"]), b"*0\r\n");
        assert_eq!(
            c.cmd(&[b"LATENCY", b"RESET", b"nosuch", b"command"]),
            b":1\r\n"
        );
        assert_eq!(c.cmd(&[b"LATENCY", b"LATEST"]), b"*0\r\n");
        assert_eq!(c.cmd(&[b"LATENCY", b"RESET"]), b":0\r\n");
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"latency-monitor-threshold", b"-1"]),
            b"-ERR CONFIG SET failed (possibly related to argument 'latency-monitor-threshold') \
              - argument must be between 0 and 9223372036854775807 inclusive\r\n"
        );
    }
    // DOCTOR's texts when it has nothing to report, disabled and enabled.
    assert_eq!(doctor[0], doctor[2]);
    assert_eq!(doctor[1], doctor[3]);
}

/// MEMORY USAGE answers bytes for every type (more for a bigger value, nil for a missing
/// key) and checks SAMPLES as redis-server does; STATS counts the keys of every shard;
/// DOCTOR, PURGE and MALLOC-STATS answer.
#[test]
fn memory_usage_and_stats_answer() {
    let mut errors = Vec::new();
    for server in both(&[]) {
        let mut c = Raw::connect(server.port);
        for args in [
            &[&b"MEMORY"[..], b"USAGE", b"missing"][..],
            &[b"MEMORY", b"USAGE", b"k", b"SAMPLES"],
            &[b"MEMORY", b"USAGE", b"k", b"SAMPLES", b"x"],
            &[b"MEMORY", b"USAGE", b"k", b"SAMPLES", b"-1"],
            &[b"MEMORY", b"USAGE", b"k", b"foo", b"1"],
            &[b"MEMORY", b"PURGE"],
        ] {
            errors.push(c.cmd(args));
        }
    }
    let (g, r) = errors.split_at(errors.len() / 2);
    assert_eq!(g, r);

    let server = Server::goblin_threads(3);
    let mut c = Raw::connect(server.port);
    c.cmd(&[b"SET", b"small", b"v"]);
    c.cmd(&[b"SET", b"big", &[b'x'; 10_000]]);
    c.cmd(&[b"HSET", b"h", b"f", b"v", b"g", b"w"]);
    c.cmd(&[b"RPUSH", b"l", b"a", b"b"]);
    c.cmd(&[b"SADD", b"s", b"a", b"b"]);
    c.cmd(&[b"ZADD", b"z", b"1", b"a"]);
    let usage = |c: &mut Raw, key: &[u8]| -> i64 {
        let reply = c.cmd(&[b"MEMORY", b"USAGE", key, b"SAMPLES", b"0"]);
        String::from_utf8_lossy(&reply[1..reply.len() - 2])
            .parse()
            .unwrap_or(-1)
    };
    for key in [&b"small"[..], b"h", b"l", b"s", b"z"] {
        let n = usage(&mut c, key);
        assert!(
            (1..10_000).contains(&n),
            "{}: {n}",
            String::from_utf8_lossy(key)
        );
    }
    assert!(usage(&mut c, b"big") > 10_000);
    let stats = items(&c.cmd(&[b"MEMORY", b"STATS"]));
    // One whole reply, nothing after it: the next command's reply is its own.
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    assert!(
        stats.iter().any(|f| f == b"fragmentation.bytes"),
        "{stats:?}"
    );
    let field = |name: &str| {
        stats
            .iter()
            .position(|f| f == name.as_bytes())
            .and_then(|i| stats.get(i + 1))
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(field("keys.count").as_deref(), Some("6"));
    assert!(field("dataset.bytes").is_some_and(|b| b.parse::<u64>().is_ok_and(|n| n > 10_000)));
    assert!(c.cmd(&[b"MEMORY", b"DOCTOR"]).starts_with(b"$"));
    assert!(c.cmd(&[b"MEMORY", b"MALLOC-STATS"]).starts_with(b"$"));
}
