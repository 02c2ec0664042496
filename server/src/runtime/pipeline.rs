//! The per-connection pipeline: decode, route and run a connection's requests, keeping
//! the contract Redis users rely on.
//!
//! # The per-connection contract
//!
//! Replies go out in request order, and a connection's commands take effect in the
//! order it sent them. A command for the local shard runs inline; commands for one
//! remote shard gather in a batch that is sent at the end of the iteration, and further
//! commands for that same shard join it or follow it (channels are FIFO, and the owner
//! runs a connection's batches in order). Any other command waits until everything in
//! flight has answered — so a later command never takes effect before an earlier one,
//! while a pipeline of commands for one shard pays one round trip, not one each.
//!
//! A request that arrives while the connection waits stays decoded in the input buffer
//! (`deferred`), with its resolved command and target, and runs first when the wait ends.
//!
//! # Bounded replies
//!
//! Every reply held for a connection counts against its bound
//! ([`OUTPUT_HIGH_WATER`]): its unsent output, and the reply budget of each batch in
//! flight (a batch brings back at most [`BATCH_REPLY_BUDGET`] bytes per trip; past it,
//! the owner sends what it has and keeps the rest until the client reads). Past the
//! bound the connection reads and dispatches nothing more.

use crate::table::handler::ErrorCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use goblin_protocol::{Decoded, Encoder, Version};

use crate::runtime::ask::WorkerView;
use crate::runtime::client::{Client, ReplyMode};
use crate::runtime::conn::{Asking, Conn, Deferred};
use crate::runtime::msg::{Batch, ConnRef, LockMode, Msg, TxRef};
use crate::runtime::server::Shared;
use crate::runtime::slowlog::SlowCmd;
use crate::runtime::tracking::{Reader, Tracked};
use crate::runtime::worker::{BATCH_REPLY_BUDGET, OUTPUT_HIGH_WATER, Worker};
use crate::shard::slots::SlotMap;
use crate::shard::{Outgoing, PREFETCH_AHEAD};
use crate::table::handler::{Args, ConnCtx, Exec, Hub, MultiCall, MultiCtx, Started};
use crate::table::{CommandSpec, Flags, Rejection};
use crate::txn::coordinator::{Entry, Env, JobTiming, TxJob};
use crate::txn::plan::{Locking, Outcome, Plan, PlanStart};
use std::time::Duration;

/// Where a command's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// On the connection's thread (no keys, or a connection command).
    Here,
    /// All on one shard.
    Shard(usize),
    /// On several shards.
    Many,
}

/// What routing found out about a request, kept while it waits so that it is worked out
/// once.
#[derive(Debug, Clone, Copy, Default)]
pub struct Route {
    /// The command's index in the command table, once resolved.
    pub spec: Option<usize>,
    /// Where its keys are, once looked at.
    pub target: Option<Target>,
}

/// How a command of a client whose replies are off goes ([`Worker::mute_begin`]).
enum Mute {
    /// It must wait for what is in flight.
    Busy,
    /// It runs; its reply starts at `at` in the output. `pushes`: a (un)subscribe
    /// command, whose confirmations are sent whatever CLIENT REPLY says, as Redis sends
    /// every Pub/Sub reply (`CLIENT_PUSHING`).
    Run {
        at: usize,
        skip_next: bool,
        pushes: bool,
    },
}

/// What happened to a request the connection handed over.
pub(crate) enum Flow {
    /// Consumed; go on with the next request.
    Next,
    /// Consumed; the connection now waits for it.
    Taken,
    /// Not consumed: it must wait for what is in flight.
    Wait,
}

/// The command a job runs, when it is one command run as a plan.
pub(crate) struct JobCommand {
    /// Its id: INFO commandstats counts its error reply as a failed call.
    id: usize,
    /// It, for the key events of its steps (keyspace notifications on).
    notify: Option<Arc<Batch>>,
    /// Its SLOWLOG and LATENCY entry.
    entry: Option<Entry>,
    /// When it came (ns since the epoch): the turn of its waits, if it waits for keys.
    turn: u64,
}
impl Worker {
    /// Decodes and dispatches the complete requests buffered on a connection.
    pub(crate) fn run_requests(&mut self, key: usize) {
        let shared = Arc::clone(&self.shared);
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if conn.gone {
            return;
        }
        let mut input = std::mem::take(&mut conn.input);
        self.arrived = input.arrived;
        while let Some(conn) = self.conns.get_mut(key) {
            if conn.closing || conn.held_replies() > OUTPUT_HIGH_WATER {
                break;
            }
            if input.start >= input.prefetched {
                let db = conn.client.db;
                let scanned = self.prefetch_keys(&input.buf[input.start..input.end], db);
                input.prefetched = input.start + scanned;
            }
            let Some(conn) = self.conns.get_mut(key) else {
                break;
            };
            if input.keep.is_some()
                && conn.deferred.is_none()
                && input.buf.get(input.start).is_some_and(|&b| b != b'*')
            {
                // (Requests kept may be decoded again: not inline ones, unescaped in
                // place as they are decoded.)
                break;
            }
            // Until it authenticates, a client's requests are kept small, as in Redis
            // (AUTH earlier in this read counts for the requests after it).
            let unauthenticated = !conn.client.authenticated;
            let limits = input.decoder.limits();
            if limits.unauthenticated != unauthenticated {
                input.decoder.set_limits(goblin_protocol::Limits {
                    unauthenticated,
                    ..limits
                });
            }
            // A request that had to wait goes first: it is still decoded.
            let (decoded, mut route) = match conn.deferred.take() {
                Some(deferred) => (Ok(Decoded::Command(deferred.len)), deferred.route),
                None => (
                    input.decoder.decode(&mut input.buf[input.start..input.end]),
                    Route::default(),
                ),
            };
            match decoded {
                Ok(Decoded::Command(n)) => {
                    let args = Args::framed(
                        &input.buf[input.start..input.start + n],
                        input.decoder.args(),
                    );
                    // CLIENT REPLY OFF or SKIP (or a dropped reply still on its way):
                    // set up, around the one call of `dispatch`, so that it stays inlined.
                    let mute = (conn.client.reply != ReplyMode::On || conn.drop_reply)
                        .then(|| self.mute_begin(key, args.get(0)));
                    let mut flow = match mute {
                        Some(Mute::Busy) => Flow::Wait,
                        _ => self.dispatch(&shared, key, &args, &mut route),
                    };
                    if let Some(Mute::Run {
                        at,
                        skip_next,
                        pushes,
                    }) = mute
                    {
                        flow = self.mute_end(key, flow, at, skip_next, pushes);
                    }
                    if matches!(flow, Flow::Wait) {
                        if let Some(conn) = self.conns.get_mut(key) {
                            conn.deferred = Some(Deferred { len: n, route });
                        }
                        break;
                    }
                    if std::mem::take(&mut self.held_back) {
                        let at = input.keep_from_here();
                        if let Some(conn) = self.conns.get_mut(key)
                            && let Some(last) = conn.early.held_at.last_mut()
                        {
                            last.1 = at;
                        }
                    }
                    input.consume(n);
                    if self.ran(key, &flow) {
                        break;
                    }
                }
                Ok(Decoded::Empty(n)) => input.consume(n),
                Ok(Decoded::Incomplete) => break,
                Err(e) => {
                    if conn.busy() {
                        // Answer the fault after what is in flight: decoding again from
                        // the frame's start finds it again.
                        break;
                    }
                    Encoder::new(&mut conn.output.buf, conn.client.resp)
                        .error_sanitized(&e.message());
                    conn.closing = true;
                }
            }
        }
        self.arrived = None;
        if let Some(conn) = self.conns.get_mut(key) {
            conn.input = input;
        }
    }

    /// Prefetches the keys of the complete requests at the start of `pending` (at most
    /// [`PREFETCH_AHEAD`]) that live on this shard — the second word of each, where most
    /// commands have their key —, when there are several: their lookups' cache misses
    /// then overlap, where one by one, each between its command's parsing and reply,
    /// they would add up. A request with no key there costs a lookup that finds nothing.
    /// Returns how many bytes of `pending` it looked at (the requests it saw whole).
    fn prefetch_keys(&self, pending: &[u8], db: usize) -> usize {
        let mut words = [Words::default(); PREFETCH_AHEAD];
        let (found, scanned) = key_words(pending, &mut words);
        let Some(keyspace) = self.shard.dbs().get(db).filter(|_| found >= 2) else {
            return scanned;
        };
        // First where each key is (no memory but the keys' own), then the lookups, in a
        // loop small enough for the CPU to run many of them at once; then the fields of
        // hash commands, whose keys' entries are in cache by then.
        let slots = self.shard.slots();
        let mut positions = [(0, 0); PREFETCH_AHEAD];
        let mut local = [Words::default(); PREFETCH_AHEAD];
        let mut n = 0;
        for w in &words[..found] {
            let position = keyspace.position(w.key);
            if slots.shard_of_slot(position.0) == self.id {
                positions[n] = position;
                local[n] = *w;
                n += 1;
            }
        }
        for &position in &positions[..n] {
            keyspace.prefetch(position);
        }
        for (w, &position) in local[..n].iter().zip(&positions[..n]) {
            if let Some(field) = w.field {
                keyspace.prefetch_field(w.key, position, field);
            }
        }
        scanned
    }

    /// Counts a request that ran; true when the connection must stop for now.
    fn ran(&mut self, key: usize, flow: &Flow) -> bool {
        self.commands += 1;
        let Some(conn) = self.conns.get_mut(key) else {
            return true;
        };
        if conn.client.close_after_reply {
            conn.closing = true;
        }
        matches!(flow, Flow::Taken) || conn.closing
    }

