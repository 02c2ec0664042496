//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (LOAD, EXISTS, FLUSH,
//! KILL, HELP), on the interpreter of `crate::scripting`.
//!
//! **Where a script runs.** A script declares its keys (KEYS); they route it like any
//! command's keys. All on one shard (or none): it runs there, with the whole shard
//! (`on_shard`), and each command it calls is a command of that shard — a unit of work of
//! its own, with its own key events, notifications and log record, so that the log holds
//! the script's effects, never the script. Keys on several shards: its plan runs it
//! under the lock protocol with every declared key locked, and each command it calls
//! travels to the shard that owns its keys.
//!
//! **Undeclared keys.** A script may touch keys it does not declare, as in redis-server.
//! With more than one shard, one whose code may (`scripting::may_stray`) runs with every
//! shard locked whole, unless its declared keys are tagged together
//! (`scripting::strays_with`); so does one that declares no key, once it calls a command
//! with keys; so does every script and function when `lua-allow-undeclared-keys` or its
//! flag (`#!lua flags=allow-undeclared-keys`) allows undeclared keys. Otherwise a
//! script may touch undeclared keys of its own shard, and gets a clear error for others.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use goblin_protocol::{Encoder, Version};
use goblin_store::Millis;

use crate::errors;
use crate::runtime::msg::TxRef;
use crate::runtime::server::Shared;
use crate::scripting::engine::library::with_function_engine;
use crate::scripting::engine::{Called, Engine, with_engine};
use crate::scripting::functions::LibFunction;
use crate::scripting::{
    Script, ScriptFlags, Sha, calls_every_shard, may_stray, sha_arg, sha_of, shebang, strays_with,
};
use crate::shard::Shard;
use crate::table::handler::{Args, ConnCtx, Exec, OnShard, ShardCtx};
use crate::table::{CommandSpec, CommandTable, Flags, meta};

/// `NOSCRIPT`, as redis-server answers a SHA1 it does not know.
pub const NOSCRIPT: &[u8] = b"NOSCRIPT No matching script. Please use EVAL.";

/// Registers the scripting commands.
pub fn register(table: &mut CommandTable) {
    for meta in [
        &meta::EVAL,
        &meta::EVALSHA,
        &meta::EVAL_RO,
        &meta::EVALSHA_RO,
        &meta::FCALL,
        &meta::FCALL_RO,
    ] {
        table
            .add(meta, Exec::Shard(never_alone))
            .on_shard(run_script)
            .plan_if(needs_whole_keyspace)
            .cross_shard(plan::script_plan, crate::txn::plan::Locking::Keys);
    }
    table.add_container(
        &meta::SCRIPT,
        Exec::Container,
        &[
            ("load", None, Exec::Conn(script_load)),
            ("exists", None, Exec::Conn(script_exists)),
            ("flush", None, Exec::Conn(script_flush)),
            ("kill", None, Exec::Conn(script_kill)),
            ("debug", None, Exec::Conn(script_debug)),
            ("help", None, Exec::Conn(script_help)),
        ],
    );
}

/// A script command's handler as a plain shard command: never called (its `on_shard`
/// runs instead); answered anyway.
fn never_alone(ctx: &mut ShardCtx<'_>, _args: &Args<'_>) {
    ctx.out
        .error(b"ERR internal error: a script ran as a plain command");
}

/// Which of the four commands it is.
#[derive(Clone, Copy, Debug)]
struct Kind {
    by_sha: bool,
    read_only: bool,
}

fn kind(name: &str) -> Kind {
    Kind {
        by_sha: name.starts_with("evalsha"),
        read_only: name.ends_with("_ro"),
    }
}

/// What an invocation runs: a script (EVAL, EVALSHA), or a library's function (FCALL).
#[derive(Clone, Debug)]
pub(crate) enum Callee {
    Script(Arc<Script>),
    Function(LibFunction),
}

impl Callee {
    /// Runs `f` with this thread's interpreter for it (the scripts' or the functions').
    pub fn with_engine<R>(&self, shared: &Shared, f: impl FnOnce(&mut Engine) -> R) -> Option<R> {
        match self {
            Callee::Script(_) => with_engine(shared.scripts.generation(), f),
            Callee::Function(_) => with_function_engine(f),
        }
    }

    /// What its errors name: the script's SHA1, or the function's name.
    pub fn who(&self) -> &[u8] {
        match self {
            Callee::Script(s) => &s.sha,
            Callee::Function(f) => &f.def().name,
        }
    }

    /// The Lua function to run, with the keys and arguments it gets as globals: the
    /// compiled script with `KEYS` and `ARGV`, or the function called with its keys and
    /// arguments (no globals).
    pub fn runnable<'k>(
        &self,
        shared: &Shared,
        engine: &mut Engine,
        keys: &'k [&'k [u8]],
        argv: &'k [&'k [u8]],
    ) -> Result<Runnable<'k>, Vec<u8>> {
        match self {
            Callee::Script(s) => Ok((engine.function(&s.sha, s.code())?, keys, argv)),
            Callee::Function(f) => {
                let func = engine.library_function(f, shared.functions.generation())?;
                let run = engine
                    .call_with(func, keys, argv)
                    .map_err(|e| format!("ERR Error running script {e}").into_bytes())?;
                Ok((run, &[], &[]))
            }
        }
    }

    /// Whether a run with these declared keys must have every shard locked, because it
    /// may touch undeclared keys of any shard: a script's whose code may
    /// ([`may_stray`]), with several shards, outside cluster mode, unless its keys are
    /// tagged together ([`strays_with`]). (A function declares its keys, or says with
    /// its flags that it does not.) So must one whose code calls a command that reads
    /// every shard ([`Callee::every_shard`]), even with one shard: its plan runs that
    /// command.
    pub fn strays_with<'k>(
        &self,
        shared: &Shared,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) -> bool {
        self.every_shard()
            || match self {
                Callee::Script(s) => {
                    s.may_stray
                        && shared.threads > 1
                        && shared.cluster.is_none()
                        && strays_with(keys).unwrap_or(false)
                }
                Callee::Function(_) => false,
            }
    }

    /// Whether its code calls a command of every shard (INFO, KEYS, FLUSHALL…:
    /// [`crate::scripting::calls_every_shard`]).
    pub fn every_shard(&self) -> bool {
        match self {
            Callee::Script(s) => s.every_shard,
            Callee::Function(f) => f.library.every_shard,
        }
    }

    /// Its flags.
    pub fn flags(&self) -> ScriptFlags {
        match self {
            Callee::Script(s) => s.flags,
            Callee::Function(f) => f.def().flags,
        }
    }

    /// Whether its calls may grow memory over `maxmemory` (Redis's `scriptVerifyOOM`):
    /// it is `allow-oom`, or it has written already (`wrote`: it cannot stop halfway).
    pub fn oom_free(&self, wrote: bool) -> bool {
        wrote || self.flags().has(ScriptFlags::ALLOW_OOM)
    }
}

