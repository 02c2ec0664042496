//! Drives command dispatch — the command table, argument parsing and every family's
//! handlers and cross-shard plans — with arbitrary commands against in-process shards
//! (`goblin_server::testkit::Loopback`, three shards, as the unit tests use them, emptied
//! before each input).
//!
//! Input layout: lines (`\n`) are commands, words (` `) their arguments. A first word
//! of one byte below 0x80 names a command of the table by index (so that most inputs
//! reach a handler); any other first word is sent as the name. The fuzzer's dictionary
//! (`fuzz/dicts/commands.dict`) holds every command name and option keyword.
//!
//! Asserts that nothing panics, and that every command answers exactly one well-formed
//! reply (none for the commands Redis answers nothing: CLIENT REPLY OFF|SKIP, a second
//! MONITOR).
#![no_main]

use std::cell::RefCell;
use std::sync::OnceLock;

use goblin_server::testkit::Loopback;
use libfuzzer_sys::fuzz_target;

/// The names of the table's top-level commands, in table order.
fn names() -> &'static Vec<Vec<u8>> {
    static NAMES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let lb = Loopback::new(1);
        lb.shared
            .commands
            .top_level()
            .map(|s| s.name.as_bytes().to_vec())
            .collect()
    })
}

thread_local! {
    /// Three shards, emptied before each input.
    static SHARDS: RefCell<Loopback> = RefCell::new(Loopback::new(3));
}

fuzz_target!(|data: &[u8]| SHARDS.with_borrow_mut(|lb| run(lb, data)));

fn run(lb: &mut Loopback, data: &[u8]) {
    let names = names();
    lb.reset();
    let mut client = lb.client();
    for line in data.split(|&b| b == b'\n').take(64) {
        let mut argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if argv.len() > 64 {
            argv.truncate(64);
        }
        if let Some(first) = argv.first_mut()
            && let [b] = first
            && *b < 0x80
        {
            *first = &names[usize::from(*b) % names.len()];
        }
        let reply = lb.run_any(&mut client, &argv);
        // Redis's commands that answer nothing: CLIENT REPLY OFF and SKIP, a second
        // MONITOR.
        let silent = |name: &[u8]| argv.first().is_some_and(|a| a.eq_ignore_ascii_case(name));
        if reply.is_empty()
            && (silent(b"monitor")
                || (silent(b"client")
                    && argv
                        .get(1)
                        .is_some_and(|a| a.eq_ignore_ascii_case(b"reply"))))
        {
            continue;
        }
        // (Un)subscribing answers once per channel; anything else once.
        let per_channel = argv.first().is_some_and(|a| {
            let a = a.to_ascii_lowercase();
            a.ends_with(b"subscribe") && a.len() <= b"sunsubscribe".len()
        });
        let mut at = 0;
        let mut replies = 0;
        while at < reply.len() {
            match goblin_protocol::reply_len(&reply[at..]) {
                Ok(Some((n, _))) => at += n,
                other => panic!("{argv:?}: a malformed reply {other:?}: {reply:?}"),
            }
            replies += 1;
        }
        if per_channel {
            assert!(replies >= 1, "{argv:?}: no reply");
        } else {
            assert_eq!(replies, 1, "{argv:?}: one reply: {reply:?}");
        }
    }
}
