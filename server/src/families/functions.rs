//! Functions (Redis 7.0): FUNCTION LOAD, DELETE, FLUSH, RESTORE, LIST, DUMP, STATS,
//! KILL, HELP; FCALL and FCALL_RO run as EVAL does (`families/scripting.rs`), a
//! library's function in place of a script.
//!
//! **Writes.** A change to the libraries is made on shard 0 (a plan's one hop), which
//! records the command in its log: one log holds every change, in order, and a replay
//! makes them again. Snapshots hold the libraries' codes (`persist/snapshot.rs`).

use goblin_protocol::Encoder;

use super::scripting::{Callee, Invocation, check_flags};
use crate::runtime::server::Shared;
use crate::scripting::functions::{ENGINE, Functions, RestorePolicy};
use crate::scripting::{FLAG_NAMES, ScriptFlags};
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{CrossShard, Hop, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step};

/// Registers FUNCTION (FCALL and FCALL_RO are registered with EVAL).
pub fn register(table: &mut CommandTable) {
    let write = Exec::Plan(CrossShard {
        plan: write_plan,
        locking: Locking::InHops,
    });
    table.add_container(
        &meta::FUNCTION,
        Exec::Container,
        &[
            ("load", None, write),
            ("delete", None, write),
            ("flush", None, write),
            ("restore", None, write),
            ("list", None, Exec::Conn(function_list)),
            ("dump", None, Exec::Conn(function_dump)),
            ("stats", None, Exec::Conn(function_stats)),
            ("kill", None, Exec::Conn(function_kill)),
            ("help", None, Exec::Conn(function_help)),
        ],
    );
}

/// Parses `FCALL function numkeys key… arg…` (and FCALL_RO) with redis-server's errors
/// in its order (`fcallCommandGeneric`).
pub(crate) fn fcall_invocation<'a>(
    shared: &Shared,
    read_only: bool,
    args: &Args<'a>,
    obeyed: bool,
) -> Result<Invocation<'a>, Vec<u8>> {
    let f = shared
        .functions
        .find(args.get(1))
        .ok_or_else(|| b"ERR Function not found".to_vec())?;
    let numkeys = goblin_protocol::parse_i64(args.get(2))
        .ok_or_else(|| b"ERR Bad number of keys provided".to_vec())?;
    if numkeys > args.len() as i64 - 3 {
        return Err(b"ERR Number of keys can't be greater than number of args".to_vec());
    }
    if numkeys < 0 {
        return Err(b"ERR Number of keys can't be negative".to_vec());
    }
    let flags = f.def().flags;
    check_flags(shared, flags, read_only, obeyed)?;
    let n = numkeys as usize;
    Ok(Invocation {
        read_only: read_only || flags.has(ScriptFlags::NO_WRITES),
        callee: Callee::Function(f),
        keys: (0..n).map(|i| args.get(3 + i)).collect(),
        argv: (3 + n..args.len()).map(|i| args.get(i)).collect(),
    })
}

/// What a write to the libraries answers: a library's name (LOAD) or OK.
enum Done {
    Name(Vec<u8>),
    Ok,
}

/// Makes the change `args` asks for (FUNCTION LOAD, DELETE, FLUSH or RESTORE), as
/// redis-server checks it; the error text otherwise.
fn apply(functions: &Functions, args: &[Vec<u8>]) -> Result<Done, Vec<u8>> {
    let sub = args
        .get(1)
        .map(|s| s.to_ascii_lowercase())
        .unwrap_or_default();
    let arg = |i: usize| args.get(i).map_or(&b""[..], Vec::as_slice);
    match sub.as_slice() {
        b"load" => {
            let mut replace = false;
            let mut at = 2;
            while at + 1 < args.len() {
                let opt = arg(at);
                at += 1;
                if opt.eq_ignore_ascii_case(b"replace") {
                    replace = true;
                    continue;
                }
                let mut e = b"ERR Unknown option given: ".to_vec();
                e.extend_from_slice(crate::errors::c_str(opt));
                return Err(e);
            }
            let Some(code) = args.get(at) else {
                return Err(b"ERR Function code is missing".to_vec());
            };
            functions.load(code, replace).map(Done::Name)
        }
        b"delete" => functions.delete(arg(2)).map(|()| Done::Ok),
        b"flush" => {
            if args.len() > 3 {
                return Err(crate::errors::subcommand_syntax(arg(0), arg(1)));
            }
            if let Some(mode) = args.get(2)
                && !mode.eq_ignore_ascii_case(b"sync")
                && !mode.eq_ignore_ascii_case(b"async")
            {
                return Err(b"ERR FUNCTION FLUSH only supports SYNC|ASYNC option".to_vec());
            }
            functions.flush();
            Ok(Done::Ok)
        }
        b"restore" => {
            if args.len() > 4 {
                return Err(crate::errors::subcommand_syntax(arg(0), arg(1)));
            }
            let policy = match args.get(3) {
                None => RestorePolicy::Append,
                Some(p) if p.eq_ignore_ascii_case(b"append") => RestorePolicy::Append,
                Some(p) if p.eq_ignore_ascii_case(b"replace") => RestorePolicy::Replace,
                Some(p) if p.eq_ignore_ascii_case(b"flush") => RestorePolicy::Flush,
                Some(_) => {
                    return Err(b"ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.".to_vec());
                }
            };
            let codes = goblin_store::rdb::undump_functions(arg(2)).map_err(|e| {
                let mut m = b"ERR ".to_vec();
                m.extend_from_slice(e.as_bytes());
                m
            })?;
            functions.restore(&codes, policy).map(|()| Done::Ok)
        }
        _ => Err(b"ERR unknown FUNCTION subcommand".to_vec()),
    }
}