/// What [`Callee::runnable`] gives: the function to run, and the keys and arguments it
/// gets as globals.
pub(crate) type Runnable<'k> = (mlua::Function, &'k [&'k [u8]], &'k [&'k [u8]]);

/// A parsed invocation: the script, its keys and arguments.
pub(crate) struct Invocation<'a> {
    pub callee: Callee,
    pub keys: Vec<&'a [u8]>,
    pub argv: Vec<&'a [u8]>,
    pub read_only: bool,
}

/// Parses `EVAL script numkeys key… arg…` (and the others) and finds or loads the script,
/// with redis-server's errors in its order.
pub(crate) fn invocation<'a>(
    shared: &Shared,
    name: &str,
    args: &Args<'a>,
    obeyed: bool,
) -> Result<Invocation<'a>, Vec<u8>> {
    if name.starts_with("fcall") {
        return super::functions::fcall_invocation(shared, name.ends_with("_ro"), args, obeyed);
    }
    let kind = kind(name);
    let numkeys =
        goblin_protocol::parse_i64(args.get(2)).ok_or_else(|| errors::NOT_INTEGER.to_vec())?;
    let rest = args.len() as i64 - 3;
    if numkeys > rest {
        return Err(b"ERR Number of keys can't be greater than number of args".to_vec());
    }
    if numkeys < 0 {
        return Err(b"ERR Number of keys can't be negative".to_vec());
    }
    let script = if kind.by_sha {
        let sha = sha_arg(args.get(1)).ok_or_else(|| NOSCRIPT.to_vec())?;
        shared.scripts.get(&sha).ok_or_else(|| NOSCRIPT.to_vec())?
    } else {
        load(shared, args.get(1))?
    };
    let n = numkeys as usize;
    let keys: Vec<&[u8]> = (0..n).map(|i| args.get(3 + i)).collect();
    let argv: Vec<&[u8]> = (3 + n..args.len()).map(|i| args.get(i)).collect();
    check_flags(shared, script.flags, kind.read_only, obeyed)?;
    Ok(Invocation {
        read_only: kind.read_only || script.flags.has(ScriptFlags::NO_WRITES),
        callee: Callee::Script(script),
        keys,
        argv,
    })
}

/// Whether `spec` (with `args`) writes or is propagated, as CLIENT PAUSE WRITE asks
/// ([`command_flags`]).
pub(crate) fn pause_writes(shared: &Shared, spec: &CommandSpec, args: &Args<'_>) -> bool {
    spec.flags.writes_or_propagates() && command_flags(shared, spec, args).writes_or_propagates()
}

/// A command's flags as Redis's `getCommandFlags` gives them: the flags a script or
/// function declares decide those of EVAL, EVALSHA, FCALL and their `_RO` forms
/// (`scriptFlagsToCmdFlags`: `write` unless `no-writes`, `stale` with `allow-stale`, and
/// no `may_replicate`); without a shebang, or not found, they are the command's own.
pub(crate) fn command_flags(shared: &Shared, spec: &CommandSpec, args: &Args<'_>) -> Flags {
    let declared = match spec.name {
        "eval" | "eval_ro" => shared
            .scripts
            .get(&sha_of(args.get(1)))
            .map(|s| s.flags)
            .or_else(|| shebang(args.get(1)).ok().map(|(f, _)| f)),
        "evalsha" | "evalsha_ro" => sha_arg(args.get(1))
            .and_then(|sha| shared.scripts.get(&sha))
            .map(|s| s.flags),
        "fcall" | "fcall_ro" => shared.functions.find(args.get(1)).map(|f| f.def().flags),
        _ => return spec.flags,
    };
    match declared {
        Some(f) if !f.has(ScriptFlags::EVAL_COMPAT) => spec
            .flags
            .with(Flags::WRITE, !f.has(ScriptFlags::NO_WRITES))
            .with(Flags::STALE, f.has(ScriptFlags::ALLOW_STALE))
            .with(Flags::MAY_REPLICATE, false),
        _ => spec.flags,
    }
}

/// `scriptPrepareForRun`'s checks of a script's (or function's) flags; a replayed log's
/// (`obeyed`) runs whatever the replica's state or the disk's.
pub(crate) fn check_flags(
    shared: &Shared,
    flags: ScriptFlags,
    read_only: bool,
    obeyed: bool,
) -> Result<(), Vec<u8>> {
    let stale = shared.follow.stale() && !obeyed;
    if !flags.has(ScriptFlags::EVAL_COMPAT)
        && flags.has(ScriptFlags::NO_CLUSTER)
        && shared.cluster.is_some()
    {
        return Err(b"ERR Can not run script on cluster, 'no-cluster' flag is set.".to_vec());
    }
    if flags.has(ScriptFlags::EVAL_COMPAT) && stale {
        return Err(errors::MASTERDOWN.to_vec());
    }
    if !flags.has(ScriptFlags::EVAL_COMPAT) && stale && !flags.has(ScriptFlags::ALLOW_STALE) {
        return Err(
            b"MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to \
                     'no' and 'allow-stale' flag is not set on the script."
                .to_vec(),
        );
    }
    if !flags.has(ScriptFlags::EVAL_COMPAT) && !flags.has(ScriptFlags::NO_WRITES) {
        if shared.only_master_writes() && !obeyed {
            return Err(
                b"READONLY Can not run script with write flag on readonly replica".to_vec(),
            );
        }
        if let Some(refusal) = shared.persist.write_refusal().filter(|_| !obeyed) {
            return Err(refusal);
        }
        if read_only {
            return Err(
                b"ERR Can not execute a script with write flag using *_ro command.".to_vec(),
            );
        }
        if !shared.follow.active.load(Ordering::Relaxed) && shared.repl.too_few_for_writes() {
            return Err(errors::NOREPLICAS.to_vec());
        }
    }
    // (`no-writes` implies `allow-oom`, as in redis-server.)
    if !flags.has(ScriptFlags::EVAL_COMPAT)
        && !flags.has(ScriptFlags::ALLOW_OOM)
        && !flags.has(ScriptFlags::NO_WRITES)
        && shared.memory.maxmemory() > 0
        && crate::memory::counted() > shared.memory.maxmemory()
    {
        return Err(b"OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".to_vec());
    }
    Ok(())
}

/// The cached script of `body`, loaded (checked, compiled on this thread) if new.
pub(crate) fn load(shared: &Shared, body: &[u8]) -> Result<Arc<Script>, Vec<u8>> {
    let sha = sha_of(body);
    if let Some(script) = shared.scripts.get(&sha) {
        return Ok(script);
    }
    let (flags, code_at) = shebang(body)?;
    let script = Arc::new(Script {
        sha,
        body: body.to_vec(),
        code_at,
        flags,
        may_stray: may_stray(&body[code_at.min(body.len())..], &shared.commands),
        every_shard: calls_every_shard(&body[code_at.min(body.len())..], &shared.commands),
    });
    let generation = shared.scripts.generation();
    with_engine(generation, |engine| {
        engine.function(&sha, script.code()).map(|_| ())
    })
    .unwrap_or_else(|| Err(b"ERR the Lua interpreter could not start".to_vec()))?;
    shared.scripts.insert(Arc::clone(&script));
    Ok(script)
}

