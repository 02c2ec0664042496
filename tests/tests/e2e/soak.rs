//! A soak (issue 3): a random mix of single- and multi-key commands from 64 connections
//! against `--threads 4` for `GOBLIN_SOAK_SECS` seconds (default 30), checked as it runs
//! and at the end against a model.
//!
//! The keyspace is built so that every reply is predictable:
//! - each connection owns 8 keys (two per shard) that only it writes, so a sequential
//!   model of that connection predicts every reply about them and their final values;
//! - 16 shared "claim" keys are only ever written by SETNX and MSETNX and never deleted:
//!   a claim, once seen, never changes, and at the end each claimed key holds the value
//!   of the one connection whose SETNX/MSETNX on it answered 1;
//! - 8 shared constant keys are only read.
//!
//! No deadlock: every reply must arrive within the harness's `REPLY_TIMEOUT`.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use goblin_tests::assert_bytes_eq;
use goblin_tests::cmd::{Cmd, call, cmd, over_keys, pipeline, show_cmd};
use goblin_tests::keys::spread;
use goblin_tests::model::Model;
use goblin_tests::reply::{bulk_or_nil, bulks, elements, int, integer, ok, simple};
use goblin_tests::rng::{Rng, seed};
use goblin_tests::{Raw, Server, show};

const THREADS: usize = 4;
const CONNECTIONS: usize = 64;
/// Keys each connection owns: two per shard.
const OWN_PER_SHARD: usize = 2;
const CLAIMS_PER_SHARD: usize = 4;
const CONSTS_PER_SHARD: usize = 2;

