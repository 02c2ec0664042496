//! The libraries Redis 7.0 gives a script besides Lua's own: `cjson`, `cmsgpack`, `bit`
//! and `struct`, written in Rust with Redis's behaviour (its `deps/lua/src/lua_*.c`).
//!
//! A library function is a [`LibFn`]: it takes its arguments as Lua values and returns
//! its results, or a [`Raise`]: the error Lua code sees. It is installed as a Rust (C
//! level) function, as Redis's are C functions — so that a script's `return f(x)` is not
//! a Lua tail call, and error positions stay the script's. Its errors reach Lua as a
//! [`ScriptError`]; the error handler and `pcall` turn them back into what Redis raises:
//! a message string (`luaL_error`'s, with the caller's position) or an `{err = …}` table.

use mlua::{Lua, MultiValue, Table, Value};

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

/// The chunk name of the engine's own Lua code (wrappers between a script and Rust
/// functions), whose frames error positions pass over.
pub const INTERNAL: &str = "=[goblin]";

/// What a library function raises.
#[derive(Debug)]
pub enum Raise {
    /// An error message, raised as a Lua string (as C's `luaL_error` raises it: the
    /// shim adds the caller's position).
    Msg(String),
    /// A Redis error, raised as the table `{err = "ERR …"}` (as `luaPushError` and
    /// `luaError` raise it): the text, code included.
    Err(String),
    /// An internal failure of the interpreter (out of memory …).
    Lua(mlua::Error),
}

impl From<mlua::Error> for Raise {
    fn from(e: mlua::Error) -> Self {
        Raise::Lua(e)
    }
}

/// A library function.
pub type LibFn = fn(&Lua, MultiValue) -> Result<MultiValue, Raise>;

/// An error a Rust function raises in Lua.
#[derive(Debug)]
pub enum ScriptError {
    /// Raised as a string, position included (`luaL_error`).
    Message(Vec<u8>),
    /// Raised as the table `{err = text}` (`luaPushError` + `luaError`).
    Redis(Vec<u8>),
    /// Raised by `redis.call`: the error of the command it called, or its refusal, as
    /// the table `{err = text, ignore_error_stats_update = true}` (counted already).
    Command(Vec<u8>),
    /// `{err = text}` raised by `redis.call` in a script run as a coroutine, with the
    /// position of the script's code that called it.
    Raised {
        /// The error text.
        err: Vec<u8>,
        /// The chunk (`@user_script`), when known.
        source: Option<String>,
        /// The line.
        line: i32,
        /// It is the error of a command the script called (counted already).
        passed_on: bool,
    },
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptError::Message(m) | ScriptError::Redis(m) | ScriptError::Command(m) => {
                f.write_str(&String::from_utf8_lossy(m))
            }
            ScriptError::Raised { err, .. } => f.write_str(&String::from_utf8_lossy(err)),
        }
    }
}

impl std::error::Error for ScriptError {}

impl ScriptError {
    /// The error inside a Rust error raised in Lua, if it is one.
    pub fn find(e: &mlua::Error) -> Option<&ScriptError> {
        match e {
            mlua::Error::CallbackError { cause, .. } => ScriptError::find(cause),
            mlua::Error::WithContext { cause, .. } => ScriptError::find(cause),
            mlua::Error::ExternalError(inner) => inner.downcast_ref::<ScriptError>(),
            _ => None,
        }
    }

    /// Raises `msg` as `luaL_error` does from a C function: prefixed with the position of
    /// the Lua code that called it (`user_script:3: `), if it was Lua code.
    pub fn message(lua: &Lua, msg: &str) -> mlua::Error {
        let mut text = Vec::new();
        // The engine's own Lua code between the script and the function is passed over.
        let level = past_internal(lua, 1);
        if let Some(caller) = lua.inspect_stack(level) {
            let line = caller.curr_line();
            if line > 0 {
                let src = caller.source();
                if let Some(short) = src.short_src {
                    text.extend_from_slice(short.as_bytes());
                    text.extend_from_slice(format!(":{line}: ").as_bytes());
                }
            }
        }
        text.extend_from_slice(msg.as_bytes());
        mlua::Error::external(ScriptError::Message(text))
    }

    /// Raises `{err = text}`.
    pub fn redis(text: impl Into<Vec<u8>>) -> mlua::Error {
        mlua::Error::external(ScriptError::Redis(text.into()))
    }

    /// Raises a command's error (or its refusal) from `redis.call`.
    pub fn command(text: impl Into<Vec<u8>>) -> mlua::Error {
        mlua::Error::external(ScriptError::Command(text.into()))
    }

    /// Whether it is the error of a command the script called.
    pub fn passed_on(&self) -> bool {
        matches!(
            self,
            ScriptError::Command(_)
                | ScriptError::Raised {
                    passed_on: true,
                    ..
                }
        )
    }

