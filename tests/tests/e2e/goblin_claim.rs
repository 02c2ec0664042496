//! GOBLIN.CLAIM and GOBLIN.CAD end to end (issue 4): every row of both reply tables of
//! `shared/spec/goblin-commands.md`, byte for byte through the real binary, with the two
//! keys on one shard (hash tags) and on two shards in either order (the two branches of
//! the cross-shard lock protocol in `tx.rs`), in RESP2 and RESP3; the seconds rules; lazy
//! expiry of both keys; DELEX and DELIFEQ as spellings of compare-and-delete; and the
//! payment-webhook walk-through of the spec, crash and re-claim included.
//!
//! Key placement (`goblin_tests::claim::Layout`, shared with `goblin_claim_diff` and
//! `goblin_claim_race`) is computed with the CRC16 of `goblin_tests::keys`, checked here
//! against Redis Cluster's published vectors, rather than with the store's own
//! `key_slot`: a test that asks the code under test where a key lives cannot notice that
//! it lives elsewhere.

use std::thread;
use std::time::{Duration, Instant};

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::assert_bytes_eq;
use goblin_tests::claim::{CLAIMED, INVALID_EXPIRE, Layout, NOT_INTEGER, WRONGTYPE};
use goblin_tests::keys::{SLOTS, THREADS, crc16, shard_of, slot};
use goblin_tests::reply::{bulk, err, int, integer, nil};
use goblin_tests::{Raw, Server, show};

/// A connection that labels its failures with what it is testing.
struct Conn {
    raw: Raw,
    /// Whether HELLO 3 switched it to RESP3.
    resp3: bool,
    /// Thread count, layout, protocol: printed with every failed assertion.
    label: String,
}

impl Conn {
    /// A connection to `server`, in RESP3 when `resp3`.
    fn open(server: &Server, resp3: bool, label: String) -> Conn {
        let mut raw = server.raw();
        if resp3 {
            let hello = raw.cmd(&[b"HELLO", b"3"]);
            assert!(hello.starts_with(b"%"), "HELLO 3: {}", show(&hello));
        }
        Conn { raw, resp3, label }
    }

    /// Sends a command, returns the reply's bytes.
    fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(AsRef::as_ref).collect();
        self.raw.cmd(&args)
    }

    /// Sends a command and asserts its reply, byte for byte.
    fn expect<A: AsRef<[u8]>>(&mut self, args: &[A], want: &[u8]) {
        let got = self.cmd(args);
        assert_bytes_eq!(
            &got,
            want,
            "[{}] reply to {:?}",
            self.label,
            args.iter().map(|a| show(a.as_ref())).collect::<Vec<_>>()
        );
    }

    /// This connection's null reply.
    fn nil(&self) -> &'static [u8] {
        nil(self.resp3)
    }
}

/// One connection per (layout, protocol) on `server`, each with its own claim id.
fn cases(server: &Server, threads: usize, test: &str) -> Vec<(Conn, String, String)> {
    let mut out = Vec::new();
    for layout in Layout::ALL {
        for resp3 in [false, true] {
            let id = format!("{test}.{layout:?}.{}", if resp3 { 3 } else { 2 });
            let (claim, result) = layout.keys(&id, threads);
            let label = format!(
                "--threads {threads}, {layout:?} ({claim} / {result}), RESP{}",
                if resp3 { 3 } else { 2 }
            );
            out.push((Conn::open(server, resp3, label), claim, result));
        }
    }
    out
}

#[test]
fn crc16_and_slots_match_redis_cluster() {
    // The check value of CRC16-XMODEM, and slots from the Redis Cluster specification.
    assert_eq!(crc16(b"123456789"), 0x31C3);
    assert_eq!(slot(b"foo"), 12182);
    assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
    assert_eq!(
        slot(b"foo{}{bar}"),
        usize::from(crc16(b"foo{}{bar}")) % SLOTS
    );
    assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
    assert_eq!(shard_of(b"foo", 4), 2);
    for threads in THREADS {
        for layout in Layout::ALL {
            layout.keys("probe", threads);
        }
    }
}

