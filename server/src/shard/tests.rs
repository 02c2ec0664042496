//! The shard: its lock table in action, ownership, reply budgets, and the write path —
//! every way keys change emits its event, with its effect.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use goblin_store::{Change, Event, SLOTS, key_slot};

use super::events::{Effect, Observer, Origin, Write};
use super::*;
use crate::runtime::msg::LockMode;
use crate::table::Flags;
use crate::testkit::{Loopback, NOW, batch, shared};

const C1: ConnRef = ConnRef {
    worker: 1,
    key: 1,
    generation: 1,
};
const C2: ConnRef = ConnRef {
    worker: 1,
    key: 2,
    generation: 1,
};
const T1: TxRef = TxRef { worker: 2, seq: 1 };

fn step(keys: &[&[u8]], mode: LockMode, release: bool) -> TxStep {
    TxStep {
        tx: T1,
        index: 0,
        lock: keys.iter().map(|k| (k.to_vec(), mode)).collect(),
        lock_all: false,
        try_lock: false,
        work: None,
        release,
        now: NOW,
        slots_version: 1,
        db: 0,
        command: None,
        tracked: None,
        reads: false,
        cuts: false,
    }
}

fn one_shard() -> (Shared, Shard) {
    let shared = shared(1);
    let shard = Shard::new(
        0,
        Arc::clone(&shared.slots),
        shared.commands.all().len(),
        16,
    );
    (shared, shard)
}

fn dones(out: &[Outgoing]) -> usize {
    out.iter()
        .filter(|(_, m)| matches!(m, Msg::Done(..)))
        .count()
}

#[test]
fn commands_on_locked_keys_wait_and_others_do_not() {
    let (shared, mut shard) = one_shard();
    let t = &shared.commands;
    shard.step(&shared, step(&[b"a"], LockMode::Exclusive, false));
    assert_eq!(shard.take_out().len(), 1, "lock granted at once");
    shard.run_batch(&shared, C1, batch(t, &[&[b"GET", b"a"]]));
    assert!(
        shard.take_out().is_empty(),
        "GET a waits for the transaction"
    );
    shard.run_batch(&shared, C2, batch(t, &[&[b"GET", b"b"]]));
    assert_eq!(shard.take_out().len(), 1, "GET b runs");
    shard.step(&shared, step(&[], LockMode::Shared, true));
    assert_eq!(
        shard.take_out().len(),
        2,
        "release runs the waiting GET, then reports"
    );
    assert!(shard.quiet());
}

#[test]
fn a_connections_later_batch_waits_behind_its_earlier_one() {
    let (shared, mut shard) = one_shard();
    let t = &shared.commands;
    shard.step(&shared, step(&[b"a"], LockMode::Exclusive, false));
    shard.take_out();
    shard.run_batch(&shared, C1, batch(t, &[&[b"SET", b"a", b"1"]]));
    shard.run_batch(&shared, C1, batch(t, &[&[b"SET", b"b", b"1"]]));
    assert!(
        shard.take_out().is_empty(),
        "the SET b of the same connection must not overtake"
    );
    shard.step(&shared, step(&[], LockMode::Shared, true));
    assert_eq!(dones(&shard.take_out()), 2);
}

#[test]
fn shared_locks_admit_readers_and_hold_writers() {
    let (shared, mut shard) = one_shard();
    let t = &shared.commands;
    shard.step(&shared, step(&[b"a"], LockMode::Shared, false));
    shard.take_out();
    shard.run_batch(&shared, C1, batch(t, &[&[b"GET", b"a"]]));
    assert_eq!(shard.take_out().len(), 1);
    shard.run_batch(&shared, C2, batch(t, &[&[b"SET", b"a", b"x"]]));
    assert!(shard.take_out().is_empty());
    // A reader arriving after a waiting writer queues behind it.
    shard.run_batch(&shared, C1, batch(t, &[&[b"GET", b"a"]]));
    assert!(shard.take_out().is_empty());
    shard.step(&shared, step(&[], LockMode::Shared, true));
    assert_eq!(shard.take_out().len(), 3);
}

/// A key of a slot shard 0 does not own in a two-shard map.
fn foreign_key(slots: &SlotMap) -> Vec<u8> {
    (0..)
        .map(|i| format!("k{i}").into_bytes())
        .find(|k| slots.shard_of_key(k) == 1)
        .unwrap_or_default()
}

