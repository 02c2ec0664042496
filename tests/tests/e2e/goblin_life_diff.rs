//! The claim's whole life against its oracles (issue 12): GOBLIN.PUBLISH, GOBLIN.RENEW,
//! GOBLIN.STATUS, GOBLIN.CLAIM's BLOCK option and SET's IFEQ/IFNE, goblin-server running the
//! native commands and redis-server 7.0 running Lua scripts with EVAL — the spec's oracle
//! scripts for PUBLISH, RENEW and CLAIM, and scripts written here for STATUS (the spec
//! gives none) and for SET IFEQ/IFNE (Redis 8.4's conditions: GET, then SET).
//!
//! Every case sets up both keys of its own claim id on both servers, runs the command, and
//! compares the replies (a script's errors with the script's location removed, and SET's
//! name replaced by the native command's) and then the keyspace: TYPE and content of both
//! keys, and their PTTL within a tolerance. The cases cover every reply row of the spec:
//! the claim holding the token, another token, absent, expired or not a string; the result
//! absent, a string, expired or another type; `seconds` valid and in each invalid form
//! (those have no script oracle, so SET EX's error on redis-server is the oracle, with the
//! native command's name). Each runs with `--threads 1` and 4, with the two keys in one
//! slot and on two shards in either lock order ([`Layout`]), in RESP2 and RESP3.
//!
//! STATUS's FREE reply is `["FREE", nil]`, in RESP3 with a RESP3 null: the oracle gives
//! the same bytes (redis-server turns the script's `false` into the caller's null, `_` in
//! RESP3), so it is compared byte for byte in both protocols, and its forms are also
//! spelled out in [`goblin_status_reply_forms`].
//!
//! What has no oracle at all — GOBLIN.CLAIM's BLOCK errors, SET's condition conflicts —
//! is compared with the fixed reply the spec gives, redis-server doing nothing, so that
//! the keyspace comparison still shows that goblin changed nothing.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use goblin_tests::claim::{
    CLAIM_ORACLE, CLAIMED, INVALID_EXPIRE, Layout, NOT_INTEGER, PUBLISH_ORACLE, RENEW_ORACLE,
    SYNTAX, TIMEOUT_NEGATIVE, TIMEOUT_NOT_INTEGER, WRONGTYPE, invalid_expire,
};
use goblin_tests::cmd::{Cmd, args, show_cmd};
use goblin_tests::keys::THREADS;
use goblin_tests::reply::{bulk, err, int, integer, nil, try_integer};
use goblin_tests::{Raw, Server, assert_bytes_eq, show};

/// GOBLIN.STATUS's oracle, written here (the spec has none): `EVAL <it> 2 claim_key
/// result_key`. The result first (a non-string errors), then the claim's PTTL.
const STATUS_ORACLE: &str = r#"local v = redis.call("get", KEYS[2])
if v then
  return {"DONE", v}
end
local pttl = redis.call("pttl", KEYS[1])
if pttl ~= -2 then
  return {"RUNNING", pttl}
end
return {"FREE", false}"#;

/// SET IFEQ/IFNE's oracle, written here (Redis 8.4's semantics on redis-server 7.0): `EVAL
/// <it> 1 key value IFEQ|IFNE compared [option …]`. GET the old value (a non-string
/// errors), SET with the other options when the condition holds (IFEQ: equal, so a missing
/// key is never created; IFNE: anything else, a missing key included); with GET among the
/// options the reply is the old value whether or not the key was set.
const SET_IF_ORACLE: &str = r#"local old = redis.call("get", KEYS[1])
local hit
if ARGV[2] == "IFEQ" then
  hit = old == ARGV[3]
else
  hit = old ~= ARGV[3]