    /// The Lua value Redis would have raised: a string, or the `{err = …}` table.
    pub fn value(&self, lua: &Lua) -> mlua::Result<Value> {
        Ok(match self {
            ScriptError::Message(m) => Value::String(lua.create_string(m)?),
            ScriptError::Redis(m)
            | ScriptError::Command(m)
            | ScriptError::Raised { err: m, .. } => {
                let t = lua.create_table()?;
                t.raw_set("err", lua.create_string(m)?)?;
                if self.passed_on() {
                    t.raw_set("ignore_error_stats_update", true)?;
                }
                Value::Table(t)
            }
        })
    }
}

/// The first stack level from `level` on that is not the engine's own Lua code (nor a
/// tail call it made, which Lua shows as a level of its own).
pub fn past_internal(lua: &Lua, mut level: usize) -> usize {
    let mut after_internal = false;
    while let Some(d) = lua.inspect_stack(level) {
        let source = d.source().source.map(|s| s.into_owned());
        let internal = source.as_deref() == Some(INTERNAL);
        if internal || (after_internal && source.as_deref() == Some("=(tail call)")) {
            after_internal = true;
            level += 1;
        } else {
            break;
        }
    }
    level
}

/// A `bad argument #n to 'f' (…)` message with the name Lua's `luaL_argerror` gives
/// the function: the one its caller used (`'?'` when called by `pcall`, the local's
/// name through an alias), or `calling 'f' on bad self` for a method's self.
fn call_site_name(lua: &Lua, msg: String) -> String {
    let Some(rest) = msg.strip_prefix("bad argument #") else {
        return msg;
    };
    let Some((n, rest)) = rest.split_once(" to '") else {
        return msg;
    };
    let Some((_, extra)) = rest.split_once("' (") else {
        return msg;
    };
    let Ok(mut n) = n.parse::<i64>() else {
        return msg;
    };
    // The function as its caller saw it: past the engine's own wrappers.
    let level = past_internal(lua, 1) - 1;
    let Some(frame) = lua.inspect_stack(level) else {
        return msg;
    };
    let names = frame.names();
    // Through a wrapper whose name Lua lost (a tail call), the library's own name; none
    // (`?`) when a C function (`pcall`) called it, as Lua says.
    let own = rest.split_once("' (").map(|(own, _)| own.to_string());
    let lost = frame.source().what == "tail";
    let by_c = lua
        .inspect_stack(level + 1)
        .is_some_and(|d| d.source().what == "C");
    let name = names
        .name
        .map(|n| n.into_owned())
        .filter(|n| !n.is_empty())
        .or(if level > 0 && (lost || !by_c) {
            own
        } else {
            None
        });
    let extra = extra.strip_suffix(')').unwrap_or(extra);
    if names.name_what == Some("method") {
        n -= 1;
        if n == 0 {
            return format!(
                "calling '{}' on bad self ({extra})",
                name.as_deref().unwrap_or("?")
            );
        }
    }
    format!(
        "bad argument #{n} to '{}' ({extra})",
        name.as_deref().unwrap_or("?")
    )
}

/// Lua's name of a value's type, as `luaL_typename` gives it; `None` is an absent
/// argument ("no value").
pub fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(Value::LightUserData(_) | Value::UserData(_)) => "userdata",
        Some(_) => "userdata",
    }
}

/// `luaL_argerror`: argument `narg` (1-based) of `func` is bad.
pub(crate) fn arg_error(func: &str, narg: usize, extra: &str) -> Raise {
    Raise::Msg(format!("bad argument #{narg} to '{func}' ({extra})"))
}

/// `luaL_typerror`: argument `narg` (1-based) of `func` is not a `expected`.
pub(crate) fn type_error(func: &str, narg: usize, v: Option<&Value>, expected: &str) -> Raise {
    arg_error(
        func,
        narg,
        &format!("{expected} expected, got {}", type_name(v)),
    )
}

/// `lua_tonumber` (with `lua_isnumber`): a number, or a string Lua reads as one.
pub(crate) fn to_number(lua: &Lua, v: &Value) -> mlua::Result<Option<f64>> {
    Ok(match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(v.clone())?,
        _ => None,
    })
}

/// `luaL_checknumber` of argument `i` (0-based) of `func`.
pub(crate) fn check_number(
    lua: &Lua,
    args: &MultiValue,
    i: usize,
    func: &str,
) -> Result<f64, Raise> {
    let v = args.get(i);
    match v {
        Some(v) => to_number(lua, v)?,
        None => None,
    }
    .ok_or_else(|| type_error(func, i + 1, v, "number"))
}

