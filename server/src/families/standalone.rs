//! What a standalone redis-server answers of its modules and its place in replication:
//! MODULE (no module is ever loaded), REPLICAOF / SLAVEOF, WAIT and FAILOVER
//! (`repl::failover` takes its steps).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{CrossShard, Hop, HopOut, Locking, Park, Plan, PlanCx, PlanStart, Step};

/// Registers MODULE, REPLICAOF, SLAVEOF, WAIT and FAILOVER.
pub fn register(table: &mut CommandTable) {
    table.add_container(
        &meta::MODULE,
        Exec::Container,
        &[
            ("help", None, Exec::Conn(module_help)),
            ("list", None, Exec::Conn(module_list)),
            ("load", None, Exec::Conn(module_load)),
            ("loadex", None, Exec::Conn(module_load)),
            ("unload", None, Exec::Conn(module_unload)),
        ],
    );
    for meta in [&meta::REPLICAOF, &meta::SLAVEOF] {
        table.add(
            meta,
            Exec::Plan(CrossShard {
                plan: replicaof_plan,
                locking: Locking::InHops,
            }),
        );
    }
    table.add(
        &meta::WAIT,
        Exec::Plan(CrossShard {
            plan: wait_plan,
            locking: Locking::InHops,
        }),
    );
    table.add(&meta::FAILOVER, Exec::Conn(failover));
}

/// `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT milliseconds]`, checked as
/// redis-server's `failoverCommand` checks it, in its order: the attempt begins (the
/// clients' writes paused) and the reply is OK at once; worker 0 takes its steps.
fn failover(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    use crate::repl::failover::Attempt;
    let shared = ctx.shared;
    let error = |ctx: &mut ConnCtx<'_>, text: &str| {
        ctx.reply().error(format!("ERR {text}").as_bytes());
    };
    if shared.cluster.is_some() {
        return error(
            ctx,
            "FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.",
        );
    }
    if args.len() == 2 && args.get(1).eq_ignore_ascii_case(b"abort") {
        return match shared.failover.abort(shared, "Failover manually aborted") {
            true => ctx.reply().ok(),
            false => error(ctx, "No failover in progress."),
        };
    }
    let (mut timeout, mut force, mut target) = (0i64, false, None);
    let mut j = 1;
    while j < args.len() {
        let word = args.get(j);
        if word.eq_ignore_ascii_case(b"timeout") && j + 1 < args.len() && timeout == 0 {
            let Some(ms) = goblin_protocol::parse_i64(args.get(j + 1)) else {
                return ctx.reply().error(crate::errors::NOT_INTEGER);
            };
            if ms <= 0 {
                return error(ctx, "FAILOVER timeout must be greater than 0");
            }
            timeout = ms;
            j += 1;
        } else if word.eq_ignore_ascii_case(b"to") && j + 2 < args.len() && target.is_none() {
            let Some(port) = goblin_protocol::parse_i64(args.get(j + 2)) else {
                return ctx.reply().error(crate::errors::NOT_INTEGER);
            };
            target = Some((String::from_utf8_lossy(args.get(j + 1)).into_owned(), port));
            j += 2;
        } else if word.eq_ignore_ascii_case(b"force") && !force {
            force = true;
        } else {
            return ctx.reply().error(crate::errors::SYNTAX);
        }
        j += 1;
    }
    if shared.failover.active() {
        return error(ctx, "FAILOVER already in progress.");
    }
    if shared.follow.active.load(Ordering::SeqCst) {
        return error(ctx, "FAILOVER is not valid when server is a replica.");
    }
    if shared.repl.count() == 0 {
        return error(ctx, "FAILOVER requires connected replicas.");
    }
    if force && (timeout == 0 || target.is_none()) {
        return error(
            ctx,
            "FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
    }
    let target = match target {
        None => None,
        Some((host, port)) => {
            let at = u16::try_from(port)
                .ok()
                .and_then(|p| shared.repl.replica_at(&host, p).map(|online| (p, online)));
            match at {
                None => return error(ctx, "FAILOVER target HOST and PORT is not a replica."),
                Some((_, false)) => return error(ctx, "FAILOVER target replica is not online."),
                Some((port, true)) => Some((host, port)),
            }
        }
    };
    let deadline =
        (timeout > 0).then(|| crate::clock::now_ms().saturating_add(timeout.unsigned_abs()));
    shared
        .failover
        .begin(shared, Attempt::new(target, force, deadline));
    ctx.reply().ok();
}

/// REPLICAOF NO ONE's plan (redis-server's `replicationUnsetMaster`): run by worker 0
/// when a failover that followed its target is aborted, and by a replica that a PSYNC
/// FAILOVER hands over to (which keeps that replica's connection, `keep`).
pub(crate) fn promote_plan(keep: Option<crate::runtime::msg::ConnRef>) -> Box<dyn Plan> {
    Box::new(ReplicaOf {
        target: None,
        who: match keep {
            Some(_) => "failover request from 'the master handing over'".into(),
            None => "failover aborted".into(),
        },
        // (A PSYNC's plan holds every shard: the link, which the old master stopped
        // feeding, is not waited for.)
        at_once: keep.is_some(),
        hold: Default::default(),
        promoted: false,
        keep,
        cluster: false,
    })
}

