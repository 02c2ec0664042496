//! GOBLIN.CLAIM and GOBLIN.CAD against their oracles (issue 4): seeded random sequences
//! over a small key space, goblin-server running the native commands and redis-server
//! running the Lua idioms of `shared/spec/goblin-commands.md` with EVALSHA, replies
//! compared byte for byte.
//!
//! The sequences mix valid and invalid leases (1-second ones included), compare-and-
//! delete under all its spellings, SET with and without a short PX, GET, DEL, HSET and
//! ZADD on the same keys (so that keys of other types meet both commands), EXPIRE and
//! PEXPIRE, and sleeps, so that leases and results expire between commands.
//!
//! Two servers cannot be asked at the same instant, so a key whose deadline falls
//! between the two questions could be live on one and gone on the other. The runner
//! knows every short deadline it set (the interval in which each server fixed it) and
//! waits for it to pass before it touches that key again; a command that a stalled
//! machine nonetheless ran across a deadline makes its sequence inconclusive (counted,
//! and bounded), never a false failure.
//!
//! Reproduce a failure with `GOBLIN_DIFF_SEED=<seed>` (printed on failure): that seed
//! alone runs, with `--threads 1` and 4.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use goblin_tests::claim::{CLAIMED, Layout};
use goblin_tests::cmd::{Cmd, cmd, show_cmd};
use goblin_tests::diff::{How, ask, ask_both, same, ttl_class};
use goblin_tests::keys::THREADS;
use goblin_tests::rng::{Rng, seeds};
use goblin_tests::{Raw, Server, show};

/// GOBLIN.CLAIM's oracle, exactly as the contract gives it.
const CLAIM_SCRIPT: &str = r#"if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return "CLAIMED"
end
return redis.call("get", KEYS[2])"#;

/// GOBLIN.CAD's oracle, exactly as the contract gives it.
const CAD_SCRIPT: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
end
return 0"#;

/// Sequences per thread count (each runner takes every `RUNNERS`-th).
const SEQUENCES: u64 = 20;
/// Sequences run at once against one pair of servers, on disjoint keys: most of a
/// sequence's time is spent sleeping, so they share the machine well.
const RUNNERS: u64 = 4;
/// Commands per sequence.
const STEPS: usize = 110;
/// At most this many sequences per thread count (and at most half) may end inconclusive
/// (a stall across a deadline) before the machine counts as too slow to test on.
const MAX_INCONCLUSIVE: usize = 4;
/// A command is expected to take less than this; a key is not touched closer than this
/// to the start of its deadline interval.
const STEP_BUDGET: Duration = Duration::from_millis(40);
/// Widens every deadline interval for the servers' millisecond clocks.
const CLOCK_SLACK: Duration = Duration::from_millis(5);
/// Deadlines further away than this never fall inside a sequence; not tracked.
const TRACKED_TTL_MS: i64 = 10_000;

/// Replies seen, by command and kind, over every sequence of a run.
type Tally = Mutex<BTreeMap<String, usize>>;

/// The kind of a compared reply, for the tally.
fn reply_kind(name: &[u8], reply: &[u8]) -> String {
    let name = String::from_utf8_lossy(name).to_ascii_uppercase();
    let kind = match reply {
        CLAIMED => "CLAIMED".to_string(),
        b"$-1\r\n" | b"_\r\n" => "nil".to_string(),
        _ if reply.starts_with(b"$") => "value".to_string(),
        _ if reply.starts_with(b"-") => {
            String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned()
        }
        _ => show(reply),
    };
    format!("{name} → {kind}")
}