/// Every row of GOBLIN.CLAIM's reply table that needs no clock, for one claim.
fn claim_rows(c: &mut Conn, claim: &str, result: &str) {
    let nil = c.nil();
    let claim_cmd = |token: &str, secs: &str| {
        vec![
            "GOBLIN.CLAIM".to_string(),
            claim.to_string(),
            result.to_string(),
            token.to_string(),
            secs.to_string(),
        ]
    };

    // claim_key absent: sets it to the token with the lease, replies CLAIMED.
    c.expect(&claim_cmd("worker-1", "30"), CLAIMED);
    c.expect(&["GET", claim], &bulk(b"worker-1"));
    let ms = integer(&c.cmd(&["PTTL", claim]));
    assert!(
        (25_000..=30_000).contains(&ms),
        "[{}] lease {ms} ms",
        c.label
    );

    // claim_key held, result_key absent: nil, and the claim is untouched.
    c.expect(&claim_cmd("worker-2", "30"), nil);
    c.expect(&["GET", claim], &bulk(b"worker-1"));

    // claim_key held, result_key a string: that value.
    c.expect(&["SET", result, "charged:txn_551"], b"+OK\r\n");
    c.expect(&claim_cmd("worker-2", "30"), &bulk(b"charged:txn_551"));
    c.expect(&["SET", result, ""], b"+OK\r\n");
    c.expect(&claim_cmd("worker-2", "30"), &bulk(b""));

    // `seconds` is validated first: invalid leases error although the claim is held.
    c.expect(&claim_cmd("worker-2", "abc"), &err(NOT_INTEGER));
    c.expect(&claim_cmd("worker-2", "1.5"), &err(NOT_INTEGER));
    c.expect(&claim_cmd("worker-2", "0"), &err(INVALID_EXPIRE));
    c.expect(&claim_cmd("worker-2", "-1"), &err(INVALID_EXPIRE));
    c.expect(&["GET", claim], &bulk(b"worker-1"));

    // claim_key held, result_key a hash or a sorted set: WRONGTYPE; nothing changes.
    c.expect(&["DEL", result], &int(1));
    c.expect(&["HSET", result, "f", "v"], &int(1));
    c.expect(&claim_cmd("worker-2", "30"), &err(WRONGTYPE));
    c.expect(&["HGET", result, "f"], &bulk(b"v"));
    c.expect(&["GET", claim], &bulk(b"worker-1"));
    c.expect(&["DEL", result], &int(1));
    c.expect(&["ZADD", result, "1", "m"], &int(1));
    c.expect(&claim_cmd("worker-2", "30"), &err(WRONGTYPE));
    c.expect(&["TYPE", result], b"+zset\r\n");
    c.expect(&["GET", claim], &bulk(b"worker-1"));

    // claim_key a hash: the claim fails without WRONGTYPE, and GET result_key answers.
    c.expect(&["DEL", claim, result], &int(2));
    c.expect(&["HSET", claim, "f", "v"], &int(1));
    c.expect(&claim_cmd("worker-2", "30"), nil);
    c.expect(&["SET", result, "done"], b"+OK\r\n");
    c.expect(&claim_cmd("worker-2", "30"), &bulk(b"done"));
    c.expect(&["DEL", result], &int(1));
    c.expect(&["ZADD", result, "1", "m"], &int(1));
    c.expect(&claim_cmd("worker-2", "30"), &err(WRONGTYPE));
    c.expect(&["TYPE", claim], b"+hash\r\n");
    c.expect(&["HGET", claim, "f"], &bulk(b"v"));
    c.expect(&["PTTL", claim], &int(-1));

    // claim_key a sorted set: likewise.
    c.expect(&["DEL", claim, result], &int(2));
    c.expect(&["ZADD", claim, "2", "m"], &int(1));
    c.expect(&claim_cmd("worker-2", "30"), nil);
    c.expect(&["SET", result, "done"], b"+OK\r\n");
    c.expect(&claim_cmd("worker-2", "30"), &bulk(b"done"));
    c.expect(&["TYPE", claim], b"+zset\r\n");

    // claim_key absent wins even when a result exists (the result is not read) …
    c.expect(&["DEL", claim], &int(1));
    c.expect(&claim_cmd("worker-3", "30"), CLAIMED);
    c.expect(&["GET", claim], &bulk(b"worker-3"));
    c.expect(&["GET", result], &bulk(b"done"));
    // … and when result_key holds another type (no WRONGTYPE: GET never runs).
    c.expect(&["DEL", claim, result], &int(2));
    c.expect(&["HSET", result, "f", "v"], &int(1));
    c.expect(&claim_cmd("worker-4", "30"), CLAIMED);
    c.expect(&["GET", claim], &bulk(b"worker-4"));
    c.expect(&["DEL", claim, result], &int(2));
}