/// Cluster mode: REPLICAOF's plan for the role the cluster gives this node
/// (`Worker::follow_cluster_role`): follow the master the cluster's view names, or be a
/// master — the view as it is when the plan acts (a plan that waited for the link to
/// hold acts on the latest role, whatever another did meanwhile).
pub(crate) fn cluster_role_plan() -> Box<dyn Plan> {
    Box::new(ReplicaOf {
        target: None,
        who: "cluster failover".into(),
        at_once: false,
        hold: Default::default(),
        promoted: false,
        keep: None,
        cluster: true,
    })
}

/// `MODULE HELP`
fn module_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LIST",
        "    Return a list of loaded modules.",
        "LOAD <path> [<arg> ...]",
        "    Load a module library from <path>, passing to it any optional arguments.",
        "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
        "    Load a module library from <path>, while passing it module configurations and optional arguments.",
        "UNLOAD <name>",
        "    Unload a module.",
        "HELP",
        "    Prints this help.",
    ];
    super::reply_help(ctx, LINES);
}

/// `MODULE LIST`: none is loaded.
fn module_list(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    ctx.reply().array(0);
}

/// `MODULE LOAD path [arg ...]`, `MODULE LOADEX path …` (refused before they run unless
/// `enable-module-command` allows them, as DEBUG: `Flags::PROTECTED`): the load fails (Goblin loads no module), as a module
/// that cannot be loaded fails in redis-server.
fn module_load(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    crate::log!(
        Warning,
        "Module {} failed to load: Goblin does not load modules",
        String::from_utf8_lossy(args.get(2))
    );
    ctx.reply()
        .error(b"ERR Error loading the extension. Please check the server logs.");
}

/// `MODULE UNLOAD name`: there is none to unload.
fn module_unload(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    ctx.reply()
        .error(b"ERR Error unloading module: no such module with that name");
}

/// `REPLICAOF host port`, `SLAVEOF host port`: this server follows that master (a link
/// of its own: `repl::replica`), or, with `NO ONE`, stops following one and is a master.
fn replicaof_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    if start.shared.cluster.is_some() {
        return Err(b"ERR REPLICAOF not allowed in cluster mode.".to_vec());
    }
    let (host, port) = (start.args.get(1), start.args.get(2));
    let target = match host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        true => None,
        false => {
            let port = goblin_protocol::parse_i64(port).and_then(|p| u16::try_from(p).ok());
            let port = port.ok_or_else(|| b"ERR Invalid master port".to_vec())?;
            Some((String::from_utf8_lossy(host).into_owned(), port))
        }
    };
    Ok(Box::new(ReplicaOf {
        target,
        who: format!(
            "user request from '{}'",
            start
                .client
                .map(|c| c.info_line(start.now))
                .unwrap_or_default()
        ),
        at_once: start.locked,
        hold: Default::default(),
        promoted: false,
        keep: None,
        cluster: false,
    }))
}

/// The master followed, in the configuration in force: what CONFIG GET and CONFIG
/// REWRITE say of `replicaof` (empty: none).
pub(crate) fn remember_master(shared: &crate::runtime::server::Shared, value: &str) {
    let Some(i) = crate::config::inert::find("replicaof") else {
        return;
    };
    let mut next = shared.live().clone();
    if let Some(slot) = next.inert.get_mut(i) {
        *slot = value.to_string();
    }
    shared.set_live(next);
}

/// REPLICAOF's plan. On a replica whose link is up it first has the link hold its
/// stream (`Follow::hold`), parked on the clock meanwhile: what the server applied is
/// then all in its stream, so the history it goes on with — its own once promoted, or
/// the one it asks its next master to continue — is exactly its data's.
#[derive(Debug)]
struct ReplicaOf {
    /// The master to follow; `None`: NO ONE.
    target: Option<(String, u16)>,
    /// Who asked, as the log says it (`user request from '<client>'`).
    who: String,
    /// Inside MULTI or a script: no waiting.
    at_once: bool,
    hold: crate::repl::replica::HoldRequest,
    /// Promoted: the shards were told to feed the stream; the reply is due.
    promoted: bool,
    /// A replica's connection kept when promoted (the PSYNC FAILOVER of the master
    /// handing over); the others sync again.
    keep: Option<crate::runtime::msg::ConnRef>,
    /// Cluster mode's: the target is the cluster view's master, read as it acts.
    cluster: bool,
}

