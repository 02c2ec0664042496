//! Every command of the table, with random arguments, sent to a live server for
//! `GOBLIN_RANDOM_SECS` seconds (default 60) from four connections: the server stays up,
//! answers PING all along, answers every command with one reply, and its memory stays
//! bounded. (The dispatch fuzz target, `fuzz/`, drives the same table in-process.)

use std::time::{Duration, Instant};

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::rng::{Rng, seed};
use goblin_tests::{Raw, Server, encode, show};

/// The run's length: `GOBLIN_RANDOM_SECS`, else 60 seconds.
fn duration() -> Duration {
    let secs = std::env::var("GOBLIN_RANDOM_SECS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(60.0);
    Duration::from_secs_f64(secs)
}

/// Commands left out: they stop the server, close or reconfigure everyone's access, or
/// are about replication.
const LEFT_OUT: &[&str] = &[
    "shutdown",
    "debug",
    "quit",
    "config|set",
    "client|kill",
    "client|pause",
    "client|reply",
    "monitor",
    // (Un)subscribing answers once per channel, and a subscriber gets messages: not one
    // reply per command (tests/tests/e2e/pubsub.rs covers them).
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "failover",
];

/// A command of the table: its name (`container|sub` for a subcommand), arity, and
/// whether it may block.
#[derive(Debug, Clone)]
struct Command {
    words: Vec<Vec<u8>>,
    arity: i64,
    blocking: bool,
}

/// The commands COMMAND lists, subcommands included.
fn commands(raw: &mut Raw) -> Vec<Command> {
    let reply = raw.cmd(&[b"COMMAND"]);
    let Ok(Some((Frame::Array(all), _))) = parse_reply(&reply) else {
        panic!("COMMAND: {}", show(&reply));
    };
    let mut out = Vec::new();
    let add = |entry: &Frame<'_>, out: &mut Vec<Command>| {
        let Frame::Array(items) = entry else { return };
        let (Some(Frame::Bulk(name)), Some(Frame::Integer(arity)), Some(flags)) =
            (items.first(), items.get(1), items.get(2))
        else {
            return;
        };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if LEFT_OUT.contains(&name.as_str()) {
            return;
        }
        let blocking = matches!(flags, Frame::Array(f) | Frame::Set(f)
            if f.iter().any(|x| matches!(x, Frame::Simple(b"blocking") | Frame::Bulk(b"blocking"))))
            || name == "goblin.claim"
            // (WAIT blocks for its timeout, in milliseconds, when replicas are asked for.)
            || name == "wait";
        out.push(Command {
            words: name.split('|').map(|w| w.as_bytes().to_vec()).collect(),
            arity: *arity,
            blocking,
        });
    };
    for entry in &all {
        let Frame::Array(items) = entry else { continue };
        match items.get(9) {
            Some(Frame::Array(subs)) if !subs.is_empty() => {
                for sub in subs {
                    add(sub, &mut out);
                }
            }
            _ => add(entry, &mut out),
        }
    }
    out
}

const WORDS: &[&str] = &[
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "KEEPTTL",
    "GET",
    "PERSIST",
    "WITHSCORES",
    "LIMIT",
    "BYSCORE",
    "BYLEX",
    "REV",
    "COUNT",
    "MATCH",
    "TYPE",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "MIN",
    "MAX",
    "STORE",
    "AGGREGATE",
    "SUM",
    "WEIGHTS",
    "BLOCK",
    "RANK",
    "MAXLEN",
    "ASYNC",
    "SYNC",
    "REPLACE",
    "DB",
    "IDLETIME",
    "FREQ",
    "ENCODING",
    "WITHVALUES",
    "FIELDS",
    "SCHEDULE",
    "NOSAVE",
    "ID",
    "ADDR",
    "string",
    "hash",
    "list",
    "zset",
    "set",
    "*",
    "k*",
    "+inf",
    "-inf",
    "(1",
    "[a",
    "-",
    "+",
    "",
];

fn number(rng: &mut Rng, blocking: bool) -> String {
    if blocking {
        // (Seconds for the blocking pops, milliseconds for GOBLIN.CLAIM BLOCK: short
        // either way.)
        return ["0.05", "0.01", "5", "x", "-1"][rng.below(5)].to_string();
    }
    match rng.below(8) {
        0 => "-1".into(),
        1 => "0".into(),
        2 => [
            "9223372036854775807",
            "-9223372036854775808",
            // (Past 2^32: not 2^31, a SETBIT offset that makes a 256 MB string, which
            // a debug build takes longer to SAVE than a reply may take.)
            "4294967296",
            "1e400",
        ][rng.below(4)]
        .into(),
        3 => format!("{}.{}", rng.below(100), rng.below(100)),
        _ => rng.below(20).to_string(),
    }
}