end
local opts, get = {}, false
for i = 4, #ARGV do
  if string.upper(ARGV[i]) == "GET" then
    get = true
  else
    opts[#opts + 1] = ARGV[i]
  end
end
local set = false
if hit then
  set = redis.call("set", KEYS[1], ARGV[1], unpack(opts))
end
if get then
  return old
end
return set"#;

/// Stands for the case's claim key in a command.
const C: &str = "{claim}";
/// Stands for the case's result key in a command.
const R: &str = "{result}";

/// How far apart the two servers' PTTLs of a key may be: they set and read it a few
/// milliseconds apart (far more on a loaded machine, where a test thread can wait its
/// turn for a long while); less than the difference between any two leases the cases
/// tell apart (7 s at least).
const PTTL_SLACK_MS: i64 = 2_000;
/// Set-up keys given `PX EXPIRING_MS` are expired once this has passed on both servers.
const EXPIRING_MS: &str = "20";
const EXPIRED_AFTER: Duration = Duration::from_millis(120);

/// `seconds` that are not integers to Redis (`string2ll`), or beyond i64.
const NOT_INTEGER_SECONDS: [&str; 8] = [
    "1.5",
    "abc",
    "+5",
    "05",
    " 5",
    "",
    "99999999999999999999",
    "-9223372036854775809",
];
/// `seconds` that are integers but invalid expire times: not positive, or overflowing
/// once in milliseconds plus now.
const INVALID_EXPIRE_SECONDS: [&str; 5] = [
    "0",
    "-1",
    "-9223372036854775808",
    "9223372036854775807",
    "9223372036854775",
];

/// What a case's command is compared with.
enum Want {
    /// redis-server runs this command (a script, or SET EX for `seconds` that no script
    /// would check first); its errors name `native` instead of `set`, without the script's
    /// location.
    Oracle { redis: Cmd, native: &'static str },
    /// GOBLIN.STATUS's oracle: the same reply, a RUNNING lease within [`PTTL_SLACK_MS`].
    Status { redis: Cmd },
    /// No oracle: this reply, and redis-server runs nothing (goblin must change nothing).
    Reply(Vec<u8>),
}

/// One case: its set-up (on both servers), the native command, what it is compared with.
struct Case {
    what: String,
    setup: Vec<Cmd>,
    goblin: Cmd,
    want: Want,
}

fn words<S: AsRef<[u8]>>(items: &[S]) -> Cmd {
    items.iter().map(|w| w.as_ref().to_vec()).collect()
}

/// `EVAL script nkeys rest…`.
fn eval(script: &str, nkeys: usize, rest: &[&[u8]]) -> Cmd {
    let mut c = words(&["EVAL", script, &nkeys.to_string()]);
    c.extend(rest.iter().map(|a| a.to_vec()));
    c
}

/// `cmd` with [`C`] and [`R`] replaced by the case's keys.
fn substitute(cmd: &[Vec<u8>], claim: &str, result: &str) -> Cmd {
    cmd.iter()
        .map(|a| match &a[..] {
            a if a == C.as_bytes() => claim.as_bytes().to_vec(),
            a if a == R.as_bytes() => result.as_bytes().to_vec(),
            a => a.to_vec(),
        })
        .collect()
}

/// A key's state as set up before a case: a name and its commands.
type State = (&'static str, Vec<Cmd>);

/// The claim key's states, for a claim whose owner's token is `token`.
fn claim_states(token: &[u8]) -> Vec<State> {
    vec![
        (
            "claim holds the token",
            vec![words(&[b"SET", C.as_bytes(), token, b"EX", b"100"])],
        ),
        (
            "claim holds the token without expiry",
            vec![words(&[b"SET", C.as_bytes(), token])],
        ),
        (
            "claim holds another token",
            vec![words(&["SET", C, "other-worker", "EX", "100"])],
        ),
        ("claim absent", vec![]),
        (
            "claim expired",
            vec![words(&[
                b"SET",
                C.as_bytes(),
                token,
                b"PX",
                EXPIRING_MS.as_bytes(),
            ])],
        ),
        (
            "claim a hash",
            vec![words(&[b"HSET", C.as_bytes(), b"f", token])],
        ),
        (
            "claim a list",
            vec![words(&[b"RPUSH", C.as_bytes(), token])],
        ),
    ]
}

/// The result key's states.
fn result_states() -> Vec<State> {
    vec![
        ("result absent", vec![]),
        (
            "result a string",
            vec![words(&["SET", R, "charged:old", "EX", "50"])],
        ),
        (
            "result a string without expiry",
            vec![words(&["SET", R, "charged:old"])],
        ),
        (
            "result expired",
            vec![words(&["SET", R, "charged:old", "PX", EXPIRING_MS])],
        ),
        ("result a hash", vec![words(&["HSET", R, "f", "v"])]),
        ("result a sorted set", vec![words(&["ZADD", R, "1", "m"])]),
        ("result a list", vec![words(&["RPUSH", R, "a", "b"])]),
    ]
}

/// The set-up of a claim state and a result state together.
fn both(claim: &State, result: &State) -> (String, Vec<Cmd>) {
    (
        format!("{}, {}", claim.0, result.0),
        [claim.1.clone(), result.1.clone()].concat(),
    )
}

fn publish(
    what: String,
    setup: Vec<Cmd>,
    keys: (&str, &str),
    token: &[u8],
    value: &[u8],
    secs: &str,
) -> Case {
    let (c, r) = (keys.0.as_bytes(), keys.1.as_bytes());
    Case {
        what,
        setup,
        goblin: words(&[b"GOBLIN.PUBLISH", c, r, token, value, secs.as_bytes()]),
        want: Want::Oracle {
            redis: eval(PUBLISH_ORACLE, 2, &[c, r, token, value, secs.as_bytes()]),
            native: "goblin.publish",
        },
    }
}

/// `seconds` invalid: SET EX's error, checked before the claim is looked at.
fn publish_invalid(what: String, setup: Vec<Cmd>, secs: &str) -> Case {
    Case {
        what,
        setup,
        goblin: words(&["GOBLIN.PUBLISH", C, R, "tok", "v", secs]),
        want: Want::Oracle {
            redis: words(&["SET", R, "v", "EX", secs]),
            native: "goblin.publish",
        },
    }
}

fn publish_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for claim in claim_states(b"tok") {
        for result in result_states() {
            let (what, setup) = both(&claim, &result);
            cases.push(publish(what, setup, (C, R), b"tok", b"charged:new", "100"));
        }
    }
    let held = &claim_states(b"tok")[0];
    let binary_held = claim_states(b"t\0\r\n$1\r\n\xff")[0].clone();
    let result = &result_states()[1];
    // Values, tokens and leases on a held claim; the token compared byte for byte.
    let variants: [(&State, &[u8], &[u8], &str); 10] = [
        (held, b"tok", b"", "3"),
        (held, b"tok", b"\xff\x00v\r\n", "100"),
        (held, b"tok", b"v", "9999999999999"),
        (held, b"tok", b"v", "2"),
        (&binary_held, b"t\0\r\n$1\r\n\xff", b"v", "100"),
        (&binary_held, b"t\0\r\n$1\r\n", b"v", "100"),
        (held, b"to", b"v", "100"),
        (held, b"tok ", b"v", "100"),
        (held, b"TOK", b"v", "100"),
        (held, b"", b"v", "100"),
    ];
    for (claim, token, value, secs) in variants {
        let (what, setup) = both(claim, result);
        let what = format!(
            "{what}, token {}, value {}, {secs} s",
            show(token),
            show(value)
        );
        cases.push(publish(what, setup, (C, R), token, value, secs));
    }
    // One key as both the claim and the result.
    cases.push(publish(
        "one key as claim and result, holding the token".into(),
        held.1.clone(),
        (C, C),
        b"tok",
        b"v",
        "100",
    ));
    for secs in NOT_INTEGER_SECONDS.iter().chain(&INVALID_EXPIRE_SECONDS) {
        for claim in [held, &claim_states(b"tok")[3], &claim_states(b"tok")[5]] {
            let (what, setup) = both(claim, result);
            cases.push(publish_invalid(
                format!("{what}, seconds {secs:?}"),
                setup,
                secs,
            ));
        }
    }
    cases
}

fn renew(what: String, setup: Vec<Cmd>, token: &[u8], secs: &str) -> Case {
    Case {
        what,
        setup,
        goblin: words(&[b"GOBLIN.RENEW", C.as_bytes(), token, secs.as_bytes()]),
        want: Want::Oracle {
            redis: eval(RENEW_ORACLE, 1, &[C.as_bytes(), token, secs.as_bytes()]),
            native: "goblin.renew",
        },
    }
}

fn renew_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // The result key is a string throughout: RENEW must leave it alone.
    let result = &result_states()[1];
    for claim in claim_states(b"tok") {
        for (token, secs) in [(&b"tok"[..], "100"), (b"tok", "7"), (b"other", "100")] {
            let (what, setup) = both(&claim, result);
            cases.push(renew(
                format!("{what}, token {}, {secs} s", show(token)),
                setup,
                token,
                secs,
            ));
        }
    }
    let held = &claim_states(b"tok")[0];
    let binary_held = claim_states(b"t\0\r\n\xff")[0].clone();
    let variants: [(&State, &[u8], &str); 7] = [
        (held, b"tok", "1"),
        (held, b"tok", "9999999999999"),
        (held, b"to", "100"),
        (held, b"TOK", "100"),
        (held, b"", "100"),
        (&binary_held, b"t\0\r\n\xff", "100"),
        (&binary_held, b"t\0\r\n", "100"),
    ];
    for (claim, token, secs) in variants {
        let (what, setup) = both(claim, result);
        cases.push(renew(
            format!("{what}, token {}, {secs} s", show(token)),
            setup,
            token,
            secs,
        ));
    }
    for secs in NOT_INTEGER_SECONDS.iter().chain(&INVALID_EXPIRE_SECONDS) {
        for claim in [held, &claim_states(b"tok")[3], &claim_states(b"tok")[5]] {
            let (what, setup) = both(claim, result);
            cases.push(Case {
                what: format!("{what}, seconds {secs:?}"),
                setup,
                goblin: words(&["GOBLIN.RENEW", C, "tok", secs]),
                want: Want::Oracle {
                    redis: words(&["SET", C, "v", "EX", secs]),
                    native: "goblin.renew",
                },
            });
        }
    }
    cases
}

fn status_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for claim in claim_states(b"tok") {
        for result in result_states() {
            let (what, setup) = both(&claim, &result);
            cases.push(Case {
                what,
                setup,
                goblin: words(&["GOBLIN.STATUS", C, R]),
                want: Want::Status {
                    redis: eval(STATUS_ORACLE, 2, &[C.as_bytes(), R.as_bytes()]),
                },
            });
        }
    }
    for (what, setup) in [
        (
            "one key as claim and result, a string",
            claim_states(b"tok")[0].1.clone(),
        ),
        ("one key as claim and result, absent", vec![]),
        (
            "one key as claim and result, a hash",
            claim_states(b"tok")[5].1.clone(),
        ),
    ] {
        cases.push(Case {
            what: what.into(),
            setup,
            goblin: words(&["goblin.status", C, C]),
            want: Want::Status {
                redis: eval(STATUS_ORACLE, 2, &[C.as_bytes(), C.as_bytes()]),
            },
        });
    }
    cases
}

