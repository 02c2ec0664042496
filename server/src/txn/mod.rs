//! Transactions: the coordinator side of the lock protocol.
//!
//! A command whose keys span shards (MGET, MSET, DEL … across shards, RENAME between
//! shards, MULTI/EXEC) becomes a [`TxJob`] on the connection's worker. The job:
//!
//! 1. locks, shard by shard in ascending shard order, every key it will touch (shared for
//!    reads, exclusive for writes, the whole shard for keyspace-wide commands), waiting
//!    for each shard's grant before asking the next — no cycle of waits can form;
//! 2. picks one timestamp, then runs its [`Plan`] in stages: each stage sends work to
//!    shards (commands, or moving a value out of one shard and into another) and waits
//!    for every result before deciding the next stage;
//! 3. answers the client and releases every lock (strict two-phase locking: nothing is
//!    released before everything is locked and done, so every observer sees all of the
//!    transaction or none of it).
//!
//! Release messages need no answer: they travel on the same FIFO channels as the
//! connection's later commands, so those find the locks already gone.

use goblin_protocol::{Encoder, Frame, Version, parse_reply, reply_len};
use goblin_store::Millis;

use crate::runtime::msg::{Batch, LockMode, Moved, Msg, Special, TxRef, TxStep, TxStepDone};
use crate::runtime::route::SlotTable;
use crate::shard::Outgoing;
use crate::table::handler::{Args, Exec, MergeFn};
use crate::table::{CommandTable, MultiKey};

/// The result of one stage's work on one shard.
#[derive(Debug)]
pub struct StepResult {
    /// The shard.
    pub shard: usize,
    /// The replies of the commands it ran.
    pub replies: Vec<u8>,
    /// The value it took, if it was asked to.
    pub taken: Option<Moved>,
    /// Whether the claim it tried was won.
    pub claimed: Option<bool>,
}

/// Work for one shard in a stage.
#[derive(Debug, Default)]
pub struct Work {
    /// The shard.
    pub shard: usize,
    /// Commands to run.
    pub batch: Option<Box<Batch>>,
    /// Special work (take or put a value, try a claim).
    pub special: Option<Special>,
    /// Locks to take first, when the plan takes its locks in its stages (GOBLIN.CLAIM).
    pub lock: Vec<(Vec<u8>, LockMode)>,
    /// Release the transaction's locks on the shard afterwards.
    pub release: bool,
}

/// What a plan wants next.
#[derive(Debug)]
pub enum Next {
    /// Run this work, then call the plan again with the results (in the same order).
    Stage(Vec<Work>),
    /// Done.
    Finish(Outcome),
}

/// A finished plan's answer.
#[derive(Debug)]
pub enum Outcome {
    /// Reply bytes.
    Reply(Vec<u8>),
    /// A keyspace-wide command inside MULTI: merge these parts on the connection.
    Merge(MergeFn, Box<Batch>, Vec<Vec<u8>>),
    /// A connection command inside MULTI: run it on the connection.
    Conn(Box<Batch>),
    /// EXEC's answer: one outcome per queued command.
    Exec(Vec<Outcome>),
}

/// A command and its arguments, owned.
fn single(spec: usize, args: &Args<'_>, resp: Version) -> Box<Batch> {
    let mut b = Box::new(Batch {
        resp,
        ..Batch::default()
    });
    b.push(spec, args);
    b
}

/// Splits a multi-key command into one sub-command per shard, remembering where each
/// key came from. `step` is the distance between keys (2 for MSET's key/value pairs).
fn split_by_shard(
    spec: usize,
    args: &Args<'_>,
    first: usize,
    step: usize,
    slots: &SlotTable,
    resp: Version,
) -> Vec<(usize, Box<Batch>, Vec<usize>)> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut i = first;
    while i < args.len() {
        let shard = slots.shard_of_key(args.get(i));
        match groups.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((shard, vec![i])),
        }
        i += step;
    }
    groups
        .into_iter()
        .map(|(shard, idx)| {
            let mut data = Vec::new();
            let mut spans = Vec::new();
            let mut push = |a: &[u8]| {
                let start = data.len();
                data.extend_from_slice(a);
                spans.push(start..data.len());
            };
            push(args.get(0));
            for &k in &idx {
                for j in 0..step {
                    push(args.get(k + j));
                }
            }
            let sub = Args::new(&data, &spans);
            (shard, single(spec, &sub, resp), idx)
        })
        .collect()
}

/// Runs a multi-key command split across shards, one stage, then merges.
#[derive(Debug)]
pub struct Split {
    kind: MultiKey,
    parts: Vec<(usize, Option<Box<Batch>>, Vec<usize>)>,
    argc: usize,
    step: usize,
    resp: Version,
}