fn argument(rng: &mut Rng, blocking: bool) -> Vec<u8> {
    match rng.below(10) {
        0..=3 => {
            let keys = [
                "k0", "k1", "k2", "k3", "{t}a", "{t}b", "{t}c", "q", "z", "h",
            ];
            keys[rng.below(keys.len())].as_bytes().to_vec()
        }
        4..=5 => number(rng, blocking).into_bytes(),
        6..=7 => WORDS[rng.below(WORDS.len())].as_bytes().to_vec(),
        8 => (0..rng.below(20))
            .map(|_| b'a' + rng.below(26) as u8)
            .collect(),
        _ => (0..rng.below(8)).map(|_| rng.below(256) as u8).collect(),
    }
}

fn invocation(rng: &mut Rng, cmd: &Command) -> Vec<Vec<u8>> {
    let mut argv = cmd.words.clone();
    let total = if cmd.arity >= 0 {
        // Usually right, sometimes one off.
        match rng.below(10) {
            0 => (cmd.arity as usize).saturating_sub(1),
            1 => cmd.arity as usize + 1,
            _ => cmd.arity as usize,
        }
    } else {
        cmd.arity.unsigned_abs() as usize + rng.below(5)
    };
    while argv.len() < total {
        argv.push(argument(rng, cmd.blocking));
    }
    if cmd.blocking {
        // A timeout of 0 (or a huge one) would block for good: any number an argument
        // of a blocking command happens to be is made short.
        for arg in argv.iter_mut().skip(cmd.words.len()) {
            let n = std::str::from_utf8(arg)
                .ok()
                .and_then(|s| s.parse::<f64>().ok());
            if n.is_some_and(|n| n <= 0.0 || n > 5.0) {
                *arg = b"0.05".to_vec();
            }
        }
    }
    argv
}

fn used_memory(raw: &mut Raw) -> u64 {
    let info = String::from_utf8_lossy(&raw.cmd_str("INFO memory")).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO memory: {info}"))
}

#[test]
fn random_commands_for_a_minute_leave_the_server_up_and_bounded() {
    let mut server = Server::goblin_threads(3);
    let mut probe = server.raw();
    let table = commands(&mut probe);
    assert!(table.len() > 150, "{} commands", table.len());
    let deadline = Instant::now() + duration();
    let base = seed("random_commands_for_a_minute_leave_the_server_up_and_bounded");
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let table = table.clone();
            let port = server.port;
            std::thread::spawn(move || {
                let mut rng = Rng::new(base ^ (w + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let connect = || Raw::try_connect(port).expect("connect");
                let mut raw = connect();
                let mut sent = 0u64;
                // The commands sent before, for the message when one is not answered (a
                // command answering nothing shows as the next one's missing reply).
                let mut before: std::collections::VecDeque<String> = Default::default();
                while Instant::now() < deadline {
                    let cmd = &table[rng.below(table.len())];
                    let argv = invocation(&mut rng, cmd);
                    let words: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                    raw.send(&encode(&words));
                    sent += 1;
                    before.push_back(format!(
                        "{:?}",
                        argv.iter()
                            .map(|a| String::from_utf8_lossy(a).into_owned())
                            .collect::<Vec<_>>()
                    ));
                    if before.len() > 4 {
                        before.pop_front();
                    }
                    match raw.try_reply() {
                        Ok(_) => {}
                        // A command that closes the connection (RESET does not; CLIENT
                        // KILL is left out): connect again.
                        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                            raw = connect();
                        }
                        Err(e) => {
                            // What the server says the connection is doing (its last
                            // command, whether it is blocked).
                            let clients = Raw::try_connect(port)
                                .map(|mut c| {
                                    String::from_utf8_lossy(&c.cmd_str("CLIENT LIST")).into_owned()
                                })
                                .unwrap_or_default();
                            panic!(
                                "no reply to the last of {before:?}: {e}; CLIENT LIST: {clients}"
                            )
                        }
                    }
                }
                sent
            })
        })
        .collect();
    let mut peak = 0;
    while Instant::now() < deadline {
        assert_eq!(probe.cmd_str("PING"), b"+PONG\r\n", "PING during the run");
        peak = peak.max(used_memory(&mut probe));
        std::thread::sleep(Duration::from_millis(500));
    }
    let sent: u64 = workers
        .into_iter()
        .map(|w| {
            // A sender's panic names the command not answered: said again here, where
            // the test fails (the sender's own message may be far above in the output).
            w.join().unwrap_or_else(|e| {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("a sender failed: {why}")
            })
        })
        .sum();
    assert!(server.is_running(), "the server exited");
    let mut after = server.raw();
    assert_eq!(after.cmd_str("PING"), b"+PONG\r\n");
    let used = used_memory(&mut after);
    eprintln!("random commands: {sent} sent, memory peak {peak} bytes, {used} at the end");
    assert!(sent > 1000, "only {sent} commands sent");
    assert!(peak < 1 << 30, "memory in use reached {peak} bytes");
}
