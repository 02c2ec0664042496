//! The stream commands differentially against redis-server 7.0, with `--threads 1` and 4,
//! in RESP2 and RESP3: XADD (NOMKSTREAM, MAXLEN and MINID with `=` and `~`, LIMIT,
//! explicit, partial `ms-*` and `*` IDs, every ID error), XLEN, XRANGE and XREVRANGE
//! (exclusive and incomplete bounds, COUNT), XDEL, XTRIM, XREAD, XGROUP (CREATE, SETID,
//! DESTROY, CREATECONSUMER, DELCONSUMER, HELP), XREADGROUP, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM, XINFO (STREAM, FULL, GROUPS with entries-read and lag, CONSUMERS, HELP)
//! and XSETID, each with its errors in Redis's order of checks; approximate trimming
//! over streams of many listpack nodes (more than `stream-node-max-entries`, and entries
//! big enough to fill `stream-node-max-bytes`); TYPE, OBJECT ENCODING, WRONGTYPE both
//! ways, DEL, EXISTS, RENAME, COPY and SCAN TYPE; the commands inside MULTI/EXEC; the
//! multi-key commands with their keys in one slot, on one shard and on different shards.
//! Then seeded random streams whose node boundaries depend on listpack sizes (integer and
//! string encodings, master fields, ID deltas), and seeded random sequences of group
//! traffic over three streams, compared reply by reply.
//!
//! Replies that depend on the clock are never compared byte for byte: IDs come from
//! explicit IDs (or `*` on a stream whose last ID is in the future, which Redis derives
//! from that ID), and [`goblin_tests::streams`] masks idle times, seen and delivery times
//! (compared within a tolerance instead) and XINFO's `radix-tree-nodes` (internal to
//! Redis's radix tree). `radix-tree-keys`, the number of listpack nodes, is compared.
//! The one test of `*` against the clock compares the milliseconds within a tolerance.
//!
//! `GOBLIN_STREAMS_SELF_CHECK=1` runs every script against two redis-servers instead of
//! goblin and redis: it checks the scripts themselves (nothing clock-dependent left
//! unmasked); `GOBLIN_STREAMS_TRANSCRIPT=1` prints every command with redis's reply;
//! `GOBLIN_STREAMS_KEEP_GOING=1` lists every difference of a test before failing.
//! Replay a failing random sequence with `GOBLIN_DIFF_SEED=<seed>` (printed).

use std::collections::BTreeSet;

use goblin_tests::cmd::{
    Cmd, brief_cmd, cmd, pipeline, scan_all, script_commands, script_lines, substitute, words,
};
use goblin_tests::diff::{How, PIPELINE_CHUNK, compare};
use goblin_tests::keys::{LAYOUTS, Layout, THREADS};
use goblin_tests::rng::{Rng, seeds};
use goblin_tests::streams::verdict;
use goblin_tests::{Differential, Server, show};

/// Whether `GOBLIN_STREAMS_SELF_CHECK` asks for redis-server on both sides.
fn self_check() -> bool {
    std::env::var_os("GOBLIN_STREAMS_SELF_CHECK").is_some()
}

/// Whether `GOBLIN_STREAMS_KEEP_GOING` asks a test to go on after a difference (each is
/// printed; the test fails at its end): to see every difference at once.
fn keep_going() -> bool {
    std::env::var_os("GOBLIN_STREAMS_KEEP_GOING").is_some()
}

/// Whether `GOBLIN_STREAMS_TRANSCRIPT` asks for every command and redis's reply on
/// stderr (to read what a script does).
fn transcript() -> bool {
    std::env::var_os("GOBLIN_STREAMS_TRANSCRIPT").is_some()
}

/// goblin-server with `--threads threads` beside redis-server (or two redis-servers
/// under `GOBLIN_STREAMS_SELF_CHECK`).
fn pair(threads: usize) -> Differential {
    if self_check() {
        Differential::with_servers(Server::redis(), Server::redis())
    } else {
        Differential::threads(threads)
    }
}

thread_local! {
    /// Differences seen by this test's thread under `GOBLIN_STREAMS_KEEP_GOING`.
    static DIFFERENCES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `f` against a fresh pair of servers with each of [`THREADS`]; under
/// `GOBLIN_STREAMS_KEEP_GOING`, fails at the end when any reply differed.
fn each_thread_count(mut f: impl FnMut(&mut Differential, &str)) {
    DIFFERENCES.with(|n| n.set(0));
    for threads in THREADS {
        let mut d = pair(threads);
        f(&mut d, &format!("--threads {threads}"));
    }
    let differences = DIFFERENCES.with(std::cell::Cell::get);
    assert_eq!(differences, 0, "replies differed (listed above)");
}

/// Switches both servers' connections to RESP `version` (HELLO's replies differ between
/// the servers: they are not compared).
fn hello(d: &mut Differential, version: &str) {
    for raw in [&mut d.g, &mut d.r] {
        let reply = raw.cmd(&[b"HELLO", version.as_bytes()]);
        assert!(
            !reply.starts_with(b"-"),
            "HELLO {version}: {}",
            show(&reply)
        );
    }
}

/// Whether `c` is the command `name`.
fn named(c: &[Vec<u8>], name: &str) -> bool {
    c.first()
        .is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes()))
}

/// Sends `cmds` to both servers as pipelines and compares the replies one by one as
/// [`verdict`] does (clock fields masked; an EXEC's replies as the commands it ran);
/// returns goblin's replies.
fn run_cmds(d: &mut Differential, cmds: &[Cmd], ctx: &str) -> Vec<Vec<u8>> {
    let mut queued: Option<Vec<Cmd>> = None;
    let mut replies = Vec::with_capacity(cmds.len());
    for chunk in cmds.chunks(PIPELINE_CHUNK) {
        let want = pipeline(&mut d.r, chunk);
        let got = pipeline(&mut d.g, chunk);
        for (i, ((c, g), r)) in chunk.iter().zip(&got).zip(&want).enumerate() {
            let ran = if named(c, "EXEC") {
                queued.take().unwrap_or_default()
            } else {
                Vec::new()
            };
            if transcript() {
                eprintln!("{ctx}: {} -> {}", brief_cmd(c), show(r));
            }
            if let Err(e) = verdict(c, &ran, g, r) {
                if !keep_going() {
                    panic!("{ctx}: {e}");
                }
                eprintln!("{ctx}: command {}: {e}", replies.len() + i);
                DIFFERENCES.with(|n| n.set(n.get() + 1));
            }
            if named(c, "MULTI") && r.as_slice() == b"+OK\r\n" {
                queued = Some(Vec::new());
            } else if named(c, "DISCARD") {
                queued = None;
            } else if let Some(q) = queued.as_mut()
                && r.as_slice() == b"+QUEUED\r\n"
            {
                q.push(c.clone());
            }
        }
        replies.extend(got);
    }
    replies
}

/// Runs a script (one command per line, `K0`, `K1`, … for `keys`) on both servers,
/// compared as [`run_cmds`] does; a line starting with `~` (TTL) compares as
/// [`How::Near`].
fn run(d: &mut Differential, keys: &[String], ctx: &str, text: &str) {
    let mut batch = String::new();
    for line in script_lines(text) {
        if let Some(near) = line.strip_prefix('~') {
            run_cmds(d, &script_commands(&batch, keys), ctx);
            batch.clear();
            compare(d, &substitute(words(near), keys), How::Near, ctx);
        } else {
            batch.push_str(line);
            batch.push('\n');
        }
    }
    run_cmds(d, &script_commands(&batch, keys), ctx);
}

/// Runs `text` with `n` keys (at least ten: `K9` is a missing key) on different shards,
/// from an empty keyspace, with each thread count, in RESP2 and then in RESP3: for
/// scripts of one-key commands.
fn run_both_protocols(n: usize, text: &str) {
    each_thread_count(|d, ctx| {
        let keys = Layout::CrossShard.keys(n.max(10));
        for version in ["2", "3"] {
            hello(d, version);
            let ctx = format!("{ctx}, RESP{version}");
            run(d, &keys, &ctx, "FLUSHALL");
            run(d, &keys, &ctx, text);
        }
    });
}

/// Runs `text` with `n` keys (at least ten) in every layout, from an empty keyspace each
/// time, with each thread count, in RESP2 and RESP3: for scripts of multi-key commands.
fn run_everywhere(n: usize, text: &str) {
    each_thread_count(|d, ctx| {
        for version in ["2", "3"] {
            hello(d, version);
            for layout in LAYOUTS {
                let ctx = format!("{ctx}, {layout:?}, RESP{version}");
                run(d, &[], &ctx, "FLUSHALL");
                run(d, &layout.keys(n.max(10)), &ctx, text);
            }
        }
    });
}

/// Script lines adding entries `from-1` … `to-1` to `key`, each with the field `f` and
/// the value `value(i)`.
fn xadds(key: &str, from: u64, to: u64, value: impl Fn(u64) -> String) -> String {
    (from..=to)
        .map(|i| format!("XADD {key} {i}-1 f {}\n", value(i)))
        .collect()
}

/// XADD with explicit and partial IDs, the `*` IDs Redis derives from a last ID in the
/// future, every ID error (0-0, equal or smaller, malformed, out of range, exhausted),
/// field/value arity, NOMKSTREAM, binary and numeric-looking fields; XLEN; and the
/// order of checks against a key of another type.
#[test]
fn xadd_ids_and_errors_match_redis() {
    run_both_protocols(
        4,
        r#"
        XADD K0 1-1 a 1
        XADD K0 1-1 a 1
        XADD K0 1-0 a 1
        XADD K0 0-5 a 1
        XADD K0 1-2 f v f2 v2 "" ""
        XADD K0 2 a 1
        XADD K0 2-* a 1
        XADD K0 2-* a 1
        XADD K0 1-* a 1
        XADD K0 3-18446744073709551615 a 1
        XADD K0 3-* a 1
        XADD K0 4-* a 1
        XADD K0 00005-000 a 1
        XADD K0 +6-1 a 1
        XADD K0 " 7-1" a 1
        XADD K0 "7-1 " a 1
        XADD K0 7-1x a 1
        XADD K0 7.5-1 a 1
        XADD K0 0x8-1 a 1
        XADD K0 -8-1 a 1
        XADD K0 8--1 a 1
        XADD K0 8- a 1
        XADD K0 -8 a 1
        XADD K0 - a 1
        XADD K0 + a 1
        XADD K0 $ a 1
        XADD K0 > a 1
        XADD K0 "" a 1
        XADD K0 *-1 a 1
        XADD K0 *-* a 1
        XADD K0 ** a 1
        XADD K0 18446744073709551616-0 a 1
        XADD K0 1-18446744073709551616 a 1
        XADD K0 99999999999999999999 a 1
        XADD K0 9-1 a
        XADD K0 9-1 a 1 b
        XADD K0 9-1
        XADD K0
        XADD
        XLEN K0
        XRANGE K0 - +
        XADD K1 0-0 a 1
        XADD K1 0 a 1
        XADD K1 0-* a 1
        XADD K1 0-* a 1
        XADD K1 0-0 a 1
        XADD K1 18446744073709551615-18446744073709551614 a 1
        XADD K1 18446744073709551615-* a 1
        XADD K1 18446744073709551615-* a 1
        XADD K1 * a 1
        XADD K1 18446744073709551615-18446744073709551615 a 1
        XLEN K1
        XRANGE K1 - +
        XADD K2 99999999999999-5 a 1
        XADD K2 * b 2
        XADD K2 * c 3
        XADD K2 99999999999999-* d 4
        XADD K2 100000000000000 e 5
        XADD K2 100000000000000-* f 6
        XRANGE K2 - +
        XADD K3 NOMKSTREAM 1-1 a 1
        XADD K3 nomkstream MAXLEN 5 1-1 a 1
        EXISTS K3
        XADD K3 1-1 NOMKSTREAM a 1
        XADD K3 NOMKSTREAM NOMKSTREAM 1-1 a 1
        XADD K0 NOMKSTREAM 10-1 a 1
        XADD K0 NOMKSTREAM 10-1 a 1
        XADD K3 NOMKSTREAM 0-0 a 1
        XADD K3 NOMKSTREAM x a 1
        XADD K3 NOMKSTREAM 1-1 a
        XADD K0 10-2 "\x00\r\n" "\xff\xfe" "a b" "" long "0123456789012345678901234567890123456789012345678901234567890123456789"
        XADD K0 10-3 12 -5 3.5 9223372036854775807 -9223372036854775808 18446744073709551616 same same
        XADD K0 10-4 a 1 a 2 a 3
        XRANGE K0 10-2 10-4
        XREVRANGE K0 + 10-2
        XLEN K0
        XLEN K3
        XLEN K0 K1
        XLEN
        SET K3 str
        XADD K3 1-1 a 1
        XADD K3 NOMKSTREAM 1-1 a 1
        XADD K3 x a 1
        XADD K3 1-1 a
        XADD K3 MAXLEN x 1-1 a 1
        XLEN K3
        GET K3
        "#,
    );
}

