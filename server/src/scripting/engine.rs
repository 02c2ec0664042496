//! One Lua interpreter per worker thread, set up as Redis 7.0 sets up its own: the
//! libraries it gives scripts, the `redis` table, a deterministic `math.random`, the
//! globals protected, and the error handler that gives an error its script position.
//!
//! Compiled scripts are kept per thread, by SHA1; the bodies are shared
//! ([`super::Scripts`]), so a script loaded on one connection compiles on first use on
//! any other thread.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use goblin_protocol::{Encoder, Version};
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::Sha;
use super::convert::{error_text, lua_to_reply, reply_to_lua};
use super::libs::{self, INTERNAL, Raise, ScriptError};

mod kept;
pub mod library;
mod runner;
mod untail;

use kept::{Kept, Slot};
pub use runner::Runner;
use runner::{call_runner, with_runner};

/// The chunk name of a script: errors read `user_script:3: …`.
const CHUNK: &str = "@user_script";

/// The globals a script sees (redis-server 7.0's allow list, as the Debian build
/// shows them); every other global of the base library is removed.
const GLOBALS: &[&str] = &[
    "_G",
    "_VERSION",
    "__redis__err__handler",
    "assert",
    "bit",
    "cjson",
    "cmsgpack",
    "collectgarbage",
    "coroutine",
    "error",
    "gcinfo",
    "getmetatable",
    "ipairs",
    "load",
    "loadstring",
    "math",
    "next",
    "pairs",
    "pcall",
    "rawequal",
    "rawget",
    "rawset",
    "redis",
    "select",
    "setmetatable",
    "string",
    "struct",
    "table",
    "tonumber",
    "tostring",
    "type",
    "unpack",
    "xpcall",
];