/// The kinds of reply every full run must have compared at least once: a generator
/// that stopped producing one of them would let that row go untested.
const MUST_SEE: [&str; 11] = [
    "GOBLIN.CLAIM → CLAIMED",
    "GOBLIN.CLAIM → nil",
    "GOBLIN.CLAIM → value",
    "GOBLIN.CLAIM → WRONGTYPE Operation against a key holding the wrong kind of value",
    "GOBLIN.CLAIM → ERR value is not an integer or out of range",
    "GOBLIN.CLAIM → ERR invalid expire time in 'goblin.claim' command",
    "GOBLIN.CAD → :1\\r\\n",
    "GOBLIN.CAD → :0\\r\\n",
    "GOBLIN.CAD → WRONGTYPE Operation against a key holding the wrong kind of value",
    "DELEX → :1\\r\\n",
    "DELIFEQ → :1\\r\\n",
];

/// What a step does to the deadlines the runner tracks, once its reply is known.
#[derive(Debug)]
enum Effect {
    /// Nothing.
    None,
    /// A won claim (reply CLAIMED) gives key 0 a lease of this many ms.
    Claim(usize, i64),
    /// Success (+OK) sets key's deadline to this many ms from now, or removes it.
    Set(usize, Option<i64>),
    /// Removes these keys.
    Del(Vec<usize>),
    /// Reply 1 removes the key.
    Cad(usize),
    /// Reply 1 gives the key this many ms (≤ 0: deletes it).
    Expire(usize, i64),
}

/// One command of a sequence.
struct Step {
    goblin: Vec<Vec<u8>>,
    redis: Vec<Vec<u8>>,
    keys: Vec<usize>,
    effect: Effect,
    /// How goblin's reply is compared with redis's.
    how: How,
    /// Whether redis runs the command's Lua oracle: the script's location is removed from
    /// its errors ([`normalize_script_reply`]) before they are compared.
    script_oracle: bool,
}

impl Step {
    fn same(args: Vec<Vec<u8>>, keys: Vec<usize>, effect: Effect) -> Step {
        Step {
            redis: args.clone(),
            goblin: args,
            keys,
            effect,
            how: How::Exact,
            script_oracle: false,
        }
    }
}

fn words(items: &[&[u8]]) -> Cmd {
    cmd(items)
}

/// The key space of one sequence: four claim ids, two with both keys in one slot, one
/// with the claim's shard first in the lock order, one with the result's shard first.
struct Space {
    /// Claim keys 0..4, then result keys 4..8.
    keys: Vec<String>,
}

impl Space {
    const IDS: usize = 4;

    fn new(seed: u64, threads: usize) -> Space {
        let layouts = [
            Layout::SameSlot,
            Layout::SameSlot,
            Layout::CrossUp,
            Layout::CrossDown,
        ];
        let pairs: Vec<(String, String)> = layouts
            .iter()
            .enumerate()
            .map(|(i, l)| l.keys(&format!("d{seed:x}.{i}"), threads))
            .collect();
        let mut keys: Vec<String> = pairs.iter().map(|p| p.0.clone()).collect();
        keys.extend(pairs.iter().map(|p| p.1.clone()));
        Space { keys }
    }

    fn claim(&self, id: usize) -> usize {
        id
    }

    fn result(&self, id: usize) -> usize {
        Self::IDS + id
    }

    fn key(&self, i: usize) -> &[u8] {
        self.keys[i].as_bytes()
    }
}

const TOKENS: [&[u8]; 3] = [b"w1", b"w2", b"w\0\r\n3"];
const VALUES: [&[u8]; 3] = [b"charged:1", b"charged:2", b"w1"];
const VALID_SECONDS: [&str; 6] = ["1", "1", "1", "2", "30", "100"];
const INVALID_SECONDS: [&str; 13] = [
    "0",
    "-1",
    "1.5",
    "abc",
    "+5",
    "05",
    " 5",
    "",
    "9223372036854775807",
    "99999999999999999999",
    "-9223372036854775808",
    "9223372036854775",
    // Valid, and for the rest of the sequence.
    "9999999999999",
];
/// The goblin spellings of compare-and-delete: (before the key, after the key).
const CAD_SPELLINGS: [(&str, &str); 4] = [
    ("GOBLIN.CAD", ""),
    ("goblin.cad", ""),
    ("DELIFEQ", ""),
    ("DELEX", "IFEQ"),
];

