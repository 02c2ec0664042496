//! Plans as state machines: the coordinator and real shards exchanging their messages
//! in-process (`testkit::Loopback`), with no threads.

use std::sync::Arc;
use std::time::Duration;

use goblin_store::{Keyspace, Millis};

use crate::runtime::msg::{LockMode, Msg};
use crate::testkit::Loopback;
use crate::txn::plan::{Hop, HopOut, Park, Plan, PlanCx, Serve, Step};

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", v.len()).into_bytes();
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
    out
}

#[test]
fn mget_answers_in_argument_order_across_shards() {
    let mut lb = Loopback::new(2);
    let (a, b) = lb.keys_on_two_shards();
    lb.exec(&[b"SET", &a, b"1"]);
    let reply = lb.plan(&[b"MGET", &b, &a, &b]);
    assert_eq!(reply, Some(b"*3\r\n$-1\r\n$1\r\n1\r\n$-1\r\n".to_vec()));
    assert!(lb.all_quiet());
}

#[test]
fn msetnx_writes_nothing_when_a_key_exists() {
    let mut lb = Loopback::new(2);
    let (a, b) = lb.keys_on_two_shards();
    lb.exec(&[b"SET", &b, b"old"]);
    assert_eq!(
        lb.plan(&[b"MSETNX", &a, b"1", &b, b"2"]),
        Some(b":0\r\n".to_vec())
    );
    assert_eq!(lb.exec(&[b"GET", &a]), b"$-1\r\n");
    lb.exec(&[b"DEL", &b]);
    assert_eq!(
        lb.plan(&[b"MSETNX", &a, b"1", &b, b"2"]),
        Some(b":1\r\n".to_vec())
    );
    assert_eq!(lb.exec(&[b"GET", &b]), bulk(b"2"));
    assert!(lb.all_quiet());
}

#[test]
fn moving_a_value_between_shards() {
    let mut lb = Loopback::new(2);
    let (a, b) = lb.keys_on_two_shards();
    assert_eq!(
        lb.plan(&[b"RENAME", &a, &b]),
        Some(b"-ERR no such key\r\n".to_vec())
    );
    assert_eq!(lb.plan(&[b"COPY", &a, &b]), Some(b":0\r\n".to_vec()));
    lb.exec(&[b"SET", &a, b"v", b"PX", b"100000"]);
    lb.exec(&[b"SET", &b, b"w"]);
    assert_eq!(lb.plan(&[b"RENAMENX", &a, &b]), Some(b":0\r\n".to_vec()));
    assert_eq!(lb.plan(&[b"COPY", &a, &b]), Some(b":0\r\n".to_vec()));
    assert_eq!(
        lb.plan(&[b"COPY", &a, &b, b"REPLACE"]),
        Some(b":1\r\n".to_vec())
    );
    assert_eq!(lb.exec(&[b"GET", &b]), bulk(b"v"));
    assert_eq!(lb.plan(&[b"RENAME", &b, &a]), Some(b"+OK\r\n".to_vec()));
    assert_eq!(lb.exec(&[b"EXISTS", &b]), b":0\r\n");
    assert_eq!(
        lb.exec(&[b"PTTL", &a]),
        b":100000\r\n",
        "the expiry moves with the value"
    );
    assert!(lb.all_quiet());
}

#[test]
fn a_claim_across_shards_in_either_order() {
    for claim_on in [0, 1] {
        let mut lb = Loopback::new(2);
        let (x, y) = lb.keys_on_two_shards();
        let (c, r) = if claim_on == 0 { (x, y) } else { (y, x) };
        let claim = |lb: &mut Loopback| lb.plan(&[b"GOBLIN.CLAIM", &c, &r, b"w", b"30"]);
        assert_eq!(claim(&mut lb), Some(bulk(b"CLAIMED")));
        assert!(lb.all_quiet(), "a won claim keeps no lock");
        assert_eq!(
            claim(&mut lb),
            Some(b"$-1\r\n".to_vec()),
            "held, no result yet"
        );
        lb.exec(&[b"SET", &r, b"done"]);
        assert_eq!(claim(&mut lb), Some(bulk(b"done")));
        lb.exec(&[b"DEL", &r]);
        lb.exec(&[b"HSET", &r, b"f", b"v"]);
        assert_eq!(
            claim(&mut lb),
            Some(
                b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n".to_vec()
            )
        );
        lb.exec(&[b"DEL", &c]);
        assert_eq!(
            claim(&mut lb),
            Some(bulk(b"CLAIMED")),
            "released: won again"
        );
        assert_eq!(
            lb.plan(&[b"GOBLIN.CLAIM", &c, &r, b"w", b"0"]),
            Some(b"-ERR invalid expire time in 'goblin.claim' command\r\n".to_vec())
        );
        assert!(lb.all_quiet());
    }
}