/// `next`, `pairs`, `getmetatable` and `setmetatable` as scripts see them
/// ([`Engine::readonly_env`]): through a read-only view to its table, refusing to change
/// a read-only table's metatable; Lua's own for any other, their arguments checked here
/// so that a bad one is blamed on the script's line, with Lua's words.
const VIEWS: &str = r#"
local next, pairs, getmetatable, setmetatable, targets, hidden, globals, refuse = ...
local type, select, error, pcall = type, select, error, pcall
-- Lua's bad argument error, blamed on the caller's line (a wrapper's own line otherwise).
local function bad(n, fname, what, count, v)
  local got = count < n and 'no value' or type(v)
  error("bad argument #" .. n .. " to '" .. fname .. "' (" .. what .. " expected, got " .. got .. ")", 3)
end
local function next_(...)
  local t, k = ...
  if type(t) ~= 'table' then bad(1, 'next', 'table', select('#', ...), t) end
  local target = targets[t]
  if target ~= nil then return next(target, k) end
  return next(t, k)
end
local function pairs_(...)
  local t = ...
  if type(t) ~= 'table' then bad(1, 'pairs', 'table', select('#', ...), t) end
  if targets[t] ~= nil then return next_, t, nil end
  return pairs(t)
end
local function getmetatable_(...)
  if select('#', ...) == 0 then error("bad argument #1 to 'getmetatable' (value expected)", 2) end
  local t = ...
  if hidden[t] ~= nil then return nil end
  return getmetatable(t)
end
local function setmetatable_(...)
  local t, mt = ...
  if type(t) ~= 'table' then bad(1, 'setmetatable', 'table', select('#', ...), t) end
  if select('#', ...) < 2 or (mt ~= nil and type(mt) ~= 'table') then
    error("bad argument #2 to 'setmetatable' (nil or table expected)", 2)
  end
  if t == globals or targets[t] ~= nil then return refuse() end
  -- (A table whose metatable has `__metatable`: Lua's refusal, on the caller's line.)
  local ok, r = pcall(setmetatable, t, mt)
  if not ok then error(r, 2) end
  return r
end
return next_, pairs_, getmetatable_, setmetatable_
"#;

/// `pcall` and `xpcall` as scripts see them: Lua's, with a Redis error raised by
/// `redis.call` (a Rust error inside Lua) turned back into the `{err = …}` table Redis
/// raises — `xpcall`'s before its handler sees it.
const PCALL: &str = r#"
local pcall, xpcall, fix, raised = pcall, xpcall, __goblin_fix, __goblin_raised
local function fixed(ok, ...)
  if ok then return ok, ... end
  return fix(ok, (...))
end
return function(...) return fixed(pcall(...)) end,
  function(f, h) return xpcall(f, function(e) return h(raised(e)) end) end
"#;

/// `pcall` and `xpcall` of a script that runs as a coroutine (see [`YIELDING`]). Lua 5.1
/// cannot yield across `pcall`, so the protected function runs as a coroutine of its
/// own: what it yields (the commands it calls) is yielded on to the plan, the replies
/// are passed back to it, and its end or its error ends the call as Lua's would (each
/// resumption a [`COROUTINES`] step, which moves the count hook).
const YIELDING_PCALL: &str = r#"
local create, status, yield, step = coroutine.create, coroutine.status, coroutine.yield, __goblin_step
local unyielding = __goblin_unyielding
local pcall, type, fix, raised = pcall, type, __goblin_fix, __goblin_raised
local select, unpack = select, unpack
-- (Arguments and results cross the coroutine's boundary in a table: a resumption moves
-- 8,000 values at most, where Lua's pcall takes and returns as many as its stack holds.)
local function pack(...) return {n = select('#', ...), ...} end
-- (`unpack(t)` where it can: given one argument, it has room for one more value.)
local function spread(t)
  if t.n == #t then return unpack(t) end
  return unpack(t, 1, t.n)
end
local function finish(co, ok, ...)
  if status(co) == 'dead' then
    if ok then return ok, spread((...)) end
    return ok, ...
  end
  return finish(co, step(co, yield(...)))
end
local function protected(f, ...)
  if type(f) ~= 'function' then return pcall(f, ...) end
  local co = unyielding(create(function(args) return pack(f(spread(args))) end))
  return finish(co, step(co, pack(...)))
end
local function fixed(ok, ...)
  if ok then return ok, ... end
  return fix(ok, (...))
end
return function(...) return fixed(protected(...)) end,
  function(f, h)
    local function handled(ok, ...)
      if ok then return ok, ... end
      return false, h(raised((...)))
    end
    return handled(protected(f))
  end
"#;

/// `coroutine.resume` and `coroutine.wrap` as scripts see them, and the `step` both
/// share. A step moves the count hook ([`hook`]) to the coroutine while it runs and back
/// to its resumer after (mlua's hook runs on one Lua thread at a time), so that a loop
/// inside a coroutine turns busy and can be killed as one outside does. In a script run
/// as a plan, a command called inside a coroutine yields it with the call mark
/// ([`YIELDING`]): the step passes that yield on, up to the plan, and resumes the
/// coroutine with the reply, so that commands work inside coroutines there too. What
/// Lua's would do otherwise: `resume` returns an error `redis.call` raised as the
/// `{err = …}` table Redis raises, and blames a bad argument on the script's line; `wrap`
/// raises the coroutine's error with the caller's position, as Lua's `auxwrap` (a Redis
/// error, `{err = …}`, with the script's position, as Redis's error handler adds it). The
/// coroutines goblin makes stand for what Lua could not yield from (a script run as a
/// plan, the function its `pcall` runs: the last of the chunk's functions marks them):
/// in them `yield` refuses, as Lua 5.1 does, and `running` answers what they stand in
/// (nothing, for the script's own).
const COROUTINES: &str = r#"
local create, resume, status, yield = coroutine.create, coroutine.resume, coroutine.status, coroutine.yield
local running, hook, raised, mark = coroutine.running, __goblin_hook, __goblin_raised, __goblin_call
local raise = __goblin_raise
local type, error, setmetatable, pcall = type, error, setmetatable, pcall
-- The coroutines that stand for what Lua 5.1 could not yield from (a script's run, a
-- protected call's), each with the coroutine it stands in (false: none, the script's).
local standing = setmetatable({}, {__mode = 'k'})
local function current()
  local co = running()
  local stands = standing[co]
  while stands ~= nil do
    if stands == false then return nil end
    co = stands
    stands = standing[co]
  end
  return co
end
local step
local function back(co, ok, ...)
  hook(running())
  if ok and (...) == mark and status(co) == 'suspended' then
    return step(co, yield(...))
  end
  return ok, ...
end
step = function(co, ...)
  hook(co)
  return back(co, resume(co, ...))
end
local function returned(ok, ...)
  if ok then return ok, ... end
  return ok, raised((...))
end
local function unwrapped(ok, ...)
  if ok then return ... end
  local e = raised((...))
  if type(e) == 'table' and type(e.err) == 'string' then return raise(e.err) end
  error(e, 3)
end
return function(co, ...)
    if type(co) ~= 'thread' then error("bad argument #1 to 'resume' (coroutine expected)", 2) end
    return returned(step(co, ...))
  end,
  function(f)
    local made, co = pcall(create, f)
    if not made then error("bad argument #1 to 'wrap' (Lua function expected)", 2) end
    return function(...) return unwrapped(step(co, ...)) end
  end,
  function(...)
    if standing[running()] ~= nil then error('attempt to yield across metamethod/C-call boundary', 0) end
    return yield(...)
  end,
  current,
  step,
  function(co) standing[co] = current() or false return co end
"#;

/// `redis.call` and `redis.pcall` of a script that runs as a coroutine (its keys span
/// shards): each command is yielded, after the call mark (`__goblin_call`, which tells
/// it from a yield of the script's own coroutines), as its number of arguments and a
/// table of them (never as many values: see [`PACK_ABOVE`]), to the plan that runs the script,
/// which resumes it with `true, reply` or `false, error text` — or `nil, error text`
/// when SCRIPT KILL stopped it meanwhile: raised even by `redis.pcall`, as the count
/// hook raises it. (Its `pcall` and `xpcall` are [`YIELDING_PCALL`]'s.)
const YIELDING: &str = r#"
local yield, raise, type, mark, select = coroutine.yield, __goblin_raise, type, __goblin_call, select
local function finish(raising, ok, v)
  if ok then return v end
  if ok == nil then return raise(v) end
  if type(v) == 'table' then
    if raising then return raise(v.err, v.ignore_error_stats_update) end
    return v
  end
  if raising then return raise(v) end
  return {err = v}
end
local call = function(...) return finish(true, yield(mark, select('#', ...), {...})) end
local pcall = function(...) return finish(false, yield(mark, select('#', ...), {...})) end
return call, pcall
"#;

/// `redis.call` and `redis.pcall` of a script run at once: the Rust function given its
/// arguments as they are, or, past [`PACK_ABOVE`] of them, in a table (see
/// [`make_call`]).
const CALL_ARGS: &str = r#"
local call, packed, select = ...
return function(...)
  local n = select('#', ...)
  if n <= __PACK_ABOVE__ then return call(...) end
  return packed(n, {...})
end
"#;

/// More arguments than this reach a Rust function packed in one table: each argument
/// given to a Rust function as it is takes a slot of mlua's reference stack, which holds
/// 8,000 at most and aborts the process when full (see `engine/kept.rs`), and a script
/// may pass about as many (`redis.call('sadd', key, unpack(ARGV))`).
const PACK_ABOVE: usize = 64;

/// `error` in a script run as a coroutine, where no error handler sees what it raises
/// (mlua turns a table into its address): `{err = text}` is raised as `redis.call`'s
/// errors are there, with the position of the script's code; anything else is Lua's
/// `error`, its level counted past this function.
const YIELDING_ERROR: &str = r#"
local error, type, raise = error, type, __goblin_raise
return function(v, level)
  if type(v) == 'table' and type(v.err) == 'string' then
    return raise(v.err, v.ignore_error_stats_update)
  end
  if level == nil then level = 1 end
  if type(level) == 'number' and level > 0 then level = level + 1 end
  return error(v, level)
end
"#;

/// The first byte of a Lua binary chunk (ESC).
const BINARY_SIGNATURE: u8 = 0x1b;

/// `loadstring` and `load` as scripts see them: Lua's, reading every chunk as text, as
/// Redis's Lua does (Lua 5.1 runs crafted bytecode unchecked: CVE-2015-4335). A chunk
/// that starts as bytecode does gets a space before it, so that Lua's lexer refuses it
/// with Redis's words (`unexpected symbol near 'char(27)'`), under the chunk's own name.
const LOADERS: &str = r#"
local loadstring, load, type, byte, select, error, setfenv =
  loadstring, load, type, string.byte, select, error, setfenv
local function text(s) return ' ' .. s end
-- What is loaded sees the scripts' globals (`scripts.env`, once the engine made them).
local scripts = {}
local function within(f, e)
  if f and scripts.env then setfenv(f, scripts.env) end
  return f, e
end
-- Lua's bad argument error, blamed on the script's line.
local function expected(fname, what, n, v)
  local got = n == 0 and 'no value' or type(v)
  error("bad argument #1 to '" .. fname .. "' (" .. what .. " expected, got " .. got .. ")", 3)
end
return function(...)
    local s, name = ...
    local t = type(s)
    if t ~= 'string' and t ~= 'number' then expected('loadstring', 'string', select('#', ...), s) end
    if t == 'string' and byte(s, 1) == 27 then return within(loadstring(text(s), name or s)) end
    return within(loadstring(s, name))
  end,
  function(...)
    local f, name = ...
    if type(f) ~= 'function' then expected('load', 'function', select('#', ...), f) end
    local first = true
    return within(load(function()
      local piece = f()
      if first and type(piece) == 'string' and piece ~= '' then
        first = false
        if byte(piece, 1) == 27 then return text(piece) end
      end
      return piece
    end, name or '=(load)'))
  end,
  scripts
"#;

/// Runs a script's function under the error handler.
const RUNNER: &str = r#"
local xpcall, errh = xpcall, __redis__err__handler
return function(f) return xpcall(f, errh) end
"#;

/// The state of the run in progress that the `redis` functions and the hook read and
/// change.
#[derive(Debug)]
struct RunState {
    /// `redis.setresp`: the protocol the script's commands answer in.
    resp: Version,
    /// When the run started, and `busy-reply-threshold` (ms; 0: never busy).
    started: std::time::Instant,
    busy_after: u64,
    /// SCRIPT KILL's epoch when it started.
    epoch: u64,
    /// It ran past the threshold (and counts as busy).
    busy: bool,
    /// It ran a write command (it can no longer be killed).
    wrote: bool,
    /// It is a function's (FCALL), not a script's.
    function: bool,
    /// The slow script warning was logged (once per run, a suspended run's too).
    warned: bool,
    /// `redis.set_repl`: where its commands' effects go ([`REPL_ALL`]: the log and the
    /// replicas).
    repl: u8,
}

impl RunState {
    fn new() -> RunState {
        RunState {
            resp: Version::Resp2,
            started: std::time::Instant::now(),
            busy_after: 0,
            epoch: 0,
            busy: false,
            wrote: false,
            function: false,
            warned: false,
            repl: REPL_ALL,
        }
    }

    /// The state of a run that begins now: its clock and SCRIPT KILL's epoch, the
    /// protocol of its commands, `busy-reply-threshold`, whether it is a function's.
    fn begun(busy_after: u64, resp: Version, function: bool) -> RunState {
        RunState {
            resp,
            busy_after,
            epoch: super::kill_epoch(),
            function,
            ..RunState::new()
        }
    }

    /// The run ends, or is given up: it no longer counts as busy.
    fn leave(&mut self) {
        if self.busy {
            self.busy = false;
            super::leave_busy(self.wrote, self.function);
        }
    }
}

/// How often (in Lua instructions) a running script checks the time and SCRIPT KILL, as
/// redis-server's count hook.
const HOOK_EVERY: u32 = 100_000;

/// The error that stops a killed script.
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// The count hook: past `busy-reply-threshold` the script counts as busy (other clients
/// get BUSY, SCRIPT KILL may stop it); a script SCRIPT KILL stopped raises its error
/// (at every hook after, so that `pcall` cannot keep it going).
fn hook(lua: &Lua) -> mlua::Result<mlua::VmState> {
    // (A killed run raises its error in the script's code, not in the engine's: its
    // runner must return it.)
    let quick = lua.app_data_ref::<Quick>().is_some();
    if quick
        && lua
            .inspect_stack(0)
            .is_some_and(|d| d.source().source.as_deref() == Some(INTERNAL))
    {
        return Ok(mlua::VmState::Continue);
    }
    let checked = RUN.with(|st| match st.try_borrow_mut() {
        Ok(mut st) => busy_check(&mut st),
        Err(_) => Ok(mlua::VmState::Continue),
    });
    if checked.is_err() && !quick {
        quicken(lua);
    }
    checked
}

/// In an interpreter's app data: its count hook runs at every instruction, a run was
/// killed (taken away as its next run starts, `hook_thread`).
struct Quick;

/// A run SCRIPT KILL (or FUNCTION KILL) stopped: the count hook at every instruction, so
/// that its error is raised again as soon as a `pcall` that caught it returns (Redis's
/// hook then runs at every line), on the Lua thread that runs.
fn quicken(lua: &Lua) {
    let every = mlua::HookTriggers::new().every_nth_instruction(1);
    let thread = lua.app_data_ref::<Hooked>().and_then(|h| h.0.clone());
    match thread {
        Some(thread) => thread.set_hook(every, |lua, _| hook(lua)),
        None => lua.set_hook(every, |lua, _| hook(lua)),
    }
    lua.set_app_data(Quick);
}

/// [`hook`]'s work on the run's state.
fn busy_check(st: &mut RunState) -> mlua::Result<mlua::VmState> {
    if st.busy_after == 0 {
        return Ok(mlua::VmState::Continue);
    }
    if !st.busy && st.started.elapsed().as_millis() as u64 >= st.busy_after {
        st.busy = true;
        describe_run(st.started);
        super::enter_busy(st.wrote, st.function);
        if std::mem::replace(&mut st.warned, true) {
            return kill_check(st);
        }
        crate::log!(
            Warning,
            "Slow script detected: still in execution after {} milliseconds. You can try \
             killing the script using the SCRIPT KILL command.",
            st.started.elapsed().as_millis()
        );
    }
    kill_check(st)
}

/// Records what the run turning busy is (FUNCTION STATS shows it), as its runner
/// describes it: asked with no arguments, it answers its function's name and its
/// command, as an array. (A run as a coroutine has no runner: not recorded.)
fn describe_run(started: std::time::Instant) {
    let mut reply = Vec::new();
    let none = crate::table::args::Args::new(&[], &[]);
    if !matches!(
        call_runner(&none, Version::Resp2, &mut reply),
        Some(Called::Reply)
    ) {
        return;
    }
    let Ok(Some((goblin_protocol::Frame::Array(items), _))) = goblin_protocol::parse_reply(&reply)
    else {
        return;
    };
    let mut words = items.iter().filter_map(|f| match f {
        goblin_protocol::Frame::Bulk(b) => Some(b.to_vec()),
        _ => None,
    });
    if let Some(name) = words.next() {
        super::set_running(super::Running {
            name,
            command: words.collect(),
            started,
        });
    }
}

/// A busy run serves its thread's other clients (BUSY, or SCRIPT KILL's answer) and
/// stops if SCRIPT KILL asked and it did not write.
fn kill_check(st: &mut RunState) -> mlua::Result<mlua::VmState> {
    if st.busy {
        crate::runtime::standin::serve_busy();
    }
    if st.busy && !st.wrote && super::kill_epoch() != st.epoch {
        crate::log!(Warning, "Lua script killed by user with SCRIPT KILL.");
        return Err(ScriptError::redis(KILLED));
    }
    Ok(mlua::VmState::Continue)
}

/// Installs the count hook ([`hook`]) on the main Lua thread.
pub(crate) fn set_busy_hook(lua: &Lua) {
    lua.set_hook(busy_triggers(), |lua, _| hook(lua));
    lua.set_app_data(Hooked(None));
}

/// When the count hook runs.
fn busy_triggers() -> mlua::HookTriggers {
    mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY)
}

/// The coroutine the count hook is on (`None`: the main thread), kept alive so that its
/// address cannot become another's: mlua runs its hook on one Lua thread only, the one
/// it was set on last, so the hook moves with the thread that runs.
struct Hooked(Option<mlua::Thread>);

/// Moves the count hook to `thread` (the main thread when nil), the Lua thread about
/// to run, unless it is there already. (Not a thread: left to `coroutine.resume` to
/// refuse.)
fn hook_thread(lua: &Lua, thread: Value) -> mlua::Result<()> {
    let on = lua
        .app_data_ref::<Hooked>()
        .map(|h| h.0.as_ref().map(|t| t.to_pointer()));
    // (After a killed run, at its usual pace again.)
    let quick = lua.remove_app_data::<Quick>().is_some();
    match thread {
        Value::Thread(thread) if quick || on != Some(Some(thread.to_pointer())) => {
            thread.set_hook(busy_triggers(), |lua, _| hook(lua));
            lua.set_app_data(Hooked(Some(thread)));
        }
        Value::Nil if quick || on != Some(None) => set_busy_hook(lua),
        _ => {}
    }
    Ok(())
}

thread_local! {
    /// The state of the run in progress on this thread (runs of one thread never
    /// overlap: a suspended run keeps its protocol in [`Suspended`]).
    static RUN: RefCell<RunState> = RefCell::new(RunState::new());
}

/// `f` with the run's state (`None` if it is borrowed already, which nothing does).
fn run_state<R>(f: impl FnOnce(&mut RunState) -> R) -> Option<R> {
    RUN.with(|st| st.try_borrow_mut().ok().map(|mut st| f(&mut st)))
}

/// The protocol the run's commands answer in (`redis.setresp`).
fn run_resp() -> Version {
    run_state(|st| st.resp).unwrap_or(Version::Resp2)
}

/// `redis.set_repl`'s flag for the append-only log (`REPL_AOF`).
pub const REPL_AOF: u8 = 1;
/// `redis.set_repl`'s flag for the replicas (`REPL_REPLICA`).
pub const REPL_REPLICA: u8 = 2;
/// Both (`REPL_ALL`, a run's start).
pub const REPL_ALL: u8 = REPL_AOF | REPL_REPLICA;

/// Where the effects of the commands the running script calls go (`redis.set_repl`):
/// [`REPL_AOF`], [`REPL_REPLICA`], both or neither.
pub fn run_repl() -> u8 {
    run_state(|st| st.repl).unwrap_or(REPL_ALL)
}

/// A run begins: its clock and kill epoch, and the protocol of its commands.
fn begin_run(busy_after: u64, resp: Version, function: bool) {
    run_state(|st| *st = RunState::begun(busy_after, resp, function));
}

/// Swaps `state` with the run's state in progress: a suspended run goes on (its clock,
/// kill epoch, busy count and all are its own, not the resumption's), or stops again.
fn swap_run(state: &mut RunState) {
    RUN.with(|st| {
        if let Ok(mut st) = st.try_borrow_mut() {
            std::mem::swap(&mut *st, state);
        }
    });
}

/// A run ends: it no longer counts as busy.
fn end_run() {
    run_state(RunState::leave);
}

/// The run wrote.
fn note_write() {
    run_state(|st| {
        if !st.wrote {
            st.wrote = true;
            if st.busy {
                super::busy_wrote();
            }
        }
    });
}

/// `math.random`'s generator (`redisLrand48`): one for the whole server, as in
/// redis-server 7.0, where it starts at `rand.c`'s initial state and is never seeded
/// again but by `math.randomseed` (scripts do not each start it over).
static RAND48: AtomicU64 = AtomicU64::new(0x1234_ABCD_330E);

/// Most main functions [`Engine::idle`] keeps per script: as many as its runs that may
/// wait at once on one thread, usually one.
const IDLE_MAINS: usize = 4;

/// A thread's interpreter.
pub struct Engine {
    lua: Lua,
    /// What this interpreter keeps from call to call (each script's function, the idle
    /// main functions, the suspended runs' threads): in a Lua table, not as handles.
    kept: Kept,
    /// Compiled scripts by SHA1.
    compiled: HashMap<Sha, Slot>,
    /// The bytecode of the scripts this thread ran as coroutines, by SHA1: a run that
    /// finds no idle main function loads it with its own environment (its `KEYS` and
    /// `ARGV`) rather than compile the code again (BullMQ's scripts are hundreds of
    /// lines).
    bytecode: HashMap<Sha, Vec<u8>>,
    /// Main functions of finished runs, by SHA1, for the next runs of their script (each
    /// given the run's environment): loading BullMQ's bytecode again took a tenth of the
    /// server's time under it. (A main chunk keeps no state of its run: it has no
    /// upvalues, and the functions it makes are made anew by each run.)
    idle: HashMap<Sha, Vec<Slot>>,
    /// The generation of the shared cache these were compiled for (SCRIPT FLUSH starts
    /// a new one).
    generation: u64,
    /// The `redis` table.
    redis: Table,
    /// Its `call` and `pcall`, which run commands here (see [`with_runner`]).
    direct: (Function, Function),
    runner: Function,
    /// `redis.call` and `redis.pcall` of scripts run as coroutines.
    yielding: (Function, Function),
    /// The global `pcall` and `xpcall`: of scripts run at once, of scripts run as
    /// coroutines.
    protect: (Function, Function),
    protect_yielding: (Function, Function),
    /// `error`: Lua's, and [`YIELDING_ERROR`]'s.
    error: (Function, Function),
    /// What `redis.call` and `redis.pcall` yield first in a script run as a coroutine.
    call_mark: Table,
    /// Marks a coroutine the script may not yield from ([`COROUTINES`]).
    unyielding: Function,
    globals: Table,
    /// What scripts see as their globals (`_G`): an empty table reading through to
    /// [`Engine::globals`] and refusing every assignment ([`Engine::readonly_env`]).
    env: Table,
    /// The global tables KEYS and ARGV, and how many elements each holds.
    keys: Table,
    keys_len: usize,
    argv: Table,
    argv_len: usize,
    /// Scripts suspended in a command that runs on another shard, by run.
    runs: HashMap<u64, Suspended>,
    /// It runs functions (FCALL), not scripts.
    pub(crate) function: bool,
    next_run: u64,
}

/// A script suspended in a command.
struct Suspended {
    /// Its thread, in [`Engine::kept`].
    thread: Slot,
    /// Its SHA1 (a function's name), for its errors.
    sha: Vec<u8>,
    /// The protocol of the client it answers.
    version: Version,
    /// Its state while it waits (its `redis.setresp` protocol, its clock, whether it
    /// is busy: a busy run stays busy between its commands, as the script is still
    /// running for the other clients).
    state: RunState,
    /// A script's main function and SHA1, kept for the script's next run once this one
    /// is over ([`Engine::idle`]); none for a library function's run.
    main: Option<(Sha, Slot)>,
}

impl Drop for Suspended {
    /// A busy run given up (its plan ended early) no longer counts as busy.
    fn drop(&mut self) {
        self.state.leave();
    }
}

/// What a suspended script gets when it is resumed.
pub enum Resume {
    /// Nothing: it starts.
    Start,
    /// The reply of the command it called (in its protocol).
    Reply(Vec<u8>),
    /// The command was refused by the checks before it (the error text).
    Refused(Vec<u8>),
    /// Its arguments were not strings or numbers (the error text).
    BadArgs(Vec<u8>),
}

/// Where a resumed script stopped.
pub enum Stepped {
    /// It calls a command (its arguments), in protocol `resp`, its effects going where
    /// `redis.set_repl` said ([`run_repl`]).
    Call(Vec<Vec<u8>>, Version, u8),
    /// It finished: the reply.
    Done(Vec<u8>),
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
    /// What this thread's interpreter held after its last run (one of
    /// [`LUA_SEEN_ALL`]).
    static LUA_SEEN: std::cell::OnceCell<Arc<LuaSeen>> = const { std::cell::OnceCell::new() };
}

/// One thread's interpreter, as it was after its last run: the bytes it held and the
/// generation of the script cache it was made for.
#[derive(Debug, Default)]
struct LuaSeen {
    generation: AtomicU64,
    bytes: AtomicUsize,
}

/// Every thread's [`LuaSeen`] (INFO's `used_memory_lua` sums them).
static LUA_SEEN_ALL: Mutex<Vec<Arc<LuaSeen>>> = Mutex::new(Vec::new());

/// Bytes the threads' Lua interpreters of script cache generation `generation` hold:
/// after a SCRIPT FLUSH, the interpreters that were made before it (each thread makes
/// its new one when it next runs a script) no longer count, as Redis's reset
/// interpreter no longer holds what the old one did.
pub fn lua_bytes(generation: u64) -> usize {
    LUA_SEEN_ALL.lock().map_or(0, |all| {
        all.iter()
            .filter(|seen| seen.generation.load(Ordering::Relaxed) == generation)
            .map(|seen| seen.bytes.load(Ordering::Relaxed))
            .sum()
    })
}

/// This thread's interpreter, of generation `generation`, holds `bytes` now.
fn note_lua_bytes(generation: u64, bytes: usize) {
    LUA_SEEN.with(|seen| {
        let seen = seen.get_or_init(|| {
            let seen = Arc::new(LuaSeen::default());
            if let Ok(mut all) = LUA_SEEN_ALL.lock() {
                all.push(Arc::clone(&seen));
            }
            seen
        });
        seen.generation.store(generation, Ordering::Relaxed);
        seen.bytes.store(bytes, Ordering::Relaxed);
    });
}

/// Runs `f` with this thread's engine, made on first use (or again after a flush of
/// generation `generation`). `None` when the interpreter cannot be made.
pub fn with_engine<R>(generation: u64, f: impl FnOnce(&mut Engine) -> R) -> Option<R> {
    ENGINE.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.as_ref().is_none_or(|e| e.generation != generation) {
            match Engine::new(generation) {
                Ok(engine) => *slot = Some(engine),
                Err(e) => {
                    crate::log!(Warning, "could not start the Lua interpreter: {e}");
                    return None;
                }
            }
        }
        let result = slot.as_mut().map(f);
        if let Some(engine) = slot.as_ref() {
            note_lua_bytes(engine.generation, engine.lua.used_memory());
        }
        result
    })
}