/// The soak's length: `GOBLIN_SOAK_SECS`, else 30 seconds.
fn duration() -> Duration {
    let secs = std::env::var("GOBLIN_SOAK_SECS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(30.0);
    Duration::from_secs_f64(secs)
}

/// The shared keys.
struct Shared {
    /// The claim keys of each epoch (one a second): a new contest every second keeps
    /// MSETNX and SETNX racing for the same keys the whole run.
    claims: Vec<Vec<String>>,
    consts: Vec<String>,
    start: Instant,
}

impl Shared {
    /// The current epoch.
    fn epoch(&self) -> usize {
        (self.start.elapsed().as_secs() as usize).min(self.claims.len() - 1)
    }

    /// The claim keys of the current epoch.
    fn claims(&self) -> &[String] {
        &self.claims[self.epoch()]
    }

    /// DBSIZE's bounds now: the constants are always there; at most every claim of the
    /// epochs so far and every owned key besides.
    fn dbsize_bounds(&self) -> Want {
        let consts = (CONSTS_PER_SHARD * THREADS) as i64;
        let claims = (CLAIMS_PER_SHARD * THREADS * (self.epoch() + 1)) as i64;
        let own = (CONNECTIONS * OWN_PER_SHARD * THREADS) as i64;
        Want::IntIn(consts, consts + claims + own)
    }
}

fn const_value(key: &str) -> String {
    format!("const-of-{key}")
}

fn claim_value(conn: usize) -> String {
    format!("c{conn}")
}

/// One connection's view: its model, the claims it won and those it has seen.
struct Client {
    id: usize,
    raw: Raw,
    rng: Rng,
    own: Vec<String>,
    model: Model,
    won: BTreeSet<String>,
    seen_claims: HashMap<String, Vec<u8>>,
    counter: u64,
    ops: usize,
}

/// What a reply must be.
enum Want {
    /// Exactly these bytes.
    Exact(Vec<u8>),
    /// An integer within the bounds (DBSIZE: other connections change it).
    IntIn(i64, i64),
    /// The reply of an MGET over own, constant and claim keys.
    Mget(Vec<MgetSlot>),
    /// SETNX/MSETNX on claim keys: 0 or 1; 1 means these keys were won.
    Claim(Vec<String>),
}

/// What one MGET position must hold.
enum MgetSlot {
    Own(Option<Vec<u8>>),
    Const(String),
    Claim(String),
}

impl Client {
    fn what(&self) -> String {
        format!("connection {}", self.id)
    }

    fn value(&mut self) -> String {
        self.counter += 1;
        format!("c{}v{}", self.id, self.counter)
    }

    fn own_key(&mut self) -> String {
        self.rng.pick(&self.own).clone()
    }

    fn own_keys(&mut self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.own_key()).collect()
    }

    /// A random command on own keys, with its exact expected reply (from the model).
    fn own_command(&mut self) -> (Cmd, Want) {
        let c = match self.rng.below(8) {
            0 | 1 => {
                let (k, v) = (self.own_key(), self.value());
                cmd(&["SET", &k, &v])
            }
            2 => cmd(&["GET", &self.own_key()]),
            3 => {
                let n = 1 + self.rng.below(4);
                over_keys("DEL", &self.own_keys(n), None)
            }
            4 => {
                let n = 1 + self.rng.below(4);
                let mut c = cmd(&["MSET"]);
                for k in self.own_keys(n) {
                    let v = self.value();
                    c.push(k.into_bytes());
                    c.push(v.into_bytes());
                }
                c
            }
            5 => {
                let n = 1 + self.rng.below(6);
                over_keys("MGET", &self.own_keys(n), None)
            }
            6 => {
                // Neighbours in `own` live on different shards.
                let i = self.rng.below(self.own.len());
                let j = (i + 1 + 2 * self.rng.below(self.own.len() / 2 - 1)) % self.own.len();
                let name = if self.rng.percent(50) {
                    "RENAME"
                } else {
                    "RENAMENX"
                };
                cmd(&[name, &self.own[i], &self.own[j]])
            }
            _ => {
                let n = 1 + self.rng.below(4);
                over_keys("EXISTS", &self.own_keys(n), None)
            }
        };
        let want = self.model.apply(&c);
        (c, Want::Exact(want))
    }

    /// A random command, possibly touching shared keys, with what its reply must be.
    fn command(&mut self, shared: &Shared) -> (Cmd, Want) {
        match self.rng.below(20) {
            0 => {
                // MGET over own, constant and claim keys, in random order.
                let mut c = cmd(&["MGET"]);
                let mut slots = Vec::new();
                for _ in 0..2 + self.rng.below(8) {
                    match self.rng.below(3) {
                        0 => {
                            let k = self.own_key();
                            slots.push(MgetSlot::Own(self.model.map.get(k.as_bytes()).cloned()));
                            c.push(k.into_bytes());
                        }
                        1 => {
                            let k = self.rng.pick(&shared.consts).clone();
                            slots.push(MgetSlot::Const(k.clone()));
                            c.push(k.into_bytes());
                        }
                        _ => {
                            let k = self.rng.pick(shared.claims()).clone();
                            slots.push(MgetSlot::Claim(k.clone()));
                            c.push(k.into_bytes());
                        }
                    }
                }
                (c, Want::Mget(slots))
            }
            1 => {
                // EXISTS over own and constant keys (repeats count).
                let n = 1 + self.rng.below(3);
                let mut keys = self.own_keys(n);
                let consts = 1 + self.rng.below(3);
                for _ in 0..consts {
                    keys.push(self.rng.pick(&shared.consts).clone());
                }
                let own = over_keys("EXISTS", &keys[..keys.len() - consts], None);
                let n = integer(&self.model.apply(&own)) + consts as i64;
                (over_keys("EXISTS", &keys, None), Want::Exact(int(n)))
            }
            2 => {
                let k = self.rng.pick(shared.claims()).clone();
                let c = cmd(&["SETNX", &k, &claim_value(self.id)]);
                (c, Want::Claim(vec![k]))
            }
            3 => {
                let n = 2 + self.rng.below(2);
                let keys: Vec<String> = (0..n)
                    .map(|_| self.rng.pick(shared.claims()).clone())
                    .collect();
                let c = over_keys("MSETNX", &keys, Some(&claim_value(self.id)));
                (c, Want::Claim(keys))
            }
            4 => (cmd(&["DBSIZE"]), shared.dbsize_bounds()),
            _ => self.own_command(),
        }
    }

    /// Checks one reply.
    fn check(&mut self, c: &[Vec<u8>], want: &Want, reply: &[u8]) {
        let what = format!("{}: reply to {}", self.what(), show_cmd(c));
        match want {
            Want::Exact(bytes) => assert_bytes_eq!(reply, bytes, "{what}"),
            Want::IntIn(lo, hi) => {
                let n = integer(reply);
                assert!((*lo..=*hi).contains(&n), "{what}: {n} not in {lo}..={hi}");
            }
            Want::Mget(slots) => {
                let values = bulks(reply);
                assert_eq!(values.len(), slots.len(), "{what}");
                for (v, slot) in values.iter().zip(slots) {
                    match slot {
                        MgetSlot::Own(want) => assert_eq!(v, want, "{what}: {}", show(reply)),
                        MgetSlot::Const(k) => {
                            assert_eq!(v.as_deref(), Some(const_value(k).as_bytes()), "{what}")
                        }
                        MgetSlot::Claim(k) => self.saw_claim(k, v.as_deref(), &what),
                    }
                }
            }
            Want::Claim(keys) => {
                if reply == int(1) {
                    self.won.extend(keys.iter().cloned());
                    let mine = claim_value(self.id).into_bytes();
                    for k in keys {
                        self.saw_claim(k, Some(&mine), &what);
                    }
                } else {
                    assert_bytes_eq!(reply, &int(0), "{what}");
                }
            }
        }
    }

    /// A claim key seen with `value`: once claimed it never changes, and a claim of
    /// ours is ours.
    fn saw_claim(&mut self, key: &str, value: Option<&[u8]>, what: &str) {
        if self.won.contains(key) {
            assert_eq!(
                value,
                Some(claim_value(self.id).as_bytes()),
                "{what}: {key} is ours"
            );
        }
        match (self.seen_claims.get(key), value) {
            (Some(before), Some(now)) => {
                assert_bytes_eq!(now, before, "{what}: claim {key} changed")
            }
            (Some(before), None) => panic!("{what}: claim {key} ({}) vanished", show(before)),
            (None, Some(now)) => {
                self.seen_claims.insert(key.to_string(), now.to_vec());
            }
            (None, None) => {}
        }
    }

    /// One step: a single command, a pipelined burst, or a MULTI/EXEC block.
    fn step(&mut self, shared: &Shared) {
        match self.rng.below(10) {
            0 => {
                // A burst of commands in one write.
                let items: Vec<(Cmd, Want)> = (0..2 + self.rng.below(10))
                    .map(|_| self.command(shared))
                    .collect();
                let cmds: Vec<Cmd> = items.iter().map(|(c, _)| c.clone()).collect();
                let replies = pipeline(&mut self.raw, &cmds);
                for ((c, want), reply) in items.iter().zip(&replies) {
                    self.check(c, want, reply);
                }
                self.ops += items.len();
            }
            1 => self.multi_exec(shared),
            _ => {
                let (c, want) = self.command(shared);
                let reply = call(&mut self.raw, &c);
                self.check(&c, &want, &reply);
                self.ops += 1;
            }
        }
    }

    /// MULTI, own-key commands (and DBSIZE, which locks every shard), EXEC or DISCARD, in
    /// one write.
    fn multi_exec(&mut self, shared: &Shared) {
        let discard = self.rng.percent(10);
        let mut queued: Vec<(Cmd, Want)> = Vec::new();
        let before = self.model.clone();
        for _ in 0..1 + self.rng.below(6) {
            if self.rng.percent(15) {
                queued.push((cmd(&["DBSIZE"]), shared.dbsize_bounds()));
            } else {
                queued.push(self.own_command());
            }
        }
        if discard {
            self.model = before;
        }
        let mut cmds = vec![cmd(&["MULTI"])];
        cmds.extend(queued.iter().map(|(c, _)| c.clone()));
        cmds.push(cmd(&[if discard { "DISCARD" } else { "EXEC" }]));
        let replies = pipeline(&mut self.raw, &cmds);
        let what = self.what();
        assert_bytes_eq!(&replies[0], &ok(), "{what}: MULTI");
        for (r, (c, _)) in replies[1..=queued.len()].iter().zip(&queued) {
            assert_bytes_eq!(r, &simple("QUEUED"), "{what}: {}", show_cmd(c));
        }
        let last = &replies[queued.len() + 1];
        if discard {
            assert_bytes_eq!(last, &ok(), "{what}: DISCARD");
        } else {
            let items = elements(last);
            assert_eq!(items.len(), queued.len(), "{what}: EXEC {}", show(last));
            for ((c, want), reply) in queued.iter().zip(&items) {
                self.check(c, want, reply);
            }
        }
        self.ops += cmds.len();
    }
}