    /// Routes one request: runs it here, adds it to a batch for its shard, starts a
    /// transaction, or reports that it must wait. `route` keeps what was worked out about
    /// the request (its command, its keys' shards) for when it must wait and come back.
    fn dispatch(
        &mut self,
        shared: &Shared,
        key: usize,
        args: &Args<'_>,
        route: &mut Route,
    ) -> Flow {
        let table = &shared.commands;
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let resolved = match route.spec.and_then(|id| table.get(id)) {
            Some(spec) => Ok(spec),
            None => table.resolve(args),
        };
        let spec = match resolved {
            Ok(spec) => {
                route.spec = Some(spec.id);
                spec
            }
            Err(rejection) => {
                if conn.busy() {
                    return Flow::Wait;
                }
                if conn.client.tracking.caching {
                    let name = rejection.spec.and_then(|id| table.get(id)).map(|s| s.name);
                    forget_caching(conn, name);
                }
                return self.reject(shared, key, rejection);
            }
        };
        // The users changed (ACL SETUSER, DELUSER, `requirepass`): the client's is read
        // again; a client whose user was deleted is closed.
        if conn.client.acl_version != shared.acl.version() && !refresh_user(shared, conn) {
            conn.closing = true;
            return Flow::Next;
        }
        // Refused before it runs (or is queued in MULTI, which it then aborts): before
        // AUTH, by the user's permissions, redirected in cluster mode (a command whose
        // keys this node does not serve), while loading, while writes cannot be
        // persisted — in redis-server's order.
        let mut redirected = false;
        let refusal = if spec.flags.contains(Flags::PROTECTED)
            && let Some(refusal) = protected_refusal(shared, &conn.client, spec)
        {
            // (Before AUTH, as in redis-server.)
            Some(refusal.to_vec())
        } else if !conn.client.authenticated && !spec.flags.contains(Flags::NO_AUTH) {
            Some(crate::errors::NOAUTH.to_vec())
        } else if conn.multi.is_some() && spec.flags.contains(Flags::NO_MULTI) {
            // SAVE, SHUTDOWN (and replication's SYNC, PSYNC).
            Some(b"ERR Command not allowed inside a transaction".to_vec())
        } else if !conn.client.user.unrestricted
            && let Err(denied) = conn.client.user.check(spec, args)
        {
            Some(acl_denied(shared, conn, spec, args, denied, self.now))
        } else if !conn.client.user.unrestricted
            && conn.multi.is_none()
            && let Some(refusal) = crate::acl::sort_refusal(&conn.client.user, spec, args)
        {
            // (Inside MULTI it is queued, and EXEC answers it in its place.)
            Some(refusal.to_vec())
        } else if let Some(cluster) = shared.cluster.as_deref()
            && let Some(message) =
                cluster_redirect(&mut self.shard.routes, cluster, shared, conn, spec, args)
        {
            redirected = true;
            Some(message)
        } else if shared.persist.gate() != 0
            && let Some(refusal) = gate_refusal(shared, spec)
        {
            Some(refusal)
        } else if shared.repl_gates_writes()
            && let Some(refusal) = replication_refusal(shared, conn, spec, args)
        {
            Some(refusal)
        } else if crate::scripting::busy()
            && (!spec.flags.contains(Flags::ALLOW_BUSY) || spec.name == "shutdown")
        {
            // A script runs past busy-reply-threshold (on another thread: this one's
            // clients are answered by its stand-in, `runtime/standin.rs`). SHUTDOWN
            // NOSAVE ends the process at once.
            Some(if spec.name == "shutdown" {
                crate::families::persistence::shutdown_while_busy(shared, args)
            } else {
                crate::scripting::busy_error().to_vec()
            })
        } else if shared.memory.maxmemory() > 0
            && ((spec.flags.contains(Flags::DENYOOM) && !matches!(spec.exec, Exec::Shard(_)))
                || (conn.multi.is_some()
                    && !matches!(spec.name, "exec" | "discard" | "quit" | "reset"))
                || (spec.name == "exec" && conn.multi.as_ref().is_some_and(|m| m.deny_oom)))
        {
            // Over `maxmemory`, a command that may grow memory is refused before it
            // starts a transaction, and inside MULTI any command but EXEC, DISCARD, QUIT
            // and RESET is refused before it is queued (queueing takes memory too), as
            // in Redis — unless evicting (from this worker's shard) brings memory back
            // under the limit. (A plain command is checked where it runs, by the shard
            // that owns its keys: `Shard::execute`.)
            // Refused when nothing could be evicted (progress lets it run, as in Redis).
            self.shard
                .out_of_memory(shared, self.now)
                .then(|| crate::errors::OOM.to_vec())
        } else {
            None
        };
        // A RESP2 client subscribed to channels runs only the Pub/Sub commands (its
        // connection carries their messages).
        let refusal = refusal.or_else(|| {
            (conn.client.resp == Version::Resp2
                && !spec.while_subscribed
                && conn.client.subs.active())
            .then(|| crate::errors::not_while_subscribed(spec.name))
        });
        // Cluster mode: a redirected EXEC discards its transaction.
        if redirected
            && is_exec(spec)
            && let Some(message) = &refusal
        {
            if conn.busy() {
                return Flow::Wait;
            }
            conn.multi = None;
            conn.client.watching = None;
            let at = conn.output.buf.len();
            Encoder::new(&mut conn.output.buf, conn.client.resp).error(message);
            self.shard
                .count_error(&conn.output.buf[at..], Some(spec.id));
            return Flow::Next;
        }
        if let Some(message) = refusal {
            if conn.busy() {
                return Flow::Wait;
            }
            if conn.client.tracking.caching {
                forget_caching(conn, Some(spec.name));
            }
            // A transaction command answers its own refusal (a refused EXEC discards
            // the transaction: `EXECABORT`, as redis-server's `rejectCommand`).
            let own = matches!(spec.exec, Exec::Multi(_)).then_some(spec.id);
            return self.reject_command(
                shared,
                key,
                Rejection { spec: own, message },
                Some(spec.id),
            );
        }
        // CLIENT PAUSE holds the command (every command, or those that write) until it
        // ends; queued in MULTI too, as in Redis.
        if shared.pause.maybe() && self.held_by_pause(shared, key, spec, args) {
            return Flow::Wait;
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        // CLIENT TRACKING: the client the command runs for, and whether its keys are
        // remembered (a branch or two when the client does not track).
        let tracking = conn.client.tracking.on;
        if tracking {
            self.cmd_tracked = Some(Tracked {
                reader: Reader {
                    id: conn.client.id,
                    conn: ConnRef {
                        worker: self.id,
                        key,
                        generation: conn.generation,
                    },
                },
                read: conn.client.tracking.remembers(),
                own_flush: false,
            });
        } else if self.cmd_tracked.is_some() {
            // Left by a tracking command that had to wait.
            self.cmd_tracked = None;
        }
        // (A command queued in MULTI is the client's last one too, as in Redis.)
        conn.client.last_command = spec.name;
        if conn.multi.is_some() && spec.queued_in_multi {
            let (resp, db) = (conn.client.resp, conn.client.db);
            let mut queued = self.new_batch(resp, db);
            queued.push_tracked(spec.id, args, self.cmd_tracked.take());
            let Some(conn) = self.conns.get_mut(key) else {
                return Flow::Next;
            };
            queued.caller = conn.client.script_caller(spec, self.now);
            if let Some(multi) = conn.multi.as_mut() {
                multi.bytes +=
                    size_of::<Batch>() + queued.data.len() + size_of_val(queued.spans.as_slice());
                multi.queued.push(queued);
                multi.deny_oom |= spec.flags.contains(Flags::DENYOOM);
            }
            Encoder::new(&mut conn.output.buf, resp).simple(b"QUEUED");
            return Flow::Next;
        }
        // MONITOR: what EXEC runs is shown as it runs, before EXEC itself.
        let exec_feed = if shared.monitors.any()
            && matches!(spec.exec, Exec::Multi(_))
            && spec.name == "exec"
        {
            queued_args(conn)
        } else {
            None
        };
        // MONITOR: EVAL, EVALSHA and FCALL show before the commands their script calls,
        // as redis-server feeds them (they are `skip_monitor`, so not again after).
        let fed_at = self.shard.monitor_feed.len();
        if shared.monitors.any()
            && matches!(
                spec.name,
                "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
            )
        {
            let argv: Vec<&[u8]> = args.iter_from(0).collect();
            self.feed_monitors(key, &argv);
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let flow = match spec.exec {
            Exec::Multi(f) => {
                if conn.busy() {
                    return Flow::Wait;
                }
                if let Some(t) = self.cmd_tracked.as_mut() {
                    // Its queued commands say whether theirs are remembered, as they run.
                    t.read = false;
                }
                let started = timing(shared);
                let at = conn.output.buf.len();
                let flow = self.multi_command(shared, key, f, MultiCall::Run(args));
                // Its own error (EXEC without MULTI, EXECABORT …), answered at once.
                if let Some(conn) = self.conns.get(key)
                    && conn.output.buf.get(at) == Some(&b'-')
                {
                    self.shard.count_error(&conn.output.buf[at..], None);
                    self.shard.count_failed(spec.id);
                }
                // (EXEC is no SLOWLOG entry: the commands it runs are.)
                if let Some(started) = started
                    && let Some(conn) = self.conns.get(key)
                {
                    let nanos = nanos_since(started);
                    log_command(
                        Some(&mut self.shard),
                        shared,
                        &conn.client,
                        spec,
                        args,
                        self.now,
                        nanos,
                    );
                }
                flow
            }
            Exec::Conn(f) => {
                if conn.busy() {
                    return Flow::Wait;
                }
                conn.client.facts = conn.facts(false);
                // redis-server's query buffer still holds the command it runs (CLIENT
                // LIST and INFO show it in the caller's `qbuf`).
                conn.client.facts.qbuf += args.resp_len();
                let was_monitor = conn.client.monitor;
                let Conn {
                    client,
                    output,
                    generation,
                    ..
                } = conn;
                let at = output.buf.len();
                // Timed for SLOWLOG and LATENCY as the shards time theirs (DEBUG SLEEP,
                // CONFIG, CLIENT LIST … run here).
                let started = timing(shared);
                f(
                    &mut ConnCtx {
                        client,
                        shared,
                        out: &mut output.buf,
                        now: self.now,
                        hub: Hub::of_shard(
                            &mut self.subs,
                            &mut self.shard,
                            self.id,
                            key,
                            *generation,
                        ),
                    },
                    args,
                );
                if let Some(started) = started {
                    let nanos = nanos_since(started);
                    log_command(
                        Some(&mut self.shard),
                        shared,
                        client,
                        spec,
                        args,
                        self.now,
                        nanos,
                    );
                }
                if client.monitor != was_monitor {
                    let me = ConnRef {
                        worker: self.id,
                        key,
                        generation: conn.generation,
                    };
                    if client.monitor {
                        shared.monitors.add(me);
                    } else {
                        shared.monitors.remove(me);
                    }
                }
                if output.buf.get(at) == Some(&b'-') {
                    self.shard.count_error(&output.buf[at..], None);
                    self.shard.count_failed(spec.id);
                }
                Flow::Next
            }
            Exec::Container => {
                // Unreachable: a container without a subcommand of its own fails its arity
                // check first. Answered anyway, so that replies cannot fall out of step.
                Encoder::new(&mut conn.output.buf, conn.client.resp)
                    .error(&crate::errors::wrong_arity(spec.name));
                Flow::Next
            }
            Exec::Plan(_) => {
                if conn.busy() {
                    return Flow::Wait;
                }
                self.start_plan(key, spec, args)
            }
            Exec::AskWorkers { .. } => {
                if conn.busy() {
                    return Flow::Wait;
                }
                self.ask_workers(key, spec, args)
            }
            Exec::Shard(_) => {
                let target = *route
                    .target
                    .get_or_insert_with(|| target(self.shard.slots(), spec, args));
                // An invocation that may wait needs its plan, which alone can park; on
                // this shard it first runs as a plain command, which answers at once
                // unless it must wait.
                let may_wait = spec.plan_if.is_some_and(|when| when(shared, args));
                match target {
                    Target::Here => self.run_local(key, spec, args, may_wait),
                    Target::Shard(s) if s == self.id => self.run_local(key, spec, args, may_wait),
                    Target::Shard(s) if !may_wait => self.add_to_remote_batch(key, s, spec, args),
                    Target::Shard(_) | Target::Many => {
                        if conn.busy() {
                            return Flow::Wait;
                        }
                        self.start_plan(key, spec, args)
                    }
                }
            }
        };
        if tracking
            && let Some(t) = self.cmd_tracked.take()
            && !matches!(flow, Flow::Wait)
            && let Some(conn) = self.conns.get_mut(t.reader.conn.key)
            && conn.client.tracking.caching
        {
            forget_caching(conn, Some(spec.name));
        }
        if matches!(flow, Flow::Wait) {
            // It runs later, and shows then.
            self.shard.monitor_feed.truncate(fed_at);
        } else {
            self.shard.count_call(spec.id);
            // ASKING lasts one command (or until EXEC, inside MULTI).
            if let Some(conn) = self.conns.get_mut(key)
                && conn.client.asking
                && conn.multi.is_none()
                && spec.name != "asking"
            {
                conn.client.asking = false;
            }
            if shared.monitors.any() {
                self.monitor_command(key, spec, args, exec_feed);
            }
        }
        flow
    }

    /// Whether CLIENT PAUSE holds this command now: then the connection waits on the
    /// worker's paused list.
    #[cold]
    #[inline(never)]
    fn held_by_pause(
        &mut self,
        shared: &Shared,
        key: usize,
        spec: &CommandSpec,
        args: &Args<'_>,
    ) -> bool {
        let Some(conn) = self.conns.get_mut(key) else {
            return false;
        };
        let writes = crate::families::scripting::pause_writes(shared, spec, args)
            || (spec.name == "exec" && queued_writes(shared, conn));
        if !shared.pause.holds(writes, self.now) {
            return false;
        }
        if !conn.paused {
            // A blocked client, as INFO counts those CLIENT PAUSE holds in Redis.
            conn.paused = true;
            self.paused.push(key);
            shared.blocked_clients.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// MONITOR lines for a command that ran (those EXEC ran first), unless it is one
    /// redis-server does not show.
    #[cold]
    #[inline(never)]
    fn monitor_command(
        &mut self,
        key: usize,
        spec: &CommandSpec,
        args: &Args<'_>,
        exec_feed: Option<Vec<Vec<Vec<u8>>>>,
    ) {
        if !crate::runtime::monitor::shown(spec) {
            return;
        }
        for queued in exec_feed.iter().flatten() {
            let queued: Vec<&[u8]> = queued.iter().map(Vec::as_slice).collect();
            self.feed_monitors(key, &queued);
        }
        let argv: Vec<&[u8]> = args.iter_from(0).collect();
        self.feed_monitors(key, &argv);
    }

    /// Adds a command's MONITOR line to what this iteration sends the MONITOR clients.
    fn feed_monitors(&mut self, key: usize, args: &[&[u8]]) {
        let Some(conn) = self.conns.get(key) else {
            return;
        };
        let addr = conn.client.origin.monitor_addr();
        crate::runtime::monitor::line(&mut self.shard.monitor_feed, conn.client.db, &addr, args);
    }

    /// Before a command of a client whose replies are off (CLIENT REPLY OFF or SKIP),
    /// or whose dropped reply is still on its way: it runs only when nothing is in flight
    /// (one command at a time, so that the reply dropped is its alone, whether written
    /// here or arriving from elsewhere), and where its reply will start is noted.
    #[cold]
    #[inline(never)]
    fn mute_begin(&mut self, key: usize, name: &[u8]) -> Mute {
        let Some(conn) = self.conns.get_mut(key) else {
            return Mute::Busy;
        };
        if conn.busy() {
            return Mute::Busy;
        }
        let skip_next = conn.client.reply == ReplyMode::SkipNext;
        if skip_next {
            conn.client.reply = ReplyMode::Skip;
        }
        const PUSHING: [&str; 6] = [
            "subscribe",
            "unsubscribe",
            "psubscribe",
            "punsubscribe",
            "ssubscribe",
            "sunsubscribe",
        ];
        Mute::Run {
            at: conn.output.buf.len(),
            skip_next,
            pushes: PUSHING
                .iter()
                .any(|p| p.as_bytes().eq_ignore_ascii_case(name)),
        }
    }

    /// After it: its reply is dropped (at once, or when it arrives: `drop_reply`) unless
    /// it turned replies back on (CLIENT REPLY ON answers).
    #[cold]
    #[inline(never)]
    fn mute_end(
        &mut self,
        key: usize,
        flow: Flow,
        at: usize,
        skip_next: bool,
        pushes: bool,
    ) -> Flow {
        let Some(conn) = self.conns.get_mut(key) else {
            return flow;
        };
        // (A (un)subscribe confirmation is sent; an error reply is not.)
        let muted = matches!(conn.client.reply, ReplyMode::Off | ReplyMode::Skip)
            && !(pushes && !conn.busy() && conn.output.buf.get(at).is_some_and(|&b| b != b'-'));
        match flow {
            Flow::Wait => {
                if skip_next {
                    conn.client.reply = ReplyMode::SkipNext;
                }
                return flow;
            }
            // Its reply comes from elsewhere (a batch for another shard, a transaction):
            // it was not busy before, so what it waits for now is this command.
            _ if muted && conn.busy() => conn.drop_reply = true,
            _ if muted => conn.output.buf.truncate(at),
            _ => {}
        }
        if conn.client.reply == ReplyMode::Skip {
            conn.client.reply = ReplyMode::On;
        }
        flow
    }

    /// A request rejected before running (unknown command, wrong argument count): its
    /// error, and inside MULTI the transaction is flagged (or, for the command that ends
    /// it, aborted, as its family decides).
    fn reject(&mut self, shared: &Shared, key: usize, rejection: Rejection) -> Flow {
        self.reject_command(shared, key, rejection, None)
    }

    /// [`Worker::reject`] of a command refused before running (auth, loading, memory):
    /// `refused` is its table id, for its `rejected_calls`.
    fn reject_command(
        &mut self,
        shared: &Shared,
        key: usize,
        rejection: Rejection,
        refused: Option<usize>,
    ) -> Flow {
        let spec = rejection.spec.and_then(|id| shared.commands.get(id));
        if let Some(Exec::Multi(f)) = spec.map(|s| s.exec) {
            return self.multi_command(shared, key, f, MultiCall::Rejected(&rejection.message));
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        if let Some(multi) = conn.multi.as_mut() {
            multi.dirty = true;
        }
        let at = conn.output.buf.len();
        Encoder::new(&mut conn.output.buf, conn.client.resp).error_sanitized(&rejection.message);
        self.shard
            .count_error(&conn.output.buf[at..], rejection.spec.or(refused));
        Flow::Next
    }
}

/// Takes the client's user again after the users changed; false when it was deleted.
#[cold]
#[inline(never)]
fn refresh_user(shared: &Shared, conn: &mut Conn) -> bool {
    let (user, version) = shared.acl.user(&conn.client.user.name);
    conn.client.acl_version = version;
    match user {
        Some(user) => {
            conn.client.user = user;
            true
        }
        None => false,
    }
}

/// A command the client's user may not run: logged in the ACL LOG, and its `NOPERM`
/// error.
#[cold]
#[inline(never)]
fn acl_denied(
    shared: &Shared,
    conn: &mut Conn,
    spec: &CommandSpec,
    args: &Args<'_>,
    denied: crate::acl::Denied,
    now: goblin_store::Millis,
) -> Vec<u8> {
    let (reason, object) = denied.logged(spec, args);
    conn.client.facts = conn.facts(false);
    let last = std::mem::replace(&mut conn.client.last_command, spec.name);
    let client_info = conn.client.info_line(now);
    conn.client.last_command = last;
    shared.acl.log(crate::acl::LogEntry {
        count: 1,
        reason,
        context: if conn.multi.is_some() {
            "multi"
        } else {
            "toplevel"
        },
        object,
        username: conn.client.user.name.clone(),
        at_ms: now,
        client_info,
    });
    crate::acl::noperm(denied, spec)
}

/// Logs slow commands sent by `client` (SLOWLOG), or by a script it ran.
fn log_slow(shared: &Shared, client: &Client, slow: Vec<SlowCmd>) {
    let addr = client.origin.addr();
    let name = client.name.clone().unwrap_or_default();
    for cmd in slow {
        if cmd.by_script {
            shared.slowlog.push(cmd, "?:0".to_owned(), Vec::new());
        } else {
            shared.slowlog.push(cmd, addr.clone(), name.clone());
        }
    }
}

/// When a command run on the connection's worker starts, if it is timed (for SLOWLOG
/// and LATENCY).
fn timing(shared: &Shared) -> Option<std::time::Instant> {
    (crate::runtime::histogram::tracking() || shared.slowlog.enabled() || shared.latency.enabled())
        .then(std::time::Instant::now)
}

/// Nanoseconds since `started`.
fn nanos_since(started: std::time::Instant) -> u64 {
    started.elapsed().as_nanos() as u64
}

/// Records a command of `client` that ran on this worker for `nanos`: in INFO
/// commandstats and its latency histogram (in `shard`, when given: EXEC's connection
/// commands are recorded by the caller, who has none at hand), in LATENCY, and in
/// SLOWLOG when it was slow.
#[allow(clippy::too_many_arguments)]
fn log_command(
    shard: Option<&mut crate::shard::Shard>,
    shared: &Shared,
    client: &Client,
    spec: &CommandSpec,
    args: &Args<'_>,
    now: goblin_store::Millis,
    nanos: u64,
) {
    if let Some(shard) = shard {
        shard.record_run(spec.id, nanos);
    }
    if let Some(entry) = sampled(shared, spec, args, now, nanos) {
        log_slow(shared, client, vec![entry]);
    }
}

/// A run of `nanos` of a command: a LATENCY sample, and its SLOWLOG entry if it was slow.
fn sampled(
    shared: &Shared,
    spec: &CommandSpec,
    args: &Args<'_>,
    now: goblin_store::Millis,
    nanos: u64,
) -> Option<SlowCmd> {
    let micros = nanos / 1000;
    if shared.latency.enabled() {
        shared
            .latency
            .add_command(spec.flags.contains(Flags::FAST), micros);
    }
    (shared.slowlog.is_slow(micros) && !spec.flags.contains(Flags::SKIP_SLOWLOG))
        .then(|| SlowCmd::new(args, now / 1000, micros))
}

/// Why replication refuses a command now, if it does: a write `READONLY` on a read-only
/// replica (but for its master's own), and `NOREPLICAS` on a master with too few
/// replicas in touch (`min-replicas-to-write`); on a replica whose link is down with
/// `replica-serve-stale-data no`, what is not flagged `stale`, `MASTERDOWN`. A script's
/// declared flags count as its command's (`command_flags`), and EXEC's are those of
/// what it queued. Out of the command path's way: only asked while one of them may
/// apply ([`Shared::repl_gates_writes`]).
#[cold]
#[inline(never)]
fn replication_refusal(
    shared: &Shared,
    conn: &Conn,
    spec: &CommandSpec,
    args: &Args<'_>,
) -> Option<Vec<u8>> {
    let flags_of = |spec: &CommandSpec, args: &Args<'_>| {
        crate::families::scripting::command_flags(shared, spec, args)
    };
    let flags = match conn.multi.as_ref() {
        Some(multi) if spec.name == "exec" => {
            let queued: Vec<Flags> = multi
                .queued
                .iter()
                .filter_map(|b| {
                    let cmd = shared.commands.get(b.cmds.first()?.spec)?;
                    Some(flags_of(cmd, &b.args(0)))
                })
                .collect();
            spec.flags
                .with(
                    Flags::WRITE,
                    queued.iter().any(|f| f.contains(Flags::WRITE)),
                )
                .with(
                    Flags::STALE,
                    queued.iter().all(|f| f.contains(Flags::STALE)),
                )
        }
        _ => flags_of(spec, args),
    };
    let refusal = if shared.follow.active.load(Ordering::Relaxed) {
        if flags.contains(Flags::WRITE) && !conn.client.master && shared.replica_read_only() {
            crate::errors::READONLY_REPLICA
        } else if !flags.contains(Flags::STALE) && shared.follow.stale() {
            crate::errors::MASTERDOWN
        } else {
            return None;
        }
    } else if flags.contains(Flags::WRITE) && shared.repl.too_few_for_writes() {
        crate::errors::NOREPLICAS
    } else {
        return None;
    };
    Some(refusal.to_vec())
}

/// Why a protected command (DEBUG; MODULE LOAD, LOADEX, UNLOAD) is refused to this
/// client, if it is: `enable-debug-command` or `enable-module-command` is `no`, or
/// `local` and the client is not on the loopback interface or the Unix socket. The link
/// to this replica's master runs what it is sent.
fn protected_refusal(
    shared: &Shared,
    client: &Client,
    spec: &CommandSpec,
) -> Option<&'static [u8]> {
    let (allow, refusal) = if spec.name == "debug" {
        (
            shared.config.enable_debug_command,
            crate::errors::DEBUG_NOT_ALLOWED,
        )
    } else {
        (
            shared.config.enable_module_command,
            crate::errors::MODULE_NOT_ALLOWED,
        )
    };
    let allowed = client.master || allow.permits(client.origin.is_local());
    (!allowed).then_some(refusal)
}

/// Why persistence refuses `spec` now, if it does: `LOADING` for a command not allowed
/// while the dataset loads, `MISCONF` for a write (and PING, as redis-server does) while
/// the log or the snapshots cannot be written.
fn gate_refusal(shared: &Shared, spec: &CommandSpec) -> Option<Vec<u8>> {
    let persist = &shared.persist;
    if persist.loading() && !spec.flags.contains(Flags::LOADING) {
        return Some(crate::errors::LOADING.to_vec());
    }
    if spec.flags.contains(Flags::WRITE) || spec.name == "ping" {
        return persist.write_refusal();
    }
    None
}

/// Whether a connection's MULTI queue holds a command that writes (or may be
/// propagated): CLIENT PAUSE WRITE holds its EXEC.
fn queued_writes(shared: &Shared, conn: &Conn) -> bool {
    conn.multi.as_ref().is_some_and(|multi| {
        multi.queued.iter().any(|b| {
            b.cmds
                .first()
                .and_then(|c| shared.commands.get(c.spec))
                .is_some_and(|spec| {
                    crate::families::scripting::pause_writes(shared, spec, &b.args(0))
                })
        })
    })
}

/// CLIENT CACHING holds for the next command only (or the next transaction): Redis
/// forgets it after any command but a CLIENT one — `name`, when the command was found —
/// outside MULTI, refused ones included.
fn forget_caching(conn: &mut Conn, name: Option<&str>) {
    if conn.multi.is_none() && !name.is_some_and(|n| n.starts_with("client")) {
        conn.client.tracking.caching = false;
    }
}

/// The arguments of the commands a connection queued in MULTI (for MONITOR), if the
/// transaction will run.
fn queued_args(conn: &Conn) -> Option<Vec<Vec<Vec<u8>>>> {
    let multi = conn.multi.as_ref().filter(|m| !m.dirty)?;
    Some(
        multi
            .queued
            .iter()
            .map(|b| b.args(0).iter_from(0).map(<[u8]>::to_vec).collect())
            .collect(),
    )
}

/// Whether `spec` is EXEC.
fn is_exec(spec: &CommandSpec) -> bool {
    matches!(spec.exec, Exec::Multi(_)) && spec.name == "exec"
}

/// Cluster mode: the redirection (or CLUSTERDOWN) a command gets when this node does not
/// serve its keys — for EXEC, the keys of every command queued (which must share a slot),
/// as redis-server's `getNodeByQuery` decides. `None`: it runs here.
fn cluster_redirect(
    cache: &mut Option<Arc<crate::cluster::Routes>>,
    cluster: &crate::cluster::Cluster,
    shared: &Shared,
    conn: &Conn,
    spec: &CommandSpec,
    args: &Args<'_>,
) -> Option<Vec<u8>> {
    let mut keys: Option<(usize, bool)> = None;
    // (A script's flags say whether it writes: redis-server's getCommandFlags.)
    let writes = |spec: &CommandSpec, args: &Args<'_>| {
        crate::families::scripting::command_flags(shared, spec, args).contains(Flags::WRITE)
    };
    let mut write = writes(spec, args);
    let mut note = |slot: u16| match &mut keys {
        None => keys = Some((usize::from(slot), false)),
        Some((first, cross)) => *cross |= *first != usize::from(slot),
    };
    if is_exec(spec) {
        for batch in &conn.multi.as_ref()?.queued {
            for (i, cmd) in batch.cmds.iter().enumerate() {
                let Some(queued) = shared.commands.get(cmd.spec) else {
                    continue;
                };
                let a = batch.args(i);
                write |= writes(queued, &a);
                queued.for_each_routed_position(&a, |k| note(goblin_store::key_slot(a.get(k))));
            }
        }
    } else {
        spec.for_each_routed_position(args, |k| note(goblin_store::key_slot(args.get(k))));
    }
    keys?;
    // A replica's link to its master applies what the master sends.
    if conn.client.master {
        return None;
    }
    let routes = crate::cluster::current(cache, cluster);
    let asking = conn.client.asking || spec.flags.contains(Flags::ASKING);
    let reads = cluster.reads_when_down();
    // On a replica, a READONLY client reads its master's slots, as does sharded Pub/Sub
    // (redis-server's getNodeByQuery).
    let shard_pubsub = matches!(spec.name, "ssubscribe" | "sunsubscribe" | "spublish");
    let replica_read = (conn.client.readonly || shard_pubsub) && !write;
    routes.route(keys, asking, write, reads, replica_read)
}

/// Which shard(s) a keyed command needs.
fn target(slots: &SlotMap, spec: &CommandSpec, args: &Args<'_>) -> Target {
    let mut target = Target::Here;
    spec.for_each_key_position(args, |i| {
        let shard = slots.shard_of_key(args.get(i));
        target = match target {
            Target::Here => Target::Shard(shard),
            Target::Shard(s) if s == shard => target,
            _ => Target::Many,
        };
    });
    target
}

impl Worker {
    /// Runs a command whose keys are on this shard: at once when nothing is locked here,
    /// or when nothing locked here is its keys' (as a batch's command would); else
    /// through the shard's queue like any batch. A command that `may_wait` runs at once
    /// too, and its plan takes over if it asks to wait (or when locks are about).
    fn run_local(
        &mut self,
        key: usize,
        spec: &CommandSpec,
        args: &Args<'_>,
        may_wait: bool,
    ) -> Flow {
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        if conn.busy() {
            return if may_wait {
                Flow::Wait
            } else {
                self.run_early(key, spec, args)
            };
        }
        let from = ConnRef {
            worker: self.id,
            key,
            generation: conn.generation,
        };
        if self.shard.quiet() || (!may_wait && self.shard.may_run_now(spec, args, from)) {
            // (The shard's context is None between commands: set only for a tracking one.)
            let tracked = self.cmd_tracked.is_some();
            if tracked {
                self.shard.tracked = self.cmd_tracked;
            }
            let waits = if spec.may_run_script() {
                self.shard.script_caller = conn.client.script_caller(spec, self.now);
                self.execute_lending(key, spec, args, may_wait)
            } else {
                let Conn { client, output, .. } = conn;
                self.shard.execute_here(
                    &self.shared,
                    spec,
                    args,
                    client.db,
                    self.now,
                    &mut output.buf,
                    client.resp,
                    may_wait,
                )
            };
            if tracked {
                self.shard.tracked = None;
            }
            self.shard.script_caller = None;
            if self.shard.has_slow()
                && let Some(conn) = self.conns.get(key)
            {
                log_slow(&self.shared, &conn.client, self.shard.take_slow());
            }
            self.route_shard_out();
            if !waits {
                return Flow::Next;
            }
            return self.start_plan(key, spec, args);
        }
        if may_wait {
            return self.start_plan(key, spec, args);
        }
        // Its keys are locked or wanted here: go through the shard's queue like any batch.
        let (resp, db) = (conn.client.resp, conn.client.db);
        let caller = conn.client.script_caller(spec, self.now);
        let mut batch = self.new_batch(resp, db);
        batch.push_tracked(spec.id, args, self.cmd_tracked);
        batch.scripts = spec.may_run_script();
        batch.caller = caller;
        self.send_batch(key, from, self.id, batch);
        Flow::Taken
    }

    /// Runs a command of this shard's keys ahead of the connection's batches in flight,
    /// when they went to a later shard: its keys are locked until they are all back, and
    /// its reply waits for the batches sent before it (`Early`).
    ///
    /// The order of a connection's commands holds. Each command takes effect as if it
    /// ran just after the batch sent before it came back: its keys were locked from its
    /// run until then, so nobody else saw or changed them in between, and the commands
    /// after it were sent to the later shard after it ran. Locks are taken in the order
    /// of the shards (this one's first, the later shard's batch after), as a cross-shard
    /// transaction takes them, so no wait goes round in a circle. Where that does not
    /// hold — batches in flight to an earlier shard, a transaction or a question in
    /// progress — or where something else could see the command out of order (MONITOR,
    /// keyspace notifications, client tracking, scripts, a command that may block or
    /// touches no key), it waits as before.
    fn run_early(&mut self, key: usize, spec: &CommandSpec, args: &Args<'_>) -> Flow {
        let worker = self.id;
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        if conn.flight_shard == worker
            || conn.job.is_some()
            || conn.asking.is_some()
            || conn.stalled
            || conn.drop_reply
            || conn.client.reply != ReplyMode::On
            || conn.early.holds >= EARLY_HOLDS
            || conn.held_replies() > OUTPUT_HIGH_WATER
            || self.cmd_tracked.is_some()
            || spec.may_run_script()
            || !(spec.flags.contains(Flags::WRITE) || spec.flags.contains(Flags::READONLY))
            || self.shared.monitors.any()
            || self.shard.notifying()
        {
            return Flow::Wait;
        }
        let back = conn.flight_shard < worker;
        if back
            && (conn.in_flight > 0
                || !conn.early.marks.is_empty()
                || conn.early.held_at.len() >= EARLY_HOLDS
                || conn
                    .open
                    .as_ref()
                    .is_none_or(|b| b.scripts || b.tracker.is_some()))
        {
            return Flow::Wait;
        }
        let from = ConnRef {
            worker,
            key,
            generation: conn.generation,
        };
        let Some(held) = self
            .shard
            .hold_early(spec, args, from, early_tx(worker, key))
        else {
            return Flow::Wait;
        };
        if back {
            return self.hold_back(key, spec, args, held);
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let Conn {
            client,
            early,
            sent,
            open,
            ..
        } = conn;
        // Its reply goes after those of the commands gathered so far for the later
        // shard: after the open batch's, or after the last batch sent.
        let place = match open.as_mut() {
            Some(batch) => {
                batch.record_ends = true;
                (*sent + 1, batch.cmds.len())
            }
            None => (*sent + 1, 0),
        };
        early.holds += held;
        self.shard.execute_here(
            &self.shared,
            spec,
            args,
            client.db,
            self.now,
            &mut early.replies,
            client.resp,
            false,
        );
        let end = early.replies.len();
        match early.marks.back_mut() {
            Some((b, n, at)) if (*b, *n) == place => *at = end,
            _ => early.marks.push_back((place.0, place.1, end)),
        }
        if self.shard.has_slow()
            && let Some(conn) = self.conns.get(key)
        {
            log_slow(&self.shared, &conn.client, self.shard.take_slow());
        }
        self.route_shard_out();
        Flow::Next
    }

    /// Holds back a command of this shard's keys, locked for it already (`held` keys),
    /// while the connection gathers a batch for an earlier shard: the batch goes on
    /// gathering, and is sent to run there without ever waiting (`Batch::no_wait`);
    /// when it is back, the held-back commands run in their places among its replies
    /// (`Worker::held_back_done`).
    ///
    /// The order of a connection's commands holds. A held-back command's keys were
    /// locked from before the batch ran until it ran, so nobody saw or changed them in
    /// between: it takes effect as if it ran at its place in the batch. This shard's
    /// keys are locked before the earlier shard's, against the order of the shards —
    /// which is why the batch never waits there (it comes back where it would): nothing
    /// waits while holding them, so no wait goes round in a circle. If it stopped short,
    /// the keys are unlocked and what did not run goes on the ordinary way: its requests
    /// are kept in the input to be decoded again.
    fn hold_back(&mut self, key: usize, spec: &CommandSpec, args: &Args<'_>, held: usize) -> Flow {
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        conn.early.holds += held;
        if conn.early.held.is_none() {
            let (resp, db) = (conn.client.resp, conn.client.db);
            let batch = self.new_batch(resp, db);
            let Some(conn) = self.conns.get_mut(key) else {
                return Flow::Next;
            };
            conn.early.held = Some(batch);
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let Conn { early, open, .. } = conn;
        let (Some(batch), Some(held)) = (open.as_mut(), early.held.as_mut()) else {
            return Flow::Next;
        };
        batch.no_wait = true;
        batch.record_ends = true;
        held.push(spec.id, args);
        // (Where its request starts is recorded once it is consumed: `run_requests`.)
        early.held_at.push((batch.cmds.len(), 0));
        self.held_back = true;
        Flow::Next
    }

    /// The batch that commands were held back for came back (`Worker::hold_back`): its
    /// replies go to the output, the held-back commands run in their places as far as
    /// it ran, then their keys are unlocked. If it stopped short, the rest goes on the
    /// ordinary way: its commands before the first held-back command not run are sent
    /// again (waiting, this time, where they must), and the connection decodes its
    /// requests again from that command on.
    fn held_back_done(&mut self, key: usize, mut batch: Box<Batch>) {
        let Some(conn) = self.conns.get_mut(key) else {
            self.recycle(batch);
            return;
        };
        let held = conn.early.held.take();
        let held_at = std::mem::take(&mut conn.early.held_at);
        let ran = batch.next.min(batch.cmds.len());
        if let Some(held) = held.as_ref() {
            // (Their keys were looked at a round trip ago.)
            self.shard.prefetch_batch(held);
        }
        let mut unread = Vec::new();
        let Conn {
            output,
            client,
            gone,
            ..
        } = conn;
        // (A connection gone still has what it sent take effect; nobody reads it.)
        let out = if *gone { &mut unread } else { &mut output.buf };
        let (mut from, mut next) = (0, 0);
        for i in 0..=ran {
            while let Some(&(at, _)) = held_at.get(next)
                && at == i
            {
                if let Some(held) = held.as_ref()
                    && let Some(cmd) = held.cmds.get(next)
                    && let Some(spec) = self.shared.commands.get(cmd.spec)
                {
                    self.shard.execute_here(
                        &self.shared,
                        spec,
                        &held.args(next),
                        held.db,
                        self.now,
                        out,
                        client.resp,
                        false,
                    );
                }
                next += 1;
            }
            if i < ran {
                let end = batch.ends.get(i).copied().unwrap_or(batch.replies.len());
                out.extend_from_slice(batch.replies.get(from..end).unwrap_or_default());
                from = end.max(from);
            }
        }
        let gone = *gone;
        if let Some(held) = held {
            // Those not run are decoded and counted again.
            let rest = held_at.get(next).map_or(batch.cmds.len(), |&(at, _)| at);
            let again = held
                .cmds
                .iter()
                .skip(next)
                .chain(batch.cmds.iter().skip(rest));
            for cmd in again {
                self.shard.uncount_call(cmd.spec);
                if self.commands > 0 {
                    self.commands -= 1;
                } else {
                    // (Counted in an iteration before, already added up.)
                    self.shared.total_commands.fetch_sub(1, Ordering::Relaxed);
                }
            }
            self.recycle(held);
        }
        if !batch.finished() {
            self.shard.early_given_up();
        }
        self.release_early(key);
        if self.shard.has_slow()
            && let Some(conn) = self.conns.get(key)
        {
            log_slow(&self.shared, &conn.client, self.shard.take_slow());
        }
        self.route_shard_out();
        let Some(conn) = self.conns.get_mut(key) else {
            self.recycle(batch);
            return;
        };
        // The first held-back command not run, if any: decoded again from there.
        let rest = held_at.get(next).copied();
        let mut held_at = held_at;
        held_at.clear();
        // (Its room is kept for the next time.)
        conn.early.held_at = held_at;
        conn.input.rewind(rest.map(|(_, at)| at));
        if rest.is_some() {
            conn.deferred = None;
        }
        if let Some((at, _)) = rest {
            batch.truncate(at);
        }
        if batch.finished() || gone {
            self.recycle(batch);
        } else {
            batch.replies.clear();
            batch.ends.clear();
            batch.no_wait = false;
            batch.record_ends = false;
            batch.now = self.now;
            self.send_to_flight_shard(key, batch);
        }
        self.after_wait(key);
    }

    /// Replies of the connection's oldest batch in flight came back (`ends`: where each
    /// ends, if the batch recorded it; `done`: the batch is finished): into the output,
    /// with the replies of the commands that ran early in their places.
    fn deliver_early(&mut self, key: usize, replies: &[u8], ends: &[usize], done: bool) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let Conn {
            early,
            output,
            sent,
            in_flight,
            ..
        } = conn;
        // The oldest batch in flight; a finished one is no longer counted in flight.
        let batch = *sent - *in_flight as u64 + u64::from(!done);
        let mut from = 0;
        for (i, &end) in ends.iter().enumerate() {
            let ran = early.head_cmds + i + 1;
            while let Some(&(b, n, at)) = early.marks.front()
                && b == batch
                && n == ran
            {
                output
                    .buf
                    .extend_from_slice(replies.get(from..end).unwrap_or_default());
                from = end.max(from);
                output
                    .buf
                    .extend_from_slice(early.replies.get(early.moved..at).unwrap_or_default());
                early.moved = at.max(early.moved);
                early.marks.pop_front();
            }
        }
        output
            .buf
            .extend_from_slice(replies.get(from..).unwrap_or_default());
        early.head_cmds += ends.len();
        if !done {
            return;
        }
        early.head_cmds = 0;
        // What goes after this batch, before the next one's first command.
        while let Some(&(b, n, at)) = early.marks.front()
            && (b <= batch || (b == batch + 1 && n == 0))
        {
            output
                .buf
                .extend_from_slice(early.replies.get(early.moved..at).unwrap_or_default());
            early.moved = at.max(early.moved);
            early.marks.pop_front();
        }
        if early.marks.is_empty() {
            early.replies.clear();
            early.moved = 0;
            if early.replies.capacity() > EARLY_KEEP_BYTES {
                // (A big reply's room is not kept for the connection's lifetime.)
                early.replies = Vec::new();
            }
        }
    }

    /// Once nothing of the connection is in flight, the keys its early commands locked
    /// are unlocked.
    fn release_early(&mut self, key: usize) {
        let worker = self.id;
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if conn.in_flight == 0 && conn.open.is_none() && conn.early.holds > 0 {
            conn.early.holds = 0;
            // (What waited for the keys may run a script: the connections are lent to
            // the stand-in meanwhile, as for any shard work that may.)
            self.lend_conns(None);
            self.shard
                .release_early(&self.shared, early_tx(worker, key));
            self.take_back_conns();
            self.route_shard_out();
        }
    }

    /// `Shard::execute_here` of a command that may run a script, the connections lent to
    /// the stand-in meanwhile (`runtime/standin.rs`; this one's output with them, but for
    /// the reply).
    #[inline(never)]
    fn execute_lending(
        &mut self,
        key: usize,
        spec: &CommandSpec,
        args: &Args<'_>,
        may_wait: bool,
    ) -> bool {
        let Some(conn) = self.conns.get_mut(key) else {
            return false;
        };
        let (db, resp) = (conn.client.db, conn.client.resp);
        let mut out = std::mem::take(&mut conn.output.buf);
        self.lend_conns(Some(key));
        let waits = self.shard.execute_here(
            &self.shared,
            spec,
            args,
            db,
            self.now,
            &mut out,
            resp,
            may_wait,
        );
        self.take_back_conns();
        if let Some(conn) = self.conns.get_mut(key) {
            conn.output.buf = out;
        }
        waits
    }

    fn add_to_remote_batch(
        &mut self,
        key: usize,
        shard: usize,
        spec: &CommandSpec,
        args: &Args<'_>,
    ) -> Flow {
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let pending = conn.in_flight > 0 || conn.open.is_some();
        if conn.job.is_some()
            || (pending && conn.flight_shard != shard)
            || (conn.open.as_ref().is_some_and(|b| b.no_wait)
                && (spec.may_run_script() || self.cmd_tracked.is_some()))
        {
            // (A batch that must not wait holds nothing that might.)
            return Flow::Wait;
        }
        if conn.open.is_none() {
            let (resp, db) = (conn.client.resp, conn.client.db);
            let batch = self.new_batch(resp, db);
            self.opened.push(key);
            let Some(conn) = self.conns.get_mut(key) else {
                return Flow::Next;
            };
            conn.open = Some(batch);
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        conn.flight_shard = shard;
        if let Some(batch) = conn.open.as_mut() {
            batch.push_tracked(spec.id, args, self.cmd_tracked);
            if spec.may_run_script() {
                batch.scripts = true;
                if batch.caller.is_none() {
                    batch.caller = conn.client.script_caller(spec, self.now);
                }
            }
        }
        Flow::Next
    }

    /// Sends the batches the connections gathered so far this iteration.
    pub(crate) fn send_open_batches(&mut self) {
        let mut opened = std::mem::take(&mut self.opened);
        for key in opened.drain(..) {
            self.send_open_batch(key);
        }
        crate::util::reuse(&mut self.opened, opened);
    }

    /// Sends the batch a connection gathered this iteration.
    fn send_open_batch(&mut self, key: usize) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let Some(batch) = conn.open.take() else {
            return;
        };
        self.send_to_flight_shard(key, batch);
    }

    /// Sends a batch of a connection's to the shard its batches go to.
    fn send_to_flight_shard(&mut self, key: usize, batch: Box<Batch>) {
        let Some(conn) = self.conns.get(key) else {
            self.recycle(batch);
            return;
        };
        let from = ConnRef {
            worker: self.id,
            key,
            generation: conn.generation,
        };
        let dest = conn.flight_shard;
        self.send_batch(key, from, dest, batch);
    }

    /// Sends a batch to its shard with a reply budget, counted against the connection's
    /// bound until it comes back.
    fn send_batch(&mut self, key: usize, from: ConnRef, dest: usize, mut batch: Box<Batch>) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let budget = BATCH_REPLY_BUDGET
            .min(OUTPUT_HIGH_WATER.saturating_sub(conn.held_replies()))
            .max(1);
        batch.reply_budget = budget;
        conn.reserved += budget;
        conn.in_flight += 1;
        conn.sent += 1;
        conn.flight_shard = dest;
        if dest == self.id {
            self.shard.run_batch(&self.shared, from, batch);
            self.route_shard_out();
        } else {
            self.route_one(dest, Msg::Run(from, batch));
        }
    }

    /// A batch came back with its replies.
    pub(crate) fn batch_done(&mut self, to: ConnRef, mut batch: Box<Batch>) {
        let shared = (!batch.slow.is_empty()).then(|| Arc::clone(&self.shared));
        if let Some(conn) = self.live_conn(to) {
            if let Some(shared) = shared {
                log_slow(&shared, &conn.client, std::mem::take(&mut batch.slow));
            }
            conn.in_flight = conn.in_flight.saturating_sub(1);
            conn.reserved = conn.reserved.saturating_sub(batch.reply_budget);
            conn.stalled = false;
            if conn.early.held.is_some() {
                self.held_back_done(to.key, batch);
                return;
            }
            if std::mem::take(&mut conn.drop_reply) {
                // CLIENT REPLY OFF or SKIP: not sent.
            } else if !conn.early.marks.is_empty() {
                self.deliver_early(to.key, &batch.replies, &batch.ends, true);
            } else if conn.output.pending() == 0 && conn.output.buf.is_empty() {
                std::mem::swap(&mut conn.output.buf, &mut batch.replies);
            } else {
                conn.output.buf.extend_from_slice(&batch.replies);
            }
            self.release_early(to.key);
            self.after_wait(to.key);
        }
        self.recycle(batch);
    }

    /// A batch reached its reply budget: its replies so far arrive, the rest waits at
    /// its shard until the client reads them.
    pub(crate) fn batch_stalled(
        &mut self,
        to: ConnRef,
        shard: usize,
        replies: Vec<u8>,
        ends: Vec<usize>,
    ) {
        let Some(conn) = self.live_conn(to).filter(|c| !c.gone) else {
            // The connection is gone: the rest of the batch comes back unrun.
            self.route_one(shard, Msg::Resume(to, None));
            return;
        };
        if !conn.early.marks.is_empty() {
            self.deliver_early(to.key, &replies, &ends, false);
        } else if !conn.drop_reply {
            conn.output.buf.extend_from_slice(&replies);
        }
        let Some(conn) = self.conns.get_mut(to.key) else {
            return;
        };
        conn.stalled = true;
        let key = to.key;
        self.mark_dirty(key);
        // A client that reads fast may have room already.
        self.resume_stalled(key);
    }

    /// Resumes a connection's stalled batch if its output has room for more.
    pub(crate) fn resume_stalled(&mut self, key: usize) {
        let worker = self.id;
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if !conn.stalled || conn.gone {
            return;
        }
        let room = OUTPUT_HIGH_WATER.saturating_sub(conn.held_replies());
        if room < BATCH_REPLY_BUDGET {
            // Wait until the client has read enough.
            return;
        }
        conn.stalled = false;
        let from = ConnRef {
            worker,
            key,
            generation: conn.generation,
        };
        let shard = conn.flight_shard;
        // The budget already reserved for the batch stands; the new one is what the
        // output has room for now.
        let budget = BATCH_REPLY_BUDGET.min(room);
        self.route_one(shard, Msg::Resume(from, Some(budget)));
    }

    /// Sends a connection's question (the command) to every worker.
    fn ask_workers(&mut self, key: usize, spec: &CommandSpec, args: &Args<'_>) -> Flow {
        let Some(conn) = self.conns.get(key) else {
            return Flow::Next;
        };
        let (resp, db) = (conn.client.resp, conn.client.db);
        let mut batch = self.new_batch(resp, db);
        batch.push(spec.id, args);
        self.ask_with(key, Arc::from(batch))
    }

    /// Asks every worker `command` (an [`Exec::AskWorkers`] command) for connection
    /// `key`; the last answer replies ([`Worker::answered`]).
    ///
    /// What reached the server before the question shows in the answers, as with
    /// redis-server, which runs commands in the order they arrive: the commands this
    /// worker read before it go out first (a channel between two workers keeps its
    /// order); each worker answers once the input it has seen is served
    /// ([`Worker::answer_questions`]); and this worker answers last, after the replies
    /// to its clients' commands that the others ran before answering (a client past its
    /// output limit for such a reply is gone from CLIENT LIST).
    fn ask_with(&mut self, key: usize, command: Arc<Batch>) -> Flow {
        let Some(generation) = self.conns.get(key).map(|c| c.generation) else {
            return Flow::Next;
        };
        let from = ConnRef {
            worker: self.id,
            key,
            generation,
        };
        let workers = self.shared.threads;
        if let Some(conn) = self.conns.get_mut(key) {
            conn.asking = Some(Asking {
                command: Arc::clone(&command),
                answers: Vec::with_capacity(workers),
                due: workers,
                micros: 0,
            });
        }
        self.send_open_batches();
        let out = (0..workers)
            .filter(|&w| w != self.id || workers == 1)
            .map(|w| (w, Msg::Ask(from, Arc::clone(&command))))
            .collect();
        self.route(out);
        Flow::Taken
    }

    /// A worker's answer to a connection's question; the last one replies.
    pub(crate) fn answered(&mut self, to: ConnRef, answer: Vec<u8>, micros: u64) {
        let shared = Arc::clone(&self.shared);
        let now = self.now;
        let Some(conn) = self
            .conns
            .get_mut(to.key)
            .filter(|c| c.generation == to.generation)
        else {
            return;
        };
        let Some(asking) = conn.asking.as_mut() else {
            return;
        };
        asking.answers.push(answer);
        asking.micros += micros;
        if asking.answers.len() + 1 == asking.due && asking.due > 1 {
            // The others have answered: this worker's turn.
            let command = Arc::clone(&asking.command);
            self.route_one(self.id, Msg::Ask(to, command));
            return;
        }
        if asking.answers.len() < asking.due {
            return;
        }
        let Some(asking) = conn.asking.take() else {
            return;
        };
        let args = asking.command.args(0);
        let spec = asking
            .command
            .cmds
            .first()
            .and_then(|c| shared.commands.get(c.spec));
        if let Some(Exec::AskWorkers { gather, .. }) = spec.map(|s| s.exec) {
            let drop_reply = std::mem::take(&mut conn.drop_reply);
            let Conn {
                client,
                output,
                generation,
                closing,
                ..
            } = conn;
            let at = output.buf.len();
            let mut ctx = ConnCtx {
                client,
                shared: &shared,
                out: &mut output.buf,
                now,
                hub: Hub::of_shard(
                    &mut self.subs,
                    &mut self.shard,
                    self.id,
                    to.key,
                    *generation,
                ),
            };
            let started = timing(&shared);
            gather(&mut ctx, &args, asking.answers);
            // (As `ran` does for a command answered at once.)
            if client.close_after_reply {
                *closing = true;
            }
            if drop_reply {
                output.buf.truncate(at);
            }
            if let Some(started) = started
                && let Some(spec) = spec
            {
                // Timed as the workers' answers and the gathering.
                let nanos = asking.micros * 1000 + nanos_since(started);
                log_command(
                    Some(&mut self.shard),
                    &shared,
                    client,
                    spec,
                    &args,
                    now,
                    nanos,
                );
            }
        }
        self.exec_go_on(to.key);
        self.after_wait(to.key);
    }

    /// Answers the questions that reached this worker ([`Worker::ask_with`]), once per
    /// iteration after the input its poll found is served; each once the batches this
    /// worker had sent to other shards when it came are back (their replies are in
    /// their clients' output: one past its output limit for them is gone), or after
    /// [`QUESTION_WAIT`] (a batch held back by a client that does not read).
    #[inline]
    pub(crate) fn answer_questions(&mut self) {
        if !self.questions.is_empty() {
            self.answer_waiting_questions();
        }
    }

    /// [`Worker::answer_questions`] when some wait.
    fn answer_waiting_questions(&mut self) {
        // The commands read so far are sent first, and counted.
        self.send_open_batches();
        let mut questions = std::mem::take(&mut self.questions);
        let mut waiting = Vec::new();
        for mut question in questions.drain(..) {
            let due = *question.runs_due.get_or_insert(self.runs_out);
            if self.runs_back >= due || question.since.elapsed() >= QUESTION_WAIT {
                self.answer(question.from, question.command);
            } else {
                waiting.push(question);
            }
        }
        // (Questions that came meanwhile wait for the next iteration.)
        waiting.append(&mut self.questions);
        self.questions = waiting;
        crate::util::reuse(&mut self.questions, questions);
    }

    /// How soon the next iteration should look at the questions waiting here, if any.
    #[inline]
    pub(crate) fn questions_due(&self) -> Option<Duration> {
        if self.questions.is_empty() {
            return None;
        }
        self.questions
            .iter()
            .map(|q| match q.runs_due {
                Some(due) if self.runs_back < due => {
                    QUESTION_WAIT.saturating_sub(q.since.elapsed())
                }
                _ => Duration::ZERO,
            })
            .min()
    }

    /// Answers a connection's question on this worker.
    fn answer(&mut self, from: ConnRef, command: Arc<Batch>) {
        let shared = Arc::clone(&self.shared);
        let spec = command
            .cmds
            .first()
            .and_then(|c| shared.commands.get(c.spec));
        let started = std::time::Instant::now();
        let answer = match spec.map(|s| s.exec) {
            Some(Exec::AskWorkers { ask, .. }) => {
                let mut view = WorkerView::new(self, from);
                let answer = ask(&mut view, &command.args(0));
                let (out, finished) = view.finish();
                self.route(out);
                for (key, outcome) in finished {
                    self.finish_job(key, outcome);
                }
                answer
            }
            _ => Vec::new(),
        };
        let micros = nanos_since(started) / 1000;
        self.route_one(from.worker, Msg::Answer(from, answer, micros));
    }

    /// Starts a cross-shard command's plan (or a keyspace-wide command's).
    fn start_plan(&mut self, key: usize, spec: &CommandSpec, args: &Args<'_>) -> Flow {
        let started = timing(&self.shared);
        let Some(cross) = spec.plan() else {
            // Refused when the table was built; answered anyway.
            return self.reply_now(key, &crate::errors::no_plan(spec.name));
        };
        let slots = Arc::clone(self.shard.slots());
        let now = self.now;
        let (db, local_client, caller, master) =
            self.conns.get(key).map_or((0, false, None, false), |c| {
                (
                    c.client.db,
                    c.client.origin.is_local(),
                    c.client.script_caller(spec, now),
                    c.client.master,
                )
            });
        let me = self.conns.get(key).map(|c| ConnRef {
            worker: self.id,
            key,
            generation: c.generation,
        });
        if matches!(spec.name, "sync" | "psync")
            && let (Some(me), Some(conn)) = (me, self.conns.get_mut(key))
        {
            if conn.client.replica || conn.client.master {
                // A replica's second sync is ignored (no reply), as redis-server ignores it.
                return Flow::Next;
            }
            // A replica: it is fed from its save's instant on (`repl::master`).
            conn.client.replica = true;
            self.shared.repl.register(
                me,
                conn.client.id,
                conn.client.replica_ip(),
                conn.client.repl_port,
                conn.client.repl_psync2,
            );
        }
        let shared = Arc::clone(&self.shared);
        let start = PlanStart {
            shared: &shared,
            spec,
            args,
            slots: &slots,
            now: self.now,
            locked: false,
            db,
            databases: self.shared.config.databases,
            local_client,
            caller,
            conn: me,
            master,
            client: self.conns.get(key).map(|c| &c.client),
            by_script: false,
        };
        let plan = match (cross.plan)(&start) {
            Ok(plan) => plan,
            Err(reply) => {
                let flow = self.reply_now(key, &reply);
                if let Some(started) = started
                    && let Some(conn) = self.conns.get(key)
                {
                    let nanos = nanos_since(started);
                    log_command(
                        Some(&mut self.shard),
                        &shared,
                        &conn.client,
                        spec,
                        args,
                        self.now,
                        nanos,
                    );
                }
                return flow;
            }
        };
        let (locks, whole_shards) = match cross.locking {
            _ if plan.whole_shards() => (Vec::new(), true),
            Locking::Keys => (spec.lock_needs(args), false),
            Locking::WholeShards => (Vec::new(), true),
            Locking::InHops => (Vec::new(), false),
        };
        if let Some(t) = self.cmd_tracked.as_mut() {
            // Its steps remember the keys they lock when it only reads.
            t.read &= spec.flags.contains(Flags::READONLY);
        }
        if let Some(t) = self.cmd_tracked.as_mut()
            && matches!(spec.name, "flushall" | "flushdb")
            && let Some(conn) = self.conns.get_mut(key)
        {
            // Its own client hears of the flush after its reply (`write_job_outcome`).
            t.own_flush = true;
            conn.tracking_flush = true;
        }
        // Keyspace notifications: the shards name the events of its steps after it.
        let command = crate::shard::notify::active(self.shared.notify.load(Ordering::Relaxed))
            .then(|| {
                let mut batch = self.new_batch(Version::Resp2, db);
                batch.push(spec.id, args);
                Arc::new(*batch)
            });
        // Its latency and SLOWLOG entry, timed from here (parsing it counts) until its
        // reply.
        let entry = started.map(|started| {
            let mut batch = self.new_batch(Version::Resp2, db);
            batch.push(spec.id, args);
            Entry {
                id: spec.id,
                slowlog: !spec.flags.contains(Flags::SKIP_SLOWLOG),
                command: batch,
                fast: spec.flags.contains(Flags::FAST),
                started,
                micros: 0,
            }
        });
        let command = JobCommand {
            id: spec.id,
            notify: command,
            entry,
            turn: self.arrived.unwrap_or_else(crate::clock::now_ns),
        };
        self.start_job(key, locks, whole_shards, plan, Some(command))
    }

    /// Writes an error reply at once.
    fn reply_now(&mut self, key: usize, error: &[u8]) -> Flow {
        if let Some(conn) = self.conns.get_mut(key) {
            Encoder::new(&mut conn.output.buf, conn.client.resp).error_sanitized(error);
        }
        Flow::Next
    }

    /// Starts a transaction for connection `key` (running `command`, when it is one
    /// command run as a plan).
    pub(crate) fn start_job(
        &mut self,
        key: usize,
        locks: Vec<(Vec<u8>, LockMode)>,
        whole_shards: bool,
        plan: Box<dyn Plan>,
        command: Option<JobCommand>,
    ) -> Flow {
        let (resp, db) = self
            .conns
            .get(key)
            .map_or((Version::Resp2, 0), |c| (c.client.resp, c.client.db));
        let seq = self.next_job;
        self.next_job += 1;
        let tx = TxRef {
            worker: self.id,
            seq,
        };
        let slots = Arc::clone(self.shard.slots());
        let mut job = Box::new(TxJob::new(
            tx,
            key,
            &slots,
            locks,
            whole_shards,
            plan,
            resp,
            db,
        ));
        if let Some(JobCommand {
            id,
            notify,
            entry,
            turn,
        }) = command
        {
            job.set_counted(id);
            let flags = self.shared.commands.get(id).map(|s| s.flags);
            job.set_reads(flags.is_some_and(|f| f.contains(Flags::READONLY)));
            job.set_unwrapped(flags.is_some_and(|f| f.contains(Flags::TOUCHES_ARBITRARY_KEYS)));
            job.set_turn(turn);
            if let Some(notify) = notify {
                job.set_command(notify);
            }
            if let Some(entry) = entry {
                job.set_entry(entry);
            }
        }
        if key != usize::MAX
            && let Some(tracked) = self.cmd_tracked
        {
            job.set_tracked(tracked);
        }
        let shared = Arc::clone(&self.shared);
        let env = Env {
            shared: &shared,
            slots: &slots,
            now: self.now,
        };
        let mut out = Vec::new();
        self.lend_conns(Some(key));
        let done = job.start(&env, &mut out);
        self.take_back_conns();
        let done = self.run_conn_steps(&mut job, done, &mut out);
        self.route(out);
        match done {
            Some(outcome) => {
                // Finished at once (no keys): the connection is inside `run_requests`,
                // which goes on by itself — resuming it here would run it re-entrantly.
                self.log_job(key, job.take_timing(), &outcome);
                self.write_job_outcome(key, outcome);
                if self.conns.get(key).is_some_and(|c| c.asking.is_some()) {
                    // EXEC asks every worker (`Worker::exec_asks`): the connection goes
                    // on once they have answered.
                    return Flow::Taken;
                }
                Flow::Next
            }
            None => {
                if let Some(at) = job.deadline() {
                    self.deadlines.push(std::cmp::Reverse((at, seq)));
                }
                let parked = job.parked_state();
                self.note_blocked((false, false), parked);
                if parked.0 {
                    // Blocked: the replies before the command go out now.
                    self.mark_dirty(key);
                }
                self.jobs.insert(seq, job);
                if let Some(conn) = self.conns.get_mut(key) {
                    conn.job = Some(seq);
                }
                Flow::Taken
            }
        }
    }

    /// Runs a transaction command (MULTI, EXEC, DISCARD), which may start a transaction.
    fn multi_command(
        &mut self,
        shared: &Shared,
        key: usize,
        f: crate::table::handler::MultiFn,
        call: MultiCall<'_, '_>,
    ) -> Flow {
        let slots = Arc::clone(self.shard.slots());
        let now = self.now;
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let Conn {
            client,
            output,
            multi,
            generation,
            ..
        } = conn;
        let started = f(
            &mut MultiCtx {
                conn: ConnCtx {
                    client,
                    shared,
                    out: &mut output.buf,
                    now,
                    hub: Hub::of_shard(&mut self.subs, &mut self.shard, self.id, key, *generation),
                },
                multi,
                slots: &slots,
            },
            call,
        );
        let Some(Started {
            plan,
            locks,
            whole_shards,
            calls,
        }) = started
        else {
            return Flow::Next;
        };
        for tally in calls {
            self.shard.count(tally);
        }
        self.start_job(key, locks, whole_shards, plan, None)
    }

    /// Records what a finished job ran for connection `key`: its commands that were
    /// slow (EXEC's), the job's own command (a plan's) in LATENCY and, if slow, in
    /// SLOWLOG, and in INFO commandstats and errorstats what it called and its reply's
    /// error. (Every job whose outcome is written is recorded here first.)
    pub(crate) fn log_job(&mut self, key: usize, timing: JobTiming, outcome: &Outcome) {
        let JobTiming {
            mut slow,
            entry,
            latency,
            calls,
            counted,
            unblocked,
        } = timing;
        if let Some((id, nanos)) = latency {
            self.shard.record_run(id, nanos);
        }
        // A script's reply (`ScriptPlan`) is counted by its run's tallies, not by its
        // first byte.
        let mut script_reply = false;
        for tally in calls {
            script_reply |= matches!(tally, crate::txn::plan::Tally::ReplyErrors(..));
            self.shard.count(tally);
        }
        let error = match outcome {
            Outcome::Reply(reply) if !script_reply && reply.first() == Some(&b'-') => Some(reply),
            _ => None,
        };
        if let Some(reply) = error {
            self.shard.count_error(reply, None);
        }
        if (error.is_some() || unblocked)
            && let Some(id) = counted
        {
            self.shard.count_failed(id);
        }
        if let Some(Entry {
            command,
            slowlog,
            fast,
            micros,
            ..
        }) = entry
        {
            let shared = &self.shared;
            // (Every command is a latency sample, `skip_slowlog` or not, as in redis-server.)
            if shared.latency.enabled() {
                shared.latency.add_command(fast, micros);
            }
            if slowlog && shared.slowlog.is_slow(micros) {
                slow.push(SlowCmd::new(&command.args(0), self.now / 1000, micros));
            }
            self.recycle(command);
        }
        if !slow.is_empty()
            && let Some(conn) = self.conns.get(key)
        {
            log_slow(&self.shared, &conn.client, slow);
        }
    }

    /// Writes a finished job's answer and lets the connection go on.
    pub(crate) fn finish_job(&mut self, key: usize, outcome: Outcome) {
        self.write_job_outcome(key, outcome);
        self.after_wait(key);
    }

    /// Writes a job's answer to its connection's output, without resuming the connection
    /// (for a job that finished while the connection's requests are being run).
    fn write_job_outcome(&mut self, key: usize, outcome: Outcome) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        conn.job = None;
        if std::mem::take(&mut conn.tracking_flush) && conn.client.tracking.on {
            let me = ConnRef {
                worker: self.id,
                key,
                generation: conn.generation,
            };
            let notice = crate::shard::tracking::flush_notice(Reader {
                id: conn.client.id,
                conn: me,
            });
            // Delivered at the end of the iteration: after the reply written below.
            self.shard.pubsub.track(&notice, false);
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let deferred = std::mem::take(&mut conn.deferred_pushes);
        if std::mem::take(&mut conn.drop_reply) {
            // CLIENT REPLY OFF or SKIP: not sent.
            conn.output.buf.extend_from_slice(&deferred);
            return;
        }
        let mut runs = ExecConnRuns::default();
        self.write_replies(key, deferred, |ctx| write_outcome(ctx, outcome, &mut runs));
        self.count_exec_conn_runs(key, runs);
    }

    /// Runs the commands a job's plan hands its connection ([`Step::Conn`]: EXEC's
    /// queued connection commands, in their place), feeding each reply back, until the
    /// plan sends hops, parks or finishes (`done`: what it did last). Called with the
    /// connections taken back from the stand-in.
    pub(crate) fn run_conn_steps(
        &mut self,
        job: &mut TxJob,
        mut done: Option<Outcome>,
        out: &mut Vec<Outgoing>,
    ) -> Option<Outcome> {
        while done.is_none()
            && let Some(command) = job.take_conn_command()
        {
            let (reply, slow) = self.run_on_conn(job.conn, command);
            job.note_slow(slow);
            let shared = Arc::clone(&self.shared);
            let slots = Arc::clone(self.shard.slots());
            let env = Env {
                shared: &shared,
                slots: &slots,
                now: self.now,
            };
            self.lend_conns(Some(job.conn));
            done = job.on_conn_reply(reply, &env, out);
            self.take_back_conns();
        }
        done
    }

    /// Runs a connection command of EXEC on connection `key` now: its reply (nothing
    /// when the connection is gone), and its SLOWLOG entry if it was slow.
    fn run_on_conn(&mut self, key: usize, command: Box<Batch>) -> (Vec<u8>, Vec<SlowCmd>) {
        let Some(at) = self.conns.get(key).map(|c| c.output.buf.len()) else {
            return (Vec::new(), Vec::new());
        };
        let mut runs = ExecConnRuns::default();
        // (Never one that asks every worker: those run as the reply is written.)
        self.write_replies(key, Vec::new(), |ctx| {
            let _ = write_one(ctx, Outcome::Conn(command), &mut runs);
            None
        });
        let reply = self
            .conns
            .get_mut(key)
            .map(|c| c.output.buf.split_off(at))
            .unwrap_or_default();
        // Its SLOWLOG entry goes with those of the transaction's keyed commands, in order.
        let slow = std::mem::take(&mut runs.slow);
        self.count_exec_conn_runs(key, runs);
        (reply, slow)
    }

    /// Counts the errors and the run times of EXEC's connection commands
    /// ([`write_one`]'s).
    fn count_exec_conn_runs(&mut self, key: usize, runs: ExecConnRuns) {
        if !runs.slow.is_empty()
            && let Some(conn) = self.conns.get(key)
        {
            log_slow(&self.shared, &conn.client, runs.slow);
        }
        for (id, code) in runs.failed {
            self.shard.count(crate::txn::plan::Tally::Error(code));
            self.shard.count_failed(id);
        }
        for (id, nanos) in runs.timed {
            self.shard.record_run(id, nanos);
        }
    }

    /// Writes into connection `key`'s output with `write`, then `deferred` (pushes held
    /// for after the reply) — unless `write` stopped at a queued command of EXEC that
    /// must ask every worker: that is asked, and the rest waits for the answers.
    fn write_replies(
        &mut self,
        key: usize,
        deferred: Vec<u8>,
        write: impl FnOnce(&mut ConnCtx<'_>) -> Option<(Box<Batch>, std::vec::IntoIter<Outcome>)>,
    ) {
        let shared = Arc::clone(&self.shared);
        let now = self.now;
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let Conn {
            client,
            output,
            generation,
            ..
        } = conn;
        let mut ctx = ConnCtx {
            client,
            shared: &shared,
            out: &mut output.buf,
            now,
            hub: Hub::of_shard(&mut self.subs, &mut self.shard, self.id, key, *generation),
        };
        match write(&mut ctx) {
            None => output.buf.extend_from_slice(&deferred),
            Some((command, rest)) => self.exec_asks(key, command, ExecRest { rest, deferred }),
        }
    }

    /// EXEC's queued command that asks every worker: asked now, and the rest of EXEC's
    /// reply written once they have answered ([`Worker::exec_go_on`]).
    fn exec_asks(&mut self, key: usize, command: Box<Batch>, rest: ExecRest) {
        if let Some(conn) = self.conns.get_mut(key) {
            conn.exec_rest = Some(rest);
        }
        let _ = self.ask_with(key, Arc::from(command));
    }

    /// The workers answered EXEC's command that asked them: the rest of EXEC's reply.
    fn exec_go_on(&mut self, key: usize) {
        let Some(ExecRest { rest, deferred }) =
            self.conns.get_mut(key).and_then(|c| c.exec_rest.take())
        else {
            return;
        };
        let mut runs = ExecConnRuns::default();
        self.write_replies(key, deferred, |ctx| write_outcomes(ctx, rest, &mut runs));
        self.count_exec_conn_runs(key, runs);
    }

    /// A connection got back what it waited for: run its next requests, write its output.
    pub(crate) fn after_wait(&mut self, key: usize) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if conn.gone {
            // Closed while work was in flight; now nothing is.
            if !conn.busy() {
                self.conns.remove(key);
            }
            return;
        }
        if !conn.busy() {
            self.serve(key);
        }
        self.mark_dirty(key);
    }
}

/// What EXEC still has to answer after a queued command that asks every worker (CLIENT
/// KILL, LIST, UNBLOCK, UNPAUSE, which is being asked): the replies after it, and what
/// goes out after the whole reply.
#[derive(Debug)]
pub struct ExecRest {
    /// The outcomes of the queued commands after it.
    rest: std::vec::IntoIter<Outcome>,
    /// Pushes held until EXEC's reply is whole.
    deferred: Vec<u8>,
}

/// What EXEC's connection commands, run as its reply is written, leave for INFO's
/// statistics: each one that answered an error (its command and the error's code), and
/// each one's run time in ns (its command's), for the latency histograms.
#[derive(Default)]
struct ExecConnRuns {
    failed: Vec<(usize, ErrorCode)>,
    timed: Vec<(usize, u64)>,
    /// Their SLOWLOG entries (after those of the keyed commands before them).
    slow: Vec<SlowCmd>,
}

/// Writes a job's outcome into a connection's output, up to a queued command that must
/// ask every worker (returned with what follows it: [`Worker::exec_go_on`]).
fn write_outcome(
    ctx: &mut ConnCtx<'_>,
    outcome: Outcome,
    runs: &mut ExecConnRuns,
) -> Option<(Box<Batch>, std::vec::IntoIter<Outcome>)> {
    match outcome {
        Outcome::Exec(list) => {
            ctx.reply().array(list.len());
            write_outcomes(ctx, list.into_iter(), runs)
        }
        one => write_one(ctx, one, runs).map(|cmd| (cmd, Vec::new().into_iter())),
    }
}

/// Writes EXEC's outcomes in order, up to one that must ask every worker.
fn write_outcomes(
    ctx: &mut ConnCtx<'_>,
    mut items: std::vec::IntoIter<Outcome>,
    runs: &mut ExecConnRuns,
) -> Option<(Box<Batch>, std::vec::IntoIter<Outcome>)> {
    while let Some(item) = items.next() {
        if let Some(cmd) = write_one(ctx, item, runs) {
            return Some((cmd, items));
        }
    }
    None
}

/// Writes one outcome; a queued command that must ask every worker is given back. A
/// connection command run here is added to `runs`, for INFO's statistics.
fn write_one(
    ctx: &mut ConnCtx<'_>,
    outcome: Outcome,
    runs: &mut ExecConnRuns,
) -> Option<Box<Batch>> {
    match outcome {
        Outcome::Reply(bytes) => ctx.out.extend_from_slice(&bytes),
        Outcome::Conn(cmd) => {
            let spec = cmd
                .cmds
                .first()
                .and_then(|c| ctx.shared.commands.get(c.spec));
            match spec.map(|s| (s, s.exec)) {
                Some((spec, Exec::Conn(f))) => {
                    let started = timing(ctx.shared);
                    let args = cmd.args(0);
                    let at = ctx.out.len();
                    f(ctx, &args);
                    if ctx.out.get(at) == Some(&b'-') {
                        runs.failed.push((spec.id, ErrorCode::of(&ctx.out[at..])));
                    }
                    if let Some(started) = started {
                        let nanos = nanos_since(started);
                        runs.timed.push((spec.id, nanos));
                        runs.slow
                            .extend(sampled(ctx.shared, spec, &args, ctx.now, nanos));
                    }
                }
                // ACL SETUSER and DELUSER inside MULTI change the users alone: their
                // questions to the workers (closing clients) are not asked, and the
                // clients concerned are closed as they next send a command.
                Some((spec, Exec::AskWorkers { gather, .. }))
                    if matches!(spec.name, "acl|setuser" | "acl|deluser") =>
                {
                    gather(ctx, &cmd.args(0), Vec::new());
                }
                // The others ask every worker, and EXEC's reply goes on when all have
                // answered.
                Some((_, Exec::AskWorkers { .. })) => return Some(cmd),
                // Never queued as a connection command; answered, so that EXEC's array
                // keeps one reply per command.
                _ => ctx.reply().error(crate::errors::NOT_RUN),
            }
        }
        Outcome::Exec(list) => {
            // (Not reached: EXEC is not queued, and its own array is `write_outcome`'s.)
            ctx.reply().array(list.len());
            for item in list {
                let _ = write_one(ctx, item, runs);
            }
        }
    }
    None
}

/// The longest a worker waits to answer a question for the batches it had sent to
/// other shards when it came ([`Worker::answer_questions`]).
const QUESTION_WAIT: Duration = Duration::from_millis(10);

/// Most keys a connection's commands run early or held back may hold at once, and most
/// commands it may hold back: past it, they wait for the batches in flight (which then
/// unlock them).
const EARLY_HOLDS: usize = 256;

/// Room for the replies of commands run early that a connection keeps between uses.
const EARLY_KEEP_BYTES: usize = 64 * 1024;

/// Who holds the keys a connection's early commands locked: the connection, by its slot
/// on its worker (unique among the open connections, and a slot is reused only once
/// nothing of its connection is in flight), in a range of sequence numbers transactions
/// do not reach.
fn early_tx(worker: usize, key: usize) -> TxRef {
    TxRef {
        worker,
        seq: crate::txn::locks::EARLY_SEQ | key as u64,
    }
}

/// What [`Worker::prefetch_keys`] prefetches of a request: its second word, where most
/// commands have their key, and for a command whose name starts with `H` (the hash
/// commands) its third word, the field.
#[derive(Clone, Copy, Default)]
struct Words<'a> {
    key: &'a [u8],
    field: Option<&'a [u8]>,
}

/// Requests of more words than this stop [`key_words`].
const MAX_SCANNED_WORDS: usize = 64;

/// Fills `out` with the [`Words`] of each complete multi-bulk request at the start of
/// `buf` (a request of one word is skipped), in order, stopping at the first request
/// that is incomplete, not multi-bulk or of more than [`MAX_SCANNED_WORDS`] words, or
/// once `out` is full; how many it found, and
/// where the last request it read whole ends. Reads only: the decoder checks every
/// request properly when it runs.
fn key_words<'a>(buf: &'a [u8], out: &mut [Words<'a>]) -> (usize, usize) {
    let mut found = 0;
    let mut whole = 0;
    let mut requests = 0;
    while found < out.len() && requests < out.len() * 2 {
        requests += 1;
        // (A request of many words is not scanned: its frame may be arriving a piece per
        // read, and each read would scan it again from its start.)
        let Some((count, mut at)) =
            length(buf, whole, b'*').filter(|&(count, _)| count <= MAX_SCANNED_WORDS)
        else {
            break;
        };
        let (mut hashes, mut key, mut field) = (false, None, None);
        for i in 0..count {
            let Some((len, start)) = length(buf, at, b'$') else {
                return (found, whole);
            };
            let Some(end) = start.checked_add(len).filter(|&e| e + 2 <= buf.len()) else {
                return (found, whole);
            };
            let word = &buf[start..end];
            match i {
                0 => hashes = word.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'h')),
                1 => key = Some(word),
                2 if hashes => field = Some(word),
                _ => {}
            }
            at = end + 2;
        }
        if let Some(key) = key {
            out[found] = Words { key, field };
            found += 1;
        }
        whole = at;
    }
    (found, whole)
}