/// BLOCK options that wait without limit, or long: only where the claim would not wait.
const BLOCK_LONG: [&[&str]; 6] = [
    &["BLOCK", "0"],
    &["BLOCK", "100"],
    &["block", "5"],
    &["BLOCK", "10", "BLOCK", "0"],
    &["BLOCK", "9223372036854775807"],
    &["Block", "60000"],
];
/// BLOCK options that wait at most a few milliseconds: where the claim would be nil, the
/// timeout's nil is the oracle's.
const BLOCK_SHORT: [&[&str]; 3] = [
    &["BLOCK", "1"],
    &["BLOCK", "10"],
    &["block", "30", "BLOCK", "5"],
];

fn claim_with(token: &str, secs: &str, opts: &[&str]) -> Cmd {
    let mut c = words(&["GOBLIN.CLAIM", C, R, token, secs]);
    c.extend(opts.iter().map(|o| o.as_bytes().to_vec()));
    c
}

fn claim_oracle(token: &str, secs: &str) -> Want {
    Want::Oracle {
        redis: eval(
            CLAIM_ORACLE,
            2,
            &[
                C.as_bytes(),
                R.as_bytes(),
                token.as_bytes(),
                secs.as_bytes(),
            ],
        ),
        native: "goblin.claim",
    }
}