/// Generates the next step.
fn generate(rng: &mut Rng, space: &Space, sha_claim: &str, sha_cad: &str) -> Option<Step> {
    let any_key = |rng: &mut Rng| rng.below(space.keys.len());
    let roll = rng.below(100);
    let step = match roll {
        // GOBLIN.CLAIM, mostly on its own result key.
        0..=27 => {
            let id = rng.below(Space::IDS);
            let claim = space.claim(id);
            let result = match rng.below(20) {
                0 | 1 => space.result(rng.below(Space::IDS)),
                2 => claim,
                _ => space.result(id),
            };
            let token = *rng.pick(&TOKENS);
            let secs = if rng.percent(75) {
                *rng.pick(&VALID_SECONDS)
            } else {
                *rng.pick(&INVALID_SECONDS)
            };
            let lease_ms = secs.parse::<i64>().ok().and_then(|s| s.checked_mul(1000));
            let (c, r) = (space.key(claim), space.key(result));
            let name: &[u8] = if rng.percent(80) {
                b"GOBLIN.CLAIM"
            } else {
                b"Goblin.Claim"
            };
            Step {
                goblin: words(&[name, c, r, token, secs.as_bytes()]),
                redis: words(&[
                    b"EVALSHA",
                    sha_claim.as_bytes(),
                    b"2",
                    c,
                    r,
                    token,
                    secs.as_bytes(),
                ]),
                keys: vec![claim, result],
                effect: match lease_ms {
                    Some(ms) if ms > 0 => Effect::Claim(claim, ms),
                    _ => Effect::None,
                },
                how: How::Exact,
                script_oracle: true,
            }
        }
        // Compare-and-delete, in every spelling.
        28..=39 => {
            let key = if rng.percent(60) {
                space.claim(rng.below(Space::IDS))
            } else {
                space.result(rng.below(Space::IDS))
            };
            let value = if rng.percent(70) {
                *rng.pick(&TOKENS)
            } else {
                *rng.pick(&[VALUES[0], VALUES[1], b"nope", b"charged:", b"w", b""])
            };
            let (name, cond) = *rng.pick(&CAD_SPELLINGS);
            let mut goblin = vec![name.as_bytes().to_vec(), space.key(key).to_vec()];
            if !cond.is_empty() {
                goblin.push(cond.as_bytes().to_vec());
            }
            goblin.push(value.to_vec());
            Step {
                goblin,
                redis: words(&[b"EVALSHA", sha_cad.as_bytes(), b"1", space.key(key), value]),
                keys: vec![key],
                effect: Effect::Cad(key),
                how: How::Exact,
                script_oracle: true,
            }
        }
        // SET, with a short PX, EX 1, or none.
        40..=53 => {
            let key = any_key(rng);
            let value = if rng.percent(60) {
                *rng.pick(&VALUES)
            } else {
                *rng.pick(&TOKENS)
            };
            let mut args = words(&[b"SET", space.key(key), value]);
            let ttl = match rng.below(10) {
                0..=3 => {
                    let ms = rng.range(100, 900);
                    args.extend(words(&[b"PX", ms.to_string().as_bytes()]));
                    Some(ms)
                }
                4 => {
                    args.extend(words(&[b"EX", b"1"]));
                    Some(1000)
                }
                _ => None,
            };
            Step::same(args, vec![key], Effect::Set(key, ttl))
        }
        54..=63 => {
            let key = any_key(rng);
            Step::same(words(&[b"GET", space.key(key)]), vec![key], Effect::None)
        }
        64..=68 => {
            let mut keys = vec![any_key(rng)];
            if rng.percent(40) {
                keys.push(any_key(rng));
            }
            let mut args = vec![b"DEL".to_vec()];
            args.extend(keys.iter().map(|&k| space.key(k).to_vec()));
            Step::same(args, keys.clone(), Effect::Del(keys))
        }
        69..=72 => {
            let key = any_key(rng);
            let field = if rng.percent(50) { &b"f"[..] } else { b"g" };
            Step::same(
                words(&[b"HSET", space.key(key), field, b"v"]),
                vec![key],
                Effect::None,
            )
        }
        73..=76 => {
            let key = any_key(rng);
            let score = rng.range(1, 3).to_string();
            Step::same(
                words(&[b"ZADD", space.key(key), score.as_bytes(), b"m"]),
                vec![key],
                Effect::None,
            )
        }
        77..=80 => {
            let key = any_key(rng);
            let secs = *rng.pick(&[1, 1, 100, 0, -5]);
            Step::same(
                words(&[b"EXPIRE", space.key(key), secs.to_string().as_bytes()]),
                vec![key],
                Effect::Expire(key, secs * 1000),
            )
        }
        81..=84 => {
            let key = any_key(rng);
            let ms = match rng.below(6) {
                0 => 0,
                1 => 100_000,
                _ => rng.range(100, 900),
            };
            Step::same(
                words(&[b"PEXPIRE", space.key(key), ms.to_string().as_bytes()]),
                vec![key],
                Effect::Expire(key, ms),
            )
        }
        85..=88 => {
            let key = any_key(rng);
            let mut step = Step::same(words(&[b"PTTL", space.key(key)]), vec![key], Effect::None);
            step.how = How::TtlClass;
            step
        }
        89..=91 => {
            let key = any_key(rng);
            Step::same(words(&[b"TYPE", space.key(key)]), vec![key], Effect::None)
        }
        92..=93 => {
            let (a, b) = (any_key(rng), any_key(rng));
            Step::same(
                words(&[b"EXISTS", space.key(a), space.key(b)]),
                vec![a, b],
                Effect::None,
            )
        }
        // Sleeps, so that results expire, and now and then a lease.
        94..=97 => {
            thread::sleep(Duration::from_millis(rng.range(20, 300) as u64));
            return None;
        }
        _ => {
            thread::sleep(Duration::from_millis(1100));
            return None;
        }
    };
    Some(step)
}

