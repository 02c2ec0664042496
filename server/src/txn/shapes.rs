//! Reusable plan shapes: most cross-shard commands are one of these, given the work of a
//! part and the way parts merge.
//!
//! - [`Split`]: the keys split by shard, a part on each shard, the results merged
//!   (MGET, MSET, DEL, EXISTS …);
//! - [`FanOut`]: the same part on every shard, merged (DBSIZE, KEYS, FLUSHALL, INFO …);
//! - [`ReadThenWrite`]: a stage of reads, a decision on the coordinator, then writes
//!   (MSETNX; later SINTERSTORE, ZUNIONSTORE …).
//!
//! (Moving a value between keys of two shards is the keys family's `MoveValue`.)

use std::fmt;
use std::sync::Arc;

use crate::shard::slots::SlotMap;
use crate::table::handler::{Args, ShardCtx};
use crate::txn::plan::{Hop, HopOut, Outcome, Plan, PlanCx, Step};

/// One shard's part of a split command.
#[derive(Debug)]
pub struct Part {
    /// The shard.
    pub shard: usize,
    /// The argument index of each of its keys.
    pub positions: Vec<usize>,
    /// For each key, the `step` arguments that start at it (the key and its value for
    /// MSET), flattened; moved into the hop when it is sent.
    pub args: Vec<Vec<u8>>,
}