/// XADD's trimming options: MAXLEN and MINID, exact (`=` or none) and approximate
/// (`~`), with LIMIT, their errors (LIMIT without `~`, negative values, both at once),
/// an entry trimmed away by its own XADD; on streams of hundreds of entries, where `~`
/// removes whole listpack nodes only (100 entries by default, fewer when the entries
/// fill a node's 4096 bytes); XINFO STREAM after each step (`radix-tree-keys` counts the
/// nodes).
#[test]
fn xadd_trimming_matches_redis() {
    let mut text = String::from(
        r#"
        XADD K0 MAXLEN -1 1-1 a 1
        XADD K0 MAXLEN 1 LIMIT 5 1-1 a 1
        XADD K0 MAXLEN = 1 LIMIT 5 1-1 a 1
        XADD K0 MAXLEN ~ 1 LIMIT -1 1-1 a 1
        XADD K0 MAXLEN ~ 1 LIMIT x 1-1 a 1
        XADD K0 MAXLEN ~ 1 LIMIT 1-1 a 1
        XADD K0 MAXLEN x 1-1 a 1
        XADD K0 MAXLEN ~ x 1-1 a 1
        XADD K0 MAXLEN 1 MINID 5 1-3 a 1
        XADD K0 MINID x 1-1 a 1
        XADD K0 MINID - 1-1 a 1
        XADD K0 MINID ~ 1-x 1-1 a 1
        XADD K0 MAXLEN 9223372036854775808 1-1 a 1
        XADD K0 MAXLEN
        XADD K0 MAXLEN 1 a 1
        EXISTS K0
        XADD K0 MAXLEN ~ 1 LIMIT 5 1-1 a 1
        XADD K0 MINID = 5 1-2 a 1
        XLEN K0
        EXISTS K0
        XINFO STREAM K0
        XADD K0 MAXLEN 0 3-1 a 1
        XLEN K0
        XADD K0 maxlen = 2 4-1 a 1
        XADD K0 MAXLEN 2 5-1 a 1
        XADD K0 MAXLEN 2 6-1 a 1
        XRANGE K0 - +
        XADD K0 MINID 6 7-1 a 1
        XRANGE K0 - +
        XADD K0 MINID 8 NOMKSTREAM 8-1 a 1
        XADD K0 NOMKSTREAM MINID 7-1 LIMIT 0 9-1 a 1
        XADD K0 NOMKSTREAM MINID ~ 7-1 LIMIT 0 9-1 a 1
        XRANGE K0 - +
        XINFO STREAM K0
        DEL K0
        "#,
    );
    // 350 entries: four nodes of 100, 100, 100 and 50.
    text.push_str(&xadds("K0", 1, 350, |i| i.to_string()));
    text.push_str(
        "XINFO STREAM K0
        XADD K0 MAXLEN ~ 300 351-1 f x
        XLEN K0
        XADD K0 MAXLEN ~ 250 352-1 f x
        XLEN K0
        XADD K0 MAXLEN ~ 150 LIMIT 50 353-1 f x
        XLEN K0
        XADD K0 MAXLEN ~ 150 LIMIT 100 354-1 f x
        XLEN K0
        XINFO STREAM K0
        XADD K0 MAXLEN ~ 0 LIMIT 0 355-1 f x
        XLEN K0
        XINFO STREAM K0
        XADD K0 MAXLEN ~ 0 356-1 f x
        XLEN K0
        XRANGE K0 - + COUNT 3
        XINFO STREAM K0
        DEL K0
        ",
    );
    text.push_str(&xadds("K0", 1, 420, |i| format!("v{i}")));
    text.push_str(
        "XADD K0 MINID ~ 150 421-1 f x
        XLEN K0
        XRANGE K0 - + COUNT 1
        XADD K0 MINID ~ 201 422-1 f x
        XLEN K0
        XADD K0 MINID ~ 301-1 LIMIT 100 423-1 f x
        XLEN K0
        XADD K0 MINID ~ 410 LIMIT 99 424-1 f x
        XLEN K0
        XADD K0 MINID = 410 425-1 f x
        XLEN K0
        XRANGE K0 - + COUNT 2
        XINFO STREAM K0
        XADD K0 MINID ~ 999 LIMIT 0 426-1 f x
        XINFO STREAM K0
        DEL K0
        ",
    );
    // Entries of 1000 bytes: a node holds what fits in 4096 bytes, then a new one starts.
    text.push_str(&xadds("K1", 1, 30, |i| format!("{i:0>1000}")));
    text.push_str(
        "XINFO STREAM K1
        XADD K1 MAXLEN ~ 20 31-1 f small
        XLEN K1
        XINFO STREAM K1
        XADD K1 MAXLEN ~ 2 32-1 f small
        XLEN K1
        XINFO STREAM K1
        ",
    );
    // An entry larger than a node on its own, between small ones.
    text.push_str(&xadds("K2", 1, 5, |i| i.to_string()));
    text.push_str(&format!("XADD K2 6-1 big {}\n", "B".repeat(5000)));
    text.push_str(&xadds("K2", 7, 9, |i| i.to_string()));
    text.push_str(
        "XINFO STREAM K2
        XADD K2 MAXLEN ~ 3 10-1 f x
        XLEN K2
        XINFO STREAM K2
        XADD K2 MAXLEN = 3 11-1 f x
        XRANGE K2 - +
        ",
    );
    // Trimming on every XADD, as a capped stream is used.
    for i in 1..=260u64 {
        text.push_str(&format!("XADD K3 MAXLEN ~ 120 {i}-1 f {i}\n"));
    }
    text.push_str("XLEN K3\nXINFO STREAM K3\n");
    for i in 1..=130u64 {
        text.push_str(&format!(
            "XADD K3 MINID ~ {} LIMIT 30 {}-1 f {i}\n",
            i + 200,
            i + 260
        ));
    }
    text.push_str("XLEN K3\nXINFO STREAM K3\nXRANGE K3 - + COUNT 2\n");
    // `stream-node-max-entries` and `stream-node-max-bytes` set: nodes close as they
    // say (0: no limit), and an approximate trim's default LIMIT follows them.
    text.push_str("CONFIG SET stream-node-max-entries 10\nDEL K0\n");
    text.push_str(&xadds("K0", 1, 100, |i| i.to_string()));
    text.push_str(
        "XADD K0 MAXLEN ~ 55 LIMIT 30 101-1 f x
        XLEN K0
        XADD K0 MAXLEN ~ 55 LIMIT 30 102-1 f x
        XLEN K0
        XADD K0 MAXLEN ~ 5 103-1 f x
        XLEN K0
        XINFO STREAM K0
        CONFIG SET stream-node-max-entries 2
        DEL K1
        XADD K1 1-1 f x
        XADD K1 2-1 f x
        XADD K1 3-1 f x
        XTRIM K1 MAXLEN ~ 0 LIMIT 1
        XTRIM K1 MAXLEN ~ 0 LIMIT 2
        XLEN K1
        CONFIG SET stream-node-max-entries 0
        CONFIG SET stream-node-max-bytes 50
        DEL K2
        XADD K2 1-1 field-one value-one-xxxxxxxxxxxxxxxxxx
        XADD K2 2-1 field-one value-one-xxxxxxxxxxxxxxxxxx
        XADD K2 3-1 field-one value-one-xxxxxxxxxxxxxxxxxx
        XADD K2 4-1 field-one value-one-xxxxxxxxxxxxxxxxxx
        XTRIM K2 MAXLEN ~ 1
        XLEN K2
        CONFIG SET stream-node-max-entries 100
        CONFIG SET stream-node-max-bytes 4096
        ",
    );
    run_both_protocols(4, &text);
}