#[test]
fn claim_reply_table_same_and_cross_shard() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for (mut c, claim, result) in cases(&server, threads, "table") {
            claim_rows(&mut c, &claim, &result);
        }
        // One key as both claim and result: a held claim replies its own token.
        let mut c = Conn::open(&server, false, format!("--threads {threads}, one key"));
        c.expect(&["GOBLIN.CLAIM", "self", "self", "tok", "30"], CLAIMED);
        c.expect(
            &["GOBLIN.CLAIM", "self", "self", "other", "30"],
            &bulk(b"tok"),
        );
        c.expect(&["PING"], b"+PONG\r\n");
    }
}

#[test]
fn claim_seconds_follow_redis_integer_and_expire_rules() {
    let invalid: &[(&str, &str)] = &[
        ("1.5", NOT_INTEGER),
        ("abc", NOT_INTEGER),
        ("+5", NOT_INTEGER),
        ("05", NOT_INTEGER),
        (" 5", NOT_INTEGER),
        ("5 ", NOT_INTEGER),
        ("", NOT_INTEGER),
        ("-0", NOT_INTEGER),
        ("1e3", NOT_INTEGER),
        ("0x10", NOT_INTEGER),
        ("5\0", NOT_INTEGER),
        ("9223372036854775808", NOT_INTEGER),
        ("99999999999999999999", NOT_INTEGER),
        ("-9223372036854775809", NOT_INTEGER),
        ("0", INVALID_EXPIRE),
        ("-1", INVALID_EXPIRE),
        ("-9223372036854775808", INVALID_EXPIRE),
        ("9223372036854775807", INVALID_EXPIRE),
        // Fits in i64 as seconds, overflows once in milliseconds plus now.
        ("9223372036854775", INVALID_EXPIRE),
    ];
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for (mut c, claim, result) in cases(&server, threads, "secs") {
            // Claim absent: the error, and no claim taken.
            for (secs, error) in invalid {
                c.expect(
                    &[
                        &b"GOBLIN.CLAIM"[..],
                        claim.as_bytes(),
                        result.as_bytes(),
                        b"t",
                        secs.as_bytes(),
                    ],
                    &err(error),
                );
                c.expect(&["EXISTS", &claim], &int(0));
            }
            // A lease that fits in milliseconds is accepted, however long.
            c.expect(
                &["GOBLIN.CLAIM", &claim, &result, "t", "9999999999999"],
                CLAIMED,
            );
            let ttl = c.cmd(&["TTL", &claim]);
            assert!(
                ttl.starts_with(b":99999999999"),
                "[{}] TTL {}",
                c.label,
                show(&ttl)
            );
            // Claim held: still the error, before anything else.
            c.expect(&["SET", &result, "v"], b"+OK\r\n");
            for (secs, error) in invalid {
                c.expect(
                    &[
                        &b"GOBLIN.CLAIM"[..],
                        claim.as_bytes(),
                        result.as_bytes(),
                        b"u",
                        secs.as_bytes(),
                    ],
                    &err(error),
                );
            }
            c.expect(&["GOBLIN.CLAIM", &claim, &result, "u", "1"], &bulk(b"v"));
            c.expect(&["GET", &claim], &bulk(b"t"));
            c.expect(&["PING"], b"+PONG\r\n");
        }
    }
}