/// Runs a part on its shard, given its arguments.
pub type PartFn = fn(&mut ShardCtx<'_>, &[Vec<u8>]) -> HopOut;

/// Merges the parts' results (in the order of [`Split::parts`]) into the reply.
pub type SplitMergeFn = fn(&PlanCx<'_>, &Split, Vec<HopOut>) -> Outcome;

/// A multi-key command split by shard: one hop per shard, then a merge.
pub struct Split {
    parts: Vec<Part>,
    part: PartFn,
    merge: SplitMergeFn,
    argc: usize,
    sent: bool,
}

impl fmt::Debug for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Split")
            .field("parts", &self.parts)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl Split {
    /// Splits the keys at `first`, `first + step`, … by shard; each key takes the `step`
    /// arguments from it with it.
    pub fn new(
        args: &Args<'_>,
        first: usize,
        step: usize,
        slots: &SlotMap,
        part: PartFn,
        merge: SplitMergeFn,
    ) -> Split {
        let step = step.max(1);
        let mut parts: Vec<Part> = Vec::new();
        for i in (first..args.len()).step_by(step) {
            let shard = slots.shard_of_key(args.get(i));
            let at = match parts.iter().position(|p| p.shard == shard) {
                Some(at) => at,
                None => {
                    parts.push(Part {
                        shard,
                        positions: Vec::new(),
                        args: Vec::new(),
                    });
                    parts.len() - 1
                }
            };
            let p = &mut parts[at];
            p.positions.push(i);
            p.args.extend((i..i + step).map(|j| args.get(j).to_vec()));
        }
        Split {
            parts,
            part,
            merge,
            argc: args.len(),
            sent: false,
        }
    }

    /// The parts, one per shard.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The command's argument count (its name included).
    pub fn argc(&self) -> usize {
        self.argc
    }

    /// One hop per part, moving each part's arguments into its hop.
    pub fn hops(&mut self) -> Vec<Hop> {
        let part = self.part;
        self.parts
            .iter_mut()
            .map(|p| {
                let args = std::mem::take(&mut p.args);
                Hop::run(p.shard, move |ctx| part(ctx, &args))
            })
            .collect()
    }
}

impl Plan for Split {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if !self.sent {
            self.sent = true;
            return Step::Hops(self.hops());
        }
        Step::Done((self.merge)(cx, self, results))
    }
}

/// Sums parts that each count something ([`HopOut::Int`]).
pub fn sum(results: &[HopOut]) -> i64 {
    results
        .iter()
        .map(|r| match r {
            HopOut::Int(n) => *n,
            _ => 0,
        })
        .fold(0i64, i64::saturating_add)
}

/// Merges parts that count, replying the sum.
pub fn merge_sum(cx: &PlanCx<'_>, _split: &Split, results: Vec<HopOut>) -> Outcome {
    let n = sum(&results);
    cx.reply(|e| e.integer(n))
}

/// Merges parts that cannot fail, replying OK.
pub fn merge_ok(cx: &PlanCx<'_>, _split: &Split, _results: Vec<HopOut>) -> Outcome {
    cx.reply(|e| e.ok())
}

/// Merges parts that read one value per key ([`HopOut::Bulks`]) into an array in the
/// order of the command's keys; a key no part answered is nil.
pub fn merge_values_in_order(cx: &PlanCx<'_>, split: &Split, results: Vec<HopOut>) -> Outcome {
    let mut values: Vec<Option<Vec<u8>>> = vec![None; split.argc().saturating_sub(1)];
    for (part, result) in split.parts().iter().zip(results) {
        if let HopOut::Bulks(found) = result {
            for (value, &i) in found.into_iter().zip(&part.positions) {
                if let Some(slot) = i.checked_sub(1).and_then(|i| values.get_mut(i)) {
                    *slot = value;
                }
            }
        }
    }
    cx.reply(|e| {
        e.array(values.len());
        for v in &values {
            match v {
                Some(v) => e.bulk(v),
                None => e.null(),
            }
        }
    })
}

/// Runs a keyspace-wide command's part on a shard, given the command's arguments.
pub type FanPartFn = fn(&mut ShardCtx<'_>, &[Vec<u8>]) -> HopOut;
/// Merges every shard's part (in shard order) into the reply.
pub type FanMergeFn = fn(&PlanCx<'_>, &[Vec<u8>], Vec<HopOut>) -> Outcome;

/// A keyspace-wide command: the same part on every shard, then a merge.
pub struct FanOut {
    args: Arc<[Vec<u8>]>,
    part: FanPartFn,
    merge: FanMergeFn,
    sent: bool,
}

impl fmt::Debug for FanOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FanOut")
            .field("args", &self.args.len())
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl FanOut {
    /// The command `args`, with its part and merge.
    pub fn new(args: &Args<'_>, part: FanPartFn, merge: FanMergeFn) -> FanOut {
        FanOut {
            args: args.iter_from(0).map(<[u8]>::to_vec).collect(),
            part,
            merge,
            sent: false,
        }
    }
}

impl Plan for FanOut {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if !self.sent {
            self.sent = true;
            let part = self.part;
            let hops = (0..cx.slots.shards())
                .map(|shard| {
                    let args = Arc::clone(&self.args);
                    Hop::run(shard, move |ctx| part(ctx, &args))
                })
                .collect();
            return Step::Hops(hops);
        }
        Step::Done((self.merge)(cx, &self.args, results))
    }
}

/// What a [`ReadThenWrite`] does once its reads are in.
#[derive(Debug)]
pub enum Decision {
    /// Reply this, write nothing.
    Reply(Outcome),
    /// Run these writes, then reply this.
    Write(Vec<Hop>, Outcome),
}

/// Decides, from the reads' results (in the order of the reads), what to write.
pub type DecideFn<S> = fn(&mut S, &PlanCx<'_>, Vec<HopOut>) -> Decision;

/// Reads on some shards, a decision on the coordinator, then writes: under the
/// transaction's locks, nothing changes between the reads and the writes.
pub struct ReadThenWrite<S> {
    state: S,
    reads: Option<Vec<Hop>>,
    decide: DecideFn<S>,
    reply: Option<Outcome>,
}

impl<S: fmt::Debug> fmt::Debug for ReadThenWrite<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadThenWrite")
            .field("state", &self.state)
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

impl<S> ReadThenWrite<S> {
    /// Runs `reads`, then `decide`s with `state`.
    pub fn new(state: S, reads: Vec<Hop>, decide: DecideFn<S>) -> Self {
        ReadThenWrite {
            state,
            reads: Some(reads),
            decide,
            reply: None,
        }
    }
}

impl<S: Send + fmt::Debug> Plan for ReadThenWrite<S> {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if let Some(reads) = self.reads.take() {
            return Step::Hops(reads);
        }
        if let Some(reply) = self.reply.take() {
            return Step::Done(reply);
        }
        match (self.decide)(&mut self.state, cx, results) {
            Decision::Reply(outcome) => Step::Done(outcome),
            Decision::Write(hops, outcome) => {
                self.reply = Some(outcome);
                Step::Hops(hops)
            }
        }
    }
}

/// What a key holds, for a blocking command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    /// Something the command can take.
    Ready,
    /// Nothing (no key, or an empty one).
    Empty,
    /// A value of another type: WRONGTYPE.
    WrongType,
}

/// What a key holds for the command.
pub type HoldsFn = fn(&mut goblin_store::Keyspace, &[u8], goblin_store::Millis) -> Holds;
/// Takes what the command takes from a ready key (under its lock), given the command's
/// arguments; `None` when nothing is there after all.
pub type TakeFn = fn(&mut ShardCtx<'_>, &[u8], &[Vec<u8>]) -> Option<HopOut>;
/// The reply for what was taken from `key`.
pub type AnswerFn = fn(&PlanCx<'_>, &[u8], HopOut) -> Outcome;
/// The reply when the timeout passed first.
pub type TimedOutFn = fn(&PlanCx<'_>) -> Outcome;

/// What a blocking command does: how it sees a key, how it takes, how it answers.
#[derive(Clone, Copy)]
pub struct BlockingOps {
    /// What a key holds.
    pub holds: HoldsFn,
    /// Whether a key is ready (`holds` is `Ready`): the wait's readiness test.
    pub ready: crate::txn::plan::ReadyFn,
    /// Takes from a ready key.
    pub take: TakeFn,
    /// The reply for what was taken.
    pub answer: AnswerFn,
    /// The reply on timeout.
    pub timed_out: TimedOutFn,
}

/// A blocking pop (BLPOP, BZPOPMIN, BLMPOP …): with every key locked, take from the first
/// key (in argument order) that holds something — WRONGTYPE if a key of another type
/// comes first —; when none does, wait, served with the key's lock, until one does or the
/// timeout passes.
pub struct BlockingPop {
    args: Arc<[Vec<u8>]>,
    keys: Vec<Vec<u8>>,
    timeout: Option<std::time::Duration>,
    ops: BlockingOps,
    state: PopState,
}

/// Where a blocking pop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PopState {
    Start,
    /// The keys' states asked for, shard by shard.
    Looked,
    /// Taking from the key at this index.
    Taking(usize),
    /// Waiting.
    Parked,
    /// Taking from the key that served the wait.
    TakingWoken,
}

impl fmt::Debug for BlockingPop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingPop")
            .field("keys", &self.keys.len())
            .field("timeout", &self.timeout)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// What one shard found of its keys, in argument order: the first it could take from,
/// with what it took, or each key's state.
#[derive(Debug)]
enum Found {
    Taken(Vec<u8>, HopOut),
    WrongType,
    States(Vec<Holds>),
}

impl BlockingPop {
    /// A blocking pop of `keys` (argument order), waiting at most `timeout` (`None`:
    /// forever); `args` are the command's arguments, for `take`.
    pub fn new(
        args: &Args<'_>,
        keys: Vec<Vec<u8>>,
        timeout: Option<std::time::Duration>,
        ops: BlockingOps,
    ) -> BlockingPop {
        BlockingPop {
            args: args.iter_from(0).map(<[u8]>::to_vec).collect(),
            keys,
            timeout,
            ops,
            state: PopState::Start,
        }
    }

    fn park(&mut self) -> Step {
        self.state = PopState::Parked;
        Step::Park(crate::txn::plan::Park::on(
            self.keys.clone(),
            Some(self.ops.ready),
            crate::txn::plan::Serve::Lock,
            self.timeout,
        ))
    }

    fn take_hop(&self, cx: &PlanCx<'_>, key: &[u8]) -> Step {
        let (take, args, key) = (self.ops.take, Arc::clone(&self.args), key.to_vec());
        Step::Hops(vec![Hop::run(
            cx.slots.shard_of_key(&key),
            move |ctx| match take(ctx, &key, &args) {
                Some(out) => HopOut::Other(Box::new(Found::Taken(key, out))),
                None => HopOut::Other(Box::new(Found::States(vec![Holds::Empty]))),
            },
        )])
    }

    /// The hops that look at every key (and, on a shard that has the first key in
    /// argument order among its keys ready, take from it at once).
    fn look(&mut self, cx: &PlanCx<'_>) -> Step {
        let mut by_shard: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
        for key in &self.keys {
            let shard = cx.slots.shard_of_key(key);
            match by_shard.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, keys)) => keys.push(key.clone()),
                None => by_shard.push((shard, vec![key.clone()])),
            }
        }
        let one_shard = by_shard.len() == 1;
        let (ops, args) = (self.ops, Arc::clone(&self.args));
        let hops = by_shard
            .into_iter()
            .map(|(shard, keys)| {
                let args = Arc::clone(&args);
                Hop::run(shard, move |ctx| {
                    let mut states = Vec::with_capacity(keys.len());
                    for key in &keys {
                        let holds = (ops.holds)(ctx.db, key, ctx.now);
                        // Alone, the shard can settle it: the first key that holds
                        // something (or another type) decides.
                        if one_shard {
                            match holds {
                                Holds::WrongType => {
                                    return HopOut::Other(Box::new(Found::WrongType));
                                }
                                Holds::Ready => {
                                    if let Some(out) = (ops.take)(ctx, key, &args) {
                                        return HopOut::Other(Box::new(Found::Taken(
                                            key.clone(),
                                            out,
                                        )));
                                    }
                                }
                                Holds::Empty => {}
                            }
                        }
                        states.push(holds);
                    }
                    HopOut::Other(Box::new(Found::States(states)))
                })
            })
            .collect();
        self.state = PopState::Looked;
        Step::Hops(hops)
    }
}

