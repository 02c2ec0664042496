//! The libraries Redis 7.0 gives a script besides Lua's own: `cjson`, `cmsgpack`, `bit`
//! and `struct`, written in Rust with Redis's behaviour (its `deps/lua/src/lua_*.c`).
//!
//! A library function is a [`LibFn`]: it takes its arguments as Lua values and returns
//! its results, or a [`Raise`]: the error Lua code sees. Rust callbacks cannot raise a
//! plain Lua value through mlua (their errors reach Lua as userdata), so each function
//! is installed behind a small Lua shim that raises the message as a string, as
//! `luaL_error` does from C — without a position, since the raising function is not Lua.

use mlua::{Function, Lua, MultiValue, Table, Value};

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

/// What a library function raises.
#[derive(Debug)]
pub enum Raise {
    /// An error message, raised as a Lua string (as C's `luaL_error` raises it).
    Msg(String),
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

/// The Lua side of every library function: the Rust function answers `true, results…`
/// or `false, message`, and the shim returns the results or raises the message.
const SHIM: &str = r#"
local check = function(ok, ...)
  if ok then return ... end
  error((...), 0)
end
return function(f)
  return function(...) return check(f(...)) end
end
"#;

/// Makes the global table `name` (or fills it if it exists) with `funcs`, each behind
/// the shim; returns the table, for the library's other fields.
pub fn install(lua: &Lua, name: &str, funcs: &[(&str, LibFn)]) -> mlua::Result<Table> {
    let shim: Function = lua.load(SHIM).set_name("=[C]").eval()?;
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
        let inner = lua.create_function(move |lua, args: MultiValue| {
            let mut out = MultiValue::new();
            match f(lua, args) {
                Ok(values) => {
                    out.push_back(Value::Boolean(true));
                    out.extend(values);
                }
                Err(Raise::Msg(msg)) => {
                    out.push_back(Value::Boolean(false));
                    out.push_back(Value::String(lua.create_string(&msg)?));
                }
                Err(Raise::Lua(e)) => return Err(e),
            }
            Ok(out)
        })?;
        let wrapped: Function = shim.call(inner)?;
        table.raw_set(fname, wrapped)?;
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