/// redis's reply to a script with the script's location removed from an error
/// (`… script: <sha>, on @user_script:1.`), and SET's name replaced by the native one.
fn normalize_script_reply(reply: &[u8]) -> Vec<u8> {
    if !reply.starts_with(b"-") {
        return reply.to_vec();
    }
    let text = String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned();
    let text = match text.find(" script: ") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    let text = text.replace(
        "invalid expire time in 'set' command",
        "invalid expire time in 'goblin.claim' command",
    );
    format!("-{text}\r\n").into_bytes()
}

/// The interval in which a tracked key's deadline falls on both servers.
type Window = Option<(Instant, Instant)>;

/// Waits until no key of `keys` is near its deadline; forgets deadlines that passed.
fn wait_clear(windows: &mut [Window], keys: &[usize]) {
    loop {
        let now = Instant::now();
        let mut wait_until = None;
        for &k in keys {
            if let Some((lo, hi)) = windows[k] {
                if now > hi {
                    windows[k] = None;
                } else if now + STEP_BUDGET >= lo {
                    wait_until = Some(hi.max(wait_until.unwrap_or(hi)));
                }
            }
        }
        match wait_until {
            None => return,
            Some(t) => thread::sleep(t - now + Duration::from_millis(1)),
        }
    }
}

/// Sets or clears a key's deadline window after a step run in `[t0, t1]`.
fn set_window(windows: &mut [Window], key: usize, ms: Option<i64>, t0: Instant, t1: Instant) {
    windows[key] = match ms {
        Some(ms) if ms > 0 && ms <= TRACKED_TTL_MS => {
            let d = Duration::from_millis(ms as u64);
            Some((t0 + d - CLOCK_SLACK, t1 + d + CLOCK_SLACK))
        }
        _ => None,
    };
}

/// Two connections of one sequence, and what it has done so far.
struct Runner {
    g: Raw,
    r: Raw,
    seed: u64,
    threads: usize,
    resp3: bool,
    log: Vec<String>,
}

