//! What a standalone redis-server without modules or replicas answers, answered the same:
//! MODULE (no module is ever loaded), REPLICAOF / SLAVEOF (a master that stays one) and
//! WAIT (no replica ever acknowledges: 0, after the timeout when one was asked for).

use std::time::Duration;

use crate::config::Allow;
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{CrossShard, HopOut, Locking, Park, Plan, PlanCx, PlanStart, Step};

/// Registers MODULE, REPLICAOF, SLAVEOF and WAIT.
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
    table.add(&meta::REPLICAOF, Exec::Conn(replicaof));
    table.add(&meta::SLAVEOF, Exec::Conn(replicaof));
    table.add(
        &meta::WAIT,
        Exec::Plan(CrossShard {
            plan: wait_plan,
            locking: Locking::InHops,
        }),
    );
}

const MODULE_NOT_ALLOWED: &[u8] = b"ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

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

/// Whether `enable-module-command` lets this client load and unload modules.
fn module_allowed(ctx: &ConnCtx<'_>) -> bool {
    match ctx.shared.config.enable_module_command {
        Allow::Yes => true,
        Allow::No => false,
        Allow::Local => ctx.client.origin.is_local(),
    }
}

/// `MODULE LOAD path [arg ...]`, `MODULE LOADEX path …`: refused as redis-server refuses
/// them by default; where allowed, the load fails (Goblin loads no module), as a module
/// that cannot be loaded fails in redis-server.
fn module_load(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if !module_allowed(ctx) {
        ctx.reply().error(MODULE_NOT_ALLOWED);
        return;
    }
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
    if !module_allowed(ctx) {
        ctx.reply().error(MODULE_NOT_ALLOWED);
        return;
    }
    ctx.reply()
        .error(b"ERR Error unloading module: no such module with that name");
}

/// `REPLICAOF host port`, `SLAVEOF host port`: `NO ONE` keeps this server a master (it is
/// one); Goblin does not replicate, so a master's address is refused — after the port is
/// checked as redis-server checks it.
fn replicaof(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let (host, port) = (args.get(1), args.get(2));
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        ctx.reply().ok();
        return;
    }
    let valid_port = goblin_protocol::parse_i64(port).is_some_and(|p| (0..=65535).contains(&p));
    if !valid_port {
        ctx.reply().error(b"ERR Invalid master port");
        return;
    }
    ctx.reply()
        .error(b"ERR Goblin does not replicate: REPLICAOF and SLAVEOF take only NO ONE");
}

/// `WAIT numreplicas timeout`: no replica acknowledges, so 0 — at once when none is
/// asked for (or inside MULTI), else once `timeout` milliseconds pass (0: never; CLIENT
/// UNBLOCK ends it), as redis-server without replicas does.
fn wait_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let replicas = goblin_protocol::parse_i64(args.get(1))
        .ok_or_else(|| crate::errors::NOT_INTEGER.to_vec())?;
    let timeout = goblin_protocol::parse_i64(args.get(2))
        .ok_or_else(|| b"ERR timeout is not an integer or out of range".to_vec())?;
    let timeout = u64::try_from(timeout).map_err(|_| b"ERR timeout is negative".to_vec())?;
    Ok(Box::new(WaitPlan {
        waits: replicas > 0,
        timeout: (timeout > 0).then(|| Duration::from_millis(timeout)),
        parked: false,
    }))
}

/// WAIT's plan: park on nothing but the clock, then answer 0.
#[derive(Debug)]
struct WaitPlan {
    /// Replicas were asked for: it waits.
    waits: bool,
    timeout: Option<Duration>,
    parked: bool,
}

impl Plan for WaitPlan {
    fn next(&mut self, cx: &PlanCx<'_>, _results: Vec<HopOut>) -> Step {
        if self.waits && !self.parked {
            self.parked = true;
            return Step::Park(Park {
                keys: Vec::new(),
                timeout: self.timeout,
            });
        }
        cx.done(|e| e.integer(0))
    }
}
