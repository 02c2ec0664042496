//! MULTI, EXEC, DISCARD, WATCH, UNWATCH: the connection queues commands between MULTI
//! and EXEC (the pipeline does the queueing), and EXEC runs them as one transaction: every
//! key of every queued command locked (every shard whole if one of them is keyspace-wide),
//! then the commands in order, consecutive commands for one shard in one hop.
//!
//! WATCH registers its keys on the shards that own them (`shard/watch.rs`), one hop per
//! shard; EXEC then also locks the watched keys (shared) and, holding every lock, answers
//! a null array instead of running anything if one of them changed or expired since.

use std::sync::Arc;

use goblin_protocol::{Encoder, reply_len};

use crate::errors;
use crate::runtime::msg::{Batch, LockMode};
use crate::runtime::slowlog::SlowCmd;
use crate::shard::watch::{WatchState, Watching};
use crate::table::handler::{Args, ConnCtx, Exec, MultiCall, MultiCtx, Started};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step, Tally};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::MULTI, Exec::Multi(multi));
    table.add(&meta::EXEC, Exec::Multi(exec));
    table.add(&meta::DISCARD, Exec::Multi(discard));
    table.add(&meta::WATCH, Exec::Multi(watch));
    // Queued inside MULTI like any command (it then finds nothing watched: EXEC
    // unwatched first), as in Redis.
    table.add(&meta::UNWATCH, Exec::Conn(unwatch));
}

/// A transaction command rejected before running (`MULTI x`): its error, and the
/// transaction flagged, as for any rejected command.
fn rejected(ctx: &mut MultiCtx<'_>, msg: &[u8]) {
    if let Some(multi) = ctx.multi.as_mut() {
        multi.dirty = true;
    }
    ctx.conn.reply().error_sanitized(msg);
}

/// `MULTI`
fn multi(ctx: &mut MultiCtx<'_>, call: MultiCall<'_, '_>) -> Option<Started> {
    match call {
        MultiCall::Rejected(msg) => rejected(ctx, msg),
        // Nested: an error that does not abort the transaction.
        MultiCall::Run(_) if ctx.multi.is_some() => ctx.conn.reply().error(errors::MULTI_NESTED),
        MultiCall::Run(_) => {
            *ctx.multi = Some(Default::default());
            ctx.conn.reply().ok();
        }
    }
    None
}

/// `DISCARD`
fn discard(ctx: &mut MultiCtx<'_>, call: MultiCall<'_, '_>) -> Option<Started> {
    match call {
        MultiCall::Rejected(msg) => rejected(ctx, msg),
        MultiCall::Run(_) => match ctx.multi.take() {
            None => ctx.conn.reply().error(errors::DISCARD_WITHOUT_MULTI),
            Some(_) => {
                ctx.conn.client.watching = None;
                ctx.conn.reply().ok();
            }
        },
    }
    None
}

/// `WATCH key [key ...]`: each key not yet watched (in the client's database) is
/// registered on its shard, one hop per shard, with no lock: registering runs on the
/// shard's thread between two units of work, and the client reads the keys only after
/// WATCH answered, so every change it has not seen is one the shard tells it of.
fn watch(ctx: &mut MultiCtx<'_>, call: MultiCall<'_, '_>) -> Option<Started> {
    let args = match call {
        MultiCall::Rejected(msg) => {
            rejected(ctx, msg);
            return None;
        }
        MultiCall::Run(args) => args,
    };
    if ctx.multi.is_some() {
        // An error that does not abort the transaction.
        ctx.conn.reply().error(errors::WATCH_INSIDE_MULTI);
        return None;
    }
    let db = ctx.conn.client.db;
    let watching = ctx
        .conn
        .client
        .watching
        .get_or_insert_with(Watching::default);
    if watching.state().is_dirty() {
        // EXEC fails whatever else is watched.
        ctx.conn.reply().ok();
        return None;
    }
    let mut hops: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
    for key in args.iter_from(1) {
        if !watching.add(db, key) {
            continue;
        }
        let shard = ctx.slots.shard_of_key(key);
        match hops.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, keys)) => keys.push(key.to_vec()),
            None => hops.push((shard, vec![key.to_vec()])),
        }
    }
    if hops.is_empty() {
        ctx.conn.reply().ok();
        return None;
    }
    Some(Started {
        plan: Box::new(WatchPlan {
            state: Arc::clone(watching.state()),
            hops,
        }),
        locks: Vec::new(),
        whole_shards: false,
        calls: Vec::new(),
    })
}