impl Runner {
    fn fail(&self, what: &str) -> ! {
        let mut text = String::new();
        for line in self.log.iter().rev().take(30).rev() {
            let _ = writeln!(text, "  {line}");
        }
        panic!(
            "GOBLIN_DIFF_SEED={} (--threads {}, RESP{}): {what}\nlast steps (goblin command → \
             goblin reply | redis reply):\n{text}",
            self.seed,
            self.threads,
            if self.resp3 { 3 } else { 2 }
        );
    }
}

/// Runs one sequence; `Err` when a stall made it inconclusive.
fn run_sequence(
    goblin: &Server,
    redis: &Server,
    threads: usize,
    seed: u64,
    shas: &(String, String),
    tally: &Tally,
) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let resp3 = seed % 2 == 1;
    let mut run = Runner {
        g: goblin.raw(),
        r: redis.raw(),
        seed,
        threads,
        resp3,
        log: Vec::new(),
    };
    if resp3 {
        let (g, r) = ask_both(&mut run.g, &mut run.r, &[b"HELLO", b"3"]);
        assert!(g.starts_with(b"%") && r.starts_with(b"%"), "HELLO 3");
    }
    let space = Space::new(seed, threads);
    let mut windows: Vec<Window> = vec![None; space.keys.len()];

    for n in 0..STEPS {
        let Some(step) = generate(&mut rng, &space, &shas.0, &shas.1) else {
            run.log.push(format!("#{n} (sleep)"));
            continue;
        };
        wait_clear(&mut windows, &step.keys);
        let pending: Vec<(Instant, Instant)> =
            step.keys.iter().filter_map(|&k| windows[k]).collect();

        let t0 = Instant::now();
        let g_args: Vec<&[u8]> = step.goblin.iter().map(Vec::as_slice).collect();
        let r_args: Vec<&[u8]> = step.redis.iter().map(Vec::as_slice).collect();
        let (got, want) = ask(&mut run.g, &g_args, &mut run.r, &r_args);
        let t1 = Instant::now();

        let want_cmp = if step.script_oracle {
            normalize_script_reply(&want)
        } else {
            want.clone()
        };
        run.log.push(format!(
            "#{n} {} → {} | {}",
            show_cmd(&step.goblin),
            show(&got),
            show(&want)
        ));
        if pending.iter().any(|&(lo, hi)| t0 <= hi && lo <= t1) {
            return Err(format!(
                "seed {seed}: step #{n} took {:?} and ran across a deadline",
                t1 - t0
            ));
        }
        if !same(&got, &want_cmp, step.how, &step.goblin[0]) {
            run.fail(&format!(
                "step #{n}: {} replied {} on goblin, {} on redis (compared {:?} with {}{})",
                show_cmd(&step.goblin),
                show(&got),
                show(&want),
                step.how,
                show(&want_cmp),
                if step.script_oracle {
                    ", the script's location removed"
                } else {
                    ""
                }
            ));
        }
        // PTTL replies are tallied by class.
        let got_cmp = if step.how == How::TtlClass {
            ttl_class(&got)
        } else {
            got.clone()
        };
        *tally
            .lock()
            .unwrap()
            .entry(reply_kind(&step.goblin[0], &got_cmp))
            .or_default() += 1;
        match step.effect {
            Effect::None => {}
            Effect::Claim(key, ms) => {
                if got == CLAIMED {
                    set_window(&mut windows, key, Some(ms), t0, t1);
                }
            }
            Effect::Set(key, ms) => {
                if got == b"+OK\r\n" {
                    set_window(&mut windows, key, ms, t0, t1);
                }
            }
            Effect::Del(keys) => keys.iter().for_each(|&k| windows[k] = None),
            Effect::Cad(key) => {
                if got == b":1\r\n" {
                    windows[key] = None;
                }
            }
            Effect::Expire(key, ms) => {
                if got == b":1\r\n" {
                    set_window(&mut windows, key, Some(ms), t0, t1);
                }
            }
        }
    }

    // The final state of every key, once no deadline is pending.
    let all: Vec<usize> = (0..space.keys.len()).collect();
    wait_clear(&mut windows, &all);
    for k in all {
        let key = space.key(k).to_vec();
        for name in [&b"TYPE"[..], b"GET"] {
            let (g, r) = ask_both(&mut run.g, &mut run.r, &[name, &key]);
            if g != r {
                run.fail(&format!(
                    "final state: {} {} is {} on goblin, {} on redis",
                    show(name),
                    show(&key),
                    show(&g),
                    show(&r)
                ));
            }
        }
    }
    Ok(())
}

