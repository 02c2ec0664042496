//! What `lua_cjson.c` and `lua_cmsgpack.c` take from Lua's C API, for their Rust
//! versions: argument checks whose errors read as lauxlib's (`luaL_argerror`,
//! `luaL_checklstring`, `luaL_checkinteger`, `luaL_checkoption`), and library functions
//! that are closures (a `cjson.new()` table has its own configuration), raise their
//! errors as strings with the caller's position (as `luaL_error` does: `user_script:1: …`)
//! and may return more values than a callback can hold references to.
//!
//! A function is a Rust callback behind a small Lua function (the shim): the shim packs
//! the arguments into a table — so that numbers reach Rust exactly (mlua turns a number
//! below 2^-52 in magnitude, and -0, into the integer 0) — and turns the callback's
//! answer into results or an error raised at the caller's level.

use mlua::{Function, Lua, Table, Value};

/// An error a library function raises.
pub enum Fail {
    /// As `luaL_error` raises it: the message after the caller's position (`user_script:1: `),
    /// when the caller is a Lua function.
    Where(String),
    /// As the Lua core raises it from inside a C function (`table index is nil`): the
    /// message alone.
    Plain(String),
    /// An internal failure of the interpreter.
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

/// What a library function returns.
pub enum Ret {
    /// At most three values.
    Values(Vec<Value>),
    /// The first `n` elements of a table, for many values (each held value is a reference
    /// in mlua, and their number is bounded).
    Table(Table, usize),
}

/// The shim. The callback answers `kind, a, b, c`: 0 to 3 values (kind 0 to 3), an error
/// raised at the caller's level (-1) or without a position (-2), or a table and a count
/// (4). Three values of the table are never passed as `unpack`'s arguments at once, so
/// that `unpack` can return as many values as a C function can (its own three arguments
/// count against the same stack limit).
const SHIM: &str = r#"
local error, select, unpack = error, select, unpack
return function(f)
  return function(...)
    local k, a, b, c = f({n = select('#', ...), ...})
    if k == 1 then return a end
    if k == -1 then error(a, 2) end
    if k == 3 then return a, b, c end
    if k == 2 then return a, b end
    if k == 0 then return end
    if k == -2 then error(a, 0) end
    if b <= 2 then return unpack(a, 1, b) end
    return a[1], a[2], unpack(a, 3, b)
  end
end
"#;

/// The registry name under which the compiled shim is kept.
const SHIM_KEY: &str = "goblin.libs.shim";

/// The arguments of a call.
pub struct Args {
    /// The arguments, at 1..=n.
    table: Table,
    /// How many were passed.
    n: usize,
    /// The function's own name, for error messages when Lua cannot tell it.
    name: &'static str,
}

impl Args {
    /// How many arguments were passed (`lua_gettop`).
    pub fn len(&self) -> usize {
        self.n
    }

    /// Argument `i` (from 1), or `None` when fewer were passed. Numbers are exact.
    pub fn get(&self, i: usize) -> mlua::Result<Option<Value>> {
        if i == 0 || i > self.n {
            return Ok(None);
        }
        exact(&self.table, i).map(Some)
    }

    /// Argument `i`, `nil` when absent.
    pub fn value(&self, i: usize) -> mlua::Result<Value> {
        Ok(self.get(i)?.unwrap_or(Value::Nil))
    }

    /// Whether argument `i` is absent or nil (`lua_isnoneornil`).
    pub fn is_none_or_nil(&self, i: usize) -> mlua::Result<bool> {
        Ok(matches!(self.get(i)?, None | Some(Value::Nil)))
    }

    /// `luaL_argerror`: `bad argument #narg to 'name' (extra)`, with the name by which
    /// the caller called the function.
    pub fn arg_error(&self, lua: &Lua, narg: i64, extra: &str) -> Fail {
        let mut narg = narg;
        let (name, what) = caller_name(lua, self.name);
        if what == Some("method") {
            narg -= 1;
            if narg == 0 {
                return Fail::Where(format!(
                    "calling '{}' on bad self ({extra})",
                    name.as_deref().unwrap_or("?")
                ));
            }
        }
        Fail::Where(format!(
            "bad argument #{narg} to '{}' ({extra})",
            name.as_deref().unwrap_or("?")
        ))
    }

