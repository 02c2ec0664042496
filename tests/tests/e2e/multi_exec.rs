//! MULTI / EXEC / DISCARD against redis-server, byte for byte (issue 3), with the
//! block's keys spread over every shard; each script runs command by command and again
//! as one pipelined write.

use goblin_tests::Differential;
use goblin_tests::cmd::{Cmd, script_commands};
use goblin_tests::keys::{THREAD_COUNTS, spread};

/// Twelve keys: `K0`…`K11` in the scripts; with 4 threads `Ki` lives on shard `i % 4`
/// (and with 2 threads, keys 0, 1, 4, 5… on shard 0, the others on shard 1).
fn keys() -> Vec<String> {
    spread("k", 4, 3)
}

/// The script's commands, one per line (words split on blanks), `Ki` replaced by key i.
fn script(text: &str) -> Vec<Cmd> {
    script_commands(text, &keys())
}

/// Runs the script against both servers command by command, then (after FLUSHALL) again
/// as one pipeline, for every thread count. `setup` runs first on each fresh pair.
fn check_everywhere(setup: &[Cmd], text: &str) {
    let cmds = script(text);
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        for c in setup {
            d.check(&c.iter().map(Vec::as_slice).collect::<Vec<_>>());
        }
        for c in &cmds {
            d.check(&c.iter().map(Vec::as_slice).collect::<Vec<_>>());
        }
        d.check(&[b"FLUSHALL"]);
        d.check_pipeline(&cmds);
    }
}

/// QUEUED replies, EXEC's array, EXEC and DISCARD without MULTI, DISCARD dropping the
/// queue, an empty block, keyless commands in a block, MULTI's arity.
#[test]
fn multi_exec_discard_basics_match_redis() {
    check_everywhere(
        &[],
        "
        MULTI
        SET K0 1
        GET K0
        SET K1 2
        MGET K0 K1 K2
        EXEC
        GET K0
        EXEC
        DISCARD
        MULTI
        SET K0 changed
        DEL K1
        DISCARD
        MGET K0 K1
        EXEC
        MULTI
        EXEC
        MULTI
        PING
        PING hello
        ECHO x
        EXEC
        MULTI x
        multi
        get K0
        exec
        GET K0
        ",
    );
}

/// A nested MULTI is an error that does not abort the block; an unknown command or a
/// wrong arity in a block makes EXEC answer EXECABORT and run nothing (and leaves MULTI);
/// errors that only show when a command runs (SET … EX 0, a syntax error, MSET with an
/// odd number of arguments, RENAME of a missing key, SELECT 1) appear in EXEC's array
/// while the block's other commands run; SAVE and SHUTDOWN are refused inside MULTI
/// (`no-multi`), which aborts the block.
#[test]
fn multi_exec_errors_match_redis() {
    check_everywhere(
        &[],
        "
        MULTI
        SET K0 1
        MULTI
        SET K1 2
        EXEC
        MGET K0 K1
        MULTI
        SET K2 1
        NOSUCHCMD x
        SET K3 2
        EXEC
        MGET K2 K3
        EXEC
        MULTI
        GET
        SET K2 1
        EXEC
        GET K2
        MULTI
        DISCARD x
        DISCARD
        EXEC
        MULTI
        SET K4 v EX 0
        SET K5 v
        SET K6 v FOO
        MSET K7 1 K8
        MSETNX K7 1 K8
        RENAME nosuch K9
        RENAMENX nosuch K9
        GET K5
        SET K10 v EX abc
        SCAN 0 COUNT 0
        SELECT 1
        SET K11 last
        EXEC
        MGET K4 K5 K6 K7 K8 K9 K10 K11
        DBSIZE
        MULTI
        SET K11 w
        SAVE
        SHUTDOWN NOSAVE
        EXEC
        GET K11
        ",
    );
}

/// Multi-shard commands inside a block: MSET, MGET, MSETNX, DEL, UNLINK, EXISTS, TOUCH,
/// RENAME and RENAMENX across shards (the TTL travels), DBSIZE and KEYS seeing the
/// block's earlier effects, FLUSHALL in the middle of a block.
#[test]
fn multi_exec_across_shards_matches_redis() {
    check_everywhere(
        &[],
        "
        SET K7 before
        MULTI
        MSET K0 a K1 b K2 c K3 d
        MGET K0 K1 K2 K3 K4 K0
        DBSIZE
        SET K4 ttl EX 100
        RENAME K4 K9
        TTL K9
        RENAME K0 K5
        RENAMENX K1 K2
        RENAMENX K1 K6
        RENAMENX K6 K6
        RENAME K5 K5
        EXISTS K0 K1 K2 K3 K5 K6 K5 K9
        TOUCH K0 K2 K3 K2
        DEL K2 K3 K7 K7
        UNLINK K9 K10
        DBSIZE
        KEYS K5
        MSETNX K8 x K9 y
        MSETNX K8 z K10 w
        MGET K5 K6 K8 K9 K10
        FLUSHALL
        DBSIZE
        MGET K5 K6 K8
        SET K11 after
        RANDOMKEY
        EXEC
        DBSIZE
        GET K11
        MULTI
        SET K0 1
        PING
        DBSIZE
        ECHO hi
        FLUSHALL
        GET K0
        DBSIZE
        EXEC
        ",
    );
}