/// 64 connections, dealt round-robin over 4 threads, run the random mix for the soak's
/// duration; every reply is checked as it arrives (exactly, for everything the
/// connection alone determines), and at the end every key's value is compared with the
/// model: each connection's own keys with its model, each claim with its one winner,
/// the constants unchanged, DBSIZE and KEYS * exactly the expected keyspace.
#[test]
fn soak_random_mix_from_64_connections_stays_consistent() {
    let master = seed("soak_random_mix_from_64_connections_stays_consistent");
    let server = Server::goblin_threads(THREADS);
    let run = duration();
    let shared = Shared {
        claims: (0..=run.as_secs() as usize + 1)
            .map(|e| spread(&format!("claim{e}."), THREADS, CLAIMS_PER_SHARD))
            .collect(),
        consts: spread("const", THREADS, CONSTS_PER_SHARD),
        start: Instant::now(),
    };
    let mut control = server.raw();
    let consts_mset = {
        let mut c = cmd(&["MSET"]);
        for k in &shared.consts {
            c.push(k.as_bytes().to_vec());
            c.push(const_value(k).into_bytes());
        }
        c
    };
    assert_eq!(call(&mut control, &consts_mset), ok());
    let stop = AtomicBool::new(false);
    let total_ops = AtomicUsize::new(0);
    let started = Instant::now();
    let clients: Vec<Client> = thread::scope(|s| {
        let handles: Vec<_> = (0..CONNECTIONS)
            .map(|id| {
                let mut client = Client {
                    id,
                    raw: server.raw(),
                    rng: Rng::new(master ^ (id as u64).wrapping_mul(0x9E37_79B9)),
                    own: spread(&format!("own{id}."), THREADS, OWN_PER_SHARD),
                    model: Model::default(),
                    won: BTreeSet::new(),
                    seen_claims: HashMap::new(),
                    counter: 0,
                    ops: 0,
                };
                let (shared, stop, total_ops) = (&shared, &stop, &total_ops);
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let before = client.ops;
                        client.step(shared);
                        total_ops.fetch_add(client.ops - before, Ordering::Relaxed);
                    }
                    client
                })
            })
            .collect();
        while started.elapsed() < run {
            thread::sleep(Duration::from_millis(50));
            if handles.iter().any(|h| h.is_finished()) {
                // A connection failed: stop the others and report it below.
                break;
            }
        }
        stop.store(true, Ordering::SeqCst);
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let elapsed = started.elapsed();
    let ops = total_ops.load(Ordering::SeqCst);
    eprintln!(
        "soak: {ops} commands in {elapsed:.1?} ({:.0}/s) from {CONNECTIONS} connections",
        ops as f64 / elapsed.as_secs_f64()
    );
    for c in &clients {
        assert!(c.ops > 0, "connection {} made no progress", c.id);
    }

    // The final state, read by a fresh connection.
    let mut expected: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    for c in &clients {
        let values = bulks(&call(&mut control, &over_keys("MGET", &c.own, None)));
        for (k, v) in c.own.iter().zip(values) {
            let want = c.model.map.get(k.as_bytes()).cloned();
            assert_eq!(v, want, "connection {}: final value of {k}", c.id);
            if let Some(v) = want {
                expected.insert(k.clone().into_bytes(), v);
            }
        }
    }
    let mut claimed = 0;
    for epoch in &shared.claims {
        let values = bulks(&call(&mut control, &over_keys("MGET", epoch, None)));
        for (k, v) in epoch.iter().zip(values) {
            let winners: Vec<usize> = clients
                .iter()
                .filter(|c| c.won.contains(k))
                .map(|c| c.id)
                .collect();
            assert!(winners.len() <= 1, "claim {k} won by {winners:?}");
            let want = winners.first().map(|&w| claim_value(w).into_bytes());
            assert_eq!(v, want, "claim {k}: winners {winners:?}");
            if let Some(v) = want {
                expected.insert(k.clone().into_bytes(), v);
                claimed += 1;
            }
        }
    }
    eprintln!(
        "soak: {claimed} of {} claim keys claimed",
        shared.claims.iter().map(Vec::len).sum::<usize>()
    );
    for k in &shared.consts {
        let v = call(&mut control, &cmd(&["GET", k]));
        assert_eq!(v, bulk_or_nil(Some(const_value(k).as_bytes())), "{k}");
        expected.insert(k.clone().into_bytes(), const_value(k).into_bytes());
    }
    let dbsize = integer(&call(&mut control, &cmd(&["DBSIZE"])));
    assert_eq!(dbsize, expected.len() as i64, "DBSIZE at the end");
    let keys: BTreeSet<Vec<u8>> = bulks(&call(&mut control, &cmd(&["KEYS", "*"])))
        .into_iter()
        .flatten()
        .collect();
    let want: BTreeSet<Vec<u8>> = expected.keys().cloned().collect();
    assert_eq!(keys, want, "KEYS * at the end");
}