#[test]
fn claim_token_is_stored_verbatim() {
    let tokens: [&[u8]; 5] = [
        b"worker-3",
        b"",
        b"nul\0in\0the\0middle",
        b"crlf\r\n$5\r\nfake\r\n",
        b"\xff\xfe binary \x00\x01\x7f",
    ];
    let big = vec![b'x'; 100_000];
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for (mut c, claim, result) in cases(&server, threads, "token") {
            for token in tokens.iter().copied().chain([&big[..]]) {
                c.expect(
                    &[
                        &b"GOBLIN.CLAIM"[..],
                        claim.as_bytes(),
                        result.as_bytes(),
                        token,
                        b"30",
                    ],
                    CLAIMED,
                );
                c.expect(&["GET", &claim], &bulk(token));
                // A held claim answers with GET result_key, binary values included.
                c.expect(&[&b"SET"[..], result.as_bytes(), token], b"+OK\r\n");
                c.expect(
                    &[
                        &b"GOBLIN.CLAIM"[..],
                        claim.as_bytes(),
                        result.as_bytes(),
                        b"x",
                        b"30",
                    ],
                    &bulk(token),
                );
                c.expect(&[&b"GOBLIN.CAD"[..], claim.as_bytes(), token], &int(1));
                c.expect(&["DEL", &result], &int(1));
            }
        }
    }
}

/// Sleeps until `at`.
fn sleep_until(at: Instant) {
    if let Some(rest) = at.checked_duration_since(Instant::now()) {
        thread::sleep(rest);
    }
}

/// Asserts that a step that must end before `limit` did: a machine too slow for the
/// margins fails loudly instead of passing on some other state.
fn before(limit: Instant, what: &str) {
    let now = Instant::now();
    assert!(
        now < limit,
        "timing: {what} ended {:?} too late for the test's margins",
        now - limit
    );
}

/// Each phase starts this long after the last expiry that it relies on could happen.
const MARGIN: Duration = Duration::from_millis(100);

#[test]
fn claim_and_result_expire_lazily() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        let mut all = cases(&server, threads, "expiry");
        let cad_key = |claim: &str| format!("{claim}.cad");
        let delex_key = |claim: &str| format!("{claim}.delex");

        // Phase 1: 1-second leases, and results (and compare-and-delete keys) with PX 400.
        let start = Instant::now();
        for (c, claim, result) in &mut all {
            c.expect(&["GOBLIN.CLAIM", claim, result, "w1", "1"], CLAIMED);
            c.expect(&["SET", result, "r1", "PX", "400"], b"+OK\r\n");
            c.expect(&["GOBLIN.CLAIM", claim, result, "w2", "1"], &bulk(b"r1"));
            c.expect(&["SET", &cad_key(claim), "v", "PX", "400"], b"+OK\r\n");
            c.expect(&["SET", &delex_key(claim), "v", "PX", "400"], b"+OK\r\n");
        }
        let phase1 = Instant::now();
        // No lease ends before `start + 1 s`.
        let leases_held_until = start + Duration::from_millis(1000);

        // Phase 2, every PX 400 gone, every lease still held: a held claim whose result
        // expired replies nil; expired keys compare as absent.
        sleep_until(phase1 + Duration::from_millis(400) + MARGIN);
        for (c, claim, result) in &mut all {
            let nil = c.nil();
            c.expect(&["GOBLIN.CLAIM", claim, result, "w2", "1"], nil);
            c.expect(&["EXISTS", result], &int(0));
            c.expect(&["GOBLIN.CAD", &cad_key(claim), "v"], &int(0));
            c.expect(&["DELEX", &delex_key(claim), "IFNE", "x"], &int(0));
            c.expect(&["GET", claim], &bulk(b"w1"));
            // A result with a PEXPIRE.
            c.expect(&["SET", result, "r2"], b"+OK\r\n");
            c.expect(&["PEXPIRE", result, "300"], &int(1));
        }
        let phase2 = Instant::now();
        before(leases_held_until, "the checks of held leases");

        // Phase 3, every lease elapsed, every PEXPIREd result gone: the claims are free.
        sleep_until(
            (phase1 + Duration::from_millis(1000)).max(phase2 + Duration::from_millis(300))
                + MARGIN,
        );
        for (c, claim, result) in &mut all {
            let nil = c.nil();
            c.expect(&["GET", result], nil);
            c.expect(&["GOBLIN.CLAIM", claim, result, "w3", "30"], CLAIMED);
            c.expect(&["GET", claim], &bulk(b"w3"));
            // The lease is 30 s now; EXPIRE shortens it to 1 s.
            c.expect(&["EXPIRE", claim, "1"], &int(1));
            c.expect(&["SET", result, "r3", "EX", "100"], b"+OK\r\n");
        }
        let phase3 = Instant::now();

        // Phase 4, every EXPIREd claim gone: free again; the result is served.
        sleep_until(phase3 + Duration::from_millis(1000) + MARGIN);
        for (c, claim, result) in &mut all {
            c.expect(&["GOBLIN.CLAIM", claim, result, "w4", "30"], CLAIMED);
            c.expect(&["GOBLIN.CLAIM", claim, result, "w5", "30"], &bulk(b"r3"));
            c.expect(&["GET", claim], &bulk(b"w4"));
        }
    }
}

