//! The `cjson` library of Redis's Lua (its `deps/lua/src/lua_cjson.c`).

use mlua::Lua;

/// Opens the library: the global table `cjson`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    super::install(lua, "cjson", &[])?;
    Ok(())
}