/// RESP3 (after HELLO 3): replies of commands run on other shards and of multi-shard
/// commands, and EXEC's array (nulls, errors, integers), exactly as redis-server sends
/// them.
#[test]
fn multi_exec_in_resp3_matches_redis() {
    let cmds = script(
        "
        SET K5 v
        GET K4
        MGET K4 K5 K6 K7
        EXISTS K4 K5 K6
        RENAME K5 K6
        RENAME K5 K6
        MSETNX K6 a K7 b
        DBSIZE
        RANDOMKEY
        MULTI
        SET K0 v
        GET K0
        GET K1
        MGET K0 K1 K2
        EXISTS K0 K1
        DBSIZE
        PING
        ECHO x
        SET K2 v EX 0
        RENAME nosuch K3
        RENAME K0 K3
        MSETNX K4 a K5 b
        DEL K0 K3 K4
        EXEC
        EXEC
        MULTI
        EXEC
        MULTI
        NOSUCHCMD
        EXEC
        ",
    );
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        // HELLO's reply names each server (and its client id): not compared.
        for raw in [&mut d.g, &mut d.r] {
            let hello = raw.cmd(&[b"HELLO", b"3"]);
            assert!(hello.starts_with(b"%"), "HELLO 3: {hello:?}");
        }
        for c in &cmds {
            d.check(&c.iter().map(Vec::as_slice).collect::<Vec<_>>());
        }
        d.check(&[b"FLUSHALL"]);
        d.check_pipeline(&cmds);
    }
}

/// EXEC with arguments is rejected as redis-server rejects it: `EXECABORT Transaction
/// discarded because of: wrong number of arguments for 'exec' command`, inside MULTI
/// (which it ends) and outside.
#[test]
fn exec_with_wrong_arity_aborts_like_redis() {
    check_everywhere(
        &[],
        "
        EXEC x
        MULTI
        SET K0 1
        EXEC x
        EXEC
        GET K0
        ",
    );
}

/// QUIT inside MULTI is not queued: it answers +OK and closes, as in redis-server, and
/// the block never runs.
#[test]
fn quit_inside_multi_closes_like_redis() {
    let keys = keys();
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        let input = format!(
            "MULTI\r\nSET {} 1\r\nSET {} 1\r\nQUIT\r\nEXEC\r\n",
            keys[0], keys[1]
        );
        let (_, closed) = d.check_raw_to_close(input.as_bytes());
        assert!(closed, "--threads {threads}: QUIT must close");
        d.check(&[b"MGET", keys[0].as_bytes(), keys[1].as_bytes()]);
    }
}

/// Commands that ask every thread (CLIENT KILL, LIST, UNPAUSE) inside MULTI: EXEC
/// answers each in its place as redis-server does, and CLIENT KILL closes its victim
/// whichever thread holds it.
#[test]
fn client_commands_that_ask_every_thread_run_inside_exec() {
    for threads in THREAD_COUNTS {
        let mut d = Differential::threads(threads);
        // Victims on every thread (connections are dealt round-robin).
        for victims in 0..threads {
            let mut replies = Vec::new();
            for (server, raw) in [(&d.goblin, &mut d.g), (&d.redis, &mut d.r)] {
                let mut victim = server.raw();
                for _ in 0..victims {
                    drop(server.raw());
                }
                let id = String::from_utf8_lossy(&victim.cmd(&[b"CLIENT", b"ID"]))
                    .trim_start_matches(':')
                    .trim()
                    .to_string();
                let mut reply = Vec::new();
                for c in [
                    vec!["MULTI"],
                    vec!["CLIENT", "KILL", "ID", &id],
                    vec!["INCR", "counter"],
                    vec!["CLIENT", "KILL", "ID", &id],
                    vec!["CLIENT", "UNPAUSE"],
                    vec!["SET", "k", "v"],
                ] {
                    let args: Vec<&[u8]> = c.iter().map(|w| w.as_bytes()).collect();
                    reply.extend(raw.cmd(&args));
                }
                let exec = raw.cmd(&[b"EXEC"]);
                reply.extend_from_slice(&exec);
                // The victim is closed.
                let (_, closed) = victim.read_to_close(std::time::Duration::from_secs(5));
                assert!(closed, "--threads {threads}: the victim is still open");
                // CLIENT LIST inside MULTI lists this connection among the others.
                raw.cmd(&[b"MULTI"]);
                raw.cmd(&[b"CLIENT", b"LIST"]);
                raw.cmd(&[b"PING"]);
                let list = raw.cmd(&[b"EXEC"]);
                let text = String::from_utf8_lossy(&list);
                assert!(
                    text.starts_with("*2\r\n$")
                        && text.contains(" cmd=exec ")
                        && text.ends_with("+PONG\r\n"),
                    "--threads {threads}: {text}"
                );
                // Pipelined: the command after EXEC waits for EXEC's whole reply.
                let mut pipelined = Vec::new();
                for c in [
                    &[&b"MULTI"[..]][..],
                    &[b"CLIENT", b"LIST"],
                    &[b"EXEC"],
                    &[b"INCR", b"counter"],
                ] {
                    pipelined.extend(goblin_tests::encode(c));
                }
                raw.send(&pipelined);
                let (ok, queued) = (raw.reply(), raw.reply());
                let (exec, incr) = (raw.reply(), raw.reply());
                assert_eq!(
                    (&ok[..], &queued[..]),
                    (&b"+OK\r\n"[..], &b"+QUEUED\r\n"[..])
                );
                assert!(
                    exec.starts_with(b"*1\r\n$") && incr.starts_with(b":"),
                    "--threads {threads}: {} then {}",
                    String::from_utf8_lossy(&exec),
                    String::from_utf8_lossy(&incr)
                );
                reply.extend_from_slice(&incr);
                replies.push(reply);
            }
            assert_eq!(
                String::from_utf8_lossy(&replies[0]),
                String::from_utf8_lossy(&replies[1]),
                "--threads {threads}, victim after {victims} connections"
            );
        }
    }
}

