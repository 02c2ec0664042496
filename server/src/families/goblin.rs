//! Goblin's native commands — the claim's whole life: GOBLIN.CLAIM (with `BLOCK`),
//! GOBLIN.PUBLISH, GOBLIN.RENEW, GOBLIN.STATUS and GOBLIN.CAD, with DELEX (Redis 8.4) and
//! DELIFEQ (Valkey 9) as spellings of compare-and-delete.
//!
//! Each is the atomic form of a Lua idiom (see `shared/spec/goblin-commands.md`), and
//! replies exactly what redis-server replies to that script.
//!
//! With both keys on one shard a command runs here, as one shard command costing what
//! `SET … NX EX` costs. With its keys on two shards it is a transaction: GOBLIN.CLAIM's
//! [`ClaimPlan`] takes only the locks it needs; PUBLISH and STATUS lock both keys.
//!
//! **BLOCK.** A claim that would answer nil (held, no result yet) waits, as a plan
//! ([`ClaimWait`]) parked on both keys: the result key serves every waiter when it is
//! written (each runs the claim again and reads it), the claim key serves the waiter
//! first in line when it disappears (released, deleted, or expired by the timer wheel),
//! with the key's lock, so that the claim is attempted again for it before anyone else.

use std::time::Duration;

use goblin_protocol::{Encoder, parse_i64};
use goblin_store::{Keyspace, Millis};

use crate::errors::{self, ErrorReply};
use crate::runtime::msg::LockMode;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::keys::InvalidKeys;
use crate::table::{CommandTable, KeyFlags, Meta, Node};
use crate::txn::plan::{Hop, HopOut, Locking, Park, Plan, PlanCx, PlanStart, Serve, Step, Watch};

use super::strings::{Str, StrRead, log_set_pxat, lookup, reply_get};
use super::{ExpireUnit, LONGEST_TIMEOUT, decimal, parse_expire};

/// The reply to a won claim.
pub const CLAIMED: &[u8] = b"CLAIMED";

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table
        .add(&CLAIM_META, Exec::Shard(claim))
        .cross_shard(claim_plan, Locking::InHops)
        .plan_if(claim_may_block);
    table
        .add(&PUBLISH_META, Exec::Shard(publish))
        .cross_shard(publish_plan, Locking::Keys);
    table.add(&RENEW_META, Exec::Shard(renew));
    table
        .add(&STATUS_META, Exec::Shard(status))
        .cross_shard(status_plan, Locking::Keys);
    table.add(&CAD_META, Exec::Shard(cad));
    table.add(&DELIFEQ_META, Exec::Shard(cad));
    table
        .add(&DELEX_META, Exec::Shard(delex))
        .custom_keys(delex_keys);
}

/// Parses GOBLIN.CLAIM's `seconds` (argument 4) into the lease's deadline, with SET EX's
/// rules and errors; done before anything else, so an invalid lease errors even when the
/// claim is held.
///
/// # Errors
/// The error reply.
pub fn claim_deadline(args: &Args<'_>, now: Millis) -> Result<Millis, ErrorReply> {
    parse_expire(args.get(4), ExpireUnit::Seconds, now, "goblin.claim")
}

/// GOBLIN.CLAIM's arguments after `token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClaimOpts {
    /// The lease's deadline from now.
    deadline: Millis,
    /// The lease, in milliseconds (a claim won after waiting gets it from then).
    lease: Millis,
    /// `BLOCK ms`: `Some(None)` waits without limit.
    block: Option<Option<Duration>>,
}

/// Reads `seconds` (first, as SET EX reads it) and `[BLOCK milliseconds]` (XREAD's
/// timeout rules and errors; given twice, the last counts).
fn parse_claim(args: &Args<'_>, now: Millis) -> Result<ClaimOpts, ErrorReply> {
    let deadline = claim_deadline(args, now)?;
    let mut block = None;
    let mut c = args.cursor(5);
    while !c.is_empty() {
        if !c.next_is("BLOCK") {
            return Err(errors::SYNTAX.into());
        }
        let ms = parse_i64(c.next_arg()?).ok_or(ErrorReply::Fixed(errors::TIMEOUT_NOT_INTEGER))?;
        if ms < 0 {
            return Err(errors::TIMEOUT_NEGATIVE.into());
        }
        let wait = Duration::from_millis(ms as u64);
        block = Some((ms > 0 && wait <= LONGEST_TIMEOUT).then_some(wait));
    }
    Ok(ClaimOpts {
        deadline,
        lease: deadline.saturating_sub(now),
        block,
    })
}