/// MSETNX: a stage of EXISTS, then, if no key exists, a stage of MSET.
#[derive(Debug)]
pub struct MsetNx {
    exists: Vec<(usize, Option<Box<Batch>>)>,
    sets: Vec<(usize, Option<Box<Batch>>)>,
    checked: bool,
    resp: Version,
}

/// RENAME/RENAMENX between shards: check, take the value out of the source shard, put
/// it into the destination shard.
#[derive(Debug)]
pub struct Rename {
    src: Vec<u8>,
    dst: Vec<u8>,
    src_shard: usize,
    dst_shard: usize,
    nx: bool,
    /// COPY: clone instead of take, reply 1/0.
    copy: bool,
    /// COPY … REPLACE.
    replace: bool,
    exists_spec: usize,
    stage: u8,
    resp: Version,
}

/// A keyspace-wide command inside MULTI: a part on every shard, merged on the
/// connection at the end.
#[derive(Debug)]
pub struct Fan {
    cmd: Box<Batch>,
    merge: MergeFn,
    shards: usize,
    sent: bool,
}

/// One queued command of a MULTI block.
#[derive(Debug)]
enum Queued {
    /// Runs on one shard.
    Single(usize, Box<Batch>),
    /// Runs on the connection.
    Conn(Box<Batch>),
    /// Needs a plan of its own.
    Plan(Box<Plan>),
}

/// EXEC: the queued commands in order; consecutive single-shard commands for the same
/// shard travel as one step.
#[derive(Debug)]
pub struct Multi {
    queued: Vec<Option<Queued>>,
    next: usize,
    outcomes: Vec<Option<Outcome>>,
    /// Commands of the stage in flight: (command index, shard) in stage order.
    in_stage: Vec<usize>,
    /// A sub-plan in progress, for command `next - 1`.
    current: Option<(usize, Box<Plan>)>,
    resp: Version,
}

/// How a transaction runs once its locks are held.
#[derive(Debug)]
pub enum Plan {
    /// A split multi-key command.
    Split(Split),
    /// MSETNX across shards.
    MsetNx(MsetNx),
    /// RENAME/RENAMENX across shards.
    Rename(Rename),
    /// A keyspace-wide command inside MULTI.
    Fan(Fan),
    /// EXEC.
    Multi(Multi),
    /// GOBLIN.CLAIM across shards.
    Claim(Claim),
    /// SCAN, carried over shard boundaries.
    Scan(Scan),
    /// Nothing to run: the answer is known (an argument error found up front).
    Reply(Option<Vec<u8>>),
}

/// SCAN over the shards in slot order.
#[derive(Debug)]
pub struct Scan {
    args: Vec<Vec<u8>>,
    spec: usize,
    /// First slot of each shard, by shard.
    starts: Vec<usize>,
    count: usize,
    /// The keys found so far, as encoded bulk strings.
    found: Vec<u8>,
    found_len: usize,
    resp: Version,
    started: bool,
}

/// GOBLIN.CLAIM with its claim key and result key on different shards.
///
/// The protocol takes only the locks it needs, in ascending shard order:
/// 1. At the claim shard C, lock the claim key (exclusive) and try the claim. Won: the
///    reply is CLAIMED, the lock is dropped in the same step — one visit to one shard,
///    the result shard is never touched. The linearization point is the claim's write.
/// 2. Held, and C comes before the result shard R: keep C's lock (so the claim stays
///    held), then at R lock the result key (shared), read it, unlock; reply what was read,
///    unlock C. While C is locked no one can release, expire or re-take the claim, so at
///    the instant of the read the claim is held: that instant is the linearization point.
/// 3. Held, and R comes before C: C's lock is dropped at once (holding it while asking R
///    would break the ascending order). Then lock the result key at R (shared) and read
///    it, keeping the lock, and only then try the claim again at C: won → CLAIMED; held →
///    the value read, which cannot have changed since R is still locked. The second
///    attempt is the linearization point.
///
/// Inside EXEC every key is already locked, so no step takes or drops a lock.
#[derive(Debug)]
pub struct Claim {
    claim_key: Vec<u8>,
    result_key: Vec<u8>,
    token: Vec<u8>,
    deadline: Millis,
    claim_shard: usize,
    result_shard: usize,
    get_spec: usize,
    locked: bool,
    stage: u8,
    result: Option<Vec<u8>>,
    resp: Version,
}

fn integer(reply: &[u8]) -> Option<i64> {
    match parse_reply(reply) {
        Ok(Some((Frame::Integer(n), _))) => Some(n),
        _ => None,
    }
}