/// The length after `kind` at `buf[at]` (`*3\r\n`, `$5\r\n`), and where its line ends.
fn length(buf: &[u8], at: usize, kind: u8) -> Option<(usize, usize)> {
    if buf.get(at) != Some(&kind) {
        return None;
    }
    let mut n = 0usize;
    let mut i = at + 1;
    loop {
        match *buf.get(i)? {
            d @ b'0'..=b'9' if i - at <= 10 => n = n * 10 + usize::from(d - b'0'),
            b'\r' if i > at + 1 => break,
            _ => return None,
        }
        i += 1;
    }
    (buf.get(i + 1) == Some(&b'\n')).then_some((n, i + 2))
}

#[cfg(test)]
mod tests {
    use super::{Words, key_words};

    fn words(buf: &[u8], room: usize) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out = vec![Words::default(); room];
        let (n, _) = key_words(buf, &mut out);
        out[..n]
            .iter()
            .map(|w| (w.key.to_vec(), w.field.map(<[u8]>::to_vec)))
            .collect()
    }

    #[test]
    fn key_words_of_complete_requests() {
        let whole = b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n*1\r\n$4\r\nPING\r\n\
                      *3\r\n$3\r\nSET\r\n$0\r\n\r\n$1\r\nv\r\n\
                      *4\r\n$4\r\nhset\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n";
        let pipeline = [&whole[..], b"*2\r\n$3\r\nGET\r\n$2\r\nk"].concat();
        assert_eq!(
            words(&pipeline, 8),
            [
                (b"k1".to_vec(), None),
                (Vec::new(), None),
                (b"h".to_vec(), Some(b"f".to_vec()))
            ]
        );
        let mut out = [Words::default(); 8];
        assert_eq!(key_words(&pipeline, &mut out), (3, whole.len()));
        // No more than there is room for.
        assert_eq!(words(&pipeline, 1), [(b"k1".to_vec(), None)]);
        let mut one = [Words::default(); 1];
        assert_eq!(key_words(&pipeline, &mut one), (1, 21));
    }

    #[test]
    fn key_words_stop_at_anything_else() {
        for buf in [
            &b"PING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..],
            b"*2\r\n$3\r\nGET\r\n$99999999999\r\nk\r\n",
            b"*2\r\n$3\r\nGET\r\n$-1\r\n",
            b"*2\r\n$3\r\nGET\r\n$18446744073709551615\r\n",
            b"*99999999999\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            // Too many words to be scanned.
            b"*65\r\n$4\r\nMSET\r\n$1\r\nk\r\n",
            b"*\r\n",
            b"*2\r",
            b"",
        ] {
            let found = words(buf, 4);
            assert!(
                found.len() <= 1 && found.iter().all(|w| w.0.as_slice() == b"k"),
                "{buf:?}: {found:?}"
            );
        }
    }
}