#[test]
fn a_refused_step_fails_the_transaction_and_releases_everything() {
    let mut lb = Loopback::new(2);
    let (a, b) = lb.keys_on_two_shards();
    // Shard 1 gives b's slot away in a newer map that the coordinator has not seen.
    let slot = usize::from(goblin_store::key_slot(&b));
    let moved = Arc::new(lb.shared.slots.with_moves(&[(slot, 0)]));
    lb.queue.push_back((1, Msg::Slots(moved)));
    lb.deliver();
    let reply = lb.plan(&[b"MSET", &a, b"1", &b, b"2"]).unwrap_or_default();
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.starts_with(&format!(
            "-ERR internal error: hash slot {slot} is not served by thread 1"
        )),
        "{text}"
    );
    assert_eq!(lb.exec(&[b"EXISTS", &a]), b":0\r\n", "nothing was written");
    assert!(lb.all_quiet(), "the lock taken on shard 0 was released");
}

/// A test plan that parks: waits for `key` to exist (or `timeout`), then reads it.
#[derive(Debug)]
struct WaitThenGet {
    keys: Vec<Vec<u8>>,
    timeout: Option<Duration>,
    lock_first: bool,
    read: bool,
}

fn exists(db: &mut Keyspace, key: &[u8], now: Millis, _arg: &[u8]) -> usize {
    usize::from(db.contains(key, now))
}

impl Plan for WaitThenGet {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match results.into_iter().next() {
            None if self.lock_first => {
                // Lock the key first: parking must give the lock up.
                self.lock_first = false;
                let key = &self.keys[0];
                let hop = Hop::run(cx.slots.shard_of_key(key), |_| HopOut::Done)
                    .locking(key, LockMode::Exclusive);
                Step::Hops(vec![hop])
            }
            None | Some(HopOut::Done) => Step::Park(Park::on(
                self.keys.clone(),
                Some(exists),
                Serve::Notify,
                self.timeout,
            )),
            Some(HopOut::Woken(key)) if !self.read => {
                self.read = true;
                let shard = cx.slots.shard_of_key(&key);
                Step::Hops(vec![Hop::run(shard, move |ctx| {
                    HopOut::Bulks(vec![
                        ctx.db
                            .get(&key, ctx.now)
                            .and_then(|e| e.value().as_str().map(<[u8]>::to_vec)),
                    ])
                })])
            }
            Some(HopOut::Bulks(mut v)) => match v.pop().flatten() {
                Some(v) => cx.done(|e| e.bulk(&v)),
                None => cx.done(|e| e.null()),
            },
            _ => cx.done(|e| e.null()),
        }
    }
}

fn wait(keys: &[&[u8]], timeout: Option<Duration>, lock_first: bool) -> Box<dyn Plan> {
    Box::new(WaitThenGet {
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        timeout,
        lock_first,
        read: false,
    })
}

#[test]
fn a_parked_plan_wakes_when_its_key_is_written() {
    let mut lb = Loopback::new(2);
    let (a, _) = lb.keys_on_two_shards();
    assert_eq!(lb.start(wait(&[&a], None, false), Vec::new()), None);
    assert!(lb.running());
    assert!(lb.shards[0].has_parked());
    lb.exec(&[b"SET", &a, b"v"]);
    assert_eq!(lb.reply(), Some(bulk(b"v")));
    assert_eq!(lb.woken, 1);
    assert!(lb.all_quiet());
}

#[test]
fn a_key_ready_when_the_plan_parks_wakes_it_at_once() {
    let mut lb = Loopback::new(1);
    lb.exec(&[b"SET", b"k", b"here"]);
    assert_eq!(
        lb.start(wait(&[b"k"], None, false), Vec::new()),
        Some(bulk(b"here"))
    );
    assert!(lb.all_quiet());
}

#[test]
fn a_parked_plan_times_out_and_leaves_nothing_behind() {
    let mut lb = Loopback::new(2);
    let (a, b) = lb.keys_on_two_shards();
    assert_eq!(
        lb.start(
            wait(&[&a, &b], Some(Duration::from_millis(5)), false),
            Vec::new()
        ),
        None
    );
    assert!(lb.shards[0].has_parked() && lb.shards[1].has_parked());
    lb.time_out();
    assert_eq!(lb.reply(), Some(b"$-1\r\n".to_vec()));
    assert!(lb.all_quiet(), "the wait is cancelled on both shards");
    // A write after the timeout wakes nothing.
    lb.exec(&[b"SET", &a, b"late"]);
    assert_eq!(lb.woken, 0);
}