fn encoded(resp: Version, f: impl FnOnce(&mut Encoder<'_>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut Encoder::new(&mut out, resp));
    out
}

/// The elements of an array reply, as raw byte slices.
fn elements(reply: &[u8]) -> Vec<&[u8]> {
    let Some(nl) = reply.iter().position(|&b| b == b'\n') else {
        return Vec::new();
    };
    let mut pos = nl + 1;
    let mut out = Vec::new();
    while pos < reply.len() {
        match reply_len(&reply[pos..]) {
            Ok(Some((n, _))) => {
                out.push(&reply[pos..pos + n]);
                pos += n;
            }
            _ => break,
        }
    }
    out
}

impl Plan {
    /// The plan for a multi-key command whose keys span shards.
    ///
    /// `now` is the command's timestamp; `in_exec` says the transaction already holds every
    /// key's lock (EXEC).
    pub fn for_command(
        table: &CommandTable,
        spec_id: usize,
        args: &Args<'_>,
        slots: &SlotTable,
        resp: Version,
        now: Millis,
        in_exec: bool,
    ) -> Option<Plan> {
        let spec = table.get(spec_id)?;
        let kind = spec.multi?;
        let mut copy_replace = false;
        if kind == MultiKey::Copy {
            match crate::families::keys::parse_copy(args) {
                Ok(replace) => copy_replace = replace,
                Err(e) => return Some(Plan::Reply(Some(encoded(resp, |enc| enc.error(&e))))),
            }
        }
        if kind == MultiKey::Claim {
            let deadline = match crate::families::goblin::claim_deadline(args, now) {
                Ok(d) => d,
                Err(e) => return Some(Plan::Reply(Some(encoded(resp, |enc| enc.error(&e))))),
            };
            return Some(Plan::Claim(Claim {
                claim_key: args.get(1).to_vec(),
                result_key: args.get(2).to_vec(),
                token: args.get(3).to_vec(),
                deadline,
                claim_shard: slots.shard_of_key(args.get(1)),
                result_shard: slots.shard_of_key(args.get(2)),
                get_spec: table.lookup(b"get")?.id,
                locked: in_exec,
                stage: 0,
                result: None,
                resp,
            }));
        }
        let (first, step) = (spec.keys.first, spec.keys.step.max(1));
        if matches!(kind, MultiKey::AllOk | MultiKey::MsetNx) && args.len().is_multiple_of(2) {
            // Unpaired arguments: the command's own handler answers the arity error
            // without touching a key, wherever it runs.
            return None;
        }
        match kind {
            MultiKey::Claim => None,
            MultiKey::Sum | MultiKey::Mget | MultiKey::AllOk => {
                let parts = split_by_shard(spec_id, args, first, step, slots, resp)
                    .into_iter()
                    .map(|(s, b, idx)| (s, Some(b), idx))
                    .collect();
                Some(Plan::Split(Split {
                    kind,
                    parts,
                    argc: args.len(),
                    step,
                    resp,
                }))
            }
            MultiKey::MsetNx => {
                let exists = table.lookup(b"exists")?.id;
                let mset = table.lookup(b"mset")?.id;
                let keys: Vec<&[u8]> = (first..args.len())
                    .step_by(2)
                    .map(|i| args.get(i))
                    .collect();
                let mut data = Vec::new();
                let mut spans = Vec::new();
                for a in std::iter::once(&b"EXISTS"[..]).chain(keys.iter().copied()) {
                    let start = data.len();
                    data.extend_from_slice(a);
                    spans.push(start..data.len());
                }
                let exists_args = Args::new(&data, &spans);
                let exists = split_by_shard(exists, &exists_args, 1, 1, slots, resp)
                    .into_iter()
                    .map(|(s, b, _)| (s, Some(b)))
                    .collect();
                let sets = split_by_shard(mset, args, 1, 2, slots, resp)
                    .into_iter()
                    .map(|(s, b, _)| (s, Some(b)))
                    .collect();
                Some(Plan::MsetNx(MsetNx {
                    exists,
                    sets,
                    checked: false,
                    resp,
                }))
            }
            MultiKey::Rename { .. } | MultiKey::Copy => Some(Plan::Rename(Rename {
                src: args.get(1).to_vec(),
                dst: args.get(2).to_vec(),
                src_shard: slots.shard_of_key(args.get(1)),
                dst_shard: slots.shard_of_key(args.get(2)),
                nx: kind == MultiKey::Rename { nx: true },
                copy: kind == MultiKey::Copy,
                replace: copy_replace,
                exists_spec: table.lookup(b"exists")?.id,
                stage: 0,
                resp,
            })),
        }
    }

    /// SCAN: from the shard owning the cursor's slot, on to the next shards while too
    /// few keys were found.
    pub fn for_scan(spec_id: usize, args: &Args<'_>, slots: &SlotTable, resp: Version) -> Plan {
        let mut count = 10;
        for i in 2..args.len().saturating_sub(1) {
            if args.is(i, "count") {
                count = goblin_protocol::parse_i64(args.get(i + 1))
                    .map_or(count, |n| n.max(1) as usize);
            }
        }
        Plan::Scan(Scan {
            args: args.iter_from(0).map(<[u8]>::to_vec).collect(),
            spec: spec_id,
            starts: (0..slots.shards()).map(|s| slots.range(s).start).collect(),
            count,
            found: Vec::new(),
            found_len: 0,
            resp,
            started: false,
        })
    }

    /// A keyspace-wide command: a part on every shard, merged on the connection.
    pub fn for_fan(
        spec_id: usize,
        args: &Args<'_>,
        merge: MergeFn,
        shards: usize,
        resp: Version,
    ) -> Plan {
        Plan::Fan(Fan {
            cmd: single(spec_id, args, resp),
            merge,
            shards,
            sent: false,
        })
    }

    /// EXEC's plan for the queued commands.
    pub fn for_exec(
        table: &CommandTable,
        queued: &[Box<Batch>],
        slots: &SlotTable,
        resp: Version,
        now: Millis,
    ) -> Plan {
        let mut list = Vec::with_capacity(queued.len());
        for cmd in queued {
            let args = cmd.args(0);
            let spec_id = cmd.cmds.first().map_or(0, |c| c.spec);
            let Some(spec) = table.get(spec_id) else {
                continue;
            };
            let item = match spec.exec {
                Exec::Conn(_) | Exec::Container | Exec::Transaction => {
                    Queued::Conn(single(spec_id, &args, resp))
                }
                Exec::Cursor(_) => {
                    let cursor =
                        goblin_protocol::parse_i64(args.get(1)).unwrap_or(0).max(0) as usize;
                    Queued::Single(slots.shard_of_slot(cursor), single(spec_id, &args, resp))
                }
                Exec::AllShards { merge, .. } => Queued::Plan(Box::new(Plan::Fan(Fan {
                    cmd: single(spec_id, &args, resp),
                    merge,
                    shards: slots.shards(),
                    sent: false,
                }))),
                Exec::Shard(_) => {
                    let mut shards = spec
                        .keys
                        .indexes(args.len())
                        .map(|i| slots.shard_of_key(args.get(i)));
                    let first = shards.next().unwrap_or(0);
                    if shards.all(|s| s == first) {
                        Queued::Single(first, single(spec_id, &args, resp))
                    } else {
                        match Plan::for_command(table, spec_id, &args, slots, resp, now, true) {
                            Some(plan) => Queued::Plan(Box::new(plan)),
                            None => Queued::Single(first, single(spec_id, &args, resp)),
                        }
                    }
                }
            };
            list.push(Some(item));
        }
        let n = list.len();
        Plan::Multi(Multi {
            queued: list,
            next: 0,
            outcomes: (0..n).map(|_| None).collect(),
            in_stage: Vec::new(),
            current: None,
            resp,
        })
    }

    /// Advances the plan with the results of the last stage (empty at the start).
    pub fn next(&mut self, results: Vec<StepResult>) -> Next {
        match self {
            Plan::Split(p) => p.next(results),
            Plan::MsetNx(p) => p.next(results),
            Plan::Rename(p) => p.next(results),
            Plan::Fan(p) => p.next(results),
            Plan::Multi(p) => p.next(results),
            Plan::Claim(p) => p.next(results),
            Plan::Scan(p) => p.next(results),
            Plan::Reply(reply) => Next::Finish(Outcome::Reply(reply.take().unwrap_or_default())),
        }
    }

    /// Whether the transaction locks every key before the plan runs; GOBLIN.CLAIM takes
    /// its locks in its stages instead.
    pub fn locks_upfront(&self) -> bool {
        !matches!(self, Plan::Claim(_) | Plan::Reply(_) | Plan::Scan(_))
    }
}

impl Scan {
    fn shard_of(&self, slot: usize) -> usize {
        self.starts
            .iter()
            .rposition(|&start| start <= slot)
            .unwrap_or(0)
    }

    /// SCAN from `cursor`, with the client's options.
    fn step(&self, cursor: &[u8]) -> Next {
        let mut data = Vec::new();
        let mut spans = Vec::new();
        for (i, arg) in self.args.iter().enumerate() {
            let arg: &[u8] = if i == 1 { cursor } else { arg };
            let start = data.len();
            data.extend_from_slice(arg);
            spans.push(start..data.len());
        }
        let slot = goblin_protocol::parse_i64(cursor).unwrap_or(0).max(0) as usize;
        let batch = single(self.spec, &Args::new(&data, &spans), self.resp);
        Next::Stage(vec![Work {
            shard: self.shard_of(slot),
            batch: Some(batch),
            ..Default::default()
        }])
    }

    fn next(&mut self, mut results: Vec<StepResult>) -> Next {
        if !self.started {
            self.started = true;
            let cursor = self.args.get(1).cloned().unwrap_or_default();
            return self.step(&cursor);
        }
        let reply = results.pop().map(|r| r.replies).unwrap_or_default();
        let Ok(Some((Frame::Array(parts), _))) = parse_reply(&reply) else {
            // An error (invalid cursor, bad option): as the shard answered.
            return Next::Finish(Outcome::Reply(reply));
        };
        let (Some(Frame::Bulk(cursor)), Some(Frame::Array(keys))) = (parts.first(), parts.get(1))
        else {
            return Next::Finish(Outcome::Reply(reply));
        };
        let cursor = cursor.to_vec();
        for key in keys {
            if let Frame::Bulk(k) = key {
                self.found_len += 1;
                self.found
                    .extend_from_slice(&encoded(self.resp, |e| e.bulk(k)));
            }
        }
        if cursor != b"0" && self.found_len < self.count {
            return self.step(&cursor);
        }
        let mut out = encoded(self.resp, |e| {
            e.array(2);
            e.bulk(&cursor);
            e.array(self.found_len);
        });
        out.extend_from_slice(&self.found);
        Next::Finish(Outcome::Reply(out))
    }
}

impl Claim {
    /// The claim attempt at the claim shard.
    fn attempt(&self, release_if_held: bool) -> Work {
        Work {
            shard: self.claim_shard,
            lock: if self.locked {
                Vec::new()
            } else {
                vec![(self.claim_key.clone(), LockMode::Exclusive)]
            },
            special: Some(Special::TryClaim {
                key: self.claim_key.clone(),
                token: self.token.clone(),
                deadline: self.deadline,
                release_if_won: !self.locked,
                release_if_held: !self.locked && release_if_held,
            }),
            ..Default::default()
        }
    }

    /// GET result_key at the result shard.
    fn read(&self, release: bool) -> Work {
        let data = [&b"GET"[..], &self.result_key].concat();
        let spans = [0..3, 3..data.len()];
        let batch = single(self.get_spec, &Args::new(&data, &spans), self.resp);
        Work {
            shard: self.result_shard,
            batch: Some(batch),
            lock: if self.locked {
                Vec::new()
            } else {
                vec![(self.result_key.clone(), LockMode::Shared)]
            },
            release: !self.locked && release,
            ..Default::default()
        }
    }

    fn claimed(&self) -> Next {
        Next::Finish(Outcome::Reply(encoded(self.resp, |e| {
            e.bulk(crate::families::goblin::CLAIMED)
        })))
    }

    fn next(&mut self, mut results: Vec<StepResult>) -> Next {
        // Inside EXEC the order of the keys' shards does not matter: all are locked.
        let claim_first = self.locked || self.claim_shard < self.result_shard;
        self.stage += 1;
        match self.stage {
            1 => Next::Stage(vec![self.attempt(!claim_first)]),
            2 => {
                if results.first().and_then(|r| r.claimed) == Some(true) {
                    return self.claimed();
                }
                Next::Stage(vec![self.read(claim_first)])
            }
            3 => {
                let read = results.pop().map(|r| r.replies).unwrap_or_default();
                if claim_first {
                    return Next::Finish(Outcome::Reply(read));
                }
                self.result = Some(read);
                Next::Stage(vec![self.attempt(true)])
            }
            _ => {
                if results.first().and_then(|r| r.claimed) == Some(true) {
                    return self.claimed();
                }
                Next::Finish(Outcome::Reply(self.result.take().unwrap_or_default()))
            }
        }
    }
}

impl Split {
    fn next(&mut self, results: Vec<StepResult>) -> Next {
        if results.is_empty() {
            let work = self
                .parts
                .iter_mut()
                .map(|(shard, batch, _)| Work {
                    shard: *shard,
                    batch: batch.take(),
                    special: None,
                    ..Default::default()
                })
                .collect();
            return Next::Stage(work);
        }
        let resp = self.resp;
        let reply = match self.kind {
            MultiKey::Sum => {
                let mut sum = 0i64;
                for r in &results {
                    match integer(&r.replies) {
                        Some(n) => sum += n,
                        None => return Next::Finish(Outcome::Reply(r.replies.clone())),
                    }
                }
                encoded(resp, |e| e.integer(sum))
            }
            MultiKey::Mget => {
                let mut slots: Vec<&[u8]> = vec![b"$-1\r\n"; self.argc.saturating_sub(1)];
                for (r, (_, _, idx)) in results.iter().zip(&self.parts) {
                    for (value, &i) in elements(&r.replies).into_iter().zip(idx) {
                        if let Some(slot) = slots.get_mut(i - 1) {
                            *slot = value;
                        }
                    }
                }
                let mut out = encoded(resp, |e| e.array(slots.len()));
                slots.iter().for_each(|s| out.extend_from_slice(s));
                out
            }
            _ => {
                let err = results.iter().find(|r| r.replies.first() == Some(&b'-'));
                match err.or(results.first()) {
                    Some(r) => r.replies.clone(),
                    None => encoded(resp, |e| e.ok()),
                }
            }
        };
        let _ = self.step;
        Next::Finish(Outcome::Reply(reply))
    }
}

impl MsetNx {
    fn next(&mut self, results: Vec<StepResult>) -> Next {
        let stage = |parts: &mut Vec<(usize, Option<Box<Batch>>)>| {
            Next::Stage(
                parts
                    .iter_mut()
                    .map(|(s, b)| Work {
                        shard: *s,
                        batch: b.take(),
                        special: None,
                        ..Default::default()
                    })
                    .collect(),
            )
        };
        if results.is_empty() {
            return stage(&mut self.exists);
        }
        if !self.checked {
            self.checked = true;
            let existing: i64 = results.iter().filter_map(|r| integer(&r.replies)).sum();
            if existing > 0 {
                return Next::Finish(Outcome::Reply(encoded(self.resp, |e| e.integer(0))));
            }
            return stage(&mut self.sets);
        }
        Next::Finish(Outcome::Reply(encoded(self.resp, |e| e.integer(1))))
    }
}

impl Rename {
    fn exists(&self, key: &[u8], shard: usize) -> Work {
        let args_data = [&b"EXISTS"[..], key].concat();
        let spans = [0..6, 6..args_data.len()];
        let batch = single(self.exists_spec, &Args::new(&args_data, &spans), self.resp);
        Work {
            shard,
            batch: Some(batch),
            ..Default::default()
        }
    }

    /// Whether an existing destination stops the command (RENAMENX; COPY without REPLACE).
    fn guard_dst(&self) -> bool {
        if self.copy { !self.replace } else { self.nx }
    }

    fn reply(&self, f: impl FnOnce(&mut Encoder<'_>)) -> Next {
        Next::Finish(Outcome::Reply(encoded(self.resp, f)))
    }

    fn missing_source(&self) -> Next {
        if self.copy {
            self.reply(|e| e.integer(0))
        } else {
            self.reply(|e| e.error(b"ERR no such key"))
        }
    }

    fn next(&mut self, mut results: Vec<StepResult>) -> Next {
        self.stage += 1;
        match self.stage {
            1 => {
                let mut work = vec![self.exists(&self.src, self.src_shard)];
                if self.guard_dst() {
                    work.push(self.exists(&self.dst, self.dst_shard));
                }
                Next::Stage(work)
            }
            2 => {
                if results.first().and_then(|r| integer(&r.replies)) != Some(1) {
                    return self.missing_source();
                }
                if self.guard_dst() && results.get(1).and_then(|r| integer(&r.replies)) == Some(1) {
                    return self.reply(|e| e.integer(0));
                }
                let special = if self.copy {
                    Special::Clone(self.src.clone())
                } else {
                    Special::Take(self.src.clone())
                };
                Next::Stage(vec![Work {
                    shard: self.src_shard,
                    special: Some(special),
                    ..Default::default()
                }])
            }
            3 => match results.pop().and_then(|r| r.taken) {
                None => self.missing_source(),
                Some(moved) => Next::Stage(vec![Work {
                    shard: self.dst_shard,
                    special: Some(Special::Put(self.dst.clone(), moved)),
                    ..Default::default()
                }]),
            },
            _ if self.copy || self.nx => self.reply(|e| e.integer(1)),
            _ => self.reply(|e| e.ok()),
        }
    }
}

impl Fan {
    fn next(&mut self, results: Vec<StepResult>) -> Next {
        if !self.sent {
            self.sent = true;
            let work = (0..self.shards)
                .map(|shard| {
                    let mut b = Box::new(Batch {
                        resp: self.cmd.resp,
                        ..Batch::default()
                    });
                    b.push(
                        self.cmd.cmds.first().map_or(0, |c| c.spec),
                        &self.cmd.args(0),
                    );
                    Work {
                        shard,
                        batch: Some(b),
                        special: None,
                        ..Default::default()
                    }
                })
                .collect();
            return Next::Stage(work);
        }
        let parts = results.into_iter().map(|r| r.replies).collect();
        Next::Finish(Outcome::Merge(
            self.merge,
            std::mem::take(&mut self.cmd),
            parts,
        ))
    }
}

impl Multi {
    fn next(&mut self, results: Vec<StepResult>) -> Next {
        // Feed results to whoever asked for them.
        if let Some((idx, mut plan)) = self.current.take() {
            match plan.next(results) {
                Next::Stage(work) => {
                    self.current = Some((idx, plan));
                    return Next::Stage(work);
                }
                Next::Finish(outcome) => self.outcomes[idx] = Some(outcome),
            }
        } else if !self.in_stage.is_empty() {
            let mut replies = results
                .into_iter()
                .next()
                .map(|r| r.replies)
                .unwrap_or_default();
            // Split the stage's concatenated replies back into one per command.
            for idx in std::mem::take(&mut self.in_stage) {
                let n = reply_len(&replies)
                    .ok()
                    .flatten()
                    .map_or(replies.len(), |(n, _)| n);
                let rest = replies.split_off(n);
                self.outcomes[idx] = Some(Outcome::Reply(std::mem::replace(&mut replies, rest)));
            }
        }
        loop {
            let Some(slot) = self.queued.get_mut(self.next) else {
                let outcomes = self
                    .outcomes
                    .iter_mut()
                    .map(|o| o.take().unwrap_or(Outcome::Reply(Vec::new())))
                    .collect();
                return Next::Finish(Outcome::Exec(outcomes));
            };
            let idx = self.next;
            self.next += 1;
            match slot.take() {
                None => {}
                Some(Queued::Conn(cmd)) => self.outcomes[idx] = Some(Outcome::Conn(cmd)),
                Some(Queued::Plan(mut plan)) => match plan.next(Vec::new()) {
                    Next::Stage(work) => {
                        self.current = Some((idx, plan));
                        return Next::Stage(work);
                    }
                    Next::Finish(outcome) => self.outcomes[idx] = Some(outcome),
                },
                Some(Queued::Single(shard, mut batch)) => {
                    self.in_stage.push(idx);
                    // Later commands for the same shard join the step, skipping over
                    // connection commands (which touch no keys).
                    while let Some(next) = self.queued.get_mut(self.next) {
                        match next {
                            Some(Queued::Single(s, _)) if *s == shard => {
                                if let Some(Queued::Single(_, more)) = next.take() {
                                    batch.push(
                                        more.cmds.first().map_or(0, |c| c.spec),
                                        &more.args(0),
                                    );
                                }
                                self.in_stage.push(self.next);
                            }
                            Some(Queued::Conn(_)) => {
                                if let Some(Queued::Conn(cmd)) = next.take() {
                                    self.outcomes[self.next] = Some(Outcome::Conn(cmd));
                                }
                            }
                            _ => break,
                        }
                        self.next += 1;
                    }
                    let _ = self.resp;
                    return Next::Stage(vec![Work {
                        shard,
                        batch: Some(batch),
                        special: None,
                        ..Default::default()
                    }]);
                }
            }
        }
    }
}

/// Where a transaction is.
#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the grant of `shards[i]`.
    Locking(usize),
    /// Waiting for `n` results of a stage.
    Running(usize),
}

/// A transaction coordinated by this worker for one of its connections.
#[derive(Debug)]
pub struct TxJob {
    /// Its name on every shard.
    pub tx: TxRef,
    /// The connection it answers (its slab key on this worker).
    pub conn: usize,
    shards: Vec<usize>,
    locks: Vec<Vec<(Vec<u8>, LockMode)>>,
    lock_all: Vec<bool>,
    phase: Phase,
    results: Vec<StepResult>,
    order: Vec<usize>,
    plan: Plan,
    now: Millis,
    /// Shards where the transaction holds locks now, released when it ends.
    held: Vec<usize>,
}

impl TxJob {
    /// A transaction touching the keys `needs` (and, with `all`, every shard whole).
    pub fn new(
        tx: TxRef,
        conn: usize,
        slots: &SlotTable,
        needs: Vec<(Vec<u8>, LockMode)>,
        all: bool,
        plan: Plan,
    ) -> TxJob {
        // (shard, keys to lock there, whole shard)
        type ShardLocks = (usize, Vec<(Vec<u8>, LockMode)>, bool);
        let mut by_shard: Vec<ShardLocks> = Vec::new();
        if all {
            by_shard.extend((0..slots.shards()).map(|s| (s, Vec::new(), true)));
        }
        for (key, mode) in needs {
            let shard = slots.shard_of_key(&key);
            let entry = match by_shard.iter_mut().position(|(s, _, _)| *s == shard) {
                Some(i) => &mut by_shard[i],
                None => {
                    by_shard.push((shard, Vec::new(), false));
                    let last = by_shard.len() - 1;
                    &mut by_shard[last]
                }
            };
            entry.1.push((key, mode));
        }
        // One lock per key, exclusive winning over shared (sorting first: a request may
        // name a million keys, and comparing each with the others would stall the loop).
        for (_, keys, _) in &mut by_shard {
            keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            keys.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same && later.1 == LockMode::Exclusive {
                    kept.1 = LockMode::Exclusive;
                }
                same
            });
        }
        by_shard.sort_by_key(|(s, _, _)| *s);
        TxJob {
            tx,
            conn,
            shards: by_shard.iter().map(|(s, _, _)| *s).collect(),
            lock_all: by_shard.iter().map(|(_, _, a)| *a).collect(),
            locks: by_shard.into_iter().map(|(_, k, _)| k).collect(),
            phase: Phase::Locking(0),
            results: Vec::new(),
            order: Vec::new(),
            plan,
            now: 0,
            held: Vec::new(),
        }
    }

    fn step(&self) -> TxStep {
        TxStep {
            tx: self.tx,
            lock: Vec::new(),
            lock_all: false,
            batch: None,
            special: None,
            release: false,
            now: self.now,
        }
    }

    /// Sends the first lock request.
    pub fn start(&mut self, now: Millis, out: &mut Vec<Outgoing>) -> Option<Outcome> {
        self.now = now;
        if self.shards.is_empty() {
            return self.run_stage(Vec::new(), out);
        }
        self.request_lock(0, out);
        None
    }

    fn request_lock(&mut self, i: usize, out: &mut Vec<Outgoing>) {
        let mut step = self.step();
        step.lock = std::mem::take(&mut self.locks[i]);
        step.lock_all = self.lock_all[i];
        self.phase = Phase::Locking(i);
        out.push((self.shards[i], Msg::Step(step)));
    }

    /// Handles a step's result; returns the outcome once the transaction is done (its
    /// release messages are then in `out`).
    pub fn on_done(
        &mut self,
        done: TxStepDone,
        now: Millis,
        out: &mut Vec<Outgoing>,
    ) -> Option<Outcome> {
        match (
            done.holds_locks,
            self.held.iter().position(|&s| s == done.shard),
        ) {
            (true, None) => self.held.push(done.shard),
            (false, Some(i)) => {
                self.held.swap_remove(i);
            }
            _ => {}
        }
        match self.phase {
            Phase::Locking(i) => {
                if i + 1 < self.shards.len() {
                    self.request_lock(i + 1, out);
                    return None;
                }
                // Every lock is held: one timestamp for the whole transaction.
                self.now = now;
                self.run_stage(Vec::new(), out)
            }
            Phase::Running(n) => {
                let position = self
                    .order
                    .iter()
                    .position(|&s| s == done.shard)
                    .unwrap_or(0);
                self.results.push(StepResult {
                    claimed: done.claimed,
                    shard: position,
                    replies: done.batch.map(|b| b.replies).unwrap_or_default(),
                    taken: done.taken,
                });
                if n > 1 {
                    self.phase = Phase::Running(n - 1);
                    return None;
                }
                let mut results = std::mem::take(&mut self.results);
                results.sort_by_key(|r| r.shard);
                for (r, &shard) in results.iter_mut().zip(&self.order) {
                    r.shard = shard;
                }
                self.run_stage(results, out)
            }
        }
    }

    fn run_stage(&mut self, results: Vec<StepResult>, out: &mut Vec<Outgoing>) -> Option<Outcome> {
        match self.plan.next(results) {
            Next::Stage(work) => {
                self.order = work.iter().map(|w| w.shard).collect();
                self.phase = Phase::Running(work.len());
                for w in work {
                    let mut step = self.step();
                    step.batch = w.batch;
                    step.special = w.special;
                    step.lock = w.lock;
                    step.release = w.release;
                    out.push((w.shard, Msg::Step(step)));
                }
                if self.order.is_empty() {
                    return self.run_stage(Vec::new(), out);
                }
                None
            }
            Next::Finish(outcome) => {
                for shard in std::mem::take(&mut self.held) {
                    let mut step = self.step();
                    step.release = true;
                    out.push((shard, Msg::Step(step)));
                }
                Some(outcome)
            }
        }
    }
}