fn claim_block_cases() -> Vec<Case> {
    let claims = claim_states(b"other");
    let results = result_states();
    let (held, absent, expired, hash) = (&claims[0], &claims[3], &claims[4], &claims[5]);
    // Immediate outcomes: CLAIMED (claim absent or expired), a value, WRONGTYPE.
    let immediate = [
        (absent, &results[0]),
        (absent, &results[1]),
        (absent, &results[4]),
        (expired, &results[1]),
        (expired, &results[0]),
        (held, &results[1]),
        (held, &results[2]),
        (held, &results[4]),
        (held, &results[6]),
        (hash, &results[1]),
        (hash, &results[5]),
    ];
    // Would be nil (held, no result): waits, and times out with the oracle's nil.
    let would_wait = [
        (held, &results[0]),
        (held, &results[3]),
        (hash, &results[0]),
    ];
    let mut cases = Vec::new();
    for (claim, result) in immediate {
        for opts in BLOCK_LONG {
            let (what, setup) = both(claim, result);
            cases.push(Case {
                what: format!("{what}, {}", opts.join(" ")),
                setup,
                goblin: claim_with("tok", "30", opts),
                want: claim_oracle("tok", "30"),
            });
        }
    }
    for (claim, result) in would_wait {
        for opts in BLOCK_SHORT {
            let (what, setup) = both(claim, result);
            cases.push(Case {
                what: format!("{what}, {}", opts.join(" ")),
                setup,
                goblin: claim_with("tok", "30", opts),
                want: claim_oracle("tok", "30"),
            });
        }
    }
    // `seconds` is checked first, whatever the options.
    let any_opts: [&[&str]; 6] = [
        &["BLOCK", "0"],
        &["BLOCK", "x"],
        &["BLOCK", "-1"],
        &["BLOCK"],
        &["NOBLOCK", "1"],
        &["BLOCK", "10", "extra"],
    ];
    for (i, secs) in NOT_INTEGER_SECONDS
        .iter()
        .chain(&INVALID_EXPIRE_SECONDS)
        .enumerate()
    {
        for (claim, result) in [
            (held, &results[0]),
            (absent, &results[0]),
            (held, &results[1]),
        ] {
            let opts = any_opts[i % any_opts.len()];
            let (what, setup) = both(claim, result);
            cases.push(Case {
                what: format!("{what}, seconds {secs:?}, {}", opts.join(" ")),
                setup,
                goblin: claim_with("tok", secs, opts),
                want: claim_oracle("tok", secs),
            });
        }
    }
    // Valid `seconds`, invalid options: XREAD's timeout errors, else a syntax error;
    // nothing is claimed (no oracle: redis-server runs nothing).
    let invalid: [(&[&str], &str); 16] = [
        (&["BLOCK"], SYNTAX),
        (&["block"], SYNTAX),
        (&["NOBLOCK", "1"], SYNTAX),
        (&["10"], SYNTAX),
        (&["BLOCK", "10", "extra"], SYNTAX),
        (&["BLOCK", "10", "BLOCK"], SYNTAX),
        (&["FOO", "1", "BLOCK", "x"], SYNTAX),
        (&["BLOCK", "x"], TIMEOUT_NOT_INTEGER),
        (&["BLOCK", "1.5"], TIMEOUT_NOT_INTEGER),
        (&["BLOCK", "+5"], TIMEOUT_NOT_INTEGER),
        (&["BLOCK", "05"], TIMEOUT_NOT_INTEGER),
        (&["BLOCK", ""], TIMEOUT_NOT_INTEGER),
        (&["BLOCK", "99999999999999999999"], TIMEOUT_NOT_INTEGER),
        (&["BLOCK", "x", "FOO"], TIMEOUT_NOT_INTEGER),
        (&["BLOCK", "-1"], TIMEOUT_NEGATIVE),
        (&["BLOCK", "-9223372036854775808"], TIMEOUT_NEGATIVE),
    ];
    for (opts, error) in invalid {
        for (claim, result) in [
            (absent, &results[0]),
            (held, &results[1]),
            (held, &results[0]),
        ] {
            let (what, setup) = both(claim, result);
            cases.push(Case {
                what: format!("{what}, {}", opts.join(" ")),
                setup,
                goblin: claim_with("tok", "30", opts),
                want: Want::Reply(err(error)),
            });
        }
    }
    cases
}

/// A key's states for SET IFEQ/IFNE.
fn set_key_states() -> Vec<State> {
    vec![
        ("key absent", vec![]),
        ("key holds v", vec![words(&["SET", C, "v", "EX", "100"])]),
        ("key holds v without expiry", vec![words(&["SET", C, "v"])]),
        ("key holds w", vec![words(&["SET", C, "w", "PX", "90000"])]),
        (
            "key expired",
            vec![words(&["SET", C, "v", "PX", EXPIRING_MS])],
        ),
        ("key a hash", vec![words(&["HSET", C, "f", "v"])]),
        ("key a list", vec![words(&["RPUSH", C, "v"])]),
    ]
}