/// Replays a logged FUNCTION command (at start-up).
pub(crate) fn replay(shared: &Shared, args: &Args<'_>) -> Result<(), String> {
    let argv: Vec<Vec<u8>> = args.iter_from(0).map(<[u8]>::to_vec).collect();
    match apply(&shared.functions, &argv) {
        Ok(_) => Ok(()),
        Err(e) => {
            // What failed when it ran was not logged; what fails now is reported.
            crate::log!(
                Warning,
                "a logged FUNCTION command failed again: {}",
                String::from_utf8_lossy(&e)
            );
            Ok(())
        }
    }
}

/// The plan of FUNCTION LOAD, DELETE, FLUSH and RESTORE: one hop to shard 0, which
/// changes the libraries and logs the command.
#[derive(Debug)]
struct WritePlan {
    args: Vec<Vec<u8>>,
    sent: bool,
}

fn write_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(WritePlan {
        args: start.args.iter_from(0).map(<[u8]>::to_vec).collect(),
        sent: false,
    }))
}

impl Plan for WritePlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if !self.sent {
            self.sent = true;
            let args = std::mem::take(&mut self.args);
            let resp = cx.resp;
            let functions = std::sync::Arc::clone(&cx.shared.functions);
            return Step::Hops(vec![Hop::run(0, move |ctx| {
                let mut out = Vec::new();
                let mut enc = Encoder::new(&mut out, resp);
                match apply(&functions, &args) {
                    Ok(done) => {
                        match done {
                            Done::Name(name) => enc.bulk(&name),
                            Done::Ok => enc.ok(),
                        }
                        if ctx.logging() {
                            let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                            ctx.log(&argv);
                            ctx.keyless_write();
                        }
                    }
                    Err(e) => enc.error_sanitized(&e),
                }
                HopOut::Reply(out)
            })]);
        }
        match results.into_iter().next() {
            Some(HopOut::Reply(reply)) => {
                if !reply.starts_with(b"-") {
                    // A change, for the save rules (redis-server's `dirty++`).
                    cx.shared
                        .persist
                        .dirty
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Step::Done(Outcome::Reply(reply))
            }
            _ => cx.done(|out| out.error(b"ERR internal error: no reply from shard 0")),
        }
    }
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`
fn function_list(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        if !with_code && a.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && a.eq_ignore_ascii_case(b"libraryname") {
            if i + 1 >= args.len() {
                ctx.reply()
                    .error(b"ERR library name argument was not given");
                return;
            }
            i += 1;
            pattern = Some(args.get(i));
        } else {
            let mut e = b"ERR Unknown argument ".to_vec();
            e.extend_from_slice(crate::errors::c_str(a));
            ctx.reply().error_sanitized(&e);
            return;
        }
        i += 1;
    }
    let libraries: Vec<_> = ctx.shared.functions.read(|r| {
        r.libraries()
            .filter(|l| pattern.is_none_or(|p| crate::util::glob_match(p, &l.name, true)))
            .cloned()
            .collect()
    });
    let mut out = ctx.reply();
    out.array(libraries.len());
    for lib in libraries {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(&lib.name);
        out.bulk(b"engine");
        out.bulk(ENGINE.as_bytes());
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for f in &lib.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(&f.name);
            out.bulk(b"description");
            match &f.description {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names: Vec<&str> = FLAG_NAMES
                .iter()
                .filter(|(_, bit)| f.flags.has(*bit))
                .map(|(n, _)| *n)
                .collect();
            out.set(names.len());
            for n in names {
                out.simple(n.as_bytes());
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
}

/// `FUNCTION DUMP`
fn function_dump(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let codes = ctx.shared.functions.codes();
    let payload = goblin_store::rdb::dump_functions(&codes);
    ctx.reply().bulk(&payload);
}

/// `FUNCTION STATS`: the busy script, when one runs (as it described itself: a script
/// run as a plan does not), and the libraries.
fn function_stats(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    stats_reply(ctx.shared, &mut ctx.reply());
}

/// FUNCTION STATS's reply (also the busy script's thread's, `runtime/standin.rs`).
pub(crate) fn stats_reply(shared: &Shared, out: &mut Encoder<'_>) {
    let (libraries, functions) = shared
        .functions
        .read(|r| (r.libraries().count(), r.function_count()));
    if crate::scripting::busy_eval() {
        // A busy EVAL script: refused, as redis-server's `functionStatsCommand` does.
        return out.error(crate::errors::BUSY_SCRIPT);
    }
    let running = crate::scripting::running().filter(|_| crate::scripting::busy());
    out.map(2);
    out.bulk(b"running_script");
    match running {
        None => out.null(),
        Some(run) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(&run.name);
            out.bulk(b"command");
            out.array(run.command.len());
            for word in &run.command {
                out.bulk(word);
            }
            out.bulk(b"duration_ms");
            out.integer(run.started.elapsed().as_millis() as i64);
        }
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(ENGINE.as_bytes());
    out.map(2);
    out.bulk(b"libraries_count");
    out.integer(libraries as i64);
    out.bulk(b"functions_count");
    out.integer(functions as i64);
}

/// `FUNCTION KILL`: as SCRIPT KILL (a busy function or script that did not write stops).
fn function_kill(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    super::scripting::kill_command(ctx, false);
}

/// `FUNCTION HELP`
fn function_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    super::reply_help(
        ctx,
        &[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
            "HELP",
            "    Prints this help.",
        ],
    );
}