/// What a command called by a script gave (its reply is in the runner's buffer, in the
/// run's protocol).
pub enum Called {
    /// It ran.
    Reply,
    /// It ran, and it is a command that writes.
    Wrote,
    /// It was refused before it ran (the error text, code included).
    Refused(Vec<u8>),
}

/// `redisLrand48`'s step: the 48-bit generator of `drand48`.
fn lrand48(state: &mut u64) -> i64 {
    *state = (state.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & ((1 << 48) - 1);
    (*state >> 17) as i64
}

/// `redisSrand48(seed)`.
fn srand48(seed: i32) -> u64 {
    (u64::from(seed as u32) << 16) | 0x330E
}

/// An error table `{err = text}`.
fn err_table(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok(Value::Table(t))
}

/// `{err = text, ignore_error_stats_update = true}`: an error of the checks `scriptCall`
/// makes before a command runs.
fn checked_err_table(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    t.raw_set("ignore_error_stats_update", true)?;
    Ok(Value::Table(t))
}

/// `luaL_checkint`: a number truncated to a C int.
fn check_int(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> Result<i32, Raise> {
    let n = libs::check_number(lua, args, i, fname)?;
    Ok(super::convert::lua_to_int(n) as i32)
}

impl Engine {
    fn new(generation: u64) -> mlua::Result<Engine> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        set_busy_hook(&lua);
        libs::open_all(&lua)?;
        let globals = lua.globals();

        // math.random and math.randomseed: Redis's deterministic generator.
        let math: Table = globals.raw_get("math")?;
        let funcs = [
            ("random", math_random as libs::LibFn),
            ("randomseed", math_randomseed),
        ];
        libs::install(&lua, "math", &funcs)?;
        let rawset_fn = lua.create_function(|lua, args: MultiValue| match rawset(lua, args) {
            Ok(v) => Ok(v),
            // Raised by the VM from inside a C function: no position.
            Err(Raise::Msg(m)) if !m.starts_with("bad argument") => {
                Err(mlua::Error::external(ScriptError::Message(m.into_bytes())))
            }
            Err(Raise::Msg(m)) => Err(ScriptError::message(lua, &m)),
            Err(Raise::Err(m)) => Err(ScriptError::redis(m)),
            Err(Raise::Lua(e)) => Err(e),
        })?;
        globals.raw_set("rawset", libs::guarded(&lua, rawset_fn)?)?;
        drop(math);

        Self::open_redis(&lua)?;
        globals.raw_set("__redis__err__handler", lua.create_function(error_handler)?)?;
        globals.raw_set("__goblin_fix", lua.create_function(fix_pcall)?)?;
        globals.raw_set("__goblin_raised", lua.create_function(raised_value)?)?;
        globals.raw_set("__goblin_raise", lua.create_function(raise_positioned)?)?;
        globals.raw_set("__goblin_hook", lua.create_function(hook_thread)?)?;
        let mark = lua.create_table()?;
        globals.raw_set("__goblin_call", &mark)?;
        let coroutine: Table = globals.raw_get("coroutine")?;
        let (resume, wrap, yield_, running, step, unyielding): (
            Function,
            Function,
            Function,
            Function,
            Function,
            Function,
        ) = lua.load(COROUTINES).set_name(INTERNAL).eval()?;
        globals.raw_set("__goblin_step", step)?;
        globals.raw_set("__goblin_unyielding", &unyielding)?;
        let yielding: (Function, Function) = lua.load(YIELDING).set_name(INTERNAL).eval()?;
        let protect: (Function, Function) = lua.load(PCALL).set_name(INTERNAL).eval()?;
        let protect_yielding: (Function, Function) =
            lua.load(YIELDING_PCALL).set_name(INTERNAL).eval()?;
        let runner: Function = lua.load(RUNNER).set_name(INTERNAL).eval()?;
        let (loadstring, load, loaded): (Function, Function, Table) =
            lua.load(LOADERS).set_name(INTERNAL).eval()?;
        globals.raw_set("loadstring", loadstring)?;
        globals.raw_set("load", load)?;
        let error = (
            globals.raw_get("error")?,
            lua.load(YIELDING_ERROR).set_name(INTERNAL).eval()?,
        );
        // (Lua's own `pcall`, `xpcall` and `coroutine` functions are the ones these
        // chunks keep.)
        coroutine.raw_set("resume", resume)?;
        coroutine.raw_set("wrap", wrap)?;
        coroutine.raw_set("yield", yield_)?;
        coroutine.raw_set("running", running)?;
        globals.raw_set("pcall", &protect.0)?;
        globals.raw_set("xpcall", &protect.1)?;
        let redis: Table = globals.raw_get("redis")?;
        let direct = (make_call(&lua, true)?, make_call(&lua, false)?);
        redis.raw_set("call", &direct.0)?;
        redis.raw_set("pcall", &direct.1)?;

        // Only the allowed globals stay.
        let mut remove = Vec::new();
        globals.for_each(|k: Value, _: Value| {
            let keep = matches!(&k, Value::String(s) if GLOBALS.iter().any(|g| s.as_bytes() == g.as_bytes()));
            if !keep {
                remove.push(k);
            }
            Ok(())
        })?;
        for k in remove {
            globals.raw_set(k, Value::Nil)?;
        }
        let (keys, argv) = (lua.create_table()?, lua.create_table()?);
        globals.raw_set("KEYS", &keys)?;
        globals.raw_set("ARGV", &argv)?;
        // Scripts make short-lived garbage (KEYS, ARGV, replies): collect less eagerly
        // than Lua's default (200), as memory for it is cheap next to the time.
        lua.gc_set_pause(400);
        // What setting up made and dropped (the chunks that made the wrappers) is not
        // counted as the interpreter's memory (`used_memory_lua`).
        lua.gc_collect()?;
        Self::protect_globals(&lua, &globals)?;
        let env = Self::readonly_env(&lua, &globals)?;
        loaded.raw_set("env", &env)?;
        let kept = Kept::new(&lua)?;
        Ok(Engine {
            lua,
            kept,
            compiled: HashMap::new(),
            bytecode: HashMap::new(),
            idle: HashMap::new(),
            generation,
            redis,
            direct,
            runner,
            yielding,
            protect,
            protect_yielding,
            error,
            call_mark: mark,
            unyielding,
            globals,
            env,
            keys,
            keys_len: 0,
            argv,
            argv_len: 0,
            runs: HashMap::new(),
            function: false,
            next_run: 0,
        })
    }

    /// The `redis` table.
    fn open_redis(lua: &Lua) -> mlua::Result<()> {
        let funcs: &[(&str, libs::LibFn)] = &[
            ("error_reply", error_reply),
            ("status_reply", status_reply),
            ("sha1hex", sha1hex),
            ("log", log),
            ("setresp", setresp),
            ("set_repl", set_repl),
            ("replicate_commands", replicate_commands),
            ("breakpoint", breakpoint),
            ("acl_check_cmd", acl_check_cmd),
            ("debug", debug),
        ];
        let redis = libs::install(lua, "redis", funcs)?;
        for (name, v) in [
            ("LOG_DEBUG", 0),
            ("LOG_VERBOSE", 1),
            ("LOG_NOTICE", 2),
            ("LOG_WARNING", 3),
            ("REPL_NONE", 0),
            ("REPL_AOF", 1),
            ("REPL_SLAVE", 2),
            ("REPL_REPLICA", 2),
            ("REPL_ALL", 3),
        ] {
            redis.raw_set(name, v)?;
        }
        redis.raw_set("REDIS_VERSION", crate::runtime::server::REDIS_VERSION)?;
        redis.raw_set("REDIS_VERSION_NUM", redis_version_num())?;
        Ok(())
    }

    /// Globals are read-only, and reading one that does not exist is an error (Redis's
    /// `luaSetErrorMetatable` and read-only globals).
    fn protect_globals(lua: &Lua, globals: &Table) -> mlua::Result<()> {
        let meta = lua.create_table()?;
        let scratch = lua.create_table()?;
        lua.globals().raw_set("__goblin_meta", &scratch)?;
        libs::install(
            lua,
            "__goblin_meta",
            &[("__index", missing_global), ("__newindex", readonly)],
        )?;
        for name in ["__index", "__newindex"] {
            meta.raw_set(name, scratch.raw_get::<Function>(name)?)?;
        }
        lua.globals().raw_set("__goblin_meta", Value::Nil)?;
        globals.set_metatable(Some(meta));
        Ok(())
    }

    /// Makes what scripts reach read-only, as Redis's read-only tables do (its Lua
    /// refuses writes to the globals, the libraries' tables and their metatables, so
    /// that no script changes what the next one runs — `redis = 1`, `redis.call = f`,
    /// `setmetatable(_G, {})`): scripts run with an empty table as their globals
    /// (returned: `_G`), which reads through to the real ones and refuses assignments;
    /// each library's table is replaced by such a view of it; `getmetatable` of a view
    /// answers a view (or nil), `setmetatable` of one and `rawset` into one are refused,
    /// `pairs` and `next` go through a view to its table; `load` and `loadstring` give
    /// what they compile the same globals ([`LOADERS`]).
    fn readonly_env(lua: &Lua, globals: &Table) -> mlua::Result<Table> {
        let refuse: Value = globals
            .metatable()
            .map(|m| m.raw_get::<Value>("__newindex"))
            .transpose()?
            .unwrap_or(Value::Nil);
        // Each view's table, and the views whose metatable is not shown (nil).
        let (targets, hidden) = (lua.create_table()?, lua.create_table()?);
        let view = |target: &Table, hide: Value| -> mlua::Result<Table> {
            let p = lua.create_table()?;
            let meta = lua.create_table()?;
            meta.raw_set("__index", target)?;
            meta.raw_set("__newindex", refuse.clone())?;
            if hide == Value::Boolean(false) {
                hidden.raw_set(&p, true)?;
            }
            meta.raw_set("__metatable", hide)?;
            p.set_metatable(Some(meta));
            targets.raw_set(&p, target)?;
            Ok(p)
        };
        for name in READONLY_LIBS {
            if let Value::Table(lib) = globals.raw_get::<Value>(*name)? {
                globals.raw_set(*name, view(&lib, Value::Boolean(false))?)?;
            }
        }
        // The strings' metatable: its `__index` is the `string` library.
        let strings: Table = lua
            .load("return getmetatable('')")
            .set_name(INTERNAL)
            .eval()?;
        let shown = lua.create_table()?;
        shown.raw_set("__index", globals.raw_get::<Value>("string")?)?;
        strings.raw_set("__metatable", view(&shown, Value::Boolean(false))?)?;
        let gmeta = globals.metatable().unwrap_or(lua.create_table()?);
        let gmeta_view = view(&gmeta, Value::Boolean(false))?;
        let env = view(globals, Value::Table(gmeta_view))?;
        globals.raw_set("_G", &env)?;
        // Raised by the VM from inside a C function: no position.
        let refuse = lua.create_function(|_, ()| -> mlua::Result<()> {
            Err(mlua::Error::external(ScriptError::Message(
                b"Attempt to modify a readonly table".to_vec(),
            )))
        })?;
        let (next, pairs, getmetatable, setmetatable): (Function, Function, Function, Function) =
            lua.load(VIEWS).set_name(INTERNAL).call((
                globals.raw_get::<Function>("next")?,
                globals.raw_get::<Function>("pairs")?,
                globals.raw_get::<Function>("getmetatable")?,
                globals.raw_get::<Function>("setmetatable")?,
                &targets,
                hidden,
                globals,
                refuse,
            ))?;
        globals.raw_set("next", next)?;
        globals.raw_set("pairs", pairs)?;
        globals.raw_set("getmetatable", getmetatable)?;
        globals.raw_set("setmetatable", setmetatable)?;
        lua.set_app_data(Views(targets));
        Ok(env)
    }

    /// The compiled function of script `sha`, compiling `body` (after its shebang line,
    /// whose line feed it keeps) if this thread has not yet.
    pub fn function(&mut self, sha: &Sha, body: &[u8]) -> Result<Function, Vec<u8>> {
        if let Some(&slot) = self.compiled.get(sha) {
            return self.kept.get(slot).map_err(run_error);
        }
        // Calls of library functions in tail position made plain calls, so that their
        // errors name the script's line (`untail`; only goblin's own bytecode is loaded).
        let f = untail::without_tail_calls(
            &self.lua,
            self.compile(body)?,
            CHUNK,
            Some(self.env.clone()),
        );
        let slot = self.kept.put(&f).map_err(run_error)?;
        self.compiled.insert(*sha, slot);
        Ok(f)
    }

    /// Compiles a script's code: the error reply Redis gives when it does not compile.
    /// Always as text: Lua 5.1 has no bytecode verifier, and crafted bytecode would
    /// reach past the sandbox (Redis's Lua reads every chunk as text, CVE-2015-4335).
    pub fn compile(&self, code: &[u8]) -> Result<Function, Vec<u8>> {
        if code.first() == Some(&BINARY_SIGNATURE) {
            return Err(
                b"ERR Error compiling script (new function): user_script:1: \
                         unexpected symbol near 'char(27)'"
                    .to_vec(),
            );
        }
        self.lua
            .load(code)
            .set_name(CHUNK)
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(compile_error)
    }

    /// Starts `code` (script `sha`) as a coroutine with its own globals `KEYS` and
    /// `ARGV`: a script that runs under a plan, suspended in each command it calls.
    /// (Compiled once per thread: later runs take a finished run's main function, or
    /// load its bytecode.)
    pub fn start(
        &mut self,
        sha: &Sha,
        code: &[u8],
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        version: Version,
    ) -> Result<u64, Vec<u8>> {
        if !self.bytecode.contains_key(sha) {
            // (The compiled function's, dumped with its debug information: its errors
            // name its lines; without tail calls, so that its frame is there when a
            // command it returns fails.)
            let compiled = self.function(sha, code)?.dump(false);
            self.bytecode.insert(*sha, compiled);
        }
        let Some(bytecode) = self.bytecode.get(sha) else {
            return Err(b"ERR internal error: the script's bytecode is gone".to_vec());
        };
        let started = (|| -> mlua::Result<Result<(mlua::Thread, Function), Vec<u8>>> {
            let lua = &self.lua;
            let env = lua.create_table()?;
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            env.raw_set("KEYS", array(lua, &keys)?)?;
            env.raw_set("ARGV", array(lua, &argv)?)?;
            let globals = lua.globals();
            let meta = lua.create_table()?;
            meta.raw_set("__index", &self.env)?;
            if let Some(gmeta) = globals.metatable() {
                meta.raw_set("__newindex", gmeta.raw_get::<Value>("__newindex")?)?;
            }
            env.set_metatable(Some(meta));
            let idle = self.idle.get_mut(sha).and_then(Vec::pop);
            let idle = match idle {
                Some(slot) => self.kept.take::<Option<Function>>(slot)?,
                None => None,
            };
            let func = match idle {
                Some(f) => {
                    f.set_environment(env)?;
                    f
                }
                None => match lua
                    .load(bytecode.as_slice())
                    .set_name(CHUNK)
                    .set_mode(mlua::ChunkMode::Binary)
                    .set_environment(env)
                    .into_function()
                {
                    Ok(f) => f,
                    Err(e) => return Ok(Err(compile_error(e))),
                },
            };
            Ok(Ok((lua.create_thread(func.clone())?, func)))
        })();
        let (thread, main) = match started {
            Ok(Ok(t)) => t,
            Ok(Err(reply)) => return Err(reply),
            Err(e) => return Err(run_error(e)),
        };
        self.suspend(thread, sha.to_vec(), version, Some((*sha, main)))
    }

    /// Keeps `thread`, a run of script `sha` (a function's name) answering a client
    /// speaking `version`, about to start (a coroutine it may not yield from, as a run
    /// on its shard may not); its id.
    fn suspend(
        &mut self,
        thread: mlua::Thread,
        sha: Vec<u8>,
        version: Version,
        main: Option<(Sha, Function)>,
    ) -> Result<u64, Vec<u8>> {
        self.unyielding.call::<Value>(&thread).map_err(run_error)?;
        let thread = self.kept.put(thread).map_err(run_error)?;
        let main = match main {
            Some((sha, f)) => match self.kept.put(f) {
                Ok(slot) => Some((sha, slot)),
                Err(e) => {
                    self.kept.remove(thread);
                    return Err(run_error(e));
                }
            },
            None => None,
        };
        let id = self.next_run;
        self.next_run += 1;
        // (Its threshold is set at each resumption, from the configuration then.)
        let state = RunState::begun(0, Version::Resp2, self.function);
        let run = Suspended {
            thread,
            sha,
            version,
            state,
            main,
        };
        self.runs.insert(id, run);
        Ok(id)
    }

    /// Sets the functions that differ for a script run as a coroutine (`coroutine`:
    /// `redis.call` and `redis.pcall`, `pcall`, `xpcall` and `error`), or back to those
    /// of a script run at once.
    fn lend_functions(&self, coroutine: bool) -> mlua::Result<()> {
        let (calls, protect, error) = if coroutine {
            (&self.yielding, &self.protect_yielding, &self.error.1)
        } else {
            (&self.direct, &self.protect, &self.error.0)
        };
        self.redis.raw_set("call", &calls.0)?;
        self.redis.raw_set("pcall", &calls.1)?;
        self.globals.raw_set("pcall", &protect.0)?;
        self.globals.raw_set("xpcall", &protect.1)?;
        self.globals.raw_set("error", error)
    }

    /// Resumes run `id` with `input` (`wrote`: a command it called wrote); where it
    /// stops. A finished run is forgotten.
    pub fn resume(&mut self, id: u64, input: Resume, wrote: bool, busy_after: u64) -> Stepped {
        let Some(run) = self.runs.get_mut(&id) else {
            return Stepped::Done(b"-ERR internal error: the script's run is gone\r\n".to_vec());
        };
        let (version, sha) = (run.version, run.sha.clone());
        let thread = match self.kept.get::<mlua::Thread>(run.thread) {
            Ok(thread) => thread,
            Err(e) => {
                self.drop_run(id, false);
                let mut out = Vec::new();
                Encoder::new(&mut out, version).error_sanitized(&run_error(e));
                return Stepped::Done(out);
            }
        };
        let Some(run) = self.runs.get_mut(&id) else {
            return Stepped::Done(b"-ERR internal error: the script's run is gone\r\n".to_vec());
        };
        let mut state = std::mem::replace(&mut run.state, RunState::new());
        state.busy_after = busy_after;
        swap_run(&mut state);
        if wrote {
            note_write();
        }
        // Its time and SCRIPT KILL are checked between its commands too: a script that
        // keeps calling commands may spend little time in Lua between them.
        let killed = !matches!(input, Resume::Start)
            && run_state(busy_check).is_some_and(|checked| checked.is_err());
        let lua = &self.lua;
        // (Three values at most taken from what it yields or returns, each a handle: a
        // script may yield or return thousands, see `PACK_ABOVE`.)
        let resumed = (|| -> mlua::Result<(Value, Value, Value)> {
            self.lend_functions(true)?;
            let args = match input {
                _ if killed => {
                    MultiValue::from_iter([Value::Nil, Value::String(lua.create_string(KILLED)?)])
                }
                Resume::Start => MultiValue::new(),
                Resume::Reply(reply) => {
                    let value = reply_to_lua(lua, &reply)?;
                    if matches!(reply.first(), Some(b'-') | Some(b'!')) {
                        MultiValue::from_iter([Value::Boolean(false), value])
                    } else {
                        MultiValue::from_iter([Value::Boolean(true), value])
                    }
                }
                Resume::Refused(text) => {
                    MultiValue::from_iter([Value::Boolean(false), checked_err_table(lua, &text)?])
                }
                Resume::BadArgs(text) => MultiValue::from_iter([
                    Value::Boolean(false),
                    Value::String(lua.create_string(&text)?),
                ]),
            };
            hook_thread(lua, Value::Thread(thread.clone()))?;
            let out = thread.resume::<(Value, Value, Value)>(args);
            self.lend_functions(false)?;
            out
        })();
        let script = run_resp();
        let repl = run_repl();
        if resumed.is_ok() && thread.status() == mlua::ThreadStatus::Resumable {
            // Waits again, busy or not, with its state.
            swap_run(&mut state);
            if let Some(run) = self.runs.get_mut(&id) {
                run.state = state;
            }
        } else {
            end_run();
        }
        let done = |out: Vec<u8>| Stepped::Done(out);
        let mut out = Vec::new();
        // (Its reply's errors are noted from here, for the caller to take.)
        super::convert::clear_reply_errors();
        match resumed {
            Ok((first, n, args)) if thread.status() == mlua::ThreadStatus::Resumable => {
                let marked = matches!(first,
                    Value::Table(t) if t.to_pointer() == self.call_mark.to_pointer());
                if !marked {
                    // A yield of the script's own, outside any coroutine of its: what
                    // Lua answers when a script run on its shard does it.
                    self.drop_run(id, false);
                    Encoder::new(&mut out, version).error_sanitized(
                        format!(
                            "ERR attempt to yield across metamethod/C-call boundary script: {}",
                            String::from_utf8_lossy(&sha)
                        )
                        .as_bytes(),
                    );
                    return done(out);
                }
                let argv = match (n, args) {
                    (Value::Integer(n), Value::Table(args)) => {
                        command_args(usize::try_from(n).unwrap_or(0), &args)
                    }
                    _ => Ok(Err(NO_ARGUMENT)),
                };
                match argv {
                    Ok(Ok(argv)) => {
                        return Stepped::Call(argv, script, repl);
                    }
                    // A bad call: answered at once, as an error.
                    Ok(Err(text)) => {
                        return self.resume(id, Resume::BadArgs(text.to_vec()), false, busy_after);
                    }
                    Err(e) => coroutine_error(lua, &e, &sha, version, &mut out),
                }
            }
            Ok((value, _, _)) => {
                if let Err(e) = lua_to_reply(&value, version, script, &mut out) {
                    out.clear();
                    Encoder::new(&mut out, version).error_sanitized(&run_error(e));
                }
            }
            Err(e) => coroutine_error(lua, &e, &sha, version, &mut out),
        }
        self.drop_run(id, true);
        done(out)
    }

    /// Forgets run `id` (its plan ended early).
    pub fn forget(&mut self, id: u64) {
        self.drop_run(id, false);
    }

    /// Forgets run `id` and what it kept; its main function is kept for the script's
    /// next run when it `finished` (ran to its end, or to its error).
    fn drop_run(&mut self, id: u64, finished: bool) {
        let Some(run) = self.runs.remove(&id) else {
            return;
        };
        self.kept.remove(run.thread);
        if let Some((sha, main)) = run.main {
            let idle = self.idle.entry(sha).or_default();
            if finished && idle.len() < IDLE_MAINS {
                idle.push(main);
            } else {
                self.kept.remove(main);
            }
        }
    }

    /// Runs a script's function with `keys` and `argv`, its commands run by `call`, and
    /// encodes what it returns (or the error it raised, with the script's position and
    /// `sha`) into `out` for a client speaking `version`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        func: &Function,
        sha: &[u8],
        keys: &[&[u8]],
        argv: &[&[u8]],
        version: Version,
        busy_after: u64,
        call: &mut Runner<'_>,
        out: &mut Vec<u8>,
    ) {
        begin_run(busy_after, Version::Resp2, self.function);
        super::convert::clear_reply_errors();
        // (A script run as a coroutine may have left the count hook on its thread.)
        let ran = hook_thread(&self.lua, Value::Nil).and_then(|()| {
            with_runner(call, || self.run_inner(func, sha, keys, argv, version, out))
        });
        end_run();
        if let Err(e) = ran {
            crate::log!(Warning, "Lua script failed: {e}");
            let mut msg = b"ERR Error running script ".to_vec();
            msg.extend_from_slice(e.to_string().as_bytes());
            Encoder::new(out, version).error_sanitized(&msg);
        }
    }

    fn run_inner(
        &mut self,
        func: &Function,
        sha: &[u8],
        keys: &[&[u8]],
        argv: &[&[u8]],
        version: Version,
        out: &mut Vec<u8>,
    ) -> mlua::Result<()> {
        let lua = &self.lua;
        // KEYS and ARGV: the same two tables, refilled (a script cannot keep them past
        // its run: the globals are read-only).
        refill(lua, &self.keys, keys, &mut self.keys_len)?;
        refill(lua, &self.argv, argv, &mut self.argv_len)?;
        let (ok, value): (bool, Value) = self.runner.call(func)?;
        if ok {
            return lua_to_reply(&value, version, run_resp(), out);
        }
        raised_error(&value, sha, version, out)
    }
}