fn set_if_cases() -> Vec<Case> {
    let conditions = [
        ("IFEQ", "IFEQ", "v"),
        ("IFEQ", "IFEQ", "x"),
        ("IFNE", "IFNE", "v"),
        ("IFNE", "IFNE", "x"),
        ("ifeq", "IFEQ", "v"),
        ("IfNe", "IFNE", "x"),
        ("IFEQ", "IFEQ", ""),
    ];
    // The options, and whether they come before the condition.
    let options: [(&[&str], bool); 9] = [
        (&[], false),
        (&["GET"], false),
        (&["get"], true),
        (&["EX", "100"], false),
        (&["PX", "5000"], true),
        (&["KEEPTTL"], false),
        (&["GET", "EX", "100"], false),
        (&["KEEPTTL", "GET"], true),
        (&["EX", "100", "GET"], false),
    ];
    let mut cases = Vec::new();
    for (state, setup) in set_key_states() {
        for (word, canonical, compared) in conditions {
            for (opts, first) in options {
                let mut goblin = words(&["SET", C, "new"]);
                let condition = words(&[word, compared]);
                let opts_words = words(opts);
                if first {
                    goblin.extend(opts_words.clone());
                    goblin.extend(condition);
                } else {
                    goblin.extend(condition);
                    goblin.extend(opts_words.clone());
                }
                let mut redis = eval(SET_IF_ORACLE, 1, &[C.as_bytes(), b"new"]);
                redis.extend(words(&[canonical, compared]));
                redis.extend(opts_words);
                cases.push(Case {
                    what: state.to_string(),
                    setup: setup.clone(),
                    goblin,
                    want: Want::Oracle {
                        redis,
                        native: "set",
                    },
                });
            }
        }
    }
    // An invalid expiry is SET's error, whether or not the condition holds.
    let expiries: [&[&str]; 5] = [
        &["EX", "0"],
        &["PX", "-1"],
        &["EX", "abc"],
        &["PX", "9223372036854775807"],
        &["EX", "1.5"],
    ];
    for (state, setup) in [&set_key_states()[0], &set_key_states()[1]] {
        for condition in [["IFEQ", "v"], ["IFNE", "v"]] {
            for expiry in expiries {
                let mut goblin = words(&["SET", C, "new"]);
                goblin.extend(words(&condition));
                goblin.extend(words(expiry));
                let mut redis = words(&["SET", C, "new"]);
                redis.extend(words(expiry));
                cases.push(Case {
                    what: state.to_string(),
                    setup: setup.clone(),
                    goblin,
                    want: Want::Oracle {
                        redis,
                        native: "set",
                    },
                });
            }
        }
    }
    // Conditions exclude each other (NX, XX, IFEQ, IFNE) and need their value: a syntax
    // error, nothing set.
    let syntax: [&[&str]; 14] = [
        &["IFEQ", "v", "NX"],
        &["NX", "IFEQ", "v"],
        &["IFEQ", "v", "XX"],
        &["XX", "IFNE", "v"],
        &["IFNE", "v", "NX"],
        &["IFEQ", "v", "IFNE", "x"],
        &["IFNE", "x", "IFEQ", "v"],
        &["IFEQ"],
        &["IFNE"],
        &["GET", "IFEQ"],
        &["EX", "100", "IFNE"],
        &["IFEQ", "v", "GET", "IFNE"],
        &["IFEQ", "v", "EX", "100", "KEEPTTL"],
        &["IFEQ", "v", "KEEPTTL", "PX", "100"],
    ];
    for (state, setup) in [&set_key_states()[0], &set_key_states()[1]] {
        for opts in syntax {
            let mut goblin = words(&["SET", C, "new"]);
            goblin.extend(words(opts));
            cases.push(Case {
                what: state.to_string(),
                setup: setup.clone(),
                goblin,
                want: Want::Reply(err(SYNTAX)),
            });
        }
    }
    cases
}

/// Replies seen, by command and kind, over a whole test.
type Tally = Mutex<BTreeMap<String, usize>>;

/// The kind of a reply, for the tally: errors by their text (without a script's
/// location), nil, CLAIMED, arrays by their first element, anything else by type.
fn reply_kind(name: &[u8], reply: &[u8]) -> String {
    let kind = if reply == CLAIMED {
        "CLAIMED".to_string()
    } else if reply == nil(false) || reply == nil(true) {
        "nil".to_string()
    } else if reply.starts_with(b"-") {
        String::from_utf8_lossy(&reply[1..]).trim_end().to_string()
    } else if reply.starts_with(b":") || reply.starts_with(b"+") {
        show(reply)
    } else if reply.starts_with(b"*2\r\n$") {
        let end = reply[6..]
            .iter()
            .position(|&b| b == b'\r')
            .map_or(6, |p| p + 6);
        let word_at = end + 2;
        let len: usize = std::str::from_utf8(&reply[5..end])
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let word = &reply[word_at..(word_at + len).min(reply.len())];
        format!("[{} …]", show(word))
    } else if reply.starts_with(b"$") {
        "value".to_string()
    } else {
        show(reply)
    };
    format!(
        "{} → {kind}",
        String::from_utf8_lossy(name).to_ascii_uppercase()
    )
}

/// redis's reply to an oracle with a script's location removed from an error (`… script:
/// <sha>, on @user_script:1.`), and SET's name in an error replaced by `native`'s.
fn normalize(reply: &[u8], native: &str) -> Vec<u8> {
    if !reply.starts_with(b"-") {
        return reply.to_vec();
    }
    let text = String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned();
    let text = match text.find(" script: ") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    let text = text.replace("in 'set' command", &format!("in '{native}' command"));
    format!("-{text}\r\n").into_bytes()
}

/// The milliseconds of a `RUNNING` STATUS reply.
fn running_pttl(reply: &[u8]) -> Option<i64> {
    try_integer(reply.strip_prefix(b"*2\r\n$7\r\nRUNNING\r\n")?)
}

/// Whether goblin's STATUS reply matches the oracle's: the same bytes, or both RUNNING
/// with leases within [`PTTL_SLACK_MS`].
fn same_status(got: &[u8], want: &[u8]) -> bool {
    got == want
        || matches!((running_pttl(got), running_pttl(want)),
            (Some(g), Some(r)) if g >= 0 && r >= 0 && (g - r).abs() <= PTTL_SLACK_MS)
}