    /// `luaL_argcheck`.
    pub fn arg_check(&self, lua: &Lua, cond: bool, narg: i64, extra: &str) -> Result<(), Fail> {
        if cond {
            Ok(())
        } else {
            Err(self.arg_error(lua, narg, extra))
        }
    }

    /// `luaL_typerror`: `tname expected, got <type of argument i>`.
    pub fn type_error(&self, lua: &Lua, i: usize, tname: &str) -> Fail {
        let got = match self.get(i) {
            Ok(v) => type_name(v.as_ref()),
            Err(e) => return Fail::Lua(e),
        };
        self.arg_error(lua, i as i64, &format!("{tname} expected, got {got}"))
    }

    /// `luaL_checklstring`: a string, or a number as Lua writes it.
    pub fn check_string(&self, lua: &Lua, i: usize) -> Result<mlua::String, Fail> {
        match self.get(i)? {
            Some(Value::String(s)) => Ok(s),
            Some(v @ (Value::Integer(_) | Value::Number(_))) => match lua.coerce_string(v)? {
                Some(s) => Ok(s),
                None => Err(self.type_error(lua, i, "string")),
            },
            _ => Err(self.type_error(lua, i, "string")),
        }
    }

    /// `luaL_checkinteger`: a number, or a string Lua reads as one, truncated.
    pub fn check_integer(&self, lua: &Lua, i: usize) -> Result<i64, Fail> {
        let v = self.value(i)?;
        if matches!(
            v,
            Value::Table(_) | Value::Function(_) | Value::Boolean(_) | Value::Nil
        ) {
            return Err(self.type_error(lua, i, "number"));
        }
        match lua.coerce_number(v)? {
            Some(n) => Ok(c_to_i64(n)),
            None => Err(self.type_error(lua, i, "number")),
        }
    }

    /// `luaL_optinteger`.
    pub fn opt_integer(&self, lua: &Lua, i: usize, default: i64) -> Result<i64, Fail> {
        if self.is_none_or_nil(i)? {
            Ok(default)
        } else {
            self.check_integer(lua, i)
        }
    }

    /// `luaL_checkoption` without a default: the index of the argument in `options`.
    pub fn check_option(&self, lua: &Lua, i: usize, options: &[&str]) -> Result<usize, Fail> {
        let name = self.check_string(lua, i)?;
        let bytes = name.as_bytes();
        match options.iter().position(|o| o.as_bytes() == &bytes[..]) {
            Some(at) => Ok(at),
            None => Err(self.arg_error(
                lua,
                i as i64,
                &format!("invalid option '{}'", String::from_utf8_lossy(&bytes)),
            )),
        }
    }
}

/// The value at `t[i]`, numbers exactly (mlua's conversion of a number to a [`Value`]
/// turns tiny ones and -0 into the integer 0; fetching an `f64` does not).
pub fn exact(t: &Table, i: usize) -> mlua::Result<Value> {
    match t.raw_get::<Value>(i)? {
        Value::Integer(0) => Ok(Value::Number(t.raw_get::<f64>(i)?)),
        v => Ok(v),
    }
}

pub use crate::scripting::convert::lua_to_int as c_to_i64;

/// A number as C converts a double to a 32-bit `int` on x86-64.
pub fn c_to_i32(n: f64) -> i32 {
    if n.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&n) {
        i32::MIN
    } else {
        n as i32
    }
}

pub use crate::scripting::libs::type_name;

/// The name by which the calling Lua code called the running library function (level 1
/// is the shim), and how (`method`, `field`, `local`, …), as `luaL_argerror` finds it.
/// When the shim was tail-called, Lua has forgotten the call; a C function is never
/// tail-called, so Redis knows the name: the function's own name is the best guess.
fn caller_name(lua: &Lua, own: &'static str) -> (Option<String>, Option<&'static str>) {
    let Some(shim) = lua.inspect_stack(1) else {
        return (None, None);
    };
    let names = shim.names();
    if let Some(name) = names.name {
        return (Some(name.into_owned()), names.name_what);
    }
    let tail = lua
        .inspect_stack(2)
        .is_some_and(|d| d.source().what == "tail");
    if tail {
        (Some(own.to_string()), Some("field"))
    } else {
        (None, None)
    }
}

