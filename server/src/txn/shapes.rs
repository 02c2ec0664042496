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