/// An oracle command for a failure message, a script's text left out.
fn shown_oracle(oracle: &[Vec<u8>]) -> String {
    match oracle {
        [eval, _script, rest @ ..] if eval == b"EVAL" => {
            format!("EVAL <oracle script> {}", show_cmd(rest))
        }
        _ => show_cmd(oracle),
    }
}

/// A key's state: its TYPE, its content (by type), its PTTL.
fn key_state(raw: &mut Raw, key: &str) -> (Vec<u8>, Vec<u8>, i64) {
    let k = key.as_bytes();
    let kind = raw.cmd(&[b"TYPE", k]);
    let content = match &kind[..] {
        b"+string\r\n" => raw.cmd(&[b"GET", k]),
        b"+hash\r\n" => raw.cmd(&[b"HGETALL", k]),
        b"+list\r\n" => raw.cmd(&[b"LRANGE", k, b"0", b"-1"]),
        b"+zset\r\n" => raw.cmd(&[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"]),
        b"+set\r\n" => raw.cmd(&[b"SMEMBERS", k]),
        _ => Vec::new(),
    };
    let pttl = integer(&raw.cmd(&[b"PTTL", k]));
    (kind, content, pttl)
}

/// Where and how a batch of cases runs.
struct Batch<'a> {
    goblin: &'a Server,
    redis: &'a Server,
    /// Keeps the keys of one batch apart from the others'.
    tag: String,
    threads: usize,
    layout: Layout,
    resp3: bool,
}

/// Runs `cases` on one goblin-server against one redis-server, as `batch` says.
fn run_batch(batch: &Batch<'_>, cases: &[Case], tally: &Tally) {
    let Batch {
        goblin,
        redis,
        ref tag,
        threads,
        layout,
        resp3,
    } = *batch;
    let (mut g, mut r) = (goblin.raw(), redis.raw());
    if resp3 {
        for raw in [&mut g, &mut r] {
            let hello = raw.cmd(&[b"HELLO", b"3"]);
            assert!(hello.starts_with(b"%"), "HELLO 3: {}", show(&hello));
        }
    }
    let label = format!(
        "--threads {threads}, {layout:?}, RESP{}",
        if resp3 { 3 } else { 2 }
    );
    let keys: Vec<(String, String)> = (0..cases.len())
        .map(|i| layout.keys(&format!("{tag}.{i}"), threads))
        .collect();
    for (case, (claim, result)) in cases.iter().zip(&keys) {
        for step in &case.setup {
            let step = substitute(step, claim, result);
            let want = r.cmd(&args(&step));
            let got = g.cmd(&args(&step));
            assert_bytes_eq!(
                got,
                want,
                "[{label}] {}: set-up {}",
                case.what,
                show_cmd(&step)
            );
        }
    }
    // Every set-up key given `PX EXPIRING_MS` is gone on both servers.
    thread::sleep(EXPIRED_AFTER);
    for (case, (claim, result)) in cases.iter().zip(&keys) {
        let native = substitute(&case.goblin, claim, result);
        let context = || {
            format!(
                "[{label}] {} ({claim} / {result}): {}",
                case.what,
                show_cmd(&native)
            )
        };
        let got = match &case.want {
            Want::Oracle {
                redis: oracle,
                native: name,
            } => {
                let oracle = substitute(oracle, claim, result);
                let want = normalize(&r.cmd(&args(&oracle)), name);
                let got = g.cmd(&args(&native));
                assert!(
                    got == want,
                    "{}\n  goblin: {}\n  oracle: {} (redis ran {})",
                    context(),
                    show(&got),
                    show(&want),
                    shown_oracle(&oracle)
                );
                got
            }
            Want::Status { redis: oracle } => {
                let oracle = substitute(oracle, claim, result);
                let want = normalize(&r.cmd(&args(&oracle)), "goblin.status");
                let got = g.cmd(&args(&native));
                assert!(
                    same_status(&got, &want),
                    "{}\n  goblin: {}\n  oracle: {}",
                    context(),
                    show(&got),
                    show(&want)
                );
                got
            }
            Want::Reply(want) => {
                let got = g.cmd(&args(&native));
                assert_bytes_eq!(got, want, "{}", context());
                got
            }
        };
        *tally
            .lock()
            .unwrap()
            .entry(reply_kind(&native[0], &got))
            .or_default() += 1;
        // The keyspace afterwards.
        for key in [claim, result] {
            let want = key_state(&mut r, key);
            let got = key_state(&mut g, key);
            let pttl_close = got.2 == want.2
                || (got.2 >= 0 && want.2 >= 0 && (got.2 - want.2).abs() <= PTTL_SLACK_MS);
            assert!(
                got.0 == want.0 && got.1 == want.1 && pttl_close,
                "{}\n  afterwards {key} on goblin: {} {} PTTL {}\n  on redis: {} {} PTTL {}",
                context(),
                show(&got.0),
                show(&got.1),
                got.2,
                show(&want.0),
                show(&want.1),
                want.2
            );
        }
    }
}

/// Runs the cases `make` builds with `--threads 1` and 4 (at once, against one
/// redis-server), with each of `layouts`, in RESP2 and RESP3; returns the replies seen.
fn differential(
    test: &str,
    layouts: &[Layout],
    make: fn() -> Vec<Case>,
) -> BTreeMap<String, usize> {
    let redis = Server::redis();
    let tally = Tally::default();
    thread::scope(|scope| {
        for threads in THREADS {
            let (redis, tally) = (&redis, &tally);
            scope.spawn(move || {
                let goblin = Server::goblin_threads(threads);
                let cases = make();
                for &layout in layouts {
                    for resp3 in [false, true] {
                        let tag = format!("{test}.{threads}.{layout:?}.{resp3}");
                        let batch = Batch {
                            goblin: &goblin,
                            redis,
                            tag,
                            threads,
                            layout,
                            resp3,
                        };
                        run_batch(&batch, &cases, tally);
                    }
                }
            });
        }
    });
    let tally = tally.into_inner().unwrap();
    eprintln!("{test}: replies compared: {tally:#?}");
    tally
}

/// Asserts that every kind of reply in `must` was compared at least once.
fn assert_seen(tally: &BTreeMap<String, usize>, must: &[&str]) {
    for kind in must {
        assert!(
            tally.contains_key(*kind),
            "no {kind} compared in the whole run: {tally:#?}"
        );
    }
}

#[test]
fn goblin_publish_matches_its_oracle() {
    let tally = differential("life.publish", &Layout::ALL, publish_cases);
    let expire = format!("GOBLIN.PUBLISH → {}", invalid_expire("goblin.publish"));
    assert_seen(
        &tally,
        &[
            "GOBLIN.PUBLISH → :1\\r\\n",
            "GOBLIN.PUBLISH → :0\\r\\n",
            &format!("GOBLIN.PUBLISH → {WRONGTYPE}"),
            &format!("GOBLIN.PUBLISH → {NOT_INTEGER}"),
            &expire,
        ],
    );
}

#[test]
fn goblin_renew_matches_its_oracle() {
    let tally = differential("life.renew", &Layout::ALL, renew_cases);
    let expire = format!("GOBLIN.RENEW → {}", invalid_expire("goblin.renew"));
    assert_seen(
        &tally,
        &[
            "GOBLIN.RENEW → :1\\r\\n",
            "GOBLIN.RENEW → :0\\r\\n",
            &format!("GOBLIN.RENEW → {WRONGTYPE}"),
            &format!("GOBLIN.RENEW → {NOT_INTEGER}"),
            &expire,
        ],
    );
}

#[test]
fn goblin_status_matches_an_oracle_script() {
    let tally = differential("life.status", &Layout::ALL, status_cases);
    assert_seen(
        &tally,
        &[
            "GOBLIN.STATUS → [DONE …]",
            "GOBLIN.STATUS → [RUNNING …]",
            "GOBLIN.STATUS → [FREE …]",
            &format!("GOBLIN.STATUS → {WRONGTYPE}"),
        ],
    );
}

/// STATUS's three forms, byte for byte, in each protocol: FREE's second element is RESP2's
/// null bulk, RESP3's null; RUNNING's lease counts down from the claim's.
#[test]
fn goblin_status_reply_forms() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for layout in Layout::ALL {
            for resp3 in [false, true] {
                let label = format!("--threads {threads}, {layout:?}, RESP3 {resp3}");
                let (claim, result) = layout.keys(&format!("forms.{resp3}"), threads);
                let (c, r) = (claim.as_bytes(), result.as_bytes());
                let mut raw = server.raw();
                if resp3 {
                    assert!(raw.cmd(&[b"HELLO", b"3"]).starts_with(b"%"));
                }
                let status = |raw: &mut Raw| raw.cmd(&[b"GOBLIN.STATUS", c, r]);
                let free: &[u8] = if resp3 {
                    b"*2\r\n$4\r\nFREE\r\n_\r\n"
                } else {
                    b"*2\r\n$4\r\nFREE\r\n$-1\r\n"
                };
                assert_bytes_eq!(status(&mut raw), free, "[{label}] FREE");
                assert_eq!(raw.cmd(&[b"GOBLIN.CLAIM", c, r, b"w", b"20"]), CLAIMED);
                let running = status(&mut raw);
                let pttl = running_pttl(&running)
                    .unwrap_or_else(|| panic!("[{label}] RUNNING? {}", show(&running)));
                assert!(
                    (15_000..=20_000).contains(&pttl),
                    "[{label}] RUNNING {pttl}"
                );
                assert_eq!(raw.cmd(&[b"GET", c]), bulk(b"w"), "[{label}]");
                assert_eq!(
                    raw.cmd(&[b"GOBLIN.PUBLISH", c, r, b"w", b"done:\r\n1", b"100"]),
                    int(1),
                    "[{label}]"
                );
                assert_bytes_eq!(
                    status(&mut raw),
                    b"*2\r\n$4\r\nDONE\r\n$8\r\ndone:\r\n1\r\n",
                    "[{label}] DONE"
                );
                // DONE whatever the claim's state.
                assert_eq!(raw.cmd(&[b"DEL", c]), int(1));
                assert_bytes_eq!(
                    status(&mut raw),
                    b"*2\r\n$4\r\nDONE\r\n$8\r\ndone:\r\n1\r\n",
                    "[{label}] DONE, claim gone"
                );
                assert_eq!(raw.cmd(&[b"DEL", r]), int(1));
                assert_bytes_eq!(status(&mut raw), free, "[{label}] FREE again");
            }
        }
    }
}

