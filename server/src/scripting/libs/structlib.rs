//! The `struct` library of Redis's Lua (its `deps/lua/src/lua_struct.c`).

use mlua::Lua;

/// Opens the library: the global table `struct`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    super::install(lua, "struct", &[])?;
    Ok(())
}