/// A GOBLIN.CLAIM with options may wait (BLOCK): it runs as its plan, wherever its keys
/// are (the plan answers a syntax error as well as the shard would).
fn claim_may_block(_: &crate::runtime::server::Shared, args: &Args<'_>) -> bool {
    args.len() > 5
}

/// The clock a lease granted or extended on this shard counts from: now, not the
/// command's timestamp (the iteration's, older by whatever ran before it in the
/// iteration), so that a lease of N seconds never ends earlier than N seconds after the
/// command was sent (nor after its key moved to another node: RESTORE counts the same way).
fn lease_clock(ctx: &ShardCtx<'_>) -> Millis {
    ctx.now.max(crate::clock::now_ms())
}

/// The claim attempt: `SET claim_key token NX PXAT deadline`. True when it won. A key of
/// any type holds the claim (NX tests existence only). A won claim's effect is that SET:
/// replayed, the lease keeps its deadline.
pub fn try_claim(ctx: &mut ShardCtx<'_>, key: &[u8], token: &[u8], deadline: Millis) -> bool {
    if ctx.db.contains(key, ctx.now) {
        return false;
    }
    ctx.db.set_str(key, token, Some(deadline), ctx.now);
    // Never evicted: a claim evicted under its owner would go to a duplicate.
    ctx.db.pin(key, ctx.now);
    log_set_pxat(ctx, key, token, deadline);
    true
}

/// `GOBLIN.CLAIM claim_key result_key token seconds [BLOCK ms]`, both keys on this shard.
/// With BLOCK, run alone on its connection's shard, a claim that would answer nil asks to
/// wait (its plan takes over and parks); elsewhere (inside EXEC) BLOCK is checked and the
/// command answers as without it.
fn claim(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let opts = match parse_claim(args, lease_clock(ctx)) {
        Ok(o) => o,
        Err(e) => return e.send(&mut ctx.out),
    };
    if try_claim(ctx, args.get(1), args.get(3), opts.deadline) {
        ctx.out.bulk(CLAIMED);
    } else if opts.block.is_some()
        && ctx.may_wait()
        && matches!(lookup(ctx.db, args.get(2), ctx.now).0, Str::Absent)
    {
        ctx.wait();
    } else {
        reply_get(ctx, args.get(2));
    }
}

/// How a claim attempt ended.
#[derive(Debug)]
enum ClaimEnd {
    /// Won: `CLAIMED`.
    Claimed,
    /// Held: what the result key holds.
    Read(StrRead),
}

impl ClaimEnd {
    fn reply(&self, e: &mut Encoder<'_>) {
        match self {
            ClaimEnd::Claimed => e.bulk(CLAIMED),
            ClaimEnd::Read(read) => read.reply(e),
        }
    }
}

/// GOBLIN.CLAIM as a transaction: with its keys on two shards, or on one when it may
/// wait.
///
/// On one shard: one hop locks both keys, claims or reads, and releases.
///
/// On two, the protocol takes only the locks it needs, in ascending shard order:
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
/// Inside EXEC every key is already locked, so no hop takes or drops a lock.
#[derive(Debug)]
pub struct ClaimPlan {
    claim_key: Vec<u8>,
    result_key: Vec<u8>,
    token: Vec<u8>,
    deadline: Millis,
    claim_shard: usize,
    result_shard: usize,
    locked: bool,
    stage: u8,
    result: Option<StrRead>,
}

impl ClaimPlan {
    /// The claim attempt at the claim shard.
    fn attempt(&self, release_if_held: bool) -> Hop {
        let (key, token, deadline) = (self.claim_key.clone(), self.token.clone(), self.deadline);
        let locked = self.locked;
        let hop = Hop::run(self.claim_shard, move |ctx| {
            let won = try_claim(ctx, &key, &token, deadline);
            if !locked && (won || release_if_held) {
                ctx.release_locks_after();
            }
            HopOut::Flag(won)
        });
        if locked {
            hop
        } else {
            hop.locking(&self.claim_key, LockMode::Exclusive)
        }
    }

    /// GET result_key at the result shard.
    fn read(&self, release: bool) -> Hop {
        let key = self.result_key.clone();
        let hop = Hop::run(self.result_shard, move |ctx| {
            HopOut::Other(Box::new(StrRead::of(ctx.db, &key, ctx.now)))
        });
        match (self.locked, release) {
            (true, _) => hop,
            (false, false) => hop.locking(&self.result_key, LockMode::Shared),
            (false, true) => hop.locking(&self.result_key, LockMode::Shared).releasing(),
        }
    }