#[test]
fn arity_errors_and_case_insensitive_names() {
    let claim_arity = err("ERR wrong number of arguments for 'goblin.claim' command");
    let cad_arity = err("ERR wrong number of arguments for 'goblin.cad' command");
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for resp3 in [false, true] {
            let mut c = Conn::open(
                &server,
                resp3,
                format!("--threads {threads}, RESP3 {resp3}"),
            );
            for name in ["GOBLIN.CLAIM", "goblin.claim", "Goblin.Claim"] {
                c.expect(&[name], &claim_arity);
                c.expect(&[name, "c"], &claim_arity);
                c.expect(&[name, "c", "r"], &claim_arity);
                c.expect(&[name, "c", "r", "t"], &claim_arity);
                // Options follow `seconds` (BLOCK ms): anything else is a syntax error.
                c.expect(
                    &[name, "c", "r", "t", "30", "extra"],
                    &err("ERR syntax error"),
                );
                c.expect(&["EXISTS", "c"], &int(0));
            }
            for name in ["GOBLIN.CAD", "goblin.cad", "Goblin.Cad"] {
                c.expect(&[name], &cad_arity);
                c.expect(&[name, "k"], &cad_arity);
                c.expect(&[name, "k", "v", "extra"], &cad_arity);
            }
            let delifeq = err("ERR wrong number of arguments for 'delifeq' command");
            c.expect(&["DELIFEQ", "k"], &delifeq);
            c.expect(&["delifeq", "k", "v", "w"], &delifeq);
            c.expect(
                &["DELEX"],
                &err("ERR wrong number of arguments for 'delex' command"),
            );

            // The names in any case run the command.
            let nil = c.nil();
            let (claim, result) = Layout::CrossDown.keys(&format!("case{resp3}"), threads);
            c.expect(&["goblin.claim", &claim, &result, "a", "30"], CLAIMED);
            c.expect(&["Goblin.Claim", &claim, &result, "b", "30"], nil);
            c.expect(
                &["gOBLIN.cLAIM", &claim, &result, "b", "x"],
                &err(NOT_INTEGER),
            );
            c.expect(&["goblin.cad", &claim, "b"], &int(0));
            c.expect(&["Goblin.Cad", &claim, "a"], &int(1));
            c.expect(&["EXISTS", &claim], &int(0));
            // Errors leave the connection open.
            c.expect(&["PING"], b"+PONG\r\n");
        }
    }
}

/// The spellings of compare-and-delete, as argument lists around key and value.
const CAD_SPELLINGS: [&str; 4] = ["GOBLIN.CAD", "DELIFEQ", "DELEX IFEQ", "delex ifeq"];

fn cad_cmd(spelling: &str, key: &[u8], value: &[u8]) -> Vec<Vec<u8>> {
    let mut words = spelling.split(' ');
    let mut out = vec![words.next().unwrap().as_bytes().to_vec(), key.to_vec()];
    out.extend(words.map(|w| w.as_bytes().to_vec()));
    out.push(value.to_vec());
    out
}