/// `redis.call` (`raise`) or `redis.pcall`: the command's reply as a Lua value; its
/// error raised (`redis.call`) or returned as a table (`redis.pcall`). Made once per
/// interpreter: the command runs with the run's runner ([`with_runner`]), and the
/// buffers for its arguments and reply are kept from call to call. A [`CALL_ARGS`]
/// wrapper (whose frame error positions pass over) gives a Rust function its arguments,
/// as they are or packed.
fn make_call(lua: &Lua, raise: bool) -> mlua::Result<Function> {
    let buffers: Rc<RefCell<CallBuffers>> = Rc::default();
    let kept = Rc::clone(&buffers);
    let plain = lua.create_function(move |lua, args: MultiValue| {
        run_call(lua, raise, &kept, |buf, spans| {
            Ok(command_args_into(&args, buf, spans))
        })
    })?;
    let packed = lua.create_function(move |lua, (n, args): (usize, Table)| {
        run_call(lua, raise, &buffers, |buf, spans| {
            buf.clear();
            spans.clear();
            for i in 1..=n {
                // (One argument a handle at a time.)
                let arg: Value = args.raw_get(i)?;
                let start = buf.len();
                if let Err(text) = push_arg(&arg, buf) {
                    return Ok(Err(text));
                }
                spans.push(start..buf.len());
            }
            Ok(Ok(()))
        })
    })?;
    let code = CALL_ARGS.replace("__PACK_ABOVE__", &PACK_ABOVE.to_string());
    lua.load(code).set_name(INTERNAL).call((
        plain,
        packed,
        lua.globals().raw_get::<Function>("select")?,
    ))
}