/// Whether a script may touch keys it does not declare.
fn undeclared_allowed(shared: &Shared, flags: ScriptFlags) -> bool {
    shared.scripts.undeclared_allowed() || flags.has(ScriptFlags::ALLOW_UNDECLARED)
}

/// `plan_if`: a script that may touch undeclared keys needs every shard (when there
/// are several), which only its plan can lock ([`reaches_every_shard`]); so may one that
/// declares no key (it runs here first, and is given up for its plan once it calls a
/// command with keys: `run_script`). With one shard, only one whose code calls a
/// command of every shard ([`calls_every_shard`]) needs its plan.
fn needs_whole_keyspace(shared: &Shared, args: &Args<'_>) -> bool {
    (shared.threads > 1 && args.get(2) == b"0" && shared.cluster.is_none())
        || reaches_every_shard(shared, args, false)
}

/// What the code of an invocation's script (or function) may reach, as far as reading
/// it tells.
#[derive(Clone, Copy, Default)]
struct Reach {
    /// It may touch any key: its flags or the server's allow undeclared keys.
    allowed: bool,
    /// It may touch undeclared keys ([`may_stray`]).
    strays: bool,
    /// It calls a command of every shard ([`calls_every_shard`]).
    every_shard: bool,
}

/// [`Reach`] of an invocation: of the function FCALL names (its library's), the cached
/// script EVALSHA names, or EVAL's body. None when there is none such (its run
/// answers the error).
fn reach(shared: &Shared, args: &Args<'_>) -> Option<Reach> {
    let allowed = shared.scripts.undeclared_allowed();
    if args.get(0).len() >= 5 && args.get(0)[..5].eq_ignore_ascii_case(b"fcall") {
        let f = shared.functions.find(args.get(1))?;
        // (A function declares its keys: it strays only with its flag.)
        return Some(Reach {
            allowed: allowed || f.def().flags.has(ScriptFlags::ALLOW_UNDECLARED),
            strays: false,
            every_shard: f.library.every_shard,
        });
    }
    if args.get(0).len() >= 7 && args.get(0)[..7].eq_ignore_ascii_case(b"evalsha") {
        let s = sha_arg(args.get(1)).and_then(|sha| shared.scripts.get(&sha))?;
        return Some(Reach {
            allowed: allowed || s.flags.has(ScriptFlags::ALLOW_UNDECLARED),
            strays: s.may_stray,
            every_shard: s.every_shard,
        });
    }
    let body = args.get(1);
    // A script whose shebang asks for it (reading the shebang alone).
    let flagged = body.starts_with(b"#!")
        && shebang(body).is_ok_and(|(f, _)| f.has(ScriptFlags::ALLOW_UNDECLARED));
    let mut reach = body_reach(shared, body);
    reach.allowed = allowed || flagged;
    Some(reach)
}

/// Whether a script (or function) may touch undeclared keys of any shard, as far as is
/// known before it runs: it is allowed to, or its code may stray from its declared keys
/// (outside cluster mode: [`Callee::strays_with`]) — when it declares none, only if
/// `keyless` (where it cannot run on a shard first and be given up for its plan) — with
/// several shards; or, with any number, it calls a command of every shard.
fn reaches_every_shard(shared: &Shared, args: &Args<'_>, keyless: bool) -> bool {
    let several = shared.threads > 1;
    let Some(reach) = reach(shared, args) else {
        return several && shared.scripts.undeclared_allowed();
    };
    if reach.every_shard || !several {
        return reach.every_shard;
    }
    // With its code straying: its declared keys, tagged together, may keep it on their
    // shard (none: `keyless` decides).
    let keys_stray = || {
        let n = goblin_protocol::parse_i64(args.get(2))
            .filter(|&n| n > 0 && n <= args.len() as i64 - 3)
            .unwrap_or(0) as usize;
        strays_with((3..3 + n).map(|i| args.get(i))).unwrap_or(keyless)
    };
    reach.allowed || (shared.cluster.is_none() && reach.strays && keys_stray())
}

/// Bodies seen by EVAL's routing, by their hash: the body, and what its code may reach.
type Bodies = std::collections::HashMap<u64, (Box<[u8]>, Reach), foldhash::fast::FixedState>;

thread_local! {
    /// EVAL's routing: what the code of the bodies it saw lately may reach, so that an
    /// EVAL pays a hash of its body, not its SHA1 and the script cache's lock.
    static BODIES: std::cell::RefCell<Bodies> = const {
        std::cell::RefCell::new(std::collections::HashMap::with_hasher(
            foldhash::fast::FixedState::with_seed(0),
        ))
    };
}

/// Bodies [`BODIES`] remembers per thread before it starts again (at most 4 MiB).
const BODIES_KEPT: usize = 256;

/// The longest body [`BODIES`] keeps a copy of; a longer one is found in the script
/// cache by its SHA1 (which its run computes anyway).
const BODY_KEPT_MAX: usize = 16 * 1024;

/// [`Reach`] of an EVAL's body, remembered.
fn body_reach(shared: &Shared, body: &[u8]) -> Reach {
    use std::hash::BuildHasher;
    let read = |body: &[u8]| Reach {
        allowed: false,
        strays: may_stray(body, &shared.commands),
        every_shard: calls_every_shard(body, &shared.commands),
    };
    if body.len() > BODY_KEPT_MAX {
        return shared.scripts.get(&sha_of(body)).map_or_else(
            || read(body),
            |s| Reach {
                allowed: false,
                strays: s.may_stray,
                every_shard: s.every_shard,
            },
        );
    }
    let hash = foldhash::fast::FixedState::with_seed(0).hash_one(body);
    BODIES.with_borrow_mut(|seen| {
        if let Some((known, reach)) = seen.get(&hash)
            && **known == *body
        {
            return *reach;
        }
        let reach = read(body);
        if seen.len() >= BODIES_KEPT {
            seen.clear();
        }
        seen.insert(hash, (body.into(), reach));
        reach
    })
}

/// EXEC: whether a queued script (or function call) runs under its plan though its
/// declared keys are on one shard, because it may touch keys of any shard (EXEC runs
/// it where it cannot be given up for its plan), or (with one shard too) it calls a
/// command of every shard.
pub(crate) fn needs_every_shard(shared: &Shared, spec: &CommandSpec, args: &Args<'_>) -> bool {
    (spec.name.starts_with("eval") || spec.name.starts_with("fcall"))
        && reaches_every_shard(shared, args, true)
}

/// Whether a command a script calls is one of every shard: keyless and run by a plan
/// across the shards (INFO, KEYS, SCAN, DBSIZE, RANDOMKEY; FLUSHDB, FLUSHALL, SWAPDB: a
/// script's plan runs it when every shard is locked; `crate::scripting::calls_every_shard`
/// looks for them in the code).
pub(crate) fn every_shard_command(spec: &CommandSpec) -> bool {
    matches!(spec.exec, Exec::Plan(_))
        && !spec.flags.contains(Flags::NOSCRIPT)
        && matches!(
            spec.key_finder.shape(),
            crate::table::keys::KeyShape::Keyless
        )
}