/// Loads the oracle scripts; returns their SHA1s (claim, cad).
fn load_scripts(redis: &Server) -> (String, String) {
    let mut r = redis.raw();
    let mut load = |script: &str| {
        let reply = r.cmd(&[b"SCRIPT", b"LOAD", script.as_bytes()]);
        assert!(
            reply.starts_with(b"$40\r\n"),
            "SCRIPT LOAD: {}",
            show(&reply)
        );
        String::from_utf8(reply[5..45].to_vec()).unwrap()
    };
    (load(CLAIM_SCRIPT), load(CAD_SCRIPT))
}

#[test]
fn claim_and_cad_match_their_lua_oracles() {
    let seeds = seeds("goblin_claim_diff", SEQUENCES);
    let tally = Tally::default();
    thread::scope(|scope| {
        for threads in THREADS {
            let (seeds, tally) = (&seeds, &tally);
            scope.spawn(move || {
                let goblin = Server::goblin_threads(threads);
                let redis = Server::redis();
                let shas = load_scripts(&redis);
                let inconclusive: Vec<String> = thread::scope(|inner| {
                    let runners: Vec<_> = (0..RUNNERS as usize)
                        .map(|w| {
                            let (goblin, redis, shas) = (&goblin, &redis, &shas);
                            inner.spawn(move || {
                                seeds
                                    .iter()
                                    .skip(w)
                                    .step_by(RUNNERS as usize)
                                    .filter_map(|&seed| {
                                        run_sequence(goblin, redis, threads, seed, shas, tally)
                                            .err()
                                    })
                                    .collect::<Vec<_>>()
                            })
                        })
                        .collect();
                    runners
                        .into_iter()
                        .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                        .collect()
                });
                for line in &inconclusive {
                    eprintln!("goblin_claim_diff --threads {threads}: inconclusive: {line}");
                }
                assert!(
                    inconclusive.len() <= MAX_INCONCLUSIVE.min(seeds.len() / 2),
                    "--threads {threads}: {} of {} sequences inconclusive: the machine stalls \
                     too much for the timing margins",
                    inconclusive.len(),
                    seeds.len()
                );
            });
        }
    });
    let tally = tally.into_inner().unwrap();
    eprintln!("goblin_claim_diff: replies compared: {tally:#?}");
    if seeds.len() > 1 {
        for kind in MUST_SEE {
            assert!(
                tally.keys().any(|k| k.eq_ignore_ascii_case(kind)),
                "no {kind} compared in the whole run: {tally:#?}"
            );
        }
    }
}

#[test]
fn script_error_normalization() {
    assert_eq!(
        normalize_script_reply(
            b"-ERR invalid expire time in 'set' command script: \
              28e9f2bb7df5a3c199a84fb8c78bb72d5910232b, on @user_script:1.\r\n"
        ),
        b"-ERR invalid expire time in 'goblin.claim' command\r\n"
    );
    assert_eq!(normalize_script_reply(b"$1\r\nx\r\n"), b"$1\r\nx\r\n");
    assert_eq!(ttl_class(b":1234\r\n"), ttl_class(b":9\r\n"));
    assert_ne!(ttl_class(b":-2\r\n"), ttl_class(b":-1\r\n"));
}