/// The argument buffer, the spans of the arguments in it, and the reply buffer of
/// `redis.call`.
type CallBuffers = (Vec<u8>, Vec<std::ops::Range<usize>>, Vec<u8>);

/// Runs the command whose arguments `fill` puts in the buffers (or the bad-arguments
/// error it gives) for `redis.call` (`raise`) or `redis.pcall`.
fn run_call(
    lua: &Lua,
    raise: bool,
    buffers: &RefCell<CallBuffers>,
    fill: impl FnOnce(
        &mut Vec<u8>,
        &mut Vec<std::ops::Range<usize>>,
    ) -> mlua::Result<Result<(), &'static [u8]>>,
) -> mlua::Result<Value> {
    let mut buffers = buffers
        .try_borrow_mut()
        .map_err(|_| mlua::Error::RecursiveMutCallback)?;
    let (buf, spans, reply) = &mut *buffers;
    let outcome = match fill(buf, spans)? {
        Err(text) if raise => return Err(ScriptError::redis(text.to_vec())),
        Err(text) => return err_table(lua, text),
        Ok(()) => {
            let argv = crate::table::args::Args::new(buf, spans);
            reply.clear();
            match call_runner(&argv, run_resp(), reply) {
                None => Err(b"ERR redis.call is not available here".to_vec()),
                Some(Called::Refused(text)) => Err(text),
                Some(called) => {
                    if matches!(called, Called::Wrote) {
                        note_write();
                    }
                    let value = reply_to_lua(lua, reply)?;
                    if !matches!(reply.first(), Some(b'-') | Some(b'!')) {
                        Ok(value)
                    } else if !raise {
                        // redis.pcall returns the table as it is.
                        return Ok(value);
                    } else {
                        match &value {
                            Value::Table(t) => Err(t
                                .raw_get::<mlua::String>("err")
                                .map(|s| s.as_bytes().to_vec())
                                .unwrap_or_default()),
                            _ => Ok(value),
                        }
                    }
                }
            }
        }
    };
    match outcome {
        Ok(value) => Ok(value),
        Err(text) if raise => Err(ScriptError::command(text)),
        // Refused by the checks before the command: Redis marks these too as
        // counted already.
        Err(text) => checked_err_table(lua, &text),
    }
}