/// The error for a key a script did not declare.
pub(crate) fn undeclared_key(key: &[u8]) -> Vec<u8> {
    let mut e = b"ERR Script attempted to access key '".to_vec();
    e.extend_from_slice(key);
    e.extend_from_slice(
        b"' that it did not declare in KEYS (declare every key, or allow undeclared keys \
          with the script flag allow-undeclared-keys or lua-allow-undeclared-keys yes)",
    );
    e
}

/// A script's command refused before it ran: the error, and the command's id when it
/// names one (its `rejected_calls`, as Redis counts a refusal in `scriptCall`).
pub(crate) type Refusal = (Option<usize>, Vec<u8>);

/// What a script's command is checked against before it runs: Redis's checks
/// (`luaRedisGenericCommand`, `scriptCall`), in its order, and then the permissions of
/// the user who runs the script (`caller`, when restricted). `Ok` with the command. A
/// replayed log's script is `obeyed` (Redis's `mustObeyClient`): a read-only or stale
/// replica, or too few replicas, refuse none of its writes.
pub(crate) fn check_call<'t>(
    shared: &'t Shared,
    caller: Option<&crate::acl::Caller>,
    argv: &Args<'_>,
    read_only: bool,
    now: u64,
    obeyed: bool,
) -> Result<&'t CommandSpec, Refusal> {
    let spec = check_command(&shared.commands, argv)?;
    let refused = |e: &[u8]| Err((Some(spec.id), e.to_vec()));
    // On a replica whose link is down, as on its connections (`MASTERDOWN`).
    if !spec.flags.contains(Flags::STALE) && shared.follow.stale() && !obeyed {
        return refused(b"ERR Can not execute the command on a stale replica");
    }
    if let Some(caller) = caller
        && let Some(e) = caller.check(&shared.acl, spec, argv, now)
    {
        return Err((Some(spec.id), e));
    }
    // (PUBLISH and PFCOUNT are propagated like writes: `may_replicate`, which COMMAND
    // INFO hides.)
    let propagates = spec.flags.contains(Flags::WRITE) || spec.flags.contains(Flags::MAY_REPLICATE);
    if read_only && propagates {
        return refused(b"ERR Write commands are not allowed from read-only scripts.");
    }
    if spec.flags.contains(Flags::WRITE) && !obeyed {
        if shared.only_master_writes() {
            return refused(errors::READONLY_REPLICA);
        }
        // Too few replicas in touch (`min-replicas-to-write`).
        let replica = shared.follow.active.load(Ordering::Relaxed);
        if !replica && shared.repl.too_few_for_writes() {
            return refused(errors::NOREPLICAS);
        }
    }
    Ok(spec)
}

/// [`check_call`]'s checks of the command itself.
fn check_command<'t>(table: &'t CommandTable, argv: &Args<'_>) -> Result<&'t CommandSpec, Refusal> {
    let spec = match table.resolve(argv) {
        Ok(spec) => spec,
        Err(rejection) => {
            return Err(match rejection.spec {
                None => (
                    None,
                    b"ERR Unknown Redis command called from script".to_vec(),
                ),
                Some(id) => (
                    Some(id),
                    b"ERR Wrong number of args calling Redis command from script".to_vec(),
                ),
            });
        }
    };
    let refused = |e: &[u8]| Err((Some(spec.id), e.to_vec()));
    if spec.flags.contains(Flags::NOSCRIPT) && !crate::scripting::deny_disabled() {
        return refused(b"ERR This Redis command is not allowed from script");
    }
    // A script does not block: XREAD and XREADGROUP refuse BLOCK there (their options
    // come before STREAMS), with `xreadCommand`'s words.
    if matches!(spec.name, "xread" | "xreadgroup")
        && (1..argv.len().saturating_sub(1))
            .map(|i| argv.get(i))
            .take_while(|a| !a.eq_ignore_ascii_case(b"STREAMS"))
            .any(|a| a.eq_ignore_ascii_case(b"BLOCK"))
    {
        return refused(
            format!(
                "ERR {} command is not allowed with BLOCK option from scripts",
                spec.name
            )
            .as_bytes(),
        );
    }
    Ok(spec)
}

/// A keyless command a script may call that runs on the connection's thread elsewhere:
/// answered here — PING, ECHO, TIME, DEBUG PROTOCOL and SLEEP; any other that runs on a
/// connection (COMMAND, LASTSAVE, SLOWLOG, PUBSUB NUMSUB, the HELPs…) runs on a client
/// of its own, as redis-server runs a script's commands on its fake client; `None` for
/// others.
pub(crate) fn keyless_reply(
    shared: &Shared,
    spec: &CommandSpec,
    argv: &Args<'_>,
    resp: Version,
    now: Millis,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    if let Exec::Conn(handler) = spec.exec
        && !matches!(spec.name, "ping" | "echo" | "time")
    {
        on_script_client(shared, handler, argv, resp, now, &mut out);
        return Some(out);
    }
    let mut enc = Encoder::new(&mut out, resp);
    match spec.name {
        // DEBUG PROTOCOL's sample replies and DEBUG SLEEP (Redis's tests of a script's
        // RESP parsing and frozen clock call them); DEBUG's other subcommands are not
        // one shard's.
        "debug" if argv.len() == 3 && argv.get(1).eq_ignore_ascii_case(b"protocol") => {
            crate::families::debug::protocol(&mut enc, &argv.get(2).to_ascii_lowercase())
        }
        "debug" if argv.len() == 3 && argv.get(1).eq_ignore_ascii_case(b"sleep") => {
            crate::families::debug::script_sleep(argv.get(2));
            enc.ok()
        }
        "ping" if argv.len() == 1 => enc.simple(b"PONG"),
        "ping" => enc.bulk(argv.get(1)),
        "echo" => enc.bulk(argv.get(1)),
        "time" => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            enc.array(2);
            enc.bulk(now.as_secs().to_string().as_bytes());
            enc.bulk(now.subsec_micros().to_string().as_bytes());
        }
        _ => return None,
    }
    Some(out)
}

/// Runs a connection's command for a script, on a client of the default user that
/// lives for the call (what it changes of its client is lost, as of redis-server's
/// script client), with a subscription index and publications of its own (the commands
/// a script may call read neither).
fn on_script_client(
    shared: &Shared,
    handler: crate::table::handler::ConnFn,
    argv: &Args<'_>,
    resp: Version,
    now: Millis,
    out: &mut Vec<u8>,
) {
    use crate::runtime::client::Client;
    use crate::runtime::pubsub::{Hub, Local, Outbound};
    let mut client = Client::new(
        0,
        crate::runtime::net::Origin::None,
        now,
        shared.acl.default_user(),
    );
    client.resp = resp;
    let (mut local, mut outbound) = (Local::default(), Outbound::default());
    let mut ctx = ConnCtx {
        client: &mut client,
        shared,
        out,
        now,
        hub: Hub {
            local: &mut local,
            out: &mut outbound,
            repl: None,
            me: crate::runtime::msg::ConnRef {
                worker: 0,
                key: usize::MAX,
                generation: 0,
            },
        },
    };
    handler(&mut ctx, argv);
}

