//! The `cmsgpack` library of Redis's Lua (its `deps/lua/src/lua_cmsgpack.c`).

use mlua::Lua;

/// Opens the library: the global table `cmsgpack`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    super::install(lua, "cmsgpack", &[])?;
    Ok(())
}