    /// Both keys on one shard: one hop with both locked claims or reads.
    fn whole(&self) -> Hop {
        let (claim_key, result_key) = (self.claim_key.clone(), self.result_key.clone());
        let (token, deadline) = (self.token.clone(), self.deadline);
        let mut hop = Hop::run(self.claim_shard, move |ctx| {
            let end = if try_claim(ctx, &claim_key, &token, deadline) {
                ClaimEnd::Claimed
            } else {
                ClaimEnd::Read(StrRead::of(ctx.db, &result_key, ctx.now))
            };
            HopOut::Other(Box::new(end))
        });
        if !self.locked {
            hop = hop.locking(&self.claim_key, LockMode::Exclusive);
            if self.result_key != self.claim_key {
                hop = hop.locking(&self.result_key, LockMode::Shared);
            }
            hop = hop.releasing();
        }
        hop
    }

    /// The next hops, or how the claim ended.
    fn step(&mut self, results: Vec<HopOut>) -> Result<Vec<Hop>, ClaimEnd> {
        if self.claim_shard == self.result_shard {
            if self.stage == 0 {
                self.stage = 1;
                return Ok(vec![self.whole()]);
            }
            return Err(match results.into_iter().next() {
                Some(HopOut::Other(any)) => any
                    .downcast::<ClaimEnd>()
                    .map_or(ClaimEnd::Read(StrRead::Absent), |end| *end),
                _ => ClaimEnd::Read(StrRead::Absent),
            });
        }
        // Inside EXEC the order of the keys' shards does not matter: all are locked.
        let claim_first = self.locked || self.claim_shard < self.result_shard;
        self.stage += 1;
        match self.stage {
            1 => Ok(vec![self.attempt(!claim_first)]),
            2 => {
                if won(&results) {
                    return Err(ClaimEnd::Claimed);
                }
                Ok(vec![self.read(claim_first)])
            }
            3 => {
                let read = read_of(results);
                if claim_first {
                    return Err(ClaimEnd::Read(read));
                }
                self.result = Some(read);
                Ok(vec![self.attempt(true)])
            }
            _ => {
                if won(&results) {
                    return Err(ClaimEnd::Claimed);
                }
                Err(ClaimEnd::Read(
                    self.result.take().unwrap_or(StrRead::Absent),
                ))
            }
        }
    }
}

fn won(results: &[HopOut]) -> bool {
    matches!(results.first(), Some(HopOut::Flag(true)))
}

fn read_of(results: Vec<HopOut>) -> StrRead {
    match results.into_iter().next() {
        Some(HopOut::Other(any)) => any.downcast::<StrRead>().map_or(StrRead::Absent, |r| *r),
        _ => StrRead::Absent,
    }
}

impl Plan for ClaimPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match self.step(results) {
            Ok(hops) => Step::Hops(hops),
            Err(end) => cx.done(|e| end.reply(e)),
        }
    }
}

/// GOBLIN.CLAIM as a transaction: with its keys on two shards, or with BLOCK (outside
/// EXEC, where it may wait). Its lease is checked first (an invalid one errors even when
/// the claim is held).
fn claim_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let opts = parse_claim(args, start.now)?;
    let attempt = ClaimPlan {
        claim_key: args.get(1).to_vec(),
        result_key: args.get(2).to_vec(),
        token: args.get(3).to_vec(),
        deadline: opts.deadline,
        claim_shard: start.slots.shard_of_key(args.get(1)),
        result_shard: start.slots.shard_of_key(args.get(2)),
        locked: start.locked,
        stage: 0,
        result: None,
    };
    match opts.block {
        Some(timeout) if !start.locked => Ok(Box::new(ClaimWait {
            lease: opts.lease,
            timeout,
            attempt,
            state: WaitState::Attempting,
        })),
        _ => Ok(Box::new(attempt)),
    }
}

/// Where a blocking claim is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitState {
    /// Running a claim attempt (a [`ClaimPlan`]).
    Attempting,
    /// Waiting for the result to be written or the claim to be freed.
    Parked,
    /// Served by the freed claim, with its lock: claiming it.
    Seizing,
}

/// `GOBLIN.CLAIM … BLOCK ms` that may wait: a claim attempt; when it would answer nil
/// (held, no result), a wait on both keys — the result key notifies every waiter when it
/// is written, the claim key serves the waiter first in line, with its lock, when it
/// disappears. Woken, the waiter claims (served by the claim) or runs the whole attempt
/// again (served by the result, or beaten to the claim), and waits again, keeping its
/// turn, while the answer would still be nil. A claim won after waiting gets its lease
/// from that moment.
#[derive(Debug)]
pub struct ClaimWait {
    lease: Millis,
    timeout: Option<Duration>,
    attempt: ClaimPlan,
    state: WaitState,
}