#[test]
fn a_wait_on_two_shards_is_woken_by_either_and_cancelled_on_the_other() {
    let mut lb = Loopback::new(2);
    let (a, b) = lb.keys_on_two_shards();
    assert_eq!(lb.start(wait(&[&a, &b], None, false), Vec::new()), None);
    lb.exec(&[b"SET", &b, b"second"]);
    assert_eq!(lb.reply(), Some(bulk(b"second")));
    assert!(lb.all_quiet(), "shard 0 forgot the wait");
    lb.exec(&[b"SET", &a, b"first"]);
    assert_eq!(lb.woken, 1);
}

#[test]
fn a_parked_plan_holds_no_lock() {
    let mut lb = Loopback::new(1);
    assert_eq!(lb.start(wait(&[b"k"], None, true), Vec::new()), None);
    assert!(
        lb.shards[0].quiet(),
        "the lock was released when the plan parked"
    );
    lb.exec(&[b"SET", b"k", b"v"]);
    assert_eq!(lb.reply(), Some(bulk(b"v")));
    assert!(lb.all_quiet());
}

#[test]
fn scan_walks_slots_whose_owners_interleave() {
    let mut lb = Loopback::new(3);
    // Every third slot to each shard: nothing contiguous.
    let moves: Vec<(usize, usize)> = (0..goblin_store::SLOTS).map(|s| (s, s % 3)).collect();
    let map = Arc::new(lb.shared.slots.with_moves(&moves));
    lb.shared.slots = Arc::clone(&map);
    for shard in &mut lb.shards {
        shard.set_slots(Arc::clone(&map));
    }
    let keys: Vec<Vec<u8>> = (0..300).map(|i| format!("k{i}").into_bytes()).collect();
    for k in &keys {
        lb.exec(&[b"SET", k, b"v"]);
    }
    let mut seen = Vec::new();
    let mut cursor = b"0".to_vec();
    for _ in 0..10_000 {
        let Some(reply) = lb.plan(&[b"SCAN", &cursor, b"COUNT", b"7"]) else {
            panic!("SCAN did not finish");
        };
        let Ok(Some((goblin_protocol::Frame::Array(parts), _))) =
            goblin_protocol::parse_reply(&reply)
        else {
            panic!("{}", String::from_utf8_lossy(&reply));
        };
        let [
            goblin_protocol::Frame::Bulk(next),
            goblin_protocol::Frame::Array(found),
        ] = parts.as_slice()
        else {
            panic!("{parts:?}");
        };
        for k in found {
            if let goblin_protocol::Frame::Bulk(k) = k {
                seen.push(k.to_vec());
            }
        }
        cursor = next.to_vec();
        if cursor == b"0" {
            break;
        }
    }
    assert_eq!(cursor, b"0", "the iteration ended");
    seen.sort();
    let mut want = keys.clone();
    want.sort();
    assert_eq!(seen, want, "every key once");
    assert!(lb.all_quiet());
}

/// A test consumer: waits (served with the key's lock) until one of `keys` exists, then
/// takes it (GETDEL, under the lock); waits again when it finds nothing.
#[derive(Debug)]
struct Take {
    keys: Vec<Vec<u8>>,
    timeout: Option<Duration>,
}

impl Take {
    fn park(&self) -> Step {
        Step::Park(Park::on(
            self.keys.clone(),
            Some(exists),
            Serve::Lock,
            self.timeout,
        ))
    }
}

impl Plan for Take {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match results.into_iter().next() {
            None => self.park(),
            Some(HopOut::Woken(key)) => {
                let shard = cx.slots.shard_of_key(&key);
                Step::Hops(vec![Hop::run(shard, move |ctx| {
                    let value = ctx
                        .db
                        .remove(&key, ctx.now)
                        .and_then(|r| r.value.as_str().map(<[u8]>::to_vec));
                    HopOut::Bulks(vec![value])
                })])
            }
            Some(HopOut::Bulks(mut v)) => match v.pop().flatten() {
                Some(v) => cx.done(|e| e.bulk(&v)),
                None => self.park(),
            },
            _ => cx.done(|e| e.null()),
        }
    }
}

fn take(keys: &[&[u8]], timeout: Option<Duration>) -> Box<dyn Plan> {
    Box::new(Take {
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        timeout,
    })
}

#[test]
fn consumers_are_served_in_the_order_they_waited_one_value_each() {
    let mut lb = Loopback::new(2);
    let (a, _) = lb.keys_on_two_shards();
    let first = lb.start_job(take(&[&a], None), Vec::new());
    let second = lb.start_job(take(&[&a], None), Vec::new());
    let third = lb.start_job(take(&[&a], None), Vec::new());
    lb.exec(&[b"SET", &a, b"one"]);
    // The write served the first consumer in the same step: the value is its.
    assert_eq!(lb.exec(&[b"EXISTS", &a]), b":0\r\n");
    assert_eq!(lb.reply_of(first), Some(bulk(b"one")));
    assert_eq!((lb.reply_of(second), lb.reply_of(third)), (None, None));
    lb.exec(&[b"SET", &a, b"two"]);
    assert_eq!(lb.reply_of(second), Some(bulk(b"two")));
    assert_eq!(lb.reply_of(third), None);
    assert!(lb.shards[0].has_parked() || lb.shards[1].has_parked());
}

