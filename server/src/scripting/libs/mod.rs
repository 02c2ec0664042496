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
pub const INTERNAL: &str = "=[C]";

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
    /// `{err = text}` raised by `redis.call` in a script run as a coroutine, with the
    /// position of the script's code that called it.
    Raised {
        /// The error text.
        err: Vec<u8>,
        /// The chunk (`@user_script`), when known.
        source: Option<String>,
        /// The line.
        line: i32,
    },
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptError::Message(m) | ScriptError::Redis(m) => {
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
        let mut level = 1;
        while lua
            .inspect_stack(level)
            .is_some_and(|d| d.source().source.as_deref() == Some(INTERNAL))
        {
            level += 1;
        }
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

    /// The Lua value Redis would have raised: a string, or the `{err = …}` table.
    pub fn value(&self, lua: &Lua) -> mlua::Result<Value> {
        Ok(match self {
            ScriptError::Message(m) => Value::String(lua.create_string(m)?),
            ScriptError::Redis(m) | ScriptError::Raised { err: m, .. } => {
                let t = lua.create_table()?;
                t.raw_set("err", lua.create_string(m)?)?;
                Value::Table(t)
            }
        })
    }
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
            Err(Raise::Msg(msg)) => Err(ScriptError::message(lua, &msg)),
            Err(Raise::Err(msg)) => Err(ScriptError::redis(msg)),
            Err(Raise::Lua(e)) => Err(e),
        })?;
        table.raw_set(fname, func)?;
    }
    Ok(table)
}

/// Opens every library in `lua`'s globals.
pub fn open_all(lua: &Lua) -> mlua::Result<()> {
    cjson::open(lua)?;
    cmsgpack::open(lua)?;
    bit::open(lua)?;
    structlib::open(lua)?;
    Ok(())
}