#[test]
fn cad_reply_table_and_its_spellings() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for resp3 in [false, true] {
            // A key on every shard.
            for shard in 0..threads {
                let key = (0..)
                    .map(|n| format!("lock:{resp3}.{n}"))
                    .find(|k| shard_of(k.as_bytes(), threads) == shard)
                    .unwrap();
                let key = key.as_bytes();
                let label = format!(
                    "--threads {threads}, shard {shard} ({}), RESP3 {resp3}",
                    show(key)
                );
                let mut c = Conn::open(&server, resp3, String::new());
                for spelling in CAD_SPELLINGS {
                    c.label = format!("{label}, {spelling}");
                    let cad = |v: &[u8]| cad_cmd(spelling, key, v);
                    // Equal string: deleted, 1.
                    c.expect(&[&b"SET"[..], key, b"tok-1"], b"+OK\r\n");
                    c.expect(&cad(b"tok-1"), &int(1));
                    c.expect(&[&b"EXISTS"[..], key], &int(0));
                    // Absent: 0.
                    c.expect(&cad(b"tok-1"), &int(0));
                    // Another string (prefix, case, trailing NUL, empty): 0, kept.
                    c.expect(&[&b"SET"[..], key, b"tok-1"], b"+OK\r\n");
                    for other in [&b"tok-2"[..], b"tok-", b"TOK-1", b"tok-1\0", b"tok-1 ", b""] {
                        c.expect(&cad(other), &int(0));
                    }
                    c.expect(&[&b"GET"[..], key], &bulk(b"tok-1"));
                    // Binary values compare byte for byte; the TTL does not matter.
                    let binary = b"a\0b\r\nc\xff";
                    c.expect(&[&b"SET"[..], key, binary, b"EX", b"100"], b"+OK\r\n");
                    c.expect(&cad(b"a\0b\r\nc"), &int(0));
                    c.expect(&cad(binary), &int(1));
                    c.expect(&[&b"SET"[..], key, b""], b"+OK\r\n");
                    c.expect(&cad(b"x"), &int(0));
                    c.expect(&cad(b""), &int(1));
                    // A hash or a sorted set: WRONGTYPE, kept.
                    c.expect(&[&b"HSET"[..], key, b"f", b"tok-1"], &int(1));
                    c.expect(&cad(b"tok-1"), &err(WRONGTYPE));
                    c.expect(&[&b"TYPE"[..], key], b"+hash\r\n");
                    c.expect(&[&b"DEL"[..], key], &int(1));
                    c.expect(&[&b"ZADD"[..], key, b"1", b"tok-1"], &int(1));
                    c.expect(&cad(b"tok-1"), &err(WRONGTYPE));
                    c.expect(&[&b"TYPE"[..], key], b"+zset\r\n");
                    c.expect(&[&b"DEL"[..], key], &int(1));
                }
                c.expect(&["PING"], b"+PONG\r\n");
            }
        }
    }
}

#[test]
fn delex_ifne_bare_and_bad_conditions() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for resp3 in [false, true] {
            let mut c = Conn::open(
                &server,
                resp3,
                format!("--threads {threads}, RESP3 {resp3}"),
            );
            for key in ["k1", "k2", "k3", "k4", "{k1}x"] {
                // IFNE: deletes unless equal.
                c.expect(&["SET", key, "v"], b"+OK\r\n");
                c.expect(&["DELEX", key, "IFNE", "v"], &int(0));
                c.expect(&["GET", key], &bulk(b"v"));
                c.expect(&["DELEX", key, "ifne", "w"], &int(1));
                c.expect(&["EXISTS", key], &int(0));
                c.expect(&["DELEX", key, "IFNE", "w"], &int(0));
                c.expect(&["HSET", key, "f", "v"], &int(1));
                c.expect(&["DELEX", key, "IFNE", "w"], &err(WRONGTYPE));
                c.expect(&["DELEX", key, "IFEQ", "v"], &err(WRONGTYPE));
                // Bare: DEL of one key, of any type.
                c.expect(&["DELEX", key], &int(1));
                c.expect(&["DELEX", key], &int(0));
                c.expect(&["ZADD", key, "1", "m"], &int(1));
                c.expect(&["delex", key], &int(1));
                c.expect(&["SET", key, "v"], b"+OK\r\n");
                c.expect(&["DELEX", key], &int(1));
                // Anything else is a syntax error that touches nothing.
                c.expect(&["SET", key, "v"], b"+OK\r\n");
                for bad in [
                    &["DELEX", key, "IFEQ"][..],
                    &["DELEX", key, "IFEQ", "v", "extra"],
                    &["DELEX", key, "IFDEQ", "0123456789abcdef"],
                    &["DELEX", key, "IFDNE", "0123456789abcdef"],
                    &["DELEX", key, "NOPE", "v"],
                    &["DELEX", key, "v"],
                ] {
                    c.expect(bad, &err("ERR syntax error"));
                }
                c.expect(&["GET", key], &bulk(b"v"));
                c.expect(&["DEL", key], &int(1));
            }
        }
    }
}