#[test]
fn goblin_claim_block_option_matches_the_oracle_when_it_would_not_wait() {
    let tally = differential("life.block", &Layout::ALL, claim_block_cases);
    assert_seen(
        &tally,
        &[
            "GOBLIN.CLAIM → CLAIMED",
            "GOBLIN.CLAIM → value",
            "GOBLIN.CLAIM → nil",
            &format!("GOBLIN.CLAIM → {WRONGTYPE}"),
            &format!("GOBLIN.CLAIM → {NOT_INTEGER}"),
            &format!("GOBLIN.CLAIM → {INVALID_EXPIRE}"),
            &format!("GOBLIN.CLAIM → {SYNTAX}"),
            &format!("GOBLIN.CLAIM → {TIMEOUT_NOT_INTEGER}"),
            &format!("GOBLIN.CLAIM → {TIMEOUT_NEGATIVE}"),
        ],
    );
}

#[test]
fn set_ifeq_ifne_match_a_get_then_set_oracle() {
    // One key: where it lives does not matter, the thread count and protocol might.
    let tally = differential("life.setif", &[Layout::SameSlot], set_if_cases);
    assert_seen(
        &tally,
        &[
            "SET → +OK\\r\\n",
            "SET → nil",
            "SET → value",
            &format!("SET → {WRONGTYPE}"),
            &format!("SET → {SYNTAX}"),
            &format!("SET → {NOT_INTEGER}"),
            &format!("SET → {}", invalid_expire("set")),
        ],
    );
}