impl Plan for ReplicaOf {
    fn next(&mut self, cx: &PlanCx<'_>, _results: Vec<HopOut>) -> Step {
        if self.promoted {
            return cx.done(|e| e.ok());
        }
        let (shared, follow) = (cx.shared, &cx.shared.follow);
        if let Some(c) = shared.cluster.as_deref().filter(|_| self.cluster) {
            let want = c.lock().following();
            if want.holds(follow) {
                self.hold.release();
                return cx.done(|e| e.ok());
            }
            self.target = match want {
                crate::cluster::Following::Master(host, port) => Some((host, port)),
                _ => None,
            };
        }
        if let Some((host, port)) = &self.target
            && follow.follows(host, *port)
        {
            crate::log!(
                Notice,
                "REPLICAOF would result into synchronization with the master we are already \
                 connected with. No operation performed."
            );
            return cx.done(|e| e.simple(b"OK Already connected to specified master"));
        }
        if !self.at_once && follow.connected() && !self.hold.ready(follow) {
            return Step::Park(Park::internal(Duration::from_millis(1)));
        }
        // (The link stops before it is let go: it applies nothing more.)
        let replid = shared.replication_id();
        let who = &self.who;
        match self.target.take() {
            None => {
                if follow.stop() {
                    // A new history begins here, continuing the master's, as
                    // redis-server's shiftReplicationId; the replicas are told of it by
                    // syncing again, which continues from here.
                    shared.repl.promote(replid);
                    shared.new_replication_id();
                    if shared.cluster.is_none() {
                        remember_master(shared, "");
                    }
                    crate::repl::replica::drop_replicas_but(shared, self.keep);
                    crate::log!(Notice, "MASTER MODE enabled ({who})");
                    // Every shard feeds the stream from here, before the reply: a write
                    // made after it is in the stream.
                    self.hold.release();
                    self.promoted = true;
                    let hops = (0..cx.slots.shards()).map(|shard| {
                        Hop::run(shard, |ctx| {
                            ctx.feed_replicas();
                            HopOut::Flag(true)
                        })
                    });
                    return Step::Hops(hops.collect());
                }
            }
            Some((host, port)) => {
                let mine = shared.repl.history(replid, follow.selected_db());
                follow.start(shared, &host, port, Some(mine));
                if shared.cluster.is_none() {
                    remember_master(shared, &format!("{host} {port}"));
                    crate::log!(Notice, "REPLICAOF {host}:{port} enabled ({who})");
                }
            }
        }
        self.hold.release();
        cx.done(|e| e.ok())
    }
}

/// `WAIT numreplicas timeout`: how many replicas acknowledged every write made before
/// it — at once when that is enough (or inside MULTI or a script), else once enough have
/// or `timeout` milliseconds pass (0: never; CLIENT UNBLOCK ends it). While it waits,
/// the replicas are asked for an acknowledgement (`REPLCONF GETACK *`).
fn wait_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    if start.shared.follow.active.load(Ordering::SeqCst) {
        return Err(b"ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.".to_vec());
    }
    let args = start.args;
    let replicas = goblin_protocol::parse_i64(args.get(1))
        .ok_or_else(|| crate::errors::NOT_INTEGER.to_vec())?;
    let timeout = goblin_protocol::parse_i64(args.get(2))
        .ok_or_else(|| b"ERR timeout is not an integer or out of range".to_vec())?;
    let timeout = u64::try_from(timeout).map_err(|_| b"ERR timeout is negative".to_vec())?;
    Ok(Box::new(WaitPlan {
        replicas,
        offset: start.shared.repl.offset.load(Ordering::SeqCst),
        deadline: (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout)),
        at_once: start.locked,
        asked: false,
    }))
}

/// How often a WAIT looks at the replicas' acknowledgements.
const WAIT_LOOK: Duration = Duration::from_millis(5);

/// WAIT's plan: looks at the acknowledgements, parked on the clock between looks.
#[derive(Debug)]
struct WaitPlan {
    replicas: i64,
    /// The offset of the writes before it.
    offset: i64,
    deadline: Option<Instant>,
    /// Inside MULTI or a script: it answers at once.
    at_once: bool,
    /// The replicas were asked for an acknowledgement.
    asked: bool,
}

impl Plan for WaitPlan {
    fn next(&mut self, cx: &PlanCx<'_>, _results: Vec<HopOut>) -> Step {
        let acked = cx.shared.repl.acked(self.offset);
        let now = Instant::now();
        let over = self.deadline.is_some_and(|d| now >= d);
        if self.at_once || acked as i64 >= self.replicas || over || cx.unblocked {
            return cx.done(|e| e.integer(acked as i64));
        }
        if !self.asked && cx.shared.repl.count() > 0 {
            self.asked = true;
            cx.shared.repl.getack.store(true, Ordering::SeqCst);
        }
        let look = match self.deadline {
            Some(d) => WAIT_LOOK.min(d.saturating_duration_since(now)),
            None => WAIT_LOOK,
        };
        Step::Park(Park::clock(look))
    }
}