#[test]
fn claim_inside_multi_exec() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for (mut c, claim, result) in cases(&server, threads, "multi") {
            let nil = c.nil().to_vec();
            c.expect(&["MULTI"], b"+OK\r\n");
            c.expect(
                &["GOBLIN.CLAIM", &claim, &result, "a", "30"],
                b"+QUEUED\r\n",
            );
            c.expect(
                &["GOBLIN.CLAIM", &claim, &result, "b", "30"],
                b"+QUEUED\r\n",
            );
            c.expect(&["SET", &result, "done"], b"+QUEUED\r\n");
            c.expect(
                &["GOBLIN.CLAIM", &claim, &result, "c", "30"],
                b"+QUEUED\r\n",
            );
            c.expect(&["GOBLIN.CLAIM", &claim, &result, "c", "0"], b"+QUEUED\r\n");
            c.expect(&["GOBLIN.CAD", &claim, "a"], b"+QUEUED\r\n");
            c.expect(
                &["GOBLIN.CLAIM", &claim, &result, "d", "30"],
                b"+QUEUED\r\n",
            );
            let mut want = b"*7\r\n".to_vec();
            for part in [
                CLAIMED,
                &nil,
                b"+OK\r\n",
                &bulk(b"done"),
                &err(INVALID_EXPIRE),
                &int(1),
                CLAIMED,
            ] {
                want.extend_from_slice(part);
            }
            c.expect(&["EXEC"], &want);
            c.expect(&["GET", &claim], &bulk(b"d"));
        }
    }
}

/// The integers of a flat array of integers and strings in a COMMAND INFO entry.
fn info_numbers(reply: &[u8]) -> (String, Vec<i64>) {
    let Ok(Some((Frame::Array(outer), _))) = parse_reply(reply) else {
        panic!("COMMAND INFO: {}", show(reply));
    };
    let Some(Frame::Array(entry)) = outer.into_iter().next() else {
        panic!("COMMAND INFO entry: {}", show(reply));
    };
    let name = match &entry[0] {
        Frame::Bulk(n) | Frame::Simple(n) => String::from_utf8_lossy(n).into_owned(),
        other => panic!("name {other:?}"),
    };
    let numbers = entry
        .iter()
        .filter_map(|f| match f {
            Frame::Integer(n) => Some(*n),
            _ => None,
        })
        .collect();
    (name, numbers)
}

#[test]
fn command_info_gives_arity_and_key_positions() {
    let server = Server::goblin_threads(4);
    let mut c = Conn::open(&server, false, "COMMAND INFO".into());
    for (name, want) in [
        ("goblin.claim", vec![-5, 1, 2, 1]),
        ("goblin.publish", vec![6, 1, 2, 1]),
        ("goblin.renew", vec![4, 1, 1, 1]),
        ("goblin.status", vec![3, 1, 2, 1]),
        ("goblin.cad", vec![3, 1, 1, 1]),
        ("delifeq", vec![3, 1, 1, 1]),
        ("delex", vec![-2, 1, 1, 1]),
    ] {
        let reply = c.cmd(&["COMMAND", "INFO", &name.to_uppercase()]);
        let (got_name, numbers) = info_numbers(&reply);
        assert_eq!(got_name, name, "{}", show(&reply));
        assert_eq!(&numbers[..4], &want[..], "{name}: {}", show(&reply));
    }
    // INFO commandstats counts the calls, cross-shard ones included.
    let (claim, result) = Layout::CrossUp.keys("stats", 4);
    c.expect(&["GOBLIN.CLAIM", &claim, &result, "t", "30"], CLAIMED);
    c.expect(&["goblin.claim", &claim, &result, "t", "30"], nil(false));
    c.expect(&["GOBLIN.CAD", &claim, "t"], &int(1));
    let info = String::from_utf8_lossy(&c.cmd(&["INFO", "commandstats"])).into_owned();
    for (name, calls) in [("goblin.claim", 2), ("goblin.cad", 1)] {
        let prefix = format!("cmdstat_{name}:calls={calls},");
        assert!(
            info.lines().any(|l| l.starts_with(&prefix)),
            "INFO commandstats has no {prefix}: {info}"
        );
    }
}