/// A library function: `f` behind the shim, `name` for error messages.
pub fn function<F>(lua: &Lua, name: &'static str, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, &Args) -> Result<Ret, Fail> + 'static,
{
    let shim: Function = match lua.named_registry_value::<Option<Function>>(SHIM_KEY)? {
        Some(shim) => shim,
        None => {
            let shim: Function = lua
                .load(SHIM)
                .set_name(crate::scripting::libs::INTERNAL)
                .eval()?;
            lua.set_named_registry_value(SHIM_KEY, &shim)?;
            shim
        }
    };
    let inner = lua.create_function(move |lua, table: Table| {
        let n = table.raw_get::<Option<i64>>("n")?.unwrap_or(0).max(0) as usize;
        let args = Args { table, n, name };
        let mut out = mlua::MultiValue::new();
        match f(lua, &args) {
            Ok(Ret::Values(values)) => {
                out.push_back(Value::Integer(values.len() as i64));
                out.extend(values);
            }
            Ok(Ret::Table(t, n)) => {
                out.push_back(Value::Integer(4));
                out.push_back(Value::Table(t));
                out.push_back(Value::Integer(n as i64));
            }
            Err(Fail::Where(msg)) => {
                out.push_back(Value::Integer(-1));
                out.push_back(Value::String(lua.create_string(&msg)?));
            }
            Err(Fail::Plain(msg)) => {
                out.push_back(Value::Integer(-2));
                out.push_back(Value::String(lua.create_string(&msg)?));
            }
            Err(Fail::Lua(e)) => return Err(e),
        }
        Ok(out)
    })?;
    shim.call(inner)
}

/// One value, as a [`Ret`].
pub fn one(v: Value) -> Ret {
    Ret::Values(vec![v])
}

/// The Lua helper behind [`pairs_of`].
const PAIRS: &str = r#"
local next = next
return function(t)
  local kv, n = {}, 0
  for k, v in next, t do
    kv[n + 1] = k
    kv[n + 2] = v
    n = n + 2
  end
  return kv, n
end
"#;

/// The registry name under which the compiled [`PAIRS`] is kept.
const PAIRS_KEY: &str = "goblin.libs.pairs";

/// The keys and values of `t` in `lua_next`'s order, as one table `k1, v1, k2, v2, …` and
/// its length: a C library's walk of a table with `lua_next`, without holding a reference
/// per entry, and with numbers exact (read them with [`exact`]). mlua's own pairs iterator
/// gives a key back to `lua_next` after converting it, which fails for keys it converts
/// inexactly.
pub fn pairs_of(lua: &Lua, t: &Table) -> mlua::Result<(Table, usize)> {
    let f: Function = match lua.named_registry_value::<Option<Function>>(PAIRS_KEY)? {
        Some(f) => f,
        None => {
            let f: Function = lua
                .load(PAIRS)
                .set_name(crate::scripting::libs::INTERNAL)
                .eval()?;
            lua.set_named_registry_value(PAIRS_KEY, &f)?;
            f
        }
    };
    let (kv, n): (Table, i64) = f.call(t)?;
    Ok((kv, n.max(0) as usize))
}

/// Lua values kept out of Rust's hands: a walk of nested tables holds its innermost
/// levels' values as Rust references and parks the outer ones here (mlua's references
/// live on one Lua stack of at most 8000 slots, which deep nesting would exhaust).
pub struct Parking {
    /// The parked values, by level (created on first use).
    table: Option<Table>,
}

impl Parking {
    /// How many levels a walk holds as references before parking the outer ones.
    pub const HELD: usize = 32;

    /// Nothing parked.
    pub fn new() -> Parking {
        Parking { table: None }
    }

    /// Parks `v` as level `level`.
    pub fn park(&mut self, lua: &Lua, level: usize, v: Value) -> mlua::Result<()> {
        let t = match &self.table {
            Some(t) => t,
            None => self.table.insert(lua.create_table()?),
        };
        t.raw_set(level + 1, v)
    }

    /// Takes back level `level` (nil if nothing was parked there).
    pub fn unpark(&mut self, level: usize) -> mlua::Result<Value> {
        match &self.table {
            Some(t) => {
                let v: Value = t.raw_get(level + 1)?;
                t.raw_set(level + 1, Value::Nil)?;
                Ok(v)
            }
            None => Ok(Value::Nil),
        }
    }

    /// Takes back the table parked as level `level`.
    pub fn unpark_table(&mut self, level: usize) -> mlua::Result<Table> {
        match self.unpark(level)? {
            Value::Table(t) => Ok(t),
            _ => Err(mlua::Error::runtime("no table parked")),
        }
    }
}