/// A claim key serves a waiter when it is gone.
fn claim_free(db: &mut Keyspace, key: &[u8], now: Millis, _arg: &[u8]) -> usize {
    usize::from(!db.contains(key, now))
}

/// A result key serves its waiters when it holds something (a string is the answer;
/// another type, the WRONGTYPE error the claim then answers).
fn result_present(db: &mut Keyspace, key: &[u8], now: Millis, _arg: &[u8]) -> usize {
    usize::from(db.contains(key, now))
}

impl ClaimWait {
    /// A new attempt, its lease counted from `now`.
    fn attempt_again(&mut self, cx: &PlanCx<'_>) -> Step {
        let a = &mut self.attempt;
        a.deadline = cx.now.saturating_add(self.lease);
        a.stage = 0;
        a.result = None;
        self.state = WaitState::Attempting;
        self.advance(cx, Vec::new())
    }

    fn advance(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match self.attempt.step(results) {
            Ok(hops) => Step::Hops(hops),
            Err(ClaimEnd::Read(StrRead::Absent)) => self.park(),
            Err(end) => cx.done(|e| end.reply(e)),
        }
    }

    fn park(&mut self) -> Step {
        self.state = WaitState::Parked;
        let a = &self.attempt;
        let mut keys = vec![Watch {
            key: a.claim_key.clone(),
            ready: Some(claim_free),
            ready_first: None,
            serve: Serve::Lock,
            arg: Vec::new(),
            with: None,
        }];
        if a.result_key != a.claim_key {
            keys.push(Watch {
                key: a.result_key.clone(),
                ready: Some(result_present),
                ready_first: None,
                serve: Serve::Notify,
                arg: Vec::new(),
                with: None,
            });
        }
        Step::Park(Park {
            keys,
            timeout: self.timeout,
            internal: false,
        })
    }
}

impl Plan for ClaimWait {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        match self.state {
            WaitState::Attempting => self.advance(cx, results),
            WaitState::Parked => match results.into_iter().next() {
                // Served by the freed claim, holding its lock: claim it now.
                Some(HopOut::Woken(key)) if key == self.attempt.claim_key => {
                    self.state = WaitState::Seizing;
                    let a = &self.attempt;
                    let (token, lease) = (a.token.clone(), self.lease);
                    Step::Hops(vec![
                        Hop::run(a.claim_shard, move |ctx| {
                            let deadline = lease_clock(ctx).saturating_add(lease);
                            HopOut::Flag(try_claim(ctx, &key, &token, deadline))
                        })
                        .releasing(),
                    ])
                }
                Some(HopOut::Woken(_)) => self.attempt_again(cx),
                // The timeout, CLIENT UNBLOCK, or inside EXEC: what the claim answered.
                _ => cx.done(|e| e.null()),
            },
            WaitState::Seizing => {
                if won(&results) {
                    return cx.done(|e| e.bulk(CLAIMED));
                }
                self.attempt_again(cx)
            }
        }
    }
}

/// How a claim key compares with a token: holds it, holds something else (or nothing),
/// or is not a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fence {
    Holds,
    Lost,
    WrongType,
}

impl Fence {
    /// Whether `key` holds exactly `token`.
    fn of(db: &mut Keyspace, key: &[u8], token: &[u8], now: Millis) -> Fence {
        match lookup(db, key, now).0 {
            Str::Value(v) if v == token => Fence::Holds,
            Str::Value(_) | Str::Absent => Fence::Lost,
            Str::WrongType => Fence::WrongType,
        }
    }

    fn to_hop(self) -> HopOut {
        HopOut::Int(match self {
            Fence::Holds => 1,
            Fence::Lost => 0,
            Fence::WrongType => -1,
        })
    }

    fn of_hop(out: Option<HopOut>) -> Fence {
        match out {
            Some(HopOut::Int(1)) => Fence::Holds,
            Some(HopOut::Int(-1)) => Fence::WrongType,
            _ => Fence::Lost,
        }
    }
}

/// Moves `key`'s expiry to `at` (the key exists), logged as `PEXPIREAT key at`.
fn expire_at(ctx: &mut ShardCtx<'_>, key: &[u8], at: Millis) {
    ctx.db.set_expire(key, Some(at), ctx.now);
    if ctx.logging() {
        ctx.log(&[b"PEXPIREAT", key, &decimal(at as i64)]);
    }
}