/// The error for a command Goblin cannot run inside a script.
pub(crate) fn unsupported(spec: &CommandSpec) -> Vec<u8> {
    format!(
        "ERR '{}' cannot be called from a script in Goblin (it is not a command of one shard)",
        spec.name
    )
    .into_bytes()
}

/// `on_shard`: runs a script whose declared keys are all on this shard.
fn run_script(
    shard: &mut Shard,
    shared: &Shared,
    call: &OnShard<'_, '_>,
    out: &mut Vec<u8>,
) -> bool {
    let inv = match invocation(shared, call.spec.name, call.args, shard.replaying()) {
        Ok(inv) => inv,
        Err(e) => {
            Encoder::new(out, call.resp).error_sanitized(&e);
            return false;
        }
    };
    let allowed = undeclared_allowed(shared, inv.callee.flags());
    if call.may_wait
        && ((allowed && shared.threads > 1)
            || inv.callee.strays_with(shared, inv.keys.iter().copied()))
    {
        // It may reach any shard: its plan runs it with every shard locked. (One that
        // declares no key runs here first, below.)
        return true;
    }
    // A script that declares no key runs here until it calls a command with keys (all
    // of them undeclared, maybe on other shards): it is then given up, having changed
    // nothing, and started again under its plan, with every shard locked.
    let restartable = call.may_wait && inv.keys.is_empty() && shared.threads > 1;
    let at = out.len();
    let fed_at = shard.monitor_feed.len();
    let restart = run_here(
        shard,
        shared,
        (&inv, call.args),
        Run {
            db: call.db,
            now: call.now,
            resp: call.resp,
            tx: call.tx,
            allowed,
            restartable,
        },
        out,
    );
    if restart {
        // Its run under the plan shows again what it called.
        out.truncate(at);
        shard.monitor_feed.truncate(fed_at);
    }
    restart
}

/// What a run given up for its plan answers the calls it still makes (never seen: the
/// run's reply is thrown away).
const RUN_AGAIN: &[u8] = b"ERR the script is run again";

/// How a script runs on a shard.
struct Run {
    db: usize,
    now: Millis,
    resp: Version,
    tx: Option<TxRef>,
    /// Undeclared keys are allowed (`lua-allow-undeclared-keys`, or the script's flag).
    allowed: bool,
    /// It may be given up for its plan (see [`run_script`]) when it calls a command
    /// with keys, or one of every shard.
    restartable: bool,
}

/// Runs a script on this shard: its commands run here, one unit of work each. A key it
/// does not declare is used if this shard owns it and no transaction holds it (as Redis
/// Cluster lets a script use undeclared keys of its node's slots; in cluster mode only
/// with undeclared keys allowed). True when the run was given up, having changed
/// nothing, to run again under its plan: `run.restartable`, and it called a command
/// with keys before it wrote anything.
fn run_here(
    shard: &mut Shard,
    shared: &Shared,
    (inv, command): (&Invocation<'_>, &Args<'_>),
    run: Run,
    out: &mut Vec<u8>,
) -> bool {
    let Run {
        db,
        now,
        resp,
        tx,
        allowed,
        restartable,
    } = run;
    let reachable_allowed = allowed || shared.cluster.is_none();
    let mut db = db;
    let mut wrote = false;
    let mut restart = false;
    let caller = shard.script_caller.clone();
    let obeyed = shard.replaying();
    shard.set_in_script(true);
    let ran = crate::scripting::engine::with_caller(caller.as_ref(), || {
        inv.callee.with_engine(shared, |engine| {
            let (func, keys, argv) = match inv.callee.runnable(shared, engine, &inv.keys, &inv.argv)
            {
                Ok(f) => f,
                Err(e) => {
                    Encoder::new(out, resp).error_sanitized(&e);
                    return;
                }
            };
            let mut call = |a: &Args<'_>, cresp: Version, reply: &mut Vec<u8>| -> Called {
                if a.is_empty() {
                    // Asked what runs (it is turning busy): its function and command.
                    describe(inv, command, reply);
                    return Called::Reply;
                }
                if restart {
                    // Given up: nothing more runs (a script catching the error goes on, and
                    // its run is thrown away).
                    return Called::Refused(RUN_AGAIN.to_vec());
                }
                {
                    let checked =
                        check_call(shared, caller.as_deref(), a, inv.read_only, now, obeyed);
                    let spec = match checked {
                        Ok(spec) => spec,
                        Err((id, e)) => {
                            if let Some(id) = id {
                                shard.count_rejected(id);
                            }
                            shard.count_error_text(&e);
                            return Called::Refused(e);
                        }
                    };
                    shard.count_call(spec.id);
                    // MONITOR shows what the script calls as redis-server shows it: from
                    // its Lua client, in the database it ran in (SELECT's new one).
                    let monitored = shared.monitors.any() && crate::runtime::monitor::shown(spec);
                    let monitor = |shard: &mut Shard, db: usize| {
                        if monitored {
                            let argv: Vec<&[u8]> = a.iter_from(0).collect();
                            crate::runtime::monitor::line(
                                &mut shard.monitor_feed,
                                db,
                                "lua",
                                &argv,
                            );
                        }
                    };
                    if spec.name != "select" {
                        monitor(shard, db);
                    }
                    match spec.exec {
                        Exec::Shard(_) => {}
                        _ if spec.name == "select" => {
                            return match goblin_protocol::parse_i64(a.get(1))
                                .ok_or_else(|| errors::NOT_INTEGER.to_vec())
                                .and_then(|n| {
                                    super::select_db(n, shared.config.databases).map_err(Vec::from)
                                }) {
                                Ok(n) => {
                                    db = n;
                                    monitor(shard, db);
                                    reply.extend_from_slice(b"+OK\r\n");
                                    Called::Reply
                                }
                                Err(e) => {
                                    monitor(shard, db);
                                    // A failed call, in errorstats, as a command's error
                                    // (the script passes it on as counted).
                                    shard.count_failed(spec.id);
                                    shard.count_error_text(&e);
                                    Encoder::new(reply, cresp).error(&e);
                                    Called::Reply
                                }
                            };
                        }
                        _ if matches!(spec.name, "publish" | "spublish") => {
                            let (out, feed) = shard.publications_and_feed();
                            let at = crate::families::pubsub::Publishing {
                                db: db as u16,
                                in_script: true,
                                repl: crate::scripting::engine::run_repl(),
                            };
                            let argv = [a.get(0), a.get(1), a.get(2)];
                            let n = crate::families::pubsub::publish_command(
                                shared, out, feed, argv, at,
                            );
                            wrote = true;
                            Encoder::new(reply, cresp).integer(n as i64);
                            return Called::Reply;
                        }
                        // A command of every shard, called by a script that
                        // declares no key (its name not read in its code): given up, to
                        // run again under its plan, where every shard is locked.
                        _ if restartable && !wrote && every_shard_command(spec) => {
                            shard.uncount_call(spec.id);
                            restart = true;
                            return Called::Refused(RUN_AGAIN.to_vec());
                        }
                        _ => {
                            return match keyless_reply(shared, spec, a, cresp, now) {
                                Some(r) => {
                                    reply.extend_from_slice(&r);
                                    Called::Reply
                                }
                                None => {
                                    let e = unsupported(spec);
                                    shard.count_error_text(&e);
                                    Called::Refused(e)
                                }
                            };
                        }
                    }
                    let mut refused = None;
                    let mut keyed = false;
                    spec.for_each_key_position(a, |i| {
                        let key = a.get(i);
                        keyed = true;
                        if inv.keys.contains(&key) {
                            return;
                        }
                        if refused.is_none()
                            && !(reachable_allowed && shard.may_touch_undeclared(key, tx))
                        {
                            refused = Some(if allowed {
                                other_shard_key(key)
                            } else {
                                undeclared_key(key)
                            });
                        }
                    });
                    if keyed && restartable && !wrote {
                        // Every key it touches is undeclared: under its plan, with every
                        // shard locked, it may reach them all, whatever it writes first.
                        // (Where the plan's run calls it again, and counts it.)
                        shard.uncount_call(spec.id);
                        restart = true;
                        return Called::Refused(RUN_AGAIN.to_vec());
                    }
                    if let Some(e) = refused {
                        shard.count_error_text(&e);
                        return Called::Refused(e);
                    }
                    let version = shard.slots().version();
                    // Over `maxmemory`, the shard refuses a command that may grow memory
                    // unless the script may (`Callee::oom_free`).
                    shard.script_oom_free = inv.callee.oom_free(wrote);
                    shard.script_repl = crate::scripting::engine::run_repl();
                    shard.execute(shared, spec, a, db, now, reply, cresp, tx, version);
                    shard.script_repl = crate::scripting::engine::REPL_ALL;
                    shard.script_oom_free = false;
                    if spec.flags.contains(Flags::WRITE) {
                        wrote = true;
                        Called::Wrote
                    } else {
                        Called::Reply
                    }
                }
            };
            let busy_after = shared.scripts.busy_after();
            engine.run(
                &func,
                inv.callee.who(),
                keys,
                argv,
                resp,
                busy_after,
                &mut call,
                out,
            );
        })
    });
    // What its reply's errors count (left to the generic count when it has none noted).
    let errors = crate::scripting::convert::take_reply_errors();
    if !restart && !errors.is_empty() {
        shard.script_errors = Some(errors);
    }
    shard.set_in_script(false);
    if ran.is_none() {
        Encoder::new(out, resp).error(b"ERR the Lua interpreter could not start");
    }
    restart
}