#[test]
fn a_consumer_waiting_on_two_shards_is_served_once() {
    let mut lb = Loopback::new(2);
    let (a, b) = lb.keys_on_two_shards();
    let both = lb.start_job(take(&[&a, &b], None), Vec::new());
    // Both keys written before anything is delivered: each shard sees its write.
    let set = |k: &[u8], v: &[u8]| crate::testkit::Cmd::new(&[b"SET", k, v]);
    for (k, v) in [(&a, b"x"), (&b, b"y")] {
        let cmd = set(k, v);
        let Ok(spec) = lb.shared.commands.resolve(&cmd.args()) else {
            panic!()
        };
        let shard = lb.shared.slots.shard_of_key(k);
        let mut out = Vec::new();
        lb.shards[shard].execute(
            &lb.shared,
            spec,
            &cmd.args(),
            0,
            crate::testkit::NOW,
            &mut out,
            goblin_protocol::Version::Resp2,
            None,
            1,
        );
    }
    for shard in 0..2 {
        if lb.shards[shard].has_wakes() {
            lb.shards[shard].serve_wakes(&lb.shared);
        }
        let out = lb.shards[shard].take_out();
        lb.queue.extend(out);
    }
    lb.deliver();
    let got = lb.reply_of(both);
    assert!(
        got == Some(bulk(b"x")) || got == Some(bulk(b"y")),
        "{got:?}"
    );
    // Exactly one key was taken; the other is still there.
    let left = [lb.exec(&[b"EXISTS", &a]), lb.exec(&[b"EXISTS", &b])];
    assert_eq!(left.iter().filter(|r| r.as_slice() == b":1\r\n").count(), 1);
    assert!(lb.all_quiet());
}

#[test]
fn a_consumer_that_leaves_takes_nothing_with_it() {
    let mut lb = Loopback::new(1);
    let gone = lb.start_job(take(&[b"k"], None), Vec::new());
    assert!(lb.cancel(gone), "parked and not served: cancelled at once");
    lb.exec(&[b"SET", b"k", b"kept"]);
    assert_eq!(lb.exec(&[b"GET", b"k"]), bulk(b"kept"));
    assert!(lb.all_quiet());
    // Served (its lock granted) but gone before it ran: the value stays, and goes to the
    // next consumer in line.
    let job = lb.start_job(take(&[b"j"], None), Vec::new());
    let next = lb.start_job(take(&[b"j"], None), Vec::new());
    let cmd = crate::testkit::Cmd::new(&[b"SET", b"j", b"v"]);
    let Ok(spec) = lb.shared.commands.resolve(&cmd.args()) else {
        panic!()
    };
    let mut out = Vec::new();
    lb.shards[0].execute(
        &lb.shared,
        spec,
        &cmd.args(),
        0,
        crate::testkit::NOW,
        &mut out,
        goblin_protocol::Version::Resp2,
        None,
        1,
    );
    lb.shards[0].serve_wakes(&lb.shared);
    let grant = lb.shards[0].take_out();
    assert!(
        !lb.cancel(job),
        "the shard served it first: the job must finish"
    );
    lb.queue.extend(grant);
    lb.deliver();
    assert_eq!(lb.reply_of(next), Some(bulk(b"v")), "passed on to the next");
    assert_eq!(lb.exec(&[b"GET", b"j"]), b"$-1\r\n");
    assert!(lb.all_quiet());
}

#[test]
fn a_timeout_loses_to_a_shard_that_served_first() {
    let mut lb = Loopback::new(1);
    let job = lb.start_job(take(&[b"k"], Some(Duration::from_millis(1))), Vec::new());
    let cmd = crate::testkit::Cmd::new(&[b"SET", b"k", b"v"]);
    let Ok(spec) = lb.shared.commands.resolve(&cmd.args()) else {
        panic!()
    };
    let mut out = Vec::new();
    lb.shards[0].execute(
        &lb.shared,
        spec,
        &cmd.args(),
        0,
        crate::testkit::NOW,
        &mut out,
        goblin_protocol::Version::Resp2,
        None,
        1,
    );
    lb.shards[0].serve_wakes(&lb.shared);
    let grant = lb.shards[0].take_out();
    lb.time_out();
    assert_eq!(
        lb.reply_of(job),
        None,
        "the timeout does nothing: the grant is on its way"
    );
    lb.queue.extend(grant);
    lb.deliver();
    assert_eq!(lb.reply_of(job), Some(bulk(b"v")));
    assert!(lb.all_quiet());
}