/// The fenced half of GOBLIN.PUBLISH at the claim's shard: when the claim holds the
/// token, its expiry moves to `at`.
fn fence_and_extend(ctx: &mut ShardCtx<'_>, key: &[u8], token: &[u8], at: Millis) -> Fence {
    let fence = Fence::of(ctx.db, key, token, ctx.now);
    if fence == Fence::Holds {
        expire_at(ctx, key, at);
    }
    fence
}

/// The result half of GOBLIN.PUBLISH: `SET result value PXAT at`.
fn store_result(ctx: &mut ShardCtx<'_>, key: &[u8], value: &[u8], at: Millis) {
    ctx.db.set_str(key, value, Some(at), ctx.now);
    // Never evicted: a result evicted would make a duplicate run the work again.
    ctx.db.pin(key, ctx.now);
    log_set_pxat(ctx, key, value, at);
}

/// The deadline of GOBLIN.PUBLISH's `seconds` (argument 5), checked first.
fn publish_deadline(args: &Args<'_>, now: Millis) -> Result<Millis, ErrorReply> {
    parse_expire(args.get(5), ExpireUnit::Seconds, now, "goblin.publish")
}

/// `GOBLIN.PUBLISH claim_key result_key token value seconds`, both keys on this shard:
/// if the claim holds `token`, the result is stored and both keys expire at now +
/// seconds (1); otherwise nothing changes (0).
fn publish(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let at = match publish_deadline(args, lease_clock(ctx)) {
        Ok(at) => at,
        Err(e) => return e.send(&mut ctx.out),
    };
    match fence_and_extend(ctx, args.get(1), args.get(3), at) {
        Fence::WrongType => ctx.out.error(errors::WRONGTYPE),
        Fence::Lost => ctx.out.integer(0),
        Fence::Holds => {
            store_result(ctx, args.get(2), args.get(4), at);
            ctx.out.integer(1);
        }
    }
}

/// GOBLIN.PUBLISH with its keys on two shards, both locked: the fence (and the claim's
/// new expiry) at the claim's shard, then the result at the result's.
#[derive(Debug)]
struct PublishPlan {
    claim_key: Vec<u8>,
    result_key: Vec<u8>,
    token: Vec<u8>,
    value: Vec<u8>,
    at: Millis,
    stage: u8,
}

impl Plan for PublishPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        self.stage += 1;
        match self.stage {
            1 => {
                let (key, token, at) = (self.claim_key.clone(), self.token.clone(), self.at);
                Step::Hops(vec![Hop::run(
                    cx.slots.shard_of_key(&self.claim_key),
                    move |ctx| fence_and_extend(ctx, &key, &token, at).to_hop(),
                )])
            }
            2 => match Fence::of_hop(results.into_iter().next()) {
                Fence::WrongType => cx.done(|e| e.error(errors::WRONGTYPE)),
                Fence::Lost => cx.done(|e| e.integer(0)),
                Fence::Holds => {
                    let key = std::mem::take(&mut self.result_key);
                    let (value, at) = (std::mem::take(&mut self.value), self.at);
                    Step::Hops(vec![Hop::run(cx.slots.shard_of_key(&key), move |ctx| {
                        store_result(ctx, &key, &value, at);
                        HopOut::Done
                    })])
                }
            },
            _ => cx.done(|e| e.integer(1)),
        }
    }
}

fn publish_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let at = publish_deadline(args, start.now)?;
    Ok(Box::new(PublishPlan {
        claim_key: args.get(1).to_vec(),
        result_key: args.get(2).to_vec(),
        token: args.get(3).to_vec(),
        value: args.get(4).to_vec(),
        at,
        stage: 0,
    }))
}

/// `GOBLIN.RENEW claim_key token seconds`: the owner's lease extension (1), or nothing
/// (0) when the claim does not hold `token`.
fn renew(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let at = match parse_expire(
        args.get(3),
        ExpireUnit::Seconds,
        lease_clock(ctx),
        "goblin.renew",
    ) {
        Ok(at) => at,
        Err(e) => return e.send(&mut ctx.out),
    };
    match fence_and_extend(ctx, args.get(1), args.get(2), at) {
        Fence::WrongType => ctx.out.error(errors::WRONGTYPE),
        Fence::Lost => ctx.out.integer(0),
        Fence::Holds => ctx.out.integer(1),
    }
}

/// What GOBLIN.STATUS found: the result, or the claim's remaining lease.
#[derive(Debug)]
enum Status {
    Done(Vec<u8>),
    WrongType,
    /// The claim's PTTL (-1: no expiry).
    Running(i64),
    Free,
}