/// The error reply to a script the interpreter failed to run (out of memory …).
pub(crate) fn run_error(e: mlua::Error) -> Vec<u8> {
    format!("ERR Error running script: {e}").into_bytes()
}

/// The error reply to a script that does not compile.
fn compile_error(e: mlua::Error) -> Vec<u8> {
    let msg = match e {
        mlua::Error::SyntaxError { message, .. } => message,
        other => other.to_string(),
    };
    let mut reply = b"ERR Error compiling script (new function): ".to_vec();
    reply.extend_from_slice(msg.as_bytes());
    reply
}

/// The reply to an error that ended a script run as a coroutine: Redis's error table
/// (with the script's position) when the engine raised it, else the message, with the
/// position its `user_script:N:` prefix gives.
fn coroutine_error(lua: &Lua, e: &mlua::Error, sha: &[u8], version: Version, out: &mut Vec<u8>) {
    let t = match lua.create_table() {
        Ok(t) => t,
        Err(_) => return Encoder::new(out, version).error(b"ERR Error running script"),
    };
    let filled = (|| -> mlua::Result<()> {
        match ScriptError::find(e) {
            Some(ScriptError::Raised {
                err,
                source,
                line,
                passed_on,
            }) => {
                t.raw_set("err", lua.create_string(err)?)?;
                if *passed_on {
                    t.raw_set("ignore_error_stats_update", true)?;
                }
                if let Some(source) = source {
                    t.raw_set("source", lua.create_string(source)?)?;
                    t.raw_set("line", *line)?;
                }
            }
            Some(raised @ (ScriptError::Redis(m) | ScriptError::Command(m))) => {
                t.raw_set("err", lua.create_string(m)?)?;
                if raised.passed_on() {
                    t.raw_set("ignore_error_stats_update", true)?;
                }
                // Raised by a Rust function (the count hook's kill), without position:
                // where its traceback says.
                if let Some(at) = callback_traceback(e).and_then(raised_at) {
                    set_position(&t, at)?;
                }
            }
            Some(ScriptError::Message(m)) => string_error(lua, &t, m)?,
            None => {
                let text = match e {
                    mlua::Error::RuntimeError(m) => m.clone(),
                    other => other.to_string(),
                };
                // mlua adds the coroutine's traceback to its message: where the error
                // was raised, if its message does not say.
                let (text, traceback) =
                    text.split_once("\nstack traceback:").unwrap_or((&text, ""));
                string_error(lua, &t, text.as_bytes())?;
                if t.raw_get::<Value>("line")?.is_nil()
                    && let Some(at) = raised_at(traceback)
                {
                    set_position(&t, at)?;
                }
            }
        }
        Ok(())
    })();
    if filled.is_err() {
        return Encoder::new(out, version).error(b"ERR Error running script");
    }
    let _ = raised_error(&Value::Table(t), sha, version, out);
}