fn found(result: HopOut) -> Option<Found> {
    match result {
        HopOut::Other(any) => any.downcast::<Found>().ok().map(|f| *f),
        _ => None,
    }
}

impl Plan for BlockingPop {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match self.state {
            PopState::Start => self.look(cx),
            PopState::Looked => {
                // The keys' states, back in argument order.
                let mut states: Vec<(usize, Holds)> = Vec::new();
                let mut shards: Vec<usize> = Vec::new();
                for key in &self.keys {
                    let shard = cx.slots.shard_of_key(key);
                    if !shards.contains(&shard) {
                        shards.push(shard);
                    }
                }
                let mut per_shard: Vec<std::vec::IntoIter<Holds>> = Vec::new();
                for result in results {
                    match found(result) {
                        Some(Found::Taken(key, out)) => {
                            return Step::Done((self.ops.answer)(cx, &key, out));
                        }
                        Some(Found::WrongType) => {
                            return cx.done(|e| e.error(crate::errors::WRONGTYPE));
                        }
                        Some(Found::States(s)) => per_shard.push(s.into_iter()),
                        None => per_shard.push(Vec::new().into_iter()),
                    }
                }
                for (i, key) in self.keys.iter().enumerate() {
                    let shard = cx.slots.shard_of_key(key);
                    let at = shards.iter().position(|&s| s == shard).unwrap_or(0);
                    let holds = per_shard
                        .get_mut(at)
                        .and_then(Iterator::next)
                        .unwrap_or(Holds::Empty);
                    states.push((i, holds));
                }
                match states.iter().find(|(_, h)| *h != Holds::Empty) {
                    Some((_, Holds::WrongType)) => cx.done(|e| e.error(crate::errors::WRONGTYPE)),
                    Some(&(i, _)) => {
                        self.state = PopState::Taking(i);
                        let key = self.keys[i].clone();
                        self.take_hop(cx, &key)
                    }
                    None => self.park(),
                }
            }
            PopState::Taking(_) | PopState::TakingWoken => {
                match results.into_iter().next().and_then(found) {
                    Some(Found::Taken(key, out)) => Step::Done((self.ops.answer)(cx, &key, out)),
                    _ => self.park(),
                }
            }
            PopState::Parked => match results.into_iter().next() {
                Some(HopOut::Woken(key)) => {
                    self.state = PopState::TakingWoken;
                    self.take_hop(cx, &key)
                }
                _ => Step::Done((self.ops.timed_out)(cx)),
            },
        }
    }
}