impl Status {
    fn reply(&self, e: &mut Encoder<'_>) {
        match self {
            Status::Done(v) => {
                e.array(2);
                e.bulk(b"DONE");
                e.bulk(v);
            }
            Status::WrongType => e.error(errors::WRONGTYPE),
            Status::Running(pttl) => {
                e.array(2);
                e.bulk(b"RUNNING");
                e.integer(*pttl);
            }
            Status::Free => {
                e.array(2);
                e.bulk(b"FREE");
                e.null();
            }
        }
    }

    /// From the result's read and the claim's PTTL (-2: absent).
    fn of(result: StrRead, claim_pttl: i64) -> Status {
        match result {
            StrRead::Value(v) => Status::Done(v),
            StrRead::WrongType => Status::WrongType,
            StrRead::Absent if claim_pttl == -2 => Status::Free,
            StrRead::Absent => Status::Running(claim_pttl),
        }
    }
}

/// PTTL's answer for `key`: -2 absent, -1 without expiry, else the milliseconds left.
fn pttl(db: &mut Keyspace, key: &[u8], now: Millis) -> i64 {
    match db.get(key, now) {
        None => -2,
        Some(entry) => entry
            .expire_at()
            .map_or(-1, |at| at.saturating_sub(now) as i64),
    }
}

/// `GOBLIN.STATUS claim_key result_key`: `DONE value`, `RUNNING pttl` or `FREE nil`.
fn status(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let result = StrRead::of(ctx.db, args.get(2), ctx.now);
    let claim = match result {
        StrRead::Absent => pttl(ctx.db, args.get(1), ctx.now),
        _ => -2,
    };
    Status::of(result, claim).reply(&mut ctx.out);
}

/// GOBLIN.STATUS with its keys on two shards, both locked (shared): one hop to each.
#[derive(Debug)]
struct StatusPlan {
    claim_key: Vec<u8>,
    result_key: Vec<u8>,
    asked: bool,
}

impl Plan for StatusPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if !self.asked {
            self.asked = true;
            let (result_key, claim_key) = (self.result_key.clone(), self.claim_key.clone());
            return Step::Hops(vec![
                Hop::run(cx.slots.shard_of_key(&result_key), move |ctx| {
                    HopOut::Other(Box::new(StrRead::of(ctx.db, &result_key, ctx.now)))
                }),
                Hop::run(cx.slots.shard_of_key(&claim_key), move |ctx| {
                    HopOut::Int(pttl(ctx.db, &claim_key, ctx.now))
                }),
            ]);
        }
        let mut results = results.into_iter();
        let read = read_of(results.next().into_iter().collect());
        let claim = match results.next() {
            Some(HopOut::Int(n)) => n,
            _ => -2,
        };
        let status = Status::of(read, claim);
        cx.done(|e| status.reply(e))
    }
}

fn status_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(StatusPlan {
        claim_key: start.args.get(1).to_vec(),
        result_key: start.args.get(2).to_vec(),
        asked: false,
    }))
}

/// Deletes `key` when its string value equals (`want_equal`) or differs from `value`.
fn delete_if(ctx: &mut ShardCtx<'_>, key: &[u8], value: &[u8], want_equal: bool) {
    let matches = match lookup(ctx.db, key, ctx.now).0 {
        Str::WrongType => return ctx.out.error(errors::WRONGTYPE),
        Str::Absent => false,
        Str::Value(v) => (v == value) == want_equal,
    };
    if matches {
        ctx.db.delete(key, ctx.now);
        ctx.log(&[b"DEL", key]);
    }
    ctx.out.integer(i64::from(matches));
}

/// DELEX's keys (Redis 8.4, whose key spec has `variable_flags`): a plain delete (RM)
/// without a condition; with one (IFEQ, IFNE, IFDEQ, IFDNE) the value is read before it
/// is deleted (RW).
fn delex_keys(args: &Args<'_>, found: &mut dyn FnMut(usize, KeyFlags)) -> Result<(), InvalidKeys> {
    let conditional = args.iter_from(2).any(|a| {
        ["ifeq", "ifne", "ifdeq", "ifdne"]
            .iter()
            .any(|c| is_keyword(a, c))
    });
    let access = if conditional {
        KeyFlags::RW
    } else {
        KeyFlags::RM
    };
    found(1, access | KeyFlags::DELETE);
    Ok(())
}