/// WATCH's plan: a hop to each shard that owns some of the keys, then `OK`.
#[derive(Debug)]
struct WatchPlan {
    state: Arc<WatchState>,
    /// The keys to register, by shard (taken by the first step).
    hops: Vec<(usize, Vec<Vec<u8>>)>,
}

impl Plan for WatchPlan {
    fn next(&mut self, cx: &PlanCx<'_>, _results: Vec<HopOut>) -> Step {
        if self.hops.is_empty() {
            return cx.done(|e| e.ok());
        }
        let hops = std::mem::take(&mut self.hops)
            .into_iter()
            .map(|(shard, keys)| {
                let state = Arc::clone(&self.state);
                Hop::run(shard, move |ctx| {
                    for key in &keys {
                        ctx.watch(&state, key);
                    }
                    HopOut::Done
                })
            })
            .collect();
        Step::Hops(hops)
    }
}

/// `UNWATCH`
fn unwatch(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    ctx.client.watching = None;
    ctx.reply().ok();
}

/// `EXEC`
fn exec(ctx: &mut MultiCtx<'_>, call: MultiCall<'_, '_>) -> Option<Started> {
    if let MultiCall::Rejected(msg) = call {
        // Redis aborts the transaction when EXEC itself is rejected, in or out of MULTI
        // (`execCommandAbort`).
        errors::exec_abort(msg).send(&mut ctx.conn.reply());
        *ctx.multi = None;
        ctx.conn.client.watching = None;
        return None;
    }
    let Some(multi) = ctx.multi.take() else {
        ctx.conn.reply().error(errors::EXEC_WITHOUT_MULTI);
        return None;
    };
    // Whatever happens now, the keys are no longer watched once EXEC is done (dropping
    // `watching` unwatches them).
    let watching = ctx.conn.client.watching.take();
    if multi.dirty {
        ctx.conn.reply().error(errors::EXECABORT_PREVIOUS_ERRORS);
        return None;
    }
    if watching
        .as_ref()
        .is_some_and(|w| w.state().voided(ctx.conn.now))
    {
        ctx.conn.reply().null_array();
        return None;
    }
    let table = &ctx.conn.shared.commands;
    // Keyspace notifications name a queued cross-shard command's events after it.
    let naming = crate::shard::notify::active(
        ctx.conn
            .shared
            .notify
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    let mut locks = Vec::new();
    let mut whole_shards = false;
    let mut calls = Vec::with_capacity(multi.queued.len());
    let mut queued = Vec::with_capacity(multi.queued.len());
    // The database each command runs against: the client's, then each SELECT's.
    let databases = ctx.conn.shared.config.databases;
    let mut db = ctx.conn.client.db;
    for mut cmd in multi.queued {
        let args = cmd.args(0);
        let Some(spec) = cmd.cmds.first().and_then(|c| table.get(c.spec)) else {
            continue;
        };
        // The user's permissions are checked again: they may have changed since the
        // command was queued.
        if let Some(refusal) = acl_refusal(&ctx.conn, spec, &args) {
            let reply = error_reply(ctx.conn.client.resp, &refusal);
            queued.push(Some(Queued::Ready(Outcome::Reply(reply))));
            continue;
        }
        if spec.name == "select"
            && let Ok(selected) = args
                .cursor(1)
                .next_i32()
                .and_then(|n| super::select_db(i64::from(n), databases))
        {
            db = selected;
        }
        calls.push(Tally::Call(spec.id));
        locks.extend(spec.lock_needs(&args));
        whole_shards |=
            matches!(spec.exec, Exec::Plan(cross) if cross.locking == Locking::WholeShards);
        let start = PlanStart {
            shared: ctx.conn.shared,
            spec,
            args: &args,
            slots: ctx.slots,
            now: ctx.conn.now,
            locked: true,
            db,
            databases,
            local_client: ctx.conn.client.origin.is_local(),
            by_script: false,
            caller: ctx.conn.client.script_caller(spec, ctx.conn.now),
            conn: None,
            master: false,
            client: Some(&*ctx.conn.client),
        };
        let resp = ctx.conn.client.resp;
        let item = match spec.exec {
            // PUBLISH and SPUBLISH publish in their place, from the first shard (as a
            // script run as a plan publishes): what a replica is sent of them is inside
            // the transaction, in order with its writes, as from redis-server.
            Exec::Conn(_) if matches!(spec.name, "publish" | "spublish") => {
                Queued::Publish(db, cmd)
            }
            Exec::Conn(_) => Queued::OnConn(cmd),
            // (Inside MULTI these change the users alone, asking no worker.)
            Exec::AskWorkers { .. } if matches!(spec.name, "acl|setuser" | "acl|deluser") => {
                Queued::OnConn(cmd)
            }
            Exec::Container | Exec::Multi(_) | Exec::AskWorkers { .. } => Queued::Conn(cmd),
            Exec::Plan(cross) => match (cross.plan)(&start) {
                Ok(plan) => {
                    whole_shards |= plan.whole_shards();
                    Queued::Plan(db, plan, Arc::from(cmd), naming)
                }
                Err(e) => Queued::Ready(Outcome::Reply(error_reply(resp, &e))),
            },
            Exec::Shard(_) => {
                let mut shards = Vec::new();
                spec.for_each_key_position(&args, |i| {
                    shards.push(ctx.slots.shard_of_key(args.get(i)))
                });
                let first = shards.first().copied().unwrap_or(0);
                match spec.cross_shard {
                    Some(cross)
                        if shards.iter().any(|&s| s != first)
                            || super::scripting::needs_every_shard(
                                ctx.conn.shared,
                                spec,
                                &args,
                            )
                            || super::sort::sorts_elsewhere(ctx.conn.shared, spec, &args) =>
                    {
                        match (cross.plan)(&start) {
                            Ok(plan) => {
                                // (A plan that must hold every shard makes EXEC hold them:
                                // a script that may touch undeclared keys, a SORT whose
                                // patterns name keys anywhere.)
                                whole_shards |= plan.whole_shards();
                                Queued::Plan(db, plan, Arc::from(cmd), naming)
                            }
                            Err(e) => Queued::Ready(Outcome::Reply(error_reply(resp, &e))),
                        }
                    }
                    _ => {
                        cmd.db = db;
                        Queued::Single(first, cmd)
                    }
                }
            }
        };
        queued.push(Some(item));
    }
    // The watched keys are locked too, so that nothing changes them between the check
    // (made holding every lock) and the commands.
    if let Some(watching) = &watching {
        locks.extend(watching.keys().map(|k| (k.to_vec(), LockMode::Shared)));
    }
    let n = queued.len();
    Some(Started {
        plan: Box::new(ExecPlan {
            watching,
            queued,
            next: 0,
            outcomes: (0..n).map(|_| None).collect(),
            in_stage: Vec::new(),
            interleave: !naming,
            on_conn: None,
            deferring: false,
            current: None,
        }),
        locks,
        whole_shards,
        calls,
    })
}

/// EXEC: what a queued command answers when its user may not run it now — the ACL
/// rules changed since it was queued (logged with the `multi` context), or SORT's BY
/// or GET need more (`acl::sort_refusal`); None when it may run.
fn acl_refusal(
    conn: &ConnCtx<'_>,
    spec: &crate::table::CommandSpec,
    args: &Args<'_>,
) -> Option<Vec<u8>> {
    let user = &conn.client.user;
    if user.unrestricted {
        return None;
    }
    match user.check(spec, args) {
        Ok(()) => crate::acl::sort_refusal(user, spec, args).map(<[u8]>::to_vec),
        Err(denied) => {
            let (reason, object) = denied.logged(spec, args);
            conn.shared.acl.log(crate::acl::LogEntry {
                count: 1,
                reason,
                context: "multi",
                object,
                username: user.name.clone(),
                at_ms: conn.now,
                client_info: conn.client.info_line(conn.now),
            });
            Some(crate::acl::exec_noperm(denied))
        }
    }
}

fn error_reply(resp: goblin_protocol::Version, text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Encoder::new(&mut out, resp).error_sanitized(text);
    out
}

/// One queued command of a MULTI block.
#[derive(Debug)]
enum Queued {
    /// Runs on one shard (the batch says in which database).
    Single(usize, Box<Batch>),
    /// Runs on the connection, in its place (the plan hands it over: [`Step::Conn`]).
    OnConn(Box<Batch>),
    /// Runs on the connection as EXEC's reply is written: a command that asks every
    /// worker (CLIENT KILL, LIST …), which cannot wait for their answers holding the
    /// transaction's locks (and so do the connection commands after it, in order).
    Conn(Box<Batch>),
    /// PUBLISH or SPUBLISH, in a database (its SELECT in the replication stream): a hop
    /// to the first shard ([`Hop::publish`]).
    Publish(usize, Box<Batch>),
    /// Needs a plan of its own, in a database, with the command (a SLOWLOG entry of its
    /// own, and the name of its key events when keyspace notifications are on: `true`).
    Plan(usize, Box<dyn Plan>, Arc<Batch>, bool),
    /// Answered already (its arguments were refused).
    Ready(Outcome),
}

/// EXEC's plan: the queued commands in order; consecutive single-shard commands in one
/// database travel as one hop per shard, the hops at once.
///
/// Commands of different shards touch different keys, and every key is locked: whether
/// they run one after the other or at once, each reads and writes what it would have in
/// the commands' order, and what they write reaches replicas in that order (`Hop::order`).
/// What is seen across shards while they run is not ordered: with keyspace notifications
/// on (whose subscribers would see the events of two shards interleaved), consecutive
/// commands share a hop only when they share a shard; a client blocked on keys of two
/// shards that the transaction both fills may be served either.
#[derive(Debug)]
struct ExecPlan {
    /// The client's watch, checked (and dropped: unwatched) first thing.
    watching: Option<Watching>,
    queued: Vec<Option<Queued>>,
    next: usize,
    outcomes: Vec<Option<Outcome>>,
    /// Commands of the hops in flight, in order, by hop.
    in_stage: Vec<Vec<usize>>,
    /// Commands of different shards may share a stage (keyspace notifications are off).
    interleave: bool,
    /// The command the connection runs now ([`Queued::OnConn`]).
    on_conn: Option<usize>,
    /// A command was left for the reply's writing ([`Queued::Conn`]): the connection
    /// commands after it are too, in their order.
    deferring: bool,
    /// A sub-plan in progress, for command `next - 1` (the transaction's hops stay in
    /// its database until it is done).
    current: Option<SubPlan>,
}

/// A queued command's plan, run inside EXEC.
#[derive(Debug)]
struct SubPlan {
    /// The command's place in the transaction.
    idx: usize,
    plan: Box<dyn Plan>,
    command: Arc<Batch>,
    /// When it started, if its latency (the histogram's or the monitor's) or SLOWLOG
    /// times it (inside EXEC nothing waits for locks).
    since: Option<std::time::Instant>,
}

impl SubPlan {
    /// Steps the plan; its outcome once done, when it is also a latency sample and, if
    /// slow, a SLOWLOG entry.
    fn step(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        let step = step_without_parking(self.plan.as_mut(), cx, results);
        if matches!(step, Step::Done(_))
            && let Some(since) = self.since
        {
            let nanos = since.elapsed().as_nanos() as u64;
            let micros = nanos / 1000;
            let spec = self
                .command
                .cmds
                .first()
                .and_then(|c| cx.shared.commands.get(c.spec));
            if let Some(spec) = spec {
                cx.calls.borrow_mut().push(Tally::Latency(spec.id, nanos));
                if cx.shared.latency.enabled() {
                    let fast = spec.flags.contains(crate::table::Flags::FAST);
                    cx.shared.latency.add_command(fast, micros);
                }
            }
            if cx.shared.slowlog.is_slow(micros)
                && spec.is_some_and(|s| !s.flags.contains(crate::table::Flags::SKIP_SLOWLOG))
            {
                let entry = SlowCmd::new(&self.command.args(0), cx.now / 1000, micros);
                cx.slow.borrow_mut().push(entry);
            }
        }
        step
    }

    /// CLIENT TRACKING: hops that remember the keys the finished command read, if it is
    /// read-only and its client's reads are remembered — after it ran, so that what the
    /// transaction wrote before does not invalidate them (as Redis remembers a command's
    /// keys after each command EXEC runs). None otherwise.
    fn remembered(&self, cx: &PlanCx<'_>) -> Option<Step> {
        if !self.command.tracked(0).is_some_and(|t| t.read) {
            return None;
        }
        let cmd = self.command.cmds.first()?;
        let spec = cx.shared.commands.get(cmd.spec)?;
        if !spec.flags.contains(crate::table::Flags::READONLY) {
            return None;
        }
        let args = self.command.args(0);
        let mut positions = Vec::new();
        spec.for_each_key_position(&args, |i| positions.push(i));
        let groups = cx
            .slots
            .group_by_shard(positions.iter().map(|&i| (i, args.get(i))));
        (!groups.is_empty()).then(|| {
            Step::Hops(
                groups
                    .into_iter()
                    .map(|(shard, at)| {
                        Hop::remember(shard, at.iter().map(|&i| args.get(i).to_vec()).collect())
                    })
                    .collect(),
            )
        })
    }
}

/// A sub-plan's next step inside EXEC, where nothing blocks: a plan that would park
/// times out at once, as a blocking command does inside MULTI in Redis.
pub(crate) fn step_without_parking(
    plan: &mut dyn Plan,
    cx: &PlanCx<'_>,
    results: Vec<HopOut>,
) -> Step {
    let mut step = plan.next(cx, results);
    while let Step::Park(_) = step {
        step = plan.next(cx, vec![HopOut::WouldBlock]);
    }
    step
}

impl Plan for ExecPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        // First thing, holding every lock (the watched keys' too): a watched key that
        // changed or expired fails the transaction, which then runs nothing.
        if let Some(watching) = self.watching.take()
            && watching.state().voided(cx.now)
        {
            return cx.done(|e| e.null_array());
        }
        // Feed results to whoever asked for them.
        if let Some(mut sub) = self.current.take() {
            match sub.step(cx, results) {
                Step::Done(outcome) => {
                    self.outcomes[sub.idx] = Some(outcome);
                    if let Some(step) = sub.remembered(cx) {
                        return step;
                    }
                }
                step => {
                    self.current = Some(sub);
                    return step;
                }
            }
        } else if let Some(idx) = self.on_conn.take() {
            // Whatever the connection wrote is the command's reply (a SUBSCRIBE writes
            // one per channel).
            let reply = match results.into_iter().next() {
                Some(HopOut::Reply(r)) => r,
                _ => Vec::new(),
            };
            self.outcomes[idx] = Some(Outcome::Reply(reply));
        } else if !self.in_stage.is_empty() {
            let mut results = results.into_iter();
            for commands in std::mem::take(&mut self.in_stage) {
                let replies = match results.next() {
                    Some(HopOut::Reply(r)) => r,
                    _ => Vec::new(),
                };
                // Split the hop's concatenated replies back into one per command (each
                // copied out once: the hop may hold tens of thousands).
                let mut rest = replies.as_slice();
                for idx in commands {
                    let n = reply_len(rest)
                        .ok()
                        .flatten()
                        .map_or(rest.len(), |(n, _)| n);
                    let (reply, after) = rest.split_at(n.min(rest.len()));
                    self.outcomes[idx] = Some(Outcome::Reply(reply.to_vec()));
                    rest = after;
                }
            }
        }
        loop {
            let Some(slot) = self.queued.get_mut(self.next) else {
                let outcomes = self
                    .outcomes
                    .iter_mut()
                    .map(|o| o.take().unwrap_or(Outcome::Reply(Vec::new())))
                    .collect();
                return Step::Done(Outcome::Exec(outcomes));
            };
            let idx = self.next;
            self.next += 1;
            match slot.take() {
                None => {}
                Some(Queued::Ready(outcome)) => self.outcomes[idx] = Some(outcome),
                Some(Queued::Conn(cmd)) => {
                    self.deferring = true;
                    self.outcomes[idx] = Some(Outcome::Conn(cmd));
                }
                Some(Queued::OnConn(cmd)) if self.deferring => {
                    self.outcomes[idx] = Some(Outcome::Conn(cmd));
                }
                Some(Queued::OnConn(cmd)) => {
                    self.on_conn = Some(idx);
                    return Step::Conn(cmd);
                }
                Some(Queued::Publish(db, cmd)) => {
                    self.in_stage.push(vec![idx]);
                    cx.select(db);
                    let argv = cmd.args(0).iter_from(0).map(<[u8]>::to_vec).collect();
                    let all = crate::scripting::engine::REPL_ALL;
                    return Step::Hops(vec![Hop::publish(0, argv, all)]);
                }
                Some(Queued::Plan(db, plan, command, naming)) => {
                    cx.select(db);
                    if naming {
                        cx.name_steps(Arc::clone(&command));
                    }
                    let mut sub = SubPlan {
                        idx,
                        plan,
                        command,
                        since: (crate::runtime::histogram::tracking()
                            || cx.shared.slowlog.enabled()
                            || cx.shared.latency.enabled())
                        .then(std::time::Instant::now),
                    };
                    match sub.step(cx, Vec::new()) {
                        Step::Done(outcome) => {
                            self.outcomes[idx] = Some(outcome);
                            if let Some(step) = sub.remembered(cx) {
                                return step;
                            }
                        }
                        step => {
                            self.current = Some(sub);
                            return step;
                        }
                    }
                }
                Some(Queued::Single(shard, batch)) => {
                    let db = batch.db;
                    cx.select(db);
                    // Later commands in the same database join the stage (one hop per
                    // shard; of the same shard only, unless `interleave`), skipping over
                    // those run as the reply is written (which touch no keys).
                    let mut stage = vec![(shard, batch)];
                    self.in_stage.push(vec![idx]);
                    while let Some(next) = self.queued.get_mut(self.next) {
                        match next {
                            Some(Queued::Single(s, more))
                                if more.db == db && (self.interleave || *s == shard) =>
                            {
                                let s = *s;
                                let Some(Queued::Single(_, more)) = next.take() else {
                                    break;
                                };
                                match stage.iter().position(|(t, _)| *t == s) {
                                    Some(hop) => {
                                        let spec = more.cmds.first().map_or(0, |c| c.spec);
                                        let tracked = more.tracked(0);
                                        stage[hop].1.push_tracked(spec, &more.args(0), tracked);
                                        self.in_stage[hop].push(self.next);
                                    }
                                    None => {
                                        stage.push((s, more));
                                        self.in_stage.push(vec![self.next]);
                                    }
                                }
                            }
                            Some(Queued::Conn(_)) => {
                                if let Some(Queued::Conn(cmd)) = next.take() {
                                    self.deferring = true;
                                    self.outcomes[self.next] = Some(Outcome::Conn(cmd));
                                }
                            }
                            _ => break,
                        }
                        self.next += 1;
                    }
                    let interleaved = stage.len() > 1;
                    let hops = stage
                        .into_iter()
                        .zip(&self.in_stage)
                        .map(|((shard, batch), order)| match interleaved {
                            true => Hop::interleaved(shard, batch, order.clone()),
                            false => Hop::commands(shard, batch),
                        })
                        .collect();
                    return Step::Hops(hops);
                }
            }
        }
    }
}