/// What `inv` runs, for FUNCTION STATS (which shows only functions): its name (a
/// script's SHA1) and its `command`, as an array.
fn describe(inv: &Invocation<'_>, command: &Args<'_>, out: &mut Vec<u8>) {
    let mut enc = Encoder::new(out, Version::Resp2);
    enc.array(1 + command.len());
    enc.bulk(inv.callee.who());
    for word in command.iter_from(0) {
        enc.bulk(word);
    }
}

/// The error for an undeclared key a script may touch but cannot reach from where it
/// runs (another shard's, or one another transaction holds).
pub(crate) fn other_shard_key(key: &[u8]) -> Vec<u8> {
    let mut e = b"ERR Script attempted to access key '".to_vec();
    e.extend_from_slice(key);
    e.extend_from_slice(
        b"', which it did not declare and which is out of its reach here (inside MULTI, \
          declare every key the script touches)",
    );
    e
}

/// `SCRIPT LOAD script`
fn script_load(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    match load(ctx.shared, args.get(2)) {
        Ok(script) => ctx.reply().bulk(&script.sha),
        Err(e) => ctx.reply().error_sanitized(&e),
    }
}

/// `SCRIPT EXISTS sha…`
fn script_exists(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let scripts = &ctx.shared.scripts;
    let known: Vec<bool> = args
        .iter_from(2)
        .map(|a| sha_arg(a).is_some_and(|s: Sha| scripts.contains(&s)))
        .collect();
    let mut out = ctx.reply();
    out.array(known.len());
    for k in known {
        out.integer(i64::from(k));
    }
}

/// `SCRIPT FLUSH [ASYNC|SYNC]`
fn script_flush(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let ok = match args.len() {
        2 => true,
        3 => args.is(2, "sync") || args.is(2, "async"),
        _ => false,
    };
    if !ok {
        ctx.reply()
            .error(b"ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        return;
    }
    ctx.shared.scripts.flush();
    ctx.reply().ok();
}

/// `SCRIPT KILL`: stops the scripts running past `busy-reply-threshold` that did not
/// write (asked from another thread than theirs, which their hook checks).
pub(crate) fn script_kill(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    kill_command(ctx, true);
}

/// SCRIPT KILL (`eval`) or FUNCTION KILL.
pub(crate) fn kill_command(ctx: &mut ConnCtx<'_>, eval: bool) {
    match crate::scripting::kill(eval).error() {
        None => ctx.reply().ok(),
        Some(error) => ctx.reply().error(error),
    }
}

/// `SCRIPT DEBUG YES|SYNC|NO`: the Lua debugger is not part of Goblin.
fn script_debug(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.is(2, "no") {
        ctx.reply().ok();
    } else if args.is(2, "yes") || args.is(2, "sync") {
        ctx.reply()
            .error(b"ERR Goblin does not have the Lua debugger (SCRIPT DEBUG)");
    } else {
        ctx.reply().error(b"ERR Use SCRIPT DEBUG YES/SYNC/NO");
    }
}

/// `SCRIPT HELP`
fn script_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    super::reply_help(
        ctx,
        &[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "HELP",
            "    Prints this help.",
        ],
    );
}

/// The plan of a script whose keys span shards, or that may touch keys it does not
/// declare (with every shard locked): the script runs on the coordinator's thread as a
/// coroutine, suspended in each command it calls while the command runs on the shard
/// that owns its keys, under the transaction's locks.
pub(crate) mod plan {
    use goblin_protocol::{Encoder, Version};

    use super::{
        Callee, check_call, invocation, keyless_reply, undeclared_allowed, undeclared_key,
        unsupported,
    };
    use crate::errors;
    use crate::runtime::msg::Batch;
    use crate::scripting::engine::library::with_function_engine;
    use crate::scripting::engine::{Engine, Resume, Stepped, with_engine};
    use crate::table::handler::{Args, Exec};
    use crate::txn::plan::{Hop, HopOut, Outcome, Plan, PlanCx, PlanStart, Step, Tally};