/// The traceback mlua took of the Lua stack where a Rust function raised `e`.
fn callback_traceback(e: &mlua::Error) -> Option<&str> {
    match e {
        mlua::Error::CallbackError { traceback, cause } => {
            callback_traceback(cause).or(Some(traceback.as_str()))
        }
        mlua::Error::WithContext { cause, .. } => callback_traceback(cause),
        _ => None,
    }
}

/// Where a coroutine's traceback says its error was raised, as Redis's error handler
/// reads it: the first frame past C functions (`error`) and goblin's own Lua (which
/// stands for Lua's C functions), if that is the script's (or a library's) code.
fn raised_at(traceback: &str) -> Option<(&'static str, i64)> {
    let internal = &INTERNAL[1..];
    let frame = traceback
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("[C]") && !l.starts_with(internal))?;
    position(frame.as_bytes())
}

/// The position `text` starts with (`user_script:7: …`, or a library's): its chunk
/// and line.
fn position(text: &[u8]) -> Option<(&'static str, i64)> {
    [CHUNK, library::CHUNK].into_iter().find_map(|chunk| {
        let rest = text
            .strip_prefix(&chunk.as_bytes()[1..])?
            .strip_prefix(b":")?;
        let end = rest.iter().position(|&b| b == b':')?;
        let line = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
        Some((chunk, line))
    })
}

/// Sets an error table's `source` and `line`.
fn set_position(t: &Table, (source, line): (&'static str, i64)) -> mlua::Result<()> {
    t.raw_set("source", source)?;
    t.raw_set("line", line)
}

/// An error raised as a string: `ERR <message>`, at the line its position names.
fn string_error(lua: &Lua, t: &Table, m: &[u8]) -> mlua::Result<()> {
    let mut text = b"ERR ".to_vec();
    text.extend_from_slice(m);
    t.raw_set("err", lua.create_string(&text)?)?;
    match position(m) {
        Some(at) => set_position(t, at),
        None => Ok(()),
    }
}

/// `redis.call`'s error in a script run as a coroutine: raised with the position of the
/// script's code that called it.
fn raise_positioned(lua: &Lua, (err, passed_on): (Value, Value)) -> mlua::Result<()> {
    let text = match err {
        Value::String(s) => s.as_bytes().to_vec(),
        _ => Vec::new(),
    };
    let level = libs::past_internal(lua, 1);
    let position = lua.inspect_stack(level).and_then(|d| {
        let source = d.source().source.map(|c| c.into_owned())?;
        Some((source, d.curr_line()))
    });
    let (source, line) = match position {
        Some((s, l)) => (Some(s), l),
        None => (None, 0),
    };
    Err(mlua::Error::external(ScriptError::Raised {
        err: text,
        source,
        line,
        passed_on: matches!(passed_on, Value::Boolean(true)),
    }))
}

/// The reply to an error a script raised (its error handler made it a table with the
/// script's position): `-<err> script: <sha>, on <source>:<line>.`
fn raised_error(
    value: &Value,
    sha: &[u8],
    version: Version,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    let Value::Table(t) = value else {
        // What the error handler did not see (Lua's own "not enough memory"), as
        // redis-server words it: `Error running script <name>, <message>`.
        let mut msg = b"ERR Error running script ".to_vec();
        msg.extend_from_slice(sha);
        msg.extend_from_slice(b", ");
        let text = match value {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Error(e) => e.to_string().into_bytes(),
            _ => b"execution failure".to_vec(),
        };
        msg.extend(text.iter().take(100));
        super::convert::note_error(&msg, false);
        Encoder::new(out, version).error_sanitized(&msg);
        return Ok(());
    };
    let err: Option<mlua::String> = match t.raw_get::<Value>("err")? {
        Value::String(s) => Some(s),
        _ => None,
    };
    let mut msg = err.map_or_else(Vec::new, |e| error_text(&e.as_bytes()));
    super::convert::note_error(&msg, super::convert::passed_on(t)?);
    let source: Value = t.raw_get("source")?;
    let line: Value = t.raw_get("line")?;
    if let (Value::String(source), Value::Number(_) | Value::Integer(_)) = (&source, &line) {
        let line = match line {
            Value::Number(n) => n as i64,
            Value::Integer(n) => n,
            _ => 0,
        };
        msg.extend_from_slice(b" script: ");
        msg.extend_from_slice(sha);
        msg.extend_from_slice(b", on ");
        msg.extend_from_slice(&source.as_bytes());
        msg.push(b':');
        msg.extend_from_slice(line.to_string().as_bytes());
        msg.push(b'.');
    }
    Encoder::new(out, version).error_sanitized(&msg);
    Ok(())
}

/// No argument to `redis.call`.
const NO_ARGUMENT: &[u8] = b"ERR Please specify at least one argument for this redis lib call";

/// One argument of `redis.call` appended to `buf`: a string, or a number written with
/// `%.17g` (an integer as it is).
fn push_arg(arg: &Value, buf: &mut Vec<u8>) -> Result<(), &'static [u8]> {
    match arg {
        Value::String(s) => buf.extend_from_slice(&s.as_bytes()),
        Value::Number(n) => {
            let mut num = [0u8; 32];
            buf.extend_from_slice(goblin_protocol::format_double(*n, &mut num));
        }
        Value::Integer(n) => {
            let mut num = itoa::Buffer::new();
            buf.extend_from_slice(num.format(*n).as_bytes());
        }
        _ => return Err(b"ERR Lua redis lib command arguments must be strings or integers"),
    }
    Ok(())
}

/// The arguments of `redis.call` packed by [`YIELDING`]: `n` of them in `args`.
fn command_args(n: usize, args: &Table) -> mlua::Result<Result<Vec<Vec<u8>>, &'static [u8]>> {
    if n == 0 {
        return Ok(Err(NO_ARGUMENT));
    }
    let mut argv = Vec::with_capacity(n.min(1024));
    for i in 1..=n {
        let mut bytes = Vec::new();
        if let Err(text) = push_arg(&args.raw_get(i)?, &mut bytes) {
            return Ok(Err(text));
        }
        argv.push(bytes);
    }
    Ok(Ok(argv))
}

/// The arguments of `redis.call` into `buf`, their spans into `spans` (both emptied
/// first: kept from call to call, they allocate once per run).
fn command_args_into(
    args: &MultiValue,
    buf: &mut Vec<u8>,
    spans: &mut Vec<std::ops::Range<usize>>,
) -> Result<(), &'static [u8]> {
    buf.clear();
    spans.clear();
    if args.is_empty() {
        return Err(NO_ARGUMENT);
    }
    for a in args {
        let start = buf.len();
        push_arg(a, buf)?;
        spans.push(start..buf.len());
    }
    Ok(())
}

/// Refills the array `t`, which holds `len` elements, with `items`.
fn refill(lua: &Lua, t: &Table, items: &[&[u8]], len: &mut usize) -> mlua::Result<()> {
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(item)?)?;
    }
    // (A script may have grown its KEYS: `#` counts what is there.)
    let was = (*len).max(t.raw_len());
    for i in items.len()..was {
        t.raw_set(i + 1, Value::Nil)?;
    }
    *len = items.len();
    Ok(())
}

/// A Lua array of strings.
fn array(lua: &Lua, items: &[&[u8]]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(item)?)?;
    }
    Ok(t)
}

/// `REDIS_VERSION_NUM`: 0x00MMmmpp.
fn redis_version_num() -> i64 {
    let mut parts = crate::runtime::server::REDIS_VERSION
        .split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    (a << 16) | (b << 8) | c
}

/// The script's position for an error: the first frame, from the function that raised
/// it, that is neither C nor the engine's own code.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    // Redis's handler looks at the function that raised the error, or at its caller
    // when that is a C function (`error`, `redis.call` …).
    let mut level = 1;
    if lua
        .inspect_stack(level)
        .is_some_and(|d| d.source().what == "C")
    {
        level += 1;
    }
    // (And past the engine's own Lua code, which Redis does not have.)
    let level = libs::past_internal(lua, level);
    let frame = lua.inspect_stack(level);
    let found = frame.map(|d| (d.source().source.map(|c| c.into_owned()), d.curr_line()));
    let t = match err {
        Value::Table(t) => t,
        Value::Error(e) if ScriptError::find(&e).is_some() => {
            let raised = match ScriptError::find(&e) {
                Some(s) => s.value(lua)?,
                None => Value::Nil,
            };
            return error_handler(lua, raised);
        }
        other => {
            let text = match &other {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Number(n) => {
                    let f: mlua::String = lua
                        .coerce_string(Value::Number(*n))?
                        .unwrap_or(lua.create_string("")?);
                    f.as_bytes().to_vec()
                }
                Value::Nil => b"nil".to_vec(),
                Value::Boolean(b) => b.to_string().into_bytes(),
                other => other.to_string()?.into_bytes(),
            };
            let t = lua.create_table()?;
            let mut msg = b"ERR ".to_vec();
            msg.extend_from_slice(&text);
            t.raw_set("err", lua.create_string(&msg)?)?;
            t
        }
    };
    if let Some((Some(source), line)) = found {
        t.raw_set("source", source)?;
        t.raw_set("line", line)?;
    }
    Ok(Value::Table(t))
}

/// `pcall`'s results as Redis 7.0's `luaRedisPcall` gives them: an error that is a
/// table with an `err` string is that string (and a Rust function's error is what Redis
/// would have raised, so the same).
///
/// Given a failed call's two results only (a call that succeeds may return thousands of
/// values, each a handle here: see `PACK_ABOVE`).
fn fix_pcall(lua: &Lua, (ok, raised): (Value, Value)) -> mlua::Result<(Value, Value)> {
    let raised = match raised {
        Value::Error(e) => match ScriptError::find(&e) {
            Some(s) => s.value(lua)?,
            None => Value::Error(e),
        },
        other => other,
    };
    let v = match &raised {
        Value::Table(t) => match t.raw_get::<Value>("err")? {
            Value::String(s) => Value::String(s),
            _ => raised,
        },
        _ => raised,
    };
    Ok((ok, v))
}

/// What Redis raises for an error as Lua holds it: a Redis error raised by a Rust
/// function (`redis.call`) is its `{err = …}` table; anything else is itself. What
/// `xpcall`'s handler is given.
fn raised_value(lua: &Lua, raised: Value) -> mlua::Result<Value> {
    match &raised {
        Value::Error(e) => match ScriptError::find(e) {
            Some(s) => s.value(lua),
            None => Ok(raised),
        },
        _ => Ok(raised),
    }
}