#[test]
fn a_shard_refuses_keys_it_does_not_own() {
    let shared = shared(2);
    let t = &shared.commands;
    let mut shard = Shard::new(0, Arc::clone(&shared.slots), t.all().len(), 16);
    let foreign = foreign_key(&shared.slots);
    // Routed with the same map version: trusted, not checked (the same map routed it).
    // Routed with another version: checked, and refused.
    let mut b = batch(t, &[&[b"SET", &foreign, b"v"], &[b"SET", b"{x}", b"v"]]);
    b.slots_version = 0;
    shard.run_batch(&shared, C1, b);
    let out = shard.take_out();
    let Some((_, Msg::Done(_, b))) = out.first() else {
        panic!("{out:?}");
    };
    let slot = key_slot(&foreign);
    let refusal =
        format!("-ERR internal error: hash slot {slot} is not served by thread 0; retry\r\n");
    let replies = String::from_utf8_lossy(&b.replies);
    assert!(replies.starts_with(&refusal), "{replies}");
    assert_eq!(
        shard.dbs().get(0).map_or(0, |k| k.len()),
        usize::from(shared.slots.owns(0, usize::from(key_slot(b"{x}"))))
    );
    // A transaction step locking a foreign key is refused, and locks nothing.
    let mut s = step(&[&foreign], LockMode::Exclusive, false);
    s.slots_version = 0;
    shard.step(&shared, s);
    match shard.take_out().pop() {
        Some((_, Msg::StepDone(done))) => {
            assert!(done.out.is_err() && !done.holds_locks);
        }
        other => panic!("{other:?}"),
    }
    assert!(shard.quiet());
}

#[test]
fn a_newer_slot_map_moves_ownership() {
    let shared = shared(2);
    let mut shard = Shard::new(
        0,
        Arc::clone(&shared.slots),
        shared.commands.all().len(),
        16,
    );
    let slot = SLOTS - 1;
    assert!(!shard.slots().owns(0, slot));
    let moved = Arc::new(shared.slots.with_moves(&[(slot, 0)]));
    shard.set_slots(Arc::clone(&moved));
    assert!(shard.slots().owns(0, slot));
    // An older map is ignored.
    shard.set_slots(Arc::clone(&shared.slots));
    assert_eq!(shard.slots().version(), moved.version());
}

#[test]
fn a_batch_stops_at_its_reply_budget_and_resumes_in_order() {
    let (shared, mut shard) = one_shard();
    let t = &shared.commands;
    let value = vec![b'v'; 100];
    let mut out = Vec::new();
    let set = crate::testkit::Cmd::new(&[b"SET", b"big", &value]);
    let Ok(spec) = t.resolve(&set.args()) else {
        panic!()
    };
    shard.execute(
        &shared,
        spec,
        &set.args(),
        0,
        NOW,
        &mut out,
        Version::Resp2,
        None,
        1,
    );
    let get: &[&[u8]] = &[b"GET", b"big"];
    let mut first = batch(t, &[get, get, get]);
    first.reply_budget = 150;
    shard.run_batch(&shared, C1, first);
    let later = batch(t, &[&[b"SET", b"big", b"x"]]);
    shard.run_batch(&shared, C1, later);
    let out = shard.take_out();
    assert_eq!(out.len(), 1, "{out:?}");
    let Some((_, Msg::Replies(_, 0, replies, _))) = out.first() else {
        panic!("{out:?}");
    };
    assert_eq!(
        replies.len(),
        2 * 108,
        "stopped once the replies reached the budget"
    );
    // The later batch did not overtake: the value is still there when the rest runs.
    shard.resume(&shared, C1, Some(1 << 20));
    let out = shard.take_out();
    assert_eq!(dones(&out), 2);
    let Some((_, Msg::Done(_, rest))) = out.first() else {
        panic!("{out:?}")
    };
    assert_eq!(rest.replies.len(), 108);
    // A gone connection's stalled batch comes back unrun.
    let mut again = batch(t, &[get, get]);
    again.reply_budget = 1;
    shard.run_batch(&shared, C2, again);
    shard.take_out();
    shard.resume(&shared, C2, None);
    let out = shard.take_out();
    let Some((_, Msg::Done(_, back))) = out.first() else {
        panic!("{out:?}")
    };
    assert_eq!((back.next, back.replies.len()), (1, 0));
}

/// What an observer saw of one write.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    events: Vec<(Change, Vec<u8>)>,
    flushed: bool,
    effect: Option<Vec<Vec<Vec<u8>>>>,
    expiry: bool,
}

#[derive(Debug, Default)]
struct Recorder(Rc<RefCell<Vec<Seen>>>);