    /// A script's run under a plan.
    #[derive(Debug)]
    pub struct ScriptPlan {
        callee: Callee,
        keys: Vec<Vec<u8>>,
        argv: Vec<Vec<u8>>,
        read_only: bool,
        /// Every shard is locked: any key may be reached.
        whole: bool,
        /// The interpreter generation it started in.
        generation: u64,
        /// Its coroutine on this thread's interpreter, once started.
        run: Option<u64>,
        /// The plan of a command it called whose keys span shards, with the protocol
        /// the script reads its reply in.
        sub: Option<(Box<dyn Plan>, Version)>,
        /// Who runs it, when that user's permissions are restricted.
        caller: Option<std::sync::Arc<crate::acl::Caller>>,
        /// The command that runs it (EVAL, FCALL …), whose failed calls its reply's
        /// errors make.
        command: usize,
        /// It has called a write command (then no longer refused over `maxmemory`).
        dirty: std::cell::Cell<bool>,
        /// A write command it called ran since it was last resumed (SCRIPT KILL can
        /// no longer stop it).
        wrote: std::cell::Cell<bool>,
    }

    /// Where a command a script calls runs.
    enum Routed {
        /// On one shard.
        Hop(Hop),
        /// As its own plan, its keys on several shards (locked already).
        Sub(Box<dyn Plan>),
        /// Nowhere: answered at once.
        Answer(Resume),
    }