/// A `math.random` number between 0 and 1, as Redis draws it.
fn draw() -> f64 {
    use std::sync::atomic::Ordering;
    let mut r = 0;
    let _ = RAND48.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |mut state| {
        r = lrand48(&mut state);
        Some(state)
    });
    (r % 2_147_483_647) as f64 / 2_147_483_647.0
}

fn one(v: Value) -> MultiValue {
    let mut m = MultiValue::new();
    m.push_back(v);
    m
}

fn math_random(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let r = draw();
    let n = match args.len() {
        0 => r,
        1 => {
            let u = check_int(lua, &args, 0, "random")?;
            if u < 1 {
                return Err(Raise::Msg(
                    "bad argument #1 to 'random' (interval is empty)".into(),
                ));
            }
            (r * f64::from(u)).floor() + 1.0
        }
        2 => {
            let l = check_int(lua, &args, 0, "random")?;
            let u = check_int(lua, &args, 1, "random")?;
            if l > u {
                return Err(Raise::Msg(
                    "bad argument #2 to 'random' (interval is empty)".into(),
                ));
            }
            (r * (f64::from(u) - f64::from(l) + 1.0)).floor() + f64::from(l)
        }
        _ => return Err(Raise::Msg("wrong number of arguments".into())),
    };
    Ok(one(Value::Number(n)))
}

fn math_randomseed(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let seed = check_int(lua, &args, 0, "randomseed")?;
    RAND48.store(srand48(seed), Ordering::Relaxed);
    Ok(MultiValue::new())
}

/// `rawset`, refusing the read-only tables (the globals and the libraries), as Redis's
/// read-only tables refuse it.
fn rawset(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let Some(Value::Table(t)) = args.front() else {
        return Err(Raise::Msg(format!(
            "bad argument #1 to 'rawset' (table expected, got {})",
            libs::type_name(args.front())
        )));
    };
    if is_protected(lua, t) {
        return Err(Raise::Msg("Attempt to modify a readonly table".into()));
    }
    let key = args.get(1).cloned().unwrap_or(Value::Nil);
    if key.is_nil() {
        return Err(Raise::Msg("table index is nil".into()));
    }
    t.raw_set(key, args.get(2).cloned().unwrap_or(Value::Nil))?;
    Ok(one(Value::Table(t.clone())))
}

/// The read-only views scripts see ([`Engine::readonly_env`]), each with its table.
struct Views(Table);

/// Whether `t` is one of the read-only tables: the globals, or a view.
fn is_protected(lua: &Lua, t: &Table) -> bool {
    t.to_pointer() == lua.globals().to_pointer()
        || lua
            .app_data_ref::<Views>()
            .is_some_and(|v| !matches!(v.0.raw_get::<Value>(t), Ok(Value::Nil) | Err(_)))
}

/// The library tables scripts see read-only.
const READONLY_LIBS: &[&str] = &[
    "redis",
    "string",
    "math",
    "table",
    "coroutine",
    "cjson",
    "cmsgpack",
    "bit",
    "struct",
];

/// `redis.acl_check_cmd(command, …)`: whether the user who runs the script may run the
/// command with these arguments (`luaRedisAclCheckCmdPermissionsCommand`: the command
/// and subcommand looked up without checking their arity, then every selector of the
/// user, keys and channels too; nothing is logged).
fn acl_check_cmd(_lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let (mut buf, mut spans) = (Vec::new(), Vec::new());
    if let Err(e) = command_args_into(&args, &mut buf, &mut spans) {
        return Err(Raise::Err(String::from_utf8_lossy(e).into_owned()));
    }
    let argv = crate::table::args::Args::new(&buf, &spans);
    let spec = super::COMMANDS.get().and_then(|table| {
        let spec = table.lookup(argv.get(0))?;
        match spec.is_container() && argv.len() >= 2 {
            true => table.lookup_sub(spec, argv.get(1)),
            false => Some(spec),
        }
    });
    let Some(spec) = spec else {
        return Err(Raise::Err(
            "ERR Invalid command passed to redis.acl_check_cmd()".into(),
        ));
    };
    // (Unreadable, which nothing makes it: not allowed.)
    let allowed = CALLER.with(|c| match c.try_borrow().as_deref() {
        Ok(Some(caller)) => caller.user.check(spec, &argv).is_ok(),
        Ok(None) => true,
        Err(_) => false,
    });
    Ok(one(Value::Boolean(allowed)))
}

thread_local! {
    /// Who runs the script in progress on this thread, when a restricted user does
    /// (`redis.acl_check_cmd` checks its permissions).
    static CALLER: RefCell<Option<Arc<crate::acl::Caller>>> = const { RefCell::new(None) };
}

/// Runs `f` with `caller` as the thread's script caller ([`acl_check_cmd`] reads it),
/// the one before put back after.
pub fn with_caller<R>(caller: Option<&Arc<crate::acl::Caller>>, f: impl FnOnce() -> R) -> R {
    // (Outside a run there is none: an unrestricted user's run has nothing to set.)
    if caller.is_none() {
        return f();
    }
    struct Restore(Option<Arc<crate::acl::Caller>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            CALLER.with(|c| *c.borrow_mut() = before);
        }
    }
    let _restore = Restore(CALLER.with(|c| c.replace(caller.cloned())));
    f()
}

fn error_reply(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let (1, Some(Value::String(s))) = (args.len(), args.front()) else {
        return Ok(one(err_table(
            lua,
            b"ERR wrong number or type of arguments",
        )?));
    };
    let s = s.as_bytes();
    let text = s.strip_prefix(b"-").unwrap_or(&s);
    // luaPushErrorBuff: the first word is the code; without a space the code is ERR.
    let msg = match text.iter().position(|&b| b == b' ') {
        Some(_) => text.to_vec(),
        None => [b"ERR ".as_slice(), text].concat(),
    };
    let msg = super::convert::trim_newlines(&msg).to_vec();
    Ok(one(err_table(lua, &msg)?))
}

fn status_reply(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let (1, Some(Value::String(s))) = (args.len(), args.front()) else {
        return Ok(one(err_table(
            lua,
            b"ERR wrong number or type of arguments",
        )?));
    };
    let t = lua.create_table()?;
    t.raw_set("ok", s.clone())?;
    Ok(one(Value::Table(t)))
}

fn sha1hex(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    if args.len() != 1 {
        return Err(Raise::Err("ERR wrong number of arguments".into()));
    }
    let data = match args.front() {
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        Some(v @ (Value::Number(_) | Value::Integer(_))) => lua
            .coerce_string(v.clone())?
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let hex = crate::sha1::hex(&crate::sha1::Sha1::digest(&data));
    Ok(one(Value::String(lua.create_string(hex)?)))
}

fn log(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    if args.len() < 2 {
        return Err(Raise::Err(
            "ERR redis.log() requires two arguments or more.".into(),
        ));
    }
    let level = match args.front() {
        Some(Value::Number(n)) => *n as i64,
        Some(Value::Integer(n)) => *n,
        _ => {
            return Err(Raise::Err(
                "ERR First argument must be a number (log level).".into(),
            ));
        }
    };
    if !(0..=3).contains(&level) {
        return Err(Raise::Err("ERR Invalid debug level.".into()));
    }
    let mut line = Vec::new();
    for (i, a) in args.iter().skip(1).enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        if let Some(s) = lua.coerce_string(a.clone())? {
            line.extend_from_slice(&s.as_bytes());
        }
    }
    let text = String::from_utf8_lossy(&line);
    match level {
        0 => crate::log!(Debug, "{text}"),
        1 => crate::log!(Verbose, "{text}"),
        2 => crate::log!(Notice, "{text}"),
        _ => crate::log!(Warning, "{text}"),
    }
    Ok(MultiValue::new())
}

/// The first argument as C's `(int)lua_tonumber` reads it (0 for what is not a number).
fn number_arg(lua: &Lua, args: &MultiValue) -> i64 {
    let n = args
        .front()
        .and_then(|v| libs::to_number(lua, v).ok().flatten())
        .unwrap_or(0.0);
    i64::from(super::convert::lua_to_int(n) as i32)
}

fn setresp(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    if args.len() != 1 {
        return Err(Raise::Err(
            "ERR redis.setresp() requires one argument.".into(),
        ));
    }
    let resp = match number_arg(lua, &args) {
        2 => Version::Resp2,
        3 => Version::Resp3,
        _ => return Err(Raise::Err("ERR RESP version must be 2 or 3.".into())),
    };
    run_state(|st| st.resp = resp);
    Ok(MultiValue::new())
}

fn set_repl(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    if args.len() != 1 {
        return Err(Raise::Err(
            "ERR redis.set_repl() requires two arguments.".into(),
        ));
    }
    let flags = number_arg(lua, &args);
    if flags & !i64::from(REPL_ALL) != 0 {
        return Err(Raise::Err(
            "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                .into(),
        ));
    }
    run_state(|st| st.repl = flags as u8);
    Ok(MultiValue::new())
}

fn replicate_commands(_lua: &Lua, _args: MultiValue) -> Result<MultiValue, Raise> {
    Ok(one(Value::Boolean(true)))
}

fn breakpoint(_lua: &Lua, _args: MultiValue) -> Result<MultiValue, Raise> {
    Ok(one(Value::Boolean(false)))
}

fn debug(_lua: &Lua, _args: MultiValue) -> Result<MultiValue, Raise> {
    Ok(MultiValue::new())
}

fn missing_global(_lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let name = match args.get(1) {
        Some(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        Some(Value::Integer(n)) => n.to_string(),
        Some(Value::Number(n)) => {
            let mut buf = [0u8; 32];
            String::from_utf8_lossy(goblin_protocol::format_double(*n, &mut buf)).into_owned()
        }
        _ => {
            return Err(Raise::Msg(
                "Second argument to luaProtectedTableError must be a string or number".into(),
            ));
        }
    };
    Err(Raise::Msg(format!(
        "Script attempted to access nonexistent global variable '{name}'"
    )))
}

fn readonly(_lua: &Lua, _args: MultiValue) -> Result<MultiValue, Raise> {
    Err(Raise::Msg("Attempt to modify a readonly table".into()))
}