/// XTRIM in every form (MAXLEN and MINID, `=`, `~`, LIMIT, LIMIT 0 = no limit) and with
/// every error in Redis's order; on a missing key, on an emptied stream (which stays),
/// on a key of another type; deleted entries inside nodes counted as Redis counts them.
#[test]
fn xtrim_matches_redis() {
    let mut text = String::from(
        r#"
        XTRIM K0 MAXLEN 1
        XTRIM K0 MAXLEN x
        XTRIM K0 MAXLEN 1 LIMIT 5
        XTRIM K0 MINID ~ 1
        EXISTS K0
        "#,
    );
    text.push_str(&xadds("K0", 1, 350, |i| i.to_string()));
    text.push_str(
        r#"
        XTRIM K0 MAXLEN ~ 300
        XLEN K0
        XTRIM K0 MAXLEN ~ 299
        XLEN K0
        XTRIM K0 MAXLEN ~ 150 LIMIT 50
        XLEN K0
        XTRIM K0 MAXLEN ~ 150 LIMIT 100
        XLEN K0
        XINFO STREAM K0
        XTRIM K0 maxlen = 240
        XLEN K0
        XINFO STREAM K0
        XTRIM K0 MINID ~ 250
        XLEN K0
        XTRIM K0 MINID ~ 301 LIMIT 100
        XLEN K0
        XTRIM K0 MINID 301
        XLEN K0
        XRANGE K0 - + COUNT 1
        XTRIM K0 MINID = 302-1
        XTRIM K0 MINID 302-2
        XRANGE K0 - + COUNT 1
        XTRIM K0 MAXLEN 1 LIMIT 5
        XTRIM K0 MAXLEN 1 LIMIT 0
        XTRIM K0 MINID ~ 340 LIMIT 0
        XLEN K0
        XTRIM K0
        XTRIM K0 MAXLEN
        XTRIM K0 MAXLEN ~
        XTRIM K0 MAXLEN ~ 1 LIMIT
        XTRIM K0 MAXLEN ~ 1 LIMIT x
        XTRIM K0 MAXLEN ~ 1 LIMIT -1
        XTRIM K0 MAXLEN ~ x
        XTRIM K0 MAXLEN -1
        XTRIM K0 MINID x
        XTRIM K0 MINID -
        XTRIM K0 MINID +
        XTRIM K0 MINID (5
        XTRIM K0 MINID =
        XTRIM K0 MINID 5-
        XTRIM K0 FOO 1
        XTRIM K0 MAXLEN 1 MINID 1
        XTRIM K0 MAXLEN 1 extra
        XTRIM K0 MAXLEN = ~ 1
        XTRIM K0 maxlen 1 maxlen 2
        XTRIM K0 MAXLEN 9223372036854775808
        XTRIM K0 MINID 18446744073709551616
        XTRIM K0 LIMIT 5 MAXLEN ~ 1
        XTRIM K0 MAXLEN ~ 1 LIMIT 5 LIMIT 6
        XTRIM K0 MINID ~ 5 LIMIT 9223372036854775807
        XTRIM K0 MINID 0
        XLEN K0
        XTRIM K0 MAXLEN ~ 0 LIMIT 0
        XLEN K0
        XINFO STREAM K0
        XTRIM K0 MAXLEN 0
        EXISTS K0
        XINFO STREAM K0
        XTRIM K9 MAXLEN 1
        XTRIM K9 MAXLEN x
        XTRIM K9 MAXLEN 1 LIMIT 5
        SET K1 s
        XTRIM K1 MAXLEN 1
        XTRIM K1 MAXLEN x
        XTRIM K1 MAXLEN 1 LIMIT 5
        "#,
    );
    // Deleted entries still sit in their nodes: MAXLEN counts live entries, `~` whole
    // nodes, and a node whose entries are all deleted is gone.
    text.push_str(&xadds("K2", 1, 250, |i| i.to_string()));
    let dels: Vec<String> = (1..=150).step_by(2).map(|i| format!("{i}-1")).collect();
    text.push_str(&format!("XDEL K2 {}\n", dels.join(" ")));
    let dels: Vec<String> = (201..=250).map(|i| format!("{i}-1")).collect();
    text.push_str(&format!("XDEL K2 {}\n", dels.join(" ")));
    text.push_str(
        "XLEN K2
        XINFO STREAM K2
        XTRIM K2 MAXLEN ~ 100
        XLEN K2
        XINFO STREAM K2
        XTRIM K2 MAXLEN ~ 20
        XLEN K2
        XINFO STREAM K2
        XTRIM K2 MAXLEN 20
        XLEN K2
        XRANGE K2 - + COUNT 3
        XINFO STREAM K2
        ",
    );
    run_both_protocols(10, &text);
}

/// XRANGE and XREVRANGE: `-` and `+`, incomplete IDs (`5`, whose sequence is the
/// lowest or highest by side), exclusive bounds `(` (and their errors on the lowest and
/// highest IDs), IDs at the extremes, empty and reversed ranges, COUNT (0 and negative
/// answer a null array, repeated, too large), malformed IDs, a missing key.
#[test]
fn xrange_and_xrevrange_match_redis() {
    run_both_protocols(
        2,
        r#"
        XADD K0 1-0 a 1
        XADD K0 1-1 b 2
        XADD K0 5-0 c 3
        XADD K0 5-1 d 4
        XADD K0 5-18446744073709551615 e 5
        XADD K0 6-0 f 6
        XADD K0 18446744073709551615-0 g 7
        XRANGE K0 - +
        XRANGE K0 5 5
        XRANGE K0 5 5-1
        XRANGE K0 5- 5
        XRANGE K0 (5 +
        XRANGE K0 - (5
        XRANGE K0 (5-0 (6
        XRANGE K0 (1-1 (5-18446744073709551615
        XRANGE K0 (5-1 (5-18446744073709551615
        XRANGE K0 (5-1 5-18446744073709551615
        XRANGE K0 (- +
        XRANGE K0 - (+
        XRANGE K0 (0-0 +
        XRANGE K0 - (18446744073709551615-18446744073709551615
        XRANGE K0 (18446744073709551615-18446744073709551615 +
        XRANGE K0 - (0-0
        XRANGE K0 (0 +
        XRANGE K0 - (0
        XRANGE K0 - (1
        XRANGE K0 (18446744073709551615 +
        XRANGE K0 ( +
        XRANGE K0 ((1 +
        XRANGE K0 6 5
        XRANGE K0 + -
        XRANGE K0 5-1 5-1
        XRANGE K0 (5-1 (5-1
        XRANGE K0 - + COUNT 0
        XRANGE K0 - + COUNT -1
        XRANGE K0 - + COUNT 2
        XRANGE K0 (1-0 + COUNT 2
        XRANGE K0 - + COUNT x
        XRANGE K0 - + COUNT
        XRANGE K0 - + COUNT 1 COUNT 2
        XRANGE K0 - + count 3
        XRANGE K0 - + LIMIT 2
        XRANGE K0 - + COUNT 9223372036854775807
        XRANGE K0 - + COUNT 9223372036854775808
        XRANGE K0 x +
        XRANGE K0 - x
        XRANGE K0 1-x +
        XRANGE K0 * +
        XRANGE K0 $ +
        XRANGE K0 18446744073709551616 +
        XRANGE K0 - 18446744073709551615
        XRANGE K0 -
        XRANGE K0
        XRANGE K1 - +
        XRANGE K1 x +
        XRANGE K1 - + COUNT 1
        XRANGE K1 - + COUNT x
        XRANGE K1 - + COUNT 0
        XREVRANGE K0 + -
        XREVRANGE K0 5 5
        XREVRANGE K0 5 5-
        XREVRANGE K0 (6 -
        XREVRANGE K0 + (5
        XREVRANGE K0 (5-18446744073709551615 (1-0
        XREVRANGE K0 (+ -
        XREVRANGE K0 + (-
        XREVRANGE K0 (18446744073709551615-18446744073709551615 -
        XREVRANGE K0 + (18446744073709551615-18446744073709551615
        XREVRANGE K0 (0-0 -
        XREVRANGE K0 + (0-0
        XREVRANGE K0 - +
        XREVRANGE K0 + - COUNT 0
        XREVRANGE K0 + - COUNT -5
        XREVRANGE K0 + - COUNT 3
        XREVRANGE K0 (6 - COUNT 2
        XREVRANGE K0 + - COUNT x
        XREVRANGE K0 x -
        XREVRANGE K1 + -
        XREVRANGE K0 +
        SET K1 s
        XRANGE K1 - +
        XRANGE K1 x +
        XREVRANGE K1 + -
        XRANGE K1 - + COUNT x
        "#,
    );
}

/// XDEL: present, absent and repeated IDs, several at once, malformed IDs (checked
/// before anything is deleted), the first and last entries (XINFO's first-entry,
/// last-entry and max-deleted-entry-id), a node emptied by deletions, a missing key, a
/// key of another type; the stream stays when emptied.
#[test]
fn xdel_matches_redis() {
    let mut text = String::from(
        r#"
        XDEL K0 1-1
        XADD K0 1-1 a 1
        XADD K0 2-1 b 2
        XADD K0 3-1 c 3
        XADD K0 4-1 d 4
        XDEL K0 2-1
        XDEL K0 2-1
        XDEL K0 1-1 1-1 3-1 99-1
        XDEL K0 x
        XDEL K0 4-1 x
        XDEL K0 4
        XDEL K0 4-
        XDEL K0 (4-1
        XDEL K0 -
        XDEL K0
        XLEN K0
        XRANGE K0 - +
        XINFO STREAM K0
        XDEL K0 4-1
        XLEN K0
        EXISTS K0
        XINFO STREAM K0
        XADD K0 3-1 again 1
        XADD K0 5-1 e 5
        XINFO STREAM K0
        XDEL K0 5-1
        XINFO STREAM K0
        SET K1 s
        XDEL K1 1-1
        XDEL K1 x
        "#,
    );
    text.push_str(&xadds("K2", 1, 230, |i| i.to_string()));
    let dels: Vec<String> = (101..=200).map(|i| format!("{i}-1")).collect();
    text.push_str(&format!("XDEL K2 {}\n", dels.join(" ")));
    text.push_str(
        "XLEN K2
        XINFO STREAM K2
        XRANGE K2 99 202
        XREVRANGE K2 202 99
        XDEL K2 1-1 230-1
        XINFO STREAM K2
        ",
    );
    run_both_protocols(3, &text);
}

/// XREAD: one and several streams (in one slot, on one shard, on different shards; one
/// of them absent; the same key twice), COUNT (0 and negative mean all), `$` (nothing
/// newer: nil), IDs at the end and past it, BLOCK with data already there (answers at
/// once), the unbalanced list, `>` and NOACK refused, every syntax error, keys of
/// another type.
#[test]
fn xread_matches_redis() {
    run_everywhere(
        4,
        r#"
        XREAD STREAMS K0 0
        XREAD STREAMS K0 K1 0 0
        XADD K0 1-1 a 1
        XADD K0 2-1 b 2
        XADD K1 3-1 c 3
        XREAD STREAMS K0 0
        XREAD STREAMS K0 K1 0 0
        XREAD STREAMS K1 K0 0 0
        XREAD STREAMS K0 K1 1-1 0-0
        XREAD STREAMS K0 K1 1 3
        XREAD STREAMS K0 K1 K2 0 0 0
        XREAD COUNT 1 STREAMS K0 K1 0 0
        XREAD COUNT 0 STREAMS K0 K1 0 0
        XREAD COUNT -1 STREAMS K0 K1 0 0
        XREAD COUNT x STREAMS K0 0
        XREAD STREAMS K0 K1 $ $
        XREAD STREAMS K0 K1 $ 0
        XREAD STREAMS K0 K1 + +
        XREAD STREAMS K0 K1 - -
        XREAD STREAMS K0 K1 2-1 3-1
        XREAD STREAMS K0 K1 2-0 3-0
        XREAD STREAMS K0 K2 0 0
        XREAD STREAMS K2 0
        XREAD STREAMS K2 K3 0 0
        XREAD STREAMS K0 K1 0
        XREAD STREAMS K0 K1 K2 0 0
        XREAD STREAMS
        XREAD STREAMS K0
        XREAD K0 0
        XREAD COUNT 1 K0 0
        XREAD COUNT 1
        XREAD
        XREAD STREAMS K0 x
        XREAD STREAMS K0 (1
        XREAD STREAMS K0 >
        XREAD STREAMS K0 K1 0 >
        XREAD STREAMS K0 *
        XREAD STREAMS K0 18446744073709551615-18446744073709551615
        XREAD STREAMS K0 K0 0 1-1
        XREAD COUNT 1 COUNT 2 STREAMS K0 0
        XREAD BLOCK 0 COUNT 1 STREAMS K0 0
        XREAD BLOCK 100 STREAMS K0 K1 1-1 0
        XREAD COUNT 2 BLOCK 0 STREAMS K1 K0 0 0
        XREAD BLOCK -1 STREAMS K0 0
        XREAD BLOCK x STREAMS K0 0
        XREAD NOACK STREAMS K0 0
        XREAD FOO STREAMS K0 0
        XREAD STREAMS K0 0 COUNT 1
        XREAD streams K0 0
        XREAD count 1 Streams K1 K0 0 0
        XDEL K0 1-1
        XREAD STREAMS K0 0
        XADD K0 3-1 "\x00" "\xff"
        XREAD STREAMS K0 K1 2-1 $
        SET K3 str
        XREAD STREAMS K3 0
        XREAD STREAMS K0 K3 0 0
        XREAD STREAMS K3 x
        XREAD STREAMS K0 K3 9 0
        XREAD STREAMS K3 $
        "#,
    );
}

/// XGROUP CREATE (`$`, explicit and incomplete IDs, an ID past the end, MKSTREAM,
/// ENTRIESREAD, BUSYGROUP, a missing key without MKSTREAM, an empty group name), SETID
/// (with ENTRIESREAD), CREATECONSUMER, DELCONSUMER (answering the pending count it drops),
/// DESTROY, HELP, every arity and syntax error, keys of another type; XINFO GROUPS and
/// CONSUMERS after each (groups and consumers in name order).
#[test]
fn xgroup_matches_redis() {
    run_both_protocols(
        8,
        r#"
        XGROUP CREATE K0 g 0
        XGROUP CREATE K0 g $ MKSTREAM
        XGROUP CREATE K0 g $ MKSTREAM
        XGROUP CREATE K0 g 0
        XINFO GROUPS K0
        XINFO STREAM K0
        XADD K0 1-1 a 1
        XADD K0 2-1 b 2
        XADD K0 3-1 c 3
        XGROUP CREATE K0 g2 0
        XGROUP CREATE K0 g3 $
        XGROUP CREATE K0 g4 2-1
        XGROUP CREATE K0 g5 0 ENTRIESREAD 1
        XGROUP CREATE K0 g6 2 ENTRIESREAD 2
        XGROUP CREATE K0 g7 1-1 ENTRIESREAD -1
        XGROUP CREATE K0 g8 1-1 ENTRIESREAD -2
        XGROUP CREATE K0 g9 1-1 ENTRIESREAD x
        XGROUP CREATE K0 g9 1-1 ENTRIESREAD 100
        XGROUP CREATE K0 g10 99-1
        XGROUP CREATE K0 g11 1-1 ENTRIESREAD
        XGROUP CREATE K0 g11 1-1 MKSTREAM ENTRIESREAD 1 MKSTREAM
        XGROUP CREATE K0 g11 1-1 mkstream entriesread 1
        XGROUP CREATE K0 g12 1-1 FOO
        XGROUP CREATE K0 g13 x
        XGROUP CREATE K0 g13 -
        XGROUP CREATE K0 g13 +
        XGROUP CREATE K0 g13 >
        XGROUP CREATE K0 g13 (1
        XGROUP CREATE K0 g13 18446744073709551616
        XGROUP CREATE K0 g13
        XGROUP CREATE K0 "" 0
        XGROUP CREATE K0 "a b\r\n" 0
        XINFO GROUPS K0
        XGROUP SETID K0 g 0
        XINFO GROUPS K0
        XGROUP SETID K0 g $
        XINFO GROUPS K0
        XGROUP SETID K0 g 1-1 ENTRIESREAD 1
        XINFO GROUPS K0
        XGROUP SETID K0 g 1-1 ENTRIESREAD -1
        XGROUP SETID K0 g 1-1 ENTRIESREAD -3
        XGROUP SETID K0 g 1-1 ENTRIESREAD x
        XGROUP SETID K0 g 1-1 ENTRIESREAD
        XGROUP SETID K0 g 1-1 FOO 1
        XGROUP SETID K0 g 1-1 ENTRIESREAD 1 extra
        XGROUP SETID K0 g 50-0 ENTRIESREAD 7
        XGROUP SETID K0 nog 1-1
        XGROUP SETID K9 g 1-1
        XGROUP SETID K0 g x
        XGROUP SETID K0 g
        XINFO GROUPS K0
        XGROUP CREATECONSUMER K0 g c1
        XGROUP CREATECONSUMER K0 g c1
        XGROUP CREATECONSUMER K0 g c2
        XGROUP CREATECONSUMER K0 g ""
        XGROUP CREATECONSUMER K0 nog c1
        XGROUP CREATECONSUMER K9 g c1
        XGROUP CREATECONSUMER K0 g
        XGROUP CREATECONSUMER K0 g c3 extra
        XINFO CONSUMERS K0 g
        XINFO GROUPS K0
        XGROUP SETID K0 g 0
        XREADGROUP GROUP g c1 COUNT 2 STREAMS K0 >
        XGROUP DELCONSUMER K0 g c1
        XGROUP DELCONSUMER K0 g c1
        XGROUP DELCONSUMER K0 g nobody
        XGROUP DELCONSUMER K0 nog c1
        XGROUP DELCONSUMER K9 g c1
        XGROUP DELCONSUMER K0 g
        XPENDING K0 g
        XINFO CONSUMERS K0 g
        XGROUP DESTROY K0 g2
        XGROUP DESTROY K0 g2
        XGROUP DESTROY K9 g2
        XGROUP DESTROY K0
        XGROUP DESTROY K0 g2 extra
        XINFO GROUPS K0
        XGROUP HELP
        XGROUP help
        XGROUP HELP extra
        XGROUP FOO
        XGROUP FOO K0
        XGROUP
        XGROUP CREATE
        XGROUP CREATE K0
        XGROUP SETID
        XGROUP DESTROY
        XGROUP CREATECONSUMER
        XGROUP DELCONSUMER K0
        SET K3 s
        XGROUP CREATE K3 g 0
        XGROUP CREATE K3 g 0 MKSTREAM
        XGROUP CREATE K3 g x
        XGROUP SETID K3 g 0
        XGROUP DESTROY K3 g
        XGROUP CREATECONSUMER K3 g c
        XGROUP DELCONSUMER K3 g c
        XGROUP CREATE K4 g 5-5 MKSTREAM
        XGROUP CREATE K5 g x MKSTREAM
        XGROUP CREATE K6 g 0 ENTRIESREAD 5 MKSTREAM
        XINFO STREAM K4
        XINFO GROUPS K4
        XINFO GROUPS K6
        XINFO GROUPS K5
        EXISTS K5
        TYPE K4
        "#,
    );
}

/// XREADGROUP: `>` (new entries, advancing the group), history IDs (`0`, an ID, with
/// COUNT 0 and negative), NOACK (no pending entry), a consumer created by reading,
/// history entries deleted since (nil entries), several streams at once (in every
/// layout, one of them missing its group: NOGROUP), `$` refused, every syntax error,
/// WRONGTYPE; XINFO GROUPS and CONSUMERS after.
#[test]
fn xreadgroup_matches_redis() {
    run_everywhere(
        3,
        r#"
        XREADGROUP GROUP g c1 STREAMS K0 >
        XADD K0 1-1 a 1
        XADD K0 2-1 b 2
        XADD K0 3-1 c 3
        XADD K0 4-1 d 4
        XREADGROUP GROUP g c1 STREAMS K0 >
        XGROUP CREATE K0 g 0
        XREADGROUP GROUP g c1 COUNT 2 STREAMS K0 >
        XREADGROUP GROUP g c2 STREAMS K0 >
        XREADGROUP GROUP g c2 STREAMS K0 >
        XREADGROUP GROUP g c1 STREAMS K0 0
        XREADGROUP GROUP g c1 COUNT 1 STREAMS K0 0
        XREADGROUP GROUP g c1 STREAMS K0 1-1
        XREADGROUP GROUP g c1 STREAMS K0 1
        XREADGROUP GROUP g c1 STREAMS K0 99-1
        XREADGROUP GROUP g c3 STREAMS K0 0
        XREADGROUP GROUP g c2 NOACK STREAMS K0 0
        XREADGROUP GROUP g c1 COUNT 0 STREAMS K0 0
        XREADGROUP GROUP g c1 COUNT -5 STREAMS K0 0
        XPENDING K0 g
        XINFO CONSUMERS K0 g
        XINFO GROUPS K0
        XADD K0 5-1 e 5
        XADD K0 6-1 f 6
        XREADGROUP GROUP g c3 NOACK STREAMS K0 >
        XPENDING K0 g
        XADD K0 7-1 g 7
        XDEL K0 4-1 1-1
        XREADGROUP GROUP g c2 STREAMS K0 0
        XREADGROUP GROUP g c1 STREAMS K0 0
        XREADGROUP GROUP g c2 STREAMS K0 >
        XREADGROUP GROUP g c2 STREAMS K0 0
        XREADGROUP GROUP g c2 COUNT 1 STREAMS K0 0
        XREADGROUP GROUP g c2 COUNT 1 STREAMS K0 3-1
        XPENDING K0 g - + 10
        XREADGROUP GROUP nog c1 STREAMS K0 >
        XREADGROUP GROUP g c1 STREAMS K9 >
        XREADGROUP GROUP g c1 STREAMS K9 0
        XREADGROUP GROUP g c1 STREAMS K0 K1 > >
        XREADGROUP GROUP g c1 STREAMS K1 K0 0 0
        XGROUP CREATE K1 g $ MKSTREAM
        XGROUP CREATE K2 g 0 MKSTREAM
        XADD K1 1-1 k1 1
        XADD K2 1-5 k2 1
        XADD K2 1-6 k2 2
        XREADGROUP GROUP g c1 STREAMS K0 K1 K2 > > >
        XADD K0 8-1 h 8
        XADD K2 2-1 k2 3
        XREADGROUP GROUP g c1 COUNT 1 STREAMS K2 K1 K0 > > >
        XREADGROUP GROUP g c1 STREAMS K2 K1 K0 0 > 0
        XREADGROUP GROUP g c4 STREAMS K0 K1 K2 > > >
        XREADGROUP GROUP g c4 STREAMS K0 K1 K2 > > >
        XREADGROUP GROUP g c1 NOACK COUNT 5 STREAMS K2 0
        XINFO GROUPS K0
        XINFO GROUPS K1
        XINFO GROUPS K2
        XINFO CONSUMERS K2 g
        XREADGROUP GROUP g STREAMS K0 >
        XREADGROUP GROUP g c1 STREAMS K0
        XREADGROUP GROUP g c1 STREAMS K0 $
        XREADGROUP GROUP g c1 STREAMS K0 x
        XREADGROUP GROUP g c1 STREAMS K0 -
        XREADGROUP GROUP g c1 STREAMS K0 +
        XREADGROUP GROUP g c1 STREAMS K0 (1
        XREADGROUP GROUP g c1 COUNT x STREAMS K0 >
        XREADGROUP STREAMS K0 >
        XREADGROUP GROUP g c1 FOO STREAMS K0 >
        XREADGROUP GROUP g c1 BLOCK -1 STREAMS K0 >
        XREADGROUP GROUP g c1 BLOCK x STREAMS K0 >
        XREADGROUP c1 STREAMS K0 >
        XREADGROUP GROUP g c1 STREAMS K0 K1 >
        XREADGROUP GROUP g c1 GROUP g c2 STREAMS K0 >
        XREADGROUP GROUP g c1 NOACK NOACK STREAMS K0 0
        XREADGROUP group g c9 count 1 noack streams K0 0
        XREAD GROUP g c1 STREAMS K0 >
        XREADGROUP GROUP g c1 BLOCK 0 STREAMS K0 0
        SET K3 s
        XREADGROUP GROUP g c1 STREAMS K3 >
        XREADGROUP GROUP g c1 STREAMS K0 K3 > >
        XREADGROUP GROUP g c1 STREAMS K3 x
        DEL K0
        XREADGROUP GROUP g c1 STREAMS K0 >
        XADD K0 9-1 i 9
        XREADGROUP GROUP g c1 STREAMS K0 >
        "#,
    );
}

/// XACK (acknowledged, unknown, repeated, several, malformed IDs checked first, a
/// missing group or key answering 0) and XPENDING in both forms: the summary (per
/// consumer, in name order), the extended form with bounds (exclusive too), COUNT (0 and
/// negative), a consumer filter, IDLE (0 keeps all, a large one none; the idle times set
/// by XCLAIM … IDLE), and every error.
#[test]
fn xack_and_xpending_match_redis() {
    run_both_protocols(
        3,
        r#"
        XADD K0 1-1 a 1
        XADD K0 2-1 b 2
        XADD K0 3-1 c 3
        XADD K0 4-1 d 4
        XADD K0 5-1 e 5
        XGROUP CREATE K0 g 0
        XPENDING K0 g
        XPENDING K0 g - + 10
        XREADGROUP GROUP g c2 COUNT 2 STREAMS K0 >
        XREADGROUP GROUP g c1 COUNT 2 STREAMS K0 >
        XREADGROUP GROUP g c3 STREAMS K0 >
        XREADGROUP GROUP g c1 STREAMS K0 0
        XPENDING K0 g
        XPENDING K0 g - + 10
        XPENDING K0 g - + 10 c1
        XPENDING K0 g - + 10 c2
        XPENDING K0 g - + 10 nobody
        XPENDING K0 g IDLE 0 - + 10
        XPENDING K0 g IDLE 0 - + 10 c1
        XPENDING K0 g IDLE 100000000 - + 10
        XPENDING K0 g IDLE -1 - + 10
        XPENDING K0 g idle 0 - + 2
        XPENDING K0 g (1-1 + 10
        XPENDING K0 g - (4-1 10
        XPENDING K0 g (1-1 (5-1 10
        XPENDING K0 g 2 4 10
        XPENDING K0 g 2-1 2-1 10
        XPENDING K0 g (2-1 (2-1 10
        XPENDING K0 g 4 2 10
        XPENDING K0 g - + 0
        XPENDING K0 g - + -1
        XPENDING K0 g - + 1
        XPENDING K0 g - + 9223372036854775807
        XPENDING K0 g (18446744073709551615-18446744073709551615 + 10
        XPENDING K0 g - (0-0 10
        XPENDING K0 g - +
        XPENDING K0 g -
        XPENDING K0 g x + 10
        XPENDING K0 g - x 10
        XPENDING K0 g - + x
        XPENDING K0 g IDLE x - + 10
        XPENDING K0 g IDLE 10
        XPENDING K0 g IDLE 10 - +
        XPENDING K0 g IDLE 10 - + 10 c1 extra
        XPENDING K0 g - + 10 c1 extra
        XPENDING K0 nog
        XPENDING K0 nog - + 10
        XPENDING K9 g
        XPENDING K9 g - + 10
        XPENDING K0
        XCLAIM K0 g c1 0 2-1 IDLE 500000
        XCLAIM K0 g c3 0 4-1 IDLE 900000 JUSTID
        XPENDING K0 g IDLE 400000 - + 10
        XPENDING K0 g IDLE 800000 - + 10
        XPENDING K0 g IDLE 400000 - + 10 c3
        XPENDING K0 g IDLE 400000 (2-1 + 10
        XACK K0 g 1-1
        XACK K0 g 1-1
        XACK K0 g 1-1 2-1 3-1 99-1
        XACK K0 g 4-1 4-1
        XACK K0 g x
        XACK K0 g 5-1 x
        XACK K0 g 5
        XACK K0 nog 5-1
        XACK K9 g 5-1
        XACK K9 g x
        XACK K0 g
        XACK K0
        XPENDING K0 g
        XPENDING K0 g - + 10
        XACK K0 g 5-1
        XPENDING K0 g
        XPENDING K0 g - + 10
        XINFO CONSUMERS K0 g
        XINFO GROUPS K0
        SET K1 s
        XACK K1 g 1-1
        XACK K1 g x
        XPENDING K1 g
        XPENDING K1 g - + 10
        XPENDING K1 g x + 10
        "#,
    );
}

/// XCLAIM: min-idle-time (0, negative, huge, and against idle times set by IDLE and
/// TIME), IDLE, TIME, RETRYCOUNT, FORCE (entries no one read; absent entries stay
/// unclaimed), JUSTID (no delivery count increment), LASTID (moves the group forward
/// only), claiming entries deleted since (dropped from the PEL), options in any case and
/// order, every error.
#[test]
fn xclaim_matches_redis() {
    run_both_protocols(
        2,
        r#"
        XADD K0 1-1 a 1
        XADD K0 2-1 b 2
        XADD K0 3-1 c 3
        XADD K0 4-1 d 4
        XADD K0 5-1 e 5
        XGROUP CREATE K0 g 0
        XREADGROUP GROUP g c1 COUNT 3 STREAMS K0 >
        XCLAIM K0 g c2 0 1-1
        XCLAIM K0 g c2 3600000 2-1
        XCLAIM K0 g c2 0 2-1 3-1 JUSTID
        XPENDING K0 g - + 10
        XINFO CONSUMERS K0 g
        XCLAIM K0 g c3 0 1-1 IDLE 500000
        XPENDING K0 g IDLE 400000 - + 10
        XCLAIM K0 g c3 450000 1-1 2-1 3-1
        XCLAIM K0 g c3 600000 1-1
        XCLAIM K0 g c1 0 1-1 TIME 1000
        XPENDING K0 g IDLE 400000 - + 10
        XCLAIM K0 g c1 1000000 1-1 JUSTID
        XCLAIM K0 g c1 0 1-1 RETRYCOUNT 7
        XPENDING K0 g - + 10
        XCLAIM K0 g c1 0 1-1 RETRYCOUNT 7 JUSTID
        XPENDING K0 g - + 10
        XCLAIM K0 g c4 0 4-1
        XCLAIM K0 g c4 0 4-1 FORCE
        XPENDING K0 g - + 10
        XCLAIM K0 g c4 0 99-1 FORCE
        XCLAIM K0 g c4 0 5-1 force justid
        XPENDING K0 g - + 10
        XPENDING K0 g
        XINFO GROUPS K0
        XCLAIM K0 g c4 0 1-1 LASTID 10-1
        XINFO GROUPS K0
        XCLAIM K0 g c4 0 1-1 LASTID 2-1
        XINFO GROUPS K0
        XDEL K0 2-1
        XCLAIM K0 g c5 0 1-1 2-1 3-1
        XPENDING K0 g - + 10
        XDEL K0 3-1
        XCLAIM K0 g c5 0 1-1 2-1 3-1 JUSTID
        XPENDING K0 g - + 10
        XCLAIM K0 g c5 0 x
        XCLAIM K0 g c5 0 1-1 x
        XCLAIM K0 g c5 x 1-1
        XCLAIM K0 g c5 -1 1-1
        XCLAIM K0 g c5 0 1-1 IDLE x
        XCLAIM K0 g c5 0 1-1 IDLE -5
        XCLAIM K0 g c5 0 1-1 TIME x
        XCLAIM K0 g c5 0 1-1 RETRYCOUNT x
        XCLAIM K0 g c5 0 1-1 RETRYCOUNT -1
        XPENDING K0 g - + 10
        XCLAIM K0 g c5 0 1-1 LASTID x
        XCLAIM K0 g c5 0 1-1 FOO
        XCLAIM K0 g c5 0 1-1 IDLE
        XCLAIM K0 g c5 0 1-1 TIME
        XCLAIM K0 g c5 0 1-1 RETRYCOUNT
        XCLAIM K0 g c5 0 1-1 LASTID
        XCLAIM K0 g c5 0 1-1 FORCE x
        XCLAIM K0 g c5 0
        XCLAIM K0 g c5
        XCLAIM K0 nog c5 0 1-1
        XCLAIM K9 g c5 0 1-1
        XCLAIM K9 g c5 x 1-1
        XCLAIM K0 g c5 0 1-1 IDLE 9223372036854775807
        XCLAIM K0 g c5 0 1-1 TIME 9223372036854775807
        XCLAIM K0 g c5 9223372036854775807 1-1
        XCLAIM K0 g c5 9223372036854775808 1-1
        XCLAIM K0 g c5 0 1-1 JUSTID JUSTID
        XCLAIM K0 g c5 0 1-1 IDLE 1000 TIME 1000
        XPENDING K0 g - + 10
        XINFO CONSUMERS K0 g
        XCLAIM K0 g c6 0 1-1 FORCE RETRYCOUNT 3 IDLE 5000 JUSTID
        XPENDING K0 g - + 10
        XCLAIM K0 g c6 0 1-1 4-1 5-1 1-1
        XPENDING K0 g - + 10
        XINFO STREAM K0 FULL
        SET K1 s
        XCLAIM K1 g c 0 1-1
        XCLAIM K1 g c x 1-1
        "#,
    );
}

/// XAUTOCLAIM: the cursor (from `0`, from an ID, exclusive, `-`, `+`; `0-0` when the PEL
/// is scanned to its end), COUNT (bounds, errors), JUSTID, min-idle-time (huge: nothing),
/// entries deleted since (listed as deleted, dropped from the PEL), every error.
#[test]
fn xautoclaim_matches_redis() {
    run_both_protocols(
        2,
        r#"
        XAUTOCLAIM K0 g c 0 0
        XADD K0 1-1 a 1
        XADD K0 2-1 b 2
        XADD K0 3-1 c 3
        XADD K0 4-1 d 4
        XADD K0 5-1 e 5
        XGROUP CREATE K0 g 0
        XAUTOCLAIM K0 g c 0 0
        XREADGROUP GROUP g c1 STREAMS K0 >
        XAUTOCLAIM K0 g c2 0 0 COUNT 2
        XAUTOCLAIM K0 g c2 0 3-1 COUNT 2
        XAUTOCLAIM K0 g c2 0 5-1 COUNT 2
        XAUTOCLAIM K0 g c2 0 (5-1
        XAUTOCLAIM K0 g c2 0 (4-1
        XAUTOCLAIM K0 g c2 0 - COUNT 1
        XAUTOCLAIM K0 g c2 0 + COUNT 1
        XAUTOCLAIM K0 g c2 0 3 COUNT 1
        XAUTOCLAIM K0 g c3 3600000 0
        XAUTOCLAIM K0 g c3 0 0 JUSTID
        XPENDING K0 g - + 10
        XDEL K0 2-1 4-1
        XAUTOCLAIM K0 g c4 0 0
        XPENDING K0 g - + 10
        XAUTOCLAIM K0 g c4 0 0 JUSTID
        XADD K0 6-1 f 6
        XADD K0 7-1 g 7
        XREADGROUP GROUP g c1 STREAMS K0 >
        XDEL K0 6-1
        XAUTOCLAIM K0 g c5 0 0 COUNT 1 JUSTID
        XAUTOCLAIM K0 g c5 0 0 COUNT 3
        XPENDING K0 g - + 10
        XAUTOCLAIM K0 g c5 0 0 COUNT 0
        XAUTOCLAIM K0 g c5 0 0 COUNT -1
        XAUTOCLAIM K0 g c5 0 0 COUNT x
        XAUTOCLAIM K0 g c5 0 0 COUNT 9223372036854775807
        XAUTOCLAIM K0 g c5 0 0 COUNT 100000000
        XAUTOCLAIM K0 g c5 0 0 COUNT 1 COUNT 2
        XAUTOCLAIM K0 g c5 0 0 count 1 justid
        XAUTOCLAIM K0 g c5 0 0 FOO
        XAUTOCLAIM K0 g c5 0 0 COUNT
        XAUTOCLAIM K0 g c5 x 0
        XAUTOCLAIM K0 g c5 -1 0
        XAUTOCLAIM K0 g c5 0 x
        XAUTOCLAIM K0 g c5 0 (
        XAUTOCLAIM K0 g c5 0
        XAUTOCLAIM K0 nog c5 0 0
        XAUTOCLAIM K9 g c5 0 0
        XAUTOCLAIM K9 g c5 0 0 COUNT 0
        XAUTOCLAIM K0 g c5 0 0 JUSTID COUNT 1
        XCLAIM K0 g c6 0 5-1 IDLE 500000
        XAUTOCLAIM K0 g c7 400000 0
        XAUTOCLAIM K0 g c7 400000 0 JUSTID
        XPENDING K0 g
        XINFO CONSUMERS K0 g
        XINFO GROUPS K0
        SET K1 s
        XAUTOCLAIM K1 g c 0 0
        XAUTOCLAIM K1 g c x 0
        "#,
    );
}

/// XINFO STREAM (and FULL, with COUNT: 0 means all, entries and PELs cut at COUNT),
/// GROUPS and CONSUMERS on streams with groups, consumers and pending entries; HELP;
/// every error, a missing key, a key of another type.
#[test]
fn xinfo_matches_redis() {
    let mut text = String::from(
        r#"
        XINFO STREAM K0
        XINFO STREAM K0 FULL
        XINFO GROUPS K0
        XINFO CONSUMERS K0 g
        XINFO HELP
        XINFO help
        XINFO HELP extra
        XINFO FOO
        XINFO FOO K0
        XINFO
        XINFO STREAM
        XINFO GROUPS
        XINFO CONSUMERS K0
        XGROUP CREATE K0 g $ MKSTREAM
        XINFO STREAM K0
        XINFO STREAM K0 FULL
        XINFO GROUPS K0
        XINFO CONSUMERS K0 g
        "#,
    );
    text.push_str(&xadds("K0", 1, 25, |i| format!("value{i}")));
    text.push_str(
        r#"
        XINFO STREAM K0 FULL COUNT
        XINFO STREAM K0 FULL COUNT x
        XINFO STREAM K0 FULL COUNT -1
        XINFO STREAM K0 FULL COUNT 0
        XINFO STREAM K0 FULL COUNT 3
        XINFO STREAM K0 full count 1
        XINFO STREAM K0 FOO
        XINFO STREAM K0 FULL FOO 1
        XINFO STREAM K0 FULL COUNT 1 extra
        XINFO STREAM K0 COUNT 1
        XINFO CONSUMERS K0 nog
        XINFO GROUPS K0 extra
        XINFO CONSUMERS K0 g extra
        XGROUP CREATE K0 a 0
        XGROUP CREATE K0 b 3-1
        XGROUP SETID K0 g 0
        XREADGROUP GROUP g c2 COUNT 12 STREAMS K0 >
        XREADGROUP GROUP g c1 COUNT 5 STREAMS K0 >
        XREADGROUP GROUP a c1 COUNT 1 STREAMS K0 >
        XREADGROUP GROUP a c0 NOACK COUNT 1 STREAMS K0 >
        XGROUP CREATECONSUMER K0 b idle
        XACK K0 g 2-1 3-1
        XINFO STREAM K0
        XINFO STREAM K0 FULL
        XINFO STREAM K0 FULL COUNT 2
        XINFO STREAM K0 FULL COUNT 0
        XINFO GROUPS K0
        XINFO CONSUMERS K0 g
        XINFO CONSUMERS K0 a
        XINFO CONSUMERS K0 b
        XDEL K0 1-1 25-1
        XINFO STREAM K0
        XINFO STREAM K0 FULL COUNT 1
        SET K1 s
        XINFO STREAM K1
        XINFO STREAM K1 FULL
        XINFO GROUPS K1
        XINFO CONSUMERS K1 g
        XINFO STREAM K2
        XINFO GROUPS K2
        "#,
    );
    run_both_protocols(3, &text);
}

/// XINFO GROUPS' entries-read and lag as Redis estimates them: after adds, reads,
/// deletions before, at and after the group's last-delivered ID, trims, XSETID with
/// ENTRIESADDED and MAXDELETEDID, XGROUP CREATE and SETID with and without ENTRIESREAD,
/// last-delivered IDs past the end and before the first entry, an emptied stream.
#[test]
fn entries_read_and_lag_match_redis() {
    let mut text = String::from(
        "XGROUP CREATE K0 early 0 MKSTREAM
        XGROUP CREATE K0 late $
        XINFO GROUPS K0
        ",
    );
    text.push_str(&xadds("K0", 1, 10, |i| i.to_string()));
    text.push_str(
        "XINFO GROUPS K0
        XGROUP CREATE K0 mid 5-1
        XGROUP CREATE K0 midread 5-1 ENTRIESREAD 5
        XGROUP CREATE K0 wrongread 5-1 ENTRIESREAD 9
        XGROUP CREATE K0 past 99-1
        XGROUP CREATE K0 zero 0 ENTRIESREAD 0
        XINFO GROUPS K0
        XREADGROUP GROUP early c COUNT 3 STREAMS K0 >
        XREADGROUP GROUP mid c COUNT 1 STREAMS K0 >
        XREADGROUP GROUP zero c COUNT 2 STREAMS K0 >
        XINFO GROUPS K0
        XDEL K0 8-1
        XINFO GROUPS K0
        XDEL K0 2-1
        XINFO GROUPS K0
        XDEL K0 1-1
        XINFO GROUPS K0
        XREADGROUP GROUP early c COUNT 3 STREAMS K0 >
        XREADGROUP GROUP late c STREAMS K0 >
        XINFO GROUPS K0
        XADD K0 11-1 f 11
        XADD K0 12-1 f 12
        XINFO GROUPS K0
        XREADGROUP GROUP late c STREAMS K0 >
        XREADGROUP GROUP mid c STREAMS K0 >
        XINFO GROUPS K0
        XTRIM K0 MAXLEN 4
        XINFO GROUPS K0
        XINFO STREAM K0
        XREADGROUP GROUP early c STREAMS K0 >
        XINFO GROUPS K0
        XGROUP SETID K0 early 0
        XINFO GROUPS K0
        XGROUP SETID K0 early 10-1
        XINFO GROUPS K0
        XGROUP SETID K0 early 10-1 ENTRIESREAD 3
        XINFO GROUPS K0
        XGROUP SETID K0 early $
        XINFO GROUPS K0
        XGROUP SETID K0 early 9-1 ENTRIESREAD 100
        XINFO GROUPS K0
        XSETID K0 12-1 ENTRIESADDED 50
        XINFO GROUPS K0
        XINFO STREAM K0
        XSETID K0 20-1 MAXDELETEDID 15-1
        XINFO GROUPS K0
        XSETID K0 20-1 ENTRIESADDED 50 MAXDELETEDID 0-0
        XINFO GROUPS K0
        XADD K0 21-1 f 21
        XINFO GROUPS K0
        XREADGROUP GROUP past c STREAMS K0 >
        XREADGROUP GROUP wrongread c STREAMS K0 >
        XINFO GROUPS K0
        XTRIM K0 MAXLEN 0
        XINFO GROUPS K0
        XINFO STREAM K0
        XADD K0 22-1 f 22
        XINFO GROUPS K0
        XGROUP CREATE K0 new 0
        XINFO GROUPS K0
        XREADGROUP GROUP new c STREAMS K0 >
        XINFO GROUPS K0
        ",
    );
    // Lag with the first entry deleted, in the middle of a stream of several nodes.
    text.push_str(&xadds("K1", 1, 150, |i| i.to_string()));
    text.push_str(
        "XGROUP CREATE K1 g 0
        XGROUP CREATE K1 h 120-1
        XREADGROUP GROUP g c COUNT 60 STREAMS K1 >
        XINFO GROUPS K1
        XDEL K1 1-1
        XINFO GROUPS K1
        XTRIM K1 MINID ~ 110
        XINFO GROUPS K1
        XINFO STREAM K1
        XREADGROUP GROUP g c COUNT 60 STREAMS K1 >
        XREADGROUP GROUP h c COUNT 10 STREAMS K1 >
        XINFO GROUPS K1
        XDEL K1 150-1
        XINFO GROUPS K1
        XREADGROUP GROUP g c STREAMS K1 >
        XREADGROUP GROUP h c STREAMS K1 >
        XINFO GROUPS K1
        ",
    );
    run_both_protocols(2, &text);
}

/// XSETID: forward, equal, back (refused below the last entry, allowed on an emptied
/// stream), ENTRIESADDED (not below the length), MAXDELETEDID (not above the new ID),
/// incomplete IDs, the last possible ID (then XADD is refused), every error, a missing
/// key and a key of another type; XINFO STREAM after each change.
#[test]
fn xsetid_matches_redis() {
    run_both_protocols(
        3,
        r#"
        XSETID K0 1-1
        XSETID K0 1-1 ENTRIESADDED 5
        XADD K0 1-1 a 1
        XSETID K0 5-5
        XINFO STREAM K0
        XADD K0 5-5 a 1
        XADD K0 5-* a 1
        XSETID K0 5-6
        XSETID K0 1-0
        XSETID K0 1-1
        XINFO STREAM K0
        XSETID K0 5-5 ENTRIESADDED 0
        XSETID K0 5-5 ENTRIESADDED 1 MAXDELETEDID 0-1
        XSETID K0 5-5 ENTRIESADDED 2 MAXDELETEDID 9-9
        XSETID K0 6-6 ENTRIESADDED 10 MAXDELETEDID 2-2
        XINFO STREAM K0
        XSETID K0 6-6 ENTRIESADDED -1
        XSETID K0 6-6 ENTRIESADDED x
        XSETID K0 6-6 MAXDELETEDID x
        XSETID K0 6-6 ENTRIESADDED
        XSETID K0 6-6 MAXDELETEDID
        XSETID K0 6-6 FOO 1
        XSETID K0 6-6 entriesadded 11 maxdeletedid 3-3
        XSETID K0 6-6 ENTRIESADDED 12 ENTRIESADDED 13
        XSETID K0 x
        XSETID K0 6-
        XSETID K0 (6
        XSETID K0 $
        XSETID K0 -
        XSETID K0 +
        XSETID K0
        XSETID
        XSETID K9 1-1
        XSETID K9 1-1 ENTRIESADDED 5
        XSETID K9 x
        XSETID K0 6-6 MAXDELETEDID 6-7
        XSETID K0 6-6 MAXDELETEDID 6-6
        XSETID K0 6-6 ENTRIESADDED 9
        XSETID K0 7
        XINFO STREAM K0
        XSETID K0 0-0
        XSETID K0 18446744073709551615-18446744073709551615
        XADD K0 * a 1
        XADD K0 18446744073709551615-* a 1
        XINFO STREAM K0
        XDEL K0 1-1 5-6
        XSETID K0 0-0
        XSETID K0 0-1
        XINFO STREAM K0
        XADD K0 0-2 b 2
        XADD K0 0-* c 3
        XINFO STREAM K0
        XGROUP CREATE K1 g $ MKSTREAM
        XSETID K1 5-0
        XGROUP SETID K1 g $
        XINFO GROUPS K1
        XADD K1 99999999999999-1 a 1
        XADD K1 * a 1
        XSETID K1 99999999999999-9
        XADD K1 * a 1
        XRANGE K1 - +
        SET K2 s
        XSETID K2 1-1
        XSETID K2 x
        "#,
    );
}

/// TYPE and OBJECT ENCODING of a stream; WRONGTYPE both ways (string, list, set, hash
/// and sorted-set commands on a stream; stream commands on keys of other types); DEL,
/// EXISTS, RENAME, RENAMENX and COPY (groups, consumers and PEL go along: XINFO STREAM
/// FULL of the copy) with the keys in every layout; EXPIRE and PERSIST of a stream.
#[test]
fn types_and_keyspace_commands_match_redis() {
    run_everywhere(
        4,
        r#"
        XADD K0 1-1 a 1
        XADD K0 2-1 b 2
        XGROUP CREATE K0 g 0
        XREADGROUP GROUP g c COUNT 1 STREAMS K0 >
        TYPE K0
        OBJECT ENCODING K0
        TYPE K9
        GET K0
        SET K0 x GET
        APPEND K0 x
        INCR K0
        STRLEN K0
        GETDEL K0
        GETRANGE K0 0 1
        LPUSH K0 x
        RPUSH K0 x
        LLEN K0
        LRANGE K0 0 -1
        SADD K0 x
        SMEMBERS K0
        HSET K0 f v
        HGETALL K0
        ZADD K0 1 m
        ZRANGE K0 0 -1
        MGET K0 K1
        COPY K0 K1
        XINFO STREAM K1 FULL
        XPENDING K1 g
        XADD K1 3-1 c 3
        XLEN K0
        XLEN K1
        DEL K0
        XINFO GROUPS K1
        RENAME K1 K2
        XINFO GROUPS K2
        XREADGROUP GROUP g c STREAMS K2 0
        EXISTS K0 K1 K2
        OBJECT ENCODING K2
        SET K1 v
        COPY K2 K1
        COPY K2 K1 REPLACE
        TYPE K1
        XRANGE K1 - +
        XGROUP CREATE K1 g2 $
        XINFO GROUPS K2
        XINFO GROUPS K1
        RENAMENX K1 K2
        RENAMENX K1 K3
        XINFO GROUPS K3
        EXISTS K1 K2 K3
        EXPIRE K3 1000
        ~TTL K3
        PERSIST K3
        TTL K3
        SET K0 s
        RPUSH K1 l
        SADD K2 s
        HSET K3 f v
        XADD K0 1-1 a 1
        XADD K1 1-1 a 1
        XADD K2 1-1 a 1
        XADD K3 1-1 a 1
        XLEN K1
        XRANGE K2 - +
        XGROUP CREATE K3 g 0
        XREAD STREAMS K0 K1 0 0
        DEL K0 K1 K2 K3
        DBSIZE
        "#,
    );
}

/// SCAN … TYPE stream finds the streams and only them, among keys of every type; TYPE
/// is case-insensitive.
#[test]
fn scan_type_stream_matches_redis() {
    each_thread_count(|d, ctx| {
        let keys = Layout::CrossShard.keys(40);
        let mut text = String::from("FLUSHALL\n");
        for (i, k) in keys.iter().enumerate() {
            text.push_str(&match i % 5 {
                0 | 1 => format!("XADD {k} 1-1 f v\n"),
                2 => format!("SET {k} v\n"),
                3 => format!("RPUSH {k} v\n"),
                _ => format!("XGROUP CREATE {k} g $ MKSTREAM\n"),
            });
        }
        run(d, &[], ctx, &text);
        for ty in ["stream", "STREAM", "string", "list"] {
            let mut sets = Vec::new();
            for raw in [&mut d.g, &mut d.r] {
                let mut found = BTreeSet::new();
                let calls = scan_all(raw, &["TYPE", ty, "COUNT", "7"], |_, ks| {
                    found.extend(ks);
                });
                assert!(calls.is_ok(), "{ctx}: SCAN TYPE {ty}: {calls:?}");
                sets.push(found);
            }
            assert_eq!(sets[0], sets[1], "{ctx}: SCAN TYPE {ty} (goblin, redis)");
            assert!(!sets[1].is_empty(), "{ctx}: SCAN TYPE {ty} found nothing");
        }
    });
}

/// The stream commands inside MULTI/EXEC, with the keys in every layout: writes and
/// reads of several streams and groups in one transaction, XREAD BLOCK (never blocks:
/// nil when nothing is there), XREADGROUP BLOCK, errors at run time (WRONGTYPE, NOGROUP)
/// beside successes, errors at queue time (arity: EXECABORT), DISCARD.
#[test]
fn streams_inside_multi_exec_match_redis() {
    run_everywhere(
        3,
        r#"
        MULTI
        XADD K0 1-1 a 1
        XADD K1 1-1 b 1
        XGROUP CREATE K0 g 0
        XGROUP CREATE K1 g $
        XREADGROUP GROUP g c STREAMS K0 K1 > >
        XREAD STREAMS K0 K1 0 0
        XLEN K0
        EXEC
        MULTI
        XREAD BLOCK 0 STREAMS K0 K1 $ $
        XREAD BLOCK 100 STREAMS K2 0
        XREADGROUP GROUP g c BLOCK 0 STREAMS K0 K1 > >
        XADD K1 2-1 c 2
        XREADGROUP GROUP g c BLOCK 0 STREAMS K1 >
        XREAD BLOCK 0 STREAMS K1 1-1
        XPENDING K0 g - + 10
        XPENDING K1 g
        XINFO CONSUMERS K1 g
        XINFO STREAM K0 FULL
        XCLAIM K0 g c2 0 1-1 JUSTID
        XAUTOCLAIM K1 g c2 0 0
        XACK K0 g 1-1
        EXEC
        MULTI
        SET K2 s
        XADD K2 1-1 a 1
        XREADGROUP GROUP nog c STREAMS K0 >
        XADD K0 0-0 a 1
        XLEN K2
        XTRIM K0 MAXLEN 0
        XSETID K0 9-9
        XINFO STREAM K0
        EXEC
        MULTI
        XADD K0 10-1 a
        XLEN K0
        EXEC
        XLEN K0
        MULTI
        XADD K0 10-1 a 1
        DISCARD
        XLEN K0
        XINFO GROUPS K1
        "#,
    );
}

/// `*` IDs: the milliseconds are the server's clock (compared within a tolerance, as the
/// two servers read their clocks at different moments) and the sequence starts at 0;
/// consecutive `*` IDs increase; `ms-*` with ms at or after the last ID.
#[test]
fn auto_ids_follow_the_clock() {
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    let parse = |who: &str, reply: &[u8]| -> (u64, u64) {
        let id = reply
            .strip_prefix(b"$")
            .and_then(|r| r.split(|&b| b == b'\n').nth(1))
            .and_then(|id| std::str::from_utf8(id).ok())
            .and_then(|id| id.trim_end().split_once('-'))
            .and_then(|(ms, seq)| Some((ms.parse().ok()?, seq.parse().ok()?)));
        id.unwrap_or_else(|| panic!("{who}: XADD answered {}", show(reply)))
    };
    each_thread_count(|d, ctx| {
        let before = now_ms();
        let mut last = [(0, 0); 2];
        for i in 0..50 {
            let line = format!("XADD s * n {i}");
            let ids = [
                parse("goblin", &d.g.cmd_str(&line)),
                parse("redis", &d.r.cmd_str(&line)),
            ];
            for (side, who) in ["goblin", "redis"].iter().enumerate() {
                let id = ids[side];
                assert!(
                    id > last[side],
                    "{ctx}: {who}: {id:?} after {:?}",
                    last[side]
                );
                assert!(
                    id.0 + 1000 >= before && id.0 <= now_ms() + 1000,
                    "{ctx}: {who}'s `*` ID {id:?} is not the clock ({before} ms)"
                );
            }
            last = ids;
        }
        // The first `*` ID of a new stream has the sequence 0.
        let first_g = parse("goblin", &d.g.cmd_str("XADD fresh * a 1"));
        let first_r = parse("redis", &d.r.cmd_str("XADD fresh * a 1"));
        assert_eq!((first_g.1, first_r.1), (0, 0), "{ctx}");
        let ms = now_ms() + 3_600_000;
        run(
            d,
            &[],
            ctx,
            &format!(
                "XADD fresh {ms}-* a 2\nXADD fresh {ms}-* a 3\nXADD fresh * a 4\nXADD fresh {ms} \
                 a 5\nXLEN fresh\nXRANGE fresh {ms} +"
            ),
        );
    });
}

/// One of `words`, owned.
fn pick(rng: &mut Rng, words: &[&str]) -> String {
    (*rng.pick(words)).to_string()
}

/// A value for the listpack-size test: integers of every encoding width (listpacks store
/// canonical integers as integers, in 1 to 9 bytes), strings that look like integers but
/// are not canonical, and strings of every length class around listpack's thresholds.
fn sized_value(rng: &mut Rng) -> String {
    match rng.below(40) {
        0..=3 => rng.range(0, 127).to_string(),
        4..=6 => rng.range(-4096, 4095).to_string(),
        7 => rng.range(-32768, 32767).to_string(),
        8 => rng.range(-8_388_608, 8_388_607).to_string(),
        9 => rng.range(-2_147_483_648, 2_147_483_647).to_string(),
        10 => (rng.next_u64() as i64).to_string(),
        11 => pick(
            rng,
            &["007", "-0", "+1", "1e3", " 1", "9223372036854775808", ""],
        ),
        12..=29 => "s".repeat(rng.range(1, 63) as usize),
        30..=33 => "m".repeat(rng.range(60, 70) as usize),
        34..=38 => "t".repeat(rng.range(100, 300) as usize),
        _ => "l".repeat(rng.range(4090, 4100) as usize),
    }
}

/// Node boundaries as a listpack's byte size decides them: entries whose fields are the
/// node's master fields or not, values stored as integers of every width or as strings of
/// every length class, IDs whose deltas from the node's master ID take every width, and
/// deleted entries still in their nodes; `radix-tree-keys` (the node count) after the
/// adds, and approximate trims (which remove whole nodes only) step by step. Seeded; the
/// seed is printed.
#[test]
fn node_boundaries_follow_listpack_sizes() {
    let seeds = seeds("stream listpack sizes", 1);
    each_thread_count(|d, ctx| {
        for &seed in &seeds {
            let mut rng = Rng::new(seed);
            let ctx = format!("{ctx}, GOBLIN_DIFF_SEED={seed}");
            let keys = Layout::CrossShard.keys(3);
            let mut cmds = vec![cmd(&["FLUSHALL"])];
            let mut last = [(1u64, 0u64); 3];
            let mut added: Vec<Vec<String>> = vec![Vec::new(); 3];
            for _ in 0..1200 {
                let k = rng.below(3);
                let (ms, seq) = last[k];
                // Stream 2's IDs jump by deltas of every width, in milliseconds or (within
                // one millisecond) in sequence numbers.
                let id = match (k, rng.below(3)) {
                    (2, 0) => (ms, seq + *rng.pick(&[1, 200, 70_000, 1 << 40])),
                    (2, _) => (
                        ms + *rng.pick(&[1, 60, 5000, 70_000, 20_000_000, 5_000_000_000]),
                        *rng.pick(&[0, 1, 200, 70_000]),
                    ),
                    _ => (ms + 1, 0),
                };
                last[k] = id;
                let id = format!("{}-{}", id.0, id.1);
                let mut c = vec!["XADD".to_string(), keys[k].clone(), id.clone()];
                added[k].push(id);
                let fields: &[&str] = match (k, rng.below(4)) {
                    (1, 0) => &["a", "b", "c"],
                    (1, 1) => &["f"],
                    (1, 2) => &["g", "f"],
                    _ => &["f", "g"],
                };
                for f in fields {
                    c.push((*f).to_string());
                    c.push(sized_value(&mut rng));
                }
                cmds.push(cmd(&c));
                if rng.percent(8) {
                    let back = rng.below(added[k].len().min(30));
                    let id = added[k][added[k].len() - 1 - back].clone();
                    cmds.push(cmd(&["XDEL", &keys[k], &id]));
                }
            }
            for k in &keys {
                cmds.push(cmd(&["XINFO", "STREAM", k]));
                cmds.push(cmd(&["XLEN", k]));
                for n in [380, 330, 300, 250, 180, 120, 101, 99, 50, 10, 1, 0] {
                    cmds.push(cmd(&["XTRIM", k, "MAXLEN", "~", &n.to_string()]));
                    cmds.push(cmd(&["XINFO", "STREAM", k]));
                }
                cmds.push(cmd(&["XRANGE", k, "-", "+", "COUNT", "3"]));
            }
            run_cmds(d, &cmds, &ctx);
        }
    });
}

/// A consumer name of a random command.
fn consumer(rng: &mut Rng) -> String {
    format!("c{}", rng.below(3))
}

/// A group name of a random command (now and then one that does not exist).
fn group(rng: &mut Rng) -> String {
    if rng.percent(3) {
        "nog".to_string()
    } else {
        format!("g{}", rng.below(2))
    }
}

/// An ID for XDEL, XACK, XCLAIM and ranges: one that was (or may have been) added, now
/// and then an incomplete one or one past the end.
fn some_id(rng: &mut Rng, top: u64) -> String {
    let ms = rng.range(1, top as i64 + 2);
    match rng.below(10) {
        0 => ms.to_string(),
        1 => format!("{ms}-0"),
        _ => format!("{ms}-{}", rng.below(3)),
    }
}

/// The generator's state of one stream key: the next ID's milliseconds.
#[derive(Clone, Copy)]
struct Top(u64);

/// A random command of group traffic over `keys` (each with its [`Top`]).
fn random_command(rng: &mut Rng, keys: &[String], tops: &mut [Top]) -> Cmd {
    let k = rng.below(keys.len());
    let key = keys[k].clone();
    let top = tops[k].0;
    let w = |s: &str| s.to_string();
    let words: Vec<String> = match rng.below(106) {
        0..=34 => {
            let mut c = vec![w("XADD"), key.clone()];
            if rng.percent(5) {
                c.push(w("NOMKSTREAM"));
            }
            if rng.percent(15) {
                let approx = rng.percent(60);
                if rng.percent(60) {
                    c.push(w("MAXLEN"));
                    c.push(w(if approx { "~" } else { "=" }));
                    c.push(rng.range(20, 150).to_string());
                } else {
                    c.push(w("MINID"));
                    c.push(w(if approx { "~" } else { "=" }));
                    c.push(top.saturating_sub(rng.range(10, 150) as u64).to_string());
                }
                if approx && rng.percent(30) {
                    c.push(w("LIMIT"));
                    c.push(pick(rng, &["0", "50", "100", "200"]));
                }
            }
            let next = top + rng.range(0, 2) as u64;
            tops[k].0 = next + 1;
            c.push(match rng.below(10) {
                0 => format!("{next}-*"),
                1 => next.to_string(),
                _ => format!("{next}-{}", rng.below(3)),
            });
            for f in 0..rng.range(1, 3) {
                c.push(format!("f{f}"));
                c.push(if rng.percent(3) {
                    "V".repeat(rng.range(500, 1500) as usize)
                } else {
                    format!("v{}", rng.below(1000))
                });
            }
            c
        }
        35..=38 => {
            let mut c = vec![w("XDEL"), key.clone()];
            for _ in 0..rng.range(1, 4) {
                c.push(some_id(rng, top));
            }
            c
        }
        39..=40 => {
            let mut c = vec![w("XTRIM"), key.clone()];
            if rng.percent(50) {
                c.extend([w("MAXLEN"), pick(rng, &["~", "="])]);
                c.push(rng.range(0, 150).to_string());
            } else {
                c.extend([w("MINID"), pick(rng, &["~", "="])]);
                c.push(top.saturating_sub(rng.range(0, 150) as u64).to_string());
            }
            if c[3] == "~" && rng.percent(30) {
                c.extend([w("LIMIT"), pick(rng, &["0", "10", "100"])]);
            }
            c
        }
        41..=55 => {
            let mut c = vec![w("XREADGROUP"), w("GROUP"), group(rng), consumer(rng)];
            if rng.percent(60) {
                c.extend([w("COUNT"), rng.range(1, 20).to_string()]);
            }
            if rng.percent(10) {
                c.push(w("NOACK"));
            }
            c.push(w("STREAMS"));
            let n = if rng.percent(25) { keys.len() } else { 1 };
            let first = if n == 1 { k } else { 0 };
            let ids: Vec<String> = (0..n)
                .map(|_| {
                    if rng.percent(75) {
                        w(">")
                    } else {
                        pick(rng, &["0", "0-0"])
                    }
                })
                .collect();
            c.extend(keys[first..first + n].iter().cloned());
            c.extend(ids);
            c
        }
        56..=63 => {
            let mut c = vec![w("XACK"), key.clone(), group(rng)];
            for _ in 0..rng.range(1, 5) {
                c.push(some_id(rng, top));
            }
            c
        }
        64..=69 => {
            let mut c = vec![w("XCLAIM"), key.clone(), group(rng), consumer(rng), w("0")];
            for _ in 0..rng.range(1, 4) {
                c.push(some_id(rng, top));
            }
            if rng.percent(40) {
                c.extend([w("IDLE"), w("0")]);
            }
            if rng.percent(30) {
                c.push(w("FORCE"));
            }
            if rng.percent(40) {
                c.push(w("JUSTID"));
            }
            if rng.percent(10) {
                c.extend([w("RETRYCOUNT"), rng.range(0, 5).to_string()]);
            }
            c
        }
        70..=73 => {
            let mut c = vec![
                w("XAUTOCLAIM"),
                key.clone(),
                group(rng),
                consumer(rng),
                w("0"),
                pick(rng, &["0", "0-0", "-"]),
            ];
            if rng.percent(60) {
                c.extend([w("COUNT"), rng.range(1, 10).to_string()]);
            }
            if rng.percent(70) {
                c.push(w("JUSTID"));
            }
            c
        }
        74..=78 => vec![w("XPENDING"), key.clone(), group(rng)],
        79..=80 => {
            let mut c = vec![w("XPENDING"), key.clone(), group(rng), w("-"), w("+")];
            c.push(rng.range(1, 20).to_string());
            if rng.percent(40) {
                c.push(consumer(rng));
            }
            c
        }
        81..=83 => vec![w("XLEN"), key.clone()],
        84..=87 => {
            let rev = rng.percent(30);
            let (a, b) = if rng.percent(50) {
                (w("-"), w("+"))
            } else {
                (some_id(rng, top), some_id(rng, top))
            };
            let mut c = if rev {
                vec![w("XREVRANGE"), key.clone(), b, a]
            } else {
                vec![w("XRANGE"), key.clone(), a, b]
            };
            if rng.percent(50) {
                c.extend([w("COUNT"), rng.range(1, 30).to_string()]);
            }
            c
        }
        88..=90 => vec![w("XINFO"), w("GROUPS"), key.clone()],
        91 => vec![w("XINFO"), w("STREAM"), key.clone()],
        92 => vec![w("XINFO"), w("CONSUMERS"), key.clone(), group(rng)],
        93 => {
            let mut c = vec![w("XGROUP"), w("SETID"), key.clone(), group(rng)];
            c.push(if rng.percent(50) {
                w("$")
            } else {
                some_id(rng, top)
            });
            if rng.percent(30) {
                c.extend([w("ENTRIESREAD"), rng.range(0, 50).to_string()]);
            }
            c
        }
        94 => vec![
            w("XGROUP"),
            w("DELCONSUMER"),
            key.clone(),
            group(rng),
            consumer(rng),
        ],
        95 => {
            // A group destroyed and created again (or BUSYGROUP when it exists).
            let g = group(rng);
            if rng.percent(30) {
                vec![w("XGROUP"), w("DESTROY"), key.clone(), g]
            } else {
                vec![
                    w("XGROUP"),
                    w("CREATE"),
                    key.clone(),
                    g,
                    w("0"),
                    w("MKSTREAM"),
                ]
            }
        }
        96 => {
            let mut c = vec![
                w("XREAD"),
                w("COUNT"),
                rng.range(1, 5).to_string(),
                w("STREAMS"),
            ];
            c.extend(keys.iter().cloned());
            for _ in keys {
                c.push(some_id(rng, top));
            }
            c
        }
        97 => vec![
            w("XINFO"),
            w("STREAM"),
            key.clone(),
            w("FULL"),
            w("COUNT"),
            w("5"),
        ],
        98..=99 => vec![w("XGROUP"), w("CREATE"), key.clone(), group(rng), w("$")],
        100 => {
            // A stream copied or renamed over another (across shards in some layouts):
            // the destination's next IDs follow the larger of the two.
            let d = rng.below(keys.len());
            tops[d].0 = tops[d].0.max(top);
            if rng.percent(70) {
                vec![w("COPY"), key.clone(), keys[d].clone(), w("REPLACE")]
            } else {
                vec![w("RENAME"), key.clone(), keys[d].clone()]
            }
        }
        101 => vec![w(if rng.percent(50) { "DEL" } else { "TYPE" }), key.clone()],
        102 => {
            // The last ID moved forward, now and then with the counters.
            let to = top + rng.range(0, 5) as u64;
            tops[k].0 = to + 1;
            let mut c = vec![w("XSETID"), key.clone(), format!("{to}-0")];
            if rng.percent(40) {
                c.extend([w("ENTRIESADDED"), rng.range(0, 2000).to_string()]);
            }
            if rng.percent(40) {
                c.extend([w("MAXDELETEDID"), some_id(rng, to.saturating_sub(2))]);
            }
            c
        }
        103 => vec![
            w("XGROUP"),
            w("CREATECONSUMER"),
            key.clone(),
            group(rng),
            consumer(rng),
        ],
        _ => {
            let mut c = vec![w("XREAD"), w("STREAMS")];
            c.extend(keys.iter().cloned());
            c.extend(keys.iter().map(|_| w("$")));
            if rng.percent(50) {
                c.insert(1, w("COUNT"));
                c.insert(2, w("2"));
            }
            c
        }
    };
    cmd(&words)
}

/// Seeded random sequences of stream and group traffic (XADD with explicit increasing
/// IDs and now and then MAXLEN or MINID, `=` or `~`; XDEL, XTRIM, XREADGROUP `>` and `0`
/// by three consumers of two groups, XACK, XCLAIM with IDLE 0, FORCE or JUSTID,
/// XAUTOCLAIM, XPENDING, XLEN, XRANGE, XINFO, XREAD, XSETID, XGROUP, and now and then a
/// COPY, RENAME or DEL of a stream) over three streams in every layout, with
/// each thread count, in RESP2 or RESP3, compared reply by reply; then every stream's
/// full state.
#[test]
fn random_sequences_match_redis() {
    let seeds = seeds("stream random sequences", 2);
    each_thread_count(|d, ctx| {
        for &seed in &seeds {
            for layout in LAYOUTS {
                let mut rng = Rng::new(seed ^ layout as u64);
                let version = if rng.percent(50) { "2" } else { "3" };
                hello(d, version);
                let ctx = format!("{ctx}, {layout:?}, RESP{version}, GOBLIN_DIFF_SEED={seed}");
                let keys = layout.keys(3);
                let mut tops = vec![Top(1); keys.len()];
                let mut cmds = vec![cmd(&["FLUSHALL"])];
                for k in &keys {
                    for g in ["g0", "g1"] {
                        cmds.push(cmd(&["XGROUP", "CREATE", k, g, "0", "MKSTREAM"]));
                    }
                }
                for _ in 0..1200 {
                    if rng.percent(2) {
                        cmds.push(cmd(&["MULTI"]));
                        for _ in 0..rng.range(1, 4) {
                            cmds.push(random_command(&mut rng, &keys, &mut tops));
                        }
                        cmds.push(cmd(&["EXEC"]));
                    } else {
                        cmds.push(random_command(&mut rng, &keys, &mut tops));
                    }
                }
                for k in &keys {
                    cmds.push(cmd(&["XINFO", "STREAM", k, "FULL", "COUNT", "0"]));
                    cmds.push(cmd(&["XINFO", "GROUPS", k]));
                    for g in ["g0", "g1"] {
                        cmds.push(cmd(&["XPENDING", k, g, "-", "+", "1000"]));
                        cmds.push(cmd(&["XINFO", "CONSUMERS", k, g]));
                    }
                }
                run_cmds(d, &cmds, &ctx);
            }
        }
        hello(d, "2");
    });
}