/// Connection commands queued in MULTI run in their place, between the keyed commands
/// around them, as in redis-server: a script loaded by SCRIPT LOAD answers the EVALSHA
/// after it (and SCRIPT FLUSH makes the one after it NOSCRIPT), a CONFIG SET shapes the
/// encoding of the writes after it and not of those before, SELECT and CLIENT SETNAME
/// act where they stand.
#[test]
fn connection_commands_run_in_their_place_inside_exec() {
    check_everywhere(
        &[],
        "
        SCRIPT FLUSH
        MULTI
        SCRIPT LOAD \"return redis.call('incr', KEYS[1])\"
        EVALSHA 2bab3b661081db58bd2341920e0ba7cf5dc77b25 1 K0
        SET K1 x
        SCRIPT FLUSH
        EVALSHA 2bab3b661081db58bd2341920e0ba7cf5dc77b25 1 K0
        GET K0
        EXEC
        CONFIG GET set-max-intset-entries
        MULTI
        SADD K2 1 2 3
        CONFIG SET set-max-intset-entries 2
        SADD K3 1 2 3
        OBJECT ENCODING K2
        OBJECT ENCODING K3
        CONFIG SET set-max-intset-entries 512
        SADD K4 1 2 3
        OBJECT ENCODING K4
        EXEC
        MULTI
        SET K5 db0
        SELECT 9
        SET K5 db9
        CLIENT SETNAME before
        GET K5
        CLIENT GETNAME
        SELECT 0
        CLIENT SETNAME after
        GET K5
        EXEC
        GET K5
        CLIENT GETNAME
        ",
    );
}

/// A command that asks every thread (CLIENT LIST) is answered as EXEC's reply is
/// written; the connection commands after it wait for it, so that it sees the name set
/// before it and not the one set after, as in redis-server.
#[test]
fn connection_commands_keep_their_order_around_one_that_asks_every_thread() {
    for threads in THREAD_COUNTS {
        let d = Differential::threads(threads);
        for server in [&d.goblin, &d.redis] {
            let mut raw = server.raw();
            let mut replies = Vec::new();
            for c in [
                "MULTI",
                "CLIENT SETNAME first",
                "SET k v",
                "CLIENT LIST TYPE normal",
                "CLIENT SETNAME second",
                "CLIENT GETNAME",
                "EXEC",
            ] {
                replies = raw.cmd_str(c);
            }
            let text = String::from_utf8_lossy(&replies);
            assert!(
                text.contains(" name=first ")
                    && !text.contains(" name=second ")
                    && text.ends_with("$6\r\nsecond\r\n"),
                "{:?} --threads {threads}: {text}",
                server.kind
            );
        }
    }
}

/// A transaction of tens of thousands of commands — redis-py sends every pipeline as
/// one, by default — is answered as redis-server answers it, within the harness's reply
/// timeout: EXEC split the replies of one shard's hop by moving the rest down after
/// each, quadratic in their number (40,000 GETBITs of one key: 5.8 s, release).
#[test]
fn a_transaction_of_many_commands_on_one_shard_matches_redis() {
    let mut cmds: Vec<Cmd> = vec![vec![
        b"SETBIT".to_vec(),
        b"bf".to_vec(),
        b"7".to_vec(),
        b"1".to_vec(),
    ]];
    cmds.push(vec![b"MULTI".to_vec()]);
    for i in 0..60_000u32 {
        cmds.push(vec![
            b"GETBIT".to_vec(),
            b"bf".to_vec(),
            (i % 64).to_string().into_bytes(),
        ]);
    }
    cmds.push(vec![b"EXEC".to_vec()]);
    for threads in [1, 4] {
        let mut d = Differential::threads(threads);
        d.check_pipeline(&cmds);
    }
}