/// `GOBLIN.CAD key value`, and `DELIFEQ key value` (Valkey 9): delete the key if it
/// holds exactly this string.
fn cad(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    delete_if(ctx, args.get(1), args.get(2), true);
}

/// `DELEX key [IFEQ value | IFNE value]` (Redis 8.4): without a condition, DEL of one key;
/// with IFEQ, GOBLIN.CAD; with IFNE, delete unless equal. The digest conditions (IFDEQ,
/// IFDNE) are not supported and are a syntax error.
fn delex(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let key = args.get(1);
    match delex_condition(args) {
        Ok(None) => {
            let removed = ctx.db.delete(key, ctx.now);
            ctx.out.integer(i64::from(removed));
        }
        Ok(Some((value, want_equal))) => delete_if(ctx, key, value, want_equal),
        Err(e) => e.send(&mut ctx.out),
    }
}

/// DELEX's condition: none, or the value and whether it must be equal (IFEQ) or differ
/// (IFNE). Anything else, or anything after the value, is a syntax error.
fn delex_condition<'a>(args: &Args<'a>) -> Result<Option<(&'a [u8], bool)>, ErrorReply> {
    let mut c = args.cursor(2);
    if c.is_empty() {
        return Ok(None);
    }
    let want_equal = if c.next_is("IFEQ") {
        true
    } else if c.next_is("IFNE") {
        false
    } else {
        return Err(errors::SYNTAX.into());
    };
    let value = c.next_arg()?;
    c.finish()?;
    Ok(Some((value, want_equal)))
}

/// A key spec entry in COMMAND INFO's form: `flags`, `begin_search` at `index`, one key.
macro_rules! key_spec {
    ($index:expr, [$($flag:expr),*]) => {
        Node::Map(&[
            Node::Bulk("flags"),
            Node::Set(&[$(Node::Simple($flag)),*]),
            Node::Bulk("begin_search"),
            Node::Map(&[
                Node::Bulk("type"),
                Node::Bulk("index"),
                Node::Bulk("spec"),
                Node::Map(&[Node::Bulk("index"), Node::Int($index)]),
            ]),
            Node::Bulk("find_keys"),
            Node::Map(&[
                Node::Bulk("type"),
                Node::Bulk("range"),
                Node::Bulk("spec"),
                Node::Map(&[
                    Node::Bulk("lastkey"),
                    Node::Int(0),
                    Node::Bulk("keystep"),
                    Node::Int(1),
                    Node::Bulk("limit"),
                    Node::Int(0),
                ]),
            ]),
        ])
    };
}

/// An argument entry of COMMAND DOCS.
macro_rules! arg {
    (key $name:expr, $spec:expr) => {
        Node::Map(&[
            Node::Bulk("name"),
            Node::Bulk($name),
            Node::Bulk("type"),
            Node::Bulk("key"),
            Node::Bulk("key_spec_index"),
            Node::Int($spec),
        ])
    };
    (optional $type:expr, $name:expr, token $token:expr) => {
        Node::Map(&[
            Node::Bulk("name"),
            Node::Bulk($name),
            Node::Bulk("type"),
            Node::Bulk($type),
            Node::Bulk("token"),
            Node::Bulk($token),
            Node::Bulk("flags"),
            Node::Array(&[Node::Simple("optional")]),
        ])
    };
    ($type:expr, $name:expr) => {
        Node::Map(&[
            Node::Bulk("name"),
            Node::Bulk($name),
            Node::Bulk("type"),
            Node::Bulk($type),
        ])
    };
}

/// A COMMAND INFO/DOCS entry for one of this family's commands: string commands of O(1),
/// with no tips and no subcommands.
macro_rules! string_command_meta {
    (
        $name:expr, arity $arity:expr,
        flags [$($flag:expr),*], keys ($first:expr, $last:expr, $step:expr),
        acl [$($acl:expr),*], key_specs [$($spec:expr),*],
        summary $summary:expr, since $since:expr, arguments [$($arg:expr),*] $(,)?
    ) => {
        Meta {
            info: Node::Array(&[
                Node::Bulk($name),
                Node::Int($arity),
                Node::Set(&[$(Node::Simple($flag)),*]),
                Node::Int($first),
                Node::Int($last),
                Node::Int($step),
                Node::Set(&[$(Node::Simple($acl)),*]),
                Node::Set(&[]),
                Node::Set(&[$($spec),*]),
                Node::Set(&[]),
            ]),
            docs: Node::Map(&[
                Node::Bulk("summary"),
                Node::Bulk($summary),
                Node::Bulk("since"),
                Node::Bulk($since),
                Node::Bulk("group"),
                Node::Bulk("string"),
                Node::Bulk("complexity"),
                Node::Bulk("O(1)"),
                Node::Bulk("arguments"),
                Node::Array(&[$($arg),*]),
            ]),
        }
    };
}