/// Redis 8.4's rules, spelled out rather than left to the oracle written above.
#[test]
fn set_ifeq_ifne_semantics() {
    for threads in THREADS {
        let server = Server::goblin_threads(threads);
        for resp3 in [false, true] {
            let label = format!("--threads {threads}, RESP3 {resp3}");
            let mut raw = server.raw();
            if resp3 {
                assert!(raw.cmd(&[b"HELLO", b"3"]).starts_with(b"%"));
            }
            let null = nil(resp3);
            let check = |raw: &mut Raw, line: &[&[u8]], want: &[u8]| {
                let got = raw.cmd(line);
                let line: Vec<String> = line.iter().map(|a| show(a)).collect();
                assert_bytes_eq!(got, want, "[{label}] {}", line.join(" "));
            };
            let k: &[u8] = if resp3 { b"ifk3" } else { b"ifk2" };
            // IFEQ never creates a missing key; IFNE does.
            check(&mut raw, &[b"SET", k, b"new", b"IFEQ", b"v"], null);
            check(&mut raw, &[b"SET", k, b"new", b"IFEQ", b"v", b"GET"], null);
            check(&mut raw, &[b"EXISTS", k], &int(0));
            check(&mut raw, &[b"SET", k, b"new", b"IFNE", b"v", b"GET"], null);
            check(&mut raw, &[b"GET", k], &bulk(b"new"));
            // With GET, the old value whether or not the key was set.
            check(
                &mut raw,
                &[b"SET", k, b"newer", b"IFEQ", b"nope", b"GET"],
                &bulk(b"new"),
            );
            check(&mut raw, &[b"GET", k], &bulk(b"new"));
            check(
                &mut raw,
                &[b"SET", k, b"newer", b"IFEQ", b"new", b"GET"],
                &bulk(b"new"),
            );
            check(&mut raw, &[b"GET", k], &bulk(b"newer"));
            check(
                &mut raw,
                &[b"SET", k, b"x", b"IFNE", b"newer", b"GET"],
                &bulk(b"newer"),
            );
            check(&mut raw, &[b"GET", k], &bulk(b"newer"));
            check(&mut raw, &[b"SET", k, b"x", b"IFNE", b"other"], b"+OK\r\n");
            check(&mut raw, &[b"GET", k], &bulk(b"x"));
            // Compared byte for byte.
            check(&mut raw, &[b"SET", k, b"y", b"IFEQ", b"X"], null);
            check(&mut raw, &[b"SET", k, b"\xff\0", b"IFEQ", b"x"], b"+OK\r\n");
            check(&mut raw, &[b"SET", k, b"z", b"IFEQ", b"\xff"], null);
            check(&mut raw, &[b"SET", k, b"z", b"IFEQ", b"\xff\0"], b"+OK\r\n");
            // The expiry options apply when the condition holds: EX sets, none clears,
            // KEEPTTL keeps.
            check(
                &mut raw,
                &[b"SET", k, b"a", b"IFEQ", b"z", b"EX", b"100"],
                b"+OK\r\n",
            );
            let pttl = integer(&raw.cmd(&[b"PTTL", k]));
            assert!((90_000..=100_000).contains(&pttl), "[{label}] PTTL {pttl}");
            check(
                &mut raw,
                &[b"SET", k, b"b", b"IFEQ", b"a", b"KEEPTTL"],
                b"+OK\r\n",
            );
            let pttl = integer(&raw.cmd(&[b"PTTL", k]));
            assert!((90_000..=100_000).contains(&pttl), "[{label}] PTTL {pttl}");
            check(
                &mut raw,
                &[b"SET", k, b"c", b"IFEQ", b"nope", b"PX", b"10"],
                null,
            );
            let pttl = integer(&raw.cmd(&[b"PTTL", k]));
            assert!(
                pttl > 80_000,
                "[{label}] a refused SET changed the TTL: {pttl}"
            );
            check(&mut raw, &[b"SET", k, b"c", b"IFNE", b"nope"], b"+OK\r\n");
            check(&mut raw, &[b"PTTL", k], &int(-1));
            // A key of another type: WRONGTYPE, and nothing changes.
            check(&mut raw, &[b"DEL", k], &int(1));
            check(&mut raw, &[b"HSET", k, b"f", b"v"], &int(1));
            for cond in [&b"IFEQ"[..], b"IFNE"] {
                check(&mut raw, &[b"SET", k, b"s", cond, b"v"], &err(WRONGTYPE));
                check(
                    &mut raw,
                    &[b"SET", k, b"s", cond, b"v", b"GET"],
                    &err(WRONGTYPE),
                );
            }
            check(&mut raw, &[b"TYPE", k], b"+hash\r\n");
            check(&mut raw, &[b"DEL", k], &int(1));
        }
    }
}