/// Makes the global table `name` (or fills it if it exists) with `funcs`; returns the
/// table, for the library's other fields.
pub fn install(lua: &Lua, name: &str, funcs: &[(&str, LibFn)]) -> mlua::Result<Table> {
    let globals = lua.globals();
    let table = match globals.raw_get::<Value>(name)? {
        Value::Table(t) => t,
        _ => {
            let t = lua.create_table()?;
            globals.raw_set(name, &t)?;
            t
        }
    };
    for &(fname, f) in funcs {
        let func = lua.create_function(move |lua, args: MultiValue| match f(lua, args) {
            Ok(values) => Ok(values),
            Err(Raise::Msg(msg)) => Err(ScriptError::message(lua, &call_site_name(lua, msg))),
            Err(Raise::Err(msg)) => Err(ScriptError::redis(msg)),
            Err(Raise::Lua(e)) => Err(e),
        })?;
        table.raw_set(fname, guarded(lua, func)?)?;
    }
    Ok(table)
}

/// Most arguments a Rust function given them as they are takes (see [`guarded`]).
pub const MAX_ARGS: usize = 4096;

/// `f`, a Rust function taking any number of arguments, behind a wrapper of the
/// engine's (whose frame error positions and `bad argument` names pass over) that
/// refuses more than [`MAX_ARGS`]: mlua makes a handle of each argument, each a slot of
/// its reference stack, which holds 8,000 at most and aborts the process when full —
/// and a script can pass about as many (`cmsgpack.pack(unpack(t))`). (redis-server's C
/// functions take them all; `redis.call` does too, packed: see `engine::CALL_ARGS`.)
pub fn guarded(lua: &Lua, f: mlua::Function) -> mlua::Result<mlua::Function> {
    // (One wrapper's code for all, made once per interpreter: a closure each.)
    let wrap = match lua.named_registry_value::<Option<mlua::Function>>(GUARD_KEY)? {
        Some(wrap) => wrap,
        None => {
            let code = GUARD.replace("__MAX_ARGS__", &MAX_ARGS.to_string());
            let select: mlua::Function = lua.globals().raw_get("select")?;
            let error: mlua::Function = lua.globals().raw_get("error")?;
            let wrap: mlua::Function = lua.load(code).set_name(INTERNAL).call((select, error))?;
            lua.set_named_registry_value(GUARD_KEY, &wrap)?;
            wrap
        }
    };
    wrap.call(f)
}

/// Where [`guarded`] keeps its wrapper maker.
const GUARD_KEY: &str = "goblin.guard";

/// The wrapper of [`guarded`]: given `f`, the function in front of it.
const GUARD: &str = r#"
local select, error = ...
return function(f)
  return function(...)
    if select('#', ...) <= __MAX_ARGS__ then return f(...) end
    error('too many arguments', 2)
  end
end
"#;

/// Opens every library in `lua`'s globals.
pub fn open_all(lua: &Lua) -> mlua::Result<()> {
    cjson::open(lua)?;
    cmsgpack::open(lua)?;
    bit::open(lua)?;
    structlib::open(lua)?;
    Ok(())
}

/// For the libraries' unit tests: a Lua state with the libraries open, whose `pcall`
/// gives errors as Redis raises them, without the chunk position (the tests compare
/// messages with redis-server's, less the position).
#[cfg(test)]
pub(crate) mod testing {
    use mlua::{Function, Lua, MultiValue, Value};

    use super::ScriptError;

    /// `[string "…"]:N: ` removed from the start of `m`.
    pub fn strip_position(m: &str) -> String {
        if let Some(rest) = m.strip_prefix("[string \"")
            && let Some(at) = rest.find("\"]:")
        {
            let after = &rest[at + 3..];
            if let Some(colon) = after.find(": ")
                && after[..colon].chars().all(|c| c.is_ascii_digit())
            {
                return after[colon + 2..].to_string();
            }
        }
        m.to_string()
    }

    /// The message of an error a chunk raised.
    pub fn message(e: &mlua::Error) -> String {
        match ScriptError::find(e) {
            Some(ScriptError::Message(m)) => strip_position(&String::from_utf8_lossy(m)),
            Some(other) => other.to_string(),
            None => match e {
                mlua::Error::RuntimeError(m) => strip_position(m),
                other => other.to_string(),
            },
        }
    }

    /// The state.
    pub fn lua() -> Lua {
        let lua = Lua::new();
        super::open_all(&lua).expect("open");
        let fix = lua
            .create_function(|lua, mut r: MultiValue| {
                if matches!(r.front(), Some(Value::Boolean(false))) {
                    let v = match r.get(1) {
                        Some(Value::Error(e)) => match ScriptError::find(e) {
                            Some(s) => s.value(lua)?,
                            None => Value::String(lua.create_string(e.to_string())?),
                        },
                        Some(other) => other.clone(),
                        None => Value::Nil,
                    };
                    let v = match v {
                        Value::String(s) => {
                            Value::String(lua.create_string(strip_position(&s.to_string_lossy()))?)
                        }
                        other => other,
                    };
                    r[1] = v;
                }
                Ok(r)
            })
            .expect("fix");
        let pcall: Function = lua
            .load("local pcall, fix = pcall, ... return function(...) return fix(pcall(...)) end")
            .call(fix)
            .expect("pcall");
        lua.globals().raw_set("pcall", pcall).expect("set");
        lua
    }
}