/// The contract's worked example, run by separate workers (connections, so threads).
fn webhook(server: &Server, threads: usize, layout: Layout, resp3: bool) {
    let label = |who: &str| format!("--threads {threads}, {layout:?}, RESP3 {resp3}: {who}");
    let mut worker3 = Conn::open(server, resp3, label("worker-3"));
    let mut worker9 = Conn::open(server, resp3, label("worker-9"));
    let nil = worker9.nil();

    // evt88: worker-3 wins, a duplicate in flight gets nil, the outcome is replayed.
    let (claim, result) = layout.keys(&format!("evt88.{resp3}"), threads);
    worker3.expect(
        &["GOBLIN.CLAIM", &claim, &result, "worker-3", "30"],
        CLAIMED,
    );
    worker9.expect(&["GOBLIN.CLAIM", &claim, &result, "worker-9", "30"], nil);
    worker3.expect(
        &["SET", &result, "charged:txn_551", "EX", "86400"],
        b"+OK\r\n",
    );
    worker9.expect(
        &["GOBLIN.CLAIM", &claim, &result, "worker-9", "30"],
        &bulk(b"charged:txn_551"),
    );
    worker9.expect(&["GET", &claim], &bulk(b"worker-3"));
}

/// The crash half of the walk-through: a 1-second lease whose holder never publishes.
/// Returns the later caller's connection and the keys.
fn webhook_crash(
    server: &Server,
    threads: usize,
    layout: Layout,
    resp3: bool,
) -> (Conn, String, String) {
    let label = |who: &str| format!("--threads {threads}, {layout:?}, RESP3 {resp3}: {who}");
    let (claim, result) = layout.keys(&format!("evt89.{resp3}"), threads);
    let mut worker3 = Conn::open(server, resp3, label("worker-3 (crashes)"));
    let mut worker9 = Conn::open(server, resp3, label("worker-9"));
    let claimed = Instant::now();
    worker3.expect(&["GOBLIN.CLAIM", &claim, &result, "worker-3", "1"], CLAIMED);
    // worker-3 crashes: its connection closes, nothing is published. The duplicate
    // delivery, still inside the lease, is told the work is in flight.
    drop(worker3);
    let nil = worker9.nil();
    worker9.expect(&["GOBLIN.CLAIM", &claim, &result, "worker-9", "1"], nil);
    worker9.expect(&["GOBLIN.CLAIM", &claim, &result, "worker-9", "30"], nil);
    before(
        claimed + Duration::from_millis(1000),
        "the in-flight duplicates",
    );
    (worker9, claim, result)
}

#[test]
fn payment_webhook_walkthrough_with_crash_and_reclaim() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        let mut waiting = Vec::new();
        for layout in Layout::ALL {
            for resp3 in [false, true] {
                webhook(&server, threads, layout, resp3);
                waiting.push(webhook_crash(&server, threads, layout, resp3));
            }
        }
        // Every 1-second lease was taken before now.
        sleep_until(Instant::now() + Duration::from_millis(1000) + MARGIN);
        for (worker9, claim, result) in &mut waiting {
            // After the lease, a later caller re-claims, does the work and publishes.
            worker9.expect(&["GOBLIN.CLAIM", claim, result, "worker-9", "30"], CLAIMED);
            worker9.expect(&["GET", claim], &bulk(b"worker-9"));
            worker9.expect(
                &["SET", result, "charged:txn_552", "EX", "86400"],
                b"+OK\r\n",
            );
            worker9.expect(
                &["GOBLIN.CLAIM", claim, result, "worker-12", "30"],
                &bulk(b"charged:txn_552"),
            );
        }
    }
}