impl Observer for Recorder {
    fn on_write(&mut self, write: &Write<'_>) {
        let events = write
            .events
            .iter()
            .filter_map(Event::key)
            .map(|k| (k.change, k.key.to_vec()))
            .collect();
        let flushed = write
            .events
            .iter()
            .any(|e| matches!(e, Event::Flushed { .. }));
        let effect = match write.effect {
            Effect::AsSent => None,
            Effect::Commands(c) => Some(c.to_vec()),
            Effect::Events => Some(Vec::new()),
        };
        self.0.borrow_mut().push(Seen {
            events,
            flushed,
            effect,
            expiry: matches!(write.origin, Origin::Expiry),
        });
    }
}

/// A loopback of `threads` shards, each observed by one recorder.
fn observed(threads: usize) -> (Loopback, Rc<RefCell<Vec<Seen>>>) {
    let mut lb = Loopback::new(threads);
    let seen = Rc::new(RefCell::new(Vec::new()));
    for shard in &mut lb.shards {
        shard.add_observer(Box::new(Recorder(Rc::clone(&seen))));
    }
    (lb, seen)
}

/// A command's arguments.
type Argv = &'static [&'static [u8]];

/// A sample invocation of every command flagged `write`, after its setup commands: each
/// must record at least one key event.
const WRITES: &[(Argv, &[Argv])] = &[
    (&[b"SET", b"k", b"v"], &[]),
    (&[b"SETNX", b"k", b"v"], &[]),
    (&[b"SETEX", b"k", b"10", b"v"], &[]),
    (&[b"PSETEX", b"k", b"10", b"v"], &[]),
    (&[b"GETSET", b"k", b"v"], &[]),
    (&[b"GETDEL", b"k"], &[&[b"SET", b"k", b"v"]]),
    (&[b"GETEX", b"k", b"EX", b"10"], &[&[b"SET", b"k", b"v"]]),
    (&[b"MSET", b"{t}a", b"1", b"{t}b", b"2"], &[]),
    (&[b"MSETNX", b"{t}a", b"1", b"{t}b", b"2"], &[]),
    (&[b"APPEND", b"k", b"v"], &[]),
    (&[b"INCR", b"k"], &[]),
    (&[b"DECR", b"k"], &[]),
    (&[b"INCRBY", b"k", b"2"], &[]),
    (&[b"DECRBY", b"k", b"2"], &[]),
    (&[b"INCRBYFLOAT", b"k", b"1.5"], &[]),
    (&[b"SETRANGE", b"k", b"2", b"v"], &[]),
    (&[b"DEL", b"k"], &[&[b"SET", b"k", b"v"]]),
    (&[b"UNLINK", b"k"], &[&[b"SET", b"k", b"v"]]),
    (&[b"EXPIRE", b"k", b"10"], &[&[b"SET", b"k", b"v"]]),
    (&[b"PEXPIRE", b"k", b"10"], &[&[b"SET", b"k", b"v"]]),
    (&[b"EXPIREAT", b"k", b"1"], &[&[b"SET", b"k", b"v"]]),
    (&[b"PEXPIREAT", b"k", b"1"], &[&[b"SET", b"k", b"v"]]),
    (&[b"PERSIST", b"k"], &[&[b"SET", b"k", b"v", b"EX", b"10"]]),
    (&[b"RENAME", b"{t}a", b"{t}b"], &[&[b"SET", b"{t}a", b"v"]]),
    (
        &[b"RENAMENX", b"{t}a", b"{t}b"],
        &[&[b"SET", b"{t}a", b"v"]],
    ),
    (&[b"COPY", b"{t}a", b"{t}b"], &[&[b"SET", b"{t}a", b"v"]]),
    (&[b"SADD", b"s", b"m"], &[]),
    (&[b"SREM", b"s", b"m"], &[&[b"SADD", b"s", b"m"]]),
    (&[b"SPOP", b"s"], &[&[b"SADD", b"s", b"m"]]),
    (
        &[b"SMOVE", b"{t}a", b"{t}b", b"m"],
        &[&[b"SADD", b"{t}a", b"m"]],
    ),
    (
        &[b"SINTERSTORE", b"{t}d", b"{t}a"],
        &[&[b"SADD", b"{t}a", b"m"]],
    ),
    (
        &[b"SUNIONSTORE", b"{t}d", b"{t}a"],
        &[&[b"SADD", b"{t}a", b"m"]],
    ),
    (
        &[b"SDIFFSTORE", b"{t}d", b"{t}a"],
        &[&[b"SADD", b"{t}a", b"m"]],
    ),
    (&[b"LPUSH", b"l", b"v"], &[]),
    (&[b"RPUSH", b"l", b"v"], &[]),
    (&[b"LPUSHX", b"l", b"v"], &[&[b"RPUSH", b"l", b"v"]]),
    (&[b"RPUSHX", b"l", b"v"], &[&[b"RPUSH", b"l", b"v"]]),
    (&[b"LPOP", b"l"], &[&[b"RPUSH", b"l", b"v"]]),
    (&[b"RPOP", b"l"], &[&[b"RPUSH", b"l", b"v"]]),
    (&[b"LSET", b"l", b"0", b"w"], &[&[b"RPUSH", b"l", b"v"]]),
    (
        &[b"LINSERT", b"l", b"BEFORE", b"v", b"w"],
        &[&[b"RPUSH", b"l", b"v"]],
    ),
    (&[b"LREM", b"l", b"0", b"v"], &[&[b"RPUSH", b"l", b"v"]]),
    (&[b"LTRIM", b"l", b"1", b"-1"], &[&[b"RPUSH", b"l", b"v"]]),
    (
        &[b"LMOVE", b"{t}a", b"{t}b", b"LEFT", b"RIGHT"],
        &[&[b"RPUSH", b"{t}a", b"v"]],
    ),
    (
        &[b"RPOPLPUSH", b"{t}a", b"{t}b"],
        &[&[b"RPUSH", b"{t}a", b"v"]],
    ),
    (
        &[b"LMPOP", b"2", b"{t}a", b"{t}b", b"LEFT"],
        &[&[b"RPUSH", b"{t}b", b"v"]],
    ),
    (&[b"BLPOP", b"l", b"0"], &[&[b"RPUSH", b"l", b"v"]]),
    (&[b"BRPOP", b"l", b"0"], &[&[b"RPUSH", b"l", b"v"]]),
    (
        &[b"BLMPOP", b"0", b"1", b"l", b"LEFT"],
        &[&[b"RPUSH", b"l", b"v"]],
    ),
    (
        &[b"BLMOVE", b"{t}a", b"{t}b", b"LEFT", b"RIGHT", b"0"],
        &[&[b"RPUSH", b"{t}a", b"v"]],
    ),
    (
        &[b"BRPOPLPUSH", b"{t}a", b"{t}b", b"0"],
        &[&[b"RPUSH", b"{t}a", b"v"]],
    ),
    (&[b"HSET", b"h", b"f", b"v"], &[]),
    (&[b"HMSET", b"h", b"f", b"v"], &[]),
    (&[b"HSETNX", b"h", b"f", b"v"], &[]),
    (&[b"HDEL", b"h", b"f"], &[&[b"HSET", b"h", b"f", b"v"]]),
    (&[b"HINCRBY", b"h", b"f", b"2"], &[]),
    (&[b"HINCRBYFLOAT", b"h", b"f", b"1.5"], &[]),
    (&[b"ZADD", b"z", b"1", b"m"], &[]),
    // sorted sets
    (&[b"ZINCRBY", b"z", b"1", b"m"], &[]),
    (&[b"ZREM", b"z", b"m"], &[&[b"ZADD", b"z", b"1", b"m"]]),
    (
        &[b"ZRANGESTORE", b"{t}d", b"{t}z", b"0", b"-1"],
        &[&[b"ZADD", b"{t}z", b"1", b"m"]],
    ),
    (
        &[b"ZREMRANGEBYRANK", b"z", b"0", b"-1"],
        &[&[b"ZADD", b"z", b"1", b"m"]],
    ),
    (
        &[b"ZREMRANGEBYSCORE", b"z", b"-inf", b"+inf"],
        &[&[b"ZADD", b"z", b"1", b"m"]],
    ),
    (
        &[b"ZREMRANGEBYLEX", b"z", b"-", b"+"],
        &[&[b"ZADD", b"z", b"1", b"m"]],
    ),
    (&[b"ZPOPMIN", b"z"], &[&[b"ZADD", b"z", b"1", b"m"]]),
    (&[b"ZPOPMAX", b"z"], &[&[b"ZADD", b"z", b"1", b"m"]]),
    (
        &[b"ZMPOP", b"2", b"{t}a", b"{t}z", b"MIN"],
        &[&[b"ZADD", b"{t}z", b"1", b"m"]],
    ),
    (&[b"BZPOPMIN", b"z", b"0"], &[&[b"ZADD", b"z", b"1", b"m"]]),
    (&[b"BZPOPMAX", b"z", b"0"], &[&[b"ZADD", b"z", b"1", b"m"]]),
    (
        &[b"BZMPOP", b"0", b"2", b"{t}a", b"{t}z", b"MIN"],
        &[&[b"ZADD", b"{t}z", b"1", b"m"]],
    ),
    (
        &[b"ZUNIONSTORE", b"{t}d", b"1", b"{t}z"],
        &[&[b"ZADD", b"{t}z", b"1", b"m"]],
    ),
    (
        &[b"ZINTERSTORE", b"{t}d", b"1", b"{t}z"],
        &[&[b"ZADD", b"{t}z", b"1", b"m"]],
    ),
    (
        &[b"ZDIFFSTORE", b"{t}d", b"1", b"{t}z"],
        &[&[b"ZADD", b"{t}z", b"1", b"m"]],
    ),
    (&[b"GOBLIN.CLAIM", b"{t}c", b"{t}r", b"w", b"30"], &[]),
    (&[b"GOBLIN.CAD", b"k", b"v"], &[&[b"SET", b"k", b"v"]]),
    (
        &[b"GOBLIN.PUBLISH", b"{t}c", b"{t}r", b"w", b"v", b"30"],
        &[&[b"SET", b"{t}c", b"w"]],
    ),
    (
        &[b"GOBLIN.RENEW", b"c", b"w", b"30"],
        &[&[b"SET", b"c", b"w"]],
    ),
    (&[b"DELIFEQ", b"k", b"v"], &[&[b"SET", b"k", b"v"]]),
    (&[b"DELEX", b"k"], &[&[b"SET", b"k", b"v"]]),
    (&[b"FLUSHALL"], &[&[b"SET", b"k", b"v"]]),
    (&[b"FUNCTION", b"LOAD", LIBRARY], &[]),
    (
        &[b"FUNCTION", b"DELETE", b"r"],
        &[&[b"FUNCTION", b"LOAD", LIBRARY]],
    ),
    (&[b"FUNCTION", b"FLUSH"], &[]),
    (&[b"FUNCTION", b"RESTORE", LIBRARY_DUMP, b"REPLACE"], &[]),
    (&[b"FLUSHDB"], &[&[b"SET", b"k", b"v"]]),
    (&[b"SWAPDB", b"0", b"1"], &[&[b"SET", b"k", b"v"]]),
    (&[b"MOVE", b"k", b"1"], &[&[b"SET", b"k", b"v"]]),
    (&[b"XADD", b"x", b"1-1", b"f", b"v"], &[]),
    (
        &[b"XDEL", b"x", b"1-1"],
        &[&[b"XADD", b"x", b"1-1", b"f", b"v"]],
    ),
    (
        &[b"XTRIM", b"x", b"MAXLEN", b"0"],
        &[&[b"XADD", b"x", b"1-1", b"f", b"v"]],
    ),
    (
        &[b"XSETID", b"x", b"5-5"],
        &[&[b"XADD", b"x", b"1-1", b"f", b"v"]],
    ),
    (&[b"XGROUP", b"CREATE", b"x", b"g", b"0", b"MKSTREAM"], &[]),
    (&[b"XGROUP", b"SETID", b"x", b"g", b"0"], XGROUP_SETUP),
    (&[b"XGROUP", b"DESTROY", b"x", b"g"], XGROUP_SETUP),
    (
        &[b"XGROUP", b"CREATECONSUMER", b"x", b"g", b"c"],
        XGROUP_SETUP,
    ),
    (
        &[b"XGROUP", b"DELCONSUMER", b"x", b"g", b"c"],
        XPENDING_SETUP,
    ),
    (
        &[b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", b"x", b">"],
        XGROUP_SETUP,
    ),
    (&[b"XACK", b"x", b"g", b"1-1"], XPENDING_SETUP),
    (&[b"XCLAIM", b"x", b"g", b"d", b"0", b"1-1"], XPENDING_SETUP),
    (
        &[b"XAUTOCLAIM", b"x", b"g", b"d", b"0", b"0"],
        XPENDING_SETUP,
    ),
    (&[b"SETBIT", b"k", b"7", b"1"], &[]),
    (&[b"BITFIELD", b"k", b"SET", b"u8", b"0", b"1"], &[]),
    (
        &[b"SORT", b"{t}l", b"STORE", b"{t}d"],
        &[&[b"RPUSH", b"{t}l", b"2", b"1"]],
    ),
    // geo
    (
        &[b"GEOADD", b"g", b"13.361389", b"38.115556", b"Palermo"],
        &[],
    ),
    (
        &[
            b"GEOSEARCHSTORE",
            b"{t}d",
            b"{t}g",
            b"FROMLONLAT",
            b"15",
            b"37",
            b"BYRADIUS",
            b"200",
            b"km",
        ],
        &[&[b"GEOADD", b"{t}g", b"13.361389", b"38.115556", b"Palermo"]],
    ),
    (
        &[
            b"GEORADIUS",
            b"{t}g",
            b"15",
            b"37",
            b"200",
            b"km",
            b"STORE",
            b"{t}d",
        ],
        &[&[b"GEOADD", b"{t}g", b"13.361389", b"38.115556", b"Palermo"]],
    ),
    (
        &[
            b"GEORADIUSBYMEMBER",
            b"{t}g",
            b"Palermo",
            b"200",
            b"km",
            b"STOREDIST",
            b"{t}d",
        ],
        &[&[b"GEOADD", b"{t}g", b"13.361389", b"38.115556", b"Palermo"]],
    ),
    (
        &[b"BITOP", b"OR", b"{t}d", b"{t}a", b"{t}b"],
        &[&[b"SET", b"{t}a", b"v"]],
    ),
    (&[b"PFADD", b"k", b"a"], &[]),
    (
        &[b"PFMERGE", b"{t}d", b"{t}a", b"{t}b"],
        &[&[b"PFADD", b"{t}a", b"x"]],
    ),
    (&[b"PFDEBUG", b"TODENSE", b"k"], &[&[b"PFADD", b"k", b"a"]]),
    // Flagged readonly, yet it writes the count it computed into the value's cache.
    (&[b"PFCOUNT", b"k"], &[&[b"PFADD", b"k", b"a"]]),
    // The DUMP of the string "v", as redis-server 7.0 writes it.
    (
        &[
            b"RESTORE",
            b"k",
            b"0",
            b"\x00\x01v\x0a\x00\x91\x08\xce\xb2\x198\x8a\xce",
        ],
        &[],
    ),
    (
        &[
            b"RESTORE-ASKING",
            b"k",
            b"0",
            b"\x00\x01v\x0a\x00\x91\x08\xce\xb2\x198\x8a\xce",
        ],
        &[],
    ),
    // A key whose TTL ran out by the clock (the tests' timestamp is years behind it): not
    // sent, it goes as an expired key goes — no target needed.
    (
        &[b"MIGRATE", b"127.0.0.1", b"1", b"k", b"0", b"1000"],
        &[&[b"SET", b"k", b"v", b"EX", b"10"]],
    ),
];

/// A stream with an entry and a group.
const XGROUP_SETUP: &[Argv] = &[
    &[b"XADD", b"x", b"1-1", b"f", b"v"],
    &[b"XGROUP", b"CREATE", b"x", b"g", b"0"],
];

/// A function library, and its FUNCTION DUMP.
const LIBRARY: &[u8] = b"#!lua name=r\nredis.register_function('r', function() end)";
const LIBRARY_DUMP: &[u8] = b"\xf59#!lua name=r\nredis.register_function('r', function() end)\n\x00\x1b\x1d\x9dQ\xb0\xd9f\x90";

/// A stream whose group has the entry pending for consumer `c`.
const XPENDING_SETUP: &[Argv] = &[
    &[b"XADD", b"x", b"1-1", b"f", b"v"],
    &[b"XGROUP", b"CREATE", b"x", b"g", b"0"],
    &[b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", b"x", b">"],
];

#[test]
fn every_write_command_records_its_events() {
    let (mut lb, seen) = observed(1);
    let table_writes: Vec<&str> = lb
        .shared
        .commands
        .all()
        .iter()
        .filter(|s| s.flags.contains(Flags::WRITE))
        .map(|s| s.name)
        .collect();
    for name in &table_writes {
        assert!(
            WRITES.iter().any(|(argv, _)| {
                let mut parts = name.split('|');
                let top = parts.next().unwrap_or_default();
                argv[0].eq_ignore_ascii_case(top.as_bytes())
                    && parts.next().is_none_or(|sub| {
                        argv.get(1)
                            .is_some_and(|a| a.eq_ignore_ascii_case(sub.as_bytes()))
                    })
            }),
            "{name} is a write command with no sample here: add one"
        );
    }
    for (argv, setup) in WRITES {
        lb.plan(&[b"FLUSHALL"]);
        for cmd in *setup {
            if cmd[0] == b"FLUSHALL" {
                continue;
            }
            if cmd[0] == b"FUNCTION" {
                lb.plan(cmd);
                continue;
            }
            lb.exec(cmd);
        }
        seen.borrow_mut().clear();
        let reply = match lb
            .shared
            .commands
            .resolve(&crate::testkit::Cmd::new(argv).args())
        {
            Ok(spec) if matches!(spec.exec, Exec::Plan(_)) => lb.plan(argv).unwrap_or_default(),
            _ => lb.exec(argv),
        };
        let name = String::from_utf8_lossy(argv[0]);
        assert_ne!(
            reply.first(),
            Some(&b'-'),
            "{name}: {}",
            String::from_utf8_lossy(&reply)
        );
        let seen = seen.borrow();
        // (A change to the function libraries is a write of no key, seen as its effect.)
        let keyless = |s: &Seen| {
            s.effect
                .as_ref()
                .is_some_and(|e| e.iter().any(|c| c.first() == Some(&b"FUNCTION".to_vec())))
        };
        assert!(
            seen.iter()
                .any(|s| !s.events.is_empty() || s.flushed || keyless(s)),
            "{name} recorded no event: {seen:?}"
        );
    }
}

fn ms(n: u64) -> Vec<u8> {
    n.to_string().into_bytes()
}

fn argv(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

#[test]
fn effects_are_what_replaying_must_do() {
    let (mut lb, seen) = observed(1);
    let last = |seen: &Rc<RefCell<Vec<Seen>>>| seen.borrow().last().cloned();
    lb.exec(&[b"SET", b"k", b"v", b"EX", b"10"]);
    let at = ms(NOW + 10_000);
    assert_eq!(
        last(&seen).and_then(|s| s.effect),
        Some(vec![argv(&[b"SET", b"k", b"v", b"PXAT", &at])])
    );
    lb.exec(&[b"SET", b"k", b"v"]);
    assert_eq!(last(&seen).map(|s| s.effect), Some(None), "as sent");
    lb.exec(&[b"EXPIRE", b"k", b"10"]);
    assert_eq!(
        last(&seen).and_then(|s| s.effect),
        Some(vec![argv(&[b"PEXPIREAT", b"k", &at])])
    );
    lb.exec(&[b"INCRBYFLOAT", b"n", b"1.5"]);
    assert_eq!(
        last(&seen).and_then(|s| s.effect),
        Some(vec![argv(&[b"SET", b"n", b"1.5", b"KEEPTTL"])])
    );
    // A lease counts from the clock as the claim runs (here, years past the tests'
    // timestamp): its deadline is logged.
    let before = crate::clock::now_ms();
    lb.exec(&[b"GOBLIN.CLAIM", b"{e}c", b"{e}r", b"w", b"30"]);
    let after = crate::clock::now_ms();
    let effect = last(&seen).and_then(|s| s.effect).unwrap_or_default();
    let [set] = effect.as_slice() else {
        panic!("one SET: {effect:?}");
    };
    assert_eq!(set[..4], argv(&[b"SET", b"{e}c", b"w", b"PXAT"])[..]);
    let deadline: u64 = std::str::from_utf8(&set[4])
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("a deadline in milliseconds");
    assert!(
        (before + 30_000..=after + 30_000).contains(&deadline),
        "{deadline}"
    );
    // A held claim writes nothing: nothing to observe.
    let before = seen.borrow().len();
    lb.exec(&[b"GOBLIN.CLAIM", b"{e}c", b"{e}r", b"w", b"30"]);
    assert_eq!(seen.borrow().len(), before);
}

#[test]
fn expiry_lazy_and_active_records_expired() {
    let (mut lb, seen) = observed(1);
    lb.exec(&[b"SET", b"a", b"v", b"PX", b"5"]);
    lb.exec(&[b"SET", b"b", b"v", b"PX", b"5"]);
    seen.borrow_mut().clear();
    // Lazy: a read after the deadline.
    let mut out = Vec::new();
    let get = crate::testkit::Cmd::new(&[b"GET", b"a"]);
    let Ok(spec) = lb.shared.commands.resolve(&get.args()) else {
        panic!()
    };
    lb.shards[0].execute(
        &lb.shared,
        spec,
        &get.args(),
        0,
        NOW + 6,
        &mut out,
        Version::Resp2,
        None,
        1,
    );
    assert_eq!(out, b"$-1\r\n");
    assert_eq!(
        seen.borrow().last().map(|s| s.events.clone()),
        Some(vec![(Change::Expired, b"a".to_vec())])
    );
    // Active: the timer wheel.
    let shared = &lb.shared;
    assert_eq!(lb.shards[0].expire(shared, NOW + 6, 100), 1);
    let last = seen.borrow().last().cloned();
    let Some(last) = last else { panic!() };
    assert!(last.expiry);
    assert_eq!(last.events, vec![(Change::Expired, b"b".to_vec())]);
    assert_eq!(
        last.effect,
        Some(Vec::new()),
        "expiry's effect is its events"
    );
}

#[test]
fn plan_hops_record_their_events_on_each_shard() {
    let (mut lb, seen) = observed(2);
    let (a, b) = lb.keys_on_two_shards();
    assert_eq!(
        lb.plan(&[b"MSET", &a, b"1", &b, b"2"]),
        Some(b"+OK\r\n".to_vec())
    );
    let written: Vec<(Change, Vec<u8>)> = seen
        .borrow()
        .iter()
        .flat_map(|s| s.events.clone())
        .collect();
    assert_eq!(written.len(), 2);
    assert!(written.contains(&(Change::Written, a.clone())));
    assert!(written.contains(&(Change::Written, b.clone())));
    seen.borrow_mut().clear();
    assert_eq!(lb.plan(&[b"RENAME", &a, &b]), Some(b"+OK\r\n".to_vec()));
    let events: Vec<(Change, Vec<u8>)> = seen
        .borrow()
        .iter()
        .flat_map(|s| s.events.clone())
        .collect();
    assert_eq!(
        events,
        vec![(Change::Deleted, a.clone()), (Change::Written, b.clone())]
    );
    // The destination's effect rebuilds the moved value.
    let effects = seen.borrow().last().and_then(|s| s.effect.clone());
    assert_eq!(
        effects,
        Some(vec![argv(&[b"DEL", &b]), argv(&[b"SET", &b, b"1"])])
    );
    assert!(lb.all_quiet());
}

/// Registers `state` as a watcher of `keys` (database 0) on `shard`, as WATCH's hop does.
fn watch(shared: &Shared, shard: &mut Shard, state: &Arc<watch::WatchState>, keys: &[&[u8]]) {
    let (state, keys) = (
        Arc::clone(state),
        keys.iter().map(|k| k.to_vec()).collect::<Vec<_>>(),
    );
    let mut s = step(&[], LockMode::Shared, false);
    s.work = Some(Work::Run(Box::new(move |ctx| {
        for key in &keys {
            ctx.watch(&state, key);
        }
        HopOut::Done
    })));
    shard.step(shared, s);
    shard.take_out();
}

/// Runs `cmds` on `shard` as a batch of connection C1 at [`NOW`].
fn run(shared: &Shared, shard: &mut Shard, cmds: &[&[&[u8]]]) {
    let mut b = batch(&shared.commands, cmds);
    b.now = NOW;
    shard.run_batch(shared, C1, b);
    shard.take_out();
}

#[test]
fn watched_keys_are_touched_by_eviction_and_expiry_and_cost_nothing_unwatched() {
    let (shared, mut shard) = one_shard();
    run(
        &shared,
        &mut shard,
        &[
            &[b"SET", b"evicted", b"v"],
            &[b"SET", b"expiring", b"v", b"PX", b"5"],
        ],
    );
    assert!(!shard.dbs().get(0).is_some_and(Keyspace::observed));
    let (one, two) = (watch::Watching::default(), watch::Watching::default());
    watch(&shared, &mut shard, one.state(), &[b"evicted"]);
    watch(&shared, &mut shard, two.state(), &[b"expiring"]);
    assert!(
        shard.dbs().get(0).is_some_and(Keyspace::observed),
        "watched keys' events are recorded"
    );
    // Eviction: a unit of work of its own, which the watch table sees like any other.
    let memory = crate::memory::MemoryConfig {
        policy: crate::memory::Policy::VolatileTtl,
        ..Default::default()
    };
    shard.evict(&shared, &memory, 0, 1, true, NOW);
    assert!(
        !one.state().is_dirty(),
        "volatile-ttl evicts only the key with a TTL"
    );
    assert!(two.state().is_dirty(), "evicted");
    let memory = crate::memory::MemoryConfig {
        policy: crate::memory::Policy::AllKeysRandom,
        ..Default::default()
    };
    shard.evict(&shared, &memory, 0, 1, true, NOW);
    assert!(one.state().is_dirty(), "evicted");
    // Both settled: their entries went as the events met them, and nothing is recorded.
    assert!(!shard.dbs().get(0).is_some_and(Keyspace::observed));

    // Active expiry, and a client that stopped watching.
    run(&shared, &mut shard, &[&[b"SET", b"a", b"v", b"PX", b"5"]]);
    let (three, gone) = (watch::Watching::default(), watch::Watching::default());
    watch(&shared, &mut shard, three.state(), &[b"a"]);
    watch(&shared, &mut shard, gone.state(), &[b"a", b"b"]);
    drop(gone);
    assert_eq!(shard.expire(&shared, NOW + 6, 100), 1);
    assert!(three.state().is_dirty());
    // `b` is still watched by the client that left, until a sweep: units of work sweep
    // once there have been as many as entries (or the minimum).
    for i in 0..100 {
        let key = format!("k{i}");
        run(&shared, &mut shard, &[&[b"SET", key.as_bytes(), b"v"]]);
    }
    assert!(!shard.dbs().get(0).is_some_and(Keyspace::observed));
}