/// GOBLIN.CLAIM's COMMAND INFO/DOCS: keys 1 and 2 (first 1, last 2, step 1), so that
/// cluster-aware clients route it like any two-key command.
pub static CLAIM_META: Meta = string_command_meta!(
    "goblin.claim", arity -5,
    flags ["write", "denyoom", "fast", "blocking"], keys (1, 2, 1),
    acl ["@write", "@string", "@fast", "@blocking"],
    key_specs [
        key_spec!(1, ["RW", "access", "insert"]),
        key_spec!(2, ["RO", "access"])
    ],
    summary "Claims a piece of work exactly once (SET claim_key token NX EX seconds), or \
             returns the result the winner published at result_key; with BLOCK, waits for \
             the result or the claim's release.",
    since "0.1.0",
    arguments [
        arg!(key "claim_key", 0),
        arg!(key "result_key", 1),
        arg!("string", "token"),
        arg!("integer", "seconds"),
        arg!(optional "integer", "milliseconds", token "BLOCK")
    ],
);

/// GOBLIN.PUBLISH's COMMAND INFO/DOCS.
pub static PUBLISH_META: Meta = string_command_meta!(
    "goblin.publish", arity 6,
    flags ["write", "denyoom", "fast"], keys (1, 2, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [
        key_spec!(1, ["RW", "access", "update"]),
        key_spec!(2, ["OW", "update"])
    ],
    summary "Publishes a claim's result if the claim still holds the token (a fenced \
             SET result_key value EX seconds), and extends the claim to the result's expiry.",
    since "0.2.0",
    arguments [
        arg!(key "claim_key", 0),
        arg!(key "result_key", 1),
        arg!("string", "token"),
        arg!("string", "value"),
        arg!("integer", "seconds")
    ],
);

/// GOBLIN.RENEW's COMMAND INFO/DOCS.
pub static RENEW_META: Meta = string_command_meta!(
    "goblin.renew", arity 4,
    flags ["write", "fast"], keys (1, 1, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [key_spec!(1, ["RW", "access", "update"])],
    summary "Sets a claim's lease to seconds from now if the claim holds the token.",
    since "0.2.0",
    arguments [
        arg!(key "claim_key", 0),
        arg!("string", "token"),
        arg!("integer", "seconds")
    ],
);

/// GOBLIN.STATUS's COMMAND INFO/DOCS.
pub static STATUS_META: Meta = string_command_meta!(
    "goblin.status", arity 3,
    flags ["readonly", "fast"], keys (1, 2, 1),
    acl ["@read", "@string", "@fast"],
    key_specs [
        key_spec!(1, ["RO", "access"]),
        key_spec!(2, ["RO", "access"])
    ],
    summary "Reports a claim's state without changing it: DONE with the result, RUNNING \
             with the lease's milliseconds left, or FREE.",
    since "0.2.0",
    arguments [arg!(key "claim_key", 0), arg!(key "result_key", 1)],
);

/// GOBLIN.CAD's COMMAND INFO/DOCS.
pub static CAD_META: Meta = string_command_meta!(
    "goblin.cad", arity 3,
    flags ["write", "fast"], keys (1, 1, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [key_spec!(1, ["RW", "access", "delete"])],
    summary "Deletes a key if it holds exactly the given string (compare-and-delete).",
    since "0.1.0",
    arguments [arg!(key "key", 0), arg!("string", "value")],
);

/// DELIFEQ's COMMAND INFO/DOCS, as Valkey 9 describes the command.
pub static DELIFEQ_META: Meta = string_command_meta!(
    "delifeq", arity 3,
    flags ["write", "fast"], keys (1, 1, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [key_spec!(1, ["RW", "access", "delete"])],
    summary "Delete key if value matches string.",
    since "9.0.0",
    arguments [arg!(key "key", 0), arg!("string", "value")],
);

/// DELEX's COMMAND INFO/DOCS, as Redis 8.4 describes the command.
pub static DELEX_META: Meta = string_command_meta!(
    "delex", arity -2,
    flags ["write", "fast"], keys (1, 1, 1),
    acl ["@write", "@string", "@fast"],
    key_specs [key_spec!(1, ["RW", "delete", "variable_flags"])],
    summary "Conditionally removes the specified key based on value comparison.",
    since "8.4.0",
    arguments [arg!(key "key", 0), arg!("string", "condition")],
);