    /// Makes the plan.
    pub fn script_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
        let inv = invocation(start.shared, start.spec.name, start.args, false)?;
        // A script that declares no key runs with every shard locked: what it touches
        // it names itself (`run_script` gives such a run up for this plan).
        // So does one whose code may stray from its keys (`Callee::strays_with`).
        // So does one that calls a command of every shard, even with one shard.
        let whole = inv.callee.every_shard()
            || (start.shared.threads > 1
                && (undeclared_allowed(start.shared, inv.callee.flags())
                    || (inv.keys.is_empty() && start.shared.cluster.is_none())
                    || inv
                        .callee
                        .strays_with(start.shared, inv.keys.iter().copied())));
        let generation = match &inv.callee {
            Callee::Script(_) => start.shared.scripts.generation(),
            Callee::Function(_) => start.shared.functions.generation(),
        };
        Ok(Box::new(ScriptPlan {
            keys: inv.keys.iter().map(|k| k.to_vec()).collect(),
            argv: inv.argv.iter().map(|a| a.to_vec()).collect(),
            read_only: inv.read_only,
            whole,
            generation,
            run: None,
            sub: None,
            callee: inv.callee,
            caller: start.caller.clone(),
            command: start.spec.id,
            dirty: std::cell::Cell::new(false),
            wrote: std::cell::Cell::new(false),
        }))
    }

    impl Drop for ScriptPlan {
        fn drop(&mut self) {
            if let Some(id) = self.run.take() {
                self.engine(|e| e.forget(id));
            }
        }
    }

    impl ScriptPlan {
        /// Runs `f` with this thread's interpreter for the script (or function), of the
        /// generation it started in.
        fn engine<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> Option<R> {
            crate::scripting::engine::with_caller(self.caller.as_ref(), || match self.callee {
                Callee::Script(_) => with_engine(self.generation, f),
                Callee::Function(_) => with_function_engine(f),
            })
        }

        /// Where the command the script calls runs: a hop, or an answer at once.
        fn route(&self, cx: &PlanCx<'_>, argv: &[Vec<u8>], resp: Version, repl: u8) -> Routed {
            match self.route_inner(cx, argv, resp, repl) {
                Ok(routed) => routed,
                Err(answer) => {
                    // Refused before it ran: counted in errorstats now, as Redis's
                    // `scriptCall` counts it (the script's reply does not count it again).
                    if let Resume::Refused(e) = &answer {
                        cx.calls.borrow_mut().push(Tally::Error(
                            crate::table::handler::ErrorCode::of_message(e),
                        ));
                    }
                    Routed::Answer(answer)
                }
            }
        }

        fn route_inner(
            &self,
            cx: &PlanCx<'_>,
            argv: &[Vec<u8>],
            resp: Version,
            repl: u8,
        ) -> Result<Routed, Resume> {
            Args::with_owned(argv, |a| {
                let caller = self.caller.as_deref();
                let spec = match check_call(cx.shared, caller, a, self.read_only, cx.now, false) {
                    Ok(spec) => spec,
                    Err((id, e)) => {
                        cx.calls.borrow_mut().extend(id.map(Tally::Rejected));
                        return Err(Resume::Refused(e));
                    }
                };
                // Over `maxmemory`, a command that may grow memory is refused unless
                // the script may (`Callee::oom_free`), as the shard refuses it to a
                // script run there: its hops run in the transaction, where the shard
                // does not check.
                if spec.flags.contains(crate::table::Flags::DENYOOM)
                    && !self.callee.oom_free(self.dirty.get())
                    && cx.shared.memory.maxmemory() > 0
                    && crate::memory::counted() > cx.shared.memory.maxmemory()
                {
                    cx.calls.borrow_mut().push(Tally::Rejected(spec.id));
                    return Err(Resume::Refused(errors::OOM.to_vec()));
                }
                // Counted as a run on a shard counts it (`run_here`).
                cx.calls.borrow_mut().push(Tally::Call(spec.id));
                if spec.flags.contains(crate::table::Flags::WRITE) {
                    self.wrote.set(true);
                    self.dirty.set(true);
                }
                // MONITOR shows the call as a run on a shard does (`run_here`).
                let monitored = cx.shared.monitors.any() && crate::runtime::monitor::shown(spec);
                let monitor = |db: usize| {
                    if monitored {
                        let argv: Vec<&[u8]> = a.iter_from(0).collect();
                        crate::runtime::monitor::plan_line(db, "lua", &argv);
                    }
                };
                if spec.name != "select" {
                    monitor(cx.db());
                }
                match spec.exec {
                    Exec::Shard(_) => {}
                    Exec::Plan(cross) if self.whole && super::every_shard_command(spec) => {
                        // Its own plan, every shard locked already (the script's).
                        return self.sub_plan(cx, spec, a, cross, resp);
                    }
                    _ if spec.name == "select" => {
                        let db = goblin_protocol::parse_i64(a.get(1))
                            .ok_or_else(|| errors::NOT_INTEGER.to_vec())
                            .and_then(|n| {
                                crate::families::select_db(n, cx.shared.config.databases)
                                    .map_err(Vec::from)
                            });
                        let mut reply = Vec::new();
                        match db {
                            Ok(db) => {
                                cx.select(db);
                                monitor(db);
                                Encoder::new(&mut reply, resp).ok();
                            }
                            Err(e) => {
                                monitor(cx.db());
                                // (Counted as on a shard, above.)
                                let mut calls = cx.calls.borrow_mut();
                                calls.push(Tally::ReplyErrors(spec.id, 1));
                                calls.push(Tally::Error(
                                    crate::table::handler::ErrorCode::of_message(&e),
                                ));
                                Encoder::new(&mut reply, resp).error(&e);
                            }
                        }
                        return Err(Resume::Reply(reply));
                    }
                    _ if matches!(spec.name, "publish" | "spublish") => {
                        // Published from the first shard: the script's publications go
                        // out in order.
                        self.wrote.set(true);
                        let argv = a.iter_from(0).map(<[u8]>::to_vec).collect();
                        return Ok(Routed::Hop(Hop::publish(0, argv, repl)));
                    }
                    _ => {
                        return Err(match keyless_reply(cx.shared, spec, a, resp, cx.now) {
                            Some(r) => Resume::Reply(r),
                            None => Resume::Refused(unsupported(spec)),
                        });
                    }
                }
                let mut shard = None;
                let mut several = false;
                let mut refusal = None;
                spec.for_each_key_position(a, |i| {
                    let key = a.get(i);
                    if refusal.is_some() {
                        return;
                    }
                    if !self.whole && !self.keys.iter().any(|k| k.as_slice() == key) {
                        refusal = Some(undeclared_key(key));
                        return;
                    }
                    let s = cx.slots.shard_of_key(key);
                    match shard {
                        None => shard = Some(s),
                        Some(t) if t != s => several = true,
                        Some(_) => {}
                    }
                });
                if let Some(e) = refusal {
                    return Err(Resume::Refused(e));
                }
                // A command whose own keys are on one shard but that may read others (a
                // SORT whose BY or GET patterns name keys anywhere) runs as its plan too,
                // when the script holds every shard.
                if several
                    || (self.whole && crate::families::sort::sorts_elsewhere(cx.shared, spec, a))
                {
                    // Its own plan, with every key locked already (the script's).
                    let Some(cross) = spec.cross_shard else {
                        return Err(Resume::Refused(errors::no_plan(spec.name)));
                    };
                    return self.sub_plan(cx, spec, a, cross, resp);
                }
                let mut batch = Box::<Batch>::default();
                batch.resp = resp;
                batch.by_script = true;
                batch.script_repl = repl;
                batch.push(spec.id, a);
                // A keyless command of a shard (none usually): the first shard.
                let shard = shard.unwrap_or(0);
                Ok(Routed::Hop(Hop::commands(shard, batch)))
            })
        }
    }

    impl ScriptPlan {
        /// The plan of a command the script called that runs as its own (its keys on
        /// several shards, or a command of every shard), under the script's locks.
        fn sub_plan(
            &self,
            cx: &PlanCx<'_>,
            spec: &crate::table::CommandSpec,
            a: &Args<'_>,
            cross: crate::txn::plan::CrossShard,
            resp: Version,
        ) -> Result<Routed, Resume> {
            let start = PlanStart {
                shared: cx.shared,
                spec,
                args: a,
                slots: cx.slots,
                now: cx.now,
                locked: true,
                db: cx.db(),
                databases: cx.shared.config.databases,
                local_client: true,
                by_script: true,
                caller: self.caller.clone(),
                conn: None,
                master: false,
                client: None,
            };
            match (cross.plan)(&start) {
                Ok(plan) => Ok(Routed::Sub(plan)),
                Err(e) => {
                    let mut reply = Vec::new();
                    Encoder::new(&mut reply, resp).error_sanitized(&e);
                    Err(Resume::Reply(reply))
                }
            }
        }

        /// Steps the plan of a command the script called: its reply, or the step to
        /// take (the plan kept for its results).
        fn step_sub(
            &mut self,
            mut sub: Box<dyn Plan>,
            resp: Version,
            cx: &PlanCx<'_>,
            results: Vec<HopOut>,
        ) -> Result<Resume, Step> {
            let sub_cx = PlanCx {
                shared: cx.shared,
                slots: cx.slots,
                resp,
                now: cx.now,
                db: std::cell::Cell::new(cx.db()),
                command: std::cell::RefCell::new(None),
                slow: std::cell::RefCell::new(Vec::new()),
                calls: std::cell::RefCell::new(Vec::new()),
                unblocked: false,
                propagated: std::cell::RefCell::new(Vec::new()),
            };
            let step = crate::families::multi::step_without_parking(sub.as_mut(), &sub_cx, results);
            cx.calls.borrow_mut().append(&mut sub_cx.calls.take());
            cx.propagated
                .borrow_mut()
                .append(&mut sub_cx.propagated.take());
            match step {
                Step::Done(Outcome::Reply(reply)) => Ok(Resume::Reply(reply)),
                Step::Done(_) => Err(cx.done(|out| {
                    out.error(b"ERR internal error: a command called by a script answered no reply")
                })),
                step => {
                    self.sub = Some((sub, resp));
                    Err(step)
                }
            }
        }
    }

    impl Plan for ScriptPlan {
        fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
            let mut input = if let Some((sub, resp)) = self.sub.take() {
                match self.step_sub(sub, resp, cx, results) {
                    Ok(input) => input,
                    Err(step) => return step,
                }
            } else {
                match self.run {
                    None => {
                        let started = self.engine(|e| match &self.callee {
                            Callee::Script(script) => {
                                e.start(&script.sha, script.code(), &self.keys, &self.argv, cx.resp)
                            }
                            Callee::Function(f) => e.start_function(
                                f,
                                self.generation,
                                &self.keys,
                                &self.argv,
                                cx.resp,
                            ),
                        });
                        match started {
                            Some(Ok(id)) => {
                                self.run = Some(id);
                                Resume::Start
                            }
                            Some(Err(e)) => return cx.done(|out| out.error_sanitized(&e)),
                            None => {
                                return cx.done(|out| {
                                    out.error(b"ERR the Lua interpreter could not start")
                                });
                            }
                        }
                    }
                    Some(_) => match results.into_iter().next() {
                        Some(HopOut::Reply(reply)) => Resume::Reply(reply),
                        _ => {
                            Resume::Refused(b"ERR internal error: no reply from the shard".to_vec())
                        }
                    },
                }
            };
            let Some(id) = self.run else {
                return cx.done(|out| out.error(b"ERR internal error: the script did not start"));
            };
            loop {
                let busy_after = cx.shared.scripts.busy_after();
                let wrote = self.wrote.take();
                let stepped = self.engine(|e| e.resume(id, input, wrote, busy_after));
                match stepped {
                    None => {
                        return cx
                            .done(|out| out.error(b"ERR the Lua interpreter could not start"));
                    }
                    Some(Stepped::Done(reply)) => {
                        self.run = None;
                        let errors = crate::scripting::convert::take_reply_errors();
                        if !errors.is_empty() {
                            let mut calls = cx.calls.borrow_mut();
                            calls.push(Tally::ReplyErrors(self.command, errors.failed_calls()));
                            calls.extend(errors.new.into_iter().map(Tally::Error));
                        }
                        return Step::Done(Outcome::Reply(reply));
                    }
                    Some(Stepped::Call(argv, resp, repl)) => {
                        match self.route(cx, &argv, resp, repl) {
                            Routed::Hop(hop) => return Step::Hops(vec![hop]),
                            Routed::Answer(answer) => input = answer,
                            Routed::Sub(sub) => match self.step_sub(sub, resp, cx, Vec::new()) {
                                Ok(answer) => input = answer,
                                Err(step) => return step,
                            },
                        }
                    }
                }
            }
        }

        fn whole_shards(&self) -> bool {
            self.whole
        }
    }
}
